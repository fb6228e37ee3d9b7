/*
 * aliases_test.c: the aliases file (mail/aliases.c) as Debian's MTAs
 * read it: entries, continuation lines, comments, quoted values with
 * commas, names case-insensitive, :include: files, re-read when the file
 * changes, a missing file empty, an unreadable one keeping the last.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/aliases.h"
#include "testlib.h"

static char *top, *path;
static struct aliases al;

static void
setup(void)
{
	top = tl_tmpdir();
	path = xasprintf("%s/aliases", top);
	aliases_init(&al, path);
}

static void
teardown(void)
{
	aliases_free(&al);
	tl_rmtree(top);
	free(top);
	free(path);
}

TestSuite(aliases, .init = setup, .fini = teardown);

static void
put(const char *text)
{
	struct timespec ts[2];
	static long tick;

	tl_write(path, text, strlen(text));
	/* A new mtime each time, whatever the clock's resolution. */
	ts[0].tv_sec = ts[1].tv_sec = 1700000000 + ++tick;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	cr_assert(utimensat(AT_FDCWD, path, ts, 0) == 0);
}

static void
assert_values(const char *name, const char *const *want, size_t n)
{
	const struct alias *a = aliases_find(&al, name, strlen(name));
	size_t i;

	cr_assert_not_null(a, "no alias %s", name);
	cr_assert_eq(a->n, n, "%s: %zu values, want %zu", name, a->n, n);
	for (i = 0; i < n; i++)
		cr_assert_str_eq(a->v[i], want[i]);
}

Test(aliases, debian_file)
{
	put("# See man 5 aliases for format\n"
	    "postmaster:    root\n"
	    "Root: admin@example.org, joe\n"
	    "list: a@x.example,\n"
	    "\tb@y.example ,\n"
	    "  # a comment inside\n"
	    "  c@z.example\n"
	    "\n"
	    "pipe: \"|/usr/bin/procmail -a, b\", /var/mail/x\n"
	    "inc: :include:/etc/mail/list\n");
	aliases_refresh(&al);
	cr_assert_eq(al.n, 5);
	assert_values("postmaster", (const char *[]){ "root" }, 1);
	assert_values("root", (const char *[]){ "admin@example.org", "joe" }, 2);
	assert_values("ROOT", (const char *[]){ "admin@example.org", "joe" }, 2);
	assert_values("list", (const char *[]){ "a@x.example", "b@y.example", "c@z.example" }, 3);
	assert_values("pipe", (const char *[]){ "|/usr/bin/procmail -a, b", "/var/mail/x" }, 2);
	assert_values("inc", (const char *[]){ ":include:/etc/mail/list" }, 1);
	cr_assert_null(aliases_find(&al, "joe", 3));
	cr_assert_null(aliases_find(&al, "roo", 3));
}

Test(aliases, reread_on_change_missing_is_empty)
{
	put("a: x@y.example\n");
	aliases_refresh(&al);
	cr_assert_not_null(aliases_find(&al, "a", 1));
	put("b: x@y.example\n");
	aliases_refresh(&al);
	cr_assert_null(aliases_find(&al, "a", 1));
	cr_assert_not_null(aliases_find(&al, "b", 1));
	cr_assert(unlink(path) == 0);
	aliases_refresh(&al);
	cr_assert_eq(al.n, 0);
}

Test(aliases, unreadable_keeps_the_last)
{
	if (geteuid() == 0)
		cr_skip_test("root reads any file");
	put("a: x@y.example\n");
	aliases_refresh(&al);
	/* Changed, then made unreadable (its owner could not rewrite it
	 * either once it is mode 0). */
	put("b: x@y.example\n");
	cr_assert(chmod(path, 0) == 0);
	aliases_refresh(&al);
	cr_assert_not_null(aliases_find(&al, "a", 1));
	cr_assert_null(aliases_find(&al, "b", 1));
}

Test(aliases, include_file)
{
	char *inc = xasprintf("%s/list", top);
	char **v = NULL;
	size_t n = 0;
	struct buf why = BUF_INIT;

	static const char list[] = "# members\none@x.example, two@x.example\nthree\n";

	tl_write(inc, list, strlen(list));
	cr_assert_eq(aliases_include(inc, &v, &n, &why), 0, "%s", buf_cstr(&why));
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[0], "one@x.example");
	cr_assert_str_eq(v[1], "two@x.example");
	cr_assert_str_eq(v[2], "three");
	cr_assert_eq(aliases_include("/nonexistent/list", &v, &n, &why), -1);
	cr_assert(strstr(buf_cstr(&why), "No such file"), "%s", buf_cstr(&why));
	while (n > 0)
		free(v[--n]);
	free(v);
	free(inc);
	buf_free(&why);
}
