/*
 * windowdiff_test.c: weir-gate's window rules are written twice, in C
 * (src/gate/window.c, the local engine) and in Lua (src/gate/grant.lua
 * and report.lua, run by Redis for a shared upstream through shared.c).
 * The same random schedules of acquires, reports (sent now or at an
 * earlier instant, refunded, unknown, no MAIL) and clock steps go
 * through both; at every instant both must grant the same requests, in
 * the same order.  Random policies: one to three windows of messages,
 * recipients or connections, sliding or calendar (aligned anywhere),
 * with or without max_connections.
 *
 * Redis's clock is the test's: this binary links a copy of shared.c
 * compiled against the same scripts with `redis.call('TIME')` reading
 * the list weir:test:clock ({seconds, microseconds}, as TIME answers;
 * see the Makefile), on a redis-server of its own.  The C engine gets
 * what weir-gate's daemon gives it (server.c): that instant in ms rounded
 * down for acquires and grants, rounded up for reports.  The clock moves
 * by less than a millisecond, by up to 3 s, or to the instant either
 * side names for the head of the queue (the C engine's next wake-up,
 * Redis's retry) or 1 us before it: where a rounding difference shows
 * (commit 4e932e3's: report.lua logging a send at its time rounded down
 * failed here at once).  A grant's lease (shared.h) is longer than any
 * schedule: the C engine has no leases.
 *
 * The first seed is printed; WEIR_WINDOWDIFF_SEED=N runs from N.
 */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gate/shared.h"
#include "gate/window.h"
#include "lib/alloc.h"
#include "testlib.h"

#define NSEEDS	25
#define NSTEPS	400
#define MAXREQ	NSTEPS
#define TRAIL	30		/* events shown when the two differ */

static struct tl_redis R;

/* One request, as each side holds it. */
struct treq {
	uint64_t id;
	uint32_t w[UNIT_COUNT];
	struct wg_req *c;	/* the C engine's, until reported */
	struct wg_req *b;	/* shared.c's, from its grant to its report */
	int64_t granted;	/* ms */
};

static struct {
	unsigned seed;
	int step;
	uint64_t rnd;
	int64_t us;		/* the clock: microseconds on Redis's (wall) axis */
	int64_t grace;		/* ms: an unknown outcome's, both sides */
	struct wgate g;
	struct policy pol;
	struct policy_upstream cu, bu;	/* the C engine's; Redis's (shared) */
	struct policy_window win[3];
	struct wg_up bup;
	struct shared *sh;
	struct treq req[MAXREQ];
	size_t nreq;
	size_t bq[MAXREQ], nbq;		/* Redis's side: waiting, in order */
	int64_t bretry;			/* when Redis said to ask again (ms) */
	uint64_t cg[MAXREQ];		/* the C engine's grants in one pump */
	size_t ncg;
	char trail[TRAIL][160];
	unsigned ntrail;
	unsigned long grants, reports, steps_to_wake;
} T;

/* splitmix64 */
static uint64_t
rnd(uint64_t n)
{
	uint64_t z = (T.rnd += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return n ? z % n : 0;
}

static int64_t
floor_ms(void)
{
	return T.us / 1000;
}

static int64_t
ceil_ms(void)
{
	return (T.us + 999) / 1000;
}

static void
note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
note(const char *fmt, ...)
{
	char *line = T.trail[T.ntrail++ % TRAIL];
	va_list ap;
	int n;

	n = snprintf(line, 160, "  step %d, %lld.%03lld ms: ", T.step,
	    (long long)(T.us / 1000), (long long)(T.us % 1000));
	va_start(ap, fmt);
	vsnprintf(line + n, 160 - (size_t)n, fmt, ap);
	va_end(ap);
}

static void
trail(struct buf *b)
{
	unsigned i = T.ntrail > TRAIL ? T.ntrail - TRAIL : 0;

	for (; i < T.ntrail; i++)
		buf_printf(b, "%s\n", T.trail[i % TRAIL]);
}

/* Redis's TIME, as the scripts built for this test read it. */
static void
set_clock(void)
{
	tl_redis_cmd(&R, "DEL weir:test:clock");
	tl_redis_cmd(&R, "RPUSH weir:test:clock %lld %lld", (long long)(T.us / 1000000),
	    (long long)(T.us % 1000000));
}

static void
setup(void)
{
	tl_redis_up(&R);
	/* Leases of an hour: no schedule comes near. */
	T.sh = shared_new("h", "r", 3600 * 1000);
}

static void
teardown(void)
{
	shared_free(T.sh);
	tl_redis_down(&R);
}

TestSuite(windowdiff, .init = setup, .fini = teardown, .timeout = 120);

static void
on_granted(void *arg, struct wg_req *r)
{
	struct treq *q = r->owner;

	(void)arg;
	q->granted = floor_ms();
	T.cg[T.ncg++] = q->id;
}

static void
ids(struct buf *b, const uint64_t *v, size_t n)
{
	size_t i;

	buf_printf(b, "[");
	for (i = 0; i < n; i++)
		buf_printf(b, "%s%llu", i ? " " : "", (unsigned long long)v[i]);
	buf_printf(b, "]");
}

/* Grant what fits now on both sides and compare. */
static void
pump(void)
{
	int64_t now = floor_ms(), retry;
	uint64_t bg[MAXREQ];
	size_t nb = 0, i;

	T.ncg = 0;
	(void)wg_pump(&T.g, now);
	T.bretry = -1;
	while (T.nbq > 0) {
		struct treq *q = &T.req[T.bq[0]];
		struct wg_req *r = xcalloc(1, sizeof *r);

		r->id = q->id;
		r->up = &T.bup;
		memcpy(r->w, q->w, sizeof r->w);
		r->granted = 1;
		r->since = now;
		if (!shared_admit(T.sh, &T.bu, r, NULL, 0, now, &retry)) {
			struct shared_info si;

			free(r);
			cr_assert(shared_info(T.sh, "up", &si) == 0 && !si.down, "redis: %s", si.why);
			T.bretry = retry;
			break;
		}
		q->b = r;
		bg[nb++] = q->id;
		memmove(T.bq, T.bq + 1, --T.nbq * sizeof *T.bq);
	}
	for (i = 0; i < nb && i < T.ncg && bg[i] == T.cg[i]; i++)
		;
	if (i < nb || i < T.ncg) {
		struct buf b = BUF_INIT;

		buf_printf(&b, "seed %u, step %d, at %lld.%03lld ms: the C engine granted ", T.seed,
		    T.step, (long long)(T.us / 1000), (long long)(T.us % 1000));
		ids(&b, T.cg, T.ncg);
		buf_printf(&b, ", Redis ");
		ids(&b, bg, nb);
		buf_printf(&b, " (C's next wake-up %lld, Redis's retry %lld); the last events:\n",
		    (long long)wg_next_wake(&T.g, now), (long long)T.bretry);
		trail(&b);
		cr_assert_fail("%s", buf_cstr(&b));
	}
	for (i = 0; i < nb; i++)
		note("granted %llu", (unsigned long long)bg[i]);
	T.grants += nb;
}

static void
random_policy(void)
{
	size_t i;

	memset(T.win, 0, sizeof T.win);
	memset(&T.cu, 0, sizeof T.cu);
	T.cu.name = (char *)"up";
	T.cu.win = T.win;
	T.cu.nwin = 1 + (size_t)rnd(3);
	for (i = 0; i < T.cu.nwin; i++) {
		struct policy_window *w = &T.win[i];

		w->limit = 1 + (long long)rnd(6);
		w->per = 1 + (long long)rnd(6);
		w->unit = (enum policy_unit)rnd(UNIT_COUNT);
		w->calendar = rnd(4) == 0;
		w->align = w->calendar ? (long long)rnd((uint64_t)w->per) : 0;
		note("window %zu: %lld %s per %lld s%s, align %lld", i, w->limit,
		    policy_unit_name(w->unit), w->per, w->calendar ? " (calendar)" : "", w->align);
	}
	T.cu.max_connections = rnd(3) == 0 ? 1 + (long long)rnd(3) : 0;
	T.bu = T.cu;
	T.bu.shared = R.spec;
	memset(&T.pol, 0, sizeof T.pol);
	T.pol.up = &T.cu;
	T.pol.nup = 1;
	note("max_connections %lld, grace %lld ms", T.cu.max_connections, (long long)T.grace);
}

static void
acquire(void)
{
	struct treq *q = &T.req[T.nreq];
	uint32_t max[UNIT_COUNT] = { 1, 3, 1 };
	enum wg_code code;
	size_t i;

	/* Weights every window can hold (a bigger one is refused by the C
	 * engine at once, never granted by Redis: not what is compared). */
	for (i = 0; i < T.cu.nwin; i++)
		if (T.win[i].limit < max[T.win[i].unit])
			max[T.win[i].unit] = (uint32_t)T.win[i].limit;
	memset(q, 0, sizeof *q);
	q->id = T.nreq + 1;
	q->w[UNIT_MESSAGES] = 1;
	q->w[UNIT_RECIPIENTS] = 1 + (uint32_t)rnd(max[UNIT_RECIPIENTS]);
	q->w[UNIT_CONNECTIONS] = (uint32_t)rnd(2);
	code = wg_acquire(&T.g, "up", NULL, "s@example.org", q->w, NULL, q, floor_ms(), &q->c);
	cr_assert_eq(code, WG_OK, "seed %u: acquire refused (%d)", T.seed, (int)code);
	T.bq[T.nbq++] = T.nreq++;
	note("acquire %llu: %u/%u/%u", (unsigned long long)q->id, q->w[0], q->w[1], q->w[2]);
}

static void
report(void)
{
	static const char *const names[] = { "sent", "refund", "throttled", "unknown", "nomail",
		"authfail" };
	struct treq *held[MAXREQ], *q;
	size_t n = 0, i;
	enum wg_outcome o;
	struct wg_done d;
	int64_t at = -1, now = ceil_ms();
	uint64_t k;

	for (i = 0; i < T.nreq; i++)
		if (T.req[i].b)
			held[n++] = &T.req[i];
	if (n == 0)
		return;
	q = held[rnd(n)];
	switch (k = rnd(10)) {
	case 0: case 1: case 2: case 3: case 4: case 5:
		o = WG_SENT;
		/* Sometimes read its 250 earlier, now and then before its
		 * grant (clamped to it). */
		if (k >= 3)
			at = q->granted - 2 + (int64_t)rnd((uint64_t)(now - q->granted + 3));
		break;
	case 6:
		o = WG_REFUND;
		break;
	case 7: case 8:
		o = WG_UNKNOWN;
		break;
	default:
		o = WG_NOMAIL;
		break;
	}
	note("report %llu %s at %lld", (unsigned long long)q->id, names[o], (long long)at);
	(void)wg_report_at(&T.g, q->c, o, NULL, at, now, &d);
	q->c = NULL;
	/* What weir-gate's daemon tells the store (server.c, share_ended). */
	shared_ended(T.sh, &T.bu, q->b, o, &d, now, T.grace);
	free(q->b);
	q->b = NULL;
	T.reports++;
}

static void
step_clock(void)
{
	int64_t cw = wg_next_wake(&T.g, floor_ms()), to = -1;
	uint64_t k = rnd(10);

	if (k >= 5) {
		/* To the instant a side names, or just before it. */
		if (T.nbq > 0 && T.bretry > 0)
			to = T.bretry;
		if (cw > 0 && (to < 0 || cw < to))
			to = cw;
	}
	if (to > 0) {
		to *= 1000;
		if (k == 5 && to - 1 > T.us)
			to -= 1;
		else if (k == 6)
			to += (int64_t)rnd(1000);
		T.steps_to_wake++;
	} else if (k < 3) {
		to = T.us + 1 + (int64_t)rnd(999);
	} else {
		to = T.us + (int64_t)rnd(3000000);
	}
	if (to > T.us)
		T.us = to;
	set_clock();
}

static void
run_seed(unsigned seed)
{
	struct wg_ops ops = { .granted = on_granted };
	size_t i;

	memset(T.req, 0, sizeof T.req);
	T.seed = seed;
	T.rnd = seed;
	T.nreq = T.nbq = 0;
	T.ntrail = 0;
	T.step = 0;
	T.us = (1700000000LL + (int64_t)rnd(100000000)) * 1000000 + (int64_t)rnd(1000000);
	T.grace = (int64_t)rnd(2000);
	tl_redis_cmd(&R, "FLUSHALL");
	/* A store that holds a history, and this host's written back. */
	tl_redis_whole(&R, "up", "h");
	set_clock();
	random_policy();
	wg_init(&T.g, &ops);
	T.g.grace = T.grace;
	wg_set_policy(&T.g, &T.pol, 0, floor_ms());
	for (T.step = 0; T.step < NSTEPS; T.step++) {
		uint64_t k = rnd(100);

		if (k < 30 && T.nreq < MAXREQ)
			acquire();
		else if (k < 60)
			report();
		else
			step_clock();
		pump();
	}
	for (i = 0; i < T.nreq; i++) {
		if (T.req[i].b)
			free(T.req[i].c);	/* granted: the caller's */
		free(T.req[i].b);
	}
	wg_free(&T.g);
}

Test(windowdiff, same_grants_at_same_instants)
{
	const char *env = getenv("WEIR_WINDOWDIFF_SEED");
	unsigned first, s;

	first = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL) ^ (unsigned)getpid();
	cr_log_info("windowdiff: seeds %u to %u (WEIR_WINDOWDIFF_SEED=%u replays them)", first,
	    first + NSEEDS - 1, first);
	for (s = 0; s < NSEEDS; s++)
		run_seed(first + s);
	cr_log_info("windowdiff: %lu grants, %lu reports, %lu steps to a named instant",
	    T.grants, T.reports, T.steps_to_wake);
	/* Not a vacuous comparison. */
	cr_assert_gt(T.grants, NSEEDS * 20);
	cr_assert_gt(T.steps_to_wake, NSEEDS * 20);
}
