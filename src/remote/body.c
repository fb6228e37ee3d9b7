/*
 * body.c: CRLF normalisation and dot-stuffing, streamed; see body.h.
 * One encoder, byte by byte, whose state is the length of the current
 * line, a CR waiting for what follows, and whether the header has
 * ended; body_encode() and body_next() both run it.
 * Trusts: nothing.  Config keys: none.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>
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

/*
 * The From: scan: the header's raw bytes, one at a time, as the encoder
 * sees lines (LF or CRLF ends one; a bare CR is a blank, so one at the
 * start of a line continues the field).  The first From: field's value
 * is kept byte for byte, so that val[i] is message byte off + i.
 */
enum { FS_BOL, FS_BOL_CR, FS_NAME, FS_VALUE, FS_DONE };

static void
from_keep(struct body_from *f, unsigned char c)
{
	if (!f->in || f->toolong)
		return;
	if (f->val.len >= BODY_FROM_MAX) {
		f->toolong = 1;
		return;
	}
	buf_addc(&f->val, (char)c);
}

/* The field being read ends: the kept value loses its last line end. */
static void
from_end(struct body_from *f)
{
	if (!f->in)
		return;
	f->in = 0;
	if (f->val.len > 0 && f->val.s[f->val.len - 1] == '\n')
		f->val.len--;
	if (f->val.len > 0 && f->val.s[f->val.len - 1] == '\r')
		f->val.len--;
	buf_addc(&f->val, '\0');	/* a C string too */
	f->val.len--;
}

static void
from_scan(struct body_from *f, unsigned char c, size_t pos)
{
	switch (f->state) {
	case FS_DONE:
		return;
	case FS_BOL_CR:
		if (c == '\n') {
			from_end(f);
			f->state = FS_DONE;
			return;
		}
		from_keep(f, '\r');
		f->state = FS_VALUE;
		break;
	case FS_BOL:
		if (c == '\n') {
			from_end(f);
			f->state = FS_DONE;
			return;
		}
		if (c == '\r') {
			f->state = FS_BOL_CR;
			return;
		}
		if (c == ' ' || c == '\t') {
			f->state = FS_VALUE;
			break;
		}
		from_end(f);
		f->state = FS_NAME;
		f->start = pos;
		f->namelen = 0;
		/* FALLTHROUGH */
	case FS_NAME:
		if (c == '\n') {
			f->state = FS_BOL;	/* no colon: not a field */
		} else if (c == ':') {
			while (f->namelen > 0 && f->namelen <= sizeof f->name &&
			    (f->name[f->namelen - 1] == ' ' || f->name[f->namelen - 1] == '\t'))
				f->namelen--;
			if (f->namelen == 4 && strncasecmp(f->name, "From", 4) == 0 &&
			    f->count++ == 0) {
				f->in = 1;
				f->field = f->start;
				f->off = pos + 1;
			}
			f->state = FS_VALUE;
		} else if (f->namelen++ < sizeof f->name) {
			f->name[f->namelen - 1] = (char)c;
		}
		return;
	case FS_VALUE:
		break;
	}
	from_keep(f, c);
	if (c == '\n')
		f->state = FS_BOL;
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
		for (i = 0; i < r; i++) {
			b->wire_len += enc_byte(&e, &b->info, (unsigned char)b->in[i], o);
			from_scan(&b->from, (unsigned char)b->in[i], b->len - (size_t)r + (size_t)i);
		}
	}
	from_end(&b->from);
	b->wire_len += enc_end(&e, &b->info, o);
	body_rewind(b);
	return 0;
}

void
body_rewind(struct body *b)
{
	b->pos = b->inpos = b->inlen = 0;
	b->from.repi = 0;
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
	size_t n = 0, at;

	while (!b->enc.done && cap - n >= 2 * STEP_MAX) {
		if (b->inpos == b->inlen) {
			if (b->pos == b->len) {
				n += enc_end(&b->enc, NULL, out + n);
				break;
			}
			if (refill(b, err) < 0)
				return -1;
		}
		at = b->pos - b->inlen + b->inpos;	/* the next byte's place */
		if (b->from.set && at >= b->from.at && at < b->from.at + b->from.oldlen) {
			/* The replacement first, then the old bytes skipped. */
			if (b->from.repi < b->from.rep.len)
				n += enc_byte(&b->enc, NULL,
				    (unsigned char)b->from.rep.s[b->from.repi++], out + n);
			else
				b->inpos++;
			continue;
		}
		n += enc_byte(&b->enc, NULL, (unsigned char)b->in[b->inpos++], out + n);
	}
	return (ssize_t)n;
}

void
body_close(struct body *b)
{
	buf_free(&b->mem);
	buf_free(&b->from.val);
	buf_free(&b->from.rep);
}

size_t
body_from(const struct body *b, const char **val, size_t *len)
{
	*val = b->from.count && !b->from.toolong ? (b->from.val.s ? b->from.val.s : "") : NULL;
	*len = *val ? b->from.val.len : 0;
	return b->from.count;
}

int
body_from_replace(struct body *b, size_t off, size_t len, const char *rep, size_t rlen,
    struct buf *why)
{
	struct body_from *f = &b->from;
	const char *v = f->val.s;
	size_t i, ls, le, linelen;

	if (f->count == 0 || f->toolong || f->set || len == 0 || off + len > f->val.len) {
		buf_adds(why, f->set ? "the From: field is replaced already" :
		    "no such bytes in the From: field");
		return -1;
	}
	for (i = 0; i < rlen; i++)
		if (rep[i] <= ' ' || rep[i] >= 0x7f) {
			buf_adds(why, "the replacement is not printable ASCII");
			return -1;
		}
	for (i = off; i < off + len; i++)
		if (v[i] == '\r' || v[i] == '\n') {
			buf_adds(why, "the bytes replaced span a line end");
			return -1;
		}
	/* The line the replacement lands in, as it will be: the first one
	 * starts with the field's name. */
	for (ls = off; ls > 0 && v[ls - 1] != '\n'; ls--)
		;
	if (ls == off && ls > 0) {
		buf_adds(why, "the bytes replaced start a line");
		return -1;
	}
	for (le = off + len; le < f->val.len && v[le] != '\n'; le++)
		;
	if (le < f->val.len && le > off + len && v[le - 1] == '\r')
		le--;
	linelen = (ls == 0 ? f->off - f->field : 0) + (le - ls) - len + rlen;
	if (linelen > BODY_LINE_MAX) {
		buf_printf(why, "the From: line would be %zu bytes long (at most %d)", linelen,
		    BODY_LINE_MAX);
		return -1;
	}
	/* Neither side holds a line end or starts a line: the encoder
	 * writes them byte for byte, so the wire changes by rlen - len. */
	buf_reset(&f->rep);
	buf_add(&f->rep, rep, rlen);
	f->set = 1;
	f->at = f->off + off;
	f->oldlen = len;
	f->repi = 0;
	b->wire_len = b->wire_len - len + rlen;
	return 0;
}
