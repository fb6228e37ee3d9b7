/*
 * session_test.c: kept sessions to the upstream (issue 16): weir-send
 * hands message after message to one `weir-remote -S` per connection,
 * each with its own grant of weir-gate, the session holding one
 * connection slot.  Real parts only, as in relay_test.c: weir-gate,
 * weir-send, weir-remote, sendmail, and tests/upstream/upstream.py, whose
 * record numbers each connection ("connect" events, "conn" of each
 * event), so the counts below are the upstream's own.
 *
 *   hundred_over_few_sessions
 *                       100 messages, concurrency 4, max_connections = 3:
 *                       at most 3 connections and 3 AUTHs at the upstream,
 *                       each message exactly once, each with its own grant
 *                       (the gate's "sent" total), the window held at the
 *                       upstream's clock
 *   kill9_mid_data_of_fifth
 *                       one session (weir status lists it, with the
 *                       messages it carried); the deliverer killed while the
 *                       upstream holds the 5th message's final dot:
 *                       messages 1-4 once, the 5th at most twice, the
 *                       rest once, queue sound
 *   upstream_closes_idle_session
 *                       the upstream closes the session while it is idle
 *                       (421 idle timeout): the next message goes on a
 *                       new session at once, not at the next retry
 *   refused_recipient_keeps_session
 *                       a 550 to one recipient of one message: that
 *                       recipient bounces, the session goes on (RSET) and
 *                       carries the others
 *   reply_421_mid_session
 *                       a 421 to one message's RCPT in mid-session: the
 *                       session ends, the upstream is suspended, nothing
 *                       bounces; after the suspension the rest goes on a
 *                       new session, each message once
 *   timeout_after_data  the upstream never answers one message's final
 *                       dot: weir-remote gives up after timeout_data_end,
 *                       the session ends, the message is kept (counted
 *                       unknown at the gate) and sent once the upstream
 *                       answers again
 *   tls_session_resumed
 *                       the second session's TLS handshake resumes the
 *                       first one's session (weir-remote says so at
 *                       log_level verbose), verified as strictly
 *   single_message_sessions_when_off
 *                       session_idle = 0: one connection per message, as
 *                       before
 *   messages_per_connection_held
 *                       messages_per_connection = 3, 90 messages over 3
 *                       sessions: no connection carries a 4th message (the
 *                       upstream's record), each message once
 *
 * Ports are picked by the kernel, loopback only; every process is killed
 * at the end, even on failure (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_helpers.h"

#define SENDER "alice@src.example"

static struct rt t;

static void
teardown(void)
{
	rt_teardown(&t);
}

TestSuite(session, .fini = teardown, .timeout = 120);

static void
start_all(unsigned concurrency, const char *const *flags, const char *upconf,
    const char *policy)
{
	rt_setup(&t, concurrency);
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, upconf);
	rt_policy(&t, policy);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
}

static void
send1(const char *rcpt, const char *msg)
{
	const char *r[] = { rcpt };

	rt_sendmail(&t, SENDER, r, 1, msg);
}

/* The gate's "sent N" total reached *arg. */
static int
gate_sent(struct rt *rt, void *arg)
{
	char *st = rt_gate_status(rt), *p = strstr(st, " sent ");
	unsigned long n = p ? strtoul(p + 6, NULL, 10) : 0;

	free(st);
	return n >= *(unsigned long *)arg;
}

static char *last_status;

/* `weir status` lists one session of isp, and what (arg). */
static int
status_lists(struct rt *rt, void *arg)
{
	struct tl_result st = rt_run(rt, "weir", (const char *const[]){ "status" }, 1, NULL);
	const char *out = buf_cstr(&st.out);
	int yes = strstr(out, "sessions with the upstreams (weir-send):\n  upstream isp: pid ") &&
	    strstr(out, arg);

	free(last_status);
	last_status = xstrdup(out);
	tl_result_free(&st);
	return yes;
}

/* The connections that carried data events, each counted once. */
static size_t
data_conns(const struct rt_rec *r)
{
	size_t i, k, n = 0;

	for (i = 0; i < r->n; i++) {
		for (k = 0; k < i && r->v[k].conn != r->v[i].conn; k++)
			;
		n += k == i;
	}
	return n;
}

Test(session, hundred_over_few_sessions)
{
	enum { N = 100 };
	char **to = rt_addrs("h", "dest.example", 1, N);
	unsigned long want = N;
	struct rt_rec r;
	char *st;
	size_t i;

	start_all(4, NULL, NULL,
	    "upstream \"isp\" { rate = {\"40 per 2s\"} max_connections = 3 }\n");
	for (i = 0; i < N; i++)
		send1(to[i], "Subject: h\n\nhello\n");
	rt_wait_empty(&t, 60000);
	cr_assert(rt_wait(gate_sent, &t, &want, 10000), "the gate did not count 100 sends");
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1, "<%s> delivered %zu times",
		    to[i], rt_rec_count(&r, SENDER, to[i]));
	cr_assert_eq(r.n, N, "%zu transactions for %d messages", r.n, N);
	cr_assert(r.nconnect >= 1 && r.nconnect <= 3, "%zu connections, max_connections = 3",
	    r.nconnect);
	cr_assert_eq(r.nauth, r.nconnect, "%zu AUTHs over %zu connections", r.nauth,
	    r.nconnect);
	cr_assert(data_conns(&r) <= 3);
	rt_assert_window(&r, 40, 2.0);
	st = rt_gate_status(&t);
	/* Each message its own grant, reported sent; each session's slot
	 * given back as a connection that carried no mail of its own. */
	cr_assert(strstr(st, "sent 100,"), "gate status:\n%s", st);
	free(st);
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}

/* messages_per_connection at the upstream: a session that has carried
 * its 3 takes no 4th, even when a job is ready in the instant between
 * its "ready" and its end.  (One connection in four runs of
 * oauth/three_hundred_through_sessions carried 5 under a cap of 4.) */
Test(session, messages_per_connection_held)
{
	enum { N = 90, CAP = 3 };
	char **to = rt_addrs("c", "dest.example", 1, N);
	struct rt_rec r;
	size_t i, k, most = 0;

	start_all(3, NULL, NULL, "upstream \"isp\" { rate = {\"100 per 1s\"} max_connections = 3 "
	    "messages_per_connection = 3 }\n");
	for (i = 0; i < N; i++)
		send1(to[i], "Subject: c\n\nhello\n");
	rt_wait_empty(&t, 90000);
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1, "<%s> delivered %zu times",
		    to[i], rt_rec_count(&r, SENDER, to[i]));
	for (i = 0; i < r.n; i++) {
		size_t n = 0;

		for (k = 0; k < r.n; k++)
			n += r.v[k].conn == r.v[i].conn;
		if (n > most)
			most = n;
	}
	cr_assert_leq(most, CAP, "a connection carried %zu messages, messages_per_connection = %d",
	    most, CAP);
	cr_assert_geq(r.nconnect, N / CAP, "%zu connections for %d messages", r.nconnect, N);
	rt_say("messages_per_connection %d: %zu connections, at most %zu messages on one", CAP,
	    r.nconnect, most);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}

Test(session, kill9_mid_data_of_fifth)
{
	enum { N = 8 };
	char **to = rt_addrs("k", "dest.example", 1, N);
	const char *flags[] = { "--dataend-delay", "k5@dest.example=4", NULL };
	struct rt_rec r;
	size_t i, want, n5;
	pid_t dl[4];

	start_all(1, flags, NULL, "upstream \"isp\" { rate = {\"100 per 1s\"} }\n");
	/* Messages 1-4, one after the other, over the one session. */
	for (i = 0; i < 4; i++) {
		send1(to[i], "Subject: k\n\nhello\n");
		want = i + 1;
		cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 20000), "message %zu not sent", i + 1);
	}
	/* weir status lists the session and what it carried (weir-send
	 * writes that list at most once a second). */
	cr_assert(rt_wait(status_lists, &t, ", 4 messages\n", 10000), "weir status:\n%s",
	    last_status);
	free(last_status);
	last_status = NULL;
	for (i = 4; i < N; i++)
		send1(to[i], "Subject: k\n\nhello\n");
	/* The upstream holds the 5th's final dot: kill the deliverer. */
	cr_assert(rt_wait(rt_record_has, &t, "\"delaying\"", 20000),
	    "the 5th message never reached its final dot");
	cr_assert(rt_deliverers(&t, SIGKILL, dl, 4) == 1, "no session deliverer to kill");
	rt_wait_log(&t, "the deliverer crashed", 1, 20000);
	rt_flush_until_empty(&t, 60000);
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++) {
		size_t c = rt_rec_count(&r, SENDER, to[i]);

		if (i == 4)
			cr_assert(c >= 1 && c <= 2, "the 5th delivered %zu times", c);
		else
			cr_assert_eq(c, 1, "<%s> delivered %zu times", to[i], c);
	}
	/* 1-4 went over one connection and one AUTH. */
	for (i = 1, n5 = 0; i < 4; i++)
		n5 += r.v[i].conn != r.v[0].conn;
	cr_assert_eq(n5, 0, "messages 1-4 were not on one session");
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}

Test(session, upstream_closes_idle_session)
{
	const char *flags[] = { "--idle-close", "0.5", NULL };
	struct rt_rec r;
	size_t want = 1;
	int closed = 0, k;

	start_all(1, flags, NULL, "upstream \"isp\" { rate = {\"100 per 1s\"} }\n");
	send1("i1@dest.example", "Subject: i\n\none\n");
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 20000));
	for (k = 0; k < 500 && !closed; k++) {
		rt_rec_load(&t, &r);
		closed = r.nidle_close > 0;
		rt_rec_free(&r);
		if (!closed)
			usleep(10000);
	}
	cr_assert(closed, "the upstream never closed the idle session");
	send1("i2@dest.example", "Subject: i\n\ntwo\n");
	/* At once on a new session: no flush, well before any retry. */
	rt_wait_empty(&t, 20000);
	rt_rec_load(&t, &r);
	cr_assert_eq(rt_rec_count(&r, SENDER, "i2@dest.example"), 1);
	cr_assert_eq(r.nconnect, 2, "%zu connections", r.nconnect);
	cr_assert_neq(r.v[0].conn, r.v[1].conn);
	rt_assert_no_bounce(&t, &r);
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
}

Test(session, refused_recipient_keeps_session)
{
	enum { N = 6 };
	char **to = rt_addrs("r", "dest.example", 1, N);
	const char *flags[] = { "--reply", "rcpt:r3@dest.example=550 5.1.1 no such user",
		NULL };
	struct rt_rec r;
	size_t i, want;

	start_all(1, flags, NULL, "upstream \"isp\" { rate = {\"100 per 1s\"} }\n");
	for (i = 0; i < N; i++) {
		send1(to[i], "Subject: r\n\nhello\n");
		/* One at a time, so each goes over the one session in turn. */
		want = i < 2 ? i + 1 : i;
		if (i != 2)
			cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 20000), "message %zu", i + 1);
		else
			rt_wait_log(&t, "bounced <r3@dest.example>", 1, 20000);
	}
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++)
		if (i != 2)
			cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1, "<%s>", to[i]);
	cr_assert_eq(rt_rec_count(&r, SENDER, "r3@dest.example"), 0);
	cr_assert_eq(r.nconnect, 1, "%zu connections: the refusal ended the session",
	    r.nconnect);
	cr_assert(r.nrset >= 1, "no RSET after the refused transaction");
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}

Test(session, single_message_sessions_when_off)
{
	enum { N = 5 };
	char **to = rt_addrs("o", "dest.example", 1, N);
	struct rt_rec r;
	size_t i;

	start_all(2, NULL, "  session_idle = \"0s\"\n", "upstream \"isp\" { rate = {\"100 per 1s\"} }\n");
	for (i = 0; i < N; i++)
		send1(to[i], "Subject: o\n\nhello\n");
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, N);
	cr_assert_eq(r.nconnect, N, "%zu connections for %d messages", r.nconnect, N);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}

Test(session, tls_session_resumed)
{
	struct rt_rec r;
	size_t want = 1;

	rt_setup(&t, 1);
	sh_conf_append(&t.s, "log_level = \"verbose\"\n");
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, "  session_idle = \"1s\"\n");
	rt_policy(&t, "upstream \"isp\" { rate = {\"100 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	send1("t1@dest.example", "Subject: t\n\none\n");
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 20000));
	rt_wait_log(&t, "ending after 1 message: idle", 1, 20000);
	send1("t2@dest.example", "Subject: t\n\ntwo\n");
	rt_wait_empty(&t, 20000);
	rt_rec_load(&t, &r);
	cr_assert_eq(r.nconnect, 2, "%zu connections", r.nconnect);
	cr_assert_eq(r.n, 2);
	cr_assert_eq(rt_log_count(&t, "TLS established: "), 2);
	cr_assert_eq(rt_log_count(&t, " (resumed)"), 1, "the second handshake did not resume:\n%s",
	    rt_send_logs_tail(&t, 6000));
	rt_rec_free(&r);
}

/* Messages to[from..to) one after the other, each accepted before the
 * next is queued (so the one session carries them in that order). */
static void
send_in_turn(char **to, size_t from, size_t upto)
{
	size_t i, want;

	for (i = from; i < upto; i++) {
		send1(to[i], "Subject: s\n\nhello\n");
		want = i + 1;
		cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 20000), "<%s> not sent", to[i]);
	}
}

Test(session, reply_421_mid_session)
{
	enum { N = 5 };
	char **to = rt_addrs("m", "dest.example", 1, N);
	const char *flags[] = { "--reply", "rcpt:m3@dest.example=421 4.7.0 try again later",
		NULL };
	unsigned port;
	struct rt_rec r;
	char *st;
	size_t i;

	start_all(1, flags, NULL, "upstream \"isp\" { rate = {\"100 per 1s\"} }\n"
	    "throttle_reply { pattern = \"421 *\" suspend = \"3s\" }\n");
	port = t.port;
	send_in_turn(to, 0, 2);
	send1(to[2], "Subject: s\n\nhello\n");
	rt_wait_log(&t, "the upstream is throttling us", 1, 20000);
	st = rt_gate_status(&t);
	cr_assert(strstr(st, "suspended"), "gate status:\n%s", st);
	free(st);
	/* The provider recovers; the suspension ends on its own. */
	rt_upstream_stop(&t);
	rt_upstream_start(&t, "good", NULL, port);
	for (i = 3; i < N; i++)
		send1(to[i], "Subject: s\n\nhello\n");
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1, "<%s> delivered %zu times", to[i],
		    rt_rec_count(&r, SENDER, to[i]));
	/* The 421 ended the session (the deliverer said so), after m1, m2
	 * and m3 on it; the rest came on a new one. */
	cr_assert_eq(rt_log_count(&t, ": ending after 3 messages: the deliverer closed it"), 1,
	    "%s", rt_send_logs_tail(&t, 6000));
	rt_assert_no_bounce(&t, &r);
	rt_assert_window(&r, 100, 1.0);
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}

Test(session, timeout_after_data)
{
	enum { N = 3 };
	char **to = rt_addrs("d", "dest.example", 1, N);
	const char *flags[] = { "--hang", "dataend", NULL };
	unsigned port;
	struct rt_rec r;
	size_t i;

	start_all(1, NULL, "  timeout_data_end = \"2s\"\n",
	    "upstream \"isp\" { rate = {\"100 per 1s\"} }\n");
	port = t.port;
	send_in_turn(to, 0, 1);
	/* The same port, now never answering the final dot. */
	rt_upstream_stop(&t);
	rt_upstream_start(&t, "good", flags, port);
	send1(to[1], "Subject: s\n\nhello\n");
	rt_wait_log(&t, "may be delivered twice", 1, 30000);
	rt_wait_log(&t, ": ending after 2 messages: the deliverer closed it", 1, 10000);
	rt_upstream_stop(&t);
	rt_upstream_start(&t, "good", NULL, port);
	send1(to[2], "Subject: s\n\nhello\n");
	rt_flush_until_empty(&t, 60000);
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1, "<%s> delivered %zu times", to[i],
		    rt_rec_count(&r, SENDER, to[i]));
	rt_assert_no_bounce(&t, &r);
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
}
