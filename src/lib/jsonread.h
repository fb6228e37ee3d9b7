/*
 * jsonread.h: reading a JSON document (RFC 8259) into a tree, strictly:
 * one value, nothing but white space after it, no trailing commas, no
 * NUL, nesting at most JSONREAD_DEPTH deep.  Numbers keep their text (a
 * reader that only passes them on loses no digit); jv_ll() reads an
 * integer one.  Strings are decoded (escapes, \uXXXX with surrogate pairs
 * as UTF-8); a \u0000 is refused, so every string is a C string.
 *
 * Trusts: nothing about the bytes.  Config keys: none.
 */
#ifndef WEIR_JSONREAD_H
#define WEIR_JSONREAD_H

#include <stddef.h>

#define JSONREAD_DEPTH 32

enum jv_type { JV_NULL, JV_FALSE, JV_TRUE, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT };

struct jv {
	enum jv_type type;
	char *s;		/* JV_STRING: the decoded text; JV_NUMBER: as written */
	struct jv *v;		/* JV_ARRAY, JV_OBJECT: the members */
	char **k;		/* JV_OBJECT: their names */
	size_t n;
};

/* Parse text[0..len).  0 ok (free with jv_free); -1 with a reason in *why. */
int jv_parse(const char *text, size_t len, struct jv *out, const char **why);
void jv_free(struct jv *v);

/* The member called key of an object (the first), else NULL (also when
 * obj is NULL or no object). */
const struct jv *jv_get(const struct jv *obj, const char *key);
/* An integer number: 0 with *out; -1 not one (or out of range). */
int jv_ll(const struct jv *v, long long *out);

#endif
