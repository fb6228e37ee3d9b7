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

	for (;;) {
		uint64_t now = clock_mono_ms();
		int r;

		if (now >= deadline_ms)
			return WAIT_TIMEOUT;
		r = poll(&p, 1, (int)(deadline_ms - now > 60000 ? 60000 : deadline_ms - now));
		if (r > 0)
			return WAIT_READY;
		if (r < 0 && errno != EINTR)
			return WAIT_ERROR;
	}
}
