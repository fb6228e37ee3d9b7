/*
 * wire_test.c: nothing a local sender writes can change what the upstream
 * is told (issue 14).  Addresses: nothing in one can add to the SMTP
 * commands weir sends, end to end: what sendmail
 * and weir-queue refuse at injection, what they accept and how
 * weir-remote writes it, and a real Postfix as the upstream
 * (tests/integration/postfix_upstream.sh, relaying to the stand-in),
 * which must neither see parameters a sender smuggled in nor get a
 * broken path.  The Postfix cases need root (Postfix's master) and say
 * so when skipped.  Header fields: a bare CR is no line end, so a
 * header sendmail reads as one field never reaches the upstream as two.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "sendmail_helpers.h"

#define S(x) x, sizeof(x) - 1
#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static struct qt q;
static pid_t standin = -1;
static unsigned standin_port;
static char *pfdir;		/* the Postfix instance, when a test started one */

static void
setup(void)
{
	smt_setup(&q);
}

static void
postfix_ctl(const char *verb, const char *arg, struct tl_result *r)
{
	char *script = tl_src_path("tests/integration/postfix_upstream.sh");
	const char *argv[] = { "/bin/bash", script, verb, pfdir, arg, NULL };
	struct tl_run rr;

	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	rr.timeout_s = 60;
	tl_run(&rr, r);
	free(script);
}

static void
teardown(void)
{
	if (pfdir) {
		struct tl_result r;

		postfix_ctl("stop", NULL, &r);
		tl_result_free(&r);
		tl_rmtree(pfdir);
		free(pfdir);
		pfdir = NULL;
	}
	if (standin > 0) {
		kill(standin, SIGKILL);
		while (waitpid(standin, NULL, 0) < 0 && errno == EINTR)
			;
		standin = -1;
	}
	qt_teardown(&q);
}

TestSuite(paths, .init = setup, .fini = teardown, .timeout = 120);

static void
refused(const char *const *args, const char *in, size_t inlen, int code, const char *what)
{
	struct tl_result r;

	smt_run(&q, "sendmail", args, in, inlen, NULL, &r);
	smt_assert_refused(&q, &r, code, what);
	tl_result_free(&r);
}

/* ---- injection ---- */

/* What cannot be an address is refused, one line, nothing queued.
 * Failed before for the domains (sendmail took "_" and 8-bit bytes). */
Test(paths, sendmail_refuses_what_no_path_can_say)
{
	refused(ARGS("-f", "x> RET=HDRS@client.example", "r@remote.example"), S("\n"),
	    EX_USAGE, "'>' without '<'");
	refused(ARGS("-f", "\"x> RET=HDRS@client.example", "r@remote.example"), S("\n"),
	    EX_USAGE, "unclosed quoted string");
	refused(ARGS("r@remote.example> NOTIFY=SUCCESS"), S("\n"), EX_USAGE, "'>' without '<'");
	refused(ARGS("r@under_score.example"), S("\n"), EX_USAGE, "invalid character in the domain");
	refused(ARGS("-t"), S("To: r@remote.example> NOTIFY=SUCCESS ORCPT=rfc822;x\n\nhi\n"),
	    EX_DATAERR, "'>' without '<'");
	refused(ARGS("-t"), S("To: \"evil@remote.example\n\nhi\n"), EX_DATAERR,
	    "unclosed quoted string");
	refused(ARGS("-t"), S("To: a@b.\xc3\xa9xample\n\nhi\n"), EX_DATAERR,
	    "invalid character in the domain");
}

/* Quoted local parts are addresses: queued in qmail's unquoted form. */
Test(paths, sendmail_keeps_quoted_local_parts)
{
	struct qt_msg m;
	static const char *const rcpts[] = { "evil> NOTIFY=NEVER@remote.example",
		"john doe@remote.example", NULL };

	smt_send(&q, ARGS("-f", "\"x> RET=HDRS\"@client.example", "-t"),
	    S("To: \"evil> NOTIFY=NEVER\"@remote.example, \"john doe\"@remote.example\n\nhi\n"), &m);
	smt_assert_env(&m, "x> RET=HDRS@client.example", rcpts);
	qt_msg_free(&m);
}

/* weir-queue: stricter than qmail-queue, 91 for an envelope address no
 * SMTP client could write.  Failed before (exit 0). */
Test(paths, weir_queue_91_for_an_address_that_is_no_path)
{
	static const char *const bad[] = {
		"r@remote.example> NOTIFY=SUCCESS ORCPT=rfc822;x",
		"r@remote.example>",
		"r@under_score.example",
		"@remote.example",
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		static const char *const ok[] = { "ok@remote.example", NULL };
		const char *rc[] = { bad[i], NULL };
		struct buf e = BUF_INIT;
		struct tl_result r;

		qt_envelope(&e, "s@client.example", rc);
		qt_inject(&q, S("Subject: x\n\nhi\n"), e.s, e.len, NULL, &r);
		qt_assert_fails(&q, &r, 91, "");
		tl_result_free(&r);
		buf_free(&e);
		qt_envelope(&e, bad[i], ok);
		qt_inject(&q, S("Subject: x\n\nhi\n"), e.s, e.len, NULL, &r);
		qt_assert_fails(&q, &r, 91, "");
		tl_result_free(&r);
		buf_free(&e);
	}
}

/* ---- a real Postfix upstream ---- */

/* The stand-in on a free port, then Postfix relaying to it; the
 * Postfix port, or 0 when Postfix cannot run here (test skipped). */
static unsigned
start_postfix(void)
{
	char *log = xasprintf("%s/standin.log", q.tmp), *rec = xasprintf("%s/record.jsonl", q.tmp);
	const char *args[] = { "--record", rec, NULL };
	char port[16];
	struct tl_result r;
	unsigned pf = 0;

	standin = tl_upstream_start(args, log, &standin_port);
	/* Under /var: Postfix writes its maillog_file only there. */
	pfdir = xstrdup("/var/tmp/weir-postfix.XXXXXX");
	cr_assert(mkdtemp(pfdir) != NULL);
	snprintf(port, sizeof port, "%u", standin_port);
	postfix_ctl("start", port, &r);
	if (r.out.s && strncmp(r.out.s, "SKIP", 4) == 0) {
		tl_rmtree(pfdir);
		free(pfdir);
		pfdir = NULL;
		cr_log_warn("%s", r.out.s);
	} else {
		cr_assert(r.status == 0 && r.out.s && sscanf(r.out.s, "PORT %u", &pf) == 1,
		    "Postfix did not start (exit %d): %s%s", r.status, r.out.s ? r.out.s : "",
		    r.err.s ? r.err.s : "");
	}
	tl_result_free(&r);
	free(log);
	free(rec);
	return pf;
}

/* weir-remote to Postfix at port: sender, recipients (NULL-ended). */
static void
remote(unsigned port, const char *sender, const char *const *rcpts, struct tl_result *r)
{
	char *conf = xasprintf("%s/remote.conf", q.tmp), *bin = tl_bin("weir-remote");
	char *text = xasprintf("hostname = \"client.example\"\ngate_socket = \"%s/none.sock\"\n"
	    "upstream \"t\" {\n  host = \"127.0.0.1\"\n  port = %u\n  tls = \"none\"\n}\n",
	    q.tmp, port);
	const char *argv[16];
	struct tl_run rr;
	int n = 0;

	tl_write(conf, text, strlen(text));
	argv[n++] = bin;
	argv[n++] = "-c";
	argv[n++] = conf;
	argv[n++] = "ignored.example";
	argv[n++] = sender;
	for (; *rcpts; rcpts++)
		argv[n++] = *rcpts;
	argv[n] = NULL;
	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	rr.in = "Subject: paths\n\nhi\n";
	rr.inlen = strlen(rr.in);
	tl_run(&rr, r);
	free(conf);
	free(bin);
	free(text);
}

/* What the stand-in (behind Postfix) was told, once Postfix's queue is
 * empty: every message, DSNs included, has been relayed. */
static void
relayed(struct buf *b)
{
	char *rec = xasprintf("%s/record.jsonl", q.tmp);
	struct tl_result r;

	postfix_ctl("idle", NULL, &r);
	cr_assert_eq(r.status, 0, "Postfix did not empty its queue");
	tl_result_free(&r);
	tl_read(rec, b);
	free(rec);
}

static size_t
count(const struct buf *b, const char *needle)
{
	const char *p;
	size_t n = 0;

	for (p = b->s; p && (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* Failed before: Postfix took NOTIFY=SUCCESS from the recipient and
 * sent a success DSN (a second message, from <>, to the stand-in; seen
 * with the code before this test). */
Test(paths, postfix_upstream_sees_no_injected_notify)
{
	static const char *const rcpts[] = { "r@remote.example> NOTIFY=SUCCESS ORCPT=rfc822;x",
		"ok@remote.example", NULL };
	struct tl_result r;
	struct buf b = BUF_INIT;
	unsigned pf = start_postfix();

	if (pf == 0)
		cr_skip_test("Postfix cannot run here (needs root)");
	remote(pf, "s@client.example", rcpts, &r);
	cr_assert_eq(r.status, 0, "%s", r.err.s);
	cr_assert(r.out.s && r.out.s[0] == 'h' && strstr(r.out.s, "unusable"), "%s", r.out.s);
	cr_assert(memmem(r.out.s, r.out.len, "\0r\0K", 4) != NULL, "ok@ not delivered: %s", r.err.s);
	relayed(&b);
	cr_assert_eq(count(&b, "\"event\": \"data\""), 1, "%s", b.s);
	cr_assert_eq(count(&b, "\"sender\": \"<>\""), 0, "a DSN was sent: %s", b.s);
	cr_assert_eq(count(&b, "NOTIFY"), 0, "%s", b.s);
	tl_result_free(&r);
	buf_free(&b);
}

/* Failed before: "<john doe@remote.example>" (Postfix refused it) and
 * the sender's "RET=HDRS" went out as a parameter. */
Test(paths, postfix_upstream_gets_quoted_paths)
{
	static const char *const rcpts[] = { "john doe@remote.example",
		"evil> NOTIFY=NEVER@remote.example", NULL };
	struct tl_result r;
	struct buf b = BUF_INIT, log = BUF_INIT;
	char *maillog;
	unsigned pf = start_postfix();

	if (pf == 0)
		cr_skip_test("Postfix cannot run here (needs root)");
	remote(pf, "x> RET=HDRS@client.example", rcpts, &r);
	cr_assert_eq(r.status, 0, "%s", r.err.s);
	cr_assert(memmem(r.out.s, r.out.len, "r\0r\0K", 5) == r.out.s, "%s\n%s", r.out.s, r.err.s);
	relayed(&b);
	cr_assert_eq(count(&b, "\"event\": \"data\""), 1, "%s", b.s);
	cr_assert(strstr(b.s, "\"rcpt\": \"\\\"john doe\\\"@remote.example\""), "%s", b.s);
	cr_assert(strstr(b.s, "\"rcpt\": \"\\\"evil> NOTIFY=NEVER\\\"@remote.example\""), "%s", b.s);
	cr_assert(strstr(b.s, "\"sender\": \"\\\"x> RET=HDRS\\\"@client.example\", "
	    "\"options\": []"), "%s", b.s);
	maillog = xasprintf("%s/maillog", pfdir);
	tl_read(maillog, &log);
	cr_assert(strstr(log.s, "to=<\"john doe\"@remote.example>"), "%s", log.s);
	cr_assert(!strstr(log.s, "RET=HDRS>"), "%s", log.s);
	free(maillog);
	tl_result_free(&r);
	buf_free(&b);
	buf_free(&log);
}

/* ---- header fields and line ends ---- */

/* Failed before: sendmail queued it (one Subject field holding CRs, no
 * Bcc removed, no recipient taken from it), and weir-remote sent three
 * header fields. */
Test(paths, sendmail_refuses_a_bare_cr_in_the_header)
{
	refused(ARGS("-t"), S("To: a@b.example\nSubject: hi\rBcc: hidden@x.example\r"
	    "X-Injected: yes\n\nbody\n"), EX_DATAERR, "bare CR");
	refused(ARGS("a@b.example"), S("Subject: hi\n continued\rBcc: hidden@x.example\n\nb\n"),
	    EX_DATAERR, "header line 2");
}

/* A bare CR in the body stays what it was: a line end, sent as CRLF. */
Test(paths, sendmail_keeps_a_bare_cr_in_the_body)
{
	struct qt_msg m;
	static const char *const rcpts[] = { "a@b.example", NULL };

	smt_send(&q, ARGS("-f", "s@b.example", "a@b.example"),
	    S("Subject: hi\n\nbody\rBcc: not a field\n"), &m);
	smt_assert_env(&m, "s@b.example", rcpts);
	cr_assert(memmem(m.body.s, m.body.len, "\n\nbody\rBcc: not a field\n", 24) != NULL);
	qt_msg_free(&m);
}
