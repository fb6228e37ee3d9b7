/*
 * head.c: the request head as weir-metrics takes it (weir-metrics(8),
 * HTTP), checked on the bytes as they came, before libmicrohttpd parses
 * them: it is handed only heads that pass, so that none of its own
 * error answers (0.9.75 writes the head of some of them twice) is ever
 * sent, and every rule below is this file's.
 *
 *   request-line  METHOD SP TARGET SP "HTTP/" D "." D, then CRLF or LF:
 *                 METHOD upper-case letters (400), TARGET printable ASCII
 *                 without space starting with '/' (400), the version
 *                 HTTP/1.0 or HTTP/1.1; HTTP/2.0 and above 505, any
 *                 other 400
 *   header lines  NAME ":" VALUE, NAME a token (RFC 9110 5.1), VALUE
 *                 without control bytes but HTAB (400); no line folded
 *                 (starting with a space or tab: 400)
 *   anywhere      no NUL, no CR but before LF (400)
 *   then          HTTP/1.1 with no Host, two Hosts (400); a body
 *                 announced: Content-Length other than zeros, any
 *                 Transfer-Encoding (400); bytes after the head (400:
 *                 one request per connection, no body); a method other
 *                 than GET or HEAD (405); a target other than "/",
 *                 "/status.json" or "/metrics" exactly (404: a query
 *                 string, a percent-encoding are others)
 *   size          the head within HTTP_HEAD_MAX bytes, else 431 (414
 *                 when the request line alone does not end there)
 *
 * Trusts: nothing.  Config keys: none.
 */
#include <string.h>
#include <strings.h>

#include "metrics/metrics.h"

static int
is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The line at s[0..n) without its end (LF, or CRLF): its length, with
 * *next after its end; -1 no line end yet; -2 a bare CR or a NUL. */
static long
line(const char *s, size_t n, size_t *next)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] == '\0')
			return -2;
		if (s[i] == '\n') {
			*next = i + 1;
			return (long)i;
		}
		if (s[i] == '\r') {
			if (i + 1 == n)
				return -1;
			if (s[i + 1] != '\n')
				return -2;
			*next = i + 2;
			return (long)i;
		}
	}
	return -1;
}

/* The request line s[0..n): 0 or the status. */
static unsigned
request_line(const char *s, size_t n, struct http_head *h)
{
	size_t i = 0, t;
	const char *v;

	while (i < n && s[i] >= 'A' && s[i] <= 'Z')
		i++;
	if (i == 0 || i == n || s[i] != ' ')
		return 400;
	h->method_len = i;
	h->method = s;
	t = ++i;
	while (i < n && (unsigned char)s[i] > ' ' && (unsigned char)s[i] < 0x7f)
		i++;
	if (i == t || i == n || s[i] != ' ' || s[t] != '/')
		return 400;
	h->target = s + t;
	h->target_len = i - t;
	v = s + i + 1;
	if (n - i - 1 != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' ||
	    v[6] != '.' || v[7] < '0' || v[7] > '9')
		return 400;
	if (v[5] >= '2')
		return 505;
	if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
		return 400;
	h->http11 = v[7] == '1';
	return 0;
}

/* Is the value s[0..n) (blanks around it included) all zeros? */
static int
zeros(const char *s, size_t n)
{
	size_t i = 0, k = 0;

	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	while (i < n && s[i] == '0')
		i++, k++;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return k > 0 && i == n;
}

/* One header line s[0..n): 0 or the status. */
static unsigned
header_line(const char *s, size_t n, struct http_head *h)
{
	size_t i = 0, name;

	if (s[0] == ' ' || s[0] == '\t')
		return 400;		/* obs-fold */
	while (i < n && is_tchar((unsigned char)s[i]))
		i++;
	if (i == 0 || i == n || s[i] != ':')
		return 400;
	name = i++;
	for (; i < n; i++)
		if (((unsigned char)s[i] < ' ' && s[i] != '\t') || s[i] == 0x7f)
			return 400;
	if (name == 4 && strncasecmp(s, "host", 4) == 0)
		h->hosts++;
	else if (name == 17 && strncasecmp(s, "transfer-encoding", 17) == 0)
		h->body = 1;
	else if (name == 14 && strncasecmp(s, "content-length", 14) == 0 &&
	    !zeros(s + name + 1, n - name - 1))
		h->body = 1;
	return 0;
}

unsigned
http_head_check(const char *s, size_t n, struct http_head *h)
{
	size_t at = 0, next = 0;
	long len;
	unsigned st;
	int first = 1;

	memset(h, 0, sizeof *h);
	for (;;) {
		len = line(s + at, n - at, &next);
		if (len == -2)
			return 400;
		if (len == -1) {
			if (n < HTTP_HEAD_MAX)
				return 0;
			return first ? 414 : 431;
		}
		if (at + next > HTTP_HEAD_MAX)
			return first ? 414 : 431;
		if (first) {
			if ((st = request_line(s, (size_t)len, h)) != 0)
				return st;
			first = 0;
		} else if (len == 0) {
			at += next;
			break;
		} else if ((st = header_line(s + at, (size_t)len, h)) != 0) {
			return st;
		}
		at += next;
	}
	h->len = at;
	if (at != n || h->hosts > 1 || (h->hosts == 0 && h->http11) || h->body)
		return 400;
	h->head = h->method_len == 4 && memcmp(h->method, "HEAD", 4) == 0;
	if (!h->head && !(h->method_len == 3 && memcmp(h->method, "GET", 3) == 0))
		return 405;
	if (h->target_len == 1)
		h->path = HP_PAGE;
	else if (h->target_len == 8 && memcmp(h->target, "/metrics", 8) == 0)
		h->path = HP_METRICS;
	else if (h->target_len == 12 && memcmp(h->target, "/status.json", 12) == 0)
		h->path = HP_JSON;
	else
		return 404;
	return 200;
}
