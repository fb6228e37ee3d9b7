/*
 * window_test.c: the rate engine (src/gate/window.c) on a simulated
 * clock.  Fixed cases for each rule, then randomized schedules (fixed
 * seeds) with mixed weights, several windows, calendar windows, reloads,
 * refunds, throttles and disconnects, checked by brute force over every
 * recorded send:
 *   - at every grant, for every window of the policy in force, the weight
 *     logged in the window plus the weight held plus the new grant <= N;
 *   - for every window (N, T) and every instant s, the weight logged in
 *     [s, s + T) <= N (calendar: in every [boundary, boundary + T));
 *   - a wake-up time is exact: nothing fits one ms before it, something
 *     fits at it.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gate/window.h"
#include "lib/alloc.h"

/* ---- policies built in memory ---- */

static struct policy_class classes[] = {
	{ (char *)"hi", 10, NULL, 0, 0, 0, 0 },
	{ (char *)"lo", 1, NULL, 0, 0, 0, 0 },
};
static struct policy_throttle throttles[] = {
	{ (char *)"421 *", 60, 240, 0 },
};

struct tpol {
	struct policy p;
	struct policy_upstream up;
	struct policy_window win[4];
};

static void
tpol_init(struct tpol *t, const struct policy_window *w, size_t n)
{
	memset(t, 0, sizeof *t);
	memcpy(t->win, w, n * sizeof *w);
	t->up.name = (char *)"up";
	t->up.win = t->win;
	t->up.nwin = n;
	t->p.up = &t->up;
	t->p.nup = 1;
	t->p.cls = classes;
	t->p.ncls = 2;
	t->p.thr = throttles;
	t->p.nthr = 1;
}

static struct policy_window
SW(long long limit, long long per, enum policy_unit unit)
{
	struct policy_window w = { limit, per, unit, 0, 0, 0 };
	return w;
}

static struct policy_window
CW(long long limit, long long per, enum policy_unit unit, long long align)
{
	struct policy_window w = { limit, per, unit, 1, align, 0 };
	return w;
}

/* ---- a recorder of grants and refusals ---- */

#define MAXREC 20000

struct rec {
	struct wg_req *r;
	uint32_t w[UNIT_COUNT];
	uint32_t lw[UNIT_COUNT];	/* the weight logged when it ended */
	int64_t g;		/* grant time */
	int64_t from, e;	/* accepted at some instant in [from, e] */
	uint64_t gseq, eseq;	/* event order */
	int ended, logged;
};

static struct sim {
	struct rec rec[MAXREC];
	size_t nrec;
	uint64_t seq;
	int64_t now;
	size_t refused;
	const struct tpol *pol;	/* in force */
	int check_each_grant;
	struct wg_req *waiting[4096];	/* requests not granted yet */
	size_t nwait;
	int64_t grace;
} S;

/* A request leaves S.waiting when granted or refused (then freed). */
static void
unwait(struct wg_req *r)
{
	size_t k;

	for (k = 0; k < S.nwait; k++)
		if (S.waiting[k] == r) {
			S.waiting[k] = S.waiting[--S.nwait];
			return;
		}
}

static void check_grant(size_t k);

static void
on_granted(void *arg, struct wg_req *r)
{
	struct rec *x;

	(void)arg;
	cr_assert(S.nrec < MAXREC);
	x = &S.rec[S.nrec++];
	memset(x, 0, sizeof *x);
	x->r = r;
	memcpy(x->w, r->w, sizeof x->w);
	x->g = S.now;
	x->gseq = ++S.seq;
	r->owner = x;
	unwait(r);
	if (S.check_each_grant)
		check_grant(S.nrec - 1);
}

/* The LATER answers (fallbacks, mail/route.h), in order. */
static struct later {
	struct wg_req *r;
	enum route_kind why;
	int64_t until, at;
} L[64];
static size_t nL;

static void
on_refused(void *arg, struct wg_req *r, enum wg_code code)
{
	(void)arg;
	S.refused++;
	unwait(r);
	if (code == WG_LATER) {
		cr_assert(nL < 64);
		L[nL++] = (struct later){ r, r->later_why, r->later_until, S.now };
		cr_assert_gt(r->later_until, S.now, "LATER asks again later, not now");
	}
}

static const struct wg_ops ops = { on_granted, on_refused, NULL, NULL, NULL };

static int64_t
tbucket(const struct policy_window *w, int64_t t)
{
	int64_t per = w->per * 1000, ph = w->align * 1000 % per, m = (t - ph) % per;

	return t - (m < 0 ? m + per : m);
}

/* Brute force: at the grant of rec k, every window of the policy holds. */
static void
check_grant(size_t k)
{
	const struct rec *x = &S.rec[k];
	size_t i, j;

	for (i = 0; i < S.pol->up.nwin; i++) {
		const struct policy_window *w = &S.pol->win[i];
		int64_t used = 0;

		for (j = 0; j <= k; j++) {
			const struct rec *y = &S.rec[j];
			int held = !y->ended || y->eseq > x->gseq;

			if (held) {
				used += y->w[w->unit];
			} else if (y->logged) {
				int in = w->calendar ? y->e >= tbucket(w, x->g)
				    : y->e > x->g - w->per * 1000;
				if (in)
					used += y->lw[w->unit];
			}
		}
		cr_assert(used <= w->limit,
		    "grant %zu at %lld: window %zu (%lld per %llds %s) has %lld",
		    k, (long long)x->g, i, w->limit, w->per, policy_unit_name(w->unit),
		    (long long)used);
	}
}

/* Over every instant: the weight that may have been accepted in
 * [s, s+T) <= N, an interval send counting in every window it overlaps
 * (calendar: in every bucket it overlaps).  A send in [f, e] overlaps
 * [s, s+T) iff f - T < s <= e: a difference array over s. */
static void
check_every_instant(const struct policy_window *w, long long limit)
{
	int64_t tmax = S.now + 1, per = w->per * 1000, s, sum = 0, b, lo;
	int64_t *d;
	size_t j;

	for (j = 0; j < S.nrec; j++)
		if (S.rec[j].logged && S.rec[j].e + 1 > tmax)
			tmax = S.rec[j].e + 1;
	d = xcalloc((size_t)tmax + 2, sizeof *d);
	for (j = 0; j < S.nrec; j++) {
		const struct rec *y = &S.rec[j];

		if (!y->logged)
			continue;
		cr_assert(y->from >= 0 && y->from <= y->e && y->e < tmax);
		if (w->calendar) {
			/* Index the buckets by their start: every one from
			 * the one of `from` to the one of `e`. */
			for (b = tbucket(w, y->from); b <= y->e; b += per) {
				lo = b < 0 ? 0 : b;
				d[lo] += y->lw[w->unit];
			}
		} else {
			lo = y->from - per + 1;
			d[lo < 0 ? 0 : lo] += y->lw[w->unit];
			d[y->e + 1] -= y->lw[w->unit];
		}
	}
	if (w->calendar) {
		for (s = 0; s < tmax; s++)
			cr_assert(d[s] <= limit, "calendar bucket at %lld: %lld > %lld",
			    (long long)s, (long long)d[s], limit);
	} else {
		for (s = 0; s < tmax; s++) {
			sum += d[s];
			cr_assert(sum <= limit, "window [%lld, +%lld): %lld > %lld",
			    (long long)s, (long long)per, (long long)sum, limit);
		}
	}
	free(d);
}

static void
sim_reset(const struct tpol *p, struct wgate *g, int64_t start)
{
	int64_t grace = S.grace;	/* chosen by the caller */

	memset(&S, 0, sizeof S);
	nL = 0;
	S.grace = grace;
	S.pol = p;
	S.now = start;
	S.check_each_grant = 1;
	wg_init(g, &ops);
	g->grace = S.grace;
	wg_set_policy(g, &p->p, 0, S.now);
}

static struct wg_req *
acq(struct wgate *g, const char *cls, uint32_t m, uint32_t r, uint32_t c, enum wg_code want)
{
	uint32_t w[UNIT_COUNT] = { m, r, c };
	struct wg_req *q = NULL;

	cr_assert_eq(wg_acquire(g, "up", cls, NULL, w, NULL, NULL, S.now, &q), want);
	return q;
}

/* End x with outcome o (at: for WG_SENT, -1 or the acceptance time),
 * recording independently of the engine what it must have logged, and
 * checking that the engine says the same. */
static void
end_at(struct wgate *g, struct rec *x, enum wg_outcome o, int64_t at)
{
	struct wg_done d;
	const char *reply = o == WG_THROTTLED ? "421 4.7.0 slow down" :
	    o == WG_QUOTA ? "554 5.2.0 SubmissionQuotaExceededException" :
	    o == WG_AUTHFAIL ? "535 5.7.8 bad credentials" :
	    o == WG_UNREACHED || o == WG_NOGREETING ? "connect: Connection refused" : NULL;
	size_t i;

	x->ended = 1;
	x->eseq = ++S.seq;
	memcpy(x->lw, x->w, sizeof x->lw);
	x->from = x->e = S.now;
	switch (o) {
	case WG_SENT:
		if (at >= 0)
			x->from = x->e = at < x->g ? x->g : at > S.now ? S.now : at;
		break;
	case WG_UNKNOWN:
		x->from = x->g;
		x->e = S.now + S.grace;
		break;
	case WG_NOMAIL:
	case WG_AUTHFAIL:
	case WG_NOGREETING:
		x->lw[UNIT_MESSAGES] = x->lw[UNIT_RECIPIENTS] = 0;
		break;
	default:
		break;
	}
	x->logged = o != WG_REFUND && o != WG_UNREACHED && (x->lw[0] || x->lw[1] || x->lw[2]);
	(void)wg_report_at(g, x->r, o, reply, at, S.now, &d);
	cr_assert_eq(d.logged, x->logged);
	if (d.logged) {
		cr_assert(d.from == x->from && d.t == x->e, "outcome %d: [%lld, %lld] not [%lld, %lld]",
		    (int)o, (long long)d.from, (long long)d.t, (long long)x->from, (long long)x->e);
		for (i = 0; i < UNIT_COUNT; i++)
			cr_assert_eq(d.w[i], x->lw[i]);
	}
	x->r = NULL;
}

static void
end(struct wgate *g, struct rec *x, enum wg_outcome o)
{
	end_at(g, x, o, -1);
}

/* x's client goes away: an unknown outcome. */
static void
vanish(struct wgate *g, struct rec *x)
{
	wg_cancel(g, x->r, S.now, NULL);
	x->ended = 1;
	memcpy(x->lw, x->w, sizeof x->lw);
	x->logged = 1;
	x->from = x->g;
	x->e = S.now + S.grace;
	x->eseq = ++S.seq;
	x->r = NULL;
}

/* A request of one message with conditions (route.h), as weir-send asks
 * for a batch on a kept session: its grant, or NULL while it waits. */
static struct wg_req *
acq_unless(struct wgate *g, const char *const *cond)
{
	uint32_t w[UNIT_COUNT] = { 1, 1, 0 };
	struct route_when u;
	struct wg_req *q = NULL;
	unsigned seen = 0;
	const char *why;
	size_t i;

	route_when_none(&u);
	for (i = 0; cond[i]; i++)
		cr_assert_eq(route_when_add(&u, cond[i], &seen, &why), 0, "%s", why);
	cr_assert_eq(wg_acquire(g, "up", NULL, NULL, w, &u, NULL, S.now, &q), WG_OK);
	return q;
}

/* ---- fixed cases ---- */

Test(window, two_per_second_exact_wake)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(2, 1, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 5000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 2);
	/* Held grants: only reports can help. */
	cr_assert_eq(wg_next_wake(&g, S.now), -1);
	S.now = 5100;
	end(&g, &S.rec[0], WG_SENT);
	S.now = 5300;
	end(&g, &S.rec[1], WG_SENT);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	/* The first send leaves (5100 - 1000, 5100] + 1000 = at 6100. */
	cr_assert_eq(wg_next_wake(&g, S.now), 6100);
	cr_assert_eq(wg_pump(&g, 6099), 0);
	S.now = 6100;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	cr_assert_eq(S.rec[2].g, 6100);
	wg_free(&g);
}

Test(window, refund_gives_the_slot_back_disconnect_does_not)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(1, 10, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 50;
	end(&g, &S.rec[0], WG_REFUND);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	/* The client holding the second grant goes away: sent at 70. */
	S.now = 70;
	vanish(&g, &S.rec[1]);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 10070);
	wg_free(&g);
}

/* Issue 12: an unknown outcome counts as accepted at any instant from its
 * grant to report + grace, and moves no other send.  "2 per 10 s", grace
 * 600 s: the unknown send takes one slot until 600 s + 10 s; the other
 * slot keeps turning every 10 s.  (Before: a dropped grant was one point
 * in time and the log kept its order by moving later sends up to it.) */
Test(window, unknown_outcome_holds_one_slot_and_moves_nothing)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(2, 10, UNIT_MESSAGES) };
	int i;

	tpol_init(&p, w, 1);
	S.grace = 600000;
	sim_reset(&p, &g, 1000);
	acq(&g, NULL, 1, 1, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 2000;
	end(&g, &S.rec[0], WG_UNKNOWN);
	cr_assert_eq(S.rec[0].e, 602000);
	for (i = 1; i <= 5; i++) {
		acq(&g, NULL, 1, 1, 1, WG_OK);
		cr_assert_eq(wg_pump(&g, S.now), 1, "send %d at %lld", i, (long long)S.now);
		S.now += 100;
		end(&g, &S.rec[i], WG_SENT);
		/* The next slot: exactly 10 s after this send, not after
		 * the unknown one. */
		acq(&g, NULL, 1, 1, 1, WG_OK);
		cr_assert_eq(wg_pump(&g, S.now), 0);
		cr_assert_eq(wg_next_wake(&g, S.now), S.now + 10000);
		S.now += 10000;
		cr_assert_eq(wg_pump(&g, S.now), 1);
		S.now += 1;
		end(&g, &S.rec[i + 1], WG_SENT);
		/* Sorry, one record per round: fold the extra grant in. */
		i++;
		S.now += 10000;
	}
	/* The unknown one still counts: one slot only. */
	wg_expire(wg_find(&g, "up"), S.now);
	cr_assert_eq(wg_win_used(wg_find(&g, "up"), 0), 1);
	S.now = 612000;
	wg_expire(wg_find(&g, "up"), S.now);
	cr_assert_eq(wg_win_used(wg_find(&g, "up"), 0), 0);
	for (i = 0; i < (int)S.nrec; i++)
		cr_assert(S.rec[i].ended);
	check_every_instant(&w[0], 2);
	wg_free(&g);
}

/* A grant held by a client that vanishes is the same unknown outcome:
 * with an upstream that takes 8 s on the final dot, "1 per 10 s" holds
 * only if the send counts until death + grace + T. */
Test(window, vanished_client_counts_until_grace)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(1, 10, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	S.grace = 600000;
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 1, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 3000;
	vanish(&g, &S.rec[0]);
	acq(&g, NULL, 1, 1, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 3000 + 600000 + 10000);
	wg_free(&g);
}

/* An upstream's own grace (policy.conf's grace) takes the place of the
 * gate's for its unknown outcomes, reported or vanished; another
 * upstream keeps the gate's. */
Test(window, upstream_grace_replaces_the_gates)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(1, 10, UNIT_MESSAGES) };
	uint32_t one[UNIT_COUNT] = { 1, 1, 0 };
	struct wg_req *q;

	tpol_init(&p, w, 1);
	p.up.grace = 20;
	S.grace = 600000;
	sim_reset(&p, &g, 0);
	cr_assert_eq(wg_find(&g, "up")->grace, 20000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 3000;
	vanish(&g, &S.rec[0]);
	cr_assert_eq(wg_log_at(wg_find(&g, "up"), wg_find(&g, "up")->lseq)->t, 23000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 3000 + 20000 + 10000);
	/* An upstream no section names: the gate's grace. */
	cr_assert_eq(wg_acquire(&g, "other", NULL, NULL, one, NULL, NULL, S.now, &q), WG_OK);
	cr_assert_eq(wg_find(&g, "other")->grace, 600000);
	wg_free(&g);
}

/* x's unknown outcome was settled as d says (asserted by the caller):
 * what the simulation checks the grants against from now on. */
static void
settled(struct rec *x, const struct wg_done *d)
{
	x->logged = d->logged;
	if (d->logged) {
		x->from = d->from;
		x->e = d->t;
		memcpy(x->lw, d->w, sizeof x->lw);
	}
}

/* SETTLE: a vanished client's send, whose deliverer read the 250 at
 * 8 s after all, is logged there: "1 per 10 s" grants again at 18 s,
 * not 10 minutes after the drop.  Once only; a refund frees the slot at
 * once; nothing else in the log moves. */
Test(window, settle_logs_the_send_at_its_time)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(2, 10, UNIT_MESSAGES) };
	struct wg_done d;
	struct wg_up *u;
	uint64_t id0, id1;

	tpol_init(&p, w, 1);
	S.grace = 600000;
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 2);
	id0 = S.rec[0].r->id;
	id1 = S.rec[1].r->id;
	S.now = 300;
	vanish(&g, &S.rec[0]);
	vanish(&g, &S.rec[1]);
	u = wg_find(&g, "up");
	cr_assert_eq(u->ln, 2);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 300 + 600000 + 10000);
	/* The first one's deliverer read the 250 at 8 s. */
	S.now = 8500;
	cr_assert_eq(wg_settle(&g, u, id0, WG_SENT, NULL, 8000, 1, S.now, &d), 1);
	cr_assert(d.logged && d.from == 8000 && d.t == 8000);
	settled(&S.rec[0], &d);
	cr_assert_eq(u->ln, 2);
	cr_assert_eq(wg_log_at(u, u->lseq)->t, 8000);
	cr_assert_eq(wg_log_at(u, u->lseq + 1)->id, id1);
	cr_assert_eq(wg_win_used(u, 0), 2);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 18000);
	/* Settled once: again, or an id never unknown, changes nothing. */
	cr_assert_eq(wg_settle(&g, u, id0, WG_SENT, NULL, 8000, 1, S.now, &d), 0);
	cr_assert_eq(wg_settle(&g, u, 999, WG_REFUND, NULL, -1, 0, S.now, &d), 0);
	cr_assert_eq(wg_settle(&g, u, id1, WG_UNKNOWN, NULL, -1, 0, S.now, &d), 0);
	cr_assert_eq(u->ln, 2);
	/* The second's deliverer never sent it: the slot is free now. */
	cr_assert_eq(wg_settle(&g, u, id1, WG_REFUND, NULL, -1, 0, S.now, &d), 1);
	cr_assert(!d.logged);
	settled(&S.rec[1], &d);
	cr_assert_eq(u->ln, 1);
	cr_assert_eq(wg_win_used(u, 0), 1);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	cr_assert_eq(u->n_settled, 2);
	/* The status page's history: the one send at 8 s, not the unknown
	 * intervals as well (each chart mark is one send). */
	cr_assert_eq(u->hn, 1, "%zu sends in the history, 1 made", u->hn);
	cr_assert(wg_history_at(u, 0)->from == 8000 && wg_history_at(u, 0)->t == 8000);
	wg_free(&g);
}

/* A settled NOMAIL keeps the connection only, at the settlement's time;
 * a SENT time before the grant is clamped to it. */
Test(window, settle_nomail_and_clamps)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(5, 10, UNIT_MESSAGES), SW(5, 10, UNIT_CONNECTIONS) };
	struct wg_done d;
	struct wg_up *u;
	uint64_t id0, id1;

	tpol_init(&p, w, 2);
	S.grace = 5000;
	sim_reset(&p, &g, 1000);
	acq(&g, NULL, 1, 1, 1, WG_OK);
	acq(&g, NULL, 1, 1, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 2);
	id0 = S.rec[0].r->id;
	id1 = S.rec[1].r->id;
	S.now = 2000;
	vanish(&g, &S.rec[0]);
	vanish(&g, &S.rec[1]);
	u = wg_find(&g, "up");
	cr_assert_eq(wg_win_used(u, 0), 2);
	cr_assert_eq(wg_win_used(u, 1), 2);
	S.now = 3000;
	cr_assert_eq(wg_settle(&g, u, id0, WG_NOMAIL, NULL, -1, 0, S.now, &d), 1);
	cr_assert(d.logged && d.t == 3000 && d.w[UNIT_MESSAGES] == 0 && d.w[UNIT_CONNECTIONS] == 1);
	settled(&S.rec[0], &d);
	cr_assert_eq(wg_win_used(u, 0), 1);
	cr_assert_eq(wg_win_used(u, 1), 2);
	cr_assert_eq(wg_settle(&g, u, id1, WG_SENT, NULL, 500, 1, S.now, &d), 1);
	cr_assert(d.logged && d.t == 1000, "logged at %lld", (long long)d.t);
	settled(&S.rec[1], &d);
	cr_assert_eq(wg_win_used(u, 0), 1);
	cr_assert_eq(wg_win_used(u, 1), 2);
	wg_free(&g);
}

/* A send a short window has let go already but a long one still counts
 * is settled out of the long one alone; the windows go on agreeing with
 * the log (every later grant checked against the simulation). */
Test(window, settle_after_a_short_window_let_it_go)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(1, 1, UNIT_MESSAGES), SW(3, 100, UNIT_MESSAGES) };
	struct wg_done d;
	struct wg_up *u;
	uint64_t id;
	int i;

	tpol_init(&p, w, 2);
	S.grace = 1000;
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	id = S.rec[0].r->id;
	S.now = 500;
	vanish(&g, &S.rec[0]);		/* [0, 1500] */
	S.now = 3000;
	u = wg_find(&g, "up");
	wg_expire(u, S.now);
	cr_assert_eq(wg_win_used(u, 0), 0);
	cr_assert_eq(wg_win_used(u, 1), 1);
	cr_assert_eq(wg_settle(&g, u, id, WG_SENT, NULL, 900, 1, S.now, &d), 1);
	settled(&S.rec[0], &d);
	wg_expire(u, S.now);
	cr_assert_eq(wg_win_used(u, 0), 0);
	cr_assert_eq(wg_win_used(u, 1), 1);
	for (i = 1; i <= 2; i++) {
		acq(&g, NULL, 1, 1, 0, WG_OK);
		cr_assert_eq(wg_pump(&g, S.now), 1, "send %d", i);
		S.now += 10;
		end(&g, &S.rec[i], WG_SENT);
		S.now += 1000;
	}
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 900 + 100000);
	check_every_instant(&w[1], 3);
	wg_free(&g);
}

/* A grant its client never started (STARTS, no START) reached no
 * deliverer: when the client goes it is given back, not held for the
 * grace; a started one is an unknown outcome. */
Test(window, vanished_client_unstarted_grant_refunded)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(2, 10, UNIT_MESSAGES) };
	struct wg_up *u;
	struct wg_done d;

	tpol_init(&p, w, 1);
	S.grace = 600000;
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 2);
	S.rec[0].r->started = 0;
	S.now = 1000;
	wg_cancel(&g, S.rec[0].r, S.now, &d);
	cr_assert(!d.logged, "an unstarted grant was logged");
	S.rec[0].ended = 1;
	S.rec[0].r = NULL;
	vanish(&g, &S.rec[1]);
	u = wg_find(&g, "up");
	cr_assert_eq(u->ln, 1);
	cr_assert_eq(u->n_refunded, 1);
	cr_assert_eq(u->n_unknown, 1);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1, "the refunded slot is free");
	wg_free(&g);
}

/* REPORT SENT <at>: logged at <at>, clamped into [grant, now]. */
Test(window, sent_at_is_logged_then_clamped)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(1, 10, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 1000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 5000;
	end_at(&g, &S.rec[0], WG_SENT, 3500);
	cr_assert_eq(S.rec[0].e, 3500);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_next_wake(&g, S.now), 13500);	/* not 15000 */
	S.now = 13500;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 14000;
	end_at(&g, &S.rec[1], WG_SENT, 100);		/* before the grant */
	cr_assert_eq(S.rec[1].e, 13500);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_next_wake(&g, S.now), 23500);
	S.now = 23500;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 24000;
	end_at(&g, &S.rec[2], WG_SENT, 99999);		/* in the future */
	cr_assert_eq(S.rec[2].e, 24000);
	check_every_instant(&w[0], 1);
	wg_free(&g);
}

/* NOMAIL logs only the connection; AUTHFAIL too, and suspends 5 min
 * doubling to 1 h, then one probe at a time until a good report. */
Test(window, nomail_and_authfail)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(1, 60, UNIT_MESSAGES), SW(3, 60, UNIT_CONNECTIONS) };
	struct wg_up *u;
	int64_t until;

	tpol_init(&p, w, 2);
	sim_reset(&p, &g, 0);
	u = wg_find(&g, "up");
	acq(&g, NULL, 1, 5, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 100;
	end(&g, &S.rec[0], WG_NOMAIL);
	cr_assert_eq(wg_win_used(u, 0), 0);
	cr_assert_eq(wg_win_used(u, 1), 1);
	acq(&g, NULL, 1, 5, 1, WG_OK);
	acq(&g, NULL, 1, 5, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);	/* one message per minute */
	S.now = 200;
	until = wg_report(&g, S.rec[1].r, WG_AUTHFAIL, "535 5.7.8 no", S.now);
	S.rec[1].r = NULL; S.rec[1].ended = 1;
	cr_assert_eq(until, 200 + 300000);
	cr_assert(u->probe);
	cr_assert_eq(wg_win_used(u, 0), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 300200);
	S.now = 300200;
	cr_assert_eq(wg_pump(&g, S.now), 1);	/* the probe */
	acq(&g, NULL, 1, 5, 1, WG_OK);
	until = wg_report(&g, S.rec[2].r, WG_AUTHFAIL, "535 5.7.8 no", S.now);
	S.rec[2].r = NULL; S.rec[2].ended = 1;
	cr_assert_eq(until, 300200 + 600000);	/* doubled */
	wg_lift(u, 1, S.now);			/* a reload */
	cr_assert_eq(u->auth_until, 0);
	cr_assert_eq(wg_pump(&g, S.now), 1);	/* one probe */
	acq(&g, NULL, 0, 0, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 0);	/* only one at a time */
	cr_assert_eq(wg_next_wake(&g, S.now), -1);
	end(&g, &S.rec[3], WG_SENT);
	cr_assert(!u->probe);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	wg_free(&g);
}

/* A failure reported after a lift (a reload, RESUME, a restart with
 * new credentials) of a send granted before it tried the credentials
 * of before: no new suspension.  (faultmatrix/auth_535 saw a second
 * session's 535, granted before the first one's, come after the reload
 * that followed the fix, and the fixed relay waited 300 s.)  One granted
 * after the lift still suspends. */
Test(window, authfail_granted_before_a_lift_suspends_nothing)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 60, UNIT_MESSAGES) };
	struct wg_up *u;
	int64_t until;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 0);
	u = wg_find(&g, "up");
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 2);		/* two sessions' messages */
	S.now = 100;
	until = wg_report(&g, S.rec[0].r, WG_AUTHFAIL, "535 5.7.8 no", S.now);
	S.rec[0].r = NULL; S.rec[0].ended = 1;
	cr_assert_eq(until, 100 + WG_AUTH_SUSPEND_MS);
	S.now = 200;
	wg_lift(u, 1, S.now);				/* fixed, reloaded */
	S.now = 300;
	until = wg_report(&g, S.rec[1].r, WG_AUTHFAIL, "535 5.7.8 no", S.now);
	S.rec[1].r = NULL; S.rec[1].ended = 1;
	cr_assert_eq(u->auth_until, 0, "a failure of before the lift suspended until %lld",
	    (long long)u->auth_until);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 400;
	until = wg_report(&g, S.rec[2].r, WG_AUTHFAIL, "535 5.7.8 no", S.now);
	S.rec[2].r = NULL; S.rec[2].ended = 1;
	cr_assert_eq(until, 400 + WG_AUTH_SUSPEND_MS);	/* after the lift: suspends */
	wg_free(&g);
}

/* The probe with kept sessions: one connection-holding grant (a
 * session's slot, 0/0/1) and one message grant (1/n/0) at a time, so
 * that the probe's message can go on the probe's session; a second
 * session or a second message waits for a good report.  (Before, a slot
 * waited for message grants that waited for it: faultmatrix/auth_535
 * stalled.) */
Test(window, probe_is_one_session_and_one_message)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 60, UNIT_MESSAGES) };
	struct wg_up *u;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 0);
	u = wg_find(&g, "up");
	acq(&g, NULL, 0, 0, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);		/* rec 0: a session's slot */
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);		/* rec 1: its message */
	S.now = 100;
	(void)wg_report(&g, S.rec[1].r, WG_AUTHFAIL, "535 5.7.8 no", S.now);
	S.rec[1].r = NULL; S.rec[1].ended = 1;
	end(&g, &S.rec[0], WG_NOMAIL);			/* the session ends */
	cr_assert(u->probe);
	wg_lift(u, 1, S.now);					/* a reload: probing now */
	cr_assert(u->probe);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 0, 0, 1, WG_OK);
	acq(&g, NULL, 0, 0, 1, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	/* The first message and the first slot, not the second of either. */
	cr_assert_eq(wg_pump(&g, S.now), 2);
	cr_assert_eq(S.rec[2].w[UNIT_MESSAGES] + S.rec[3].w[UNIT_MESSAGES], 1);
	cr_assert_eq(S.rec[2].w[UNIT_CONNECTIONS] + S.rec[3].w[UNIT_CONNECTIONS], 1);
	cr_assert_eq(wg_next_wake(&g, S.now), -1);
	S.now = 200;
	end(&g, S.rec[2].w[UNIT_MESSAGES] ? &S.rec[2] : &S.rec[3], WG_SENT);
	cr_assert(!u->probe);
	cr_assert_eq(wg_pump(&g, S.now), 2);		/* the rest */
	wg_free(&g);
}

/* After a gate crash a grant found open in the journal may have been
 * accepted until restart + grace: one slot, not the whole window. */
Test(window, replayed_open_grant_takes_one_slot)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(3, 1, UNIT_MESSAGES) };
	uint32_t one[UNIT_COUNT] = { 1, 1, 1 };
	int i;

	tpol_init(&p, w, 1);
	memset(&S, 0, sizeof S);
	S.pol = &p;
	S.now = 50000;
	wg_init(&g, &ops);
	wg_replay_send(&g, "up", 49000, 50000 + 600000, one, 0);
	wg_set_policy(&g, &p.p, 0, S.now);
	for (i = 0; i < 20; i++) {
		acq(&g, NULL, 1, 1, 1, WG_OK);
		if (wg_pump(&g, S.now) == 0) {
			S.now = wg_next_wake(&g, S.now);
			cr_assert(S.now > 0 && S.now < 60000, "stalled until %lld", (long long)S.now);
			cr_assert_eq(wg_pump(&g, S.now), 1);
		}
		end(&g, &S.rec[i], WG_SENT);
	}
	/* Two slots a second: 20 sends in under 10 s. */
	cr_assert_lt(S.now, 60000);
	wg_free(&g);
}

Test(window, too_big_and_caps_refused_at_once)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(10, 60, UNIT_RECIPIENTS), SW(3, 60, UNIT_MESSAGES) };

	tpol_init(&p, w, 2);
	p.up.max_recipients = 8;
	p.up.messages_per_connection = 2;
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 11, 0, WG_TOOBIG);
	acq(&g, NULL, 1, 9, 0, WG_TOOBIG);	/* max_recipients */
	acq(&g, NULL, 3, 1, 0, WG_TOOBIG);	/* messages_per_connection */
	acq(&g, NULL, 0, 0, 0, WG_BADWEIGHT);
	acq(&g, "nosuch", 1, 1, 0, WG_NOCLASS);
	{
		uint32_t wt[UNIT_COUNT] = { 1, 1, 0 };
		struct wg_req *q;
		/* No policy for it: it waits for one (issue 12). */
		cr_assert_eq(wg_acquire(&g, "other", NULL, NULL, wt, NULL, NULL, 0, &q), WG_OK);
		cr_assert_eq(wg_pump(&g, 0), 0);
		cr_assert_eq(wg_head_fit(wg_find(&g, "other"), 0), -1);
		/* Its client goes: the made-up upstream is forgotten. */
		wg_cancel(&g, q, 0, NULL);
		cr_assert_null(wg_find(&g, "other"));
	}
	acq(&g, NULL, 1, 8, 0, WG_OK);
	wg_free(&g);
}

Test(window, priority_then_fifo_and_no_overtaking)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(5, 1, UNIT_RECIPIENTS) };
	struct wg_req *lo1, *hi1, *hi2big, *hi3;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 5, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, 0), 1);
	end(&g, &S.rec[0], WG_SENT);	/* window full until 1000 */
	lo1 = acq(&g, "lo", 1, 1, 0, WG_OK);
	hi1 = acq(&g, "hi", 1, 1, 0, WG_OK);
	hi2big = acq(&g, "hi", 1, 4, 0, WG_OK);
	hi3 = acq(&g, "hi", 1, 1, 0, WG_OK);
	cr_assert_eq(g.ups->wait_head, hi1);
	cr_assert_eq(hi1->next, hi2big);
	cr_assert_eq(hi2big->next, hi3);
	cr_assert_eq(hi3->next, lo1);
	S.now = 1000;
	/* hi1 (1) and hi2big (4) fill the window; hi3 and lo1 wait. */
	cr_assert_eq(wg_pump(&g, S.now), 2);
	cr_assert_eq(S.rec[1].r, hi1);
	cr_assert_eq(S.rec[2].r, hi2big);
	end(&g, &S.rec[1], WG_SENT);
	S.now = 1200;
	end(&g, &S.rec[2], WG_SENT);
	S.now = 2000;
	cr_assert_eq(wg_pump(&g, S.now), 1);	/* the 1 from t=1000 left */
	cr_assert_eq(S.rec[3].r, hi3);
	wg_free(&g);
}

Test(window, big_head_blocks_smaller_behind)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(10, 1, UNIT_RECIPIENTS) };

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 6, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, 0), 1);
	end(&g, &S.rec[0], WG_SENT);
	acq(&g, NULL, 1, 8, 0, WG_OK);	/* needs the 6 to leave */
	acq(&g, NULL, 1, 1, 0, WG_OK);	/* would fit now, must not pass */
	cr_assert_eq(wg_pump(&g, 10), 0);
	cr_assert_eq(wg_next_wake(&g, 10), 1000);
	S.now = 1000;
	cr_assert_eq(wg_pump(&g, S.now), 2);
	wg_free(&g);
}

Test(window, suspension_grows_and_resets)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 1, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	wg_pump(&g, 0);
	cr_assert_eq(wg_report(&g, S.rec[0].r, WG_THROTTLED, "421 4.7.0 try later", 0), 60000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, 59999), 0);
	cr_assert_eq(wg_next_wake(&g, 100), 60000);
	S.now = 60000;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	/* Again: 120 s, then 240 s (max_suspend), then 240 s. */
	cr_assert_eq(wg_report(&g, S.rec[1].r, WG_THROTTLED, "421 busy", 60000), 180000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	S.now = 180000;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	cr_assert_eq(wg_report(&g, S.rec[2].r, WG_THROTTLED, "421 busy", S.now), 180000 + 240000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	S.now = 420000;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	cr_assert_eq(wg_report(&g, S.rec[3].r, WG_THROTTLED, "421 busy", S.now), 420000 + 240000);
	/* A success resets the growth. */
	acq(&g, NULL, 1, 1, 0, WG_OK);
	S.now = 660000;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	wg_report(&g, S.rec[4].r, WG_SENT, NULL, S.now);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	/* Unknown reply text: the default suspension (5 min). */
	cr_assert_eq(wg_report(&g, S.rec[5].r, WG_THROTTLED, "554 odd", S.now), 660000 + 300000);
	wg_free(&g);
}

/* Several connections in flight when the upstream says "slow down":
 * one suspension, not one doubling per throttled report (found by
 * scripts/bench/compare.sh: six 421s within 20 ms made 60 s into 32
 * min).  A success granted before the suspension does not reset the
 * growth either; the next episode, after it, doubles once. */
Test(window, suspension_once_per_episode)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 1, UNIT_MESSAGES) };
	size_t i;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 0);
	for (i = 0; i < 8; i++)
		acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, 0), 8);
	cr_assert_eq(wg_report(&g, S.rec[0].r, WG_THROTTLED, "421 4.7.0 try later", 10), 60010);
	for (i = 1; i < 6; i++)
		cr_assert_eq(wg_report(&g, S.rec[i].r, WG_THROTTLED, "421 busy", 10 + (int64_t)i),
		    60010, "report %zu moved the suspension", i);
	wg_report(&g, S.rec[6].r, WG_SENT, NULL, 20);
	/* Reported after the suspension ended: a new episode, doubled. */
	cr_assert_eq(wg_report(&g, S.rec[7].r, WG_THROTTLED, "421 busy", 70000), 70000 + 120000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	S.now = 190000;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	cr_assert_eq(wg_report(&g, S.rec[8].r, WG_THROTTLED, "421 busy", S.now), 190000 + 240000);
	wg_free(&g);
}

Test(window, max_connections_waits_for_a_report)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 1, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	p.up.max_connections = 2;
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 1, 1, WG_OK);
	acq(&g, NULL, 1, 1, 1, WG_OK);
	acq(&g, NULL, 1, 1, 1, WG_OK);
	cr_assert_eq(wg_pump(&g, 0), 2);
	cr_assert_eq(wg_next_wake(&g, 0), -1);
	end(&g, &S.rec[0], WG_SENT);
	cr_assert_eq(wg_pump(&g, 0), 1);
	wg_free(&g);
}

Test(window, lowered_limit_applies_to_existing_history)
{
	struct tpol p, q;
	struct wgate g;
	struct policy_window w[] = { SW(5, 10, UNIT_MESSAGES) };
	struct policy_window w2[] = { SW(3, 10, UNIT_MESSAGES) };
	int i;

	tpol_init(&p, w, 1);
	tpol_init(&q, w2, 1);
	sim_reset(&p, &g, 0);
	for (i = 0; i < 5; i++) {
		S.now = i * 100;
		acq(&g, NULL, 1, 1, 0, WG_OK);
		cr_assert_eq(wg_pump(&g, S.now), 1);
		end(&g, &S.rec[i], WG_SENT);
	}
	S.now = 1000;
	wg_set_policy(&g, &q.p, 0, S.now);
	S.pol = &q;
	acq(&g, NULL, 1, 1, 0, WG_OK);
	/* 5 logged at 0..400, limit 3: three must leave (the third at 200). */
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 10200);
	cr_assert_eq(wg_pump(&g, 10199), 0);
	S.now = 10200;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	/* A reload that makes a waiting request too big refuses it. */
	acq(&g, NULL, 4, 1, 0, WG_TOOBIG);
	wg_free(&g);
}

/* Issue 12 item 5: a section removed and put back keeps its history
 * (before: wiped at the next pump, and the waiters refused NOPOLICY);
 * the waiters wait for it, and nothing is granted meanwhile. */
Test(window, section_removed_and_restored_keeps_history_and_waiters)
{
	struct tpol p;
	struct policy empty;
	struct wgate g;
	struct policy_window w[] = { SW(1, 10, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	memset(&empty, 0, sizeof empty);
	sim_reset(&p, &g, 0);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, 0), 1);
	wg_set_policy(&g, &empty, 0, 1);
	cr_assert_eq(S.refused, 0);
	/* The grant still reports fine. */
	end(&g, &S.rec[0], WG_SENT);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	S.now = 50000;
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), -1);
	cr_assert_eq(wg_find(&g, "up")->ln, 1);
	/* Back in the policy, "1 per 60 s" now: the history is still there. */
	w[0] = SW(1, 60, UNIT_MESSAGES);
	tpol_init(&p, w, 1);
	wg_set_policy(&g, &p.p, 0, S.now);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 60000);
	/* Out of the policy for longer than every window it had: kept for
	 * the 24 h horizon, dropped after. */
	wg_set_policy(&g, &empty, 0, S.now);
	wg_expire(wg_find(&g, "up"), WG_HORIZON_MIN_MS - 1);
	cr_assert_eq(wg_find(&g, "up")->ln, 1);
	wg_expire(wg_find(&g, "up"), WG_HORIZON_MIN_MS + 1);
	cr_assert_eq(wg_find(&g, "up")->ln, 0);
	wg_free(&g);
}

/* A policy whose only section is "*": each upstream asked for gets its
 * limits, in windows of its own; "*" itself is no upstream. */
Test(window, any_upstream_section)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(1, 10, UNIT_MESSAGES) };
	uint32_t one[UNIT_COUNT] = { 1, 1, 0 };
	struct wg_req *q = NULL;

	tpol_init(&p, w, 1);
	p.up.name = (char *)POLICY_ANY_UPSTREAM;
	sim_reset(&p, &g, 0);
	S.check_each_grant = 0;	/* the brute force knows one upstream */
	cr_assert_null(wg_find(&g, POLICY_ANY_UPSTREAM));
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, 0), 1);	/* 1 per 10 s for "up" */
	cr_assert_eq(wg_acquire(&g, "other", NULL, NULL, one, NULL, NULL, S.now, &q), WG_OK);
	cr_assert_not_null(wg_find(&g, "other"));
	cr_assert_eq(wg_pump(&g, 0), 1);	/* "other" has a window of its own */
	wg_free(&g);
}

Test(window, calendar_daily_resets_at_the_boundary)
{
	struct tpol p;
	struct wgate g;
	/* 2 per day, resetting at 01:00 UTC; wall = now + 0. */
	struct policy_window w[] = { CW(2, 86400, UNIT_MESSAGES, 3600) };
	int64_t day = 86400000LL, base = 10 * day + 3600000LL;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, base + day - 5000);	/* 5 s before a boundary */
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 2);
	end(&g, &S.rec[0], WG_SENT);
	end(&g, &S.rec[1], WG_SENT);
	cr_assert_eq(wg_next_wake(&g, S.now), base + day);
	cr_assert_eq(wg_pump(&g, base + day - 1), 0);
	S.now = base + day;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	wg_free(&g);
}

Test(window, calendar_phase_follows_wall_clock_offset)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { CW(1, 3600, UNIT_MESSAGES, 0) };

	tpol_init(&p, w, 1);
	memset(&S, 0, sizeof S);
	S.pol = &p;
	wg_init(&g, &ops);
	/* wall = mono + 1000 s: the next hour boundary on the wall clock
	 * (3600 s) is at mono 2600 s. */
	wg_set_policy(&g, &p.p, 1000000, 0);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, 0), 1);
	end(&g, &S.rec[0], WG_SENT);
	cr_assert_eq(wg_next_wake(&g, 0), 2600000);
	wg_free(&g);
}

/* ---- randomized schedules ---- */

static uint64_t rng;

static uint32_t
rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void
run_random(uint64_t seed, const struct tpol *pa, const struct tpol *pb, int steps)
{
	struct wgate g;
	size_t i, k;
	int step;
	const struct tpol *cur = pa;
	int64_t wake;

	rng = seed;
	S.grace = (int64_t)(seed % 3) * 2500;
	sim_reset(pa, &g, 0);
	for (step = 0; step < steps; step++) {
		uint32_t a = rnd(100);

		/* Time: small steps, or straight to the announced wake-up. */
		wake = wg_next_wake(&g, S.now);
		if (wake > 0 && rnd(3) == 0) {
			cr_assert_eq(wg_pump(&g, wake - 1), 0, "seed %llu step %d: fit before wake",
			    (unsigned long long)seed, step);
			S.now = wake;
			cr_assert(wg_pump(&g, S.now) > 0, "seed %llu step %d: nothing at wake %lld",
			    (unsigned long long)seed, step, (long long)wake);
		} else {
			S.now += rnd(4) == 0 ? rnd(2000) : rnd(40);
		}
		if (a < 40 && S.nwait < 4096) {
			uint32_t w[UNIT_COUNT] = { 1 + (rnd(5) == 0), 1 + rnd(6), rnd(2) };
			const char *cls = rnd(3) == 0 ? "hi" : rnd(2) ? "lo" : NULL;
			struct wg_req *q;

			if (wg_acquire(&g, "up", cls, NULL, w, NULL, NULL, S.now, &q) == WG_OK)
				S.waiting[S.nwait++] = q;
		} else if (a < 80) {
			/* End a random open grant. */
			size_t open[64], no = 0;

			for (k = S.nrec; k > 0 && no < 64; k--)
				if (!S.rec[k - 1].ended)
					open[no++] = k - 1;
			if (no) {
				struct rec *x = &S.rec[open[rnd((uint32_t)no)]];
				uint32_t o = rnd(20);

				if (o < 3)
					end(&g, x, WG_REFUND);
				else if (o == 3)
					end(&g, x, WG_THROTTLED);
				else if (o == 4)
					vanish(&g, x);
				else if (o == 5 && S.grace)
					end(&g, x, WG_UNKNOWN);
				else if (o == 6)
					end(&g, x, WG_NOMAIL);
				else if (o == 7 && rnd(10) == 0)
					end(&g, x, WG_AUTHFAIL);
				else if (o < 12)	/* read the 250 a while ago */
					end_at(&g, x, WG_SENT, S.now - (int64_t)rnd(3000));
				else
					end(&g, x, WG_SENT);
			}
		} else if (a < 85 && S.nwait) {
			/* A waiting client goes away. */
			struct wg_req *q = S.waiting[rnd((uint32_t)S.nwait)];

			unwait(q);
			wg_cancel(&g, q, S.now, NULL);
		} else if (a < 87 && pb) {
			cur = cur == pa ? pb : pa;
			S.pol = cur;
			S.refused = 0;
			wg_set_policy(&g, &cur->p, 0, S.now);
		}
		wg_pump(&g, S.now);
	}
	cr_assert(S.nrec > 50, "seed %llu: only %zu grants", (unsigned long long)seed, S.nrec);
	for (i = 0; i < pa->up.nwin; i++) {
		long long lim = pa->win[i].limit;

		if (pb && pb->win[i].limit > lim)
			lim = pb->win[i].limit;
		check_every_instant(&pa->win[i], lim);
	}
	/* Grants still held belong to us, not to the engine. */
	for (k = 0; k < S.nrec; k++)
		if (!S.rec[k].ended)
			free(S.rec[k].r);
	wg_free(&g);
}

Test(window_random, sliding_mixed_weights)
{
	struct tpol p;
	struct policy_window w[] = {
		SW(5, 1, UNIT_MESSAGES), SW(20, 3, UNIT_RECIPIENTS), SW(2, 1, UNIT_CONNECTIONS),
	};
	uint64_t seed;

	tpol_init(&p, w, 3);
	for (seed = 1; seed <= 12; seed++)
		run_random(seed * 7919, &p, NULL, 3000);
}

Test(window_random, calendar_and_sliding)
{
	struct tpol p;
	struct policy_window w[] = {
		CW(12, 2, UNIT_RECIPIENTS, 1), SW(4, 1, UNIT_MESSAGES),
	};
	uint64_t seed;

	tpol_init(&p, w, 2);
	for (seed = 1; seed <= 12; seed++)
		run_random(seed * 104729, &p, NULL, 3000);
}

Test(window_random, reloads_between_limits)
{
	struct tpol p, q;
	struct policy_window w[] = { SW(6, 2, UNIT_MESSAGES), SW(15, 4, UNIT_RECIPIENTS) };
	struct policy_window w2[] = { SW(3, 2, UNIT_MESSAGES), SW(8, 4, UNIT_RECIPIENTS) };
	uint64_t seed;

	tpol_init(&p, w, 2);
	tpol_init(&q, w2, 2);
	for (seed = 1; seed <= 12; seed++)
		run_random(seed * 15485863, &p, &q, 3000);
}

/* The history status shows: a send stays in it for an hour whatever the
 * windows (here 10 s), then goes; a ring of WG_HISTORY_MAX, whose oldest
 * go first, saying from when on it is whole (hdropped). */
Test(window, history_an_hour_bounded)
{
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(5, 10, UNIT_MESSAGES) };
	const uint32_t one[UNIT_COUNT] = { 1, 1, 1 };
	struct wg_up *u;
	size_t i;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 0);
	wg_replay_send(&g, "up", 1000, 1000, one, 0);
	wg_replay_send(&g, "up", 2000, 2000, one, 0);
	wg_replay_send(&g, "up", 2500, 9000, one, 0);	/* an unknown outcome */
	u = wg_find(&g, "up");
	wg_expire(u, 60000);
	cr_assert_eq(u->ln, 0, "the window still counts what is over 10 s old");
	cr_assert_eq(u->hn, 3);
	cr_assert_eq(wg_history_at(u, 0)->t, 1000);
	cr_assert(wg_history_at(u, 2)->from == 2500 && wg_history_at(u, 2)->t == 9000);
	cr_assert_eq(u->hdropped, INT64_MIN, "nothing dropped");
	wg_expire(u, 1000 + WG_HISTORY_MS);
	cr_assert_eq(u->hn, 2, "an hour old and still in the history");
	wg_expire(u, 9000 + WG_HISTORY_MS);
	cr_assert_eq(u->hn, 0);
	for (i = 0; i < WG_HISTORY_MAX + 5; i++)
		wg_replay_send(&g, "up", 100000 + (int64_t)i, 100000 + (int64_t)i, one, 0);
	cr_assert_eq(u->hn, WG_HISTORY_MAX);
	cr_assert_eq(wg_history_at(u, 0)->t, 100005);
	cr_assert_eq(u->hdropped, 100004);
	wg_free(&g);
}

/* ---- fallbacks (mail/route.h) ---- */

/* quota 1h: a request is passed over (LATER, with the next free slot)
 * once the window's next free slot is more than an hour away, at once
 * or while it waits; one without conditions waits as ever. */
Test(window, quota_passes_over_past_the_threshold)
{
	static const char *const q1h[] = { "quota 1h", NULL };
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(2, 86400, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 1000);
	acq_unless(&g, q1h);
	acq_unless(&g, q1h);
	acq_unless(&g, q1h);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 2);
	/* Two held: the third may yet get a slot (a refund): it waits. */
	cr_assert_eq(nL, 0);
	S.now = 2000;
	end(&g, &S.rec[0], WG_SENT);
	end(&g, &S.rec[1], WG_SENT);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 1, "the full day's window: passed over");
	cr_assert_eq(L[0].why, RK_QUOTA);
	cr_assert_eq(L[0].until, 2000 + 86400 * 1000, "the next free slot");
	cr_assert_eq(g.ups->nwait, 1, "the one without conditions waits");
	cr_assert_eq(g.ups->n_later, 1);
	/* A new one is passed over at the next pump, nothing granted. */
	acq_unless(&g, q1h);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 2);
	/* Less than an hour before the slot frees: it waits there. */
	S.now = 2000 + 86400 * 1000 - 3600 * 1000;
	acq_unless(&g, q1h);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 2);
	wg_free(&g);
}

/* unreachable 10s: from the first UNREACHED, requests with the condition
 * wait (HOLD) but for one probe at a time, every probe interval; at the
 * threshold they are passed over, the probe still going every interval;
 * a report of a message that got through ends the spell. */
Test(window, unreachable_holds_probes_then_passes_over)
{
	static const char *const u10[] = { "unreachable 10s", NULL };
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 1, UNIT_MESSAGES) };
	struct wg_up *u;
	struct wg_done d;
	size_t i;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 1000);
	u = wg_find(&g, "up");
	for (i = 0; i < 3; i++)
		acq_unless(&g, u10);
	cr_assert_eq(wg_pump(&g, S.now), 3);
	/* The first fails to connect: the spell begins. */
	S.now = 1500;
	(void)wg_report_at(&g, S.rec[0].r, WG_UNREACHED, "connect: Connection refused", -1,
	    S.now, &d);
	S.rec[0].r = NULL; S.rec[0].ended = 1;
	cr_assert(d.down_began);
	cr_assert_eq(u->down_since, 1500);
	cr_assert_eq(u->probe_at, 11500);
	cr_assert_str_eq(u->down_reason, "connect: Connection refused");
	end(&g, &S.rec[1], WG_NOGREETING);	/* the others too */
	end(&g, &S.rec[2], WG_UNREACHED);
	cr_assert_eq(u->down_since, 1500, "the spell's start stays");
	/* Asked again: they wait (HOLD), not passed over, nothing granted. */
	for (i = 0; i < 3; i++)
		acq_unless(&g, u10);
	acq(&g, NULL, 1, 1, 0, WG_OK);	/* no conditions: granted as ever */
	cr_assert_eq(wg_pump(&g, S.now), 0, "the head holds, nothing overtakes it");
	cr_assert_eq(nL, 0);
	cr_assert_eq(wg_next_wake(&g, S.now), 11500, "the threshold (= the next probe)");
	/* At the probe's time the head goes as the probe, the rest are
	 * passed over (the spell lasted the threshold). */
	S.now = 11500;
	cr_assert_eq(wg_pump(&g, S.now), 2, "the probe, then the one without conditions");
	cr_assert_eq(u->probe_id, S.rec[3].r->id);
	cr_assert_eq(u->probe_at, 21500);
	cr_assert_eq(nL, 2);
	cr_assert_eq(L[0].why, RK_UNREACHABLE);
	cr_assert_eq(L[0].until, 11500 + 10000, "ask again after the probe");
	/* The probe fails: the next one an interval later. */
	S.now = 11600;
	end(&g, &S.rec[3], WG_UNREACHED);
	cr_assert_eq(u->probe_id, 0);
	cr_assert_eq(u->probe_at, 21600);
	acq_unless(&g, u10);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 3);
	cr_assert_eq(L[2].until, 21600);
	/* The next probe gets through: the spell ends, all go again. */
	S.now = 21600;
	acq_unless(&g, u10);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 21700;
	(void)wg_report_at(&g, S.rec[5].r, WG_SENT, NULL, -1, S.now, &d);
	S.rec[5].r = NULL; S.rec[5].ended = 1;
	cr_assert(d.down_ended);
	cr_assert_eq(d.down_from, 1500);
	cr_assert_eq(u->down_since, 0);
	acq_unless(&g, u10);
	acq_unless(&g, u10);
	cr_assert_eq(wg_pump(&g, S.now), 2);
	cr_assert_eq(nL, 3);
	wg_free(&g);
}

/* The spell ends only on a message that got through: not a refund, an
 * unknown outcome or a kept session's slot ending; a resume ends it. */
Test(window, unreachable_ends_only_on_a_message_that_got_through)
{
	static const char *const u1[] = { "unreachable 1s", NULL };
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 1, UNIT_MESSAGES) };
	struct wg_up *u;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 1000);
	u = wg_find(&g, "up");
	acq(&g, NULL, 0, 0, 1, WG_OK);		/* rec 0: a kept session's slot */
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 4);
	end(&g, &S.rec[1], WG_UNREACHED);
	end(&g, &S.rec[2], WG_REFUND);
	vanish(&g, &S.rec[3]);
	end(&g, &S.rec[0], WG_NOMAIL);
	cr_assert_eq(u->down_since, 1000);
	cr_assert_eq(wg_lift(u, 0, S.now), 1);
	cr_assert_eq(u->down_since, 0);
	acq_unless(&g, u1);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	cr_assert_eq(u->probe_id, 0, "no spell: an ordinary grant, not a probe");
	wg_free(&g);
}

/* authentication: passed over while suspended and while the one probe
 * after the suspension is out; the probe itself is granted. */
Test(window, authentication_passes_over_but_the_probe)
{
	static const char *const a[] = { "authentication", NULL };
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 60, UNIT_MESSAGES) };
	struct wg_up *u;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 1000);
	u = wg_find(&g, "up");
	acq_unless(&g, a);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	S.now = 2000;
	end(&g, &S.rec[0], WG_AUTHFAIL);
	cr_assert_eq(u->auth_since, 2000);
	acq_unless(&g, a);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 1);
	cr_assert_eq(L[0].why, RK_AUTH);
	cr_assert_eq(L[0].until, 2000 + WG_AUTH_SUSPEND_MS);
	/* A reload lifts it: the first goes as the probe, the next passes
	 * over while it is out. */
	(void)wg_lift(u, 1, S.now);
	acq_unless(&g, a);
	acq_unless(&g, a);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	cr_assert_eq(nL, 2);
	cr_assert_eq(L[1].why, RK_AUTH);
	S.now = 3000;
	end(&g, &S.rec[1], WG_SENT);
	cr_assert_eq(u->auth_since, 0, "the trouble is over");
	acq_unless(&g, a);
	acq_unless(&g, a);
	cr_assert_eq(wg_pump(&g, S.now), 2);
	wg_free(&g);
}

/* weir-send gives back (REFUND) the grants it holds when an AUTHFAIL
 * comes in: that says nothing of our credentials, and the trouble goes
 * on (requests still pass over); an UNKNOWN neither.  Without the fix the
 * refund ended it (auth_since 0) and the request waited out the
 * suspension. */
Test(window, refund_does_not_end_authentication_trouble)
{
	static const char *const a[] = { "authentication", NULL };
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 60, UNIT_MESSAGES) };
	struct wg_up *u;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 1000);
	u = wg_find(&g, "up");
	acq_unless(&g, a);
	acq_unless(&g, a);
	acq_unless(&g, a);
	cr_assert_eq(wg_pump(&g, S.now), 3);
	S.now = 2000;
	end(&g, &S.rec[0], WG_AUTHFAIL);
	end(&g, &S.rec[1], WG_REFUND);
	vanish(&g, &S.rec[2]);
	cr_assert_eq(u->auth_since, 2000, "a refund or an unknown outcome ended the trouble");
	acq_unless(&g, a);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 1);
	cr_assert_eq(L[0].why, RK_AUTH);
	wg_free(&g);
}

/* throttled 1m: passed over while a throttle suspension has more than a
 * minute left; not a reason unless named. */
Test(window, throttled_by_what_is_left)
{
	static const char *const t1m[] = { "throttled 1m", NULL }, *const q[] = { "quota", NULL };
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 60, UNIT_MESSAGES) };

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 1000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	end(&g, &S.rec[0], WG_THROTTLED);	/* 421 *: 60 s, the policy's */
	acq_unless(&g, t1m);
	acq_unless(&g, q);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 0, "exactly a minute left: waits");
	/* Over: both go; a repeat doubles it to 2 minutes. */
	S.now = 61000;
	cr_assert_eq(wg_pump(&g, S.now), 2);
	end(&g, &S.rec[1], WG_THROTTLED);
	end(&g, &S.rec[2], WG_SENT);
	acq_unless(&g, t1m);
	acq_unless(&g, q);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 1, "more than a minute left: passed over");
	cr_assert_eq(L[0].why, RK_THROTTLED);
	cr_assert_eq(L[0].until, 61000 + 120000);
	cr_assert_eq(g.ups->nwait, 1, "quota alone: it waits out the suspension");
	wg_free(&g);
}

/* A quota reply (issue 31): suspended as a throttle, but for a quota's
 * default periods (2 h, no throttle_reply pattern takes it) and counted
 * by fallback_when's quota as a full window until the suspension ends;
 * a rate limit's suspension is not. */
Test(window, quota_reply_counts_as_a_full_window)
{
	static const char *const q1h[] = { "quota 1h", NULL }, *const t3h[] = { "throttled 3h",
		NULL };
	struct tpol p;
	struct wgate g;
	struct policy_window w[] = { SW(100, 60, UNIT_MESSAGES) };
	struct route_state st;

	tpol_init(&p, w, 1);
	sim_reset(&p, &g, 1000);
	acq(&g, NULL, 1, 1, 0, WG_OK);
	cr_assert_eq(wg_pump(&g, S.now), 1);
	end(&g, &S.rec[0], WG_QUOTA);
	cr_assert_eq(g.ups->susp_until, 1000 + 2 * 3600 * 1000, "a quota's 2 h");
	cr_assert(g.ups->susp_quota);
	wg_route_state(g.ups, NULL, S.now, &st);
	cr_assert_eq(st.free_at, g.ups->susp_until);
	acq_unless(&g, q1h);
	acq_unless(&g, t3h);
	cr_assert_eq(wg_pump(&g, S.now), 0);
	cr_assert_eq(nL, 1, "quota 1h: passed over; throttled 3h: waits");
	cr_assert_eq(L[0].why, RK_QUOTA);
	cr_assert_eq(L[0].until, g.ups->susp_until);
	/* Over, and a rate limit now: its own periods, no quota. */
	S.now = g.ups->susp_until + 1;
	cr_assert_eq(wg_pump(&g, S.now), 1);
	end(&g, &S.rec[1], WG_THROTTLED);
	cr_assert(!g.ups->susp_quota);
	wg_route_state(g.ups, NULL, S.now, &st);
	cr_assert_lt(st.free_at, g.ups->susp_until);
	wg_free(&g);
}
