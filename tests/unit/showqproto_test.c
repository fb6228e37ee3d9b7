/*
 * showqproto_test.c: weir-showq's protocol parsers (mail/showq.c): the
 * request line the server takes, and the answer header the client
 * takes; every malformed form is refused with its reason; weir-showq's
 * summary (mail/qsummary.h) made and read back, and what is not one
 * refused.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "mail/qsummary.h"
#include "mail/showq.h"

#define S(x) x, sizeof(x) - 1

static void
req_refused(const char *s, size_t n, const char *want)
{
	struct buf why = BUF_INIT;
	enum qlist_format f;

	cr_assert_eq(showq_parse_request(s, n, &f, &why), -1, "accepted %.*s", (int)n, s);
	cr_assert_str_eq(buf_cstr(&why), want);
	buf_free(&why);
}

Test(showqproto, requests)
{
	struct buf why = BUF_INIT;
	enum qlist_format f;
	char big[65];

	cr_assert_eq(showq_parse_request(S("list\n"), &f, &why), 0);
	cr_assert_eq(f, QLIST_TEXT);
	cr_assert_eq(showq_parse_request(S("json\n"), &f, &why), 0);
	cr_assert_eq(f, QLIST_JSON);
	cr_assert_eq(showq_parse_request(S("summary\n"), &f, &why), 0);
	cr_assert_eq(f, QLIST_SUMMARY);
	req_refused(S("summary \n"), "unknown request \"summary \" (want \"list\", \"json\" "
	    "or \"summary\")");
	req_refused(S("list"), "request without its newline (truncated)");
	req_refused(S(""), "request without its newline (truncated)");
	req_refused(S("list\nx"), "bytes after the request line");
	req_refused(S("LIST\n"), "unknown request \"LIST\" (want \"list\", \"json\" or \"summary\")");
	req_refused(S("list \n"), "unknown request \"list \" (want \"list\", \"json\" or \"summary\")");
	req_refused(S("li\0st\n"), "unknown request \"li?st\" (want \"list\", \"json\" or \"summary\")");
	memset(big, 'x', sizeof big);
	req_refused(big, sizeof big, "request longer than 64 bytes");
	big[64] = '\n';
	req_refused(big, sizeof big, "request longer than 64 bytes");
	buf_free(&why);
}

static void
head_ok(const char *s, size_t n, enum showq_kind kind, int rc, unsigned long long len,
    const char *reason)
{
	struct buf why = BUF_INIT;
	struct showq_head h;

	cr_assert_eq(showq_parse_head(s, n, &h, &why), 0, "%.*s: %s", (int)n, s, buf_cstr(&why));
	cr_assert_eq(h.kind, kind);
	cr_assert_eq(h.rc, rc);
	cr_assert_eq(h.len, len);
	cr_assert_eq(h.reason_len, strlen(reason));
	cr_assert(memcmp(s + h.reason_off, reason, h.reason_len) == 0);
	buf_free(&why);
}

static void
head_bad(const char *s, size_t n)
{
	struct buf why = BUF_INIT;
	struct showq_head h;

	cr_assert_eq(showq_parse_head(s, n, &h, &why), -1, "accepted \"%.*s\"", (int)n, s);
	cr_assert(strncmp(buf_cstr(&why), "malformed answer \"", 18) == 0, "%s", why.s);
	buf_free(&why);
}

Test(showqproto, headers)
{
	char longreason[1000];

	head_ok(S("ok 0 67"), SHOWQ_OK, 0, 67, "");
	head_ok(S("ok 1 0"), SHOWQ_OK, 1, 0, "");
	head_ok(S("fail 12 /q: cannot open info/3: Permission denied"), SHOWQ_FAIL, 0, 12,
	    "/q: cannot open info/3: Permission denied");
	head_ok(S("error no request within 5000 ms"), SHOWQ_ERROR, 0, 0,
	    "no request within 5000 ms");
	head_bad(S(""));
	head_bad(S("ok"));
	head_bad(S("ok 2 5"));
	head_bad(S("ok 0"));
	head_bad(S("ok 0 "));
	head_bad(S("ok 0 07"));
	head_bad(S("ok 0 -1"));
	head_bad(S("ok 0 5 "));
	head_bad(S("ok 0 5x"));
	head_bad(S("ok 0 1234567890123456"));
	head_bad(S("OK 0 5"));
	head_bad(S("fail 5"));
	head_bad(S("fail 5 "));
	head_bad(S("fail x reason"));
	head_bad(S("error "));
	head_bad(S("error a\tb"));
	head_bad(S("error a\0b"));
	head_bad(S("banana 1 2"));
	memcpy(longreason, "error ", 6);
	memset(longreason + 6, 'r', sizeof longreason - 6);
	head_bad(longreason, sizeof longreason);
}

/* The summary as weir-showq writes it, read back; the shapes it must not
 * take (a member missing or more, a session that is not one). */
Test(showqproto, summary_round_trip)
{
	struct qsummary a, b;
	struct schedsession ss = { "isp", 4242, 1795675413, 7 };
	struct buf j = BUF_INIT, why = BUF_INIT;
	static const char *const bad[] = {
		"{\"messages\":1,\"not_yet_preprocessed\":0,\"oldest_queue_time\":null}",
		"{\"messages\":1,\"not_yet_preprocessed\":2,\"oldest_queue_time\":null,"
		    "\"sessions\":null}",
		"{\"messages\":1,\"not_yet_preprocessed\":0,\"oldest_queue_time\":\"yesterday\","
		    "\"sessions\":null}",
		"{\"messages\":1,\"not_yet_preprocessed\":0,\"oldest_queue_time\":null,"
		    "\"sessions\":[{\"upstream\":\"a b\",\"pid\":1,\"since\":\"2026-11-26T06:43:33Z\","
		    "\"messages\":0}]}",
		"{\"messages\":1,\"not_yet_preprocessed\":0,\"oldest_queue_time\":null,"
		    "\"sessions\":null,\"more\":1}",
	};
	size_t i;

	memset(&a, 0, sizeof a);
	a.messages = 19;
	a.todo = 2;
	a.oldest = 1795675412;
	a.have_sessions = 1;
	qsummary_add_session(&a, &ss);
	qsummary_json(&a, &j);
	cr_assert_eq(qsummary_parse(j.s, j.len, &b, &why), 0, "%s: %s", j.s, buf_cstr(&why));
	cr_assert(b.messages == 19 && b.todo == 2 && b.oldest == 1795675412 && b.have_sessions);
	cr_assert_eq(b.nsessions, 1);
	cr_assert_str_eq(b.sessions[0].upstream, "isp");
	cr_assert(b.sessions[0].pid == 4242 && b.sessions[0].since == 1795675413 &&
	    b.sessions[0].messages == 7);
	qsummary_free(&b);
	/* weir-send has not run: sessions null, not an empty list. */
	a.have_sessions = 0;
	buf_reset(&j);
	qsummary_json(&a, &j);
	cr_assert(strstr(j.s, "\"sessions\":null"), "%s", j.s);
	cr_assert_eq(qsummary_parse(j.s, j.len, &b, &why), 0);
	cr_assert(!b.have_sessions);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		buf_reset(&why);
		cr_assert_eq(qsummary_parse(bad[i], strlen(bad[i]), &b, &why), -1, "took %s", bad[i]);
	}
	qsummary_free(&a);
	buf_free(&j);
	buf_free(&why);
}

/* sched/sessions' lines (QUEUE.md): weir-send's, read strictly. */
Test(showqproto, session_lines)
{
	struct schedsession ss;

	cr_assert_eq(schedfile_parse_session("isp 4242 1795675413 7\n", 22, &ss), 0);
	cr_assert(strcmp(ss.upstream, "isp") == 0 && ss.pid == 4242 && ss.messages == 7);
	cr_assert_eq(schedfile_parse_session("isp 4242 1795675413 7", 21, &ss), -1);
	cr_assert_eq(schedfile_parse_session("isp 0 1795675413 7\n", 19, &ss), -1);
	cr_assert_eq(schedfile_parse_session("isp 042 1795675413 7\n", 21, &ss), -1);
	cr_assert_eq(schedfile_parse_session("i/p 42 1795675413 7\n", 20, &ss), -1);
	cr_assert_eq(schedfile_parse_session("isp 42 1795675413 7 x\n", 22, &ss), -1);
	cr_assert_eq(schedfile_parse_session(" 42 1795675413 7\n", 17, &ss), -1);
}
