/* config_listen_test.c: weir.conf's listen section (weir-smtpd). */
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

TestSuite(config_listen, .init = setup, .fini = teardown);

Test(config_listen, defaults_without_section)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("queue_dir = \"/q\"\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_eq(c.listen.present, 0);
	cr_assert_eq(c.listen.address.n, 2);
	cr_assert_str_eq(c.listen.address.v[0], "127.0.0.1:25");
	cr_assert_str_eq(c.listen.address.v[1], "[::1]:25");
	cr_assert_eq(c.listen.allow.n, 2);
	cr_assert_str_eq(c.listen.allow.v[0], "127.0.0.0/8");
	cr_assert_str_eq(c.listen.allow.v[1], "::1/128");
	cr_assert_eq(c.listen.max_size, 25 * 1024 * 1024);
	cr_assert_eq(c.listen.max_recipients, 100);
	cr_assert_eq(c.listen.max_errors, 10);
	cr_assert_eq(c.listen.timeout, 300);
	cr_assert_null(c.listen.cert_file);
	config_free(&c);
	free(p);
}

Test(config_listen, values)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("listen {\n address = {\"0.0.0.0:2525\"}\n allow = {\"192.168.1.0/24\"}\n"
	    " max_size = 4096\n max_recipients = 3\n max_connections = 7\n max_per_client = 2\n"
	    " timeout = \"90s\"\n}\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_eq(c.listen.present, 1);
	cr_assert_eq(c.listen.address.n, 1);
	cr_assert_str_eq(c.listen.address.v[0], "0.0.0.0:2525");
	cr_assert_eq(c.listen.allow.n, 1);
	cr_assert_eq(c.listen.max_size, 4096);
	cr_assert_eq(c.listen.max_recipients, 3);
	cr_assert_eq(c.listen.max_connections, 7);
	cr_assert_eq(c.listen.max_per_client, 2);
	cr_assert_eq(c.listen.timeout, 90);
	config_free(&c);
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
	config_free(&c);
	buf_free(&err);
	free(p);
}

Test(config_listen, errors)
{
	bad("listen {\n max_size = 10\n}\n", "max_size = 10 is out of range");
	bad("listen {\n timeout = \"2h\"\n}\n", "out of range");
	bad("listen {\n cert_file = \"/x.pem\"\n}\n", "cert_file and key_file go together");
	bad("listen {\n}\nlisten {\n}\n", "only one listen section");
	bad("listen {\n bogus = 1\n}\n", "bogus");
}

Test(config_listen, bad_networks_and_addresses)
{
	bad("listen {\n allow = {\"192.168.1.1/24\"}\n}\n", "weir.conf:3: listen: allow: \"192.168.1.1/24\": address bits set");
	bad("listen {\n allow = {\"lan\"}\n}\n", "listen: allow: \"lan\" is not an IPv4 address");
	bad("listen {\n address = {\"127.0.0.1\"}\n}\n", "listen: address: \"127.0.0.1\": the port is missing");
	bad("listen {\n address = {\"::1:25\"}\n}\n", "listen: address:");
}
