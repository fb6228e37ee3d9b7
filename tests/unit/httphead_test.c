/*
 * httphead_test.c: weir-metrics' request head check (src/metrics/
 * head.c), case by case as weir-metrics(8) says it: each malformed head
 * and its status, a head that has not all come, the size limits; and
 * what the check tells of a head it lets through.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/buf.h"
#include "metrics/metrics.h"

#define S(x) x, sizeof(x) - 1

static const struct {
	const char *head;
	size_t len;
	unsigned want;
} cases[] = {
	/* Served. */
	{ S("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 200 },
	{ S("GET /metrics HTTP/1.0\r\n\r\n"), 200 },
	{ S("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"), 200 },
	{ S("GET /status.json HTTP/1.0\r\nContent-Length: 0\r\n\r\n"), 200 },
	{ S("GET /metrics HTTP/1.1\nHost: x\n\n"), 200 },		/* bare LF */
	{ S("GET /metrics HTTP/1.0\r\nX: a\tb\xc3\xa9\r\n\r\n"), 200 },	/* tab, UTF-8 */
	/* Not all there yet. */
	{ S("GET /metrics HTTP/1.1\r\nHost: x\r\n"), 0 },
	{ S("GET /metr"), 0 },
	{ S("GET /metrics HTTP/1.1\r"), 0 },
	/* The request line. */
	{ S("GET /metrics HTTP/1.2\r\nHost: x\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.5\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.10\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/0.9\r\n\r\n"), 400 },
	{ S("GET /metrics\r\n\r\n"), 400 },				/* HTTP/0.9 */
	{ S("GET /metrics HTTP/2.0\r\n\r\n"), 505 },
	{ S("GET /metrics HTTP/3.0\r\n\r\n"), 505 },
	{ S("GET /met rics HTTP/1.1\r\nHost: x\r\n\r\n"), 400 },	/* a space in the target */
	{ S("GET  /metrics HTTP/1.0\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0 \r\n\r\n"), 400 },
	{ S("get /metrics HTTP/1.0\r\n\r\n"), 400 },
	{ S("GET metrics HTTP/1.0\r\n\r\n"), 400 },
	{ S("OPTIONS * HTTP/1.0\r\n\r\n"), 400 },
	{ S("GET /met\0rics HTTP/1.0\r\n\r\n"), 400 },		/* NUL */
	{ S("GET /metrics HTTP/1.1\r\nHost: x\r\r\n\r\n"), 400 },	/* bare CR */
	/* Header lines. */
	{ S("GET /metrics HTTP/1.1\r\n\r\n"), 400 },			/* no Host */
	{ S("GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello"), 400 },
	{ S("GET /metrics HTTP/1.0\r\nContent-Length: -1\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n"),
	    400 },
	{ S("GET /metrics HTTP/1.0\r\nContent-Length:\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\n folded\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\nNo colon\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\n: empty name\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\nBad\x01: x\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\nX: a\x01b\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\nX: a\0b\r\n\r\n"), 400 },	/* NUL in a value */
	{ S("GET /metrics HTTP/1.0\r\nX: a\x7f\r\n\r\n"), 400 },
	{ S("GET /metrics HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n"), 400 },	/* a second */
	/* Methods and paths. */
	{ S("POST /metrics HTTP/1.0\r\n\r\n"), 405 },
	{ S("PUT /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 405 },
	{ S("GET /nosuch HTTP/1.0\r\n\r\n"), 404 },
	{ S("GET /metrics/x HTTP/1.1\r\nHost: x\r\n\r\n"), 404 },
	{ S("GET /metricsx HTTP/1.0\r\n\r\n"), 404 },
	{ S("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), 404 },
	{ S("GET /metrics%00x HTTP/1.0\r\n\r\n"), 404 },
	{ S("GET /%00x HTTP/1.0\r\n\r\n"), 404 },
	{ S("GET /%6detrics HTTP/1.0\r\n\r\n"), 404 },
};

Test(httphead, each_case_as_the_man_page_says)
{
	struct http_head h;
	size_t i;
	unsigned st;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		st = http_head_check(cases[i].head, cases[i].len, &h);
		cr_expect_eq(st, cases[i].want, "case %zu \"%.*s\": %u, wanted %u", i,
		    (int)cases[i].len, cases[i].head, st, cases[i].want);
	}
}

Test(httphead, what_it_tells)
{
	const char head[] = "HEAD /status.json HTTP/1.1\r\nhost: x\r\n\r\n";
	struct http_head h;

	cr_assert_eq(http_head_check(head, sizeof head - 1, &h), 200);
	cr_assert_eq(h.path, HP_JSON);
	cr_assert(h.head && h.http11);
	cr_assert_eq(h.hosts, 1);
	cr_assert_eq(h.len, sizeof head - 1);
}

/* Too long: a header (431), the request line alone (414); a head that
 * ends just within the limit is taken. */
Test(httphead, size_limits)
{
	struct buf b = BUF_INIT;
	struct http_head h;

	buf_adds(&b, "GET /metrics HTTP/1.0\r\nX: ");
	while (b.len < HTTP_HEAD_MAX + 1)
		buf_addc(&b, 'a');
	cr_assert_eq(http_head_check(b.s, b.len, &h), 431);
	buf_reset(&b);
	buf_adds(&b, "GET /");
	while (b.len < HTTP_HEAD_MAX + 1)
		buf_addc(&b, 'a');
	cr_assert_eq(http_head_check(b.s, b.len, &h), 414);
	buf_reset(&b);
	buf_adds(&b, "GET /metrics HTTP/1.0\r\nX: ");
	while (b.len < HTTP_HEAD_MAX - 4)
		buf_addc(&b, 'a');
	buf_adds(&b, "\r\n\r\n");
	cr_assert_eq(b.len, HTTP_HEAD_MAX);
	cr_assert_eq(http_head_check(b.s, b.len, &h), 200);
	buf_free(&b);
}
