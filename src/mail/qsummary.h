/*
 * qsummary.h: what a reader who may not read the queue is told of it by
 * weir-showq's "summary" request (mail/showq.h): the messages as the
 * listing counts them (mail/qlist.h's qlist_count: info/ and todo/,
 * by names and modification times only), the oldest queue time, and
 * weir-send's kept sessions (sched/sessions, mail/schedfile.h).
 * weir-metrics' queue families and its status page's sessions come from
 * it, so that they need no right to the queue (weir-metrics(8)).
 *
 * The answer is one JSON object, at most QSUMMARY_MAX bytes:
 *
 *   {"messages":N,"not_yet_preprocessed":N,"oldest_queue_time":T,
 *    "sessions":[{"upstream":NAME,"pid":N,"since":T,"messages":N},...]}
 *
 * T an ISO 8601 UTC time ("2026-11-26T06:43:32Z"), null for none (an
 * empty queue); "sessions" null when sched/sessions cannot be read
 * (weir-send has not run).  Read back strictly (lib/jsonparse.h): a
 * member missing or of another kind refuses the whole answer.
 *
 * Trusts: the queue's names, and sched/sessions as far as
 * schedfile_parse_session takes a line (a line it does not take is left
 * out); weir-showq's answer as far as qsummary_parse does.  Config keys:
 * queue_dir, queue_split, showq_socket (qsummary_get).
 */
#ifndef WEIR_QSUMMARY_H
#define WEIR_QSUMMARY_H

#include <stddef.h>
#include <time.h>

#include "lib/buf.h"
#include "mail/config.h"
#include "mail/queue.h"
#include "mail/schedfile.h"

#define QSUMMARY_MAX		(1 << 20)	/* bytes of an answer */
#define QSUMMARY_SESSIONS_MAX	4096		/* sessions listed */

struct qsummary {
	unsigned long long messages, todo;
	time_t oldest;			/* 0: none */
	int have_sessions;		/* sched/sessions was read */
	struct schedsession *sessions;
	size_t nsessions;
};

/* From the queue q itself.  0 ok; -1 its folders cannot be read (why). */
int qsummary_read(const struct queue *q, struct qsummary *s, struct buf *why);
/* The JSON answer of s, with its newline. */
void qsummary_json(const struct qsummary *s, struct buf *out);
/* An answer back into s.  0 ok; -1 not one (why). */
int qsummary_parse(const char *text, size_t len, struct qsummary *s, struct buf *why);
/* The summary as this process may have it: from queue_dir when it may
 * read the queue, else asked of weir-showq at showq_socket, all of it
 * within timeout_ms.  *from: what was read (the folder or the socket).
 * 0 ok; -1 with why. */
int qsummary_get(const struct weir_config *cfg, int timeout_ms, struct qsummary *s,
    const char **from, struct buf *why);
/* One more session (at most QSUMMARY_SESSIONS_MAX kept). */
void qsummary_add_session(struct qsummary *s, const struct schedsession *ss);
void qsummary_free(struct qsummary *s);

#endif
