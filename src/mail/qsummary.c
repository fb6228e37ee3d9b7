/*
 * qsummary.c: see qsummary.h: the summary made of the queue, and as JSON
 * (weir-showq's side; reading it back is qsummaryget.c's, with json-c).
 * Trusts: see qsummary.h.  Config keys: none (the queue is opened by the
 * caller).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/json.h"
#include "lib/timefmt.h"
#include "mail/qlist.h"
#include "mail/qsummary.h"

void
qsummary_add_session(struct qsummary *s, const struct schedsession *ss)
{
	if (s->nsessions == QSUMMARY_SESSIONS_MAX)
		return;
	s->sessions = xrealloc(s->sessions, (s->nsessions + 1) * sizeof *s->sessions);
	s->sessions[s->nsessions++] = *ss;
}

int
qsummary_read(const struct queue *q, struct qsummary *s, struct buf *why)
{
	struct qlist_count c;
	struct schedsession ss;
	struct buf b = BUF_INIT;
	const char *p, *nl;

	memset(s, 0, sizeof *s);
	if (qlist_count(q, &c, why) < 0)
		return -1;
	s->messages = c.messages;
	s->todo = c.todo;
	s->oldest = c.oldest;
	/* weir-send's hint (QUEUE.md): missing until it has run. */
	if (read_file_at(q->dfd, SCHED_SESSIONS, &b, QSUMMARY_MAX) == 0) {
		s->have_sessions = 1;
		for (p = b.s; p && (nl = memchr(p, '\n', b.len - (size_t)(p - b.s))); p = nl + 1)
			if (schedfile_parse_session(p, (size_t)(nl - p) + 1, &ss) == 0)
				qsummary_add_session(s, &ss);
	}
	buf_free(&b);
	return 0;
}

void
qsummary_json(const struct qsummary *s, struct buf *o)
{
	char when[32];
	size_t i;

	buf_printf(o, "{\"messages\":%llu,\"not_yet_preprocessed\":%llu,\"oldest_queue_time\":",
	    s->messages, s->todo);
	if (s->oldest) {
		date_iso(when, sizeof when, s->oldest);
		buf_printf(o, "\"%s\"", when);
	} else
		buf_adds(o, "null");
	buf_adds(o, ",\"sessions\":");
	if (s->have_sessions) {
		buf_addc(o, '[');
		for (i = 0; i < s->nsessions; i++) {
			buf_adds(o, i ? ",{\"upstream\":" : "{\"upstream\":");
			json_cstr(o, s->sessions[i].upstream);
			date_iso(when, sizeof when, (time_t)s->sessions[i].since);
			buf_printf(o, ",\"pid\":%lld,\"since\":\"%s\",\"messages\":%lld}",
			    s->sessions[i].pid, when, s->sessions[i].messages);
		}
		buf_addc(o, ']');
	} else
		buf_adds(o, "null");
	buf_adds(o, "}\n");
}

void
qsummary_free(struct qsummary *s)
{
	free(s->sessions);
	s->sessions = NULL;
	s->nsessions = 0;
}
