/*
 * fallback_test.c: backup relays and routing by recipient domain (issue
 * 25; weir.conf(5), "Backup relays and routing by recipient") through
 * the real binaries and two stand-in upstreams on loopback
 * (tests/upstream/upstream.py twice: the primary "isp" as t.up, the
 * other as an rt_peer), each recording what it accepted at its own
 * clock.
 *
 *   primary_down_backup_takes_over_and_returns
 *       isp's port closed, 30 messages queued, fallback_when
 *       "unreachable 3s": nothing reaches gmail before the spell has
 *       lasted 3 s, then mail flows through gmail at its limit; weir
 *       status says per waiting message that it goes through gmail and
 *       why; isp back: messages one at a time until one finds it (the
 *       probe, at most every 3 s), the return is logged, and new mail goes through isp again; isp took nothing
 *       before it was back; every message once, both windows held at each
 *       upstream's clock, one switch and one return logged and counted.
 *   wrong_password_then_fixed
 *       isp refuses the password: its mail goes through gmail (at most
 *       two AUTHs at isp, no MAIL there); the secret fixed and a reload:
 *       messages one at a time until one is isp's probe, and once it got
 *       through new mail goes through isp.
 *   quota_spill
 *       isp "10 per 1d", 30 messages: exactly 10 through isp, 20 through
 *       ses, neither window exceeded.
 *   recipient_routing_splits_one_message
 *       one message to three domains over two routes: each recipient at
 *       exactly one upstream, once, with that upstream's sender rewrite.
 *   kill9_during_a_switch_sends_nothing_twice
 *       a kill -9 of weir-send while gmail holds a message's final dot,
 *       isp back before weir-send restarts: no recipient reaches both
 *       upstreams, each exactly once.
 *   backlog_returns_to_the_recovered_primary
 *       (issue 31, item 1) isp "4 per 2s", gmail "1 per 2s", fallback_when
 *       "unreachable 2s", 30 messages: isp closes after 8, gmail starts
 *       taking the rest at its slow rate, isp opens again: within a
 *       probe interval and a round trip the rest goes through isp (at
 *       most 2 more through gmail, those it held already); every message
 *       once, each window held at its upstream's clock.  Before, the
 *       batches passed over were bound to gmail for good: it drained
 *       them all at 1 per 2 s while isp took none.
 *   routes_independent_of_a_throttled_route
 *       (issue 31, item 5) a route for a.example (corp, listed first)
 *       answers "421 4.7.0 too many messages" at RCPT: the message's
 *       default recipient goes through isp at once, while corp's waits
 *       out the suspension.  Before, it waited for corp's suspension
 *       (5 minutes).
 *   routes_independent_of_an_unreachable_route
 *       the same with corp closed (fallback isp, "unreachable 10s"):
 *       the default recipient goes at once, corp's through isp once the
 *       spell lasted 10 s.  Before, the default one waited for it.
 *   greeting_421_is_unreachable
 *       (issue 31, item 4) isp answers every connection "421 4.3.2
 *       Service not available": with fallback_when "unreachable 2s"
 *       alone, the mail goes through gmail once the spell has lasted
 *       2 s; isp sees no MAIL.  Before, the 421 suspended isp as a
 *       throttle (5 minutes) and nothing reached gmail.
 *   status_of_a_suspended_primary_that_keeps_its_mail
 *       (issue 31, item 9) isp refuses the password, its fallback_when
 *       names only "unreachable": weir status says isp keeps its mail,
 *       suspended until T.  Before: "takes its mail (one probe at a
 *       time)".
 *   run_refuses_what_check_config_refuses
 *       (issue 31, item 8) a fallback without a policy section of its
 *       own: weir run starts nothing and says the same file:line as
 *       check-config; sendmail still queues mail on that configuration.
 *       Before, weir run started on the "*" limits, silently.
 *   run_takes_a_fallback_with_a_preset
 *       a fallback whose preset gives it limits needs no policy section:
 *       weir run starts, as check-config passes it.
 *   check_config
 *       weir check-config refuses a loop and a fallback without a policy
 *       section of its own, and warns about a fallback whose sender
 *       rewriting leaves senders it refuses.
 *
 * Ports are picked by the kernel, loopback only; every process is
 * stopped at the end, even on failure (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_helpers.h"

static struct rt t;
static struct rt_peer b;	/* the other upstream */

static void
setup(void)
{
	rt_setup(&t, 2);
	memset(&b, 0, sizeof b);
}

static void
teardown(void)
{
	rt_peer_free(&b);
	rt_teardown(&t);
}

TestSuite(fallback, .init = setup, .fini = teardown, .timeout = 240);

#define SENDER "alice@src.example"

/* n messages of one recipient each, PREFIX<i>@dst.example. */
static void
inject(const char *prefix, size_t from, size_t n)
{
	char **a = rt_addrs(prefix, "dst.example", from, n);
	size_t i;

	for (i = 0; i < n; i++)
		rt_sendmail(&t, SENDER, (const char *const *)&a[i], 1,
		    "Subject: fallback\n\nbody\n");
	rt_addrs_free(a, n);
}

/* How often addr is in the record's data events. */
static size_t
count(const struct rt_rec *r, const char *addr)
{
	return rt_rec_count(r, NULL, addr);
}

/* Every PREFIX<i>@dst.example (i < n) exactly once over both records;
 * how many at the first. */
static size_t
each_once(const struct rt_rec *a, const struct rt_rec *z, const char *prefix, size_t n)
{
	char **v = rt_addrs(prefix, "dst.example", 0, n);
	size_t i, at_a = 0;

	for (i = 0; i < n; i++) {
		size_t ka = count(a, v[i]), kz = count(z, v[i]);

		cr_assert_eq(ka + kz, 1, "%s: %zu times at the first upstream, %zu at the other",
		    v[i], ka, kz);
		at_a += ka;
	}
	rt_addrs_free(v, n);
	return at_a;
}

/* The wall time of a log line "YYYY-MM-DDTHH:MM:SS.mmm+ZZZZ ...": the
 * first line of file holding what, or -1. */
static double
logged_at(const char *file, const char *what)
{
	struct buf text = BUF_INIT;
	const char *p, *line;
	double when = -1;
	struct tm tm;
	int ms, off;

	if (access(file, F_OK) == 0)
		tl_read(file, &text);
	p = strstr(buf_cstr(&text), what);
	if (p) {
		for (line = p; line > text.s && line[-1] != '\n'; line--)
			;
		memset(&tm, 0, sizeof tm);
		if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%5d", &tm.tm_year, &tm.tm_mon,
		    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &off) == 8) {
			tm.tm_year -= 1900;
			tm.tm_mon -= 1;
			when = (double)timegm(&tm) + ms / 1000.0 -
			    ((off / 100) * 3600 + (off % 100) * 60);
		}
	}
	buf_free(&text);
	return when;
}

/* The first data event's time in a record, or -1. */
static double
first_data(const struct rt_rec *r)
{
	return r->n ? r->v[0].time : -1;
}

/* A condition for rt_wait(): the upstream of record arg (a file) holds
 * a final dot ("delaying", --dataend-delay). */
static int
holds_a_dot(struct rt *x, void *arg)
{
	struct buf text = BUF_INIT;
	int yes;

	(void)x;
	if (access(arg, F_OK) != 0)
		return 0;
	tl_read(arg, &text);
	yes = strstr(buf_cstr(&text), "\"delaying\"") != NULL;
	buf_free(&text);
	return yes;
}

/* Messages PREFIX0, PREFIX1 ... one at a time, each delivered before
 * the next, until weir-send logs isp's return (a message asked of isp
 * got through: the gate lets one go as its probe when one is due, so
 * those before it may still go through the backup); how many. */
static size_t
until_return(const char *prefix)
{
	size_t n = 0;

	while (rt_log_count(&t, "upstream isp: its mail goes through it again") == 0) {
		cr_assert_lt(n, 60, "no return after %zu messages:\n%s", n,
		    rt_send_logs_tail(&t, 4000));
		inject(prefix, n++, 1);
		rt_wait_empty(&t, 30000);
	}
	return n;
}

static char *
weir(const char *cmd, const char *arg, int want)
{
	const char *args[] = { "-c", t.s.qt.conf, cmd, arg };
	struct tl_result r = rt_run(&t, "weir", args, arg ? 4 : 3, NULL);
	char *out;

	cr_assert_eq(r.status, want, "weir %s: exit %d:\n%s%s", cmd, r.status,
	    buf_cstr(&r.out), buf_cstr(&r.err));
	out = xstrdup(buf_cstr(&r.out));
	tl_result_free(&r);
	return out;
}

/* isp on a port of its own that nothing listens on (closed), its
 * number. */
static unsigned
closed_isp(void)
{
	unsigned port;

	rt_upstream_start(&t, "good", NULL, 0);
	port = t.port;
	rt_upstream_stop(&t);
	return port;
}

Test(fallback, primary_down_backup_takes_over_and_returns)
{
	struct rt_rec ri, rg;
	struct rt_peer_count twelve = { &b, 12 };
	unsigned port = closed_isp();
	double spell, first, back;
	char *st, *js, *gst;
	size_t np;

	rt_peer_start(&t, &b, "gmail", NULL, 0);
	rt_conf_upstream_at(&t, "isp", port, "  fallback = {\"gmail\"}\n"
	    "  fallback_when = {\"unreachable 3s\"}\n");
	rt_conf_upstream_at(&t, "gmail", b.port, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"4 per 1s\"} }\n"
	    "upstream \"gmail\" { rate = {\"3 per 1s\"} }\n");
	inject("r", 0, 30);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	cr_assert(rt_wait(rt_peer_ndata_at_least, &t, &twelve, 60000),
	    "gmail got %zu messages:\n%s", rt_rec_ndata_file(b.record), rt_send_logs_tail(&t, 4000));
	/* Nothing before the spell lasted 3 s; then at once, at gmail's
	 * limit (the window below). */
	spell = logged_at(t.gate_log, "upstream isp: unreachable:");
	cr_assert_gt(spell, 0, "no spell logged by weir-gate");
	rt_rec_load_file(b.record, &rg);
	first = first_data(&rg);
	cr_assert_geq(first, spell + 3.0 - 0.002, "gmail's first message %.3f s after the spell "
	    "began", first - spell);
	cr_assert_leq(first, spell + 3.0 + 10.0, "gmail's first message %.3f s after the spell "
	    "began", first - spell);
	rt_rec_free(&rg);
	rt_wait_log(&t, "upstream isp: its mail goes through gmail from now on", 1, 1000);
	/* weir status: per waiting message, where and why. */
	st = weir("status", NULL, 0);
	cr_assert(strstr(st, "via gmail (isp unreachable since"), "%s", st);
	js = weir("status", "--json", 0);
	cr_assert(strstr(js, "\"via\":\"gmail\",\"primary\":\"isp\",\"why\":\"unreachable\""),
	    "%s", js);
	free(st);
	free(js);
	/* isp back: one message finds it (the probe), the return is logged,
	 * and new mail goes through it. */
	rt_upstream_start(&t, "good", NULL, port);
	back = rt_now();
	np = until_return("p");
	inject("n", 0, 5);
	rt_wait_empty(&t, 90000);
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rg);
	/* Every message once; isp took mail only once it was back (its
	 * record begins then), and all of it once it had returned. */
	(void)each_once(&ri, &rg, "r", 30);
	(void)each_once(&ri, &rg, "p", np);
	cr_assert_eq(each_once(&ri, &rg, "n", 5), 5, "new mail goes through isp again");
	cr_assert_gt(ri.n, 0);
	cr_assert_geq(ri.v[0].time, back, "isp took a message before it was back");
	rt_assert_window(&ri, 4, 1.0);
	cr_assert_eq(rt_assert_window(&rg, 3, 1.0), 3, "gmail not driven at its limit");
	cr_assert_eq(rt_log_count(&t, "its mail goes through gmail from now on"), 1);
	cr_assert_eq(rt_log_count(&t, "its mail goes through it again"), 1);
	gst = rt_gate_status(&t);
	cr_assert(strstr(gst, "weir-send: its mail went to a fallback 1 time, came back 1"),
	    "%s", gst);
	free(gst);
	rt_assert_no_bounce(&t, &ri);
	rt_assert_queue_sound(&t);
	rt_rec_free(&ri);
	rt_rec_free(&rg);
}

Test(fallback, wrong_password_then_fixed)
{
	struct rt_rec ri, rg;
	struct rt_peer_count six = { &b, 6 };
	char *wrong = xasprintf("%s/secret.isp", t.s.qt.tmp), *extra;
	size_t np;

	tl_write(wrong, "wrong-pw", 8);
	cr_assert_eq(chmod(wrong, 0600), 0);
	rt_upstream_start(&t, "good", NULL, 0);
	rt_peer_start(&t, &b, "gmail", NULL, 0);
	extra = xasprintf("  secret_file = \"%s\"\n  fallback = {\"gmail\"}\n", wrong);
	rt_conf_upstream_at(&t, "isp", t.port, extra);
	rt_conf_upstream_at(&t, "gmail", b.port, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"gmail\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	inject("r", 0, 6);
	cr_assert(rt_wait(rt_peer_ndata_at_least, &t, &six, 60000),
	    "gmail got %zu messages:\n%s", rt_rec_ndata_file(b.record), rt_send_logs_tail(&t, 4000));
	rt_rec_load(&t, &ri);
	cr_assert_eq(ri.n, 0, "a message reached isp");
	cr_assert_eq(ri.nmail, 0, "MAIL at isp with a refused password");
	cr_assert_geq(ri.nauth_fail, 1);
	cr_assert_leq(ri.nauth, 2, "%zu AUTHs at isp: one per suspension", ri.nauth);
	rt_rec_free(&ri);
	/* The password fixed, and a reload (weir run passes SIGHUP on to
	 * both): isp takes mail again. */
	tl_write(wrong, RT_SECRET, strlen(RT_SECRET));
	cr_assert_eq(kill(t.gate, SIGHUP), 0);
	cr_assert_eq(kill(t.send.pid, SIGHUP), 0);
	rt_wait_log(&t, "SIGHUP: ", 1, 10000);
	/* Once the gate has lifted the suspension, the next message is
	 * isp's probe (one at a time); once it got through, the rest go
	 * there too. */
	np = until_return("p");
	inject("n", 0, 4);
	rt_wait_empty(&t, 60000);
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rg);
	cr_assert_eq(each_once(&ri, &rg, "r", 6), 0);
	(void)each_once(&ri, &rg, "p", np);
	cr_assert_eq(each_once(&ri, &rg, "n", 4), 4, "new mail goes through isp again");
	cr_assert_eq(rt_log_count(&t, "upstream isp: its mail goes through gmail from now on"), 1);
	cr_assert_eq(rt_log_count(&t, "upstream isp: its mail goes through it again"), 1);
	rt_assert_no_bounce(&t, &ri);
	rt_rec_free(&ri);
	rt_rec_free(&rg);
	free(extra);
	free(wrong);
}

Test(fallback, quota_spill)
{
	struct rt_rec ri, rs;
	char *st;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_peer_start(&t, &b, "ses", NULL, 0);
	rt_conf_upstream_at(&t, "isp", t.port, "  fallback = {\"ses\"}\n");
	rt_conf_upstream_at(&t, "ses", b.port, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1d\"} }\n"
	    "upstream \"ses\" { rate = {\"5 per 1s\"} }\n");
	inject("r", 0, 30);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_wait_empty(&t, 90000);
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rs);
	cr_assert_eq(each_once(&ri, &rs, "r", 30), 10, "10 through isp, 20 through ses");
	cr_assert_eq(ri.n, 10);
	cr_assert_eq(rs.n, 20);
	rt_assert_window(&ri, 10, 86400.0);
	rt_assert_window(&rs, 5, 1.0);
	cr_assert_eq(rt_log_count(&t, "upstream isp: its mail goes through ses from now on "
	    "(quota"), 1, "%s", rt_send_logs_tail(&t, 3000));
	/* The next message goes to ses at once, and status says why. */
	st = weir("status", NULL, 0);
	cr_assert(strstr(st, "isp: passed over: quota"), "%s", st);
	free(st);
	rt_assert_no_bounce(&t, &ri);
	rt_rec_free(&ri);
	rt_rec_free(&rs);
}

Test(fallback, recipient_routing_splits_one_message)
{
	const char *rcpts[] = { "a@x.corp.example", "b@partner.example", "c@elsewhere.example" };
	struct rt_rec ri, rc;
	size_t i, di = 0, dc = 0;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_peer_start(&t, &b, "corp", NULL, 0);
	rt_conf_upstream_at(&t, "isp", t.port, "  rewrite_default = \"me@isp.example\"\n");
	rt_conf_upstream_at(&t, "corp", b.port, "  recipient_domains = {\"*.corp.example\", "
	    "\"partner.example\"}\n  rewrite_default = \"relay@corp.example\"\n");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"corp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, rcpts, 3, "Subject: three domains\n\nbody\n");
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rc);
	cr_assert_eq(ri.n, 1, "one transaction at isp");
	cr_assert_eq(rc.n, 1, "one transaction at corp");
	for (i = 0; i < 3; i++) {
		di += count(&ri, rcpts[i]);
		dc += count(&rc, rcpts[i]);
	}
	cr_assert_eq(count(&rc, rcpts[0]), 1);
	cr_assert_eq(count(&rc, rcpts[1]), 1);
	cr_assert_eq(count(&ri, rcpts[2]), 1);
	cr_assert(di == 1 && dc == 2, "isp %zu, corp %zu", di, dc);
	cr_assert_str_eq(ri.v[0].sender, "me@isp.example");
	cr_assert_str_eq(rc.v[0].sender, "relay@corp.example");
	rt_assert_no_bounce(&t, &ri);
	rt_rec_free(&ri);
	rt_rec_free(&rc);
}

Test(fallback, kill9_during_a_switch_sends_nothing_twice)
{
	const char *flags[] = { "--dataend-delay", "r0@dst.example=4", NULL };
	struct rt_rec ri, rg;
	unsigned port = closed_isp();
	double killed;
	size_t i;

	rt_peer_start(&t, &b, "gmail", flags, 0);
	rt_conf_upstream_at(&t, "isp", port, "  fallback = {\"gmail\"}\n"
	    "  fallback_when = {\"unreachable 2s\"}\n");
	rt_conf_upstream_at(&t, "gmail", b.port, "");
	/* gmail's grace: its deliverer, left alone, goes on for half of it. */
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"gmail\" { rate = {\"2 per 1s\"} grace = \"30s\" }\n");
	inject("r", 0, 12);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	/* gmail holds r0's final dot: kill weir-send then, and bring isp
	 * back before it restarts. */
	cr_assert(rt_wait(holds_a_dot, &t, (void *)b.record, 60000),
	    "gmail never held a final dot:\n%s", rt_send_logs_tail(&t, 4000));
	rt_send_kill9(&t);
	killed = rt_now();
	rt_upstream_start(&t, "good", NULL, port);
	rt_send_start(&t);
	/* Drained: a kill during the elimination of a batch of ended
	 * messages may leave their mess/ files alone (S2, as qmail; removed
	 * after 36 hours): one per message of the batch (sched.c), so no
	 * count is promised, only that nothing else is left. */
	cr_assert(rt_wait(rt_drained, &t, NULL, 90000), "not drained after 90 s:\n...%s",
	    rt_send_logs_tail(&t, 4000));
	qt_assert_only_s2(&t.s.qt, "after the kill");
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rg);
	each_once(&ri, &rg, "r", 12);
	cr_assert_eq(count(&rg, "r0@dst.example"), 1, "r0 went elsewhere than gmail");
	for (i = 0; i < rg.n; i++)
		if (count(&rg, "r0@dst.example") && strcmp(rg.v[i].rcpts[0], "r0@dst.example") == 0)
			cr_assert_gt(rg.v[i].time, killed, "r0 was accepted before the kill: no "
			    "delivery was in flight");
	rt_assert_window(&rg, 2, 1.0);
	cr_assert_geq(rt_log_count(&t, "outcome handed on by the deliverer of an earlier weir-send"),
	    1, "r0's outcome did not come from the flight file:\n%s", rt_send_logs_tail(&t, 4000));
	rt_assert_no_bounce(&t, &ri);
	rt_rec_free(&ri);
	rt_rec_free(&rg);
}

/* isp (with flags) and its backup gmail, both up, fallback_when
 * "unreachable 2s", each with its rate. */
static void
isp_then_gmail(const char *const *flags, const char *isp_rate, const char *gmail_rate)
{
	char *pol = xasprintf("upstream \"isp\" { rate = {\"%s\"} }\n"
	    "upstream \"gmail\" { rate = {\"%s\"} }\n", isp_rate, gmail_rate);

	rt_upstream_start(&t, "good", flags, 0);
	rt_peer_start(&t, &b, "gmail", NULL, 0);
	rt_conf_upstream_at(&t, "isp", t.port, "  fallback = {\"gmail\"}\n"
	    "  fallback_when = {\"unreachable 2s\"}\n");
	rt_conf_upstream_at(&t, "gmail", b.port, "");
	rt_policy(&t, pol);
	free(pol);
}

/* How many data events of r came at or after time since. */
static size_t
after(const struct rt_rec *r, double since)
{
	size_t i, n = 0;

	for (i = 0; i < r->n; i++)
		n += r->v[i].time >= since;
	return n;
}

Test(fallback, backlog_returns_to_the_recovered_primary)
{
	struct rt_peer_count three = { &b, 3 };
	struct rt_rec ri, rg;
	size_t eight = 8, at_back;
	double back;

	isp_then_gmail(NULL, "4 per 2s", "1 per 2s");
	inject("r", 0, 30);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	cr_assert(rt_wait(rt_ndata_at_least, &t, &eight, 30000), "isp took %zu",
	    rt_rec_ndata(&t));
	rt_upstream_stop(&t);
	cr_assert(rt_wait(rt_peer_ndata_at_least, &t, &three, 40000),
	    "gmail got %zu messages:\n%s", rt_rec_ndata_file(b.record), rt_send_logs_tail(&t, 4000));
	rt_upstream_start(&t, "good", NULL, t.port);
	back = rt_now();
	at_back = rt_rec_ndata_file(b.record);
	rt_wait_empty(&t, 90000);
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rg);
	(void)each_once(&ri, &rg, "r", 30);
	cr_log_info("backlog: %zu still waiting when isp was back: isp took %zu, gmail %zu "
	    "(%zu of them later than 4 s after)", 30 - 8 - at_back, after(&ri, back),
	    after(&rg, back), after(&rg, back + 4.0));
	/* What gmail took once isp was back: a probe interval (2 s) and a
	 * round trip for isp's return to be seen, then only what gmail
	 * already held. */
	cr_assert_leq(after(&rg, back + 4.0), 2, "gmail took %zu of the %zu still waiting after "
	    "isp was back (%zu through isp)\n%s", after(&rg, back), 30 - 8 - at_back,
	    after(&ri, back), rt_send_logs_tail(&t, 4000));
	cr_assert_geq(after(&ri, back), 30 - 8 - at_back - 3, "isp took %zu after it was back",
	    after(&ri, back));
	rt_assert_window(&ri, 4, 2.0);
	rt_assert_window(&rg, 1, 2.0);
	cr_assert_eq(rt_log_count(&t, "upstream isp: its mail goes through it again"), 1);
	rt_assert_no_bounce(&t, &ri);
	rt_rec_free(&ri);
	rt_rec_free(&rg);
}

/* One message to x@a.example (corp's route) and y@dst.example (isp's):
 * y must reach isp within `within` seconds of the injection. */
static void
split_message(double within)
{
	const char *rcpts[] = { "x@a.example", "y@dst.example" };
	double sent;
	struct rt_rec ri;
	size_t i, k;

	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"corp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	sent = rt_now();
	rt_sendmail(&t, SENDER, rcpts, 2, "Subject: split\n\nbody\n");
	cr_assert(rt_wait(rt_delivered_to, &t, (void *)"y@dst.example", (int)(within * 1000) +
	    5000), "y never reached isp:\n%s", rt_send_logs_tail(&t, 4000));
	rt_rec_load(&t, &ri);
	for (i = 0; i < ri.n; i++)
		for (k = 0; k < ri.v[i].nrcpt; k++)
			if (strcmp(ri.v[i].rcpts[k], "y@dst.example") == 0) {
				cr_log_info("split message: y reached isp %.2f s after it was "
				    "queued", ri.v[i].time - sent);
				cr_assert_leq(ri.v[i].time - sent, within, "y reached isp %.1f s "
				    "after it was queued (corp's trouble held it back)",
				    ri.v[i].time - sent);
			}
	rt_rec_free(&ri);
}

Test(fallback, routes_independent_of_a_throttled_route)
{
	const char *flags[] = { "--reply", "rcpt:x@a.example=421 4.7.0 too many messages", NULL };

	rt_upstream_start(&t, "good", NULL, 0);
	rt_peer_start(&t, &b, "corp", flags, 0);
	rt_conf_upstream_at(&t, "corp", b.port, "  recipient_domains = {\"a.example\"}\n");
	rt_conf_upstream_at(&t, "isp", t.port, "");
	split_message(5.0);
	cr_assert(rt_gate_status_has(&t, (void *)"suspended"), "corp was not suspended");
	cr_assert_eq(rt_rec_ndata_file(b.record), 0);
}

Test(fallback, routes_independent_of_an_unreachable_route)
{
	struct rt_rec ri;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_peer_start(&t, &b, "corp", NULL, 0);
	rt_peer_stop(&b);
	rt_conf_upstream_at(&t, "corp", b.port, "  recipient_domains = {\"a.example\"}\n"
	    "  fallback = {\"isp\"}\n  fallback_when = {\"unreachable 10s\"}\n");
	rt_conf_upstream_at(&t, "isp", t.port, "");
	split_message(5.0);
	/* corp's recipient through isp once the spell lasted 10 s. */
	cr_assert(rt_wait(rt_delivered_to, &t, (void *)"x@a.example", 40000),
	    "x never went through isp:\n%s", rt_send_logs_tail(&t, 4000));
	rt_rec_load(&t, &ri);
	cr_assert_eq(rt_rec_count(&ri, NULL, "x@a.example"), 1);
	cr_assert_eq(rt_rec_count(&ri, NULL, "y@dst.example"), 1);
	rt_assert_no_bounce(&t, &ri);
	rt_rec_free(&ri);
}

Test(fallback, greeting_421_is_unreachable)
{
	const char *flags[] = { "--reply", "banner=421 4.3.2 Service not available", NULL };
	struct rt_peer_count three = { &b, 3 };
	struct rt_rec ri, rg;

	isp_then_gmail(flags, "10 per 1s", "10 per 1s");
	inject("r", 0, 3);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	cr_assert(rt_wait(rt_peer_ndata_at_least, &t, &three, 40000),
	    "gmail got %zu messages:\n%s", rt_rec_ndata_file(b.record), rt_send_logs_tail(&t, 4000));
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rg);
	cr_assert_eq(each_once(&ri, &rg, "r", 3), 0);
	cr_assert_eq(ri.nmail, 0, "MAIL at an upstream that refused the greeting");
	cr_assert_gt(ri.nconnect, 0, "isp was never tried");
	cr_assert(logged_at(t.gate_log, "upstream isp: unreachable:") > 0,
	    "weir-gate saw no unreachable spell");
	/* The switch says when isp is asked again, not how long it was down
	 * (issue 31, item 9: "for 1 s at least" after a longer outage). */
	cr_assert_eq(rt_log_count(&t, "its mail goes through gmail from now on (unreachable; isp "
	    "asked again in "), 1, "%s", rt_send_logs_tail(&t, 3000));
	rt_assert_no_bounce(&t, &rg);
	rt_rec_free(&ri);
	rt_rec_free(&rg);
}

Test(fallback, status_of_a_suspended_primary_that_keeps_its_mail)
{
	char *wrong = xasprintf("%s/secret.isp", t.s.qt.tmp), *extra, *st;

	tl_write(wrong, "wrong-pw", 8);
	cr_assert_eq(chmod(wrong, 0600), 0);
	rt_upstream_start(&t, "good", NULL, 0);
	rt_peer_start(&t, &b, "gmail", NULL, 0);
	extra = xasprintf("  secret_file = \"%s\"\n  fallback = {\"gmail\"}\n"
	    "  fallback_when = {\"unreachable 10m\"}\n", wrong);
	rt_conf_upstream_at(&t, "isp", t.port, extra);
	rt_conf_upstream_at(&t, "gmail", b.port, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"gmail\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	inject("r", 0, 1);
	cr_assert(rt_wait(rt_gate_status_has, &t, (void *)"authentication", 20000),
	    "no authentication suspension:\n%s", rt_send_logs_tail(&t, 3000));
	st = weir("status", NULL, 0);
	cr_assert(strstr(st, "  isp: keeps its mail: authentication suspended until "), "%s", st);
	cr_assert(strstr(st, "takes its mail") == NULL, "%s", st);
	free(st);
	/* The status document (and so the page) says the same. */
	st = weir("status", "--json", 0);
	cr_assert(strstr(st, "\"keeps\":\"keeps its mail: authentication suspended until "),
	    "%s", st);
	free(st);
	free(extra);
	free(wrong);
}

Test(fallback, run_refuses_what_check_config_refuses)
{
	const char *args[] = { "-c", t.s.qt.conf, "check-config" };
	const char *rcpt = "q@dst.example";
	struct tl_result r;
	char *line, *nl, *log, *todo;
	int status;

	rt_conf_upstream_at(&t, "isp", 2525, "  fallback = {\"gmail\"}\n");
	rt_conf_upstream_at(&t, "gmail", 2526, "");
	rt_policy(&t, "upstream \"*\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	r = rt_run(&t, "weir", args, 3, NULL);
	cr_assert_eq(r.status, 1, "%s", buf_cstr(&r.out));
	line = strstr(buf_cstr(&r.out), "upstream \"isp\": its fallback \"gmail\" has no");
	cr_assert_not_null(line, "%s", buf_cstr(&r.out));
	while (line > r.out.s && line[-1] != '\n')
		line--;
	line = xstrdup(line);
	if ((nl = strchr(line, '\n')) != NULL)
		*nl = '\0';
	tl_result_free(&r);
	rt_run_spawn(&t);
	cr_assert(rt_wait(rt_run_log_has, &t, (void *)"not starting: 1 error", 10000),
	    "weir run started:\n%s", (log = rt_run_log(&t)));
	status = rt_run_stop(&t, 5000);
	cr_assert(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d",
	    status);
	log = rt_run_log(&t);
	cr_assert(strstr(log, line), "weir run did not say \"%s\":\n%s", line, log);
	cr_assert(strstr(log, "weir-gate") == NULL || strstr(log, "started") == NULL,
	    "a daemon started:\n%s", log);
	free(log);
	/* Injection still works on this configuration: the message waits
	 * in todo/ for weir-send. */
	rt_sendmail(&t, SENDER, &rcpt, 1, "Subject: queued\n\nbody\n");
	todo = xasprintf("%s/todo", t.s.qt.qdir);
	cr_assert_eq(tl_count_files(todo), 1);
	free(todo);
	free(line);
}

/* A fallback whose preset gives it its provider's limits has limits of
 * its own: check-config takes it, and so does weir run (the same rule,
 * check_config_refusals, with the presets' limits merged as weir-gate
 * merges them). */
Test(fallback, run_takes_a_fallback_with_a_preset)
{
	const char *args[] = { "-c", t.s.qt.conf, "check-config" };
	struct tl_result r;
	char *dir = tl_src_path("etc/providers"), *line, *log;

	line = xasprintf("preset_dir = \"%s\"\n", dir);
	sh_conf_append(&t.s, line);
	rt_conf_upstream_at(&t, "isp", 2525, "  fallback = {\"gmail\"}\n");
	rt_conf_upstream_at(&t, "gmail", 2526, "  preset = \"gmail\"\n");
	rt_policy(&t, "upstream \"*\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	r = rt_run(&t, "weir", args, 3, NULL);
	cr_assert_null(strstr(buf_cstr(&r.out), "has no upstream"), "%s", buf_cstr(&r.out));
	tl_result_free(&r);
	rt_run_spawn(&t);
	cr_assert(rt_wait(rt_run_log_has, &t, (void *)"started weir-send", 10000),
	    "weir run did not start:\n%s", (log = rt_run_log(&t)));
	cr_assert_not(rt_run_log_has(&t, (void *)"not starting"));
	free(line);
	free(dir);
}

Test(fallback, check_config)
{
	char *out, *p = xasprintf("%s/loop.conf", t.s.qt.tmp);
	const char *args[] = { "-c", p, "check-config" };
	struct tl_result r;
	char *text;

	/* No policy section of its own for gmail ("*" does not count), and
	 * its rewriting leaves example.org senders (isp's) as they are. */
	rt_conf_upstream_at(&t, "isp", 2525, "  fallback = {\"gmail\"}\n"
	    "  rewrite_default = \"me@example.org\"\n");
	rt_conf_upstream_at(&t, "gmail", 2526, "  username = \"me@gmail.com\"\n"
	    "  rewrite_sender = {\"@test.example me@gmail.com\"}\n");
	rt_policy(&t, "upstream \"*\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	out = weir("check-config", NULL, 1);
	cr_assert(strstr(out, "upstream \"isp\": its fallback \"gmail\" has no upstream \"gmail\" "
	    "section of its own"), "%s", out);
	cr_assert(strstr(out, "warning: upstream \"isp\": mail from senders at example.org goes "
	    "through its fallback \"gmail\" as it is"), "%s", out);
	free(out);
	/* A loop: refused by every program, check-config names it. */
	text = xasprintf("upstream \"a\" {\n  host = a.example\n  fallback = {\"b\"}\n}\n"
	    "upstream \"b\" {\n  host = b.example\n  fallback = {\"a\"}\n}\n");
	tl_write(p, text, strlen(text));
	r = rt_run(&t, "weir", args, 3, NULL);
	cr_assert_eq(r.status, 1, "%s%s", buf_cstr(&r.out), buf_cstr(&r.err));
	/* The fallback key's line (3), not the section's brace (issue 31). */
	cr_assert(strstr(buf_cstr(&r.out), "loop.conf:3: upstream \"a\": fallback loop: a -> b -> a"),
	    "%s", buf_cstr(&r.out));
	tl_result_free(&r);
	free(text);
	free(p);
}
