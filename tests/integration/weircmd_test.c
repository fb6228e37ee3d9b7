/*
 * weircmd_test.c: the operator subcommands `weir queue`, `weir status`,
 * `weir check-config` and `weir test-relay`, each against real parts: a
 * scratch queue filled by the real sendmail and weir-queue (and by hand
 * where a stock qmail could leave what weir-queue refuses), a real
 * weir-gate for status, the real upstream stand-in
 * (tests/upstream/upstream.py, STARTTLS and AUTH, certificates made for
 * this run by tests/upstream/mkcerts.sh) for test-relay.  JSON output is
 * parsed back by /usr/bin/python3 and checked for exact values.
 *
 * Every child runs with PR_SET_PDEATHSIG, so it dies with the test even
 * when the test crashes; teardown kills it otherwise.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "mail/gateclient.h"
#include "sendmail_helpers.h"

static struct qt q;
static pid_t server = -1, gate = -1;
static unsigned port;
static char *record;

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	(void)set;
	tl_certs_make_all("weircmd");
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	(void)stats;
	tl_certs_remove();
}

static void
reap(pid_t *p)
{
	if (*p > 0) {
		kill(*p, SIGKILL);
		while (waitpid(*p, NULL, 0) < 0 && errno == EINTR)
			;
	}
	*p = -1;
}

static void
setup(void)
{
	smt_setup(&q);
	record = xasprintf("%s/record.jsonl", q.tmp);
}

static void
teardown(void)
{
	reap(&gate);
	reap(&server);
	free(record);
	qt_teardown(&q);
}

TestSuite(weircmd, .init = setup, .fini = teardown, .timeout = 60);

/* ---- running things ---- */

/* weir -c conf args..., with WEIR_LIBEXEC at the build's programs. */
static void
weir(const char *const *args, struct tl_result *r)
{
	const char *bin = getenv("WEIR_BIN");
	char *lib = xasprintf("WEIR_LIBEXEC=%s", bin && *bin ? bin : "build/bin");
	const char *a[32], *env[] = { lib, NULL };
	size_t n = 0, i;

	a[n++] = "-c";
	a[n++] = q.conf;
	for (i = 0; args[i]; i++)
		a[n++] = args[i];
	a[n] = NULL;
	smt_run(&q, "weir", a, NULL, 0, env, r);
	free(lib);
}

/* /usr/bin/python3 -c script with in on stdin; its stdout in out. */
static void
py(const char *script, const char *in, size_t inlen, struct buf *out)
{
	const char *argv[] = { "/usr/bin/python3", "-c", script, NULL };
	struct tl_run run = { .argv = argv, .in = in, .inlen = inlen };
	struct tl_result r;

	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "python3 failed (%d): %s\ninput:\n%.*s", r.status,
	    buf_cstr(&r.err), (int)inlen, in);
	buf_reset(out);
	buf_add(out, r.out.s ? r.out.s : "", r.out.len);
	tl_result_free(&r);
}

/* The JSON document in, re-written canonically: sorted keys, ASCII. */
static void
canon(const struct buf *in, struct buf *out)
{
	py("import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))",
	    in->s ? in->s : "", in->len, out);
}

#define S(x) x, sizeof(x) - 1

/* A message for sendmail; -f sender, recipients NULL-ended. */
static void
send_mail(const char *sender, const char *const *rcpts)
{
	const char *args[64];
	struct tl_result r;
	size_t n = 0, i;

	args[n++] = "-f";
	args[n++] = sender;
	for (i = 0; rcpts[i]; i++)
		args[n++] = rcpts[i];
	args[n] = NULL;
	smt_run(&q, "sendmail", args, S("Subject: test\n\nhello\n"), NULL, &r);
	cr_assert_eq(r.status, 0, "sendmail: %d %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
}

/* ---- weir queue ---- */

Test(weircmd, queue_is_mailq)
{
	struct tl_result a, b;
	const char *const args[] = { "queue", NULL };

	send_mail("alice@example.org", (const char *const[]){ "bob@example.net",
	    "carol@example.net", NULL });
	send_mail("dave@example.org", (const char *const[]){ "erin@example.net", NULL });
	weir(args, &a);
	smt_run(&q, "mailq", NULL, NULL, 0, NULL, &b);
	cr_assert_eq(a.status, 0, "weir queue: %d %s", a.status, buf_cstr(&a.err));
	cr_assert_eq(b.status, 0);
	cr_assert_str_eq(buf_cstr(&a.out), buf_cstr(&b.out));
	cr_assert(strstr(a.out.s, "\ttodo\tcarol@example.net\n"));
	cr_assert(strstr(a.out.s, "messages in queue: 2\nmessages in queue but not yet "
	    "preprocessed: 2\n"));
	cr_assert_eq(a.err.len, 0, "%s", a.err.s);
	tl_result_free(&a);
	tl_result_free(&b);
}

Test(weircmd, queue_json_exact)
{
	static const char env[] = "Fa\"b\\c@example.org\0Tx@example.net\0"
	    "Ty\xff\xc3\xa9@example.net\0\0";
	const char *const args[] = { "queue", "--json", NULL };
	struct tl_result r, qr;
	struct buf c = BUF_INIT, want = BUF_INIT;
	unsigned long *ids;
	struct stat st, ms;
	char *todo, *mp, when[32];

	/* Through the real weir-queue: bytes a stock sender may use. */
	qt_inject(&q, S("Subject: j\n\nbody\n"), env, sizeof env - 1, NULL, &qr);
	cr_assert_eq(qr.status, 0, "weir-queue: %d %s", qr.status, buf_cstr(&qr.err));
	tl_result_free(&qr);
	cr_assert_eq(qt_list(&q, "todo", &ids), 1);
	todo = xasprintf("%s/todo/%lu", q.qdir, ids[0]);
	cr_assert(stat(todo, &st) == 0);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&st.st_mtime));
	/* Its size is the mess file's, with weir-queue's Received line. */
	mp = xasprintf("%s/mess/%lu/%lu", q.qdir, ids[0] % 23, ids[0]);
	cr_assert(stat(mp, &ms) == 0);
	/* By hand, as a stock qmail would leave it: preprocessed, one
	 * recipient done, bouncing, control bytes in the addresses. */
	qt_put(&q, "mess/8/100", S("0123456789"), 0);
	qt_put(&q, "info/8/100", S("Fctl\x01\x7f@example.org\0"), 1795300000);
	qt_put(&q, "remote/8/100", S("Dold@example.net\0Tnew\t\"q\"@example.net\0"), 0);
	qt_put(&q, "local/8/100", S("Tadmin@test.example\0"), 0);
	qt_put(&q, "bounce/100", S(""), 0);
	/* And one whose info file is damaged. */
	qt_put(&q, "mess/9/101", S("x"), 0);
	qt_put(&q, "info/9/101", S("Xbroken"), 1795300001);

	weir(args, &r);
	cr_assert_eq(r.status, 1, "exit %d (a message has trouble): %s", r.status, r.err.s);
	canon(&r.out, &c);
	buf_printf(&want, "{\"messages\": ["
	    "{\"bouncing\": true, \"held\": false, \"id\": 100, \"next_attempt\": null, \"preprocessed\": true, "
	    "\"queue_id\": \"100.1795300000.000000000\", \"queue_time\": "
	    "\"2026-11-21T22:26:40Z\", \"recipients\": ["
	    "{\"address\": \"admin@test.example\", \"channel\": \"local\", \"delay_reason\": null, \"state\": \"todo\"}, "
	    "{\"address\": \"old@example.net\", \"channel\": \"remote\", \"delay_reason\": null, \"state\": \"done\"}, "
	    "{\"address\": \"new\\t\\\"q\\\"@example.net\", \"channel\": \"remote\", "
	    "\"delay_reason\": null, \"state\": \"todo\"}], \"sender\": \"ctl\\u0001\\u007f@example.org\", "
	    "\"size\": 10, \"trouble\": []}, "
	    "{\"bouncing\": false, \"held\": false, \"id\": 101, \"next_attempt\": null, \"preprocessed\": true, "
	    "\"queue_id\": \"101.1795300001.000000000\", \"queue_time\": "
	    "\"2026-11-21T22:26:41Z\", \"recipients\": [], \"sender\": null, \"size\": null, "
	    "\"trouble\": [\"info/9/101: byte 0: last record has no NUL terminator (truncated file)\"]}, "
	    "{\"bouncing\": false, \"held\": false, \"id\": %lu, \"next_attempt\": null, \"preprocessed\": false, "
	    "\"queue_id\": \"%lu.%lld.%09ld\", \"queue_time\": \"%s\", "
	    "\"recipients\": ["
	    "{\"address\": \"x@example.net\", \"channel\": null, \"delay_reason\": null, \"state\": \"not-preprocessed\"}, "
	    "{\"address\": \"y\\u00ff\\u00e9@example.net\", \"channel\": null, "
	    "\"delay_reason\": null, \"state\": \"not-preprocessed\"}], "
	    "\"sender\": \"a\\\"b\\\\c@example.org\", \"size\": %lld, \"trouble\": []}], "
	    "\"messages_in_queue\": 3, \"not_yet_preprocessed\": 1}\n",
	    ids[0], ids[0], (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, when,
	    (long long)ms.st_size);
	cr_assert_str_eq(buf_cstr(&c), buf_cstr(&want));
	/* The text listing of the same queue is mailq's. */
	{
		struct tl_result t, m;
		const char *const targs[] = { "queue", NULL };

		weir(targs, &t);
		smt_run(&q, "mailq", NULL, NULL, 0, NULL, &m);
		cr_assert_eq(t.status, 1);
		cr_assert_str_eq(buf_cstr(&t.out), buf_cstr(&m.out));
		cr_assert(strstr(t.out.s, "<ctl__@example.org>  bouncing\n"), "%s", t.out.s);
		tl_result_free(&t);
		tl_result_free(&m);
	}
	tl_result_free(&r);
	buf_free(&c);
	buf_free(&want);
	free(todo);
	free(mp);
	free(ids);
}

Test(weircmd, queue_json_empty_and_usage)
{
	const char *const args[] = { "queue", "--json", NULL };
	const char *const bad[] = { "queue", "--xml", NULL };
	struct tl_result r;
	struct buf c = BUF_INIT;

	weir(args, &r);
	cr_assert_eq(r.status, 0);
	canon(&r.out, &c);
	cr_assert_str_eq(buf_cstr(&c), "{\"messages\": [], \"messages_in_queue\": 0, "
	    "\"not_yet_preprocessed\": 0}\n");
	tl_result_free(&r);
	weir(bad, &r);
	cr_assert_eq(r.status, 2);
	cr_assert(strstr(buf_cstr(&r.err), "usage: weir queue [--json]"));
	tl_result_free(&r);
	buf_free(&c);
}

/* ---- weir status ---- */

/* Config for status: upstream "t" (the default) and "l" (lists), the
 * policy file, the gate's socket and journal in the scratch folder. */
static char *
status_setup(void)
{
	char *pol = xasprintf("%s/policy.conf", q.tmp), *sock = xasprintf("%s/gate.sock", q.tmp);
	char *text = xasprintf("queue_dir = \"%s\"\nhostname = \"test.example\"\n"
	    "admin = \"postmaster@admin.example\"\npolicy_file = \"%s\"\n"
	    "gate_socket = \"%s\"\ngate_journal = \"%s/journal\"\n"
	    "upstream \"t\" {\n  host = \"127.0.0.1\"\n}\n"
	    "upstream \"l\" {\n  host = \"127.0.0.1\"\n  senders = {\"*@lists.example.org\"}\n}\n",
	    q.qdir, pol, sock, q.tmp);
	static const char policy[] =
	    "upstream \"t\" { window { limit = 2 per = \"1m\" unit = \"messages\" } }\n"
	    "upstream \"l\" {\n  window { limit = 10 per = \"1h\" unit = \"recipients\" }\n"
	    "  max_recipients = 10\n}\n";
	const char *rc[26];
	char *addrs[25];
	int i;

	qt_config(&q, text);
	tl_write(pol, policy, sizeof policy - 1);
	send_mail("a@example.org", (const char *const[]){ "one@example.net", NULL });
	send_mail("b@example.org", (const char *const[]){ "two@example.net", NULL });
	send_mail("c@example.org", (const char *const[]){ "three@example.net", NULL });
	for (i = 0; i < 25; i++) {
		addrs[i] = xasprintf("m%d@example.net", i);
		rc[i] = addrs[i];
	}
	rc[25] = NULL;
	send_mail("list@lists.example.org", rc);
	for (i = 0; i < 25; i++)
		free(addrs[i]);
	free(text);
	free(pol);
	return sock;
}

static void
start_gate(const char *sock)
{
	char *bin = tl_bin("weir-gate"), *log = xasprintf("%s/gate.log", q.tmp);
	struct gate_client gc;
	int i, lfd;

	gate = fork();
	cr_assert(gate >= 0);
	if (gate == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (lfd < 0 || dup2(lfd, 2) < 0)
			_exit(127);
		execl(bin, bin, "-c", q.conf, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 500; i++) {
		struct pollfd none;

		if (gc_connect(&gc, sock) == 0) {
			gc_close(&gc);
			break;
		}
		(void)poll(&none, 0, 10);
	}
	cr_assert(i < 500, "weir-gate did not start");
	free(bin);
	free(log);
}

Test(weircmd, status_without_gate)
{
	const char *const args[] = { "status", NULL };
	const char *const jargs[] = { "status", "--json", NULL };
	char *sock = status_setup(), *want;
	struct tl_result r;
	struct buf v = BUF_INIT;

	weir(args, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.out.s);
	/* The summary first, then the gate's part. */
	want = xasprintf("weir: 1 problem: weir-gate is not answering (No such file or "
	    "directory): nothing is sent (see that weir runs (weir run, or systemctl status "
	    "weir) and its log)\nweir-gate (%s): not answering: No such file or directory\n", sock);
	cr_assert(strncmp(r.out.s, want, strlen(want)) == 0, "%s", r.out.s);
	cr_assert(strstr(r.out.s, "  messages: 4 (not yet preprocessed: 4)\n"
	    "  recipients not done: 28\n"), "%s", r.out.s);
	/* Nothing is sent while the gate is down: unknown, with the policy's
	 * figure for when it is back. */
	cr_assert(strstr(r.out.s, "  upstream t: 3 messages, 3 recipients, 3 sends: unknown "
	    "(weir-gate is not answering; once it does, at least 1m (window 2 messages per 1m, "
	    "0 used))\n"), "%s", r.out.s);
	cr_assert(strstr(r.out.s, "  upstream l: 1 message, 25 recipients, 3 sends: unknown "
	    "(weir-gate is not answering; once it does, at least 2h (window 10 recipients per "
	    "1h, 0 used))\n"), "%s", r.out.s);
	cr_assert(strstr(r.out.s, "windows from "), "%s", r.out.s);
	tl_result_free(&r);

	weir(jargs, &r);
	cr_assert_eq(r.status, 1);
	py("import json,sys; d=json.load(sys.stdin); q=d['queue']; e=d['drain_estimate'];"
	    "print(d['gate'], d['gate_error'], q['messages'], q['not_yet_preprocessed'],"
	    " q['recipients_not_done'], q['oldest_age_s'] < 120,"
	    " [(u['name'], u['messages'], u['recipients'], u['sends'], u['seconds'],"
	    " u['at_least_s'], u['limited_by']) for u in e['upstreams']], e['unpaced'])",
	    r.out.s, r.out.len, &v);
	cr_assert_str_eq(buf_cstr(&v), "None No such file or directory 4 4 28 True "
	    "[('t', 3, 3, 3, None, 60, {'limit': 2, 'unit': 'messages', 'per_s': 60, 'used': 0, "
	    "'calendar': False}), ('l', 1, 25, 3, None, 7200, {'limit': 10, 'unit': "
	    "'recipients', 'per_s': 3600, 'used': 0, 'calendar': False})] "
	    "{'messages': 0, 'recipients': 0}\n");
	tl_result_free(&r);
	buf_free(&v);
	free(want);
	free(sock);
}

/* weir presets lists the shipped presets; weir status and its JSON name
 * an upstream's preset, and the preset's window paces it (the policy has
 * only "*"); with no upstream, status says mail waits. */
Test(weircmd, presets_listed_and_named_in_status)
{
	const char *const pargs[] = { "presets", NULL }, *const one[] = { "presets", "zoho", NULL };
	const char *const bad[] = { "presets", "nosuch", NULL };
	const char *const args[] = { "status", NULL }, *const jargs[] = { "status", "--json", NULL };
	char *pol = xasprintf("%s/policy.conf", q.tmp), *dir = tl_src_path("etc/providers");
	char *text = xasprintf("queue_dir = \"%s\"\npolicy_file = \"%s\"\n"
	    "gate_socket = \"%s/gate.sock\"\npreset_dir = \"%s\"\n"
	    "upstream \"z\" {\n  preset = \"zoho\"\n  host = \"127.0.0.1\"\n}\n",
	    q.qdir, pol, q.tmp, dir);
	static const char policy[] = "upstream \"*\" { rate = {\"8 per 1m\"} }\n";
	struct tl_result r;
	struct buf v = BUF_INIT;

	tl_write(pol, policy, sizeof policy - 1);
	qt_config(&q, text);
	weir(pargs, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s%s", r.status, r.out.s, buf_cstr(&r.err));
	cr_assert(strstr(r.out.s, "14 presets in "), "%s", r.out.s);
	cr_assert(strstr(r.out.s, "\nzoho: Zoho Mail (smtp.zoho.com)\n"
	    "  relay: smtp.zoho.com port 465, smtps\n  recipients per message: 100\n"
	    "  limits: 47 messages per 1h\n"
	    "  source: Zoho Mail Help: Zoho Mail limits and policies (read 2026-11-28)\n"),
	    "%s", r.out.s);
	cr_assert(strstr(r.out.s, "\npobox: ") && strstr(r.out.s, "limits: none published"),
	    "%s", r.out.s);
	tl_result_free(&r);
	weir(one, &r);
	cr_assert_eq(r.status, 0);
	cr_assert(strncmp(r.out.s, "zoho: ", 6) == 0 && !strstr(r.out.s, "pobox"), "%s", r.out.s);
	tl_result_free(&r);
	weir(bad, &r);
	cr_assert_eq(r.status, 1);
	cr_assert(strstr(r.out.s, "nosuch: does not load"), "%s", r.out.s);
	tl_result_free(&r);

	send_mail("a@example.org", (const char *const[]){ "one@example.net", NULL });
	weir(args, &r);
	cr_assert(strstr(r.out.s, "  upstream z (preset zoho): 1 message, 1 recipient, 1 send: "
	    "unknown (weir-gate is not answering; once it does, at least 0s (window 47 "
	    "messages per 1h, 0 used))\n"), "%s", r.out.s);
	tl_result_free(&r);
	weir(jargs, &r);
	py("import json,sys; d=json.load(sys.stdin);"
	    "print([(u['name'], u['preset']) for u in d['drain_estimate']['upstreams']])",
	    r.out.s, r.out.len, &v);
	cr_assert_str_eq(buf_cstr(&v), "[('z', 'zoho')]\n");
	tl_result_free(&r);

	free(text);
	text = xasprintf("queue_dir = \"%s\"\npolicy_file = \"%s\"\n"
	    "gate_socket = \"%s/gate.sock\"\n", q.qdir, pol, q.tmp);
	qt_config(&q, text);
	weir(args, &r);
	cr_assert(strstr(r.out.s, "no upstream is configured in "), "%s", r.out.s);
	tl_result_free(&r);
	buf_free(&v);
	free(text);
	free(dir);
	free(pol);
}

Test(weircmd, status_with_gate_suspended)
{
	const char *const args[] = { "status", NULL };
	const char *const jargs[] = { "status", "--json", NULL };
	char *sock = status_setup();
	struct gate_client gc;
	struct gp_reply rep;
	const char *why = NULL;
	struct tl_result r;
	struct buf v = BUF_INIT;

	start_gate(sock);
	/* One send through "t" that the upstream throttled: the gate logs
	 * it and suspends "t" (the built-in 421 pattern, 5 minutes). */
	cr_assert(gc_connect(&gc, sock) == 0);
	cr_assert(gc_acquire(&gc, 1, "t", NULL, NULL, 1, 1, 1) == 0);
	cr_assert_eq(gc_wait_reply(&gc, &rep, &why), 1);
	cr_assert_eq(rep.verb, GP_R_GRANT);
	cr_assert(gc_report_throttled(&gc, 1, "421 4.7.0 Try again later") == 0);
	cr_assert_eq(gc_wait_reply(&gc, &rep, &why), 1);
	cr_assert_eq(rep.verb, GP_R_SUSPENDED);
	gc_close(&gc);

	weir(args, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s %s", r.status, r.out.s, r.err.s);
	cr_assert(strstr(r.out.s, "  upstream t: suspended until "), "%s", r.out.s);
	cr_assert(strstr(r.out.s, "421 4.7.0 Try again later\n"), "%s", r.out.s);
	cr_assert(strstr(r.out.s, "    window 2 messages per 60s: 1 logged + 0 held = 1 of 2\n"),
	    "%s", r.out.s);
	cr_assert(strstr(r.out.s, "(window 2 messages per 1m, 1 used), of which "), "%s", r.out.s);
	cr_assert(strstr(r.out.s, "windows from weir-gate"), "%s", r.out.s);
	tl_result_free(&r);

	weir(jargs, &r);
	cr_assert_eq(r.status, 0);
	/* 3 sends and 1 used of 2 per minute: 1 minute, after the
	 * suspension's 5 minutes (less the seconds this test took). */
	py("import json,sys; d=json.load(sys.stdin); g=d['gate']['upstreams'];"
	    "t=[u for u in g if u['name']=='t'][0]; e=d['drain_estimate']['upstreams'][0];"
	    "print(t['suspended'], t['suspend_reason'], e['name'], e['limited_by']['used'],"
	    " 280 <= e['suspended_s'] <= 300, e['seconds'] - e['suspended_s'],"
	    " d['queue']['messages'], d['gate_error'])",
	    r.out.s, r.out.len, &v);
	cr_assert_str_eq(buf_cstr(&v), "True 421 4.7.0 Try again later t 1 True 60 4 None\n");
	tl_result_free(&r);
	buf_free(&v);
	free(sock);
}

/* A used-up calendar window ("2 messages daily at 00:00 UTC", 2 used)
 * frees at the next 00:00 UTC, not 24 h later: 3 sends take the time to
 * midnight + 1 day (before: 2 days, as if the window slid).  And an
 * upstream the gate lists as not in the policy (dropped by a reload) is
 * "unknown", not "about 0s". */
Test(weircmd, status_calendar_window_and_no_policy)
{
	const char *const args[] = { "status", NULL };
	const char *const jargs[] = { "status", "--json", NULL };
	char *sock = status_setup(), *pol = xasprintf("%s/policy.conf", q.tmp);
	static const char policy1[] =
	    "upstream \"t\" { rate = \"2 messages daily at 00:00 UTC\" }\n"
	    "upstream \"l\" { rate = \"100 per 1h\" }\n";
	static const char policy2[] =
	    "upstream \"t\" { rate = \"2 messages daily at 00:00 UTC\" }\n";
	struct gate_client gc;
	struct gp_reply rep;
	const char *why = NULL;
	struct tl_result r;
	struct buf v = BUF_INIT;
	uint32_t tag;
	int i;

	tl_write(pol, policy1, sizeof policy1 - 1);
	start_gate(sock);
	cr_assert(gc_connect(&gc, sock) == 0);
	for (tag = 1; tag <= 3; tag++) {
		cr_assert(gc_acquire(&gc, tag, tag == 3 ? "l" : "t", NULL, NULL, 1, 1, 1) == 0);
		cr_assert_eq(gc_wait_reply(&gc, &rep, &why), 1);
		cr_assert_eq(rep.verb, GP_R_GRANT);
		cr_assert(gc_report_sent(&gc, tag, 1, -1) == 0);
		cr_assert_eq(gc_wait_reply(&gc, &rep, &why), 1);
	}
	gc_close(&gc);
	/* The gate re-reads the policy when it changes: "l" leaves it. */
	tl_write(pol, policy2, sizeof policy2 - 1);
	for (i = 0; i < 500; i++) {
		weir(args, &r);
		if (strstr(buf_cstr(&r.out), "upstream l: (not in the policy)"))
			break;
		tl_result_free(&r);
		usleep(10000);
	}
	cr_assert(i < 500, "the gate did not drop l");
	cr_assert(strstr(r.out.s, "  upstream l: 1 message, 25 recipients, 1 send: unknown "
	    "(no policy for it: weir-gate refuses it)\n"), "%s", r.out.s);
	tl_result_free(&r);

	weir(jargs, &r);
	cr_assert_eq(r.status, 0, "%s", r.out.s);
	py("import json,sys,time; d=json.load(sys.stdin); e=d['drain_estimate']['upstreams'];"
	    "t=[u for u in e if u['name']=='t'][0]; l=[u for u in e if u['name']=='l'][0];"
	    "now=int(time.time()); want=86400 - now % 86400 + 86400;"
	    "print(abs(t['seconds'] - want) <= 5, t['limited_by'], l['seconds'])",
	    r.out.s, r.out.len, &v);
	cr_assert_str_eq(buf_cstr(&v), "True {'limit': 2, 'unit': 'messages', 'per_s': 86400, "
	    "'used': 2, 'calendar': True} None\n", "%s", r.out.s);
	tl_result_free(&r);
	buf_free(&v);
	free(pol);
	free(sock);
}

/* ---- weir check-config ---- */

/* Write name in the scratch folder; returns its path. */
static char *
scratch(const char *name, const char *text)
{
	char *p = xasprintf("%s/%s", q.tmp, name);

	tl_write(p, text, strlen(text));
	return p;
}

/* A sound pair of files: weir.conf (line by line below) and policy. */
static void
sound_config(void)
{
	char *sec = scratch("secret", "pw\n"), *pol, *text;

	cr_assert(chmod(sec, 0600) == 0);
	pol = scratch("policy.conf", "upstream \"t\" { window { limit = 8 per = \"1m\" } }\n");
	text = xasprintf(
	    "queue_dir = \"%s\"\n"			/* 1 */
	    "hostname = \"mail.test.example\"\n"	/* 2 */
	    "admin = \"postmaster@admin.example\"\n"	/* 3 */
	    "policy_file = \"%s\"\n"			/* 4 */
	    "upstream \"t\" {\n"			/* 5 */
	    "  host = \"127.0.0.1\"\n"			/* 6 */
	    "  ca_file = \"%s/ca.pem\"\n"		/* 7 */
	    "  username = \"me\"\n"			/* 8 */
	    "  secret_file = \"%s\"\n"			/* 9 */
	    "}\n",					/* 10 */
	    q.qdir, pol, tl_certs(), sec);
	qt_config(&q, text);
	free(text);
	free(pol);
	free(sec);
}

static void
check_config(int code, const char *want)
{
	const char *const args[] = { "check-config", NULL };
	struct tl_result r;

	weir(args, &r);
	cr_assert_str_eq(buf_cstr(&r.out), want);
	cr_assert_eq(r.status, code, "exit %d: %s", r.status, r.out.s);
	tl_result_free(&r);
}

Test(weircmd, check_config_sound)
{
	char *want;

	sound_config();
	want = xasprintf("check-config: 0 errors, 0 warnings in %s and %s/policy.conf\n", q.conf,
	    q.tmp);
	check_config(0, want);
	free(want);
}

Test(weircmd, check_config_syntax_error_in_weir_conf)
{
	char *want;

	qt_config(&q, "hostname = \"a.example\"\n\nupstream \"t\" {\n  port = \"x\"\n}\n");
	want = xasprintf("%s:4: invalid integer value for option 'port'\n"
	    "check-config: 1 error, 0 warnings (the policy file was not checked)\n", q.conf);
	check_config(1, want);
	free(want);
}

Test(weircmd, check_config_errors_in_the_policy)
{
	char *pol, *want;

	sound_config();
	/* (No comment line above the error: libconfuse 3.3 counts each
	 * "#" line as three when it reports a line.) */
	pol = scratch("policy.conf", "\nupstream \"t\" {\n  window {\n    limit = 0\n"
	    "    per = \"1m\"\n  }\n}\n");
	/* A policy that does not load has no sections to compare with. */
	want = xasprintf("%s:4: limit = 0 is out of range 1..1000000000\n"
	    "check-config: 1 error, 0 warnings in %s and %s\n", pol, q.conf, pol);
	check_config(1, want);
	free(want);
	free(pol);
}

/* Under weir.service root has no CAP_DAC_OVERRIDE and may not look in
 * the queue's lock/ (weir-send's): check-config says nothing of what it
 * cannot see (it said "no lock/trigger FIFO: not a queue yet"). */
Test(weircmd, check_config_queue_it_cannot_look_into)
{
	char *lock = xasprintf("%s/lock", q.qdir), *bin = tl_bin("weir"), *want;
	const char *argv[] = { "/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search",
		bin, "-c", q.conf, "check-config", NULL };
	struct tl_run run = { .argv = argv, .timeout_s = 60 };
	struct tl_result r;

	if (geteuid() != 0) {
		free(lock);
		free(bin);
		cr_skip_test("needs root (a queue owned by someone else)");
	}
	sound_config();
	cr_assert(chown(lock, 65534, 65534) == 0 && chmod(lock, 0700) == 0);
	tl_run(&run, &r);
	if (strncmp(buf_cstr(&r.err), "setpriv:", 8) == 0) {
		tl_result_free(&r);
		free(lock);
		free(bin);
		cr_skip_test("setpriv cannot drop capabilities here");
	}
	want = xasprintf("check-config: 0 errors, 0 warnings in %s and %s/policy.conf\n", q.conf,
	    q.tmp);
	cr_assert_str_eq(buf_cstr(&r.out), want, "stderr: %s", buf_cstr(&r.err));
	cr_assert_eq(r.status, 0);
	tl_result_free(&r);
	/* Where lock/ can be seen and the FIFO is missing, it still says so. */
	cr_assert(chown(lock, 0, 0) == 0);
	free(want);
	want = xasprintf("%s/lock/trigger", q.qdir);
	cr_assert(unlink(want) == 0);
	tl_run(&run, &r);
	cr_assert(strstr(buf_cstr(&r.out), "no lock/trigger FIFO: not a queue yet"), "%s",
	    buf_cstr(&r.out));
	tl_result_free(&r);
	free(want);
	free(lock);
	free(bin);
}

/* The accounts the daemons become must exist (nobody and nogroup do on
 * every Debian system; none is created). */
Test(weircmd, check_config_accounts)
{
	char *pol = scratch("policy.conf", "upstream \"t\" { window { limit = 8 per = \"1m\" } }\n");
	char *text, *want;

	text = xasprintf("queue_dir = \"%s\"\nhostname = \"mail.test.example\"\n"
	    "admin = \"postmaster@admin.example\"\npolicy_file = \"%s\"\n"
	    "gate_user = \"nobody\"\n"			/* 5 */
	    "send_user = \"weir-no-such-user\"\n"		/* 6 */
	    "smtpd_user = \"nobody\"\n"			/* 7 */
	    "queue_group = \"weir-no-such-group\"\n"	/* 8 */
	    "upstream \"t\" {\n  host = \"127.0.0.1\"\n}\n", q.qdir, pol);
	qt_config(&q, text);
	want = xasprintf("%s:6: send_user = \"weir-no-such-user\": no such user on this "
	    "system: weir-send would not start\n"
	    "%s:8: queue_group = \"weir-no-such-group\": no such group on this system: "
	    "weir queue-init would refuse it\n"
	    "check-config: 2 errors, 0 warnings in %s and %s\n", q.conf, q.conf, q.conf, pol);
	check_config(1, want);
	free(want);
	free(text);
	free(pol);
}

Test(weircmd, check_config_cross_references)
{
	char *sec = scratch("secret", "pw\n"), *pol, *text, *want;

	cr_assert(chmod(sec, 0644) == 0);
	pol = scratch("policy.conf", "upstream \"t\" { window { limit = 8 per = \"1m\" } }\n"
	    "upstream \"orphan\" { window { limit = 8 per = \"1m\" } }\n");
	text = xasprintf(
	    "queue_dir = \"%s\"\n"			/* 1 */
	    "hostname = \"mailhost\"\n"			/* 2 */
	    "admin = \"postmaster\"\n"			/* 3 */
	    "policy_file = \"%s\"\n"			/* 4 */
	    "upstream \"t\" {\n"			/* 5 */
	    "  host = \"127.0.0.1\"\n"			/* 6 */
	    "  username = \"me\"\n"			/* 7 */
	    "  secret_file = \"%s\"\n"			/* 8 */
	    "}\n"					/* 9 */
	    "upstream \"extra\" {\n"			/* 10 */
	    "  host = \"127.0.0.1\"\n"			/* 11 */
	    "  ca_file = \"%s/missing.pem\"\n"		/* 12 */
	    "}\n",					/* 13 */
	    q.qdir, pol, sec, q.tmp);
	qt_config(&q, text);
	want = xasprintf(
	    "%s:2: warning: hostname \"mailhost\" is not fully qualified (mail.example.org): it "
	    "names this host in EHLO and makes bare addresses user@mailhost\n"
	    "%s:3: warning: admin = \"postmaster\" is not a fully qualified address "
	    "(postmaster@example.org): local recipients and failed bounces are rewritten to it "
	    "and sent to the upstream\n"
	    "%s:8: upstream \"t\": secret_file %s: mode 0644 lets group or others in; refusing it "
	    "(chmod 600 %s)\n"
	    "%s:10: upstream \"extra\" has no upstream \"extra\" section in %s: weir-gate refuses "
	    "to grant sends through it\n"
	    "%s:12: upstream \"extra\": ca_file %s/missing.pem: No such file or directory\n"
	    "%s:2: warning: upstream \"orphan\" is not an upstream of %s: its limits are never "
	    "used\n"
	    "check-config: 3 errors, 3 warnings in %s and %s\n",
	    q.conf, q.conf, q.conf, sec, sec, q.conf, pol, q.conf, q.tmp, pol, q.conf, q.conf, pol);
	check_config(1, want);
	free(want);
	free(text);
	free(pol);
	free(sec);
}

Test(weircmd, check_config_admin_local_to_this_host)
{
	char *want;

	sound_config();
	qt_config(&q, "hostname = \"mail.test.example\"\nadmin = \"root@mail.test.example\"\n");
	want = xasprintf("%s:2: warning: admin = \"root@mail.test.example\" is local to this host "
	    "(hostname \"mail.test.example\"): local recipients are rewritten to it, so it must be "
	    "an address elsewhere\n", q.conf);
	{
		const char *const args[] = { "check-config", NULL };
		struct tl_result r;

		weir(args, &r);
		cr_assert(strstr(buf_cstr(&r.out), want), "%s", r.out.s);
		tl_result_free(&r);
	}
	free(want);
}

/* ---- weir test-relay ---- */

/* Start the upstream stand-in with cert and extra flags (NULL-ended). */
static void
start_upstream(const char *cert, const char *const *flags)
{
	const char *args[32];
	char *certp = xasprintf("%s/%s.pem", tl_certs(), cert);
	char *keyp = xasprintf("%s/%s.key", tl_certs(), cert);
	char *log = xasprintf("%s/server.log", q.tmp);
	int n = 0, i;

	args[n++] = "--record";
	args[n++] = record;
	args[n++] = "--cert";
	args[n++] = certp;
	args[n++] = "--key";
	args[n++] = keyp;
	for (i = 0; flags && flags[i]; i++)
		args[n++] = flags[i];
	args[n] = NULL;
	server = tl_upstream_start(args, log, &port);
	free(certp);
	free(keyp);
	free(log);
}

/* weir.conf with upstream "t" at the stand-in (secret "password"), and
 * extra sections. */
static void
relay_config(const char *password, const char *extra)
{
	char *sec = scratch("secret", password), *text;

	cr_assert(chmod(sec, 0600) == 0);
	text = xasprintf("queue_dir = \"%s\"\nhostname = \"client.test\"\n"
	    "gate_socket = \"%s/gate.sock\"\n"
	    "upstream \"t\" {\n  host = \"127.0.0.1\"\n  port = %u\n  ca_file = \"%s/ca.pem\"\n"
	    "  username = \"me\"\n  secret_file = \"%s\"\n  timeout_connect = \"5s\"\n"
	    "  timeout_banner = \"10s\"\n  timeout_command = \"10s\"\n}\n%s",
	    q.qdir, q.tmp, port, tl_certs(), sec, extra ? extra : "");
	qt_config(&q, text);
	free(text);
	free(sec);
}

static int
recorded(const char *needle)
{
	struct buf b = BUF_INIT;
	int found;

	if (access(record, F_OK) < 0)
		return 0;
	tl_read(record, &b);
	found = b.s && strstr(b.s, needle) != NULL;
	buf_free(&b);
	return found;
}

static char *
fingerprint(void)
{
	char *p = xasprintf("%s/good.sha256", tl_certs());
	struct buf b = BUF_INIT;
	char *fp;

	tl_read(p, &b);
	while (b.len > 0 && b.s[b.len - 1] == '\n')
		b.s[--b.len] = '\0';
	fp = xstrdup(b.s);
	buf_free(&b);
	free(p);
	return fp;
}

Test(weircmd, test_relay_every_step)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	const char *const args[] = { "test-relay", NULL };
	struct tl_result r;
	char *fp, *want;

	start_upstream("good", flags);
	relay_config("pw\n", NULL);
	weir(args, &r);
	fp = fingerprint();
	want = xasprintf(
	    "t: connect ok: 127.0.0.1:%u (127.0.0.1)\n"
	    "t: banner ok: 220 upstream.test Python SMTP 1.4.3\n"
	    "t: ehlo ok: capabilities: 8BITMIME, STARTTLS, HELP\n"
	    "t: starttls ok: 220 Ready to start TLS\n"
	    "t: tls ok: TLSv1.3 TLS_AES_256_GCM_SHA384; certificate subject CN=good, issuer "
	    "CN=weir-test-ca, SHA-256 %s; verified (chain and host name)\n"
	    "t: ehlo ok: capabilities: 8BITMIME, AUTH LOGIN PLAIN, HELP\n"
	    "t: auth ok: PLAIN as me: 235 2.7.0 Authentication successful\n"
	    "t: quit ok: 221 Bye\n"
	    "t: passed\n"
	    "1 upstream tested, 0 failed\n", port, fp);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.out.s);
	cr_assert_str_eq(buf_cstr(&r.out), want);
	cr_assert(recorded("\"event\": \"auth\", \"mechanism\": \"PLAIN\", \"user\": \"me\", "
	    "\"ok\": true"));
	cr_assert(!recorded("\"event\": \"mail\""), "the probe sent MAIL");
	cr_assert_eq(r.err.len, 0, "stderr: %s", r.err.s);
	tl_result_free(&r);
	free(want);
	free(fp);
}

Test(weircmd, test_relay_wrong_secret)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	const char *const args[] = { "test-relay", NULL };
	struct tl_result r;
	char *want;

	start_upstream("good", flags);
	relay_config("not-the-password\n", NULL);
	weir(args, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.out.s);
	want = xasprintf("t: auth failed: Connected to 127.0.0.1:%u but AUTH PLAIN was refused. "
	    "Remote host said: 535 5.7.8 Authentication credentials invalid\n"
	    "t: FAILED (auth)\n1 upstream tested, 1 failed\n", port);
	cr_assert(strstr(r.out.s, want), "%s", r.out.s);
	cr_assert(strstr(r.out.s, "t: tls ok: "), "%s", r.out.s);
	cr_assert(!strstr(r.out.s, "quit ok"), "%s", r.out.s);
	cr_assert(!strstr(r.out.s, "not-the-password"), "the secret leaked");
	cr_assert(!recorded("\"event\": \"mail\""));
	tl_result_free(&r);
	free(want);
}

Test(weircmd, test_relay_wrong_host_certificate)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	const char *const args[] = { "test-relay", NULL };
	struct tl_result r;
	char *want;

	start_upstream("wrong", flags);
	relay_config("pw\n", NULL);
	weir(args, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.out.s);
	want = xasprintf("t: starttls ok: 220 Ready to start TLS\n"
	    "t: tls failed: 127.0.0.1:%u: TLS failed: certificate verification failed: IP "
	    "address mismatch.\nt: FAILED (tls)\n1 upstream tested, 1 failed\n", port);
	cr_assert(strstr(r.out.s, want), "%s", r.out.s);
	cr_assert(!recorded("\"event\": \"auth\""), "AUTH after a bad certificate");
	tl_result_free(&r);
	free(want);
}

Test(weircmd, test_relay_all_named_and_secret_mode)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	const char *const all[] = { "test-relay", NULL };
	const char *const named[] = { "test-relay", "t", NULL };
	const char *const unknown[] = { "test-relay", "nope", NULL };
	struct tl_result r;
	char *extra, *sec2, *want;

	start_upstream("good", flags);
	sec2 = scratch("secret2", "pw\n");
	cr_assert(chmod(sec2, 0640) == 0);
	extra = xasprintf("upstream \"open\" {\n  host = \"127.0.0.1\"\n  port = %u\n"
	    "  ca_file = \"%s/ca.pem\"\n  username = \"me\"\n  secret_file = \"%s\"\n}\n",
	    port, tl_certs(), sec2);
	relay_config("pw\n", extra);
	weir(all, &r);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.out.s);
	want = xasprintf("t: passed\nopen: secret failed: secret_file %s: mode 0640 lets group "
	    "or others in; refusing it (chmod 600 %s)\nopen: FAILED (secret)\n"
	    "2 upstreams tested, 1 failed\n", sec2, sec2);
	cr_assert(strstr(r.out.s, want), "%s", r.out.s);
	tl_result_free(&r);
	weir(named, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.out.s);
	cr_assert(strstr(r.out.s, "t: passed\n1 upstream tested, 0 failed\n"), "%s", r.out.s);
	tl_result_free(&r);
	weir(unknown, &r);
	cr_assert_eq(r.status, 1);
	cr_assert(strstr(r.out.s, "nope: config failed: no upstream \"nope\" in "), "%s", r.out.s);
	cr_assert(strstr(r.out.s, "nope: FAILED (config)\n"), "%s", r.out.s);
	tl_result_free(&r);
	free(want);
	free(extra);
	free(sec2);
}
