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
 *   quota_reply_spills_at_every_host
 *                           host 0 gets Microsoft 365's quota reply at
 *                           RCPT and suspends the shared upstream for a
 *                           quota's 2 h; host 1 (its isp section with
 *                           fallback = "backup", fallback_when =
 *                           {"quota"}) sends its mail through its backup
 *                           at once, none to isp, and its gate and
 *                           `weir status` call the suspension a quota's
 *                           (before, host 1 saw only "suspended" in the
 *                           store: its mail waited the 2 h)
 *   resume_at_one_host_lifts_it_where_it_was_met
 *                           `weir resume isp` at host 1 lifts host 0's
 *                           quota at host 0 too: its waiting mail goes at
 *                           once, and the lift is journalled
 *   lost_suspension_written_back_not_lifted
 *                           the key deleted (no RESUME), then Redis
 *                           restarted empty: host 0 stays suspended and
 *                           writes it back; host 1 sees it again
 *   shorter_throttle_keeps_the_quota
 *                           host 2's 5-minute throttle, met after host 0's
 *                           quota, leaves the quota in the store
 * In the three failure cases: the window holds at the upstream, every
 * message arrives at least once (a repeat only of what was in flight at
 * a kill), the queues drain and pass queue-check, no bounce.
 *
 * Waits are for events (the upstream's record, log lines, empty queues),
 * bounded; the 10 s outage and the 6 s final dot are the scenarios
 * themselves.  Every process started is killed at the end, even on
 * failure: Redis here, the rest by rt_teardown (relay_helpers.h).
 * tests/run.sh runs the tests at once (they mostly wait); the binary
 * then takes as long as its longest test, redis_down_10s or the
 * 45-message one (8 periods of 3 s).
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
#include "hosts_helpers.h"

#define NHOST 3
#define LIMIT 5
#define PER 3.0

static struct rt t[NHOST];
static struct rt_peer bk;	/* quota_reply_spills_at_every_host's backup */
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
	memset(&bk, 0, sizeof bk);
	rdir = xasprintf("%s/redis", t[0].s.qt.tmp);
	cr_assert(mkdir(rdir, 0700) == 0);
	rport = tl_free_port();
}

static void
teardown(void)
{
	hs_teardown(t, NHOST);
	rt_peer_free(&bk);
	redis_stop(SIGKILL);
	free(rdir);
}

TestSuite(shared_relay, .init = setup, .fini = teardown, .timeout = 150);

/* Redis, the upstream, and each host's weir.conf, policy and weir-gate
 * (-g grace; NULL: as `weir run` starts it). */
static void
start_hosts(int aof, const char *grace)
{
	char pol[256];

	redis_start(aof);
	snprintf(pol, sizeof pol, "upstream \"isp\" {\n  rate = {\"%d per %.0fs\"}\n"
	    "  shared = \"redis://127.0.0.1:%u/0\"\n}\n", LIMIT, PER, rport);
	hs_start(t, NHOST, pol, grace);
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

#define E2E_PER_HOST 15

Test(shared_relay, three_hosts_one_window, .timeout = 240)
{
	char **rcpt;
	struct rt_rec r;
	size_t worst, i, from[NHOST] = { 0 };
	double util, span;

	start_hosts(0, "2s");
	rcpt = hs_queue_mail(t, NHOST, E2E_PER_HOST);
	hs_start_sends(t, NHOST);
	hs_wait_ndata(t, NHOST * E2E_PER_HOST, 120000);
	hs_wait_all_drained(t, NHOST, 20000, 0);
	rt_rec_load(&t[0], &r);
	hs_assert_delivered(&r, rcpt, NHOST * E2E_PER_HOST, 1);
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
	hs_assert_sound(t, NHOST, &r);
	rt_rec_free(&r);
	hs_free_rcpts(rcpt, NHOST * E2E_PER_HOST);
}

#define FAIL_PER_HOST 10

Test(shared_relay, kill9_one_host)
{
	char **rcpt;
	struct rt_rec r;
	size_t extra, i, after = 0;
	double back;

	start_hosts(0, NULL);
	rcpt = hs_queue_mail(t, NHOST, FAIL_PER_HOST);
	hs_start_sends(t, NHOST);
	hs_wait_ndata(t, 8, 30000);
	rt_gate_kill9(&t[1]);
	rt_send_kill9(&t[1]);
	back = rt_now();
	/* As `weir run` restarts them: the gate first, on its journal. */
	rt_gate_start(&t[1], NULL);
	rt_send_start(&t[1]);
	hs_wait_all_drained(t, NHOST, 90000, 1);
	rt_rec_load(&t[0], &r);
	/* A repeat only of what host 1 had in flight (concurrency 2). */
	extra = hs_assert_delivered(&r, rcpt, NHOST * FAIL_PER_HOST, 0);
	cr_assert(extra <= 2, "%zu repeats after one kill", extra);
	/* Host 1's mail resumed. */
	for (i = 0; i < r.n; i++)
		after += r.v[i].time > back && r.v[i].rcpts[0][1] == '1';
	cr_assert(after >= 1, "nothing from host 1 after its restart");
	rt_assert_window(&r, LIMIT, PER);
	hs_assert_sound(t, NHOST, &r);
	rt_say("shared_relay: kill -9 of one host's gate and send: %zu sends, %zu repeated", r.n,
	    extra);
	rt_rec_free(&r);
	hs_free_rcpts(rcpt, NHOST * FAIL_PER_HOST);
}

Test(shared_relay, redis_down_10s)
{
	char **rcpt;
	struct rt_rec r;
	double stop_at, back_at;
	size_t i, during = 0;

	start_hosts(1, "2s");
	rcpt = hs_queue_mail(t, NHOST, FAIL_PER_HOST);
	hs_start_sends(t, NHOST);
	hs_wait_ndata(t, 8, 30000);
	redis_stop(SIGTERM);
	stop_at = rt_now();
	hs_wait_gates_logged(t, NHOST, "unreachable", 1, 5000);
	/* The outage itself: its 10 s are the case, not a wait for an event. */
	sleep(10);
	back_at = rt_now();
	redis_start(1);
	hs_wait_gates_logged(t, NHOST, "answers again", 1, 10000);
	hs_wait_all_drained(t, NHOST, 90000, 1);
	rt_rec_load(&t[0], &r);
	/* Closed, not open: only what was granted before the stop may still
	 * have reached the upstream (it was in flight). */
	for (i = 0; i < r.n; i++)
		if (r.v[i].time > stop_at + 2.0 && r.v[i].time < back_at)
			during++;
	cr_assert_eq(during, 0, "%zu sends accepted while Redis was down", during);
	hs_assert_delivered(&r, rcpt, NHOST * FAIL_PER_HOST, 1);
	rt_assert_window(&r, LIMIT, PER);
	hs_assert_sound(t, NHOST, &r);
	rt_rec_free(&r);
	hs_free_rcpts(rcpt, NHOST * FAIL_PER_HOST);
}

Test(shared_relay, redis_restarts_empty)
{
	char **rcpt;
	struct rt_rec r;

	start_hosts(0, "2s");
	rcpt = hs_queue_mail(t, NHOST, FAIL_PER_HOST);
	hs_start_sends(t, NHOST);
	hs_wait_ndata(t, 8, 30000);
	redis_stop(SIGKILL);
	redis_start(0);
	/* Each gate writes its own recent sends back (once at its start,
	 * once more now). */
	hs_wait_gates_logged(t, NHOST, "wrote back this host's", 2, 10000);
	hs_wait_all_drained(t, NHOST, 90000, 1);
	rt_rec_load(&t[0], &r);
	hs_assert_delivered(&r, rcpt, NHOST * FAIL_PER_HOST, 1);
	rt_assert_window(&r, LIMIT, PER);
	hs_assert_sound(t, NHOST, &r);
	rt_rec_free(&r);
	hs_free_rcpts(rcpt, NHOST * FAIL_PER_HOST);
}

/* Microsoft 365's reply to a mailbox over its sending quota: "Message
 * storage and concurrent connection throttling for SMTP Authenticated
 * Submission" (Microsoft Learn, Exchange Online troubleshooting), read
 * 2026-11-28; tests/data/replies.txt has it as a quota at RCPT. */
#define MS_QUOTA "554 5.2.0 STOREDRV.Submission.Exception:SubmissionQuotaExceededException; " \
	"Failed to process message due to a permanent exception with message Cannot submit " \
	"message."

/* `weir status` of host h (exit 0), malloc'ed. */
static char *
weir_status(struct rt *h)
{
	const char *args[] = { "-c", h->s.qt.conf, "status" };
	struct tl_result r = rt_run(h, "weir", args, 3, NULL);
	char *out;

	cr_assert_eq(r.status, 0, "weir status: exit %d:\n%s%s", r.status, buf_cstr(&r.out),
	    buf_cstr(&r.err));
	out = xstrdup(buf_cstr(&r.out));
	tl_result_free(&r);
	return out;
}

/* Host h's upstream isp at host 0's stand-in (host 0's CA), with the
 * lines extra. */
static void
conf_isp_of_host_0(struct rt *h, const char *extra)
{
	char *certs = h->certs;

	h->certs = t[0].certs;
	rt_conf_upstream_at(h, "isp", t[0].port, extra);
	h->certs = certs;
}

/* Host 0 sends to q@dst.example, whose RCPT its stand-in answers with
 * Microsoft 365's quota reply (MS_QUOTA), and is suspended. */
static void
host_0_meets_the_quota(void)
{
	const char *q = "q@dst.example";

	rt_sendmail(&t[0], HS_SENDER, &q, 1, "Subject: quota\n\nbody\n");
	rt_send_start(&t[0]);
	cr_assert(rt_wait(rt_gate_status_has, &t[0], (void *)"SubmissionQuotaExceeded", 30000),
	    "host 0 not suspended:\n%s", rt_send_logs_tail(&t[0], 3000));
}

Test(shared_relay, quota_reply_spills_at_every_host)
{
	const char *flags[] = { "--reply", "rcpt:q@dst.example=" MS_QUOTA, NULL };
	char **mine = rt_addrs("b", "dst.example", 0, 3), *pol, *st;
	struct rt_peer_count three = { &bk, 3 };
	struct rt_rec ri, rb;
	const char *p;
	double queued;
	size_t i;

	redis_start(0);
	rt_upstream_start(&t[0], "good", flags, 0);
	rt_peer_start(&t[1], &bk, "backup", NULL, 0);
	pol = xasprintf("upstream \"isp\" {\n  rate = {\"10 per 1s\"}\n"
	    "  shared = \"redis://127.0.0.1:%u/0\"\n}\n"
	    "upstream \"backup\" { rate = {\"10 per 1s\"} }\n", rport);
	/* Host 0: isp alone.  Host 1: isp (host 0's, with its CA), its
	 * backup when isp's quota is spent, and the backup. */
	rt_conf_upstream(&t[0], NULL);
	conf_isp_of_host_0(&t[1], "  fallback = {\"backup\"}\n  fallback_when = {\"quota\"}\n");
	rt_conf_upstream_at(&t[1], "backup", bk.port, "");
	for (i = 0; i < 2; i++) {
		rt_policy(&t[i], pol);
		rt_gate_start(&t[i], "2s");
	}
	free(pol);
	host_0_meets_the_quota();
	cr_assert_eq(hs_gate_log_count(&t[0], "suspended for 7200 s (its quota)"), 1);
	/* Host 1's mail, after the suspension is in the store. */
	rt_send_start(&t[1]);
	queued = rt_now();
	for (i = 0; i < 3; i++)
		rt_sendmail(&t[1], HS_SENDER, (const char *const *)&mine[i], 1,
		    "Subject: host 1\n\nbody\n");
	cr_assert(rt_wait(rt_peer_ndata_at_least, &t[1], &three, 20000),
	    "host 1's backup got %zu of 3: its mail waited for isp's quota\n%s",
	    rt_rec_ndata_file(bk.record), rt_send_logs_tail(&t[1], 3000));
	rt_wait_empty(&t[1], 20000);
	rt_rec_load(&t[0], &ri);
	rt_rec_load_file(bk.record, &rb);
	cr_assert_eq(rb.n, 3);
	rt_say("shared_relay: host 1's 3 messages at its backup %.2f s after they were queued",
	    rb.v[2].time - queued);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(rt_rec_count(&rb, NULL, mine[i]), 1, "%s at the backup", mine[i]);
		cr_assert_eq(rt_rec_count(&ri, NULL, mine[i]), 0, "%s at isp", mine[i]);
	}
	cr_assert_eq(ri.n, 0, "isp took %zu", ri.n);
	/* Host 1's gate and `weir status` say why: the quota host 0 met. */
	st = rt_gate_status(&t[1]);
	p = strstr(st, "upstream isp: ");
	rt_say("shared_relay: host 1's gate: %.*s", p ? (int)strcspn(p, "\n") : 0, p ? p : "");
	cr_assert(strstr(st, "upstream isp: suspended until ") &&
	    strstr(st, "its quota): " MS_QUOTA) && strstr(st, "  met by "), "%s", st);
	free(st);
	st = weir_status(&t[1]);
	cr_assert(strstr(st, "isp: passed over: quota") &&
	    strstr(st, " (its quota): it said " MS_QUOTA), "%s", st);
	free(st);
	/* Host 0's message waits for isp; nobody bounced anything. */
	st = rt_mailq(&t[0]);
	cr_assert(strstr(st, "q@dst.example"), "host 0's message is not queued:\n%s", st);
	free(st);
	rt_assert_no_bounce(&t[0], &ri);
	rt_assert_no_bounce(&t[1], &rb);
	rt_rec_free(&ri);
	rt_rec_free(&rb);
	rt_addrs_free(mine, 3);
}

/* redis-cli (redis-server's package depends on redis-tools) against the
 * test's Redis: its output, malloc'ed; asserts exit 0. */
static char *
redis_cli(const char *cmd, const char *key)
{
	char port[16];
	const char *argv[] = { "/usr/bin/redis-cli", "-p", port, cmd, key, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	char *out;

	snprintf(port, sizeof port, "%u", rport);
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "redis-cli %s %s: exit %d: %s", cmd, key, r.status,
	    buf_cstr(&r.err));
	out = xstrdup(buf_cstr(&r.out));
	tl_result_free(&r);
	return out;
}

#define SUSP_KEY "weir:{isp}:susp"

/* Host h's gate status does not hold s. */
static int
gate_status_lacks(struct rt *h, void *s)
{
	char *st = rt_gate_status(h);
	int no = strstr(st, s) == NULL;

	free(st);
	return no;
}

/* Host h's gate log holds what at least n times (arg: struct log_n). */
struct log_n {
	const char *what;
	size_t n;
};

static int
gate_logged(struct rt *h, void *arg)
{
	const struct log_n *l = arg;

	return hs_gate_log_count(h, l->what) >= l->n;
}

/*
 * Hosts 0..n-1 on one isp stand-in (host 0's; its CA for all) under
 * "10 per 1s", shared; host 0's send to q@dst.example meets Microsoft
 * 365's quota reply; returns once host 0 is suspended and host 1 has
 * the store's copy.  Redis runs already.
 */
static void
quota_met_at_host_0(size_t n)
{
	const char *flags[] = { "--reply", "rcpt:q@dst.example=" MS_QUOTA, NULL };
	char *pol;
	size_t i;

	rt_upstream_start(&t[0], "good", flags, 0);
	pol = xasprintf("upstream \"isp\" {\n  rate = {\"10 per 1s\"}\n"
	    "  shared = \"redis://127.0.0.1:%u/0\"\n}\n", rport);
	for (i = 0; i < n; i++) {
		conf_isp_of_host_0(&t[i], "");
		rt_policy(&t[i], pol);
		rt_gate_start(&t[i], "2s");
	}
	free(pol);
	host_0_meets_the_quota();
	cr_assert(rt_wait(rt_gate_status_has, &t[1], (void *)"  met by ", 10000),
	    "host 1 has no copy of host 0's quota");
}

/*
 * `weir resume isp` at host 1 lifts the quota host 0 met, at host 0: its
 * waiting mail goes at once, its status says no suspension, and the
 * lift is in its journal (its gate, restarted, is not suspended).
 * Before, RESUME at host 1 deleted the store's key only: host 0 kept its
 * own quota (journalled) for its 2 h.
 */
Test(shared_relay, resume_at_one_host_lifts_it_where_it_was_met)
{
	const char *args[] = { "-c", t[1].s.qt.conf, "resume", "isp" };
	const char *ok = "ok@dst.example";
	struct tl_result r;
	double resumed;
	char *st;

	redis_start(0);
	quota_met_at_host_0(2);
	/* The stand-in takes everything from now on (on the same port). */
	rt_upstream_stop(&t[0]);
	rt_upstream_start(&t[0], "good", NULL, t[0].port);
	rt_sendmail(&t[0], HS_SENDER, &ok, 1, "Subject: waits\n\nbody\n");
	r = rt_run(&t[1], "weir", args, 4, NULL);
	cr_assert_eq(r.status, 0, "weir resume at host 1: exit %d: %s", r.status,
	    buf_cstr(&r.err));
	tl_result_free(&r);
	resumed = rt_now();
	cr_assert(rt_wait(rt_delivered_to, &t[0], (void *)ok, 20000),
	    "host 0's mail to %s did not go after the RESUME at host 1:\n%s", ok,
	    rt_gate_status(&t[0]));
	rt_say("shared_relay: host 0's waiting mail went %.2f s after the RESUME at host 1",
	    rt_now() - resumed);
	cr_assert(rt_wait(gate_status_lacks, &t[0], (void *)"suspended until", 10000),
	    "host 0 still suspended after RESUME at host 1:\n%s", rt_gate_status(&t[0]));
	cr_assert_eq(hs_gate_log_count(&t[0], "suspensions lifted (resume at "), 1);
	/* Journalled: host 0's gate, restarted on its journal, is not
	 * suspended, and writes nothing back to the store. */
	rt_gate_kill9(&t[0]);
	rt_gate_start(&t[0], "2s");
	st = rt_gate_status(&t[0]);
	cr_assert(strstr(st, "suspended until") == NULL, "host 0 suspended again after a "
	    "restart: the lift was not journalled:\n%s", st);
	free(st);
	st = redis_cli("GET", SUSP_KEY);
	cr_assert_str_eq(st, "\n", "the store holds a suspension again: %s", st);
	free(st);
}

/*
 * The store loses host 0's quota, with no RESUME: host 0 stays suspended,
 * writes it back, and host 1 sees it again.  First the key alone goes
 * (as Redis's maxmemory policy evicts a key with a time to live: DEL
 * here), in a store that holds host 0's history; then Redis restarts
 * empty (SIGKILL, no persistence: a new run id).  Before, the lost key
 * stayed lost (host 1 sent on through host 0's quota); a gate that took
 * every key gone before its time for a RESUME would lift, both times.
 */
Test(shared_relay, lost_suspension_written_back_not_lifted)
{
	struct log_n back = { "lost this host's suspension", 1 }, wrote;
	char *v;

	redis_start(0);
	quota_met_at_host_0(2);
	v = redis_cli("DEL", SUSP_KEY);
	cr_assert_str_eq(v, "1\n", "DEL %s: %s", SUSP_KEY, v);
	free(v);
	cr_assert(rt_wait(gate_logged, &t[0], &back, 10000),
	    "host 0 did not write its lost suspension back");
	v = redis_cli("GET", SUSP_KEY);
	cr_assert(strstr(v, " quota " MS_QUOTA), "the store holds %s", v);
	free(v);
	cr_assert(rt_wait(rt_gate_status_has, &t[1], (void *)"  met by ", 10000),
	    "host 1 does not see host 0's quota again");
	/* Redis restarted empty. */
	wrote.what = "wrote back this host's";
	wrote.n = hs_gate_log_count(&t[0], wrote.what) + 1;
	redis_stop(SIGKILL);
	redis_start(0);
	cr_assert(rt_wait(gate_logged, &t[0], &wrote, 15000),
	    "host 0 did not write its history back to the new Redis");
	v = redis_cli("GET", SUSP_KEY);
	cr_assert(strstr(v, " quota " MS_QUOTA), "the store holds %s", v);
	free(v);
	cr_assert(rt_wait(rt_gate_status_has, &t[1], (void *)"its quota): " MS_QUOTA, 10000),
	    "host 1 does not see host 0's quota after the restart");
	v = rt_gate_status(&t[0]);
	cr_assert(strstr(v, "suspended until") && strstr(v, "its quota"),
	    "host 0 is not suspended:\n%s", v);
	free(v);
	cr_assert_eq(hs_gate_log_count(&t[0], "suspensions lifted"), 0);
}

/* Amazon SES's reply to a sender over its rate: "Errors related to the
 * sending quotas for your Amazon SES account" (Amazon SES Developer
 * Guide), read 2026-11-28; tests/data/replies.txt has it as a rate
 * reply at the final dot (a throttle: the built-in 5 minutes). */
#define SES_RATE "454 Throttling failure: Maximum sending rate exceeded."

/*
 * Host 2's throttle, met after host 0's quota (its send was in flight
 * when the quota came: its stand-in holds the final dot 6 s), is
 * shorter: the store keeps host 0's quota, and host 1 still sees a
 * quota.  Before, host 2's SET replaced it: host 1 saw a 5-minute
 * throttle, and after it nothing.
 */
Test(shared_relay, shorter_throttle_keeps_the_quota)
{
	const char *flags[] = { "--dataend-delay", "t@dst.example=6",
		"--reply", "dataend:t@dst.example=" SES_RATE, NULL };
	const char *tq = "t@dst.example";
	struct log_n thr = { " s: " SES_RATE, 1 };
	char *v, *pol, *st;

	/* Host 2: its own stand-in for isp, where a send is under way. */
	rt_upstream_start(&t[2], "good", flags, 0);
	rt_conf_upstream(&t[2], NULL);
	redis_start(0);
	pol = xasprintf("upstream \"isp\" {\n  rate = {\"10 per 1s\"}\n"
	    "  shared = \"redis://127.0.0.1:%u/0\"\n}\n", rport);
	rt_policy(&t[2], pol);
	free(pol);
	rt_gate_start(&t[2], "2s");
	rt_sendmail(&t[2], HS_SENDER, &tq, 1, "Subject: throttle\n\nbody\n");
	rt_send_start(&t[2]);
	cr_assert(rt_wait(rt_record_has, &t[2], (void *)"\"delaying\"", 20000),
	    "host 2's send is not under way");
	quota_met_at_host_0(2);
	cr_assert(rt_wait(gate_logged, &t[2], &thr, 20000), "host 2 met no throttle");
	v = redis_cli("GET", SUSP_KEY);
	cr_assert(strstr(v, " quota " MS_QUOTA), "the store holds %s", v);
	free(v);
	v = redis_cli("PTTL", SUSP_KEY);
	cr_assert_gt(atoll(v), 7000 * 1000LL, "the store's suspension ends in %s ms", v);
	free(v);
	st = rt_gate_status(&t[1]);
	cr_assert(strstr(st, "its quota): " MS_QUOTA), "host 1:\n%s", st);
	free(st);
}
