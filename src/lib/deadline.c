/*
 * deadline.c: see deadline.h.
 */
#include <stddef.h>

#include "lib/deadline.h"

static uint64_t (*limit_fn)(void);

void
deadline_limit_set(uint64_t (*limit)(void))
{
	limit_fn = limit;
}

uint64_t
deadline_limit(uint64_t deadline)
{
	uint64_t l = limit_fn ? limit_fn() : UINT64_MAX;

	return l < deadline ? l : deadline;
}
