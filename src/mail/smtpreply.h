/*
 * smtpreply.h: strict parser for SMTP replies (RFC 5321 4.2), one line
 * at a time, as the remote deliverer reads them.
 *
 *   reply-line = code ( "-" / SP ) [ text ] CRLF     (all but the last)
 *   last line  = code [ SP text ] CRLF
 *
 * The caller strips CRLF (and refuses lines without it or over
 * SMTP_REPLY_LINE_MAX bytes, CRLF included) and feeds each line.  Every
 * line of one reply must carry the same code; the code's first digit is
 * 2..5, its second 0..5.  Text holds no NUL and no control byte but TAB;
 * bytes over 127 are kept (SMTPUTF8 servers send them).  A reply over
 * SMTP_REPLY_LINES_MAX lines is malformed.  Anything malformed is
 * REPLY_BAD with a reason: the caller treats it as a temporary failure.
 *
 * The enhanced status code (RFC 3463, "class.subject.detail") of the
 * first line is picked out when it is well formed and its class agrees
 * with the reply code; otherwise esc is "".
 *
 * Trusts: nothing.  Config keys: none.
 */
#ifndef WEIR_SMTPREPLY_H
#define WEIR_SMTPREPLY_H

#include <stddef.h>

#include "lib/buf.h"

#define SMTP_REPLY_LINE_MAX  512	/* bytes, CRLF included */
#define SMTP_REPLY_LINES_MAX 100
#define SMTP_ESC_MAX         16		/* "5.123.123" and a NUL fit */

struct smtp_reply {
	int code;		/* 200..559, 0 while none seen */
	char esc[SMTP_ESC_MAX];	/* enhanced status code of line 1, or "" */
	struct buf text;	/* each line's text, joined with '\n' */
	size_t nlines;
	int done;		/* the last line has been seen */
};

enum reply_status {
	REPLY_MORE,		/* a continuation line: feed the next one */
	REPLY_DONE,		/* the reply is complete */
	REPLY_BAD,		/* malformed: reason in *why */
};

void smtp_reply_init(struct smtp_reply *r);
void smtp_reply_free(struct smtp_reply *r);
/* Forget the last reply, keeping the memory, to parse the next one. */
void smtp_reply_reset(struct smtp_reply *r);

/* Feed one line without its CRLF. */
enum reply_status smtp_reply_feed(struct smtp_reply *r, const char *line, size_t len,
    const char **why);

/* Parse a whole reply held in s (lines ending in CRLF, nothing after the
 * last): for tests and for callers holding whole replies. */
enum reply_status smtp_reply_parse(struct smtp_reply *r, const char *s, size_t len,
    const char **why);

/* The reply on one line, for reports and logs: "550 5.1.1 text / more",
 * at most max bytes (NUL included), control bytes never present. */
void smtp_reply_oneline(const struct smtp_reply *r, char *out, size_t max);

/* First digit of the code: 2, 3, 4 or 5. */
static inline int smtp_reply_class(const struct smtp_reply *r) { return r->code / 100; }

#endif
