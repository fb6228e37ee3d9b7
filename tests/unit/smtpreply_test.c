/* smtpreply_test.c: the strict SMTP reply parser, good and malformed input. */
#include <criterion/criterion.h>
#include <string.h>

#include "mail/smtpreply.h"

static enum reply_status
parse(struct smtp_reply *r, const char *s, const char **why)
{
	smtp_reply_init(r);
	return smtp_reply_parse(r, s, strlen(s), why);
}

Test(smtpreply, single_line)
{
	struct smtp_reply r;
	const char *why = NULL;

	cr_assert_eq(parse(&r, "250 2.1.0 Ok\r\n", &why), REPLY_DONE, "%s", why);
	cr_assert_eq(r.code, 250);
	cr_assert_str_eq(r.esc, "2.1.0");
	cr_assert_str_eq(r.text.s, "2.1.0 Ok");
	cr_assert_eq(r.nlines, 1);
	cr_assert_eq(smtp_reply_class(&r), 2);
	smtp_reply_free(&r);
}

Test(smtpreply, code_alone_and_empty_text)
{
	struct smtp_reply r;
	const char *why = NULL;

	cr_assert_eq(parse(&r, "354\r\n", &why), REPLY_DONE, "%s", why);
	cr_assert_eq(r.code, 354);
	cr_assert_eq(r.text.len, 0);
	cr_assert_str_eq(r.esc, "");
	smtp_reply_free(&r);
	cr_assert_eq(parse(&r, "220 \r\n", &why), REPLY_DONE, "%s", why);
	smtp_reply_free(&r);
}

Test(smtpreply, multi_line_ehlo)
{
	struct smtp_reply r;
	const char *why = NULL;

	cr_assert_eq(parse(&r, "250-mx.example Hello\r\n250-PIPELINING\r\n250-SIZE 1000\r\n"
	    "250-\r\n250 8BITMIME\r\n", &why), REPLY_DONE, "%s", why);
	cr_assert_eq(r.nlines, 5);
	cr_assert_str_eq(r.text.s, "mx.example Hello\nPIPELINING\nSIZE 1000\n\n8BITMIME");
	smtp_reply_free(&r);
}

Test(smtpreply, streaming_feed)
{
	struct smtp_reply r;
	const char *why = NULL;

	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_feed(&r, "421-4.7.0 first", 15, &why), REPLY_MORE);
	cr_assert_eq(smtp_reply_feed(&r, "421 second", 10, &why), REPLY_DONE);
	cr_assert_str_eq(r.esc, "4.7.0");
	cr_assert_eq(smtp_reply_feed(&r, "250 more", 8, &why), REPLY_BAD);
	smtp_reply_reset(&r);
	cr_assert_eq(smtp_reply_feed(&r, "250 ok", 6, &why), REPLY_DONE);
	cr_assert_eq(r.code, 250);
	cr_assert_str_eq(r.text.s, "ok");
	smtp_reply_free(&r);
}

Test(smtpreply, enhanced_codes)
{
	static const struct { const char *in, *esc; } cases[] = {
		{ "550 5.1.1 <a@b>: unknown\r\n", "5.1.1" },
		{ "550 5.123.123 x\r\n", "5.123.123" },
		{ "550 5.1.1\r\n", "5.1.1" },
		{ "550 4.1.1 class disagrees\r\n", "" },
		{ "550 5.1234.1 too long\r\n", "" },
		{ "550 5..1 empty\r\n", "" },
		{ "550 5.1.1x glued\r\n", "" },
		{ "550 5.1 short\r\n", "" },
		{ "250 ok\r\n", "" },
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct smtp_reply r;
		const char *why = NULL;

		cr_assert_eq(parse(&r, cases[i].in, &why), REPLY_DONE, "%s: %s", cases[i].in, why);
		cr_assert_str_eq(r.esc, cases[i].esc, "%s", cases[i].in);
		smtp_reply_free(&r);
	}
}

Test(smtpreply, malformed_inputs_are_bad_never_a_crash)
{
	static const char *const bad[] = {
		"",
		"\r\n",
		"25\r\n",
		"2500 ok\r\n",
		"250ok\r\n",
		"abc ok\r\n",
		"25a ok\r\n",
		"099 ok\r\n",
		"199 ok\r\n",
		"600 ok\r\n",
		"260 ok\r\n",			/* second digit over 5 */
		"250-a\r\n251 b\r\n",		/* codes differ */
		"250-a\r\n",			/* no last line */
		"250-a\r\n250-b\r\n",
		"250 a\r\n250 b\r\n",		/* a line after the last */
		"250 ok\n",			/* bare LF */
		"250 ok\r",			/* bare CR at the end */
		"250 o\rk\r\n",			/* bare CR inside */
		"250 ok",			/* no CRLF */
		"250 o\x01k\r\n",		/* control byte */
		"250 o\x7fk\r\n",
		"250 ok\r\nleft",
		" 250 ok\r\n",
		"-250 ok\r\n",
		"250_ok\r\n",
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct smtp_reply r;
		const char *why = NULL;

		cr_assert_eq(parse(&r, bad[i], &why), REPLY_BAD, "accepted case %zu", i);
		cr_assert_not_null(why);
		smtp_reply_free(&r);
	}
}

Test(smtpreply, nul_in_reply_is_bad)
{
	struct smtp_reply r;
	const char *why = NULL;

	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_parse(&r, "250 o\0k\r\n", 9, &why), REPLY_BAD);
	smtp_reply_free(&r);
	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_feed(&r, "250 o\0k", 7, &why), REPLY_BAD);
	smtp_reply_free(&r);
}

Test(smtpreply, line_length_limit_is_512_with_crlf)
{
	char line[600];
	struct smtp_reply r;
	const char *why = NULL;

	memset(line, 'x', sizeof line);
	memcpy(line, "250 ", 4);
	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_feed(&r, line, 510, &why), REPLY_DONE, "%s", why);
	smtp_reply_free(&r);
	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_feed(&r, line, 511, &why), REPLY_BAD);
	cr_assert_str_eq(why, "reply line over 512 bytes");
	smtp_reply_free(&r);
}

Test(smtpreply, too_many_lines)
{
	struct smtp_reply r;
	const char *why = NULL;
	int i;

	smtp_reply_init(&r);
	for (i = 0; i < SMTP_REPLY_LINES_MAX; i++)
		cr_assert_eq(smtp_reply_feed(&r, "250-x", 5, &why), REPLY_MORE);
	cr_assert_eq(smtp_reply_feed(&r, "250 x", 5, &why), REPLY_BAD);
	smtp_reply_free(&r);
}

Test(smtpreply, tab_and_eight_bit_text_kept)
{
	struct smtp_reply r;
	const char *why = NULL;

	cr_assert_eq(parse(&r, "250 caf\xc3\xa9\tok\r\n", &why), REPLY_DONE, "%s", why);
	cr_assert_str_eq(r.text.s, "caf\xc3\xa9\tok");
	smtp_reply_free(&r);
}

Test(smtpreply, oneline_form)
{
	struct smtp_reply r;
	const char *why = NULL;
	char out[64], small[8];

	cr_assert_eq(parse(&r, "550-5.1.1 no\r\n550 such\tuser\r\n", &why), REPLY_DONE);
	smtp_reply_oneline(&r, out, sizeof out);
	cr_assert_str_eq(out, "550 5.1.1 no / such user");
	smtp_reply_oneline(&r, small, sizeof small);
	cr_assert_str_eq(small, "550 5.1");
	smtp_reply_free(&r);
}

/* Every prefix of a good reply is either incomplete or bad, never done
 * early; every single-byte corruption is handled without a crash. */
Test(smtpreply, prefixes_and_corruptions)
{
	const char good[] = "250-mx.example\r\n250-SIZE 10\r\n250 8BITMIME\r\n";
	size_t n = sizeof good - 1, i;
	int b;

	for (i = 0; i < n; i++) {
		struct smtp_reply r;
		const char *why = NULL;

		smtp_reply_init(&r);
		cr_assert_eq(smtp_reply_parse(&r, good, i, &why), REPLY_BAD, "prefix %zu", i);
		smtp_reply_free(&r);
	}
	for (i = 0; i < n; i++)
		for (b = 0; b < 256; b += 7) {
			char copy[sizeof good];
			struct smtp_reply r;
			const char *why = NULL;
			enum reply_status st;

			memcpy(copy, good, sizeof good);
			copy[i] = (char)b;
			smtp_reply_init(&r);
			st = smtp_reply_parse(&r, copy, n, &why);
			cr_assert(st == REPLY_DONE || st == REPLY_BAD);
			if (st == REPLY_DONE)
				cr_assert(r.code >= 200 && r.code <= 559);
			smtp_reply_free(&r);
		}
}
