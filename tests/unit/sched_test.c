/*
 * sched_test.c: weir-send's retry schedule, sched_next_retry()
 * (src/send/sched.c): qmail's birth + (floor(sqrt(now - birth)) + skip)^2
 * at several ages, at exact squares and one second short of them (where
 * a floating-point square root could round up), with skip 0 and qmail's
 * remote skip 20, and with the clock behind the birth time.  weir's own
 * note sched/S/N (mail/schedfile.c): format and strict parsing, and
 * sched/alive.  delay_warning in weir.conf: off by default, and refused
 * (with file and line) unless shorter than queue_lifetime.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "mail/schedfile.h"
#include "send/sched.h"
#include "testlib.h"

#define B 1700000000LL

static void
at(long long age, unsigned skip, long long want_offset)
{
	long long got = sched_next_retry(B, B + age, skip);

	cr_assert_eq(got, B + want_offset, "age %lld, skip %u: birth + %lld, expected birth + %lld",
	    age, skip, got - B, want_offset);
}

Test(sched, retry_skip20)
{
	at(0, 20, 400);			/* (0 + 20)^2 */
	at(1, 20, 441);			/* (1 + 20)^2 */
	at(3, 20, 441);
	at(4, 20, 484);
	at(399, 20, 1521);		/* floor(sqrt(399)) = 19 */
	at(400, 20, 1600);
	at(441, 20, 1681);		/* 21 + 20 */
	at(3600, 20, 6400);		/* 60 + 20 */
	at(86400, 20, 313 * 313);	/* floor(293.9) = 293 */
	at(604800, 20, 797 * 797);	/* 7 days: floor(777.7) = 777 */
}

Test(sched, retry_next_is_later)
{
	/* The retry after an attempt at the scheduled time is later still. */
	long long t = B, i;

	for (i = 0; i < 50; i++) {
		long long n = sched_next_retry(B, t, 20);

		cr_assert(n > t, "attempt %lld at birth + %lld: next %lld is not later", i, t - B,
		    n - B);
		t = n;
	}
}

Test(sched, retry_skip0)
{
	at(0, 0, 0);
	at(10, 0, 9);
	at(15, 0, 9);
	at(16, 0, 16);
	at(1000000, 0, 1000000);
}

/* floor(sqrt(n^2 - 1)) is n - 1, even where double rounding is close. */
Test(sched, retry_exact_squares)
{
	long long n;

	for (n = 1; n < 100000000LL; n = n * 3 + 1) {
		at(n * n, 20, (n + 20) * (n + 20));
		at(n * n - 1, 20, (n + 19) * (n + 19));
	}
}

Test(sched, retry_clock_behind_birth)
{
	at(-1, 20, 400);
	at(-86400, 20, 400);
}

/* ---- sched/S/N ---- */

Test(schedfile, format_and_parse)
{
	struct schednote n = { 1700000000, 3600, 1700007200, 0 }, got;
	struct buf b = BUF_INIT, why = BUF_INIT;
	static const char want[] = "birth 1700000000\nwaited 3600\nsince 1700007200\nwarned 0\n";

	schedfile_format(&n, &b);
	cr_assert_str_eq(buf_cstr(&b), want);
	memset(&got, 0xff, sizeof got);
	cr_assert_eq(schedfile_parse(b.s, b.len, &got, &why), 0, "%s", buf_cstr(&why));
	cr_assert(got.birth == n.birth && got.waited == n.waited && got.since == n.since &&
	    got.warned == n.warned);
	buf_free(&b);
	buf_free(&why);
}

Test(schedfile, strict)
{
	static const char *const bad[] = {
		"",
		"birth 1\nwaited 2\nsince 3\n",			/* a line short */
		"birth 1\nwaited 2\nsince 3\nwarned 4",		/* no final newline */
		"birth 1\nwaited 2\nsince 3\nwarned 4\n\n",	/* bytes after */
		"birth 1\nwaited 02\nsince 3\nwarned 4\n",	/* leading zero */
		"birth 1\nwaited -2\nsince 3\nwarned 4\n",
		"birth 1\nwaited  2\nsince 3\nwarned 4\n",
		"birth 1\nwaited 2 \nsince 3\nwarned 4\n",
		"birth 1\nsince 3\nwaited 2\nwarned 4\n",		/* order */
		"birth 1234567890123456789\nwaited 2\nsince 3\nwarned 4\n",	/* 19 digits */
		"Birth 1\nwaited 2\nsince 3\nwarned 4\n",
	};
	static const char ok[] = "birth 123456789012345678\nwaited 0\nsince 0\nwarned 0\n";
	struct schednote n;
	struct buf why = BUF_INIT;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		buf_reset(&why);
		cr_assert_eq(schedfile_parse(bad[i], strlen(bad[i]), &n, &why), -1,
		    "accepted \"%s\"", bad[i]);
		cr_assert(why.len > 0, "no reason for \"%s\"", bad[i]);
	}
	cr_assert_eq(schedfile_parse(ok, sizeof ok - 1, &n, &why), 0, "%s", buf_cstr(&why));
	cr_assert_eq(n.birth, 123456789012345678LL);
	buf_free(&why);
}

Test(schedfile, alive)
{
	long long t = 0;

	cr_assert_eq(schedfile_parse_alive("1700000000\n", 11, &t), 0);
	cr_assert_eq(t, 1700000000LL);
	cr_assert_eq(schedfile_parse_alive("1700000000", 10, &t), -1);
	cr_assert_eq(schedfile_parse_alive("17x\n", 4, &t), -1);
	cr_assert_eq(schedfile_parse_alive("\n", 1, &t), -1);
}

/* sched/waits: lines of four numbers, read back sorted by id and found
 * by it; anything else refused with the line that was wrong. */
Test(schedfile, waits_format_and_parse)
{
	struct schedwait in[] = { { 917, 1700000000, 0, 1700000100 },
		{ 12, 1700000001, 3600, 1700007200 } }, *v;
	struct buf b = BUF_INIT, why = BUF_INIT;
	size_t n, i;

	for (i = 0; i < 2; i++)
		schedfile_format_wait(&in[i], &b);
	cr_assert_str_eq(buf_cstr(&b), "917 1700000000 0 1700000100\n12 1700000001 3600 1700007200\n");
	{
		/* Written by hand, not printf: the widest numbers too. */
		const struct schedwait wide = { 18446744073709551615UL, 999999999999999999LL, 10,
			100000 };
		struct buf w = BUF_INIT;

		schedfile_format_wait(&wide, &w);
		cr_assert_str_eq(buf_cstr(&w), "18446744073709551615 999999999999999999 10 100000\n");
		buf_free(&w);
	}
	cr_assert_eq(schedfile_parse_waits(b.s, b.len, &v, &n, &why), 0, "%s", buf_cstr(&why));
	cr_assert_eq(n, 2);
	cr_assert(v[0].id == 12 && v[0].waited == 3600 && v[1].id == 917 && v[1].since == 1700000100);
	cr_assert(schedfile_find_wait(v, n, 917) == &v[1]);
	cr_assert(schedfile_find_wait(v, n, 13) == NULL);
	free(v);
	cr_assert_eq(schedfile_parse_waits("", 0, &v, &n, &why), 0);
	cr_assert(n == 0 && schedfile_find_wait(v, n, 1) == NULL);
	free(v);
	buf_free(&b);
	buf_free(&why);
}

Test(schedfile, waits_strict)
{
	static const char *const bad[] = {
		"1 2 3 4",			/* no final newline */
		"1 2 3\n",			/* a number short */
		"1 2 3 4 5\n",
		"1 2 3 4\n\n",			/* an empty line */
		"1  2 3 4\n",
		"1 2 03 4\n",			/* leading zero */
		"1 2 -3 4\n",
		"1 2 3 1234567890123456789\n",	/* 19 digits */
		"1 2 3 4\nx\n",
	};
	struct schedwait *v = (struct schedwait *)1;
	struct buf why = BUF_INIT;
	size_t i, n = 7;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		buf_reset(&why);
		cr_assert_eq(schedfile_parse_waits(bad[i], strlen(bad[i]), &v, &n, &why), -1,
		    "accepted \"%s\"", bad[i]);
		cr_assert(v == NULL && n == 0 && strstr(buf_cstr(&why), "line "), "\"%s\": %s",
		    bad[i], buf_cstr(&why));
	}
	buf_reset(&why);
	cr_assert_eq(schedfile_parse_waits("1 2 3 4\n5 6 7\n", 14, &v, &n, &why), -1);
	cr_assert(strstr(buf_cstr(&why), "line 2"), "%s", buf_cstr(&why));
	buf_free(&why);
}

Test(schedfile, path_is_split)
{
	struct queue q = { -1, 23, NULL };
	char p[QPATH_MAX];

	schedfile_path(p, &q, 1000);
	cr_assert_str_eq(p, "sched/11/1000");
	schedfile_dirpath(p, &q, 1000);
	cr_assert_str_eq(p, "sched/11");
}

/* ---- delay_warning in weir.conf ---- */

static int
load(const char *text, struct buf *err, struct weir_config *c)
{
	char *dir = tl_tmpdir(), *f = xasprintf("%s/weir.conf", dir);
	int r;

	tl_write(f, text, strlen(text));
	r = config_load(c, f, err);
	tl_rmtree(dir);
	free(dir);
	free(f);
	return r;
}

Test(schedconf, delay_warning)
{
	struct weir_config c;
	struct buf err = BUF_INIT;

	cr_assert_eq(load("hostname = \"h.example\"\n", &err, &c), 0, "%s", buf_cstr(&err));
	cr_assert_eq(c.delay_warning, 0, "on by default");
	config_free(&c);
	cr_assert_eq(load("delay_warning = \"4h\"\n", &err, &c), 0, "%s", buf_cstr(&err));
	cr_assert_eq(c.delay_warning, 4 * 3600);
	config_free(&c);
	/* Not shorter than the lifetime: refused where the second is set. */
	cr_assert_eq(load("queue_lifetime = \"1d\"\n\ndelay_warning = \"1d\"\n", &err, &c), -1);
	cr_assert(strstr(buf_cstr(&err), "weir.conf:3: delay_warning (86400 s) must be shorter than "
	    "queue_lifetime (86400 s)"), "%s", buf_cstr(&err));
	config_free(&c);
	buf_reset(&err);
	cr_assert_eq(load("delay_warning = \"8d\"\n", &err, &c), -1);	/* default lifetime 7d */
	cr_assert(strstr(buf_cstr(&err), "weir.conf:1: delay_warning"), "%s", buf_cstr(&err));
	config_free(&c);
	buf_reset(&err);
	cr_assert_eq(load("delay_warning = \"2d\"\nqueue_lifetime = \"1d\"\n", &err, &c), -1);
	cr_assert(strstr(buf_cstr(&err), "weir.conf:2: delay_warning (172800 s)"), "%s",
	    buf_cstr(&err));
	config_free(&c);
	buf_reset(&err);
	cr_assert_eq(load("queue_lifetime = \"1d\"\ndelay_warning = \"0s\"\n", &err, &c), 0, "%s",
	    buf_cstr(&err));
	config_free(&c);
	buf_free(&err);
}
