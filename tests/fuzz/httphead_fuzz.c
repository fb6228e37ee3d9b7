/*
 * httphead_fuzz.c: libFuzzer harness for weir-metrics' request head
 * check (src/metrics/head.c), the bytes any client in metrics.allow
 * sends.  Properties:
 *
 *   - the answer is 0 (more bytes wanted) or one of the statuses the
 *     man page names (200, 400, 404, 405, 414, 431, 505);
 *   - 0 only for fewer than HTTP_HEAD_MAX bytes with no NUL;
 *   - 200 only for a head whose bytes are all accounted for (len == n),
 *     GET or HEAD of one of the three paths, with no NUL in it;
 *   - the same bytes give the same answer (it keeps no state).
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/httphead.
 */
#include <stdint.h>
#include <string.h>

#include "metrics/metrics.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct http_head h, h2;
	unsigned st = http_head_check(s, size, &h);

	check(st == 0 || st == 200 || st == 400 || st == 404 || st == 405 || st == 414 ||
	    st == 431 || st == 505);
	check(http_head_check(s, size, &h2) == st);
	if (st == 0)
		check(size < HTTP_HEAD_MAX && memchr(s, '\0', size) == NULL);
	if (st == 200) {
		check(h.len == size && h.len <= HTTP_HEAD_MAX);
		check(memchr(s, '\0', size) == NULL);
		check(h.path == HP_PAGE || h.path == HP_JSON || h.path == HP_METRICS);
		check((h.method_len == 3 && memcmp(h.method, "GET", 3) == 0) ||
		    (h.method_len == 4 && memcmp(h.method, "HEAD", 4) == 0));
	}
	return 0;
}
