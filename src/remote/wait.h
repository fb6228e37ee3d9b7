/*
 * wait.h: the one way weir-remote waits: poll(2) on one descriptor until
 * it is ready or a deadline on the monotonic clock passes (or, left
 * alone, the deadline of the message in hand: below).  Used by the
 * connection (conn.c) and the secret command (secret.c); TLS waits in
 * lib/tlsio.c, shared with weir-smtpd, which keeps the same limit
 * (lib/deadline.h).
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

/*
 * Left alone: a kept session's deliverer whose weir-send died finishes
 * its message only while weir-gate still counts it (mail/sessproto.h).
 * wait_orphan_setup() catches weir-send's death signal (SIGTERM, its
 * PR_SET_PDEATHSIG for sessions); from then on no wait lasts past the
 * deadline wait_orphan_until() set (clock_mono_ms; none: no cap), and
 * wait_too_late() says when nothing more may be sent.
 */
int wait_orphan_setup(void);	/* 0, or -1 (errno) */
void wait_orphan_until(uint64_t deadline_ms);
int wait_orphaned(void);
int wait_too_late(void);

/* events: POLLIN or POLLOUT. */
enum wait_status wait_fd(int fd, short events, uint64_t deadline_ms);
/* The same for n descriptors: WAIT_READY once one is (see revents). */
enum wait_status wait_fds(struct pollfd *p, nfds_t n, uint64_t deadline_ms);

#endif
