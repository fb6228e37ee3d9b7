/*
 * privdrop_test.c: lib/privdrop.c in the test's own process (Criterion
 * runs each test in a process of its own, so a test may give up root for
 * good).  The drops need root and are skipped otherwise; what a daemon
 * does when not root is checked either way.  Accounts: nobody (65534),
 * which every Debian system has; none is created.
 */
#include <criterion/criterion.h>
#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/privdrop.h"
#include "testlib.h"

TestSuite(privdrop, .timeout = 10);

Test(privdrop, becomes_nobody_for_good)
{
	uid_t r, e, s;
	gid_t rg, eg, sg, groups[64];
	struct passwd *pw;
	int n, i;

	if (!tl_is_root())
		cr_skip_test("needs root");
	pw = getpwnam("nobody");
	cr_assert_not_null(pw);
	cr_assert(setgroups(1, (gid_t[]){ 0 }) == 0);
	privdrop("nobody", 3);
	cr_assert(getresuid(&r, &e, &s) == 0 && getresgid(&rg, &eg, &sg) == 0);
	cr_assert(r == pw->pw_uid && e == pw->pw_uid && s == pw->pw_uid);
	cr_assert(rg == pw->pw_gid && eg == pw->pw_gid && sg == pw->pw_gid);
	n = getgroups(64, groups);
	cr_assert(n >= 1);
	for (i = 0; i < n; i++)
		cr_assert_neq(groups[i], 0, "root's group was kept");
	cr_assert_eq(setuid(0), -1);
	cr_assert_eq(setgid(0), -1);
	cr_assert_eq(setgroups(1, (gid_t[]){ 0 }), -1);
}

/* privdrop(user, 3) in a child: its exit status and what it said. */
static int
drop_in_child(const char *user, struct buf *said)
{
	int p[2], status;
	char b[512];
	ssize_t n;
	pid_t pid;

	cr_assert(pipe(p) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		if (dup2(p[1], 2) < 0)
			_exit(120);
		privdrop(user, 3);
		_exit(0);
	}
	close(p[1]);
	while ((n = read(p[0], b, sizeof b)) > 0)
		buf_add(said, b, (size_t)n);
	close(p[0]);
	cr_assert(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(privdrop, no_such_user_or_root_is_fatal)
{
	struct buf said = BUF_INIT;

	if (!tl_is_root())
		cr_skip_test("needs root");
	cr_assert_eq(drop_in_child("weir-no-such-user", &said), 3, "%s", buf_cstr(&said));
	cr_assert(strstr(buf_cstr(&said), "drop privileges: no user \"weir-no-such-user\" on "
	    "this system") != NULL, "%s", buf_cstr(&said));
	buf_reset(&said);
	cr_assert_eq(drop_in_child("root", &said), 3, "%s", buf_cstr(&said));
	cr_assert(strstr(buf_cstr(&said), "user \"root\" has uid or primary gid 0") != NULL,
	    "%s", buf_cstr(&said));
	buf_free(&said);
}

Test(privdrop, daemon_policy)
{
	if (!tl_is_root()) {
		/* Not root: the key is ignored, whatever it names. */
		cr_assert_eq(privdrop_daemon("gate_user", "weir-no-such-user", 3), 0);
		return;
	}
	/* Root, key unset: stays root (and warns). */
	cr_assert_eq(privdrop_daemon("gate_user", NULL, 3), 0);
	cr_assert_eq(geteuid(), 0);
	cr_assert_eq(privdrop_daemon("gate_user", "nobody", 3), 1);
	cr_assert_neq(geteuid(), 0);
	/* Not root any more: a second call changes nothing. */
	cr_assert_eq(privdrop_daemon("gate_user", "weir-no-such-user", 3), 0);
}
