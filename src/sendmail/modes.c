/*
 * modes.c: sendmail's modes other than sending and listing: -bs (an SMTP
 * session on stdin/stdout, by weir-smtpd), -q (weir flush), -bi and
 * newaliases (nothing to do).  -bv is in sendmail.c, next to the address
 * handling it shares with sending.
 *
 * Trusts: the invoking user, as sendmail does; weir-smtpd and weir flush
 * do their own checks.  Config keys: none (the programs run read theirs;
 * -C reaches them as $WEIR_CONFIG, set by main.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/libexec.h"
#include "sendmail/sendmail.h"

int
sm_smtp_run(const struct sm_opts *o)
{
	char *path = libexec_path("weir-smtpd");
	char *argv[] = { "weir-smtpd", "-s", NULL };

	(void)o;
	/* A local user's session (-s: may relay, may talk early, as with
	 * sendmail itself), logged and recorded as from 127.0.0.1. */
	if (setenv("TCPREMOTEIP", "127.0.0.1", 1) < 0) {
		sm_say("-bs: setenv: %s", strerror(errno));
		free(path);
		return EX_TEMPFAIL;
	}
	execv(path, argv);
	sm_say("-bs: cannot run %s: %s", path, strerror(errno));
	free(path);
	return EX_TEMPFAIL;
}

int
sm_flush_run(const struct sm_opts *o)
{
	char self[PATH_MAX], *slash, *path;
	char *argv[] = { "weir", "flush", NULL };
	ssize_t n;

	(void)o;
	if (geteuid() != 0) {
		printf("%s: -q: weir-send runs the queue by itself; as root, -q makes it "
		    "try every deferred message now (weir flush)\n", log_progname());
		return fflush(stdout) == 0 ? 0 : EX_IOERR;
	}
	/* weir is installed next to sendmail (SBINDIR), as in the build tree. */
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0 || (self[n] = '\0', slash = strrchr(self, '/')) == NULL) {
		sm_say("-q: cannot find my own path: %s", n < 0 ? strerror(errno) : "no folder");
		return EX_TEMPFAIL;
	}
	*slash = '\0';
	path = xasprintf("%s/weir", self);
	execv(path, argv);
	sm_say("-q: cannot run %s: %s", path, strerror(errno));
	free(path);
	return EX_TEMPFAIL;
}

int
sm_newaliases_run(void)
{
	printf("%s: nothing to do: weir keeps no alias database to rebuild\n",
	    log_progname());
	return fflush(stdout) == 0 ? 0 : EX_IOERR;
}
