/*
 * body.h: the message as it goes on the wire after DATA.  qmail's mess
 * files end lines with LF; mail from elsewhere may hold CRLF, bare CR or
 * bare LF.  Each of CRLF, bare CR and bare LF ends a line and becomes
 * CRLF, except in the header (up to the first empty line): there a bare
 * CR is no line end, as for every reader in weir (sendmail refuses it),
 * and goes out as a space, so the upstream never sees a header field
 * that was not one (a "Subject: a\rBcc: b" stays the Subject).  A line
 * starting with '.' gets one more (RFC 5321 4.5.2); a last line without
 * an end gets CRLF; ".\r\n" closes the data.  A line over 998 bytes
 * (RFC 5322 2.1.1; CRLF not counted) is refused, with its number, before
 * anything is sent.
 *
 * The message is streamed, not held: body_open() reads it through once
 * to check its lines and count its size on the wire (SIZE, RFC 1870);
 * body_next() encodes it again from the start after body_rewind(), a
 * chunk at a time, for each transaction.  A message on a seekable
 * descriptor (qmail's mess file, as weir-send and qmail-send give it) is
 * read again with pread(2), so memory stays at one chunk whatever its
 * size; one on a pipe is kept in memory (up to max bytes).
 *
 * The header pass also finds the From: fields (body_from()), and one
 * replacement in the first one may be set before sending
 * (body_from_replace(): weir-remote's sender rewriting, mail/rewrite.h);
 * it is made on the wire only, the message on fd stays as it is.
 *
 * Trusts: nothing.  Config keys: none.
 */
#ifndef WEIR_BODY_H
#define WEIR_BODY_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/buf.h"

#define BODY_LINE_MAX 998
#define BODY_CHUNK 65536

struct body_info {
	size_t lines;		/* lines in the message */
	size_t too_long_line;	/* first line over BODY_LINE_MAX (1-based), or 0 */
	size_t too_long_len;	/* its length */
	int eightbit;		/* a byte over 127 was seen */
};

/* The encoder's state between bytes. */
struct body_enc {
	size_t linelen;		/* bytes of the current line so far */
	int cr;			/* a CR waits to see what follows */
	int header;		/* still in the header */
	int done;		/* ".\r\n" written */
};

/* The header's From: field, as body_open() found it, and the one
 * replacement in it that body_from_replace() may set. */
#define BODY_FROM_MAX 4096	/* a longer value is not kept */
struct body_from {
	size_t count;		/* From: fields in the header */
	size_t field;		/* where the first one starts in the message */
	size_t off;		/* where its value starts (after the colon) */
	struct buf val;		/* that value, raw, without its last line end */
	int toolong;		/* over BODY_FROM_MAX: val is not kept */
	/* the scan (body_open) */
	int state, in;
	size_t start, namelen;	/* the field being read: its start, name bytes */
	char name[8];
	/* the replacement: message bytes [at, at + oldlen) go out as rep */
	int set;
	size_t at, oldlen, repi;
	struct buf rep;
};

struct body {
	const char *qid;	/* its id in the logs (weir-send's), or NULL */
	int fd;
	off_t start;		/* where the message starts in fd; -1: in mem */
	struct buf mem;		/* the message, when fd cannot be read again */
	size_t len;		/* bytes of the message */
	size_t wire_len;	/* bytes on the wire, ".\r\n" included */
	struct body_info info;
	/* body_next()'s place */
	size_t pos;
	struct body_enc enc;
	char in[BODY_CHUNK];
	size_t inpos, inlen;
	struct body_from from;
};

/* Read the message on fd through: b's size and info (a too long line is
 * in info, not an error).  0 ok; -1 a read error or a message over max
 * bytes, the reason in err.  body_close() in every case. */
int body_open(struct body *b, int fd, size_t max, struct buf *err);
/* Start again from the first byte. */
void body_rewind(struct body *b);
/* The next wire bytes into out (cap at least 16): how many, 0 once
 * ".\r\n" has been given, -1 on a read error (reason in err). */
ssize_t body_next(struct body *b, char *out, size_t cap, struct buf *err);
void body_close(struct body *b);

/* The header's From: fields: how many, and the first one's value in
 * *val, *len (*val NULL when it is over BODY_FROM_MAX bytes). */
size_t body_from(const struct body *b, const char **val, size_t *len);
/* From now on, bytes [off, off + len) of the first From: value go out as
 * rep[0..rlen), and wire_len says so (SIZE follows).  rep must be
 * printable ASCII without blanks, and the line it lands in must stay
 * within BODY_LINE_MAX.  0 ok; -1 with the reason in why, nothing
 * changed. */
int body_from_replace(struct body *b, size_t off, size_t len, const char *rep, size_t rlen,
    struct buf *why);

/* The whole wire form of msg[0..n) appended to out, ".\r\n" included.
 * 0 ok; -1 if a line is too long (out then holds a partial encoding). */
int body_encode(const char *msg, size_t n, struct buf *out, struct body_info *info);

#endif
