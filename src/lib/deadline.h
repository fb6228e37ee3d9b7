/*
 * deadline.h: a process-wide limit on the deadlines of weir's waits on
 * descriptors (remote/wait.c's, lib/tlsio.c's).  A program may set a
 * function that says, each time a wait looks at its deadline, the latest
 * instant any wait may last (clock_mono_ms; UINT64_MAX: no limit): a kept
 * session's deliverer left alone by weir-send sets one (remote/wait.h).
 * Without one, deadlines are as given.
 * Trusts: nothing.  Config keys: none.
 */
#ifndef WEIR_DEADLINE_H
#define WEIR_DEADLINE_H

#include <stdint.h>

void deadline_limit_set(uint64_t (*limit)(void));
/* deadline, or the limit if that is sooner. */
uint64_t deadline_limit(uint64_t deadline);

#endif
