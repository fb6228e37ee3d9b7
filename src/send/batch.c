/*
 * batch.c: stage 2 of an attempt (sendint.h), the batches: a message
 * from its upstream's FIFO becomes a job of some of its not-done
 * recipients, asked of weir-gate (through gatelink.c, which decides
 * nothing), and what the gate answers decides its way on.
 *
 *   batch_pump()  takes messages from an upstream's FIFO while the
 *                 upstream has fewer than concurrency + LOOKAHEAD jobs
 *                 (2 * LOOKAHEAD for one that outranks a request still
 *                 waiting at the gate)
 *   batch_start() puts up to max_recipients not-done recipients, from
 *                 where the message's pass is, in a job (job.c), fewer
 *                 if the gate's cap or what was learnt says so, those
 *                 of one upstream when weir.conf routes by recipient
 *                 domain (via.c: the message moves to that upstream's
 *                 FIFO first); a message with none left goes to its
 *                 retry or its end
 *   batch_ask()   the request: with a connection unless a kept session
 *                 will carry it (session.c), with its route's conditions
 *                 (via.c)
 *   batch_answer() the gate's answer to it, all it means for the batch,
 *                 in one place: a grant goes to a run slot (deliver.c),
 *                 unless a reload moved the message (the grant given
 *                 back, the message to its FIFO) or a throttle's hold is
 *                 on (given back, asked again when the hold ends);
 *                 LATER, to the next upstream of its route (via.c); a
 *                 refusal as too big, asked again smaller; any other
 *                 refusal, a retry in SYSFAIL_S; for a batch recalled to
 *                 its primary (via.c), the OK to its CANCEL or a LATER
 *                 that crossed it sends it there, a grant that crossed it
 *                 keeps it where it is
 *   batch_suspended(), batch_gate_up(), batch_gate_lost()  the gate's
 *                 SUSPENDED ends the hold its report set (complete.c);
 *                 the connection made asks what waits, lost drops the
 *                 granted jobs (back to their FIFO) and sends recalled
 *                 ones to their primary
 *
 * The size of a batch is learnt per upstream (struct upq, fit_lo and
 * fit_hi) from what the gate granted (fit_granted) or refused as too
 * big (fit_shrink), and from how many recipients a deliverer took in
 * one transaction (batch_took); a reload forgets it.
 *
 * Trusts: remote/S/N through rcptfile_load() (a batch in the middle of
 * a pass: rcptfile_load_part(), its part only); an address that must
 * never reach SMTP (envelope_addr_problem) is bounced here.  Config
 * keys: upstream (max_recipients), concurrency.
 */
#include <stdlib.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "send/rcptfile.h"
#include "send/sendint.h"

/* The size of u's next batch, at most cap, by what was learnt (struct
 * upq): below the smallest size found too big, halfway up from the
 * largest that went (so a few refusals find the size that fits, and
 * then none). */
static size_t
fit_size(const struct upq *u, size_t cap)
{
	size_t n;

	if (u->fit_hi == 0)
		return cap;
	n = u->fit_lo + 1 >= u->fit_hi ? u->fit_lo : (u->fit_lo + u->fit_hi + 1) / 2;
	return n > 0 && n < cap ? n : cap;
}

/* n recipients were too many for u: 1 if that is news. */
static int
fit_toobig(struct upq *u, size_t n)
{
	if (n == 0 || (u->fit_hi && u->fit_hi <= n))
		return 0;
	u->fit_hi = n;
	if (u->fit_lo >= n)
		u->fit_lo = 0;
	return 1;
}

/* A batch of n was granted, with the gate's cap per request (0: none
 * said). */
static void
fit_granted(struct upq *u, size_t n, uint32_t cap)
{
	if (cap)
		u->cap = cap;
	if (n > u->fit_lo && (u->fit_hi == 0 || n < u->fit_hi))
		u->fit_lo = n;	/* it fits */
}

/* j was refused as too big (j->n > 1): it shrinks to the next size to
 * ask for. */
static void
fit_shrink(struct sched *s, struct job *j)
{
	struct upq *u = &s->ups[j->up];
	size_t n;

	(void)fit_toobig(u, j->n);
	n = fit_size(u, j->n - 1);
	if (j->n > n)
		j->more = 1;
	while (j->n > n)
		free(j->addrs[--j->n]);
}

int
batch_took(struct upq *u, size_t tried)
{
	u->fit_lo = tried;
	return fit_toobig(u, tried + 1);
}

/* The most recipients a batch for upstream up may have: its
 * max_recipients (100 if unset), the gate's cap, what was learnt. */
static size_t
batch_cap(const struct sched *s, size_t up)
{
	const struct weir_upstream *u = &s->cfg->upstreams[up];
	size_t cap = u->max_recipients ? u->max_recipients : 100;

	if (s->ups[up].cap && s->ups[up].cap < cap)
		cap = s->ups[up].cap;
	return fit_size(&s->ups[up], cap);
}

void
batch_fit(struct sched *s, struct job *j)
{
	size_t n = j->up < s->cfg->nupstreams ? batch_cap(s, j->up) : j->n;

	if (j->n > n)
		j->more = 1;
	while (j->n > n)
		free(j->addrs[--j->n]);
}

/* A job for m with up to cap of f's not-done recipients from m's pass
 * on (none: the caller frees it), those of m's group alone when prim
 * (their primaries) is given; an address that must never reach SMTP is
 * bounced (*trouble: its note or mark failed). */
static struct job *
batch_fill(struct sched *s, struct msg *m, struct rcptfile *f, const size_t *prim, size_t cap,
    int *trouble)
{
	struct job *j = job_new(s, m, m->up, cap);
	size_t i, nbad = 0;

	for (i = 0; i < f->n && j->n < cap; i++) {
		const char *bad;

		if (f->v[i].done || f->v[i].off < m->pass_off || (prim && prim[i] != m->up))
			continue;
		/* A stock qmail-send may have let such an address in; it must
		 * never reach an SMTP command line. */
		if ((bad = envelope_addr_problem(f->v[i].addr, f->v[i].len)) != NULL) {
			log_warnx("msg %s: recipient %zu: %s; bouncing it", m->qid, i, bad);
			if (bounce_note(s->o->q, m->id, f->v[i].addr, "The address cannot be "
			    "used in SMTP: it holds a control character. (#5.1.3)") < 0 ||
			    rcpt_mark_done(s->o->q, m->id, &f->v[i].off, 1) < 0)
				*trouble = 1;
			f->ndone++;
			nbad++;
			continue;
		}
		j->offs[j->n] = f->v[i].off;
		j->addrs[j->n] = xstrndup(f->v[i].addr, f->v[i].len);
		j->n++;
	}
	for (; i < f->n && !j->more; i++)
		j->more = !f->v[i].done;
	/* By recipient domain: any not-done recipient outside the batch,
	 * of any group, before or after it (via.c finds its group). */
	if (prim)
		j->more = f->n - f->ndone > j->n;
	counts_outcome(s, m, m->up, 0, 0, nbad);
	return j;
}

/* m's next batch, asked of the gate; or m's retry, or its end. */
static void
batch_start(struct sched *s, struct msg *m)
{
	struct rcptfile f;
	struct job *j;
	size_t *prim = NULL, group;
	int r, trouble = 0, part;

	/* In the middle of a pass, only what this batch takes, and one more
	 * not done to know whether there is more (issue 36: reading the
	 * whole file for each batch made a list post's sends O(n^2)).  With
	 * routing by recipient domain, via.c needs every recipient. */
	part = m->pass_off > 0 && !via_split(s) && m->up < s->cfg->nupstreams;
	if (part)
		r = rcptfile_load_part(s->o->q, m->id, m->pass_off, batch_cap(s, m->up) + 1, &f);
	else
		r = rcptfile_load(s->o->q, m->id, &f);
	if (r < 0) {
		sched_at(s, m, sched_wall() + SYSFAIL_S);
		return;
	}
	/* A part holding nothing not done is the end of the pass, below,
	 * not of the message: recipients before it may have been put off. */
	if (r == 1 || (f.ndone == f.n && !part)) {
		rcptfile_free(&f);
		sched_finish(s, m);
		return;
	}
	/* Routing by recipient domain (via.c): the pass's next group, from
	 * its upstream's FIFO; none left: the pass is over. */
	if (via_split(s) && (prim = via_groups(s, m, &f, &group)) == NULL) {
		rcptfile_free(&f);
		if (msg_pass_over(m))
			sched_at(s, m, sched_next_retry(m->birth, sched_wall(), s->retry_skip));
		else
			sched_at(s, m, sched_wall());	/* a new pass, from the top */
		return;
	}
	if (prim && group != m->up) {
		free(prim);
		rcptfile_free(&f);
		m->up = group;
		sched_enqueue(s, m);
		return;
	}
	if (m->up == NO_UPSTREAM) {
		log_warnx("msg %s: no upstream in %s takes mail from <%s>%s; will try again",
		    m->qid, s->cfg->file ? s->cfg->file : "the config", m->sender,
		    prim ? " to some of its recipients" : "");
		free(prim);
		rcptfile_free(&f);
		(void)msg_pass_over(m);
		sched_at(s, m, sched_next_retry(m->birth, sched_wall(), s->retry_skip));
		return;
	}
	j = batch_fill(s, m, &f, prim, batch_cap(s, m->up), &trouble);
	rcptfile_free(&f);
	if (j->n == 0 && prim && j->more) {
		job_free(s, j);		/* the group's were bad: on to the next */
		sched_at(s, m, trouble ? sched_wall() + SYSFAIL_S : sched_wall());
		free(prim);
		return;
	}
	free(prim);
	if (j->n > 0)
		via_force(s, j);
	if (j->n == 0) {
		job_free(s, j);
		/* Only bad addresses were left in this pass: a retry if an
		 * earlier batch put one off, else finish (from the top), or
		 * retry the notes. */
		if (msg_pass_over(m))
			sched_at(s, m, sched_next_retry(m->birth, sched_wall(), s->retry_skip));
		else
			sched_at(s, m, trouble ? sched_wall() + SYSFAIL_S : sched_wall());
		return;
	}
	batch_ask(s, j);
}

/* Does m outrank a request for up still waiting at the gate? */
static int
outranks(const struct sched *s, size_t up, const struct msg *m)
{
	const struct job *j;

	for (j = s->jobs; j; j = j->next)
		if (j->up == up && j->state == J_ASKING && j->m->prio < m->prio)
			return 1;
	return 0;
}

void
batch_pump(struct sched *s, size_t up)
{
	struct upq *u = &s->ups[up];
	/* Its batches that went to a fallback count here too (via.c). */
	unsigned away = u->head ? via_away(s, up) : 0;
	struct msg *m;

	while (u->head && (u->jobs + away < s->concurrency + LOOKAHEAD ||
	    (u->jobs + away < s->concurrency + 2 * LOOKAHEAD && outranks(s, up, u->head)))) {
		m = u->head;
		u->head = m->qnext;
		if (u->head == NULL)
			u->tail = NULL;
		m->queued = 0;
		m->qnext = NULL;
		batch_start(s, m);
	}
}

void
batch_ask(struct sched *s, struct job *j)
{
	/* On a kept session, the session holds the connection. */
	j->conn = !sess_wanted(s, j->up) || !sess_fits(j);
	gatelink_ask(s, j, via_unless(s, j));
}

/* ---- the gate's answers (gatelink.c hands them here) ---- */

/* j is granted: to a run slot (deliver.c), unless a reload sent its
 * message elsewhere or a throttle holds its upstream. */
static void
granted(struct sched *s, struct job *j, uint32_t cap)
{
	uint64_t now = clock_mono_ms();
	struct upq *u = &s->ups[j->up];
	struct msg *m = j->m;

	j->state = J_GRANTED;
	j->recall = 0;	/* granted before the gate read our CANCEL: it goes here */
	fit_granted(u, j->n, cap);
	if (!via_placed(s, j)) {
		/* A reload sent the message to another upstream (or none). */
		(void)gatelink_tell(s, j, GP_REFUND, 0, NULL);
		job_drop(s, j);
		return;
	}
	if (now < u->hold_until) {
		/* Granted before the gate read our throttle report: give it
		 * back and ask again once the hold is over (not at once: a
		 * gate that did not suspend would grant it again at once); the
		 * gate's SUSPENDED answer ends the hold. */
		(void)gatelink_tell(s, j, GP_REFUND, 0, NULL);
		job_free(s, j);
		sched_held(s, m, sched_wall() + (long long)((u->hold_until - now + 999) / 1000));
		return;
	}
	/* The grant covers the weight we asked for; a smaller cap only
	 * shapes the next requests. */
	deliver_granted(s, j);
}

/* j is refused: TOOBIG, smaller; anything else, a retry. */
static void
refused(struct sched *s, struct job *j, enum gp_code code, const char *text)
{
	struct msg *m = j->m;

	if (code == GP_TOOBIG && j->n > 1) {
		/* More recipients than a window or cap allows at once: halve
		 * this batch; the next ones stay below this size (each
		 * refusal lowers it, so they converge on the size that fits). */
		fit_shrink(s, j);
		log_info("msg %s: weir-gate: %s; asking for %zu recipients", m->qid,
		    text, j->n);
		batch_ask(s, j);
		return;
	}
	log_warnx("msg %s: weir-gate refused: %s %s; will try again in %d s", m->qid,
	    gp_code_name(code), text, SYSFAIL_S);
	job_free(s, j);
	sched_at(s, m, sched_wall() + SYSFAIL_S);
}

int
batch_answer(struct sched *s, struct job *j, const struct gp_reply *r)
{
	if (j->state != J_ASKING)
		return 0;
	switch (r->verb) {
	case GP_R_GRANT:
		j->grant = r->id;
		j->grace = r->grace;
		granted(s, j, r->max_rcpt);
		return 1;
	case GP_R_LATER:
		/* Its primary's fallback_when holds: the next upstream; a
		 * recalled one is dropped: to its primary. */
		if (j->recall) {
			j->recall = 0;
			via_recalled(s, j);
		} else {
			via_later(s, j, r->why, r->secs);
		}
		return 1;
	case GP_R_OK:
		/* A CANCEL of a recalled request done. */
		if (j->recall) {
			j->recall = 0;
			via_recalled(s, j);
		}
		return 1;
	case GP_R_ERR:
		if (j->recall) {
			/* The CANCEL crossed what the gate had sent already:
			 * that reply decided. */
			log_debug("weir-gate: %s %s (request %u, recalled)", gp_code_name(r->code),
			    r->text, r->tag);
			return 1;
		}
		refused(s, j, r->code, r->text);
		return 1;
	default:
		return 0;
	}
}

void
batch_suspended(struct sched *s, uint32_t tag, uint64_t secs)
{
	size_t i;

	log_warnx("weir-gate suspended the upstream for %llu s", (unsigned long long)secs);
	/* Every grant the gate made before it read the report came before
	 * this answer (one connection, in order): the hold is over, the gate
	 * holds the upstream's requests from now on, and its RESUME lets
	 * them go at once (weir resume). */
	for (i = 0; i < s->nups; i++)
		if (s->ups[i].throttle_tag == tag && tag != 0) {
			s->ups[i].hold_until = 0;
			s->ups[i].throttle_tag = 0;
		}
}

void
batch_gate_up(struct sched *s)
{
	struct job *j;

	for (j = s->jobs; j && s->gate_up; j = j->next)
		if (j->state == J_ASKING && j->tag == 0)
			batch_ask(s, j);
	counts_connected(s);
}

void
batch_gate_lost(struct sched *s)
{
	struct job *j, *next;

	/* Waiting requests died with the connection: asked again when it
	 * is back (a recalled one at its primary).  Granted jobs that have
	 * not started must not start now. */
	for (j = s->jobs; j; j = next) {
		next = j->next;
		if (j->state == J_ASKING && j->recall) {
			j->recall = 0;
			via_recalled(s, j);
		} else if (j->state == J_GRANTED) {
			job_drop(s, j);
		}
	}
}
