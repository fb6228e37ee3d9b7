/*
 * gateproto_fuzz.c: libFuzzer harness for the weir-gate wire format
 * (src/mail/gateproto.c), both directions: the gate parses requests from
 * any local client, the clients parse the gate's replies.  The input is
 * cut into lines with gp_frame; each line is parsed as a request and as
 * a reply.  Properties:
 *
 *   - gp_frame finds a line only within GP_LINE_MAX bytes, ending in "\n";
 *   - what parses formats back to exactly the same line
 *     (gp_fmt(gp_parse(x)) == x: the format has one spelling per value),
 *     and the formatter never panics on what the parser accepted;
 *   - a parsed line holds only printable ASCII.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/gateproto.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mail/gateproto.h"
#include "fuzz.h"

static void
same_line(const struct buf *b, const char *line, size_t len)
{
	check(b->len == len + 1 && memcmp(b->s, line, len) == 0 && b->s[len] == '\n');
}

static void
one_line(const char *line, size_t len)
{
	struct gp_req rq, rq2;
	struct gp_reply rp, rp2;
	struct buf b = BUF_INIT;
	const char *why;
	size_t i;

	if (gp_parse_request(line, len, &rq, &why) == GP_OK) {
		for (i = 0; i < len; i++)
			check(line[i] >= 0x20 && line[i] <= 0x7e);
		gp_fmt_request(&b, &rq);
		same_line(&b, line, len);
		check(gp_parse_request(b.s, b.len - 1, &rq2, &why) == GP_OK);
		check(memcmp(&rq, &rq2, sizeof rq) == 0);
		buf_reset(&b);
	}
	if (gp_parse_reply(line, len, &rp, &why) == GP_OK) {
		for (i = 0; i < len; i++)
			check(line[i] >= 0x20 && line[i] <= 0x7e);
		gp_fmt_reply(&b, &rp);
		same_line(&b, line, len);
		check(gp_parse_reply(b.s, b.len - 1, &rp2, &why) == GP_OK);
		check(memcmp(&rp, &rp2, sizeof rp) == 0);
	}
	buf_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	size_t off = 0, ll;
	int got;

	while (off < size) {
		got = gp_frame(s + off, size - off, &ll);
		if (got <= 0) {
			check(got == 0 || size - off >= GP_LINE_MAX);
			/* An unterminated tail: parse it too, as a line. */
			one_line(s + off, size - off < GP_LINE_MAX ? size - off : GP_LINE_MAX);
			break;
		}
		check(ll >= 1 && ll <= GP_LINE_MAX && ll <= size - off && s[off + ll - 1] == '\n');
		check(memchr(s + off, '\n', ll - 1) == NULL);
		one_line(s + off, ll - 1);
		off += ll;
	}
	return 0;
}
