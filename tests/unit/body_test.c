/* body_test.c: CRLF normalisation and dot-stuffing, byte for byte, and
 * the same streamed from a file or a pipe in chunks of any size. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The whole stream of b, cap bytes at a time, twice (a second
 * transaction rewinds): both must be want. */
static void
stream_is(struct body *b, size_t cap, const struct buf *want)
{
	static char out[BODY_CHUNK];
	struct buf got = BUF_INIT, why = BUF_INIT;
	ssize_t n;
	int round;

	for (round = 0; round < 2; round++) {
		buf_reset(&got);
		body_rewind(b);
		while ((n = body_next(b, out, cap, &why)) > 0)
			buf_add(&got, out, (size_t)n);
		cr_assert_eq(n, 0, "%s", buf_cstr(&why));
		cr_assert_eq(got.len, want->len, "cap %zu: %zu bytes, want %zu", cap, got.len,
		    want->len);
		cr_assert(memcmp(got.s, want->s, got.len) == 0, "cap %zu: bytes differ", cap);
	}
	buf_free(&got);
	buf_free(&why);
}

/* A message of every awkward shape: header with bare CRs, dots, CRLF,
 * bare CR and LF, 8-bit bytes, a last line without its end. */
static void
awkward(struct buf *m, size_t size)
{
	static const char *const pieces[] = { "Subject: a\rBcc: b\n", "X: y\r\r\n", "\n",
		".dot\n", "..two\r\n", "bare\rcr", "\n.\n", "\xe9t\xe9\n", "\r\n.\r\n", "x" };
	size_t i = 0;

	buf_adds(m, pieces[0]);
	buf_adds(m, pieces[1]);
	buf_adds(m, pieces[2]);
	while (m->len < size)
		buf_adds(m, pieces[3 + i++ % 6]);
	buf_adds(m, pieces[9]);
}

/* Streamed from a file (read again with pread) or from a pipe (kept),
 * in chunks of any size: the same bytes as body_encode(), and SIZE. */
Test(body, streamed_equals_encoded)
{
	struct buf m = BUF_INIT, want = BUF_INIT, why = BUF_INIT;
	struct body_info info;
	struct body *b = malloc(sizeof *b);
	char path[] = "/tmp/weir-body-XXXXXX";
	int fd = mkstemp(path), p[2];

	cr_assert(fd >= 0 && b);
	unlink(path);
	awkward(&m, 300 * 1024);
	cr_assert_eq(body_encode(m.s, m.len, &want, &info), 0);
	cr_assert(write(fd, "skip", 4) == 4);	/* the message starts where fd is */
	cr_assert(write(fd, m.s, m.len) == (ssize_t)m.len);
	cr_assert(lseek(fd, 4, SEEK_SET) == 4);
	cr_assert_eq(body_open(b, fd, 1024, &why), 0, "%s", buf_cstr(&why));
	cr_assert_eq(b->wire_len, want.len);
	cr_assert_eq(b->info.lines, info.lines);
	cr_assert_eq(b->info.eightbit, 1);
	cr_assert_null(b->mem.s, "a file is not held in memory");
	stream_is(b, BODY_CHUNK, &want);
	stream_is(b, 16, &want);
	stream_is(b, 1000, &want);
	body_close(b);
	close(fd);

	buf_reset(&m);
	buf_reset(&want);
	awkward(&m, 20 * 1024);		/* fits in the pipe */
	cr_assert_eq(body_encode(m.s, m.len, &want, &info), 0);
	cr_assert(pipe(p) == 0);
	cr_assert(write(p[1], m.s, m.len) == (ssize_t)m.len);
	close(p[1]);
	cr_assert_eq(body_open(b, p[0], 1024 * 1024, &why), 0, "%s", buf_cstr(&why));
	cr_assert_eq(b->wire_len, want.len);
	stream_is(b, 16, &want);
	stream_is(b, BODY_CHUNK, &want);
	body_close(b);
	close(p[0]);

	/* A pipe over the limit. */
	cr_assert(pipe(p) == 0);
	cr_assert(write(p[1], m.s, m.len) == (ssize_t)m.len);
	close(p[1]);
	cr_assert_eq(body_open(b, p[0], 1000, &why), -1);
	cr_assert(strstr(buf_cstr(&why), "over 1000 bytes"), "%s", why.s);
	body_close(b);
	close(p[0]);
	free(b);
	buf_free(&m);
	buf_free(&want);
	buf_free(&why);
}
