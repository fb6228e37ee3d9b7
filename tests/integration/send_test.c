/*
 * send_test.c: weir-send delivers.  Delivery and elimination with the
 * exact argument list and message, then SIGTERM (exit 0); messages
 * queued before start; the trigger (a new message is taken within a
 * second, again and again: no polling); batching by max_recipients (a
 * list of 250 too); the concurrency cap; upstream choice by sender; no
 * upstream; local recipients to the admin; a message without
 * recipients; a control byte in the sender of a stock qmail-queue's
 * todo; messages a stock qmail-queue or qmail-send left; sched/ made if
 * missing; one log line per event; a deep queue sends while it loads,
 * and keeps a sender shared by its messages once.
 *
 * The fixture (tests/lib/send_fixture.h): the real weir-send on a scratch
 * queue, fed by the real sendmail and weir-queue, a real weir-gate with
 * room for everything unless the test says otherwise, and the stand-in
 * deliverer tests/upstream/deliver.py, which logs its arguments and the
 * message it got and answers per recipient by the address.  Waits are
 * for events: the deliverer's calls, files, log lines, and weir-send's
 * "idle" line after the event a check is about (weir-send(8), LOGS).
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
#include "relay_helpers.h"	/* rt_vmrss_kb */
#include "send_fixture.h"

TestSuite(send, .init = sf_setup, .fini = sf_teardown, .timeout = 120);

/* ---- delivery ---- */

Test(send, delivers_and_eliminates)
{
	const char *rcpts[] = { "bob@example.net", "carol@example.com", "dave@example.org", NULL };
	struct buf got = BUF_INIT;
	char *c, *want, *mp;
	int st;

	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_empty(10000);
	cr_assert_eq(sf_ncalls(), 1, "%zu deliverer calls", sf_ncalls());
	c = sf_call(0);
	want = xasprintf("%s\tup1\t127.0.0.1\talice@example.org\t"
	    "bob@example.net,carol@example.com,dave@example.org", sf.s.qt.conf);
	cr_assert_str_eq(c, want);
	/* The deliverer got the queued message on stdin: Received + original. */
	mp = xasprintf("%s/msg.0", sf.s.qt.tmp);
	tl_read(mp, &got);
	cr_assert(got.len > sizeof SF_MSG1 && strncmp(got.s, "Received: (weir ", 16) == 0,
	    "message given: %s", buf_cstr(&got));
	{
		/* sendmail adds Date: and Message-ID:; the rest comes as given. */
		static const char tail[] = "\nFrom: alice@example.org\nSubject: one\n\nhello\n";

		cr_assert(got.len > sizeof tail && memcmp(got.s + got.len - (sizeof tail - 1), tail,
		    sizeof tail - 1) == 0, "message given: %s", buf_cstr(&got));
	}
	/* The line follows the last removal: wait for it. */
	cr_assert(sh_wait_for(sf_log_has, ": end\n", 5000), "no end logged");
	sf_assert_queue_sound();
	/* SIGTERM: exits 0 promptly. */
	kill(sf.d1.pid, SIGTERM);
	{
		int i;

		for (i = 0; i < 500 && !shd_exited(&sf.d1, &st); i++)
			usleep(10000);
		cr_assert_eq(sf.d1.pid, 0, "weir-send still running 5 s after SIGTERM");
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: status 0x%x", st);
	}
	free(c);
	free(want);
	free(mp);
	buf_free(&got);
}

/* Messages already queued when weir-send starts are delivered too. */
Test(send, delivers_what_was_queued_before_start)
{
	const char *r1[] = { "x@example.net", NULL };
	const char *r2[] = { "y@example.net", NULL };

	sf_inject("alice@example.org", r1, SF_MSG1);
	sf_inject("alice@example.org", r2, SF_MSG1);
	sf_start_send(&sf.d1, 0);
	sf_wait_empty(10000);
	cr_assert_eq(sf_ncalls(), 2);
	sf_assert_queue_sound();
}

/*
 * Issue 36: a restart with a deep queue sends while it loads.  300
 * messages in info/ (more than one slice of 256), weir-send run under
 * strace with every openat held 4 ms (about 3 per message: info/, its
 * note, its hold), so loading takes seconds: the first batch is granted
 * and its deliverer started before the last message is loaded ("started
 * on" is logged then).  Before, info/ was read whole first: "started on"
 * came before any delivery, and a queue of 100,000 held the first send
 * back 2 s.  Every message is loaded all the same: those still queued
 * then, and those already ended, make the 300.
 */
Test(send, sends_while_loading_a_deep_queue)
{
	enum { N = 300 };
	const char *wrap[] = { "strace", "-o", "/dev/null", "-e", "trace=openat", "-e",
		"inject=openat:delay_enter=4000", NULL };
	const char *env[] = { sf.env_remote, sf.env_qq, sf.env_conf, NULL };
	char rc[64], *log, *start, *first;
	unsigned long nq;
	size_t i, ended = 0;
	int n;

	if (system("strace -o /dev/null true >/dev/null 2>&1") != 0)
		cr_skip_test("strace cannot trace here (ptrace refused?)");
	for (i = 0; i < N; i++) {
		n = snprintf(rc, sizeof rc, "Tm%zu@example.net", i);
		sf_aged_s5("alice@example.org", rc, (size_t)n + 1, 0);
	}
	sf.d1.wrap = wrap;
	shd_start(&sf.d1, &sf.s, env);	/* sf_start_send's wait is too short here */
	cr_assert(sh_wait_for(sf_log_has, ": started on ", 60000), "%s", sf_send_log(&sf.d1));
	log = sf_send_log(&sf.d1);
	start = strstr(log, ": started on ");
	first = strstr(log, ": delivering to ");
	cr_assert(first && first < start, "no delivery before the last message was loaded:\n%s", log);
	cr_assert(sscanf(strstr(start, "queue: ") + 7, "%lu messages queued", &nq) == 1, "%s", start);
	for (first = log; (first = strstr(first, ": end\n")) != NULL && first < start; first++)
		ended++;
	cr_assert_eq(nq + ended, N, "%lu queued and %zu ended at the start's end:\n%s", nq, ended,
	    log);
	free(log);
}

/*
 * Issue 36: a list post's messages share their sender, and weir-send
 * keeps it once.  20,000 messages from one 900-byte address, held at the
 * gate (one may go per hour): weir-send's memory grows by under 600 bytes
 * a message (about 330 now: the message's own record).  Each kept its
 * own copy before, over 1,200 bytes a message with this sender.
 */
Test(send, one_sender_kept_once)
{
	enum { N = 20000 };
	char *sender = xmalloc(1024), rc[64];
	long rss0, rss1;
	size_t i;
	int n;

	memset(sender, 'l', 888);
	strcpy(sender + 888, "@example.org");
	sf_policy("upstream \"up1\" { rate = \"1 per 1h\" }\n");
	sf_start_send(&sf.d1, 0);
	sf_wait_idle("started on", 1, SF_QUIET, 5000);
	rss0 = rt_vmrss_kb(sf.d1.pid);
	shd_stop(&sf.d1);
	for (i = 0; i < N; i++) {
		n = snprintf(rc, sizeof rc, "Tm%zu@example.net", i);
		sf_aged_s5(sender, rc, (size_t)n + 1, 0);
	}
	sf_start_send(&sf.d1, 0);
	cr_assert(sh_wait_for(sf_log_has, ": started on ", 60000), "%s", sf_send_log(&sf.d1));
	rss1 = rt_vmrss_kb(sf.d1.pid);
	cr_assert(rss0 > 0 && rss1 > 0, "VmRSS %ld and %ld kB", rss0, rss1);
	cr_assert((rss1 - rss0) * 1024 / N < 600, "weir-send grew by %ld bytes a message (%ld to "
	    "%ld kB for %d messages)", (rss1 - rss0) * 1024 / N, rss0, rss1, N);
	free(sender);
}

static long long
ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000LL + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* No polling: the trigger wakes weir-send at once, every time. */
Test(send, trigger_wakes_within_a_second)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	struct timespec t0;
	size_t i;

	sf_start_send(&sf.d1, 0);
	sf_wait_idle("started on", 1, SF_QUIET, 5000);	/* nothing to do, nothing running */
	for (i = 0; i < 4; i++) {
		long long ms;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		sf_inject("alice@example.org", rcpts, SF_MSG1);
		cr_assert(sh_wait_for(sf_todo_empty, NULL, 1000),
		    "message %zu still in todo/ 1 s after injection:\n%s", i, sf_send_log(&sf.d1));
		sf_wait_calls(i + 1, 2000);
		ms = ms_since(&t0);
		cr_assert(ms < 2000, "message %zu: %lld ms to the deliverer", i, ms);
		sf_wait_empty(5000);
		sf_wait_idle(": end\n", i + 1, SF_QUIET, 5000);
	}
}

Test(send, batches_by_max_recipients)
{
	const char *rcpts[] = { "r1@example.net", "r2@example.net", "r3@example.net",
		"r4@example.net", "r5@example.net", NULL };
	char *e0, *e1, *e2;

	sf_teardown();
	sf_setup_with("upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  max_recipients = 2\n}\n");
	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_empty(10000);
	cr_assert_eq(sf_ncalls(), 3, "%zu calls", sf_ncalls());
	e0 = sf_call_env(0);
	e1 = sf_call_env(1);
	e2 = sf_call_env(2);
	cr_assert_str_eq(e0, "alice@example.org\tr1@example.net,r2@example.net");
	cr_assert_str_eq(e1, "alice@example.org\tr3@example.net,r4@example.net");
	cr_assert_str_eq(e2, "alice@example.org\tr5@example.net");
	free(e0);
	free(e1);
	free(e2);
	sf_assert_queue_sound();
}

/* 250 recipients, max_recipients 100: three transactions, in order. */
Test(send, batches_many)
{
	struct buf env = BUF_INIT, want = BUF_INIT;
	char a[32];
	size_t i, k;

	sf_teardown();
	sf_setup_with("upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  max_recipients = 100\n}\n");
	qt_env_start(&env, "list@example.org");
	for (i = 0; i < 250; i++) {
		snprintf(a, sizeof a, "r%03zu@example.net", i);
		qt_env_rcpt(&env, a);
	}
	qt_env_end(&env);
	sf_start_send(&sf.d1, 0);
	sf_inject_raw(env.s, env.len, SF_MSG1);
	sf_wait_calls(3, 10000);
	sf_wait_empty(5000);
	cr_assert_eq(sf_ncalls(), 3);
	for (k = 0; k < 3; k++) {
		char *e = sf_call_env(k);

		buf_reset(&want);
		buf_adds(&want, "list@example.org\t");
		for (i = k * 100; i < 250 && i < (k + 1) * 100; i++)
			buf_printf(&want, "%sr%03zu@example.net", i == k * 100 ? "" : ",", i);
		cr_assert_str_eq(e, buf_cstr(&want), "call %zu", k);
		free(e);
	}
	buf_free(&env);
	buf_free(&want);
}

Test(send, local_recipients_go_to_admin)
{
	const char *rcpts[] = { "root", "ops@" SH_HOST, "bob@example.net", NULL };
	char *e;

	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_empty(10000);
	e = sf_call_env(0);
	cr_assert_str_eq(e, "alice@example.org\t" SH_ADMIN "," SH_ADMIN ",bob@example.net");
	free(e);
}

/* ---- upstream choice ---- */

/* The first upstream whose senders match, else the first without senders. */
Test(send, upstream_by_sender)
{
	const char *r1[] = { "x@example.net", NULL };
	char *c0, *c1, *w0, *w1;

	sf_teardown();
	sf_setup_with("upstream \"lists\" {\n  host = \"127.0.0.3\"\n  port = 2525\n  tls = \"none\"\n"
	    "  senders = {\"*@lists.example.org\"}\n}\n"
	    "upstream \"main\" {\n  host = \"127.0.0.2\"\n  port = 2525\n  tls = \"none\"\n}\n");
	sf_start_send(&sf.d1, 0);
	sf_inject("owner@lists.example.org", r1, SF_MSG1);
	sf_wait_calls(1, 5000);
	sf_inject("alice@example.org", r1, SF_MSG1);
	sf_wait_calls(2, 5000);
	sf_wait_empty(5000);
	c0 = sf_call(0);
	c1 = sf_call(1);
	w0 = xasprintf("%s\tlists\t127.0.0.3\towner@lists.example.org\tx@example.net", sf.s.qt.conf);
	w1 = xasprintf("%s\tmain\t127.0.0.2\talice@example.org\tx@example.net", sf.s.qt.conf);
	cr_assert_str_eq(c0, w0);
	cr_assert_str_eq(c1, w1);
	free(c0);
	free(c1);
	free(w0);
	free(w1);
}

/* No upstream for the sender: the message stays queued, nothing runs. */
Test(send, no_upstream_stays_queued)
{
	const char *r1[] = { "x@example.net", NULL };
	unsigned long id;

	sf_teardown();
	sf_setup_with("upstream \"lists\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  senders = {\"*@lists.example.org\"}\n}\n");
	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", r1, SF_MSG1);
	sf_wait_idle("no upstream", 1, SF_QUIET, 5000);
	cr_assert_eq(sf_ncalls(), 0);
	id = sf_only_info();
	sh_assert_file(&sf.s, Q_REMOTE, id, S("Tx@example.net\0"));
	cr_assert(!sh_exists(&sf.s, Q_BOUNCE, id));
	sf_assert_queue_sound();
}

/* A message without recipients (a stock qmail-queue takes one; weir-queue
 * does not) just leaves the queue, without a deliverer. */
Test(send, zero_recipients_eliminated)
{
	static const char mess[] = "Received: (qmail 5 invoked by uid 0); 21 Nov 2026 10:00:00 -0000\n"
	    "Subject: nobody\n\nx\n";

	sh_put_s4(&sf.s, S(mess), S("u0\0p5\0Fa@example.org\0"), 1);
	sf_start_send(&sf.d1, 0);
	sf_wait_empty(5000);
	cr_assert_eq(sf_ncalls(), 0);
}

/* ---- concurrency ---- */

/* At most `concurrency` (2) deliverers at once, and that many used. */
Test(send, concurrency_limit)
{
	char *hang = xasprintf("%s/hang", sf.s.qt.tmp);
	char *cl = xasprintf("%s/conc.log", sf.s.qt.tmp);
	struct buf b = BUF_INIT;
	size_t n = 6;
	int max;

	sf_inject_numbered(n);
	tl_write(hang, "0.3", 3);
	sf_start_send(&sf.d1, 0);
	sf_wait_empty(15000);
	tl_read(cl, &b);
	max = sf_max_at_once(&b);
	cr_assert_eq(max, 2, "%d deliverers at once, concurrency = 2:\n%s", max, buf_cstr(&b));
	sf_assert_all_delivered(n);
	buf_free(&b);
	free(hang);
	free(cl);
}

/* ---- addresses a stock qmail-queue lets through ---- */

/* A sender with a control byte (weir-queue refuses it, qmail-queue does
 * not): the todo file is left for the admin, nothing is sent, and
 * weir-send carries on with the other messages.  (A recipient with one
 * is bounced and the others delivered: takeover_test.c.) */
Test(send, control_byte_sender_left_in_todo)
{
	static const char todo[] = "u1000\0p77\0Fa\r\nRCPT TO:<x@y>@example.org\0"
	    "Tok@example.net\0";
	static const char mess[] = "Received: (qmail 77 invoked by uid 1000); 21 Nov 2026 10:00:00 -0000\n"
	    "Subject: evil\n\nx\n";
	const char *rcpts[] = { "bob@example.net", NULL };
	unsigned long id = sh_put_s4(&sf.s, S(mess), S(todo), 1);

	sf_start_send(&sf.d1, 0);
	cr_assert(sh_wait_for(sf_log_has, "left for the admin", 5000), "%s", sf_send_log(&sf.d1));
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(1, 5000);
	sf_wait_idle(": end\n", 1, SF_QUIET, 5000);
	cr_assert_eq(sf_ncalls(), 1, "%zu calls", sf_ncalls());
	{
		char *e = sf_call_env(0);

		cr_assert_str_eq(e, "alice@example.org\tbob@example.net");
		free(e);
	}
	sh_assert_file(&sf.s, Q_TODO, id, S(todo));
	sh_assert_file(&sf.s, Q_MESS, id, S(mess));
	cr_assert(!sh_exists(&sf.s, Q_INFO, id));
	cr_assert(!sh_exists(&sf.s, Q_REMOTE, id));
}

/* ---- taking over a queue written by qmail ---- */

static const char qmail_mess[] =
    "Received: (qmail 4242 invoked by uid 1000); 21 Nov 2026 10:00:00 -0000\n"
    "From: someone@example.org\nSubject: from qmail\n\nhello\r\nbinary \x01\xff\n";

/* S4 as a stock qmail-queue leaves it: delivered with exactly its bytes. */
Test(send, stock_qmail_queue_message_delivered)
{
	static const char todo[] = "u1000\0p4242\0Fsomeone@example.org\0Tx@example.net\0Troot\0";
	struct buf got = BUF_INIT;
	char *e0, *mp;

	sh_put_s4(&sf.s, S(qmail_mess), S(todo), 1);
	sf_start_send(&sf.d1, 0);
	sf_wait_empty(5000);
	cr_assert_eq(sf_ncalls(), 1);
	e0 = sf_call_env(0);
	cr_assert_str_eq(e0, "someone@example.org\tx@example.net," SH_ADMIN);
	mp = xasprintf("%s/msg.0", sf.s.qt.tmp);
	tl_read(mp, &got);
	sh_assert_bytes(got.s, got.len, S(qmail_mess), "the message on the deliverer's stdin");
	sf_assert_queue_sound();
	free(e0);
	free(mp);
	buf_free(&got);
}

/* S5 as a stock qmail-send leaves it: some recipients done, a bounce
 * note in qmail's format.  Only the not-done one is sent; the note
 * becomes a DSN to the sender. */
Test(send, stock_qmail_send_s5_taken_over)
{
	static const char notes[] = "<gone@example.net>:\n"
	    "Remote host said: 550 5.1.1 user unknown\n\n";
	unsigned long id = sh_put_mess(&sf.s, S(qmail_mess));
	struct buf b = BUF_INIT;
	char *e0, *e1, *mp;

	sh_write(&sf.s, Q_INFO, id, S("Fsomeone@example.org\0"));
	sh_write(&sf.s, Q_REMOTE, id, S("Ddone@example.net\0Tleft@example.net\0Dgone@example.net\0"));
	sh_write(&sf.s, Q_BOUNCE, id, S(notes));
	sf_start_send(&sf.d1, 0);
	sf_wait_calls(2, 5000);
	sf_wait_empty(5000);
	cr_assert_eq(sf_ncalls(), 2);
	e0 = sf_call_env(0);
	e1 = sf_call_env(1);
	cr_assert_str_eq(e0, "someone@example.org\tleft@example.net");
	cr_assert_str_eq(e1, "\tsomeone@example.org");
	mp = xasprintf("%s/msg.1", sf.s.qt.tmp);
	tl_read(mp, &b);
	cr_assert(strstr(buf_cstr(&b), "\nFinal-Recipient: rfc822; gone@example.net\nAction: failed\n"
	    "Status: 5.1.1\n"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "\nSubject: from qmail\n"), "%s", buf_cstr(&b));
	free(e0);
	free(e1);
	free(mp);
	buf_free(&b);
}

/* ---- the log ---- */

/* log.c: one line per event, "prog: level: text".  The upstream's reply
 * (several lines, any bytes) must not make more lines, or forge them. */
Test(send, log_one_line_per_event)
{
	const char *rcpts[] = { "good@example.net", "bad@example.net", "slow@example.net", NULL };
	char *l, *p, *line;

	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_idle("deferred <slow@example.net>", 1, SF_QUIET, 5000);
	l = sf_send_log(&sf.d1);
	for (p = l; *p; p = strchr(p, '\n') + 1) {
		line = xstrndup(p, (size_t)(strchr(p, '\n') - p));
		cr_assert(strstr(line, " weir-send[") || strncmp(line, "weir-queue: ", 12) == 0,
		    "log line \"%s\" is not an event line; the log:\n%s", line, l);
		free(line);
	}
	free(l);
}

/* A queue without sched/ (taken over from a stock qmail): queue-check
 * says it is missing; weir-send makes it (it may here) and works. */
Test(send, sched_dir_made_if_missing)
{
	char *p = xasprintf("%s/sched", sf.s.qt.qdir);
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf out = BUF_INIT;
	struct stat st;

	tl_rmtree(p);
	cr_assert_neq(sh_queue_check(&sf.s, &out), 0, "queue-check passed without sched/");
	cr_assert(strstr(buf_cstr(&out), "sched"), "%s", buf_cstr(&out));
	sf_start_send(&sf.d1, 0);
	cr_assert(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700,
	    "sched/ not made");
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_empty(5000);
	sf_assert_queue_sound();
	buf_free(&out);
	free(p);
}
