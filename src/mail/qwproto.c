/*
 * qwproto.c: see qwproto.h.
 */
#include <string.h>
#include <time.h>

#include "lib/decimal.h"
#include "mail/qwproto.h"

/* s[0..n), a number (lib/decimal.h) from 1 to max: *v; -1 if not. */
static int
number(const char *s, size_t n, unsigned long max, unsigned long *v)
{
	uint64_t x;

	if (dec_parse(s, n, max, &x) < 0 || x == 0)
		return -1;
	*v = (unsigned long)x;
	return 0;
}

int
qw_hdr_parse(const char *s, size_t n, char *type, size_t *len, size_t *hdrlen)
{
	const char *nl;
	unsigned long v;
	size_t k = n < QW_HDR_MAX ? n : QW_HDR_MAX;

	if (n == 0)
		return 0;
	if (s[0] != 'M' && s[0] != 'E')
		return -1;
	nl = memchr(s, '\n', k);
	if (nl == NULL) {
		/* Only digits so far, and room for more: wait. */
		size_t i;

		for (i = 1; i < k; i++)
			if (s[i] < '0' || s[i] > '9')
				return -1;
		return n < QW_HDR_MAX ? 0 : -1;
	}
	if (number(s + 1, (size_t)(nl - s - 1), QW_CHUNK_MAX, &v) < 0)
		return -1;
	*type = s[0];
	*len = v;
	*hdrlen = (size_t)(nl - s) + 1;
	return 1;
}

void
qw_hdr_put(struct buf *b, char type, size_t len)
{
	buf_printf(b, "%c%zu\n", type, len);
}

int
qw_reply_parse(const char *s, size_t n, int *code, char id[QUEUE_ID_MAX], size_t *linelen)
{
	const char *nl;
	size_t k = n < QW_REPLY_MAX ? n : QW_REPLY_MAX;
	unsigned long v, ino;
	struct timespec t;

	if (n == 0)
		return 0;
	if (s[0] != 'K' && s[0] != 'Z')
		return -1;
	nl = memchr(s, '\n', k);
	if (nl == NULL)
		return n < QW_REPLY_MAX ? 0 : -1;
	*linelen = (size_t)(nl - s) + 1;
	if (s[0] == 'Z') {
		if (number(s + 1, (size_t)(nl - s - 1), 255, &v) < 0)
			return -1;
		*code = (int)v;
		return 1;
	}
	if ((size_t)(nl - s - 1) >= QUEUE_ID_MAX)
		return -1;
	memcpy(id, s + 1, (size_t)(nl - s - 1));
	id[nl - s - 1] = '\0';
	if (memchr(id, '\0', (size_t)(nl - s - 1)) != NULL || queue_parse_msgid(id, &ino, &t) < 0)
		return -1;
	*code = 0;
	return 1;
}
