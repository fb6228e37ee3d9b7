/*
 * qwproto_fuzz.c: libFuzzer harness for weir-queued's socket protocol
 * (src/mail/qwproto.c): the record headers weir-queued reads from any
 * local user, and the reply lines its clients read back.  The input is
 * given to both parsers.  Properties:
 *
 *   - a header that parses is M or E, a length of 1 to QW_CHUNK_MAX and
 *     its newline, within the input and QW_HDR_MAX bytes, and
 *     qw_hdr_put() of what was parsed gives the same bytes back (one
 *     spelling per header);
 *   - "more needed" is only said of fewer than QW_HDR_MAX bytes, with no
 *     newline, a type byte and digits;
 *   - refused bytes stay refused when more bytes follow (a newline), so
 *     a reader that waits for more never takes what it refused;
 *   - a reply that parses is "Z<code>\n" (1 to 255, one spelling) or
 *     "K<id>\n" with an id queue_parse_msgid() takes, within the input;
 *     "more needed" only below QW_REPLY_MAX bytes without a newline, and
 *     refused replies stay refused likewise.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/qwproto.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mail/qwproto.h"
#include "fuzz.h"

/* s[0..n) and a newline, malloc'ed. */
static char *
more(const char *s, size_t n)
{
	char *m = malloc(n + 1);

	if (m != NULL) {
		if (n > 0)
			memcpy(m, s, n);
		m[n] = '\n';
	}
	return m;
}

static void
header(const char *s, size_t n)
{
	char type = 0;
	size_t len = 0, hdrlen = 0, i;
	int rc = qw_hdr_parse(s, n, &type, &len, &hdrlen);
	char *m;

	check(rc >= -1 && rc <= 1);
	if (rc == 1) {
		struct buf b = BUF_INIT;

		check(type == 'M' || type == 'E');
		check(len >= 1 && len <= QW_CHUNK_MAX);
		check(hdrlen >= 3 && hdrlen <= n && hdrlen <= QW_HDR_MAX && s[hdrlen - 1] == '\n');
		qw_hdr_put(&b, type, len);
		check(b.len == hdrlen && memcmp(b.s, s, hdrlen) == 0);
		buf_free(&b);
		return;
	}
	if (rc == 0) {
		check(n < QW_HDR_MAX && memchr(s, '\n', n) == NULL);
		check(n == 0 || s[0] == 'M' || s[0] == 'E');
		for (i = 1; i < n; i++)
			check(s[i] >= '0' && s[i] <= '9');
		return;
	}
	if ((m = more(s, n)) != NULL) {
		check(qw_hdr_parse(m, n + 1, &type, &len, &hdrlen) == -1);
		free(m);
	}
}

static void
reply(const char *s, size_t n)
{
	char id[QUEUE_ID_MAX], want[16];
	int code = -1, rc;
	size_t linelen = 0;
	unsigned long ino;
	struct timespec t;
	char *m;

	rc = qw_reply_parse(s, n, &code, id, &linelen);
	check(rc >= -1 && rc <= 1);
	if (rc == 1) {
		check(linelen >= 3 && linelen <= n && linelen <= QW_REPLY_MAX);
		check(s[linelen - 1] == '\n' && memchr(s, '\n', linelen - 1) == NULL);
		if (code == 0) {
			check(s[0] == 'K' && strlen(id) == linelen - 2);
			check(memcmp(s + 1, id, linelen - 2) == 0);
			check(queue_parse_msgid(id, &ino, &t) == 0);
		} else {
			check(code >= 1 && code <= 255);
			snprintf(want, sizeof want, "Z%d\n", code);
			check(strlen(want) == linelen && memcmp(want, s, linelen) == 0);
		}
		return;
	}
	if (rc == 0) {
		check(n < QW_REPLY_MAX && memchr(s, '\n', n) == NULL);
		check(n == 0 || s[0] == 'K' || s[0] == 'Z');
		return;
	}
	if ((m = more(s, n)) != NULL) {
		check(qw_reply_parse(m, n + 1, &code, id, &linelen) == -1);
		free(m);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	header((const char *)data, size);
	reply((const char *)data, size);
	return 0;
}
