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
#include "mail/gatestatus.h"
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
		if (granted[i])
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

/* The server's list of held grants: those the tests hold. */
static struct wg_req **
held_list(void *arg, const struct wg_up *u, size_t *n)
{
	struct wg_req **v = xcalloc(ngranted + 1, sizeof *v);
	size_t i;

	(void)arg;
	*n = 0;
	for (i = 0; i < ngranted; i++)
		if (granted[i] && granted[i]->up == u)
			v[(*n)++] = granted[i];
	return v;
}

/* The document with the held grants known (jerr: the journal's error). */
static struct json_object *
status_of(int64_t now, int64_t history_ms, const char *jerr)
{
	struct status_history h = { history_ms, held_list, NULL };
	struct buf b = BUF_INIT, why = BUF_INIT;
	struct json_object *doc;

	gate_status(&b, &g, 1, now, 0, jerr, NULL, &h);
	doc = json_parse_strict(b.s, b.len, 1 << 20, &why);
	cr_assert_not_null(doc, "%s\n%s", buf_cstr(&why), buf_cstr(&b));
	buf_free(&b);
	buf_free(&why);
	return doc;
}

/* Report granted[i] (and forget it). */
static void
report(size_t i, enum wg_outcome o, uint32_t accepted, int64_t now)
{
	granted[i]->accepted = accepted;
	(void)wg_report_at(&g, granted[i], o, o == WG_THROTTLED ? "421 4.7.0 slow down" : NULL,
	    -1, now, NULL);
	granted[i] = NULL;
}

static int
kind_ok(struct json_object *v, unsigned kind)
{
	switch (json_object_get_type(v)) {
	case json_type_null: return (kind & GS_K_NULL) != 0;
	case json_type_int: return (kind & GS_K_INT) != 0;
	case json_type_boolean: return (kind & GS_K_BOOL) != 0;
	case json_type_string: return (kind & GS_K_STR) != 0;
	case json_type_array: return (kind & GS_K_ARR) != 0;
	case json_type_object: return (kind & (GS_K_OBJ | GS_K_INTS)) != 0;
	default: return 0;
	}
}

static const struct gs_member *
declared(const char *path)
{
	size_t i;

	for (i = 0; i < gs_nmembers; i++)
		if (strcmp(gs_members[i].path, path) == 0)
			return &gs_members[i];
	return NULL;
}

/* Every member of o (at path) is declared, of its declared kind; each
 * path seen is added to seen (" path "). */
static void
walk(struct json_object *o, const char *path, struct buf *seen)
{
	json_object_object_foreach(o, k, v) {
		char *p = path[0] ? xasprintf("%s.%s", path, k) : xstrdup(k);
		const struct gs_member *m = declared(p);
		size_t i;

		cr_assert_not_null(m, "the gate writes %s, which mail/gatestatus.h does not declare", p);
		cr_assert(kind_ok(v, m->kind), "%s: %s is not of its declared kind", p,
		    json_object_to_json_string(v));
		buf_printf(seen, " %s ", p);
		if (json_object_is_type(v, json_type_object) && !(m->kind & GS_K_INTS))
			walk(v, p, seen);
		else if (json_object_is_type(v, json_type_array))
			for (i = 0; i < jp_len(v); i++) {
				char *pe = xasprintf("%s[]", p);

				if (json_object_is_type(jp_at(v, i), json_type_object))
					walk(jp_at(v, i), pe, seen);
				free(pe);
			}
		free(p);
	}
}

/*
 * The gate's document against mail/gatestatus.h, the interface its
 * clients read (issue 32): every member it writes is declared there
 * with its kind, and every declared member is written (those that are
 * not always there, here because a suspension (another host's, shared),
 * a calendar window, an unknown outcome, weir-send's counts and a
 * history are; a shared store's are Redis's: redis_test).
 */
Test(gatestatus, document_as_declared)
{
	const uint32_t one[UNIT_COUNT] = { 1, 1, 1 };
	struct json_object *doc;
	struct buf seen = BUF_INIT;
	struct wg_up *u;
	size_t i;

	wg_replay_send(&g, "up", 1000, 1000, one, 0);
	wg_replay_send(&g, "up", 2000, 900000, one, 7);	/* an unknown outcome */
	acquire(950000);
	acquire(950000);
	report(0, WG_THROTTLED, 0, 951000);
	u = wg_find(&g, "up");
	cr_assert_eq(wg_auth_refused(u, "535 5.7.8 no", 952000), 1);
	u->has_counts = 1;
	/* Another host's suspension, shared through a store, ending after
	 * this gate's own: suspended_by. */
	(void)wg_shared_suspension(u, 400000, 1, "h2", "452 4.5.3 quota", 953000);
	acquire(953000);
	doc = status_of(953000, 600000, "No space left on device");
	walk(doc, "", &seen);
	for (i = 0; i < gs_nmembers; i++)
		if (strncmp(gs_members[i].path, "upstreams[].shared", 18) != 0 &&
		    strstr(gs_members[i].path, "all_hosts") == NULL)
			cr_assert(strstr(seen.s, gs_members[i].path) != NULL,
			    "mail/gatestatus.h declares %s; the gate did not write it:\n%s",
			    gs_members[i].path, json_object_to_json_string(doc));
	json_object_put(doc);
	buf_free(&seen);
}

/*
 * One definition per figure (issue 33):
 *  - in flight: grants for a message handed to a deliverer; a kept
 *    session's own grant (0/0/1) and a grant not yet STARTed are held,
 *    not in flight;
 *  - a send: a SENT report with a recipient accepted ("sent"), else
 *    "sent_none"; the history says how many were accepted (null for a
 *    send the journal gave back);
 *  - the next free slot of a suspended upstream: the suspension's end,
 *    though its windows have room;
 *  - the backlog: since the first request of a spell, gaps of less than
 *    WG_BUSY_GAP_MS included.
 */
Test(gatestatus, in_flight_sends_next_slot_backlog)
{
	const uint32_t slot[UNIT_COUNT] = { 0, 0, 1 }, one[UNIT_COUNT] = { 1, 1, 0 };
	struct json_object *doc, *up, *sends;
	struct wg_req *r;
	long long v;

	cr_assert_eq(wg_acquire(&g, "up", NULL, NULL, slot, NULL, NULL, 100000, &r), WG_OK);
	wg_pump(&g, 100000);
	doc = status_of(100000, 0, NULL);
	cr_assert_eq(num(jp_get(up0(doc), "held")), 1);
	cr_assert_eq(num(jp_get(up0(doc), "in_flight")), 0, "an idle kept session in flight");
	cr_assert_null(jp_get(up0(doc), "backlog_since_ms"), "a kept session is no backlog");
	json_object_put(doc);
	cr_assert_eq(wg_acquire(&g, "up", NULL, NULL, one, NULL, NULL, 101000, &r), WG_OK);
	cr_assert_eq(wg_acquire(&g, "up", NULL, NULL, one, NULL, NULL, 101000, &r), WG_OK);
	wg_pump(&g, 101000);
	cr_assert_eq(ngranted, 3);
	granted[2]->started = 0;	/* asked ahead (STARTS), not handed over */
	doc = status_of(101000, 0, NULL);
	cr_assert_eq(num(jp_get(up0(doc), "held")), 3);
	cr_assert_eq(num(jp_get(up0(doc), "in_flight")), 1);
	cr_assert_eq(num(jp_get(up0(doc), "backlog_since_ms")), 101000);
	json_object_put(doc);
	/* The one recipient refused: no send; two accepted: one. */
	report(1, WG_SENT, 0, 102000);
	granted[2]->started = 1;
	report(2, WG_SENT, 2, 102000);
	wg_replay_send(&g, "up", 90000, 90000, one, 0);
	doc = status_of(102000, 600000, NULL);
	up = up0(doc);
	cr_assert_eq(num(jp_get(up, "sent")), 1);
	cr_assert_eq(num(jp_get(up, "sent_none")), 1);
	cr_assert_eq(num(jp_get(up, "rcpt_accepted")), 2);
	sends = jp_get(jp_get(up, "history"), "sends");
	cr_assert_eq(jp_len(sends), 3, "%s", json_object_to_json_string(sends));
	cr_assert_eq(num(jp_at(jp_at(sends, 0), 5)), 0);
	cr_assert_eq(num(jp_at(jp_at(sends, 1), 5)), 2);
	cr_assert(json_object_is_type(jp_at(jp_at(sends, 2), 5), json_type_null),
	    "a send the journal gave back: accepted not known");
	/* Idle since 102 s, not for a minute yet: the same backlog. */
	cr_assert_eq(num(jp_get(up, "backlog_since_ms")), 101000);
	json_object_put(doc);
	cr_assert_eq(wg_acquire(&g, "up", NULL, NULL, one, NULL, NULL, 150000, &r), WG_OK);
	wg_pump(&g, 150000);
	doc = status_of(150000, 0, NULL);
	cr_assert_eq(num(jp_get(up0(doc), "backlog_since_ms")), 101000);
	json_object_put(doc);
	report(3, WG_THROTTLED, 0, 151000);
	/* Suspended: the windows have room, the next slot is the end. */
	doc = status_of(152000, 0, NULL);
	up = up0(doc);
	cr_assert_eq(num(jp_get(jp_at(jp_get(up, "windows"), 0), "free_at_ms")), 152000);
	cr_assert_eq(jp_ll(jp_get(up, "suspended_until_ms"), &v), 0);
	cr_assert_gt(v, 152000);
	cr_assert_eq(num(jp_get(up, "next_slot_ms")), v);
	json_object_put(doc);
	/* Over a minute with nothing: the backlog is over; a new one. */
	doc = status_of(212000, 0, NULL);
	cr_assert_null(jp_get(up0(doc), "backlog_since_ms"));
	json_object_put(doc);
	cr_assert_eq(wg_acquire(&g, "up", NULL, NULL, one, NULL, NULL, 215000, &r), WG_OK);
	doc = status_of(215000, 0, NULL);
	cr_assert_eq(num(jp_get(up0(doc), "backlog_since_ms")), 215000);
	json_object_put(doc);
	wg_cancel(&g, r, 215000, NULL);
}
