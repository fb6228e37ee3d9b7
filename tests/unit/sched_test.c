/*
 * sched_test.c: weir-send's retry schedule, sched_next_retry()
 * (src/send/sched.c): qmail's birth + (floor(sqrt(now - birth)) + skip)^2
 * at several ages, at exact squares and one second short of them (where
 * a floating-point square root could round up), with skip 0 and qmail's
 * remote skip 20, and with the clock behind the birth time.
 */
#include <criterion/criterion.h>

#include "send/sched.h"

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
