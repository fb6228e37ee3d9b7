/*
 * auth.c: see auth.h.
 */
#include "smtpd/auth.h"

static int
b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
b64_decode(const char *s, size_t n, struct buf *out)
{
	size_t i, pad = 0;

	buf_reset(out);
	if (n % 4 != 0)
		return -1;
	if (n >= 1 && s[n - 1] == '=')
		pad++;
	if (n >= 2 && s[n - 2] == '=')
		pad++;
	for (i = 0; i < n; i += 4) {
		int v[4], k;
		size_t last = i + 4 == n ? pad : 0;

		for (k = 0; k < 4; k++) {
			if ((size_t)k >= 4 - last) {
				v[k] = 0;	/* '=' */
				continue;
			}
			if ((v[k] = b64_value((unsigned char)s[i + (size_t)k])) < 0)
				return -1;
		}
		buf_addc(out, (char)((v[0] << 2) | (v[1] >> 4)));
		if (last < 2)
			buf_addc(out, (char)(((v[1] & 0xf) << 4) | (v[2] >> 2)));
		if (last < 1)
			buf_addc(out, (char)(((v[2] & 0x3) << 6) | v[3]));
		/* Canonical: the bits the padding drops must be zero. */
		if ((last == 2 && (v[1] & 0xf)) || (last == 1 && (v[2] & 0x3)))
			return -1;
	}
	return 0;
}
