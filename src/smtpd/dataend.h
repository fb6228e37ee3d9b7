/*
 * dataend.h: the DATA reader's line machine.  The message arrives as
 * CRLF-terminated lines; it ends at CRLF "." CRLF and nowhere else.
 *
 *   - A CR not followed by LF, or an LF not preceded by CR, anywhere in
 *     the message (also "\n.\n", "\n.\r\n", "\r.\r", "\r\n.\r",
 *     "\r\n.\n": the SMTP smuggling family) stops the machine with
 *     DE_BARE_CR or DE_BARE_LF; the session refuses the transaction and
 *     closes the connection, so no byte after it is ever read as SMTP.
 *   - A leading dot is removed (RFC 5321 4.5.2); lines come out ending in
 *     LF, qmail's queue format.
 *   - Lines over 1000 bytes with their CRLF, NUL bytes and a message over
 *     the size limit are remembered (flags), not fatal: the reader goes on
 *     to the end of data, so that the session stays in step with the
 *     client, and then refuses the message.
 *
 * Pure: no I/O, so that the unit tests and the fuzz harness drive it.
 * Trusts: nothing.  Config keys: none (the size limit is the caller's).
 */
#ifndef WEIR_SMTPD_DATAEND_H
#define WEIR_SMTPD_DATAEND_H

#include <stddef.h>

#include "lib/buf.h"

#define DE_LINE_MAX 1000	/* bytes per line with CRLF, RFC 5321 4.5.3.1.6 */

enum de_status {
	DE_MORE,	/* all input used; feed more */
	DE_END,		/* CRLF.CRLF seen; *used stops right after it */
	DE_BARE_CR,	/* a CR without LF: refuse, close */
	DE_BARE_LF,	/* an LF without CR: refuse, close */
};

#define DE_TOOLONG	0x1	/* a line over DE_LINE_MAX */
#define DE_NUL		0x2	/* a NUL byte */
#define DE_OVERSIZE	0x4	/* more than limit bytes of message */

struct dataend {
	int state;
	size_t linelen;		/* bytes of the current line, as sent */
	size_t size;		/* message bytes produced (LF lines) */
	size_t limit;		/* produce at most this many */
	int flags;		/* DE_* */
};

void dataend_init(struct dataend *d, size_t limit);
/* Consume in[0..n); append the message bytes to out (nothing once the
 * limit is passed).  *used: bytes consumed. */
enum de_status dataend_feed(struct dataend *d, const char *in, size_t n, size_t *used,
    struct buf *out);

#endif
