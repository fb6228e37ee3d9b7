/*
 * outcome.h: the outcome line, a deliverer's word to weir-send about
 * what reached the upstream (weir-remote -n -r FD, and each message of
 * a kept session, -S).  weir-send tells weir-gate what it says.  One
 * line of printable ASCII ending in "\n", at most OUTCOME_MAX bytes:
 *
 *   refund               nothing reached the upstream
 *   stale                a kept session had closed before the message's
 *                        MAIL: nothing of it was sent; send it again now
 *   nomail               connected, but no MAIL accepted
 *   unknown              the final dot went out, no answer was read
 *   throttled REPLY      the upstream said "slow down" (REPLY: its words)
 *   quota REPLY          it said the sender's or account's quota is spent
 *   authfail REPLY       AUTH or the TLS certificate was refused
 *   unreached TEXT       no connection could be made (TEXT: what failed);
 *                        nothing reached the upstream, as refund
 *   nogreeting TEXT      connected, but the TLS handshake, the greeting or
 *                        EHLO failed (not for our credentials or its
 *                        certificate: authfail); no MAIL, as nomail
 *   sent N AT UNDONE     the upstream took the message for N recipients;
 *   relay N AT UNDONE    (relay: it refused us, the same for each
 *                        recipient); AT is clock_mono_ms() of the 250 to
 *                        the final dot, -1 if none; the last UNDONE
 *                        recipients were not attempted
 *
 * Numbers are decimal without sign or leading zeros (AT may be "-1").
 * Anything else, trailing bytes, a second line or a missing "\n" is
 * malformed: weir-send then counts the send as unknown.
 *
 * Trusts: nothing; outcome_parse checks every byte.  Config keys: none.
 */
#ifndef WEIR_OUTCOME_H
#define WEIR_OUTCOME_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "mail/gateproto.h"

#define OUTCOME_MAX	2048	/* bytes, with the "\n" */
#define REPORT_MAX	(1 << 20)	/* a deliverer's reports (remote.h), bytes */
#define OUTCOME_COUNT_MAX 1000000	/* recipients in one line */

enum outcome_kind {
	OUTCOME_REFUND = 1, OUTCOME_STALE, OUTCOME_NOMAIL, OUTCOME_UNKNOWN,
	OUTCOME_THROTTLED, OUTCOME_AUTHFAIL, OUTCOME_SENT, OUTCOME_RELAY, OUTCOME_UNREACHED,
	OUTCOME_NOGREETING, OUTCOME_QUOTA
};
#define OUTCOME_LAST	OUTCOME_QUOTA

struct outcome {
	enum outcome_kind kind;
	unsigned long accepted;		/* sent, relay */
	long long at;			/* sent, relay: ms, -1: none */
	unsigned long undone;		/* sent, relay */
	char text[OUTCOME_MAX];		/* throttled, quota, authfail, unreached,
					 * nogreeting: one line */
};

/* o as its line, "\n" included, appended to b (text cut to fit, control
 * bytes made spaces). */
void outcome_format(const struct outcome *o, struct buf *b);
/* The line s[0..n) into o: 0, or -1 with what is wrong in *why. */
int outcome_parse(const char *s, size_t n, struct outcome *o, const char **why);
const char *outcome_name(enum outcome_kind k);
/* What weir-gate is told for each (gateproto.h's REPORT): stale is a
 * refund (nothing of it was sent), relay a send, quota QUOTA; unreached and
 * nogreeting are UNREACHED and NOGREETING (the upstream's reach). */
enum gp_outcome outcome_gate(enum outcome_kind k);

#endif
