/* secret_test.c: reading an upstream's secret from a file or a command. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "remote/secret.h"
#include "testlib.h"

static char *dir;

static void setup(void) { dir = tl_tmpdir(); }
static void teardown(void) { tl_rmtree(dir); free(dir); }

TestSuite(secret, .init = setup, .fini = teardown);

static char *
file(const char *text, size_t n, mode_t mode)
{
	char *p = xasprintf("%s/secret", dir);

	tl_write(p, text, n);
	cr_assert(chmod(p, mode) == 0);
	return p;
}

Test(secret, file_with_one_line_end_removed)
{
	static const struct { const char *in, *want; } cases[] = {
		{ "pw\n", "pw" }, { "pw\r\n", "pw" }, { "pw", "pw" }, { "pw\n\n", "pw\n" },
		{ "p w\t", "p w\t" },
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct buf out = BUF_INIT, err = BUF_INIT;
		char *p = file(cases[i].in, strlen(cases[i].in), 0600);

		cr_assert_eq(secretfile_read("secret_file", p, &out, &err), 0, "%s", err.s);
		cr_assert_str_eq(out.s, cases[i].want);
		secret_wipe(&out);
		cr_assert_null(out.s);
		free(p);
	}
}

Test(secret, file_open_to_group_or_others_refused)
{
	static const mode_t bad[] = { 0640, 0604, 0620, 0602, 0644, 0660 };
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct buf out = BUF_INIT, err = BUF_INIT;
		char *p = file("pw", 2, bad[i]);

		cr_assert_eq(secretfile_read("secret_file", p, &out, &err), -1, "mode %o accepted", bad[i]);
		cr_assert(strstr(err.s, "lets group or others in; refusing it"), "%s", err.s);
		cr_assert_null(out.s);
		buf_free(&err);
		free(p);
	}
}

Test(secret, file_problems)
{
	struct buf out = BUF_INIT, err = BUF_INIT;
	char *p = file("\n", 1, 0400), *missing = xasprintf("%s/none", dir);

	cr_assert_eq(secretfile_read("secret_file", p, &out, &err), -1);
	cr_assert(strstr(err.s, "empty"), "%s", err.s);
	buf_reset(&err);
	cr_assert_eq(secretfile_read("secret_file", missing, &out, &err), -1);
	cr_assert(strstr(err.s, "No such file"), "%s", err.s);
	buf_reset(&err);
	cr_assert_eq(secretfile_read("secret_file", dir, &out, &err), -1);
	cr_assert(strstr(err.s, "not a regular file"), "%s", err.s);
	buf_free(&err);
	free(p);
	free(missing);
}

Test(secret, command_output)
{
	struct buf out = BUF_INIT, err = BUF_INIT;

	cr_assert_eq(secret_from_command("echo token-123",
	    clock_mono_ms() + 5000, &out, &err), 0, "%s", err.s);
	cr_assert_str_eq(out.s, "token-123");
	secret_wipe(&out);
}

Test(secret, command_failures)
{
	struct buf out = BUF_INIT, err = BUF_INIT;

	cr_assert_eq(secret_from_command("echo partial; exit 3", clock_mono_ms() + 5000, &out,
	    &err), -1);
	cr_assert(strstr(err.s, "exited with status 3"), "%s", err.s);
	cr_assert_null(out.s);
	buf_reset(&err);
	cr_assert_eq(secret_from_command("true", clock_mono_ms() + 5000, &out, &err), -1);
	cr_assert(strstr(err.s, "no output"), "%s", err.s);
	buf_reset(&err);
	cr_assert_eq(secret_from_command("sleep 10", clock_mono_ms() + 300, &out, &err), -1);
	cr_assert(strstr(err.s, "timed out"), "%s", err.s);
	buf_reset(&err);
	cr_assert_eq(secret_from_command("head -c 70000 /dev/zero", clock_mono_ms() + 5000, &out,
	    &err), -1);
	cr_assert(strstr(err.s, "over 65536 bytes"), "%s", err.s);
	buf_free(&err);
}
