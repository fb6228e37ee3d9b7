/*
 * shared_relay_test.c: three whole weir instances (each its own queue,
 * weir-gate with its journal, weir-send and weir-remote, mail injected
 * with the real sendmail) share one upstream's windows through one real
 * redis-server, started by the test on a free loopback TCP port, and
 * send through ONE stand-in upstream (tests/upstream/upstream.py, with
 * STARTTLS and AUTH) under "5 per 3s" (policy.conf's
 * shared = "redis://127.0.0.1:PORT/0").  Every count is taken at the
 * upstream's own clock (the "time" of its "data" events):
 *
 *   three_hosts_one_window  45 messages (15 per host) queued at once: no
 *                           3 s window holds more than 5, every message
 *                           arrives exactly once, utilisation >= 95 %
 *                           (as scripts/bench/relay.sh: K*P / (t[K*N+1] -
 *                           t[1]), N = 5, P = 3 s, K = 8), no bounce
 *   kill9_one_host          kill -9 of one host's weir-gate and weir-send
 *                           mid-run, both restarted as `weir run` does
 *                           (weir-gate without -g: 10 minutes of grace)
 *   redis_down_10s          Redis stopped (SIGTERM; it keeps its history
 *                           in an AOF) for 10 s mid-run, then started on
 *                           the same port and folder: nothing is
 *                           accepted by the upstream from 2 s after the
 *                           stop until Redis is back
 *   redis_restarts_empty    Redis killed and started empty (no
 *                           persistence) mid-run: the gates write their
 *                           own history back before anything is granted
 * In the three failure cases: the window holds at the upstream, every
 * message arrives at least once (a repeat only of what was in flight at
 * a kill), the queues drain and pass queue-check, no bounce.
 *
 * Waits are for events (the upstream's record, log lines, empty queues),
 * bounded; the 10 s outage is the scenario itself.  Every process started
 * is killed at the end, even on failure: Redis here, the rest by
 * rt_teardown (relay_helpers.h).  tests/run.sh runs the four tests at
 * once (they mostly wait); the binary then takes as long as its longest
 * test, redis_down_10s or the 45-message one (8 periods of 3 s).
 */
#include <criterion/criterion.h>
#include <errno.h>
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

#define NHOST 3
#define SENDER "list@src.example"
#define LIMIT 5
#define PER 3.0

static struct rt t[NHOST];
static pid_t rpid;
static unsigned rport;
static char *rdir;

/* redis-server on 127.0.0.1:rport, in rdir, with an AOF or with no
 * persistence at all. */
static void
redis_start(int aof)
{
	const char *extra[] = { "--appendonly", aof ? "yes" : "no", "--appendfsync", "always",
		NULL };

	rpid = tl_redis_start_tcp(rdir, rport, extra);
}

/* Stop Redis with sig and reap it. */
static void
redis_stop(int sig)
{
	if (rpid > 0) {
		kill(rpid, sig);
		while (waitpid(rpid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	rpid = 0;
}

static void
setup(void)
{
	int i;

	for (i = 0; i < NHOST; i++)
		rt_setup(&t[i], 2);
	rdir = xasprintf("%s/redis", t[0].s.qt.tmp);
	cr_assert(mkdir(rdir, 0700) == 0);
	rport = tl_free_port();
}

static void
teardown(void)
{
	int i;

	/* Ours first, so that no rt_teardown kills another's processes
	 * behind its back. */
	for (i = 0; i < NHOST; i++) {
		rt_send_kill9(&t[i]);
		rt_gate_kill9(&t[i]);
	}
	redis_stop(SIGKILL);
	for (i = NHOST - 1; i >= 0; i--)
		rt_teardown(&t[i]);
	free(rdir);
}

TestSuite(shared_relay, .init = setup, .fini = teardown, .timeout = 150);

/* The upstream (in t[0]'s folder), Redis, and each host's weir.conf,
 * policy and weir-gate (-g grace; NULL: as `weir run` starts it). */
static void
start_hosts(int aof, const char *grace)
{
	char pol[256];
	int i;

	rt_upstream_start(&t[0], "good", NULL, 0);
	redis_start(aof);
	snprintf(pol, sizeof pol, "upstream \"isp\" {\n  rate = {\"%d per %.0fs\"}\n"
	    "  shared = \"redis://127.0.0.1:%u/0\"\n}\n", LIMIT, PER, rport);
	for (i = 0; i < NHOST; i++) {
		char *mine = t[i].certs;

		/* One upstream: its port, and its CA, for every host. */
		t[i].port = t[0].port;
		t[i].certs = t[0].certs;
		rt_conf_upstream(&t[i], NULL);
		t[i].certs = mine;
		rt_policy(&t[i], pol);
		rt_gate_start(&t[i], grace);
	}
}

/* n messages per host, each to its own recipient h<host>-<k>@dst.example. */
static char **
queue_mail(size_t n)
{
	char **rcpt = xcalloc(NHOST * n, sizeof *rcpt);
	char msg[128];
	size_t i, k;

	for (i = 0; i < NHOST; i++)
		for (k = 0; k < n; k++) {
			const char *r[1];

			rcpt[i * n + k] = xasprintf("h%zu-%zu@dst.example", i, k);
			r[0] = rcpt[i * n + k];
			snprintf(msg, sizeof msg, "Subject: host %zu note %zu\n\nbody\n", i, k);
			rt_sendmail(&t[i], SENDER, r, 1, msg);
		}
	return rcpt;
}

static void
free_rcpts(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void
wait_ndata(size_t n, int ms)
{
	cr_assert(rt_wait(rt_ndata_at_least, &t[0], &n, ms), "only %zu of %zu sends at the upstream "
	    "after %d ms", rt_rec_ndata(&t[0]), n, ms);
}

/* How many times a gate's log holds what. */
static size_t
gate_log_count(int i, const char *what)
{
	struct buf b = BUF_INIT;
	const char *p;
	size_t n = 0;

	if (access(t[i].gate_log, F_OK) != 0)
		return 0;
	tl_read(t[i].gate_log, &b);
	for (p = buf_cstr(&b); (p = strstr(p, what)) != NULL; p++)
		n++;
	buf_free(&b);
	return n;
}

struct logwait {
	const char *what;
	size_t n;
};

static int
every_gate_logged(struct rt *unused, void *arg)
{
	const struct logwait *w = arg;
	int i;

	(void)unused;
	for (i = 0; i < NHOST; i++)
		if (gate_log_count(i, w->what) < w->n)
			return 0;
	return 1;
}

/* Every gate's log holds what at least n times, within ms. */
static void
wait_gates_logged(const char *what, size_t n, int ms)
{
	struct logwait w = { what, n };

	if (!rt_wait(every_gate_logged, &t[0], &w, ms)) {
		struct buf b = BUF_INIT;
		int i;

		for (i = 0; i < NHOST; i++)
			if (gate_log_count(i, what) < n) {
				tl_read(t[i].gate_log, &b);
				break;
			}
		cr_assert_fail("gate %d never logged \"%s\" %zu times:\n%s", i, what, n,
		    buf_cstr(&b));
	}
}

static int
all_drained(struct rt *unused, void *arg)
{
	int i;

	(void)unused;
	(void)arg;
	for (i = 0; i < NHOST; i++)
		if (!rt_drained(&t[i], NULL))
			return 0;
	return 1;
}

/* Every queue drained within ms; a deliverer that crashed (a kill, a
 * gate gone) is retried on qmail's schedule, so `weir flush` every 3 s
 * asks for it now. */
static void
wait_all_drained(int ms, int flush)
{
	int waited = 0;

	while (!rt_wait(all_drained, &t[0], NULL, flush ? 3000 : ms)) {
		int i;

		waited += flush ? 3000 : ms;
		if (waited >= ms) {
			for (i = 0; i < NHOST; i++)
				if (!rt_drained(&t[i], NULL))
					break;
			cr_assert_fail("host %d not drained after %d ms:\n...%s", i, ms,
			    rt_send_logs_tail(&t[i], 4000));
		}
		for (i = 0; i < NHOST; i++)
			rt_flush(&t[i]);
	}
}

/* Long-run utilisation at the upstream, as scripts/bench/relay.sh: with
 * N per period P, send #K*N+1 should come K periods after send #1. */
static double
utilisation(const struct rt_rec *r, double *span)
{
	double *tv = xcalloc(r->n, sizeof *tv), u, tmp;
	size_t i, j, k;

	for (i = 0; i < r->n; i++)
		tv[i] = r->v[i].time;
	for (i = 1; i < r->n; i++)
		for (j = i; j > 0 && tv[j - 1] > tv[j]; j--) {
			tmp = tv[j];
			tv[j] = tv[j - 1];
			tv[j - 1] = tmp;
		}
	k = (r->n - 1) / LIMIT;
	*span = tv[k * LIMIT] - tv[0];
	u = (double)k * PER / *span;
	free(tv);
	return u;
}

/* Every address at least once (exactly once when exact); repeats only
 * of whole transactions; returns how many repeats. */
static size_t
assert_delivered(const struct rt_rec *r, char **rcpt, size_t n, int exact)
{
	size_t i, extra = 0;

	for (i = 0; i < n; i++) {
		size_t c = rt_rec_count(r, SENDER, rcpt[i]);

		cr_assert(c >= 1, "<%s> never delivered", rcpt[i]);
		cr_assert(!exact || c == 1, "<%s> delivered %zu times", rcpt[i], c);
		extra += c - 1;
	}
	cr_assert_eq(r->n, n + extra, "%zu transactions for %zu recipients and %zu repeats",
	    r->n, n, extra);
	return extra;
}

static void
assert_hosts_sound(const struct rt_rec *r)
{
	int i;

	for (i = 0; i < NHOST; i++) {
		rt_assert_no_bounce(&t[i], r);
		rt_assert_queue_sound(&t[i]);
	}
}

static void
start_sends(void)
{
	int i;

	for (i = 0; i < NHOST; i++)
		rt_send_start(&t[i]);
}

#define E2E_PER_HOST 15

Test(shared_relay, three_hosts_one_window, .timeout = 240)
{
	char **rcpt;
	struct rt_rec r;
	size_t worst, i, from[NHOST] = { 0 };
	double util, span;

	start_hosts(0, "2s");
	rcpt = queue_mail(E2E_PER_HOST);
	start_sends();
	wait_ndata(NHOST * E2E_PER_HOST, 120000);
	wait_all_drained(20000, 0);
	rt_rec_load(&t[0], &r);
	assert_delivered(&r, rcpt, NHOST * E2E_PER_HOST, 1);
	worst = rt_assert_window(&r, LIMIT, PER);
	cr_assert_eq(worst, LIMIT, "at most %zu in any 3 s with a backlog", worst);
	util = utilisation(&r, &span);
	/* Each host sent its share: the windows were shared, not split. */
	for (i = 0; i < r.n; i++)
		from[r.v[i].rcpts[0][1] - '0']++;
	rt_say("shared_relay: 3 hosts, %zu sends, worst 3 s window %zu (limit %d), utilisation "
	    "%.2f %% (send #%d %.3f s after #1), per host %zu/%zu/%zu", r.n, worst, LIMIT,
	    util * 100, (int)((r.n - 1) / LIMIT * LIMIT + 1), span, from[0], from[1], from[2]);
	cr_assert(util >= 0.95, "utilisation %.2f %% (send #%d came %.3f s after #1)", util * 100,
	    (int)((r.n - 1) / LIMIT * LIMIT + 1), span);
	cr_assert(r.nmail_unsafe == 0);
	assert_hosts_sound(&r);
	rt_rec_free(&r);
	free_rcpts(rcpt, NHOST * E2E_PER_HOST);
}

#define FAIL_PER_HOST 10

Test(shared_relay, kill9_one_host)
{
	char **rcpt;
	struct rt_rec r;
	size_t extra, i, after = 0;
	double back;

	start_hosts(0, NULL);
	rcpt = queue_mail(FAIL_PER_HOST);
	start_sends();
	wait_ndata(8, 30000);
	rt_gate_kill9(&t[1]);
	rt_send_kill9(&t[1]);
	back = rt_now();
	/* As `weir run` restarts them: the gate first, on its journal. */
	rt_gate_start(&t[1], NULL);
	rt_send_start(&t[1]);
	wait_all_drained(90000, 1);
	rt_rec_load(&t[0], &r);
	/* A repeat only of what host 1 had in flight (concurrency 2). */
	extra = assert_delivered(&r, rcpt, NHOST * FAIL_PER_HOST, 0);
	cr_assert(extra <= 2, "%zu repeats after one kill", extra);
	/* Host 1's mail resumed. */
	for (i = 0; i < r.n; i++)
		after += r.v[i].time > back && r.v[i].rcpts[0][1] == '1';
	cr_assert(after >= 1, "nothing from host 1 after its restart");
	rt_assert_window(&r, LIMIT, PER);
	assert_hosts_sound(&r);
	rt_say("shared_relay: kill -9 of one host's gate and send: %zu sends, %zu repeated", r.n,
	    extra);
	rt_rec_free(&r);
	free_rcpts(rcpt, NHOST * FAIL_PER_HOST);
}

Test(shared_relay, redis_down_10s)
{
	char **rcpt;
	struct rt_rec r;
	double stop_at, back_at;
	size_t i, during = 0;

	start_hosts(1, "2s");
	rcpt = queue_mail(FAIL_PER_HOST);
	start_sends();
	wait_ndata(8, 30000);
	redis_stop(SIGTERM);
	stop_at = rt_now();
	wait_gates_logged("unreachable", 1, 5000);
	/* The outage itself: its 10 s are the case, not a wait for an event. */
	sleep(10);
	back_at = rt_now();
	redis_start(1);
	wait_gates_logged("answers again", 1, 10000);
	wait_all_drained(90000, 1);
	rt_rec_load(&t[0], &r);
	/* Closed, not open: only what was granted before the stop may still
	 * have reached the upstream (it was in flight). */
	for (i = 0; i < r.n; i++)
		if (r.v[i].time > stop_at + 2.0 && r.v[i].time < back_at)
			during++;
	cr_assert_eq(during, 0, "%zu sends accepted while Redis was down", during);
	assert_delivered(&r, rcpt, NHOST * FAIL_PER_HOST, 1);
	rt_assert_window(&r, LIMIT, PER);
	assert_hosts_sound(&r);
	rt_rec_free(&r);
	free_rcpts(rcpt, NHOST * FAIL_PER_HOST);
}

Test(shared_relay, redis_restarts_empty)
{
	char **rcpt;
	struct rt_rec r;

	start_hosts(0, "2s");
	rcpt = queue_mail(FAIL_PER_HOST);
	start_sends();
	wait_ndata(8, 30000);
	redis_stop(SIGKILL);
	redis_start(0);
	/* Each gate writes its own recent sends back (once at its start,
	 * once more now). */
	wait_gates_logged("wrote back this host's", 2, 10000);
	wait_all_drained(90000, 1);
	rt_rec_load(&t[0], &r);
	assert_delivered(&r, rcpt, NHOST * FAIL_PER_HOST, 1);
	rt_assert_window(&r, LIMIT, PER);
	assert_hosts_sound(&r);
	rt_rec_free(&r);
	free_rcpts(rcpt, NHOST * FAIL_PER_HOST);
}
