/*
 * qctl_test.c: the operator's queue control files as weir-send and the
 * listings read them (mail/qctl.c), as tables: hold/N ("birth B\nsince
 * T\n") and reply/N ("birth B\nnext T\n" then "ADDR\0REPLY\n" per
 * recipient), whole and with each way of being malformed (truncated, a
 * bad number, the lines swapped, a NUL, trailing bytes); a recipient's
 * reply found by its whole address only.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "mail/qctl.h"

#define S(x) x, sizeof(x) - 1

struct hold_case {
	const char *bytes;
	size_t n;
	int rc;
	long long birth, since;
};

static const struct hold_case holds[] = {
	{ S("birth 1700000000\nsince 1700000100\n"), 0, 1700000000, 1700000100 },
	{ S("birth 0\nsince 0\n"), 0, 0, 0 },
	{ S("birth 9223372036854775807\nsince 1\n"), 0, 9223372036854775807LL, 1 },
	{ S(""), -1, 0, 0 },
	{ S("birth 1700000000\n"), -1, 0, 0 },
	{ S("birth 1700000000\nsince 1700000100"), -1, 0, 0 },
	{ S("birth 1700000000\nsince \n"), -1, 0, 0 },
	{ S("since 1700000100\nbirth 1700000000\n"), -1, 0, 0 },
	{ S("birth 01\nsince 1\n"), -1, 0, 0 },
	{ S("birth -1\nsince 1\n"), -1, 0, 0 },
	{ S("birth 9223372036854775808\nsince 1\n"), -1, 0, 0 },
	{ S("birth  1\nsince 1\n"), -1, 0, 0 },
	{ S("birth 1 \nsince 1\n"), -1, 0, 0 },
	{ S("birth 1\r\nsince 1\n"), -1, 0, 0 },
	{ S("birth 1\0\nsince 1\n"), -1, 0, 0 },
	{ S("Birth 1\nsince 1\n"), -1, 0, 0 },
	{ S("birth 1\nsince 1\n\n"), -1, 0, 0 },
	{ S("birth 1\nsince 1\nsince 2\n"), -1, 0, 0 },
};

Test(qctl, hold_files)
{
	size_t i;

	for (i = 0; i < sizeof holds / sizeof holds[0]; i++) {
		const struct hold_case *c = &holds[i];
		long long birth = -7, since = -7;
		int rc = qctl_hold_parse(c->bytes, c->n, &birth, &since);

		cr_assert_eq(rc, c->rc, "case %zu: %d", i, rc);
		if (rc == 0) {
			cr_assert_eq(birth, c->birth, "case %zu", i);
			cr_assert_eq(since, c->since, "case %zu", i);
		}
	}
}

struct reply_case {
	const char *bytes;
	size_t n;
	int rc;
	long long birth, next;
	size_t bodylen;
};

#define HEAD "birth 1700000000\nnext 1700003600\n"

static const struct reply_case replies[] = {
	{ S(HEAD), 0, 1700000000, 1700003600, 0 },
	{ S(HEAD "a@b.example\0" "451 4.7.1 try later\n"), 0, 1700000000, 1700003600, 32 },
	{ S(HEAD "a@b\0" "451 x\nc@d\0" "452 y\n"), 0, 1700000000, 1700003600, 20 },
	{ S("birth 5\nnext 0\n" "a@b\0" "x\n"), 0, 5, 0, 6 },
	{ S(HEAD "a@b\0" "451 x"), -1, 0, 0, 0 },
	{ S(HEAD "a@b 451 x\n"), -1, 0, 0, 0 },
	{ S(HEAD "\0" "451 x\n"), -1, 0, 0, 0 },
	{ S(HEAD "a@b\0" "451\0x\n"), -1, 0, 0, 0 },
	{ S(HEAD "a@b\0" "451 x\ntrailing"), -1, 0, 0, 0 },
	{ S("birth 1700000000\n" "a@b\0" "451 x\n"), -1, 0, 0, 0 },
	{ S("next 1\nbirth 1\n"), -1, 0, 0, 0 },
	{ S("birth 1\nnext x\n"), -1, 0, 0, 0 },
	{ S(""), -1, 0, 0, 0 },
};

Test(qctl, reply_files)
{
	size_t i;

	for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
		const struct reply_case *c = &replies[i];
		long long birth = -7, next = -7;
		const char *body = NULL;
		size_t bodylen = 12345;
		int rc = qctl_reply_parse(c->bytes, c->n, &birth, &next, &body, &bodylen);

		cr_assert_eq(rc, c->rc, "case %zu: %d", i, rc);
		if (rc != 0)
			continue;
		cr_assert_eq(birth, c->birth, "case %zu", i);
		cr_assert_eq(next, c->next, "case %zu", i);
		cr_assert_eq(bodylen, c->bodylen, "case %zu: %zu", i, bodylen);
		cr_assert(body + bodylen == c->bytes + c->n, "case %zu", i);
	}
}

Test(qctl, reply_found_by_whole_address)
{
	static const char f[] = HEAD "a@b.example\0" "451 first\nb.example\0" "452 second\n"
	    "x@y\0" "\n";
	long long birth, next;
	const char *body, *r;
	size_t bodylen, rlen;

	cr_assert_eq(qctl_reply_parse(f, sizeof f - 1, &birth, &next, &body, &bodylen), 0);
	r = qctl_reply_find(body, bodylen, "a@b.example", 11, &rlen);
	cr_assert(r != NULL && rlen == 9 && memcmp(r, "451 first", 9) == 0);
	r = qctl_reply_find(body, bodylen, "b.example", 9, &rlen);
	cr_assert(r != NULL && rlen == 10 && memcmp(r, "452 second", 10) == 0);
	r = qctl_reply_find(body, bodylen, "x@y", 3, &rlen);
	cr_assert(r != NULL && rlen == 0);
	cr_assert_null(qctl_reply_find(body, bodylen, "a@b", 3, &rlen));
	cr_assert_null(qctl_reply_find(body, bodylen, "example", 7, &rlen));
}
