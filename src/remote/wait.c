/*
 * wait.c: see wait.h.  Waits in slices of at most a minute so that the
 * millisecond count always fits poll's int; EINTR just goes round again
 * (and takes the deadline of a deliverer left alone into account).
 * Trusts: nothing.  Config keys: none.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "lib/deadline.h"
#include "lib/evloop.h"
#include "remote/wait.h"

static volatile sig_atomic_t orphaned;
static uint64_t orphan_deadline = UINT64_MAX;

static void
on_orphan(int signo)
{
	(void)signo;
	orphaned = 1;	/* the wait under way ends in EINTR and looks again */
}

/* lib/deadline.h's limit: the message's deadline, once alone. */
static uint64_t
orphan_limit(void)
{
	return orphaned ? orphan_deadline : UINT64_MAX;
}

int
wait_orphan_setup(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_orphan;	/* no SA_RESTART: poll returns EINTR */
	sigemptyset(&sa.sa_mask);
	deadline_limit_set(orphan_limit);	/* TLS's waits too (lib/tlsio.c) */
	return sigaction(SIGTERM, &sa, NULL);
}

void
wait_orphan_until(uint64_t deadline_ms)
{
	orphan_deadline = deadline_ms;
}

int
wait_orphaned(void)
{
	return orphaned;
}

int
wait_too_late(void)
{
	return orphaned && clock_mono_ms() >= orphan_deadline;
}

enum wait_status
wait_fd(int fd, short events, uint64_t deadline_ms)
{
	struct pollfd p = { fd, events, 0 };

	return wait_fds(&p, 1, deadline_ms);
}

enum wait_status
wait_fds(struct pollfd *p, nfds_t n, uint64_t deadline_ms)
{
	for (;;) {
		uint64_t now = clock_mono_ms();
		int r;

		deadline_ms = deadline_limit(deadline_ms);
		if (now >= deadline_ms)
			return WAIT_TIMEOUT;
		r = poll(p, n, (int)(deadline_ms - now > 60000 ? 60000 : deadline_ms - now));
		if (r > 0)
			return WAIT_READY;
		if (r < 0 && errno != EINTR)
			return WAIT_ERROR;
	}
}
