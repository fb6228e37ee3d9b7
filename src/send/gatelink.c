/*
 * gatelink.c: stage 2 of an attempt (sendint.h), weir-send's side of
 * weir-gate.
 *
 *   gate_pump()  takes messages from an upstream's FIFO while the
 *                upstream has fewer than concurrency + LOOKAHEAD jobs
 *   start()      puts up to max_recipients not-done recipients in a job
 *                (fewer if the gate's cap or what was learnt says so)
 *   gate_ask()   asks weir-gate for it
 *   on_reply()   a grant goes to deliver.c (deliver_granted); a
 *                refusal for too many recipients halves the batch and
 *                asks again, another is a retry later
 *
 * One connection; every batch is an ACQUIRE (1 message, n recipients, 1
 * connection, or 0 if a kept session holds it) tagged with a number of
 * ours; the deliverer runs only once its GRANT arrives, and weir-send
 * REPORTs what the deliverer said happened (gate_tell).  Waiting for a
 * grant is silence on the socket, and costs nothing.
 *
 * If the gate is not there (not started yet, restarting), nothing is
 * sent: requests wait and are asked again once the connection is back,
 * after 1, 2, 4 ... 30 seconds.  Grants held when the connection drops
 * are counted by the gate as unknown outcomes; jobs not yet running go
 * back to their FIFO, and a running one's outcome is SETTLEd on the next
 * connection, as is that of a delivery an earlier weir-send handed over
 * (flight.c): by the grant's id, which every job keeps.
 *
 * Trusts: the gate's replies only through gateclient's parser; remote/S/N
 * through rcptfile_load().  Config keys: gate_socket, upstream
 * (max_recipients), concurrency.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "send/rcptfile.h"
#include "send/sendint.h"

#define BACKOFF_MIN_MS	100	/* weir run starts the gate a moment before us */
#define BACKOFF_MAX_MS	30000
#define COUNTS_EVERY_MS	1000

static void gate_down(struct sched *s, const char *why);
static void gate_lost_soon(struct sched *s);

static struct job *
by_tag(struct sched *s, uint32_t tag)
{
	struct job *j;

	for (j = s->jobs; j; j = j->next)
		if (j->tag == tag)
			return j;
	return NULL;
}

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
int
gate_fit_toobig(struct upq *u, size_t n)
{
	if (n == 0 || (u->fit_hi && u->fit_hi <= n))
		return 0;
	u->fit_hi = n;
	if (u->fit_lo >= n)
		u->fit_lo = 0;
	return 1;
}

/* The most recipients m's next batch may have: its upstream's
 * max_recipients (100 if unset), the gate's cap, what was learnt. */
static size_t
batch_cap(const struct sched *s, const struct msg *m)
{
	const struct weir_upstream *u = &s->cfg->upstreams[m->up];
	size_t cap = u->max_recipients ? u->max_recipients : 100;

	if (s->ups[m->up].cap && s->ups[m->up].cap < cap)
		cap = s->ups[m->up].cap;
	return fit_size(&s->ups[m->up], cap);
}

/* A job for m with up to cap of f's not-done recipients from m's pass
 * on (none: the caller frees it); an address that must never reach SMTP is bounced (*trouble: its
 * note or mark failed). */
static struct job *
batch_fill(struct sched *s, struct msg *m, struct rcptfile *f, size_t cap, int *trouble)
{
	struct job *j = job_new(s, m, m->up, cap);
	size_t i, nbad = 0;

	for (i = 0; i < f->n && j->n < cap; i++) {
		const char *bad;

		if (f->v[i].done || f->v[i].off < m->pass_off)
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
	gate_count_outcome(s, m, m->up, 0, 0, nbad);
	return j;
}

/* m's next batch, asked of the gate; or m's retry, or its end. */
static void
start(struct sched *s, struct msg *m)
{
	struct rcptfile f;
	struct job *j;
	int r, trouble = 0;

	if (m->up == NO_UPSTREAM) {
		log_warnx("msg %s: no upstream in %s takes mail from <%s>; will try again",
		    m->qid, s->cfg->file ? s->cfg->file : "the config", m->sender);
		sched_at(s, m, sched_next_retry(m->birth, sched_wall(), s->retry_skip));
		return;
	}
	r = rcptfile_load(s->o->q, m->id, &f);
	if (r < 0) {
		sched_at(s, m, sched_wall() + SYSFAIL_S);
		return;
	}
	if (r == 1 || f.ndone == f.n) {
		rcptfile_free(&f);
		sched_finish(s, m);
		return;
	}
	j = batch_fill(s, m, &f, batch_cap(s, m), &trouble);
	rcptfile_free(&f);
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
	gate_ask(s, j);
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
gate_pump(struct sched *s, size_t up)
{
	struct upq *u = &s->ups[up];
	struct msg *m;

	while (u->head && (u->jobs < s->concurrency + LOOKAHEAD ||
	    (u->jobs < s->concurrency + 2 * LOOKAHEAD && outranks(s, up, u->head)))) {
		m = u->head;
		u->head = m->qnext;
		if (u->head == NULL)
			u->tail = NULL;
		m->queued = 0;
		m->qnext = NULL;
		start(s, m);
	}
}

/* Shrink a job to its first n recipients. */
static void
shrink(struct job *j, size_t n)
{
	if (j->n > n)
		j->more = 1;
	while (j->n > n)
		free(j->addrs[--j->n]);
}

static void
gate_granted(struct sched *s, struct job *j, uint32_t cap)
{
	uint64_t now = clock_mono_ms();
	struct upq *u = &s->ups[j->up];
	struct msg *m = j->m;

	j->state = J_GRANTED;
	if (cap)
		u->cap = cap;
	if (j->n > u->fit_lo && (u->fit_hi == 0 || j->n < u->fit_hi))
		u->fit_lo = j->n;	/* it fits */
	if (j->up != m->up) {
		/* A reload sent the message to another upstream (or none). */
		gate_tell(s, j, GP_REFUND, 0, NULL);
		job_drop(s, j);
		return;
	}
	if (now < u->hold_until) {
		/* Granted before the gate read our throttle report: give it
		 * back and ask again once the hold is over (not at once: a
		 * gate that did not suspend would grant it again at once). */
		gate_tell(s, j, GP_REFUND, 0, NULL);
		job_free(s, j);
		sched_held(s, m, sched_wall() + (long long)((u->hold_until - now + 999) / 1000));
		return;
	}
	/* The grant covers the weight we asked for; a smaller cap only
	 * shapes the next requests. */
	deliver_granted(s, j);
}

static void
gate_refused(struct sched *s, struct job *j, enum gp_code code, const char *text)
{
	struct msg *m = j->m;

	if (code == GP_TOOBIG && j->n > 1) {
		/* More recipients than a window or cap allows at once: halve
		 * this batch; the next ones stay below this size (each
		 * refusal lowers it, so they converge on the size that fits). */
		(void)gate_fit_toobig(&s->ups[j->up], j->n);
		shrink(j, fit_size(&s->ups[j->up], j->n - 1));
		log_info("msg %s: weir-gate: %s; asking for %zu recipients", m->qid,
		    text, j->n);
		gate_ask(s, j);
		return;
	}
	log_warnx("msg %s: weir-gate refused: %s %s; will try again in %d s", m->qid,
	    gp_code_name(code), text, SYSFAIL_S);
	job_free(s, j);
	sched_at(s, m, sched_wall() + SYSFAIL_S);
}

static void
on_reply(struct sched *s, const struct gp_reply *r)
{
	struct job *j = r->tag ? by_tag(s, r->tag) : NULL;

	switch (r->verb) {
	case GP_R_GRANT:
		if (j == NULL && sess_granted(s, r->tag, r->msgs_per_conn))
			return;
		if (j == NULL || j->state != J_ASKING) {
			log_warnx("weir-gate: a grant for unknown request %u", r->tag);
			return;
		}
		j->grant = r->id;
		j->grace = r->grace;
		gate_granted(s, j, r->max_rcpt);
		return;
	case GP_R_SUSPENDED: {
		size_t i;

		log_warnx("weir-gate suspended the upstream for %llu s",
		    (unsigned long long)r->secs);
		for (i = 0; i < s->nups; i++)
			if (s->ups[i].throttle_tag == r->tag && r->tag != 0) {
				s->ups[i].hold_until = clock_mono_ms() + r->secs * 1000;
				s->ups[i].throttle_tag = 0;
			}
		return;
	}
	case GP_R_OK:
		return;
	case GP_R_ERR:
		if (j && j->state == J_ASKING) {
			gate_refused(s, j, r->code, r->text);
			return;
		}
		if (j == NULL && r->tag && sess_refused(s, r->tag, r->text))
			return;
		log_warnx("weir-gate: %s %s (request %u)", gp_code_name(r->code), r->text, r->tag);
		return;
	default:
		return;
	}
}

static void
on_readable(struct evloop *ev, int fd, int events, void *arg)
{
	struct sched *s = arg;
	struct gp_reply r;
	const char *why = NULL;
	int k;

	(void)ev; (void)fd; (void)events;
	k = gc_fill(&s->gc);
	if (k < 0 && errno == EAGAIN)
		return;
	if (k <= 0) {
		gate_down(s, k == 0 ? "the gate closed the connection" : strerror(errno));
		return;
	}
	while ((k = gc_next_reply(&s->gc, &r, &why)) == 1) {
		on_reply(s, &r);
		if (!s->gate_up)
			return;	/* a reply handler hit trouble */
	}
	if (k < 0)
		gate_down(s, why ? why : "protocol error");
}

static void on_retry(struct evloop *ev, struct evtimer *t, void *arg);

static void
connect_gate(struct sched *s)
{
	struct job *j;

	if (gc_connect(&s->gc, s->cfg->gate_socket) < 0 || fd_nonblock(s->gc.fd, 1) < 0) {
		if (s->gate_backoff == BACKOFF_MIN_MS)
			log_warn("weir-gate at %s; nothing is sent until it answers",
			    s->cfg->gate_socket);
		if (s->gc.fd >= 0)
			gc_close(&s->gc);
		s->gate_retry = evloop_timer_at(s->ev, clock_mono_ms() + s->gate_backoff,
		    on_retry, s);
		s->gate_backoff = s->gate_backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS :
		    s->gate_backoff * 2;
		return;
	}
	/* Grants are in use only from their START: one not handed over when
	 * weir-send dies is given back, not counted for the grace. */
	if (gc_starts(&s->gc) < 0) {
		log_warn("weir-gate at %s", s->cfg->gate_socket);
		gc_close(&s->gc);
		s->gate_retry = evloop_timer_at(s->ev, clock_mono_ms() + s->gate_backoff,
		    on_retry, s);
		return;
	}
	log_info("connected to weir-gate at %s", s->cfg->gate_socket);
	s->gate_up = 1;
	s->gate_backoff = BACKOFF_MIN_MS;
	evloop_watch(s->ev, s->gc.fd, EV_READ, on_readable, s);
	for (j = s->jobs; j && s->gate_up; j = j->next)
		if (j->state == J_ASKING && j->tag == 0)
			gate_ask(s, j);
	gate_counts_due(s);	/* a new connection, maybe a new gate: all again */
}

static void
on_retry(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)ev; (void)t;
	s->gate_retry = NULL;
	connect_gate(s);
}

void
gate_start(struct sched *s)
{
	s->gc.fd = -1;
	s->gate_backoff = BACKOFF_MIN_MS;
	connect_gate(s);
}

static void
on_lost(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)ev; (void)t;
	s->gate_lost = NULL;
	if (s->gate_up)
		gate_down(s, "a request could not be written");
}

/* A report could not be written: the connection is lost, but its
 * caller still holds a job that gate_down() would drop under it: the
 * next turn of the loop takes it down. */
static void
gate_lost_soon(struct sched *s)
{
	log_warn("weir-gate: writing a report");
	if (s->gate_lost == NULL)
		s->gate_lost = evloop_timer_at(s->ev, 0, on_lost, s);
}

static void
gate_down(struct sched *s, const char *why)
{
	struct job *j, *next;
	size_t i;

	log_warnx("lost weir-gate (%s); nothing is sent until it is back", why);
	evloop_timer_cancel(s->ev, s->gate_lost);
	s->gate_lost = NULL;
	evloop_unwatch(s->ev, s->gc.fd);
	gc_close(&s->gc);
	s->gate_up = 0;
	for (i = 0; i < s->nups; i++)
		s->ups[i].told_ok = 0;
	sess_forget_slots(s);
	/* Waiting requests died with the connection: ask again later.
	 * Granted jobs that have not started must not start now. */
	for (j = s->jobs; j; j = next) {
		next = j->next;
		if (j->state == J_ASKING)
			j->tag = 0;
		else if (j->state == J_GRANTED)
			job_drop(s, j);
		else
			j->tag = 0;	/* running: its report has nowhere to go */
	}
	if (s->gate_retry == NULL)
		s->gate_retry = evloop_timer_at(s->ev, clock_mono_ms() + s->gate_backoff,
		    on_retry, s);
}

void
gate_ask(struct sched *s, struct job *j)
{
	const char *up = s->ups[j->up].name;
	/* The gate picks a class by sender; an address it cannot carry is
	 * classed by its recipient count alone. */
	const char *sender = gp_valid_word(j->m->sender, GP_SENDER_MAX) ? j->m->sender : NULL;

	j->tag = 0;
	if (!s->gate_up)
		return;
	if (++s->next_tag == 0)
		s->next_tag = 1;
	j->tag = s->next_tag;
	j->asked = clock_mono_ms();
	/* On a kept session, the session holds the connection. */
	j->conn = !sess_wanted(s, j->up) || !sess_fits(j);
	if (gc_acquire(&s->gc, j->tag, up, NULL, sender, 1, (uint32_t)j->n,
	    (uint32_t)j->conn) < 0)
		gate_down(s, strerror(errno));
}

int
gate_use(struct sched *s, uint32_t *tag)
{
	if (s->gate_up && *tag != 0 && gc_start(&s->gc, *tag) == 0)
		return 0;
	/* The connection is going (its reader will see to it): the gate
	 * gives the grant back; nothing of it must go out. */
	*tag = 0;
	return -1;
}

uint32_t
gate_ask_slot(struct sched *s, size_t up)
{
	if (!s->gate_up)
		return 0;
	if (++s->next_tag == 0)
		s->next_tag = 1;
	if (gc_acquire(&s->gc, s->next_tag, s->ups[up].name, NULL, NULL, 0, 0, 1) < 0) {
		gate_down(s, strerror(errno));
		return 0;
	}
	return s->next_tag;
}

void
gate_release(struct sched *s, uint32_t tag, int used)
{
	if (!s->gate_up || tag == 0)
		return;
	if ((used ? gc_report_nomail(&s->gc, tag) : gc_report_refund(&s->gc, tag)) < 0)
		gate_down(s, strerror(errno));
}

void
gate_cancel(struct sched *s, uint32_t tag)
{
	if (s->gate_up && tag != 0 && gc_cancel(&s->gc, tag) < 0)
		gate_down(s, strerror(errno));
}

void
gate_tell(struct sched *s, struct job *j, enum gp_outcome how, uint32_t accepted,
    const char *reply)
{
	uint64_t grant = j->grant;
	int k;

	j->grant = 0;
	if (!s->gate_up)
		return;	/* the gate counts it as unknown: until its grace is over */
	if (j->tag == 0) {
		/* Its grant went with the connection that held it (an earlier
		 * weir-send's: flight.c; or the gate was lost): the gate
		 * counts it as unknown, and may now settle it. */
		if (grant != 0 && how != GP_UNKNOWN && s->ups[j->up].name &&
		    gc_settle(&s->gc, s->ups[j->up].name, grant, how, accepted,
		    how == GP_SENT ? j->sent_at : -1, reply) < 0)
			gate_lost_soon(s);
		return;
	}
	/* An AUTHFAIL sets no hold (throttle_tag): the gate's suspension
	 * paces the tries, and its RESUME or a reload lifts it at once. */
	if (how == GP_THROTTLED)
		s->ups[j->up].throttle_tag = j->tag;
	k = gc_report(&s->gc, j->tag, how, accepted, how == GP_SENT ? j->sent_at : -1, reply);
	j->tag = 0;
	if (k < 0)
		gate_lost_soon(s);
}

/* ---- the counters ---- */

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
		if (gc_counts(&s->gc, u->name, u->counts) < 0) {
			gate_down(s, strerror(errno));
			return;
		}
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
gate_counts_due(struct sched *s)
{
	if (s->counts_timer == NULL)
		s->counts_timer = evloop_timer_at(s->ev, clock_mono_ms() + COUNTS_EVERY_MS,
		    on_counts, s);
}

void
gate_count_queued(struct sched *s, const struct msg *m, size_t nrcpt)
{
	if (m->up == NO_UPSTREAM)
		return;
	s->ups[m->up].counts[GP_C_QUEUED_MSGS]++;
	s->ups[m->up].counts[GP_C_QUEUED_RCPTS] += nrcpt;
	gate_counts_due(s);
}

void
gate_count_outcome(struct sched *s, struct msg *m, size_t up, size_t delivered,
    size_t deferred, size_t bounced)
{
	const size_t n[3] = { delivered, deferred, bounced };
	static const enum gp_count c[3] = { GP_C_DELIVERED_MSGS, GP_C_DEFERRED_MSGS,
		GP_C_BOUNCED_MSGS };
	/* A message is delivered or bounced once, whatever its batches;
	 * deferred at each attempt that put one off. */
	int *once[3] = { &m->counted_delivered, NULL, &m->counted_bounced };
	size_t k;

	for (k = 0; k < 3; k++)
		if (n[k] > 0) {
			if (once[k] == NULL || !*once[k])
				s->ups[up].counts[c[k]]++;
			if (once[k])
				*once[k] = 1;
			s->ups[up].counts[c[k] + 1] += n[k];	/* its _RCPTS */
			gate_counts_due(s);
		}
}
