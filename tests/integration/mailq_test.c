/*
 * mailq_test.c: mailq (and sendmail -bp) on hand-made queues: messages
 * in the preprocessed state (info/, local/, remote/ with T and D
 * records, bounce/) and in todo/, with fixed mtimes, so the output can
 * be compared byte by byte with what qmail-qread prints; trouble with
 * one message does not stop the listing; sendmail then mailq end to end.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "sendmail_helpers.h"

static struct qt q;

static void setup(void) { smt_setup(&q); }
static void teardown(void) { qt_teardown(&q); }

TestSuite(mailq, .init = setup, .fini = teardown, .timeout = 60);

#define S(x) x, sizeof(x) - 1

static void
mess(unsigned long id, size_t size)
{
	char rel[64], *data = xmalloc(size + 1);

	memset(data, 'm', size);
	snprintf(rel, sizeof rel, "mess/%lu/%lu", id % 23, id);
	qt_put(&q, rel, data, size, 0);
	free(data);
}

static void
mailq_is(const char *prog, const char *const *args, int code, const char *want)
{
	struct tl_result r;

	smt_run(&q, prog, args, NULL, 0, NULL, &r);
	cr_assert_eq(r.status, code, "%s: exit %d, want %d; stderr: %s", prog, r.status, code,
	    buf_cstr(&r.err));
	cr_assert_str_eq(buf_cstr(&r.out), want, "%s output", prog);
	cr_assert_eq(r.err.len, 0, "stderr: %s", buf_cstr(&r.err));
	tl_result_free(&r);
}

Test(mailq, empty_queue)
{
	const char *want = "messages in queue: 0\n"
	    "messages in queue but not yet preprocessed: 0\n";

	mailq_is("mailq", NULL, 0, want);
	mailq_is("sendmail", (const char *const[]){ "-bp", NULL }, 0, want);
}

/* The queue of the listing tests: three preprocessed, one in todo/. */
static void
build_queue(void)
{
	/* #100: local and remote, some done, bouncing. */
	mess(100, 1234);
	qt_put(&q, "info/8/100", S("Falice@example.org\0"), 1700000100);
	qt_put(&q, "local/8/100", S("Tpostmaster@test.example\0Dlocal-done@test.example\0"), 0);
	qt_put(&q, "remote/8/100", S("Dbob@example.net\0Tcarol@example.net\0Tdave@example.net\0"), 0);
	qt_put(&q, "bounce/100", S(""), 0);
	/* #46: older, remote only, null sender. */
	mess(46, 10);
	qt_put(&q, "info/0/46", S("F\0"), 1699000000);
	qt_put(&q, "remote/0/46", S("Tx@example.com\0"), 0);
	/* #54: same time as #100, so listed before it (ties go by id). */
	mess(54, 77);
	qt_put(&q, "info/8/54", S("Fodd\x01\xff@example.org\0"), 1700000100);
	qt_put(&q, "remote/8/54", S("Tctl\tbyte@example.com\0"), 0);
	/* #300: not yet preprocessed. */
	mess(300, 555);
	qt_put(&q, "todo/300", S("u1000\0p4242\0Fsender@example.org\0Tt1@example.net\0Tt2@example.net\0"),
	    1700003600);
}

/* The three preprocessed messages of build_queue(), as listed. */
#define LISTING_INFO \
	"3 Nov 2023 08:26:40 GMT  #46  10  <> \n" \
	"\tremote\tx@example.com\n" \
	"14 Nov 2023 22:15:00 GMT  #54  77  <odd__@example.org> \n" \
	"\tremote\tctl_byte@example.com\n" \
	"14 Nov 2023 22:15:00 GMT  #100  1234  <alice@example.org>  bouncing\n" \
	"\tlocal\tpostmaster@test.example\n" \
	"  done\tlocal\tlocal-done@test.example\n" \
	"  done\tremote\tbob@example.net\n" \
	"\tremote\tcarol@example.net\n" \
	"\tremote\tdave@example.net\n"

static const char listing[] =
	LISTING_INFO
	"14 Nov 2023 23:13:20 GMT  #300  555  <sender@example.org> \n"
	"\ttodo\tt1@example.net\n"
	"\ttodo\tt2@example.net\n"
	"messages in queue: 4\n"
	"messages in queue but not yet preprocessed: 1\n";

Test(mailq, listing_like_qmail_qread)
{
	build_queue();
	mailq_is("mailq", NULL, 0, listing);
	mailq_is("sendmail", (const char *const[]){ "-bp", NULL }, 0, listing);
	mailq_is("mailq", (const char *const[]){ "-v", NULL }, 0, listing);
}

Test(mailq, message_being_preprocessed_listed_once)
{
	build_queue();
	/* weir-send is writing info/ (here: not a byte yet) and has not yet
	 * removed todo/: #300 is still in S4 and listed once, from todo/. */
	qt_put(&q, "info/1/300", S(""), 1700003600);
	qt_put(&q, "remote/1/300", S("Tt1@example.net\0"), 0);
	mailq_is("mailq", NULL, 0,
	    LISTING_INFO
	    "14 Nov 2023 23:13:20 GMT  #300  555  <sender@example.org> \n"
	    "\ttodo\tt1@example.net\n"
	    "\ttodo\tt2@example.net\n"
	    "messages in queue: 4\n"
	    "messages in queue but not yet preprocessed: 1\n");
}

Test(mailq, trouble_reported_listing_goes_on)
{
	build_queue();
	/* #46: info file with trailing garbage; #54: mess gone; #300: bad todo;
	 * #100: remote file truncated (no final NUL). */
	qt_put(&q, "info/0/46", S("F\0junk"), 1699000000);
	{
		char *p = qt_path(&q, "mess/8/54");

		cr_assert(unlink(p) == 0);
		free(p);
	}
	qt_put(&q, "todo/300", S("u1000\0Fno-pid@example.org\0"), 1700003600);
	qt_put(&q, "remote/8/100", S("Dbob@example.net\0Tcarol@exa"), 0);
	/* Names that are not messages are ignored, as qmail-qread does. */
	qt_put(&q, "info/3/.hidden", S("x"), 0);
	qt_put(&q, "todo/notanumber", S("x"), 0);
	mailq_is("mailq", NULL, 1,
	    "warning: trouble with #46: info/0/46: byte 2: data after the sender record\n"
	    "warning: trouble with #54: cannot stat mess/8/54: No such file or directory\n"
	    "14 Nov 2023 22:15:00 GMT  #100  1234  <alice@example.org>  bouncing\n"
	    "\tlocal\tpostmaster@test.example\n"
	    "  done\tlocal\tlocal-done@test.example\n"
	    "warning: trouble with #100: remote/8/100: byte 17: "
	    "last record has no NUL terminator (truncated file)\n"
	    "warning: trouble with #300: todo/300: byte 6: expected p<pid>\n"
	    "messages in queue: 4\n"
	    "messages in queue but not yet preprocessed: 1\n");
}

Test(mailq, message_leaving_the_queue_is_skipped)
{
	/* info/ gone but local/ left: the message finished (or was never
	 * there); it is not listed and not trouble. */
	mess(7, 3);
	qt_put(&q, "remote/7/7", S("Tx@example.com\0"), 0);
	mailq_is("mailq", NULL, 0,
	    "messages in queue: 0\nmessages in queue but not yet preprocessed: 0\n");
}

Test(mailq, queue_missing_is_fatal)
{
	struct tl_result r;

	tl_rmtree(q.qdir);
	smt_run(&q, "mailq", NULL, NULL, 0, NULL, &r);
	cr_assert_eq(r.status, EX_TEMPFAIL, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strncmp(buf_cstr(&r.err), "mailq: cannot open the queue ", 29) == 0, "%s",
	    r.err.s);
	tl_result_free(&r);
}

Test(mailq, unreadable_info_folder_is_fatal)
{
	struct tl_result r;
	char *p = qt_path(&q, "info/5");

	tl_rmtree(p);
	smt_run(&q, "mailq", NULL, NULL, 0, NULL, &r);
	cr_assert_eq(r.status, EX_TEMPFAIL, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.err), "cannot open info/5"), "%s", r.err.s);
	tl_result_free(&r);
	free(p);
}

Test(mailq, mailq_refuses_arguments)
{
	struct tl_result r;

	smt_run(&q, "mailq", (const char *const[]){ "x@example.net", NULL }, NULL, 0, NULL, &r);
	cr_assert_eq(r.status, EX_USAGE);
	cr_assert_str_eq(buf_cstr(&r.err),
	    "mailq: listing the queue takes no addresses: x@example.net\n");
	tl_result_free(&r);
}

Test(mailq, sendmail_then_mailq)
{
	struct qt_msg m;
	struct tl_result r;
	char *want;
	char date[64];
	struct stat st;
	struct tm tm;
	char *p;
	static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
		"Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

	smt_send(&q, (const char *const[]){ "-f", "s@example.org", "-F", "F", "a@example.net",
	    "b", NULL }, S("Subject: s\n\nb\n"), &m);
	p = xasprintf("%s/todo/%lu", q.qdir, m.id);
	cr_assert(stat(p, &st) == 0);
	free(p);
	gmtime_r(&st.st_mtime, &tm);
	snprintf(date, sizeof date, "%d %s %d %02d:%02d:%02d", tm.tm_mday, months[tm.tm_mon],
	    tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
	p = xasprintf("%s/mess/%lu/%lu", q.qdir, m.id % 23, m.id);
	cr_assert(stat(p, &st) == 0);
	free(p);
	want = xasprintf("%s GMT  #%lu  %lld  <s@example.org> \n"
	    "\ttodo\ta@example.net\n\ttodo\tb@" SMT_HOST "\n"
	    "messages in queue: 1\nmessages in queue but not yet preprocessed: 1\n",
	    date, m.id, (long long)st.st_size);
	smt_run(&q, "mailq", NULL, NULL, 0, NULL, &r);
	cr_assert_eq(r.status, 0);
	cr_assert_str_eq(buf_cstr(&r.out), want);
	tl_result_free(&r);
	free(want);
	qt_msg_free(&m);
}

/* Issue 22: `make all` built no mailq (only the tests' build and make
 * install made the link), so the build tree the README's demo and the
 * man pages point at had none.  What `make all` would do, into a fresh
 * build folder. */
Test(mailq, make_all_links_mailq)
{
	char *top = tl_src_path("src/.."), *dir = tl_tmpdir();
	char *build = xasprintf("BUILD=%s/b", dir), *want = xasprintf("ln -sf sendmail %s/b/bin/mailq",
	    dir);
	const char *argv[] = { "/usr/bin/make", "-n", "-C", top, build, "all", NULL };
	struct tl_run run = { .argv = argv, .timeout_s = 60 };
	struct tl_result r;

	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "make -n all: exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.out), want) != NULL, "make -n all has no \"%s\":\n%s", want,
	    buf_cstr(&r.out));
	tl_result_free(&r);
	tl_rmtree(dir);
	free(top); free(dir); free(build); free(want);
}
