/*
 * schedfile.c: see schedfile.h.
 *
 * Trusts: nothing; a file that is not exactly in the format is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
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

void
schedfile_format_wait(const struct schedwait *w, struct buf *b)
{
	buf_printf(b, "%lu %lld %lld %lld\n", w->id, w->birth, w->waited, w->since);
}

static int
by_id(const void *a, const void *b)
{
	unsigned long x = ((const struct schedwait *)a)->id, y = ((const struct schedwait *)b)->id;

	return x < y ? -1 : x > y;
}

int
schedfile_parse_waits(const char *s, size_t len, struct schedwait **v, size_t *n,
    struct buf *why)
{
	const char *p = s, *end = s + len;
	size_t k = 0, cap = 0, line;
	struct schedwait *w = NULL;
	long long id;

	*v = NULL;
	*n = 0;
	if (len > SCHEDWAITS_MAX) {
		buf_printf(why, "over %lu bytes", SCHEDWAITS_MAX);
		return -1;
	}
	for (line = 1; p < end; line++) {
		if (k == cap) {
			cap = cap ? 2 * cap : 64;	/* len bounds it: a line is 8 bytes or more */
			w = xrealloc(w, cap * sizeof *w);
		}
		if (number(&p, end, ' ', &id) < 0 || number(&p, end, ' ', &w[k].birth) < 0 ||
		    number(&p, end, ' ', &w[k].waited) < 0 ||
		    number(&p, end, '\n', &w[k].since) < 0) {
			buf_printf(why, "line %zu: expected four numbers of up to 18 digits, "
			    "one space apart", line);
			free(w);
			return -1;
		}
		w[k++].id = (unsigned long)id;
	}
	if (k > 0)
		qsort(w, k, sizeof *w, by_id);
	*v = w;
	*n = k;
	return 0;
}

const struct schedwait *
schedfile_find_wait(const struct schedwait *v, size_t n, unsigned long id)
{
	struct schedwait key;

	if (n == 0)
		return NULL;
	key.id = id;
	return bsearch(&key, v, n, sizeof *v, by_id);
}

int
schedfile_parse_session(const char *s, size_t len, struct schedsession *ss)
{
	const char *sp = memchr(s, ' ', len), *p, *end = s + len;
	size_t n;

	if (sp == NULL || (n = (size_t)(sp - s)) == 0 || n > POLICY_NAME_MAX)
		return -1;
	memcpy(ss->upstream, s, n);
	ss->upstream[n] = '\0';
	if (!policy_valid_name(ss->upstream))
		return -1;
	p = sp + 1;
	if (number(&p, end, ' ', &ss->pid) < 0 || number(&p, end, ' ', &ss->since) < 0 ||
	    number(&p, end, '\n', &ss->messages) < 0 || p != end || ss->pid == 0)
		return -1;
	return 0;
}
