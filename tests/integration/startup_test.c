/*
 * startup_test.c: start-up is separate from attention (issue 33).  An
 * upstream with an oauth section and no token yet (it needs `weir auth
 * login`) beside one that works: `weir check-config` warns about the
 * first, naming the command, and exits 0 (a broken configuration is
 * exit 1: a weir.conf line it cannot read still is); `weir run` started
 * as debian/weir.init starts it (after check-config) relays the other
 * upstream's mail; `weir status` puts the login first in its summary.
 * (tests/package/run.sh starts /etc/init.d/weir so in a Debian root
 * without systemd.)
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "relay_helpers.h"
#include "testlib.h"

static struct rt t;

static void setup(void) { rt_setup(&t, 1); }
static void teardown(void) { rt_teardown(&t); }

TestSuite(startup, .init = setup, .fini = teardown, .timeout = 120);

Test(startup, an_upstream_that_needs_a_login_does_not_stop_the_others)
{
	const char *cc[] = { "check-config" }, *st[] = { "status" };
	const char *rcpt[] = { "bob@dest.example" };
	struct tl_result r;
	char *mso;
	size_t want = 1;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	mso = xasprintf("upstream \"mso\" {\n  host = \"127.0.0.1\"\n  port = 9\n"
	    "  username = \"me@mso.example\"\n  senders = {\"*@mso.example\"}\n"
	    "  oauth {\n    provider = generic\n    client_id = \"c\"\n    scope = \"smtp\"\n"
	    "    device_endpoint = \"https://idp.example/devicecode\"\n"
	    "    token_endpoint = \"https://idp.example/token\"\n"
	    "    token_file = \"%s/oauth/mso\"\n  }\n}\n", t.s.qt.tmp);
	sh_conf_append(&t.s, mso);
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"mso\" { rate = {\"10 per 1s\"} }\n");
	r = rt_run(&t, "weir", cc, 1, NULL);
	cr_assert_eq(r.status, 0, "check-config with an upstream that needs a login:\n%s%s",
	    buf_cstr(&r.out), buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.out), ": warning: upstream \"mso\": no token yet") &&
	    strstr(buf_cstr(&r.out), "(the other upstreams are served); run weir auth login mso"),
	    "%s", buf_cstr(&r.out));
	tl_result_free(&r);
	rt_run_start(&t);
	rt_sendmail(&t, "alice@src.example", rcpt, 1, "Subject: the other upstream\n\nhello\n");
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 60000), "isp's mail did not flow:\n%s",
	    rt_run_log(&t));
	r = rt_run(&t, "weir", st, 1, NULL);
	cr_assert(strstr(buf_cstr(&r.out), "weir: 1 problem: upstream mso: its OAuth provider "
	    "refuses the refresh token, or there is none yet: its mail waits (weir auth login "
	    "mso)\n"), "weir status:\n%s", buf_cstr(&r.out));
	tl_result_free(&r);
	/* A broken configuration is still refused. */
	sh_conf_append(&t.s, "this line is not weir.conf\n");
	r = rt_run(&t, "weir", cc, 1, NULL);
	cr_assert_eq(r.status, 1, "%s", buf_cstr(&r.out));
	tl_result_free(&r);
	free(mso);
}
