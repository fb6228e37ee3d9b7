/*
 * moves_test.c: mail moves when its upstream does (issue 31, items 6
 * and 7), through the real binaries and stand-in upstreams on loopback
 * (tests/upstream/upstream.py), each with its own record.
 *
 *   resume_sends_at_once
 *       isp throttles (421 at one recipient: a 5-minute suspension);
 *       two more messages wait for it; isp recovers and `weir resume
 *       isp` lifts the suspension: all three go at once, and `weir status` shows none of
 *       them waiting on isp.  Before, weir-send kept its own copy of the
 *       suspension and held them until it would have ended.
 *   back_upstream_sends_what_waited_on_it
 *       isp and its backup gmail both down (fallback_when "unreachable
 *       2s"), three messages deferred there for the next retry, and one
 *       deferred earlier for its recipient's own 450; isp back: the
 *       three go at once (a probe found isp), the fourth keeps its own
 *       retry time.  Before, they waited for their retries (minutes).
 *   requeue_via_sends_through_another_upstream_now
 *       m2 waits at isp (its window spent for an hour); `weir requeue
 *       --via gmail ID` moves it now: logged, listed by weir queue ("via
 *       gmail (requeued)") and weir status while it waits for gmail's
 *       window, then delivered through gmail, not isp.  Before, the
 *       option did not exist.
 *   reload_with_fixed_credentials_sends_at_once
 *       isp refuses the password (an authentication suspension); the
 *       secret fixed and a reload: both messages waiting go at once.
 *       (This one passed on the old code too.)
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

#include "lib/alloc.h"
#include "relay_helpers.h"

#define SENDER "alice@src.example"

static struct rt t;
static struct rt_peer b;

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

TestSuite(moves, .init = setup, .fini = teardown, .timeout = 240);

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

static void
send1(const char *rcpt)
{
	rt_sendmail(&t, SENDER, &rcpt, 1, "Subject: moves\n\nbody\n");
}

Test(moves, resume_sends_at_once)
{
	const char *flags[] = { "--reply", "rcpt:t@dst.example=421 4.7.0 Try again later, "
		"slow down", NULL };
	char *out, *st;
	double resumed;

	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	send1("t@dst.example");
	cr_assert(rt_wait(rt_gate_status_has, &t, (void *)"suspended", 20000),
	    "the gate never suspended isp:\n%s", rt_send_logs_tail(&t, 3000));
	send1("a@dst.example");
	send1("b@dst.example");
	/* Both wait: nothing reaches isp during the suspension. */
	rt_wait_log(&t, "msg ", 3, 10000);
	cr_assert(!rt_wait(rt_delivered_to, &t, (void *)"a@dst.example", 3000), "a went during the "
	    "suspension");
	/* Status agrees with what happens: all three wait at the gate for
	 * isp (weir-send holds none back on its own). */
	st = weir("status", NULL, 0);
	cr_assert(strstr(st, "upstream isp: suspended until"), "%s", st);
	cr_assert(strstr(st, "waiting: 3"), "%s", st);
	cr_assert(strstr(st, "waiting for the window: 3 (3)"), "%s", st);
	free(st);
	/* isp stops throttling; the admin lifts the suspension by hand. */
	rt_upstream_stop(&t);
	rt_upstream_start(&t, "good", NULL, t.port);
	out = weir("resume", "isp", 0);
	resumed = rt_now();
	cr_assert(strstr(out, "upstream isp: suspensions lifted"), "%s", out);
	free(out);
	cr_assert(rt_wait(rt_delivered_to, &t, (void *)"a@dst.example", 15000) &&
	    rt_wait(rt_delivered_to, &t, (void *)"b@dst.example", 15000) &&
	    rt_wait(rt_delivered_to, &t, (void *)"t@dst.example", 15000),
	    "a, b and t did not go within 15 s of weir resume:\n%s", rt_send_logs_tail(&t, 4000));
	cr_assert_lt(rt_now() - resumed, 15.0);
	/* Status agrees: no message of them waits on isp. */
	st = weir("status", NULL, 0);
	cr_assert(strstr(st, "a@dst.example") == NULL, "%s", st);
	free(st);
}

Test(moves, back_upstream_sends_what_waited_on_it)
{
	const char *flags[] = { "--reply", "rcpt:own@dst.example=450 4.2.0 Mailbox busy", NULL };
	const char *rcpts[] = { "r0@dst.example", "r1@dst.example", "r2@dst.example" };
	unsigned isp_port, gmail_port;
	struct rt_rec ri;
	size_t i;
	double back;

	/* isp up for the message deferred for its own reason. */
	rt_upstream_start(&t, "good", flags, 0);
	isp_port = t.port;
	rt_peer_start(&t, &b, "gmail", NULL, 0);
	gmail_port = b.port;
	rt_peer_stop(&b);
	rt_conf_upstream_at(&t, "isp", isp_port, "  fallback = {\"gmail\"}\n"
	    "  fallback_when = {\"unreachable 2s\"}\n");
	rt_conf_upstream_at(&t, "gmail", gmail_port, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"gmail\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	send1("own@dst.example");
	rt_wait_log(&t, "deferred <own@dst.example>", 1, 20000);
	/* Both down: the three are deferred at gmail, the last of the route,
	 * for their next retry. */
	rt_upstream_stop(&t);
	for (i = 0; i < 3; i++)
		send1(rcpts[i]);
	for (i = 0; i < 3; i++) {
		char *what = xasprintf("deferred <%s>: Sorry, I wasn't able to establish an SMTP "
		    "connection to 127.0.0.1:%u", rcpts[i], gmail_port);

		rt_wait_log(&t, what, 1, 40000);
		free(what);
	}
	rt_upstream_start(&t, "good", flags, isp_port);
	back = rt_now();
	for (i = 0; i < 3; i++)
		cr_assert(rt_wait(rt_delivered_to, &t, (void *)rcpts[i], 30000), "%s did not go within "
		    "30 s of isp's return:\n%s", rcpts[i], rt_send_logs_tail(&t, 4000));
	cr_assert_lt(rt_now() - back, 30.0);
	rt_rec_load(&t, &ri);
	for (i = 0; i < 3; i++)
		cr_assert_eq(rt_rec_count(&ri, NULL, rcpts[i]), 1);
	rt_rec_free(&ri);
	/* The one deferred for its own reason keeps its retry time. */
	cr_assert_eq(rt_log_count(&t, "deferred <own@dst.example>"), 1, "%s",
	    rt_send_logs_tail(&t, 3000));
	rt_assert_queue_sound(&t);
}

/* A reload that fixes the credentials sends the mail that waited on
 * them at once: the gate lifts the authentication suspension, and the
 * batches waiting for it are granted (weir-send holds none back). */
Test(moves, reload_with_fixed_credentials_sends_at_once)
{
	char *wrong = xasprintf("%s/secret.isp", t.s.qt.tmp), *extra;
	double fixed;

	tl_write(wrong, "wrong-pw", 8);
	cr_assert_eq(chmod(wrong, 0600), 0);
	rt_upstream_start(&t, "good", NULL, 0);
	extra = xasprintf("  secret_file = \"%s\"\n", wrong);
	rt_conf_upstream_at(&t, "isp", t.port, extra);
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	send1("a@dst.example");
	send1("b@dst.example");
	cr_assert(rt_wait(rt_gate_status_has, &t, (void *)"authentication", 20000),
	    "no authentication suspension:\n%s", rt_send_logs_tail(&t, 3000));
	tl_write(wrong, RT_SECRET, strlen(RT_SECRET));
	cr_assert_eq(kill(t.gate, SIGHUP), 0);
	cr_assert_eq(kill(t.send.pid, SIGHUP), 0);
	fixed = rt_now();
	cr_assert(rt_wait(rt_delivered_to, &t, (void *)"a@dst.example", 15000) &&
	    rt_wait(rt_delivered_to, &t, (void *)"b@dst.example", 15000),
	    "not sent within 15 s of the reload:\n%s", rt_send_logs_tail(&t, 4000));
	cr_assert_lt(rt_now() - fixed, 15.0);
	free(extra);
	free(wrong);
}

/* The id weir-send logged for the message queued from sender. */
static char *
queued_id(const char *sender)
{
	char *logs = rt_send_logs(&t), *want = xasprintf(": queued, from <%s>", sender);
	char *p = strstr(logs, want), *id;
	const char *start;

	cr_assert_not_null(p, "no message from <%s>:\n%s", sender, logs);
	for (start = p; start > logs && start[-1] != ' '; start--)
		;
	id = xstrndup(start, (size_t)(p - start));
	free(want);
	free(logs);
	return id;
}

/* Issue 31's "move waiting mail by hand": isp's window is spent for an
 * hour and m2 waits there; `weir requeue --via gmail ID` moves it now:
 * logged, shown by weir queue and weir status while it waits for gmail's
 * window (another message filled it), then delivered through gmail.
 * Before, the option did not exist (usage error). */
Test(moves, requeue_via_sends_through_another_upstream_now)
{
	const char *r1 = "m1@dst.example", *r2 = "m2@dst.example", *r0 = "m0@dst.example";
	const char *args[] = { "-c", t.s.qt.conf, "requeue", "--via", "gmail", NULL };
	struct tl_result r;
	struct rt_rec ri, rg;
	char *id, *st, *q;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_peer_start(&t, &b, "gmail", NULL, 0);
	rt_conf_upstream_at(&t, "gmail", b.port, "  senders = {\"*@gm.example\"}\n");
	rt_conf_upstream_at(&t, "isp", t.port, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"1 per 1h\"} }\n"
	    "upstream \"gmail\" { rate = {\"1 per 8s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, "alice@src.example", &r1, 1, "Subject: m1\n\nbody\n");
	cr_assert(rt_wait(rt_delivered_to, &t, (void *)r1, 20000));
	rt_sendmail(&t, "x@gm.example", &r0, 1, "Subject: m0\n\nbody\n");
	cr_assert(rt_wait(rt_peer_ndata_at_least, &t, &(struct rt_peer_count){ &b, 1 }, 20000));
	rt_sendmail(&t, "bob@src.example", &r2, 1, "Subject: m2\n\nbody\n");
	cr_assert(rt_wait(rt_gate_status_has, &t, (void *)"waiting: 1", 10000),
	    "m2 does not wait at isp:\n%s", rt_gate_status(&t));
	id = queued_id("bob@src.example");
	args[5] = id;
	r = rt_run(&t, "weir", args, 6, NULL);
	cr_assert_eq(r.status, 0, "%s%s", buf_cstr(&r.out), buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.out), "requeued through"), "%s", buf_cstr(&r.out));
	tl_result_free(&r);
	cr_assert(rt_logged(&t, "requeued by the operator through upstream gmail", 1, 5000));
	/* Shown while it waits for gmail's window. */
	q = rt_mailq(&t);
	cr_assert(strstr(q, "via gmail (requeued)"), "%s", q);
	free(q);
	{
		const char *sargs[] = { "-c", t.s.qt.conf, "status" };

		r = rt_run(&t, "weir", sargs, 3, NULL);
		st = xstrdup(buf_cstr(&r.out));
		tl_result_free(&r);
	}
	cr_assert(strstr(st, "1 recipient via gmail (requeued there by the operator)"), "%s", st);
	free(st);
	cr_assert(rt_wait(rt_peer_ndata_at_least, &t, &(struct rt_peer_count){ &b, 2 }, 20000),
	    "m2 never reached gmail:\n%s", rt_send_logs_tail(&t, 3000));
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rg);
	cr_assert_eq(rt_rec_count(&rg, NULL, r2), 1);
	cr_assert_eq(rt_rec_count(&ri, NULL, r2), 0);
	rt_rec_free(&ri);
	rt_rec_free(&rg);
	free(id);
}
