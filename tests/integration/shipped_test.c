/*
 * shipped_test.c: the files the package ships, used as shipped.
 * Covers: etc/policy.conf, unchanged, governs an upstream of any name
 * (its section "*"): a message goes through the real weir-gate,
 * weir-send and weir-remote to the stand-in upstream, and weir
 * check-config finds nothing to say about the policy.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/alloc.h"
#include "relay_fixture.h"

TestSuite(shipped, .init = rt_fixture_setup, .fini = rt_fixture_teardown, .timeout = 90);

/* Before, the shipped policy named "pobox" only: weir-gate refused
 * every send through the README's upstream "isp". */
Test(shipped, policy_conf_serves_any_upstream_name)
{
	const char *r[] = { "bob@dest.example" };
	char *src = tl_src_path("etc/policy.conf");
	const char *args[] = { "check-config" };
	struct tl_result res;
	struct buf b = BUF_INIT;

	tl_read(src, &b);
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);	/* upstream "isp" */
	rt_policy(&t, buf_cstr(&b));
	res = rt_run(&t, "weir", args, 1, NULL);
	cr_assert(strstr(buf_cstr(&res.out), "policy.conf:") == NULL &&
	    strstr(buf_cstr(&res.err), "policy.conf:") == NULL,
	    "check-config on the shipped policy:\n%s%s", buf_cstr(&res.out), buf_cstr(&res.err));
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, "alice@src.example", r, 1, "Subject: shipped\n\nhi\n");
	rt_wait_empty(&t, 20000);
	cr_assert_eq(rt_rec_ndata(&t), 1);
	tl_result_free(&res);
	buf_free(&b);
	free(src);
}
