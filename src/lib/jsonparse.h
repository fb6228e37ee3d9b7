/*
 * jsonparse.h: reading JSON (RFC 8259) with json-c, strictly: the one
 * JSON reader of every program (weir-metrics' status documents, weir
 * status's listing, the OAuth provider's answers and token files, the
 * tests).  One document of at most a given size, json-c's
 * JSON_TOKENER_STRICT rules (no trailing commas, comments, single
 * quotes, NaN, leading zeros...) with UTF-8 checked, nothing but white
 * space after the value, no NUL byte, nesting at most JSONPARSE_DEPTH
 * deep; json_parse_object() also wants that value to be an object.
 *
 * The accessors below read one value each and return NULL or -1 for
 * anything not of the kind asked (a missing member, a null, a number
 * where a string was wanted), so a reader leaves such a field out, or
 * refuses the document, instead of guessing.  A member that may be
 * absent but must have its kind when present is read in two steps:
 * jp_get() (NULL: absent or null), then the accessor.
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
/* The same for a document that must be a JSON object. */
struct json_object *json_parse_object(const char *text, size_t len, size_t max,
    struct buf *why);

/* Member key of object o, or NULL (o NULL, not an object, no such key,
 * or the member is null). */
struct json_object *jp_get(struct json_object *o, const char *key);
/* An integer (no fraction, no exponent) that fits a long long: 0 with
 * *out, else -1. */
int jp_ll(struct json_object *o, long long *out);
/* The same from 0 to 2^53 only (what a reader that keeps numbers as
 * doubles reads exactly): counts, seconds, times. */
int jp_u53(struct json_object *o, long long *out);
/* A string with no NUL in it, else NULL. */
const char *jp_str(struct json_object *o);
/* A boolean: 1 true, 0 false, -1 not a boolean. */
int jp_bool(struct json_object *o);
/* An array's length, 0 for anything else; jp_at: its element i, or NULL. */
size_t jp_len(struct json_object *o);
struct json_object *jp_at(struct json_object *o, size_t i);
/* 1 if object o has no member but those named in keys[] (NULL-ended),
 * else 0 (also when o is not an object). */
int jp_only_keys(struct json_object *o, const char *const *keys);
/* Zero in place the bytes of o's string member key (a secret, before o
 * is freed: json-c's copy); nothing if o is NULL or has none. */
void jp_wipe(struct json_object *o, const char *key);

#endif
