/*
 * metrics_test.c: weir-metrics and `weir status --watch` against a real
 * weir-gate on a scratch queue.
 *   - a known run through the gate client (3 grants reported sent with 2
 *     recipients each, 2 grants held, 1 request waiting, under "5
 *     messages per 1m") and 2 messages in todo/: the scrape, by curl,
 *     passes `promtool check metrics` and says exactly those numbers;
 *   - malformed requests (bare CR, no Host, a body, control bytes, folded
 *     lines, too long, other versions, paths and methods) get
 *     400/404/405/414/431/505 and the server goes on, also while a client
 *     holds a connection open saying nothing;
 *   - the gate killed: weir_gate_up 0, still a valid page;
 *   - --textfile replaces the file by rename (a hard link to the old file
 *     keeps the old bytes), and the daemon's textfile key writes it;
 *   - `weir run` with the metrics section starts weir-metrics;
 *   - `weir status --watch` into a pipe: two frames, a second apart, with
 *     the window's bar;
 *   - COUNTS lines (weir-send's counters) sent by hand: the latest one is
 *     exported, an unknown upstream refused, no family before any;
 *   - the read-only status socket (gate_status_socket): as nobody,
 *     gate_socket refuses the connection, the status socket answers
 *     STATUS JSON and refuses the other requests with ERR READONLY
 *     while the gate goes on; weir-metrics as nobody scrapes through it;
 *   - the Grafana dashboard (etc/weir-grafana.json): Prometheus's own up
 *     of the job is a panel; every metric name
 *     its queries and variables use is a family weir-metrics wrote (the
 *     textfile, with every family present, OAuth's through an upstream
 *     with a token status file), every family is used, and
 *     promtool accepts each query as PromQL;
 *   - a whole relay run (sendmail, weir-queue, weir-gate, weir-send,
 *     weir-remote, tests/upstream/upstream.py accepting, deferring and
 *     refusing recipients): weir-send's counters per upstream, as
 *     weir-metrics exports them, are exactly the run's, and promtool
 *     passes the page.
 * Every process started dies with the test (own process group, killed
 * in fini, PR_SET_PDEATHSIG).
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/jsonparse.h"
#include "mail/gateclient.h"
#include "relay_helpers.h"
#include "send_helpers.h"
#include "testlib.h"

static struct sht s;
static struct rt rtr;		/* the relay run's */
static const char *confpath;	/* the config in use: s's or rtr's */
static char *sock, *gatelog, *mlog;
static pid_t gate_pid = -1, metrics_pid = -1;
static unsigned port;
static struct gate_client gc;
static int gc_open;

static void
kill_pid(pid_t *pid)
{
	int st;

	if (*pid <= 0)
		return;
	kill(-*pid, SIGKILL);
	while (waitpid(*pid, &st, 0) < 0 && errno == EINTR)
		;
	*pid = -1;
}

#define S(x) x, sizeof(x) - 1

static void
setup(void)
{
	char *conf, *pol;
	const char *p = "upstream \"up1\" {\n  window { limit = 5 per = \"1m\" unit = \"messages\" }\n}\n";

	sh_setup(&s, NULL);
	confpath = s.qt.conf;
	sock = xasprintf("%s/gate.sock", s.qt.tmp);
	gatelog = xasprintf("%s/gate.log", s.qt.tmp);
	mlog = xasprintf("%s/metrics.log", s.qt.tmp);
	pol = xasprintf("%s/policy.conf", s.qt.tmp);
	tl_write(pol, p, strlen(p));
	conf = xasprintf(
	    "policy_file = \"%s\"\n"
	    "gate_socket = \"%s\"\n"
	    "gate_journal = \"%s/journal\"\n"
	    "upstream \"up1\" { host = \"127.0.0.1\" tls = \"none\" }\n"
	    "metrics { address = \"127.0.0.1:0\" textfile = \"%s/daemon.prom\" interval = \"1s\" }\n",
	    pol, sock, s.qt.tmp, s.qt.tmp);
	sh_conf_append(&s, conf);
	free(conf);
	free(pol);
}

static void
teardown(void)
{
	if (gc_open)
		gc_close(&gc);
	gc_open = 0;
	kill_pid(&metrics_pid);
	kill_pid(&gate_pid);
	sh_teardown(&s);
	free(sock);
	free(gatelog);
	free(mlog);
}

TestSuite(metrics, .init = setup, .fini = teardown, .timeout = 120);

/* ---- processes ---- */

static void
start_gate(void)
{
	gate_pid = sh_gate_spawn(s.qt.conf, NULL, gatelog, sock);
}

static int
metrics_port_known(void *arg)
{
	struct buf b = BUF_INIT;
	const char *p;

	(void)arg;
	tl_read(mlog, &b);
	p = b.s ? strstr(b.s, "serving http://127.0.0.1:") : NULL;
	if (p)
		port = (unsigned)atoi(p + strlen("serving http://127.0.0.1:"));
	buf_free(&b);
	return p != NULL && port > 0;
}

/* Start prog -c conf [arg] (weir-metrics, or weir run), its output to
 * mlog; wait for weir-metrics' port. */
static void
start_logged(const char *prog, const char *arg)
{
	const char *args[] = { arg, NULL };
	struct buf b = BUF_INIT;

	metrics_pid = tl_spawn(prog, confpath, args, mlog);
	if (!sh_wait_for(metrics_port_known, NULL, 10000)) {
		tl_read(mlog, &b);
		cr_assert_fail("weir-metrics did not start:\n%s", buf_cstr(&b));
	}
}

static void
start_metrics(void)
{
	start_logged("weir-metrics", NULL);
}

static void
metrics_alive(void)
{
	int st;

	cr_assert_eq(waitpid(metrics_pid, &st, WNOHANG), 0, "weir-metrics exited (0x%x)", st);
}

/* ---- the gate run ---- */

static void
expect(uint32_t tag, enum gp_rverb verb)
{
	struct gp_reply r;
	const char *why = "closed";

	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1, "gate: %s", why);
	cr_assert_eq(r.tag, tag);
	cr_assert_eq(r.verb, verb, "tag %u: reply %d, wanted %d", tag, r.verb, verb);
}

/* 3 sent (2 recipients each), 2 held, 1 waiting: "5 per 1m" full. */
static void
known_run(void)
{
	uint32_t t;

	cr_assert_eq(gc_connect(&gc, sock), 0);
	gc_open = 1;
	for (t = 1; t <= 5; t++) {
		cr_assert_eq(gc_acquire(&gc, t, "up1", NULL, NULL, 1, 2, 1), 0);
		expect(t, GP_R_GRANT);
	}
	for (t = 1; t <= 3; t++) {
		cr_assert_eq(gc_report_sent(&gc, t, 2, -1), 0);
		expect(t, GP_R_OK);
	}
	cr_assert_eq(gc_acquire(&gc, 6, "up1", NULL, NULL, 1, 2, 1), 0);
	/* The gate answers in order: a STATUS after it proves it queued. */
	cr_assert_eq(gc_status(&gc, 0), 0);
	expect(0, GP_R_STATUS);
}

/* ---- HTTP ---- */

/* curl's body of http://127.0.0.1:port/path; its exit status. */
static int
curl(const char *path, struct buf *body)
{
	char *url = xasprintf("http://127.0.0.1:%u%s", port, path);
	const char *argv[] = { "/usr/bin/curl", "-sS", "-f", "--max-time", "20", url, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	int st;

	tl_run(&run, &r);
	buf_add(body, r.out.s ? r.out.s : "", r.out.len);
	st = r.status;
	tl_result_free(&r);
	free(url);
	return st;
}

static void
promtool_clean(const struct buf *body)
{
	const char *argv[] = { "/usr/bin/promtool", "check", "metrics", NULL };
	struct tl_run run = { .argv = argv, .in = body->s, .inlen = body->len };
	struct tl_result r;

	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "promtool: %s%s", buf_cstr(&r.out), buf_cstr(&r.err));
	cr_assert_eq(r.out.len + r.err.len, 0, "promtool: %s%s", buf_cstr(&r.out),
	    buf_cstr(&r.err));
	tl_result_free(&r);
}

static void
has_line(const struct buf *body, const char *line)
{
	char *needle = xasprintf("\n%s\n", line);

	cr_assert(body->s && strstr(body->s, needle), "no line \"%s\" in:\n%s", line, body->s);
	free(needle);
}

static int
tcp_connect(void)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s",
	    strerror(errno));
	return fd;
}

/* Send raw bytes, read the whole answer (the server closes). */
static void
raw(const char *req, size_t len, struct buf *out)
{
	int fd = tcp_connect();
	char tmp[4096];
	ssize_t k;
	struct pollfd p = { fd, POLLIN, 0 };

	cr_assert_eq(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
	for (;;) {
		cr_assert(poll(&p, 1, 20000) == 1, "no answer to %.40s", req);
		k = read(fd, tmp, sizeof tmp);
		if (k <= 0)
			break;
		buf_add(out, tmp, (size_t)k);
	}
	close(fd);
}

/* The headers every answer carries (issue 33). */
static const char *const security_headers[] = {
	"\r\nX-Content-Type-Options: nosniff\r\n",
	"\r\nContent-Security-Policy: default-src 'none'; style-src 'sha256-",
	"; frame-ancestors 'none'; base-uri 'none'; form-action 'none'\r\n",
	"\r\nReferrer-Policy: no-referrer\r\n",
	"\r\nX-Frame-Options: DENY\r\n",
};

static void
raw_status(const char *req, size_t len, const char *want)
{
	struct buf out = BUF_INIT;
	size_t i;

	raw(req, len, &out);
	cr_assert(out.s && strncmp(out.s, want, strlen(want)) == 0,
	    "request \"%.60s\": wanted \"%s\", got \"%.80s\"", req, want, buf_cstr(&out));
	cr_assert_eq(tl_count(out.s, "HTTP/1.1 "), 1, "request \"%.60s\": not one head:\n%s", req,
	    out.s);
	for (i = 0; i < sizeof security_headers / sizeof security_headers[0]; i++)
		cr_assert(strstr(out.s, security_headers[i]), "request \"%.60s\": no %s in\n%s", req,
		    security_headers[i] + 2, out.s);
	buf_free(&out);
	metrics_alive();
}

/* ---- tests ---- */

Test(metrics, known_run_scraped_by_curl_and_promtool)
{
	struct buf body = BUF_INIT;

	start_gate();
	sh_put_s4(&s, "m1\n", 3, "Fa@example.org\0Tb@example.net\0", 31, 0);
	sh_put_s4(&s, "m2\n", 3, "Fa@example.org\0Tc@example.net\0", 31, 0);
	known_run();
	start_metrics();
	cr_assert_eq(curl("/metrics", &body), 0);
	promtool_clean(&body);
	has_line(&body, "weir_gate_up 1");
	has_line(&body, "weir_window_used{upstream=\"up1\",window=\"60s\",unit=\"messages\"} 5");
	has_line(&body, "weir_window_limit{upstream=\"up1\",window=\"60s\",unit=\"messages\"} 5");
	has_line(&body, "weir_grants_waiting{upstream=\"up1\"} 1");
	has_line(&body, "weir_deliveries_in_flight{upstream=\"up1\"} 2");
	has_line(&body, "weir_gate_grants_total{upstream=\"up1\"} 5");
	has_line(&body, "weir_gate_reports_total{upstream=\"up1\",outcome=\"sent\"} 3");
	has_line(&body, "weir_gate_reports_total{upstream=\"up1\",outcome=\"throttled\"} 0");
	has_line(&body, "weir_recipients_accepted_total{upstream=\"up1\"} 6");
	has_line(&body, "weir_upstream_suspended{upstream=\"up1\",kind=\"throttle\"} 0");
	has_line(&body, "weir_queue_up 1");
	has_line(&body, "weir_queue_messages 2");
	has_line(&body, "weir_queue_messages_not_preprocessed 2");
	cr_assert(strstr(body.s, "\nweir_queue_oldest_message_age_seconds ") != NULL);
	/* No COUNTS yet: weir-send's families are left out. */
	cr_assert(strstr(body.s, "weir_messages_total") == NULL, "%s", body.s);
	buf_free(&body);
}

/* COUNTS lines as weir-send sends them: the latest one per upstream is
 * what the page says; an upstream the gate never heard of is refused. */
Test(metrics, counts_line_exported)
{
	const uint64_t c1[GP_NCOUNTS] = { 1, 1, 1, 1, 0, 0, 0, 0, 1 };
	const uint64_t c2[GP_NCOUNTS] = { 9, 18, 5, 11, 3, 4, 2, 3, 2 };
	struct buf body = BUF_INIT;
	struct gp_reply r;
	const char *why = "closed";

	start_gate();
	known_run();
	cr_assert_eq(gc_counts(&gc, "nosuch", c1), 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1, "gate: %s", why);
	cr_assert(r.verb == GP_R_ERR && r.code == GP_NOPOLICY && r.tag == 0);
	cr_assert_eq(gc_counts(&gc, "up1", c1), 0);
	expect(0, GP_R_OK);
	cr_assert_eq(gc_counts(&gc, "up1", c2), 0);
	expect(0, GP_R_OK);
	start_metrics();
	cr_assert_eq(curl("/metrics", &body), 0);
	promtool_clean(&body);
	has_line(&body, "weir_messages_total{upstream=\"up1\",outcome=\"queued\"} 9");
	has_line(&body, "weir_messages_total{upstream=\"up1\",outcome=\"delivered\"} 5");
	has_line(&body, "weir_messages_total{upstream=\"up1\",outcome=\"deferred\"} 3");
	has_line(&body, "weir_messages_total{upstream=\"up1\",outcome=\"bounced\"} 2");
	has_line(&body, "weir_recipients_total{upstream=\"up1\",outcome=\"queued\"} 18");
	has_line(&body, "weir_recipients_total{upstream=\"up1\",outcome=\"delivered\"} 11");
	has_line(&body, "weir_recipients_total{upstream=\"up1\",outcome=\"deferred\"} 4");
	has_line(&body, "weir_recipients_total{upstream=\"up1\",outcome=\"bounced\"} 3");
	has_line(&body, "weir_sessions_open{upstream=\"up1\"} 2");
	cr_assert(strstr(body.s, "nosuch") == NULL, "%s", body.s);
	buf_free(&body);
}

/*
 * Every request head is checked by weir-metrics itself (src/metrics/
 * head.c) before libmicrohttpd (0.9.75) sees it, each case as weir-
 * metrics(8) says: a bare LF ends a line (RFC 9112 2.2 allows it; a
 * request carries no body here, one per connection, so nothing can be
 * smuggled past it); HTTP/2.0 gets 505 (RFC 9110 15.6.6), HTTP/1.2 and
 * HTTP/1.5 400; a NUL anywhere, in the target or a value, 400; a space
 * in the target 400 (libmicrohttpd's strict mode closed it unanswered);
 * "%00" is not unescaped, so "/metrics%00x" is not /metrics (404).
 * Each answer has one head (libmicrohttpd's strict mode wrote the head
 * of its own 400s twice: no Host, Content-Length: -1) and the security
 * headers.
 */
Test(metrics, malformed_requests_refused_server_goes_on)
{
	static const struct { const char *req; size_t len; const char *want; } cases[] = {
		{ S("GET /metrics HTTP/1.1\r\nHost: x\r\r\n\r\n"), "HTTP/1.1 400 " },	/* bare CR */
		{ S("GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 400 " },		/* no Host */
		{ S("GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /met\0rics HTTP/1.0\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\nX: a\0b\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /met rics HTTP/1.1\r\nHost: x\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics%00x HTTP/1.0\r\n\r\n"), "HTTP/1.1 404 " },
		{ S("GET /%00x HTTP/1.0\r\n\r\n"), "HTTP/1.1 404 " },
		{ S("GET /metrics HTTP/1.2\r\nHost: x\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.1\r\nContent-Length: -1\r\nHost: x\r\n\r\n"),
		    "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\nContent-Length:\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\n folded\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\nNo colon\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\n: empty name\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\nBad\x01: x\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0\r\nX: a\x01b\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.0 \r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics\r\n\r\n"), "HTTP/1.1 400 " },			/* HTTP/0.9 */
		{ S("GET /metrics HTTP/2.0\r\n\r\n"), "HTTP/1.1 505 " },
		{ S("GET /metrics HTTP/1.5\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /metrics HTTP/1.10\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("get /metrics HTTP/1.0\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET metrics HTTP/1.0\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("OPTIONS * HTTP/1.0\r\n\r\n"), "HTTP/1.1 400 " },
		{ S("GET /nosuch HTTP/1.0\r\n\r\n"), "HTTP/1.1 404 " },
		{ S("GET /metrics/x HTTP/1.1\r\nHost: x\r\n\r\n"), "HTTP/1.1 404 " },
		{ S("GET /metricsx HTTP/1.0\r\n\r\n"), "HTTP/1.1 404 " },
		{ S("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), "HTTP/1.1 404 " },
		{ S("POST /metrics HTTP/1.0\r\n\r\n"), "HTTP/1.1 405 " },
		{ S("PUT /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), "HTTP/1.1 405 " },
		{ S("GET /metrics HTTP/1.1\nHost: x\n\n"), "HTTP/1.1 200 " },		/* bare LF */
		{ S("GET /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n"), "HTTP/1.1 200 " },
		{ S("GET /metrics HTTP/1.0\r\n\r\n"), "HTTP/1.1 200 " },
		{ S("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), "HTTP/1.1 200 " },
	};
	struct buf body = BUF_INIT, big = BUF_INIT;
	size_t i;
	int idle;

	start_gate();
	start_metrics();
	/* A client that says nothing holds a connection the whole time. */
	idle = tcp_connect();
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
		raw_status(cases[i].req, cases[i].len, cases[i].want);
	/* Too long: a header (431), the request line alone (414). */
	buf_adds(&big, "GET /metrics HTTP/1.0\r\nX: ");
	while (big.len < 9000)
		buf_addc(&big, 'a');
	raw_status(big.s, big.len, "HTTP/1.1 431 ");
	buf_reset(&big);
	buf_adds(&big, "GET /");
	while (big.len < 9000)
		buf_addc(&big, 'a');
	buf_adds(&big, " HTTP/1.0\r\n\r\n");
	raw_status(big.s, big.len, "HTTP/1.1 414 ");
	cr_assert_eq(curl("/metrics", &body), 0);
	has_line(&body, "weir_gate_up 1");
	close(idle);
	buf_free(&big);
	buf_free(&body);
}

/* A scrape that says the gate is down (a scrape is served again for a
 * second: the first after the kill may be the one before it). */
static int
scrape_says_gate_down(void *arg)
{
	struct buf *body = arg;

	buf_reset(body);
	return curl("/metrics", body) == 0 && body->s && strstr(body->s, "\nweir_gate_up 0\n");
}

static int
scrape_says_gate_up(void *arg)
{
	struct buf *body = arg;

	buf_reset(body);
	return curl("/metrics", body) == 0 && body->s && strstr(body->s, "\nweir_gate_up 1\n");
}

Test(metrics, gate_down_says_so)
{
	struct buf body = BUF_INIT;

	start_gate();
	start_metrics();
	kill_pid(&gate_pid);
	cr_assert(sh_wait_for(scrape_says_gate_down, &body, 5000), "%s", buf_cstr(&body));
	promtool_clean(&body);
	has_line(&body, "weir_gate_up 0");
	has_line(&body, "weir_queue_up 1");
	cr_assert(strstr(body.s, "weir_window_used") == NULL);
	buf_free(&body);
}

static int
daemon_textfile_written(void *arg)
{
	struct stat st;

	return stat((const char *)arg, &st) == 0 && st.st_size > 0;
}

Test(metrics, textfile_replaced_by_rename)
{
	char *path = xasprintf("%s/weir.prom", s.qt.tmp), *old = xasprintf("%s.old", path);
	char *tmp = xasprintf("%s.tmp", path), *dpath = xasprintf("%s/daemon.prom", s.qt.tmp);
	char *bin = tl_bin("weir-metrics");
	const char *argv[] = { bin, "-c", s.qt.conf, "--textfile", path, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	struct buf b = BUF_INIT;
	struct stat st;

	start_gate();
	tl_write(path, "old\n", 4);
	cr_assert_eq(link(path, old), 0);
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "weir-metrics --textfile: %s", buf_cstr(&r.err));
	tl_result_free(&r);
	tl_read(old, &b);
	cr_assert_str_eq(buf_cstr(&b), "old\n", "the old file was written in place");
	buf_reset(&b);
	tl_read(path, &b);
	promtool_clean(&b);
	has_line(&b, "weir_gate_up 1");
	cr_assert(stat(tmp, &st) < 0 && errno == ENOENT, "%s left behind", tmp);
	/* The daemon writes its textfile key's file every interval. */
	start_metrics();
	cr_assert(sh_wait_for(daemon_textfile_written, dpath, 10000), "no %s", dpath);
	buf_reset(&b);
	tl_read(dpath, &b);
	promtool_clean(&b);
	buf_free(&b);
	free(path);
	free(old);
	free(tmp);
	free(dpath);
	free(bin);
}

/* ---- the Grafana dashboard ---- */

#define DASHBOARD "etc/weir-grafana.json"

/* Every string of the dashboard a query lives in: "expr" (PromQL),
 * "definition" and "query" (a variable's label_values(...)). */
static void
dash_queries(struct json_object *o, const char *key, struct buf *exprs, struct buf *all)
{
	size_t i;

	if (json_object_is_type(o, json_type_object)) {
		json_object_object_foreach(o, k, v)
			dash_queries(v, k, exprs, all);
	} else if (json_object_is_type(o, json_type_array)) {
		for (i = 0; i < jp_len(o); i++)
			dash_queries(jp_at(o, i), key, exprs, all);
	} else if (key && jp_str(o) && (strcmp(key, "expr") == 0 ||
	    strcmp(key, "definition") == 0 || strcmp(key, "query") == 0)) {
		buf_printf(all, "%s\n", jp_str(o));
		if (strcmp(key, "expr") == 0)
			buf_printf(exprs, "%s\n", jp_str(o));
	}
}

/* Grafana's variables, as promtool cannot read them. */
static void
unvariable(struct buf *out, const char *q)
{
	static const char *const vars[][2] = {
		{ "$__rate_interval", "5m" }, { "$instance", ".*" }, { "$upstream", ".*" },
	};
	size_t i;

	while (*q) {
		for (i = 0; i < 3; i++)
			if (strncmp(q, vars[i][0], strlen(vars[i][0])) == 0)
				break;
		if (i < 3) {
			buf_adds(out, vars[i][1]);
			q += strlen(vars[i][0]);
		} else
			buf_addc(out, *q++);
	}
}

Test(metrics, grafana_dashboard_queries_exported_metrics)
{
	const uint64_t c[GP_NCOUNTS] = { 1, 1, 1, 1, 0, 0, 0, 0, 1 };
	char *path = xasprintf("%s/weir.prom", s.qt.tmp), *rules = xasprintf("%s/dash.rules", s.qt.tmp);
	char *bin = tl_bin("weir-metrics"), *dpath = tl_src_path(DASHBOARD);
	const char *argv[] = { bin, "-c", s.qt.conf, "--textfile", path, NULL };
	const char *pargv[] = { "/usr/bin/promtool", "check", "rules", rules, NULL };
	struct tl_run run = { .argv = argv }, prun = { .argv = pargv };
	struct tl_result r;
	struct buf text = BUF_INIT, why = BUF_INIT, exprs = BUF_INIT, all = BUF_INIT;
	struct buf fams = BUF_INIT, used = BUF_INIT, rb = BUF_INIT;
	struct json_object *dash;
	const char *p, *e;
	char *oauth;
	size_t nused = 0, nfam = 0, k = 0;

	/* An upstream with OAuth and its token status file: the OAuth
	 * families too. */
	oauth = xasprintf("upstream \"mso\" {\n  host = \"127.0.0.1\"\n  username = \"me@example.org\"\n"
	    "  oauth {\n    provider = generic\n    client_id = \"c\"\n    scope = \"smtp\"\n"
	    "    device_endpoint = \"https://idp.example/devicecode\"\n"
	    "    token_endpoint = \"https://idp.example/token\"\n    token_file = \"%s/mso\"\n"
	    "  }\n}\n", s.qt.tmp);
	sh_conf_append(&s, oauth);
	free(oauth);
	oauth = xasprintf("%s/mso.status", s.qt.tmp);
	tl_write(oauth, S("{\"version\":1,\"login_at\":1795600000,\"refresh_since\":1795600000,"
	    "\"refreshed_at\":1795670000,\"expires_at\":1795680000,\"lifetime\":3600,"
	    "\"error_at\":0,\"error\":\"\",\"login_needed\":false}\n"));
	start_gate();
	known_run();
	cr_assert_eq(gc_counts(&gc, "up1", c), 0);
	expect(0, GP_R_OK);
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "weir-metrics --textfile: %s", buf_cstr(&r.err));
	tl_result_free(&r);
	tl_read(path, &text);
	/* The families written: " name " for each "# TYPE name kind". */
	buf_addc(&fams, ' ');
	for (p = text.s; (p = strstr(p, "# TYPE ")) != NULL; p = e) {
		p += 7;
		e = strchr(p, ' ');
		cr_assert_not_null(e);
		buf_add(&fams, p, (size_t)(e - p));
		buf_addc(&fams, ' ');
		nfam++;
	}
	tl_read(dpath, &why);
	dash = json_parse_strict(why.s, why.len, 1 << 20, &exprs);
	cr_assert_not_null(dash, "%s: %s", dpath, buf_cstr(&exprs));
	buf_reset(&exprs);
	buf_reset(&why);
	dash_queries(dash, NULL, &exprs, &all);
	/* Each weir_* name queried is a family written. */
	buf_addc(&used, ' ');
	for (p = all.s; p && (p = strstr(p, "weir_")) != NULL; p = e) {
		char *name, *needle;

		for (e = p; (*e >= 'a' && *e <= 'z') || *e == '_' || (*e >= '0' && *e <= '9'); e++)
			;
		name = xstrndup(p, (size_t)(e - p));
		needle = xasprintf(" %s ", name);
		cr_assert(strstr(fams.s, needle), "the dashboard queries %s, which weir-metrics does "
		    "not export", name);
		if (strstr(used.s, needle) == NULL) {
			buf_printf(&used, "%s ", name);
			nused++;
		}
		free(name);
		free(needle);
	}
	/* Each family written is shown. */
	for (p = fams.s + 1; *p; p = e + 1) {
		char *needle;

		e = strchr(p, ' ');
		needle = xasprintf(" %.*s ", (int)(e - p), p);
		cr_assert(strstr(used.s, needle), "no panel of the dashboard shows%s", needle);
		free(needle);
	}
	cr_assert_eq(nused, nfam, "%zu families, %zu used", nfam, nused);
	/* And Prometheus's own up for the job (issue 33): with weir-metrics
	 * down or too slow, every other panel is stale. */
	{
		char *lines = xasprintf("\n%s", all.s);

		cr_assert(strstr(lines, "\nup{instance=~\"$instance\"}\n"), "no panel shows the "
		    "job's up");
		free(lines);
	}
	cr_assert_geq(nfam, 21, "not every family was written:\n%s", text.s);
	/* promtool reads every query as PromQL (as recording rules). */
	buf_adds(&rb, "groups:\n- name: dashboard\n  rules:\n");
	for (p = exprs.s; p && *p; p = e + 1) {
		e = strchr(p, '\n');
		buf_printf(&rb, "  - record: weir:dashboard:q%zu\n    expr: '", k++);
		{
			char *one = xstrndup(p, (size_t)(e - p));

			unvariable(&rb, one);
			free(one);
		}
		buf_adds(&rb, "'\n");
	}
	cr_assert_gt(k, 15, "%zu queries", k);
	tl_write(rules, rb.s, rb.len);
	tl_run(&prun, &r);
	cr_assert_eq(r.status, 0, "promtool check rules:\n%s%s\n%s", buf_cstr(&r.out),
	    buf_cstr(&r.err), rb.s);
	tl_result_free(&r);
	json_object_put(dash);
	buf_free(&text);
	buf_free(&why);
	buf_free(&exprs);
	buf_free(&all);
	buf_free(&fams);
	buf_free(&used);
	buf_free(&rb);
	free(path);
	free(rules);
	free(bin);
	free(dpath);
	free(oauth);
}

/* ---- the read-only status socket (gate_status_socket) ---- */

#define NOBODY_ID 65534		/* nobody and nogroup on Debian */

static char *ssock;		/* tmp/pub/status.sock */

/* The status socket in tmp/pub (a folder the gate makes), tmp open to
 * others' search only: the gate socket in it stays root's 0660. */
static void
status_socket_conf(void)
{
	char *line;

	if (geteuid() != 0)
		cr_skip_test("needs root to run clients as nobody");
	ssock = xasprintf("%s/pub/status.sock", s.qt.tmp);
	line = xasprintf("gate_status_socket = \"%s\"\n", ssock);
	sh_conf_append(&s, line);
	free(line);
	cr_assert_eq(chmod(s.qt.tmp, 0711), 0);
}

static int
answers(void *path)
{
	return tl_sock_answers((const char *)path);
}

/* The gate, and its status socket answering (bound after gate_socket). */
static void
start_gate_status(void)
{
	start_gate();
	cr_assert(sh_wait_for(answers, ssock, 10000), "no status socket %s", ssock);
}

/* Become nobody:nogroup with no other group (as setpriv --reuid=nobody
 * --regid=nogroup --clear-groups); in a child, exit 126 on failure. */
static void
become_nobody(void)
{
	gid_t g = NOBODY_ID;

	if (setgroups(0, NULL) < 0 || setresgid(g, g, g) < 0 ||
	    setresuid(NOBODY_ID, NOBODY_ID, NOBODY_ID) < 0)
		_exit(126);
}

/* What a nobody client sees, one line per step: the errno of a connect
 * to gate_socket, the answer to each request on the status socket
 * ("VERB tag CODE"), then the STATUS JSON body. */
static void
nobody_client(int out)
{
	const uint64_t counts[GP_NCOUNTS] = { 1, 1, 1, 1, 0, 0, 0, 0, 0 };
	struct gate_client c;
	struct gp_reply r;
	struct buf o = BUF_INIT;
	const char *why = "closed";
	int i;

	become_nobody();
	if (gc_connect(&c, sock) == 0)
		buf_adds(&o, "gate_socket: connected\n");
	else
		buf_printf(&o, "gate_socket: %s\n", errno == EACCES ? "EACCES" : strerror(errno));
	if (gc_connect(&c, ssock) < 0) {
		buf_printf(&o, "status socket: %s\n", strerror(errno));
		goto out;
	}
	if (gc_acquire(&c, 7, "up1", NULL, NULL, 1, 1, 1) < 0 || gc_report_refund(&c, 7) < 0 ||
	    gc_cancel(&c, 7) < 0 || gc_counts(&c, "up1", counts) < 0 ||
	    gc_resume(&c, "up1") < 0 || gc_status(&c, 1) < 0) {
		buf_printf(&o, "write: %s\n", strerror(errno));
		goto out;
	}
	for (i = 0; i < 6; i++) {
		if (gc_wait_reply(&c, &r, &why) != 1) {
			buf_printf(&o, "reply %d: %s\n", i, why);
			goto out;
		}
		buf_printf(&o, "%d %u %s\n", (int)r.verb, r.tag,
		    r.verb == GP_R_ERR ? gp_code_name(r.code) : "-");
	}
	buf_add(&o, c.status.s, c.status.len);
	gc_close(&c);
out:
	if (full_write(out, o.s, o.len) < 0)
		_exit(1);
	_exit(0);
}

/*
 * As nobody: gate_socket refuses the connection (EACCES); the status
 * socket, in a folder the gate made 0755, is 0666 and answers STATUS
 * JSON; ACQUIRE, REPORT, CANCEL, COUNTS and RESUME get ERR READONLY and
 * change nothing; the gate goes on serving both sockets; `weir-gate
 * status` and `weir status` run as nobody fall back to the status socket.
 */
Test(metrics, status_socket_answers_anyone_status_only)
{
	char *gate = tl_bin("weir-gate"), *weir = tl_bin("weir"),
	    *pub = xasprintf("%s/pub", s.qt.tmp), *want_ssock;
	const char *argv[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
		"--clear-groups", "--", gate, "-c", s.qt.conf, "status", NULL };
	char want[256], tmp[4096];
	struct tl_run run = { .argv = argv };
	struct tl_result res;
	struct buf out = BUF_INIT;
	struct stat st;
	pid_t pid;
	int pfd[2], stt;
	ssize_t n;

	status_socket_conf();
	start_gate_status();
	cr_assert_eq(stat(pub, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0755, "folder mode %o", st.st_mode & 07777);
	cr_assert_eq(stat(ssock, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode) && (st.st_mode & 07777) == 0666, "socket mode %o",
	    st.st_mode & 07777);
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(pfd[0]);
		nobody_client(pfd[1]);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], tmp, sizeof tmp)) > 0)
		buf_add(&out, tmp, (size_t)n);
	close(pfd[0]);
	cr_assert_eq(waitpid(pid, &stt, 0), pid);
	cr_assert(WIFEXITED(stt) && WEXITSTATUS(stt) == 0, "client: 0x%x\n%s", stt,
	    buf_cstr(&out));
	snprintf(want, sizeof want, "gate_socket: EACCES\n"
	    "%d 7 READONLY\n%d 7 READONLY\n%d 7 READONLY\n%d 0 READONLY\n%d 0 READONLY\n"
	    "%d 0 -\n{", GP_R_ERR, GP_R_ERR, GP_R_ERR, GP_R_ERR, GP_R_ERR, GP_R_STATUS);
	cr_assert(out.s && strncmp(out.s, want, strlen(want)) == 0, "wanted:\n%s\ngot:\n%s",
	    want, buf_cstr(&out));
	/* Nothing held, waiting or counted: the ACQUIRE and COUNTS were not taken. */
	cr_assert(strstr(out.s, "\"held\":0,") && strstr(out.s, "\"waiting\":0,") &&
	    strstr(out.s, "\"granted\":0,") && !strstr(out.s, "\"send\":"), "%s", out.s);
	/* The gate goes on: grants on gate_socket, and the status socket
	 * sees them, through weir-gate status as nobody. */
	known_run();
	tl_run(&run, &res);
	cr_assert_eq(res.status, 0, "weir-gate status as nobody: %s", buf_cstr(&res.err));
	cr_assert(strstr(buf_cstr(&res.out), "5 of 5"), "%s", buf_cstr(&res.out));
	tl_result_free(&res);
	/* weir status as nobody: the gate's part through the status socket
	 * (the queue's part cannot be read, so it exits 1 all the same). */
	argv[5] = weir;
	argv[8] = "status";
	argv[9] = NULL;
	tl_run(&run, &res);
	want_ssock = xasprintf("weir-gate (%s):\n", ssock);
	cr_assert(strstr(buf_cstr(&res.out), "5 of 5") &&
	    strstr(buf_cstr(&res.out), want_ssock), "weir status as nobody:\n%s\n%s",
	    buf_cstr(&res.out), buf_cstr(&res.err));
	tl_result_free(&res);
	buf_free(&out);
	free(want_ssock);
	free(pub);
	free(weir);
	free(gate);
	free(ssock);
}

/*
 * A status client that sends STATUS after STATUS without reading: the
 * gate reads its next lines only once it has read the answers, so its
 * unread answers stay small (without that rule they pass the gate's 4 MB
 * bound and the client is dropped); read at last, every request is
 * answered, in order, and the gate serves the deliverers all along.
 */
Test(metrics, status_socket_client_that_does_not_read_is_paused)
{
	struct gate_client c;
	struct gp_reply r;
	struct gp_req rq = { .verb = GP_STATUS, .json = 1 };
	struct buf line = BUF_INIT, chunk = BUF_INIT;
	const char *why = "closed";
	size_t sent = 0, got = 0, i;
	uint64_t deadline;
	ssize_t n;

	status_socket_conf();
	start_gate_status();
	cr_assert_eq(gc_connect(&c, ssock), 0);
	gp_fmt_request(&line, &rq);
	for (i = 0; i < 256; i++)
		buf_add(&chunk, line.s, line.len);
	cr_assert_eq(fcntl(c.fd, F_SETFL, O_NONBLOCK), 0);
	/* Write until the gate stops taking requests (at most 64k). */
	deadline = clock_mono_ms() + 30000;
	while (sent < 65536 && clock_mono_ms() < deadline) {
		n = write(c.fd, chunk.s, chunk.len);
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { c.fd, POLLOUT, 0 };

			if (poll(&p, 1, 500) == 0)
				break;	/* taken nothing for half a second */
			continue;
		}
		cr_assert(n > 0, "write: %s (the gate dropped the client)", strerror(errno));
		cr_assert_eq((size_t)n % line.len, 0, "a request written in part");
		sent += (size_t)n / line.len;
	}
	cr_assert_lt(sent, 65536, "the gate took every request without an answer read");
	/* The deliverers are served meanwhile. */
	known_run();
	cr_assert_eq(fcntl(c.fd, F_SETFL, 0), 0);
	while (got < sent && clock_mono_ms() < deadline + 30000) {
		while (got < sent && gc_next_reply(&c, &r, &why) == 1) {
			cr_assert_eq(r.verb, GP_R_STATUS, "answer %zu: verb %d", got, (int)r.verb);
			got++;
		}
		if (got < sent)
			cr_assert_eq(gc_fill(&c), 1, "the gate closed after %zu of %zu answers", got,
			    sent);
	}
	cr_assert_eq(got, sent, "%zu of %zu answered", got, sent);
	cr_assert_gt(sent, 256, "too few requests written to test anything: %zu", sent);
	cr_log_info("%zu requests written before the gate paused", sent);
	gc_close(&c);
	buf_free(&line);
	buf_free(&chunk);
	free(ssock);
}

/*
 * The status socket's clients have their own bound (32): one more is
 * closed at once, and the deliverers' socket is served all along.
 */
Test(metrics, status_socket_clients_bounded)
{
	int fds[33], i;
	char c;
	struct pollfd p;

	status_socket_conf();
	start_gate_status();
	for (i = 0; i < 33; i++) {
		struct sockaddr_un sa;

		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert(fds[i] >= 0);
		memset(&sa, 0, sizeof sa);
		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", ssock);
		cr_assert_eq(connect(fds[i], (struct sockaddr *)&sa, sizeof sa), 0);
	}
	/* The 33rd: closed by the gate (end of file, no answer). */
	p.fd = fds[32];
	p.events = POLLIN;
	cr_assert_eq(poll(&p, 1, 10000), 1, "the 33rd status client was kept");
	cr_assert_eq(read(fds[32], &c, 1), 0);
	known_run();
	for (i = 0; i < 33; i++)
		close(fds[i]);
	free(ssock);
}

/*
 * weir-metrics started as root with metrics { user = "nobody" }, no
 * group: it scrapes the gate through the status socket (a gate that
 * died with kill -9 left the socket file; the next one serves it), and
 * it cannot read the queue (weir_queue_up 0).
 */
Test(metrics, metrics_as_nobody_through_status_socket)
{
	char *conf = xasprintf("%s/nobody.conf", s.qt.tmp), *cut, *tail;
	struct buf text = BUF_INIT, body = BUF_INIT;

	status_socket_conf();
	tl_read(s.qt.conf, &text);
	cut = strstr(text.s, "metrics {");
	cr_assert(cut);
	text.len = (size_t)(cut - text.s);
	tail = xasprintf("gate_status_socket = \"%s\"\n"
	    "metrics { address = \"127.0.0.1:0\" user = \"nobody\" }\n", ssock);
	buf_adds(&text, tail);
	tl_write(conf, text.s, text.len);
	confpath = conf;
	start_gate_status();
	kill_pid(&gate_pid);
	cr_assert(access(ssock, F_OK) == 0, "the killed gate's socket file is gone");
	start_gate_status();
	known_run();
	start_metrics();
	cr_assert_eq(curl("/metrics", &body), 0);
	promtool_clean(&body);
	has_line(&body, "weir_gate_up 1");
	has_line(&body, "weir_window_used{upstream=\"up1\",window=\"60s\",unit=\"messages\"} 5");
	has_line(&body, "weir_grants_waiting{upstream=\"up1\"} 1");
	has_line(&body, "weir_queue_up 0");
	buf_free(&text);
	buf_free(&body);
	free(tail);
	free(conf);
	free(ssock);
}

/* ---- the gate's text is for people ---- */

/* A stand-in for weir-gate on sock that answers STATUS JSON with doc
 * (the real gate's document) and STATUS TEXT with text; in a child
 * (killed with the test). */
static pid_t
gate_standin(const char *doc, size_t dlen, const char *text)
{
	struct sockaddr_un sa;
	int lfd, fd;
	pid_t pid;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	(void)unlink(sock);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(lfd >= 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0, "bind %s: %s", sock,
	    strerror(errno));
	cr_assert_eq(listen(lfd, 8), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid > 0) {
		close(lfd);
		return pid;
	}
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		struct buf in = BUF_INIT, out = BUF_INIT;
		struct gp_req rq;
		struct gp_reply r;
		const char *why;
		char tmp[1024];
		size_t len;
		ssize_t n;

		while ((n = read(fd, tmp, sizeof tmp)) > 0) {
			buf_add(&in, tmp, (size_t)n);
			while (gp_frame(in.s, in.len, &len) == 1) {
				memset(&r, 0, sizeof r);
				buf_reset(&out);
				if (gp_parse_request(in.s, len - 1, &rq, &why) == GP_OK &&
				    rq.verb == GP_STATUS) {
					r.verb = GP_R_STATUS;
					r.length = rq.json ? dlen : strlen(text);
					gp_fmt_reply(&out, &r);
					buf_add(&out, rq.json ? doc : text, r.length);
				}
				if (full_write(fd, out.s, out.len) < 0)
					break;
				memmove(in.s, in.s + len, in.len - len);
				in.len -= len;
			}
		}
		close(fd);
		buf_free(&in);
		buf_free(&out);
	}
	_exit(0);
}

/*
 * weir status reads the gate's JSON only (issue 32): with the gate's
 * text reworded, the drain estimate still has the window's use ("5 of
 * 5", from the JSON), and `weir status` prints the text as it came.
 * The old relaystatus.c read its numbers from the text with sscanf, and
 * said "0 used" here.
 */
Test(metrics, status_reads_the_gates_json_not_its_text)
{
	struct buf doc = BUF_INIT, why = BUF_INIT;
	struct json_object *st, *up, *lim;
	struct tl_result r;
	char *weir = tl_bin("weir");
	const char *argv[] = { weir, "-c", s.qt.conf, "status", "--json", NULL };
	struct tl_run run = { .argv = argv };
	long long used = -1;
	pid_t standin;

	start_gate();
	sh_put_s4(&s, S("m1\n"), S("u0\0p5\0Fa@example.org\0Tb@example.net\0"), 0);
	known_run();
	cr_assert_eq(gc_status_history(&gc, 3600), 0);
	expect(0, GP_R_STATUS);
	buf_add(&doc, gc.status.s, gc.status.len);
	gc_close(&gc);
	gc_open = 0;
	kill_pid(&gate_pid);
	standin = gate_standin(doc.s, doc.len, "weir-gate, reworded for people:\n  up1 is "
	    "FULL (five of five messages a minute)\n");
	tl_run(&run, &r);
	st = json_parse_strict(r.out.s, r.out.len, 64 << 20, &why);
	cr_assert_not_null(st, "weir status --json: %s\n%s", buf_cstr(&why), buf_cstr(&r.err));
	up = jp_at(jp_get(jp_get(st, "drain_estimate"), "upstreams"), 0);
	lim = jp_get(up, "limited_by");
	cr_assert_str_eq(jp_str(jp_get(up, "name")), "up1");
	cr_assert(jp_ll(jp_get(lim, "used"), &used) == 0 && used == 5,
	    "the window's use: %lld (from the gate's JSON: 5)\n%s", used,
	    json_object_to_json_string(up));
	json_object_put(st);
	tl_result_free(&r);
	argv[4] = NULL;
	tl_run(&run, &r);
	cr_assert(strstr(buf_cstr(&r.out), "  up1 is FULL (five of five messages a minute)\n") &&
	    strstr(buf_cstr(&r.out), "(window 5 messages per 1m, 5 used)"),
	    "weir status:\n%s%s", buf_cstr(&r.out), buf_cstr(&r.err));
	tl_result_free(&r);
	kill_pid(&standin);
	buf_free(&doc);
	buf_free(&why);
	free(weir);
}

/* ---- the HTTP side against a local user (issue 33) ---- */

/* weir.conf's metrics section replaced by "metrics { address ... extra }". */
static void
metrics_section(const char *extra)
{
	struct buf text = BUF_INIT;
	char *cut, *tail;

	tl_read(s.qt.conf, &text);
	cut = strstr(text.s, "metrics {");
	cr_assert(cut);
	text.len = (size_t)(cut - text.s);
	tail = xasprintf("metrics {\n  address = \"127.0.0.1:0\"\n%s}\n", extra);
	buf_adds(&text, tail);
	tl_write(s.qt.conf, text.s, text.len);
	buf_free(&text);
	free(tail);
}

/* A TCP connection to weir-metrics from the loopback address from
 * (non-blocking when nb); -1 when it cannot be made (only with nb). */
static int
connect_from(const char *from, int nb)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nb ? SOCK_NONBLOCK : 0), 0);

	cr_assert(fd >= 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	cr_assert_eq(inet_pton(AF_INET, from, &a.sin_addr), 1);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		cr_assert(nb, "bind %s: %s", from, strerror(errno));
		close(fd);
		return -1;
	}
	a.sin_port = htons((uint16_t)port);
	cr_assert_eq(inet_pton(AF_INET, "127.0.0.1", &a.sin_addr), 1);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && !(nb && errno == EINPROGRESS)) {
		cr_assert(nb, "connect: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* One request on a new connection from from, with the Authorization
 * header auth (NULL: none): its answer into out, and the ms it took; -1
 * when none came within ms. */
static long
timed_request(const char *from, const char *path, const char *auth, struct buf *out, int ms)
{
	char *req = auth ? xasprintf("GET %s HTTP/1.0\r\nAuthorization: Basic %s\r\n\r\n", path,
	    auth) : xasprintf("GET %s HTTP/1.0\r\n\r\n", path);
	uint64_t t0 = clock_mono_ms(), deadline = t0 + (uint64_t)ms;
	struct pollfd p;
	char tmp[4096];
	ssize_t k;
	long rc = -1;

	buf_reset(out);
	/* The connect too within ms: a server that does not accept leaves
	 * it waiting in the kernel's backlog. */
	if ((p.fd = connect_from(from, 1)) < 0)
		goto out;
	p.events = POLLOUT;
	if (poll(&p, 1, ms) != 1 || !(p.revents & POLLOUT) ||
	    send(p.fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
		goto out;
	p.events = POLLIN;
	while (clock_mono_ms() < deadline) {
		if (poll(&p, 1, (int)(deadline - clock_mono_ms())) != 1)
			break;
		if ((k = read(p.fd, tmp, sizeof tmp)) <= 0) {
			rc = (long)(clock_mono_ms() - t0);
			break;
		}
		buf_add(out, tmp, (size_t)k);
	}
out:
	if (p.fd >= 0)
		close(p.fd);
	free(req);
	return out->len ? rc : -1;
}

/*
 * Slow heads: n connections from the addresses from[0..nfrom), each
 * sending a request line and then one header line every 2 s, never the
 * end of the head; each one the server closes is opened again at once.
 * In a child, until it is killed; returns once n / 4 request lines went
 * out (the flood is on, whatever the server does with it).
 */
static pid_t
slow_heads(const char *const *from, size_t nfrom, size_t n)
{
	struct rlimit rl;
	struct pollfd *p;
	uint64_t next;
	size_t i, lines = 0;
	char c;
	int pfd[2];
	pid_t pid;

	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid > 0) {
		struct pollfd w = { pfd[0], POLLIN, 0 };

		close(pfd[1]);
		cr_assert(poll(&w, 1, 30000) == 1 && read(pfd[0], &c, 1) == 1,
		    "the flood never got going");
		close(pfd[0]);
		return pid;
	}
	close(pfd[0]);
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n + 64) {
		rl.rlim_cur = rl.rlim_max < n + 64 ? rl.rlim_max : n + 64;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	p = xcalloc(n, sizeof *p);
	for (i = 0; i < n; i++)
		p[i].fd = -1;
	next = clock_mono_ms() + 2000;
	for (;;) {
		for (i = 0; i < n; i++)
			if (p[i].fd < 0 && (p[i].fd = connect_from(from[i % nfrom], 1)) >= 0) {
				p[i].events = POLLOUT;
				p[i].revents = 0;
			}
		(void)poll(p, n, 200);
		for (i = 0; i < n; i++) {
			if (p[i].fd < 0)
				continue;
			if (p[i].revents & (POLLERR | POLLHUP) ||
			    ((p[i].revents & POLLIN) && read(p[i].fd, &c, 1) <= 0)) {
				close(p[i].fd);
				p[i].fd = -1;
			} else if (p[i].revents & POLLOUT) {
				if (send(p[i].fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n", 32,
				    MSG_NOSIGNAL) != 32) {
					close(p[i].fd);
					p[i].fd = -1;
				} else {
					p[i].events = POLLIN;
					if (++lines == n / 4 && write(pfd[1], "R", 1) != 1)
						_exit(1);
				}
			}
		}
		if (clock_mono_ms() >= next) {
			for (i = 0; i < n; i++)
				if (p[i].fd >= 0 && p[i].events == POLLIN &&
				    send(p[i].fd, "X-a: b\r\n", 8, MSG_NOSIGNAL) != 8) {
					close(p[i].fd);
					p[i].fd = -1;
				}
			next += 2000;
		}
	}
}

/* n requests, one after the other, from from while the flood runs: how
 * many were answered 200 within 3 s each; the slowest into *worst. */
static size_t
answered_during_flood(const char *from, size_t n, long *worst)
{
	struct buf out = BUF_INIT;
	size_t i, ok = 0;
	long ms;

	*worst = 0;
	for (i = 0; i < n; i++) {
		/* A second try, as a scraper's next scrape: on the flooding
		 * address a connection of ours that the kernel completed but
		 * whose head we had not written yet (a loaded machine) can be
		 * the one closed to make room (http.c make_room), as any
		 * waiting connection of that address can. */
		ms = timed_request(from, "/metrics", NULL, &out, 3000);
		if (ms < 0 || strncmp(out.s, "HTTP/1.1 200 ", 13) != 0)
			ms = timed_request(from, "/metrics", NULL, &out, 3000);
		if (ms >= 0 && strncmp(out.s, "HTTP/1.1 200 ", 13) == 0) {
			ok++;
			if (ms > *worst)
				*worst = ms;
		}
	}
	buf_free(&out);
	return ok;
}

/* WEIR_FLOOD_N: the flood's connections (make flood: 1000; else 300). */
static size_t
flood_n(void)
{
	const char *e = getenv("WEIR_FLOOD_N");

	return e && atoi(e) > 0 ? (size_t)atoi(e) : 300;
}

/*
 * Slow heads from one address (issue 33): 300 connections from
 * 127.0.0.5 trickling their heads, each closed one opened again (a local
 * user needs no more); a client on that same address and one on another
 * are answered, 10 of 10 each within 3 s (or its one second try).  With libmicrohttpd's limits
 * alone (16 per address, an idle timeout) the same address got nothing.
 */
Test(metrics, slow_heads_from_one_address)
{
	const char *from[] = { "127.0.0.5" };
	size_t same, other;
	long ws, wo;
	pid_t flood;

	start_gate();
	start_metrics();
	flood = slow_heads(from, 1, flood_n());
	same = answered_during_flood("127.0.0.5", 10, &ws);
	other = answered_during_flood("127.0.0.1", 10, &wo);
	kill_pid(&flood);
	cr_log_info("flood of %zu from one address: same address %zu of 10 (slowest %ld ms), "
	    "another %zu of 10 (slowest %ld ms)", flood_n(), same, ws, other, wo);
	cr_assert_eq(same, 10, "a client on the flooding address: %zu of 10 answered", same);
	cr_assert_eq(other, 10, "a client on another address: %zu of 10 answered", other);
	metrics_alive();
}

/*
 * Slow heads from 8 addresses (issue 33): 300 connections spread over
 * 127.0.0.10-17; a client on another address is answered, 10 of 10
 * within 3 s each.  With libmicrohttpd's limits (32 connections, 16 per
 * address) 8 addresses shut everyone out.
 */
Test(metrics, slow_heads_from_many_addresses)
{
	const char *from[] = { "127.0.0.10", "127.0.0.11", "127.0.0.12", "127.0.0.13",
		"127.0.0.14", "127.0.0.15", "127.0.0.16", "127.0.0.17" };
	size_t other;
	long wo;
	pid_t flood;

	start_gate();
	start_metrics();
	flood = slow_heads(from, 8, flood_n());
	other = answered_during_flood("127.0.0.1", 10, &wo);
	kill_pid(&flood);
	cr_log_info("flood of %zu from 8 addresses: another address %zu of 10 (slowest %ld ms)",
	    flood_n(), other, wo);
	cr_assert_eq(other, 10, "a client on another address: %zu of 10 answered", other);
	metrics_alive();
}

/*
 * A hung weir-gate (kill -STOP, issue 33): two page loads and a scrape
 * at once, three times over, are each answered within 2 s (the gate is
 * waited for 0.5 s at most), the scrape with weir_gate_up 0 and the page
 * saying why; once the gate goes on, weir_gate_up 1 again.  Before, each
 * page waited 5 s for the gate in weir-metrics' one loop.
 */
Test(metrics, hung_gate_answered_within_a_second)
{
	static const char *const paths[] = { "/", "/", "/metrics" };
	struct pollfd p[3];
	struct buf out[3] = { BUF_INIT, BUF_INIT, BUF_INIT };
	uint64_t t0, took[3];
	char tmp[4096], *req;
	ssize_t k;
	int round, i, left;

	start_gate();
	known_run();
	start_metrics();
	cr_assert_eq(kill(gate_pid, SIGSTOP), 0);
	/* What was had before the stop is served for a second. */
	cr_assert(sh_wait_for(scrape_says_gate_down, &out[0], 10000), "%s", buf_cstr(&out[0]));
	for (round = 0; round < 3; round++) {
		t0 = clock_mono_ms();
		for (i = 0; i < 3; i++) {
			p[i].fd = tcp_connect();
			p[i].events = POLLIN;
			req = xasprintf("GET %s HTTP/1.0\r\n\r\n", paths[i]);
			cr_assert(send(p[i].fd, req, strlen(req), MSG_NOSIGNAL) > 0);
			free(req);
			buf_reset(&out[i]);
			took[i] = 0;
		}
		for (left = 3; left > 0;) {
			cr_assert(poll(p, 3, 20000) > 0, "no answer within 20 s");
			for (i = 0; i < 3; i++) {
				if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
					continue;
				if ((k = read(p[i].fd, tmp, sizeof tmp)) > 0) {
					buf_add(&out[i], tmp, (size_t)k);
					continue;
				}
				took[i] = clock_mono_ms() - t0;
				close(p[i].fd);
				p[i].fd = -1;
				left--;
			}
		}
		for (i = 0; i < 3; i++) {
			cr_log_info("round %d: %s in %llu ms", round, paths[i],
			    (unsigned long long)took[i]);
			cr_assert(strncmp(buf_cstr(&out[i]), "HTTP/1.1 200 ", 13) == 0, "%s",
			    buf_cstr(&out[i]));
			cr_assert_leq(took[i], 2000, "%s took %llu ms with the gate stopped", paths[i],
			    (unsigned long long)took[i]);
		}
		cr_assert(strstr(out[2].s, "\nweir_gate_up 0\n"), "%s", out[2].s);
		cr_assert(strstr(out[0].s, "weir-gate is not answering"), "%s", out[0].s);
	}
	cr_assert_eq(kill(gate_pid, SIGCONT), 0);
	for (i = 0; i < 3; i++)
		buf_free(&out[i]);
	cr_assert(sh_wait_for(scrape_says_gate_up, &out[0], 20000), "%s", buf_cstr(&out[0]));
	buf_free(&out[0]);
}

/* user:password as basic authentication's base64. */
static char *
basic(const char *up)
{
	static const char b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(up), i;
	struct buf o = BUF_INIT;

	for (i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)up[i] << 16 | (i + 1 < n ? (unsigned char)up[i + 1] << 8 :
		    0) | (i + 2 < n ? (unsigned char)up[i + 2] : 0);

		buf_addc(&o, b64[v >> 18 & 63]);
		buf_addc(&o, b64[v >> 12 & 63]);
		buf_addc(&o, i + 1 < n ? b64[v >> 6 & 63] : '=');
		buf_addc(&o, i + 2 < n ? b64[v & 63] : '=');
	}
	return o.s;
}

static int
cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

/* The median time of 3 refused tries as user from from. */
static long
refused_ms(const char *from, const char *user)
{
	char *up = xasprintf("%s:wrong", user), *auth = basic(up);
	struct buf out = BUF_INIT;
	long t[3];
	int i;

	for (i = 0; i < 3; i++) {
		t[i] = timed_request(from, "/metrics", auth, &out, 10000);
		cr_assert(t[i] >= 0 && strncmp(out.s, "HTTP/1.1 401 ", 13) == 0, "%s",
		    buf_cstr(&out));
	}
	qsort(t, 3, sizeof *t, cmp_long);
	buf_free(&out);
	free(up);
	free(auth);
	return t[1];
}

/* The right password from 127.0.0.11 is answered 200. */
static int
answered_200_from_11(void *auth)
{
	struct buf out = BUF_INIT;
	int ok = timed_request("127.0.0.11", "/metrics", auth, &out, 10000) >= 0 &&
	    strncmp(out.s, "HTTP/1.1 200 ", 13) == 0;

	buf_free(&out);
	return ok;
}

static size_t
log_lines_with(const char *what)
{
	struct buf b = BUF_INIT;
	size_t n;

	tl_read(mlog, &b);
	n = tl_count(buf_cstr(&b), what);
	buf_free(&b);
	return n;
}

/*
 * Basic authentication with a yescrypt hash (Debian's mkpasswd default,
 * issue 33): an unknown user's refusal costs what a known one's does
 * (before: the SHA-512 dummy, 1.9 ms against 147); after 3 failures in a
 * row an address gets 429 with Retry-After, and no try of it is checked
 * (no crypt) until then, so that 4 guessers leave an authorised scrape
 * from another address unhindered; 60 guesses from one address make at
 * most 2 log lines; the right password works again once the wait is
 * over.
 */
Test(metrics, basic_auth_equal_cost_backoff_quiet_log)
{
	const char *guessers[] = { "127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24" };
	char setting[CRYPT_GENSALT_OUTPUT_SIZE], *users, *line, *extra, *ok = basic("admin:secret");
	char *bad = basic("admin:wrong");
	struct crypt_data cd;
	struct buf out = BUF_INIT;
	long known, unknown, t, worst = 0;
	size_t i, j, k429 = 0;

	memset(&cd, 0, sizeof cd);
	cr_assert_not_null(crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof setting));
	cr_assert_not_null(crypt_r("secret", setting, &cd));
	users = xasprintf("%s/metrics.users", s.qt.tmp);
	line = xasprintf("admin:%s\n", cd.output);
	tl_write(users, line, strlen(line));
	cr_assert_eq(chmod(users, 0600), 0);
	extra = xasprintf("  auth_file = \"%s\"\n", users);
	metrics_section(extra);
	start_gate();
	start_metrics();
	known = refused_ms("127.0.0.11", "admin");
	unknown = refused_ms("127.0.0.12", "nosuchuser");
	cr_log_info("yescrypt: a known user refused in %ld ms, an unknown one in %ld ms", known,
	    unknown);
	cr_assert(unknown * 3 >= known, "an unknown user costs %ld ms, a known one %ld ms", unknown,
	    known);
	/* The 4th failure in a row from 127.0.0.11: wait. */
	cr_assert_geq(timed_request("127.0.0.11", "/metrics", bad, &out, 10000), 0);
	cr_assert(strncmp(out.s, "HTTP/1.1 401 ", 13) == 0, "%s", out.s);
	cr_assert_geq(timed_request("127.0.0.11", "/metrics", ok, &out, 10000), 0);
	cr_assert(strncmp(out.s, "HTTP/1.1 429 ", 13) == 0 && strstr(out.s, "\r\nRetry-After: "),
	    "a try while its address waits: %s", out.s);
	/* Four guessers, 15 guesses each, between the authorised scrapes. */
	for (i = 0; i < 15; i++) {
		for (j = 0; j < 4; j++) {
			cr_assert_geq(timed_request(guessers[j], "/metrics", bad, &out, 10000), 0);
			k429 += strncmp(out.s, "HTTP/1.1 429 ", 13) == 0;
		}
		t = timed_request("127.0.0.1", "/metrics", ok, &out, 10000);
		cr_assert(t >= 0 && strncmp(out.s, "HTTP/1.1 200 ", 13) == 0, "%s", buf_cstr(&out));
		if (t > worst)
			worst = t;
	}
	cr_log_info("4 guessers, 60 guesses: %zu answered 429 unchecked; the authorised scrape "
	    "took at most %ld ms", k429, worst);
	cr_assert_geq(k429, 60 - 4 * 4, "only %zu guesses were not checked", k429);
	cr_assert_leq(log_lines_with("from 127.0.0.21"), 2, "guesses from one address logged "
	    "line by line");
	/* Once the wait is over, the right password from 127.0.0.11. */
	cr_assert(sh_wait_for(answered_200_from_11, ok, 10000), "the right password was not "
	    "taken after the wait");
	buf_free(&out);
	free(users);
	free(line);
	free(extra);
	free(ok);
	free(bad);
}

/* ---- weir status --watch ---- */

Test(metrics, status_watch_two_frames_into_a_pipe)
{
	char *bin = tl_bin("weir");
	pid_t pid;
	int pfd[2], n;
	struct buf out = BUF_INIT;
	char tmp[4096];
	struct pollfd p;
	struct timespec t0, t1;

	start_gate();
	known_run();
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pfd[1], 1);
		execl(bin, bin, "-c", s.qt.conf, "status", "--watch", (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	close(pfd[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (tl_count(out.s, "weir status at ") < 3) {
		p.fd = pfd[0];
		p.events = POLLIN;
		cr_assert_eq(poll(&p, 1, 20000), 1, "no frame within 20 s; got:\n%s", buf_cstr(&out));
		n = (int)read(pfd[0], tmp, sizeof tmp);
		cr_assert(n > 0, "weir status --watch ended; got:\n%s", buf_cstr(&out));
		buf_add(&out, tmp, (size_t)n);
		if (tl_count(out.s, "weir status at ") == 1)
			clock_gettime(CLOCK_MONOTONIC, &t0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	kill(-pid, SIGTERM);
	waitpid(pid, &n, 0);
	close(pfd[0]);
	cr_assert(strstr(out.s, "\x1b[") == NULL, "screen control codes into a pipe");
	cr_assert(tl_count(out.s, "[####################] 5 of 5\n") >= 2, "no full bar:\n%s", out.s);
	cr_assert(tl_count(out.s, "  drain: ") >= 2, "%s", out.s);
	/* A timer, not a busy loop: the next frames came about a second apart. */
	cr_assert((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 900,
	    "frames less than a second apart");
	buf_free(&out);
	free(bin);
}

Test(metrics, weir_run_starts_it)
{
	struct buf body = BUF_INIT;

	start_logged("weir", "run");
	cr_assert_eq(curl("/metrics", &body), 0);
	promtool_clean(&body);
	/* weir run started the gate before weir-metrics. */
	has_line(&body, "weir_queue_up 1");
	cr_assert(strstr(body.s, "\nweir_gate_up "), "%s", body.s);
	buf_free(&body);
}

/* ---- weir-send's counters, from a whole relay run ---- */

static void
relay_setup(void)
{
	rt_setup(&rtr, 1);
	confpath = rtr.s.qt.conf;
	mlog = xasprintf("%s/metrics.log", rtr.s.qt.tmp);
}

static void
relay_teardown(void)
{
	kill_pid(&metrics_pid);
	rt_teardown(&rtr);
	free(mlog);
}

TestSuite(metrics_relay, .init = relay_setup, .fini = relay_teardown, .timeout = 120);

/* A scrape holding every line of want[] (else the last one, in *body). */
static int
scrape_has(struct buf *body, const char *const *want, size_t n)
{
	size_t i;

	buf_reset(body);
	if (curl("/metrics", body) != 0 || body->s == NULL)
		return 0;
	for (i = 0; i < n; i++) {
		char *needle = xasprintf("\n%s\n", want[i]);
		int found = strstr(body->s, needle) != NULL;

		free(needle);
		if (!found)
			return 0;
	}
	return 1;
}

/* The counters reach the gate within a second of each change: scrape
 * until the page holds want[] (30 s at most; the last page in body). */
static void
poll_page(struct buf *body, const char *const *want, size_t n, const char *when)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	int i;

	for (i = 0; i < 300; i++) {
		if (scrape_has(body, want, n))
			return;
		nanosleep(&ts, NULL);	/* a polling interval, not a wait for an event */
	}
	cr_assert_fail("the counters never became the run's %s; last page:\n%s\nweir-send:\n%s",
	    when, buf_cstr(body), rt_send_logs_tail(&rtr, 4000));
}

static void
sendmail_to(const char *const *rcpts, size_t n)
{
	rt_sendmail(&rtr, "alice@src.example", rcpts, n, "Subject: counted\n\nhello\n");
}

/*
 * The upstream accepts ok*, puts grey off (451) and refuses bad (550).
 * m1 to ok1, ok2; m2 to ok3, grey, bad; m3 to grey; and m2's bounce to
 * alice (sent at once: m2 also has a recipient put off), all to
 * upstream isp, each in one attempt:
 *   queued     4 messages, 7 recipients (m1, m2, m3, the bounce)
 *   delivered  3 messages, 4 recipients (m1: 2, m2: 1, the bounce: 1)
 *   deferred   2 messages, 2 recipients (m2, m3: grey each)
 *   bounced    1 message,  1 recipient  (m2: bad)
 *   sessions   1 open (concurrency 1, kept for 10 minutes)
 */
Test(metrics_relay, send_counters_of_a_relay_run)
{
	const char *flags[] = { "--reply", "rcpt:grey@dest.example=451 4.7.1 greylisted, try "
		"again later", "--reply", "rcpt:bad@dest.example=550 5.1.1 no such user", NULL };
	/* Batches of 2: m1 is delivered in two transactions, yet counts
	 * one message delivered. */
	const char *m1[] = { "ok1@dest.example", "ok2@dest.example", "ok4@dest.example" };
	const char *m2[] = { "ok3@dest.example", "grey@dest.example", "bad@dest.example" };
	const char *m3[] = { "grey@dest.example" };
	const char *want[] = {
		"weir_messages_total{upstream=\"isp\",outcome=\"queued\"} 4",
		"weir_messages_total{upstream=\"isp\",outcome=\"delivered\"} 3",
		"weir_messages_total{upstream=\"isp\",outcome=\"deferred\"} 2",
		"weir_messages_total{upstream=\"isp\",outcome=\"bounced\"} 1",
		"weir_recipients_total{upstream=\"isp\",outcome=\"queued\"} 8",
		"weir_recipients_total{upstream=\"isp\",outcome=\"delivered\"} 5",
		"weir_recipients_total{upstream=\"isp\",outcome=\"deferred\"} 2",
		"weir_recipients_total{upstream=\"isp\",outcome=\"bounced\"} 1",
		"weir_sessions_open{upstream=\"isp\"} 1",
	};
	const size_t nwant = sizeof want / sizeof want[0];
	struct buf body = BUF_INIT;

	rt_upstream_start(&rtr, "good", flags, 0);
	rt_conf_upstream(&rtr, "  session_idle = \"10m\"\n  max_recipients = 2\n");
	sh_conf_append(&rtr.s, "metrics { address = \"127.0.0.1:0\" }\n");
	rt_policy(&rtr, "upstream \"isp\" { rate = {\"20 per 1s\"} }\n");
	rt_gate_start(&rtr, "2s");
	start_logged("weir-metrics", NULL);
	/* Before weir-send runs: weir-gate has no counters, so no family. */
	cr_assert_eq(curl("/metrics", &body), 0);
	promtool_clean(&body);
	cr_assert(strstr(body.s, "weir_messages_total") == NULL, "%s", body.s);
	cr_assert(strstr(body.s, "weir_sessions_open") == NULL, "%s", body.s);
	sendmail_to(m1, 3);
	sendmail_to(m2, 3);
	sendmail_to(m3, 1);
	rt_send_start(&rtr);
	poll_page(&body, want, nwant, "");
	promtool_clean(&body);
	/* The same numbers in weir-gate's status for people. */
	{
		char *st = rt_gate_status(&rtr);

		cr_assert(strstr(st, "  weir-send: messages (recipients) queued 4 (8), delivered "
		    "3 (5), deferred 2 (2), bounced 1 (1); sessions open 1\n"), "%s", st);
		free(st);
	}
	/* A new gate knows nothing of them: weir-send tells it again once
	 * it is back.  Losing the gate ended the kept session. */
	rt_gate_kill9(&rtr);
	rt_gate_start(&rtr, "2s");
	want[nwant - 1] = "weir_sessions_open{upstream=\"isp\"} 0";
	poll_page(&body, want, nwant, "after weir-gate's restart");
	promtool_clean(&body);
	buf_free(&body);
}
