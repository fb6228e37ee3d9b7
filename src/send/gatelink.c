/*
 * gatelink.c: weir-send's side of weir-gate.  One connection; every
 * batch is an ACQUIRE (1 message, n recipients, 1 connection) tagged with
 * a number of ours; the deliverer runs only once its GRANT arrives, and
 * weir-send REPORTs what the deliverer said happened.  Waiting for a grant
 * is silence on the socket, and costs nothing.
 *
 * If the gate is not there (not started yet, restarting), nothing is
 * sent: requests wait and are asked again once the connection is back,
 * after 1, 2, 4 ... 30 seconds.  Grants held when the connection drops
 * are counted by the gate as sent; jobs not yet running go back to their
 * FIFO.
 *
 * Trusts: the gate's replies only through gateclient's parser.
 * Config keys: gate_socket.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "send/sendint.h"

#define BACKOFF_MIN_MS	100	/* weir run starts the gate a moment before us */
#define BACKOFF_MAX_MS	30000

static void gate_down(struct sched *s, const char *why);

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
	struct job *j = r->tag ? by_tag(s, r->tag) : NULL;

	switch (r->verb) {
	case GP_R_GRANT:
		if (j == NULL && sess_granted(s, r->tag, r->msgs_per_conn))
			return;
		if (j == NULL || j->state != J_ASKING) {
			log_warnx("weir-gate: a grant for unknown request %u", r->tag);
			return;
		}
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
	log_info("connected to weir-gate at %s", s->cfg->gate_socket);
	s->gate_up = 1;
	s->gate_backoff = BACKOFF_MIN_MS;
	evloop_watch(s->ev, s->gc.fd, EV_READ, on_readable, s);
	for (j = s->jobs; j && s->gate_up; j = j->next)
		if (j->state == J_ASKING && j->tag == 0)
			gate_ask(s, j);
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
gate_down(struct sched *s, const char *why)
{
	struct job *j, *next;

	log_warnx("lost weir-gate (%s); nothing is sent until it is back", why);
	evloop_unwatch(s->ev, s->gc.fd);
	gc_close(&s->gc);
	s->gate_up = 0;
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
	int k;

	if (!s->gate_up || j->tag == 0)
		return;	/* the gate already counted it as sent */
	switch (how) {
	case GP_THROTTLED:
		k = gc_report_throttled(&s->gc, j->tag, reply);
		s->ups[j->up].throttle_tag = j->tag;
		break;
	case GP_REFUND:
		k = gc_report_refund(&s->gc, j->tag);
		break;
	case GP_AUTHFAIL:
		/* No hold here (throttle_tag): the gate's suspension paces
		 * the tries, and its RESUME or a reload lifts it at once. */
		k = gc_report_authfail(&s->gc, j->tag, reply);
		break;
	case GP_NOMAIL:
		k = gc_report_nomail(&s->gc, j->tag);
		break;
	case GP_UNKNOWN:
		k = gc_report_unknown(&s->gc, j->tag);
		break;
	case GP_SENT:
		k = gc_report_sent(&s->gc, j->tag, accepted, j->sent_at);
		break;
	default:
		panic("gate_tell: outcome %d", (int)how);
	}
	j->tag = 0;
	if (k < 0)
		gate_down(s, strerror(errno));
}
