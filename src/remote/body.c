/*
 * body.c: CRLF normalisation and dot-stuffing, streamed; see body.h.
 * One encoder, byte by byte, whose state is the length of the current
 * line, a CR waiting for what follows, and whether the header has
 * ended; body_encode() and body_next() both run it.
 * Trusts: nothing.  Config keys: none.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/io.h"
#include "remote/body.h"

/* Each step below writes at most this many bytes. */
#define STEP_MAX 8

static size_t
line_end(struct body_enc *e, struct body_info *info, char *o)
{
	if (info) {
		info->lines++;
		if (e->linelen > BODY_LINE_MAX && info->too_long_line == 0) {
			info->too_long_line = info->lines;
			info->too_long_len = e->linelen;
		}
	}
	if (e->header && e->linelen == 0)
		e->header = 0;
	e->linelen = 0;
	o[0] = '\r';
	o[1] = '\n';
	return 2;
}

static size_t
content(struct body_enc *e, struct body_info *info, unsigned char c, char *o)
{
	size_t n = 0;

	if (e->linelen == 0 && c == '.')
		o[n++] = '.';
	o[n++] = (char)c;
	e->linelen++;
	if (info && c > 127)
		info->eightbit = 1;
	return n;
}

/* One byte of the message. */
static size_t
enc_byte(struct body_enc *e, struct body_info *info, unsigned char c, char *o)
{
	size_t n = 0;

	if (e->cr) {
		e->cr = 0;
		if (c == '\n')
			return line_end(e, info, o);
		/* A bare CR: a line end in the body, a space in the header. */
		n = e->header ? content(e, info, ' ', o) : line_end(e, info, o);
	}
	if (c == '\r') {
		e->cr = 1;
		return n;
	}
	if (c == '\n')
		return n + line_end(e, info, o + n);
	return n + content(e, info, c, o + n);
}

/* The end of the message: a last CR, a last line without its end, ".". */
static size_t
enc_end(struct body_enc *e, struct body_info *info, char *o)
{
	size_t n = 0;

	if (e->cr) {
		e->cr = 0;
		n = e->header ? content(e, info, ' ', o) : line_end(e, info, o);
	}
	if (e->linelen > 0)
		n += line_end(e, info, o + n);
	memcpy(o + n, ".\r\n", 3);
	e->done = 1;
	return n + 3;
}

static void
enc_init(struct body_enc *e)
{
	memset(e, 0, sizeof *e);
	e->header = 1;
}

int
body_encode(const char *msg, size_t n, struct buf *out, struct body_info *info)
{
	struct body_enc e;
	char o[STEP_MAX];
	size_t i;

	memset(info, 0, sizeof *info);
	enc_init(&e);
	buf_reserve(out, n + n / 32 + 8);
	for (i = 0; i < n; i++)
		buf_add(out, o, enc_byte(&e, info, (unsigned char)msg[i], o));
	buf_add(out, o, enc_end(&e, info, o));
	return info->too_long_line ? -1 : 0;
}

int
body_open(struct body *b, int fd, size_t max, struct buf *err)
{
	struct body_enc e;
	struct stat st;
	char o[STEP_MAX];
	ssize_t r, i;

	memset(b, 0, sizeof *b);	/* mem: BUF_INIT */
	b->fd = fd;
	b->start = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		b->start = lseek(fd, 0, SEEK_CUR);	/* -1: keep it in memory */
	enc_init(&e);
	for (;;) {
		r = read_retry(fd, b->in, sizeof b->in);
		if (r < 0) {
			buf_printf(err, "reading the message: %s", strerror(errno));
			return -1;
		}
		if (r == 0)
			break;
		b->len += (size_t)r;
		if (b->start < 0) {
			if (b->len > max) {
				buf_printf(err, "the message is over %zu bytes", max);
				return -1;
			}
			buf_add(&b->mem, b->in, (size_t)r);
		}
		for (i = 0; i < r; i++)
			b->wire_len += enc_byte(&e, &b->info, (unsigned char)b->in[i], o);
	}
	b->wire_len += enc_end(&e, &b->info, o);
	body_rewind(b);
	return 0;
}

void
body_rewind(struct body *b)
{
	b->pos = b->inpos = b->inlen = 0;
	enc_init(&b->enc);
}

/* The next piece of the message into b->in.  0 ok, -1 error. */
static int
refill(struct body *b, struct buf *err)
{
	size_t want = b->len - b->pos < sizeof b->in ? b->len - b->pos : sizeof b->in;
	ssize_t r;

	if (b->start < 0) {
		memcpy(b->in, b->mem.s + b->pos, want);
		r = (ssize_t)want;
	} else {
		do
			r = pread(b->fd, b->in, want, b->start + (off_t)b->pos);
		while (r < 0 && errno == EINTR);
		if (r <= 0) {
			buf_printf(err, "reading the message again: %s",
			    r < 0 ? strerror(errno) : "it became shorter");
			return -1;
		}
	}
	b->pos += (size_t)r;
	b->inpos = 0;
	b->inlen = (size_t)r;
	return 0;
}

ssize_t
body_next(struct body *b, char *out, size_t cap, struct buf *err)
{
	size_t n = 0;

	while (!b->enc.done && cap - n >= 2 * STEP_MAX) {
		if (b->inpos == b->inlen) {
			if (b->pos == b->len) {
				n += enc_end(&b->enc, NULL, out + n);
				break;
			}
			if (refill(b, err) < 0)
				return -1;
		}
		n += enc_byte(&b->enc, NULL, (unsigned char)b->in[b->inpos++], out + n);
	}
	return (ssize_t)n;
}

void
body_close(struct body *b)
{
	buf_free(&b->mem);
}
