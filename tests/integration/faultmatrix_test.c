/*
 * faultmatrix_test.c: the rows of the fault matrix (tests/FAULTS.md)
 * that relay_test.c does not prove already, each through the whole real
 * relay: the stand-in upstream tests/upstream/upstream.py told how to
 * misbehave, the real weir-gate, weir-send and weir-remote, mail from the
 * real sendmail and weir-queue, and for the disk rows the fault shim
 * ($WEIR_FAULTINJ, tests/fault/faultinj.c) on weir-send or on the
 * injector.
 *
 * Every test asserts the three promises of issue 8 for its fault:
 *   nothing lost   once the fault is gone every recipient is delivered
 *                  (exactly once where no durable step failed; at least
 *                  once, with a bound, where one did); for the upstream
 *                  and gate rows, while the fault lasts the mail is kept
 *                  (mailq lists it, no recipient is marked done); for
 *                  the disk rows the queue stays sound (queue-check);
 *   no bounce      for relay-level trouble: nothing from <>, nothing in
 *                  bounce/, no "bounced <" in weir-send's log;
 *   the window     no interval of 1 s holds more than the policy's 2
 *                  transactions at the upstream (its own timestamps),
 *                  with a backlog after recovery;
 * and what the user sees: the deferral text in weir-send's log (and
 * sendmail's exit code and message for the injector).  soak_short is
 * one short round of the kill -9 soak (tests/soak/soak_test.c).
 *
 * The workload: one message to three recipients (two transactions at
 * max_recipients 2) and three to one recipient each: four messages, six
 * recipients, five transactions, at "2 per 1s".
 *
 * Ports are the kernel's, loopback only; every process is killed at the
 * end, even on failure (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_fixture.h"

#define SENDER "fm@src.example"
#define NTRANS 5
#define POLICY "upstream \"isp\" { rate = {\"2 per 1s\"} max_recipients = 2 }\n"
/* Every stage's timeout short, so that each hang ends in 2 s. */
#define UPCONF "  max_recipients = 2\n  timeout_banner = \"2s\"\n" \
	"  timeout_command = \"2s\"\n  timeout_mail = \"2s\"\n  timeout_rcpt = \"2s\"\n" \
	"  timeout_data_init = \"2s\"\n  timeout_data_block = \"2s\"\n" \
	"  timeout_data_end = \"2s\"\n"

static const char *const list3[] = { "a1@dest.example", "a2@dest.example", "a3@dest.example" };
static const char *const singles[] = { "b1@dest.example", "b2@dest.example", "b3@dest.example" };

TestSuite(faultmatrix, .init = rt_fixture_setup, .fini = rt_fixture_teardown, .timeout = 120);

/* ---- the workload and the checks every row shares ---- */

static void
inject_one(size_t i)
{
	char msg[96];

	if (i == 0) {
		rt_sendmail(&t, SENDER, list3, 3, "Subject: to three\n\nhello three\n");
		return;
	}
	snprintf(msg, sizeof msg, "Subject: single %zu\n\nhello %zu\n", i, i);
	rt_sendmail(&t, SENDER, &singles[i - 1], 1, msg);
}

static void
inject_all(void)
{
	size_t i;

	for (i = 0; i < 4; i++)
		inject_one(i);
}

/* Each of the four messages was tried and deferred at least once (a
 * relay-level failure of a message's first transaction defers the rest
 * of it untried). */
static void
wait_all_deferred(void)
{
	static const char *const first[] = { ": deferred <a1@", ": deferred <b1@",
		": deferred <b2@", ": deferred <b3@" };
	size_t i;

	for (i = 0; i < 4; i++)
		rt_wait_log(&t, first[i], 1, 60000);
}

/* While the fault lasts: nothing reached the upstream, all four
 * messages are kept (mailq names every recipient), no recipient is
 * marked done, nothing bounced, the queue is sound. */
static void
assert_kept(void)
{
	struct rt_rec r;
	char *mq;
	size_t i;

	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 0, "the upstream accepted %zu transactions during the fault", r.n);
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
	mq = rt_mailq(&t);
	cr_assert_eq(rt_mailq_count(mq), 4, "mailq:\n%s", mq);
	for (i = 0; i < 3; i++)
		cr_assert(strstr(mq, list3[i]) && strstr(mq, singles[i]), "mailq misses a recipient:\n%s",
		    mq);
	cr_assert_eq(rt_done_marks(&t), 0, "a recipient was marked done during the fault");
	rt_assert_queue_sound(&t);
	free(mq);
}

/* The fault is gone: `weir flush` (again until the queue is empty:
 * weir-send retries local trouble after 5 minutes on its own), then every recipient delivered (each
 * at most 1 + extra times in all, extra the transactions a failed
 * durable step may repeat), no bounce, the window held, the queue empty
 * and sound. */
static void
assert_recovered(size_t extra)
{
	struct rt_rec r;
	size_t i, worst, dups = 0;

	rt_flush_until_empty(&t, 45000);
	rt_rec_load(&t, &r);
	for (i = 0; i < 3; i++) {
		size_t a = rt_rec_count(&r, SENDER, list3[i]), b = rt_rec_count(&r, SENDER, singles[i]);

		cr_assert(a >= 1 && b >= 1, "<%s> delivered %zu times, <%s> %zu times", list3[i], a,
		    singles[i], b);
		dups += a - 1 + b - 1;
	}
	cr_assert(dups <= extra, "%zu repeated deliveries (at most %zu allowed)", dups, extra);
	cr_assert(r.n >= NTRANS && r.n <= NTRANS + extra, "%zu transactions", r.n);
	for (i = 0; i < r.n; i++)
		cr_assert(r.v[i].nrcpt <= 2, "a transaction with %zu recipients", r.v[i].nrcpt);
	rt_assert_no_bounce(&t, &r);
	worst = rt_assert_window(&r, 2, 1.0);
	cr_assert_eq(r.nmail_unsafe, 0, "MAIL without TLS or AUTH");
	rt_assert_queue_empty(&t);
	rt_assert_queue_sound(&t);
	cr_log_info("recovered: %zu transactions, at most %zu in any 1 s", r.n, worst);
	rt_rec_free(&r);
}

static void
start_relay(void)
{
	rt_policy(&t, POLICY);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
}

/* ---- upstream faults ---- */

enum fix {
	FIX_UPSTREAM,		/* a well-behaved upstream on the same port */
	FIX_SECRET,		/* the right secret in the secret file */
};

struct ufault {
	const char *cert;	/* the upstream's certificate: good, wrong */
	const char *flags[3];	/* its misbehaviour */
	int refused;		/* nobody listens on the port */
	int wrong_secret;
	int suspends;		/* AUTHFAIL: the gate suspends, one try per suspension */
	const char *why;	/* what the deferral says */
};

/*
 * The upstream misbehaves from the start: each of the four messages is
 * deferred (the reason in weir-send's log), the mail is kept; then
 * the fault is repaired and `weir flush`: all delivered exactly once.
 */
static void
upstream_fault(const struct ufault *f)
{
	unsigned port;

	rt_upstream_start(&t, f->cert ? f->cert : "good", f->flags[0] ? f->flags : NULL, 0);
	if (f->refused)
		rt_upstream_stop(&t);	/* a port nobody listens on */
	rt_conf_upstream(&t, UPCONF);
	if (f->wrong_secret)
		tl_write(t.secret, "wrong-secret", 12);
	start_relay();
	inject_all();
	if (f->suspends)	/* refused credentials: no message tries on its own */
		cr_assert(rt_wait(rt_gate_status_has, &t, "suspended until", 30000), "no suspension:\n...%s",
		    rt_send_logs_tail(&t, 3000));
	else
		wait_all_deferred();
	cr_assert(rt_log_count(&t, f->why) >= 1, "no deferral says \"%s\":\n...%s", f->why,
	    rt_send_logs_tail(&t, 3000));
	assert_kept();
	if (f->wrong_secret) {
		tl_write(t.secret, RT_SECRET, strlen(RT_SECRET));
	} else {
		port = t.port;
		rt_upstream_stop(&t);
		rt_upstream_start(&t, "good", NULL, port);
	}
	if (f->suspends)	/* a reload lifts the suspension */
		cr_assert_eq(kill(t.gate, SIGHUP), 0);
	assert_recovered(0);
}

Test(faultmatrix, refused)
{
	struct ufault f = { .refused = 1, .why = "Connection refused" };

	upstream_fault(&f);
}

/* The upstream never answers at stage; every timeout is 2 s. */
static void
hang(const char *stage, const char *why)
{
	struct ufault f = { .flags = { "--hang", stage, NULL }, .why = why };

	upstream_fault(&f);
}

Test(faultmatrix, hang_banner) { hang("banner", ": timeout at banner"); }
Test(faultmatrix, hang_ehlo) { hang("ehlo", ": timeout at EHLO"); }
Test(faultmatrix, hang_starttls) { hang("starttls", ": timeout at STARTTLS"); }
Test(faultmatrix, hang_tls) { hang("tls", "TLS failed: timeout in the handshake"); }
Test(faultmatrix, hang_auth) { hang("auth", ": timeout at AUTH"); }
Test(faultmatrix, hang_mail) { hang("mail", ": timeout at MAIL FROM"); }
Test(faultmatrix, hang_rcpt) { hang("rcpt", ": timeout at RCPT TO"); }
Test(faultmatrix, hang_data) { hang("data", ": timeout at DATA"); }
Test(faultmatrix, hang_dataend) { hang("dataend", ": timeout after the end of data"); }

Test(faultmatrix, drop_in_data)
{
	struct ufault f = { .flags = { "--drop-in-data", NULL }, .why = ": connection lost " };

	upstream_fault(&f);
}

/* A 4xx that is no throttle reply, on MAIL: deferred, nothing suspended. */
Test(faultmatrix, other_4xx)
{
	struct ufault f = { .flags = { "--reply", "mail=451 4.3.0 Temporary local problem", NULL },
		.why = "451 4.3.0 Temporary local problem" };
	char *st;

	upstream_fault(&f);
	st = rt_gate_status(&t);
	cr_assert(strstr(st, "suspended") == NULL, "a plain 451 suspended the upstream:\n%s", st);
	free(st);
}

/* The same 4xx to every RCPT: the recipients' trouble, but temporary. */
Test(faultmatrix, other_4xx_rcpt)
{
	struct ufault f = { .flags = { "--reply", "rcpt=450 4.2.0 Mailbox busy", NULL },
		.why = "450 4.2.0 Mailbox busy" };

	upstream_fault(&f);
}

Test(faultmatrix, auth_535)
{
	struct ufault f = { .wrong_secret = 1, .suspends = 1, .why = "Remote host said: 535 " };

	upstream_fault(&f);
}

Test(faultmatrix, tls_failure)
{
	struct ufault f = { .cert = "wrong", .suspends = 1,
		.why = "TLS failed: certificate verification failed" };

	upstream_fault(&f);
}

/* ---- the disk: the fault shim on weir-send and on the injector ---- */

static const char *
shim(void)
{
	const char *s = getenv("WEIR_FAULTINJ");

	if (s == NULL || *s == '\0' || access(s, R_OK) != 0)
		cr_skip_test("no fault-injection shim ($WEIR_FAULTINJ; run through tests/run.sh)");
	return s;
}

/*
 * Calls first .. first + k - 1 of func on the queue's files under sub
 * fail with err in weir-send (the disk is full, or fails to sync), then
 * the disk is well again (the shim's counts run out: weir-send is not
 * restarted).  With preprocessed set, the four messages are taken in
 * (preprocessed) before weir-gate starts, so that the calls counted are
 * those of the deliveries.  The mail weir-send could not preprocess
 * stays in todo/, what it could not mark done is tried again; after
 * `weir flush` everything is delivered.
 */
struct disk_fault {
	const char *func, *sub, *err;
	unsigned first, k;
	int preprocessed;
	const char *logged;	/* in weir-send's log */
	size_t extra;		/* repeated deliveries allowed */
};

static void
send_disk_fault(const struct disk_fault *f)
{
	struct buf rules = BUF_INIT;
	char *pre, *rule, *flog;
	unsigned i;

	for (i = 0; i < f->k; i++)
		buf_printf(&rules, "%s%s@%s/%s=%u:%s", i > 0 ? "," : "", f->func, t.s.qt.qdir, f->sub,
		    f->first + i, f->err);
	pre = xasprintf("LD_PRELOAD=%s", shim());
	rule = xasprintf("WEIR_FAULT=%s", buf_cstr(&rules));
	flog = xasprintf("WEIR_FAULT_LOG=%s/fault.log", t.s.qt.tmp);
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, UPCONF);
	rt_policy(&t, POLICY);
	if (!f->preprocessed)
		rt_gate_start(&t, "2s");
	{
		const char *env[] = { pre, "WEIR_FAULT_PROG=weir-send", rule, flog, NULL };

		rt_send_start_env(&t, env);
	}
	inject_all();
	if (f->preprocessed) {
		rt_wait_log(&t, ": queued, from <", 4, 20000);
		rt_gate_start(&t, "2s");
	}
	/* The user (the admin) sees the failed call in weir-send's log. */
	rt_wait_log(&t, f->logged, 1, 20000);
	{
		struct buf fl = BUF_INIT;
		char *p = xasprintf("%s/fault.log", t.s.qt.tmp);
		const char *s;
		size_t n = 0;

		tl_read(p, &fl);
		for (s = buf_cstr(&fl); (s = strstr(s, " injected")) != NULL; s++)
			n++;
		cr_assert(n >= 1, "the shim made no call fail");
		cr_log_info("%s: %zu calls failed with %s", f->func, n, f->err);
		buf_free(&fl);
		free(p);
	}
	rt_assert_queue_sound(&t);
	assert_recovered(f->extra);
	buf_free(&rules);
	free(pre);
	free(rule);
	free(flog);
}

/* ENOSPC on the first 6 writes into the queue (preprocessing). */
Test(faultmatrix, disk_full_weir_send)
{
	struct disk_fault f = { "write", "", "ENOSPC", 1, 6, 0, "No space left on device", 0 };

	send_disk_fault(&f);
}

/* EIO on the first 8 fsyncs in the queue (preprocessing): the message
 * stays in todo/ until the next scan. */
Test(faultmatrix, fsync_error_weir_send)
{
	struct disk_fault f = { "fsync", "", "EIO", 1, 8, 0, "Input/output error", 0 };

	send_disk_fault(&f);
}

/* EIO on the 3 fsyncs of remote/ after preprocessing (two per message:
 * the file and its folder): the D marks of delivered recipients.  Such
 * a recipient is not done (weir-send cannot know its mark will survive a
 * power cut), so it is tried again: a repeated delivery per failed
 * fsync at most, never a loss. */
Test(faultmatrix, fsync_error_marks)
{
	struct disk_fault f = { "fsync", "remote/", "EIO", 9, 3, 1, "Input/output error", 3 };

	send_disk_fault(&f);
}

/*
 * sendmail's weir-queue meets the fault: sendmail fails with a
 * temporary-failure exit code and says why; nothing of the message is
 * left in the queue (queue-check).  The sender tries again once the disk
 * is well: delivered once, with the others.
 */
static void
inject_disk_fault(const char *rule, const char *said)
{
	char *pre = xasprintf("LD_PRELOAD=%s", shim()), *r = xasprintf("WEIR_FAULT=%s", rule);
	const char *env[] = { pre, "WEIR_FAULT_PROG=weir-queue", r, NULL };
	const char *args[] = { "-f", SENDER, singles[2] };
	struct tl_result res;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, UPCONF);
	start_relay();
	inject_one(0);
	inject_one(1);
	res = rt_run_env(&t, "sendmail", args, 3, "Subject: single 3\n\nhello 3\n", env);
	cr_assert(res.status != 0, "sendmail succeeded on a failing disk");
	cr_assert(strstr(buf_cstr(&res.err), said), "sendmail exit %d said:\n%s", res.status,
	    buf_cstr(&res.err));
	cr_log_info("sendmail exit %d: %s", res.status, buf_cstr(&res.err));
	tl_result_free(&res);
	rt_assert_queue_sound(&t);
	/* The disk is well again: the sender retries. */
	inject_one(3);
	inject_one(2);
	assert_recovered(0);
	free(pre);
	free(r);
}

Test(faultmatrix, disk_full_injector)
{
	inject_disk_fault("write=1+:ENOSPC", "write error, e.g. disk full (temporary)");
}

Test(faultmatrix, fsync_error_injector)
{
	inject_disk_fault("fsync=1+:EIO", "fsync mess/");
}

/* ---- the gate ---- */

/* weir-send starts with no weir-gate: nothing goes, the mail waits and
 * the log says why; then the gate starts and everything goes, within the
 * window. */
Test(faultmatrix, gate_down)
{
	struct rt_rec r;

	sh_conf_append(&t.s, "log_level = \"verbose\"\n");	/* rt_wait_idle */
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, UPCONF);
	rt_policy(&t, POLICY);
	rt_send_start(&t);
	inject_all();
	rt_wait_log(&t, "nothing is sent until it answers", 1, 10000);
	/* All four taken in, their first batches waiting for the gate. */
	rt_wait_idle(&t, ": queued, from <", 4, "0 running, 0 granted, 4 asking weir-gate,",
	    10000);
	assert_kept();
	rt_rec_load(&t, &r);
	cr_assert_eq(r.nmail, 0, "MAIL without a gate");
	rt_rec_free(&r);
	rt_gate_start(&t, "2s");
	/* weir-send reconnects after 1, 2, 4 ... 30 s. */
	rt_wait_empty(&t, 45000);
	assert_recovered(0);
}

/* weir-gate killed (kill -9) in the middle of a run and started again
 * on its journal: nothing is sent while it is away, nothing is lost or
 * repeated, and the journal keeps the window across the restart. */
Test(faultmatrix, gate_restarted)
{
	enum { N = 12 };
	char **v = rt_addrs("g", "dest.example", 1, N);
	struct rt_rec r;
	size_t i, want = 3, before;

	sh_conf_append(&t.s, "log_level = \"verbose\"\n");	/* rt_wait_idle */
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, UPCONF);
	start_relay();
	for (i = 0; i < N; i++)
		rt_sendmail(&t, SENDER, (const char *const *)&v[i], 1, "Subject: g\n\nhello\n");
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 20000), "no delivery");
	rt_gate_kill9(&t);
	before = rt_rec_ndata(&t);
	/* A deliverer's grant may finish its transaction (two run at a
	 * time); no new one starts: once weir-send knows and runs nothing,
	 * the rest waits for the gate. */
	rt_wait_idle(&t, "lost weir-gate", 1, "0 running, 0 granted,", 10000);
	cr_assert(rt_rec_ndata(&t) <= before + 2, "mail went out without a gate");
	rt_gate_start(&t, "2s");
	rt_wait_empty(&t, 45000);
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, v[i]), 1, "<%s> delivered %zu times", v[i],
		    rt_rec_count(&r, SENDER, v[i]));
	cr_assert_eq(r.n, N);
	rt_assert_no_bounce(&t, &r);
	rt_assert_window(&r, 2, 1.0);
	rt_assert_queue_sound(&t);
	cr_assert(rt_log_count(&t, "lost weir-gate") >= 1, "weir-send did not notice");
	rt_rec_free(&r);
	rt_addrs_free(v, N);
}

/* A condition for sh_wait_for(): the file arg holds gatedrop_word. */
static const char *gatedrop_word;
static int
file_has(void *arg)
{
	char buf[256];
	FILE *f = fopen(arg, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return strstr(buf, gatedrop_word) != NULL;
}

/*
 * The gate gone between its GRANT and weir-send's START (the instant
 * gate_restarted hits now and then under load): the stand-in gate
 * tests/upstream/gatedrop.py grants the first request and goes, its
 * socket no longer read, so the START cannot be written.  Without a kept
 * session (session_idle 0s) the grant was meant for a deliverer of the
 * message's own.  The message must ask again once the real gate is back
 * and go then, not wait SYSFAIL_S (300 s) as for local trouble.
 */
Test(faultmatrix, gate_gone_between_grant_and_start)
{
	const char *rc[] = { "gone@dest.example" };
	char *script = tl_src_path("tests/upstream/gatedrop.py");
	char *out = xasprintf("%s/gatedrop.out", t.s.qt.tmp);
	struct rt_rec r;
	size_t one = 1;
	pid_t pid;
	int st;

	sh_conf_append(&t.s, "log_level = \"verbose\"\n");
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, UPCONF "  session_idle = \"0s\"\n");
	rt_policy(&t, POLICY);
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		FILE *f = freopen(out, "w", stdout);

		if (f == NULL || dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
			_exit(126);
		execl("/usr/bin/python3", "python3", script, t.sock, (char *)NULL);
		_exit(127);
	}
	gatedrop_word = "READY";
	cr_assert(sh_wait_for(file_has, out, 15000), "gatedrop.py did not start");
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, rc, 1, "Subject: gone\n\nhello\n");
	gatedrop_word = "GRANTED";
	cr_assert(sh_wait_for(file_has, out, 20000), "the stand-in gate granted nothing");
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gatedrop.py: status %d", st);
	/* The failure happened: weir-send held the grant and lost the gate. */
	rt_wait_log(&t, "lost weir-gate", 1, 20000);
	rt_gate_start(&t, "2s");
	cr_assert(rt_wait(rt_ndata_at_least, &t, &one, 30000),
	    "the message did not go within 30 s of the gate's return:\n%s",
	    rt_send_logs_tail(&t, 3000));
	cr_assert_eq(rt_log_count(&t, "its grant went with the connection to weir-gate"), 1);
	rt_wait_empty(&t, 20000);
	rt_rec_load(&t, &r);
	cr_assert_eq(rt_rec_count(&r, SENDER, rc[0]), 1, "delivered %zu times",
	    rt_rec_count(&r, SENDER, rc[0]));
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
	rt_assert_queue_sound(&t);
	free(script);
	free(out);
}

/* ---- the scheduler, its deliverers and the gate killed: a short soak ---- */

/* One short round of the kill -9 soak (tests/soak/soak_test.c runs the
 * long one): 60 messages, 6 kills of weir-send, running weir-remotes or
 * weir-gate; the seed is printed (SOAK_SEED replays it). */
Test(faultmatrix, soak_short)
{
	const char *sv = getenv("SOAK_SEED");
	struct rt_soak o = {
		.seed = sv && *sv ? strtoull(sv, NULL, 10) :
		    (unsigned long long)time(NULL) ^ (unsigned long long)getpid(),
		.messages = 60, .kills = 6, .mean_gap_ms = 300,
		.limit = 20, .per = 1, .cap = 3, .concurrency = 2,
	};
	struct rt_soak_result res;

	rt_say("soak_short: seed %llu (replay with SOAK_SEED=%llu)", o.seed, o.seed);
	rt_soak_round(&t, &o, &res);
	rt_say("soak_short: %zu recipients, %zu transactions, %.1f s; kills %zu weir-send, "
	    "%zu weir-remote, %zu weir-gate, %zu weir-queued; %zu duplicates (bound %zu); "
	    "window %zu of %u", res.recipients, res.transactions, res.seconds, res.send_kills,
	    res.remote_kills, res.gate_kills, res.queued_kills, res.duplicates, res.dup_bound,
	    res.worst, o.limit);
}

/*
 * weir-send's writes to weir-gate fail, the 3rd, 5th, ... 25th (the shim
 * answers EPIPE on its socket: a message's ACQUIRE, a kept session's
 * slot, START, REPORT, COUNTS, each in turn; the even ones left to fail
 * catch nothing that the old code got wrong, the odd ones do): each failure
 * takes the connection down and weir-send connects again; it never
 * crashes, and every message goes, at most once more than once per
 * failed write.  Before f1789a8 a failure inside sess_open() or
 * sess_end() freed the session twice (seen once as "free(): double free
 * detected" in relay_test kill9; this test: 'double free' with the
 * gatelink.c of before, 3 of 3 passes with it).
 */
Test(faultmatrix, gate_writes_fail_in_turn)
{
	struct buf rules = BUF_INIT, flog = BUF_INIT;
	char *pre = xasprintf("LD_PRELOAD=%s", shim()), *rule, *logp, *lenv;
	unsigned k;
	size_t failed;
	int st;

	for (k = 3; k <= 25; k += 2)
		buf_printf(&rules, "%swrite@socket:=%u:EPIPE", k > 3 ? "," : "", k);
	rule = xasprintf("WEIR_FAULT=%s", buf_cstr(&rules));
	logp = xasprintf("%s/fault.log", t.s.qt.tmp);
	lenv = xasprintf("WEIR_FAULT_LOG=%s", logp);
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, UPCONF);
	rt_policy(&t, POLICY);
	rt_gate_start(&t, "2s");
	{
		const char *env[] = { pre, "WEIR_FAULT_PROG=weir-send", rule, lenv, NULL };

		rt_send_start_env(&t, env);
	}
	inject_all();
	assert_recovered(12);
	/* The failures happened, and weir-send lived through them. */
	tl_read(logp, &flog);
	failed = tl_count(buf_cstr(&flog), "-> -1 EPIPE injected");
	cr_assert(failed >= 4, "%zu writes to weir-gate failed", failed);
	cr_assert(rt_log_count(&t, "lost weir-gate") >= 1, "%zu failed writes, no loss", failed);
	cr_assert_eq(waitpid(t.send.pid, &st, WNOHANG), 0, "weir-send died:\n%s", rt_send_logs(&t));
	cr_log_info("gate writes failed: %zu, weir-send alive", failed);
	buf_free(&rules);
	buf_free(&flog);
	free(pre);
	free(rule);
	free(logp);
	free(lenv);
}
