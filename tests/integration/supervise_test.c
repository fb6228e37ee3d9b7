/*
 * supervise_test.c: `weir run` as the supervisor of its daemons (issue
 * 22), with the defaults `weir run` and the package use:
 *   - kill -9 of `weir run` during a burst under "5 per 20s", a new one
 *     started at once: it waits (one line) for the first generation to
 *     go, which goes by itself (SIGTERM from the kernel at the death of
 *     its weir run); none of its processes (counted) is alive once the
 *     second generation starts; every message arrives exactly once, and
 *     the window holds across both generations at the upstream's clock;
 *   - grants weir-send holds for jobs no deliverer has started go back
 *     to the gate when it stops (here: at the death of weir run), so they
 *     do not hold the window for the grace;
 *   - a stop asked for (SIGTERM) and a reload (SIGHUP) log no warning;
 *     a reload while `weir run` is still reading weir.conf (held there
 *     by strace) is done once it can be, and does not kill it;
 *   - two weirs sharing a showq_socket: the second says so once and
 *     does not start its weir-showq (which would exit at every start).
 * Every process started here dies with the test (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_fixture.h"

#define SENDER "alice@src.example"

TestSuite(supervise, .init = rt_fixture_setup, .fini = rt_fixture_teardown, .timeout = 180);

/* A process as /proc/PID/stat has it: enough to know it again. */
struct proc {
	pid_t pid, ppid;
	char comm[32];
	unsigned long long start;	/* field 22: start time, in clock ticks */
};

static int
proc_read(pid_t pid, struct proc *p)
{
	char path[64], b[1024], *l, *r;
	FILE *f;
	int ok = 0;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(b, sizeof b, f) && (l = strchr(b, '(')) && (r = strrchr(b, ')')) && r > l) {
		char state;
		long ppid;
		unsigned long long start;

		/* After "(comm) ": state ppid, then 17 fields, then starttime. */
		if (sscanf(r + 2, "%c %ld %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
		    "%*s %*s %*s %*s %llu", &state, &ppid, &start) == 3 && state != 'Z') {
			p->pid = pid;
			p->ppid = (pid_t)ppid;
			p->start = start;
			snprintf(p->comm, sizeof p->comm, "%.*s", (int)(r - l - 1), l + 1);
			ok = 1;
		}
	}
	fclose(f);
	return ok ? 0 : -1;
}

/* Every live process below root (not root itself), into v (up to max). */
static size_t
descendants(pid_t root, struct proc *v, size_t max)
{
	struct proc all[2048];
	size_t n = 0, k = 0, i, j;
	struct dirent *e;
	DIR *d = opendir("/proc");

	cr_assert(d != NULL);
	while ((e = readdir(d)) != NULL && n < 2048) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end == '\0' && pid > 0 && proc_read((pid_t)pid, &all[n]) == 0)
			n++;
	}
	closedir(d);
	/* Breadth first: v[0..k) are found; add their children. */
	for (i = 0; i < n; i++)
		if (all[i].ppid == root && k < max)
			v[k++] = all[i];
	for (j = 0; j < k; j++)
		for (i = 0; i < n; i++)
			if (all[i].ppid == v[j].pid && k < max)
				v[k++] = all[i];
	return k;
}

/* Is p (the very process, not a reuse of its pid) still alive? */
static int
still_alive(const struct proc *p)
{
	struct proc now;

	return proc_read(p->pid, &now) == 0 && now.start == p->start;
}

/* Issue 22 item 2.  Before: the first generation lived on after the kill
 * (nothing told it), and the second `weir run` exited 111 at once ("another
 * weir run ... runs on"): mail stopped until someone killed the orphans. */
Test(supervise, supervisor_killed_in_a_burst)
{
	struct proc gen1[64];
	struct rt_rec r;
	size_t n1, i, twelve = 12, five = 5, alive;
	pid_t gate1;
	char *log;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = \"5 per 20s\" }\n");
	rt_run_start(&t);
	for (i = 0; i < twelve; i++) {
		char *rcpt = xasprintf("burst%zu@dst.example", i);
		const char *rv[] = { rcpt };

		rt_sendmail(&t, SENDER, rv, 1, "Subject: burst\n\nbody\n");
		free(rcpt);
	}
	/* The window is full: the other seven wait for grants, nothing is
	 * in flight once weir-send has marked the five. */
	cr_assert(rt_wait(rt_ndata_at_least, &t, &five, 30000), "not 5 accepted in 30 s");
	rt_wait_log(&t, ": delivered to <", 5, 10000);
	n1 = descendants(t.run, gen1, 64);
	gate1 = rt_run_child(&t, "weir-gate");
	cr_assert(gate1 > 0 && rt_run_child(&t, "weir-send") > 0);
	/* The first generation's gate held still, so that the second weir
	 * run surely finds the generation there. */
	cr_assert_eq(kill(gate1, SIGSTOP), 0);
	rt_run_kill9(&t);
	rt_run_spawn(&t);
	cr_assert(rt_wait(rt_run_log_has, &t, "still run on", 10000), "the second weir run did not "
	    "wait for the first generation:\n%s", rt_run_log(&t));
	log = rt_run_log(&t);
	cr_assert(strstr(log, "started ") == NULL, "started before the first generation went:\n%s",
	    log);
	free(log);
	cr_assert_eq(kill(gate1, SIGCONT), 0);
	cr_assert(rt_wait(rt_run_log_has, &t, ": info: started on", 20000), "the second generation "
	    "did not start:\n%s", rt_run_log(&t));
	for (i = alive = 0; i < n1; i++)
		if (still_alive(&gen1[i])) {
			alive++;
			cr_log_error("first generation alive: %s pid %ld", gen1[i].comm,
			    (long)gen1[i].pid);
		}
	rt_say("supervisor killed: %zu processes in the first generation, %zu alive once the "
	    "second started", n1, alive);
	cr_assert_eq(alive, 0, "%zu of the first generation's %zu processes outlived it", alive,
	    n1);
	cr_assert(n1 >= 2, "only %zu processes in the first generation", n1);
	cr_assert(rt_wait(rt_ndata_at_least, &t, &twelve, 90000), "not all 12 accepted in 90 s:\n%s",
	    rt_send_logs_tail(&t, 3000));
	rt_wait_empty(&t, 10000);
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, twelve, "%zu transactions for 12 messages", r.n);
	for (i = 0; i < twelve; i++) {
		char *rcpt = xasprintf("burst%zu@dst.example", i);

		cr_assert_eq(rt_rec_count(&r, SENDER, rcpt), 1, "<%s>: %zu copies", rcpt,
		    rt_rec_count(&r, SENDER, rcpt));
		free(rcpt);
	}
	rt_assert_window(&r, 5, 20.0);
	rt_rec_free(&r);
}

/* The upstream has begun to take its time over a final dot. */
static int
delaying(struct rt *rt, void *arg)
{
	struct buf b = BUF_INIT;
	int yes = 0;

	(void)arg;
	if (access(rt->record, F_OK) == 0) {
		tl_read(rt->record, &b);
		yes = strstr(buf_cstr(&b), "\"event\": \"delaying\"") != NULL;
	}
	buf_free(&b);
	return yes;
}

/* weir-send asks ahead of its deliverers: grants wait for a free one.
 * Dropped at its death, each counted as maybe sent for the gate's grace
 * (10 minutes): one message's final dot held at the upstream, nine
 * granted behind it, weir run killed -9, and before, the window ("10
 * per 1m") stayed full for 10 minutes: nothing more sent.  Now weir-send,
 * stopping, gives the unused grants back (and the gate, stopping, waits
 * for its clients' reports): nine go within 30 s of the new start (the
 * slow one, tried again, and eight fast ones; the tenth slot is the slow
 * one's first try, whose outcome is unknown). */
Test(supervise, unused_grants_given_back_at_the_death)
{
	const char *flags[] = { "--dataend-delay", "slow@dst.example=8", NULL };
	const char *slow[] = { "slow@dst.example" };
	struct rt_rec r;
	size_t i, nine = 9;
	double t0;

	sh_conf_append(&t.s, "concurrency = 1\n");
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = \"10 per 1m\" }\n");
	rt_run_start(&t);
	rt_sendmail(&t, SENDER, slow, 1, "Subject: slow\n\nfirst\n");
	cr_assert(rt_wait(delaying, &t, NULL, 20000), "the final dot never reached the upstream");
	for (i = 0; i < nine; i++) {
		char *rcpt = xasprintf("fast%zu@dst.example", i);
		const char *rv[] = { rcpt };

		rt_sendmail(&t, SENDER, rv, 1, "Subject: fast\n\nbody\n");
		free(rcpt);
	}
	cr_assert(rt_wait(rt_gate_status_has, &t, "0 logged + 10 held = 10 of 10", 20000),
	    "the nine were not granted behind the slow one:\n%s", rt_gate_status(&t));
	rt_run_kill9(&t);
	t0 = rt_now();
	rt_run_start(&t);
	/* Nine slots free: the slow one (its outcome unknown, its slot held)
	 * tried again first, then eight of the nine. */
	cr_assert(rt_wait(rt_ndata_at_least, &t, &nine, 30000 - (int)((rt_now() - t0) * 1000)),
	    "not 9 delivered within 30 s of the kill:\n%s", rt_gate_status(&t));
	rt_say("unused grants given back: 9 delivered %.1f s after the kill", rt_now() - t0);
	rt_rec_load(&t, &r);
	for (i = 0; i < nine; i++) {
		char *rcpt = xasprintf("fast%zu@dst.example", i);

		cr_assert_leq(rt_rec_count(&r, SENDER, rcpt), 1, "<%s> twice", rcpt);
		free(rcpt);
	}
	rt_assert_window(&r, 10, 60.0);
	rt_rec_free(&r);
}

/* Issue 22 item 4: every stop of `weir run` logged "warning: weir-send
 * (pid N) exited with status 0" and "warning: weir-showq (pid N) killed
 * by signal 15"; and a reload killed weir-metrics (SIGHUP, not caught:
 * "killed by signal 1", restarted).  A warning must mean something to
 * act on: weir run's log of a reload and a stop has none. */
Test(supervise, stop_and_reload_are_no_trouble)
{
	char *conf = xasprintf("showq_socket = \"%s/showq.sock\"\n"
	    "metrics { textfile = \"%s/weir.prom\" interval = \"1s\" }\n", t.s.qt.tmp, t.s.qt.tmp);
	char *log, *mine;
	pid_t metrics;
	int st;
	size_t i;
	static const char *const daemons[] = { "weir-gate", "weir-send", "weir-metrics",
		"weir-showq" };

	t.port = 9;	/* nothing is delivered */
	rt_conf_upstream(&t, NULL);
	sh_conf_append(&t.s, conf);
	rt_policy(&t, "upstream \"isp\" { rate = \"5 per 20s\" }\n");
	rt_run_start(&t);
	cr_assert(rt_wait(rt_run_log_has, &t, "started weir-showq", 10000), "%s", rt_run_log(&t));
	metrics = rt_run_child(&t, "weir-metrics");
	cr_assert(metrics > 0, "no weir-metrics:\n%s", rt_run_log(&t));
	cr_assert_eq(kill(t.run, SIGHUP), 0);
	cr_assert(rt_wait(rt_run_log_has, &t, "loaded (SIGHUP)", 10000), "%s", rt_run_log(&t));
	cr_assert(rt_wait(rt_run_log_has, &t, "SIGHUP: ", 10000), "%s", rt_run_log(&t));
	cr_assert_eq(rt_run_child(&t, "weir-metrics"), metrics, "weir-metrics did not live "
	    "through the reload:\n%s", rt_run_log(&t));
	mine = xasprintf(" weir[%ld]: warning", (long)t.run);
	st = rt_run_stop(&t, 20000);
	cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "weir run: status %d", st);
	log = rt_run_log(&t);
	cr_assert(strstr(log, mine) == NULL, "warnings from weir run:\n%s", log);
	for (i = 0; i < sizeof daemons / sizeof daemons[0]; i++) {
		char *want = xasprintf("info: %s (pid ", daemons[i]);
		char *p = strstr(log, want);

		cr_assert(p && strstr(p, ") stopped\n"), "no \"%s...) stopped\":\n%s", want, log);
		free(want);
	}
	free(log);
	free(mine);
	free(conf);
}

static int
file_has(void *arg)
{
	const char *const *w = arg;
	struct buf b = BUF_INIT;
	int yes;

	if (access(w[0], F_OK) < 0)
		return 0;
	tl_read(w[0], &b);
	yes = strstr(buf_cstr(&b), w[1]) != NULL;
	buf_free(&b);
	return yes;
}

/* The pid of pid's only child, or 0 while it has none. */
static pid_t
child_of(pid_t pid)
{
	char *p = xasprintf("/proc/%ld/task/%ld/children", (long)pid, (long)pid);
	struct buf b = BUF_INIT;
	long c = 0;

	if (access(p, F_OK) == 0) {
		tl_read(p, &b);
		c = atol(buf_cstr(&b));
	}
	buf_free(&b);
	free(p);
	return (pid_t)c;
}

/* A reload at the first instant of `weir run`: here while it reads
 * weir.conf, held there 3 s by strace's delay injection (-P: that one
 * file), the instant before any handler exists.  SIGHUP's default
 * action killed it ("+++ killed by SIGHUP +++"); now `weir run` starts
 * with SIGHUP blocked, and the reload waits until it can be done. */
Test(supervise, reload_while_starting)
{
	char *trace = xasprintf("%s/strace.out", t.s.qt.tmp);
	struct buf tr = BUF_INIT;
	const char *wrap[] = { "strace", "-o", trace, "-e", "trace=openat", "-e",
		"inject=openat:delay_enter=3000000", "-P", t.s.qt.conf, NULL };
	const char *in_read[] = { trace, t.s.qt.conf };
	pid_t weir;
	int st;

	if (system("strace -o /dev/null true >/dev/null 2>&1") != 0)
		cr_skip_test("strace cannot trace here (ptrace refused?)");
	t.port = 9;	/* nothing is delivered */
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = \"5 per 20s\" }\n");
	t.run_wrap = wrap;
	rt_run_spawn(&t);
	cr_assert(sh_wait_for(file_has, in_read, 10000), "weir run never opened %s", t.s.qt.conf);
	weir = child_of(t.run);
	cr_assert(weir > 0, "no weir run under strace");
	/* In the delayed openat: its line is printed, its result not yet
	 * (else this proves nothing). */
	tl_read(trace, &tr);
	cr_assert(strstr(buf_cstr(&tr), "DELAYED") == NULL, "the openat was over before the "
	    "SIGHUP:\n%s", buf_cstr(&tr));
	cr_assert_eq(kill(weir, SIGHUP), 0);
	buf_reset(&tr);
	if (!rt_wait(rt_run_log_has, &t, "loaded (SIGHUP)", 20000)) {
		tl_read(trace, &tr);
		cr_assert_fail("no reload:\n%s\nstrace:\n%s", rt_run_log(&t), buf_cstr(&tr));
	}
	cr_assert(rt_wait(rt_run_log_has, &t, "started weir-send", 10000), "%s", rt_run_log(&t));
	cr_assert_eq(kill(weir, SIGTERM), 0);
	while (waitpid(t.run, &st, 0) < 0 && errno == EINTR)
		;
	t.run = 0;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "weir run under strace: status %d", st);
	buf_free(&tr);
	free(trace);
}

/* Issue 22 item 4: a second weir on the host with the same showq_socket
 * (once the default of every weir.conf that did not set it) started a
 * weir-showq that exited 111 at once, again and again (1, 2, 4 ... 60 s).
 * Now weir run says so once at start and does not start it. */
Test(supervise, shared_showq_socket_refused_once)
{
	char *sock = xasprintf("%s/showq.sock", t.s.qt.tmp), *line, *extra, *log2;
	const char *w[2];
	struct sht s2;
	struct buf b = BUF_INIT;
	pid_t run2;
	int st;

	line = xasprintf("showq_socket = \"%s\"\n", sock);
	sh_conf_append(&t.s, line);
	rt_policy(&t, "upstream \"*\" { rate = \"5 per 20s\" }\n");
	rt_run_start(&t);
	cr_assert(rt_wait(rt_run_log_has, &t, "started weir-showq", 10000), "%s", rt_run_log(&t));
	cr_assert(sh_wait_for((int (*)(void *))tl_sock_answers, sock, 10000), "no weir-showq");
	extra = xasprintf("gate_socket = \"%s/g2.sock\"\ngate_journal = \"%s/g2.journal\"\n"
	    "policy_file = \"%s\"\n%s", t.s.qt.tmp, t.s.qt.tmp, t.policy, line);
	sh_setup(&s2, extra);
	log2 = xasprintf("%s/run2.log", s2.qt.tmp);
	run2 = rt_run_spawn_conf(&t, s2.qt.conf, log2);
	w[0] = log2;
	w[1] = ": info: started on";	/* its weir-send: every start is logged by then */
	cr_assert(sh_wait_for(file_has, w, 20000), "the second weir run did not start");
	tl_read(log2, &b);
	cr_assert(strstr(buf_cstr(&b), "started weir-showq") == NULL, "%s", b.s);
	line = strstr(b.s, "is served by another process");
	cr_assert(line && strstr(line + 1, "is served by another process") == NULL,
	    "not said once:\n%s", b.s);
	cr_assert(tl_sock_answers(sock), "the first weir-showq is gone");
	cr_assert_eq(kill(run2, SIGTERM), 0);
	cr_assert_eq(waitpid(run2, &st, 0), run2);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "second weir run: status %d", st);
	buf_free(&b);
	sh_teardown(&s2);
	free(log2);
	free(extra);
	free(sock);
}
