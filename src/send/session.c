/*
 * session.c: kept sessions to an upstream.  A session is one
 * `weir-remote -S` (remote.h) holding one connection to the upstream,
 * through which weir-send delivers message after message:
 *
 *   ASKING   weir-send asked weir-gate for a connection slot (an ACQUIRE
 *            of 0 messages, 0 recipients, 1 connection): the session
 *            holds it as long as it lives, so the gate's max_connections
 *            counts sessions and a connections window counts each new
 *            session once, whatever it carries
 *   IDLE     the slot is granted; the deliverer runs (or starts with the
 *            first message) and waits for a message
 *   BUSY     a message is on it: a job whose own grant (1 message, n
 *            recipients, 0 connections) weir-send holds, handed over as
 *            one datagram on a SOCK_SEQPACKET socketpair with three
 *            descriptors (mail/sessproto.h defines the protocol):
 *            mess/S/N (read-only: the deliverer never opens the queue),
 *            the report pipe and the outcome pipe.  The job
 *            completes as a deliverer's own does (deliver.c, then
 *            complete.c) once both pipes are closed and the session said
 *            "ready" or "closing" (or died: then it is a crash, as for a
 *            deliverer of its own)
 *   ENDING   weir-send closed its end (idle for the upstream's
 *            session_idle, messages_per_connection reached, a reload, the
 *            gate lost, a throttle) or the deliverer said "closing": it
 *            QUITs and exits; when it is reaped, the slot goes back to the
 *            gate (NOMAIL: only the connection is logged; REFUND if it
 *            never had a message)
 *
 * A batch too big for one datagram, and deliverers that are not
 * weir-remote ($WEIR_REMOTE: a qmail-remote), go through a deliverer of
 * their own (deliver.c), as does every message of an upstream with
 * session_idle = 0.
 *
 * sched/sessions lists the open sessions for `weir status`, one line
 * each, "UPSTREAM PID SINCE SENT" (SINCE: the wall time its slot was
 * granted; SENT: messages handed to it), rewritten through
 * sched/sessions.tmp and a rename at most once a second after one
 * starts, takes a message or ends (not once per message: it is a hint,
 * never fsynced, never read back by weir-send).
 *
 * Trusts: the deliverer's word only through sp_parse_word().  Config
 * keys: session_idle (upstream sections), concurrency.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/log.h"
#include "mail/sessproto.h"
#include "send/sendint.h"

enum dstate { DS_ASKING, DS_IDLE, DS_BUSY, DS_ENDING };

struct dsess {
	struct sched *s;
	size_t up;		/* its queue in s->ups (not kept up to date once ENDING) */
	enum dstate state;
	uint32_t tag;		/* its connection slot at the gate; 0: none held */
	pid_t pid;		/* its weir-remote -S; 0: not started */
	int sock;		/* our end; -1: closed */
	unsigned sent;		/* messages handed to it */
	unsigned max;		/* messages_per_connection; 0: no cap */
	int retire;		/* end it once its message is done (a reload) */
	long long since;	/* wall time of its slot */
	int flight;		/* its flight file (flight.c); -1: none */
	char flight_name[64];
	struct job *job;	/* the message on it */
	struct evtimer *idle;
	struct dsess *next;
};


int
sess_wanted(const struct sched *s, size_t up)
{
	return s->o->sessions && up < s->cfg->nupstreams &&
	    s->cfg->upstreams[up].session_idle > 0;
}

static unsigned
count(const struct sched *s, size_t up, int state)
{
	const struct dsess *d;
	unsigned n = 0;

	for (d = s->sessions; d; d = d->next)
		if (d->state != DS_ENDING && d->up == up && (state < 0 || (int)d->state == state))
			n++;
	return n;
}

static void
note_write(struct sched *s)
{
	const struct dsess *d;
	struct buf b = BUF_INIT;
	int fd, ok;

	for (d = s->sessions; d; d = d->next)
		if (d->pid > 0 && d->state != DS_ENDING)
			buf_printf(&b, "%s %ld %lld %u\n", s->ups[d->up].name, (long)d->pid,
			    d->since, d->sent);
	if (!s->notes_ok)
		goto out;	/* no sched/ (wait.c says so) */
	fd = openat(s->o->q->dfd, SCHED_SESSIONS_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ok = fd >= 0 && full_write(fd, b.s ? b.s : "", b.len) == 0;
	if (fd >= 0 && close(fd) < 0)
		ok = 0;
	if (ok && renameat(s->o->q->dfd, SCHED_SESSIONS_TMP, s->o->q->dfd, SCHED_SESSIONS) < 0)
		ok = 0;
	if (!ok) {
		log_warn("writing %s (for weir status)", SCHED_SESSIONS);
		if (fd >= 0)
			(void)unlinkat(s->o->q->dfd, SCHED_SESSIONS_TMP, 0);
	}
out:
	buf_free(&b);
}

static void
on_note(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)ev; (void)t;
	s->sess_note_timer = NULL;
	note_write(s);
}

/* A hint, not on the delivery path: written at most once a second. */
void
sess_note(struct sched *s)
{
	if (s->sess_note_timer == NULL)
		s->sess_note_timer = evloop_timer_at(s->ev, clock_mono_ms() + 1000, on_note, s);
	counts_due(s);
}

static void
sess_free(struct sched *s, struct dsess *d)
{
	struct dsess **p;

	for (p = &s->sessions; *p; p = &(*p)->next)
		if (*p == d) {
			*p = d->next;
			break;
		}
	evloop_timer_cancel(s->ev, d->idle);
	if (d->sock >= 0) {
		evloop_unwatch(s->ev, d->sock);
		close(d->sock);
	}
	if (d->flight >= 0)
		flight_close(s, d->flight, d->flight_name);
	free(d);
}

/* Close our end: the deliverer QUITs and exits (reaped in sess_reaped). */
static void
sess_end(struct sched *s, struct dsess *d, const char *why)
{
	if (d->state == DS_ENDING)
		return;
	if (d->state == DS_ASKING) {
		(void)gatelink_cancel(s, d->tag);
		sess_free(s, d);
		return;
	}
	log_info("session %ld to %s: ending after %u message%s: %s", (long)d->pid,
	    s->ups[d->up].name, d->sent, d->sent == 1 ? "" : "s", why);
	d->state = DS_ENDING;
	sess_note(s);
	evloop_timer_cancel(s->ev, d->idle);
	d->idle = NULL;
	if (d->sock >= 0) {
		evloop_unwatch(s->ev, d->sock);
		close(d->sock);
		d->sock = -1;
	}
	if (d->pid == 0) {
		gatelink_release(s, d->tag, 0);
		sess_free(s, d);
	}
}

static void
on_idle(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct dsess *d = arg;
	struct sched *s = d->s;

	(void)ev; (void)t;
	d->idle = NULL;
	sess_end(s, d, "idle");
}

/* The deliverer's word after each message (mail/sessproto.h): "ready"
 * for the next, or "closing"; its reports are then complete. */
static void
on_word(struct evloop *ev, int fd, int events, void *arg)
{
	struct dsess *d = arg;
	struct sched *s = d->s;
	struct job *j = d->job;
	static char w[SESSION_WORD_MAX + 1];
	struct sp_word wd;
	const char *why = "out of turn";
	ssize_t n;

	(void)ev; (void)events;
	do
		n = recv(fd, w, sizeof w, MSG_DONTWAIT | MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (j && n > 0 && (size_t)n < sizeof w && sp_parse_word(w, (size_t)n, &wd, &why) == 0) {
		d->job = NULL;
		if (wd.kind == SP_CLOSING) {
			sess_end(s, d, "the deliverer closed it");
		} else {
			d->state = DS_IDLE;
			if (wd.der) {
				/* The connection's TLS session, for the next ones. */
				buf_reset(&s->ups[d->up].tls);
				buf_add(&s->ups[d->up].tls, wd.der, wd.derlen);
			}
		}
		deliver_exited(s, j, 0);
		return;
	}
	if (n != 0) {
		log_warnx("session %ld: a word %s; ending it", (long)d->pid,
		    (size_t)n >= sizeof w ? "too long" : why);
		kill(-d->pid, SIGKILL);
	}
	/* Its message, if any, ends when it is reaped. */
	sess_end(s, d, "the deliverer's end");
}

/* remote_program -S [-f 3] -c CONFIG -u UPSTREAM HOST with the socket on
 * fd 0 and its flight file on fd 3.  0, -1, or GRANT_LOST (its slot). */
static int
sess_start(struct sched *s, struct dsess *d)
{
	int sv[2];
	const char *argv[12];

	if (gatelink_use(s, &d->tag) < 0)
		return GRANT_LOST;	/* its connection slot is lost with the gate */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_warn("session: socketpair");
		return -1;
	}
	d->flight = flight_open(s, d->flight_name, sizeof d->flight_name);
	deliver_argv(s, d->up, argv, d->flight >= 0 ? "-Sf" : "-S", NULL);
	d->pid = deliver_fork(argv, sv[1], -1, d->flight, d->flight >= 0 ? SIGTERM : SIGKILL);
	close(sv[1]);
	if (d->pid < 0) {
		d->pid = 0;
		close(sv[0]);
		return -1;
	}
	d->sock = sv[0];
	evloop_watch(s->ev, d->sock, EV_READ, on_word, d);
	if (s->ups[d->up].tls.len > 0) {
		/* The TLS session to resume. */
		struct buf b = BUF_INIT;

		sp_fmt_tls(&b, s->ups[d->up].tls.s, s->ups[d->up].tls.len);
		if (fd_send(d->sock, b.s, b.len, NULL, 0) < 0)
			log_warn("session %ld: offering a TLS session", (long)d->pid);
		buf_free(&b);
	}
	log_info("session %ld to %s: started", (long)d->pid, s->ups[d->up].name);
	return 0;
}

/* Hand j to d: its request (mail/sessproto.h) with mess/S/N and the
 * write ends of j's pipes.  0, or -1 or GRANT_LOST (j untouched, d
 * unusable). */
static int
hand(struct sched *s, struct dsess *d, struct job *j)
{
	struct buf req = BUF_INIT;
	int fds[SP_NFD] = { -1, -1, -1 }, rfd[2] = { -1, -1 }, k;
	size_t i;

	sp_fmt_message(&req, j->m->qid, j->grace, j->m->sender, (const char *const *)j->addrs,
	    j->n);
	if (d->pid == 0 && (k = sess_start(s, d)) < 0) {
		buf_free(&req);
		return k;
	}
	if (deliver_open(s, j, &fds[SP_FD_MESSAGE], rfd) < 0) {
		buf_free(&req);
		return -1;
	}
	fds[SP_FD_REPORT] = rfd[0];
	fds[SP_FD_OUTCOME] = rfd[1];
	/* The record first: a weir-send that dies after the START but before
	 * the request gives the grant back through it (flight.c). */
	if (d->flight >= 0)
		(void)flight_hand(s, d->flight, j);	/* logged: the message goes anyway */
	if (gatelink_use(s, &j->tag) < 0) {
		j->grant = 0;
		buf_free(&req);
		for (i = 0; i < SP_NFD; i++)
			close(fds[i]);
		deliver_unopen(s, j);
		if (d->flight >= 0)
			flight_clear(s, d->flight);
		return GRANT_LOST;
	}
	k = fd_send(d->sock, req.s, req.len, fds, SP_NFD);
	buf_free(&req);
	for (i = 0; i < SP_NFD; i++)
		close(fds[i]);
	if (k < 0) {
		log_warn("session %ld: handing msg %s over", (long)d->pid, j->m->qid);
		deliver_unopen(s, j);
		if (d->flight >= 0)
			flight_clear(s, d->flight);
		return -1;
	}
	evloop_timer_cancel(s->ev, d->idle);
	d->idle = NULL;
	d->state = DS_BUSY;
	d->job = j;
	d->sent++;
	sess_note(s);
	j->pid = d->pid;
	j->sess = d;
	return 0;
}

int
sess_fits(const struct job *j)
{
	/* Asked before its grant tells the grace: the longest one. */
	return sp_message_len(j->m->qid, SP_GRACE_MAX, j->m->sender,
	    (const char *const *)j->addrs, j->n) <= SESSION_REQUEST_MAX;
}

/* d has carried its messages_per_connection. */
static int
full(const struct dsess *d)
{
	return d->max && d->sent >= d->max;
}

int
sess_run(struct sched *s, struct job *j)
{
	struct dsess *d;
	int k;

	/* Not one that has carried its messages_per_connection: between its
	 * "ready" and sess_idle (which ends it) another job may come here. */
	for (d = s->sessions; d; d = d->next)
		if (d->up == j->up && d->state == DS_IDLE && !full(d))
			break;
	if (d == NULL)
		return 0;
	if ((k = hand(s, d, j)) < 0) {
		sess_end(s, d, k == GRANT_LOST ? "weir-gate was lost" :
		    "a message could not be handed over");
		return k;
	}
	return 1;
}

/* Deliverers of an earlier weir-send still connected to up (flight.c):
 * the gate let their slots go with that weir-send. */
static unsigned
orphans(const struct sched *s, size_t up)
{
	const struct job *j;
	unsigned n = 0;

	for (j = s->jobs; j; j = j->next)
		n += j->orphan && j->up == up;
	return n;
}

/* Connections to up at once: concurrency, and the policy's
 * max_connections if lower (the gate counts the slots, not orphans). */
static unsigned
sess_max(const struct sched *s, size_t up)
{
	const struct policy_upstream *pu = s->pol && s->ups[up].name ?
	    policy_upstream(s->pol, s->ups[up].name) : NULL;

	if (pu && pu->max_connections > 0 && (unsigned long long)pu->max_connections <
	    s->concurrency)
		return (unsigned)pu->max_connections;
	return s->concurrency;
}

void
sess_open(struct sched *s, size_t up, unsigned waiting)
{
	unsigned asking = count(s, up, DS_ASKING);
	struct dsess *d;

	waiting = waiting > asking ? waiting - asking : 0;
	while (waiting-- > 0 && count(s, up, -1) + orphans(s, up) < sess_max(s, up) &&
	    s->gate_up) {
		d = xcalloc(1, sizeof *d);
		d->s = s;
		d->up = up;
		d->sock = -1;
		d->flight = -1;
		d->state = DS_ASKING;
		d->next = s->sessions;
		s->sessions = d;
		if ((d->tag = gatelink_ask_slot(s, up)) == 0) {
			sess_free(s, d);
			return;
		}
	}
}

/* The session whose slot request is tag, or NULL. */
static struct dsess *
asking(struct sched *s, uint32_t tag)
{
	struct dsess *d;

	for (d = s->sessions; d; d = d->next)
		if (d->state == DS_ASKING && d->tag == tag)
			return d;
	return NULL;
}

int
sess_answer(struct sched *s, const struct gp_reply *r)
{
	struct dsess *d = asking(s, r->tag);

	if (d == NULL)
		return 0;
	switch (r->verb) {
	case GP_R_GRANT:
		d->state = DS_IDLE;
		d->max = r->msgs_per_conn;
		d->since = sched_wall();
		sess_idle(s, d);
		return 1;
	case GP_R_ERR:
		log_warnx("weir-gate refused a connection slot for %s: %s", s->ups[d->up].name,
		    r->text);
		sess_free(s, d);
		return 1;
	default:
		return 0;	/* a slot is asked without conditions: no LATER */
	}
}

/* d has no message: more, or the idle timer, or its end. */
void
sess_idle(struct sched *s, struct dsess *d)
{
	const struct weir_upstream *u = d->up < s->cfg->nupstreams ?
	    &s->cfg->upstreams[d->up] : NULL;

	if (d->state != DS_IDLE)
		return;
	if (d->retire || u == NULL || u->session_idle == 0) {
		sess_end(s, d, "the configuration changed");
		return;
	}
	if (full(d)) {
		sess_end(s, d, "messages_per_connection reached");
		return;
	}
	deliver_kick(s, d->up);
	if (d->state == DS_IDLE && d->idle == NULL)
		d->idle = evloop_timer_at(s->ev, clock_mono_ms() +
		    (uint64_t)u->session_idle * 1000, on_idle, d);
}

void
sess_job_done(struct sched *s, struct job *j)
{
	struct dsess *d = j->sess;

	if (d == NULL)
		return;
	j->sess = NULL;
	if (d->job == j)
		d->job = NULL;
	/* Its marks are durable: the record may go (flight.c). */
	if (d->flight >= 0)
		flight_clear(s, d->flight);
	sess_idle(s, d);
}

int
sess_reaped(struct sched *s, pid_t pid, int status)
{
	struct dsess *d;

	for (d = s->sessions; d; d = d->next)
		if (d->pid == pid)
			break;
	if (d == NULL)
		return 0;
	if (WIFSIGNALED(status))
		log_warnx("session %ld to %s: killed by signal %d", (long)pid,
		    d->state == DS_ENDING ? "its upstream" : s->ups[d->up].name, WTERMSIG(status));
	if (d->job) {
		struct job *j = d->job;

		d->job = NULL;
		j->sess = NULL;
		deliver_exited(s, j, status);
	}
	sess_end(s, d, "the deliverer exited");
	gatelink_release(s, d->tag, d->sent > 0);
	sess_free(s, d);
	return 1;
}

void
sess_end_idle(struct sched *s, size_t up, const char *why)
{
	struct dsess *d, *next;

	for (d = s->sessions; d; d = next) {
		next = d->next;
		if (d->up == up && (d->state == DS_IDLE || d->state == DS_ASKING))
			sess_end(s, d, why);
	}
}

void
sess_end_all(struct sched *s, const char *why)
{
	struct dsess *d, *next;
	size_t i;

	for (i = 0; i < s->nups; i++)
		buf_free(&s->ups[i].tls);	/* verification may ask more now */
	for (d = s->sessions; d; d = next) {
		next = d->next;
		if (d->state == DS_BUSY)
			d->retire = 1;
		else
			sess_end(s, d, why);
	}
}

void
sess_forget_slots(struct sched *s)
{
	struct dsess *d, *next;

	for (d = s->sessions; d; d = next) {
		next = d->next;
		d->tag = 0;	/* the gate dropped them with the connection */
		if (d->state == DS_ASKING)
			sess_free(s, d);
		else if (d->state == DS_BUSY)
			d->retire = 1;
		else
			sess_end(s, d, "weir-gate was lost");
	}
}

void
sess_remap(struct sched *s)
{
	struct dsess *d;

	for (d = s->sessions; d; d = d->next)
		if (d->state == DS_BUSY && d->job)
			d->up = d->job->up;
}

unsigned
sess_count_open(const struct sched *s, size_t up)
{
	const struct dsess *d;
	unsigned n = 0;

	for (d = s->sessions; d; d = d->next)
		n += d->pid > 0 && d->state != DS_ENDING && d->up == up;
	return n;
}
