/*
 * shared_test.c: weir-gate's Redis scripts (the .lua files of src/gate,
 * run through shared.c) against a real redis-server (started on a Unix
 * socket in a scratch folder, no persistence, killed at teardown):
 * several windows at once, a calendar window, held grants against
 * max_connections and a lease that ends, a suspension every host
 * honours.  windowdiff_test checks them against the C engine.
 */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gate/shared.h"
#include "lib/alloc.h"
#include "testlib.h"

static struct tl_redis R;
static struct shared *sh;
static struct policy_upstream pu;
static struct policy_window win[2];
static struct wg_up up;
static int lifted;		/* shared_tick's */

static int64_t
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
setup(void)
{
	tl_redis_up(&R);
	/* A store that holds a history, and this host's written back. */
	tl_redis_whole(&R, "up", "h");
	sh = shared_new("h", "r", 0);
	memset(&pu, 0, sizeof pu);
	pu.name = (char *)"up";
	pu.shared = R.spec;
	pu.win = win;
	memset(win, 0, sizeof win);
	memset(&up, 0, sizeof up);
	up.name = (char *)"up";
	up.shared = 1;
}

static void
teardown(void)
{
	shared_free(sh);
	tl_redis_down(&R);
}

TestSuite(shared, .init = setup, .fini = teardown, .timeout = 60);

static struct wg_req *
req(uint64_t id)
{
	struct wg_req *r = xcalloc(1, sizeof *r);

	r->id = id;
	r->up = &up;
	r->w[UNIT_MESSAGES] = 1;
	r->w[UNIT_RECIPIENTS] = 1;
	r->w[UNIT_CONNECTIONS] = 1;
	r->granted = 1;
	r->since = mono();
	return r;
}

/* Ask for id; 1 granted (the request in *out), else *wait ms. */
static int
ask(uint64_t id, struct wg_req **out, int64_t *wait)
{
	struct wg_req *r = req(id);
	int64_t now = mono(), retry;
	int ok = shared_admit(sh, &pu, r, NULL, 0, now, &retry);

	*wait = retry - now;
	if (ok && out)
		*out = r;
	else
		free(r);
	return ok;
}

static void
sent(struct wg_req *r)
{
	struct wg_done d = { 0 };
	int64_t now = mono();

	d.logged = 1;
	d.t = now;
	shared_ended(sh, &pu, r, WG_SENT, &d, now, 0);
	free(r);
}

static void
set_win(int i, long long limit, long long per, int calendar)
{
	win[i].limit = limit;
	win[i].per = per;
	win[i].unit = UNIT_MESSAGES;
	win[i].calendar = calendar;
	pu.nwin = (size_t)i + 1;
}

Test(shared, several_windows)
{
	struct wg_req *r[4];
	int64_t wait;
	uint64_t i;

	set_win(0, 3, 10, 0);
	set_win(1, 4, 60, 0);
	for (i = 0; i < 3; i++)
		cr_assert_eq(ask(i + 1, &r[i], &wait), 1, "grant %llu", (unsigned long long)i);
	/* Three held: only a report (or a lease's end) frees one: poll. */
	cr_assert_eq(ask(10, NULL, &wait), 0);
	cr_assert_eq(wait, SHARED_POLL_MS);
	for (i = 0; i < 3; i++)
		sent(r[i]);
	/* Logged now, rounded up to the millisecond: the 10 s window frees
	 * in 10 s (and at most 1 ms). */
	cr_assert_eq(ask(11, NULL, &wait), 0);
	cr_assert(wait > 9000 && wait <= 10001, "wait %lld", (long long)wait);
	/* The 60 s window: one more fits once the 10 s one frees; then
	 * the fifth waits for the longer window. */
	tl_redis_cmd(&R, "FLUSHALL");
	tl_redis_whole(&R, "up", "h");
	set_win(0, 10, 10, 0);
	pu.nwin = 2;
	for (i = 0; i < 4; i++) {
		cr_assert_eq(ask(20 + i, &r[0], &wait), 1);
		sent(r[0]);
	}
	cr_assert_eq(ask(30, NULL, &wait), 0);
	cr_assert(wait > 59000 && wait <= 60001, "wait %lld", (long long)wait);
}

/* Redis's TIME in microseconds. */
static int64_t
redis_us(void)
{
	redisReply *r = redisCommand(R.c, "TIME");
	int64_t us;

	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
	us = strtoll(r->element[0]->str, NULL, 10) * 1000000 +
	    strtoll(r->element[1]->str, NULL, 10);
	freeReplyObject(r);
	return us;
}

/*
 * A send is logged no earlier than it was reported, to the microsecond:
 * its log time (ms) is Redis's time rounded up, as the local gate does,
 * so that a grant (which looks at the time rounded down) never comes
 * less than T after it.  Rounded down, a send reported at 1000.3 ms was
 * logged at 1000 and a grant at 1000 + T came 0.3 ms early at the
 * upstream's clock: seen as 6 sends within 3 s in redis_test.
 */
Test(shared, send_logged_no_earlier_than_reported)
{
	struct wg_req *r;
	redisReply *z;
	int64_t wait, before;
	uint64_t i;

	set_win(0, 100, 10, 0);
	for (i = 1; i <= 20; i++) {
		cr_assert_eq(ask(i, &r, &wait), 1);
		before = redis_us();
		sent(r);
		z = redisCommand(R.c, "ZRANGE weir:{up}:log -1 -1 WITHSCORES");
		cr_assert(z != NULL && z->type == REDIS_REPLY_ARRAY && z->elements == 2);
		cr_assert_geq(strtoll(z->element[1]->str, NULL, 10) * 1000, before,
		    "send %llu logged at %s ms, reported after %lld us", (unsigned long long)i,
		    z->element[1]->str, (long long)before);
		freeReplyObject(z);
	}
}

Test(shared, calendar_window)
{
	struct wg_req *r;
	struct timespec ts;
	int64_t wait, wall, at;

	set_win(0, 2, 3600, 1);		/* hourly, at :00 UTC */
	cr_assert_eq(ask(1, &r, &wait), 1);
	sent(r);
	cr_assert_eq(ask(2, &r, &wait), 1);
	sent(r);
	cr_assert_eq(ask(3, NULL, &wait), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	at = (wall + wait) % 3600000;
	cr_assert(at < 2000 || at > 3600000 - 2000, "not at the hour: %lld", (long long)at);
}

Test(shared, held_grants_and_leases)
{
	struct wg_req *a, *b;
	int64_t wait, ended;
	redisReply *rep;

	set_win(0, 10, 10, 0);
	pu.max_connections = 1;
	cr_assert_eq(ask(1, &a, &wait), 1);
	cr_assert_eq(ask(2, NULL, &wait), 0, "max_connections = 1 exceeded");
	/* Its host died: the lease ends (set here to have ended). */
	rep = redisCommand(R.c, "TIME");
	cr_assert(rep && rep->type == REDIS_REPLY_ARRAY);
	ended = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000 - 1;
	freeReplyObject(rep);
	rep = redisCommand(R.c, "ZADD weir:{up}:held XX %lld h.r.1", (long long)ended);
	cr_assert(rep && rep->type == REDIS_REPLY_INTEGER);
	freeReplyObject(rep);
	cr_assert_eq(ask(3, &b, &wait), 1);
	/* ... and it counts as a send that may have happened until then. */
	rep = redisCommand(R.c, "ZCARD weir:{up}:log");
	cr_assert_eq(rep->integer, 1);
	freeReplyObject(rep);
	free(a);
	sent(b);
}

Test(shared, suspension_for_all)
{
	int64_t wait, now = mono();

	set_win(0, 10, 10, 0);
	up.susp_until = now + 5000;
	shared_suspend(sh, &pu, &up, now + 5000, now);
	cr_assert_eq(ask(1, NULL, &wait), 0);
	cr_assert(wait > 4000 && wait <= 5000, "wait %lld", (long long)wait);
	/* This host's own: no copy of it. */
	cr_assert_eq(up.ssusp_until, 0);
	up.susp_until = 0;
	shared_suspend(sh, &pu, &up, 0, mono());
	cr_assert_eq(ask(2, NULL, &wait), 1);
}

/* The suspension's value in the store (shared.h), malloc'ed; NULL: none. */
static char *
susp_in_store(void)
{
	redisReply *rep = redisCommand(R.c, "GET weir:{up}:susp");
	char *v;

	cr_assert_not_null(rep);
	v = rep->type == REDIS_REPLY_STRING ? xstrdup(rep->str) : NULL;
	freeReplyObject(rep);
	return v;
}

#define QUOTA_REPLY "554 5.2.0 STOREDRV.Submission.Exception:SubmissionQuotaExceededException"

/*
 * A quota suspension met by host h is one for host h2 too: h2's grant is
 * refused for its time, and h2's copy (window.h's ssusp_*) says a quota's,
 * whose, and the reply, by the grant script's answer and by the
 * heartbeat's.  Before, the store held "h" alone and h2 saw no kind.
 */
Test(shared, quota_kind_for_every_host)
{
	struct shared *sh2 = shared_new("h2", "r2", 0);
	struct wg_up up2;
	struct wg_req *r = req(1);
	int64_t now = mono(), retry;
	char *v;

	set_win(0, 10, 10, 0);
	tl_redis_cmd(&R, "HSET weir:{up}:built h2 1");
	up.susp_until = now + 7200 * 1000LL;
	up.susp_quota = 1;
	up.susp_reason = (char *)QUOTA_REPLY;
	shared_suspend(sh, &pu, &up, up.susp_until, now);
	v = susp_in_store();
	cr_assert_str_eq(v, "h quota " QUOTA_REPLY);
	free(v);
	memset(&up2, 0, sizeof up2);
	up2.name = (char *)"up";
	up2.shared = 1;
	r->up = &up2;
	cr_assert_eq(shared_admit(sh2, &pu, r, NULL, 0, now, &retry), 0);
	cr_assert(retry - now > 7100 * 1000LL, "retry in %lld ms", (long long)(retry - now));
	cr_assert(up2.ssusp_until > now + 7100 * 1000LL && up2.ssusp_quota);
	cr_assert_str_eq(up2.ssusp_host, "h");
	cr_assert_str_eq(up2.ssusp_reason, QUOTA_REPLY);
	/* Lifted by h (RESUME): h2's heartbeat drops its copy, and its head
	 * may ask at once. */
	up.susp_until = 0;
	shared_suspend(sh, &pu, &up, 0, now);
	up2.shared_retry = retry;
	(void)shared_tick(sh2, &pu, &up2, NULL, 0, mono(), &lifted);
	cr_assert_eq(up2.ssusp_until, 0);
	cr_assert_eq(up2.shared_retry, 0);
	/* A throttle by h, read by the heartbeat. */
	up.susp_until = mono() + 5000;
	up.susp_quota = 0;
	up.susp_reason = (char *)"421 4.7.0 too many messages";
	shared_suspend(sh, &pu, &up, up.susp_until, mono());
	(void)shared_tick(sh2, &pu, &up2, NULL, 0, mono() + SHARED_RETRY_MS, &lifted);
	cr_assert(up2.ssusp_until > 0 && !up2.ssusp_quota);
	cr_assert_str_eq(up2.ssusp_reason, "421 4.7.0 too many messages");
	up.susp_reason = NULL;
	(void)wg_shared_suspension(&up2, 0, 0, NULL, NULL, mono());
	free(r);
	shared_free(sh2);
}

/* The value an older weir stored, "HOST" alone: a throttle. */
Test(shared, host_alone_reads_as_a_throttle)
{
	int64_t wait;

	set_win(0, 10, 10, 0);
	tl_redis_cmd(&R, "SET weir:{up}:susp other PX 5000");
	cr_assert_eq(ask(1, NULL, &wait), 0);
	cr_assert(up.ssusp_until > 0 && !up.ssusp_quota);
	cr_assert_str_eq(up.ssusp_host, "other");
	cr_assert_str_eq(up.ssusp_reason, "");
	(void)wg_shared_suspension(&up, 0, 0, NULL, NULL, mono());
}

/* A write-back (a store that lost the key: restarted, emptied) puts the
 * suspension back with its kind and reply. */
Test(shared, write_back_keeps_the_kind)
{
	int64_t now = mono();
	char *v;

	set_win(0, 10, 10, 0);
	up.susp_until = now + 7200 * 1000LL;
	up.susp_quota = 1;
	up.susp_reason = (char *)QUOTA_REPLY;
	/* This gate's start: its history (and suspension) written back. */
	(void)shared_tick(sh, &pu, &up, NULL, 0, now, &lifted);
	v = susp_in_store();
	cr_assert_not_null(v, "no suspension written back");
	cr_assert_str_eq(v, "h quota " QUOTA_REPLY);
	free(v);
	up.susp_reason = NULL;
}

/*
 * Hosts with different leases (each gate's grace): a call of the one
 * with the shorter never shortens the life of what the other's needs.
 * Before, each script set the keys' expiry to its own host's keep, and a
 * host with -g 0 made a 10-minute lease's grant vanish in seconds.
 */
Test(shared, shorter_lease_keeps_longer_history)
{
	struct shared *brief = shared_new("b", "r", 0);
	struct wg_req *r;
	int64_t wait;
	redisReply *ttl;

	shared_free(sh);
	sh = shared_new("h", "r", 600000);	/* 10 minutes */
	tl_redis_cmd(&R, "HSET weir:{up}:built b 1");
	set_win(0, 10, 10, 0);
	cr_assert_eq(ask(1, &r, &wait), 1);	/* held by h */
	/* b's calls: a grant, reported. */
	{
		struct shared *mine = sh;
		struct wg_req *x;

		sh = brief;
		cr_assert_eq(ask(2, &x, &wait), 1);
		sent(x);
		sh = mine;
	}
	ttl = redisCommand(R.c, "PTTL weir:{up}:held");
	cr_assert(ttl && ttl->type == REDIS_REPLY_INTEGER);
	cr_assert_gt(ttl->integer, 600000, "h's held grant expires in %lld ms", ttl->integer);
	freeReplyObject(ttl);
	ttl = redisCommand(R.c, "PTTL weir:{up}:gen");
	cr_assert_gt(ttl->integer, 600000, "the window's mark expires in %lld ms", ttl->integer);
	freeReplyObject(ttl);
	free(r);
	shared_free(brief);
}

/* h's quota in the store, seen by h2 (whose history is there too). */
static struct shared *
quota_of_h(struct wg_up *up2, int64_t now)
{
	struct shared *sh2 = shared_new("h2", "r2", 0);

	set_win(0, 10, 10, 0);
	tl_redis_cmd(&R, "HSET weir:{up}:built h2 1");
	(void)shared_tick(sh, &pu, &up, NULL, 0, now, &lifted);	/* h's start */
	up.susp_until = now + 7200 * 1000LL;
	up.susp_quota = 1;
	up.susp_reason = (char *)QUOTA_REPLY;
	shared_suspend(sh, &pu, &up, up.susp_until, now);
	memset(up2, 0, sizeof *up2);
	up2->name = (char *)"up";
	up2->shared = 1;
	return sh2;
}

/*
 * RESUME at h2 lifts the suspension h met at h itself: h's heartbeat
 * sees the store count one more lift than when h stored its quota.
 * Before, h kept its own quota for its 2 h.
 */
Test(shared, resume_elsewhere_lifts_it_where_it_was_met)
{
	struct wg_up up2;
	int64_t now = mono();
	struct shared *sh2 = quota_of_h(&up2, now);
	char *v;

	(void)shared_tick(sh, &pu, &up, NULL, 0, now + SHARED_RETRY_MS, &lifted);
	cr_assert_eq(lifted, 0, "nothing lifted yet");
	cr_assert_gt(up.susp_until, now);
	shared_suspend(sh2, &pu, &up2, 0, now);		/* RESUME at h2 */
	v = susp_in_store();
	cr_assert_null(v, "the suspension is still in the store: %s", v);
	(void)shared_tick(sh, &pu, &up, NULL, 0, now + 2 * SHARED_RETRY_MS, &lifted);
	cr_assert_eq(lifted, 1, "h did not see the RESUME at h2");
	cr_assert_eq(up.susp_until, 0);
	cr_assert_eq(up.shared_retry, 0);
	up.susp_reason = NULL;
	shared_free(sh2);
}

/*
 * A key that went with no RESUME counted (evicted, deleted by hand) is
 * not a lift: h writes its suspension back.  Before, h did not, and
 * every other host sent on through h's quota.
 */
Test(shared, lost_key_is_written_back_not_lifted)
{
	struct wg_up up2;
	int64_t now = mono();
	struct shared *sh2 = quota_of_h(&up2, now);
	char *v;

	tl_redis_cmd(&R, "DEL weir:{up}:susp");
	(void)shared_tick(sh, &pu, &up, NULL, 0, now + SHARED_RETRY_MS, &lifted);
	cr_assert_eq(lifted, 0, "a lost key taken for a RESUME");
	cr_assert_gt(up.susp_until, now);
	v = susp_in_store();
	cr_assert_not_null(v, "h did not write its suspension back");
	cr_assert_str_eq(v, "h quota " QUOTA_REPLY);
	free(v);
	up.susp_reason = NULL;
	shared_free(sh2);
}

/*
 * A shorter suspension stored after a longer one (h2's 300 s throttle
 * after h's 2 h quota) leaves the longer one, with its kind.  Before,
 * SET replaced it: after 300 s every host but h sent again.
 */
Test(shared, longer_suspension_kept)
{
	struct wg_up up2;
	int64_t now = mono();
	struct shared *sh2 = quota_of_h(&up2, now);
	redisReply *ttl;
	char *v;

	up2.susp_until = now + 300 * 1000LL;
	up2.susp_reason = (char *)"421 4.7.0 too many messages";
	shared_suspend(sh2, &pu, &up2, up2.susp_until, now);
	v = susp_in_store();
	cr_assert_str_eq(v, "h quota " QUOTA_REPLY);
	free(v);
	ttl = redisCommand(R.c, "PTTL weir:{up}:susp");
	cr_assert(ttl && ttl->type == REDIS_REPLY_INTEGER);
	cr_assert_gt(ttl->integer, 7100 * 1000LL, "the quota ends in %lld ms", ttl->integer);
	freeReplyObject(ttl);
	/* A longer one replaces it. */
	up2.susp_until = now + 8000 * 1000LL;
	shared_suspend(sh2, &pu, &up2, up2.susp_until, now);
	v = susp_in_store();
	cr_assert_str_eq(v, "h2 throttle 421 4.7.0 too many messages");
	free(v);
	up.susp_reason = up2.susp_reason = NULL;
	shared_free(sh2);
}
