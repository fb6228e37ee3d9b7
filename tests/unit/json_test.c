/*
 * json_test.c: json_str() on every class of byte: printable ASCII, the
 * two that need a backslash, control bytes, DEL, well-formed UTF-8 of
 * each length, and the ill-formed kinds (stray continuation, overlong,
 * surrogate, above U+10FFFF, truncated), each written as \u00XX.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/json.h"

static void
is(const char *in, size_t n, const char *want)
{
	struct buf b = BUF_INIT;

	json_str(&b, in, n);
	cr_assert_str_eq(buf_cstr(&b), want);
	buf_free(&b);
}

#define S(x) x, sizeof(x) - 1

Test(json, ascii_and_escapes)
{
	is(S("a@example.org"), "\"a@example.org\"");
	is(S("\"q\"\\"), "\"\\\"q\\\"\\\\\"");
	is(S("tab\there\r\n"), "\"tab\\u0009here\\u000d\\u000a\"");
	is(S("\x01\x1f\x7f"), "\"\\u0001\\u001f\\u007f\"");
	is(S("nul\0inside"), "\"nul\\u0000inside\"");
	is(S(""), "\"\"");
}

Test(json, utf8_kept)
{
	is(S("caf\xc3\xa9"), "\"caf\xc3\xa9\"");			/* 2 bytes */
	is(S("\xe2\x82\xac"), "\"\xe2\x82\xac\"");			/* U+20AC */
	is(S("\xf0\x9f\x93\xa7"), "\"\xf0\x9f\x93\xa7\"");		/* U+1F4E7 */
	is(S("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");		/* U+10FFFF */
}

Test(json, ill_formed_as_latin1)
{
	is(S("\xff"), "\"\\u00ff\"");
	is(S("\x80x"), "\"\\u0080x\"");				/* stray continuation */
	is(S("\xc0\x80"), "\"\\u00c0\\u0080\"");			/* overlong NUL */
	is(S("\xe0\x80\xaf"), "\"\\u00e0\\u0080\\u00af\"");		/* overlong '/' */
	is(S("\xed\xa0\x80"), "\"\\u00ed\\u00a0\\u0080\"");		/* surrogate */
	is(S("\xf4\x90\x80\x80"), "\"\\u00f4\\u0090\\u0080\\u0080\"");	/* > U+10FFFF */
	is(S("\xe2\x82"), "\"\\u00e2\\u0082\"");			/* truncated */
	is(S("\xc3\xa9\xff\xc3\xa9"), "\"\xc3\xa9\\u00ff\xc3\xa9\"");
}

Test(json, cstr_null)
{
	struct buf b = BUF_INIT;

	json_cstr(&b, NULL);
	json_cstr(&b, "x");
	cr_assert_str_eq(buf_cstr(&b), "null\"x\"");
	buf_free(&b);
}
