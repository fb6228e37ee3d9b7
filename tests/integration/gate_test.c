/*
 * gate_test.c: the real build/bin/weir-gate over its socket.
 *   - 50 concurrent clients for 8 s under "5 per 1s", with a SIGTERM
 *     restart and a kill -9 restart in the middle; the invariant is
 *     checked over the whole run from the clients' own timestamps
 *     (grant received .. report sent): for every instant t, the sends
 *     whose interval meets (t - 1 s, t] are at most 5;
 *   - CPU time of the gate while 200 requests wait for 10 s < 100 ms;
 *   - bad input answered and the connection closed, the gate serving on;
 *   - policy reload on change: a bad file keeps the old policy (error
 *     with file:line in the log), a good one applies at once;
 *   - status in text and JSON through `weir-gate status`.
 * Every gate started is killed in the fixture's fini, and dies with the
 * test process anyway (PR_SET_PDEATHSIG).
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "mail/gateclient.h"
#include "testlib.h"

static char *dir, *sock, *policy, *journal, *wconf, *gatelog;
static pid_t gate_pid = -1;
static const char *gate_fault;	/* WEIR_FAULT for the next gate started, or NULL */

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Microseconds: the invariant is checked finer than the gate's ms. */
static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Wait without spinning. */
static void
pause_ms(int ms)
{
	poll(NULL, 0, ms);
}

static void
stop_gate(int sig)
{
	int st;

	if (gate_pid <= 0)
		return;
	kill(gate_pid, sig);
	while (waitpid(gate_pid, &st, 0) < 0 && errno == EINTR)
		;
	gate_pid = -1;
}

static void
setup(void)
{
	dir = tl_tmpdir();
	sock = xasprintf("%s/gate.sock", dir);
	policy = xasprintf("%s/policy.conf", dir);
	journal = xasprintf("%s/journal", dir);
	wconf = xasprintf("%s/weir.conf", dir);
	gatelog = xasprintf("%s/gate.log", dir);
	tl_write(wconf, "", 0);
}

static void
teardown(void)
{
	stop_gate(SIGKILL);
	tl_rmtree(dir);
}

/* Start the gate; nofile > 0 caps its file descriptors. */
static void
start_gate_fds(const char *grace, rlim_t nofile)
{
	char *bin = tl_bin("weir-gate");
	int lfd, i;
	struct gate_client gc;

	gate_pid = fork();
	cr_assert(gate_pid >= 0);
	if (gate_pid == 0) {
		struct rlimit rl = { nofile, nofile };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (nofile > 0 && setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(127);
		lfd = open(gatelog, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (lfd < 0 || dup2(lfd, 2) < 0)
			_exit(127);
		if (gate_fault && (!getenv("WEIR_FAULTINJ") ||
		    setenv("LD_PRELOAD", getenv("WEIR_FAULTINJ"), 1) < 0 ||
		    setenv("WEIR_FAULT", gate_fault, 1) < 0 ||
		    setenv("WEIR_FAULT_PROG", "weir-gate", 1) < 0))
			_exit(127);
		if (grace)
			execl(bin, bin, "-c", wconf, "-p", policy, "-s", sock, "-j", journal,
			    "-g", grace, (char *)NULL);
		else	/* the default, as weir run and the package use it */
			execl(bin, bin, "-c", wconf, "-p", policy, "-s", sock, "-j", journal,
			    (char *)NULL);
		_exit(127);
	}
	free(bin);
	for (i = 0; i < 500; i++) {
		if (gc_connect(&gc, sock) == 0) {
			gc_close(&gc);
			return;
		}
		pause_ms(10);
	}
	cr_assert_fail("weir-gate did not start");
}

static void
start_gate(const char *grace)
{
	start_gate_fds(grace, 0);
}

static void
write_policy(const char *text)
{
	char *tmp = xasprintf("%s.tmp", policy);

	tl_write(tmp, text, strlen(text));
	cr_assert_eq(rename(tmp, policy), 0);
	free(tmp);
}

/* Ask the gate's status (JSON if json) on st every 20 ms until it holds
 * text, for up to ms: 1 if it did (st->status, NUL-terminated, is the
 * last answer). */
static int
status_until(struct gate_client *st, int json, const char *text, int ms)
{
	struct gp_reply r;
	const char *why;
	int64_t t = now_ms();

	for (;;) {
		cr_assert_eq(gc_status(st, json), 0);
		cr_assert_eq(gc_wait_reply(st, &r, &why), 1, "%s", why);
		cr_assert_eq(r.verb, GP_R_STATUS);
		buf_addc(&st->status, '\0');
		if (strstr(st->status.s, text) != NULL)
			return 1;
		if (now_ms() - t >= ms)
			return 0;
		pause_ms(20);
	}
}

/* A negative check with its proof: the gate's status shows n requests
 * waiting (read and not granted: a grant is sent as its request is
 * read), and the client on fd has no answer. */
static void
assert_waiting(int fd, int n, const char *what)
{
	struct gate_client st;
	struct pollfd pf = { fd, POLLIN, 0 };
	char want[32];

	snprintf(want, sizeof want, "\"waiting\":%d,", n);
	cr_assert_eq(gc_connect(&st, sock), 0);
	cr_assert(status_until(&st, 1, want, 10000), "%s: not %s\n%s", what, want, st.status.s);
	gc_close(&st);
	cr_assert_eq(poll(&pf, 1, 0), 0, "%s", what);
}

/* ---- 50 clients, restarts, the invariant ---- */

#define NCL 50
#define MAXSENDS 4096

struct cl {
	struct gate_client gc;
	int connected;
	enum { IDLE, WAIT, HOLD, REPORTED } st;
	uint32_t tag;
	int64_t g, due;		/* g in us, due in ms */
	int held_here;		/* granted on the current connection */
};

static int64_t sg[MAXSENDS], sr[MAXSENDS];	/* us */
static size_t nsends;

static void
record(int64_t g, int64_t r)
{
	cr_assert(nsends < MAXSENDS);
	sg[nsends] = g;
	sr[nsends++] = r;
}

static void
lost(struct cl *c)
{
	gc_close(&c->gc);
	c->connected = 0;
	c->held_here = 0;
	if (c->st != HOLD)
		c->st = IDLE;	/* a held send goes on: recorded when due */
}

Test(gate, fifty_clients_restarts_invariant, .init = setup, .fini = teardown, .timeout = 50)
{
	static struct cl cl[NCL];
	struct pollfd pf[NCL];
	int idx[NCL];
	int64_t t0, now, end;
	unsigned seed = 12345;
	int phase = 0, i, n, timeout;
	size_t a, b;

	write_policy("upstream \"up\" { rate = \"5 per 1s\" }\n");
	start_gate("1s");
	memset(cl, 0, sizeof cl);
	nsends = 0;
	t0 = now_ms();
	end = t0 + 8000;
	while ((now = now_ms()) < end) {
		if (phase == 0 && now >= t0 + 2500) {
			stop_gate(SIGTERM);	/* a clean restart */
			start_gate("1s");
			phase = 1;
		} else if (phase == 1 && now >= t0 + 5000) {
			stop_gate(SIGKILL);	/* a crash */
			start_gate("1s");
			phase = 2;
		}
		now = now_ms();
		timeout = 20;
		for (i = n = 0; i < NCL; i++) {
			struct cl *c = &cl[i];

			if (c->st == HOLD && now >= c->due) {
				record(c->g, now_us());
				if (c->connected && c->held_here &&
				    gc_report_sent(&c->gc, c->tag, 1, -1) == 0)
					c->st = REPORTED;
				else if (c->connected && c->held_here)
					lost(c), c->st = IDLE;
				else
					c->st = IDLE;	/* granted by a gate now gone */
			}
			if (!c->connected) {
				if (gc_connect(&c->gc, sock) < 0)
					continue;
				cr_assert_eq(fd_nonblock(c->gc.fd, 1), 0);
				c->connected = 1;
			}
			if (c->st == IDLE) {
				if (gc_acquire(&c->gc, ++c->tag, "up", NULL, NULL, 1, 1, 0) < 0) {
					lost(c);
					continue;
				}
				c->st = WAIT;
			}
			if (c->st == HOLD && c->due - now < timeout)
				timeout = (int)(c->due - now);
			pf[n].fd = c->gc.fd;
			pf[n].events = POLLIN;
			idx[n++] = i;
		}
		if (poll(pf, (nfds_t)n, timeout < 0 ? 0 : timeout) < 0)
			cr_assert(errno == EINTR);
		for (i = 0; i < n; i++) {
			struct cl *c = &cl[idx[i]];
			struct gp_reply r;
			const char *why;
			int got;

			if (!pf[i].revents)
				continue;
			got = gc_fill(&c->gc);
			if (got <= 0) {
				if (got < 0 && errno == EAGAIN)
					continue;
				lost(c);
				continue;
			}
			while ((got = gc_next_reply(&c->gc, &r, &why)) == 1) {
				if (r.verb == GP_R_GRANT) {
					cr_assert_eq(c->st, WAIT);
					cr_assert_eq(r.tag, c->tag);
					c->g = now_us();
					c->due = now_ms() + (int64_t)(rand_r(&seed) % 60);
					c->st = HOLD;
					c->held_here = 1;
				} else if (r.verb == GP_R_OK) {
					cr_assert_eq(c->st, REPORTED);
					c->st = IDLE;
				} else {
					cr_assert_fail("unexpected reply %d (%s)", (int)r.verb, r.text);
				}
			}
			cr_assert_neq(got, -1, "bad reply: %s", why);
		}
	}
	for (i = 0; i < NCL; i++) {
		if (cl[i].st == HOLD)
			record(cl[i].g, now_us());
		if (cl[i].connected)
			gc_close(&cl[i].gc);
	}
	stop_gate(SIGTERM);

	/* For every instant t (it is enough to look at each grant), the
	 * sends whose [grant, report] meets (t - 1 s, t], in microseconds. */
	for (a = 0; a < nsends; a++) {
		int cnt = 0;

		for (b = 0; b < nsends; b++)
			if (sg[b] <= sg[a] && sr[b] > sg[a] - 1000000)
				cnt++;
		cr_assert_leq(cnt, 5, "%d sends in the second ending at %lld us", cnt,
		    (long long)(sg[a] - t0 * 1000));
	}
	/* And literally: reports in every [s, s + 1 s), s every 100 us. */
	for (now = t0 * 1000; now < (end + 1000) * 1000; now += 100) {
		int cnt = 0;

		for (b = 0; b < nsends; b++)
			if (sr[b] >= now && sr[b] < now + 1000000)
				cnt++;
		cr_assert_leq(cnt, 5, "%d reports in [%lld us, +1 s)", cnt,
		    (long long)(now - t0 * 1000));
	}
	/* The window is used, not just respected: 8 s at 5/s, minus the
	 * restarts' grace periods. */
	cr_assert_geq(nsends, 20, "only %zu sends in 8 s", nsends);
	cr_log_info("%zu sends in 8 s with 2 restarts", nsends);
}

/* ---- idle CPU while 200 requests wait ---- */

static long long
cpu_ms(pid_t pid)
{
	char *path = xasprintf("/proc/%d/stat", (int)pid), *p;
	struct buf b = BUF_INIT;
	unsigned long long ut, st;
	long long ms;
	int i;

	tl_read(path, &b);
	p = strrchr(b.s, ')');
	cr_assert_not_null(p);
	p += 2;	/* field 3 */
	for (i = 3; i < 14; i++)
		p = strchr(p, ' ') + 1;
	cr_assert_eq(sscanf(p, "%llu %llu", &ut, &st), 2);
	ms = (long long)((ut + st) * 1000 / (unsigned long long)sysconf(_SC_CLK_TCK));
	buf_free(&b);
	free(path);
	return ms;
}

Test(gate, idle_cpu_while_200_wait, .init = setup, .fini = teardown, .timeout = 40)
{
	static struct gate_client gc[200];
	struct gate_client st;
	struct gp_reply r;
	const char *why;
	long long before, after;
	int i, first, grants = 0;
	int64_t t;

	write_policy("upstream \"up\" { rate = \"1 per 5s\" }\n");
	start_gate("1s");
	for (i = 0; i < 200; i++) {
		cr_assert_eq(gc_connect(&gc[i], sock), 0);
		cr_assert_eq(gc_acquire(&gc[i], 1, "up", NULL, NULL, 1, 1, 0), 0);
	}
	/* One is granted at once (which one is the gate's choice: under
	 * load it may take in all 200 connections before it reads any, and
	 * then not in the order they were made); report it, the rest wait. */
	{
		struct pollfd pf[200];

		for (i = 0; i < 200; i++)
			pf[i] = (struct pollfd){ gc[i].fd, POLLIN, 0 };
		cr_assert_eq(poll(pf, 200, 10000), 1, "not exactly one grant at once");
		for (first = 0; !pf[first].revents; first++)
			;
	}
	cr_assert_eq(gc_wait_reply(&gc[first], &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(gc_report_sent(&gc[first], 1, 1, -1), 0);
	cr_assert_eq(gc_wait_reply(&gc[first], &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_OK);
	/* Measured once the gate has read every request: 199 waiting. */
	cr_assert_eq(gc_connect(&st, sock), 0);
	cr_assert(status_until(&st, 1, "\"waiting\":199,", 10000), "%s", st.status.s);
	gc_close(&st);
	before = cpu_ms(gate_pid);
	t = now_ms();
	/* 10 s: one grant is due at 5 s (the timer), the rest wait. */
	while (now_ms() - t < 10000) {
		struct pollfd pf[200];

		for (i = 0; i < 200; i++)
			pf[i] = (struct pollfd){ i == first ? -1 : gc[i].fd, POLLIN, 0 };
		if (poll(pf, 200, (int)(10000 - (now_ms() - t))) <= 0)
			continue;
		for (i = 0; i < 200; i++)
			if (pf[i].revents) {
				cr_assert_eq(gc_wait_reply(&gc[i], &r, &why), 1);
				cr_assert_eq(r.verb, GP_R_GRANT);
				grants++;	/* held: nothing else can be granted */
			}
		if (grants)
			break;
	}
	/* The timer fired once, at ~5 s. */
	cr_assert_eq(grants, 1);
	cr_assert_geq(now_ms() - t, 4500);
	/* The rest of the 10 s measured (a span, not a wait for an event). */
	pause_ms((int)(10000 - (now_ms() - t)) > 0 ? (int)(10000 - (now_ms() - t)) : 0);
	after = cpu_ms(gate_pid);
	cr_log_info("gate CPU while 199 wait for 10 s: %lld ms", after - before);
	cr_assert_lt(after - before, 100, "gate used %lld ms of CPU while idle", after - before);
	for (i = 0; i < 200; i++)
		gc_close(&gc[i]);
}

/* ---- bad input ---- */

static void
raw_exchange(const char *data, size_t len, const char *want)
{
	struct gate_client gc;
	struct gp_reply r;
	const char *why = "";

	cr_assert_eq(gc_connect(&gc, sock), 0);
	cr_assert_eq(full_write(gc.fd, data, len), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1, "%s", why);
	cr_assert_eq(r.verb, GP_R_ERR);
	cr_assert_str_eq(gp_code_name(r.code), want);
	/* Framing errors close the connection (end of file, or a reset when
	 * the gate left unread bytes behind). */
	if (strcmp(want, "TOOLONG") == 0 || strcmp(want, "NUL") == 0 || strcmp(want, "BYTE") == 0)
		cr_assert_neq(gc_wait_reply(&gc, &r, &why), 1);
	gc_close(&gc);
}

Test(gate, bad_input_answered_gate_serves_on, .init = setup, .fini = teardown, .timeout = 20)
{
	char big[3000];
	struct gate_client gc;
	struct gp_reply r;
	const char *why;

	write_policy("upstream \"up\" { rate = \"5 per 1s\" max_recipients = 10 }\n");
	start_gate("1s");
	memset(big, 'A', sizeof big);
	raw_exchange(big, sizeof big, "TOOLONG");
	raw_exchange("CANCEL 1\0\n", 10, "NUL");
	raw_exchange("CANCEL 1\r\n", 10, "BYTE");
	raw_exchange("HELO x\n", 7, "VERB");
	raw_exchange("ACQUIRE 1 up - - 1 1\n", 21, "SYNTAX");
	raw_exchange("ACQUIRE 1 up - - 1 11 0\n", 24, "TOOBIG");
	raw_exchange("ACQUIRE 1 up - - 6 1 0\n", 23, "TOOBIG");
	raw_exchange("REPORT 9 SENT 1 -\n", 18, "TAG");
	/* A client that sends half a line and disconnects. */
	cr_assert_eq(gc_connect(&gc, sock), 0);
	cr_assert_eq(full_write(gc.fd, "ACQUIRE 1 up", 12), 0);
	gc_close(&gc);
	/* Still serving, with a duplicate tag refused. */
	cr_assert_eq(gc_connect(&gc, sock), 0);
	cr_assert_eq(gc_acquire(&gc, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(gc_acquire(&gc, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	cr_assert(r.verb == GP_R_ERR && r.code == GP_DUPTAG);
	cr_assert_eq(gc_cancel(&gc, 1), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	cr_assert(r.verb == GP_R_ERR && r.code == GP_STATE);
	cr_assert_eq(gc_report_throttled(&gc, 1, "421 4.7.0 slow\r\ndown"), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_SUSPENDED);
	cr_assert_eq(r.secs, 300);	/* built-in 421: 5 minutes */
	gc_close(&gc);
}

/* ---- reload ---- */

static int
log_has(const char *text, int wait_ms)
{
	struct buf b = BUF_INIT;
	int64_t t = now_ms();
	int found = 0;

	do {
		if (read_file_at(AT_FDCWD, gatelog, &b, 1 << 20) == 0 && b.s && strstr(b.s, text))
			found = 1;
		else
			pause_ms(20);
	} while (!found && now_ms() - t < wait_ms);
	buf_free(&b);
	return found;
}

Test(gate, reload_bad_keeps_old_good_applies, .init = setup, .fini = teardown, .timeout = 20)
{
	struct gate_client gc;
	struct gp_reply r;
	const char *why;
	char *want;
	int i;
	struct pollfd pf;

	write_policy("upstream \"up\" { rate = \"2 per 1h\" }\n");
	start_gate("1s");
	cr_assert_eq(gc_connect(&gc, sock), 0);
	for (i = 1; i <= 3; i++)
		cr_assert_eq(gc_acquire(&gc, (uint32_t)i, "up", NULL, NULL, 1, 1, 0), 0);
	for (i = 1; i <= 2; i++) {
		cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
		cr_assert(r.verb == GP_R_GRANT && r.tag == (uint32_t)i);
	}
	for (i = 1; i <= 2; i++) {
		cr_assert_eq(gc_report_sent(&gc, (uint32_t)i, 1, -1), 0);
		cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
		cr_assert(r.verb == GP_R_OK && r.tag == (uint32_t)i);
	}
	/* A bad policy: logged with file:line, the old one stays. */
	write_policy("upstream \"up\" {\n  rate = \"0 per 1h\"\n}\n");
	want = xasprintf("policy not reloaded: %s:2: rate", policy);
	cr_assert(log_has(want, 3000), "no \"%s\" in the log", want);
	assert_waiting(gc.fd, 1, "granted under a bad policy");
	pf = (struct pollfd){ gc.fd, POLLIN, 0 };
	/* A good one with a higher limit applies at once, on file change. */
	write_policy("upstream \"up\" { rate = \"3 per 1h\" }\n");
	cr_assert_eq(poll(&pf, 1, 3000), 1, "not granted after the reload");
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	cr_assert(r.verb == GP_R_GRANT && r.tag == 3);
	/* And SIGHUP: back to 2, which the history already exceeds. */
	cr_assert_eq(gc_report_sent(&gc, 3, 1, -1), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	tl_write(policy, "upstream \"up\" { rate = \"2 per 1h\" }\n", 36);
	cr_assert_eq(kill(gate_pid, SIGHUP), 0);
	cr_assert(log_has("(SIGHUP)", 3000));
	cr_assert_eq(gc_acquire(&gc, 4, "up", NULL, NULL, 1, 1, 0), 0);
	assert_waiting(gc.fd, 1, "granted over a lowered limit");
	gc_close(&gc);
	free(want);
}

/* ---- status ---- */

Test(gate, status_text_and_json, .init = setup, .fini = teardown, .timeout = 20)
{
	char *bin = tl_bin("weir-gate");
	const char *argv1[] = { bin, "-c", wconf, "-s", sock, "status", NULL };
	const char *argv2[] = { bin, "-c", wconf, "-s", sock, "status", "json", NULL };
	struct tl_run run;
	struct tl_result res;
	struct gate_client gc;
	struct gp_reply r;
	const char *why;

	write_policy("upstream \"up\" { rate = {\"1 per 1h\", \"100 recipients daily at 00:00 UTC\"} }\n"
	    "class \"bulk\" { priority = 1 }\n");
	start_gate("1s");
	cr_assert_eq(gc_connect(&gc, sock), 0);
	cr_assert_eq(gc_acquire(&gc, 1, "up", NULL, NULL, 1, 2, 0), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	cr_assert_eq(gc_acquire(&gc, 2, "up", "bulk", NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_report_throttled(&gc, 1, "421 4.7.0 Try again later"), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	memset(&run, 0, sizeof run);
	run.argv = argv1;
	tl_run(&run, &res);
	cr_assert_eq(res.status, 0, "%s", res.err.s);
	cr_assert(strstr(res.out.s, "upstream up: suspended until ") != NULL, "%s", res.out.s);
	cr_assert(strstr(res.out.s, "421 4.7.0 Try again later") != NULL);
	cr_assert(strstr(res.out.s, "window 1 messages per 3600s: 1 logged + 0 held = 1 of 1") != NULL,
	    "%s", res.out.s);
	cr_assert(strstr(res.out.s, "(calendar)") != NULL);
	cr_assert(strstr(res.out.s, "waiting: 1 (bulk 1)") != NULL, "%s", res.out.s);
	tl_result_free(&res);
	run.argv = argv2;
	tl_run(&run, &res);
	cr_assert_eq(res.status, 0);
	cr_assert(strstr(res.out.s, "\"name\":\"up\",\"in_policy\":true,\"suspended\":true") != NULL,
	    "%s", res.out.s);
	cr_assert(strstr(res.out.s, "\"waiting_by_class\":{\"bulk\":1}") != NULL);
	cr_assert(strstr(res.out.s, "\"unit\":\"recipients\",\"calendar\":true,\"logged\":2") != NULL,
	    "%s", res.out.s);
	tl_result_free(&res);
	gc_close(&gc);
	free(bin);
}

/* ---- out of file descriptors: no spinning, service resumes ---- */

Test(gate, out_of_fds_pauses_accept_without_spinning, .init = setup, .fini = teardown,
    .timeout = 20)
{
	static struct gate_client gc[40];
	struct gp_reply r;
	const char *why;
	long long before, after;
	int i;
	struct pollfd pf;

	write_policy("upstream \"up\" { rate = \"5 per 1s\" }\n");
	start_gate_fds("1s", 24);
	for (i = 0; i < 40; i++)
		cr_assert_eq(gc_connect(&gc[i], sock), 0);	/* the backlog takes them */
	cr_assert(log_has("accept: pausing until a client goes", 10000), "the gate never ran "
	    "out of descriptors");
	before = cpu_ms(gate_pid);
	pause_ms(1000);	/* the span measured, not a wait for an event */
	after = cpu_ms(gate_pid);
	cr_assert_lt(after - before, 50, "gate used %lld ms of CPU in 1 s out of fds",
	    after - before);
	/* The last connection waits in the backlog (a short look: the proof
	 * is that it is answered once others go) ... */
	cr_assert_eq(gc_status(&gc[39], 0), 0);
	pf = (struct pollfd){ gc[39].fd, POLLIN, 0 };
	cr_assert_eq(poll(&pf, 1, 300), 0);
	/* ... and is served once others go. */
	for (i = 0; i < 30; i++)
		gc_close(&gc[i]);
	cr_assert_eq(gc_wait_reply(&gc[39], &r, &why), 1, "%s", why);
	cr_assert_eq(r.verb, GP_R_STATUS);
	for (i = 30; i < 40; i++)
		gc_close(&gc[i]);
}

/* ---- clients that go away ---- */

Test(gate, client_gone_grant_counts_waiting_dropped, .init = setup, .fini = teardown,
    .timeout = 20)
{
	struct gate_client a, b, c, st;
	struct gp_reply r;
	const char *why;
	struct pollfd pf;

	write_policy("upstream \"up\" { rate = \"1 per 1h\" }\n");
	start_gate("1s");
	cr_assert_eq(gc_connect(&a, sock), 0);
	cr_assert_eq(gc_acquire(&a, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	gc_close(&a);		/* dies holding the grant: counted as sent */
	cr_assert_eq(gc_connect(&b, sock), 0);
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_connect(&c, sock), 0);
	cr_assert_eq(gc_acquire(&c, 1, "up", NULL, NULL, 1, 1, 0), 0);
	/* Both requests read and left waiting: b was not granted. */
	cr_assert_eq(gc_connect(&st, sock), 0);
	cr_assert(status_until(&st, 1, "\"waiting\":2,", 10000), "%s", st.status.s);
	pf = (struct pollfd){ b.fd, POLLIN, 0 };
	cr_assert_eq(poll(&pf, 1, 0), 0, "granted although the window is used");
	gc_close(&c);		/* loses its waiting request */
	/* The gate sees c go within a round or two of its loop. */
	cr_assert(status_until(&st, 1, "\"waiting\":1,", 10000), "%s", st.status.s);
	cr_assert(strstr(st.status.s, "\"logged\":1,\"held\":0") != NULL, "%s", st.status.s);
	gc_close(&st);
	gc_close(&b);
}

/* A grant whose client went away may have been accepted until the drop
 * + grace (here 2 s): the upstream may still be accepting a final dot
 * sent just before.  "1 per 1s": the next grant comes about 3 s after
 * the drop, not 1 s. */
Test(gate, dropped_grant_logged_with_a_margin, .init = setup, .fini = teardown, .timeout = 20)
{
	struct gate_client a, b;
	struct gp_reply r;
	const char *why;
	struct pollfd pf;

	write_policy("upstream \"up\" { rate = \"1 per 1s\" }\n");
	start_gate("2s");
	cr_assert_eq(gc_connect(&a, sock), 0);
	cr_assert_eq(gc_acquire(&a, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	gc_close(&a);
	cr_assert_eq(gc_connect(&b, sock), 0);
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 0), 0);
	pf = (struct pollfd){ b.fd, POLLIN, 0 };
	cr_assert_eq(poll(&pf, 1, 2200), 0, "granted less than 2.2 s after the drop");
	cr_assert_eq(gc_wait_reply(&b, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	gc_close(&b);
}

/* The upstream's own grace (policy.conf) counts for its dropped grant,
 * not -g; status names the send of unknown outcome, with the grace, as
 * long as it holds its slot. */
Test(gate, dropped_grant_uses_the_upstreams_grace, .init = setup, .fini = teardown,
    .timeout = 20)
{
	struct gate_client a, b, st;
	struct gp_reply r;
	const char *why;
	struct pollfd pf;

	write_policy("upstream \"up\" { rate = \"1 per 1s\" grace = \"3s\" }\n");
	start_gate("1s");
	cr_assert_eq(gc_connect(&a, sock), 0);
	cr_assert_eq(gc_acquire(&a, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	gc_close(&a);
	cr_assert_eq(gc_connect(&st, sock), 0);
	cr_assert(status_until(&st, 0, "outcome unknown: a send granted ", 10000) &&
	    strstr(st.status.s, " (grace 3 s)\n"), "%s", st.status.s);
	gc_close(&st);
	cr_assert_eq(gc_connect(&b, sock), 0);
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 0), 0);
	pf = (struct pollfd){ b.fd, POLLIN, 0 };
	cr_assert_eq(poll(&pf, 1, 3000), 0, "granted less than 3 s after the drop");
	cr_assert_eq(gc_wait_reply(&b, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	gc_close(&b);
}

/* ---- no policy file yet ---- */

Test(gate, missing_policy_waits_until_it_appears, .init = setup, .fini = teardown,
    .timeout = 20)
{
	struct gate_client gc;
	struct gp_reply r;
	const char *why;
	struct pollfd pf;

	start_gate("1s");	/* policy.conf does not exist */
	cr_assert(log_has("does not exist: every request waits", 2000));
	cr_assert_eq(gc_connect(&gc, sock), 0);
	cr_assert_eq(gc_acquire(&gc, 1, "up", NULL, NULL, 1, 1, 0), 0);
	assert_waiting(gc.fd, 1, "answered without a policy");
	pf = (struct pollfd){ gc.fd, POLLIN, 0 };
	write_policy("upstream \"up\" { rate = \"1 per 1s\" }\n");
	cr_assert(log_has("loaded (file changed)", 3000));
	cr_assert_eq(poll(&pf, 1, 3000), 1);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	cr_assert(r.verb == GP_R_GRANT && r.tag == 1);
	gc_close(&gc);
}

/* ---- issue 12: what the gate promises ---- */

/* One reply within ms: 1 got it, 0 none in time. */
static int
reply_within(struct gate_client *gc, struct gp_reply *r, int ms)
{
	struct pollfd pf = { gc->fd, POLLIN, 0 };
	const char *why = "";
	int64_t t = now_ms();

	for (;;) {
		int k = gc_next_reply(gc, r, &why);

		cr_assert_geq(k, 0, "%s", why);
		if (k == 1)
			return 1;
		if (poll(&pf, 1, (int)(ms - (now_ms() - t))) <= 0)
			return 0;
		cr_assert_eq(gc_fill(gc), 1, "the gate closed the connection");
	}
}

/* `weir-gate status [json]` (asserts exit 0), malloc'ed. */
static char *
status_of(int json)
{
	char *bin = tl_bin("weir-gate"), *out;
	const char *argv[] = { bin, "-c", wconf, "-s", sock, "status", json ? "json" : NULL, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result res;

	tl_run(&run, &res);
	cr_assert_eq(res.status, 0, "weir-gate status: %s", buf_cstr(&res.err));
	out = xstrdup(buf_cstr(&res.out));
	tl_result_free(&res);
	free(bin);
	return out;
}

/* One send end to end: acquire, wait up to ms for the grant, report. */
static int
one_send(struct gate_client *gc, uint32_t tag, int ms)
{
	struct gp_reply r;

	cr_assert_eq(gc_acquire(gc, tag, "up", NULL, NULL, 1, 1, 1), 0);
	if (!reply_within(gc, &r, ms))
		return 0;
	cr_assert(r.verb == GP_R_GRANT && r.tag == tag, "verb %d", (int)r.verb);
	cr_assert_eq(gc_report_sent(gc, tag, 1, -1), 0);
	cr_assert(reply_within(gc, &r, 5000) && r.verb == GP_R_OK);
	return 1;
}

/* After a kill -9 of the gate, with the default grace (10 min): a grant
 * found open in the journal takes one slot for its interval; it does not
 * push every later send up to restart + 10 min.  "3 per 1s": after the
 * restart 2 slots a second are left, so 12 sends take ~6 s.  Failed
 * before the fix: the third send after the restart waited 10 minutes. */
Test(gate, restart_after_kill9_does_not_stall, .init = setup, .fini = teardown, .timeout = 60)
{
	struct gate_client held, gc;
	struct gp_reply r;
	int64_t t;
	uint32_t i;

	write_policy("upstream \"up\" { rate = \"3 per 1s\" }\n");
	start_gate(NULL);
	cr_assert_eq(gc_connect(&held, sock), 0);
	cr_assert_eq(gc_acquire(&held, 1, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert(reply_within(&held, &r, 5000) && r.verb == GP_R_GRANT);
	stop_gate(SIGKILL);
	gc_close(&held);
	start_gate(NULL);
	cr_assert_eq(gc_connect(&gc, sock), 0);
	t = now_ms();
	for (i = 1; i <= 12; i++)
		cr_assert(one_send(&gc, i, 15000), "send %u after the restart: no grant in 15 s", i);
	cr_log_info("12 sends after the restart in %lld ms", (long long)(now_ms() - t));
	cr_assert_lt(now_ms() - t, 20000);
	gc_close(&gc);
}

/* The new reports over the socket: SENT <at> logged at <at> (the next
 * slot frees one period after it, not after the report); UNKNOWN counts
 * until now + grace; NOMAIL only the connection; AUTHFAIL suspends 5 min
 * with one log line naming the fix, shown in status; RESUME lifts it. */
Test(gate, new_reports, .init = setup, .fini = teardown, .timeout = 60)
{
	struct gate_client gc;
	char *st;
	struct gp_reply r;
	int64_t t, at;

	write_policy("upstream \"up\" { rate = {\"1 per 3s\", \"3 connections per 1h\"} }\n"
	    "upstream \"other\" { rate = \"1 per 1s\" }\n");
	start_gate(NULL);
	cr_assert_eq(gc_connect(&gc, sock), 0);
	/* SENT <at>: the 250 was read 2 s before the report. */
	cr_assert_eq(gc_acquire(&gc, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_GRANT);
	at = now_ms();
	pause_ms(2000);	/* the case: a report 2 s late, not a wait for an event */
	cr_assert_eq(gc_report_sent(&gc, 1, 1, at), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_OK);
	cr_assert_eq(gc_acquire(&gc, 2, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_GRANT);
	t = now_ms();
	cr_log_info("granted %lld ms after <at> + 3 s", (long long)(t - at - 3000));
	cr_assert_geq(t, at + 3000);
	/* The report came 2 s after <at>: a slot freed by the report's
	 * time would come at <at> + 5 s or later. */
	cr_assert_lt(t, at + 4900, "the slot freed %lld ms after the report's <at>",
	    (long long)(t - at));
	/* NOMAIL: the message is given back; connections count (1 of 3). */
	cr_assert_eq(gc_report_nomail(&gc, 2), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_OK);
	cr_assert_eq(gc_acquire(&gc, 3, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert(reply_within(&gc, &r, 1000) && r.verb == GP_R_GRANT, "NOMAIL kept the message");
	/* AUTHFAIL: suspended 300 s, the log names the fix. */
	cr_assert_eq(gc_report_authfail(&gc, 3, "535 5.7.8 Authentication credentials invalid"), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_SUSPENDED);
	cr_assert_eq(r.secs, 300);
	cr_assert(log_has("fix username, secret_file or secret_command of upstream up in weir.conf",
	    3000));
	st = status_of(0);
	cr_assert(strstr(st, "upstream up: suspended until ") != NULL, "%s", st);
	cr_assert(strstr(st, "authentication failed: suspended until") != NULL, "%s", st);
	cr_assert(strstr(st, "window 3 connections per 3600s: 2 logged") != NULL, "%s", st);
	free(st);
	st = status_of(1);
	cr_assert(strstr(st, "\"auth_suspended\":true,\"auth_suspended_until_ms\":") != NULL,
	    "%s", st);
	cr_assert(strstr(st, "\"probe\":true") != NULL);
	free(st);
	/* Nothing for "up" now; RESUME lifts it: one probe. */
	cr_assert_eq(gc_acquire(&gc, 4, "up", NULL, NULL, 0, 0, 1), 0);
	cr_assert(!reply_within(&gc, &r, 300), "granted while suspended");
	cr_assert_eq(gc_resume(&gc, "up"), 0);
	cr_assert(reply_within(&gc, &r, 5000));
	if (r.verb == GP_R_OK) {	/* the answer and the grant: either order */
		cr_assert_eq(r.tag, 0);
		cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_GRANT && r.tag == 4);
	} else {
		cr_assert(r.verb == GP_R_GRANT && r.tag == 4);
		cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_OK && r.tag == 0);
	}
	cr_assert(log_has("upstream up: suspensions lifted (resume)", 3000));
	cr_assert_eq(gc_resume(&gc, "nosuch"), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_ERR && r.code == GP_NOPOLICY);
	/* UNKNOWN on "other" (1 per 1s): counted until now + 10 min. */
	cr_assert_eq(gc_acquire(&gc, 5, "other", NULL, NULL, 1, 1, 0), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_GRANT && r.tag == 5);
	cr_assert_eq(gc_report_unknown(&gc, 5), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_OK);
	cr_assert_eq(gc_acquire(&gc, 6, "other", NULL, NULL, 1, 1, 0), 0);
	cr_assert(!reply_within(&gc, &r, 2500), "granted within the unknown send's interval");
	st = status_of(0);
	cr_assert(strstr(st, "upstream other: active\n  window 1 messages per 1s: 1 logged")
	    != NULL, "%s", st);
	{
		const char *p = strstr(strstr(st, "upstream other"), "(in ");
		long long ms = 0;

		cr_assert(p && sscanf(p, "(in %lld ms)", &ms) == 1, "%s", st);
		cr_assert(ms > 590000 && ms <= 601000, "next grant in %lld ms", ms);
	}
	free(st);
	gc_close(&gc);
}

/* "5 per 30s", five sends, through one client. */
static void
five_sends(void)
{
	struct gate_client gc;
	uint32_t i;

	cr_assert_eq(gc_connect(&gc, sock), 0);
	for (i = 1; i <= 5; i++)
		cr_assert(one_send(&gc, i, 5000), "send %u", i);
	gc_close(&gc);
}

/* A sixth send is not granted within ms, and status says 5 logged. */
static void
sixth_waits(int ms)
{
	struct gate_client gc;
	struct gp_reply r;
	char *st;

	cr_assert_eq(gc_connect(&gc, sock), 0);
	cr_assert_eq(gc_acquire(&gc, 6, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert(!reply_within(&gc, &r, ms), "answered (verb %d): the history was lost",
	    (int)r.verb);
	st = status_of(0);
	cr_assert(strstr(st, "window 5 messages per 30s: 5 logged") != NULL, "%s", st);
	free(st);
	gc_close(&gc);
}

#define POL_UP "upstream \"up\" { rate = \"5 per 30s\" }\n"
#define POL_OTHER "upstream \"other\" { rate = \"1 per 1s\" }\n"

/* Issue 12 item 5: removing the section for a moment (a routine edit)
 * keeps its history; a request meanwhile waits (no ERR NOPOLICY).
 * Failed before: the restored section granted a sixth send at once. */
Test(gate, policy_section_removed_and_restored, .init = setup, .fini = teardown, .timeout = 30)
{
	struct gate_client gc;
	struct gp_reply r;

	write_policy(POL_UP POL_OTHER);
	start_gate(NULL);
	five_sends();
	write_policy(POL_OTHER);
	cr_assert(log_has("loaded (file changed): 1 upstreams", 3000));
	cr_assert_eq(gc_connect(&gc, sock), 0);
	cr_assert_eq(gc_acquire(&gc, 9, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert(!reply_within(&gc, &r, 300), "answered without a policy (verb %d)", (int)r.verb);
	write_policy(POL_UP POL_OTHER);
	cr_assert(log_has("loaded (file changed): 2 upstreams", 3000));
	cr_assert(!reply_within(&gc, &r, 500), "granted over the kept history");
	gc_close(&gc);
	sixth_waits(500);
}

/* A gate started while the policy is broken, or missing, keeps the
 * journal's history and grants nothing until a policy names the
 * upstream.  Failed before: a broken policy at start was exit 2, and
 * with a missing one the history was dropped (a sixth send granted). */
Test(gate, broken_or_missing_policy_at_start_keeps_history, .init = setup, .fini = teardown,
    .timeout = 40)
{
	write_policy(POL_UP);
	start_gate(NULL);
	five_sends();
	stop_gate(SIGTERM);
	tl_write(gatelog, "", 0);	/* log_has() looks at this run only */
	write_policy("upstream \"up\" { rate = \"5 per\" }\n");
	start_gate(NULL);
	cr_assert(log_has("has errors: every request waits until it is fixed", 3000));
	write_policy(POL_UP);
	cr_assert(log_has("loaded (file changed)", 3000));
	sixth_waits(500);
	stop_gate(SIGTERM);
	tl_write(gatelog, "", 0);
	cr_assert_eq(unlink(policy), 0);
	start_gate(NULL);
	cr_assert(log_has("does not exist: every request waits", 3000));
	write_policy(POL_UP);
	cr_assert(log_has("loaded (file changed)", 3000));
	sixth_waits(500);
}

/* Issue 12 item 6: the folder fsync after a compaction's rename fails
 * (EIO, the fault shim: fsyncs 1-2 are the compaction at start, 3 the
 * new file's and 4 the folder's in the first compaction while running,
 * 5 and 6 the next two rewrites').  The gate grants nothing, says so in
 * its log and status, rewrites the journal on a timer and grants again
 * once that worked; the sends answered around it are in the journal at
 * its path (a gate started on it after a kill -9 counts them).  Failed
 * before: the gate logged "compaction failed, keeping the old file" and
 * went on granting, appending to the file the rename had replaced. */
Test(gate, journal_not_durable_fails_closed, .init = setup, .fini = teardown, .timeout = 120)
{
	struct gate_client gc;
	char *st;
	struct gp_reply r;
	uint32_t tag = 0, waiting = 0, i, probe;
	int batch, broken = 0;

	if (getenv("WEIR_FAULTINJ") == NULL)
		cr_skip_test("no fault-injection shim ($WEIR_FAULTINJ; run through tests/run.sh)");
	write_policy("upstream \"up\" { rate = \"1000000 per 1h\" }\n");
	gate_fault = "fsync=4:EIO,fsync=5:EIO,fsync=6:EIO";
	start_gate(NULL);
	gate_fault = NULL;
	cr_assert_eq(gc_connect(&gc, sock), 0);
	for (i = 0; i < 10; i++)
		cr_assert(one_send(&gc, ++tag, 5000));
	/* Refunded grants grow the journal, not the live state, until it
	 * is compacted (over 256 KB). */
	for (batch = 0; batch < 40 && !broken; batch++) {
		uint32_t first = tag + 1, n = 0;

		for (i = 0; i < 400; i++)
			cr_assert_eq(gc_acquire(&gc, ++tag, "up", NULL, NULL, 1, 1, 0), 0);
		while (n < 400 && reply_within(&gc, &r, 1000)) {
			if (r.verb == GP_R_GRANT) {
				cr_assert_eq(gc_report_refund(&gc, r.tag), 0);
				n++;
			} else {
				cr_assert_eq(r.verb, GP_R_OK, "verb %d", (int)r.verb);
			}
		}
		waiting = 400 - n;
		broken = log_has("cannot be made durable", 0);
		cr_assert(broken || waiting == 0, "%u of batch %u not granted", waiting, first);
	}
	cr_assert(broken, "no \"cannot be made durable\" after %d batches", batch);
	cr_assert(log_has("cannot be made durable (compaction: Input/output error)", 0));
	while (reply_within(&gc, &r, 200))	/* the last OKs */
		cr_assert(r.verb == GP_R_OK || r.verb == GP_R_GRANT);
	/* Nothing granted while the journal is not durable. */
	probe = ++tag;
	cr_assert_eq(gc_acquire(&gc, probe, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert(!reply_within(&gc, &r, 500), "granted while the journal is not durable");
	st = status_of(0);
	cr_assert(strstr(st, "journal NOT DURABLE (compaction: Input/output error)") != NULL, "%s",
	    st);
	free(st);
	st = status_of(1);
	cr_assert(strstr(st, "\"journal_durable\":false,\"journal_error\":") != NULL, "%s", st);
	free(st);
	/* The third rewrite works: granted again. */
	cr_assert(log_has("is durable again", 20000), "never durable again");
	for (;;) {
		cr_assert(reply_within(&gc, &r, 5000), "no grant after the journal came back");
		if (r.verb != GP_R_GRANT)
			continue;
		if (r.tag == probe) {
			cr_assert_eq(gc_report_sent(&gc, probe, 1, -1), 0);
			break;
		}
		cr_assert_eq(gc_report_refund(&gc, r.tag), 0);
	}
	while (reply_within(&gc, &r, 300))
		if (r.verb == GP_R_GRANT)
			cr_assert_eq(gc_report_refund(&gc, r.tag), 0);
	gc_close(&gc);
	/* Every send answered is in the journal at its path. */
	stop_gate(SIGKILL);
	start_gate(NULL);
	st = status_of(0);
	cr_assert(strstr(st, "window 1000000 messages per 3600s: 11 logged") != NULL, "%s", st);
	free(st);
}

/* SETTLE: a vanished client's grant, whose outcome comes later through
 * another client (weir-send restarted), is logged at the 250's time:
 * with "1 per 2s" and the default grace the next grant comes 2 s after
 * that time, not 10 minutes after the drop.  A grant still held is its
 * holder's to report; the settlement is journalled (a restart replays
 * no interval for it: fails without the Z record). */
Test(gate, settle_frees_a_dropped_grant, .init = setup, .fini = teardown, .timeout = 30)
{
	struct gate_client a, b, h;
	struct gp_reply r;
	const char *why;
	uint64_t id, held;
	int64_t at;
	char *st;

	write_policy("upstream \"up\" { rate = \"1 per 2s\" }\n");
	start_gate(NULL);
	cr_assert_eq(gc_connect(&h, sock), 0);
	cr_assert_eq(gc_acquire(&h, 1, "up", NULL, NULL, 0, 0, 1), 0);	/* a slot, held */
	cr_assert_eq(gc_wait_reply(&h, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	held = r.id;
	cr_assert_eq(gc_connect(&a, sock), 0);
	cr_assert_eq(gc_acquire(&a, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(r.grace, 600, "the grace in the grant: %u", r.grace);
	id = r.id;
	at = (int64_t)clock_mono_ms();
	gc_close(&a);
	cr_assert_eq(gc_connect(&b, sock), 0);
	cr_assert_eq(gc_settle(&b, "up", held, GP_REFUND, 0, -1, NULL), 0);
	cr_assert_eq(gc_wait_reply(&b, &r, &why), 1);
	cr_assert(r.verb == GP_R_ERR && r.code == GP_STATE, "a held grant was settled");
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 0), 0);
	assert_waiting(b.fd, 1, "granted while the dropped grant counts");
	cr_assert_eq(gc_settle(&b, "up", id, GP_SENT, 1, at, NULL), 0);
	cr_assert_eq(gc_wait_reply(&b, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_OK);
	/* Granted about 2 s after at: the queued request's own reply. */
	cr_assert_eq(gc_wait_reply(&b, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert((int64_t)clock_mono_ms() - at >= 2000, "granted %lld ms after the 250",
	    (long long)((int64_t)clock_mono_ms() - at));
	cr_assert((int64_t)clock_mono_ms() - at < 60000, "not freed by the settlement");
	st = status_of(0);
	cr_assert(strstr(st, "outcome unknown:") == NULL, "%s", st);
	cr_assert(strstr(st, ", unknown settled later 1,") != NULL, "%s", st);
	free(st);
	cr_assert_eq(gc_report_sent(&b, 1, 1, -1), 0);
	cr_assert_eq(gc_wait_reply(&b, &r, &why), 1);
	cr_assert_eq(gc_report_refund(&h, 1), 0);
	cr_assert_eq(gc_wait_reply(&h, &r, &why), 1);
	gc_close(&b);
	gc_close(&h);
	/* A stop writes what is pending (records other than grants ride
	 * along with the next sync, weir-gate(8)). */
	stop_gate(SIGTERM);
	start_gate(NULL);
	st = status_of(1);
	cr_assert(strstr(st, "\"unknown_sends\":[]") != NULL, "%s", st);
	free(st);
}

/* STARTS: a client whose grants are in use only once STARTed (weir-send
 * asks ahead of its run slots): when it goes, a grant it never started
 * is given back at once, one it started counts as unknown. */
Test(gate, unstarted_grants_of_a_vanished_client_refunded, .init = setup, .fini = teardown,
    .timeout = 20)
{
	struct gate_client a, b;
	struct gp_reply r;
	const char *why;
	char *st;
	int i;

	write_policy("upstream \"up\" { rate = \"2 per 1h\" }\n");
	start_gate(NULL);
	cr_assert_eq(gc_connect(&a, sock), 0);
	cr_assert_eq(gc_starts(&a), 0);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_OK);
	cr_assert_eq(gc_acquire(&a, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_acquire(&a, 2, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(gc_start(&a, 2), 0);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert(r.verb == GP_R_OK && r.tag == 2);
	cr_assert_eq(gc_start(&a, 7), 0);
	cr_assert_eq(gc_wait_reply(&a, &r, &why), 1);
	cr_assert(r.verb == GP_R_ERR && r.code == GP_TAG);
	gc_close(&a);
	/* One slot of "2 per 1h" comes back: a grant now, not in an hour. */
	cr_assert_eq(gc_connect(&b, sock), 0);
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 0), 0);
	cr_assert(reply_within(&b, &r, 5000), "the unstarted grant was not given back");
	cr_assert_eq(r.verb, GP_R_GRANT);
	for (i = 0; i < 50; i++) {
		st = status_of(0);
		if (strstr(st, "refunded 1, throttled 0, unknown 1,") != NULL)
			break;
		free(st);
		st = NULL;
		pause_ms(20);
	}
	cr_assert(st != NULL, "the totals never said one refunded, one unknown");
	free(st);
	gc_close(&b);
}

/* REFUSED (weir-remote -K found an OAuth upstream's refresh token dead,
 * with no send): the upstream suspended as by AUTHFAIL, its log line
 * and status naming the login (weir.conf gives it an oauth section), no
 * window charged, no report counted; a second one while suspended
 * keeps the suspension as it is; an unknown upstream is NOPOLICY. */
Test(gate, refused_suspends_without_a_send, .init = setup, .fini = teardown, .timeout = 30)
{
	static const char conf[] = "upstream \"isp\" {\n  host = \"smtp.example.net\"\n"
	    "  username = \"me@example.net\"\n  oauth {\n    provider = microsoft\n"
	    "    client_id = \"x\"\n  }\n}\n";
	struct gate_client gc;
	struct gp_reply r;
	struct buf b = BUF_INIT;
	char *st, *p;
	size_t n = 0;

	tl_write(wconf, conf, sizeof conf - 1);
	write_policy("upstream \"isp\" { rate = {\"1 per 3s\", \"3 connections per 1h\"} }\n");
	start_gate(NULL);
	cr_assert_eq(gc_connect(&gc, sock), 0);
	cr_assert_eq(gc_refused(&gc, "isp", "keep-alive: invalid_grant: dead"), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_OK && r.tag == 0);
	cr_assert(log_has("upstream isp: authentication failed: keep-alive: invalid_grant: dead; "
	    "run weir auth login isp (the login lifts the suspension", 3000));
	st = status_of(0);
	cr_assert(strstr(st, "upstream isp: suspended until ") &&
	    strstr(st, "authentication failed: suspended until") &&
	    strstr(st, "keep-alive: invalid_grant: dead; run weir auth login isp (") &&
	    strstr(st, "window 3 connections per 3600s: 0 logged") &&
	    strstr(st, "secret_file") == NULL, "%s", st);
	free(st);
	st = status_of(1);
	cr_assert(strstr(st, "\"auth_suspended\":true") && strstr(st, "\"authfail\":0"), "%s", st);
	free(st);
	/* Again, while suspended: kept, no second episode. */
	cr_assert_eq(gc_refused(&gc, "isp", "keep-alive: invalid_grant: dead again"), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_OK);
	cr_assert_eq(gc_refused(&gc, "nosuch", "x"), 0);
	cr_assert(reply_within(&gc, &r, 5000) && r.verb == GP_R_ERR && r.code == GP_NOPOLICY);
	cr_assert_eq(read_file_at(AT_FDCWD, gatelog, &b, 1 << 20), 0);
	buf_addc(&b, '\0');
	for (p = b.s; (p = strstr(p, "authentication failed")) != NULL; p++)
		n++;
	cr_assert_eq(n, 1, "%zu episodes:\n%s", n, b.s);
	cr_assert(strstr(b.s, "dead again") == NULL, "%s", b.s);
	buf_free(&b);
	gc_close(&gc);
}
