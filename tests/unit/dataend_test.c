/*
 * dataend_test.c: the DATA line machine (smtpd/dataend.c): the end is
 * CRLF.CRLF only, every smuggling variant stops it, dot-unstuffing, LF
 * output, the flags, and the same result however the input is split.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "smtpd/dataend.h"

/* Feed s in chunks of step bytes; the status, output in out, *used the
 * bytes consumed in all. */
static enum de_status
run(const char *s, size_t n, size_t step, size_t limit, struct buf *out, size_t *total, int *flags)
{
	struct dataend d;
	enum de_status st = DE_MORE;
	size_t off = 0, used;

	dataend_init(&d, limit);
	buf_reset(out);
	while (off < n && st == DE_MORE) {
		size_t k = n - off < step ? n - off : step;

		st = dataend_feed(&d, s + off, k, &used, out);
		off += used;
	}
	*total = off;
	*flags = d.flags;
	return st;
}

static void
check(const char *s, size_t n, enum de_status want, const char *wantout, size_t wantused)
{
	struct buf out = BUF_INIT;
	size_t step, used;
	int flags;

	for (step = 1; step <= n + 1; step++) {
		enum de_status st = run(s, n, step, 1 << 20, &out, &used, &flags);

		cr_assert_eq(st, want, "step %zu: status %d, want %d", step, st, want);
		if (wantout)
			cr_assert_str_eq(buf_cstr(&out), wantout, "step %zu", step);
		if (wantused)
			cr_assert_eq(used, wantused, "step %zu: used %zu", step, used);
	}
	buf_free(&out);
}

#define S(x) x, sizeof x - 1

Test(dataend, plain_end)
{
	check(S("a\r\nb\r\n.\r\nMAIL"), DE_END, "a\nb\n", sizeof "a\r\nb\r\n.\r\n" - 1);
}

Test(dataend, empty_message) { check(S(".\r\n"), DE_END, "", 3); }
Test(dataend, unstuffing) { check(S("..x\r\n...\r\n.\r\n"), DE_END, ".x\n..\n", 0); }
Test(dataend, dot_inside_line) { check(S("a.\r\n .\r\n.\r\n"), DE_END, "a.\n .\n", 0); }

Test(dataend, smuggling_variants)
{
	check(S("x\n.\nMAIL"), DE_BARE_LF, NULL, 0);
	check(S("x\n.\r\nMAIL"), DE_BARE_LF, NULL, 0);
	check(S("x\r.\rMAIL"), DE_BARE_CR, NULL, 0);
	check(S("x\r\n.\rMAIL"), DE_BARE_CR, NULL, 0);
	check(S("x\r\n.\nMAIL"), DE_BARE_LF, NULL, 0);
	check(S("x\r.\r\nMAIL"), DE_BARE_CR, NULL, 0);
	check(S("\n.\r\n"), DE_BARE_LF, NULL, 0);
	check(S("x\r\r\n.\r\n"), DE_BARE_CR, NULL, 0);
}

Test(dataend, needs_more)
{
	check(S("x\r\n."), DE_MORE, "x\n", 0);
	check(S("x\r\n.\r"), DE_MORE, "x\n", 0);
}

Test(dataend, flags)
{
	struct buf out = BUF_INIT, in = BUF_INIT;
	size_t used, i;
	int flags;

	cr_assert_eq(run(S("a\0b\r\n.\r\n"), 4096, 100, &out, &used, &flags), DE_END);
	cr_assert_eq(flags, DE_NUL);
	cr_assert_eq(run(S("0123456789\r\n.\r\n"), 4096, 5, &out, &used, &flags), DE_END);
	cr_assert_eq(flags, DE_OVERSIZE);
	cr_assert_eq(out.len, 5);
	for (i = 0; i < 998; i++)
		buf_addc(&in, 'x');
	buf_adds(&in, "\r\n.\r\n");
	cr_assert_eq(run(in.s, in.len, 4096, 1 << 20, &out, &used, &flags), DE_END);
	cr_assert_eq(flags, 0, "998 bytes + CRLF is allowed");
	buf_reset(&in);
	for (i = 0; i < 999; i++)
		buf_addc(&in, 'x');
	buf_adds(&in, "\r\n.\r\n");
	cr_assert_eq(run(in.s, in.len, 4096, 1 << 20, &out, &used, &flags), DE_END);
	cr_assert_eq(flags, DE_TOOLONG);
	buf_free(&in);
	buf_free(&out);
}
