/*
 * pidlock.h: an exclusive lock (flock) on a file that names its holder:
 * whoever takes it writes its pid into the file, and whoever is refused
 * reads that pid back for its error message.  The lock lasts as long as
 * any descriptor of the open file: the taker's, and its children's when
 * it is inherited across fork and exec.
 *
 * Trusts: the pid in the file only as a number to print.  Config keys:
 * none.
 */
#ifndef WEIR_LIB_PIDLOCK_H
#define WEIR_LIB_PIDLOCK_H

#include "lib/io.h"

/* Take the lock on path (created 0600 if missing), without waiting.
 * inherit: leave the descriptor open across exec (no O_CLOEXEC).  The
 * descriptor, or -1 with errno: EWOULDBLOCK when someone else holds it,
 * *holder then being the pid written in the file (0 if none). */
int pidlock_take(const char *path, int inherit, long *holder) MUST_CHECK;

#endif
