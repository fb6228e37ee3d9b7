/*
 * jsonparse_test.c: lib/jsonparse.c, the strict JSON reader on json-c:
 * good documents and what the accessors make of them, every kind of
 * malformed text (refused, with a reason), the size and depth bounds;
 * a document that must be one object; the members an object may have,
 * whole numbers from 0 to 2^53, and a secret wiped in place.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/jsonparse.h"

#define S(x) x, sizeof(x) - 1

Test(jsonparse, values_and_accessors)
{
	const char *doc = " {\"a\": [1, -2, 3.5e2, true, false, null], \"s\": \"x\\\"\\u00e9\\ud83d\\ude00\","
	    " \"o\": {}, \"big\": 9223372036854775807, \"over\": 9223372036854775808,"
	    " \"nul\": \"a\\u0000b\"}\n";
	struct buf why = BUF_INIT;
	struct json_object *v = json_parse_strict(doc, strlen(doc), 4096, &why), *a;
	long long n;

	cr_assert_not_null(v, "%s", buf_cstr(&why));
	a = jp_get(v, "a");
	cr_assert_eq(jp_len(a), 6);
	cr_assert_eq(jp_ll(jp_at(a, 1), &n), 0);
	cr_assert_eq(n, -2);
	cr_assert_eq(jp_ll(jp_at(a, 2), &n), -1, "a fraction read as an integer");
	cr_assert_eq(jp_bool(jp_at(a, 3)), 1);
	cr_assert_eq(jp_bool(jp_at(a, 4)), 0);
	cr_assert_eq(jp_bool(jp_at(a, 0)), -1);
	cr_assert_null(jp_at(a, 5));
	cr_assert_null(jp_at(a, 6));
	cr_assert_str_eq(jp_str(jp_get(v, "s")), "x\"\xc3\xa9\xf0\x9f\x98\x80");
	cr_assert_null(jp_str(jp_get(v, "nul")), "a string with a NUL in it");
	cr_assert_null(jp_str(a));
	cr_assert_eq(jp_len(jp_get(v, "o")), 0);
	cr_assert_null(jp_get(v, "missing"));
	cr_assert_null(jp_get(a, "a"), "a member of an array");
	cr_assert_eq(jp_ll(jp_get(v, "big"), &n), 0);
	cr_assert_eq(n, 9223372036854775807LL);
	cr_assert_eq(jp_ll(jp_get(v, "over"), &n), -1, "2^63 read as a long long");
	json_object_put(v);
	buf_free(&why);
}

Test(jsonparse, malformed_refused)
{
	static const char *const bad[] = {
		"", " ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", "-", "1e", "tru",
		"\"a", "\"\\x\"", "\"a\tb\"", "[1] 2", "{1:2}", "{'a':1}", "[NaN]", "[Infinity]",
		"/* c */ 1", "[1] // c", "True", "\"\xff\"", "\"\xc0\xaf\"", "{\"a\":1}}",
		"\"\xed\xa0\x80\"", "[-Infinity]", "[0x10]", "[+1]", "[.5]", "[1e]", "[truex]",
		"\"\x7f\x01\"", "[\"a\\\"]",
	};
	struct buf why = BUF_INIT;
	struct json_object *v;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		buf_reset(&why);
		v = json_parse_strict(bad[i], strlen(bad[i]), 4096, &why);
		cr_expect_null(v, "accepted: %s", bad[i]);
		json_object_put(v);
		cr_expect_gt(why.len, 0, "no reason for: %s", bad[i]);
	}
	cr_assert_null(json_parse_strict(S("[\"a\0\"]"), 4096, &why));
	cr_assert_null(json_parse_strict(S("[1]\0"), 4096, &why));
	buf_free(&why);
}

Test(jsonparse, size_and_depth_bounded)
{
	struct buf b = BUF_INIT, why = BUF_INIT;
	struct json_object *v;
	int i;

	for (i = 0; i < JSONPARSE_DEPTH; i++)
		buf_addc(&b, '[');
	for (i = 0; i < JSONPARSE_DEPTH; i++)
		buf_addc(&b, ']');
	v = json_parse_strict(b.s, b.len, 4096, &why);
	cr_assert_not_null(v, "%d deep: %s", JSONPARSE_DEPTH, buf_cstr(&why));
	json_object_put(v);
	buf_reset(&b);
	for (i = 0; i < 1000; i++)
		buf_addc(&b, '[');
	for (i = 0; i < 1000; i++)
		buf_addc(&b, ']');
	cr_assert_null(json_parse_strict(b.s, b.len, 4096, &why));
	buf_reset(&why);
	cr_assert_null(json_parse_strict(S("[1, 2]"), 5, &why));
	cr_assert(strstr(buf_cstr(&why), "longer than 5 bytes"), "%s", buf_cstr(&why));
	buf_free(&b);
	buf_free(&why);
}

Test(jsonparse, one_object_and_nothing_after_it)
{
	static const char *const bad[] = {
		"", "[]", "1", "\"a\"", "null", "{} {}", "{}x", "{\"a\":1} 2", "{\"a\":1,}",
		"{'a':1}", "{\"a\":NaN}", "/* c */ {}",
	};
	struct buf why = BUF_INIT;
	struct json_object *v;
	size_t i;

	v = json_parse_object(S(" {\"a\": 1}\r\n\t"), 4096, &why);
	cr_assert_not_null(v, "%s", buf_cstr(&why));
	json_object_put(v);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		buf_reset(&why);
		v = json_parse_object(bad[i], strlen(bad[i]), 4096, &why);
		cr_expect_null(v, "accepted: %s", bad[i]);
		json_object_put(v);
		cr_expect_gt(why.len, 0, "no reason for: %s", bad[i]);
	}
	buf_reset(&why);
	cr_assert_null(json_parse_object(S("[1]"), 4096, &why));
	cr_assert_str_eq(buf_cstr(&why), "not a JSON object");
	buf_reset(&why);
	cr_assert_null(json_parse_object(S("{\"a\":1}"), 6, &why), "over the bound");
	cr_assert(strstr(buf_cstr(&why), "longer than 6 bytes"), "%s", buf_cstr(&why));
	buf_free(&why);
}

Test(jsonparse, u53_and_only_keys)
{
	static const char doc[] = "{\"zero\":0,\"top\":9007199254740992,\"over\":9007199254740993,"
	    "\"neg\":-1,\"frac\":1.5,\"exp\":1e3,\"str\":\"5\",\"nul\":null}";
	static const char *const some[] = { "zero", "top", NULL };
	static const char *const all[] = { "zero", "top", "over", "neg", "frac", "exp", "str",
	    "nul", NULL };
	struct buf why = BUF_INIT;
	struct json_object *v = json_parse_object(S(doc), 4096, &why);
	long long n = 7;

	cr_assert_not_null(v, "%s", buf_cstr(&why));
	cr_assert_eq(jp_u53(jp_get(v, "zero"), &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(jp_u53(jp_get(v, "top"), &n), 0);
	cr_assert_eq(n, 1LL << 53);
	n = 7;
	cr_assert_eq(jp_u53(jp_get(v, "over"), &n), -1, "2^53 + 1");
	cr_assert_eq(jp_u53(jp_get(v, "neg"), &n), -1);
	cr_assert_eq(jp_u53(jp_get(v, "frac"), &n), -1);
	cr_assert_eq(jp_u53(jp_get(v, "exp"), &n), -1, "an exponent is no whole number here");
	cr_assert_eq(jp_u53(jp_get(v, "str"), &n), -1, "a string of digits");
	cr_assert_eq(jp_u53(jp_get(v, "nul"), &n), -1);
	cr_assert_eq(jp_u53(jp_get(v, "missing"), &n), -1);
	cr_assert_eq(n, 7, "changed by a refusal");
	cr_assert_eq(jp_only_keys(v, all), 1);
	cr_assert_eq(jp_only_keys(v, some), 0, "six members not named");
	cr_assert_eq(jp_only_keys(jp_get(v, "zero"), all), 0, "not an object");
	cr_assert_eq(jp_only_keys(NULL, all), 0);
	json_object_put(v);
	buf_free(&why);
}

Test(jsonparse, wipe_in_place)
{
	struct buf why = BUF_INIT;
	struct json_object *v = json_parse_object(S("{\"t\":\"s3cr\\u0000et\",\"n\":5}"), 4096,
	    &why);
	const char *t;
	size_t i, n;

	cr_assert_not_null(v, "%s", buf_cstr(&why));
	t = json_object_get_string(jp_get(v, "t"));
	n = (size_t)json_object_get_string_len(jp_get(v, "t"));
	cr_assert_eq(n, 7);
	jp_wipe(v, "t");
	for (i = 0; i < n; i++)
		cr_assert_eq(t[i], '\0', "byte %zu left after the NUL", i);
	jp_wipe(v, "n");	/* not a string: nothing */
	jp_wipe(v, "missing");
	jp_wipe(NULL, "t");
	cr_assert_eq(json_object_get_int(jp_get(v, "n")), 5);
	json_object_put(v);
	buf_free(&why);
}
