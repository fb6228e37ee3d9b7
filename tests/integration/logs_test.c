/* measure (temporary) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "relay_helpers.h"

static struct rt t;
static void setup(void) { rt_setup(&t, 2); }
static void teardown(void) { rt_teardown(&t); }
TestSuite(logs, .init = setup, .fini = teardown, .timeout = 90);

Test(logs, measure)
{
	const char *r[] = { "bob@dest.example" };
	char *logs;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, "alice@src.example", r, 1, "Subject: x\n\nhello\n");
	rt_wait_empty(&t, 30000);
	logs = rt_send_logs(&t);
	fprintf(stderr, "=== SEND LOG\n%s=== END\n", logs);
	free(logs);
	{
		struct buf b = BUF_INIT;
		tl_read(t.gate_log, &b);
		fprintf(stderr, "=== GATE LOG\n%s=== END\n", buf_cstr(&b));
		buf_free(&b);
	}
}
