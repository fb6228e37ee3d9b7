/*
 * inflight_test.c: a delivery in flight outlives the weir-send that
 * started it (issue 22, item 1).  Real parts only, as in session_test.c:
 * weir-gate (its default grace unless a test says otherwise), weir-send,
 * weir-remote -S, sendmail, and tests/upstream/upstream.py, which takes
 * 8 s to answer the first message's final dot and commits the message
 * even if the client has gone meanwhile, as a real server does.  Times
 * are the upstream's own (its record).
 *
 *   weir_send_killed_at_the_dot
 *                       policy "1 per 10s"; weir-send killed -9 just
 *                       after the first message's final dot, started
 *                       again, 5 more messages queued: the deliverer
 *                       reads the 250 and hands the outcome on, so all 6
 *                       arrive exactly once within 70 s of the kill, no
 *                       10 s holding more than one
 *   left_alone_gives_up_at_half_the_grace
 *                       an upstream that never answers RCPT, grace 6 s,
 *                       timeout_rcpt 60 s: the deliverer left alone by a
 *                       kill -9 of weir-send stops waiting 3 s after it
 *                       took the message (the gate counts the dropped
 *                       grant for 6 s only), not after 60 s; the next
 *                       weir-send gets the outcome from the flight file
 *   held_batch_of_a_bigger_message
 *                       one message to 3 recipients, one per transaction
 *                       (max_recipients = 1), the first batch's dot held
 *                       when weir-send is killed: the next weir-send
 *                       applies that batch's outcome and goes on with the
 *                       other two: each exactly once (found by the soak:
 *                       the message ended after the recovered batch)
 *   held_batch_after_a_deferred_one
 *                       the same, the first recipient put off (451), the
 *                       second's dot held: after the kill the third goes,
 *                       and the first stays queued for its retry (not
 *                       dropped with the message's end)
 *   deliverer_killed_too
 *                       the same with the deliverer killed as well (the
 *                       outcome is really unknown) and a grace of 10 s
 *                       in the policy: the first message arrives at most
 *                       twice, the others once, and the next send comes
 *                       no later than the kill + grace + 10 s (+ slack)
 *
 * Ports are picked by the kernel, loopback only; every process is killed
 * at the end, even on failure (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_helpers.h"

#define SENDER "alice@src.example"
#define N 6

static struct rt t;

static void
teardown(void)
{
	rt_teardown(&t);
}

TestSuite(inflight, .fini = teardown, .timeout = 240);

static void
send1(const char *rcpt)
{
	const char *r[] = { rcpt };

	rt_sendmail(&t, SENDER, r, 1, "Subject: f\n\nhello\n");
}

/* The relay with the upstream slow to answer f1's final dot; f1 sent,
 * and the upstream holding its dot.  The policy's grace line, if any. */
static char **
start_and_hold_first(const char *grace)
{
	char **to = rt_addrs("f", "dest.example", 1, N);
	const char *flags[] = { "--dataend-delay", "f1@dest.example=8", NULL };
	char *policy = xasprintf("upstream \"isp\" { rate = {\"1 per 10s\"}%s }\n",
	    grace ? grace : "");

	rt_setup(&t, 2);
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "  timeout_data_end = \"30s\"\n");
	rt_policy(&t, policy);
	rt_gate_start(&t, NULL);	/* the gate's default grace */
	rt_send_start(&t);
	send1(to[0]);
	cr_assert(rt_wait(rt_record_has, &t, "\"delaying\"", 20000),
	    "the first message never reached its final dot");
	free(policy);
	return to;
}

/* The rest queued; all delivered, the queue sound; the record in r. */
static void
queue_rest_and_drain(char **to, int ms, struct rt_rec *r)
{
	size_t i;

	for (i = 1; i < N; i++)
		send1(to[i]);
	rt_wait_empty(&t, ms);
	rt_rec_load(&t, r);
	rt_assert_no_bounce(&t, r);
	rt_assert_queue_sound(&t);
}

/* The latest data event's time. */
static double
last_data(const struct rt_rec *r)
{
	double last = 0;
	size_t i;

	for (i = 0; i < r->n; i++)
		if (r->v[i].time > last)
			last = r->v[i].time;
	return last;
}

/* The first data event after time `after` but the first copy of f1 (the
 * message whose final dot the upstream held, and took), or 0. */
static double
next_send(const struct rt_rec *r, double after)
{
	double f1 = 0, first = 0;
	size_t i;

	for (i = 0; i < r->n; i++)
		if (strcmp(r->v[i].rcpts[0], "f1@dest.example") == 0 &&
		    (f1 == 0 || r->v[i].time < f1))
			f1 = r->v[i].time;
	for (i = 0; i < r->n; i++)
		if (r->v[i].time > after && r->v[i].time != f1 &&
		    (first == 0 || r->v[i].time < first))
			first = r->v[i].time;
	return first;
}

Test(inflight, weir_send_killed_at_the_dot)
{
	char **to = start_and_hold_first(NULL);
	pid_t dl[4], first = t.send.pid;
	struct rt_rec r;
	double killed;
	size_t i;

	cr_assert_eq(rt_deliverers(&t, 0, dl, 4), 1, "no session deliverer at the dot");
	killed = rt_now();
	rt_send_kill9(&t);
	cr_assert(kill(first, 0) < 0 && errno == ESRCH, "weir-send %ld outlived its kill",
	    (long)first);
	rt_send_start(&t);
	rt_wait_log(&t, "its deliverer outlived the last weir-send; waiting for its outcome", 1,
	    10000);
	queue_rest_and_drain(to, 80000, &r);
	for (i = 0; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1, "<%s> delivered %zu times", to[i],
		    rt_rec_count(&r, SENDER, to[i]));
	rt_assert_window(&r, 1, 10.0);
	cr_assert(last_data(&r) - killed <= 70.0, "the last message came %.1f s after the kill",
	    last_data(&r) - killed);
	rt_say("inflight: 6 messages, the last %.1f s after the kill of weir-send",
	    last_data(&r) - killed);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}

Test(inflight, deliverer_killed_too)
{
	char **to = start_and_hold_first(" grace = \"10s\"");
	pid_t dl[4], first = t.send.pid;
	struct rt_rec r;
	double killed, next;
	size_t i, c1;
	int st;

	cr_assert_eq(rt_deliverers(&t, 0, dl, 4), 1, "no session deliverer at the dot");
	killed = rt_now();
	rt_send_kill9(&t);
	cr_assert(kill(first, 0) < 0 && errno == ESRCH, "weir-send %ld outlived its kill",
	    (long)first);
	/* Its deliverer, now ours (a subreaper's), dies too: proven by its
	 * wait status. */
	cr_assert_eq(kill(dl[0], SIGKILL), 0, "the deliverer %ld was gone already", (long)dl[0]);
	while (waitpid(dl[0], &st, 0) < 0 && errno == EINTR)
		;
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "deliverer status 0x%x", st);
	rt_send_start(&t);
	rt_wait_log(&t, "its deliverer died before the outcome", 1, 10000);
	for (i = 1; i < N; i++)
		send1(to[i]);
	/* f1 was put off as after a crash: weir flush sends it again. */
	rt_flush_until_empty(&t, 120000);
	rt_rec_load(&t, &r);
	rt_assert_no_bounce(&t, &r);
	rt_assert_queue_sound(&t);
	c1 = rt_rec_count(&r, SENDER, to[0]);
	cr_assert(c1 >= 1 && c1 <= 2, "<%s> delivered %zu times", to[0], c1);
	for (i = 1; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1, "<%s> delivered %zu times", to[i],
		    rt_rec_count(&r, SENDER, to[i]));
	rt_assert_window(&r, 1, 10.0);
	/* The stall: the grace (10 s) and the window's period after the
	 * kill, with 5 s for a loaded machine; not 10 minutes. */
	next = next_send(&r, killed);
	cr_assert(next > 0 && next - killed <= 10.0 + 10.0 + 5.0,
	    "the next message came %.1f s after the kills", next - killed);
	rt_say("inflight: weir-send and its deliverer killed: <%s> %zu times, the next message "
	    "%.1f s after the kills (grace 10 s + 10 s)", to[0], c1, next - killed);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}

Test(inflight, left_alone_gives_up_at_half_the_grace)
{
	const char *flags[] = { "--hang", "rcpt", NULL };
	pid_t dl[4];
	double killed, gone;
	int st;

	rt_setup(&t, 1);
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "  timeout_rcpt = \"60s\"\n");
	rt_policy(&t, "upstream \"isp\" { rate = {\"1 per 10s\"} grace = \"6s\" }\n");
	rt_gate_start(&t, NULL);
	rt_send_start(&t);
	send1("h1@dest.example");
	cr_assert(rt_wait(rt_record_has, &t, "\"stage\": \"rcpt\"", 20000),
	    "the upstream never held an RCPT");
	cr_assert_eq(rt_deliverers(&t, 0, dl, 4), 1, "no session deliverer");
	killed = rt_now();
	rt_send_kill9(&t);
	while (waitpid(dl[0], &st, 0) < 0 && errno == EINTR)
		;
	gone = rt_now();
	cr_assert(WIFEXITED(st), "the deliverer did not exit on its own: 0x%x", st);
	cr_assert(gone - killed <= 3.0 + 5.0, "the deliverer went on %.1f s after weir-send's "
	    "death (grace 6 s: 3 s at most from taking the message)", gone - killed);
	rt_send_start(&t);
	rt_wait_log(&t, "outcome handed on by the deliverer of an earlier weir-send", 1, 10000);
	rt_wait_log(&t, "deferred <h1@dest.example>", 1, 10000);
	rt_say("inflight: left alone, the deliverer stopped %.1f s after weir-send's death",
	    gone - killed);
}

Test(inflight, held_batch_of_a_bigger_message)
{
	const char *flags[] = { "--dataend-delay", "b1@dest.example=3", NULL };
	const char *rcpts[] = { "b1@dest.example", "b2@dest.example", "b3@dest.example" };
	struct rt_rec r;
	size_t i;

	rt_setup(&t, 1);
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "  max_recipients = 1\n");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, NULL);
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, rcpts, 3, "Subject: b\n\nhello\n");
	cr_assert(rt_wait(rt_record_has, &t, "\"delaying\"", 20000),
	    "the first batch never reached its final dot");
	rt_send_kill9(&t);
	rt_send_start(&t);
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	for (i = 0; i < 3; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, rcpts[i]), 1, "<%s> delivered %zu times",
		    rcpts[i], rt_rec_count(&r, SENDER, rcpts[i]));
	cr_assert_eq(r.n, 3, "%zu transactions", r.n);
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
}

Test(inflight, held_batch_after_a_deferred_one)
{
	const char *flags[] = { "--dataend-delay", "b2@dest.example=3",
		"--reply", "rcpt:b1@dest.example=451 4.3.0 busy", NULL };
	const char *rcpts[] = { "b1@dest.example", "b2@dest.example", "b3@dest.example" };
	struct rt_rec r;
	size_t want = 2;
	char *mq;

	rt_setup(&t, 1);
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "  max_recipients = 1\n");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, NULL);
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, rcpts, 3, "Subject: b\n\nhello\n");
	cr_assert(rt_wait(rt_record_has, &t, "\"delaying\"", 20000),
	    "the second batch never reached its final dot");
	rt_send_kill9(&t);
	rt_send_start(&t);
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 20000), "b2 and b3 not delivered");
	rt_wait_log(&t, "delivered to <b3@dest.example>", 1, 10000);
	rt_rec_load(&t, &r);
	cr_assert_eq(rt_rec_count(&r, SENDER, "b2@dest.example"), 1);
	cr_assert_eq(rt_rec_count(&r, SENDER, "b3@dest.example"), 1);
	cr_assert_eq(rt_rec_count(&r, SENDER, "b1@dest.example"), 0);
	mq = rt_mailq(&t);
	cr_assert(strstr(mq, "b1@dest.example") != NULL, "b1 was dropped:\n%s", mq);
	free(mq);
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
}
