/*
 * showq_fuzz.c: libFuzzer harness for weir-showq's protocol
 * (src/mail/showq.c): the request line weir-showq reads from any local
 * user, and the answer header mailq and `weir queue` read back.  The
 * input is given to both parsers.  Properties:
 *
 *   - a request that is taken is exactly "list\n" or "json\n";
 *   - a request refused says why in one printable line;
 *   - a header that parses is written in one way only: "ok RC LEN",
 *     "fail LEN REASON" or "error REASON", rebuilt from the fields to the
 *     same bytes, its REASON within the header, printable and at most
 *     SHOWQ_REASON_MAX bytes; a header refused says why in one printable
 *     line.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/showq.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mail/showq.h"
#include "fuzz.h"

static void
one_printable_line(const struct buf *b)
{
	size_t i;

	check(b->len > 0);
	for (i = 0; i < b->len; i++)
		check((unsigned char)b->s[i] >= ' ' && (unsigned char)b->s[i] <= '~');
}

static void
request(const char *s, size_t n)
{
	struct buf why = BUF_INIT;
	enum qlist_format f;

	if (showq_parse_request(s, n, &f, &why) == 0) {
		check(n == 5 && why.len == 0);
		check(memcmp(s, f == QLIST_TEXT ? "list\n" : "json\n", 5) == 0);
		check(f == QLIST_TEXT || f == QLIST_JSON);
	} else {
		one_printable_line(&why);
	}
	buf_free(&why);
}

static void
head(const char *s, size_t n)
{
	struct buf why = BUF_INIT, b = BUF_INIT;
	struct showq_head h;
	size_t i;

	if (showq_parse_head(s, n, &h, &why) < 0) {
		one_printable_line(&why);
		buf_free(&why);
		return;
	}
	check(why.len == 0);
	if (h.kind != SHOWQ_OK) {
		check(h.reason_len >= 1 && h.reason_len <= SHOWQ_REASON_MAX);
		check(h.reason_off + h.reason_len == n);
		for (i = h.reason_off; i < n; i++)
			check((unsigned char)s[i] >= ' ' && (unsigned char)s[i] <= '~');
	}
	if (h.kind == SHOWQ_OK) {
		check(h.rc == 0 || h.rc == 1);
		buf_printf(&b, "ok %d %llu", h.rc, h.len);
	} else if (h.kind == SHOWQ_FAIL) {
		buf_printf(&b, "fail %llu %.*s", h.len, (int)h.reason_len, s + h.reason_off);
	} else {
		check(h.kind == SHOWQ_ERROR);
		buf_printf(&b, "error %.*s", (int)h.reason_len, s + h.reason_off);
	}
	check(b.len == n && memcmp(b.s, s, n) == 0);
	buf_free(&b);
	buf_free(&why);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	request((const char *)data, size);
	head((const char *)data, size);
	return 0;
}
