/*
 * cleanup_test.c: cleanup_pass() (src/send/cleanup.c, QUEUE.md
 * "Cleanup"): messages left in S2 (mess only) or S3 (mess + intd) whose
 * mess/ file is more than 36 hours old lose intd/N and mess/S/N; pid/
 * files more than 36 hours old go; younger ones stay; messages in S4
 * (todo) or S5 (info), however old, are never touched; the count it
 * returns; names that are not message numbers are left alone.  Mtimes
 * are set with utimensat relative to the `now` given.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send/cleanup.h"
#include "send_helpers.h"

#define S(x) x, sizeof(x) - 1
#define H 3600

static struct sht s;
static time_t now;

static void
setup(void)
{
	sh_setup(&s, NULL);
	now = time(NULL);
}

static void teardown(void) { sh_teardown(&s); }

TestSuite(cleanup, .init = setup, .fini = teardown, .timeout = 30);

static void
age(enum qdir d, unsigned long id, time_t secs)
{
	char *p = sh_qpath(&s, d, id);

	sh_set_mtime(p, now - secs);
	free(p);
}

/* S2: mess/S/N only, age secs. */
static unsigned long
s2(time_t secs)
{
	unsigned long id = sh_put_mess(&s, S("message\n"));

	age(Q_MESS, id, secs);
	return id;
}

/* S3: mess and intd. */
static unsigned long
s3(time_t mess_age, time_t intd_age)
{
	unsigned long id = s2(mess_age);

	sh_write(&s, Q_INTD, id, S("u1\0p2\0Fa@b\0"));
	age(Q_INTD, id, intd_age);
	return id;
}

static char *
pidfile(const char *name, time_t secs)
{
	char *p = xasprintf("%s/pid/%s", s.qt.qdir, name);

	tl_write(p, "", 0);
	sh_set_mtime(p, now - secs);
	return p;
}

Test(cleanup, old_s2_removed)
{
	unsigned long id = s2(36 * H + 1);

	cr_assert_eq(cleanup_pass(&s.q, now), 1);
	cr_assert(!sh_exists(&s, Q_MESS, id), "old S2 message kept");
}

Test(cleanup, old_s3_removed)
{
	unsigned long id = s3(37 * H, 37 * H);

	cr_assert_eq(cleanup_pass(&s.q, now), 2);
	cr_assert(!sh_exists(&s, Q_MESS, id), "old S3 mess kept");
	cr_assert(!sh_exists(&s, Q_INTD, id), "old S3 intd kept");
}

/* The age that counts is mess/'s (QUEUE.md). */
Test(cleanup, s3_age_is_mess_age)
{
	unsigned long a = s3(40 * H, 1);
	unsigned long b = s3(1, 40 * H);

	cr_assert_eq(cleanup_pass(&s.q, now), 2);
	cr_assert(!sh_exists(&s, Q_MESS, a));
	cr_assert(!sh_exists(&s, Q_INTD, a));
	cr_assert(sh_exists(&s, Q_MESS, b), "young S3 mess removed");
	cr_assert(sh_exists(&s, Q_INTD, b), "young S3 intd removed");
}

Test(cleanup, young_kept)
{
	unsigned long a = s2(36 * H - 1), b = s3(35 * H, 35 * H), c = s2(0);
	char *p = pidfile("123.456.1", 36 * H - 1);

	cr_assert_eq(cleanup_pass(&s.q, now), 0);
	sh_assert_file(&s, Q_MESS, a, S("message\n"));
	sh_assert_file(&s, Q_MESS, b, S("message\n"));
	sh_assert_file(&s, Q_INTD, b, S("u1\0p2\0Fa@b\0"));
	sh_assert_file(&s, Q_MESS, c, S("message\n"));
	cr_assert(access(p, F_OK) == 0, "young pid/ file removed");
	free(p);
}

/* A message from the future (clock stepped back) is young. */
Test(cleanup, future_kept)
{
	unsigned long a = s2(-10 * H);

	cr_assert_eq(cleanup_pass(&s.q, now), 0);
	cr_assert(sh_exists(&s, Q_MESS, a));
}

Test(cleanup, pid_files)
{
	char *old1 = pidfile("111.1700000000.1", 36 * H + 5);
	char *old2 = pidfile("222.1600000000.7", 1000 * H);
	char *young = pidfile("333.1700000000.2", 2 * H);

	cr_assert_eq(cleanup_pass(&s.q, now), 2);
	cr_assert(access(old1, F_OK) != 0, "old pid/ file kept");
	cr_assert(access(old2, F_OK) != 0, "old pid/ file kept");
	cr_assert(access(young, F_OK) == 0, "young pid/ file removed");
	free(old1);
	free(old2);
	free(young);
}

/* S4: todo/N (with or without intd, info, remote) is never cleaned. */
Test(cleanup, old_s4_untouched)
{
	unsigned long a = sh_put_s4(&s, S("message\n"), S("u1\0p2\0Fa@b\0Tc@d\0"), 1);
	unsigned long b = sh_put_s4(&s, S("message\n"), S("u1\0p2\0Fa@b\0Tc@d\0"), 0);

	age(Q_MESS, a, 100 * H);
	age(Q_TODO, a, 100 * H);
	age(Q_MESS, b, 100 * H);
	age(Q_TODO, b, 100 * H);
	sh_write(&s, Q_INFO, b, S("Fa@b\0"));
	age(Q_INFO, b, 100 * H);
	cr_assert_eq(cleanup_pass(&s.q, now), 0);
	sh_assert_file(&s, Q_MESS, a, S("message\n"));
	sh_assert_file(&s, Q_INTD, a, S("u1\0p2\0Fa@b\0Tc@d\0"));
	sh_assert_file(&s, Q_TODO, a, S("u1\0p2\0Fa@b\0Tc@d\0"));
	sh_assert_file(&s, Q_MESS, b, S("message\n"));
	sh_assert_file(&s, Q_TODO, b, S("u1\0p2\0Fa@b\0Tc@d\0"));
	sh_assert_file(&s, Q_INFO, b, S("Fa@b\0"));
}

/* S5: info/N, however old, with or without remote/ and bounce/. */
Test(cleanup, old_s5_untouched)
{
	unsigned long a = s2(200 * H), b = s2(200 * H), c = s2(200 * H);

	sh_write(&s, Q_INFO, a, S("Fa@b\0"));
	age(Q_INFO, a, 200 * H);
	sh_write(&s, Q_INFO, b, S("Fa@b\0"));
	sh_write(&s, Q_REMOTE, b, S("Tc@d\0"));
	age(Q_INFO, b, 200 * H);
	age(Q_REMOTE, b, 200 * H);
	sh_write(&s, Q_INFO, c, S("F\0"));
	sh_write(&s, Q_REMOTE, c, S("Dc@d\0"));
	sh_write(&s, Q_BOUNCE, c, S("<c@d>:\n550 no\n\n"));
	age(Q_INFO, c, 200 * H);
	age(Q_BOUNCE, c, 200 * H);
	cr_assert_eq(cleanup_pass(&s.q, now), 0);
	sh_assert_file(&s, Q_MESS, a, S("message\n"));
	sh_assert_file(&s, Q_INFO, a, S("Fa@b\0"));
	sh_assert_file(&s, Q_MESS, b, S("message\n"));
	sh_assert_file(&s, Q_REMOTE, b, S("Tc@d\0"));
	sh_assert_file(&s, Q_MESS, c, S("message\n"));
	sh_assert_file(&s, Q_REMOTE, c, S("Dc@d\0"));
	sh_assert_file(&s, Q_BOUNCE, c, S("<c@d>:\n550 no\n\n"));
}

/* Old and young, S2 to S5 together: only the old S2/S3 and pid go. */
Test(cleanup, mixed)
{
	unsigned long o2 = s2(50 * H), o3 = s3(50 * H, 50 * H), y2 = s2(H);
	unsigned long o5 = s2(50 * H);
	char *op = pidfile("1.2.3", 50 * H), *yp = pidfile("4.5.6", H);

	sh_write(&s, Q_INFO, o5, S("Fa@b\0"));
	cr_assert_eq(cleanup_pass(&s.q, now), 4);
	cr_assert(!sh_exists(&s, Q_MESS, o2));
	cr_assert(!sh_exists(&s, Q_MESS, o3));
	cr_assert(!sh_exists(&s, Q_INTD, o3));
	cr_assert(sh_exists(&s, Q_MESS, y2));
	cr_assert(sh_exists(&s, Q_MESS, o5));
	cr_assert(sh_exists(&s, Q_INFO, o5));
	cr_assert(access(op, F_OK) != 0);
	cr_assert(access(yp, F_OK) == 0);
	/* A second pass finds nothing more. */
	cr_assert_eq(cleanup_pass(&s.q, now), 0);
	free(op);
	free(yp);
}

/* Names in mess/S that are not message numbers are not ours. */
Test(cleanup, foreign_names_left)
{
	char *f1 = xasprintf("%s/mess/0/notanumber", s.qt.qdir);
	char *f2 = xasprintf("%s/mess/0/0123", s.qt.qdir);

	tl_write(f1, S("x"));
	tl_write(f2, S("x"));
	sh_set_mtime(f1, now - 100 * H);
	sh_set_mtime(f2, now - 100 * H);
	cr_assert_eq(cleanup_pass(&s.q, now), 0);
	cr_assert(access(f1, F_OK) == 0);
	cr_assert(access(f2, F_OK) == 0);
	free(f1);
	free(f2);
}

Test(cleanup, empty_queue)
{
	cr_assert_eq(cleanup_pass(&s.q, now), 0);
	cr_assert_eq(qt_leftovers(&s.qt), 0);
}
