/*
 * json.h: writing JSON text (RFC 8259) into a struct buf.  Only strings
 * need care: json_str() takes any bytes (NUL included) and always yields
 * a valid JSON string.
 *
 * Bytes: well-formed UTF-8 (no overlong forms, no surrogates, at most
 * U+10FFFF) is copied as it is; '"' and '\\' are escaped; control bytes
 * (0x00-0x1f) and DEL become \u00XX; every other byte that is not part
 * of well-formed UTF-8 becomes \u00XX as well, that is the byte read as
 * Latin-1 (so 0xFF shows as "\u00ff", U+00FF).  Nothing is dropped.
 *
 * Trusts: nothing about the bytes.  Config keys: none.
 */
#ifndef WEIR_JSON_H
#define WEIR_JSON_H

#include <stddef.h>

#include "lib/buf.h"

/* Length of the well-formed UTF-8 sequence at s[0..n) (Unicode 15,
 * table 3-7), or 0 if the bytes there are not one (also for ASCII). */
size_t utf8_len(const unsigned char *s, size_t n);

/* Append s[0..n) as a JSON string, quotes included. */
void json_str(struct buf *b, const char *s, size_t n);
/* The same for a C string; NULL appends null. */
void json_cstr(struct buf *b, const char *s);

#endif
