/*
 * schedfile.c: see schedfile.h.
 *
 * Trusts: nothing; a file that is not exactly in the format is refused.
 */
#include <stdio.h>
#include <string.h>

#include "lib/decimal.h"
#include "mail/schedfile.h"

void
schedfile_path(char buf[QPATH_MAX], const struct queue *q, unsigned long id)
{
	snprintf(buf, QPATH_MAX, SCHED_DIR "/%lu/%lu", id % q->split, id);
}

void
schedfile_dirpath(char buf[QPATH_MAX], const struct queue *q, unsigned long id)
{
	snprintf(buf, QPATH_MAX, SCHED_DIR "/%lu", id % q->split);
}

void
schedfile_format(const struct schednote *n, struct buf *b)
{
	buf_printf(b, "birth %lld\nwaited %lld\nsince %lld\nwarned %lld\n", n->birth, n->waited,
	    n->since, n->warned);
}

/* A number (lib/decimal.h) of up to 18 digits, then c, at *p. */
static int
number(const char **p, const char *end, char c, long long *v)
{
	uint64_t x;
	size_t k = dec_prefix(*p, (size_t)(end - *p), 999999999999999999ULL, &x);

	if (k == 0 || *p + k == end || (*p)[k] != c)
		return -1;
	*v = (long long)x;
	*p += k + 1;
	return 0;
}

int
schedfile_parse(const char *s, size_t len, struct schednote *n, struct buf *why)
{
	static const char *const names[] = { "birth ", "waited ", "since ", "warned " };
	long long *fields[] = { &n->birth, &n->waited, &n->since, &n->warned };
	const char *p = s, *end = s + len;
	size_t i, k;

	if (len > SCHEDFILE_MAX) {
		buf_adds(why, "too long");
		return -1;
	}
	for (i = 0; i < 4; i++) {
		k = strlen(names[i]);
		if ((size_t)(end - p) < k || memcmp(p, names[i], k) != 0) {
			buf_printf(why, "line %zu: expected \"%.*s\"", i + 1, (int)k - 1, names[i]);
			return -1;
		}
		p += k;
		if (number(&p, end, '\n', fields[i]) < 0) {
			buf_printf(why, "line %zu: expected a number of up to 18 digits", i + 1);
			return -1;
		}
	}
	if (p != end) {
		buf_adds(why, "bytes after the fourth line");
		return -1;
	}
	return 0;
}

int
schedfile_parse_alive(const char *s, size_t len, long long *t)
{
	const char *p = s;

	if (number(&p, s + len, '\n', t) < 0 || p != s + len)
		return -1;
	return 0;
}
