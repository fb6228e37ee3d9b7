/*
 * json.c: see json.h.
 * Trusts: nothing about the bytes.  Config keys: none.
 */
#include <string.h>

#include "lib/json.h"

size_t
utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len, i;
	unsigned char lo = 0x80, hi = 0xbf;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;		/* no overlong forms */
		else if (c == 0xed)
			hi = 0x9f;		/* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;		/* at most U+10FFFF */
	} else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

void
json_str(struct buf *b, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, k;

	buf_addc(b, '"');
	while (i < n) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\') {
			buf_addc(b, '\\');
			buf_addc(b, (char)c);
			i++;
		} else if (c >= 0x20 && c < 0x7f) {
			buf_addc(b, (char)c);
			i++;
		} else if (c >= 0x80 && (k = utf8_len(s + i, n - i)) > 0) {
			buf_add(b, s + i, k);
			i += k;
		} else {
			buf_printf(b, "\\u%04x", (unsigned)c);
			i++;
		}
	}
	buf_addc(b, '"');
}

void
json_cstr(struct buf *b, const char *s)
{
	if (s == NULL)
		buf_adds(b, "null");
	else
		json_str(b, s, strlen(s));
}
