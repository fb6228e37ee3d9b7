/* envelope_test.c: the envelope parsers, streaming and whole-file. */
#include <criterion/criterion.h>
#include <string.h>

#include "mail/envelope.h"

/* Feed in pieces of the given size; return the final status. */
static enum env_status
feed(const char *in, size_t n, size_t piece, struct buf *out, struct env_parser *p,
    size_t *consumed)
{
	enum env_status st = ENV_MORE;
	size_t off = 0, used;

	env_parser_init(p);
	while (off < n && st == ENV_MORE) {
		size_t k = n - off < piece ? n - off : piece;

		st = env_parser_feed(p, in + off, k, &used, out);
		off += used;
	}
	*consumed = off;
	return st;
}

#define LIT(s) s, sizeof(s) - 1

Test(envelope, good_in_every_piece_size)
{
	static const char in[] = "Fa@b.c\0Tx@y.z\0Tq@r.s\0\0";
	static const char want[] = "Fa@b.c\0Tx@y.z\0Tq@r.s\0";
	size_t piece, used;

	for (piece = 1; piece <= sizeof in; piece++) {
		struct buf out = BUF_INIT;
		struct env_parser p;

		cr_assert_eq(feed(in, sizeof in - 1, piece, &out, &p, &used), ENV_DONE);
		cr_assert_eq(used, sizeof in - 1);
		cr_assert_eq(out.len, sizeof want - 1);
		cr_assert(memcmp(out.s, want, out.len) == 0);
		cr_assert_eq(p.nrcpt, 2);
		buf_free(&out);
	}
}

Test(envelope, stops_at_terminator)
{
	struct buf out = BUF_INIT;
	struct env_parser p;
	size_t used;

	cr_assert_eq(feed(LIT("F\0Tx\0\0TRAILING"), 100, &out, &p, &used), ENV_DONE);
	cr_assert_eq(used, 6, "consumed %zu", used);
	buf_free(&out);
}

Test(envelope, null_sender_ok)
{
	struct buf out = BUF_INIT;
	struct env_parser p;
	size_t used;

	cr_assert_eq(feed(LIT("F\0Tx@y\0\0"), 3, &out, &p, &used), ENV_DONE);
	buf_free(&out);
}

Test(envelope, malformed)
{
	static const struct { const char *in; size_t n; enum env_status st; const char *why; } cases[] = {
		{ "Xa\0Tb\0\0", 7, ENV_FORMAT, "expected 'F'" },
		{ "Fa\0Xb\0\0", 7, ENV_FORMAT, "expected 'T'" },
		{ "Fa\0\0", 4, ENV_FORMAT, "no recipients" },
		{ "Fa\r\0Tb\0\0", 8, ENV_FORMAT, "control character" },
		{ "Fa\0Tb\nRCPT\0\0", 12, ENV_FORMAT, "control character" },
		{ "Fa\0Tb\x7f\0\0", 8, ENV_FORMAT, "control character" },
	};
	size_t i, used;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct buf out = BUF_INIT;
		struct env_parser p;

		cr_assert_eq(feed(cases[i].in, cases[i].n, 2, &out, &p, &used), cases[i].st,
		    "case %zu", i);
		cr_assert(strstr(p.why, cases[i].why), "case %zu: %s", i, p.why);
		buf_free(&out);
	}
}

Test(envelope, truncated_needs_more)
{
	struct buf out = BUF_INIT;
	struct env_parser p;
	size_t used;

	cr_assert_eq(feed(LIT("Fa@b\0Tc@d\0"), 64, &out, &p, &used), ENV_MORE);
	cr_assert_eq(feed(LIT("Fa@b"), 64, &out, &p, &used), ENV_MORE);
	buf_free(&out);
}

static void
long_addr(size_t len, enum env_status want)
{
	struct buf in = BUF_INIT, out = BUF_INIT;
	struct env_parser p;
	size_t i, used;

	buf_add(&in, "Fs\0T", 4);
	for (i = 0; i < len; i++)
		buf_addc(&in, 'a');
	buf_add(&in, "\0\0", 2);
	cr_assert_eq(feed(in.s, in.len, 100, &out, &p, &used), want, "len %zu", len);
	buf_free(&in);
	buf_free(&out);
}

Test(envelope, address_length_limit)
{
	long_addr(1002, ENV_DONE);
	long_addr(1003, ENV_TOOLONG);
	long_addr(5000, ENV_TOOLONG);
}

Test(envelope, todo_file)
{
	static const char good[] = "u1000\0p42\0Fa@b\0Tx@y\0Dz@w\0";
	struct buf why = BUF_INIT;
	struct todo_env e;

	/* D is not a todo record type. */
	cr_assert_eq(todo_parse(good, sizeof good - 1, &e, &why), -1);
	cr_assert(strstr(why.s, "expected T"), "%s", why.s);
	buf_reset(&why);
	cr_assert_eq(todo_parse(LIT("u1000\0p42\0Fa@b\0Tx@y\0Tz@w\0"), &e, &why), 0, "%s", why.s);
	cr_assert_eq(e.uid, 1000);
	cr_assert_eq(e.pid, 42);
	cr_assert_eq(e.nrcpt, 2);
	cr_assert_eq(e.sender.len, 3);
	cr_assert(memcmp(e.sender.addr, "a@b", 3) == 0);
	cr_assert_eq(todo_parse(LIT("u1000\0p42\0Fa@b\0Tx@y"), &e, &why), -1);
	cr_assert_eq(todo_parse(LIT("p42\0u1\0Fa@b\0Tx@y\0"), &e, &why), -1);
	cr_assert_eq(todo_parse(LIT("u1x\0p42\0Fa@b\0Tx@y\0"), &e, &why), -1);
	cr_assert_eq(todo_parse(LIT(""), &e, &why), -1);
	buf_free(&why);
}

Test(envelope, info_and_rcpt_files)
{
	struct buf why = BUF_INIT;
	struct qrec s;
	size_t t, d;

	cr_assert_eq(info_parse(LIT("Fa@b\0"), &s, &why), 0);
	cr_assert_eq(info_parse(LIT("F\0"), &s, &why), 0);
	cr_assert_eq(s.len, 0);
	cr_assert_eq(info_parse(LIT("Fa@b\0Tx\0"), &s, &why), -1);
	cr_assert_eq(info_parse(LIT("Fa@b"), &s, &why), -1);
	cr_assert_eq(info_parse(LIT("Ta@b\0"), &s, &why), -1);
	cr_assert_eq(rcptfile_parse(LIT("Ta\0Db\0Tc\0"), &t, &d, &why), 0);
	cr_assert_eq(t, 2);
	cr_assert_eq(d, 1);
	cr_assert_eq(rcptfile_parse(LIT("Ta\0Xb\0"), &t, &d, &why), -1);
	cr_assert_eq(rcptfile_parse(LIT("Ta\0Db"), &t, &d, &why), -1);
	buf_free(&why);
}

Test(envelope, addr_problem)
{
	cr_assert_null(envelope_addr_problem("a@b.c", 5));
	cr_assert_null(envelope_addr_problem("", 0));
	cr_assert_null(envelope_addr_problem("\xc3\xa9@b.c", 6));	/* UTF-8 ok */
	cr_assert_not_null(envelope_addr_problem("a\tb", 3));
	cr_assert_not_null(envelope_addr_problem("a\0b", 3));
}

/* weir's injector refuses an address no SMTP client could write as a
 * path (weir-queue 91), whatever the pipe's chunks. */
Test(envelope, address_not_a_path)
{
	static const struct {
		const char *in;
		size_t n;
	} cases[] = {
		{ LIT("Fa@b.c\0Tr@remote.example> NOTIFY=SUCCESS ORCPT=rfc822;x\0\0") },
		{ LIT("Fx@client.example> RET=HDRS\0Tr@remote.example\0\0") },
		{ LIT("Fa@b.c\0Tr@under_score.example\0\0") },
		{ LIT("Fa@b.c\0T@b.c\0\0") },
		{ LIT("Fa@b.c\0Tr@b.c.\0\0") },
	};
	size_t i, piece, used;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (piece = 1; piece <= cases[i].n; piece++) {
			struct buf out = BUF_INIT;
			struct env_parser p;

			cr_assert_eq(feed(cases[i].in, cases[i].n, piece, &out, &p, &used),
			    ENV_FORMAT, "case %zu piece %zu", i, piece);
			buf_free(&out);
		}
	/* Quoting makes these representable: they pass. */
	{
		struct buf out = BUF_INIT;
		struct env_parser p;

		cr_assert_eq(feed(LIT("Fx> RET=HDRS@client.example\0Tjohn doe@r.example\0Troot\0\0"),
		    3, &out, &p, &used), ENV_DONE);
		buf_free(&out);
	}
}

/* Feed in at most three pieces, cut at a and b (a <= b). */
static enum env_status
feed_cut(const char *in, size_t n, size_t a, size_t b)
{
	size_t cuts[3] = { a, b - a, n - b }, off = 0, used, k;
	enum env_status st = ENV_MORE;
	struct buf out = BUF_INIT;
	struct env_parser p;

	env_parser_init(&p);
	for (k = 0; k < 3 && st == ENV_MORE; k++) {
		size_t end = off + cuts[k];

		while (off < end && st == ENV_MORE) {
			st = env_parser_feed(&p, in + off, end - off, &used, &out);
			off += used;
		}
	}
	buf_free(&out);
	return st;
}

/* The first defect by position decides, however the pipe splits the
 * input: a control byte within the first 1002 bytes of an address is 91
 * (ENV_FORMAT); an address that reaches 1003 bytes before any control
 * byte is 11 (ENV_TOOLONG).  Before the fix, 1500 'a's then a CR gave
 * FORMAT whole and TOOLONG when cut before the CR. */
static void
every_split(size_t before, char bad, size_t after, enum env_status want)
{
	struct buf in = BUF_INIT;
	size_t i, a, b, step = 7;

	buf_add(&in, "Fs\0T", 4);
	for (i = 0; i < before; i++)
		buf_addc(&in, 'a');
	buf_addc(&in, bad);
	for (i = 0; i < after; i++)
		buf_addc(&in, 'b');
	buf_add(&in, "\0\0", 2);
	for (a = 0; a <= in.len; a++)
		cr_assert_eq(feed_cut(in.s, in.len, a, a), want, "%zu+%zu: cut at %zu", before,
		    after, a);
	for (a = 0; a <= in.len; a += step)
		for (b = a; b <= in.len; b += step)
			cr_assert_eq(feed_cut(in.s, in.len, a, b), want, "%zu+%zu: cuts at %zu, %zu",
			    before, after, a, b);
	buf_free(&in);
}

Test(envelope, exit_code_does_not_depend_on_split)
{
	every_split(1500, '\r', 10, ENV_TOOLONG);	/* 1003rd byte before the CR */
	every_split(1002, '\n', 0, ENV_TOOLONG);	/* the CR is byte 1003 */
	every_split(1001, '\n', 0, ENV_FORMAT);		/* byte 1002: in range */
	every_split(1001, '\n', 600, ENV_FORMAT);
	every_split(10, '\r', 1500, ENV_FORMAT);
	every_split(10, '\x7f', 2000, ENV_FORMAT);
	every_split(1001, 'c', 0, ENV_DONE);
	every_split(1001, 'c', 1, ENV_TOOLONG);
}
