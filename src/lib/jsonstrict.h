/*
 * jsonstrict.h: reading JSON with json-c, strictly: one object and
 * nothing but blanks after it, no NUL byte, json-c's strict mode (no
 * comments, no trailing commas) with what it lets by refused too
 * (lib/jsonparse.h's json_lexically_strict: NaN, single quotes, control
 * bytes, bad UTF-8); each key read as the type it must have.
 *
 * Trusts: nothing in the bytes.  Config keys: none.
 */
#ifndef WEIR_JSONSTRICT_H
#define WEIR_JSONSTRICT_H

#include <stddef.h>

#include <json-c/json.h>

/* The object in s[0..n), or NULL with what is wrong in *why.  The
 * caller frees it with json_object_put(). */
struct json_object *jsonstrict_object(const char *s, size_t n, const char **why);
/* key's string: 1 (*v, *n: json-c's, valid while o is), 0 absent or
 * null, -1 not a string. */
int jsonstrict_str(struct json_object *o, const char *key, const char **v, size_t *n);
/* key's whole number, 0 to 2^53: 1 (*v), 0 absent, -1 not one; with
 * digits set, a string of at most 15 decimal digits also counts. */
int jsonstrict_num(struct json_object *o, const char *key, int digits, long long *v);
/* key's boolean: 1 (*v), 0 absent, -1 not one. */
int jsonstrict_bool(struct json_object *o, const char *key, int *v);
/* 1 if o has no key but those of keys[] (NULL-ended). */
int jsonstrict_only_keys(struct json_object *o, const char *const *keys);
/* Zero the bytes of o's string key in place (a secret, before o is
 * freed); nothing if o is NULL or has none. */
void jsonstrict_wipe(struct json_object *o, const char *key);

#endif
