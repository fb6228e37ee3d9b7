/*
 * unixlisten.h: a daemon's listening Unix socket.  A socket file left by
 * a dead daemon is removed; one a live daemon answers on is not (the
 * caller is a second copy: it stops).  The socket gets the given mode;
 * the folder it is in decides who can reach it.
 *
 * Trusts: nothing.  Config keys: none (the caller names the path).
 */
#ifndef WEIR_LIB_UNIXLISTEN_H
#define WEIR_LIB_UNIXLISTEN_H

#include <sys/types.h>

/* Listen on path (mode, backlog; flags: SOCK_NONBLOCK or 0, and the
 * socket is always close-on-exec).  who names the daemon in the message
 * when another one is serving path.  Exits 111 with a message on any
 * failure: a daemon that cannot listen has nothing to do. */
int unix_listen(const char *path, mode_t mode, int backlog, int flags, const char *who);

#endif
