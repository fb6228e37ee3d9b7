/*
 * qctl_test.c: the operator's queue control files as weir-send and the
 * listings read them (mail/qctl.c), as tables: hold/N ("birth B\nsince
 * T\n") and reply/N ("birth B\nnext T\n" then "ADDR\0REPLY\n" per
 * recipient), whole and with each way of being malformed (truncated, a
 * bad number, the lines swapped, a NUL, trailing bytes), with and
 * without the via line of `weir requeue --via`, and ctl/via.N; a
 * recipient's reply found by its whole address only.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "mail/policy.h"
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
	const char *via;	/* NULL: none */
	size_t bodylen;
};

#define HEAD "birth 1700000000\nnext 1700003600\n"

static const struct reply_case replies[] = {
	{ S(HEAD), 0, 1700000000, 1700003600, NULL, 0 },
	{ S(HEAD "a@b.example\0" "451 4.7.1 try later\n"), 0, 1700000000, 1700003600, NULL, 32 },
	{ S(HEAD "a@b\0" "451 x\nc@d\0" "452 y\n"), 0, 1700000000, 1700003600, NULL, 20 },
	{ S("birth 5\nnext 0\n" "a@b\0" "x\n"), 0, 5, 0, NULL, 6 },
	{ S(HEAD "via isp-2.backup\n"), 0, 1700000000, 1700003600, "isp-2.backup", 0 },
	{ S(HEAD "via isp\n" "a@b\0" "451 x\n"), 0, 1700000000, 1700003600, "isp", 10 },
	{ S(HEAD "a@b\0" "451 x"), -1, 0, 0, NULL, 0 },
	{ S(HEAD "a@b 451 x\n"), -1, 0, 0, NULL, 0 },
	{ S(HEAD "\0" "451 x\n"), -1, 0, 0, NULL, 0 },
	{ S(HEAD "a@b\0" "451\0x\n"), -1, 0, 0, NULL, 0 },
	{ S(HEAD "a@b\0" "451 x\ntrailing"), -1, 0, 0, NULL, 0 },
	{ S("birth 1700000000\n" "a@b\0" "451 x\n"), -1, 0, 0, NULL, 0 },
	{ S("next 1\nbirth 1\n"), -1, 0, 0, NULL, 0 },
	{ S("birth 1\nnext x\n"), -1, 0, 0, NULL, 0 },
	{ S(""), -1, 0, 0, NULL, 0 },
	{ S(HEAD "via \n"), -1, 0, 0, NULL, 0 },
	{ S(HEAD "via isp"), -1, 0, 0, NULL, 0 },
	{ S(HEAD "via is p\n"), -1, 0, 0, NULL, 0 },
	{ S(HEAD "via is\0p\n"), -1, 0, 0, NULL, 0 },
	{ S(HEAD "a@b\0" "451 x\nvia isp\n"), -1, 0, 0, NULL, 0 },
};

Test(qctl, reply_files)
{
	size_t i;

	for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
		const struct reply_case *c = &replies[i];
		long long birth = -7, next = -7;
		const char *body = NULL, *via = (const char *)1;
		size_t bodylen = 12345, vialen = 12345;
		int rc = qctl_reply_parse(c->bytes, c->n, &birth, &next, &via, &vialen, &body,
		    &bodylen);

		cr_assert_eq(rc, c->rc, "case %zu: %d", i, rc);
		if (rc != 0)
			continue;
		cr_assert_eq(birth, c->birth, "case %zu", i);
		cr_assert_eq(next, c->next, "case %zu", i);
		if (c->via)
			cr_assert(via != NULL && vialen == strlen(c->via) &&
			    memcmp(via, c->via, vialen) == 0, "case %zu", i);
		else
			cr_assert(via == NULL && vialen == 0, "case %zu", i);
		cr_assert_eq(bodylen, c->bodylen, "case %zu: %zu", i, bodylen);
		cr_assert(body + bodylen == c->bytes + c->n, "case %zu", i);
	}
}

Test(qctl, reply_found_by_whole_address)
{
	static const char f[] = HEAD "a@b.example\0" "451 first\nb.example\0" "452 second\n"
	    "x@y\0" "\n";
	long long birth, next;
	const char *body, *r, *via;
	size_t bodylen, rlen, vialen;

	cr_assert_eq(qctl_reply_parse(f, sizeof f - 1, &birth, &next, &via, &vialen, &body,
	    &bodylen), 0);
	r = qctl_reply_find(body, bodylen, "a@b.example", 11, &rlen);
	cr_assert(r != NULL && rlen == 9 && memcmp(r, "451 first", 9) == 0);
	r = qctl_reply_find(body, bodylen, "b.example", 9, &rlen);
	cr_assert(r != NULL && rlen == 10 && memcmp(r, "452 second", 10) == 0);
	r = qctl_reply_find(body, bodylen, "x@y", 3, &rlen);
	cr_assert(r != NULL && rlen == 0);
	cr_assert_null(qctl_reply_find(body, bodylen, "a@b", 3, &rlen));
	cr_assert_null(qctl_reply_find(body, bodylen, "example", 7, &rlen));
}

/* ctl/via.N: one upstream name (policy.h's rule) and its newline. */
struct via_case {
	const char *bytes;
	size_t n;
	const char *name;	/* NULL: refused */
};

static const struct via_case vias[] = {
	{ S("isp\n"), "isp" },
	{ S("Backup-2.example_x\n"), "Backup-2.example_x" },
	{ S("isp"), NULL },
	{ S("\n"), NULL },
	{ S(""), NULL },
	{ S("isp\n\n"), NULL },
	{ S("isp\nx"), NULL },
	{ S("is p\n"), NULL },
	{ S("isp \n"), NULL },
	{ S("is/p\n"), NULL },
	{ S("is\0p\n"), NULL },
	{ S("isp\0\n"), NULL },
	{ S("isp\r\n"), NULL },
	{ S("1234567890123456789012345678901234567890123456789012345678901234\n"),
	    "1234567890123456789012345678901234567890123456789012345678901234" },
	{ S("12345678901234567890123456789012345678901234567890123456789012345\n"), NULL },
};

Test(qctl, via_requests)
{
	size_t i;

	for (i = 0; i < sizeof vias / sizeof vias[0]; i++) {
		const struct via_case *c = &vias[i];
		char out[POLICY_NAME_MAX + 1];
		int rc = qctl_via_parse(c->bytes, c->n, out);

		cr_assert_eq(rc, c->name ? 0 : -1, "case %zu: %d", i, rc);
		if (c->name)
			cr_assert_str_eq(out, c->name, "case %zu", i);
	}
}
