/*
 * input.c: see input.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sysexits.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "sendmail/input.h"

/* Where the reader is in the current line. */
enum { L_BOL, L_DOT, L_MID };

void
rd_init(struct sm_reader *rd, int fd, int dot_ends)
{
	memset(rd, 0, sizeof *rd);
	rd->fd = fd;
	rd->dot_ends = dot_ends;
	rd->line = L_BOL;
}

static void
push(struct sm_reader *rd, int ev)
{
	rd->q[rd->qn++] = ev;
}

/* A byte of line content. */
static void
ev_char(struct sm_reader *rd, int c)
{
	if (rd->line == L_DOT) {
		push(rd, '.');
		rd->line = L_MID;
	}
	if (rd->line == L_BOL && c == '.' && rd->dot_ends) {
		rd->line = L_DOT;	/* maybe the end: wait for the newline */
		return;
	}
	push(rd, c);
	rd->line = L_MID;
}

static void
ev_newline(struct sm_reader *rd)
{
	if (rd->line == L_DOT) {
		rd->done = RD_END;	/* the "." line: not part of the message */
		return;
	}
	push(rd, RD_NL);
	rd->line = L_BOL;
}

int
rd_get(struct sm_reader *rd)
{
	ssize_t r;
	int c;

	for (;;) {
		if (rd->qi < rd->qn)
			return rd->q[rd->qi++];
		rd->qi = rd->qn = 0;
		if (rd->done)
			return rd->done;
		if (rd->rpos == rd->rlen) {
			r = read_retry(rd->fd, rd->raw, sizeof rd->raw);
			if (r < 0) {
				rd->err = errno;
				rd->done = RD_ERR;
				continue;
			}
			if (r == 0) {
				if (rd->cr) {
					rd->cr = 0;
					ev_char(rd, '\r');
				}
				if (rd->line == L_MID)
					push(rd, RD_NL);	/* complete the last line */
				rd->done = RD_END;	/* a final "." without newline ends too */
				continue;
			}
			rd->rpos = 0;
			rd->rlen = (size_t)r;
		}
		c = (unsigned char)rd->raw[rd->rpos++];
		if (rd->cr) {
			rd->cr = 0;
			if (c == '\n') {
				ev_newline(rd);
				continue;
			}
			ev_char(rd, '\r');
		}
		if (c == '\r')
			rd->cr = 1;
		else if (c == '\n')
			ev_newline(rd);
		else
			ev_char(rd, c);
	}
}

/* RFC 5322 ftext: printable ASCII except ':'. */
static int
is_ftext(int c)
{
	return c >= 33 && c <= 126 && c != ':';
}

enum { K_START, K_NAME, K_FIELD, K_CONT };

static void
add_field(struct sm_header *h, size_t off, size_t len, size_t namelen)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 32;
		h->f = xrealloc(h->f, h->cap * sizeof *h->f);
	}
	h->f[h->n].off = off;
	h->f[h->n].len = len;
	h->f[h->n].namelen = namelen;
	h->n++;
}

/* The header block has ended at a line that is body: put the separator
 * and what we have of the line in h->body; the reader goes on with the
 * rest of it. */
static int
to_body(struct sm_header *h, const struct buf *line, int c)
{
	buf_addc(&h->body, '\n');
	buf_add(&h->body, line->s ? line->s : "", line->len);
	if (c == RD_NL)
		buf_addc(&h->body, '\n');
	else if (c >= 0)
		buf_addc(&h->body, (char)c);
	return 0;
}

int
sm_read_header(struct sm_reader *rd, struct sm_header *h, struct buf *why)
{
	struct buf line = BUF_INIT;
	size_t namelen = 0;
	int c, kind, first = 1, rc = 0, skip;

	for (;; first = 0) {
		buf_reset(&line);
		kind = K_START;
		skip = 0;
		for (;;) {
			c = rd_get(rd);
			if (c == RD_ERR) {
				buf_printf(why, "read error on standard input: %s", strerror(rd->err));
				rc = EX_IOERR;
				goto out;
			}
			if (c == RD_END || c == RD_NL)
				break;
			if (skip)
				continue;
			if (kind == K_START) {
				if (c == ' ' || c == '\t') {
					if (h->n == 0) {
						rc = to_body(h, &line, c);
						goto out;
					}
					kind = K_CONT;
				} else if (is_ftext(c)) {
					kind = K_NAME;
				} else {
					rc = to_body(h, &line, c);
					goto out;
				}
			} else if (kind == K_NAME) {
				if (c == ':') {
					kind = K_FIELD;
					namelen = line.len;
				} else if (!is_ftext(c)) {
					if (first && c == ' ' && line.len == 4 &&
					    memcmp(line.s, "From", 4) == 0) {
						skip = 1;	/* mbox "From " line */
						continue;
					}
					rc = to_body(h, &line, c);
					goto out;
				}
			}
			if (c == '\0') {
				buf_adds(why, "NUL byte in the message header");
				rc = EX_DATAERR;
				goto out;
			}
			if (c == '\r') {
				buf_printf(why, "bare CR (a carriage return not followed by a "
				    "newline) in header line %zu", h->lines + 1);
				rc = EX_DATAERR;
				goto out;
			}
			buf_addc(&line, (char)c);
			if (line.len > HDR_LINE_MAX) {
				if (kind == K_NAME) {
					rc = to_body(h, &line, -1);
					goto out;
				}
				buf_printf(why, "header line longer than %d bytes", HDR_LINE_MAX);
				rc = EX_DATAERR;
				goto out;
			}
		}
		if (skip) {
			if (c == RD_END)
				goto out;
			continue;
		}
		if (line.len == 0) {
			if (c == RD_NL)
				buf_addc(&h->body, '\n');	/* the empty line */
			goto out;
		}
		if (kind == K_NAME) {	/* no ':' in the line: body */
			rc = to_body(h, &line, RD_NL);
			goto out;
		}
		if (h->text.len + line.len + 1 > HDR_MAX) {
			buf_printf(why, "message header larger than %d bytes", HDR_MAX);
			rc = EX_DATAERR;
			goto out;
		}
		h->lines++;
		if (kind == K_FIELD)
			add_field(h, h->text.len, 0, namelen);
		buf_add(&h->text, line.s, line.len);
		buf_addc(&h->text, '\n');
		h->f[h->n - 1].len = h->text.len - h->f[h->n - 1].off;
		if (c == RD_END)
			goto out;
	}
out:
	buf_free(&line);
	return rc;
}

void
sm_header_free(struct sm_header *h)
{
	buf_free(&h->text);
	buf_free(&h->body);
	free(h->f);
	h->f = NULL;
	h->n = h->cap = 0;
}

int
sm_field_is(const struct sm_header *h, size_t i, const char *name)
{
	size_t n = strlen(name);

	return h->f[i].namelen == n && strncasecmp(h->text.s + h->f[i].off, name, n) == 0;
}

void
sm_field_value(const struct sm_header *h, size_t i, const char **v, size_t *len)
{
	const struct sm_field *f = &h->f[i];

	*v = h->text.s + f->off + f->namelen + 1;
	*len = f->len - f->namelen - 1;
	if (*len > 0 && (*v)[*len - 1] == '\n')
		(*len)--;
}
