/*
 * wait.c: see wait.h.  Waits in slices of at most a minute so that the
 * millisecond count always fits poll's int; EINTR just goes round again.
 * Trusts: nothing.  Config keys: none.
 */
#include <errno.h>
#include <poll.h>

#include "lib/evloop.h"
#include "remote/wait.h"

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

		if (now >= deadline_ms)
			return WAIT_TIMEOUT;
		r = poll(p, n, (int)(deadline_ms - now > 60000 ? 60000 : deadline_ms - now));
		if (r > 0)
			return WAIT_READY;
		if (r < 0 && errno != EINTR)
			return WAIT_ERROR;
	}
}
