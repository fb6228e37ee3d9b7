/*
 * cleanup.h: removing what crashes leave behind (src/mail/QUEUE.md,
 * "Cleanup"): messages in S2 or S3 whose mess/ file is older than 36
 * hours lose intd/N and then mess/S/N; pid/ files, and intd/ files whose
 * mess/ file is gone, older than 36 hours are removed.  36 hours is longer than any weir-queue may live
 * (inject_timeout is at most 35 hours), so nothing live is touched.
 * weir's own sched/S/N notes go, at any age, once their mess/S/N is gone.
 */
#ifndef WEIR_CLEANUP_H
#define WEIR_CLEANUP_H

#include <time.h>

#include "mail/queue.h"

#define CLEANUP_AGE (36 * 3600)

/* One pass over the queue.  Returns the number of files removed. */
unsigned long cleanup_pass(struct queue *q, time_t now);

#endif
