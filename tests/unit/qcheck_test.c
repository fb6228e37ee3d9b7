/*
 * qcheck_test.c: queue-init and queue-check on hand-made queues in each
 * state of QUEUE.md, sound and broken.  The files are written with the
 * byte formats a stock qmail-queue and qmail-send produce.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/qcheck.h"
#include "testlib.h"

static char *top, *dir;
static struct queue q;

static void
setup(void)
{
	struct buf why = BUF_INIT;

	top = tl_tmpdir();
	dir = xasprintf("%s/queue", top);	/* made by queue_init, mode 0750 */
	cr_assert_eq(queue_init(dir, 23, &why), 0, "%s", why.s);
	cr_assert_eq(queue_open(&q, dir, 23), 0);
}

static void teardown(void) { queue_close(&q); tl_rmtree(top); free(top); free(dir); }

TestSuite(qcheck, .init = setup, .fini = teardown);

/* Make a mess file the way qmail-queue does; returns its id. */
static unsigned long
make_mess(void)
{
	char tmp[QPATH_MAX + 64], path[QPATH_MAX];
	struct stat st;
	char *p = xasprintf("%s/pid/t.%d", dir, getpid());
	static const char body[] = "Received: (qmail 1 invoked by uid 0); 1 Jan 2026 00:00:00 -0000\nSubject: x\n\nhi\n";

	tl_write(p, body, sizeof body - 1);
	cr_assert(stat(p, &st) == 0);
	queue_path(path, &q, Q_MESS, st.st_ino);
	snprintf(tmp, sizeof tmp, "%s/%s", dir, path);
	cr_assert(link(p, tmp) == 0);
	cr_assert(unlink(p) == 0);
	free(p);
	return st.st_ino;
}

static void
put(enum qdir d, unsigned long id, const char *data, size_t n)
{
	char path[QPATH_MAX];
	char *full;

	queue_path(path, &q, d, id);
	full = xasprintf("%s/%s", dir, path);
	tl_write(full, data, n);
	free(full);
}

static struct qcheck_result
check(struct buf *text)
{
	struct qcheck_result r;
	char *mem = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&mem, &len);

	qcheck_run(&q, NULL, f, &r);
	fclose(f);
	buf_reset(text);
	buf_add(text, mem, len);
	free(mem);
	return r;
}

#define PUT(d, id, lit) put(d, id, lit, sizeof(lit) - 1)

Test(qcheck, empty_queue_is_sound)
{
	struct buf t = BUF_INIT;
	struct qcheck_result r = check(&t);

	cr_assert_eq(r.problems, 0, "%s", t.s);
	cr_assert_eq(r.notes, 0, "%s", t.s);
}

Test(qcheck, init_is_idempotent_and_repairs)
{
	struct buf why = BUF_INIT, t = BUF_INIT;
	char *p = xasprintf("%s/mess/5", dir);

	cr_assert(rmdir(p) == 0);
	cr_assert_eq(check(&t).problems, 1, "%s", t.s);
	cr_assert_eq(queue_init(dir, 23, &why), 0, "%s", why.s);
	cr_assert_eq(queue_init(dir, 23, &why), 0, "%s", why.s);
	cr_assert_eq(check(&t).problems, 0, "%s", t.s);
	free(p);
}

Test(qcheck, init_refuses_a_file_in_the_way)
{
	struct buf why = BUF_INIT;
	char *p = xasprintf("%s/lock/trigger", dir);

	cr_assert(unlink(p) == 0);
	tl_write(p, "x", 1);
	cr_assert_eq(queue_init(dir, 23, &why), -1);
	cr_assert(strstr(why.s, "lock/trigger exists but is not a FIFO"), "%s", why.s);
	free(p);
}

Test(qcheck, every_sound_state)
{
	struct buf t = BUF_INIT;
	unsigned long s2 = make_mess(), s3 = make_mess(), s4 = make_mess(), s5 = make_mess();
	struct qcheck_result r;

	(void)s2;
	PUT(Q_INTD, s3, "u0\0p1\0Fa@b\0");		/* partial: fine in S3 */
	PUT(Q_INTD, s4, "u0\0p1\0Fa@b\0Tc@d\0");
	PUT(Q_TODO, s4, "u0\0p1\0Fa@b\0Tc@d\0");
	PUT(Q_INFO, s4, "Fa@");				/* preprocessing cut short */
	PUT(Q_INFO, s5, "Fa@b\0");
	PUT(Q_REMOTE, s5, "Dc@d\0Te@f\0");
	PUT(Q_BOUNCE, s5, "<c@d>:\nno such user\n");
	r = check(&t);
	cr_assert_eq(r.messages, 4);
	cr_assert_eq(r.problems, 0, "%s", t.s);
	cr_assert_eq(r.notes, 2, "%s", t.s);	/* the S2 and the S3 message */
	cr_assert(strstr(t.s, "S2"), "%s", t.s);
	cr_assert(strstr(t.s, "S3"), "%s", t.s);
}

Test(qcheck, corrupt_files_are_problems)
{
	struct buf t = BUF_INIT;
	unsigned long a = make_mess(), b = make_mess(), c = make_mess();
	struct qcheck_result r;

	PUT(Q_TODO, a, "u0\0p1\0Xa@b\0");		/* bad record type */
	PUT(Q_INFO, b, "Fa@b\0");
	PUT(Q_REMOTE, b, "Tc@d\0Te@");			/* truncated */
	PUT(Q_INFO, c, "Fa@b");				/* no terminator */
	r = check(&t);
	cr_assert_eq(r.problems, 3, "%s", t.s);
	cr_assert(strstr(t.s, "expected F<sender>"), "%s", t.s);
	cr_assert(strstr(t.s, "truncated"), "%s", t.s);
}

Test(qcheck, inconsistent_states_are_problems)
{
	struct buf t = BUF_INIT;
	unsigned long a = make_mess(), b = make_mess();
	struct qcheck_result r;
	char *wrong = xasprintf("%s/info/%lu/%lu", dir, (a + 1) % 23, a);

	PUT(Q_REMOTE, a, "Tc@d\0");			/* remote without info */
	PUT(Q_INFO, 999999999UL, "Fa@b\0");		/* info without mess */
	tl_write(wrong, "Fa@b\0", 5);			/* wrong split folder */
	PUT(Q_INFO, b, "Fa@b\0");
	PUT(Q_INTD, b, "u0\0p1\0Fa@b\0Tc@d\0");		/* intd + info, no todo */
	r = check(&t);
	cr_assert_eq(r.problems, 4, "%s", t.s);
	cr_assert(strstr(t.s, "wrong split folder"), "%s", t.s);
	cr_assert(strstr(t.s, "has no mess/ file"), "%s", t.s);
	free(wrong);
}

Test(qcheck, mess_inode_must_match_name)
{
	struct buf t = BUF_INIT;
	char *p = xasprintf("%s/mess/0/23", dir);	/* 23 % 23 == 0, inode differs */

	tl_write(p, "x", 1);
	cr_assert_eq(check(&t).problems, 1, "%s", t.s);
	cr_assert(strstr(t.s, "does not match its name"), "%s", t.s);
	free(p);
}

Test(qcheck, split_mismatch)
{
	struct buf t = BUF_INIT;

	q.split = 22;		/* the queue was made with 23 */
	cr_assert_geq(check(&t).problems, 4, "%s", t.s);
	cr_assert(strstr(t.s, "queue_split is 22"), "%s", t.s);
}

Test(qcheck, junk_names)
{
	struct buf t = BUF_INIT;
	char *p = xasprintf("%s/todo/0042", dir);

	tl_write(p, "x", 1);
	cr_assert_eq(check(&t).problems, 1, "%s", t.s);
	cr_assert(strstr(t.s, "not a message number"), "%s", t.s);
	free(p);
}

Test(qcheck, init_refuses_another_split)
{
	struct buf why = BUF_INIT;

	cr_assert_eq(queue_init(dir, 7, &why), -1);
	cr_assert(strstr(why.s, "exists with queue_split 23, not 7"), "%s", why.s);
}

/* In the sender: weir-send leaves the message alone, a problem.  In a
 * recipient: weir-send bounces that one, a note (in todo/ and remote/). */
Test(qcheck, control_bytes_in_a_stock_todo_sender_are_a_problem)
{
	struct buf t = BUF_INIT;
	unsigned long a = make_mess();

	PUT(Q_TODO, a, "u0\0p1\0Fa\r@b\0Tc@d\0");
	cr_assert_eq(check(&t).problems, 1, "%s", t.s);
	cr_assert(strstr(t.s, "sender: ") && strstr(t.s, "control character"), "%s", t.s);
}

Test(qcheck, control_bytes_in_a_stock_rcpt_are_a_note)
{
	struct buf t = BUF_INIT;
	struct qcheck_result r;
	unsigned long a = make_mess(), b = make_mess();

	PUT(Q_TODO, a, "u0\0p1\0Fa@b\0Tok@d\0Tc@d\r\nDATA\0");
	PUT(Q_INFO, b, "Fa@b\0");
	PUT(Q_REMOTE, b, "Tok@d\0Dc@d\x01\0Te@f\x7f\0");
	r = check(&t);
	cr_assert_eq(r.problems, 0, "%s", t.s);
	cr_assert_eq(r.notes, 2, "%s", t.s);
	cr_assert(strstr(t.s, ": recipient 1: ") && strstr(t.s, ": recipient 2: ") &&
	    strstr(t.s, "weir-send bounces it"), "%s", t.s);
}

/* Recipients a stock qmail-send left pending in local/: a note until
 * weir-send took them over; done ones are nothing to say. */
Test(qcheck, local_pending_is_a_note)
{
	struct buf t = BUF_INIT;
	struct qcheck_result r;
	unsigned long a = make_mess(), b = make_mess();

	PUT(Q_INFO, a, "Fa@b\0");
	PUT(Q_REMOTE, a, "Dx@y\0");
	PUT(Q_LOCAL, a, "Droot@h\0Tjoe@h\0Tann@h\0");
	PUT(Q_INFO, b, "Fa@b\0");
	PUT(Q_LOCAL, b, "Droot@h\0");
	r = check(&t);
	cr_assert_eq(r.problems, 0, "%s", t.s);
	cr_assert_eq(r.notes, 1, "%s", t.s);
	cr_assert(strstr(t.s, "2 recipients left pending by qmail-send"), "%s", t.s);
}

/*
 * A live queue: a file listed, then removed before it is read (weir-send
 * finished or preprocessed the message meanwhile).  `weir queue-check`
 * says so in a note, not a problem: the fault shim makes the open of a
 * remote/ (then info/, then todo/) file fail with ENOENT, as the kernel does
 * for a file unlinked after its folder was read.  Before, each was "No
 * such file or directory", a problem (seen in a test under load).
 */
Test(qcheck, file_removed_while_checked_is_a_note)
{
	const char *shim = getenv("WEIR_FAULTINJ");
	const enum qdir d[] = { Q_REMOTE, Q_INFO, Q_TODO };
	char path[QPATH_MAX], *weir = tl_bin("weir"), *conf = xasprintf("%s/weir.conf", top), *text;
	unsigned long s4 = make_mess(), s5 = make_mess();
	size_t i;

	if (shim == NULL || *shim == '\0' || access(shim, R_OK) != 0)
		cr_skip_test("no fault-injection shim ($WEIR_FAULTINJ; run through tests/run.sh)");
	text = xasprintf("queue_dir = \"%s\"\nqueue_split = 23\n", dir);
	tl_write(conf, text, strlen(text));
	PUT(Q_INTD, s4, "u0\0p1\0Fa@b\0Tc@d\0");
	PUT(Q_TODO, s4, "u0\0p1\0Fa@b\0Tc@d\0");
	PUT(Q_INFO, s5, "Fa@b\0");
	PUT(Q_REMOTE, s5, "Dc@d\0Te@f\0");
	for (i = 0; i < 3; i++) {
		char *pre = xasprintf("LD_PRELOAD=%s", shim), *rule;

		queue_path(path, &q, d[i], d[i] == Q_TODO ? s4 : s5);
		rule = xasprintf("WEIR_FAULT=openr@/%s=1:ENOENT", path);
		const char *env[] = { pre, rule, "WEIR_FAULT_PROG=weir", NULL };
		const char *argv[] = { weir, "-c", conf, "queue-check", NULL };
		struct tl_run run = { .argv = argv, .env = env };
		struct tl_result res;

		tl_run(&run, &res);
		cr_assert_eq(res.status, 0, "%s: exit %d\n%s%s", path, res.status,
		    buf_cstr(&res.out), buf_cstr(&res.err));
		cr_assert(strstr(buf_cstr(&res.out), " 0 problems, 1 notes"), "%s:\n%s", path,
		    buf_cstr(&res.out));
		cr_assert(strstr(buf_cstr(&res.out), "removed while the queue was checked"),
		    "%s:\n%s", path, buf_cstr(&res.out));
		tl_result_free(&res);
		free(pre);
		free(rule);
	}
	/* A hold/ file released since its folder was listed: not counted. */
	{
		char *pre = xasprintf("LD_PRELOAD=%s", shim), *rule, *hold;
		const char *env[] = { pre, NULL, "WEIR_FAULT_PROG=weir", NULL };
		const char *argv[] = { weir, "-c", conf, "queue-check", NULL };
		struct tl_run run = { .argv = argv, .env = env };
		struct tl_result res;

		hold = xasprintf("%s/hold/%lu", dir, s5);
		tl_write(hold, "birth 1\nsince 2\n", 16);
		rule = xasprintf("WEIR_FAULT=openr@/hold/%lu=1:ENOENT", s5);
		env[1] = rule;
		tl_run(&run, &res);
		cr_assert_eq(res.status, 0, "hold: exit %d\n%s%s", res.status, buf_cstr(&res.out),
		    buf_cstr(&res.err));
		cr_assert(strstr(buf_cstr(&res.out), " 0 problems, 0 notes"), "hold:\n%s",
		    buf_cstr(&res.out));
		tl_result_free(&res);
		free(hold);
		free(rule);
		free(pre);
	}
	free(text);
	free(conf);
	free(weir);
}

/* weir-send's record of open waits, sched/waits (QUEUE.md): lines of
 * four numbers are sound; anything else is a note (weir-send rewrites
 * it), never a problem and never an unexpected entry. */
Test(qcheck, open_waits_file)
{
	struct buf t = BUF_INIT;
	char *p = xasprintf("%s/sched/waits", dir);
	struct qcheck_result r;

	tl_write(p, "917 1700000000 0 1700000100\n", 28);
	r = check(&t);
	cr_assert_eq(r.problems + r.notes, 0, "%s", t.s);
	tl_write(p, "917 1700000000 0\n", 17);
	r = check(&t);
	cr_assert_eq(r.problems, 0, "%s", t.s);
	cr_assert_eq(r.notes, 1, "%s", t.s);
	cr_assert(strstr(t.s, "sched/waits: line 1: expected four numbers"), "%s", t.s);
	free(p);
	buf_free(&t);
}

/* weir-send's OAuth notice stamps, sched/oauth.NAME (QUEUE.md): one
 * number and a newline is sound, anything else a note, as sched/alive;
 * a name that is no upstream's is an unexpected entry.  Failed before
 * (every one an unexpected entry). */
Test(qcheck, oauth_notice_stamps)
{
	struct buf t = BUF_INIT;
	char *good = xasprintf("%s/sched/oauth.isp", dir), *bad = xasprintf("%s/sched/oauth.m365",
	    dir), *odd = xasprintf("%s/sched/oauth.a b", dir);
	struct qcheck_result r;

	tl_write(good, "1795673790\n", 11);
	r = check(&t);
	cr_assert_eq(r.problems + r.notes, 0, "%s", t.s);
	tl_write(bad, "soon", 4);
	r = check(&t);
	cr_assert_eq(r.problems, 0, "%s", t.s);
	cr_assert_eq(r.notes, 1, "%s", t.s);
	cr_assert(strstr(t.s, "sched/oauth.m365: not one number"), "%s", t.s);
	tl_write(odd, "1\n", 2);
	r = check(&t);
	cr_assert_eq(r.problems, 1, "%s", t.s);
	free(good);
	free(bad);
	free(odd);
	buf_free(&t);
}
