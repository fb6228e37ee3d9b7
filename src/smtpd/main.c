/*
 * weir-smtpd: SMTP for the LAN's hosts, into weir's queue.
 *
 *   weir-smtpd [-c FILE]        one session on fd 0 / fd 1 (inetd,
 *                               tcpserver, systemd socket with Accept=yes)
 *   weir-smtpd [-c FILE] -l     listen on listen.address, one process per
 *                               connection (what `weir run` starts)
 *   weir-smtpd [-c FILE] -s     one session of a local user (sendmail -bs):
 *                               may relay, may send before the greeting
 *
 * Exit codes: 0 the session ended with QUIT (or the listener was stopped),
 * 1 it ended otherwise, 2 bad usage or configuration, 111 temporary
 * trouble (cannot bind).
 *
 * Config: loaded the injectors' lenient way (config.h): a file with errors
 * elsewhere is one warning in the log and mail is still taken (the
 * listen section then at its defaults: loopback only); only a file that
 * leaves the queue's place unknown is refused (exit 2).
 *
 * Trusts: its invoker.  Config keys: hostname and the listen section (see
 * session.h and listener.h), smtpd_user (started as root, weir-smtpd
 * becomes it: with -l once its addresses are bound, so that port 25 can
 * be had and every connection runs unprivileged; without -l at start);
 * weir-queue reads its own.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/usage.h"
#include "lib/privdrop.h"
#include "mail/config.h"
#include "mail/supervised.h"
#include "smtpd/listener.h"
#include "smtpd/session.h"

static const char help[] = "usage: weir-smtpd [-c FILE] [-l | -s]\n"
    "  without -l: one SMTP session on fd 0 and fd 1 (inetd, systemd Accept=yes)\n"
    "  -l: listen on the listen section's addresses\n"
    "  -s: one session of a local user (sendmail -bs): trusted to relay\n";

static int
usage(void)
{
	fputs(help, stderr);
	return 2;
}

/* Under inetd or systemd (StandardError=inherit) fd 2 may be the client's
 * socket: log lines must not go to the client. */
static void
stderr_not_client(void)
{
	struct stat s0, s2;
	int fd;

	if (fstat(0, &s0) < 0 || fstat(2, &s2) < 0)
		return;
	if (s0.st_dev != s2.st_dev || s0.st_ino != s2.st_ino)
		return;
	if ((fd = open("/dev/null", O_WRONLY)) < 0)
		fatal(111, "open /dev/null");
	if (dup2(fd, 2) < 0)
		fatal(111, "dup2");
	if (fd != 2)
		close(fd);
}

/* The one place weir-smtpd gives up root (lib/privdrop.h). */
static void
drop(void *arg)
{
	const struct weir_config *cfg = arg;

	privdrop_daemon("smtpd_user", cfg->smtpd_user, 2);
	supervised_arm();	/* after the drop, which would clear it */
}

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct smtpd_conf conf;
	struct buf err = BUF_INIT, warn = BUF_INIT;
	const char *cfile = NULL;
	char addr[64];
	int ch, listen_mode = 0, local = 0, rc;

	log_init("weir-smtpd");
	stderr_not_client();
	if ((rc = usage_std(argc, argv, "weir-smtpd", help)) >= 0)
		return rc;
	while ((ch = getopt(argc, argv, "c:ls")) != -1) {
		switch (ch) {
		case 'c': cfile = optarg; break;
		case 'l': listen_mode = 1; break;
		case 's': local = 1; break;
		default: return usage();
		}
	}
	if (optind != argc || (local && listen_mode))
		return usage();
	rc = config_load_inject(&cfg, cfile, &warn, &err);
	if (rc < 0)
		fatalx(2, "config: %s", strtok(err.s, "\n"));
	if (rc > 0) {
		config_inject_warning(&warn, &err);
		log_warnx("%s", buf_cstr(&err));
		if (setenv("WEIR_CONFIG_WARNED", "1", 1) < 0)	/* for weir-queue */
			fatal(111, "setenv");
	}
	if (!listen_mode)
		drop(&cfg);
	if (smtpd_conf_init(&conf, &cfg, &err) < 0)
		fatalx(2, "listen: %s", err.s);
	conf.local = local;
	/* A parent that ignored SIGCHLD (swaks --pipe does) would make
	 * weir-queue's exit status unknowable. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR || signal(SIGCHLD, SIG_DFL) == SIG_ERR)
		fatal(111, "signal");
	if (listen_mode)
		rc = smtpd_listen(&conf, &cfg.listen, drop, &cfg);
	else {
		smtpd_client_addr(0, addr, sizeof addr);
		rc = smtpd_session(&conf, 0, 1, addr);
	}
	smtpd_conf_free(&conf);
	config_free(&cfg);
	buf_free(&err);
	return rc;
}
