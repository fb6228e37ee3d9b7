/*
 * body.h: the message as it goes on the wire after DATA.  qmail's mess
 * files end lines with LF; mail from elsewhere may hold CRLF, bare CR or
 * bare LF.  Each of CRLF, bare CR and bare LF ends a line and becomes
 * CRLF, except in the header (up to the first empty line): there a bare
 * CR is no line end, as for every reader in weir (sendmail refuses it),
 * and goes out as a space, so the upstream never sees a header field
 * that was not one (a "Subject: a\rBcc: b" stays the Subject).  A line
 * starting with '.' gets one more (RFC 5321 4.5.2); a last line without
 * an end gets CRLF; ".\r\n" closes the data.  A line over
 * 998 bytes (RFC 5322 2.1.1; CRLF not counted) is refused, with its
 * number, before anything is sent.
 *
 * Trusts: nothing.  Config keys: none.
 */
#ifndef WEIR_BODY_H
#define WEIR_BODY_H

#include <stddef.h>

#include "lib/buf.h"

#define BODY_LINE_MAX 998

struct body_info {
	size_t lines;		/* lines in the message */
	size_t too_long_line;	/* first line over BODY_LINE_MAX (1-based), or 0 */
	size_t too_long_len;	/* its length */
	int eightbit;		/* a byte over 127 was seen */
};

/* Append the wire form of msg[0..n) to out, ".\r\n" included.  0 ok;
 * -1 if a line is too long (out then holds a partial encoding). */
int body_encode(const char *msg, size_t n, struct buf *out, struct body_info *info);

#endif
