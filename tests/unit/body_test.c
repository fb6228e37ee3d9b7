/* body_test.c: CRLF normalisation and dot-stuffing, byte for byte. */
#include <criterion/criterion.h>
#include <string.h>

#include "remote/body.h"

static void
check(const char *in, size_t n, const char *want)
{
	struct buf out = BUF_INIT;
	struct body_info info;

	cr_assert_eq(body_encode(in, n, &out, &info), 0);
	cr_assert_eq(out.len, strlen(want), "got [%s] want [%s]", out.s, want);
	cr_assert(memcmp(out.s, want, out.len) == 0, "got [%s] want [%s]", out.s, want);
	buf_free(&out);
}

#define CHECK(in, want) check(in, sizeof in - 1, want)

Test(body, line_endings)
{
	CHECK("a\nb\n", "a\r\nb\r\n.\r\n");
	CHECK("a\r\nb\r\n", "a\r\nb\r\n.\r\n");
	/* in the body (after the empty first line) a bare CR ends a line */
	CHECK("\na\rb\r", "\r\na\r\nb\r\n.\r\n");
	CHECK("\na\r\r\nb", "\r\na\r\n\r\nb\r\n.\r\n");
	CHECK("\na\n\rb", "\r\na\r\n\r\nb\r\n.\r\n");
	CHECK("no end", "no end\r\n.\r\n");
	CHECK("", ".\r\n");
	CHECK("\n\n", "\r\n\r\n.\r\n");
}

Test(body, dot_stuffing)
{
	CHECK(".\n", "..\r\n.\r\n");
	CHECK("a\n.\nb\n", "a\r\n..\r\nb\r\n.\r\n");
	CHECK("..x\r\n", "...x\r\n.\r\n");
	CHECK("x.\n .y\n", "x.\r\n .y\r\n.\r\n");
	CHECK("\na\r.b", "\r\na\r\n..b\r\n.\r\n");
	CHECK(".", "..\r\n.\r\n");
}

Test(body, nul_and_eight_bit_pass_through)
{
	struct buf out = BUF_INIT;
	struct body_info info;

	cr_assert_eq(body_encode("a\0b\xe9\n", 5, &out, &info), 0);
	cr_assert_eq(out.len, 9);
	cr_assert(memcmp(out.s, "a\0b\xe9\r\n.\r\n", 9) == 0);
	cr_assert_eq(info.eightbit, 1);
	cr_assert_eq(info.lines, 1);
	buf_free(&out);
}

Test(body, line_limit)
{
	static char msg[2100];
	struct buf out = BUF_INIT;
	struct body_info info;

	memset(msg, 'x', sizeof msg);
	msg[0] = 'a'; msg[1] = '\n';
	msg[2 + 998] = '\n';			/* line 2: exactly 998 */
	cr_assert_eq(body_encode(msg, 2 + 998 + 1, &out, &info), 0);
	cr_assert_eq(info.eightbit, 0);
	buf_reset(&out);
	msg[0] = '\n';				/* line 1 empty: then body */
	msg[2 + 999] = '\r';			/* a bare CR ends a body line */
	msg[2 + 998] = 'x';			/* line 3: 999 */
	cr_assert_eq(body_encode(msg, 2 + 999 + 1, &out, &info), -1);
	cr_assert_eq(info.too_long_line, 3);
	cr_assert_eq(info.too_long_len, 999);
	buf_free(&out);
}

/* In the header a bare CR is no line end: the upstream sees one field
 * where sendmail would have seen one.  Failed before: three fields. */
Test(body, bare_cr_in_the_header_is_no_line_end)
{
	CHECK("Subject: hi\rBcc: hidden@x\rX-Injected: yes\n\nbody\rmore\n",
	    "Subject: hi Bcc: hidden@x X-Injected: yes\r\n\r\nbody\r\nmore\r\n.\r\n");
	CHECK("Subject: hi\r\nX: y\r\r\n\r\nb\r", "Subject: hi\r\nX: y \r\n\r\nb\r\n.\r\n");
	CHECK("A: b\n\rBcc: x\n\nc\n", "A: b\r\n Bcc: x\r\n\r\nc\r\n.\r\n");
	CHECK("A: b\r\n\r\n\rBcc: x\n", "A: b\r\n\r\n\r\nBcc: x\r\n.\r\n");
	CHECK("A: b\r", "A: b \r\n.\r\n");
	CHECK("a\rb\r", "a b \r\n.\r\n");
}
