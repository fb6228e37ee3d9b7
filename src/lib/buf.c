/* buf.c: see buf.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"

void
buf_reserve(struct buf *b, size_t extra)
{
	size_t want;

	if (extra > (size_t)-1 / 2 - b->len)
		fatalx(111, "buffer size overflow");
	want = b->len + extra + 1;
	if (want <= b->cap)
		return;
	if (b->cap * 2 > want)
		want = b->cap * 2;
	if (want < 64)
		want = 64;
	b->s = xrealloc(b->s, want);
	b->cap = want;
}

void
buf_add(struct buf *b, const void *p, size_t n)
{
	buf_reserve(b, n);
	if (n)
		memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void buf_addc(struct buf *b, char c) { buf_add(b, &c, 1); }
void buf_adds(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

void
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatalx(111, "buf_printf: bad format");
	buf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void
buf_add_oneline(struct buf *b, const char *s, size_t n)
{
	size_t i;
	int space = 0;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n' || c == '\t' || c == ' ' || c == '\r') {
			space = 1;
			continue;
		}
		if (space && b->len > 0 && b->s[b->len - 1] != ' ')
			buf_addc(b, ' ');
		space = 0;
		buf_addc(b, c >= 0x21 && c < 0x7f ? (char)c : '?');
	}
	buf_reserve(b, 0);
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->s)
		b->s[0] = '\0';
}

void
buf_free(struct buf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

const char *
buf_cstr(struct buf *b)
{
	buf_reserve(b, 0);
	b->s[b->len] = '\0';
	return b->s;
}
