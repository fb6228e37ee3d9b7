/*
 * jsonread.c: a strict recursive-descent JSON reader (see jsonread.h).
 *
 * Trusts: nothing about the bytes.  Config keys: none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/jsonread.h"

struct rd {
	const char *p, *end;
	const char *why;
};

static int value(struct rd *r, struct jv *out, int depth);

static void
ws(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int
fail(struct rd *r, const char *why)
{
	if (r->why == NULL)
		r->why = why;
	return -1;
}

static int
hex4(struct rd *r, unsigned *u)
{
	int i;

	*u = 0;
	if (r->end - r->p < 4)
		return fail(r, "short \\u escape");
	for (i = 0; i < 4; i++) {
		char c = *r->p++;

		*u <<= 4;
		if (c >= '0' && c <= '9')
			*u |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*u |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*u |= (unsigned)(c - 'A' + 10);
		else
			return fail(r, "bad \\u escape");
	}
	return 0;
}

static void
utf8(struct buf *b, unsigned u)
{
	if (u < 0x80) {
		buf_addc(b, (char)u);
	} else if (u < 0x800) {
		buf_addc(b, (char)(0xc0 | (u >> 6)));
		buf_addc(b, (char)(0x80 | (u & 0x3f)));
	} else if (u < 0x10000) {
		buf_addc(b, (char)(0xe0 | (u >> 12)));
		buf_addc(b, (char)(0x80 | ((u >> 6) & 0x3f)));
		buf_addc(b, (char)(0x80 | (u & 0x3f)));
	} else {
		buf_addc(b, (char)(0xf0 | (u >> 18)));
		buf_addc(b, (char)(0x80 | ((u >> 12) & 0x3f)));
		buf_addc(b, (char)(0x80 | ((u >> 6) & 0x3f)));
		buf_addc(b, (char)(0x80 | (u & 0x3f)));
	}
}

/* At the opening quote: the decoded string, malloc'ed, or NULL. */
static char *
string(struct rd *r)
{
	struct buf b = BUF_INIT;
	unsigned u, lo;
	char c;

	r->p++;
	for (;;) {
		if (r->p >= r->end) {
			fail(r, "unterminated string");
			goto bad;
		}
		c = *r->p++;
		if (c == '"')
			break;
		if ((unsigned char)c < 0x20) {
			fail(r, "control byte in a string");
			goto bad;
		}
		if (c != '\\') {
			buf_addc(&b, c);
			continue;
		}
		if (r->p >= r->end) {
			fail(r, "unterminated escape");
			goto bad;
		}
		switch ((c = *r->p++)) {
		case '"': case '\\': case '/': buf_addc(&b, c); break;
		case 'b': buf_addc(&b, '\b'); break;
		case 'f': buf_addc(&b, '\f'); break;
		case 'n': buf_addc(&b, '\n'); break;
		case 'r': buf_addc(&b, '\r'); break;
		case 't': buf_addc(&b, '\t'); break;
		case 'u':
			if (hex4(r, &u) < 0)
				goto bad;
			if (u >= 0xd800 && u < 0xdc00) {
				if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u') {
					fail(r, "lone surrogate");
					goto bad;
				}
				r->p += 2;
				if (hex4(r, &lo) < 0)
					goto bad;
				if (lo < 0xdc00 || lo > 0xdfff) {
					fail(r, "bad surrogate pair");
					goto bad;
				}
				u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
			} else if (u >= 0xdc00 && u <= 0xdfff) {
				fail(r, "lone surrogate");
				goto bad;
			}
			if (u == 0) {
				fail(r, "\\u0000 in a string");
				goto bad;
			}
			utf8(&b, u);
			break;
		default:
			fail(r, "bad escape");
			goto bad;
		}
	}
	buf_addc(&b, '\0');
	return b.s;
bad:
	buf_free(&b);
	return NULL;
}

static int
number(struct rd *r, struct jv *out)
{
	const char *s = r->p;
	size_t digits;

	if (r->p < r->end && *r->p == '-')
		r->p++;
	digits = 0;
	while (r->p + digits < r->end && r->p[digits] >= '0' && r->p[digits] <= '9')
		digits++;
	if (digits == 0 || (digits > 1 && *r->p == '0'))
		return fail(r, "bad number");
	r->p += digits;
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		digits = 0;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++, digits++;
		if (digits == 0)
			return fail(r, "bad fraction");
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		digits = 0;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++, digits++;
		if (digits == 0)
			return fail(r, "bad exponent");
	}
	out->type = JV_NUMBER;
	out->s = xmalloc((size_t)(r->p - s) + 1);
	memcpy(out->s, s, (size_t)(r->p - s));
	out->s[r->p - s] = '\0';
	return 0;
}

static int
word(struct rd *r, const char *w, enum jv_type t, struct jv *out)
{
	size_t n = strlen(w);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
		return fail(r, "unexpected byte");
	r->p += n;
	out->type = t;
	return 0;
}

/* The members of an array or object, after its opening bracket. */
static int
members(struct rd *r, struct jv *out, int obj, int depth)
{
	char close = obj ? '}' : ']';
	size_t cap = 0;

	ws(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;

		ws(r);
		if (obj) {
			if (r->p >= r->end || *r->p != '"' || (key = string(r)) == NULL)
				return fail(r, "expected a member name");
			ws(r);
			if (r->p >= r->end || *r->p != ':') {
				free(key);
				return fail(r, "expected ':'");
			}
			r->p++;
		}
		if (out->n == cap) {
			cap = cap ? cap * 2 : 8;
			out->v = xrealloc(out->v, cap * sizeof *out->v);
			if (obj)
				out->k = xrealloc(out->k, cap * sizeof *out->k);
		}
		memset(&out->v[out->n], 0, sizeof out->v[out->n]);
		if (obj)
			out->k[out->n] = key;
		out->n++;
		if (value(r, &out->v[out->n - 1], depth + 1) < 0)
			return -1;
		ws(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == close) {
			r->p++;
			return 0;
		}
		return fail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int
value(struct rd *r, struct jv *out, int depth)
{
	memset(out, 0, sizeof *out);
	if (depth > JSONREAD_DEPTH)
		return fail(r, "nested too deep");
	ws(r);
	if (r->p >= r->end)
		return fail(r, "unexpected end");
	switch (*r->p) {
	case '{':
	case '[':
		out->type = *r->p == '{' ? JV_OBJECT : JV_ARRAY;
		r->p++;
		return members(r, out, out->type == JV_OBJECT, depth);
	case '"':
		out->type = JV_STRING;
		return (out->s = string(r)) == NULL ? -1 : 0;
	case 't':
		return word(r, "true", JV_TRUE, out);
	case 'f':
		return word(r, "false", JV_FALSE, out);
	case 'n':
		return word(r, "null", JV_NULL, out);
	default:
		return number(r, out);
	}
}

int
jv_parse(const char *text, size_t len, struct jv *out, const char **why)
{
	struct rd r = { text, text + len, NULL };

	if (memchr(text, '\0', len) != NULL) {
		memset(out, 0, sizeof *out);
		*why = "NUL byte";
		return -1;
	}
	if (value(&r, out, 0) < 0)
		goto bad;
	ws(&r);
	if (r.p != r.end) {
		fail(&r, "bytes after the value");
		goto bad;
	}
	return 0;
bad:
	jv_free(out);
	*why = r.why;
	return -1;
}

void
jv_free(struct jv *v)
{
	size_t i;

	for (i = 0; i < v->n; i++) {
		jv_free(&v->v[i]);
		if (v->k)
			free(v->k[i]);
	}
	free(v->v);
	free(v->k);
	free(v->s);
	memset(v, 0, sizeof *v);
}

const struct jv *
jv_get(const struct jv *obj, const char *key)
{
	size_t i;

	if (obj == NULL || obj->type != JV_OBJECT)
		return NULL;
	for (i = 0; i < obj->n; i++)
		if (strcmp(obj->k[i], key) == 0)
			return &obj->v[i];
	return NULL;
}

int
jv_ll(const struct jv *v, long long *out)
{
	char *end;

	if (v == NULL || v->type != JV_NUMBER || strpbrk(v->s, ".eE") != NULL)
		return -1;
	errno = 0;
	*out = strtoll(v->s, &end, 10);
	return errno || *end ? -1 : 0;
}
