/*
 * metrics_parse_test.c: weir-metrics' parts that take input: the text
 * it makes of a gate document (src/metrics/collect.c), a bad one among
 * them, and weir.conf's metrics section.  (Its HTTP requests are
 * libmicrohttpd's to parse: metrics_test sends the bad ones.)
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "mail/qsummary.h"
#include "metrics/metrics.h"
#include "testlib.h"

#define S(x) x, sizeof(x) - 1

/* The text of doc (with a queue of 4 messages, 1 not preprocessed, the
 * oldest 900 s old) holds every line of want[0..n) and none of the
 * lines beginning with a string of absent (NULL-ended). */
static void
format_has(const char *doc, const char *const *want, size_t n, const char *const *absent)
{
	struct qsummary q = { .messages = 4, .todo = 1, .oldest = 900 };
	struct buf out = BUF_INIT;
	size_t k;

	metrics_format(doc, strlen(doc), &q, 1000, &out);
	for (k = 0; k < n; k++)
		cr_assert(strstr(out.s, want[k]), "no \"%s\" in:\n%s", want[k] + 1, out.s);
	for (; absent && *absent; absent++)
		cr_assert_null(strstr(out.s, *absent), "%s in:\n%s", *absent, out.s);
	buf_free(&out);
}

/* The text of a gate document: every number from the document, a label
 * escaped, a repeated window made distinct, an unreadable field left out. */
Test(metrics_format, from_a_gate_document)
{
	const char *doc = "{\"now_ms\":1000000,\"journal_durable\":true,\"upstreams\":["
	    "{\"name\":\"a\\\"b\",\"suspended\":true,\"suspended_until_ms\":1030500,"
	    "\"auth_suspended\":false,\"windows\":["
	    "{\"limit\":5,\"per_s\":60,\"unit\":\"messages\",\"used\":3},"
	    "{\"limit\":8,\"per_s\":60,\"unit\":\"messages\",\"used\":3},"
	    "{\"limit\":100,\"per_s\":86400,\"unit\":\"recipients\",\"used\":\"x\"}],"
	    "\"held\":1,\"waiting\":2,\"granted\":9,\"sent\":7,\"refunded\":1,\"throttled\":1,"
	    "\"unknown\":0,\"nomail\":0,\"authfail\":0,\"rcpt_accepted\":12}]}";
	struct qsummary q = { .messages = 4, .todo = 1, .oldest = 900 };
	struct buf out = BUF_INIT;

	metrics_format(doc, strlen(doc), &q, 1000, &out);
	cr_assert(strstr(out.s, "\nweir_gate_up 1\n"));
	cr_assert(strstr(out.s, "\nweir_window_used{upstream=\"a\\\"b\",window=\"60s\",unit=\"messages\"} 3\n"), "%s", out.s);
	cr_assert(strstr(out.s, "\nweir_window_limit{upstream=\"a\\\"b\",window=\"60s#2\",unit=\"messages\"} 8\n"));
	cr_assert(strstr(out.s, "\nweir_window_limit{upstream=\"a\\\"b\",window=\"86400s\",unit=\"recipients\"} 100\n"));
	cr_assert_null(strstr(out.s, "window=\"86400s\",unit=\"recipients\"} x"));
	cr_assert_null(strstr(out.s, "weir_window_used{upstream=\"a\\\"b\",window=\"86400s\""));
	cr_assert(strstr(out.s, "\nweir_upstream_suspended{upstream=\"a\\\"b\",kind=\"throttle\"} 1\n"));
	cr_assert(strstr(out.s, "\nweir_upstream_suspension_remaining_seconds{upstream=\"a\\\"b\",kind=\"throttle\"} 30.500\n"));
	cr_assert(strstr(out.s, "\nweir_gate_reports_total{upstream=\"a\\\"b\",outcome=\"sent\"} 7\n"));
	cr_assert(strstr(out.s, "\nweir_recipients_accepted_total{upstream=\"a\\\"b\"} 12\n"));
	cr_assert(strstr(out.s, "\nweir_queue_messages 4\n"));
	cr_assert(strstr(out.s, "\nweir_queue_oldest_message_age_seconds 100\n"));
	buf_reset(&out);
	metrics_format(S("{\"upstreams\": [}"), &q, 1000, &out);
	cr_assert(strstr(out.s, "\nweir_gate_up 0\n"));
	cr_assert_null(strstr(out.s, "weir_window"));
	buf_free(&out);
}

/* One meaning per figure (issue 33): weir_deliveries_in_flight is the
 * gate's in_flight (two kept sessions idle: grants held, nothing in
 * flight), a send one with a recipient accepted (sent_none apart). */
Test(metrics_format, in_flight_and_sends)
{
	const char *doc = "{\"now_ms\":1000000,\"journal_durable\":true,\"upstreams\":["
	    "{\"name\":\"a\",\"windows\":[],\"held\":2,\"in_flight\":0,\"waiting\":0,"
	    "\"sent\":126,\"sent_none\":14,\"rcpt_accepted\":126}]}";
	struct qsummary q = { .messages = 4, .todo = 1, .oldest = 900 };
	struct buf out = BUF_INIT;

	metrics_format(doc, strlen(doc), &q, 1000, &out);
	cr_assert(strstr(out.s, "\nweir_deliveries_in_flight{upstream=\"a\"} 0\n"), "%s", out.s);
	cr_assert(strstr(out.s, "\nweir_gate_reports_total{upstream=\"a\",outcome=\"sent\"} 126\n"));
	cr_assert(strstr(out.s, "\nweir_gate_reports_total{upstream=\"a\",outcome=\"sent_none\"} "
	    "14\n"), "%s", out.s);
	buf_reset(&out);
	/* The queue's summary not had: weir_queue_up 0, no queue family. */
	metrics_format(doc, strlen(doc), NULL, 1000, &out);
	cr_assert(strstr(out.s, "\nweir_queue_up 0\n"));
	cr_assert_null(strstr(out.s, "weir_queue_messages"));
	buf_free(&out);
}

/* ---- weir.conf's metrics section ---- */

static char *dir;

static void setup(void) { dir = tl_tmpdir(); unsetenv("WEIR_CONFIG"); unsetenv("WEIR_QUEUE"); }
static void teardown(void) { tl_rmtree(dir); free(dir); }

static int
load(const char *text, struct weir_config *c, struct buf *err)
{
	char *p = xasprintf("%s/weir.conf", dir);
	int rc;

	tl_write(p, text, strlen(text));
	rc = config_load(c, p, err);
	free(p);
	return rc;
}

/* The families read from a path inside each upstream (weir-send's
 * "send" counters, the gate's "route"): each from its own place, an
 * upstream without the member left out, no sample at all for a missing
 * "send".  No test read them before. */
Test(metrics_format, route_and_fallback_families)
{
	const char *doc = "{\"now_ms\":1000000,\"journal_durable\":true,\"upstreams\":["
	    "{\"name\":\"a\",\"windows\":[],\"route\":{\"unreachable_since_ms\":999000,"
	    "\"passed_over\":5},\"send\":{\"sessions_open\":2,"
	    "\"fallback\":{\"switches\":3,\"returns\":1}}},"
	    "{\"name\":\"b\",\"windows\":[],\"route\":{\"unreachable_since_ms\":null,"
	    "\"passed_over\":0}}]}";
	static const char *const want[] = {
		"\nweir_sessions_open{upstream=\"a\"} 2\n",
		"\nweir_fallback_switches_total{upstream=\"a\"} 3\n",
		"\nweir_fallback_returns_total{upstream=\"a\"} 1\n",
		"\nweir_gate_passed_over_total{upstream=\"a\"} 5\n",
		"\nweir_gate_passed_over_total{upstream=\"b\"} 0\n",
		"\nweir_upstream_unreachable{upstream=\"a\"} 1\n",
		"\nweir_upstream_unreachable{upstream=\"b\"} 0\n",
	};
	static const char *const absent[] = { "weir_fallback_switches_total{upstream=\"b\"}",
		NULL };

	format_has(doc, want, sizeof want / sizeof want[0], absent);
}

/* A shared window's store: whether it answers, the window whole, where
 * its master is (a label, escaped), its switches; nothing for an
 * upstream without a store. */
Test(metrics_format, shared_store_families)
{
	const char *doc = "{\"now_ms\":1000000,\"journal_durable\":true,\"upstreams\":["
	    "{\"name\":\"a\",\"windows\":[],\"shared\":\"ok\",\"shared_store\":\"redis-sentinel:"
	    "//s1:26379/m\",\"shared_master\":\"master m 10.0.0.2:6379\",\"shared_switches\":2,"
	    "\"shared_last_switch_ms\":990000,\"shared_window\":\"rebuilding\","
	    "\"shared_written_back_ms\":999000},"
	    "{\"name\":\"b\",\"windows\":[],\"shared\":\"down\",\"shared_master\":\"x\\\"y\","
	    "\"shared_switches\":0,\"shared_window\":\"unknown\"},"
	    "{\"name\":\"c\",\"windows\":[]}]}";
	static const char *const want[] = {
		"\nweir_shared_store_up{upstream=\"a\"} 1\n",
		"\nweir_shared_store_up{upstream=\"b\"} 0\n",
		"\nweir_shared_window_whole{upstream=\"a\"} 0\n",
		"\nweir_shared_window_whole{upstream=\"b\"} 0\n",
		"\nweir_shared_master_info{upstream=\"a\",master=\"master m 10.0.0.2:6379\"} 1\n",
		"\nweir_shared_master_info{upstream=\"b\",master=\"x\\\"y\"} 1\n",
		"\nweir_shared_master_switches_total{upstream=\"a\"} 2\n",
		"\nweir_shared_master_switches_total{upstream=\"b\"} 0\n",
	};
	static const char *const absent[] = { "weir_shared_store_up{upstream=\"c\"}",
		"weir_shared_master_info{upstream=\"c\"", NULL };

	format_has(doc, want, sizeof want / sizeof want[0], absent);
}

Test(config_metrics, absent_present_and_errors, .init = setup, .fini = teardown)
{
	struct weir_config c;
	struct buf err = BUF_INIT;

	cr_assert_eq(load("queue_dir = \"/q\"\n", &c, &err), 0, "%s", err.s);
	cr_assert_eq(c.metrics.present, 0);
	cr_assert_null(c.metrics.address);
	cr_assert_eq(c.metrics.interval, 15);
	config_free(&c);
	cr_assert_eq(load("metrics { address = \"127.0.0.1:9749\" }\n", &c, &err), 0, "%s", err.s);
	cr_assert_eq(c.metrics.present, 1);
	cr_assert_str_eq(c.metrics.address, "127.0.0.1:9749");
	cr_assert_null(c.metrics.textfile);
	config_free(&c);
	cr_assert_eq(load("metrics { textfile = \"/t/w.prom\" interval = \"1m\" }\n", &c, &err), 0,
	    "%s", err.s);
	cr_assert_str_eq(c.metrics.textfile, "/t/w.prom");
	cr_assert_eq(c.metrics.interval, 60);
	config_free(&c);
	cr_assert_eq(load("metrics { }\n", &c, &err), -1);
	cr_assert(strstr(err.s, "needs address, textfile or both"), "%s", err.s);
	buf_reset(&err);
	cr_assert_eq(load("metrics { address = \"localhost:80\" }\n", &c, &err), -1);
	cr_assert(strstr(err.s, "metrics: address"), "%s", err.s);
	buf_reset(&err);
	cr_assert_eq(load("metrics { textfile = \"w.prom\" }\n", &c, &err), -1);
	cr_assert(strstr(err.s, "absolute"), "%s", err.s);
	buf_reset(&err);
	cr_assert_eq(load("metrics { address = \"127.0.0.1:1\" }\nmetrics { address = "
	    "\"127.0.0.1:2\" }\n", &c, &err), -1);
	cr_assert(strstr(err.s, "only one metrics section"), "%s", err.s);
	buf_free(&err);
}

Test(config_metrics, allow_and_auth_file, .init = setup, .fini = teardown)
{
	struct weir_config c;
	struct buf err = BUF_INIT;

	cr_assert_eq(load("metrics { address = \"127.0.0.1:9749\" }\n", &c, &err), 0, "%s", err.s);
	cr_assert_eq(c.metrics.allow.n, 2, "loopback by default");
	cr_assert_str_eq(c.metrics.allow.v[0], "127.0.0.0/8");
	cr_assert_str_eq(c.metrics.allow.v[1], "::1/128");
	cr_assert_null(c.metrics.auth_file);
	config_free(&c);
	cr_assert_eq(load("metrics { address = \"0.0.0.0:9749\" allow = {\"192.168.1.0/24\"} "
	    "auth_file = \"/etc/weir/metrics.users\" }\n", &c, &err), 0, "%s", err.s);
	cr_assert_eq(c.metrics.allow.n, 1);
	cr_assert_str_eq(c.metrics.allow.v[0], "192.168.1.0/24");
	cr_assert_str_eq(c.metrics.auth_file, "/etc/weir/metrics.users");
	config_free(&c);
	cr_assert_eq(load("metrics { address = \"127.0.0.1:1\" allow = {\"192.168.1.1/24\"} }\n",
	    &c, &err), -1);
	cr_assert(strstr(err.s, "metrics: allow:"), "%s", err.s);
	buf_reset(&err);
	cr_assert_eq(load("metrics { address = \"127.0.0.1:1\" auth_file = \"users\" }\n", &c,
	    &err), -1);
	cr_assert(strstr(err.s, "auth_file must be an absolute path"), "%s", err.s);
	cr_assert_eq(load("metrics { address = \"127.0.0.1:1\" auth_file = \"\" }\n", &c, &err), 0,
	    "%s", err.s);
	cr_assert_null(c.metrics.auth_file, "\"\": none");
	config_free(&c);
	buf_free(&err);
}
