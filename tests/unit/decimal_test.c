/* decimal_test.c: lib/decimal.h, the strict reading of unsigned decimals. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/decimal.h"

Test(decimal, whole)
{
	static const struct { const char *s; uint64_t max, v; } ok[] = {
		{ "0", 0, 0 }, { "0", 10, 0 }, { "7", 7, 7 }, { "10", 10, 10 },
		{ "4294967295", UINT32_MAX, UINT32_MAX },
		{ "18446744073709551615", UINT64_MAX, UINT64_MAX },
		{ "65535", 65535, 65535 }, { "19", 19, 19 }, { "2", 19, 2 },
		{ "18446744073709551614", UINT64_MAX - 1, UINT64_MAX - 1 },
	};
	static const struct { const char *s; uint64_t max; } bad[] = {
		{ "", 10 }, { "00", 10 }, { "01", 10 }, { "+1", 10 }, { "-1", 10 }, { " 1", 10 },
		{ "1 ", 10 }, { "1x", 10 }, { "x", 10 }, { "11", 10 }, { "8", 7 }, { "1", 0 },
		{ "4294967296", UINT32_MAX }, { "18446744073709551616", UINT64_MAX },
		{ "99999999999999999999999", UINT64_MAX }, { "65536", 65535 },
		{ "18446744073709551620", UINT64_MAX }, { "28446744073709551615", UINT64_MAX },
		{ "20", 19 }, { "\t1", 10 }, { "1\n", 10 }, { "\n", 10 }, { "0x1", 100 },
		{ "1e1", 100 }, { "1.0", 100 }, { "1,0", 100 }, { "\xff", 10 }, { "1\xff", 10 },
		{ "\xd9\xa3", 10 }, { "\xef\xbc\x91", 10 }, { "-0", 10 }, { "+0", 10 },
		{ "0000000000000000000001", UINT64_MAX },
	};
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		v = 12345;
		cr_assert_eq(dec_parse(ok[i].s, strlen(ok[i].s), ok[i].max, &v), 0, "%s", ok[i].s);
		cr_assert_eq(v, ok[i].v, "%s", ok[i].s);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		v = 12345;
		cr_assert_eq(dec_parse(bad[i].s, strlen(bad[i].s), bad[i].max, &v), -1, "%s",
		    bad[i].s);
		cr_assert_eq(v, 12345, "%s: *v written on failure", bad[i].s);
	}
	/* The bytes given, not the string: a NUL is a byte like another. */
	cr_assert_eq(dec_parse("12\0", 3, 100, &v), -1);
	cr_assert_eq(dec_parse("123", 2, 100, &v), 0);
	cr_assert_eq(v, 12);
}

Test(decimal, prefix)
{
	static const struct { const char *s; size_t n; uint64_t v; } t[] = {
		{ "0", 1, 0 }, { "0 ", 1, 0 }, { "0x", 1, 0 }, { "12 34", 2, 12 },
		{ "250\n", 3, 250 }, { "999", 3, 999 },
		{ "", 0, 0 }, { "x1", 0, 0 }, { "01", 0, 0 }, { "00 ", 0, 0 }, { "-1", 0, 0 },
		{ "1000", 0, 0 }, { "1000 ", 0, 0 },
	};
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		v = 12345;
		cr_assert_eq(dec_prefix(t[i].s, strlen(t[i].s), 999, &v), t[i].n, "\"%s\"", t[i].s);
		cr_assert_eq(v, t[i].n ? t[i].v : 12345, "\"%s\"", t[i].s);
	}
}

/* Every value near a power of ten and near the bounds reads back as
 * printf writes it when it is at most max, and never with a 0 before it. */
Test(decimal, printed)
{
	static const uint64_t max[] = { 0, 9, 10, 255, 65535, UINT32_MAX, 999999999999999ULL,
		(uint64_t)1 << 53, INT64_MAX, UINT64_MAX - 1, UINT64_MAX };
	char s[32];
	uint64_t p, x, v;
	size_t i, m;
	int d, n;

	for (m = 0; m < sizeof max / sizeof max[0]; m++) {
		for (p = 1, i = 0; i < 20; i++, p *= 10) {
			for (d = -3; d <= 3; d++) {
				x = p + (uint64_t)(int64_t)d;
				if ((d < 0 && x > p) || (d > 0 && x < p))
					continue;	/* wrapped */
				n = snprintf(s, sizeof s, "%llu", (unsigned long long)x);
				v = 12345;
				cr_assert_eq(dec_parse(s, (size_t)n, max[m], &v), x <= max[m] ? 0 : -1,
				    "%s at most %llu", s, (unsigned long long)max[m]);
				cr_assert_eq(v, x <= max[m] ? x : 12345, "%s", s);
				cr_assert_eq(dec_prefix(s, (size_t)n, max[m], &v), x <= max[m] ? (size_t)n : 0);
				n = snprintf(s, sizeof s, "0%llu", (unsigned long long)x);
				cr_assert_eq(dec_parse(s, (size_t)n, UINT64_MAX, &v), -1, "%s", s);
			}
		}
		n = snprintf(s, sizeof s, "%llu", (unsigned long long)max[m]);
		cr_assert_eq(dec_parse(s, (size_t)n, max[m], &v), 0, "%s", s);
		cr_assert_eq(v, max[m]);
	}
}
