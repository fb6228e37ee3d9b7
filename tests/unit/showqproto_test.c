/*
 * showqproto_test.c: weir-showq's protocol parsers (mail/showq.c): the
 * request line the server takes, and the answer header the client
 * takes; every malformed form is refused with its reason.
 */
#include <criterion/criterion.h>
#include <string.h>

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
	req_refused(S("list"), "request without its newline (truncated)");
	req_refused(S(""), "request without its newline (truncated)");
	req_refused(S("list\nx"), "bytes after the request line");
	req_refused(S("LIST\n"), "unknown request \"LIST\" (want \"list\" or \"json\")");
	req_refused(S("list \n"), "unknown request \"list \" (want \"list\" or \"json\")");
	req_refused(S("li\0st\n"), "unknown request \"li?st\" (want \"list\" or \"json\")");
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
