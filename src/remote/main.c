/*
 * weir-remote: qmail-remote(8) compatible SMTP client to the upstream
 * relay; see remote.h for the interface and smtp.h for the protocol.
 * main() only makes the process safe to hold a secret (no core dumps,
 * not ptrace-able by other users, SIGPIPE ignored) and calls
 * remote_run().
 *
 * Set-user-id (the package installs it weir-remote:weir-send 4750, so
 * that it can read the secret its caller weir-send cannot): the kernel
 * sets AT_SECURE, and then main() first empties the environment but for
 * TZ, with a fixed PATH for secret_command (OpenSSL, Cyrus SASL and the
 * C library read variables of their own); config.c ignores $WEIR_CONFIG
 * and confparse.c reads only a root-owned config (also for -c).  The real
 * uid stays the caller's, so that weir-send may still signal it; with -n
 * remote_run() asks again for the PR_SET_PDEATHSIG that weir-send set and
 * the set-id exec cleared.
 *
 * Config: weir.conf (-c FILE, $WEIR_CONFIG, SYSCONFDIR/weir.conf).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "remote/remote.h"

#define SAFE_PATH "/usr/local/bin:/usr/bin:/bin"

/* Set-id: nothing of the caller's environment but the time zone (the C
 * library itself refuses a TZ file outside its folder under AT_SECURE). */
static void
scrub_environment(void)
{
	const char *tz = getenv("TZ");
	char *keep = tz ? xstrdup(tz) : NULL;

	if (clearenv() != 0)
		fatalx(111, "clearenv failed");
	if ((keep && setenv("TZ", keep, 1) < 0) || setenv("PATH", SAFE_PATH, 1) < 0)
		fatal(111, "setenv");
	free(keep);
}

int
main(int argc, char **argv)
{
	struct rlimit none = { 0, 0 };
	pid_t parent = getppid();	/* first: remote_run() compares */
	int rc;

	log_init("weir-remote");
	if ((rc = usage_std(argc, argv, "weir-remote", "usage: weir-remote [-c FILE] "
	    "[-u UPSTREAM] [-n [-r FD]] [-q ID] host sender recipient...\n"
	    "       weir-remote [-c FILE] -T -u UPSTREAM\n"
	    "       weir-remote [-c FILE] -S [-f FD] -u UPSTREAM host\n"
	    "       weir-remote [-c FILE] -K -u UPSTREAM\n")) >= 0)
		return rc;
	if (config_untrusted_env())
		scrub_environment();
	alloc_set_exit_status(111);
	if (setrlimit(RLIMIT_CORE, &none) < 0)
		fatal(111, "setrlimit RLIMIT_CORE");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fatal(111, "prctl PR_SET_DUMPABLE");
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fatal(111, "signal SIGPIPE");
	return remote_run(argc, argv, parent);
}
