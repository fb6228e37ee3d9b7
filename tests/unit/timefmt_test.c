/* timefmt_test.c: durations and mail dates. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/timefmt.h"

Test(duration, good)
{
	static const struct { const char *s; long long v; } ok[] = {
		{ "30s", 30 }, { "5m", 300 }, { "1h30m", 5400 }, { "7d", 604800 },
		{ "2w", 1209600 }, { "0s", 0 }, { "24h", 86400 }, { "1d1s", 86401 },
	};
	const char *why;
	long long v;
	size_t i;

	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		cr_assert_eq(duration_parse(ok[i].s, &v, &why), 0, "%s", ok[i].s);
		cr_assert_eq(v, ok[i].v, "%s: %lld", ok[i].s, v);
	}
}

Test(duration, bad)
{
	static const char *const bad[] = {
		"", "5", "m", "5x", "-5s", "5 m", "1.5h", "99999999999999999999s", "5mm",
	};
	const char *why = NULL;
	long long v;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(duration_parse(bad[i], &v, &why), -1, "%s", bad[i]);
		cr_assert_not_null(why);
	}
}

Test(date, qmail_format)
{
	char b[DATE_QMAIL_MAX];

	date_qmail(b, 0);
	cr_assert_str_eq(b, "1 Jan 1970 00:00:00 -0000");
	date_qmail(b, 1795304566);
	cr_assert_str_eq(b, "21 Nov 2026 23:42:46 -0000");
}

Test(date, rfc5322_format)
{
	char b[DATE_RFC5322_MAX];

	setenv("TZ", "UTC", 1);
	date_rfc5322(b, 1795304566);
	cr_assert_str_eq(b, "Sat, 21 Nov 2026 23:42:46 +0000");
	setenv("TZ", "EST5", 1);	/* POSIX form: needs no tzdata */
	tzset();
	date_rfc5322(b, 1795304566);
	cr_assert_str_eq(b, "Sat, 21 Nov 2026 18:42:46 -0500");
}

Test(date, iso_format_and_parse)
{
	char b[32];

	date_iso(b, sizeof b, 1795304566);
	cr_assert_str_eq(b, "2026-11-21T23:42:46Z");
	cr_assert_eq(date_iso_parse(b), 1795304566);
	cr_assert_eq(date_iso_parse("1970-01-01T00:00:00Z"), 0);
	cr_assert_eq(date_iso_parse("2026-11-21T23:42:46"), -1);
	cr_assert_eq(date_iso_parse("2026-11-21T23:42:46Z "), -1);
	cr_assert_eq(date_iso_parse("2026-11-21 23:42:46Z"), -1);
	cr_assert_eq(date_iso_parse(""), -1);
	cr_assert_eq(date_iso_parse(NULL), -1);
}

Test(duration, fmt)
{
	char b[64];

	duration_format(b, sizeof b, 0);
	cr_assert_str_eq(b, "0s");
	duration_format(b, sizeof b, -5);
	cr_assert_str_eq(b, "0s");
	duration_format(b, sizeof b, 90);
	cr_assert_str_eq(b, "1m30s");
	duration_format(b, sizeof b, 86400 + 7200 + 1);
	cr_assert_str_eq(b, "1d2h1s");
}
