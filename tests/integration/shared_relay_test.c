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

Test(shared_relay, quota_reply_spills_at_every_host)
{
	const char *flags[] = { "--reply", "rcpt:q@dst.example=" MS_QUOTA, NULL };
	const char *q = "q@dst.example";
	char **mine = rt_addrs("b", "dst.example", 0, 3), *certs, *pol, *st;
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
	certs = t[1].certs;
	t[1].certs = t[0].certs;
	rt_conf_upstream_at(&t[1], "isp", t[0].port, "  fallback = {\"backup\"}\n"
	    "  fallback_when = {\"quota\"}\n");
	t[1].certs = certs;
	rt_conf_upstream_at(&t[1], "backup", bk.port, "");
	for (i = 0; i < 2; i++) {
		rt_policy(&t[i], pol);
		rt_gate_start(&t[i], "2s");
	}
	free(pol);
	rt_sendmail(&t[0], HS_SENDER, &q, 1, "Subject: quota\n\nbody\n");
	rt_send_start(&t[0]);
	cr_assert(rt_wait(rt_gate_status_has, &t[0], (void *)"SubmissionQuotaExceeded", 30000),
	    "host 0 not suspended:\n%s", rt_send_logs_tail(&t[0], 3000));
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
