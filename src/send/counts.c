/*
 * counts.c: weir-send's counters per upstream (struct upq: messages and
 * recipients queued, delivered, deferred and bounced since weir-send
 * started, and the sessions open; mail/gateproto.h's enum gp_count),
 * counted where it happens (counts_queued by sched.c, counts_outcome by
 * batch.c and complete.c) and told to weir-gate in a COUNTS line per
 * upstream (gatelink.c) at most once a second after one changed, never
 * waiting: weir-metrics reads them from the gate.  An upstream's line
 * goes again only if it differs from the last the gate took on this
 * connection; a new connection (maybe a new gate) is told them all.
 *
 * Trusts: nothing from outside.  Config keys: none.
 */
#include <string.h>

#include "send/sendint.h"

#define COUNTS_EVERY_MS	1000

static void
counts_tell(struct sched *s)
{
	struct upq *u;
	size_t i, k;
	int any;

	for (i = 0; i < s->nups && s->gate_up; i++) {
		u = &s->ups[i];
		if (u->name == NULL)
			continue;	/* messages without an upstream */
		u->counts[GP_C_SESSIONS] = sess_count_open(s, i);
		for (k = 0, any = 0; k < GP_NCOUNTS; k++) {
			if (u->counts[k] > GP_COUNT_MAX)
				u->counts[k] = GP_COUNT_MAX;	/* never reached: 2^53 */
			any |= u->counts[k] != 0;
		}
		if (u->told_ok ? memcmp(u->told, u->counts, sizeof u->told) == 0 : !any)
			continue;
		if (gatelink_counts(s, u->name, u->counts) < 0)
			return;
		memcpy(u->told, u->counts, sizeof u->told);
		u->told_ok = 1;
	}
}

static void
on_counts(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)ev; (void)t;
	s->counts_timer = NULL;
	counts_tell(s);
}

void
counts_due(struct sched *s)
{
	if (s->counts_timer == NULL)
		s->counts_timer = evloop_timer_at(s->ev, clock_mono_ms() + COUNTS_EVERY_MS,
		    on_counts, s);
}

void
counts_connected(struct sched *s)
{
	size_t i;

	for (i = 0; i < s->nups; i++)
		s->ups[i].told_ok = 0;
	counts_due(s);
}

void
counts_queued(struct sched *s, const struct msg *m, size_t nrcpt)
{
	if (m->up == NO_UPSTREAM)
		return;
	s->ups[m->up].counts[GP_C_QUEUED_MSGS]++;
	s->ups[m->up].counts[GP_C_QUEUED_RCPTS] += nrcpt;
	counts_due(s);
}

void
counts_outcome(struct sched *s, struct msg *m, size_t up, size_t delivered,
    size_t deferred, size_t bounced)
{
	const size_t n[3] = { delivered, deferred, bounced };
	static const enum gp_count c[3] = { GP_C_DELIVERED_MSGS, GP_C_DEFERRED_MSGS,
		GP_C_BOUNCED_MSGS };
	/* A message is delivered or bounced once, whatever its batches;
	 * deferred at each attempt that put one off. */
	const int first[3] = { !m->counted_delivered, 1, !m->counted_bounced };
	size_t k;

	for (k = 0; k < 3; k++)
		if (n[k] > 0) {
			if (first[k])
				s->ups[up].counts[c[k]]++;
			s->ups[up].counts[c[k] + 1] += n[k];	/* its _RCPTS */
			counts_due(s);
		}
	if (delivered > 0)
		m->counted_delivered = 1;
	if (bounced > 0)
		m->counted_bounced = 1;
}
