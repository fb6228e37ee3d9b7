/*
 * gatelink.c: stage 2 of an attempt (sendint.h), weir-send's side of
 * its conversation with weir-gate (mail/gateproto.h); the only file
 * that writes to the gate.
 *
 *   gate_request()  asks weir-gate for a job's grant (batch.c made it)
 *   on_reply()      a grant goes to deliver.c (deliver_granted); a
 *                   refusal for too many recipients shrinks the batch
 *                   (batch.c) and asks again, another is a retry later;
 *                   LATER (the primary's fallback_when holds) sends the
 *                   batch to the next upstream of its route (via.c);
 *                   a session's connection slot goes to session.c
 *   gate_recall()   a request waiting at a fallback is CANCELled, to be
 *                   asked of its primary again (via.c) once the gate's
 *                   OK says it is gone (a GRANT or LATER that crossed
 *                   the CANCEL decides instead)
 *   gate_use()      a grant goes to a deliverer (START)
 *   gate_tell()     what became of a grant (REPORT, or SETTLE for one
 *                   the connection that held it took away)
 *
 * One connection; every batch is an ACQUIRE (1 message, n recipients, 1
 * connection, or 0 if a kept session holds it; with the primary's
 * fallback_when while a fallback is left, via.c) tagged with a number of
 * ours; the deliverer runs only once its GRANT arrives, and weir-send
 * REPORTs what the deliverer said happened (gate_tell).  Waiting for a
 * grant is silence on the socket, and costs nothing.  The counters
 * (counts.c) go as COUNTS lines (gate_counts).
 *
 * If the gate is not there (not started yet, restarting), nothing is
 * sent: requests wait and are asked again once the connection is back,
 * after 0.1, 0.2, 0.4 ... 30 seconds.  Grants held when the connection
 * drops are counted by the gate as unknown outcomes; jobs not yet
 * running go back to their FIFO, and a running one's outcome is SETTLEd
 * on the next connection, as is that of a delivery an earlier weir-send
 * handed over (flight.c): by the grant's id, which every job keeps.
 *
 * Trusts: the gate's replies only through gateclient's parser.  Config
 * keys: gate_socket.
 */
#include <errno.h>
#include <string.h>

#include "lib/log.h"
#include "send/sendint.h"

#define BACKOFF_MIN_MS	100	/* weir run starts the gate a moment before us */
#define BACKOFF_MAX_MS	30000

static void gate_down(struct sched *s, const char *why);
static void gate_lost_soon(struct sched *s, const char *what);

static struct job *
by_tag(struct sched *s, uint32_t tag)
{
	struct job *j;

	for (j = s->jobs; j; j = j->next)
		if (j->tag == tag)
			return j;
	return NULL;
}

static void
gate_granted(struct sched *s, struct job *j, uint32_t cap)
{
	uint64_t now = clock_mono_ms();
	struct upq *u = &s->ups[j->up];
	struct msg *m = j->m;

	j->state = J_GRANTED;
	j->recall = 0;	/* granted before the gate read our CANCEL: it goes here */
	batch_granted(u, j->n, cap);
	if (!via_placed(s, j)) {
		/* A reload sent the message to another upstream (or none). */
		gate_tell(s, j, GP_REFUND, 0, NULL);
		job_drop(s, j);
		return;
	}
	if (now < u->hold_until) {
		/* Granted before the gate read our throttle report: give it
		 * back and ask again once the hold is over (not at once: a
		 * gate that did not suspend would grant it again at once); the
		 * gate's SUSPENDED answer ends the hold. */
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
		batch_shrink(s, j);
		log_info("msg %s: weir-gate: %s; asking for %zu recipients", m->qid,
		    text, j->n);
		gate_request(s, j);
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
		/* Every grant the gate made before it read the report came
		 * before this answer (one connection, in order): the hold is
		 * over, the gate holds the upstream's requests from now on,
		 * and its RESUME lets them go at once (weir resume). */
		for (i = 0; i < s->nups; i++)
			if (s->ups[i].throttle_tag == r->tag && r->tag != 0) {
				s->ups[i].hold_until = 0;
				s->ups[i].throttle_tag = 0;
			}
		return;
	}
	case GP_R_LATER:
		/* Its primary's fallback_when holds: the next upstream; a
		 * recalled one is dropped: to its primary. */
		if (j && j->state == J_ASKING && j->recall) {
			j->recall = 0;
			via_recalled(s, j);
		} else if (j && j->state == J_ASKING) {
			via_later(s, j, r->why, r->secs);
		} else {
			log_warnx("weir-gate: LATER for unknown request %u", r->tag);
		}
		return;
	case GP_R_OK:
		/* A CANCEL of a recalled request done. */
		if (j && j->state == J_ASKING && j->recall) {
			j->recall = 0;
			via_recalled(s, j);
		}
		return;
	case GP_R_ERR:
		if (j && j->recall && j->state == J_ASKING) {
			/* The CANCEL crossed what the gate had sent already:
			 * that reply decided. */
			log_debug("weir-gate: %s %s (request %u, recalled)", gp_code_name(r->code),
			    r->text, r->tag);
			return;
		}
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
			gate_request(s, j);
	counts_connected(s);
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

/* A line could not be written: the connection is lost, but the caller
 * still holds a job or a session that gate_down() would drop (and free)
 * under it: the next turn of the loop takes it down.  Every write but
 * the reader's own goes this way (a session asking for its slot was
 * freed twice when gate_down() ran from inside sess_open()). */
static void
gate_lost_soon(struct sched *s, const char *what)
{
	log_warn("weir-gate: writing %s", what);
	if (s->gate_lost == NULL)
		s->gate_lost = evloop_timer_at(s->ev, 0, on_lost, s);
}

static void
gate_down(struct sched *s, const char *why)
{
	struct job *j, *next;

	log_warnx("lost weir-gate (%s); nothing is sent until it is back", why);
	evloop_timer_cancel(s->ev, s->gate_lost);
	s->gate_lost = NULL;
	evloop_unwatch(s->ev, s->gc.fd);
	gc_close(&s->gc);
	s->gate_up = 0;
	sess_forget_slots(s);
	/* Waiting requests died with the connection: ask again later.
	 * Granted jobs that have not started must not start now. */
	for (j = s->jobs; j; j = next) {
		next = j->next;
		if (j->state == J_ASKING && j->recall) {
			j->recall = 0;
			j->tag = 0;
			via_recalled(s, j);	/* asked of its primary when the gate is back */
		} else if (j->state == J_ASKING)
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
gate_request(struct sched *s, struct job *j)
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
	j->ask_seq = ++s->ask_seq;
	/* On a kept session, the session holds the connection. */
	j->conn = !sess_wanted(s, j->up) || !sess_fits(j);
	if (gc_acquire_unless(&s->gc, j->tag, up, NULL, sender, 1, (uint32_t)j->n,
	    (uint32_t)j->conn, via_unless(s, j)) < 0)
		gate_lost_soon(s, "a request");
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
gate_request_slot(struct sched *s, size_t up)
{
	if (!s->gate_up)
		return 0;
	if (++s->next_tag == 0)
		s->next_tag = 1;
	if (gc_acquire(&s->gc, s->next_tag, s->ups[up].name, NULL, NULL, 0, 0, 1) < 0) {
		gate_lost_soon(s, "a session's request");
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
		gate_lost_soon(s, "a report");
}

void
gate_recall(struct sched *s, struct job *j)
{
	if (j->recall)
		return;
	if (!s->gate_up || j->tag == 0) {
		via_recalled(s, j);	/* nothing asked: straight to its primary */
		return;
	}
	j->recall = 1;
	if (gc_cancel(&s->gc, j->tag) < 0)
		gate_lost_soon(s, "a cancel");
}

void
gate_cancel(struct sched *s, uint32_t tag)
{
	if (s->gate_up && tag != 0 && gc_cancel(&s->gc, tag) < 0)
		gate_lost_soon(s, "a cancel");
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
			gate_lost_soon(s, "a report");
		return;
	}
	/* An AUTHFAIL sets no hold (throttle_tag): the gate's suspension
	 * paces the tries, and its RESUME or a reload lifts it at once. */
	if (how == GP_THROTTLED || how == GP_QUOTA)
		s->ups[j->up].throttle_tag = j->tag;
	k = gc_report(&s->gc, j->tag, how, accepted, how == GP_SENT ? j->sent_at : -1, reply);
	j->tag = 0;
	if (k < 0)
		gate_lost_soon(s, "a report");
}

int
gate_counts(struct sched *s, const char *up, const uint64_t *counts)
{
	if (!s->gate_up)
		return -1;
	if (gc_counts(&s->gc, up, counts) < 0) {
		gate_lost_soon(s, "counts");
		return -1;
	}
	return 0;
}
