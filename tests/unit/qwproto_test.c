/*
 * qwproto_test.c: weir-queued's socket protocol (mail/qwproto.c), as
 * tables: each record header and each reply line, whole, cut short
 * (more bytes needed), too long, with a NUL, with a bad number (zero,
 * a leading zero, a sign, a space, over its bound) or followed by the
 * next bytes; every header qw_hdr_put() writes parses back to itself.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <time.h>
#include <string.h>

#include "mail/qwproto.h"

#define S(x) x, sizeof(x) - 1
#define ID "123.1700000000.000000005"

/* A record header and what it must come to: rc 1 with type, len and
 * hdrlen; 0, more bytes needed; -1, malformed. */
struct hdr_case {
	const char *bytes;
	size_t n;
	int rc;
	char type;
	size_t len, hdrlen;
};

static const struct hdr_case hdrs[] = {
	{ S("M1\n"), 1, 'M', 1, 3 },
	{ S("E1\n"), 1, 'E', 1, 3 },
	{ S("M65536\n"), 1, 'M', QW_CHUNK_MAX, 7 },
	{ S("E4096\n"), 1, 'E', 4096, 6 },
	/* the payload (or the next record) after the header is not its */
	{ S("M3\nabc"), 1, 'M', 3, 3 },
	{ S("E2\n\0\0"), 1, 'E', 2, 3 },
	{ S("M1\nM1\n"), 1, 'M', 1, 3 },
	/* truncated: digits so far, and room for more */
	{ S(""), 0, 0, 0, 0 },
	{ S("M"), 0, 0, 0, 0 },
	{ S("E6553"), 0, 0, 0, 0 },
	{ S("M65536"), 0, 0, 0, 0 },
	{ S("M123456"), 0, 0, 0, 0 },
	/* oversized: QW_HDR_MAX bytes without the newline, or over the bound */
	{ S("M1234567"), -1, 0, 0, 0 },
	{ S("M12345678\n"), -1, 0, 0, 0 },
	{ S("M65537\n"), -1, 0, 0, 0 },
	{ S("E99999\n"), -1, 0, 0, 0 },
	/* the number */
	{ S("M0\n"), -1, 0, 0, 0 },
	{ S("M01\n"), -1, 0, 0, 0 },
	{ S("E065536\n"), -1, 0, 0, 0 },
	{ S("M\n"), -1, 0, 0, 0 },
	{ S("M+1\n"), -1, 0, 0, 0 },
	{ S("M-1\n"), -1, 0, 0, 0 },
	{ S("M 1\n"), -1, 0, 0, 0 },
	{ S("M1 \n"), -1, 0, 0, 0 },
	{ S("M1\r\n"), -1, 0, 0, 0 },
	{ S("M0x10\n"), -1, 0, 0, 0 },
	{ S("M1x"), -1, 0, 0, 0 },
	/* NUL */
	{ S("\0"), -1, 0, 0, 0 },
	{ S("M\0"), -1, 0, 0, 0 },
	{ S("M1\0\n"), -1, 0, 0, 0 },
	{ S("M\0001\n"), -1, 0, 0, 0 },
	/* the type byte */
	{ S("X1\n"), -1, 0, 0, 0 },
	{ S("m1\n"), -1, 0, 0, 0 },
	{ S("K1\n"), -1, 0, 0, 0 },
	{ S("\n"), -1, 0, 0, 0 },
	{ S(" M1\n"), -1, 0, 0, 0 },
};

Test(qwproto, record_headers)
{
	size_t i;

	for (i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
		const struct hdr_case *c = &hdrs[i];
		char type = '?';
		size_t len = 12345, hdrlen = 12345;
		int rc = qw_hdr_parse(c->bytes, c->n, &type, &len, &hdrlen);

		cr_assert_eq(rc, c->rc, "case %zu (\"%.*s\"): %d, expected %d", i, (int)c->n,
		    c->bytes, rc, c->rc);
		if (rc != 1)
			continue;
		cr_assert_eq(type, c->type, "case %zu", i);
		cr_assert_eq(len, c->len, "case %zu: %zu", i, len);
		cr_assert_eq(hdrlen, c->hdrlen, "case %zu: %zu", i, hdrlen);
	}
}

/* Every prefix of a header is "more needed"; the whole one parses. */
Test(qwproto, record_header_prefixes)
{
	static const char h[] = "E65536\n";
	char type;
	size_t n, len, hdrlen;

	for (n = 0; n < sizeof h - 1; n++)
		cr_assert_eq(qw_hdr_parse(h, n, &type, &len, &hdrlen), 0, "prefix of %zu", n);
	cr_assert_eq(qw_hdr_parse(h, n, &type, &len, &hdrlen), 1);
}

Test(qwproto, record_header_round_trip)
{
	static const size_t lens[] = { 1, 9, 10, 99, 100, 4096, 65535, QW_CHUNK_MAX };
	size_t i;

	for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		struct buf b = BUF_INIT;
		char type, want[16];
		size_t len, hdrlen;

		qw_hdr_put(&b, i % 2 ? 'E' : 'M', lens[i]);
		snprintf(want, sizeof want, "%c%zu\n", i % 2 ? 'E' : 'M', lens[i]);
		cr_assert(b.len == strlen(want) && memcmp(b.s, want, b.len) == 0);
		cr_assert(b.len <= QW_HDR_MAX);
		cr_assert_eq(qw_hdr_parse(b.s, b.len, &type, &len, &hdrlen), 1);
		cr_assert_eq(type, i % 2 ? 'E' : 'M');
		cr_assert_eq(len, lens[i]);
		cr_assert_eq(hdrlen, b.len);
		buf_free(&b);
	}
}

/* A reply line and what it must come to: rc 1 with code (0: K, with
 * id), linelen; 0, more bytes needed; -1, malformed. */
struct reply_case {
	const char *bytes;
	size_t n;
	int rc;
	int code;
	const char *id;
	size_t linelen;
};

static const struct reply_case replies[] = {
	{ S("K" ID "\n"), 1, 0, ID, sizeof ID + 1 },
	{ S("K1.0.000000000\n"), 1, 0, "1.0.000000000", 15 },
	{ S("Z81\n"), 1, 81, NULL, 4 },
	{ S("Z1\n"), 1, 1, NULL, 3 },
	{ S("Z255\n"), 1, 255, NULL, 5 },
	/* the next reply after a K is the next message's */
	{ S("K" ID "\nZ71\n"), 1, 0, ID, sizeof ID + 1 },
	{ S("Z81\nK" ID "\n"), 1, 81, NULL, 4 },
	/* truncated */
	{ S(""), 0, 0, NULL, 0 },
	{ S("K"), 0, 0, NULL, 0 },
	{ S("K" ID), 0, 0, NULL, 0 },
	{ S("Z8"), 0, 0, NULL, 0 },
	/* the code */
	{ S("Z0\n"), -1, 0, NULL, 0 },
	{ S("Z256\n"), -1, 0, NULL, 0 },
	{ S("Z081\n"), -1, 0, NULL, 0 },
	{ S("Z\n"), -1, 0, NULL, 0 },
	{ S("Z-1\n"), -1, 0, NULL, 0 },
	{ S("Z81 \n"), -1, 0, NULL, 0 },
	{ S("Z81\r\n"), -1, 0, NULL, 0 },
	{ S("Z8\0\n"), -1, 0, NULL, 0 },
	/* the id */
	{ S("K\n"), -1, 0, NULL, 0 },
	{ S("Kqueued\n"), -1, 0, NULL, 0 },
	{ S("K123.1700000000.5\n"), -1, 0, NULL, 0 },
	{ S("K123.1700000000.0000000050\n"), -1, 0, NULL, 0 },
	{ S("K123.1700000000\n"), -1, 0, NULL, 0 },
	{ S("K" ID " \n"), -1, 0, NULL, 0 },
	{ S("K123\0.1700000000.000000005\n"), -1, 0, NULL, 0 },
	{ S("K" ID "\0\n"), -1, 0, NULL, 0 },
	/* the type byte */
	{ S("k" ID "\n"), -1, 0, NULL, 0 },
	{ S("M1\n"), -1, 0, NULL, 0 },
	{ S("\n"), -1, 0, NULL, 0 },
	{ S("\0"), -1, 0, NULL, 0 },
};

Test(qwproto, replies)
{
	size_t i;

	for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
		const struct reply_case *c = &replies[i];
		char id[QUEUE_ID_MAX] = "unchanged";
		int code = -7, rc;
		size_t linelen = 12345;

		rc = qw_reply_parse(c->bytes, c->n, &code, id, &linelen);
		cr_assert_eq(rc, c->rc, "case %zu (\"%.*s\"): %d, expected %d", i, (int)c->n,
		    c->bytes, rc, c->rc);
		if (rc != 1)
			continue;
		cr_assert_eq(code, c->code, "case %zu: %d", i, code);
		cr_assert_eq(linelen, c->linelen, "case %zu: %zu", i, linelen);
		if (c->id)
			cr_assert_str_eq(id, c->id, "case %zu", i);
	}
}

/* A line with no newline is "more needed" only while it could still be
 * one: at QW_REPLY_MAX bytes it is refused.  An id is at most
 * QUEUE_ID_MAX - 1 bytes: one of 47 is taken, one of 48 (a well-formed
 * id all the same, that queue_parse_msgid() would take) refused. */
Test(qwproto, reply_bounds)
{
	static const char id47[] = "12345678901234567.1700000000000000000.000000005";
	static const char id48[] = "123456789012345678.1700000000000000000.000000005";
	char s[QW_REPLY_MAX + 2], id[QUEUE_ID_MAX], line[QUEUE_ID_MAX + 4];
	unsigned long ino;
	struct timespec t;
	int code;
	size_t linelen;

	memset(s, '1', sizeof s);
	s[0] = 'K';
	cr_assert_eq(qw_reply_parse(s, QW_REPLY_MAX - 1, &code, id, &linelen), 0);
	cr_assert_eq(qw_reply_parse(s, QW_REPLY_MAX, &code, id, &linelen), -1);
	s[0] = 'Z';
	cr_assert_eq(qw_reply_parse(s, QW_REPLY_MAX - 1, &code, id, &linelen), 0);
	cr_assert_eq(qw_reply_parse(s, QW_REPLY_MAX, &code, id, &linelen), -1);

	cr_assert_eq(strlen(id47), QUEUE_ID_MAX - 1);
	cr_assert_eq(strlen(id48), QUEUE_ID_MAX);
	cr_assert_eq(queue_parse_msgid(id48, &ino, &t), 0);
	snprintf(line, sizeof line, "K%s\n", id47);
	cr_assert_eq(qw_reply_parse(line, strlen(line), &code, id, &linelen), 1);
	cr_assert_eq(code, 0);
	cr_assert_str_eq(id, id47);
	cr_assert_eq(linelen, strlen(line));
	snprintf(line, sizeof line, "K%s\n", id48);
	cr_assert_eq(qw_reply_parse(line, strlen(line), &code, id, &linelen), -1);
}
