/*
 * weir-remote: qmail-remote(8) compatible SMTP client to the upstream
 * relay; see remote.h for the interface and smtp.h for the protocol.
 * main() only makes the process safe to hold a secret (no core dumps,
 * not ptrace-able by other users, SIGPIPE ignored) and calls
 * remote_run().
 *
 * Config: weir.conf (-c FILE, $WEIR_CONFIG, SYSCONFDIR/weir.conf).
 */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "remote/remote.h"

int
main(int argc, char **argv)
{
	struct rlimit none = { 0, 0 };

	log_init("weir-remote");
	alloc_set_exit_status(111);
	if (setrlimit(RLIMIT_CORE, &none) < 0)
		fatal(111, "setrlimit RLIMIT_CORE");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fatal(111, "prctl PR_SET_DUMPABLE");
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fatal(111, "signal SIGPIPE");
	return remote_run(argc, argv);
}
