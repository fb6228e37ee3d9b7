/*
 * jsonparse.c: see jsonparse.h.
 * Trusts: nothing about the bytes.  Config keys: none.
 */
#include <stdint.h>
#include <string.h>

#include "lib/json.h"
#include "lib/jsonparse.h"

/* What json-c lets through even with JSON_TOKENER_STRICT (0.16): NaN and
 * Infinity, single-quoted strings, control bytes and ill-formed UTF-8 in
 * strings.  One pass over the bytes refuses them: outside strings only
 * white space, structure, number bytes and the words true, false, null;
 * inside, no control byte and well-formed UTF-8 only (json-c checks the
 * rest: the grammar, numbers, escapes).  0 ok; -1 with *at, the byte. */
static int
lexically_strict(const char *text, size_t len, size_t *at)
{
	const unsigned char *s = (const unsigned char *)text;
	static const char *const words[] = { "true", "false", "null" };
	size_t i = 0, k, w;

	while (i < len) {
		*at = i;
		if (s[i] == '"') {
			for (i++; i < len && s[i] != '"'; i += k) {
				k = 1;
				if (s[i] < 0x20)
					return -1;
				if (s[i] == '\\')
					k = 2;	/* the escape itself: json-c's */
				else if (s[i] >= 0x80 && (k = utf8_len(s + i, len - i)) == 0)
					return -1;
			}
			i++;
		} else if (strchr(" \t\r\n{}[]:,-+.0123456789", s[i]) != NULL && s[i] != '\0') {
			i++;
		} else if ((s[i] == 'e' || s[i] == 'E') && i > 0 && s[i - 1] >= '0' &&
		    s[i - 1] <= '9') {
			i++;
		} else {
			for (w = 0; w < 3; w++)
				if (len - i >= strlen(words[w]) &&
				    memcmp(s + i, words[w], strlen(words[w])) == 0)
					break;
			if (w == 3)
				return -1;
			i += strlen(words[w]);
		}
	}
	return 0;
}

struct json_object *
json_parse_strict(const char *text, size_t len, size_t max, struct buf *why)
{
	struct json_tokener *tok;
	struct json_object *o;
	enum json_tokener_error e;
	size_t end;

	if (len > max) {
		buf_printf(why, "longer than %zu bytes", max);
		return NULL;
	}
	if (len > INT32_MAX || memchr(text, '\0', len) != NULL) {
		buf_adds(why, len > INT32_MAX ? "too long" : "a NUL byte");
		return NULL;
	}
	if (lexically_strict(text, len, &end) < 0) {
		buf_printf(why, "not JSON at byte %zu", end);
		return NULL;
	}
	if ((tok = json_tokener_new_ex(JSONPARSE_DEPTH)) == NULL) {
		buf_adds(why, "out of memory");
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, text, (int)len);
	e = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (e == json_tokener_continue) {
		buf_adds(why, "the document ends early");
		goto bad;
	}
	if (e != json_tokener_success) {
		buf_printf(why, "%s at byte %zu", json_tokener_error_desc(e), end);
		goto bad;
	}
	while (end < len && strchr(" \t\r\n", text[end]) != NULL)
		end++;
	if (end < len) {
		buf_printf(why, "bytes after the document at byte %zu", end);
		goto bad;
	}
	return o;
bad:
	json_object_put(o);
	return NULL;
}

struct json_object *
json_parse_object(const char *text, size_t len, size_t max, struct buf *why)
{
	struct json_object *o = json_parse_strict(text, len, max, why);

	if (o != NULL && !json_object_is_type(o, json_type_object)) {
		buf_adds(why, "not a JSON object");
		json_object_put(o);
		return NULL;
	}
	return o;
}

struct json_object *
jp_get(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (o == NULL || !json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

int
jp_ll(struct json_object *o, long long *out)
{
	int64_t v;

	if (o == NULL || !json_object_is_type(o, json_type_int))
		return -1;
	v = json_object_get_int64(o);
	/* json-c keeps a number above INT64_MAX as unsigned; get_int64
	 * clamps it. */
	if (v == INT64_MAX && json_object_get_uint64(o) != (uint64_t)INT64_MAX)
		return -1;
	*out = v;
	return 0;
}

int
jp_u53(struct json_object *o, long long *out)
{
	long long v;

	if (jp_ll(o, &v) < 0 || v < 0 || v > (1LL << 53))
		return -1;
	*out = v;
	return 0;
}

const char *
jp_str(struct json_object *o)
{
	const char *s;

	if (o == NULL || !json_object_is_type(o, json_type_string))
		return NULL;
	s = json_object_get_string(o);
	return strlen(s) == (size_t)json_object_get_string_len(o) ? s : NULL;
}

int
jp_bool(struct json_object *o)
{
	if (o == NULL || !json_object_is_type(o, json_type_boolean))
		return -1;
	return json_object_get_boolean(o) ? 1 : 0;
}

size_t
jp_len(struct json_object *o)
{
	return o && json_object_is_type(o, json_type_array) ? json_object_array_length(o) : 0;
}

struct json_object *
jp_at(struct json_object *o, size_t i)
{
	return i < jp_len(o) ? json_object_array_get_idx(o, i) : NULL;
}

int
jp_only_keys(struct json_object *o, const char *const *keys)
{
	size_t i;

	if (o == NULL || !json_object_is_type(o, json_type_object))
		return 0;
	json_object_object_foreach(o, k, val) {
		(void)val;
		for (i = 0; keys[i] && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL)
			return 0;
	}
	return 1;
}

void
jp_wipe(struct json_object *o, const char *key)
{
	struct json_object *v = jp_get(o, key);

	/* json-c's own bytes, NULs and all: its length, not strlen. */
	if (v != NULL && json_object_is_type(v, json_type_string))
		explicit_bzero((char *)json_object_get_string(v),
		    (size_t)json_object_get_string_len(v));
}
