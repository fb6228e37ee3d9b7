/*
 * qlist_test.c: qlist_print() called directly: its counts, its result
 * codes, a write error on the output (fatal, said), and a queue large
 * enough to need several output flushes.  The exact listing format is
 * checked through mailq in tests/integration/mailq_test.c.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/qlist.h"
#include "mail/queue.h"
#include "testlib.h"

static char *tmp, *qdir;
static struct queue q;

static void
setup(void)
{
	struct buf why = BUF_INIT;

	tmp = tl_tmpdir();
	qdir = xasprintf("%s/queue", tmp);
	cr_assert(queue_init(qdir, 23, &why) == 0, "%s", buf_cstr(&why));
	cr_assert(queue_open(&q, qdir, 23) == 0);
	buf_free(&why);
}

static void
teardown(void)
{
	queue_close(&q);
	tl_rmtree(tmp);
	free(tmp);
	free(qdir);
}

TestSuite(qlist, .init = setup, .fini = teardown);

/* A file of id in split folder dir ("info"). */
static void
put(const char *dir, unsigned long id, const char *data, size_t len)
{
	char *p = xasprintf("%s/%s/%lu/%lu", qdir, dir, id % 23, id);

	tl_write(p, data, len);
	free(p);
}

/* The listing into a file; returns qlist_print's result. */
static int
list(struct qlist_stats *st, struct buf *out, struct buf *why)
{
	char *p = xasprintf("%s/out", tmp);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600), rc;

	cr_assert(fd >= 0);
	rc = qlist_print(&q, fd, st, why);
	close(fd);
	tl_read(p, out);
	free(p);
	return rc;
}

Test(qlist, counts)
{
	struct qlist_stats st;
	struct buf out = BUF_INIT, why = BUF_INIT;
	unsigned long id;

	for (id = 1; id <= 3; id++) {
		put("mess", id, "x", 1);
		put("info", id, "Fs@x\0", 5);
	}
	put("mess", 9, "x", 1);
	{
		char *t = xasprintf("%s/todo/9", qdir);

		tl_write(t, "u0\0p1\0Fs@x\0Tr@y\0", 16);
		free(t);
	}
	put("info", 4, "bad", 3);	/* trouble */
	cr_assert_eq(list(&st, &out, &why), 1, "%s", buf_cstr(&why));
	cr_assert_eq(st.queued, 5u);
	cr_assert_eq(st.todo, 1u);
	cr_assert_eq(st.trouble, 1u);
	cr_assert(strstr(out.s, "warning: trouble with #4: info/4/4: "), "%s", out.s);
	cr_assert(strstr(out.s, "messages in queue: 5\nmessages in queue but not yet "
	    "preprocessed: 1\n"), "%s", out.s);
	buf_free(&out);
	buf_free(&why);
}

Test(qlist, write_error_is_fatal)
{
	struct qlist_stats st;
	struct buf why = BUF_INIT;
	int fd = open("/dev/null", O_RDONLY);

	cr_assert(fd >= 0);
	cr_assert_eq(qlist_print(&q, fd, &st, &why), -1);
	cr_assert(strncmp(buf_cstr(&why), "write: ", 7) == 0, "%s", why.s);
	close(fd);
	buf_free(&why);
}

Test(qlist, many_messages_in_order)
{
	struct qlist_stats st;
	struct buf out = BUF_INIT, why = BUF_INIT;
	unsigned long id;
	char *p;
	size_t n = 0;

	/* Written in id order, so (mtime, id) order is id order. */
	for (id = 1; id <= 2000; id++) {
		put("mess", id, "x", 1);
		put("info", id, "Fsender@example.org\0", 20);
		put("remote", id, "Trecipient-with-a-long-name@example.net\0", 40);
	}
	cr_assert_eq(list(&st, &out, &why), 0, "%s", buf_cstr(&why));
	cr_assert_eq(st.queued, 2000u);
	cr_assert_gt(out.len, 65536u * 2);
	for (p = out.s, id = 0; (p = strchr(p, '#')) != NULL; p++) {
		unsigned long got = strtoul(p + 1, NULL, 10);

		cr_assert_gt(got, id, "#%lu listed after #%lu", got, id);
		id = got;
		n++;
	}
	cr_assert_eq(n, 2000u);
	buf_free(&out);
	buf_free(&why);
}
