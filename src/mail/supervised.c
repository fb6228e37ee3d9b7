/*
 * supervised.c: see supervised.h.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lib/decimal.h"
#include "lib/log.h"
#include "mail/supervised.h"

void
supervised_name_self(void)
{
	char pid[24];

	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	if (setenv(SUPERVISED_ENV, pid, 1) < 0)
		fatal(111, "setenv %s", SUPERVISED_ENV);
}

void
supervised_arm(void)
{
	const char *v = getenv(SUPERVISED_ENV);
	uint64_t pid;

	if (v == NULL)
		return;
	if (dec_parse(v, strlen(v), INT_MAX, &pid) < 0 || pid <= 1)
		fatalx(111, "$%s = \"%.20s\" is not the pid of weir run", SUPERVISED_ENV, v);
	if (unsetenv(SUPERVISED_ENV) < 0)
		fatal(111, "unsetenv %s", SUPERVISED_ENV);
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
		fatal(111, "prctl PR_SET_PDEATHSIG");
	if (getppid() != (pid_t)pid) {
		log_info("weir run (pid %ld) is gone: exiting", (long)pid);
		exit(0);
	}
}
