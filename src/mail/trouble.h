/*
 * trouble.h: the one module that decides what an SMTP reply or a failed
 * step means for the mail: accept, defer (try again later), bounce
 * (permanent, for one recipient or the message) or suspend (the upstream
 * is throttling us: defer, and the gate suspends the whole relay).
 *
 * Rules, in order:
 *   1. A positive reply (2xx; 354 to DATA; 334 during AUTH) is ACCEPT.
 *   2. Any other reply is given a class (mail/replyclass.h): by the
 *      upstream's own reply_rules of weir.conf first (trouble_add_rule),
 *      then by policy.conf's throttle_reply patterns (class rate,
 *      trouble_add_policy), then by patterns added with
 *      trouble_add_throttle (rate) and trouble_add_relay (relay), then
 *      by the built-in table's rows (replyclass.c), else by its code and
 *      stage (reply_class_default).
 *   3. The class gives the action:
 *        quota, rate   SUSPEND at any stage, 4xx and 5xx alike (a day's
 *                      quota is not a bounce); with policy.conf's
 *                      builtin_throttle_replies = false a built-in row's
 *                      quota or rate is DEFER (it still never bounces)
 *        unavailable   at the greeting DEFER (the upstream is not
 *                      reached: weir-remote reports it so, as a failed
 *                      greeting); a 421 later SUSPENDs (as rate), any
 *                      other DEFERs
 *        recipient     a 5xx at RCPT bounces that recipient, at DATA or
 *                      after the final dot the message; anything else
 *                      DEFERs (before the recipients a refusal is about
 *                      us, never the mail)
 *        auth, relay, temporary   DEFER
 *      A positive-class reply where the step does not expect it (a 250
 *      to DATA) is of class temporary: DEFER.
 *   4. Every situation that is not a reply (timeout, connection lost,
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

#include "mail/config.h"
#include "mail/policy.h"
#include "mail/replyclass.h"
#include "mail/smtpreply.h"

enum trouble_action {
	T_ACCEPT,
	T_DEFER,
	T_BOUNCE,
	T_SUSPEND,
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
/* One of the upstream's reply_rules (weir.conf): a reply its pattern
 * takes is of class cls; where ("file:line", may be NULL) is shown by
 * weir check-config --reply. */
void trouble_add_rule(struct trouble_rules *t, enum reply_class cls, const char *pattern,
    const char *where);
void trouble_add_relay(struct trouble_rules *t, const char *pattern);
/* An upstream's reply_rules (struct weir_upstream, checked by the config
 * loader): each "CLASS: PATTERN" added with trouble_add_rule, where NULL. */
void trouble_add_rules(struct trouble_rules *t, const struct strlist *rules);
/* policy.conf's own throttle_reply patterns (not its built-in ones),
 * tried after the upstream's rules, before every other; with its
 * builtin_throttle_replies = false, the built-in table's quota and rate
 * rows no longer suspend (patterns added by trouble_add_throttle
 * still do). */
void trouble_add_policy(struct trouble_rules *t, const struct policy *p);

/* Where a reply's class came from. */
enum trouble_origin {
	TO_POSITIVE,		/* a positive reply: no class */
	TO_RULE,		/* the upstream's reply_rules (weir.conf) */
	TO_POLICY,		/* policy.conf's throttle_reply */
	TO_ADDED,		/* trouble_add_throttle, trouble_add_relay */
	TO_TABLE,		/* a built-in row (replyclass.c) */
	TO_DEFAULT,		/* no pattern: its code and stage */
};

/* What a reply means, and why. */
struct trouble_verdict {
	enum trouble_action action;
	enum reply_class cls;
	enum trouble_origin origin;
	const char *pattern;	/* the pattern that took it (TO_POLICY .. TO_TABLE) */
	int index;		/* TO_TABLE: the row; TO_RULE: the rule's number */
	const char *where;	/* TO_RULE: "file:line" of the rule, or NULL */
};

/* What a complete reply at this stage means. */
void trouble_judge(const struct trouble_rules *t, enum smtp_stage st, const struct smtp_reply *r,
    struct trouble_verdict *v);
enum trouble_action trouble_reply(const struct trouble_rules *t, enum smtp_stage st,
    const struct smtp_reply *r);
/* The action for a reply of class c with code at st (rule 3); suspends:
 * 0 when a quota or rate class must not suspend (a built-in row with
 * builtin_throttle_replies = false). */
enum trouble_action trouble_action_of(enum smtp_stage st, enum reply_class c, int code,
    int suspends);
/* What a failure that is not a reply means. */
enum trouble_action trouble_situation(enum trouble_situation sit);

/* Identical 5xx replies to every recipient of a transaction (at least
 * two of them) look like the relay refusing us, not the recipients: the
 * caller asks here before bouncing them.  1: treat as DEFER. */
int trouble_identical_refusals(size_t nrcpt, size_t nsame_5xx, size_t naccepted);

const char *trouble_action_name(enum trouble_action a);
const char *trouble_stage_name(enum smtp_stage st);

#endif
