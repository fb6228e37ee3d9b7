/*
 * window.c: see window.h.  Sizes: one ring of sends per upstream, kept
 * only as long as its longest window needs it; per window a start
 * sequence number and a running sum, so checking a request is O(windows)
 * and finding the instant it will fit walks the entries that must leave.
 *
 * Trusts: its caller (the daemon, the tests).  No I/O.  Config keys: none
 * directly (struct policy, from policy.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gate/window.h"
#include "lib/alloc.h"
#include "lib/log.h"

void
wg_init(struct wgate *g, const struct wg_ops *ops)
{
	memset(g, 0, sizeof *g);
	g->ops = *ops;
	g->next_id = 1;
}

static void
free_up(struct wg_up *u)
{
	struct wg_req *r, *n;

	for (r = u->wait_head; r; r = n) {
		n = r->next;
		free(r);
	}
	free(u->name);
	free(u->win);
	free(u->log);
	free(u->hist);
	free(u->susp_reason);
	free(u->ssusp_reason);
	free(u->ssusp_host);
	free(u->auth_reason);
	free(u->down_reason);
	free(u);
}

void
wg_free(struct wgate *g)
{
	struct wg_up *u, *n;

	for (u = g->ups; u; u = n) {
		n = u->next;
		free_up(u);
	}
	g->ups = NULL;
}

int64_t
wg_grace(const struct policy *pol, const char *name, int64_t dflt)
{
	const struct policy_upstream *pu = pol ? policy_upstream(pol, name) : NULL;

	return pu && pu->grace > 0 ? pu->grace * 1000 : dflt;
}

struct wg_up *
wg_find(struct wgate *g, const char *name)
{
	struct wg_up *u;

	for (u = g->ups; u; u = u->next)
		if (strcmp(u->name, name) == 0)
			return u;
	return NULL;
}

static struct wg_up *
get_up(struct wgate *g, const char *name)
{
	struct wg_up *u = wg_find(g, name), **pp;

	if (u)
		return u;
	u = xcalloc(1, sizeof *u);
	u->name = xstrdup(name);
	u->horizon = WG_HORIZON_MIN_MS;
	u->hdropped = INT64_MIN;
	u->grace = g->grace;
	/* Keep the list in creation order: status reads better. */
	for (pp = &g->ups; *pp; pp = &(*pp)->next)
		;
	*pp = u;
	return u;
}

/* ---- the log ---- */

const struct wg_send *
wg_log_at(const struct wg_up *u, uint64_t s)
{
	if (s < u->lseq || s >= u->lseq + u->ln)
		panic("window: log entry %llu outside %llu+%zu",
		    (unsigned long long)s, (unsigned long long)u->lseq, u->ln);
	return &u->log[(u->lhead + (size_t)(s - u->lseq)) % u->lcap];
}

const struct wg_send *
wg_history_at(const struct wg_up *u, size_t i)
{
	if (i >= u->hn)
		panic("window: history entry %zu of %zu", i, u->hn);
	return &u->hist[(u->hhead + i) % WG_HISTORY_MAX];
}

/* Keep a copy of a log entry for status; a full ring drops its oldest. */
static void
history_add(struct wg_up *u, const struct wg_send *e)
{
	if (u->hist == NULL)
		u->hist = xcalloc(WG_HISTORY_MAX, sizeof *u->hist);
	if (u->hn == WG_HISTORY_MAX) {
		if (u->hist[u->hhead].t > u->hdropped)
			u->hdropped = u->hist[u->hhead].t;
		u->hhead = (u->hhead + 1) % WG_HISTORY_MAX;
		u->hn--;
	}
	u->hist[(u->hhead + u->hn++) % WG_HISTORY_MAX] = *e;
}

static uint64_t
log_end(const struct wg_up *u)
{
	return u->lseq + u->ln;
}

/* Put a send into the log at its place in t order (after entries of the
 * same t), so that nothing else moves in time.  Entries at or after the
 * place shift up one sequence number.  A window whose first counted entry
 * lies after the place treats the new one as already expired (its t is
 * not later than that of an entry already gone: see wg_expire); the
 * others count it. */
static void
log_insert(struct wg_up *u, int64_t from, int64_t t, const uint32_t w[UNIT_COUNT], uint64_t id,
    int32_t ok)
{
	struct wg_send *nl, *a, *b;
	size_t i, k;
	uint64_t p;

	if (u->ln == u->lcap) {
		size_t ncap = u->lcap ? u->lcap * 2 : 64;

		nl = xcalloc(ncap, sizeof *nl);
		for (i = 0; i < u->ln; i++)
			nl[i] = u->log[(u->lhead + i) % u->lcap];
		free(u->log);
		u->log = nl;
		u->lcap = ncap;
		u->lhead = 0;
	}
	if (from > t)
		from = t;
	k = u->ln;
	nl = &u->log[(u->lhead + k) % u->lcap];
	nl->from = from;
	nl->t = t;
	nl->id = from < t ? id : 0;
	nl->ok = ok;
	memcpy(nl->w, w, sizeof nl->w);
	u->ln++;
	history_add(u, nl);
	/* Move it back past later entries: few, those still in flight. */
	while (k > 0) {
		struct wg_send tmp;

		a = &u->log[(u->lhead + k - 1) % u->lcap];
		b = &u->log[(u->lhead + k) % u->lcap];
		if (a->t <= b->t)
			break;
		tmp = *a;
		*a = *b;
		*b = tmp;
		k--;
	}
	p = u->lseq + k;
	for (i = 0; i < u->nwin; i++) {
		if (p < u->win[i].first)
			u->win[i].first++;
		else
			u->win[i].sum += w[u->win[i].unit];
	}
}

/* Take entry p out of the log: later entries move down one sequence
 * number; a window that had let it go already keeps its start on the
 * same entry, one that counted it counts it no more. */
static void
log_remove(struct wg_up *u, uint64_t p)
{
	struct wg_send gone = *wg_log_at(u, p);
	uint64_t s;
	size_t i;

	/* Its copy in the history goes too (a settled unknown send: its
	 * send at the 250's time takes its place), the latest one with its
	 * id, the later ones moved down. */
	for (i = u->hn; gone.id && i-- > 0;)
		if (u->hist[(u->hhead + i) % WG_HISTORY_MAX].id == gone.id) {
			for (; i + 1 < u->hn; i++)
				u->hist[(u->hhead + i) % WG_HISTORY_MAX] =
				    u->hist[(u->hhead + i + 1) % WG_HISTORY_MAX];
			u->hn--;
			break;
		}

	for (s = p; s + 1 < log_end(u); s++)
		u->log[(u->lhead + (size_t)(s - u->lseq)) % u->lcap] = *wg_log_at(u, s + 1);
	u->ln--;
	for (i = 0; i < u->nwin; i++) {
		if (p < u->win[i].first)
			u->win[i].first--;
		else
			u->win[i].sum -= gone.w[u->win[i].unit];
	}
}

static int64_t
mod_pos(int64_t a, int64_t m)
{
	int64_t r = a % m;

	return r < 0 ? r + m : r;
}

/* Calendar: the last boundary at or before now. */
static int64_t
bucket_start(const struct wg_win *w, int64_t now)
{
	return now - mod_pos(now - w->phase, w->per);
}

/* Is an entry logged at t still counted at now? */
static int
in_window(const struct wg_win *w, int64_t t, int64_t now)
{
	if (w->calendar)
		return t >= bucket_start(w, now);
	return t > now - w->per;
}

void
wg_expire(struct wg_up *u, int64_t now)
{
	uint64_t keep = log_end(u), end = log_end(u);
	size_t i;

	for (i = 0; i < u->nwin; i++) {
		struct wg_win *w = &u->win[i];

		while (w->first < end) {
			const struct wg_send *e = wg_log_at(u, w->first);

			if (in_window(w, e->t, now))
				break;
			w->sum -= e->w[w->unit];
			w->first++;
		}
		if (w->first < keep)
			keep = w->first;
	}
	while (u->hn > 0 && u->hist[u->hhead].t <= now - WG_HISTORY_MS) {
		u->hhead = (u->hhead + 1) % WG_HISTORY_MAX;
		u->hn--;
	}
	/* In the policy, what no window counts any more goes; out of it,
	 * the history is kept for the horizon (the section may come back). */
	while (u->lseq < keep && (u->in_policy || wg_log_at(u, u->lseq)->t <= now - u->horizon)) {
		u->lhead = (u->lhead + 1) % u->lcap;
		u->lseq++;
		u->ln--;
	}
}

int64_t
wg_win_used(const struct wg_up *u, size_t i)
{
	return u->win[i].sum + u->held[u->win[i].unit];
}

/* ---- policy ---- */

static void
set_windows(struct wgate *g, struct wg_up *u, const struct policy_upstream *pu, int64_t now)
{
	size_t i;
	uint64_t s;

	free(u->win);
	u->win = NULL;
	u->nwin = 0;
	u->in_policy = pu != NULL;
	u->max_rcpt = u->max_conn = u->msgs_per_conn = 0;
	u->shared = pu != NULL && pu->shared != NULL;
	u->shared_retry = 0;
	if (!u->shared)	/* no store: no other host's suspension */
		(void)wg_shared_suspension(u, 0, 0, NULL, NULL, now);
	u->grace = wg_grace(g->pol, u->name, g->grace);
	if (pu == NULL)
		return;
	u->max_rcpt = pu->max_recipients;
	u->max_conn = pu->max_connections;
	u->msgs_per_conn = pu->messages_per_connection;
	u->nwin = pu->nwin;
	u->win = xcalloc(pu->nwin + 1, sizeof *u->win);
	for (i = 0; i < pu->nwin; i++) {
		struct wg_win *w = &u->win[i];

		w->limit = pu->win[i].limit;
		w->per = pu->win[i].per * 1000;
		w->unit = pu->win[i].unit;
		w->calendar = pu->win[i].calendar;
		w->phase = mod_pos(pu->win[i].align * 1000 - g->wall_minus_mono, w->per);
		if (w->per > u->horizon)
			u->horizon = w->per;
		/* Count the existing history at once. */
		w->first = u->lseq;
		w->sum = 0;
		for (s = u->lseq; s < log_end(u); s++)
			w->sum += wg_log_at(u, s)->w[w->unit];
	}
	wg_expire(u, now);
}

/* Can a request of weight w ever fit on u (with nothing held)? */
static enum wg_code
fits_ever(const struct wg_up *u, const uint32_t w[UNIT_COUNT])
{
	size_t i;

	for (i = 0; i < u->nwin; i++)
		if ((int64_t)w[u->win[i].unit] > u->win[i].limit)
			return WG_TOOBIG;
	if (u->max_rcpt && (int64_t)w[UNIT_RECIPIENTS] > u->max_rcpt)
		return WG_TOOBIG;
	if (u->msgs_per_conn && (int64_t)w[UNIT_MESSAGES] > u->msgs_per_conn)
		return WG_TOOBIG;
	return WG_OK;
}

static void
unlink_wait(struct wg_up *u, struct wg_req *r)
{
	if (r->has_unless)
		u->nwait_unless--;
	if (r->prev)
		r->prev->next = r->next;
	else
		u->wait_head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		u->wait_tail = r->prev;
	r->prev = r->next = NULL;
	u->nwait--;
}

void
wg_set_policy(struct wgate *g, const struct policy *pol, int64_t wall_minus_mono, int64_t now)
{
	struct wg_up *u;
	struct wg_req *r, *n;
	enum wg_code code;
	size_t i;

	g->pol = pol;
	g->wall_minus_mono = wall_minus_mono;
	for (i = 0; i < pol->nup; i++)
		if (strcmp(pol->up[i].name, POLICY_ANY_UPSTREAM) != 0)
			(void)get_up(g, pol->up[i].name);
	for (u = g->ups; u; u = u->next) {
		set_windows(g, u, policy_upstream(pol, u->name), now);
		for (r = u->wait_head; r; r = n) {
			n = r->next;
			code = u->in_policy ? fits_ever(u, r->w) : WG_OK;
			if (code == WG_OK)
				continue;
			unlink_wait(u, r);
			if (g->ops.refused)
				g->ops.refused(g->ops.arg, r, code);
			free(r);
		}
	}
}

/* ---- requests ---- */

/* Its backlog (window.h, WG_BUSY_GAP_MS), after a change at now: busy
 * while a request for a message waits or a message's grant is held. */
static void
busy_note(struct wg_up *u, int64_t now)
{
	const struct wg_req *r;
	int busy = u->held[UNIT_MESSAGES] > 0;

	for (r = u->wait_head; r && !busy; r = r->next)
		busy = r->w[UNIT_MESSAGES] > 0;
	if (!busy) {
		if (u->busy_since && !u->idle_since)
			u->idle_since = now;
		return;
	}
	if (!u->busy_since || (u->idle_since && now - u->idle_since > WG_BUSY_GAP_MS))
		u->busy_since = now;
	u->idle_since = 0;
}

int64_t
wg_backlog_since(const struct wg_up *u, int64_t now)
{
	if (!u->busy_since || (u->idle_since && now - u->idle_since > WG_BUSY_GAP_MS))
		return 0;
	return u->busy_since;
}

enum wg_code
wg_acquire(struct wgate *g, const char *upstream, const char *cls, const char *sender,
    const uint32_t w[UNIT_COUNT], const struct route_when *unless, void *owner, int64_t now,
    struct wg_req **out)
{
	const struct policy_class *c = NULL;
	struct wg_up *u;
	struct wg_req *r, *p;
	enum wg_code code;

	*out = NULL;
	if (w[UNIT_MESSAGES] == 0 && w[UNIT_RECIPIENTS] == 0 && w[UNIT_CONNECTIONS] == 0)
		return WG_BADWEIGHT;
	if (g->pol) {
		c = policy_class_for(g->pol, cls, sender, w[UNIT_RECIPIENTS]);
		if (cls && c == NULL)
			return WG_NOCLASS;
	} else if (cls) {
		return WG_NOCLASS;
	}
	/* An upstream no policy names (yet): the request waits for one.  One
	 * seen for the first time may be named by the policy's section "*". */
	if ((u = wg_find(g, upstream)) == NULL) {
		u = get_up(g, upstream);
		if (g->pol)
			set_windows(g, u, policy_upstream(g->pol, upstream), now);
	}
	if (u->in_policy && (code = fits_ever(u, w)) != WG_OK)
		return code;
	r = xcalloc(1, sizeof *r);
	r->id = g->next_id++;
	r->started = 1;
	r->up = u;
	r->prio = c ? c->priority : 0;
	if (c)
		snprintf(r->cls, sizeof r->cls, "%s", c->name);
	memcpy(r->w, w, sizeof r->w);
	r->since = now;
	r->owner = owner;
	route_when_none(&r->unless);
	if (unless && route_when_any(unless)) {
		r->unless = *unless;
		r->has_unless = 1;
		u->nwait_unless++;
	}
	/* Behind every request of the same or higher priority. */
	for (p = u->wait_tail; p && p->prio < r->prio; p = p->prev)
		;
	r->prev = p;
	r->next = p ? p->next : u->wait_head;
	if (r->next)
		r->next->prev = r;
	else
		u->wait_tail = r;
	if (p)
		p->next = r;
	else
		u->wait_head = r;
	u->nwait++;
	busy_note(u, now);
	*out = r;
	return WG_OK;
}

/* A kept session's connection slot (0 messages, 0 recipients): it does
 * not queue behind messages.  The messages its session will carry are
 * granted to the same client, which may hold some already: a slot that
 * waited behind requests that wait for those grants' reports would
 * never come. */
static int
slot_only(const struct wg_req *r)
{
	return r->w[UNIT_MESSAGES] == 0 && r->w[UNIT_RECIPIENTS] == 0;
}

/* The first request of the FIFO proper (not a slot). */
static struct wg_req *
fifo_head(struct wg_up *u)
{
	struct wg_req *r;

	for (r = u->wait_head; r && slot_only(r); r = r->next)
		;
	return r;
}

/* When the windows alone have room for weights w (held grants counted):
 * now or later; -1 when held grants alone fill one (only a report can
 * tell). */
static int64_t
win_fit(const struct wg_up *u, const uint32_t w[UNIT_COUNT], int64_t now)
{
	int64_t at = now, excess, acc, t;
	uint64_t s;
	size_t i;

	for (i = 0; i < u->nwin; i++) {
		const struct wg_win *win = &u->win[i];
		int64_t need = u->held[win->unit] + w[win->unit];

		if (w[win->unit] == 0)
			continue;
		if (need > win->limit)
			return -1;
		excess = win->sum + need - win->limit;
		if (excess <= 0)
			continue;
		/* Entries leave in t order: a sliding window's at t + T, a
		 * calendar window's at the first boundary after t (an
		 * interval reaching into a later period counts there too). */
		t = -1;
		acc = 0;
		for (s = win->first; s < log_end(u); s++) {
			const struct wg_send *e = wg_log_at(u, s);

			acc += e->w[win->unit];
			if (acc >= excess) {
				t = win->calendar ? bucket_start(win, e->t) + win->per : e->t + win->per;
				break;
			}
		}
		if (t < 0)
			panic("window: sum %lld does not match the log", (long long)win->sum);
		if (t > at)
			at = t;
	}
	return at;
}

void
wg_route_state(struct wg_up *u, const uint32_t *w, int64_t now, struct route_state *st)
{
	static const uint32_t one[UNIT_COUNT] = { [UNIT_MESSAGES] = 1, [UNIT_RECIPIENTS] = 1 };

	memset(st, 0, sizeof *st);
	st->down_since = u->down_since;
	st->probe_at = u->probe_at;
	st->probe_out = u->probe_id != 0;
	st->auth_since = u->auth_since;
	st->auth_until = u->auth_until;
	/* After an authentication suspension, one message at a time. */
	st->auth_probe_out = u->probe && u->held[UNIT_MESSAGES] > 0;
	/* This gate's own suspension, or the one another host shared. */
	st->susp_until = u->susp_until > u->ssusp_until ? u->susp_until : u->ssusp_until;
	st->free_at = u->in_policy ? win_fit(u, w ? w : one, now) : -1;
	/* The provider's quota is a window of its own, full until the
	 * suspension ends at least (route.h: "quota"), whichever host met
	 * it. */
	if (u->susp_quota && u->susp_until > now && st->free_at < u->susp_until)
		st->free_at = u->susp_until;
	if (u->ssusp_quota && u->ssusp_until > now && st->free_at < u->ssusp_until)
		st->free_at = u->ssusp_until;
}

void
wg_suspension(const struct wg_up *u, int64_t now, struct wg_susp *s)
{
	memset(s, 0, sizeof *s);
	if (u->susp_until > now && u->susp_until >= u->ssusp_until) {
		s->until = u->susp_until;
		s->quota = u->susp_quota;
		s->reason = u->susp_reason;
	} else if (u->ssusp_until > now) {
		s->until = u->ssusp_until;
		s->quota = u->ssusp_quota;
		s->reason = u->ssusp_reason;
		s->host = u->ssusp_host ? u->ssusp_host : "";
	}
}

int
wg_shared_suspension(struct wg_up *u, int64_t ms, int quota, const char *host,
    const char *reason, int64_t now)
{
	int ended = ms <= 0 && u->ssusp_until > now;

	u->ssusp_until = ms > 0 ? now + ms : 0;
	u->ssusp_quota = ms > 0 && quota;
	free(u->ssusp_reason);
	free(u->ssusp_host);
	u->ssusp_reason = ms > 0 && reason ? xstrdup(reason) : NULL;
	u->ssusp_host = ms > 0 && host ? xstrdup(host) : NULL;
	return ended;
}

/* The verdict on r's conditions (route.h). */
static enum route_verdict
judge(struct wg_up *u, struct wg_req *r, int64_t now, int64_t *until)
{
	struct route_state st;

	wg_route_state(u, r->w, now, &st);
	return route_judge(&r->unless, &st, now, &r->later_why, until);
}

/* When r could be granted, as wg_head_fit says. */
static int64_t
req_fit(struct wg_up *u, struct wg_req *r, int64_t now)
{
	int64_t at = now, t;

	if (!u->in_policy)
		return -1;	/* a policy that names it */
	if (r->has_unless) {
		switch (judge(u, r, now, &t)) {
		case RV_AVOID:
			return -1;	/* refused at the next pump */
		case RV_HOLD:
			if (t > at)
				at = t;
			break;
		default:
			break;
		}
	}
	if (u->susp_until > now)
		at = u->susp_until;
	if (u->auth_until > at)
		at = u->auth_until;
	/* max_connections counts the grants that hold a connection: a
	 * kept session's slot (weight 0/0/1) while it lives, not the
	 * messages it carries (1/n/0). */
	if (u->max_conn && r->w[UNIT_CONNECTIONS] > 0 &&
	    u->held[UNIT_CONNECTIONS] + r->w[UNIT_CONNECTIONS] > u->max_conn)
		return -1;
	/* One probe at a time: one connection, and one message on it (a
	 * kept session's slot must not wait for message grants that wait
	 * for the session). */
	if (u->probe && (r->w[UNIT_CONNECTIONS] > 0 ? u->held[UNIT_CONNECTIONS] > 0 :
	    u->held[UNIT_MESSAGES] > 0))
		return -1;
	if (u->shared && u->shared_retry > at)
		at = u->shared_retry;
	if ((t = win_fit(u, r->w, now)) < 0)
		return -1;
	return t > at ? t : at;
}

int64_t
wg_head_fit(struct wg_up *u, int64_t now)
{
	struct wg_req *r, *h = fifo_head(u);
	int64_t best = h ? req_fit(u, h, now) : -2, t;

	for (r = u->wait_head; r; r = r->next)
		if (slot_only(r) && (t = req_fit(u, r, now)) >= 0 && (best < 0 || t < best))
			best = t;
	if (best == -2 && u->wait_head)
		best = -1;	/* only slots wait, and only a report can help */
	return best;
}

static void
grant(struct wgate *g, struct wg_up *u, struct wg_req *r, int64_t now)
{
	size_t i;

	/* Granted in an unreachable spell, to a request that would have
	 * gone elsewhere: it is the probe (one at a time). */
	if (r->has_unless && r->unless.s[RK_UNREACHABLE] != RK_OFF && u->down_since > 0) {
		u->probe_id = r->id;
		u->probe_at = now + route_probe_ms(&r->unless);
	}
	unlink_wait(u, r);
	for (i = 0; i < UNIT_COUNT; i++)
		u->held[i] += r->w[i];
	u->nheld++;
	u->n_granted++;
	r->granted = 1;
	r->since = now;
	if (g->ops.granted)
		g->ops.granted(g->ops.arg, r);
}

/* Grant r if it fits now (and, shared, the store agrees): 1 granted. */
static int
try_grant(struct wgate *g, struct wg_up *u, struct wg_req *r, int64_t now)
{
	if (req_fit(u, r, now) != now)
		return 0;
	if (u->shared && g->ops.admit && !g->ops.admit(g->ops.arg, r, now, &u->shared_retry)) {
		if (u->shared_retry <= now)
			u->shared_retry = now + 1;
		return 0;
	}
	grant(g, u, r, now);
	return 1;
}

/* Refuse (WG_LATER) each waiting request of u whose conditions say to
 * pass u over now; how many. */
static size_t
refuse_avoided(struct wgate *g, struct wg_up *u, int64_t now)
{
	struct wg_req *r, *next;
	int64_t until;
	size_t n = 0;

	for (r = u->wait_head; r && u->nwait_unless > 0; r = next) {
		next = r->next;
		if (!r->has_unless || !u->in_policy || judge(u, r, now, &until) != RV_AVOID)
			continue;
		r->later_until = until > now ? until : now + 1;
		unlink_wait(u, r);
		u->n_later++;
		n++;
		if (g->ops.refused)
			g->ops.refused(g->ops.arg, r, WG_LATER);
		free(r);
	}
	return n;
}

/* Grant, in order, what fits on u now: the slots, then the FIFO. */
static size_t
pump_up(struct wgate *g, struct wg_up *u, int64_t now)
{
	struct wg_req *r, *next;
	size_t n = 0;

	for (r = u->wait_head; r; r = next) {
		next = r->next;
		if (slot_only(r))
			n += (size_t)try_grant(g, u, r, now);
	}
	while ((r = fifo_head(u)) != NULL && try_grant(g, u, r, now))
		n++;
	return n;
}

size_t
wg_pump(struct wgate *g, int64_t now)
{
	struct wg_up *u;
	size_t n = 0;

	for (u = g->ups; u; u = u->next) {
		wg_expire(u, now);
		(void)refuse_avoided(g, u, now);
		n += pump_up(g, u, now);
		/* A probe granted now: the others pass over, and what waited
		 * behind them may go. */
		if (refuse_avoided(g, u, now) > 0)
			n += pump_up(g, u, now);
		busy_note(u, now);
	}
	return n;
}

/* The next instant (> now) at which the verdict on a waiting request of
 * u that carries conditions changes by time alone (a spell reaching its
 * threshold, a probe falling due), or -1. */
static int64_t
unless_wake(const struct wg_up *u, int64_t now)
{
	const struct wg_req *r;
	int64_t best = -1, t;
	int k;

	for (r = u->wait_head; r && u->nwait_unless > 0; r = r->next) {
		if (!r->has_unless)
			continue;
		for (k = 0; k < 3; k++) {
			if (k == 0 && u->down_since > 0 && r->unless.s[RK_UNREACHABLE] != RK_OFF)
				t = u->down_since + r->unless.s[RK_UNREACHABLE] * 1000;
			else if (k == 1 && u->down_since > 0 && !u->probe_id &&
			    r->unless.s[RK_UNREACHABLE] != RK_OFF)
				t = u->probe_at;
			else if (k == 2 && u->auth_since > 0 && r->unless.s[RK_AUTH] != RK_OFF)
				t = u->auth_since + r->unless.s[RK_AUTH] * 1000;
			else
				continue;
			if (t > now && (best < 0 || t < best))
				best = t;
		}
	}
	return best;
}

int64_t
wg_next_wake(struct wgate *g, int64_t now)
{
	struct wg_up *u;
	int64_t best = -1, t;

	for (u = g->ups; u; u = u->next) {
		wg_expire(u, now);
		t = wg_head_fit(u, now);
		if (u->nwait_unless > 0 && unless_wake(u, now) > 0 &&
		    (t < 0 || unless_wake(u, now) < t))
			t = unless_wake(u, now);
		if (t < 0)
			continue;
		if (t <= now)
			t = now + 1;	/* pump first; never a timer in the past */
		if (best < 0 || t < best)
			best = t;
	}
	return best;
}

static void
release(struct wg_up *u, struct wg_req *r)
{
	size_t i;

	for (i = 0; i < UNIT_COUNT; i++)
		u->held[i] -= r->w[i];
	if (u->nheld == 0)
		panic("window: release without a held grant");
	u->nheld--;
}

/* A throttle suspension, or (quota) a quota's: its periods those of the
 * first throttle_reply pattern that takes the reply, else the
 * defaults of its kind. */
static void
suspend(struct wgate *g, struct wg_up *u, const char *reply, int quota, int64_t now)
{
	const struct policy_throttle *th = g->pol ? policy_throttle_match(g->pol, reply) : NULL;
	int64_t base = (th ? th->suspend : quota ? POLICY_QUOTA_SUSPEND_DEFAULT :
	    POLICY_SUSPEND_DEFAULT) * 1000LL;
	int64_t max = (th ? th->max_suspend : quota ? POLICY_QUOTA_MAX_SUSPEND_DEFAULT :
	    POLICY_MAX_SUSPEND_DEFAULT) * 1000LL;
	int64_t len = u->susp_len ? u->susp_len * 2 : base;

	if (len > max)
		len = max;
	if (len < base)
		len = base;
	u->susp_len = len;
	u->susp_start = now;
	if (now + len > u->susp_until)
		u->susp_until = now + len;
	free(u->susp_reason);
	u->susp_reason = xstrdup(reply ? reply : "");
	u->susp_quota = quota;
}

static void
auth_suspend(struct wg_up *u, const char *reply, int64_t now)
{
	int64_t len = u->auth_len ? u->auth_len * 2 : WG_AUTH_SUSPEND_MS;

	if (len > WG_AUTH_SUSPEND_MAX_MS)
		len = WG_AUTH_SUSPEND_MAX_MS;
	u->auth_len = len;
	u->auth_start = now;
	u->auth_until = now + len;
	if (!u->probe || u->auth_since == 0)
		u->auth_since = now;	/* a new spell of trouble */
	u->probe = 1;
	free(u->auth_reason);
	u->auth_reason = xstrdup(reply ? reply : "");
}

/* Log weight w over [from, t] (an interval: the unknown outcome of
 * grant id; ok: the recipients accepted, wg_send's) and say so in *d. */
static void
log_done(struct wg_up *u, struct wg_done *d, int64_t from, int64_t t,
    const uint32_t w[UNIT_COUNT], uint64_t id, int32_t ok)
{
	if (w[UNIT_MESSAGES] == 0 && w[UNIT_RECIPIENTS] == 0 && w[UNIT_CONNECTIONS] == 0)
		return;
	log_insert(u, from, t, w, id, ok);
	d->logged = 1;
	d->from = from < t ? from : t;
	d->t = t;
	memcpy(d->w, w, sizeof d->w);
}

/* Log what outcome o says of a send of weight w (grant id) granted at
 * since, at now (SENT: at `at`, clamped into [since, now]; -1: now; with
 * accepted recipients), and suspend as it says; into *d.  Counted in u's
 * totals. */
static void
account(struct wgate *g, struct wg_up *u, int64_t since, const uint32_t w[UNIT_COUNT],
    uint64_t id, enum wg_outcome o, const char *reply, int64_t at, uint32_t accepted,
    int64_t now, struct wg_done *d)
{
	uint32_t conn[UNIT_COUNT] = { 0 };
	int64_t t;

	memset(d, 0, sizeof *d);
	conn[UNIT_CONNECTIONS] = w[UNIT_CONNECTIONS];
	switch (o) {
	case WG_REFUND:
		u->n_refunded++;
		break;
	case WG_SENT:
		t = at < 0 || at > now ? now : at;
		if (t < since)
			t = since;
		log_done(u, d, t, t, w, 0, (int32_t)accepted);
		/* A send: a transaction the upstream accepted a recipient of. */
		if (accepted > 0)
			u->n_sent++;
		else
			u->n_sent_none++;
		u->n_rcpt_accepted += accepted;
		/* A success ends the growth; not one granted before the
		 * suspension, which says nothing of the upstream since. */
		if (since >= u->susp_start)
			u->susp_len = 0;
		if (since >= u->auth_start)
			u->auth_len = 0;
		break;
	case WG_UNKNOWN:
		log_done(u, d, since, now + u->grace, w, id, 0);
		u->n_unknown++;
		break;
	case WG_NOMAIL:
		log_done(u, d, now, now, conn, 0, 0);
		u->n_nomail++;
		break;
	case WG_UNREACHED:
		u->n_unreached++;	/* no connection: nothing to log */
		break;
	case WG_NOGREETING:
		log_done(u, d, now, now, conn, 0, 0);
		u->n_unreached++;
		break;
	case WG_AUTHFAIL:
		log_done(u, d, now, now, conn, 0, 0);
		u->n_authfail++;
		/* Connections already open when the suspension began fail the
		 * same way: one episode, one doubling, one log line.  One
		 * granted before a lift tried the old credentials. */
		if (since >= u->auth_lift && (since >= u->auth_start || u->auth_until <= now)) {
			auth_suspend(u, reply, now);
			d->new_episode = 1;
		}
		d->until = u->auth_until;
		break;
	case WG_THROTTLED:
	case WG_QUOTA:
		/* The attempt reached the upstream: it may well count it. */
		log_done(u, d, now, now, w, 0, 0);
		u->n_throttled++;
		/* Sends granted before the suspension in force began were in
		 * flight when it came: the same "slow down", which must not
		 * double it once per connection. */
		if (since >= u->susp_start || u->susp_until <= now) {
			suspend(g, u, reply, o == WG_QUOTA, now);
			d->new_episode = 1;
		}
		d->until = u->susp_until;
		break;
	}
}

/* What outcome o of a send of weights w (unless: its conditions, or
 * NULL) says of the upstream's reach: an unreachable spell begins or
 * goes on (the next probe one interval on), or a report on a message
 * that got through ends it; into *d. */
static void
note_reach(struct wg_up *u, enum wg_outcome o, const uint32_t w[UNIT_COUNT],
    const struct route_when *unless, const char *reply, int64_t now, struct wg_done *d)
{
	if (o == WG_UNREACHED || o == WG_NOGREETING) {
		if (u->down_since == 0) {
			u->down_since = now;
			d->down_began = 1;
		}
		free(u->down_reason);
		u->down_reason = xstrdup(reply ? reply : "");
		u->probe_at = now + (unless ? route_probe_ms(unless) : ROUTE_PROBE_MAX_MS);
		return;
	}
	if (o == WG_REFUND || o == WG_UNKNOWN || w[UNIT_MESSAGES] == 0 || u->down_since == 0)
		return;
	d->down_ended = 1;
	d->down_from = u->down_since;
	u->down_since = 0;
	u->probe_at = 0;
}

int64_t
wg_report_at(struct wgate *g, struct wg_req *r, enum wg_outcome o, const char *reply,
    int64_t at, int64_t now, struct wg_done *dp)
{
	struct wg_up *u = r->up;
	struct wg_done d;

	if (!r->granted)
		panic("window: report of a request never granted");
	release(u, r);
	/* A report that shows the upstream takes us again ends the probe:
	 * one about a message, not a kept session's slot ending (its NOMAIL
	 * says nothing of AUTH: its messages' reports do). */
	if (o != WG_THROTTLED && o != WG_QUOTA && o != WG_AUTHFAIL && o != WG_UNREACHED &&
	    o != WG_NOGREETING &&
	    r->w[UNIT_MESSAGES] > 0) {
		u->probe = 0;
		/* The trouble ends with a message that reached the upstream,
		 * not with a grant given back or of unknown fate. */
		if (o != WG_REFUND && o != WG_UNKNOWN)
			u->auth_since = 0;
	}
	if (r->id == u->probe_id)
		u->probe_id = 0;
	account(g, u, r->since, r->w, r->id, o, reply, at, r->accepted, now, &d);
	note_reach(u, o, r->w, r->has_unless ? &r->unless : NULL, reply, now, &d);
	busy_note(u, now);
	if (u->shared) {
		u->shared_retry = 0;	/* a slot may be free again */
		if (g->ops.ended)
			g->ops.ended(g->ops.arg, r, o, &d, now);
	}
	free(r);
	if (dp)
		*dp = d;
	return d.until;
}

/* The entry of grant id's unknown outcome in u's log, or 0 (none). */
static uint64_t
unknown_entry(const struct wg_up *u, uint64_t id)
{
	uint64_t s;

	for (s = log_end(u); s > u->lseq; s--)
		if (wg_log_at(u, s - 1)->id == id)
			return s;
	return 0;
}

int
wg_settle(struct wgate *g, struct wg_up *u, uint64_t id, enum wg_outcome o, const char *reply,
    int64_t at, uint32_t accepted, int64_t now, struct wg_done *d)
{
	uint64_t p = id ? unknown_entry(u, id) : 0;
	struct wg_send e;

	memset(d, 0, sizeof *d);
	if (p == 0 || o == WG_UNKNOWN)
		return 0;
	e = *wg_log_at(u, p - 1);
	log_remove(u, p - 1);
	u->n_settled++;
	account(g, u, e.from, e.w, 0, o, reply, at, accepted, now, d);
	note_reach(u, o, e.w, NULL, reply, now, d);
	return 1;
}

int64_t
wg_report(struct wgate *g, struct wg_req *r, enum wg_outcome o, const char *reply, int64_t now)
{
	return wg_report_at(g, r, o, reply, -1, now, NULL);
}

void
wg_cancel(struct wgate *g, struct wg_req *r, int64_t now, struct wg_done *d)
{
	struct wg_up *u = r->up;

	if (r->granted) {
		(void)wg_report_at(g, r, r->started ? WG_UNKNOWN : WG_REFUND, NULL, -1, now, d);
		return;
	}
	if (d)
		memset(d, 0, sizeof *d);
	unlink_wait(u, r);
	free(r);
	busy_note(u, now);
	/* An upstream a request named but no policy does, left with nothing:
	 * forget it, so that names made up by clients do not pile up. */
	if (!u->in_policy && u->ln == 0 && u->nwait == 0 && u->nheld == 0 &&
	    u->susp_until == 0 && u->auth_until == 0 && u->susp_len == 0 && u->auth_len == 0) {
		struct wg_up **pp;

		for (pp = &g->ups; *pp != u; pp = &(*pp)->next)
			;
		*pp = u->next;
		free_up(u);
	}
}

int
wg_reach_reset(struct wg_up *u)
{
	int down = u->down_since != 0;

	u->down_since = 0;
	u->probe_at = 0;
	return down;
}

int
wg_auth_refused(struct wg_up *u, const char *reply, int64_t now)
{
	if (u->auth_until > now)
		return 0;
	auth_suspend(u, reply, now);
	return 1;
}

int
wg_lift(struct wg_up *u, int auth_only, int64_t now)
{
	int down = wg_reach_reset(u);

	u->auth_until = 0;
	u->auth_len = 0;
	u->auth_lift = now;
	if (!auth_only) {
		u->susp_until = 0;
		u->susp_len = 0;
		/* RESUME lifts the store's too (shared_suspend). */
		(void)wg_shared_suspension(u, 0, 0, NULL, NULL, now);
	}
	return down;
}

void
wg_replay_send(struct wgate *g, const char *upstream, int64_t from, int64_t t,
    const uint32_t w[UNIT_COUNT], uint64_t id)
{
	log_insert(get_up(g, upstream), from, t, w, id, -1);
}

void
wg_replay_settle(struct wgate *g, const char *upstream, uint64_t id, int64_t t,
    const uint32_t w[UNIT_COUNT])
{
	struct wg_up *u = wg_find(g, upstream);
	uint64_t p = u && id ? unknown_entry(u, id) : 0;

	if (p == 0)
		return;		/* gone from the log: nothing left to change */
	log_remove(u, p - 1);
	if (w[UNIT_MESSAGES] || w[UNIT_RECIPIENTS] || w[UNIT_CONNECTIONS])
		log_insert(u, t, t, w, 0, -1);
}

/* Replay one suspension into its fields: the latest end wins, the longest
 * period, and the start that period implies.  1 if the end is this one's. */
static int
replay_susp(int64_t *until, int64_t *len, int64_t *start, char **reason, int64_t r_until,
    int64_t r_len, const char *r_reason)
{
	int latest = r_until > *until;

	if (latest) {
		*until = r_until;
		free(*reason);
		*reason = xstrdup(r_reason);
	}
	if (r_len > *len)
		*len = r_len;
	if (*until - *len > *start)
		*start = *until - *len;
	return latest;
}

void
wg_replay_suspend(struct wgate *g, const char *upstream, int auth, int quota, int64_t until,
    int64_t len, const char *reason, const uint64_t *fp)
{
	struct wg_up *u = get_up(g, upstream);

	if (auth) {
		if (replay_susp(&u->auth_until, &u->auth_len, &u->auth_start, &u->auth_reason,
		    until, len, reason)) {
			u->auth_fp_known = fp != NULL;
			u->auth_fp = fp ? *fp : 0;
		}
		if (u->auth_since == 0 || u->auth_start < u->auth_since)
			u->auth_since = u->auth_start;
		u->probe = 1;
	} else {
		if (replay_susp(&u->susp_until, &u->susp_len, &u->susp_start, &u->susp_reason,
		    until, len, reason))
			u->susp_quota = quota;
	}
}
