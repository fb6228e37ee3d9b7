/*
 * server.c: weir-gate's daemon (see server.h).  The events of one round
 * of the loop (clients' bytes, the timer, a signal, a policy file change)
 * are handled, then settle() grants what now fits, makes the grants
 * durable in the journal with one fdatasync for the whole batch, answers
 * them, and sets the one timer to the exact instant the next waiting
 * request could fit.  A waiting request costs nothing until then.
 *
 * Clients: non-blocking, input bounded to a few lines, output bounded
 * (a client that does not read its answers is dropped), a bounded number
 * of requests each.  A framing error (over-long line, NUL, control byte)
 * is answered and the connection closed; a well-framed bad request is
 * answered and the connection kept.  A client that goes away loses its
 * waiting requests, and its grants count as outcomes unknown (accepted
 * at any instant from the grant to now + the upstream's grace), until a
 * SETTLE says what became of one (do_settle); a grant of a client that
 * said STARTS and never STARTed it reached no deliverer: refunded.
 *
 * The read-only status socket (gate_status_socket, mode 0666: whoever
 * reaches its folder): the same parser and limits, but only STATUS is
 * served (anything else: ERR READONLY, the connection kept); its clients
 * have their own smaller bound, so they never take the deliverers' slots
 * or descriptors; a client's next lines are not read until it has read
 * the answers to the last ones.
 *
 * SIGTERM or SIGINT: stop accepting and granting, let the clients still
 * connected report for STOP_LINGER_MS at most (weir-send, stopped at the
 * same instant, gives back its unused grants), then exit.
 *
 * Policy: re-read on SIGHUP and when the file changes (inotify on its
 * folder, so editors that rename are seen too); a policy with errors is
 * logged with file:line and the old one stays in force (at start: none,
 * and every request waits for a good one).
 *
 * Trusts: clients only through gateproto.c's parser; on the status
 * socket, nothing (anyone may connect).  Config keys: gate_socket,
 * gate_status_socket, policy_file.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gate/creds.h"
#include "gate/journal.h"
#include "gate/server.h"
#include "gate/shared.h"
#include "gate/status.h"
#include "gate/window.h"
#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/unixlisten.h"
#include "mail/credfp.h"
#include "mail/gateproto.h"
#include "mail/policy.h"

#define CLIENTS_MAX	1024
#define STATUS_CLIENTS_MAX 32	/* on the status socket, beside CLIENTS_MAX */
#define CLIENT_REQS_MAX	4096
#define OUT_MAX		(4 << 20)	/* unread answers before a client is dropped */

struct client;

struct creq {
	uint32_t tag;
	struct wg_req *r;
	struct client *c;
	struct creq *next;	/* in the client's list */
	struct creq *gnext;	/* in the list of grants to answer */
};

struct server;

struct client {
	struct server *s;
	int fd;
	struct buf in, out;
	size_t outoff;
	struct creq *reqs;
	size_t nreqs;
	int closing;		/* answer what is queued, then close */
	int readonly;		/* came in on the status socket: STATUS only */
	int starts;		/* STARTS: its grants are in use once STARTed */
	struct client *next;
};

struct server {
	const struct gate_opts *o;
	struct evloop *ev;
	int lfd, ifd;
	int sfd;		/* the status socket, -1: none */
	struct wgate g;
	struct policy *pol;
	struct stat pol_st;
	struct journal j;
	struct client *clients;
	size_t nclients;
	size_t nstatus;			/* of them, on the status socket */
	struct evtimer *timer;
	int64_t timer_at;
	struct creq *ghead, *gtail;	/* granted, answer after the journal sync */
	int64_t wmm;			/* wall ms minus monotonic ms */
	int64_t grace_ms;		/* -g: how long a lost grant may still send,
					 * for an upstream whose policy sets no grace */
	int stopping;
	int64_t stop_by;		/* stopping: the end of STOP_LINGER_MS */
	int accept_paused;		/* out of fds: wait for a client to go */
	/* The journal cannot be made durable: grant nothing, rewrite it on
	 * a timer until that works (jbroken: why; NULL when all is well). */
	char *jbroken;
	struct evtimer *jtimer;
	int64_t jretry_ms;
	struct shared *sh;		/* upstreams with a shared store */
	struct creds creds;		/* the upstreams' credentials now */
};

#define JRETRY_MIN_MS	1000
#define JRETRY_MAX_MS	30000
/* At a stop, how long clients still connected may report (weir-send,
 * stopped at the same instant by weir run or its death, gives back the
 * grants it has not used); nothing is granted meanwhile. */
#define STOP_LINGER_MS	2000

static int64_t
now_mono(void)
{
	return (int64_t)clock_mono_ms();
}

/* The same clock rounded up: the time a report or a disconnect is logged
 * at.  A send reported at 1000.3 ms is logged at 1001, so it leaves a
 * window of T no sooner than 1000.3 + T; grants are checked at the time
 * rounded down.  Sub-millisecond exactness for sliding windows. */
static int64_t
now_mono_ceil(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
		panic("clock_gettime(CLOCK_MONOTONIC) failed");
	return (int64_t)ts.tv_sec * 1000 + (ts.tv_nsec + 999999) / 1000000;
}

static int64_t
now_wall(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		panic("clock_gettime(CLOCK_REALTIME) failed");
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drop_client(struct server *s, struct client *c, const char *why);
static void on_accept(struct evloop *ev, int fd, int events, void *arg);

/* ---- output ---- */

static void on_client(struct evloop *ev, int fd, int events, void *arg);

/* Write what we can.  0 ok (maybe more to write), -1 the client is gone. */
static int
flush_client(struct server *s, struct client *c)
{
	ssize_t n;

	while (c->outoff < c->out.len) {
		n = write(c->fd, c->out.s + c->outoff, c->out.len - c->outoff);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			drop_client(s, c, strerror(errno));
			return -1;
		}
		c->outoff += (size_t)n;
	}
	if (c->outoff == c->out.len) {
		buf_reset(&c->out);
		c->outoff = 0;
		if (c->closing) {
			drop_client(s, c, NULL);
			return -1;
		}
	}
	if (c->out.len - c->outoff > OUT_MAX) {
		drop_client(s, c, "does not read its answers");
		return -1;
	}
	/* A status client's next lines wait until it has read its answers. */
	evloop_watch(s->ev, c->fd, (c->closing || (c->readonly && c->out.len > c->outoff) ?
	    0 : EV_READ) | (c->out.len > c->outoff ? EV_WRITE : 0), on_client, c);
	return 0;
}

static void
reply_err(struct client *c, uint32_t tag, enum gp_code code, const char *text)
{
	struct gp_reply r;

	memset(&r, 0, sizeof r);
	r.verb = GP_R_ERR;
	r.tag = tag;
	r.code = code;
	snprintf(r.text, sizeof r.text, "%s", text);
	gp_fmt_reply(&c->out, &r);
}

static void
reply_simple(struct client *c, enum gp_rverb verb, uint32_t tag, uint64_t secs)
{
	struct gp_reply r;

	memset(&r, 0, sizeof r);
	r.verb = verb;
	r.tag = tag;
	r.secs = secs;
	gp_fmt_reply(&c->out, &r);
}

/* ---- requests ---- */

static struct creq *
find_req(struct client *c, uint32_t tag, struct creq ***link)
{
	struct creq **pp;

	for (pp = &c->reqs; *pp; pp = &(*pp)->next)
		if ((*pp)->tag == tag) {
			if (link)
				*link = pp;
			return *pp;
		}
	return NULL;
}

static void
forget_req(struct client *c, struct creq *q)
{
	struct creq **pp;

	if (find_req(c, q->tag, &pp) != q)
		panic("server: request %u not on its client", q->tag);
	*pp = q->next;
	c->nreqs--;
	free(q);
}

static const char *
code_text(enum wg_code code)
{
	switch (code) {
	case WG_NOPOLICY: return "no policy for that upstream";
	case WG_NOCLASS: return "no such class";
	case WG_TOOBIG: return "larger than a window's limit or a cap: it can never be granted";
	case WG_BADWEIGHT: return "every weight is zero";
	default: return "refused";
	}
}

static enum gp_code
wire_code(enum wg_code code)
{
	switch (code) {
	case WG_NOPOLICY: return GP_NOPOLICY;
	case WG_NOCLASS: return GP_NOCLASS;
	case WG_TOOBIG: return GP_TOOBIG;
	case WG_BADWEIGHT: return GP_BADWEIGHT;
	default: return GP_INTERNAL;
	}
}

static void
on_granted(void *arg, struct wg_req *r)
{
	struct server *s = arg;
	struct creq *q = r->owner;

	journal_grant(&s->j, r, r->since, r->since + s->wmm);
	q->gnext = NULL;
	if (s->gtail)
		s->gtail->gnext = q;
	else
		s->ghead = q;
	s->gtail = q;
}

/* Grants of u this gate holds (for a write-back to an emptied store). */
static struct wg_req **
held_of(struct server *s, const struct wg_up *u, size_t *n)
{
	struct wg_req **v = NULL;
	struct client *c;
	struct creq *q;

	*n = 0;
	for (c = s->clients; c; c = c->next)
		for (q = c->reqs; q; q = q->next)
			if (q->r && q->r->granted && q->r->up == u) {
				v = xrealloc(v, (*n + 1) * sizeof *v);
				v[(*n)++] = q->r;
			}
	return v;
}

static int
on_admit(void *arg, struct wg_req *r, int64_t now, int64_t *retry)
{
	struct server *s = arg;
	const struct policy_upstream *pu = policy_upstream(s->pol, r->up->name);
	struct wg_req **held;
	size_t n;
	int ok;

	if (pu == NULL || pu->shared == NULL) {
		*retry = now + SHARED_RETRY_MS;
		return 0;
	}
	held = held_of(s, r->up, &n);
	ok = shared_admit(s->sh, pu, r, held, n, now, retry);
	free(held);
	return ok;
}

static void
on_ended(void *arg, struct wg_req *r, enum wg_outcome o, const struct wg_done *d, int64_t now)
{
	struct server *s = arg;
	const struct policy_upstream *pu = policy_upstream(s->pol, r->up->name);

	if (pu && pu->shared)
		shared_ended(s->sh, pu, r, o, d, now, r->up->grace);
}

/* A suspension (until > now) or its lifting (0), for every host. */
static void
share_suspend(struct server *s, const struct wg_up *u, int64_t until, int64_t now)
{
	const struct policy_upstream *pu = policy_upstream(s->pol, u->name);

	if (pu && pu->shared)
		shared_suspend(s->sh, pu, u, until, now);
}

static void
on_refused(void *arg, struct wg_req *r, enum wg_code code)
{
	struct creq *q = r->owner;
	struct gp_reply rp;
	int64_t left;

	(void)arg;
	if (code != WG_LATER) {
		reply_err(q->c, q->tag, wire_code(code), code_text(code));
		forget_req(q->c, q);
		return;
	}
	/* Its conditions hold (mail/route.h): the client asks elsewhere. */
	left = (r->later_until - now_mono() + 999) / 1000;
	memset(&rp, 0, sizeof rp);
	rp.verb = GP_R_LATER;
	rp.tag = q->tag;
	rp.why = r->later_why;
	rp.secs = left < 1 ? 1 : left > GP_LATER_MAX ? GP_LATER_MAX : (uint64_t)left;
	gp_fmt_reply(&q->c->out, &rp);
	forget_req(q->c, q);
}

/* What a report said of the upstream's reach (window.h): one log line
 * when an unreachable spell begins or ends. */
static void
reach_logged(struct wg_up *u, const struct wg_done *d, int64_t now)
{
	if (d->down_began)
		log_warnx("upstream %s: unreachable: %s; requests that may go to a fallback "
		    "wait for a probe to get through or their threshold (fallback_when)", u->name,
		    u->down_reason ? u->down_reason : "");
	else if (d->down_ended)
		log_info("upstream %s: reachable again after %lld s", u->name,
		    (long long)((now - d->down_from + 999) / 1000));
}

static void
do_acquire(struct server *s, struct client *c, const struct gp_req *rq, int64_t now)
{
	struct creq *q;
	enum wg_code code;

	if (find_req(c, rq->tag, NULL)) {
		reply_err(c, rq->tag, GP_DUPTAG, "tag already in use on this connection");
		return;
	}
	if (c->nreqs >= CLIENT_REQS_MAX) {
		reply_err(c, rq->tag, GP_LIMIT, "too many requests on this connection");
		return;
	}
	q = xcalloc(1, sizeof *q);
	q->tag = rq->tag;
	q->c = c;
	code = wg_acquire(&s->g, rq->upstream, rq->cls[0] ? rq->cls : NULL,
	    rq->sender[0] ? rq->sender : NULL, rq->w, &rq->unless, q, now, &q->r);
	if (code != WG_OK) {
		free(q);
		reply_err(c, rq->tag, wire_code(code), code_text(code));
		return;
	}
	q->r->started = !c->starts;
	q->next = c->reqs;
	c->reqs = q;
	c->nreqs++;
}

/* The journal record of what a report or a cancel logged. */
static void
journal_done(struct server *s, uint64_t id, const struct wg_done *d, char type, int64_t now)
{
	if (d->logged)
		journal_end(&s->j, id, type, d->t, d->t + s->wmm);
	else
		journal_end(&s->j, id, 'R', now, now + s->wmm);
}

/* What a report (or a settlement) of a throttle or an authentication
 * failure, or a REFUSED, did: the suspension journalled, shared and
 * logged (an authentication failure only when it began an episode, with
 * what mends it for the upstream's kind: mail/credfp.h). */
static void
suspended(struct server *s, struct wg_up *u, int auth, const char *reply,
    const struct wg_done *d, int64_t now)
{
	long long secs = (long long)((d->until - now + 999) / 1000);
	struct buf fix = BUF_INIT;

	if (auth && !d->new_episode)
		return;
	if (auth) {
		/* The suspension belongs to these credentials (creds.h). */
		u->auth_fp = creds_of(&s->creds, u->name);
		u->auth_fp_known = 1;
		u->auth_oauth = creds_oauth(&s->creds, u->name);
	}
	journal_suspend(&s->j, u, auth, now, now + s->wmm);
	share_suspend(s, u, d->until, now);
	if (auth) {
		cred_fix(&fix, u->name, u->auth_oauth, reply);
		log_warnx("upstream %s: authentication failed: %s; %s; suspended for %lld s (then "
		    "one try at a time); a reload (SIGHUP), a restart with changed credentials or "
		    "RESUME lifts it", u->name, reply, fix.s, secs);
		buf_free(&fix);
	} else
		log_warnx("upstream %s suspended for %lld s%s: %s", u->name, secs,
		    u->susp_quota ? " (its quota)" : "", reply);
}

static void
do_report(struct server *s, struct client *c, const struct gp_req *rq, int64_t now)
{
	struct creq *q = find_req(c, rq->tag, NULL);
	struct wg_done d;
	struct wg_up *u;
	uint64_t id;

	if (q == NULL) {
		reply_err(c, rq->tag, GP_TAG, "no such request");
		return;
	}
	if (!q->r->granted) {
		reply_err(c, rq->tag, GP_STATE, "not granted yet: CANCEL it instead");
		return;
	}
	u = q->r->up;
	id = q->r->id;
	switch (rq->outcome) {
	case GP_SENT:
		/* <at> is rounded down: the 250 came before its end. */
		q->r->accepted = rq->accepted;
		wg_report_at(&s->g, q->r, WG_SENT, NULL, rq->at < 0 ? -1 : rq->at + 1, now, &d);
		journal_done(s, id, &d, 'S', now);
		reply_simple(c, GP_R_OK, rq->tag, 0);
		break;
	case GP_REFUND:
		wg_report_at(&s->g, q->r, WG_REFUND, NULL, -1, now, &d);
		journal_done(s, id, &d, 'R', now);
		reply_simple(c, GP_R_OK, rq->tag, 0);
		break;
	case GP_UNKNOWN:
		wg_report_at(&s->g, q->r, WG_UNKNOWN, NULL, -1, now, &d);
		journal_done(s, id, &d, 'X', now);
		reply_simple(c, GP_R_OK, rq->tag, 0);
		break;
	case GP_NOMAIL:
		wg_report_at(&s->g, q->r, WG_NOMAIL, NULL, -1, now, &d);
		journal_done(s, id, &d, 'N', now);
		reply_simple(c, GP_R_OK, rq->tag, 0);
		break;
	case GP_AUTHFAIL:
		wg_report_at(&s->g, q->r, WG_AUTHFAIL, rq->text, -1, now, &d);
		journal_done(s, id, &d, 'N', now);
		suspended(s, u, 1, rq->text, &d, now);
		reply_simple(c, GP_R_SUSPENDED, rq->tag, (uint64_t)((d.until - now + 999) / 1000));
		break;
	case GP_THROTTLED:
	case GP_QUOTA:
		wg_report_at(&s->g, q->r, rq->outcome == GP_QUOTA ? WG_QUOTA : WG_THROTTLED,
		    rq->text, -1, now, &d);
		journal_done(s, id, &d, 'S', now);
		suspended(s, u, 0, rq->text, &d, now);
		reply_simple(c, GP_R_SUSPENDED, rq->tag, (uint64_t)((d.until - now + 999) / 1000));
		break;
	case GP_UNREACHED:
	case GP_NOGREETING:
		wg_report_at(&s->g, q->r, rq->outcome == GP_UNREACHED ? WG_UNREACHED :
		    WG_NOGREETING, rq->text, -1, now, &d);
		journal_done(s, id, &d, 'N', now);
		reply_simple(c, GP_R_OK, rq->tag, 0);
		break;
	}
	reach_logged(u, &d, now);
	q->r = NULL;
	forget_req(c, q);
}

/* The client that holds grant id, or NULL. */
static struct client *
holder(struct server *s, uint64_t id)
{
	struct client *c;
	struct creq *q;

	for (c = s->clients; c; c = c->next)
		for (q = c->reqs; q; q = q->next)
			if (q->r->granted && q->r->id == id)
				return c;
	return NULL;
}

/* SETTLE: a grant counted as unknown because its client went away has
 * an outcome after all (gateproto.h). */
static void
do_settle(struct server *s, struct client *c, const struct gp_req *rq, int64_t now)
{
	static const enum wg_outcome how[] = {
		[GP_SENT] = WG_SENT, [GP_REFUND] = WG_REFUND, [GP_NOMAIL] = WG_NOMAIL,
		[GP_THROTTLED] = WG_THROTTLED, [GP_AUTHFAIL] = WG_AUTHFAIL,
		[GP_UNREACHED] = WG_UNREACHED, [GP_NOGREETING] = WG_NOGREETING,
		[GP_QUOTA] = WG_QUOTA,
	};
	struct wg_up *u = wg_find(&s->g, rq->upstream);
	struct wg_done d;

	if (u == NULL) {
		reply_err(c, 0, GP_NOPOLICY, "no such upstream");
		return;
	}
	if (holder(s, rq->grant) != NULL) {
		reply_err(c, 0, GP_STATE, "a client holds that grant: it reports it");
		return;
	}
	if (!wg_settle(&s->g, u, rq->grant, how[rq->outcome], rq->text,
	    rq->at < 0 ? -1 : rq->at + 1, rq->accepted, now, &d)) {
		reply_simple(c, GP_R_OK, 0, 0);
		return;
	}
	journal_settle(&s->j, u, rq->grant, &d, now, now + s->wmm);
	/* The store has it as an unknown outcome too: this gate writes its
	 * history back, the settled send in it, at its next check. */
	if (u->shared)
		shared_rewrite(s->sh, u->name);
	if (rq->outcome == GP_THROTTLED || rq->outcome == GP_QUOTA || rq->outcome == GP_AUTHFAIL)
		suspended(s, u, rq->outcome == GP_AUTHFAIL, rq->text, &d, now);
	reach_logged(u, &d, now);
	log_info("upstream %s: send %llu, of unknown outcome since its client went away, "
	    "settled: %s%s", u->name, (unsigned long long)rq->grant,
	    d.logged ? "logged at its time" : "nothing logged", d.logged &&
	    d.w[UNIT_MESSAGES] == 0 ? " (its connection only)" : "");
	reply_simple(c, GP_R_OK, 0, 0);
}

static void
do_resume(struct server *s, struct client *c, const struct gp_req *rq)
{
	struct wg_up *u = wg_find(&s->g, rq->upstream);

	if (u == NULL) {
		reply_err(c, 0, GP_NOPOLICY, "no such upstream");
		return;
	}
	log_info("upstream %s: suspensions lifted%s (resume)", u->name,
	    wg_lift(u, 0, now_mono()) ? ", and its unreachable spell ended" : "");
	journal_lift(&s->j, u, 0);
	share_suspend(s, u, 0, now_mono());
	reply_simple(c, GP_R_OK, 0, 0);
}

/* Credentials refused outside a send (weir-remote -K): an authentication
 * suspension as REPORT AUTHFAIL would begin, nothing counted. */
static void
do_refused(struct server *s, struct client *c, const struct gp_req *rq)
{
	struct wg_up *u = wg_find(&s->g, rq->upstream);
	struct wg_done d;
	int64_t now = now_mono();

	if (u == NULL) {
		reply_err(c, 0, GP_NOPOLICY, "no such upstream");
		return;
	}
	memset(&d, 0, sizeof d);
	d.new_episode = wg_auth_refused(u, rq->text, now);
	d.until = u->auth_until;
	suspended(s, u, 1, rq->text, &d, now);
	reply_simple(c, GP_R_OK, 0, 0);
}

_Static_assert(WG_NCOUNTS == GP_NCOUNTS, "window.h's WG_NCOUNTS");

/* weir-send's counters: the latest line replaces the one before. */
static void
do_counts(struct server *s, struct client *c, const struct gp_req *rq)
{
	struct wg_up *u = wg_find(&s->g, rq->upstream);

	if (u == NULL) {
		reply_err(c, 0, GP_NOPOLICY, "no such upstream");
		return;
	}
	memcpy(u->counts, rq->counts, sizeof u->counts);
	u->has_counts = 1;
	reply_simple(c, GP_R_OK, 0, 0);
}

/* START: the grant goes to a deliverer (gateproto.h); STARTS: this
 * client's grants are in use only from their START. */
static void
do_start(struct client *c, const struct gp_req *rq)
{
	struct creq *q;

	if (rq->verb == GP_STARTS) {
		c->starts = 1;
		reply_simple(c, GP_R_OK, 0, 0);
		return;
	}
	if ((q = find_req(c, rq->tag, NULL)) == NULL) {
		reply_err(c, rq->tag, GP_TAG, "no such request");
		return;
	}
	if (!q->r->granted) {
		reply_err(c, rq->tag, GP_STATE, "not granted yet");
		return;
	}
	q->r->started = 1;
	reply_simple(c, GP_R_OK, rq->tag, 0);
}

static void
do_cancel(struct server *s, struct client *c, const struct gp_req *rq, int64_t now)
{
	struct creq *q = find_req(c, rq->tag, NULL);

	if (q == NULL) {
		reply_err(c, rq->tag, GP_TAG, "no such request");
		return;
	}
	if (q->r->granted) {
		reply_err(c, rq->tag, GP_STATE, "already granted: REPORT it instead");
		return;
	}
	wg_cancel(&s->g, q->r, now, NULL);
	forget_req(c, q);
	reply_simple(c, GP_R_OK, rq->tag, 0);
}

static struct wg_req **
held_for_status(void *arg, const struct wg_up *u, size_t *n)
{
	return held_of(arg, u, n);
}

static void
do_status(struct server *s, struct client *c, const struct gp_req *rq, int64_t now)
{
	struct buf body = BUF_INIT;
	struct gp_reply r;
	struct status_history h = { (int64_t)rq->history_s * 1000, held_for_status, s };

	gate_status(&body, &s->g, rq->json, now, s->wmm, s->jbroken, s->sh, &h);
	memset(&r, 0, sizeof r);
	r.verb = GP_R_STATUS;
	r.length = body.len;
	gp_fmt_reply(&c->out, &r);
	buf_add(&c->out, body.s, body.len);
	buf_free(&body);
}

/* One line, without its "\n". */
static void
handle_line(struct server *s, struct client *c, const char *line, size_t len)
{
	struct gp_req rq;
	const char *why = "bad request";
	enum gp_code code;
	int64_t now = now_mono();

	code = gp_parse_request(line, len, &rq, &why);
	if (code != GP_OK) {
		reply_err(c, 0, code, why);
		if (code == GP_NUL || code == GP_BYTE || code == GP_TOOLONG)
			c->closing = 1;
		return;
	}
	if (c->readonly && rq.verb != GP_STATUS) {
		reply_err(c, rq.tag, GP_READONLY, "only STATUS on this socket");
		return;
	}
	switch (rq.verb) {
	case GP_ACQUIRE: do_acquire(s, c, &rq, now); break;
	case GP_REPORT:  do_report(s, c, &rq, now_mono_ceil()); break;
	case GP_SETTLE:  do_settle(s, c, &rq, now_mono_ceil()); break;
	case GP_CANCEL:  do_cancel(s, c, &rq, now); break;
	case GP_START:
	case GP_STARTS:  do_start(c, &rq); break;
	case GP_STATUS:  do_status(s, c, &rq, now); break;
	case GP_RESUME:  do_resume(s, c, &rq); break;
	case GP_COUNTS:  do_counts(s, c, &rq); break;
	case GP_REFUSED: do_refused(s, c, &rq); break;
	}
}

/* ---- clients ---- */

static void
drop_client(struct server *s, struct client *c, const char *why)
{
	struct client **pp;
	struct creq *q, *n;
	struct wg_done d;
	/* A grant held by a client that went away may still be accepted by
	 * the upstream (a final dot handed to it just before): it counts as
	 * accepted at any instant from its grant to now + grace, which moves
	 * no other send (window.h); unless the client said it never handed
	 * it to a deliverer (STARTS, and no START): then it is refunded. */
	int64_t now = now_mono_ceil();

	if (why)
		log_info("client on fd %d dropped: %s", c->fd, why);
	for (q = c->reqs; q; q = n) {
		uint64_t id = q->r->id;
		int granted = q->r->granted;
		struct creq **gp;

		n = q->next;
		/* A grant not answered yet (the journal is not durable). */
		for (gp = &s->ghead; *gp; gp = &(*gp)->gnext)
			if (*gp == q) {
				*gp = q->gnext;
				break;
			}
		for (s->gtail = s->ghead; s->gtail && s->gtail->gnext; s->gtail = s->gtail->gnext)
			;
		wg_cancel(&s->g, q->r, now, &d);
		if (granted)
			journal_done(s, id, &d, 'X', now);
		free(q);
	}
	evloop_unwatch(s->ev, c->fd);
	if (close(c->fd) < 0)
		log_warn("close client");
	for (pp = &s->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	s->nclients--;
	if (c->readonly)
		s->nstatus--;
	if (s->accept_paused) {
		s->accept_paused = 0;
		evloop_watch(s->ev, s->lfd, EV_READ, on_accept, s);
		if (s->sfd >= 0)
			evloop_watch(s->ev, s->sfd, EV_READ, on_accept, s);
	}
	buf_free(&c->in);
	buf_free(&c->out);
	free(c);
}

static void
read_client(struct server *s, struct client *c)
{
	ssize_t n;
	size_t ll, off = 0;
	int f;

	buf_reserve(&c->in, GP_LINE_MAX);
	n = read_retry(c->fd, c->in.s + c->in.len, GP_LINE_MAX);
	if (n < 0) {
		if (errno != EAGAIN)
			drop_client(s, c, strerror(errno));
		return;
	}
	if (n == 0) {
		drop_client(s, c, NULL);
		return;
	}
	c->in.len += (size_t)n;
	while (!c->closing && (f = gp_frame(c->in.s + off, c->in.len - off, &ll)) != 0) {
		if (f < 0) {
			reply_err(c, 0, GP_TOOLONG, "line longer than 1024 bytes");
			c->closing = 1;
			break;
		}
		handle_line(s, c, c->in.s + off, ll - 1);
		off += ll;
	}
	memmove(c->in.s, c->in.s + off, c->in.len - off);
	c->in.len -= off;
	if (c->closing)
		buf_reset(&c->in);
}

static void
on_client(struct evloop *ev, int fd, int events, void *arg)
{
	struct client *c = arg;
	struct server *s = c->s;

	(void)fd; (void)ev;
	if ((events & EV_READ) && !c->closing) {
		struct client *p;

		read_client(s, c);
		for (p = s->clients; p && p != c; p = p->next)
			;
		if (p == NULL)
			return;	/* dropped */
	}
	(void)flush_client(s, c);
}

static void
on_accept(struct evloop *ev, int fd, int events, void *arg)
{
	struct server *s = arg;
	struct client *c;
	int cfd;

	(void)events;
	for (;;) {
		cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				/* The connection stays pending; stop watching
				 * the socket (or the loop would spin) until a
				 * client goes. */
				log_warn("accept: pausing until a client goes");
				evloop_unwatch(ev, s->lfd);
				if (s->sfd >= 0)
					evloop_unwatch(ev, s->sfd);
				s->accept_paused = 1;
			} else if (errno != EAGAIN && errno != ECONNABORTED) {
				log_warn("accept");
			}
			break;
		}
		if (fd == s->sfd ? s->nstatus >= STATUS_CLIENTS_MAX :
		    s->nclients - s->nstatus >= CLIENTS_MAX) {
			log_warnx("more than %d clients on %s: refusing one", fd == s->sfd ?
			    STATUS_CLIENTS_MAX : CLIENTS_MAX, fd == s->sfd ? "the status socket" :
			    "the socket");
			if (close(cfd) < 0)
				log_warn("close");
			continue;
		}
		c = xcalloc(1, sizeof *c);
		c->fd = cfd;
		c->s = s;
		c->readonly = fd == s->sfd;
		s->nstatus += (size_t)c->readonly;
		c->next = s->clients;
		s->clients = c;
		s->nclients++;
		evloop_watch(ev, cfd, EV_READ, on_client, c);
	}
}

/* ---- policy ---- */

static int
policy_changed(struct server *s)
{
	struct stat st;

	if (stat(s->o->policy, &st) < 0)
		return 0;
	return st.st_mtim.tv_sec != s->pol_st.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != s->pol_st.st_mtim.tv_nsec || st.st_ino != s->pol_st.st_ino ||
	    st.st_size != s->pol_st.st_size;
}

static void
reload(struct server *s, const char *why)
{
	struct policy *np = xcalloc(1, sizeof *np);
	struct buf err = BUF_INIT;
	struct wg_up *u;
	struct stat st;
	char *line, *save = NULL;

	if (stat(s->o->policy, &st) < 0)
		memset(&st, 0, sizeof st);
	if (policy_load(np, s->o->policy, &err) < 0) {
		for (line = strtok_r(err.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			log_warnx("policy not reloaded: %s", line);
		log_warnx("policy not reloaded (%s): the old one stays in force", why);
		free(np);
		buf_free(&err);
		s->pol_st = st;	/* do not retry until it changes again */
		return;
	}
	config_preset_limits(s->o->upstreams, s->o->nupstreams, np);	/* presets' limits */
	s->wmm = now_wall() - now_mono();
	wg_set_policy(&s->g, np, s->wmm, now_mono());
	/* The operator may have fixed the credentials: try again (one
	 * connection at a time until one gets through). */
	for (u = s->g.ups; u; u = u->next)
		if (u->auth_until > now_mono()) {
			(void)wg_lift(u, 1, now_mono());
			journal_lift(&s->j, u, 1);
			log_info("upstream %s: authentication suspension lifted (%s)", u->name, why);
		} else if (wg_reach_reset(u)) {
			/* Tried again at once, too. */
			log_info("upstream %s: its unreachable spell ended (%s)", u->name, why);
		}
	if (s->pol) {
		policy_free(s->pol);
		free(s->pol);
	}
	s->pol = np;
	s->pol_st = st;
	log_info("policy %s loaded (%s): %zu upstreams, %zu classes", s->o->policy, why,
	    np->nup, np->ncls);
	buf_free(&err);
}

static void
on_inotify(struct evloop *ev, int fd, int events, void *arg)
{
	struct server *s = arg;
	char chunk[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	(void)ev; (void)events;
	for (;;) {
		n = read_retry(fd, chunk, sizeof chunk);
		if (n <= 0)
			break;
	}
	if (policy_changed(s))
		reload(s, "file changed");
}

static void
on_signal(struct evloop *ev, int signo, void *arg)
{
	struct server *s = arg;

	if (signo == SIGHUP) {
		creds_reload(&s->creds, s->o->config_file);
		reload(s, "SIGHUP");
		return;
	}
	log_info("signal %d: stopping", signo);
	s->stopping = 1;
	s->stop_by = now_mono() + STOP_LINGER_MS;
	evloop_unwatch(ev, s->lfd);
	if (s->sfd >= 0)
		evloop_unwatch(ev, s->sfd);
	s->accept_paused = 0;
}

static void
watch_policy(struct server *s)
{
	char *copy = xstrdup(s->o->policy);

	s->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->ifd < 0) {
		log_warn("inotify: policy changes need SIGHUP");
	} else if (inotify_add_watch(s->ifd, dirname(copy), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
		/* Only a finished file: not a half-written one (IN_CREATE,
		 * IN_MODIFY), which may parse as a valid, smaller policy. */
		log_warn("inotify on the folder of %s: policy changes need SIGHUP", s->o->policy);
		if (close(s->ifd) < 0)
			log_warn("close");
		s->ifd = -1;
	} else {
		evloop_watch(s->ev, s->ifd, EV_READ, on_inotify, s);
	}
	free(copy);
}

/* ---- the heart ---- */

/* A descriptor of the shared stores (a sentinel's +switch-master). */
static void
on_shared_fd(struct evloop *ev, int fd, int events, void *arg)
{
	struct server *s = arg;

	(void)ev; (void)events;
	shared_readable(s->sh, fd, now_mono());
}

static void
shared_watch(void *arg, int fd, int on)
{
	struct server *s = arg;

	if (on)
		evloop_watch(s->ev, fd, EV_READ, on_shared_fd, s);
	else
		evloop_unwatch(s->ev, fd);
}

static void
on_timer(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct server *s = arg;

	(void)ev; (void)t;
	s->timer = NULL;	/* freed by the loop after this call */
	s->timer_at = -1;
}

/* Rewrite the journal with the live state: the sends in memory, the
 * suspensions and every grant held, answered or not.  0 ok, -1 errno. */
static int
compact(struct server *s, int64_t now)
{
	struct client *c;
	struct creq *q;

	if (journal_compact_begin(&s->j, &s->g, now, now + s->wmm) < 0)
		return -1;
	for (c = s->clients; c; c = c->next)
		for (q = c->reqs; q; q = q->next)
			if (q->r->granted)
				journal_compact_grant(&s->j, q->r, now, now + s->wmm);
	return journal_compact_commit(&s->j);
}

static void on_jretry(struct evloop *ev, struct evtimer *t, void *arg);

/* The journal could not be made durable: fail closed.  One log line per
 * episode; status says so until a rewrite succeeds. */
static void
journal_broke(struct server *s, const char *what)
{
	if (s->jbroken == NULL) {
		s->jbroken = xasprintf("%s: %s", what, strerror(errno));
		s->jretry_ms = JRETRY_MIN_MS;
		log_warnx("journal %s cannot be made durable (%s): granting nothing until it "
		    "can; rewriting it every %d s or less", s->o->journal, s->jbroken,
		    JRETRY_MAX_MS / 1000);
	}
	if (s->jtimer == NULL)
		s->jtimer = evloop_timer_at(s->ev, clock_mono_ms() + (uint64_t)s->jretry_ms,
		    on_jretry, s);
}

static void
on_jretry(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct server *s = arg;

	(void)ev; (void)t;
	s->jtimer = NULL;	/* freed by the loop after this call */
	if (compact(s, now_mono()) < 0) {
		s->jretry_ms = s->jretry_ms * 2 > JRETRY_MAX_MS ? JRETRY_MAX_MS : s->jretry_ms * 2;
		journal_broke(s, "rewrite");
		return;
	}
	log_info("journal %s is durable again (was: %s): granting", s->o->journal, s->jbroken);
	free(s->jbroken);
	s->jbroken = NULL;
	/* settle() answers the grants that waited and grants again. */
}

/* Records a compacted journal would hold now. */
static size_t
live_records(struct server *s)
{
	struct wg_up *u;
	size_t n = 1;

	for (u = s->g.ups; u; u = u->next)
		n += u->ln + u->nheld + 1;
	return n;
}

static int64_t tick_shared(struct server *s, int64_t now);

static void
settle(struct server *s)
{
	int64_t now = now_mono(), next, tnext;
	struct creq *q, *n;
	struct client *c, *cn;
	struct gp_reply r;

	/* The shared stores first: one that came back is written back to
	 * before anything is granted through it. */
	tnext = tick_shared(s, now);
	/* Nothing is granted while the journal is not durable; reports are
	 * kept in memory and go into the rewrite. */
	if (s->jbroken == NULL && !s->stopping)
		wg_pump(&s->g, now);
	if (s->jbroken == NULL && s->ghead) {
		/* Durable before answered: one sync for the whole batch. */
		if (journal_sync(&s->j) < 0)
			journal_broke(s, "fdatasync");
	} else if (s->jbroken == NULL && journal_write(&s->j) < 0) {
		journal_broke(s, "write");
	}
	if (s->jbroken == NULL && s->ghead) {
		for (q = s->ghead; q; q = n) {
			n = q->gnext;
			memset(&r, 0, sizeof r);
			r.verb = GP_R_GRANT;
			r.tag = q->tag;
			r.id = q->r->id;
			r.max_rcpt = (uint32_t)q->r->up->max_rcpt;
			r.msgs_per_conn = (uint32_t)q->r->up->msgs_per_conn;
			r.grace = (uint32_t)(q->r->up->grace / 1000 > GP_GRACE_MAX ? GP_GRACE_MAX :
			    q->r->up->grace / 1000);
			gp_fmt_reply(&q->c->out, &r);
			q->gnext = NULL;
		}
		s->ghead = s->gtail = NULL;
	}
	for (c = s->clients; c; c = cn) {
		cn = c->next;
		if (c->out.len > c->outoff || c->closing)
			(void)flush_client(s, c);
	}
	if (s->jbroken == NULL && journal_wants_compaction(&s->j, live_records(s)) &&
	    compact(s, now) < 0)
		journal_broke(s, "compaction");
	next = s->jbroken ? -1 : wg_next_wake(&s->g, now);
	if (tnext >= 0 && (next < 0 || tnext < next))
		next = tnext;
	if (next != s->timer_at) {
		if (s->timer)
			evloop_timer_cancel(s->ev, s->timer);
		s->timer = NULL;
		s->timer_at = next;
		if (next >= 0)
			s->timer = evloop_timer_at(s->ev, (uint64_t)next, on_timer, s);
	}
}

/* The shared stores' heartbeat (shared_tick); when it is next due, or
 * -1 (no shared upstream). */
static int64_t
tick_shared(struct server *s, int64_t now)
{
	const struct policy_upstream *pu;
	struct wg_req **held;
	struct wg_up *u;
	int64_t t, next = -1;
	size_t n;
	int lifted;

	for (u = s->g.ups; u; u = u->next) {
		if (!u->shared || (pu = policy_upstream(s->pol, u->name)) == NULL || !pu->shared)
			continue;
		held = held_of(s, u, &n);
		t = shared_tick(s->sh, pu, u, held, n, now, &lifted);
		free(held);
		/* A RESUME at another host: journalled as this gate's own. */
		if (lifted)
			journal_lift(&s->j, u, 0);
		if (t <= now)
			t = now + 1;
		if (next < 0 || t < next)
			next = t;
	}
	return next;
}

int
gate_run(const struct gate_opts *o)
{
	struct server s;
	struct buf err = BUF_INIT;
	struct wg_ops ops;
	struct client *c;
	struct rlimit rl;
	char *line, *save = NULL;
	int rc = 0;

	memset(&s, 0, sizeof s);
	s.o = o;
	/* As many clients as the system lets us have. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warn("setrlimit(RLIMIT_NOFILE)");
	}
	s.ifd = -1;
	s.sfd = -1;
	s.timer_at = -1;
	signal(SIGPIPE, SIG_IGN);
	s.pol = xcalloc(1, sizeof *s.pol);
	if (stat(o->policy, &s.pol_st) < 0 && errno == ENOENT) {
		/* No limits known: every request waits (the mail in the
		 * queue) until the file appears; the journal's history is
		 * kept meanwhile (window.h). */
		log_warnx("policy %s does not exist: every request waits until it does",
		    o->policy);
	} else if (policy_load(s.pol, o->policy, &err) < 0) {
		for (line = strtok_r(err.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			log_warnx("policy: %s", line);
		log_warnx("policy %s has errors: every request waits until it is fixed", o->policy);
		policy_free(s.pol);
		memset(s.pol, 0, sizeof *s.pol);
	} else
		config_preset_limits(o->upstreams, o->nupstreams, s.pol);	/* presets' limits */
	buf_free(&err);
	if (stat(o->policy, &s.pol_st) < 0)
		memset(&s.pol_st, 0, sizeof s.pol_st);
	memset(&ops, 0, sizeof ops);
	ops.granted = on_granted;
	ops.refused = on_refused;
	ops.admit = on_admit;
	ops.ended = on_ended;
	ops.arg = &s;
	wg_init(&s.g, &ops);
	s.wmm = now_wall() - now_mono();
	s.grace_ms = o->grace * 1000;
	s.g.grace = s.grace_ms;
	if (journal_open(&s.j, o->journal, &s.g, s.pol, now_mono(), now_wall(), s.grace_ms) < 0)
		return 111;
	creds_note(&s.creds, o->upstreams, o->nupstreams);
	creds_check(&s.creds, &s.g, &s.j, now_mono(), s.wmm);
	wg_set_policy(&s.g, s.pol, s.wmm, now_mono());
	s.sh = shared_new_for(o->journal, now_wall(), s.grace_ms);
	s.ev = evloop_new();
	shared_set_watch(s.sh, shared_watch, &s);
	s.lfd = unix_listen(o->socket, 0660, 128, SOCK_NONBLOCK, "weir-gate");
	evloop_watch(s.ev, s.lfd, EV_READ, on_accept, &s);
	if (o->status_socket) {
		s.sfd = unix_listen(o->status_socket, 0666, 128, SOCK_NONBLOCK, "weir-gate");
		evloop_watch(s.ev, s.sfd, EV_READ, on_accept, &s);
		log_info("serving STATUS only on %s", o->status_socket);
	}
	watch_policy(&s);
	evloop_signal(s.ev, SIGHUP, on_signal, &s);
	evloop_signal(s.ev, SIGTERM, on_signal, &s);
	evloop_signal(s.ev, SIGINT, on_signal, &s);
	log_info("serving %s; policy %s; journal %s", o->socket, o->policy, o->journal);
	/* One settle() per round of the loop: the grants of every client that
	 * spoke in the round share one journal sync. */
	settle(&s);
	/* Until a stop, then while clients that may report are connected,
	 * for STOP_LINGER_MS at most. */
	while (!s.stopping || (s.nclients > s.nstatus && now_mono() < s.stop_by)) {
		int64_t left = s.stop_by - now_mono();

		if (evloop_once(s.ev, !s.stopping ? -1 : left > 0 ? (int)left : 0) < 0) {
			log_warn("event loop");
			rc = 111;
			break;
		}
		settle(&s);
	}
	/* Grants still held stay open in the journal: their clients may go
	 * on sending after we stop, so the next start counts them with the
	 * grace period instead of as sent now. */
	while ((c = s.clients) != NULL) {
		struct creq *q, *n;

		for (q = c->reqs; q; q = n) {
			n = q->next;
			if (q->r->granted)
				free(q->r);	/* waiting ones: wg_free */
			free(q);
		}
		c->reqs = NULL;
		drop_client(&s, c, NULL);
	}
	if (s.jbroken || journal_sync(&s.j) < 0) {
		log_warnx("journal %s: not durable at stop", o->journal);
		rc = 111;
	}
	if (s.jtimer)
		evloop_timer_cancel(s.ev, s.jtimer);
	free(s.jbroken);
	if (unlink(o->socket) < 0)
		log_warn("unlink %s", o->socket);
	if (close(s.lfd) < 0)
		log_warn("close");
	if (s.sfd >= 0 && unlink(o->status_socket) < 0)
		log_warn("unlink %s", o->status_socket);
	if (s.sfd >= 0 && close(s.sfd) < 0)
		log_warn("close");
	if (s.ifd >= 0 && close(s.ifd) < 0)
		log_warn("close");
	journal_close(&s.j);
	creds_free(&s.creds);
	wg_free(&s.g);
	shared_free(s.sh);
	policy_free(s.pol);
	free(s.pol);
	evloop_free(s.ev);
	return rc;
}
