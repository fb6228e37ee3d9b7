/*
 * trouble.h: the one module that decides what an SMTP reply or a failed
 * step means for the mail: accept, defer (try again later), bounce
 * (permanent, for one recipient or the message) or suspend (the upstream
 * is throttling us: defer, and the gate suspends the whole relay).
 *
 * Rules, in order:
 *   1. A positive reply (2xx; 354 to DATA; 334 during AUTH) is ACCEPT.
 *   2. Any other reply matching a throttle_reply pattern of policy.conf
 *      (trouble_add_policy) is SUSPEND, whatever the stage.  Then one
 *      matching a built-in throttle pattern (policy.c's list, the one the
 *      gate uses too: policy_builtin_throttles; left out when policy.conf
 *      says builtin_throttle_replies = false; 421, words about the client
 *      or session: rate limit, throttling, slow down, quota exceeded,
 *      sending limit, too many; Google's "550 5.4.5") is SUSPEND, 4xx
 *      and 5xx alike (the daily limit is not a bounce) -- except a RCPT
 *      or end-of-data reply whose enhanced code is about the recipient
 *      (X.1.x, X.2.x such as "552 5.2.2 quota exceeded", X.5.3 too many
 *      recipients), which goes on to rules 4 and 5.  Greylisting ("451
 *      4.7.1 greylisted, try again later") is no throttle: it defers
 *      that one recipient or message.
 *   3. Anything before the recipients (connect, banner, EHLO, STARTTLS,
 *      TLS, AUTH, MAIL FROM) is the relay refusing us, never the mail:
 *      DEFER for 4xx and 5xx alike.  So is a RCPT reply matching a relay
 *      pattern ("relaying denied", "authentication required", 530).
 *   4. 4xx elsewhere is DEFER, and so is a positive class where the step
 *      does not expect it (a 250 to DATA); 5xx on RCPT bounces that
 *      recipient; 5xx on DATA or after the end of data bounces the
 *      message.
 *   5. Every situation that is not a reply (timeout, connection lost,
 *      malformed reply, TLS or certificate failure, STARTTLS missing,
 *      no usable AUTH mechanism, local errors) is DEFER, except the
 *      message problems that no retry can cure (a line over 998 bytes, a
 *      message over the server's SIZE), which are BOUNCE.
 *
 * Patterns are shell globs (fnmatch, case-insensitive) matched against
 * the first reply line as "CODE TEXT", e.g. "550 5.4.5 *".
 *
 * Trusts: nothing (replies come parsed by smtpreply).  Config keys: none
 * here; the throttle patterns of policy.conf (throttle_reply) are added
 * with trouble_add_policy(), the same list weir-gate matches.  weir-gate
 * only picks a suspension's length from policy.conf; whether a reply
 * suspends is decided here, in weir-remote.
 */
#ifndef WEIR_TROUBLE_H
#define WEIR_TROUBLE_H

#include <stddef.h>

#include "mail/policy.h"
#include "mail/smtpreply.h"

enum trouble_action {
	T_ACCEPT,
	T_DEFER,
	T_BOUNCE,
	T_SUSPEND,
};

/* The step a reply answers, or where a situation arose. */
enum smtp_stage {
	STAGE_CONNECT,
	STAGE_BANNER,
	STAGE_EHLO,
	STAGE_STARTTLS,
	STAGE_TLS,
	STAGE_AUTH,
	STAGE_MAIL,
	STAGE_RCPT,
	STAGE_DATA,		/* the DATA command: 354 expected */
	STAGE_DATA_END,		/* the reply after "." */
	STAGE_QUIT,
	STAGE_LOCAL,		/* before any connection: reading the message */
	STAGE_COUNT
};

enum trouble_situation {
	SIT_TIMEOUT,
	SIT_LOST,		/* connection closed or reset */
	SIT_BADREPLY,		/* malformed or over-long reply */
	SIT_CONNECT,		/* no address could be connected to */
	SIT_TLS,		/* handshake failed, certificate refused */
	SIT_NO_STARTTLS,	/* STARTTLS required but not offered */
	SIT_INJECTION,		/* bytes after the STARTTLS reply */
	SIT_NO_MECH,		/* no SASL mechanism in common */
	SIT_SECRET,		/* the secret could not be read */
	SIT_LOCAL,		/* our own failure (memory, stdin) */
	SIT_LINE_TOO_LONG,	/* message line over 998 bytes */
	SIT_TOO_BIG,		/* message over the server's SIZE */
	SIT_COUNT
};

struct trouble_rules;

/* Rules with the built-in throttle and relay patterns. */
struct trouble_rules *trouble_new(void);
void trouble_free(struct trouble_rules *t);
void trouble_add_throttle(struct trouble_rules *t, const char *pattern);
void trouble_add_relay(struct trouble_rules *t, const char *pattern);
/* policy.conf's own throttle_reply patterns (not its built-in ones),
 * tried before every other rule; with its builtin_throttle_replies =
 * false, the built-in throttle patterns no longer count (those added by
 * trouble_add_throttle still do). */
void trouble_add_policy(struct trouble_rules *t, const struct policy *p);

/* What a complete reply at this stage means. */
enum trouble_action trouble_reply(const struct trouble_rules *t, enum smtp_stage st,
    const struct smtp_reply *r);
/* What a failure that is not a reply means. */
enum trouble_action trouble_situation(enum trouble_situation sit);

/* Identical 5xx replies to every recipient of a transaction (at least
 * two of them) look like the relay refusing us, not the recipients: the
 * caller asks here before bouncing them.  1: treat as DEFER. */
int trouble_identical_refusals(size_t nrcpt, size_t nsame_5xx, size_t naccepted);

const char *trouble_action_name(enum trouble_action a);
const char *trouble_stage_name(enum smtp_stage st);

#endif
