/*
 * gatestatus_test.c: weir-gate's JSON status (src/gate/status.c) read
 * back with lib/jsonparse.c: each window's free_at_ms (when it next has
 * room: at once, when enough logged sends leave it, or null while held
 * grants alone fill it) and a calendar window's period_start_ms, and the history of STATUS JSON <seconds>: the
 * sends in the period only, an unknown outcome as its interval, held
 * grants and waiting requests with their times and weights.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gate/status.h"
#include "lib/alloc.h"
#include "lib/jsonparse.h"
#include "testlib.h"

static char *dir;
static struct policy pol;
static struct wgate g;
static struct wg_req *granted[8];
static size_t ngranted;

static void
on_granted(void *arg, struct wg_req *r)
{
	(void)arg;
	cr_assert_lt(ngranted, 8);
	granted[ngranted++] = r;
}

static void
on_refused(void *arg, struct wg_req *r, enum wg_code code)
{
	(void)arg; (void)r; (void)code;
	cr_assert_fail("a request was refused");
}

static const struct wg_ops ops = { on_granted, on_refused, NULL, NULL, NULL };

static void
setup(void)
{
	char *p;
	struct buf err = BUF_INIT;
	const char *text = "upstream \"up\" {\n  rate = {\"3 per 10s\", \"100 per 1d\", "
	    "\"50 recipients daily at 00:00 UTC\"}\n}\n";

	dir = tl_tmpdir();
	p = xasprintf("%s/policy.conf", dir);
	tl_write(p, text, strlen(text));
	cr_assert_eq(policy_load(&pol, p, &err), 0, "%s", buf_cstr(&err));
	free(p);
	buf_free(&err);
	ngranted = 0;
	wg_init(&g, &ops);
	wg_set_policy(&g, &pol, 0, 0);
}

static void
teardown(void)
{
	size_t i;

	for (i = 0; i < ngranted; i++)
		wg_cancel(&g, granted[i], 0, NULL);
	wg_free(&g);
	policy_free(&pol);
	tl_rmtree(dir);
	free(dir);
}

TestSuite(gatestatus, .init = setup, .fini = teardown);

static struct json_object *
status_at(int64_t now, int64_t history_ms)
{
	struct status_history h = { history_ms, NULL, NULL };
	struct buf b = BUF_INIT, why = BUF_INIT;
	struct json_object *doc;

	gate_status(&b, &g, 1, now, 0, NULL, NULL, history_ms ? &h : NULL);
	doc = json_parse_strict(b.s, b.len, 1 << 20, &why);
	cr_assert_not_null(doc, "%s\n%s", buf_cstr(&why), buf_cstr(&b));
	buf_free(&b);
	buf_free(&why);
	return doc;
}

static struct json_object *
up0(struct json_object *doc)
{
	return jp_at(jp_get(doc, "upstreams"), 0);
}

static long long
num(struct json_object *o)
{
	long long v;

	cr_assert_eq(jp_ll(o, &v), 0, "not an integer: %s",
	    o ? json_object_to_json_string(o) : "(missing)");
	return v;
}

static void
acquire(int64_t now)
{
	const uint32_t w[UNIT_COUNT] = { 1, 1, 1 };
	struct wg_req *r;

	cr_assert_eq(wg_acquire(&g, "up", NULL, NULL, w, NULL, NULL, now, &r), WG_OK);
	wg_pump(&g, now);
}

Test(gatestatus, free_at_ms_of_each_window)
{
	const uint32_t one[UNIT_COUNT] = { 1, 1, 1 };
	struct json_object *doc, *wins;

	wg_replay_send(&g, "up", 1000, 1000, one, 0);
	wg_replay_send(&g, "up", 2000, 2000, one, 0);
	doc = status_at(3000, 0);
	wins = jp_get(up0(doc), "windows");
	cr_assert_eq(num(jp_get(jp_at(wins, 0), "free_at_ms")), 3000, "room now");
	cr_assert_null(jp_get(up0(doc), "history"), "a history not asked for");
	json_object_put(doc);
	/* 3 of 3: the first send leaves the 10 s window at 11 s. */
	wg_replay_send(&g, "up", 2500, 2500, one, 0);
	doc = status_at(3000, 0);
	wins = jp_get(up0(doc), "windows");
	cr_assert_eq(num(jp_get(jp_at(wins, 0), "used")), 3);
	cr_assert_eq(num(jp_get(jp_at(wins, 0), "free_at_ms")), 11000);
	cr_assert_eq(num(jp_get(jp_at(wins, 1), "free_at_ms")), 3000, "the daily window has room");
	cr_assert_null(jp_get(jp_at(wins, 1), "period_start_ms"), "a sliding window's period");
	cr_assert_eq(num(jp_get(jp_at(wins, 2), "period_start_ms")), 0, "midnight, 1 Jan 1970");
	json_object_put(doc);
	/* At 11.5 s two are logged in the window: one grant fits, two wait;
	 * room again when the send of 2 s leaves, at 12 s. */
	acquire(11500);
	acquire(11500);
	acquire(11500);
	cr_assert_eq(ngranted, 1);
	doc = status_at(11600, 0);
	wins = jp_get(up0(doc), "windows");
	cr_assert_eq(num(jp_get(jp_at(wins, 0), "used")), 3);
	cr_assert_eq(num(jp_get(jp_at(wins, 0), "free_at_ms")), 12000);
	json_object_put(doc);
	/* At 13 s the two waiting are granted: three held fill it whatever
	 * leaves, only a report makes room. */
	wg_pump(&g, 13000);
	cr_assert_eq(ngranted, 3);
	doc = status_at(13000, 0);
	wins = jp_get(up0(doc), "windows");
	cr_assert_eq(num(jp_get(jp_at(wins, 0), "used")), 3);
	cr_assert(json_object_is_type(jp_get(jp_at(wins, 0), "free_at_ms"), json_type_null) &&
	    json_object_object_get_ex(jp_at(wins, 0), "free_at_ms", NULL), "free_at_ms not null");
	json_object_put(doc);
}

Test(gatestatus, history_of_the_period)
{
	const uint32_t one[UNIT_COUNT] = { 1, 2, 1 };
	struct json_object *doc, *h, *sends, *held, *waiting;

	wg_replay_send(&g, "up", 1000, 1000, one, 0);
	wg_replay_send(&g, "up", 500000, 500000, one, 0);
	wg_replay_send(&g, "up", 600000, 900000, one, 0);	/* an unknown outcome */
	acquire(950000);
	acquire(950000);
	acquire(960000);
	acquire(970000);
	cr_assert_eq(ngranted, 3, "3 per 10 s: the sends before are out of it");
	doc = status_at(1000000, 600000);
	h = jp_get(up0(doc), "history");
	cr_assert_not_null(h);
	cr_assert_eq(num(jp_get(h, "since_ms")), 400000);
	cr_assert_eq(num(jp_get(h, "complete_since_ms")), 400000);
	json_object_put(doc);
	/* Less than an hour after the clock's zero (a gate on a machine up
	 * for minutes): the history is whole all the same. */
	doc = status_at(1000000, 3600000);
	h = jp_get(up0(doc), "history");
	cr_assert_eq(num(jp_get(h, "since_ms")), 1000000 - 3600000);
	cr_assert_eq(num(jp_get(h, "complete_since_ms")), 1000000 - 3600000);
	cr_assert_eq(jp_len(jp_get(h, "sends")), 3);
	json_object_put(doc);
	doc = status_at(1000000, 600000);
	h = jp_get(up0(doc), "history");
	sends = jp_get(h, "sends");
	cr_assert_eq(jp_len(sends), 2, "%s", json_object_to_json_string(sends));
	cr_assert_eq(num(jp_at(jp_at(sends, 0), 0)), 500000);
	cr_assert_eq(num(jp_at(jp_at(sends, 0), 1)), 500000);
	cr_assert_eq(num(jp_at(jp_at(sends, 0), 2)), 1);
	cr_assert_eq(num(jp_at(jp_at(sends, 0), 3)), 2);
	cr_assert_eq(num(jp_at(jp_at(sends, 1), 0)), 900000);
	cr_assert_eq(num(jp_at(jp_at(sends, 1), 1)), 600000);
	/* No server here to list the grants it holds: an empty list. */
	held = jp_get(h, "held");
	cr_assert(held && jp_len(held) == 0);
	waiting = jp_get(h, "waiting");
	cr_assert_eq(jp_len(waiting), 1);
	cr_assert_eq(num(jp_at(jp_at(waiting, 0), 0)), 970000);
	cr_assert_eq(num(jp_at(jp_at(waiting, 0), 2)), 1);
	cr_assert_str_eq(jp_str(jp_at(jp_at(waiting, 0), 4)), "default");
	json_object_put(doc);
}
