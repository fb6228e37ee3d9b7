/*
 * sched.h: weir-send's scheduler: one process, one event loop.  It
 * preprocesses todo/ when the trigger is pulled (and every 25 minutes),
 * keeps every preprocessed message in memory with the time of its next
 * attempt, runs the deliverer (weir-remote) for batches of a message's
 * not-done recipients with bounded concurrency per upstream, and applies
 * the results: D marks, bounce notes, retries, bounces, elimination.
 */
#ifndef WEIR_SCHED_H
#define WEIR_SCHED_H

#include "mail/config.h"
#include "mail/queue.h"

struct sched_opts {
	struct queue *q;
	const struct weir_config *cfg;
	const char *config_file;	/* re-read on SIGHUP; NULL: the default chain */
	const char *remote_program;	/* weir-remote, or a qmail-remote */
	const char *qq_program;		/* weir-queue, for bounces */
	unsigned concurrency;		/* deliveries at once, per upstream */
	long long lifetime;		/* queue_lifetime, seconds */
	long long delay_warning;	/* delay_warning, seconds; 0: none */
	unsigned retry_skip;		/* qmail's chanskip: 20 for remote */
	long long remote_timeout;	/* kill a deliverer after this, seconds */
	int sessions;			/* remote_program is weir-remote: kept sessions (-S) */
};

/* Run until SIGTERM (crash-only: exits at once; the queue is always
 * consistent).  SIGHUP re-reads the config file (reload.c).  Returns an
 * exit status. */
int sched_run(const struct sched_opts *o);

/* qmail's retry schedule: birth + (floor(sqrt(age)) + skip)^2, where age
 * is now - birth. */
long long sched_next_retry(long long birth, long long now, unsigned skip);

#endif
