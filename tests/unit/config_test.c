/* config_test.c: weir.conf loading, defaults, errors with file:line. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "testlib.h"

static char *dir;

static void setup(void) { dir = tl_tmpdir(); unsetenv("WEIR_CONFIG"); unsetenv("WEIR_QUEUE"); }
static void teardown(void) { tl_rmtree(dir); free(dir); }

static char *
conf(const char *text)
{
	char *p = xasprintf("%s/weir.conf", dir);

	tl_write(p, text, strlen(text));
	return p;
}

TestSuite(config, .init = setup, .fini = teardown);

Test(config, values_and_defaults)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("queue_dir = \"/q\"\nqueue_split = 7\ninject_timeout = \"1h30m\"\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_str_eq(c.queue_dir, "/q");
	cr_assert_eq(c.queue_split, 7);
	cr_assert_eq(c.inject_timeout, 5400);
	cr_assert_str_eq(c.admin, "postmaster");
	cr_assert_not_null(c.hostname);
	cr_assert_str_eq(c.file, p);
	config_free(&c);
	free(p);
}

Test(config, env_file_and_queue_override)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("queue_dir = \"/from-file\"\nhostname = mx.example.org\n");

	setenv("WEIR_CONFIG", p, 1);
	setenv("WEIR_QUEUE", "/from-env", 1);
	cr_assert_eq(config_load(&c, NULL, &err), 0, "%s", err.s);
	cr_assert_str_eq(c.queue_dir, "/from-env");
	cr_assert_str_eq(c.hostname, "mx.example.org");
	config_free(&c);
	free(p);
}

Test(config, explicit_missing_file_is_an_error)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = xasprintf("%s/absent.conf", dir);

	cr_assert_eq(config_load(&c, p, &err), -1);
	cr_assert(strstr(err.s, "absent.conf"), "%s", err.s);
	free(p);
}

static void
bad(const char *text, const char *want)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf(text);

	cr_assert_eq(config_load(&c, p, &err), -1, "accepted: %s", text);
	cr_assert(strstr(err.s, want), "for %s got: %s", text, err.s);
	buf_free(&err);
	free(p);
}

Test(config, errors_name_file_line_and_problem)
{
	bad("queue_dir = \"/q\"\nno_such_key = 1\n", "weir.conf:2:");
	bad("queue_dir = \"/q\"\nno_such_key = 1\n", "no_such_key");
	bad("queue_split = 0\n", "queue_split = 0 is out of range");
	bad("queue_split = 1001\n", "out of range");
	bad("queue_split = many\n", "weir.conf:1:");
	bad("\n\ninject_timeout = \"soon\"\n", "weir.conf:3: inject_timeout");
	bad("inject_timeout = \"36h\"\n", "out of range");
	bad("queue_dir = \"\"\n", "must not be empty");
	bad("queue_dir = \"/q\n", "weir.conf:");
}

Test(config, a_folder_is_refused_not_fatal)
{
	struct weir_config c;
	struct buf err = BUF_INIT;

	cr_assert_eq(config_load(&c, dir, &err), -1);
	cr_assert(strstr(err.s, "not a regular file"), "%s", err.s);
	buf_free(&err);
}
