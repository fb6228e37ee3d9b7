/*
 * jsonparse.h: reading JSON (RFC 8259) with json-c, strictly, for every
 * JSON weir reads: one document of at most a given size, json-c's
 * JSON_TOKENER_STRICT rules (no trailing commas, comments, single quotes,
 * NaN, leading zeros...) with UTF-8 checked, nothing but white space
 * after the value, no NUL byte, nesting at most JSONPARSE_DEPTH deep.
 * The accessors below return NULL or -1 for anything not of the kind
 * asked (a missing member, a number where a string was wanted), so a
 * reader leaves such a field out instead of guessing.
 *
 * Trusts: nothing about the bytes.  Config keys: none.
 */
#ifndef WEIR_JSONPARSE_H
#define WEIR_JSONPARSE_H

#include <json-c/json.h>
#include <stddef.h>

#include "lib/buf.h"

#define JSONPARSE_DEPTH 32

/* The document in text[0..len), or NULL with the reason appended to why
 * (also when len > max).  Free it with json_object_put. */
struct json_object *json_parse_strict(const char *text, size_t len, size_t max,
    struct buf *why);

/* What json-c lets through even with JSON_TOKENER_STRICT (0.16): NaN and
 * Infinity, single-quoted strings, control bytes and ill-formed UTF-8 in
 * strings.  One pass over the bytes refuses them: outside strings only
 * white space, structure, number bytes and the words true, false, null;
 * inside, no control byte and well-formed UTF-8 only (json-c checks the
 * rest: the grammar, numbers, escapes).  0 ok; -1 with *at, the byte. */
int json_lexically_strict(const char *text, size_t len, size_t *at);

/* Member key of object o, or NULL (o NULL, not an object, no such key,
 * or the member is null). */
struct json_object *jp_get(struct json_object *o, const char *key);
/* An integer (no fraction, no exponent) that fits a long long: 0 with
 * *out, else -1. */
int jp_ll(struct json_object *o, long long *out);
/* A string with no NUL in it, else NULL. */
const char *jp_str(struct json_object *o);
/* A boolean: 1 true, 0 false, -1 not a boolean. */
int jp_bool(struct json_object *o);
/* An array's length, 0 for anything else; jp_at: its element i, or NULL. */
size_t jp_len(struct json_object *o);
struct json_object *jp_at(struct json_object *o, size_t i);

#endif
