/*
 * outcome.c: the outcome line between a deliverer and weir-send; see
 * outcome.h for its grammar.
 *
 * Trusts: nothing.  Config keys: none.
 */
#include <stdio.h>
#include <string.h>

#include "lib/decimal.h"
#include "lib/log.h"
#include "mail/outcome.h"

static const char *const names[] = {
	[OUTCOME_REFUND] = "refund", [OUTCOME_STALE] = "stale", [OUTCOME_NOMAIL] = "nomail",
	[OUTCOME_UNKNOWN] = "unknown", [OUTCOME_THROTTLED] = "throttled",
	[OUTCOME_AUTHFAIL] = "authfail", [OUTCOME_SENT] = "sent", [OUTCOME_RELAY] = "relay",
	[OUTCOME_UNREACHED] = "unreached", [OUTCOME_NOGREETING] = "nogreeting",
	[OUTCOME_QUOTA] = "quota",
};

const char *
outcome_name(enum outcome_kind k)
{
	return k >= OUTCOME_REFUND && k <= OUTCOME_LAST ? names[k] : "?";
}

enum gp_outcome
outcome_gate(enum outcome_kind k)
{
	static const enum gp_outcome word[] = {
		[OUTCOME_REFUND] = GP_REFUND, [OUTCOME_STALE] = GP_REFUND,
		[OUTCOME_NOMAIL] = GP_NOMAIL, [OUTCOME_UNKNOWN] = GP_UNKNOWN,
		[OUTCOME_THROTTLED] = GP_THROTTLED, [OUTCOME_AUTHFAIL] = GP_AUTHFAIL,
		[OUTCOME_SENT] = GP_SENT, [OUTCOME_RELAY] = GP_SENT,
		[OUTCOME_UNREACHED] = GP_UNREACHED, [OUTCOME_NOGREETING] = GP_NOGREETING,
		[OUTCOME_QUOTA] = GP_QUOTA,
	};

	if (k < OUTCOME_REFUND || k > OUTCOME_LAST)
		panic("outcome_gate: kind %d", (int)k);
	return word[k];
}

void
outcome_format(const struct outcome *o, struct buf *b)
{
	size_t room = OUTCOME_MAX - 1 - strlen(outcome_name(o->kind)) - 1, i;

	buf_adds(b, outcome_name(o->kind));
	switch (o->kind) {
	case OUTCOME_THROTTLED:
	case OUTCOME_QUOTA:
	case OUTCOME_AUTHFAIL:
	case OUTCOME_UNREACHED:
	case OUTCOME_NOGREETING:
		buf_addc(b, ' ');
		for (i = 0; o->text[i] && i < room; i++)
			buf_addc(b, o->text[i] >= 0x20 && o->text[i] < 0x7f ? o->text[i] : ' ');
		break;
	case OUTCOME_SENT:
	case OUTCOME_RELAY:
		buf_printf(b, " %lu %lld %lu", o->accepted, o->at < 0 ? -1LL : o->at, o->undone);
		break;
	default:
		break;
	}
	buf_addc(b, '\n');
}

/* A number at *p (lib/decimal.h), up to max: 0 and *p past it, or -1. */
static int
number(const char **p, const char *end, uint64_t max, uint64_t *v)
{
	size_t k = dec_prefix(*p, (size_t)(end - *p), max, v);

	*p += k;
	return k > 0 ? 0 : -1;
}

static int
bad(const char **why, const char *what)
{
	*why = what;
	return -1;
}

int
outcome_parse(const char *s, size_t n, struct outcome *o, const char **why)
{
	const char *p, *end, *sp;
	uint64_t v;
	size_t i, wl;
	int k;

	memset(o, 0, sizeof *o);
	if (n == 0)
		return bad(why, "empty");
	if (n > OUTCOME_MAX)
		return bad(why, "longer than OUTCOME_MAX");
	if (s[n - 1] != '\n')
		return bad(why, "no newline at the end");
	end = s + n - 1;
	for (p = s; p < end; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			return bad(why, "a control or non-ASCII byte");
	sp = memchr(s, ' ', (size_t)(end - s));
	wl = (size_t)((sp ? sp : end) - s);
	for (k = OUTCOME_REFUND; k <= OUTCOME_LAST; k++)
		if (strlen(names[k]) == wl && memcmp(s, names[k], wl) == 0)
			break;
	if (k > OUTCOME_LAST)
		return bad(why, "an unknown word");
	o->kind = (enum outcome_kind)k;
	o->at = -1;
	p = s + wl;
	switch (o->kind) {
	case OUTCOME_THROTTLED:
	case OUTCOME_QUOTA:
	case OUTCOME_AUTHFAIL:
	case OUTCOME_UNREACHED:
	case OUTCOME_NOGREETING:
		if (p == end)
			return bad(why, "no reply text");
		for (i = 0, p++; p < end; p++)
			o->text[i++] = *p;
		o->text[i] = '\0';
		return 0;
	case OUTCOME_SENT:
	case OUTCOME_RELAY:
		if (p == end || *p++ != ' ' || number(&p, end, OUTCOME_COUNT_MAX, &v) < 0)
			return bad(why, "a malformed recipient count");
		o->accepted = (unsigned long)v;
		if (p == end || *p++ != ' ')
			return bad(why, "no instant");
		if (end - p >= 2 && p[0] == '-' && p[1] == '1') {
			p += 2;
		} else if (number(&p, end, (1ULL << 62), &v) < 0) {
			return bad(why, "a malformed instant");
		} else {
			o->at = (long long)v;
		}
		if (p == end || *p++ != ' ' || number(&p, end, OUTCOME_COUNT_MAX, &v) < 0)
			return bad(why, "a malformed count of recipients not attempted");
		o->undone = (unsigned long)v;
		break;
	default:
		break;
	}
	return p == end ? 0 : bad(why, "trailing bytes");
}
