/*
 * send_test.c: the real weir-send (build/bin/weir-send -c CONF) on a
 * scratch queue, fed by the real sendmail and weir-queue, delivering
 * through a scripted qmail-remote(8) compatible deliverer ($WEIR_REMOTE,
 * a python3 script written into the test's folder) that logs its
 * arguments and the message it got, and answers per recipient by the
 * address: "bad" h, "slow" s (r once tmp/slow-ok exists), "crash"
 * SIGSEGV, "garbage" unparsable output, "nomsg" no message report,
 * "throttle" a 421 4.7.0 and a "throttled" outcome, else r; then K (D
 * when nothing was accepted); tmp/hang makes it sleep.
 * Covers: delivery and elimination with the exact argument list and
 * message; messages queued before start; the trigger (a new message is
 * taken within a second, again and again: no polling); batching by
 * max_recipients; the concurrency cap; upstream choice by sender; no
 * upstream; local recipients to the admin; a message without recipients;
 * bounces from <> (delivered in turn, with sender ""), also when weir-send
 * has only -c; double bounces from <#@[]> to the admin; failed double
 * bounces dropped; temporary failures (mailq shows them); a crashing,
 * babbling, short or missing deliverer (nothing bounced or marked done,
 * the queue sound); expiry after queue_lifetime (own failures only);
 * a control byte in the sender of a stock qmail-queue's todo; kill -9 at many instants
 * then a restart (every recipient and bounce delivered at least once, the
 * queue sound); a second weir-send refused; SIGTERM; `weir flush` (after
 * failed bounces, and for deferred recipients); failing syscalls through
 * the fault shim ($WEIR_FAULTINJ: bounce/ unwritable, the D mark's fsync,
 * preprocessing, tried again 30 s after a full disk) and the order of
 * the durable steps (its call log); one log line per event.  weir-gate: each test runs a real one (policy with
 * room for everything unless the test says otherwise; the deliverer
 * writes its outcome line on the -r fd): nothing goes without the gate,
 * a gate restart, a throttle never bounces and suspends the upstream, a
 * "2 per 1s" rate honoured, the gate's recipients-per-transaction cap.
 * Every weir-send and weir-gate runs in its own process group, stopped
 * with SIGTERM and killed with SIGKILL at teardown (and with the test).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/timefmt.h"
#include "mail/schedfile.h"
#include "send_helpers.h"
#include "sendmail_helpers.h"

#define S(x) x, sizeof(x) - 1

static struct sht s;
static struct shd d1, d2, gate;
static char *gsock;
static char *deliverer, *calls, *qq, *env_remote, *env_qq, *env_conf;

static const char deliverer_py[] =
    "#!/usr/bin/python3\n"
    "# A qmail-remote(8) stand-in for weir-send's tests.\n"
    "import fcntl, os, sys, signal, time\n"
    "D = %s\n"
    TL_PY_REMOTE_ARGS
    "def outcome(line):\n"
    "    if ocfd >= 0:\n"
    "        os.write(ocfd, line.encode())\n"
    "msg = sys.stdin.buffer.read()\n"
    "def conc(what):\n"
    "    fd = os.open(D + '/conc.log', os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
    "    os.write(fd, ('%%s %%d %%.3f\\n' %% (what, os.getpid(), time.time())).encode())\n"
    "    os.close(fd)\n"
    "conc('B')\n"
    "if os.path.exists(D + '/hang'):\n"
    "    time.sleep(float(open(D + '/hang').read() or '1'))\n"
    "conc('E')\n"
    "if len(a) < 3 or '-c' not in opts or '-u' not in opts:\n"
    "    sys.stderr.write('deliverer: bad arguments %%r %%r\\n' %% (opts, a))\n"
    "    sys.exit(100)\n"
    "up, host, sender, rcpts = opts['-u'], a[0], a[1], a[2:]\n"
    "# Deliverers run side by side: N, its files and its line in one go.\n"
    "lk = os.open(D + '/calls.lock', os.O_WRONLY | os.O_CREAT, 0o644)\n"
    "fcntl.flock(lk, fcntl.LOCK_EX)\n"
    "n = len(open(D + '/calls.log', 'rb').read().splitlines()) if os.path.exists(D + '/calls.log') else 0\n"
    "# -c: weir-send's snapshot of its config; logged as the file's name\n"
    "# when it holds the file's bytes, and kept as conf.N.\n"
    "cbytes = open(opts['-c'], 'rb').read()\n"
    "real = os.environ.get('WEIR_CONFIG', '')\n"
    "same = real and os.path.exists(real) and open(real, 'rb').read() == cbytes\n"
    "conf = real if same else 'snapshot ' + opts['-c']\n"
    "with open(D + '/conf.%%d' %% n, 'wb') as f:\n"
    "    f.write(cbytes)\n"
    "with open(D + '/msg.%%d' %% n, 'wb') as f:\n"
    "    f.write(msg)\n"
    "line = '\\t'.join([conf, up, host, sender, ','.join(rcpts)]) + '\\n'\n"
    "fd = os.open(D + '/calls.log', os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
    "os.write(fd, line.encode())\n"
    "os.close(fd)\n"
    "os.close(lk)\n"
    "out = sys.stdout.buffer\n"
    "ok = False\n"
    "for r in rcpts:\n"
    "    if 'crash' in r:\n"
    "        out.flush()\n"
    "        os.kill(os.getpid(), signal.SIGSEGV)\n"
    "        time.sleep(5)\n"
    "    if 'garbage' in r:\n"
    "        out.write(b'250 OK, but I am not qmail-remote\\n')\n"
    "        out.flush()\n"
    "        outcome('sent 0 -1 0\\n')\n"
    "        sys.exit(0)\n"
    "    if 'throttle' in r:\n"
    "        out.write(b's127.0.0.1 said: 421 4.7.0 rate limit exceeded, slow down\\0'\n"
    "                  b'ZConnected to 127.0.0.1 but the upstream is throttling us.\\0')\n"
    "        out.flush()\n"
    "        outcome('throttled 421 4.7.0 rate limit exceeded, slow down\\n')\n"
    "        sys.exit(0)\n"
    "    if 'bad' in r:\n"
    "        out.write(b'h127.0.0.1 does not like recipient.\\nRemote host said: 550 5.1.1 <' + r.encode() + b'>: no such user\\0')\n"
    "    elif 'slow' in r and not os.path.exists(D + '/slow-ok'):\n"
    "        out.write(b's127.0.0.1 does not like recipient.\\nRemote host said: 451 4.2.1 try later\\0')\n"
    "    else:\n"
    "        out.write(b'r\\0')\n"
    "        ok = True\n"
    "    out.flush()\n"
    "naccepted = sum(1 for r in rcpts if 'bad' not in r and ('slow' not in r or os.path.exists(D + '/slow-ok')))\n"
    "if any('nomsg' in r for r in rcpts):\n"
    "    outcome('sent %%d -1 0\\n' %% naccepted)\n"
    "    sys.exit(0)\n"
    "out.write(b'K127.0.0.1 accepted message.\\nRemote host said: 250 ok\\0' if ok else b'DGiving up on 127.0.0.1\\0')\n"
    "out.flush()\n"
    "outcome('sent %%d -1 0\\n' %% (naccepted if ok else 0))\n";

static void
setup_with(const char *extra)
{
	struct buf conf = BUF_INIT, py = BUF_INIT;
	char *quoted;

	buf_adds(&conf, "concurrency = 2\n");
	if (extra)
		buf_adds(&conf, extra);
	else
		buf_adds(&conf, "upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n"
		    "  tls = \"none\"\n}\n");
	sh_setup(&s, conf.s);
	memset(&d1, 0, sizeof d1);
	memset(&d2, 0, sizeof d2);
	memset(&gate, 0, sizeof gate);
	deliverer = xasprintf("%s/deliver.py", s.qt.tmp);
	calls = xasprintf("%s/calls.log", s.qt.tmp);
	quoted = xasprintf("'%s'", s.qt.tmp);
	buf_printf(&py, deliverer_py, quoted);
	tl_write(deliverer, py.s, py.len);
	cr_assert(chmod(deliverer, 0755) == 0);
	qq = tl_bin("weir-queue");
	env_remote = xasprintf("WEIR_REMOTE=%s", deliverer);
	env_qq = xasprintf("QMAILQUEUE=%s", qq);
	env_conf = xasprintf("WEIR_CONFIG=%s", s.qt.conf);
	qt_setenv(&s.qt, env_qq);	/* for sendmail */
	/* weir-gate, with room for everything, on a socket of this test. */
	gsock = xasprintf("%s/gate.sock", s.qt.tmp);
	{
		struct buf gc = BUF_INIT, pol = BUF_INIT;
		char *pp = xasprintf("%s/policy.conf", s.qt.tmp);
		static const char *const ups[] = { "up1", "lists", "main" };
		size_t k;

		buf_printf(&gc, "gate_socket = \"%s\"\npolicy_file = \"%s\"\n"
		    "gate_journal = \"%s/gate.journal\"\n", gsock, pp, s.qt.tmp);
		sh_conf_append(&s, gc.s);
		for (k = 0; k < 3; k++)
			buf_printf(&pol, "upstream \"%s\" { rate = \"100000 per 1s\" "
			    "max_recipients = 1000 }\n", ups[k]);
		tl_write(pp, pol.s, pol.len);
		shd_start_gate(&gate, &s, gsock);
		free(pp);
		buf_free(&gc);
		buf_free(&pol);
	}
	free(quoted);
	buf_free(&conf);
	buf_free(&py);
}

static void setup(void) { setup_with(NULL); }

static void
teardown(void)
{
	shd_stop(&d1);
	shd_stop(&d2);
	shd_stop(&gate);
	sh_teardown(&s);
	free(gsock);
	gsock = NULL;
	free(deliverer);
	free(calls);
	free(qq);
	free(env_remote);
	free(env_qq);
	free(env_conf);
	deliverer = calls = qq = env_remote = env_qq = env_conf = NULL;
}

TestSuite(send, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers ---- */

static int
log_has(void *arg)
{
	const char *what = arg;
	struct buf b = BUF_INIT;
	int r;

	if (d1.log == NULL || access(d1.log, F_OK) != 0)
		return 0;
	tl_read(d1.log, &b);
	r = strstr(buf_cstr(&b), what) != NULL;
	buf_free(&b);
	return r;
}

static char *
send_log(struct shd *d)
{
	struct buf b = BUF_INIT;

	if (d->log && access(d->log, F_OK) == 0)
		tl_read(d->log, &b);
	return xstrdup(buf_cstr(&b));
}

/* Start weir-send with the deliverer, weir-queue for bounces, and (unless
 * bare) $WEIR_CONFIG; wait until it has scanned the queue. */
static void
start_send(struct shd *d, int bare)
{
	const char *env[] = { env_remote, env_qq, bare ? NULL : env_conf, NULL };

	shd_start(d, &s, env);
	if (d == &d1)
		cr_assert(sh_wait_for(log_has, "started on", 5000), "weir-send did not start:\n%s",
		    send_log(d));
}

/* The deliverer's calls: lines "conf\tup\thost\tsender\trcpts". */
static size_t
ncalls(void)
{
	struct buf b = BUF_INIT;
	size_t i, n = 0;

	if (access(calls, F_OK) != 0)
		return 0;
	tl_read(calls, &b);
	for (i = 0; i < b.len; i++)
		n += b.s[i] == '\n';
	buf_free(&b);
	return n;
}

static int
calls_at_least(void *arg)
{
	return ncalls() >= *(size_t *)arg;
}

static void
wait_calls(size_t n, int ms)
{
	cr_assert(sh_wait_for(calls_at_least, &n, ms), "%zu deliverer calls after %d ms, expected %zu;"
	    " weir-send said:\n%s", ncalls(), ms, n, send_log(&d1));
}

/* Call i (0-based), malloc'ed, without the newline. */
static char *
call(size_t i)
{
	struct buf b = BUF_INIT;
	const char *p, *e;
	size_t k;

	tl_read(calls, &b);
	p = buf_cstr(&b);
	for (k = 0; k < i && p; k++)
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	cr_assert(p && *p, "no call %zu", i);
	e = strchr(p, '\n');
	p = xstrndup(p, (size_t)(e - p));
	buf_free(&b);
	return (char *)p;
}

/* The sender and recipients of call i: "sender\trcpt,rcpt". */
static char *
call_env(size_t i)
{
	char *c = call(i), *p = c, *r;
	int k;

	for (k = 0; k < 3; k++) {
		p = strchr(p, '\t');
		cr_assert(p);
		p++;
	}
	r = xstrdup(p);
	free(c);
	return r;
}

static int
queue_empty(void *arg)
{
	(void)arg;
	return qt_leftovers(&s.qt) == 0;
}

/* The files left in the queue, for failure messages. */
static char *
listing(void)
{
	struct buf b = BUF_INIT;
	char *cmd = xasprintf("cd '%s' && find . -type f ! -path './lock/*' -printf '%%p %%s\\n' "
	    "2>&1", s.qt.qdir), line[256];
	FILE *f = popen(cmd, "r");

	while (f && fgets(line, sizeof line, f))
		buf_adds(&b, line);
	if (f)
		pclose(f);
	free(cmd);
	buf_addc(&b, '\0');
	return b.s;
}

static void
wait_empty(int ms)
{
	cr_assert(sh_wait_for(queue_empty, NULL, ms), "the queue is not empty after %d ms:\n%s"
	    "weir-send said:\n%s", ms, listing(), send_log(&d1));
}

static int
todo_empty(void *arg)
{
	unsigned long *ids;
	size_t n = qt_list(&s.qt, "todo", &ids);

	(void)arg;
	free(ids);
	return n == 0;
}

/* sendmail -f sender rcpts... < msg; returns the queued id. */
static void
inject(const char *sender, const char *const *rcpts, const char *msg)
{
	const char *args[32];
	struct tl_result r;
	size_t n = 0, i;

	args[n++] = "-f";
	args[n++] = sender;
	for (i = 0; rcpts[i]; i++) {
		cr_assert(n < 31);
		args[n++] = rcpts[i];
	}
	args[n] = NULL;
	smt_run(&s.qt, "sendmail", args, msg, strlen(msg), NULL, &r);
	cr_assert_eq(r.status, 0, "sendmail exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
}

/* weir-queue with a raw envelope (for senders sendmail would not take). */
static void
inject_raw(const char *env, size_t envlen, const char *msg)
{
	struct tl_result r;

	qt_inject(&s.qt, msg, strlen(msg), env, envlen, NULL, &r);
	cr_assert_eq(r.status, 0, "weir-queue exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
}

static void
assert_queue_sound(void)
{
	struct buf out = BUF_INIT;
	int code = sh_queue_check(&s, &out);

	cr_assert_eq(code, 0, "queue-check exit %d:\n%s", code, buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), " 0 problems"), "queue-check:\n%s", buf_cstr(&out));
	buf_free(&out);
}

/* The one message left in the queue (S5): its id. */
static unsigned long
only_info(void)
{
	unsigned long id = 0;
	unsigned k, found = 0;

	for (k = 0; k < 23; k++) {
		char *dir = xasprintf("%s/info/%u", s.qt.qdir, k);
		DIR *dp = opendir(dir);
		struct dirent *e;

		cr_assert(dp, "opendir %s", dir);
		while ((e = readdir(dp)) != NULL)
			if (e->d_name[0] != '.') {
				id = strtoul(e->d_name, NULL, 10);
				found++;
			}
		closedir(dp);
		free(dir);
	}
	cr_assert_eq(found, 1, "%u messages in info/, expected 1", found);
	return id;
}

static long long
ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000LL + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static const char msg1[] = "From: alice@example.org\nSubject: one\n\nhello\n";

/* ---- delivery ---- */

Test(send, delivers_and_eliminates)
{
	const char *rcpts[] = { "bob@example.net", "carol@example.com", "dave@example.org", NULL };
	struct buf got = BUF_INIT;
	char *c, *want, *mp;
	int st;

	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	wait_empty(10000);
	cr_assert_eq(ncalls(), 1, "%zu deliverer calls", ncalls());
	c = call(0);
	want = xasprintf("%s\tup1\t127.0.0.1\talice@example.org\t"
	    "bob@example.net,carol@example.com,dave@example.org", s.qt.conf);
	cr_assert_str_eq(c, want);
	/* The deliverer got the queued message on stdin: Received + original. */
	mp = xasprintf("%s/msg.0", s.qt.tmp);
	tl_read(mp, &got);
	cr_assert(got.len > sizeof msg1 && strncmp(got.s, "Received: (weir ", 16) == 0,
	    "message given: %s", buf_cstr(&got));
	{
		/* sendmail adds Date: and Message-ID:; the rest comes as given. */
		static const char tail[] = "\nFrom: alice@example.org\nSubject: one\n\nhello\n";

		cr_assert(got.len > sizeof tail && memcmp(got.s + got.len - (sizeof tail - 1), tail,
		    sizeof tail - 1) == 0, "message given: %s", buf_cstr(&got));
	}
	/* The line follows the last removal: wait for it. */
	cr_assert(sh_wait_for(log_has, ": end\n", 5000), "no end logged");
	assert_queue_sound();
	/* SIGTERM: exits 0 promptly. */
	kill(d1.pid, SIGTERM);
	{
		int i;

		for (i = 0; i < 500 && !shd_exited(&d1, &st); i++)
			usleep(10000);
		cr_assert_eq(d1.pid, 0, "weir-send still running 5 s after SIGTERM");
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

	inject("alice@example.org", r1, msg1);
	inject("alice@example.org", r2, msg1);
	start_send(&d1, 0);
	wait_empty(10000);
	cr_assert_eq(ncalls(), 2);
	assert_queue_sound();
}

/* No polling: the trigger wakes weir-send at once, every time. */
Test(send, trigger_wakes_within_a_second)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	struct timespec t0;
	size_t i;

	start_send(&d1, 0);
	usleep(300000);	/* idle first: nothing to do, nothing running */
	for (i = 0; i < 4; i++) {
		long long ms;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		inject("alice@example.org", rcpts, msg1);
		cr_assert(sh_wait_for(todo_empty, NULL, 1000),
		    "message %zu still in todo/ 1 s after injection:\n%s", i, send_log(&d1));
		wait_calls(i + 1, 2000);
		ms = ms_since(&t0);
		cr_assert(ms < 2000, "message %zu: %lld ms to the deliverer", i, ms);
		wait_empty(5000);
		usleep(100000);
	}
}

Test(send, batches_by_max_recipients)
{
	const char *rcpts[] = { "r1@example.net", "r2@example.net", "r3@example.net",
		"r4@example.net", "r5@example.net", NULL };
	char *e0, *e1, *e2;

	teardown();
	setup_with("upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  max_recipients = 2\n}\n");
	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	wait_empty(10000);
	cr_assert_eq(ncalls(), 3, "%zu calls", ncalls());
	e0 = call_env(0);
	e1 = call_env(1);
	e2 = call_env(2);
	cr_assert_str_eq(e0, "alice@example.org\tr1@example.net,r2@example.net");
	cr_assert_str_eq(e1, "alice@example.org\tr3@example.net,r4@example.net");
	cr_assert_str_eq(e2, "alice@example.org\tr5@example.net");
	free(e0);
	free(e1);
	free(e2);
	assert_queue_sound();
}

Test(send, local_recipients_go_to_admin)
{
	const char *rcpts[] = { "root", "ops@" SH_HOST, "bob@example.net", NULL };
	char *e;

	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	wait_empty(10000);
	e = call_env(0);
	cr_assert_str_eq(e, "alice@example.org\t" SH_ADMIN "," SH_ADMIN ",bob@example.net");
	free(e);
}

/* ---- bounces ---- */

static void
bounce_case(int bare)
{
	const char *rcpts[] = { "good@example.net", "bad@example.net", NULL };
	struct buf b = BUF_INIT;
	char *e0, *e1, *mp;

	start_send(&d1, bare);
	inject("alice@example.org", rcpts, msg1);
	wait_calls(2, 5000);
	wait_empty(5000);
	cr_assert_eq(ncalls(), 2, "%zu calls", ncalls());
	e0 = call_env(0);
	e1 = call_env(1);
	cr_assert_str_eq(e0, "alice@example.org\tgood@example.net,bad@example.net");
	/* The bounce: from <>, to the sender, delivered in turn. */
	cr_assert_str_eq(e1, "\talice@example.org");
	mp = xasprintf("%s/msg.1", s.qt.tmp);
	tl_read(mp, &b);
	cr_assert(strstr(buf_cstr(&b), "\nTo: alice@example.org\n"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "report-type=delivery-status"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "\nFinal-Recipient: rfc822; bad@example.net\n"
	    "Action: failed\nStatus: 5.1.1\n"), "%s", buf_cstr(&b));
	cr_assert(!strstr(buf_cstr(&b), "Final-Recipient: rfc822; good@"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "\nSubject: one\n"), "no original header: %s", buf_cstr(&b));
	assert_queue_sound();
	free(e0);
	free(e1);
	free(mp);
	buf_free(&b);
}

Test(send, permanent_failure_bounces_to_sender) { bounce_case(0); }

/* weir-send is told its config by -c only: its bounces must still go
 * into its own queue (not /etc/weir's or /var/spool/weir). */
Test(send, bounce_with_config_by_c_only) { bounce_case(1); }

Test(send, double_bounce_to_admin)
{
	char *e0, *e1;

	start_send(&d1, 0);
	inject_raw(S("F\0Tbad@example.net\0\0"), msg1);
	wait_calls(2, 10000);
	wait_empty(10000);
	cr_assert_eq(ncalls(), 2);
	e0 = call_env(0);
	e1 = call_env(1);
	cr_assert_str_eq(e0, "\tbad@example.net");
	cr_assert_str_eq(e1, "#@[]\t" SH_ADMIN);
	free(e0);
	free(e1);
	assert_queue_sound();
}

/* A failed double bounce is dropped: nothing more is sent. */
Test(send, failed_double_bounce_dropped)
{
	start_send(&d1, 0);
	inject_raw(S("F#@[]\0Tbad@example.net\0\0"), msg1);
	wait_calls(1, 10000);
	wait_empty(10000);
	usleep(500000);
	cr_assert_eq(ncalls(), 1, "%zu calls", ncalls());
	assert_queue_sound();
}

/* ---- temporary failures and deliverer trouble ---- */

static void
mailq_shows(const char *want)
{
	struct tl_result r;

	smt_run(&s.qt, "mailq", NULL, NULL, 0, NULL, &r);
	cr_assert_eq(r.status, 0, "mailq exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.out), want), "mailq lacks \"%s\":\n%s", want, buf_cstr(&r.out));
	tl_result_free(&r);
}

static int
deferred_logged(void *arg)
{
	return log_has(arg);
}

Test(send, temporary_failure_stays_queued)
{
	const char *rcpts[] = { "slow@example.net", "ok@example.net", NULL };
	unsigned long id;

	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	wait_calls(1, 10000);
	cr_assert(sh_wait_for(deferred_logged, "deferred <slow@example.net>", 5000), "%s",
	    send_log(&d1));
	usleep(300000);
	id = only_info();
	sh_assert_file(&s, Q_REMOTE, id, S("Tslow@example.net\0Dok@example.net\0"));
	cr_assert(!sh_exists(&s, Q_BOUNCE, id), "bounce/ for a temporary failure");
	cr_assert(sh_exists(&s, Q_MESS, id));
	mailq_shows("\tremote\tslow@example.net\n");
	mailq_shows("  done\tremote\tok@example.net\n");
	cr_assert_eq(ncalls(), 1, "retried at once: %zu calls", ncalls());
	assert_queue_sound();
}

/* Recipients put off in one batch do not keep the later ones from
 * being tried: an attempt is a pass over all of them, then one retry. */
Test(send, deferred_batch_does_not_starve_the_rest)
{
	const char *rcpts[] = { "slow1@example.net", "slow2@example.net", "r3@example.net",
		"r4@example.net", "r5@example.net", NULL };
	char *e0, *e1, *e2;
	unsigned long id;

	teardown();
	setup_with("upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  max_recipients = 2\n}\n");
	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	wait_calls(3, 10000);
	cr_assert(sh_wait_for(deferred_logged, "delivered to <r5@example.net>", 5000), "%s",
	    send_log(&d1));
	usleep(300000);
	e0 = call_env(0);
	e1 = call_env(1);
	e2 = call_env(2);
	cr_assert_str_eq(e0, "alice@example.org\tslow1@example.net,slow2@example.net");
	cr_assert_str_eq(e1, "alice@example.org\tr3@example.net,r4@example.net");
	cr_assert_str_eq(e2, "alice@example.org\tr5@example.net");
	id = only_info();
	sh_assert_file(&s, Q_REMOTE, id, S("Tslow1@example.net\0Tslow2@example.net\0"
	    "Dr3@example.net\0Dr4@example.net\0Dr5@example.net\0"));
	/* The pass is over: the two put off wait for their retry. */
	cr_assert_eq(ncalls(), 3, "%zu calls", ncalls());
	cr_assert(!sh_exists(&s, Q_BOUNCE, id), "bounce/ for temporary failures");
	free(e0);
	free(e1);
	free(e2);
	assert_queue_sound();
}

/* The deliverer dies, babbles, or stops short: nothing bounced, nothing
 * marked done, the message stays, the queue is sound. */
static void
trouble_case(const char *bad_rcpt)
{
	const char *rcpts[] = { "ok@example.net", bad_rcpt, "bad@example.net", NULL };
	struct buf want = BUF_INIT;
	unsigned long id;
	char *line = xasprintf("deferred <%s>", bad_rcpt);

	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	wait_calls(1, 10000);
	cr_assert(sh_wait_for(deferred_logged, line, 5000), "%s", send_log(&d1));
	usleep(300000);
	id = only_info();
	buf_printf(&want, "Tok@example.net%cT%s%cTbad@example.net%c", 0, bad_rcpt, 0, 0);
	sh_assert_file(&s, Q_REMOTE, id, want.s, want.len);
	cr_assert(!sh_exists(&s, Q_BOUNCE, id), "bounce/ after deliverer trouble");
	cr_assert_eq(ncalls(), 1, "%zu calls", ncalls());
	mailq_shows("\tremote\tok@example.net\n");
	assert_queue_sound();
	buf_free(&want);
	free(line);
}

Test(send, deliverer_crashes) { trouble_case("crash@example.net"); }
Test(send, deliverer_prints_garbage) { trouble_case("garbage@example.net"); }
Test(send, deliverer_omits_message_report) { trouble_case("nomsg@example.net"); }

/* ---- queue lifetime ---- */

/* A message older than queue_lifetime: an own temporary failure becomes
 * permanent (bounced); deliverer trouble never does. */
static unsigned long
old_s5(const char *rcpts, size_t rlen)
{
	static const char mess[] = "Received: (weir 1 invoked by uid 0); x\nSubject: old\n\nold\n";
	unsigned long id = sh_put_mess(&s, S(mess));
	char *ip;

	sh_write(&s, Q_INFO, id, S("Falice@example.org\0"));
	sh_write(&s, Q_REMOTE, id, rcpts, rlen);
	ip = sh_qpath(&s, Q_INFO, id);
	sh_set_mtime(ip, time(NULL) - 8 * 86400);
	free(ip);
	return id;
}

Test(send, expired_own_failure_bounces)
{
	struct buf b = BUF_INIT;
	char *e1, *mp;

	old_s5(S("Tslow@example.net\0"));
	start_send(&d1, 0);
	wait_calls(2, 10000);
	wait_empty(10000);
	e1 = call_env(1);
	cr_assert_str_eq(e1, "\talice@example.org");
	mp = xasprintf("%s/msg.1", s.qt.tmp);
	tl_read(mp, &b);
	cr_assert(strstr(buf_cstr(&b), "Final-Recipient: rfc822; slow@example.net\nAction: failed\n"
	    "Status: 5.2.1\n"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "in the queue too long"), "%s", buf_cstr(&b));
	free(e1);
	free(mp);
	buf_free(&b);
}

Test(send, expired_deliverer_crash_no_bounce)
{
	unsigned long id = old_s5(S("Tcrash@example.net\0"));

	start_send(&d1, 0);
	wait_calls(1, 10000);
	cr_assert(sh_wait_for(deferred_logged, "deferred <crash@example.net>", 5000), "%s",
	    send_log(&d1));
	usleep(300000);
	sh_assert_file(&s, Q_REMOTE, id, S("Tcrash@example.net\0"));
	cr_assert(!sh_exists(&s, Q_BOUNCE, id));
	cr_assert_eq(ncalls(), 1);
}

/* ---- crashes of weir-send itself ---- */

/* Nothing in S4 or S5 any more: a kill -9 may leave S2/S3 leftovers
 * (a weir-queue killed with it, an elimination cut short), which are the
 * 36-hour cleanup's business, as in qmail. */
static int
settled(void *arg)
{
	static const char *const dirs[] = { "todo", "info", "local", "remote", "bounce" };
	size_t i;
	int n = 0;

	(void)arg;
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		char *p = xasprintf("%s/%s", s.qt.qdir, dirs[i]);

		n += tl_count_files(p);
		free(p);
	}
	return n == 0;
}

static void
wait_settled(int ms)
{
	cr_assert(sh_wait_for(settled, NULL, ms), "messages still queued after %d ms:\n%s"
	    "weir-send said:\n%s", ms, listing(), send_log(&d1));
}

/* Which of the n recipients "m<i>@example.net" the deliverer has seen. */
static void
assert_all_delivered(size_t n)
{
	struct buf b = BUF_INIT;
	char name[32];
	size_t i;

	tl_read(calls, &b);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		cr_assert(strstr(buf_cstr(&b), name), "%s never delivered; calls:\n%s", name,
		    buf_cstr(&b));
	}
	buf_free(&b);
}

Test(send, kill9_while_delivering_then_restart)
{
	char name[32], *hang = xasprintf("%s/hang", s.qt.tmp);
	const char *rcpts[] = { name, NULL };
	size_t i, n = 6;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		inject("alice@example.org", rcpts, msg1);
	}
	tl_write(hang, "0.5", 3);
	start_send(&d1, 0);
	wait_calls(1, 5000);
	shd_kill9(&d1);			/* weir-send and the deliverers in flight */
	cr_assert(unlink(hang) == 0);
	start_send(&d1, 0);
	wait_settled(15000);
	assert_all_delivered(n);
	assert_queue_sound();
	free(hang);
}

/* kill -9 at many instants while messages are preprocessed, delivered,
 * bounced and eliminated; every recipient is delivered at least once. */
Test(send, kill9_at_many_instants)
{
	char name[32];
	const char *rcpts[] = { name, "bad@example.net", NULL };
	size_t i, n = 8;
	int k;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		inject("alice@example.org", rcpts, msg1);
	}
	for (k = 0; k < 12; k++) {
		start_send(&d1, 0);
		usleep((useconds_t)(k * 15000));
		shd_kill9(&d1);
		assert_queue_sound();
	}
	start_send(&d1, 0);
	wait_settled(30000);
	assert_all_delivered(n);
	/* And every message's bounce (for bad@) reached its sender. */
	{
		size_t c, nb = 0, nc = ncalls();

		for (c = 0; c < nc; c++) {
			char *e = call_env(c);

			nb += strcmp(e, "\talice@example.org") == 0;
			free(e);
		}
		cr_assert(nb >= n, "%zu bounces delivered for %zu messages", nb, n);
	}
	assert_queue_sound();
}

/* ---- one scheduler per queue ---- */

Test(send, second_instance_refused)
{
	const char *env[] = { env_remote, env_qq, env_conf, NULL };
	const char *rcpts[] = { "bob@example.net", NULL };
	char *l2;
	int st, i;

	start_send(&d1, 0);
	shd_start(&d2, &s, env);
	for (i = 0; i < 500 && !shd_exited(&d2, &st); i++)
		usleep(10000);
	cr_assert_eq(d2.pid, 0, "a second weir-send runs on the same queue");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 111, "second weir-send: status 0x%x", st);
	l2 = send_log(&d2);
	cr_assert(strstr(l2, "sendmutex"), "second weir-send said: %s", l2);
	/* The first one still works. */
	cr_assert(!shd_exited(&d1, &st), "the first weir-send died");
	inject("alice@example.org", rcpts, msg1);
	wait_empty(10000);
	free(l2);
}

/* ---- the order of durable steps (through the fault shim's call log) ---- */

static struct buf flog;

/* Index of the first line at or after from that is "<pid> op ... path=P ..."
 * (P exactly), or -1. */
static long
find_op(long from, const char *op, const char *path)
{
	const char *p = buf_cstr(&flog);
	long i = 0;
	char *pat = xasprintf(" path=%s ", path), *opat = xasprintf(" %s ", op);

	for (; p && *p; i++) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char *line = xstrndup(p, n);
		const char *sp = strchr(line, ' ');

		if (i >= from && sp && strncmp(sp, opat, strlen(opat)) == 0 && strstr(line, pat)) {
			free(line);
			free(pat);
			free(opat);
			return i;
		}
		free(line);
		p = e ? e + 1 : NULL;
	}
	free(pat);
	free(opat);
	return -1;
}

/* a happens, then b after it; returns b's index. */
static long
then(long a, const char *op, const char *path, const char *what)
{
	long b;

	cr_assert(a >= 0, "%s: the step before it never happened", what);
	b = find_op(a + 1, op, path);
	cr_assert(b > a, "%s: no %s %s after line %ld", what, op, path, a);
	return b;
}

Test(send, durable_order_of_steps)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	const char *fi = qt_faultinj();
	char *logp, *e1, *e2, *e3;
	char *todo, *intd, *info, *remote, *mess, *infod, *remoted, *intdd;
	unsigned long *ids, id;
	long i;

	if (fi == NULL) {
		teardown();	/* Criterion runs no .fini after a skip */
		cr_skip_test("no fault-injection shim ($WEIR_FAULTINJ)");
	}
	inject("alice@example.org", rcpts, msg1);
	cr_assert_eq(qt_list(&s.qt, "todo", &ids), 1);
	id = ids[0];
	free(ids);
	logp = xasprintf("%s/fault.log", s.qt.tmp);
	e1 = xasprintf("LD_PRELOAD=%s", fi);
	e2 = xasprintf("WEIR_FAULT_LOG=%s", logp);
	e3 = xstrdup("WEIR_FAULT_PROG=weir-send");
	{
		const char *env[] = { env_remote, env_qq, env_conf, e1, e2, e3, NULL };

		shd_start(&d1, &s, env);
	}
	wait_empty(10000);
	shd_stop(&d1);
	tl_read(logp, &flog);
	todo = sh_qpath(&s, Q_TODO, id);
	intd = sh_qpath(&s, Q_INTD, id);
	info = sh_qpath(&s, Q_INFO, id);
	remote = sh_qpath(&s, Q_REMOTE, id);
	mess = sh_qpath(&s, Q_MESS, id);
	intdd = xstrndup(intd, (size_t)(strrchr(intd, '/') - intd));
	infod = xstrndup(info, (size_t)(strrchr(info, '/') - info));
	remoted = xstrndup(remote, (size_t)(strrchr(remote, '/') - remote));

	/* S4 to S5: info and remote durable, their folders too, then intd
	 * gone durably (S5 has no intd), then todo. */
	i = find_op(0, "fsync", info);
	i = then(i, "fsync", remote, "preprocess");
	i = then(i, "fsync", infod, "preprocess");
	i = then(i, "fsync", remoted, "preprocess");
	i = then(i, "unlinkat", intd, "preprocess");
	i = then(i, "fsync", intdd, "preprocess: intd/N's removal durable before todo/N's");
	i = then(i, "unlinkat", todo, "preprocess");
	/* The D mark durable (its data: the bytes are overwritten) before
	 * elimination. */
	i = then(i, "pwrite", remote, "delivery");
	i = then(i, "fdatasync", remote, "delivery");
	/* S5 to S1: remote gone durably before info (S2 has no remote), info
	 * gone durably before mess (no info/ without mess/). */
	i = then(i, "unlinkat", remote, "elimination");
	i = then(i, "fsync", remoted, "elimination: remote/N's removal durable before info/N's");
	i = then(i, "unlinkat", info, "elimination");
	i = then(i, "fsync", infod, "elimination: info/N's removal durable before mess/N's");
	then(i, "unlinkat", mess, "elimination");

	buf_free(&flog);
	free(logp);
	free(e1);
	free(e2);
	free(e3);
	free(todo);
	free(intd);
	free(info);
	free(remote);
	free(mess);
	free(intdd);
	free(infod);
	free(remoted);
}

/* ---- concurrency ---- */

/* Inject n messages from alice, one each to m<i>@example.net. */
static void
inject_numbered(size_t n)
{
	char name[32];
	const char *rcpts[] = { name, NULL };
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		inject("alice@example.org", rcpts, msg1);
	}
}

/* The most deliverers at once, from conc.log's B and E lines. */
static int
max_at_once(struct buf *b)
{
	const char *p;
	int cur = 0, max = 0;

	for (p = buf_cstr(b); *p; p = strchr(p, '\n') + 1) {
		cur += *p == 'B' ? 1 : -1;
		if (cur > max)
			max = cur;
	}
	return max;
}

/* At most `concurrency` (2) deliverers at once, and that many used. */
Test(send, concurrency_limit)
{
	char *hang = xasprintf("%s/hang", s.qt.tmp);
	char *cl = xasprintf("%s/conc.log", s.qt.tmp);
	struct buf b = BUF_INIT;
	size_t n = 6;
	int max;

	inject_numbered(n);
	tl_write(hang, "0.3", 3);
	start_send(&d1, 0);
	wait_empty(15000);
	tl_read(cl, &b);
	max = max_at_once(&b);
	cr_assert_eq(max, 2, "%d deliverers at once, concurrency = 2:\n%s", max, buf_cstr(&b));
	assert_all_delivered(n);
	buf_free(&b);
	free(hang);
	free(cl);
}

/* ---- failing system calls in weir-send (the fault shim) ---- */

static void
start_faulty(const char *rules)
{
	const char *fi = qt_faultinj();
	char *e1, *e2, *e3 = xstrdup("WEIR_FAULT_PROG=weir-send");

	if (fi == NULL) {
		free(e3);
		teardown();	/* Criterion runs no .fini after a skip */
		cr_skip_test("no fault-injection shim ($WEIR_FAULTINJ)");
	}
	e1 = xasprintf("LD_PRELOAD=%s", fi);
	e2 = xasprintf("WEIR_FAULT=%s", rules);
	{
		const char *env[] = { env_remote, env_qq, env_conf, e1, e2, e3, NULL };

		shd_start(&d1, &s, env);
	}
	cr_assert(sh_wait_for(log_has, "started on", 5000), "weir-send did not start:\n%s",
	    send_log(&d1));
	free(e1);
	free(e2);
	free(e3);
}

/* bounce/N cannot be written: the failed recipient is not marked done
 * (it will be tried again), the delivered one is. */
Test(send, bounce_note_fails_recipient_not_done)
{
	const char *rcpts[] = { "good@example.net", "bad@example.net", NULL };
	unsigned long id;

	start_faulty("write@/bounce/=1+:ENOSPC");
	inject("alice@example.org", rcpts, msg1);
	wait_calls(1, 5000);
	cr_assert(sh_wait_for(deferred_logged, "write bounce/", 3000), "%s", send_log(&d1));
	usleep(300000);
	id = only_info();
	sh_assert_file(&s, Q_REMOTE, id, S("Dgood@example.net\0Tbad@example.net\0"));
	cr_assert_eq(ncalls(), 1);
	assert_queue_sound();
}

/* The D marks cannot be made durable: the message is not eliminated. */
Test(send, mark_fsync_fails_not_eliminated)
{
	const char *rcpts[] = { "good@example.net", NULL };
	unsigned long id;

	/* The D mark's fdatasync (preprocessing fsyncs remote/, the file
	 * and its folder). */
	start_faulty("fdatasync@/remote/=1+:EIO");
	inject("alice@example.org", rcpts, msg1);
	wait_calls(1, 5000);
	cr_assert(sh_wait_for(deferred_logged, "fdatasync", 3000), "%s", send_log(&d1));
	usleep(300000);
	id = only_info();
	cr_assert(sh_exists(&s, Q_MESS, id), "mess/ removed");
	cr_assert(sh_exists(&s, Q_REMOTE, id), "remote/ removed");
	cr_assert_eq(ncalls(), 1);
	assert_queue_sound();
}

/* Preprocessing cannot write: todo/ stays, nothing is sent; a healthy
 * restart then delivers. */
Test(send, preprocess_fails_then_restart)
{
	const char *rcpts[] = { "good@example.net", NULL };
	unsigned long *ids;

	start_faulty("write@/info/=1+:ENOSPC");
	inject("alice@example.org", rcpts, msg1);
	cr_assert(sh_wait_for(deferred_logged, "write info/", 3000), "%s", send_log(&d1));
	usleep(200000);
	cr_assert_eq(qt_list(&s.qt, "todo", &ids), 1, "todo/ gone after a failed preprocess");
	free(ids);
	cr_assert_eq(ncalls(), 0);
	assert_queue_sound();
	shd_stop(&d1);
	start_send(&d1, 0);
	wait_empty(5000);
	cr_assert_eq(ncalls(), 1);
}

/* The disk is full at preprocessing, then has room again: the message
 * goes within a minute, with no new mail, no flush, no restart.  Before,
 * it waited for the next trigger or the 25-minute rescan. */
Test(send, preprocess_enospc_tried_again_soon)
{
	const char *rcpts[] = { "good@example.net", NULL };
	struct timespec t0, t1;

	start_faulty("write@/info/=1:ENOSPC");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	inject("alice@example.org", rcpts, msg1);
	cr_assert(sh_wait_for(deferred_logged, "write info/", 3000), "%s", send_log(&d1));
	wait_calls(1, 60000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	wait_empty(5000);
	cr_assert_eq(ncalls(), 1);
	cr_assert(t1.tv_sec - t0.tv_sec >= 20, "tried again after %lld s: not the retry timer",
	    (long long)(t1.tv_sec - t0.tv_sec));
	assert_queue_sound();
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
	unsigned long id = sh_put_s4(&s, S(mess), S(todo), 1);

	start_send(&d1, 0);
	cr_assert(sh_wait_for(log_has, "left for the admin", 5000), "%s", send_log(&d1));
	inject("alice@example.org", rcpts, msg1);
	wait_calls(1, 5000);
	usleep(300000);
	cr_assert_eq(ncalls(), 1, "%zu calls", ncalls());
	{
		char *e = call_env(0);

		cr_assert_str_eq(e, "alice@example.org\tbob@example.net");
		free(e);
	}
	sh_assert_file(&s, Q_TODO, id, S(todo));
	sh_assert_file(&s, Q_MESS, id, S(mess));
	cr_assert(!sh_exists(&s, Q_INFO, id));
	cr_assert(!sh_exists(&s, Q_REMOTE, id));
}

/* ---- weir flush ---- */

static int
count_in_log(const char *what)
{
	struct buf b = BUF_INIT;
	const char *p;
	int n = 0;

	if (d1.log && access(d1.log, F_OK) == 0) {
		tl_read(d1.log, &b);
		for (p = buf_cstr(&b); (p = strstr(p, what)) != NULL; p++)
			n++;
	}
	buf_free(&b);
	return n;
}

static int
three_not_queued(void *arg)
{
	(void)arg;
	return count_in_log("not queued") >= 3;
}

/* An injector that fails (exit 71) while *flag exists, as it does on
 * return; the "QMAILQUEUE=" entry that names it. */
static char *
failing_qq(char **flag)
{
	char *wrap = xasprintf("%s/qq.sh", s.qt.tmp), *script, *e;

	*flag = xasprintf("%s/qqfail", s.qt.tmp);
	script = xasprintf("#!/bin/sh\n[ -e '%s' ] && exit 71\nexec '%s'\n", *flag, qq);
	tl_write(wrap, script, strlen(script));
	cr_assert(chmod(wrap, 0755) == 0);
	tl_write(*flag, "", 0);
	e = xasprintf("QMAILQUEUE=%s", wrap);
	free(script);
	free(wrap);
	return e;
}

/* Bounces that could not be queued wait for their retry; `weir flush`
 * tries them at once: each message then finishes (and leaves weir-send's
 * table while the flush is walking it).  glibc's tunables make a use of
 * freed memory crash instead of going unnoticed. */
Test(send, flush_after_failed_bounces)
{
	char *flag, *e_qq = failing_qq(&flag), *weir = tl_bin("weir");
	const char *env[] = { env_remote, e_qq, env_conf,
		"GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.perturb=165", NULL };
	const char *rcpts[] = { "bad@example.net", NULL };
	const char *fargv[] = { weir, "-c", s.qt.conf, "flush", NULL };
	struct tl_run run = { .argv = fargv };
	struct tl_result r;
	int st, i;

	for (i = 0; i < 3; i++)
		inject("alice@example.org", rcpts, msg1);
	shd_start(&d1, &s, env);
	cr_assert(sh_wait_for(three_not_queued, NULL, 10000), "%s", send_log(&d1));
	cr_assert_eq(ncalls(), 3);
	cr_assert(unlink(flag) == 0);
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "weir flush: exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
	if (!sh_wait_for(log_has, "flush: ", 5000)) {
		st = 0;
		cr_assert(!shd_exited(&d1, &st), "weir-send died during the flush (%s %d):\n%s",
		    WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) :
		    WEXITSTATUS(st), send_log(&d1));
		cr_assert_fail("no flush logged:\n%s", send_log(&d1));
	}
	wait_calls(6, 10000);
	wait_empty(10000);
	cr_assert(!shd_exited(&d1, &st), "weir-send died (status 0x%x):\n%s", st, send_log(&d1));
	for (i = 3; i < 6; i++) {
		char *e = call_env((size_t)i);

		cr_assert_str_eq(e, "\talice@example.org");
		free(e);
	}
	free(flag);
	free(e_qq);
	free(weir);
}

/* ---- upstream choice ---- */

/* The first upstream whose senders match, else the first without senders. */
Test(send, upstream_by_sender)
{
	const char *r1[] = { "x@example.net", NULL };
	char *c0, *c1, *w0, *w1;

	teardown();
	setup_with("upstream \"lists\" {\n  host = \"127.0.0.3\"\n  port = 2525\n  tls = \"none\"\n"
	    "  senders = {\"*@lists.example.org\"}\n}\n"
	    "upstream \"main\" {\n  host = \"127.0.0.2\"\n  port = 2525\n  tls = \"none\"\n}\n");
	start_send(&d1, 0);
	inject("owner@lists.example.org", r1, msg1);
	wait_calls(1, 5000);
	inject("alice@example.org", r1, msg1);
	wait_calls(2, 5000);
	wait_empty(5000);
	c0 = call(0);
	c1 = call(1);
	w0 = xasprintf("%s\tlists\t127.0.0.3\towner@lists.example.org\tx@example.net", s.qt.conf);
	w1 = xasprintf("%s\tmain\t127.0.0.2\talice@example.org\tx@example.net", s.qt.conf);
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

	teardown();
	setup_with("upstream \"lists\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  senders = {\"*@lists.example.org\"}\n}\n");
	start_send(&d1, 0);
	inject("alice@example.org", r1, msg1);
	cr_assert(sh_wait_for(log_has, "no upstream", 5000), "%s", send_log(&d1));
	usleep(200000);
	cr_assert_eq(ncalls(), 0);
	id = only_info();
	sh_assert_file(&s, Q_REMOTE, id, S("Tx@example.net\0"));
	cr_assert(!sh_exists(&s, Q_BOUNCE, id));
	assert_queue_sound();
}

/* A message without recipients (a stock qmail-queue takes one; weir-queue
 * does not) just leaves the queue, without a deliverer. */
Test(send, zero_recipients_eliminated)
{
	static const char mess[] = "Received: (qmail 5 invoked by uid 0); 21 Nov 2026 10:00:00 -0000\n"
	    "Subject: nobody\n\nx\n";

	sh_put_s4(&s, S(mess), S("u0\0p5\0Fa@example.org\0"), 1);
	start_send(&d1, 0);
	wait_empty(5000);
	cr_assert_eq(ncalls(), 0);
}

/* The deliverer cannot be run at all: deferred, nothing marked done. */
/* The missing deliverer seen: exec failed before the message was
 * handed to the session (its attempt is deferred) or after (it could not
 * be handed over: tried again later). */
static int
deliverer_failed(void *arg)
{
	(void)arg;
	return log_has("deferred <bad@example.net>") ||
	    log_has("a message could not be handed over");
}

Test(send, deliverer_missing)
{
	const char *env[] = { "WEIR_REMOTE=/nonexistent/weir-remote", env_qq, env_conf, NULL };
	const char *rcpts[] = { "ok@example.net", "bad@example.net", NULL };
	unsigned long id;

	shd_start(&d1, &s, env);
	cr_assert(sh_wait_for(log_has, "started on", 5000), "%s", send_log(&d1));
	inject("alice@example.org", rcpts, msg1);
	cr_assert(sh_wait_for(deliverer_failed, NULL, 5000), "%s", send_log(&d1));
	usleep(200000);
	id = only_info();
	sh_assert_file(&s, Q_REMOTE, id, S("Tok@example.net\0Tbad@example.net\0"));
	cr_assert(!sh_exists(&s, Q_BOUNCE, id));
	assert_queue_sound();
}

/* A deferred recipient waits for its retry (minutes away); `weir flush`
 * has it tried at once, alone (the delivered one is not sent again). */
Test(send, flush_retries_deferred_recipients_only)
{
	const char *rcpts[] = { "slow@example.net", "ok@example.net", NULL };
	char *ok = xasprintf("%s/slow-ok", s.qt.tmp), *weir = tl_bin("weir"), *e1;
	const char *fargv[] = { weir, "-c", s.qt.conf, "flush", NULL };
	struct tl_run run = { .argv = fargv };
	struct tl_result r;

	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	cr_assert(sh_wait_for(log_has, "deferred <slow@example.net>", 5000), "%s", send_log(&d1));
	usleep(300000);
	cr_assert_eq(ncalls(), 1);
	tl_write(ok, "", 0);
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "weir flush: exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
	wait_calls(2, 3000);
	wait_empty(5000);
	cr_assert_eq(ncalls(), 2);
	e1 = call_env(1);
	cr_assert_str_eq(e1, "alice@example.org\tslow@example.net");
	free(e1);
	free(ok);
	free(weir);
}

/* log.c: one line per event, "prog: level: text".  The upstream's reply
 * (several lines, any bytes) must not make more lines, or forge them. */
Test(send, log_one_line_per_event)
{
	const char *rcpts[] = { "good@example.net", "bad@example.net", "slow@example.net", NULL };
	char *l, *p, *line;

	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	cr_assert(sh_wait_for(log_has, "deferred <slow@example.net>", 5000), "%s", send_log(&d1));
	usleep(200000);
	l = send_log(&d1);
	for (p = l; *p; p = strchr(p, '\n') + 1) {
		line = xstrndup(p, (size_t)(strchr(p, '\n') - p));
		cr_assert(strstr(line, " weir-send[") || strncmp(line, "weir-queue: ", 12) == 0,
		    "log line \"%s\" is not an event line; the log:\n%s", line, l);
		free(line);
	}
	free(l);
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

	sh_put_s4(&s, S(qmail_mess), S(todo), 1);
	start_send(&d1, 0);
	wait_empty(5000);
	cr_assert_eq(ncalls(), 1);
	e0 = call_env(0);
	cr_assert_str_eq(e0, "someone@example.org\tx@example.net," SH_ADMIN);
	mp = xasprintf("%s/msg.0", s.qt.tmp);
	tl_read(mp, &got);
	sh_assert_bytes(got.s, got.len, S(qmail_mess), "the message on the deliverer's stdin");
	assert_queue_sound();
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
	unsigned long id = sh_put_mess(&s, S(qmail_mess));
	struct buf b = BUF_INIT;
	char *e0, *e1, *mp;

	sh_write(&s, Q_INFO, id, S("Fsomeone@example.org\0"));
	sh_write(&s, Q_REMOTE, id, S("Ddone@example.net\0Tleft@example.net\0Dgone@example.net\0"));
	sh_write(&s, Q_BOUNCE, id, S(notes));
	start_send(&d1, 0);
	wait_calls(2, 5000);
	wait_empty(5000);
	cr_assert_eq(ncalls(), 2);
	e0 = call_env(0);
	e1 = call_env(1);
	cr_assert_str_eq(e0, "someone@example.org\tleft@example.net");
	cr_assert_str_eq(e1, "\tsomeone@example.org");
	mp = xasprintf("%s/msg.1", s.qt.tmp);
	tl_read(mp, &b);
	cr_assert(strstr(buf_cstr(&b), "\nFinal-Recipient: rfc822; gone@example.net\nAction: failed\n"
	    "Status: 5.1.1\n"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "\nSubject: from qmail\n"), "%s", buf_cstr(&b));
	free(e0);
	free(e1);
	free(mp);
	buf_free(&b);
}

/* 250 recipients, max_recipients 100: three transactions, in order. */
Test(send, batches_many)
{
	struct buf env = BUF_INIT, want = BUF_INIT;
	char a[32];
	size_t i, k;

	teardown();
	setup_with("upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  max_recipients = 100\n}\n");
	qt_env_start(&env, "list@example.org");
	for (i = 0; i < 250; i++) {
		snprintf(a, sizeof a, "r%03zu@example.net", i);
		qt_env_rcpt(&env, a);
	}
	qt_env_end(&env);
	start_send(&d1, 0);
	inject_raw(env.s, env.len, msg1);
	wait_calls(3, 10000);
	wait_empty(5000);
	cr_assert_eq(ncalls(), 3);
	for (k = 0; k < 3; k++) {
		char *e = call_env(k);

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

/* ---- weir-gate ---- */

/* Rewrite the policy (the gate reloads it when it changes). */
static void
policy(const char *text)
{
	char *pp = xasprintf("%s/policy.conf", s.qt.tmp), *tmp = xasprintf("%s.tmp", pp);

	tl_write(tmp, text, strlen(text));
	cr_assert(rename(tmp, pp) == 0);
	free(pp);
	free(tmp);
}

/* Start times of the deliverers, from conc.log, in seconds. */
static size_t
starts(double *t, size_t max)
{
	char *cl = xasprintf("%s/conc.log", s.qt.tmp), *line;
	struct buf b = BUF_INIT;
	const char *p;
	size_t n = 0;

	tl_read(cl, &b);
	for (p = buf_cstr(&b); *p && n < max; p = strchr(p, '\n') + 1) {
		line = xstrndup(p, (size_t)(strchr(p, '\n') - p));
		if (line[0] == 'B')
			t[n++] = strtod(strrchr(line, ' ') + 1, NULL);
		free(line);
	}
	buf_free(&b);
	free(cl);
	return n;
}

/* No gate, nothing sent; the gate comes, the mail goes. */
Test(send, waits_for_the_gate)
{
	const char *rcpts[] = { "bob@example.net", NULL };

	shd_stop(&gate);
	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	usleep(1500000);
	cr_assert_eq(ncalls(), 0, "sent without a gate");
	cr_assert(!settled(NULL));
	shd_start_gate(&gate, &s, gsock);
	wait_calls(1, 35000);	/* reconnects after 1, 2, 4 ... 30 s */
	wait_empty(5000);
}

/* The gate restarts (kill -9): weir-send reconnects and goes on. */
Test(send, gate_restart)
{
	const char *rcpts[] = { "bob@example.net", NULL };

	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	wait_calls(1, 5000);
	wait_empty(5000);
	shd_kill9(&gate);
	usleep(200000);
	inject("alice@example.org", rcpts, msg1);
	usleep(500000);
	cr_assert_eq(ncalls(), 1, "sent without a gate");
	shd_start_gate(&gate, &s, gsock);
	wait_calls(2, 35000);
	wait_empty(5000);
	cr_assert(!shd_exited(&d1, NULL), "weir-send died with the gate");
}

/* The upstream says slow down: nothing bounced (even for a message
 * past queue_lifetime), nothing marked done, and the upstream is
 * suspended: another message waits too. */
Test(send, throttle_never_bounces_and_suspends)
{
	const char *rcpts[] = { "ok@example.net", NULL };
	unsigned long id = old_s5(S("Tthrottle@example.net\0Tok2@example.net\0"));

	start_send(&d1, 0);
	wait_calls(1, 5000);
	cr_assert(sh_wait_for(log_has, "throttl", 5000), "%s", send_log(&d1));
	usleep(300000);
	sh_assert_file(&s, Q_REMOTE, id, S("Tthrottle@example.net\0Tok2@example.net\0"));
	cr_assert(!sh_exists(&s, Q_BOUNCE, id), "a throttle became a bounce");
	inject("alice@example.org", rcpts, msg1);
	usleep(1500000);
	cr_assert_eq(ncalls(), 1, "sent while the upstream is suspended:\n%s", send_log(&d1));
	assert_queue_sound();
}

/* "2 per 1s": six messages take their time, never 3 starts within a
 * second; everything still goes. */
Test(send, gate_rate_is_honoured)
{
	char name[32];
	const char *rcpts[] = { name, NULL };
	double t[16];
	size_t i, j, n = 6, k;

	policy("upstream \"up1\" { rate = \"2 per 1s\" }\n"
	    "upstream \"lists\" { rate = \"2 per 1s\" }\nupstream \"main\" { rate = \"2 per 1s\" }\n");
	usleep(300000);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		inject("alice@example.org", rcpts, msg1);
	}
	start_send(&d1, 0);
	wait_calls(n, 15000);
	wait_empty(5000);
	k = starts(t, 16);
	cr_assert_eq(k, n);
	for (i = 0; i < k; i++) {
		size_t in = 0;

		for (j = 0; j < k; j++)
			in += t[j] >= t[i] && t[j] < t[i] + 0.95;
		cr_assert(in <= 2, "%zu deliveries started within 0.95 s of %.3f", in, t[i]);
	}
	assert_all_delivered(n);
}

/* The gate's own recipients-per-transaction cap (policy.conf) cuts a
 * batch that weir.conf's max_recipients allowed: the rest follows. */
Test(send, gate_caps_recipients_per_transaction)
{
	const char *rcpts[] = { "r1@example.net", "r2@example.net", "r3@example.net",
		"r4@example.net", "bad5@example.net", NULL };
	char *e0, *e1, *e2;

	policy("upstream \"up1\" { rate = \"1000 per 1s\" max_recipients = 2 }\n"
	    "upstream \"lists\" { rate = \"1000 per 1s\" }\nupstream \"main\" { rate = \"1000 per 1s\" }\n");
	usleep(300000);
	start_send(&d1, 0);
	inject("alice@example.org", rcpts, msg1);
	wait_calls(4, 10000);	/* 3 transactions, then the bounce for bad5 */
	wait_empty(5000);
	e0 = call_env(0);
	e1 = call_env(1);
	e2 = call_env(2);
	cr_assert_str_eq(e0, "alice@example.org\tr1@example.net,r2@example.net");
	cr_assert_str_eq(e1, "alice@example.org\tr3@example.net,r4@example.net");
	cr_assert_str_eq(e2, "alice@example.org\tbad5@example.net");
	cr_assert_eq(ncalls(), 4);
	free(e0);
	free(e1);
	free(e2);
	assert_queue_sound();
}

/* ---- weir's own notes (sched/S/N): the waiting credit ---- */

#define UP1 "upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n}\n"
#define WEEK (7 * 86400LL)

/* A message in S5 from this sender ("" for <>), queued age seconds ago. */
static unsigned long
aged_s5(const char *sender, const char *rcpts, size_t rlen, long long age)
{
	static const char mess[] = "Received: (weir 1 invoked by uid 0); x\nSubject: aged\n\naged\n";
	unsigned long id = sh_put_mess(&s, S(mess));
	struct buf info = BUF_INIT;
	char *ip;

	buf_printf(&info, "F%s", sender);
	buf_addc(&info, '\0');
	sh_write(&s, Q_INFO, id, info.s, info.len);
	sh_write(&s, Q_REMOTE, id, rcpts, rlen);
	ip = sh_qpath(&s, Q_INFO, id);
	sh_set_mtime(ip, time(NULL) - age);
	free(ip);
	buf_free(&info);
	return id;
}

static long long
birth_of(unsigned long id)
{
	char *ip = sh_qpath(&s, Q_INFO, id);
	long long b = (long long)sh_mtime(ip);

	free(ip);
	return b;
}

/* Its id in the log (mail/queue.h), from info/'s mtime. */
static char *
qid_of(unsigned long id)
{
	char *ip = sh_qpath(&s, Q_INFO, id), qid[QUEUE_ID_MAX];
	struct stat st;

	cr_assert(stat(ip, &st) == 0, "stat %s: %s", ip, strerror(errno));
	free(ip);
	return xstrdup(queue_msgid(qid, id, &st.st_mtim));
}

static char *
note_path(unsigned long id)
{
	return xasprintf("%s/sched/%lu/%lu", s.qt.qdir, id % 23, id);
}

static void
make_sched_dirs(void)
{
	char *p = xasprintf("%s/sched", s.qt.qdir);
	unsigned k;

	cr_assert(mkdir(p, 0700) == 0 || errno == EEXIST, "mkdir %s", p);
	for (k = 0; k < 23; k++) {
		char *sub = xasprintf("%s/%u", p, k);

		cr_assert(mkdir(sub, 0700) == 0 || errno == EEXIST, "mkdir %s", sub);
		free(sub);
	}
	free(p);
}

static void
write_note(unsigned long id, long long birth, long long waited, long long since, long long warned)
{
	struct schednote n = { birth, waited, since, warned };
	struct buf b = BUF_INIT;
	char *p = note_path(id);

	make_sched_dirs();
	schedfile_format(&n, &b);
	tl_write(p, b.s, b.len);
	buf_free(&b);
	free(p);
}

/* Read id's note; 0 if there is none. */
static int
read_note(unsigned long id, struct schednote *n)
{
	char *p = note_path(id);
	struct buf b = BUF_INIT, why = BUF_INIT;
	int r = 0;

	if (access(p, F_OK) == 0) {
		tl_read(p, &b);
		cr_assert(schedfile_parse(buf_cstr(&b), b.len, n, &why) == 0, "%s: %s: \"%s\"", p,
		    buf_cstr(&why), buf_cstr(&b));
		r = 1;
	}
	buf_free(&b);
	buf_free(&why);
	free(p);
	return r;
}

static long long
read_alive(void)
{
	char *p = xasprintf("%s/sched/alive", s.qt.qdir);
	struct buf b = BUF_INIT;
	long long t = 0;

	tl_read(p, &b);
	cr_assert(schedfile_parse_alive(buf_cstr(&b), b.len, &t) == 0, "sched/alive: \"%s\"",
	    buf_cstr(&b));
	buf_free(&b);
	free(p);
	return t;
}

static void
write_alive(long long t)
{
	char *p = xasprintf("%s/sched/alive", s.qt.qdir), *v = xasprintf("%lld\n", t);

	make_sched_dirs();
	tl_write(p, v, strlen(v));
	free(p);
	free(v);
}

static char *
delivered_msg(size_t i)
{
	char *mp = xasprintf("%s/msg.%zu", s.qt.tmp, i);
	struct buf b = BUF_INIT;

	tl_read(mp, &b);
	free(mp);
	return b.s ? b.s : xstrdup("");
}

static void
run_flush(void)
{
	char *weir = tl_bin("weir");
	const char *fargv[] = { weir, "-c", s.qt.conf, "flush", NULL };
	struct tl_run run = { .argv = fargv };
	struct tl_result r;

	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "weir flush: exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
	free(weir);
}

/* A note says the message waited 600 s, or waited from 900 s ago until
 * sched/alive said weir-send last ran 300 s ago: either way it is not
 * yet past queue_lifetime (7d + 300 s old) and a temporary refusal does
 * not bounce it.  A note left by an earlier message with the same id
 * (another birth) is ignored and removed: that one bounces. */
Test(send, credit_from_note_keeps_message_alive)
{
	unsigned long a, b, c;
	long long now = time(NULL);
	struct schednote n;
	char *line, *cp, *m, *qa, *qb, *qc;
	size_t k;

	a = aged_s5("alice@example.org", S("Tslow1@example.net\0"), WEEK + 300);
	b = aged_s5("alice@example.org", S("Tslow2@example.net\0"), WEEK + 300);
	c = aged_s5("alice@example.org", S("Tslow3@example.net\0"), WEEK + 300);
	write_note(a, birth_of(a), 600, 0, 0);
	write_note(b, birth_of(b), 0, now - 900, 0);
	write_alive(now - 300);
	write_note(c, birth_of(c) - 1, 600, 0, 0);
	qa = qid_of(a);
	qb = qid_of(b);
	qc = qid_of(c);
	start_send(&d1, 0);
	wait_calls(4, 10000);	/* three attempts and slow3's bounce */
	cr_assert(sh_wait_for(log_has, "deferred <slow2@example.net>", 5000), "%s", send_log(&d1));
	usleep(300000);
	line = xasprintf("msg %s: 600 s of waiting carried over\n", qa);
	cr_assert(log_has(line), "no \"%s\":\n%s", line, send_log(&d1));
	free(line);
	line = xasprintf("msg %s: 600 s of waiting carried over\n", qb);
	cr_assert(log_has(line), "no \"%s\":\n%s", line, send_log(&d1));
	free(line);
	line = xasprintf("msg %s: removing sched/%lu/%lu, left by an earlier message", qc,
	    c % 23, c);
	cr_assert(log_has(line), "no \"%s\":\n%s", line, send_log(&d1));
	free(line);
	sh_assert_file(&s, Q_REMOTE, a, S("Tslow1@example.net\0"));
	sh_assert_file(&s, Q_REMOTE, b, S("Tslow2@example.net\0"));
	cr_assert(!sh_exists(&s, Q_BOUNCE, a) && !sh_exists(&s, Q_BOUNCE, b));
	cr_assert(!sh_exists(&s, Q_INFO, c), "slow3 was not bounced:\n%s", send_log(&d1));
	cr_assert_eq(ncalls(), 4, "%zu calls", ncalls());
	/* The bounce is the last call after slow3's, whatever order the
	 * three attempts took. */
	for (k = 0; k < 4; k++) {
		cp = call_env(k);
		if (strcmp(cp, "\talice@example.org") == 0)
			break;
		free(cp);
	}
	cr_assert(k < 4, "no bounce among the calls");
	m = delivered_msg(k);
	cr_assert(strstr(m, "Final-Recipient: rfc822; slow3@example.net\nAction: failed\n"), "%s", m);
	/* b's open wait is closed now, its credit kept. */
	cr_assert(read_note(b, &n), "b's note is gone");
	cr_assert_eq(n.waited, 600, "b's note: waited %lld\n%s", n.waited, send_log(&d1));
	cr_assert_eq(n.since, 0, "b's note still says it waits (since %lld)", n.since);
	cr_assert_eq(n.birth, birth_of(b));
	assert_queue_sound();
	free(cp);
	free(m);
	free(qa);
	free(qb);
	free(qc);
}

static int
note_has_open_wait(void *arg)
{
	struct schednote n;

	return read_note(*(unsigned long *)arg, &n) && n.since != 0;
}

/* The credit across a real restart: a message waits at weir-gate (the
 * window is used up); weir-send records the open wait once it has lasted
 * 30 s, is killed, and the next weir-send credits it up to sched/alive.
 * Then the window opens and the message goes; its note goes with it. */
Test(send, credit_survives_restart)
{
	const char *r0[] = { "bob@example.net", NULL }, *r1[] = { "carol@example.net", NULL };
	struct schednote n;
	unsigned long id;
	long long alive, carried;
	char *line, *qa;

	policy("upstream \"up1\" { rate = \"1 per 1h\" }\n"
	    "upstream \"lists\" { rate = \"1 per 1h\" }\nupstream \"main\" { rate = \"1 per 1h\" }\n");
	usleep(300000);
	start_send(&d1, 0);
	inject("alice@example.org", r0, msg1);
	wait_calls(1, 5000);
	cr_assert(sh_wait_for(log_has, ": end\n", 5000), "%s", send_log(&d1));
	inject("alice@example.org", r1, msg1);
	cr_assert(sh_wait_for(todo_empty, NULL, 5000));
	id = only_info();
	cr_assert(sh_wait_for(note_has_open_wait, &id, 60000), "no open wait recorded for %lu:\n%s",
	    id, send_log(&d1));
	shd_kill9(&d1);
	cr_assert_eq(ncalls(), 1, "sent past the gate");
	cr_assert(read_note(id, &n));
	alive = read_alive();
	carried = n.waited + (alive > n.since ? alive - n.since : 0);
	cr_assert_eq(n.birth, birth_of(id));
	cr_assert(carried >= 29, "only %lld s to carry over (note: waited %lld since %lld; alive %lld)",
	    carried, n.waited, n.since, alive);
	start_send(&d1, 0);
	qa = qid_of(id);
	line = xasprintf("msg %s: %lld s of waiting carried over\n", qa, carried);
	cr_assert(sh_wait_for(log_has, line, 5000), "no \"%s\":\n%s", line, send_log(&d1));
	free(line);
	policy("upstream \"up1\" { rate = \"1000 per 1s\" }\n"
	    "upstream \"lists\" { rate = \"1000 per 1s\" }\nupstream \"main\" { rate = \"1000 per 1s\" }\n");
	wait_calls(2, 10000);
	wait_empty(5000);
	cr_assert(sh_wait_for(log_has, ": end\n", 5000));
	cr_assert(!read_note(id, &n), "the note outlived its message");
	assert_queue_sound();
	free(qa);
}

/* A note whose message is gone is removed by the cleanup at start;
 * queue-check reports a malformed note (notes are not fsynced: a power
 * cut can leave one so) as a note, not a problem. */
Test(send, note_leftover_and_malformed)
{
	struct buf out = BUF_INIT;
	char *p = note_path(4242), *bad;
	const char *rcpts[] = { "slow@example.net", NULL };
	unsigned long id;

	write_note(4242, 1700000000, 5, 0, 0);
	start_send(&d1, 0);
	cr_assert(sh_wait_for(log_has, "removed sched/", 5000), "%s", send_log(&d1));
	cr_assert(access(p, F_OK) != 0, "%s is still there", p);
	assert_queue_sound();
	/* A message deferred: then a broken note for it is reported. */
	inject("alice@example.org", rcpts, msg1);
	cr_assert(sh_wait_for(log_has, "deferred <slow@example.net>", 5000), "%s", send_log(&d1));
	shd_stop(&d1);
	id = only_info();
	bad = note_path(id);
	tl_write(bad, "birth 1\nwaited x\n", 17);
	cr_assert_eq(sh_queue_check(&s, &out), 0, "queue-check failed a malformed note:\n%s",
	    buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), "line 2") && strstr(buf_cstr(&out), "weir-send replaces it"),
	    "%s", buf_cstr(&out));
	/* weir-send takes an unreadable note as "no credit, warned", and
	 * writes it so. */
	start_send(&d1, 0);
	cr_assert(sh_wait_for(log_has, "is malformed", 5000), "%s", send_log(&d1));
	{
		struct schednote n;

		cr_assert(read_note(id, &n), "no note");
		cr_assert(n.warned != 0 && n.waited == 0 && n.birth == birth_of(id),
		    "note: warned %lld waited %lld", n.warned, n.waited);
	}
	assert_queue_sound();
	buf_free(&out);
	free(p);
	free(bad);
}

/* ---- the delay warning ---- */

/* One warning, at the first temporary refusal after delay_warning: every
 * pending recipient (the refused one with its reply, the one not tried
 * yet), none delivered; Action: delayed, Will-Retry-Until the end of the
 * lifetime.  Never a second one: not at the next refusal, not after a
 * kill -9 and restart. */
Test(send, delay_warning_once)
{
	unsigned long id;
	struct schednote n;
	char *m, *e, date[DATE_RFC5322_MAX], *want;
	int k, found = 0;
	size_t warning;

	teardown();
	setup_with("delay_warning = \"1h\"\n"
	    "upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  max_recipients = 2\n}\n");
	id = aged_s5("alice@example.org", S("Tslow@example.net\0Tok@example.net\0Tlater@example.net\0"),
	    2 * 3600);
	start_send(&d1, 0);
	/* The pass: (slow, ok), then (later); the warning, queued when the
	 * first batch came back, races with the second batch. */
	wait_calls(3, 10000);
	e = call_env(0);
	cr_assert_str_eq(e, "alice@example.org\tslow@example.net,ok@example.net");
	free(e);
	e = call_env(1);
	warning = strcmp(e, "\talice@example.org") == 0 ? 1 : 2;
	free(e);
	e = call_env(3 - warning);
	cr_assert_str_eq(e, "alice@example.org\tlater@example.net");
	free(e);
	e = call_env(warning);
	cr_assert_str_eq(e, "\talice@example.org", "the warning went to: %s", e);
	free(e);
	m = delivered_msg(warning);
	cr_assert(strstr(m, "\nTo: alice@example.org\n"), "%s", m);
	cr_assert(strstr(m, "\nSubject: delivery delayed (still trying)\n"), "%s", m);
	cr_assert(strstr(m, "report-type=delivery-status"), "%s", m);
	cr_assert(strstr(m, "\nFinal-Recipient: rfc822; slow@example.net\nAction: delayed\n"
	    "Status: 4.2.1\nDiagnostic-Code: smtp; 127.0.0.1 does not like recipient. Remote host "
	    "said: 451 4.2.1 try later\nWill-Retry-Until: "), "%s", m);
	cr_assert(strstr(m, "\nFinal-Recipient: rfc822; later@example.net\nAction: delayed\n"
	    "Status: 4.0.0\nWill-Retry-Until: "), "%s", m);
	cr_assert(strstr(m, "<later@example.net>:\nNo reply yet"), "%s", m);
	cr_assert(!strstr(m, "ok@example.net"), "a delivered recipient is listed:\n%s", m);
	cr_assert(strstr(m, "\nSubject: aged\n"), "no original header:\n%s", m);
	/* Will-Retry-Until: birth + queue_lifetime (+ the few seconds waited). */
	for (k = 0; k < 5 && !found; k++) {
		date_rfc5322(date, (time_t)(birth_of(id) + WEEK + k));
		want = xasprintf("Will-Retry-Until: %s\n", date);
		found = strstr(m, want) != NULL;
		free(want);
	}
	cr_assert(found, "Will-Retry-Until is not the end of the lifetime:\n%s", m);
	free(m);
	cr_assert(read_note(id, &n) && n.warned != 0, "no durable mark");
	cr_assert_eq(count_in_log("delay warning to <alice@example.org> queued"), 1);
	/* The next refusal: no second warning. */
	cr_assert(sh_wait_for(log_has, "delivered to <later@example.net>", 5000));
	run_flush();
	wait_calls(4, 5000);
	e = call_env(3);
	cr_assert_str_eq(e, "alice@example.org\tslow@example.net");
	free(e);
	usleep(500000);
	cr_assert_eq(ncalls(), 4, "a second warning? %zu calls", ncalls());
	/* kill -9 and restart: tried at once, refused, still no warning. */
	shd_kill9(&d1);
	start_send(&d1, 0);
	wait_calls(5, 5000);
	cr_assert(sh_wait_for(log_has, "deferred <slow@example.net>", 5000), "%s", send_log(&d1));
	usleep(500000);
	cr_assert_eq(ncalls(), 5, "a second warning after a restart? %zu calls", ncalls());
	cr_assert_eq(count_in_log("delay warning"), 0, "%s", send_log(&d1));
	assert_queue_sound();
}

/* Of six messages refused alike, only the one that is a plain message,
 * old enough once its waits are taken off, gets a warning: not a bounce
 * (<>), not a double bounce (<#@[]>), not one queued 30 minutes ago, not
 * one that waited 90 of its 120 minutes. */
Test(send, delay_warning_only_when_due)
{
	unsigned long old;
	unsigned long w;
	char *line, *qa;

	teardown();
	setup_with("delay_warning = \"1h\"\n" UP1);
	aged_s5("", S("Tslow@example.net\0"), 2 * 3600);
	aged_s5("#@[]", S("Tslow@example.net\0"), 2 * 3600);
	aged_s5("alice@example.org", S("Tslow@example.net\0"), 1800);
	w = aged_s5("alice@example.org", S("Tslow@example.net\0"), 2 * 3600);
	write_note(w, birth_of(w), 5400, 0, 0);
	old = aged_s5("old@example.org", S("Tslow@example.net\0"), 2 * 3600);
	qa = qid_of(w);
	start_send(&d1, 0);
	wait_calls(6, 10000);	/* five attempts, one warning */
	cr_assert(sh_wait_for(log_has, "delay warning to <old@example.org> queued", 5000), "%s",
	    send_log(&d1));
	usleep(500000);
	cr_assert_eq(count_in_log("deferred <slow@example.net>"), 5, "%s", send_log(&d1));
	cr_assert_eq(count_in_log("delay warning"), 1, "%s", send_log(&d1));
	cr_assert_eq(ncalls(), 6, "%zu calls", ncalls());
	line = xasprintf("msg %s: 5400 s of waiting carried over", qa);
	cr_assert(log_has(line), "%s", send_log(&d1));
	free(line);
	(void)old;
	assert_queue_sound();
	free(qa);
}

/* The warning cannot be queued: the mark is taken back, and the next
 * refusal sends it. */
Test(send, delay_warning_retried_when_not_queued)
{
	char *flag, *e_qq;
	const char *env[] = { NULL, NULL, NULL, NULL };
	struct schednote n;
	unsigned long id;

	teardown();
	setup_with("delay_warning = \"1h\"\n" UP1);
	e_qq = failing_qq(&flag);
	env[0] = env_remote;
	env[1] = e_qq;
	env[2] = env_conf;
	id = aged_s5("alice@example.org", S("Tslow@example.net\0"), 2 * 3600);
	shd_start(&d1, &s, env);
	cr_assert(sh_wait_for(log_has, "delay warning to <alice@example.org> not queued", 10000),
	    "%s", send_log(&d1));
	usleep(300000);
	cr_assert(read_note(id, &n), "no note");
	cr_assert_eq(n.warned, 0, "the mark stayed although no warning was queued");
	cr_assert_eq(ncalls(), 1);
	cr_assert(unlink(flag) == 0);
	run_flush();
	cr_assert(sh_wait_for(log_has, "delay warning to <alice@example.org> queued", 10000),
	    "%s", send_log(&d1));
	wait_calls(3, 5000);
	{
		char *e = call_env(2);

		cr_assert_str_eq(e, "\talice@example.org");
		free(e);
	}
	free(flag);
	free(e_qq);
}

/* ---- SIGHUP: re-reading weir.conf ---- */

static void
hup_and_wait(const char *what)
{
	int before = count_in_log(what), i;

	cr_assert(kill(d1.pid, SIGHUP) == 0);
	for (i = 0; i < 500 && count_in_log(what) <= before; i++)
		usleep(10000);
	cr_assert(count_in_log(what) > before, "no \"%s\" after SIGHUP:\n%s", what, send_log(&d1));
}

/* Replace the first `from` in the config file by `to`. */
static void
conf_replace(const char *from, const char *to)
{
	struct buf b = BUF_INIT, n = BUF_INIT;
	const char *p;

	tl_read(s.qt.conf, &b);
	p = strstr(buf_cstr(&b), from);
	cr_assert(p, "\"%s\" not in the config:\n%s", from, buf_cstr(&b));
	buf_add(&n, b.s, (size_t)(p - b.s));
	buf_adds(&n, to);
	buf_adds(&n, p + strlen(from));
	tl_write(s.qt.conf, n.s, n.len);
	buf_free(&b);
	buf_free(&n);
}

static int
conf_lines(void)
{
	struct buf b = BUF_INIT;
	size_t i;
	int n = 0;

	tl_read(s.qt.conf, &b);
	for (i = 0; i < b.len; i++)
		n += b.s[i] == '\n';
	buf_free(&b);
	return n;
}

/* No upstream takes alice's mail; a reload adds one: her message goes at
 * once through it, without waiting for its retry. */
Test(send, reload_adds_upstream)
{
	const char *r1[] = { "x@example.net", NULL };
	char *c0, *w0;

	teardown();
	setup_with("upstream \"lists\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  senders = {\"*@lists.example.org\"}\n}\n");
	start_send(&d1, 0);
	inject("alice@example.org", r1, msg1);
	cr_assert(sh_wait_for(log_has, "no upstream", 5000), "%s", send_log(&d1));
	sh_conf_append(&s, "upstream \"main\" {\n  host = \"127.0.0.2\"\n  port = 2525\n"
	    "  tls = \"none\"\n}\n");
	hup_and_wait("reloaded");
	cr_assert(log_has("upstreams 2,"), "%s", send_log(&d1));
	cr_assert(log_has("messages moved to another upstream: 1\n"), "%s", send_log(&d1));
	wait_calls(1, 5000);
	wait_empty(5000);
	c0 = call(0);
	w0 = xasprintf("%s\tmain\t127.0.0.2\talice@example.org\tx@example.net", s.qt.conf);
	cr_assert_str_eq(c0, w0);
	free(c0);
	free(w0);
}

/* A file with errors changes nothing: each error with file and line;
 * mail still goes.  Keys read at start only are logged and kept. */
Test(send, reload_bad_file_and_restart_only_keys)
{
	const char *r1[] = { "x@example.net", NULL }, *r0[] = { "slow@example.net", NULL };
	char *want, *ok = xasprintf("%s/slow-ok", s.qt.tmp);
	int line;

	start_send(&d1, 0);
	inject("alice@example.org", r0, msg1);
	cr_assert(sh_wait_for(log_has, "deferred <slow@example.net>", 5000), "%s", send_log(&d1));
	line = conf_lines() + 2;
	sh_conf_append(&s, "concurrency = 3\nretry_skip = 0\n");
	hup_and_wait("stays in force");
	want = xasprintf("SIGHUP: %s:%d: retry_skip = 0 is out of range", s.qt.conf, line);
	cr_assert(log_has(want), "no \"%s\":\n%s", want, send_log(&d1));
	free(want);
	cr_assert(!log_has("reloaded"), "%s", send_log(&d1));
	/* weir-send goes on with what it had (weir flush and sendmail read
	 * the broken file too: do what weir flush does by hand). */
	tl_write(ok, "", 0);
	{
		char *fl = xasprintf("%s/lock/flush", s.qt.qdir);
		char *tr = xasprintf("%s/lock/trigger", s.qt.qdir);
		int fd;

		tl_write(fl, "", 0);
		fd = open(tr, O_WRONLY | O_NONBLOCK);
		cr_assert(fd >= 0 && write(fd, "", 1) == 1, "pull %s", tr);
		close(fd);
		free(fl);
		free(tr);
	}
	wait_calls(2, 5000);
	wait_empty(5000);
	/* ...and so did the deliverer: its -c is weir-send's snapshot of
	 * the file as it was, not the broken file. */
	{
		char *c1 = call(1), *cp = xasprintf("%s/conf.1", s.qt.tmp);
		struct buf got = BUF_INIT;

		cr_assert(strncmp(c1, "snapshot /proc/self/fd/", 23) == 0,
		    "the deliverer read the file itself: %s", c1);
		tl_read(cp, &got);
		cr_assert(strstr(buf_cstr(&got), "upstream \"up1\""), "%s", buf_cstr(&got));
		cr_assert(!strstr(buf_cstr(&got), "retry_skip = 0"), "the broken config reached "
		    "the deliverer:\n%s", buf_cstr(&got));
		buf_free(&got);
		free(cp);
		free(c1);
	}
	free(ok);
	/* Fixed, with keys weir-send reads only at start changed. */
	conf_replace("retry_skip = 0\n", "retry_skip = 30\ngate_socket = \"/nonexistent/gate.sock\"\n"
	    "queue_split = 7\n");
	hup_and_wait("reloaded");
	cr_assert(log_has("gate_socket = \"/nonexistent/gate.sock\" needs a restart of weir-send"),
	    "%s", send_log(&d1));
	cr_assert(log_has("queue_split = 7 needs a restart of weir-send"), "%s", send_log(&d1));
	cr_assert(log_has("concurrency 3, queue_lifetime 604800 s, retry_skip 30,"), "%s",
	    send_log(&d1));
	conf_replace("queue_split = 7\n", "");	/* sendmail must agree with the queue */
	inject("alice@example.org", r1, msg1);
	wait_calls(3, 5000);
	wait_empty(5000);
	assert_queue_sound();
}

/* concurrency raised live (1 to 3) while a delivery runs: two more start
 * at once; the one in flight finishes and is applied. */
Test(send, reload_concurrency_live)
{
	char *hang = xasprintf("%s/hang", s.qt.tmp);
	char *cl = xasprintf("%s/conc.log", s.qt.tmp);
	struct buf b = BUF_INIT;
	size_t n = 6;
	int max;

	sh_conf_append(&s, "concurrency = 1\n");
	inject_numbered(n);
	tl_write(hang, "1.5", 3);
	start_send(&d1, 0);
	cr_assert(sh_wait_for(log_has, "delivering to", 5000), "%s", send_log(&d1));
	usleep(300000);
	tl_read(cl, &b);
	cr_assert_eq(b.len > 0 && strchr(b.s, '\n') == b.s + b.len - 1, 1,
	    "more than one delivery before the reload:\n%s", buf_cstr(&b));
	buf_reset(&b);
	sh_conf_append(&s, "concurrency = 3\n");
	hup_and_wait("reloaded");
	wait_empty(20000);
	tl_read(cl, &b);
	max = max_at_once(&b);
	cr_assert_eq(max, 3, "%d deliveries at once after concurrency = 3:\n%s", max, buf_cstr(&b));
	assert_all_delivered(n);
	buf_free(&b);
	free(hang);
	free(cl);
}

/* The upstream of a delivery in flight is renamed away: the delivery
 * goes on and is applied; the next message uses the new name. */
Test(send, reload_removes_upstream_in_flight)
{
	const char *r1[] = { "x@example.net", NULL }, *r2[] = { "y@example.net", NULL };
	char *hang = xasprintf("%s/hang", s.qt.tmp), *e, *c1, *w1;

	tl_write(hang, "1.5", 3);
	start_send(&d1, 0);
	inject("alice@example.org", r1, msg1);
	cr_assert(sh_wait_for(log_has, "delivering to", 5000), "%s", send_log(&d1));
	conf_replace("upstream \"up1\"", "upstream \"main\"");
	hup_and_wait("reloaded");
	cr_assert(log_has("upstream up1 is no longer configured; its 1 deliveries in flight go on"),
	    "%s", send_log(&d1));
	wait_empty(10000);
	cr_assert(log_has("delivered to <x@example.net>"), "%s", send_log(&d1));
	cr_assert(unlink(hang) == 0);
	inject("alice@example.org", r2, msg1);
	wait_calls(2, 5000);
	wait_empty(5000);
	e = call_env(0);
	cr_assert_str_eq(e, "alice@example.org\tx@example.net");
	c1 = call(1);
	w1 = xasprintf("%s\tmain\t127.0.0.1\talice@example.org\ty@example.net", s.qt.conf);
	cr_assert_str_eq(c1, w1);
	assert_queue_sound();
	free(e);
	free(c1);
	free(w1);
	free(hang);
}

/* delay_warning turned on by a reload applies at the next refusal. */
Test(send, reload_enables_delay_warning)
{
	aged_s5("alice@example.org", S("Tslow@example.net\0"), 2 * 3600);
	start_send(&d1, 0);
	cr_assert(sh_wait_for(log_has, "deferred <slow@example.net>", 5000), "%s", send_log(&d1));
	usleep(300000);
	cr_assert_eq(ncalls(), 1);
	sh_conf_append(&s, "delay_warning = \"1h\"\n");
	hup_and_wait("reloaded");
	cr_assert(log_has("delay_warning 3600 s"), "%s", send_log(&d1));
	run_flush();
	cr_assert(sh_wait_for(log_has, "delay warning to <alice@example.org> queued", 5000), "%s",
	    send_log(&d1));
	wait_calls(3, 5000);
}

/* A queue without sched/ (taken over from a stock qmail): queue-check
 * says it is missing; weir-send makes it (it may here) and works. */
Test(send, sched_dir_made_if_missing)
{
	char *p = xasprintf("%s/sched", s.qt.qdir);
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf out = BUF_INIT;
	struct stat st;

	tl_rmtree(p);
	cr_assert_neq(sh_queue_check(&s, &out), 0, "queue-check passed without sched/");
	cr_assert(strstr(buf_cstr(&out), "sched"), "%s", buf_cstr(&out));
	start_send(&d1, 0);
	cr_assert(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700,
	    "sched/ not made");
	inject("alice@example.org", rcpts, msg1);
	wait_empty(5000);
	assert_queue_sound();
	buf_free(&out);
	free(p);
}
