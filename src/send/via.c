/*
 * via.c: where a batch goes (weir.conf's recipient_domains, fallback
 * and fallback_when; mail/route.h), beside stage 2 (sendint.h).
 *
 *   Groups.  With recipient_domains in weir.conf, each recipient has a
 *   primary upstream of its own (config_upstream_route); a pass over a
 *   message's not-done recipients goes group by group, the groups in
 *   the order of the upstream sections, each batch holding recipients of
 *   one group only: one transaction per upstream (and per max_recipients).
 *   The message waits in its group's FIFO (m->up), and one batch of it is
 *   out at a time, so a recipient is never in flight at two upstreams.
 *   Without recipient_domains every recipient's primary is the sender's
 *   upstream, as before.
 *
 *   Fallbacks.  A batch is asked first of its primary; while a later
 *   upstream of the primary's route (config_route) is left, the request
 *   carries the primary's fallback_when (<unless>), and weir-gate answers
 *   LATER when one holds (it judges, at its clock, by route_judge): the
 *   batch then goes to the next upstream of the route, asked there as that
 *   upstream's (its cap, windows, sessions, credentials and sender
 *   rewriting: weir-remote -u names it).  The last upstream of the route
 *   is asked without conditions: the batch waits there.
 *
 *   Asked of the primary again.  A batch passed over waits at the
 *   fallback's windows only until its primary takes mail again: when a
 *   batch asked of the primary is accepted there (a return, below), every
 *   batch of that primary still waiting at a fallback is recalled (its
 *   request CANCELled: via_recall) and asked of the primary again; and
 *   when the gate's LATER said asking the primary again makes sense (the
 *   next probe, a suspension's end, a free slot), one of them is asked
 *   of it again then, if none of its batches is there to try it (the
 *   scout), so a primary whose mail all went to its fallbacks is still
 *   tried, as Postfix tries its primary at every attempt.  A batch the
 *   primary still passes over goes back to the fallback (LATER).
 *
 *   Waiting on a route.  A message whose batch found no upstream of its
 *   route taking mail (not reached, or refused us: not its recipients'
 *   own trouble) waits for its retry on that route (m->wait_up, its
 *   primary).  While some do, one of them is tried again every probe
 *   interval of the primary (route_probe_ms: its unreachable threshold,
 *   1 s to a minute) unless a batch of that primary is out already; and
 *   when any upstream of the route accepts a message, every message
 *   waiting on it is tried at once.  A message put off for its own
 *   recipients' reasons keeps its retry time.
 *
 *   The operator's upstream.  `weir requeue --via NAME` (control.c)
 *   sends a message's next pass through NAME: each batch is asked there
 *   as NAME's mail, without its route's conditions, and none of it counts
 *   as a switch or a return of its primary.
 *
 *   Switches and returns.  The first batch of a primary that goes to
 *   another upstream than the one before logs "upstream P: its mail goes
 *   through F from now on (why)" and counts a switch (GP_C_SWITCHES, in
 *   P's COUNTS); the first batch asked of P after that which P accepts
 *   logs "upstream P: its mail goes through it again" and counts a return
 *   (GP_C_RETURNS).  Batches asked of P before the switch and delivered
 *   after it are no return.
 *
 * Trusts: nothing read here.  Config keys: recipient_domains, fallback,
 * fallback_when (through cfg).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/outcome.h"
#include "send/rcptfile.h"
#include "send/sendint.h"

int
via_split(const struct sched *s)
{
	size_t i;

	for (i = 0; i < s->cfg->nupstreams; i++)
		if (s->cfg->upstreams[i].recipient_domains.n > 0)
			return 1;
	return 0;
}

/* The primary of addr (n bytes) in m: a config index or NO_UPSTREAM. */
static size_t
primary_of(const struct sched *s, const struct msg *m, const char *addr, size_t n)
{
	char *a = xstrndup(addr, n);
	const struct weir_upstream *u = config_upstream_route(s->cfg, m->sender, a);

	free(a);
	return u ? (size_t)(u - s->cfg->upstreams) : NO_UPSTREAM;
}

size_t *
via_groups(const struct sched *s, struct msg *m, const struct rcptfile *f, size_t *group)
{
	size_t *prim = xcalloc(f->n + 1, sizeof *prim), i, g = NO_UPSTREAM;
	int found = 0;

	for (i = 0; i < f->n; i++) {
		if (f->v[i].done)
			continue;
		prim[i] = primary_of(s, m, f->v[i].addr, f->v[i].len);
		if (prim[i] < m->pass_up || (prim[i] == m->pass_up && f->v[i].off < m->pass_off))
			continue;	/* passed over in this pass */
		if (!found || prim[i] < g)
			g = prim[i];
		found = 1;
	}
	if (!found) {
		free(prim);
		return NULL;
	}
	if (g != m->pass_up) {
		m->pass_up = g;
		m->pass_off = 0;
	}
	*group = g;
	return prim;
}

/* The route of j's primary into r (room for every upstream): how many. */
static size_t
route_of(const struct sched *s, const struct job *j, const struct weir_upstream **r)
{
	if (j->primary >= s->cfg->nupstreams)
		return 0;
	return config_route(s->cfg, &s->cfg->upstreams[j->primary], r, s->cfg->nupstreams);
}

/* Is there an upstream after j's in its route? */
static int
has_next(const struct sched *s, const struct job *j)
{
	const struct weir_upstream **r = xcalloc(s->cfg->nupstreams + 1, sizeof *r);
	size_t n = route_of(s, j, r);

	free(r);
	return j->hop + 1 < n;
}

const struct route_when *
via_unless(const struct sched *s, const struct job *j)
{
	const struct weir_upstream *p;

	if (j->forced || j->primary >= s->cfg->nupstreams || !has_next(s, j))
		return NULL;
	p = &s->cfg->upstreams[j->primary];
	return route_when_any(&p->when) ? &p->when : NULL;
}

void
via_adopt(const struct sched *s, struct job *j)
{
	const struct weir_upstream **r = xcalloc(s->cfg->nupstreams + 1, sizeof *r);
	size_t n, k;

	j->primary = j->m->up;
	j->hop = 0;
	n = route_of(s, j, r);
	for (k = 0; k < n && (j->up >= s->cfg->nupstreams || r[k] != &s->cfg->upstreams[j->up]);
	    k++)
		;
	if (k < n)
		j->hop = k;
	else
		j->primary = j->up;	/* not of its message's route (a reload) */
	free(r);
}

int
via_placed(const struct sched *s, const struct job *j)
{
	const struct weir_upstream **r;
	size_t n;
	int ok;

	if (j->primary != j->m->up)
		return 0;	/* a reload sent the message elsewhere */
	if (j->forced)
		return j->up == j->m->via_up && j->up < s->cfg->nupstreams;
	if (j->primary >= s->cfg->nupstreams)
		return j->up == j->primary;
	r = xcalloc(s->cfg->nupstreams + 1, sizeof *r);
	n = route_of(s, j, r);
	ok = j->hop < n && j->up < s->cfg->nupstreams && r[j->hop] == &s->cfg->upstreams[j->up];
	free(r);
	return ok;
}

/* Is a batch of primary at the primary itself (asked, granted or
 * running there)? */
static int
at_primary(const struct sched *s, size_t primary)
{
	const struct job *j;

	for (j = s->jobs; j; j = j->next)
		if (j->primary == primary && j->up == primary)
			return 1;
	return 0;
}

void
via_recall(struct sched *s, struct job *j)
{
	if (j->recall)
		return;
	if (gatelink_cancel(s, j->tag) < 0) {
		via_recalled(s, j);	/* nothing asked: straight to its primary */
		return;
	}
	j->recall = 1;	/* the answer to the CANCEL decides (batch.c) */
}

/* Recall primary's batches waiting at a fallback (all, or the one asked
 * first): how many.  (A batch the operator sent elsewhere, forced, is
 * at hop 0: never recalled.) */
static unsigned
recall(struct sched *s, size_t primary, int all)
{
	struct job *j, *first = NULL;
	unsigned n = 0;

	for (j = s->jobs; j; j = j->next) {
		if (j->primary != primary || j->hop == 0 || j->state != J_ASKING || j->recall)
			continue;
		if (all) {
			via_recall(s, j);
			n++;
		} else if (first == NULL || j->asked < first->asked) {
			first = j;
		}
	}
	if (first) {
		via_recall(s, first);
		n++;
	}
	return n;
}

static void scout_rearm(struct sched *s);
static void scout_arm(struct sched *s, size_t up, uint64_t secs);

/* The messages waiting on primary up's route, on a timer, not held:
 * the oldest into *oldest (NULL: none), how many. */
static size_t
waiting_on(struct sched *s, size_t up, struct msg **oldest)
{
	struct msg *m;
	size_t b, n = 0;

	*oldest = NULL;
	for (b = 0; b < s->tabsize; b++)
		for (m = s->tab[b]; m; m = m->hnext)
			if (m->wait_up == up && m->due && !m->job && !m->held && !m->del_pending &&
			    !m->finishing) {
				n++;
				if (*oldest == NULL || m->birth < (*oldest)->birth)
					*oldest = m;
			}
	return n;
}

/* Primary up's probe interval, ms. */
static uint64_t
probe_ms(const struct sched *s, size_t up)
{
	return (uint64_t)route_probe_ms(&s->cfg->upstreams[up].when);
}

/* A message waiting on up's route tried now, as its probe, unless a
 * batch of up is out already; the next probe armed while any wait. */
static void
probe(struct sched *s, size_t up)
{
	struct upq *p = &s->ups[up];
	struct msg *m;
	const struct job *j;

	for (j = s->jobs; j; j = j->next)
		if (j->primary == up)
			break;
	if (waiting_on(s, up, &m) == 0) {
		p->waited_on = 0;
		return;
	}
	if (j == NULL) {
		log_info("upstream %s: msg %s tried again now, as a probe of its route",
		    p->name, m->qid);
		m->wait_up = NO_UPSTREAM;
		sched_at(s, m, sched_wall());
	}
	scout_arm(s, up, (probe_ms(s, up) + 999) / 1000);
}

void
via_waits(struct sched *s, struct msg *m, const struct job *j, enum outcome_kind how,
    size_t ntemp)
{
	size_t up = j->primary;

	m->wait_up = NO_UPSTREAM;
	if (ntemp == 0 || up >= s->cfg->nupstreams || via_again(s, j, how) ||
	    (how != OUTCOME_UNREACHED && how != OUTCOME_NOGREETING && how != OUTCOME_NOMAIL &&
	    how != OUTCOME_RELAY))
		return;
	m->wait_up = up;
	if (!s->ups[up].waited_on) {
		s->ups[up].waited_on = 1;
		scout_arm(s, up, (probe_ms(s, up) + 999) / 1000);
	}
}

/* An upstream took mail: the messages waiting on a route it is on go
 * now (one it is the primary of, or a fallback of). */
static void
wake(struct sched *s, size_t took)
{
	const struct weir_upstream **r = xcalloc(s->cfg->nupstreams + 1, sizeof *r);
	struct msg *m, *oldest;
	size_t up, k, n, b, woken;

	for (up = 0; up < s->cfg->nupstreams && up < s->nups; up++) {
		if (!s->ups[up].waited_on)
			continue;
		n = config_route(s->cfg, &s->cfg->upstreams[up], r, s->cfg->nupstreams);
		for (k = 0; k < n && r[k] != &s->cfg->upstreams[took]; k++)
			;
		if (k == n || waiting_on(s, up, &oldest) == 0)
			continue;
		s->ups[up].waited_on = 0;
		woken = 0;
		for (b = 0; b < s->tabsize; b++)
			for (m = s->tab[b]; m; m = m->hnext)
				if (m->wait_up == up && m->due && !m->job && !m->held &&
				    !m->del_pending && !m->finishing) {
					m->wait_up = NO_UPSTREAM;
					sched_at(s, m, sched_wall());
					woken++;
				}
		log_info("upstream %s takes mail: %zu message%s that waited on upstream %s's "
		    "route go now", s->ups[took].name, woken, woken == 1 ? "" : "s",
		    s->ups[up].name);
	}
	free(r);
}

/* The primaries whose scout_at is due: one batch each asked of it
 * again, unless one is there already. */
static void
on_scout(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;
	uint64_t now = clock_mono_ms();
	size_t up;

	(void)ev; (void)t;
	s->scout = NULL;
	for (up = 0; up < s->cfg->nupstreams && up < s->nups; up++) {
		struct upq *p = &s->ups[up];

		if (p->scout_at == 0 || p->scout_at > now)
			continue;
		p->scout_at = 0;
		if (!at_primary(s, up) && recall(s, up, 0) > 0)
			log_info("upstream %s: one of its batches at %s asked of it again",
			    p->name, p->via ? p->via : "a fallback");
		if (p->waited_on)
			probe(s, up);	/* none sent while a batch of up is out */
	}
	scout_rearm(s);
}

/* The timer at the earliest scout_at. */
static void
scout_rearm(struct sched *s)
{
	uint64_t at = 0;
	size_t up;

	for (up = 0; up < s->cfg->nupstreams && up < s->nups; up++)
		if (s->ups[up].scout_at && (at == 0 || s->ups[up].scout_at < at))
			at = s->ups[up].scout_at;
	evloop_timer_cancel(s->ev, s->scout);
	s->scout = at ? evloop_timer_at(s->ev, at, on_scout, s) : NULL;
}

/* Ask primary up again in secs (the gate's LATER), unless sooner. */
static void
scout_arm(struct sched *s, size_t up, uint64_t secs)
{
	struct upq *p = &s->ups[up];
	uint64_t at = clock_mono_ms() + (secs ? secs : 1) * 1000;

	if (up >= s->cfg->nupstreams || (p->scout_at && p->scout_at <= at))
		return;
	p->scout_at = at;
	scout_rearm(s);
}

void
via_force(struct sched *s, struct job *j)
{
	size_t to = j->m->via_up;

	if (to >= s->cfg->nupstreams || to == j->up)
		return;
	s->ups[j->up].jobs--;
	j->up = to;
	j->hop = 0;
	j->forced = 1;
	s->ups[to].jobs++;
	batch_fit(s, j);
}

void
via_recalled(struct sched *s, struct job *j)
{
	if (j->m->via_up != NO_UPSTREAM && j->m->via_up < s->cfg->nupstreams &&
	    j->up != j->m->via_up) {
		via_force(s, j);	/* the operator's upstream (control.c) */
		batch_ask(s, j);
		return;
	}
	if (j->primary >= s->cfg->nupstreams || j->hop == 0) {
		batch_ask(s, j);
		return;
	}
	s->ups[j->up].jobs--;
	j->up = j->primary;
	j->hop = 0;
	s->ups[j->up].jobs++;
	batch_fit(s, j);
	batch_ask(s, j);
}

void
via_later(struct sched *s, struct job *j, enum route_kind why, uint64_t secs)
{
	const struct weir_upstream **r = xcalloc(s->cfg->nupstreams + 1, sizeof *r);
	size_t n = route_of(s, j, r), to;
	struct upq *p = &s->ups[j->primary < s->nups ? j->primary : j->up];

	if (j->hop + 1 >= n) {
		/* No upstream after it (a reload took them away): asked again
		 * from the primary when the gate says. */
		struct msg *m = j->m;

		free(r);
		log_info("msg %s: weir-gate: upstream %s passed over (%s), and no fallback "
		    "is left; again in %llu s", m->qid, s->ups[j->up].name,
		    route_kind_name(why), (unsigned long long)secs);
		job_free(s, j);
		sched_held(s, m, sched_wall() + (long long)secs);
		return;
	}
	to = (size_t)(r[++j->hop] - s->cfg->upstreams);
	free(r);
	s->ups[j->up].jobs--;
	s->ups[to].jobs++;
	j->up = to;
	if (p->via == NULL || strcmp(p->via, s->ups[to].name) != 0) {
		/* secs says when asking p again makes sense (its next probe,
		 * the end of a suspension), not how long the trouble lasted. */
		log_warnx("upstream %s: its mail goes through %s from now on (%s; %s asked again "
		    "in %llu s)", p->name, s->ups[to].name, route_kind_name(why), p->name,
		    (unsigned long long)secs);
		if (p->via == NULL) {
			p->counts[GP_C_SWITCHES]++;
			counts_due(s);
		}
		free(p->via);
		p->via = xstrdup(s->ups[to].name);
		p->via_seq = s->ask_seq;
	}
	batch_fit(s, j);
	batch_ask(s, j);
	scout_arm(s, (size_t)(p - s->ups), secs);
}

unsigned
via_away(const struct sched *s, size_t up)
{
	const struct job *j;
	unsigned n = 0;

	for (j = s->jobs; j; j = j->next)
		n += j->primary == up && j->up != up;
	return n;
}

int
via_again(const struct sched *s, const struct job *j, enum outcome_kind how)
{
	const struct route_when *w;

	if (how != OUTCOME_UNREACHED && how != OUTCOME_NOGREETING)
		return 0;
	w = via_unless(s, j);
	return w != NULL && w->s[RK_UNREACHABLE] != RK_OFF;
}

void
via_done(struct sched *s, const struct job *j, enum outcome_kind how)
{
	struct upq *p;
	unsigned n;

	if (how == OUTCOME_SENT && j->up < s->cfg->nupstreams)
		wake(s, j->up);

	if (j->forced || j->hop != 0 || j->up >= s->cfg->nupstreams || (how != OUTCOME_SENT &&
	    how != OUTCOME_RELAY))
		return;
	p = &s->ups[j->up];
	if (p->via == NULL || j->ask_seq <= p->via_seq)
		return;
	log_info("upstream %s: its mail goes through it again (it was going through %s)",
	    p->name, p->via);
	free(p->via);
	p->via = NULL;
	p->counts[GP_C_RETURNS]++;
	counts_due(s);
	/* Its batches at fallbacks come back to it. */
	n = recall(s, j->up, 1);
	if (n)
		log_info("upstream %s: %u of its batches waiting at fallbacks asked of it again",
		    p->name, n);
	p->scout_at = 0;
}
