/*
 * journal_test.c: weir-gate's journal (src/gate/journal.c): replay keeps
 * the history at its monotonic times; a grant without a report counts as
 * sent at replay time; a refund is not a send; a torn or corrupt tail is
 * dropped and the good part kept; entries from another boot are aged only
 * by what this boot can prove; a wall-clock jump changes nothing on the
 * same boot; compaction keeps exactly the live state.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gate/journal.h"
#include "lib/alloc.h"
#include "lib/io.h"
#include "testlib.h"

static const struct wg_ops noops = { NULL, NULL, NULL, NULL, NULL };

static struct policy_window win = { 100, 60, UNIT_MESSAGES, 0, 0, 0 };
static struct policy_upstream pup = { (char *)"up", &win, 1, 0, 0, 0, 0, 0, 0, 0, 0 };
static struct policy pol = { .up = &pup, .nup = 1, .builtin_throttles = 1 };
static struct policy_window bigwin = { 1000000, 10, UNIT_MESSAGES, 0, 0, 0 };
static struct policy_upstream bigup = { (char *)"up", &bigwin, 1, 0, 0, 0, 0, 0, 0, 0, 0 };
static struct policy bigpol = { .up = &bigup, .nup = 1, .builtin_throttles = 1 };

static struct wg_req *
grant(struct wgate *g, int64_t now)
{
	uint32_t w[UNIT_COUNT] = { 1, 3, 1 };
	struct wg_req *r;

	cr_assert_eq(wg_acquire(g, "up", NULL, NULL, w, NULL, NULL, now, &r), WG_OK);
	cr_assert_eq(wg_pump(g, now), 1);
	return r;
}

static void
log_times(struct wgate *g, int64_t *t, size_t *n)
{
	struct wg_up *u = wg_find(g, "up");
	uint64_t s;

	*n = 0;
	if (u == NULL)
		return;
	for (s = u->lseq; s < u->lseq + u->ln; s++)
		t[(*n)++] = wg_log_at(u, s)->t;
}

Test(journal, replay_same_boot)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g, g2;
	struct wg_req *a, *b, *c;
	int64_t t[16];
	size_t n;

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10000, 1700000000000LL, 0), 0);
	wg_set_policy(&g, &pol, 0, 10000);
	a = grant(&g, 10000);
	journal_grant(&j, a, 10000, 1700000000000LL);
	b = grant(&g, 10010);
	journal_grant(&j, b, 10010, 1700000000010LL);
	c = grant(&g, 10020);
	journal_grant(&j, c, 10020, 1700000000020LL);
	cr_assert_eq(journal_sync(&j), 0);
	journal_end(&j, a->id, 'S', 10500, 1700000000500LL);
	wg_report(&g, a, WG_SENT, NULL, 10500);
	journal_end(&j, b->id, 'R', 10600, 1700000000600LL);
	wg_report(&g, b, WG_REFUND, NULL, 10600);
	cr_assert_eq(journal_write(&j), 0);
	journal_close(&j);
	/* c was never reported: the gate "crashed". */
	wg_free(&g);

	wg_init(&g2, &noops);
	cr_assert_eq(journal_open(&j, path, &g2, NULL, 20000, 1700000010000LL, 0), 0);
	log_times(&g2, t, &n);
	cr_assert_eq(n, 2);
	cr_assert_eq(t[0], 10500);	/* the send, at its monotonic time */
	cr_assert_eq(t[1], 20000);	/* the unreported grant, now */
	cr_assert_eq(wg_find(&g2, "up")->log[0].w[UNIT_RECIPIENTS], 3);
	journal_close(&j);
	wg_free(&g2);

	/* Replaying the compacted file gives the same history. */
	wg_init(&g2, &noops);
	cr_assert_eq(journal_open(&j, path, &g2, NULL, 30000, 1700000020000LL, 0), 0);
	log_times(&g2, t, &n);
	cr_assert_eq(n, 2);
	cr_assert(t[0] == 10500 && t[1] == 20000);
	journal_close(&j);
	wg_free(&g2);
	tl_rmtree(dir);
}

static void
write_records(const char *path, const char *const *rec, size_t n, const char *tail)
{
	struct buf b = BUF_INIT;
	size_t i;

	for (i = 0; i < n; i++)
		buf_printf(&b, "%s %08" PRIx32 "\n", rec[i], journal_crc32(rec[i], strlen(rec[i])));
	if (tail)
		buf_adds(&b, tail);
	tl_write(path, b.s, b.len);
	buf_free(&b);
}

Test(journal, torn_and_corrupt_tails_dropped)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir), boot[40];
	char *rec[3];
	static const char *const tails[] = {
		"L up 1 1 0 1700000000200 5200",			/* no newline, no CRC */
		"L up 1 1 0 1700000000200 5200 00000000\n",		/* bad CRC */
		"L up 1 1 0 1700000000200 5200 0000\n",			/* short CRC */
		"\0\0\0\0\0\0\0\0\n",					/* zeros */
	};
	struct journal j;
	struct wgate g;
	struct buf after = BUF_INIT;
	int64_t t[16];
	size_t n, i;

	boot_id(boot, sizeof boot);
	rec[0] = xasprintf("B %s 1700000000000 5000", boot);
	rec[1] = xstrdup("L up 1 1 0 1700000000100 5100");
	rec[2] = xstrdup("Q up nonsense");		/* a good CRC on a bad record */
	for (i = 0; i < sizeof tails / sizeof tails[0]; i++) {
		struct buf b = BUF_INIT;

		write_records(path, (const char *const *)rec, 2, NULL);
		tl_read(path, &b);
		buf_add(&b, tails[i], i == 3 ? 9 : strlen(tails[i]));
		buf_adds(&b, "L up 1 1 0 1700000000300 5300 12345678\n");	/* after: dropped too */
		tl_write(path, b.s, b.len);
		buf_free(&b);
		wg_init(&g, &noops);
		cr_assert_eq(journal_open(&j, path, &g, NULL, 6000, 1700000001000LL, 0), 0);
		log_times(&g, t, &n);
		cr_assert_eq(n, 1, "tail %zu: %zu entries", i, n);
		cr_assert_eq(t[0], 5100);
		journal_close(&j);
		wg_free(&g);
		/* The file was rewritten without the bad tail. */
		tl_read(path, &after);
		cr_assert_null(strstr(after.s, "5300"));
	}
	write_records(path, (const char *const *)rec, 3, NULL);
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 6000, 1700000001000LL, 0), 0);
	log_times(&g, t, &n);
	cr_assert_eq(n, 1);
	journal_close(&j);
	wg_free(&g);
	/* Numbers as weir writes them only (lib/decimal.h): a sign, a blank
	 * or a leading zero strtoll would take makes the record bad, with a
	 * good CRC.  Before, "+5200" and "\t5200" were read as 5200. */
	{
		static const char *const odd[] = { "+5200", "\t5200", "05200", "-0", "5200x" };

		for (i = 0; i < sizeof odd / sizeof odd[0]; i++) {
			free(rec[2]);
			rec[2] = xasprintf("L up 1 1 0 1700000000200 %s", odd[i]);
			write_records(path, (const char *const *)rec, 3, NULL);
			wg_init(&g, &noops);
			cr_assert_eq(journal_open(&j, path, &g, NULL, 6000, 1700000001000LL, 0), 0);
			log_times(&g, t, &n);
			cr_assert_eq(n, 1, "\"%s\" taken: %zu entries", odd[i], n);
			journal_close(&j);
			wg_free(&g);
		}
	}
	buf_free(&after);
	tl_rmtree(dir);
}

Test(journal, another_boot_is_aged_by_uptime_only)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	static const char *const rec[] = {
		"B 00000000-0000-0000-0000-000000000000 1700000000000 900000000",
		"L up 1 1 0 1700000000000 900000000",	/* an hour ago by the wall clock */
		"L up 1 1 0 1700003599000 900000100",	/* 1 s ago by the wall clock */
		"L up 1 1 0 1700009999000 900000200",	/* "in the future": clock went back */
		"G 7 up 1 1 0 1700003599500 900000300",	/* never reported */
	};
	struct journal j;
	struct wgate g;
	int64_t t[16];
	size_t n;

	write_records(path, rec, 5, NULL);
	wg_init(&g, &noops);
	/* This boot has been up 30 s; the wall clock says 1 h passed. */
	cr_assert_eq(journal_open(&j, path, &g, NULL, 30000, 1700003600000LL, 0), 0);
	log_times(&g, t, &n);
	cr_assert_eq(n, 4);
	cr_assert_eq(t[0], 0);		/* at most 30 s old: all we can prove */
	cr_assert_eq(t[1], 29000);	/* the wall clock says less: believe less */
	cr_assert_eq(t[2], 30000);	/* future: now */
	cr_assert_eq(t[3], 30000);	/* unreported grant: now */
	journal_close(&j);
	wg_free(&g);
	tl_rmtree(dir);
}

Test(journal, wall_clock_jump_same_boot_uses_monotonic)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir), boot[40];
	char *rec[2];
	struct journal j;
	struct wgate g;
	int64_t t[4];
	size_t n;

	boot_id(boot, sizeof boot);
	cr_assert_str_neq(boot, "unknown");
	rec[0] = xasprintf("B %s 1700000000000 5000", boot);
	rec[1] = xstrdup("L up 2 2 0 1700000000100 5100");
	write_records(path, (const char *const *)rec, 2, NULL);
	wg_init(&g, &noops);
	/* The wall clock jumped a day forward: irrelevant on the same boot. */
	cr_assert_eq(journal_open(&j, path, &g, NULL, 6000, 1700086400000LL, 0), 0);
	log_times(&g, t, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(t[0], 5100);
	journal_close(&j);
	wg_free(&g);
	tl_rmtree(dir);
}

Test(journal, compaction_keeps_live_state_only)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g, g2;
	struct wg_req *r, *held;
	int64_t now = 1000;
	size_t i;
	off_t before;

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, now, 1700000000000LL, 0), 0);
	wg_set_policy(&g, &bigpol, 0, now);
	/* 20000 sends over 200 s with a 10 s window: most age out. */
	for (i = 0; i < 20000; i++) {
		now = 1000 + (int64_t)i * 10;
		r = grant(&g, now);
		journal_grant(&j, r, now, now + 1700000000000LL);
		journal_end(&j, r->id, 'S', now, now + 1700000000000LL);
		wg_report(&g, r, WG_SENT, NULL, now);
		if (i % 50 == 0)
			wg_pump(&g, now);	/* expiry */
	}
	held = grant(&g, now);
	journal_grant(&j, held, now, now + 1700000000000LL);
	cr_assert_eq(journal_sync(&j), 0);
	wg_pump(&g, now);
	cr_assert(journal_wants_compaction(&j, wg_find(&g, "up")->ln + 1));
	before = j.size;
	cr_assert_eq(journal_compact_begin(&j, &g, now, now + 1700000000000LL), 0);
	journal_compact_grant(&j, held, now, now + 1700000000000LL);
	cr_assert_eq(journal_compact_commit(&j), 0);
	cr_assert_lt(j.size, before / 2);
	cr_assert(!journal_wants_compaction(&j, wg_find(&g, "up")->ln + 1));
	/* Appends go to the new file. */
	journal_end(&j, held->id, 'S', now + 5, now + 5 + 1700000000000LL);
	cr_assert_eq(journal_sync(&j), 0);
	journal_close(&j);

	wg_init(&g2, &noops);
	cr_assert_eq(journal_open(&j, path, &g2, NULL, now + 10, now + 10 + 1700000000000LL, 0), 0);
	wg_set_policy(&g2, &bigpol, 0, now + 10);
	/* Exactly the sends still in the window at now + 10, and the held
	 * grant, reported at now + 5. */
	{
		struct wg_up *u = wg_find(&g, "up"), *u2 = wg_find(&g2, "up");
		uint64_t s;
		size_t want = 1, k = 0;

		for (s = u->lseq; s < u->lseq + u->ln; s++)
			if (wg_log_at(u, s)->t > now + 10 - 10000)
				want++;
		cr_assert_eq(u2->ln, want);
		for (s = u->lseq; s < u->lseq + u->ln; s++)
			if (wg_log_at(u, s)->t > now + 10 - 10000)
				cr_assert_eq(wg_log_at(u2, u2->lseq + k++)->t, wg_log_at(u, s)->t);
		cr_assert_eq(wg_log_at(u2, u2->lseq + k)->t, now + 5);
		cr_assert_eq(wg_win_used(u2, 0), (int64_t)want);
	}
	journal_close(&j);
	wg_cancel(&g, held, now + 5, NULL);
	wg_free(&g);
	wg_free(&g2);
	tl_rmtree(dir);
	free(path);
	free(dir);
}

Test(journal, unreported_grant_gets_the_grace_period)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g;
	struct wg_req *a, *q;
	int64_t t[4];
	size_t n;
	uint32_t w[UNIT_COUNT] = { 1, 1, 0 };
	static struct policy_window one = { 1, 1, UNIT_MESSAGES, 0, 0, 0 };
	static struct policy_upstream oneup = { (char *)"up", &one, 1, 0, 0, 0, 0, 0, 0, 0, 0 };
	static struct policy onepol = { .up = &oneup, .nup = 1, .builtin_throttles = 1 };

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10000, 1700000000000LL, 0), 0);
	wg_set_policy(&g, &pol, 0, 10000);
	a = grant(&g, 10000);
	journal_grant(&j, a, 10000, 1700000000000LL);
	cr_assert_eq(journal_sync(&j), 0);
	journal_close(&j);
	wg_free(&g);

	/* The gate stopped at ~10000 and starts again at 10100 with 1.5 s
	 * of grace: the grant may have been accepted at any instant in
	 * [10000, 11600]. */
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10100, 1700000000100LL, 1500), 0);
	log_times(&g, t, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(t[0], 11600);
	cr_assert_eq(wg_log_at(wg_find(&g, "up"), wg_find(&g, "up")->lseq)->from, 10000);
	journal_close(&j);
	wg_free(&g);
	/* And again (the compacted file keeps the interval exactly). */
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10200, 1700000000200LL, 1500), 0);
	log_times(&g, t, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(t[0], 11600);
	cr_assert_eq(wg_log_at(wg_find(&g, "up"), wg_find(&g, "up")->lseq)->from, 10000);
	/* With 1 per 1 s, the next grant waits until 11600 + 1000. */
	wg_set_policy(&g, &onepol, 0, 10200);
	cr_assert_eq(wg_acquire(&g, "up", NULL, NULL, w, NULL, NULL, 10200, &q), WG_OK);
	cr_assert_eq(wg_pump(&g, 10200), 0);
	cr_assert_eq(wg_next_wake(&g, 10200), 12600);
	journal_close(&j);
	wg_free(&g);
	tl_rmtree(dir);
}

/* A grant left open by a stopped gate counts until the end of that run
 * plus its upstream's grace (policy.conf's), not the gate's -g. */
Test(journal, unreported_grant_gets_its_upstreams_grace)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g;
	struct wg_req *a;
	int64_t t[4];
	size_t n;
	static struct policy_upstream graceup = { (char *)"up", &win, 1, 0, 0, 0, 3, 0, 0, 0, 0 };
	static struct policy gracepol = { .up = &graceup, .nup = 1, .builtin_throttles = 1 };

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10000, 1700000000000LL, 0), 0);
	wg_set_policy(&g, &pol, 0, 10000);
	a = grant(&g, 10000);
	journal_grant(&j, a, 10000, 1700000000000LL);
	cr_assert_eq(journal_sync(&j), 0);
	journal_close(&j);
	wg_free(&g);
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, &gracepol, 10100, 1700000000100LL, 600000), 0);
	log_times(&g, t, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(t[0], 10100 + 3000);
	journal_close(&j);
	wg_free(&g);
	tl_rmtree(dir);
}

/* The reports of issue 12 in the journal: an unknown outcome (X) replays
 * as its interval, NOMAIL (N) as its connection only, SENT at the time
 * recorded; an interval replayed moves no later send. */
Test(journal, new_outcomes_replay_exactly)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g;
	struct wg_req *a, *b, *c;
	struct wg_up *u;
	const int64_t W = 1700000000000LL;

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10000, W, 0), 0);
	wg_set_policy(&g, &pol, 0, 10000);
	a = grant(&g, 10000);
	b = grant(&g, 10010);
	c = grant(&g, 10020);
	journal_grant(&j, a, 10000, W);
	journal_grant(&j, b, 10010, W + 10);
	journal_grant(&j, c, 10020, W + 20);
	journal_end(&j, a->id, 'X', 700000, W + 690000);	/* unknown: until 700000 */
	journal_end(&j, b->id, 'N', 10500, W + 500);
	journal_end(&j, c->id, 'S', 10400, W + 400);
	cr_assert_eq(journal_sync(&j), 0);
	journal_close(&j);
	wg_free(&g);
	free(a); free(b); free(c);

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 11000, W + 1000, 0), 0);
	u = wg_find(&g, "up");
	cr_assert_eq(u->ln, 3);
	/* In t order: the send at 10400, the connection at 10500, then the
	 * interval [10000, 700000]. */
	cr_assert(wg_log_at(u, u->lseq)->t == 10400 && wg_log_at(u, u->lseq)->from == 10400);
	cr_assert_eq(wg_log_at(u, u->lseq)->w[UNIT_RECIPIENTS], 3);
	cr_assert_eq(wg_log_at(u, u->lseq + 1)->t, 10500);
	cr_assert_eq(wg_log_at(u, u->lseq + 1)->w[UNIT_MESSAGES], 0);
	cr_assert_eq(wg_log_at(u, u->lseq + 1)->w[UNIT_RECIPIENTS], 0);
	cr_assert_eq(wg_log_at(u, u->lseq + 1)->w[UNIT_CONNECTIONS], 1);
	cr_assert(wg_log_at(u, u->lseq + 2)->from == 10000 && wg_log_at(u, u->lseq + 2)->t == 700000);
	journal_close(&j);
	wg_free(&g);
	tl_rmtree(dir);
	free(path);
	free(dir);
}

/* SETTLE in the journal: an unknown outcome keeps its grant's id across
 * restarts and compactions (G and X records), so that it can be settled
 * after either; a settlement (Z) replays as the send it logged; a grant
 * id is never given again, even once no record names it (I). */
Test(journal, settlement_replays_and_ids_stay_unique)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g;
	struct wg_req *a, *b;
	struct wg_done d;
	struct wg_up *u;
	uint64_t ida, idb, top;
	const int64_t W = 1700000000000LL;

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10000, W, 0), 0);
	wg_set_policy(&g, &bigpol, 0, 10000);
	a = grant(&g, 10000);
	b = grant(&g, 10010);
	ida = a->id;
	idb = b->id;
	journal_grant(&j, a, 10000, W);
	journal_grant(&j, b, 10010, W + 10);
	/* Both clients went away: unknown until 700000. */
	wg_cancel(&g, a, 100000, &d);
	journal_end(&j, ida, 'X', d.t, d.t - 10000 + W);
	wg_cancel(&g, b, 100000, &d);
	journal_end(&j, idb, 'X', d.t, d.t - 10000 + W);
	cr_assert_eq(journal_sync(&j), 0);
	top = g.next_id;
	journal_close(&j);
	wg_free(&g);

	/* A restart (replay and compaction): the intervals keep their ids. */
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 11000, W + 1000, 600000), 0);
	wg_set_policy(&g, &bigpol, 0, 11000);
	u = wg_find(&g, "up");
	cr_assert_eq(u->ln, 2);
	cr_assert_eq(g.next_id, top);
	cr_assert_eq(wg_settle(&g, u, ida, WG_SENT, NULL, 10800, 1, 11000, &d), 1);
	journal_settle(&j, u, ida, &d, 11000, W + 1000);
	cr_assert_eq(wg_settle(&g, u, idb, WG_REFUND, NULL, -1, 0, 11000, &d), 1);
	journal_settle(&j, u, idb, &d, 11000, W + 1000);
	cr_assert_eq(journal_sync(&j), 0);
	journal_close(&j);
	wg_free(&g);

	/* Again: a's send at 10800 only, b's nothing; ids go on from top
	 * although no G record names one any more. */
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 12000, W + 2000, 600000), 0);
	u = wg_find(&g, "up");
	cr_assert_eq(u->ln, 1);
	cr_assert(wg_log_at(u, u->lseq)->from == 10800 && wg_log_at(u, u->lseq)->t == 10800);
	cr_assert_eq(wg_log_at(u, u->lseq)->id, 0);
	cr_assert_eq(g.next_id, top);
	journal_close(&j);
	wg_free(&g);
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 13000, W + 3000, 600000), 0);
	cr_assert_eq(g.next_id, top, "no G record left: the I record must keep the ids");
	journal_close(&j);
	wg_free(&g);
	tl_rmtree(dir);
	free(path);
	free(dir);
}

/* An authentication suspension (A) survives a restart, with its probe
 * rule; a lift (E) recorded after it ends it on replay. */
Test(journal, auth_suspension_and_lift_replay)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g;
	struct wg_req *a;
	struct wg_up *u;
	uint64_t id;
	const int64_t W = 1700000000000LL;

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10000, W, 0), 0);
	wg_set_policy(&g, &pol, 0, 10000);
	a = grant(&g, 10000);
	journal_grant(&j, a, 10000, W);
	u = a->up;
	id = a->id;
	(void)wg_report(&g, a, WG_AUTHFAIL, "535 5.7.8 no", 10100);
	journal_end(&j, id, 'N', 10100, W + 100);
	journal_suspend(&j, u, 1, 10100, W + 100);
	cr_assert_eq(journal_sync(&j), 0);
	journal_close(&j);
	wg_free(&g);

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 11000, W + 1000, 0), 0);
	u = wg_find(&g, "up");
	cr_assert_eq(u->auth_until, 10100 + WG_AUTH_SUSPEND_MS);
	cr_assert_eq(u->auth_len, WG_AUTH_SUSPEND_MS);
	cr_assert_str_eq(u->auth_reason, "535 5.7.8 no");
	cr_assert(u->probe);
	/* Only the connection was logged. */
	cr_assert_eq(u->ln, 1);
	cr_assert_eq(wg_log_at(u, u->lseq)->w[UNIT_MESSAGES], 0);
	wg_lift(u, 1, 11000);
	journal_lift(&j, u, 1);
	cr_assert_eq(journal_sync(&j), 0);
	journal_close(&j);
	wg_free(&g);

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 12000, W + 2000, 0), 0);
	cr_assert_eq(wg_find(&g, "up")->auth_until, 0);
	journal_close(&j);
	wg_free(&g);
	tl_rmtree(dir);
	free(path);
	free(dir);
}

/* Issue 22 item 3: an authentication suspension is journalled with the
 * fingerprint of the credentials that failed (C, never a secret), and a
 * restart gets it back to compare with the credentials then; kept
 * through a compaction; an A record (an older gate's, no fingerprint)
 * still replays, with the fingerprint unknown. */
Test(journal, auth_suspension_keeps_its_credentials)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g;
	struct wg_req *a;
	struct wg_up *u;
	struct buf text = BUF_INIT;
	const int64_t W = 1700000000000LL;
	const uint64_t FP = 0x0123456789abcdefULL;
	int fd;

	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 10000, W, 0), 0);
	wg_set_policy(&g, &pol, 0, 10000);
	a = grant(&g, 10000);
	u = a->up;
	(void)wg_report(&g, a, WG_AUTHFAIL, "535 5.7.8 no", 10100);
	u->auth_fp = FP;
	u->auth_fp_known = 1;
	journal_suspend(&j, u, 1, 10100, W + 100);
	cr_assert_eq(journal_sync(&j), 0);
	journal_close(&j);
	wg_free(&g);
	tl_read(path, &text);
	cr_assert(strstr(buf_cstr(&text), "\nC up ") && strstr(text.s, " 0123456789abcdef 535 "),
	    "%s", text.s);
	buf_free(&text);

	/* Replayed (and compacted: journal_open rewrites the live state). */
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 11000, W + 1000, 0), 0);
	u = wg_find(&g, "up");
	cr_assert(u && u->auth_until == 10100 + WG_AUTH_SUSPEND_MS && u->auth_fp_known &&
	    u->auth_fp == FP);
	cr_assert_str_eq(u->auth_reason, "535 5.7.8 no");
	journal_close(&j);
	wg_free(&g);
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 11500, W + 1500, 0), 0);
	u = wg_find(&g, "up");
	cr_assert(u && u->auth_fp_known && u->auth_fp == FP, "lost in the compaction");
	journal_close(&j);
	wg_free(&g);

	/* An older gate's journal: A, no fingerprint. */
	cr_assert_eq(unlink(path), 0);
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 12000, W + 2000, 0), 0);
	journal_close(&j);
	wg_free(&g);
	buf_printf(&text, "A up %lld 400000 300000 535 old", (long long)(W + 400000 - 12000));
	buf_printf(&text, " %08" PRIx32 "\n", journal_crc32(text.s, text.len));
	fd = open(path, O_WRONLY | O_APPEND);
	cr_assert(fd >= 0 && write(fd, text.s, text.len) == (ssize_t)text.len);
	close(fd);
	wg_init(&g, &noops);
	cr_assert_eq(journal_open(&j, path, &g, NULL, 13000, W + 3000, 0), 0);
	u = wg_find(&g, "up");
	cr_assert(u && u->auth_until == 400000 && !u->auth_fp_known, "A record: until %lld",
	    u ? (long long)u->auth_until : -1LL);
	cr_assert_str_eq(u->auth_reason, "535 old");
	journal_close(&j);
	wg_free(&g);
	buf_free(&text);
	tl_rmtree(dir);
	free(path);
	free(dir);
}

/* Issue 31: a quota's suspension (WG_QUOTA) is journalled as such (Q)
 * and comes back a quota's, so fallback_when's quota still counts it
 * after a restart; a throttle's (U) does not. */
Test(journal, quota_suspension_replays_as_a_quota)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/j", dir);
	struct journal j;
	struct wgate g;
	struct wg_req *a;
	struct wg_up *u;
	uint64_t id;
	const int64_t W = 1700000000000LL;
	int quota;

	for (quota = 1; quota >= 0; quota--) {
		unlink(path);
		wg_init(&g, &noops);
		cr_assert_eq(journal_open(&j, path, &g, NULL, 10000, W, 0), 0);
		wg_set_policy(&g, &pol, 0, 10000);
		a = grant(&g, 10000);
		journal_grant(&j, a, 10000, W);
		u = a->up;
		id = a->id;
		(void)wg_report(&g, a, quota ? WG_QUOTA : WG_THROTTLED,
		    "554 5.2.0 SubmissionQuotaExceededException", 10100);
		cr_assert_eq(u->susp_quota, quota);
		journal_end(&j, id, 'S', 10100, W + 100);
		journal_suspend(&j, u, 0, 10100, W + 100);
		cr_assert_eq(journal_sync(&j), 0);
		journal_close(&j);
		wg_free(&g);

		wg_init(&g, &noops);
		cr_assert_eq(journal_open(&j, path, &g, NULL, 11000, W + 1000, 0), 0);
		u = wg_find(&g, "up");
		cr_assert_gt(u->susp_until, 11000);
		cr_assert_eq(u->susp_quota, quota, "quota %d", quota);
		journal_close(&j);
		wg_free(&g);
	}
	tl_rmtree(dir);
	free(path);
	free(dir);
}
