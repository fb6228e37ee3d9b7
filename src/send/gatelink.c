/*
 * gatelink.c: weir-send's side of its conversation with weir-gate
 * (mail/gateproto.h), beside stage 2 (sendint.h): the only file that
 * speaks to the gate, and one that decides nothing.  It keeps the
 * connection, names each request with a tag of ours, writes what the
 * other files ask it to, and hands each answer, found by its tag, to the
 * callbacks the scheduler set once at start (struct gatelink_ops: what
 * an answer means for a batch is batch.c's to say, for a session's slot
 * session.c's), calling no other file of weir-send:
 *
 *   gatelink_open()     the connection, and the table of callbacks
 *   gatelink_ask()      a job's request (ACQUIRE: 1 message, n
 *                       recipients, 1 connection, or 0 if a kept session
 *                       holds it; with the conditions of its route)
 *   gatelink_cancel()   CANCEL a request
 *   gatelink_use()      a grant goes to a deliverer (START)
 *   gatelink_tell()     what became of a grant (REPORT, or SETTLE for
 *                       one the connection that held it took away)
 *   gatelink_ask_slot(), gatelink_release()  a kept session's
 *                       connection slot
 *   gatelink_counts()   the counters (counts.c) as a COUNTS line
 *
 * The answers: GRANT, LATER, ERR and OK (to a CANCEL) for a job's
 * request go to ops->answer; GRANT and ERR for a tag no job has, to
 * ops->slot (a session's); SUSPENDED, the answer to a report, to
 * ops->suspended; one nobody takes is logged.  Waiting for a grant is
 * silence on the socket, and costs nothing.
 *
 * If the gate is not there (not started yet, restarting), nothing is
 * sent: ops->connected is called once the connection is (again) made,
 * after 0.1, 0.2, 0.4 ... 30 seconds, to ask what waits.  When it is
 * lost, every tag goes with it (the gate counts grants held as unknown
 * outcomes), and ops->slots_lost and ops->lost say so; a running job's
 * outcome is SETTLEd on the next connection, as is that of a delivery an
 * earlier weir-send handed over (flight.c): by the grant's id, which
 * every job keeps.
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
on_reply(struct sched *s, const struct gp_reply *r)
{
	const struct gatelink_ops *ops = s->gate_ops;
	struct job *j = r->tag ? by_tag(s, r->tag) : NULL;

	switch (r->verb) {
	case GP_R_SUSPENDED:
		ops->suspended(s, r->tag, r->secs);
		return;
	case GP_R_GRANT:
	case GP_R_LATER:
	case GP_R_OK:
	case GP_R_ERR:
		if (j ? ops->answer(s, j, r) : r->tag && ops->slot(s, r))
			return;
		break;
	default:
		return;
	}
	/* No request of ours waits for it. */
	if (r->verb == GP_R_GRANT)
		log_warnx("weir-gate: a grant for unknown request %u", r->tag);
	else if (r->verb == GP_R_LATER)
		log_warnx("weir-gate: LATER for unknown request %u", r->tag);
	else if (r->verb == GP_R_ERR)
		log_warnx("weir-gate: %s %s (request %u)", gp_code_name(r->code), r->text, r->tag);
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
	s->gate_ops->connected(s);
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
gatelink_open(struct sched *s, const struct gatelink_ops *ops)
{
	s->gate_ops = ops;
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
	struct job *j;

	log_warnx("lost weir-gate (%s); nothing is sent until it is back", why);
	evloop_timer_cancel(s->ev, s->gate_lost);
	s->gate_lost = NULL;
	evloop_unwatch(s->ev, s->gc.fd);
	gc_close(&s->gc);
	s->gate_up = 0;
	/* Every tag went with the connection: the sessions' slots and the
	 * jobs' requests and grants (a running job's report has nowhere to
	 * go: its grant is SETTLEd on the next connection). */
	s->gate_ops->slots_lost(s);
	for (j = s->jobs; j; j = j->next)
		j->tag = 0;
	s->gate_ops->lost(s);
	if (s->gate_retry == NULL)
		s->gate_retry = evloop_timer_at(s->ev, clock_mono_ms() + s->gate_backoff,
		    on_retry, s);
}

/* The next tag of ours (never 0). */
static uint32_t
next_tag(struct sched *s)
{
	if (++s->next_tag == 0)
		s->next_tag = 1;
	return s->next_tag;
}

void
gatelink_ask(struct sched *s, struct job *j, const struct route_when *unless)
{
	const char *up = s->ups[j->up].name;
	/* The gate picks a class by sender; an address it cannot carry is
	 * classed by its recipient count alone. */
	const char *sender = gp_valid_word(j->m->sender, GP_SENDER_MAX) ? j->m->sender : NULL;

	j->tag = 0;
	if (!s->gate_up)
		return;
	j->tag = next_tag(s);
	j->asked = clock_mono_ms();
	j->ask_seq = ++s->ask_seq;
	if (gc_acquire_unless(&s->gc, j->tag, up, NULL, sender, 1, (uint32_t)j->n,
	    (uint32_t)j->conn, unless) < 0)
		gate_lost_soon(s, "a request");
}

int
gatelink_use(struct sched *s, uint32_t *tag)
{
	if (s->gate_up && *tag != 0 && gc_start(&s->gc, *tag) == 0)
		return 0;
	/* The connection is going (its reader will see to it): the gate
	 * gives the grant back; nothing of it must go out. */
	*tag = 0;
	return -1;
}

uint32_t
gatelink_ask_slot(struct sched *s, size_t up)
{
	uint32_t tag;

	if (!s->gate_up)
		return 0;
	tag = next_tag(s);
	if (gc_acquire(&s->gc, tag, s->ups[up].name, NULL, NULL, 0, 0, 1) < 0) {
		gate_lost_soon(s, "a session's request");
		return 0;
	}
	return tag;
}

void
gatelink_release(struct sched *s, uint32_t tag, int used)
{
	if (!s->gate_up || tag == 0)
		return;
	if ((used ? gc_report_nomail(&s->gc, tag) : gc_report_refund(&s->gc, tag)) < 0)
		gate_lost_soon(s, "a report");
}

int
gatelink_cancel(struct sched *s, uint32_t tag)
{
	if (!s->gate_up || tag == 0)
		return -1;
	if (gc_cancel(&s->gc, tag) < 0)
		gate_lost_soon(s, "a cancel");
	return 0;
}

uint32_t
gatelink_tell(struct sched *s, struct job *j, enum gp_outcome how, uint32_t accepted,
    const char *reply)
{
	uint64_t grant = j->grant;
	uint32_t tag = j->tag;

	j->grant = 0;
	if (!s->gate_up)
		return 0;	/* the gate counts it as unknown: until its grace is over */
	if (tag == 0) {
		/* Its grant went with the connection that held it (an earlier
		 * weir-send's: flight.c; or the gate was lost): the gate
		 * counts it as unknown, and may now settle it. */
		if (grant != 0 && how != GP_UNKNOWN && s->ups[j->up].name &&
		    gc_settle(&s->gc, s->ups[j->up].name, grant, how, accepted,
		    how == GP_SENT ? j->sent_at : -1, reply) < 0)
			gate_lost_soon(s, "a report");
		return 0;
	}
	j->tag = 0;
	if (gc_report(&s->gc, tag, how, accepted, how == GP_SENT ? j->sent_at : -1, reply) < 0) {
		gate_lost_soon(s, "a report");
		return 0;
	}
	return tag;
}

int
gatelink_counts(struct sched *s, const char *up, const uint64_t *counts)
{
	if (!s->gate_up)
		return -1;
	if (gc_counts(&s->gc, up, counts) < 0) {
		gate_lost_soon(s, "counts");
		return -1;
	}
	return 0;
}
