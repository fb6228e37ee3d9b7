/*
 * sendmail_test.c: the real sendmail binary against a scratch queue,
 * with $QMAILQUEUE the built weir-queue: the envelope (todo/) and the
 * message (mess/, less weir-queue's Received line) checked byte by byte
 * for each flag, the header rules, refusals (nothing queued), weir-queue
 * failures mapped to exit codes, and a 5 MB body streamed through.
 */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "sendmail_helpers.h"

static struct qt q;

static void setup(void) { smt_setup(&q); }
static void teardown(void) { qt_teardown(&q); }

TestSuite(sendmail, .init = setup, .fini = teardown, .timeout = 120);

#define S(x) x, sizeof(x) - 1
#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Send, check envelope and message, empty the queue for the next case. */
static void
send_check(const char *const *args, const char *in, size_t inlen, const char *sender,
    const char *const *rcpts, const char *want)
{
	struct qt_msg m;

	smt_send(&q, args, in, inlen, &m);
	smt_assert_env(&m, sender, rcpts);
	if (want)
		smt_assert_like(&m.body, want, "message");
	qt_msg_free(&m);
	tl_rmtree(q.qdir);
	qt_init_queue(&q);
}

static void
refused(const char *const *args, const char *in, size_t inlen, int code, const char *what)
{
	struct tl_result r;

	smt_run(&q, "sendmail", args, in, inlen, NULL, &r);
	smt_assert_refused(&q, &r, code, what);
	tl_result_free(&r);
}

Test(sendmail, plain_message_gets_date_msgid_from)
{
	char *login = smt_login_addr(), *gecos = smt_gecos();
	char *want = *gecos
	    ? xasprintf("Date: *\nMessage-ID: <*\nFrom: \"%s\" <%s>\nSubject: hi\n\nbody\n", gecos, login)
	    : xasprintf("Date: *\nMessage-ID: <*\nFrom: %s\nSubject: hi\n\nbody\n", login);

	send_check(ARGS("bob@example.net"), S("Subject: hi\n\nbody\n"), login,
	    ARGS("bob@example.net"), want);
	free(want);
	free(login);
	free(gecos);
}

Test(sendmail, date_and_message_id_formats)
{
	struct qt_msg m;
	regex_t re;
	char id1[200] = "", *p;

	cr_assert(regcomp(&re,
	    "^Date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), [1-9][0-9]? "
	    "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) 2[0-9]{3} "
	    "[0-2][0-9]:[0-5][0-9]:[0-6][0-9] [-+][0-9]{4}\n"
	    "Message-ID: <[0-9]{14}\\.[0-9]+\\.[0-9a-f]{16}@test\\.example>\n",
	    REG_EXTENDED | REG_NOSUB) == 0);
	smt_send(&q, ARGS("-F", "X", "a@b.example"), S("\n"), &m);
	cr_assert(regexec(&re, m.body.s, 0, NULL, 0) == 0, "got: %s", m.body.s);
	p = strstr(m.body.s, "Message-ID: ");
	snprintf(id1, sizeof id1, "%.*s", (int)strcspn(p, "\n"), p);
	qt_msg_free(&m);
	tl_rmtree(q.qdir);
	qt_init_queue(&q);
	smt_send(&q, ARGS("-F", "X", "a@b.example"), S("\n"), &m);
	p = strstr(m.body.s, "Message-ID: ");
	cr_assert(strncmp(p, id1, strlen(id1)) != 0, "same Message-ID twice: %s", id1);
	qt_msg_free(&m);
	regfree(&re);
}

Test(sendmail, present_headers_kept_not_added)
{
	const char *in = "from: Me <me@example.org>\nDATE: Thu, 1 Jan 2026 00:00:00 +0000\n"
	    "Message-Id: <x@y>\nSubject: s\n\nb\n";
	char *login = smt_login_addr();
	char *want = xasprintf("%s", in);

	send_check(ARGS("-F", "Ignored", "r@example.net"), in, strlen(in), login,
	    ARGS("r@example.net"), want);
	free(want);
	free(login);
}

Test(sendmail, extract_to_cc_bcc_groups_bcc_removed)
{
	const char *in =
	    "To: Bob <bob@example.net>, team: a@example.net,\n"
	    "  \"c, d\"@example.net;, undisclosed-recipients:;\n"
	    "Subject: s\n"
	    "CC: \"Carol, C.\" <carol@example.net> (work), bob@example.net\n"
	    "Bcc: hidden@example.net,\n"
	    "\thidden2@example.net\n"
	    "X-After: y\n"
	    "\n"
	    "body\n";
	const char *want =
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\n"
	    "To: Bob <bob@example.net>, team: a@example.net,\n"
	    "  \"c, d\"@example.net;, undisclosed-recipients:;\n"
	    "Subject: s\n"
	    "CC: \"Carol, C.\" <carol@example.net> (work), bob@example.net\n"
	    "X-After: y\n"
	    "\n"
	    "body\n";

	send_check(ARGS("-t", "-F", "F", "-f", "s@example.org", "cmd@example.net"), in,
	    strlen(in), "s@example.org",
	    ARGS("cmd@example.net", "bob@example.net", "a@example.net", "c, d@example.net",
	        "carol@example.net", "hidden@example.net", "hidden2@example.net"),
	    want);
}

Test(sendmail, bcc_removed_without_t)
{
	const char *in = "To: x@example.net\nBcc: secret@example.net\nSubject: s\n\nb\n";

	send_check(ARGS("-F", "F", "-f", "s@example.org", "r@example.net"), in, strlen(in),
	    "s@example.org", ARGS("r@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\n"
	    "To: x@example.net\nSubject: s\n\nb\n");
}

Test(sendmail, bare_names_get_hostname)
{
	const char *in = "To: root, Admin <admin>\n\nb\n";

	send_check(ARGS("-t", "-f", "cron", "-F", "F", "postmaster"), in, strlen(in),
	    "cron@" SMT_HOST,
	    ARGS("postmaster@" SMT_HOST, "root@" SMT_HOST, "admin@" SMT_HOST), NULL);
}

Test(sendmail, sender_flag_forms)
{
	static const struct { const char *a, *b; const char *sender; } c[] = {
		{ "-f", "a@example.org", "a@example.org" },
		{ "-fa@example.org", NULL, "a@example.org" },
		{ "-r", "r@example.org", "r@example.org" },
		{ "-rr@example.org", NULL, "r@example.org" },
		{ "-f", "", "" },
		{ "-f", "<>", "" },
		{ "-f<>", NULL, "" },
		{ "-f", "<b@example.org>", "b@example.org" },
		{ "-f", "Bee <b@example.org>", "b@example.org" },
		{ "-f", "bob", "bob@" SMT_HOST },
	};
	size_t i;

	for (i = 0; i < sizeof c / sizeof c[0]; i++) {
		const char *args[6] = { c[i].a, c[i].b ? c[i].b : "-i",
			"-FN", "x@example.net", NULL };

		send_check(args, S("\nb\n"), c[i].sender, ARGS("x@example.net"), NULL);
	}
}

Test(sendmail, null_sender_from_header_is_the_user)
{
	char *login = smt_login_addr();
	char *want = xasprintf("Date: *\nMessage-ID: *\nFrom: \"N\" <%s>\n\nb\n", login);

	send_check(ARGS("-f", "", "-F", "N", "x@example.net"), S("\nb\n"), "",
	    ARGS("x@example.net"), want);
	free(want);
	free(login);
}

Test(sendmail, fullname_forms)
{
	send_check(ARGS("-FJoe Q. Public", "-f", "j@example.org", "x@example.net"), S("\nb\n"),
	    "j@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"Joe Q. Public\" <j@example.org>\n\nb\n");
	send_check(ARGS("-F", "Say \"hi\" \\o/", "-f", "j@example.org", "x@example.net"),
	    S("\nb\n"), "j@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"Say \\\"hi\\\" \\\\o/\" <j@example.org>\n\nb\n");
}

Test(sendmail, dot_line_ends_input_without_i)
{
	send_check(ARGS("-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("Subject: s\n\none\n..two\n.\nnot sent\n"), "s@example.org",
	    ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\nSubject: s\n\none\n..two\n");
	/* In the header too, and as a final line without newline. */
	send_check(ARGS("-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("Subject: s\n.\nnot sent\n"), "s@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\nSubject: s\n");
	send_check(ARGS("-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("Subject: s\n\nbody\n."), "s@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\nSubject: s\n\nbody\n");
}

Test(sendmail, dot_line_kept_with_i_and_oi)
{
	const char *want = "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\n"
	    "Subject: s\n\none\n.\nmore\n";

	send_check(ARGS("-i", "-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("Subject: s\n\none\n.\nmore\n"), "s@example.org", ARGS("x@example.net"), want);
	send_check(ARGS("-oi", "-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("Subject: s\n\none\n.\nmore\n"), "s@example.org", ARGS("x@example.net"), want);
	send_check(ARGS("-tiFF", "-f", "s@example.org"),
	    S("To: x@example.net\nSubject: s\n\none\n.\nmore\n"), "s@example.org",
	    ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\n"
	    "To: x@example.net\nSubject: s\n\none\n.\nmore\n");
}

Test(sendmail, crlf_input)
{
	send_check(ARGS("-F", "F", "-f", "s@example.org", "-t"),
	    S("To: x@example.net\r\nSubject: a\r\n b\r\n\r\nline\r\nlone\rcr\r\n.\r\nnot sent\r\n"),
	    "s@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\n"
	    "To: x@example.net\nSubject: a\n b\n\nline\nlone\rcr\n");
}

Test(sendmail, last_line_gets_newline)
{
	send_check(ARGS("-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("Subject: s\n\nno newline"), "s@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\nSubject: s\n\nno newline\n");
}

Test(sendmail, body_without_header_gets_separator)
{
	send_check(ARGS("-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("hello world\nsecond: line\n"), "s@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\n\nhello world\nsecond: line\n");
	send_check(ARGS("-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("Subject: s\nnot a header\n"), "s@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\nSubject: s\n\nnot a header\n");
}

Test(sendmail, mbox_from_line_dropped)
{
	send_check(ARGS("-F", "F", "-f", "s@example.org", "x@example.net"),
	    S("From someone Sat Nov 21 00:00:00 2026\nSubject: s\n\nb\n"), "s@example.org",
	    ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\nSubject: s\n\nb\n");
}

Test(sendmail, duplicates_sent_once)
{
	send_check(ARGS("-t", "-F", "F", "-f", "s@example.org", "a@example.net"),
	    S("To: a@example.net, b@example.net\nCc: b@example.net\n\nb\n"), "s@example.org",
	    ARGS("a@example.net", "b@example.net"), NULL);
}

Test(sendmail, ignored_options_accepted)
{
	send_check(ARGS("-oem", "-oee", "-odb", "-odi", "-om", "-v", "-bm", "-o", "i",
	    "-F", "F", "-f", "s@example.org", "--", "x@example.net"),
	    S("\nb\n.\nc\n"), "s@example.org", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"F\" <s@example.org>\n\nb\n.\nc\n");
}

Test(sendmail, double_dash_ends_options)
{
	send_check(ARGS("-F", "F", "-f", "s@example.org", "--", "-odd@example.net"),
	    S("\nb\n"), "s@example.org", ARGS("-odd@example.net"), NULL);
}

Test(sendmail, unknown_and_refused_options)
{
	struct tl_result r;

	smt_run(&q, "sendmail", ARGS("-K", "a@b"), S(""), NULL, &r);
	cr_assert_eq(r.status, EX_USAGE);
	cr_assert_str_eq(buf_cstr(&r.err), "sendmail: unknown option -K\n");
	tl_result_free(&r);
	refused(ARGS("-tK", "a@b"), S(""), EX_USAGE, "unknown option -K");
	refused(ARGS("-X", "/tmp/log", "a@b"), S(""), EX_USAGE, "-X /tmp/log: weir keeps no traffic log");
	refused(ARGS("-bd"), S(""), EX_USAGE, "started by `weir run`");
	refused(ARGS("-bh"), S(""), EX_USAGE, "-bh is not supported");
	refused(ARGS("-N", "bogus", "a@b"), S(""), EX_USAGE, "-N bogus: give never");
	refused(ARGS("-Nnever,success", "a@b"), S(""), EX_USAGE, "-N never,success");
	refused(ARGS("-B", "9BIT", "a@b"), S(""), EX_USAGE, "-B 9BIT: the body type");
	refused(ARGS("-t", "-bp"), S(""), EX_USAGE, "-t goes only with sending");
	refused(ARGS("-f"), S(""), EX_USAGE, "option -f needs a value");
	refused(ARGS("-bp", "x@example.net"), S(""), EX_USAGE, "takes no addresses");
	refused(ARGS("-bi", "x@example.net"), S(""), EX_USAGE, "takes no addresses");
	refused(ARGS("-bv"), S(""), EX_USAGE, "-bv needs the addresses");
}

Test(sendmail, no_recipients)
{
	refused(NULL, S("Subject: s\n\nb\n"), EX_USAGE, "sendmail: no recipients given");
	refused(ARGS("-t"), S("Subject: s\n\nb\n"), EX_USAGE, "sendmail: no recipients given");
	refused(ARGS("-t"), S("To: undisclosed-recipients:;\n\nb\n"), EX_USAGE,
	    "no recipients given");
}

Test(sendmail, bad_addresses)
{
	refused(ARGS("a@b@example.net"), S("\nb\n"), EX_USAGE, "bad recipient address");
	refused(ARGS("<a@example.net"), S("\nb\n"), EX_USAGE, "unclosed '<'");
	refused(ARGS("a@example.net, b@example.net"), S("\nb\n"), EX_USAGE, "one address only");
	refused(ARGS("x@example.net\n"), S("\nb\n"), EX_USAGE,
	    "bad recipient address x@example.net\\n: line break");
	refused(ARGS(""), S("\nb\n"), EX_USAGE, "empty address");
	refused(ARGS("-f", "a b", "x@example.net"), S("\nb\n"), EX_USAGE, "bad sender address");
	refused(ARGS("-t"), S("To: a@@example.net\n\nb\n"), EX_DATAERR,
	    "bad address in the To header");
	refused(ARGS("-t"), S("To: ok@example.net\nCc: \"unclosed@example.net\n\nb\n"),
	    EX_DATAERR, "bad address in the Cc header: unclosed quoted string");
	refused(ARGS("-t"), S("To: John Smith\n\nb\n"), EX_DATAERR, "found a name");
}

Test(sendmail, long_address_limit)
{
	char a[1100];
	struct qt_msg m;

	/* 1002 bytes fit (qmail's limit), 1003 do not. */
	memset(a, 'a', 990);
	strcpy(a + 990, "@example.net");
	cr_assert_eq(strlen(a), 1002u);
	smt_send(&q, ARGS("-FF", a), S("\nb\n"), &m);
	qt_msg_free(&m);
	tl_rmtree(q.qdir);
	qt_init_queue(&q);
	strcpy(a + 990, "a@example.net");
	refused(ARGS(a), S("\nb\n"), EX_USAGE, "longer than 1002");
}

Test(sendmail, header_errors)
{
	struct buf big = BUF_INIT;
	size_t i;

	refused(ARGS("x@example.net"), S("Subject: a\0b\n\nb\n"), EX_DATAERR, "NUL");
	buf_adds(&big, "Subject: ");
	for (i = 0; i < 990; i++)
		buf_addc(&big, 'x');
	buf_adds(&big, "\n\nb\n");
	refused(ARGS("x@example.net"), big.s, big.len, EX_DATAERR, "longer than 998");
	/* 998 bytes exactly is fine. */
	buf_reset(&big);
	buf_adds(&big, "Subject: ");
	for (i = 0; i < 989; i++)
		buf_addc(&big, 'x');
	buf_adds(&big, "\n\nb\n");
	{
		struct qt_msg m;

		smt_send(&q, ARGS("-FF", "x@example.net"), big.s, big.len, &m);
		qt_msg_free(&m);
		tl_rmtree(q.qdir);
		qt_init_queue(&q);
	}
	/* A header block over 1 MB, in lines of 900 bytes. */
	buf_reset(&big);
	for (i = 0; i < 1200; i++) {
		buf_printf(&big, "X-H%zu: ", i);
		while (big.len % 901 != 900)
			buf_addc(&big, 'y');
		buf_addc(&big, '\n');
	}
	buf_adds(&big, "\nb\n");
	refused(ARGS("x@example.net"), big.s, big.len, EX_DATAERR, "larger than");
	buf_free(&big);
}

Test(sendmail, weir_queue_temporary_failure)
{
	char *s = smt_script(&q, "qq53", "exit 53");
	char *e = xasprintf("QMAILQUEUE=%s", s);
	struct tl_result r;

	smt_run(&q, "sendmail", ARGS("x@example.net"), S("Subject: s\n\nb\n"),
	    (const char *const[]){ e, NULL }, &r);
	cr_assert_eq(r.status, EX_TEMPFAIL, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert_str_eq(buf_cstr(&r.err),
	    "sendmail: weir-queue: write error, e.g. disk full (temporary)\n");
	tl_result_free(&r);
	free(e);
	free(s);
}

Test(sendmail, weir_queue_permanent_failure)
{
	char *s = smt_script(&q, "qq11", "cat >/dev/null; exit 11");
	char *e = xasprintf("QMAILQUEUE=%s", s);
	struct tl_result r;

	smt_run(&q, "sendmail", ARGS("x@example.net"), S("Subject: s\n\nb\n"),
	    (const char *const[]){ e, NULL }, &r);
	cr_assert_eq(r.status, EX_DATAERR, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert_str_eq(buf_cstr(&r.err), "sendmail: weir-queue: address too long (permanent)\n");
	tl_result_free(&r);
	free(e);
	free(s);
}

Test(sendmail, weir_queue_killed_or_missing)
{
	char *s = smt_script(&q, "qqkill", "kill -9 $$");
	char *e = xasprintf("QMAILQUEUE=%s", s);
	char *missing = xasprintf("QMAILQUEUE=%s/nonexistent", q.tmp);
	struct tl_result r;

	smt_run(&q, "sendmail", ARGS("x@example.net"), S("Subject: s\n\nb\n"),
	    (const char *const[]){ e, NULL }, &r);
	cr_assert_eq(r.status, EX_TEMPFAIL, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.err), "sendmail: weir-queue: killed by signal 9"),
	    "%s", r.err.s);
	tl_result_free(&r);
	smt_run(&q, "sendmail", ARGS("x@example.net"), S("Subject: s\n\nb\n"),
	    (const char *const[]){ missing, NULL }, &r);
	cr_assert_eq(r.status, EX_TEMPFAIL, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.err), "cannot run"), "%s", r.err.s);
	tl_result_free(&r);
	/* A "queue" that exits 0 without reading: sendmail must not lose the
	 * write error silently, but the exit code is the verdict. */
	free(e);
	free(s);
	free(missing);
}

Test(sendmail, weir_queue_sees_what_sendmail_wrote)
{
	/* A stand-in queue that records fd 0 and fd 1 (the envelope pipe). */
	char *rec = xasprintf("cat >%s/msg; cat <&1 >%s/env; exit 0", q.tmp, q.tmp);
	char *s = smt_script(&q, "qqrec", rec);
	char *e = xasprintf("QMAILQUEUE=%s", s);
	char *pm = xasprintf("%s/msg", q.tmp), *pe = xasprintf("%s/env", q.tmp);
	struct tl_result r;
	struct buf got = BUF_INIT;

	smt_run(&q, "sendmail", ARGS("-f", "s@example.org", "x@example.net", "y"),
	    S("Date: d\nMessage-ID: <m@x>\nFrom: f\n\nb\n"), (const char *const[]){ e, NULL }, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, buf_cstr(&r.err));
	tl_read(pm, &got);
	cr_assert_str_eq(buf_cstr(&got), "Date: d\nMessage-ID: <m@x>\nFrom: f\n\nb\n");
	buf_reset(&got);
	tl_read(pe, &got);
	cr_assert_eq(got.len, sizeof "Fs@example.org\0Tx@example.net\0Ty@" SMT_HOST "\0");
	cr_assert(memcmp(got.s, "Fs@example.org\0Tx@example.net\0Ty@" SMT_HOST "\0\0",
	    got.len) == 0);
	buf_free(&got);
	tl_result_free(&r);
	free(rec); free(s); free(e); free(pm); free(pe);
}

Test(sendmail, large_body_streamed)
{
	size_t n = 5 * 1024 * 1024, i, inlen;
	char *in = xmalloc(n + 64), *p;
	struct qt_msg m;
	const char *hdr = "Subject: big\n\n";

	strcpy(in, hdr);
	p = in + strlen(hdr);
	for (i = 0; p + 80 <= in + n; i++) {
		memset(p, 'a' + (char)(i % 26), 79);
		p[79] = '\n';
		p += 80;
	}
	smt_send(&q, ARGS("-F", "F", "-f", "s@example.org", "x@example.net"), in,
	    (size_t)(p - in), &m);
	inlen = (size_t)(p - in);
	cr_assert(m.body.len > inlen && m.body.len < inlen + 200, "message size %zu", m.body.len);
	cr_assert(strncmp(m.body.s, "Date: ", 6) == 0);
	cr_assert(memcmp(m.body.s + m.body.len - inlen, in, inlen) == 0, "body differs");
	qt_msg_free(&m);
	free(in);
}

Test(sendmail, refused_stdin_not_needed_for_usage_errors)
{
	/* A usage error is reported even when stdin never ends. */
	const char *argv[] = { NULL, "-X", NULL };
	char *bin = tl_bin("sendmail");
	struct tl_run run = { .argv = argv, .close_in_early = 1, .timeout_s = 10 };
	struct tl_result r;

	argv[0] = bin;
	tl_run(&run, &r);
	cr_assert_eq(r.status, EX_USAGE);
	tl_result_free(&r);
	free(bin);
}

Test(sendmail, read_error_on_stdin)
{
	/* read(2) on a directory fails with EISDIR: exit 74, nothing queued. */
	char *bin = tl_bin("sendmail");
	char *body = xasprintf("exec '%s' -FF x@example.net </", bin);
	char *s = smt_script(&q, "readerr", body);
	const char *argv[] = { s, NULL };
	const char *env[] = { q.envs[0], q.envs[1], q.envs[2], NULL };
	struct tl_run run = { .argv = argv, .env = env };
	struct tl_result r;

	tl_run(&run, &r);
	smt_assert_refused(&q, &r, EX_IOERR, "read error on standard input: Is a directory");
	tl_result_free(&r);
	free(s);
	free(body);
	free(bin);
}

/* Every flag of Postfix's sendmail(1), in each form getopt allows. */
Test(sendmail, postfix_flags_accepted)
{
	char *login = smt_login_addr();
	char *from_cron = xasprintf("Date: *\nMessage-ID: *\nFrom: \"CronDaemon\" <%s>\n\nb\n",
	    login);

	/* Debian 12's cron, attached and detached. */
	send_check(ARGS("-FCronDaemon", "-i", "-B8BITMIME", "-oem", "root"), S("\nb\n"),
	    login, ARGS("root@" SMT_HOST), from_cron);
	send_check(ARGS("-F", "CronDaemon", "-i", "-B", "7bit", "-o", "em", "root"),
	    S("\nb\n"), login, ARGS("root@" SMT_HOST), from_cron);
	/* The rest: accepted and ignored, each form. */
	send_check(ARGS("-G", "-U", "-L", "lbl", "-Lx", "-h", "17", "-h17", "-R", "hdrs",
	    "-Rfull", "-V", "envid", "-Venv", "-O", "DeliveryMode=b", "-ODeliveryMode=i",
	    "-Am", "-A", "c", "-odb", "-odi", "-odq", "-ode", "-oee", "-oep", "-oeq", "-oew",
	    "-om", "-o7", "-o8", "-oQ/tmp", "-oAfile", "-v", "-vv", "-n", "-c", "-m", "-x",
	    "-p", "smtp:host", "-e", "m", "-N", "success,delay,failure", "-NFAILURE",
	    "-Ndelay", "-C", q.conf, "-Gvim", "--", "a@example.net"),
	    S("\nb\n.\nc\n"), login, ARGS("a@example.net"), NULL);
	/* Clustered flags ending in one that takes a value. */
	send_check(ARGS("-tivFName", "-oi", "-rs@example.org", "x@example.net"),
	    S("To: t@example.net\n\nb\n"), "s@example.org",
	    ARGS("x@example.net", "t@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"Name\" <s@example.org>\nTo: t@example.net\n\nb\n");
	free(from_cron);
	free(login);
}

/* -N never: the message goes from <>, to which nobody sends a bounce; the
 * From: header still names the sender. */
Test(sendmail, n_never_queues_from_the_null_sender)
{
	send_check(ARGS("-N", "never", "-f", "s@example.org", "-FS", "x@example.net"),
	    S("\nb\n"), "", ARGS("x@example.net"),
	    "Date: *\nMessage-ID: *\nFrom: \"S\" <s@example.org>\n\nb\n");
	send_check(ARGS("-NNEVER", "x@example.net"), S("From: me@example.org\n\nb\n"), "",
	    ARGS("x@example.net"), "Date: *\nMessage-ID: *\nFrom: me@example.org\n\nb\n");
}

/* Run sendmail (by the name name, a link to it) with args: exit 0, one
 * line on stdout containing what, nothing on stderr, nothing queued. */
static void
noted(const char *name, const char *const *args, const char *what)
{
	char *bin = tl_bin("sendmail"), *link = xasprintf("%s/%s", q.tmp, name);
	const char *argv[8] = { link };
	struct tl_run run = { .argv = argv, .env = (const char *const *)q.envs, .timeout_s = 60 };
	struct tl_result r;
	size_t i;

	for (i = 0; args && args[i]; i++)
		argv[i + 1] = args[i];
	unlink(link);
	cr_assert(symlink(bin, link) == 0);
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "%s: exit %d: %s", name, r.status, buf_cstr(&r.err));
	cr_assert_eq(r.err.len, 0, "%s: stderr: %s", name, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.out), what), "%s: stdout: %s", name, buf_cstr(&r.out));
	cr_assert(strchr(r.out.s, '\n') == r.out.s + r.out.len - 1, "not one line: %s", r.out.s);
	qt_assert_clean(&q, name);
	tl_result_free(&r);
	free(link);
	free(bin);
}

Test(sendmail, newaliases_and_bi_have_nothing_to_do)
{
	noted("newaliases", NULL, "newaliases: nothing to do");
	noted("sendmail", ARGS("-bi"), "sendmail: nothing to do");
	noted("sendmail", ARGS("-I"), "nothing to do");
}

/* -q: `weir flush` as root (lock/flush left for weir-send), else a note. */
Test(sendmail, q_flushes_as_root_else_notes)
{
	char *flush = qt_path(&q, "lock/flush");
	struct stat st;

	if (geteuid() == 0) {
		noted("sendmail", ARGS("-q"), "weir-send is not running");
		cr_assert(stat(flush, &st) == 0, "no %s after -q", flush);
	} else {
		noted("sendmail", ARGS("-q"), "-q: weir-send runs the queue by itself");
		noted("sendmail", ARGS("-q1h"), "-q: weir-send runs the queue by itself");
		noted("sendmail", ARGS("-qRexample.net"), "-q: weir-send runs the queue");
		cr_assert(stat(flush, &st) < 0, "%s made by a user's -q", flush);
	}
	free(flush);
}

Test(sendmail, bv_says_which_upstream)
{
	char *login = smt_login_addr();
	char *want;
	struct tl_result r;

	qt_config(&q, "hostname = \"" SMT_HOST "\"\nadmin = \"ops@example.org\"\n"
	    "upstream \"lists\" {\n  host = \"lists.example.net\"\n  port = 2525\n"
	    "  senders = {\"list-*@example.org\"}\n}\n"
	    "upstream \"isp\" {\n  host = \"smtp.example.net\"\n}\n");
	smt_run(&q, "sendmail", ARGS("-bv", "-f", "list-a@example.org", "x@example.net", "root"),
	    S(""), NULL, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert_str_eq(buf_cstr(&r.out),
	    "x@example.net: deliverable through upstream \"lists\" (lists.example.net:2525) "
	    "for the sender <list-a@example.org>\n"
	    "root@" SMT_HOST ": local, to the admin address <ops@example.org>, deliverable "
	    "through upstream \"lists\" (lists.example.net:2525) for the sender "
	    "<list-a@example.org>\n");
	tl_result_free(&r);
	smt_run(&q, "sendmail", ARGS("-bv", "y@example.net"), S(""), NULL, &r);
	want = xasprintf("y@example.net: deliverable through upstream \"isp\" "
	    "(smtp.example.net:587) for the sender <%s>\n", login);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert_str_eq(buf_cstr(&r.out), want);
	tl_result_free(&r);
	qt_assert_clean(&q, "-bv");
	/* No upstream for that sender: not deliverable, and the exit says so. */
	qt_config(&q, "hostname = \"" SMT_HOST "\"\n");
	smt_run(&q, "sendmail", ARGS("-bv", "z@example.net"), S(""), NULL, &r);
	cr_assert_eq(r.status, EX_UNAVAILABLE);
	cr_assert(strstr(buf_cstr(&r.out), "z@example.net: not deliverable: "), "%s", r.out.s);
	tl_result_free(&r);
	free(want);
	free(login);
}

/* -bs: an SMTP session on stdin/stdout by weir-smtpd, trusted as the local
 * user it is: relays even where listen.allow leaves loopback out, and may
 * send its commands at once. */
Test(sendmail, bs_is_an_smtp_session)
{
	char *bin = tl_bin("weir-smtpd"), *dir = xstrndup(bin, strrchr(bin, '/') - bin);
	char *libexec = xasprintf("WEIR_LIBEXEC=%s", dir);
	const char *in = "EHLO client.example\r\nMAIL FROM:<a@example.org>\r\n"
	    "RCPT TO:<b@example.net>\r\nDATA\r\nSubject: s\r\n\r\nbody\r\n.\r\nQUIT\r\n";
	struct tl_result r;
	struct qt_msg m;
	time_t t0 = time(NULL);

	qt_config(&q, "hostname = \"" SMT_HOST "\"\nlisten {\n  allow = {\"192.0.2.0/24\"}\n}\n");
	smt_run(&q, "sendmail", ARGS("-bs"), in, strlen(in), ARGS(libexec), &r);
	cr_assert_eq(r.status, 0, "exit %d: %s\n%s", r.status, buf_cstr(&r.err), buf_cstr(&r.out));
	cr_assert(strncmp(buf_cstr(&r.out), "220 " SMT_HOST, 4 + strlen(SMT_HOST)) == 0,
	    "%s", r.out.s);
	cr_assert(strstr(r.out.s, "\r\n250 2.0.0"), "no 250 after DATA: %s", r.out.s);
	cr_assert(strstr(r.out.s, "\r\n221 "), "no 221: %s", r.out.s);
	qt_load_only(&q, t0, time(NULL), &m);
	smt_assert_env(&m, "a@example.org", ARGS("b@example.net"));
	cr_assert(strstr(m.body.s, "\n\nbody\n"), "%s", m.body.s);
	qt_msg_free(&m);
	tl_result_free(&r);
	free(libexec);
	free(dir);
	free(bin);
}

/* No header line weir writes is longer than 998 bytes (RFC 5322 2.1.1),
 * however long the -F name: it is cut at 200 bytes, and the address goes
 * on a line of its own when one line would not hold both. */
static void
assert_header_lines_fit(const struct buf *msg)
{
	const char *p = msg->s, *end = strstr(p, "\n\n"), *nl;

	cr_assert(end != NULL);
	for (; p < end; p = nl + 1) {
		nl = strchr(p, '\n');
		cr_assert(nl - p <= 998, "a header line of %zu bytes: %.60s...",
		    (size_t)(nl - p), p);
	}
}

Test(sendmail, long_fullname_header_lines_fit)
{
	char name[5001], *from, *local = xcalloc(1, 1000), *want;
	struct qt_msg m;
	size_t i;

	for (i = 0; i < 5000; i++)
		name[i] = (char)(i % 7 == 6 ? ' ' : 'a' + i % 26);
	name[5000] = '\0';
	smt_send(&q, ARGS("-F", name, "-f", "s@example.org", "x@example.net"), S("\nb\n"), &m);
	assert_header_lines_fit(&m.body);
	want = xasprintf("From: \"%.200s\" <s@example.org>\n", name);
	cr_assert(strstr(m.body.s, want), "no %s in\n%s", want, m.body.s);
	qt_msg_free(&m);
	free(want);
	tl_rmtree(q.qdir);
	qt_init_queue(&q);

	/* A name and a long address: folded before the address.  UTF-8 is
	 * cut between characters. */
	memset(name, 0, sizeof name);
	for (i = 0; i + 2 <= 300; i += 2)
		memcpy(name + i, "\xc3\xa9", 2);	/* é */
	memset(local, 'l', 900);
	from = xasprintf("%s@example.org", local);
	smt_send(&q, ARGS("-F", name, "-f", from, "x@example.net"), S("\nb\n"), &m);
	assert_header_lines_fit(&m.body);
	want = xasprintf("From: \"%.200s\"\n <%s>\n", name, from);
	cr_assert(strstr(m.body.s, want), "no %.300s... in\n%.400s", want, m.body.s);
	qt_msg_free(&m);
	free(want);
	free(from);
	tl_rmtree(q.qdir);
	qt_init_queue(&q);

	/* An address no From: line can hold: refused, not written. */
	memset(local, 'l', 990);
	from = xasprintf("%s@e.org", local);
	refused(ARGS("-f", from, "x@example.net"), S("\nb\n"), EX_USAGE,
	    "too long for the From: header");
	free(from);
	free(local);
}

/* ---- a broken weir.conf does not stop injection ----
 *
 * The queue is named by the file's queue_dir line only ($WEIR_QUEUE
 * emptied), so each case also shows the queue's place was read. */

TestSuite(brokenconf, .init = setup, .fini = teardown, .timeout = 120);

#define NOQ "WEIR_QUEUE="
static const char smtp_in[] = "EHLO c.example\r\nMAIL FROM:<a@example.org>\r\n"
    "RCPT TO:<b@example.net>\r\nDATA\r\nSubject: s\r\n\r\nb\r\n.\r\nQUIT\r\n";

static void
write_conf(const char *text)
{
	char *c = xasprintf("queue_dir = \"%s\"\nhostname = \"" SMT_HOST "\"\n%s", q.qdir, text);

	qt_config(&q, c);
	free(c);
}

static size_t
count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (; (hay = strstr(hay, needle)) != NULL; hay++)
		n++;
	return n;
}

/* Check the one message, then empty the queue (weir queue-init needs a
 * file that loads) and put text back. */
static void
queued_one(const char *sender, const char *rcpt, const char *who, const char *text)
{
	unsigned long *ids;
	struct qt_msg m;

	cr_assert_eq(qt_list(&q, "todo", &ids), 1u, "%s: not one message queued", who);
	qt_load(&q, ids[0], 0, time(NULL) + 1, &m);
	smt_assert_env(&m, sender, ARGS(rcpt));
	qt_msg_free(&m);
	free(ids);
	write_conf("");
	tl_rmtree(q.qdir);
	qt_init_queue(&q);
	write_conf(text);
}

/* text (after the queue_dir and hostname lines) breaks the file; where
 * (":3:" ...) is the file:line weir run names, NULL if the file loads. */
static void
still_queues(const char *text, const char *where)
{
	char *login = smt_login_addr(), *want = where ? xasprintf("%s%s", q.conf, where) : NULL;
	char *weir = tl_bin("weir");
	struct buf env = BUF_INIT;
	struct tl_result r;

	write_conf(text);
	/* sendmail: one warning line naming the first error, and queued;
	 * weir-queue under it says nothing more. */
	smt_run(&q, "sendmail", ARGS("x@example.net"), S("\nb\n"), ARGS(NOQ), &r);
	cr_assert_eq(r.status, 0, "%s: exit %d: %s", text, r.status, buf_cstr(&r.err));
	if (want) {
		cr_assert(strncmp(buf_cstr(&r.err), "sendmail: warning: ", 19) == 0 &&
		    strstr(r.err.s, want) && count(r.err.s, "\n") == 1,
		    "%s: stderr: %s", text, r.err.s);
	} else {
		cr_assert_eq(r.err.len, 0, "%s: stderr: %s", text, buf_cstr(&r.err));
	}
	tl_result_free(&r);
	queued_one(login, "x@example.net", "sendmail", text);

	/* mailq: the warning, and the queue (the one queue_dir names) listed. */
	smt_run(&q, "mailq", NULL, S(""), ARGS(NOQ), &r);
	cr_assert_eq(r.status, 0, "%s: mailq exit %d: %s", text, r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.out), "messages in queue: 0"), "%s: mailq: %s", text,
	    r.out.s);
	if (want)
		cr_assert(strncmp(buf_cstr(&r.err), "mailq: warning: ", 16) == 0 &&
		    strstr(r.err.s, want) && count(r.err.s, "\n") == 1, "%s: %s", text, r.err.s);
	tl_result_free(&r);

	/* weir-queue alone: the warning, and queued. */
	qt_envelope(&env, "s@example.org", ARGS("y@example.net"));
	qt_inject(&q, S("Subject: s\n\nb\n"), env.s, env.len, ARGS(NOQ), &r);
	cr_assert_eq(r.status, 0, "%s: weir-queue exit %d: %s", text, r.status, buf_cstr(&r.err));
	if (want)
		cr_assert(strncmp(buf_cstr(&r.err), "weir-queue: warning: ", 21) == 0 &&
		    strstr(r.err.s, want) && count(r.err.s, "\n") == 1, "%s: %s", text, r.err.s);
	tl_result_free(&r);
	queued_one("s@example.org", "y@example.net", "weir-queue", text);

	/* weir-smtpd per connection: the warning once in its log, and 250. */
	smt_smtpd(&q, ARGS(NOQ, "TCPREMOTEIP=127.0.0.1"), smtp_in, &r);
	cr_assert_eq(r.status, 0, "%s: weir-smtpd exit %d: %s\n%s", text, r.status,
	    buf_cstr(&r.out), buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.out), "\r\n250 2.0.0"), "%s: %s", text, r.out.s);
	if (want)
		cr_assert(count(buf_cstr(&r.err), want) == 1 &&
		    count(r.err.s, "mail is still queued") == 1, "%s: log: %s", text, r.err.s);
	tl_result_free(&r);
	queued_one("a@example.org", "b@example.net", "weir-smtpd", text);

	/* weir run refuses it, naming the file and line. */
	if (want) {
		const char *argv[] = { weir, "run", NULL };
		const char *envv[] = { q.envs[1], NOQ, NULL };
		struct tl_run run = { .argv = argv, .env = envv, .timeout_s = 60 };

		tl_run(&run, &r);
		cr_assert_eq(r.status, 2, "%s: weir run exit %d: %s", text, r.status,
		    buf_cstr(&r.err));
		cr_assert(strstr(buf_cstr(&r.err), want), "%s: weir run: %s", text, r.err.s);
		tl_result_free(&r);
	}
	buf_free(&env);
	free(weir);
	free(want);
	free(login);
}

Test(brokenconf, unknown_key)
{
	still_queues("hostnme = \"typo.example\"\n", ":3:");
}

Test(brokenconf, unbalanced_brace)
{
	still_queues("}\nadmin = \"ops@example.org\"\n", ":3:");
}

/* libconfuse takes a section left open at the end of the file; the keys
 * after it are then the section's, and unknown there. */
Test(brokenconf, section_left_open)
{
	still_queues("upstream \"isp\" {\n  host = \"smtp.example.net\"\n"
	    "admin = \"ops@example.org\"\n", ":5:");
}

Test(brokenconf, bad_value_of_another_key)
{
	still_queues("admin = \"ops@example.org\"\nqueue_lifetime = \"forever\"\n", ":4:");
}

Test(brokenconf, bad_upstream_section)
{
	still_queues("upstream \"isp\" {\n  host = \"h.example\"\n  username = \"u\"\n}\n", ":6:");
}

/* The policy file is weir-gate's: injection never reads it. */
Test(brokenconf, missing_policy_file)
{
	char *t = xasprintf("policy_file = \"%s/no/policy.conf\"\n", q.tmp);

	still_queues(t, NULL);
	free(t);
}

/* Where the queue is cannot be known: every injector refuses, one line. */
static void
refuses(const char *conf_env, const char *text, const char *what)
{
	struct buf env = BUF_INIT;
	struct tl_result r;

	if (text)
		qt_config(&q, text);
	smt_run(&q, "sendmail", ARGS("x@example.net"), S("\nb\n"), ARGS(NOQ, conf_env), &r);
	smt_assert_refused(&q, &r, EX_TEMPFAIL, what);
	tl_result_free(&r);
	qt_envelope(&env, "s@example.org", ARGS("y@example.net"));
	qt_inject(&q, S("\nb\n"), env.s, env.len, ARGS(NOQ, conf_env), &r);
	qt_assert_fails(&q, &r, 55, what);	/* QQ_CONFIG */
	tl_result_free(&r);
	smt_smtpd(&q, ARGS(NOQ, "TCPREMOTEIP=127.0.0.1", conf_env), smtp_in, &r);
	cr_assert_eq(r.status, 2, "weir-smtpd exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.err), what), "weir-smtpd: %s", r.err.s);
	cr_assert_eq(r.out.len, 0, "weir-smtpd talked: %s", r.out.s);
	qt_assert_clean(&q, "weir-smtpd");
	tl_result_free(&r);
	buf_free(&env);
}

Test(brokenconf, queue_place_unknown_refuses)
{
	char *conf_env = xasprintf("WEIR_CONFIG=%s", q.conf), *dir_env;
	char *t;

	refuses(conf_env, "hostname = \"h.example\"\nqueue_dir =\nhostnme = 1\n",
	    ":2: a queue_dir line that cannot be read");
	t = xasprintf("upstream \"isp\" {\nqueue_dir = \"%s\"\n", q.qdir);
	refuses(conf_env, t, ":2: queue_dir inside braces");
	free(t);
	t = xasprintf("queue_dir = \"%s\"\nqueue_split = 0\nbad = 1\n", q.qdir);
	refuses(conf_env, t, ":2: queue_split = \"0\" is not a valid value");
	free(t);
	dir_env = xasprintf("WEIR_CONFIG=%s", q.tmp);
	refuses(dir_env, NULL, "not a regular file");
	free(dir_env);
	free(conf_env);
}
