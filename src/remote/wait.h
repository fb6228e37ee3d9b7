/*
 * wait.h: the one way weir-remote waits: poll(2) on one descriptor until
 * it is ready or a deadline on the monotonic clock passes.  Used by the
 * connection (conn.c) and the secret command (secret.c); TLS waits in
 * lib/tlsio.c, shared with weir-smtpd.
 * Trusts: nothing.  Config keys: none.
 */
#ifndef WEIR_WAIT_H
#define WEIR_WAIT_H

#include <poll.h>
#include <stdint.h>

enum wait_status {
	WAIT_READY = 0,
	WAIT_ERROR = -1,	/* poll failed: errno */
	WAIT_TIMEOUT = -2,
};

/* events: POLLIN or POLLOUT. */
enum wait_status wait_fd(int fd, short events, uint64_t deadline_ms);
/* The same for n descriptors: WAIT_READY once one is (see revents). */
enum wait_status wait_fds(struct pollfd *p, nfds_t n, uint64_t deadline_ms);

#endif
