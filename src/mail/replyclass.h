/*
 * replyclass.h: what an upstream's reply means for the relay, as the
 * providers who write them mean it: the one table of reply classes
 * (replyclass.c), beside trouble.h, which turns a class into an action
 * (accept, defer, bounce, suspend).
 *
 * A reply is classed by its stage (the step it answers) and its first
 * line as "CODE TEXT" (the enhanced code is the start of TEXT), matched
 * against the table's rows in order: each row is a shell glob (fnmatch,
 * case-insensitive) and the stages it applies at; the first row that
 * takes the reply gives its class.  No row: the code and the stage say
 * (reply_class_default).  The classes:
 *
 *   recipient    this recipient (at RCPT) or this message (after DATA,
 *                after the dot): a 5xx bounces it, a 4xx defers it
 *   quota        the sender's or the account's quota (a day's count,
 *                the mailbox the provider files sent mail in): never
 *                bounces; the upstream is suspended (2 h at first), and
 *                the mail waits there or goes to a fallback
 *                (fallback_when "quota", weir.conf(5))
 *   rate         a rate limit, per connection, second, minute or hour:
 *                the upstream is suspended (throttle), never a bounce
 *   auth         authentication: our credentials, or AUTH needed
 *   relay        the upstream refuses to relay for us or for this
 *                sender (not verified, blocked, not ours to send as):
 *                deferred, never bounced
 *   unavailable  the upstream is not taking mail now: at the greeting
 *                it is unreachable (a fallback's "unreachable"); a 421
 *                later closes the session and suspends the upstream
 *   temporary    other temporary trouble (a per-transaction cap, a
 *                protocol complaint, greylisting): deferred
 *
 * Rows of class quota, rate and unavailable carry the suspension the
 * gate starts for them (policy.conf's builtin_throttle_replies list,
 * policy_builtin_throttles()).
 *
 * Trusts: nothing (replies come parsed by smtpreply).  Config keys:
 * none.
 */
#ifndef WEIR_REPLYCLASS_H
#define WEIR_REPLYCLASS_H

#include <stddef.h>

#include "mail/smtpreply.h"

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

enum reply_class {
	RC_NONE,		/* no row took it */
	RC_RECIPIENT,
	RC_QUOTA,
	RC_RATE,
	RC_AUTH,
	RC_RELAY,
	RC_UNAVAILABLE,
	RC_TEMPORARY,
	RC_COUNT
};

#define RS(st)		(1u << (st))	/* a stage's bit in a row's stages */
#define RS_ANY		0u		/* a row for every stage */

struct reply_row {
	unsigned stages;	/* RS() bits, or RS_ANY */
	const char *pattern;	/* on "CODE TEXT" of the first line */
	enum reply_class cls;
	long long suspend, max_suspend;	/* seconds; 0: no suspension of its own */
};

#define REPLY_LINE_MAX	(SMTP_REPLY_LINE_MAX + 8)

/* The reply's first line as the rows see it: "CODE TEXT". */
void reply_line(const struct smtp_reply *r, char *out, size_t max);
/* Does row take line at stage st? */
int reply_row_takes(const struct reply_row *row, int st, const char *line);
/* The built-in rows, in the order they are tried; *n how many. */
const struct reply_row *reply_rows(size_t *n);
/* The first built-in row that takes line at st: its index, or -1. */
int reply_row_find(int st, const char *line);
/* The class of a reply no row took: its code and stage say. */
enum reply_class reply_class_default(int st, int code);

/* An upstream's reply rule (weir.conf's reply_rules): "CLASS: PATTERN",
 * CLASS a class name, one blank after the colon, PATTERN a glob on
 * "CODE TEXT" as the rows' (no control byte).  0 with the class and
 * the pattern (in entry), or -1 with why. */
int reply_rule_parse(const char *entry, enum reply_class *cls, const char **pattern,
    const char **why);

/* "recipient", "quota", ... ("none" for RC_NONE); and back (-1: not a
 * class name). */
const char *reply_class_name(enum reply_class c);
int reply_class_from_name(const char *s, size_t n);
/* Stage names for the corpus and check-config: "banner", "ehlo",
 * "starttls", "auth", "mail", "rcpt", "data", "dot"; -1: not one. */
const char *reply_stage_word(int st);
int reply_stage_from_word(const char *s);

#endif
