/*
 * outcome_test.c: the outcome line (mail/outcome.c), as a table: each
 * word parses to its fields and formats back to the same bytes; every
 * malformed line (empty, too long, no newline, a second line, a control
 * byte, NUL, an unknown word, a bad or missing number, trailing bytes)
 * is refused with its reason.  What weir-gate is told of each word.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/outcome.h"

#define S(x) x, sizeof(x) - 1

struct case_ {
	const char *bytes;
	size_t n;
	const char *why;		/* NULL: parses */
	enum outcome_kind kind;
	unsigned long accepted;
	long long at;
	unsigned long undone;
	const char *text;
};

static const struct case_ cases[] = {
	{ S("refund\n"), NULL, OUTCOME_REFUND, 0, -1, 0, "" },
	{ S("stale\n"), NULL, OUTCOME_STALE, 0, -1, 0, "" },
	{ S("nomail\n"), NULL, OUTCOME_NOMAIL, 0, -1, 0, "" },
	{ S("unknown\n"), NULL, OUTCOME_UNKNOWN, 0, -1, 0, "" },
	{ S("throttled 421 4.7.0 slow down\n"), NULL, OUTCOME_THROTTLED, 0, -1, 0,
	    "421 4.7.0 slow down" },
	{ S("authfail 535 5.7.8 bad credentials\n"), NULL, OUTCOME_AUTHFAIL, 0, -1, 0,
	    "535 5.7.8 bad credentials" },
	{ S("unreached connect: Connection refused\n"), NULL, OUTCOME_UNREACHED, 0, -1, 0,
	    "connect: Connection refused" },
	{ S("nogreeting TLS handshake failed\n"), NULL, OUTCOME_NOGREETING, 0, -1, 0,
	    "TLS handshake failed" },
	{ S("sent 3 123456 0\n"), NULL, OUTCOME_SENT, 3, 123456, 0, "" },
	{ S("sent 0 -1 2\n"), NULL, OUTCOME_SENT, 0, -1, 2, "" },
	{ S("relay 1 0 0\n"), NULL, OUTCOME_RELAY, 1, 0, 0, "" },
	{ S("sent 1000000 4611686018427387904 1000000\n"), NULL, OUTCOME_SENT, 1000000,
	    4611686018427387904LL, 1000000, "" },

	{ S(""), "empty", 0, 0, 0, 0, NULL },
	{ S("refund"), "no newline at the end", 0, 0, 0, 0, NULL },
	{ S("refund\nrefund\n"), "a control or non-ASCII byte", 0, 0, 0, 0, NULL },
	{ S("refund\r\n"), "a control or non-ASCII byte", 0, 0, 0, 0, NULL },
	{ S("ref\0und\n"), "a control or non-ASCII byte", 0, 0, 0, 0, NULL },
	{ S("throttled caf\xc3\xa9\n"), "a control or non-ASCII byte", 0, 0, 0, 0, NULL },
	{ S("Refund\n"), "an unknown word", 0, 0, 0, 0, NULL },
	{ S("refunded\n"), "an unknown word", 0, 0, 0, 0, NULL },
	{ S("\n"), "an unknown word", 0, 0, 0, 0, NULL },
	{ S(" refund\n"), "an unknown word", 0, 0, 0, 0, NULL },
	{ S("refund \n"), "trailing bytes", 0, 0, 0, 0, NULL },
	{ S("unknown x\n"), "trailing bytes", 0, 0, 0, 0, NULL },
	{ S("throttled\n"), "no reply text", 0, 0, 0, 0, NULL },
	{ S("authfail\n"), "no reply text", 0, 0, 0, 0, NULL },
	{ S("sent\n"), "a malformed recipient count", 0, 0, 0, 0, NULL },
	{ S("sent 01 5 0\n"), "a malformed recipient count", 0, 0, 0, 0, NULL },
	{ S("sent 1000001 5 0\n"), "a malformed recipient count", 0, 0, 0, 0, NULL },
	{ S("sent +1 5 0\n"), "a malformed recipient count", 0, 0, 0, 0, NULL },
	{ S("sent 1\n"), "no instant", 0, 0, 0, 0, NULL },
	{ S("sent 1 x 0\n"), "a malformed instant", 0, 0, 0, 0, NULL },
	{ S("sent 1 -2 0\n"), "a malformed instant", 0, 0, 0, 0, NULL },
	{ S("sent 1 4611686018427387905 0\n"), "a malformed instant", 0, 0, 0, 0, NULL },
	{ S("sent 1 5\n"), "a malformed count of recipients not attempted", 0, 0, 0, 0, NULL },
	{ S("sent 1 5 \n"), "a malformed count of recipients not attempted", 0, 0, 0, 0, NULL },
	{ S("relay 1 5 0 \n"), "trailing bytes", 0, 0, 0, 0, NULL },
	{ S("sent 1  5 0\n"), "a malformed instant", 0, 0, 0, 0, NULL },
};

Test(outcome, lines)
{
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct case_ *c = &cases[i];
		struct outcome o;
		struct buf b = BUF_INIT;
		const char *why = NULL;
		int rc = outcome_parse(c->bytes, c->n, &o, &why);

		if (c->why) {
			cr_assert_eq(rc, -1, "case %zu accepted", i);
			cr_assert_str_eq(why, c->why, "case %zu", i);
			continue;
		}
		cr_assert_eq(rc, 0, "case %zu: %s", i, why);
		cr_assert_eq(o.kind, c->kind, "case %zu", i);
		cr_assert_eq(o.accepted, c->accepted, "case %zu", i);
		cr_assert_eq(o.at, c->at, "case %zu", i);
		cr_assert_eq(o.undone, c->undone, "case %zu", i);
		cr_assert_str_eq(o.text, c->text, "case %zu", i);
		outcome_format(&o, &b);
		cr_assert(b.len == c->n && memcmp(b.s, c->bytes, c->n) == 0,
		    "case %zu formats as \"%.*s\"", i, (int)b.len, b.s);
		buf_free(&b);
	}
}

/* OUTCOME_MAX bytes with the newline are a line; one more is not. */
Test(outcome, bounds)
{
	char *s = xmalloc(OUTCOME_MAX + 1);
	struct outcome o;
	const char *why = NULL;

	memcpy(s, "throttled ", 10);
	memset(s + 10, 'x', OUTCOME_MAX - 11);
	s[OUTCOME_MAX - 1] = '\n';
	cr_assert_eq(outcome_parse(s, OUTCOME_MAX, &o, &why), 0, "%s", why);
	cr_assert_eq(strlen(o.text), OUTCOME_MAX - 11);
	s[OUTCOME_MAX - 1] = 'x';
	s[OUTCOME_MAX] = '\n';
	cr_assert_eq(outcome_parse(s, OUTCOME_MAX + 1, &o, &why), -1);
	cr_assert_str_eq(why, "longer than OUTCOME_MAX");
	free(s);
}

/* What weir-gate hears of each (gateproto.h's REPORT): a stale session's
 * message as a refund (nothing of it was sent), a relay-level refusal as
 * a send. */
Test(outcome, told_to_the_gate)
{
	cr_assert_eq(outcome_gate(OUTCOME_REFUND), GP_REFUND);
	cr_assert_eq(outcome_gate(OUTCOME_STALE), GP_REFUND);
	cr_assert_eq(outcome_gate(OUTCOME_NOMAIL), GP_NOMAIL);
	cr_assert_eq(outcome_gate(OUTCOME_UNKNOWN), GP_UNKNOWN);
	cr_assert_eq(outcome_gate(OUTCOME_THROTTLED), GP_THROTTLED);
	cr_assert_eq(outcome_gate(OUTCOME_AUTHFAIL), GP_AUTHFAIL);
	cr_assert_eq(outcome_gate(OUTCOME_SENT), GP_SENT);
	cr_assert_eq(outcome_gate(OUTCOME_RELAY), GP_SENT);
	cr_assert_eq(outcome_gate(OUTCOME_UNREACHED), GP_UNREACHED);
	cr_assert_eq(outcome_gate(OUTCOME_NOGREETING), GP_NOGREETING);
}
