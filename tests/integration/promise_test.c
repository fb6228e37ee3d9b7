/*
 * promise_test.c: what weir-gate promises (weir-gate(8), "What the gate
 * promises"; issue 12), end to end, measured at the stand-in upstream's
 * own clock (its record), with weir-gate's defaults (no -g), as
 * `weir run` and the package run it:
 *   - a weir-send killed after the final dot, the upstream taking 8 s to
 *     answer it: the send counts until death + grace, so the next one
 *     never lands inside the window of the first;
 *   - a second `weir run` and a second weir-gate refuse to start while
 *     the first live, naming the holder; after a kill -9 of `weir run`
 *     its daemons go by themselves, and the old gate's sends are in the
 *     journal afterwards.
 * Every process started here dies with the test (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "mail/gateclient.h"
#include "relay_helpers.h"

#define SENDER "alice@src.example"

static struct rt t;

static void
setup(void)
{
	rt_setup(&t, 1);
}

static void
teardown(void)
{
	rt_teardown(&t);
}

TestSuite(promise, .init = setup, .fini = teardown, .timeout = 120);

/* The upstream has begun to take its time over the final dot. */
static int
delaying(struct rt *rt, void *arg)
{
	struct buf b = BUF_INIT;
	int yes;

	(void)arg;
	if (read_file_at(AT_FDCWD, rt->record, &b, 1 << 22) < 0) {
		buf_free(&b);
		return 0;
	}
	yes = b.s && strstr(b.s, "\"event\": \"delaying\"") != NULL;
	buf_free(&b);
	return yes;
}

/* "1 per 10s"; the first message's final dot takes the upstream 8 s;
 * weir-send (and with it weir-remote) is killed right after the dot.
 * Before: the gate counted the dropped grant 5 s after the kill, granted
 * the next at kill + 15 s, and the upstream accepted two messages 7 s
 * apart.  Now the send counts as accepted at any instant until the kill
 * + 10 min: nothing more reaches the upstream in the 20 s watched, and
 * the gate's status says when the next grant is due. */
Test(promise, dead_sender_slow_final_dot)
{
	const char *flags[] = { "--dataend-delay", "slow@dst.example=8", NULL };
	const char *slow[] = { "slow@dst.example" }, *fast[] = { "fast@dst.example" };
	struct rt_rec r;
	size_t one = 1, two = 2;
	char *st;
	double t0;

	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = \"1 per 10s\" }\n");
	rt_gate_start(&t, NULL);
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, slow, 1, "Subject: slow\n\nfirst\n");
	cr_assert(rt_wait(delaying, &t, NULL, 30000), "the final dot never reached the upstream");
	rt_send_kill9(&t);
	t0 = rt_now();
	rt_sendmail(&t, SENDER, fast, 1, "Subject: fast\n\nsecond\n");
	rt_send_start(&t);
	cr_assert(rt_wait(rt_ndata_at_least, &t, &one, 20000), "the slow message was never accepted");
	/* The old gate let the next one through at ~t0 + 15 s. */
	(void)rt_wait(rt_ndata_at_least, &t, &two, (int)((t0 + 25 - rt_now()) * 1000));
	rt_rec_load(&t, &r);
	rt_say("dead sender, slow final dot: %zu accepted in 25 s after the kill", r.n);
	rt_assert_window(&r, 1, 10.0);
	rt_rec_free(&r);
	/* Dropped with weir-send: the message's grant and its session's
	 * connection slot, both counted as possibly used. */
	st = rt_gate_status(&t);
	cr_assert(strstr(st, "unknown 2") != NULL, "%s", st);
	free(st);
}

/* One grant for "isp" within ms, then reported sent: 1, else 0. */
static int
send_once(struct gate_client *gc, uint32_t tag, int ms)
{
	struct pollfd pf = { gc->fd, POLLIN, 0 };
	struct gp_reply r;
	const char *why = "";

	cr_assert_eq(gc_acquire(gc, tag, "isp", NULL, NULL, 1, 1, 1), 0);
	if (poll(&pf, 1, ms) != 1)
		return 0;
	cr_assert_eq(gc_wait_reply(gc, &r, &why), 1, "%s", why);
	cr_assert(r.verb == GP_R_GRANT && r.tag == tag, "%d %s", (int)r.verb, r.text);
	cr_assert_eq(gc_report_sent(gc, tag, 1, -1), 0);
	cr_assert_eq(gc_wait_reply(gc, &r, &why), 1, "%s", why);
	cr_assert_eq(r.verb, GP_R_OK);
	return 1;
}

/* The pid that `weir run` logged for prog ("started weir-gate, pid N"). */
static long
started_pid(const char *log, const char *prog)
{
	struct buf b = BUF_INIT;
	char *want = xasprintf("started %s, pid ", prog);
	const char *p;
	long pid = 0;
	int i;

	for (i = 0; i < 500 && pid == 0; i++) {
		buf_reset(&b);
		if (read_file_at(AT_FDCWD, log, &b, 1 << 20) == 0 && b.s &&
		    (p = strstr(b.s, want)) != NULL && strchr(p, '\n'))
			pid = atol(p + strlen(want));
		else
			poll(NULL, 0, 20);
	}
	cr_assert(pid > 0, "no \"%s\" in %s", want, buf_cstr(&b));
	buf_free(&b);
	free(want);
	return pid;
}

/* Issue 12 item 4.  Before: the second `weir run` started, its gate
 * replayed and compacted the journal (renaming over it) before finding
 * the socket taken, and the old gate went on writing to a deleted file.
 * Issue 22 item 2: the daemons of a `weir run` killed -9 no longer live
 * on (supervise_test.c has the second `weir run` that waits for them). */
Test(promise, one_run_one_gate_per_queue)
{
	char *bin = tl_bin("weir"), *gbin = tl_bin("weir-gate");
	char *log = xasprintf("%s/run.log", t.s.qt.tmp);
	const char *rargv[] = { bin, "-c", t.s.qt.conf, "run", NULL };
	const char *gargv[] = { gbin, "-c", t.s.qt.conf, NULL };
	const char *env[] = { t.env_libexec, t.env_qq, NULL };
	struct tl_run run;
	struct tl_result res;
	struct gate_client gc;
	pid_t first;
	long gate, send;
	char *want, *st;
	uint32_t i;
	int fd, k;

	t.port = 9;	/* nothing is delivered */
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = \"5 per 30s\" }\n");
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	cr_assert(fd >= 0);
	first = fork();
	cr_assert(first >= 0);
	if (first == 0) {
		setpgid(0, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		putenv((char *)env[0]);
		putenv((char *)env[1]);
		execv(bin, (char *const *)rargv);
		_exit(127);
	}
	setpgid(first, first);
	close(fd);
	gate = started_pid(log, "weir-gate");
	send = started_pid(log, "weir-send");
	for (k = 0; k < 500 && !tl_sock_answers(t.sock); k++)
		poll(NULL, 0, 20);
	cr_assert_eq(gc_connect(&gc, t.sock), 0, "the gate of weir run does not answer");
	for (i = 1; i <= 5; i++)
		cr_assert(send_once(&gc, i, 5000), "send %u", i);
	gc_close(&gc);
	/* A second weir run refuses at once, naming the holder. */
	memset(&run, 0, sizeof run);
	run.argv = rargv;
	run.env = env;
	run.timeout_s = 10;
	tl_run(&run, &res);
	cr_assert_eq(res.status, 111, "second weir run: exit %d: %s", res.status, buf_cstr(&res.err));
	want = xasprintf("another weir run (pid %ld, or a daemon it started) runs on", (long)first);
	cr_assert(strstr(buf_cstr(&res.err), want) != NULL, "%s", buf_cstr(&res.err));
	free(want);
	tl_result_free(&res);
	/* So does a second weir-gate on the same journal. */
	run.argv = gargv;
	tl_run(&run, &res);
	cr_assert_eq(res.status, 111, "second weir-gate: exit %d: %s", res.status,
	    buf_cstr(&res.err));
	want = xasprintf("is in use by another weir-gate (pid %ld): not starting", gate);
	cr_assert(strstr(buf_cstr(&res.err), want) != NULL, "%s", buf_cstr(&res.err));
	free(want);
	tl_result_free(&res);
	/* kill -9 of weir run alone: its daemons go by themselves (we are
	 * their subreaper); a new gate knows the old one's 5 sends. */
	cr_assert_eq(kill(first, SIGKILL), 0);
	cr_assert_eq(waitpid(first, NULL, 0), first);
	for (k = 0; k < 1000 && (kill((pid_t)gate, 0) == 0 || kill((pid_t)send, 0) == 0); k++) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		poll(NULL, 0, 10);
	}
	cr_assert(kill((pid_t)gate, 0) < 0 && kill((pid_t)send, 0) < 0,
	    "the daemons outlived weir run by 10 s");
	rt_gate_start(&t, NULL);
	cr_assert_eq(gc_connect(&gc, t.sock), 0);
	cr_assert(!send_once(&gc, 6, 1000), "granted a 6th send within 30 s of 5");
	st = rt_gate_status(&t);
	cr_assert(strstr(st, "window 5 messages per 30s: 5 logged") != NULL, "%s", st);
	free(st);
	gc_close(&gc);
	free(log);
	free(bin);
	free(gbin);
}
