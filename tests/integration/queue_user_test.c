/*
 * queue_user_test.c: weir-queue as an unprivileged user who owns the
 * queue (how tests and demos run it), and as a set-group-id program (how
 * the package will install it), where the caller's environment must not
 * choose the queue.  Needs root to switch users (setpriv from
 * util-linux); skipped otherwise.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "testlib.h"

#define NOBODY "65534"

static char *top;

static void
setup(void)
{
	if (!tl_is_root())
		cr_skip_test("needs root to run as another user");
	top = tl_tmpdir();
	cr_assert(chmod(top, 0755) == 0);
	cr_assert(chown(top, 65534, 65534) == 0);
}

static void teardown(void) { if (top) { tl_rmtree(top); free(top); } }

TestSuite(queue_user, .init = setup, .fini = teardown);

/* Run argv as nobody with the given environment. */
static void
as_nobody(const char *const *argv, const char *const *env, const char *in,
    const char *fd1, size_t fd1len, struct tl_result *r)
{
	const char *full[16] = { "/usr/bin/setpriv", "--reuid=" NOBODY, "--regid=" NOBODY,
		"--clear-groups", "--" };
	struct tl_run run = { 0 };
	int i;

	for (i = 0; argv[i]; i++)
		full[5 + i] = argv[i];
	run.argv = full;
	run.env = env;
	run.in = in;
	run.inlen = in ? strlen(in) : 0;
	run.fd1in = fd1;
	run.fd1len = fd1len;
	tl_run(&run, r);
}

Test(queue_user, unprivileged_owner_queues)
{
	static const char envl[] = "Fme@x.org\0Tyou@y.org\0";
	char *q = xasprintf("%s/queue", top), *qenv = xasprintf("WEIR_QUEUE=%s", q);
	char *weir = tl_bin("weir"), *wq = tl_bin("weir-queue");
	const char *init[] = { weir, "queue-init", q, NULL }, *inj[] = { wq, NULL };
	const char *env[] = { qenv, NULL };
	struct tl_result r;
	struct buf b = BUF_INIT;
	struct stat st;
	char *todo;
	char name[64];
	FILE *ls;

	as_nobody(init, env, NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 0, "queue-init: %s", r.err.s);
	tl_result_free(&r);
	as_nobody(inj, env, "Subject: hi\n\nbody\n", envl, sizeof envl, &r);
	cr_assert_eq(r.status, 0, "weir-queue: %s", r.err.s);

	todo = xasprintf("ls %s/todo", q);
	ls = popen(todo, "r");
	cr_assert(fgets(name, sizeof name, ls) != NULL);
	pclose(ls);
	name[strcspn(name, "\n")] = '\0';
	free(todo);
	todo = xasprintf("%s/todo/%s", q, name);
	tl_read(todo, &b);
	cr_assert(memcmp(b.s, "u65534\0p", 8) == 0, "todo starts %.8s", b.s);
	cr_assert(stat(todo, &st) == 0);
	cr_assert_eq(st.st_uid, 65534);
	cr_assert_eq(st.st_mode & 07777, 0644);
	tl_result_free(&r);
	free(todo); free(q); free(qenv); free(weir); free(wq);
	buf_free(&b);
}

Test(queue_user, setgid_ignores_the_callers_environment)
{
	static const char envl[] = "Fme@x.org\0Tyou@y.org\0";
	char *q = xasprintf("%s/queue", top), *qenv = xasprintf("WEIR_QUEUE=%s", q);
	char *weir = tl_bin("weir"), *wq = tl_bin("weir-queue");
	char *copy = xasprintf("%s/weir-queue-sgid", top);
	char *cmd = xasprintf("cp %s %s", wq, copy);
	const char *init[] = { weir, "queue-init", q, NULL }, *inj[] = { copy, NULL };
	const char *env[] = { qenv, "WEIR_CONFIG=/nonexistent/weir.conf", NULL };
	const char *initenv[] = { qenv, NULL };
	struct tl_result r;

	as_nobody(init, initenv, NULL, NULL, 0, &r);
	cr_assert_eq(r.status, 0, "queue-init: %s", r.err.s);
	tl_result_free(&r);
	cr_assert(system(cmd) == 0);
	/* Set-group-id to a group nobody is not in: AT_SECURE is set. */
	cr_assert(chown(copy, 0, 0) == 0);
	cr_assert(chmod(copy, 02755) == 0);
	as_nobody(inj, env, "Subject: hi\n\n", envl, sizeof envl, &r);
	/* Neither $WEIR_CONFIG (which names a missing file: 55) nor
	 * $WEIR_QUEUE was used: the compiled-in config path was, whose queue
	 * is not this one. */
	cr_assert_neq(r.status, 0);
	cr_assert_neq(r.status, 55, "%s", r.err.s);
	cr_assert_eq(tl_count_files(q), 1, "something was queued in $WEIR_QUEUE");	/* lock/sendmutex */
	tl_result_free(&r);
	free(q); free(qenv); free(weir); free(wq); free(copy); free(cmd);
}
