/*
 * buf.h: the one growable byte buffer.  Always NUL-terminated past len so
 * that text can be used as a C string; binary content may hold NULs.
 */
#ifndef WEIR_BUF_H
#define WEIR_BUF_H

#include <stddef.h>

#include "lib/log.h"

struct buf {
	char *s;
	size_t len;
	size_t cap;
};

#define BUF_INIT { NULL, 0, 0 }

void buf_reserve(struct buf *b, size_t extra);
void buf_add(struct buf *b, const void *p, size_t n);
void buf_addc(struct buf *b, char c);
void buf_adds(struct buf *b, const char *s);
void buf_printf(struct buf *b, const char *fmt, ...) PRINTFLIKE(2, 3);
/* Text from outside (an upstream's reply) made safe for one line of a log
 * or a header field: runs of whitespace become one space, other bytes
 * outside printable ASCII become '?'. */
void buf_add_oneline(struct buf *b, const char *s, size_t n);
void buf_reset(struct buf *b);
void buf_free(struct buf *b);
const char *buf_cstr(struct buf *b);

#endif
