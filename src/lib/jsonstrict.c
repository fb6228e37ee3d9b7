/*
 * jsonstrict.c: see jsonstrict.h.
 * Trusts: nothing in the bytes.  Config keys: none.
 */
#include <limits.h>
#include <string.h>

#include "lib/jsonparse.h"
#include "lib/jsonstrict.h"

struct json_object *
jsonstrict_object(const char *s, size_t n, const char **why)
{
	struct json_tokener *tok;
	struct json_object *o;
	size_t end;

	if (n == 0 || n > INT_MAX || memchr(s, '\0', n) != NULL) {
		*why = n == 0 ? "empty" : "a NUL byte, or too long";
		return NULL;
	}
	if (json_lexically_strict(s, n, &end) < 0) {	/* what strict mode lets by */
		*why = "not strict JSON (NaN, a single quote, a control byte or bad UTF-8)";
		return NULL;
	}
	if ((tok = json_tokener_new()) == NULL) {
		*why = "out of memory";
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	o = json_tokener_parse_ex(tok, s, (int)n);
	if (o == NULL) {
		enum json_tokener_error e = json_tokener_get_error(tok);

		*why = e == json_tokener_continue ? "the JSON ends early" :
		    json_tokener_error_desc(e);
		json_tokener_free(tok);
		return NULL;
	}
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	while (end < n && (s[end] == ' ' || s[end] == '\t' || s[end] == '\r' || s[end] == '\n'))
		end++;
	if (end != n || !json_object_is_type(o, json_type_object)) {
		*why = end != n ? "bytes after the JSON object" : "not a JSON object";
		json_object_put(o);
		return NULL;
	}
	return o;
}

int
jsonstrict_str(struct json_object *o, const char *key, const char **v, size_t *n)
{
	struct json_object *x;

	if (!json_object_object_get_ex(o, key, &x) || json_object_is_type(x, json_type_null))
		return 0;
	if (!json_object_is_type(x, json_type_string))
		return -1;
	*v = json_object_get_string(x);
	*n = (size_t)json_object_get_string_len(x);
	return 1;
}

int
jsonstrict_num(struct json_object *o, const char *key, int digits, long long *v)
{
	struct json_object *x;
	const char *s;
	long long n = 0;

	if (!json_object_object_get_ex(o, key, &x))
		return 0;
	if (json_object_is_type(x, json_type_int)) {
		n = (long long)json_object_get_int64(x);
	} else if (digits && json_object_is_type(x, json_type_string)) {
		s = json_object_get_string(x);
		if (*s == '\0' || strlen(s) > 15)
			return -1;
		for (; *s; s++) {
			if (*s < '0' || *s > '9')
				return -1;
			n = n * 10 + (*s - '0');
		}
	} else {
		return -1;
	}
	if (n < 0 || n > (1LL << 53))
		return -1;
	*v = n;
	return 1;
}

int
jsonstrict_bool(struct json_object *o, const char *key, int *v)
{
	struct json_object *x;

	if (!json_object_object_get_ex(o, key, &x))
		return 0;
	if (!json_object_is_type(x, json_type_boolean))
		return -1;
	*v = json_object_get_boolean(x);
	return 1;
}

int
jsonstrict_only_keys(struct json_object *o, const char *const *keys)
{
	size_t i;

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
jsonstrict_wipe(struct json_object *o, const char *key)
{
	const char *v;
	size_t n;

	if (o && jsonstrict_str(o, key, &v, &n) == 1)
		explicit_bzero((char *)v, n);
}
