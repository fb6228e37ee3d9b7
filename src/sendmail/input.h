/*
 * input.h: sendmail's reading of the message on stdin.
 *
 * The reader turns raw input into events: a byte of a line, the end of a
 * line, or the end of the message.  It removes the CR of each CRLF (a
 * lone CR stays), ends the message at a line of a single "." unless -i
 * (the "." line is not part of the message; nothing is unstuffed), and
 * ends an unterminated last line with a newline.  Nothing is buffered
 * beyond one read(2), so a body of any size streams through.
 *
 * The header block (lines up to the first empty line, with their
 * continuation lines) is read whole and checked: at most HDR_MAX bytes,
 * lines of at most HDR_LINE_MAX bytes, no NUL.  A first line "From ..."
 * (an mbox separator) is dropped.  A line that is neither a header field
 * nor a continuation ends the header block and starts the body; an empty
 * line is then put before it, so the message stays well formed.
 *
 * Trusts: nothing in the input.  Config keys: none.
 */
#ifndef WEIR_SENDMAIL_INPUT_H
#define WEIR_SENDMAIL_INPUT_H

#include <stddef.h>

#include "lib/buf.h"

#define HDR_MAX		(1024 * 1024)
#define HDR_LINE_MAX	998

/* rd_get() results besides a byte 0..255. */
#define RD_NL	(-1)	/* end of a line */
#define RD_END	(-2)	/* end of the message (EOF or the "." line) */
#define RD_ERR	(-3)	/* read error: errno in rd->err */

struct sm_reader {
	int fd;
	int dot_ends;
	int cr;			/* a CR is waiting to see what follows */
	int line;		/* where in the line we are (input.c) */
	int done;		/* 0, RD_END or RD_ERR once reached */
	int err;
	int q[4];		/* events ready to hand out */
	int qi, qn;
	size_t rpos, rlen;
	char raw[65536];
};

void rd_init(struct sm_reader *rd, int fd, int dot_ends);
int rd_get(struct sm_reader *rd);

struct sm_field {
	size_t off, len;	/* in text: the field with its continuation lines and '\n' */
	size_t namelen;
};

struct sm_header {
	struct buf text;	/* the header block, each line ending in '\n' */
	struct sm_field *f;
	size_t n, cap;
	struct buf body;	/* the start of the body already read: "\n" + ... */
	size_t lines;		/* header lines read, for messages */
};

/* Read the header block.  0 ok; else the exit code (65 bad header, 74
 * read error) with the reason in why. */
int sm_read_header(struct sm_reader *rd, struct sm_header *h, struct buf *why);
void sm_header_free(struct sm_header *h);

/* Is field i named name (case-insensitive)? */
int sm_field_is(const struct sm_header *h, size_t i, const char *name);
/* The value of field i: after the ':', up to the last '\n' (excluded). */
void sm_field_value(const struct sm_header *h, size_t i, const char **v, size_t *len);

#endif
