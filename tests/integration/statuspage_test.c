/*
 * statuspage_test.c: weir-metrics' status page (/), /status.json, who
 * may see them, and the HTTP limits, against the real programs.
 *
 *   - page_in_chromium: a relay under load (sendmail, weir-gate, weir-
 *     send, weir-remote, weir-metrics; two stand-in upstreams, tests/
 *     upstream/upstream.py): "isp" with a backlog under "5 per 10s",
 *     "backup" suspended by a 421 throttle reply.  Caught while isp's
 *     window is full (nothing can be sent for seconds), headless
 *     Chromium loads / (--dump-dom, then a screenshot kept as
 *     build/test-artefacts/statuspage*.png): the page names each
 *     upstream and window ("5 of 5 messages per 10s"), the suspension
 *     with the upstream's reply (its address masked) and "weir resume
 *     backup", the queue; isp's chart has one mark per message the
 *     upstream received (each a send the gate logged in the hour), and
 *     backup's one for its throttled attempt; /status.json parses and
 *     says the same; neither holds the upstreams' secret, the token in
 *     backup's secret file, or a sender's address.
 *   - page_of_a_queue_it_may_not_read: weir-metrics as nobody asks the
 *     queue of weir-showq: with the relay stopped in a known state, its
 *     queue by state is what root's `weir status --json` reads.
 *   - allow_and_basic_auth: allow = 127.0.0.1/32: a client on
 *     127.0.0.2 is closed unanswered (and logged); with auth_file, no
 *     page, JSON or metrics without the right user and password (401),
 *     all with them; the password, its hash and the upstream's secret
 *     are on no page.
 *   - limits: a connection whose request head has not all come 5 s
 *     after its connect is closed, however it trickles; at 16 waiting
 *     from one address, or 256 in all, a newcomer closes the oldest
 *     waiting connection of the address with the most, and is served.
 * Every process started dies with the test.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/jsonparse.h"
#include "relay_helpers.h"
#include "testlib.h"

#define CHROMIUM "/usr/bin/chromium"
/* The token in backup's secret file: on no page. */
#define TOKEN "tok.Bearer-9f8e7d6c5b4a"

static struct rt t;
static pid_t metrics_pid = -1, backup_pid = -1, showq_pid = -1;
static unsigned port, backup_port;
static char *mlog;

static void
reap(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(-*pid, SIGKILL);
	kill(*pid, SIGKILL);
	while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
		;
	*pid = -1;
}

static void
setup(void)
{
	rt_setup(&t, 1);
	mlog = xasprintf("%s/metrics.log", t.s.qt.tmp);
}

static void
teardown(void)
{
	reap(&metrics_pid);
	reap(&backup_pid);
	reap(&showq_pid);
	rt_teardown(&t);
	free(mlog);
}

/* The README's screenshot came from a longer run (see page_in_chromium). */
#ifndef STATUSPAGE_TIMEOUT
#define STATUSPAGE_TIMEOUT 240
#endif
TestSuite(statuspage, .init = setup, .fini = teardown, .timeout = STATUSPAGE_TIMEOUT);

/* ---- processes ---- */

static int
port_known(void *arg)
{
	struct buf b = BUF_INIT;
	const char *p, *tag = "serving http://127.0.0.1:";

	(void)arg;
	tl_read(mlog, &b);
	p = b.s ? strstr(b.s, tag) : NULL;
	if (p)
		port = (unsigned)atoi(p + strlen(tag));
	buf_free(&b);
	return p != NULL && port > 0;
}

static void
start_metrics(void)
{
	struct buf b = BUF_INIT;

	metrics_pid = tl_spawn("weir-metrics", t.s.qt.conf, NULL, mlog);
	if (!sh_wait_for(port_known, NULL, 15000)) {
		tl_read(mlog, &b);
		cr_assert_fail("weir-metrics did not start:\n%s", buf_cstr(&b));
	}
}

/* ---- HTTP clients ---- */

/* curl's exit status; the body into body (and the status line's code
 * into *code, when not NULL).  iface: the address to connect from, or
 * NULL; user: "name:password" or NULL. */
static int
curl_full(const char *path, const char *iface, const char *user, struct buf *body, int *code)
{
	char *url = xasprintf("http://127.0.0.1:%u%s", port, path);
	const char *argv[16] = { "/usr/bin/curl", "-sS", "--max-time", "30", "-o", "-",
		"-w", "\n%{http_code}" };
	struct tl_run run = { .argv = argv, .timeout_s = 60 };
	struct tl_result r;
	int n = 8, st;
	char *nl;

	if (iface) {
		argv[n++] = "--interface";
		argv[n++] = iface;
	}
	if (user) {
		argv[n++] = "-u";
		argv[n++] = user;
	}
	argv[n++] = url;
	argv[n] = NULL;
	tl_run(&run, &r);
	st = r.status;
	nl = r.out.s ? strrchr(r.out.s, '\n') : NULL;
	if (code)
		*code = nl ? atoi(nl + 1) : 0;
	if (body)
		buf_add(body, r.out.s ? r.out.s : "", nl ? (size_t)(nl - r.out.s) : r.out.len);
	tl_result_free(&r);
	free(url);
	return st;
}

static void
get_ok(const char *path, struct buf *body)
{
	int code = 0;

	buf_reset(body);
	cr_assert_eq(curl_full(path, NULL, NULL, body, &code), 0, "curl %s", path);
	cr_assert_eq(code, 200, "GET %s: %d\n%s", path, code, buf_cstr(body));
}

static struct json_object *
status_json(void)
{
	struct buf body = BUF_INIT, why = BUF_INIT;
	struct json_object *doc;

	get_ok("/status.json", &body);
	doc = json_parse_strict(body.s, body.len, 64 << 20, &why);
	cr_assert_not_null(doc, "/status.json: %s\n%s", buf_cstr(&why), buf_cstr(&body));
	buf_free(&body);
	buf_free(&why);
	return doc;
}

/* Headless Chromium on url: --dump-dom into dom (not NULL), or a
 * screenshot into png at width x height. */
static void
chromium(const char *url, struct buf *dom, const char *png, unsigned width, unsigned height)
{
	char *dir = tl_tmpdir(), *ud = xasprintf("--user-data-dir=%s", dir);
	char *home = xasprintf("HOME=%s", dir), *shot = png ? xasprintf("--screenshot=%s", png) : NULL;
	char *size = xasprintf("--window-size=%u,%u", width, height);
	const char *argv[20] = { CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--hide-scrollbars", ud };
	const char *env[] = { home, NULL };
	struct tl_run run = { .argv = argv, .env = env, .timeout_s = 120 };
	struct tl_result r;
	int n = 11;

	if (png) {
		argv[n++] = shot;
		argv[n++] = size;
		argv[n++] = "--force-device-scale-factor=1";
	} else
		argv[n++] = "--dump-dom";
	argv[n++] = url;
	argv[n] = NULL;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "chromium: exit %d\n%s", r.status, buf_cstr(&r.err));
	if (dom) {
		buf_reset(dom);
		buf_add(dom, r.out.s ? r.out.s : "", r.out.len);
		cr_assert(dom->len > 0 && strstr(dom->s, "</html>"), "no page:\n%s\n%s",
		    buf_cstr(dom), buf_cstr(&r.err));
	}
	tl_result_free(&r);
	tl_rmtree(dir);
	free(dir);
	free(ud);
	free(home);
	free(shot);
	free(size);
}

/* From the first head in hay to the next tail after it, malloc'ed. */
static char *
part_of(const char *hay, const char *head, const char *tail)
{
	const char *a = strstr(hay, head), *b;
	char *out;

	cr_assert_not_null(a, "no %s in:\n%s", head, hay);
	b = strstr(a, tail);
	cr_assert_not_null(b, "no %s after %s", tail, head);
	out = xmalloc((size_t)(b - a) + 1);
	memcpy(out, a, (size_t)(b - a));
	out[b - a] = '\0';
	return out;
}

/* The part of the page about upstream name (its section). */
static char *
section_of(const char *dom, const char *name)
{
	char *head = xasprintf("<h2>upstream %s ", name), *out = part_of(dom, head, "</section>");

	free(head);
	return out;
}

/* The build folder's test-artefacts/ (beside $WEIR_BIN), made. */
static char *
artefact(const char *name)
{
	const char *b = getenv("WEIR_BIN");
	char *abs = realpath(b && *b ? b : "build/bin", NULL), *dir, *path;

	cr_assert_not_null(abs);
	*strrchr(abs, '/') = '\0';
	dir = xasprintf("%s/test-artefacts", abs);
	cr_assert(mkdir(dir, 0755) == 0 || errno == EEXIST);
	path = xasprintf("%s/%s", dir, name);
	free(abs);
	free(dir);
	return path;
}

/* Screenshots of url into test-artefacts/: stem-phone.png (412 wide,
 * phone_h high) and stem.png (1000 x 1700). */
static void
screenshots(const char *url, const char *stem, unsigned phone_h)
{
	char *name = xasprintf("%s-phone.png", stem), *png = artefact(name);

	chromium(url, NULL, png, 412, phone_h);
	free(png);
	free(name);
	name = xasprintf("%s.png", stem);
	png = artefact(name);
	chromium(url, NULL, png, 1000, 1700);
	rt_say("status page screenshot: %s", png);
	free(png);
	free(name);
}

/* ---- the relay under load ---- */

static struct json_object *
up_named(struct json_object *doc, const char *name)
{
	struct json_object *ups = jp_get(jp_get(doc, "gate"), "upstreams");
	const char *n;
	size_t i;

	for (i = 0; i < jp_len(ups); i++)
		if ((n = jp_str(jp_get(jp_at(ups, i), "name"))) && strcmp(n, name) == 0)
			return jp_at(ups, i);
	return NULL;
}

static long long
num(struct json_object *o)
{
	long long v;

	return jp_ll(o, &v) == 0 ? v : -1;
}

/* Sends with a message in the history of upstream up. */
static long long
history_sends(struct json_object *up)
{
	struct json_object *s = jp_get(jp_get(up, "history"), "sends");
	long long n = 0;
	size_t i;

	for (i = 0; i < jp_len(s); i++)
		n += num(jp_at(jp_at(s, i), 2)) > 0;
	return n;
}

/* The moment to look: backup suspended, isp's window full with sends
 * only (nothing held: nothing in flight) and a backlog behind it, free
 * again no sooner than in 5 s, the three messages to grey deferred.
 * The document in *out. */
static int
full_and_still(void *arg)
{
	struct json_object **out = arg, *doc = status_json(), *isp, *bk, *w;
	long long now, free_at;

	isp = up_named(doc, "isp");
	bk = up_named(doc, "backup");
	w = jp_at(jp_get(isp, "windows"), 0);
	now = num(jp_get(jp_get(doc, "gate"), "now_ms"));
	free_at = num(jp_get(w, "free_at_ms"));
	if (bk && jp_bool(jp_get(bk, "suspended")) == 1 && num(jp_get(w, "logged")) == 5 &&
	    num(jp_get(w, "held")) == 0 && num(jp_get(isp, "waiting")) > 0 &&
	    num(jp_get(jp_get(doc, "queue"), "messages")) > 0 && free_at - now >= 5000 &&
	    num(jp_get(jp_get(jp_get(jp_get(doc, "queue"), "states"), "deferred"), "messages")) == 3) {
		*out = doc;
		return 1;
	}
	json_object_put(doc);
	return 0;
}

/* MAIL commands isp's upstream took: each a send the gate logged (the
 * upstream refuses no MAIL; a transaction whose recipients it all put
 * off is still one). */
static size_t
isp_mails(void)
{
	struct rt_rec r;
	size_t n;

	rt_rec_load(&t, &r);
	n = r.nmail;
	rt_rec_free(&r);
	return n;
}

/* isp (greylisting grey@dest.example) with 3 + n messages, 3 of them
 * also to grey; backup (a throttle reply to MAIL, a token for its
 * password) with one; "5 per 10s" each; weir-gate and weir-send. */
static void
relay_under_load(size_t n, const char *metrics_extra)
{
	const char *bflags[] = { "--reply", "mail=421 4.7.0 Too many messages from "
		"alice@src.example, slow down", NULL };
	const char *iflags[] = { "--reply", "rcpt:grey@dest.example=451 4.7.1 "
		"<grey@dest.example>: Recipient address rejected: greylisted", NULL };
	const char *args[32];
	char *certp = xasprintf("%s/good.pem", t.certs), *keyp = xasprintf("%s/good.key", t.certs);
	char *auth = xasprintf("%s:%s", RT_USER, TOKEN), *blog = xasprintf("%s/backup.log", t.s.qt.tmp);
	char *bsecret = xasprintf("%s/backup.secret", t.s.qt.tmp), *conf;
	char **isp_rcpts = rt_addrs("r", "dest.example", 1, n + 3);
	const char *two[2];
	size_t i, k = 0;

	/* backup: refuses MAIL with a throttle reply; its password a token. */
	args[k++] = "--cert"; args[k++] = certp; args[k++] = "--key"; args[k++] = keyp;
	args[k++] = "--auth"; args[k++] = auth;
	for (i = 0; bflags[i]; i++)
		args[k++] = bflags[i];
	args[k] = NULL;
	backup_pid = tl_upstream_start(args, blog, &backup_port);
	tl_write(bsecret, TOKEN, strlen(TOKEN));
	cr_assert(chmod(bsecret, 0600) == 0);
	rt_upstream_start(&t, "good", iflags, 0);
	rt_conf_upstream(&t, "  session_idle = \"10m\"\n");
	conf = xasprintf("upstream \"backup\" {\n  host = \"127.0.0.1\"\n  port = %u\n"
	    "  tls = \"starttls\"\n  ca_file = \"%s/ca.pem\"\n  username = \"%s\"\n"
	    "  secret_file = \"%s\"\n  senders = {\"*@backup.example\"}\n}\n"
	    "metrics {\n  address = \"127.0.0.1:0\"\n%s}\n"
	    /* grey's next try no sooner than in (0 + 3000)^2 s: deferred
	     * all along, however long the run. */
	    "retry_skip = 3000\n", backup_port, t.certs, RT_USER, bsecret, metrics_extra);
	sh_conf_append(&t.s, conf);
	rt_policy(&t, "upstream \"isp\" { rate = {\"5 per 10s\"} }\n"
	    "upstream \"backup\" { rate = {\"5 per 10s\"} max_connections = 1 }\n"
	    "throttle_reply { pattern = \"421 *\" suspend = \"1h\" max_suspend = \"1h\" }\n");
	rt_gate_start(&t, "2s");
	/* The three to grey first (weir-send takes the queue in no set
	 * order), then the backlog behind them. */
	for (i = 0; i < 3; i++) {
		two[0] = isp_rcpts[i];
		two[1] = "grey@dest.example";
		rt_sendmail(&t, "alice@src.example", two, 2, "Subject: load\n\nhello\n");
	}
	two[0] = "x@dest.example";
	rt_sendmail(&t, "bob@backup.example", two, 1, "Subject: backup\n\nhello\n");
	rt_send_start(&t);
	rt_wait_log(&t, "deferred <grey@dest.example>", 3, 60000);
	for (i = 3; i < n + 3; i++) {
		two[0] = isp_rcpts[i];
		rt_sendmail(&t, "alice@src.example", two, 1, "Subject: load\n\nhello\n");
	}
	rt_addrs_free(isp_rcpts, n + 3);
	free(certp);
	free(keyp);
	free(auth);
	free(blog);
	free(bsecret);
	free(conf);
}

/* Nothing secret, nor a sender's address, in text. */
static void
nothing_secret(const char *what, const char *text)
{
	cr_assert(strstr(text, RT_SECRET) == NULL, "%s shows the upstream's secret", what);
	cr_assert(strstr(text, TOKEN) == NULL, "%s shows the token", what);
	cr_assert(strstr(text, "alice@src.example") == NULL, "%s shows a sender's address", what);
	cr_assert(strstr(text, "bob@backup.example") == NULL, "%s shows a sender's address", what);
	cr_assert(strstr(text, "grey@dest.example") == NULL, "%s shows a recipient's address",
	    what);
}

#define DEFERRED_ROW "<tr><td>deferred</td><td class=\"n\">3</td><td class=\"n\">3</td></tr>"

static int
mails_at_least(void *arg)
{
	return isp_mails() >= *(size_t *)arg;
}

/*
 * $WEIR_STATUSPAGE_RUN_S (seconds, default none): let the relay run
 * that long under load first, for a screenshot with some history.  The
 * README's: make BUILD=build/shot CPPFLAGS=-DSTATUSPAGE_TIMEOUT=3000 all
 * build/shot/tests/integration/statuspage_test, then that binary with
 * WEIR_STATUSPAGE_RUN_S=1200 and WEIR_BIN=build/shot/bin; the page's
 * top is test-artefacts/statuspage.html in chromium --headless
 * --window-size=1000,1250 --screenshot.
 */
Test(statuspage, page_in_chromium)
{
	struct json_object *doc = NULL;
	struct buf dom = BUF_INIT, json = BUF_INIT;
	const char *run_env = getenv("WEIR_STATUSPAGE_RUN_S");
	size_t run_s = run_env ? (size_t)atoi(run_env) : 0, before, after, marks, tries, want;
	char *url, *isp, *bk, *png, *hour;
	long long logged;

	if (access(CHROMIUM, X_OK) != 0)
		cr_skip_test("no %s (Debian's chromium)", CHROMIUM);
	relay_under_load(17 + run_s / 2, "");
	start_metrics();
	url = xasprintf("http://127.0.0.1:%u/", port);
	want = run_s / 2;
	cr_assert(sh_wait_for(mails_at_least, &want, (int)(run_s * 1500 + 10000)),
	    "the relay did not run %zu s", run_s);
	/* Look while nothing can be sent (a few tries: a busy machine may
	 * let the window free meanwhile, which the counts below notice). */
	for (tries = 0; tries < 4; tries++) {
		cr_assert(sh_wait_for(full_and_still, &doc, 120000), "isp's window never full with "
		    "backup suspended:\n%s", rt_send_logs_tail(&t, 3000));
		before = isp_mails();
		chromium(url, &dom, NULL, 0, 0);
		after = isp_mails();
		json_object_put(doc);
		doc = status_json();
		if (before == after && (long long)after == history_sends(up_named(doc, "isp")) &&
		    strstr(dom.s, DEFERRED_ROW))
			break;
		json_object_put(doc);
		doc = NULL;
	}
	cr_assert_lt(tries, 4, "the relay never stood still while the page loaded");
	isp = section_of(dom.s, "isp");
	bk = section_of(dom.s, "backup");
	/* Each upstream, its window, its state. */
	cr_assert(strstr(isp, "<span class=\"big\">5 of 5 messages per 10s</span>"), "%s", isp);
	cr_assert(strstr(isp, "badge ok\">active<"), "%s", isp);
	cr_assert(strstr(isp, "next free slot: <b>"), "%s", isp);
	cr_assert(strstr(bk, "messages per 10s</span>"), "%s", bk);
	cr_assert(strstr(bk, "badge bad\">suspended<"), "%s", bk);
	cr_assert(strstr(bk, "<q>421 4.7.0 Too many messages from &lt;address&gt; slow down</q>"),
	    "%s", bk);
	cr_assert(strstr(bk, "<code>weir resume backup</code>"), "%s", bk);
	/* One mark per send the gate logged: isp's, each a MAIL its
	 * upstream took; backup's, its one throttled try. */
	hour = part_of(isp, "<figure class=\"hour\">", "</figure>");
	marks = tl_count(hour, "class=\"send");
	cr_assert_eq(marks, after, "isp: %zu marks, %zu MAIL commands taken", marks, after);
	cr_assert(tl_count(hour, "class=\"wait\"") > 0, "no waiting request marked:\n%s", hour);
	cr_assert_eq(tl_count(hour, "class=\"limit\""), 1);
	cr_assert(strstr(hour, "class=\"use\""), "no use line:\n%s", hour);
	free(hour);
	logged = history_sends(up_named(doc, "backup"));
	cr_assert_eq(logged, 1, "backup: %lld sends in the gate's history", logged);
	hour = part_of(bk, "<figure class=\"hour\">", "</figure>");
	cr_assert_eq(tl_count(hour, "class=\"send"), 1, "%s", hour);
	free(hour);
	/* The last 2 minutes too (12 windows of 10 s). */
	cr_assert(strstr(isp, "<figure class=\"recent\"><figcaption>the last 2m</figcaption>"),
	    "%s", isp);
	/* The queue, grey's recipients deferred with the reply, masked. */
	cr_assert(strstr(dom.s, "<h2>Queue</h2>"));
	cr_assert(strstr(dom.s, DEFERRED_ROW), "%s", part_of(dom.s, "<h2>Queue", "</section>"));
	cr_assert(strstr(dom.s, "Remote host said: 451 4.7.1 &lt;address&gt; Recipient address "
	    "rejected: greylisted</q> <span class=\"mut\">3 recipients</span></li>"), "%s",
	    part_of(dom.s, "<h2>Queue", "</section>"));
	/* Nothing fetched from elsewhere: no script, no link, no source. */
	cr_assert(strstr(dom.s, "<script") == NULL && strstr(dom.s, "<link") == NULL &&
	    strstr(dom.s, "src=") == NULL && strstr(dom.s, "url(") == NULL, "%s", dom.s);
	nothing_secret("the page", dom.s);
	get_ok("/status.json", &json);
	nothing_secret("/status.json", json.s);
	cr_assert(strstr(json.s, "\"drain_estimate\":") && strstr(json.s, "\"history\":"));
	/* The drain (issue 33): the three deferred by greylisting wait for
	 * a retry time far ahead, which sets isp's estimate; its progress
	 * counts the sends since its backlog began, each a transaction its
	 * upstream accepted a recipient of. */
	{
		struct json_object *d = NULL, *ups = jp_get(jp_get(doc, "drain_estimate"),
		    "upstreams");
		size_t k;

		for (k = 0; k < jp_len(ups); k++)
			if (strcmp(jp_str(jp_get(jp_at(ups, k), "name")), "isp") == 0)
				d = jp_at(ups, k);
		cr_assert_not_null(d);
		cr_assert_eq(num(jp_get(jp_get(d, "deferred"), "messages")), 3, "%s",
		    json_object_to_json_string(d));
		cr_assert_eq(jp_bool(jp_get(d, "retry_bound")), 1, "%s", json_object_to_json_string(d));
		cr_assert_geq(num(jp_get(d, "seconds")), num(jp_get(jp_get(d, "deferred"),
		    "last_retry_s")), "%s", json_object_to_json_string(d));
		cr_assert_eq(num(jp_get(jp_get(d, "progress"), "sent")), (long long)after, "%s",
		    json_object_to_json_string(d));
	}
	/* The summary first: backup's suspension, then its section, isp's. */
	cr_assert(strstr(dom.s, "<title>1 problem: weir on "), "%s", dom.s);
	cr_assert(strstr(dom.s, "<div class=\"summary bad\" role=\"alert\"><b>1 problem</b><ul><li><b>"
	    "upstream backup</b>: suspended until ") && strstr(dom.s, "<div class=\"summary bad\"") <
	    strstr(dom.s, "<section") && strstr(dom.s, "<h2>upstream backup ") < strstr(dom.s,
	    "<h2>upstream isp "), "%s", dom.s);
	/* The page as Chromium had it, and screenshots: a phone's width,
	 * and a desktop's. */
	png = artefact("statuspage.html");
	tl_write(png, dom.s, dom.len);
	free(png);
	png = artefact("status.json");
	tl_write(png, json.s, json.len);
	free(png);
	screenshots(url, "statuspage", 2400);
	json_object_put(doc);
	free(isp);
	free(bk);
	free(url);
	buf_free(&dom);
	buf_free(&json);
}

static int
answers(void *path)
{
	return tl_sock_answers((const char *)path);
}

/*
 * weir-metrics as nobody, the queue root's (0700 folders): it asks
 * weir-showq (as root here, as send_user in the package) for the
 * listing, the gate through its status socket.  With the relay stopped
 * in a known state (isp's window full, three messages deferred by
 * greylisting, a backlog waiting), /status.json's queue is what
 * `weir status --json` as root reads from the queue itself, state by
 * state, and the page says so.
 */
Test(statuspage, page_of_a_queue_it_may_not_read)
{
	struct json_object *doc = NULL, *mine, *roots;
	const char *args[] = { "status", "--json" };
	char *pub = xasprintf("%s/pub/status.sock", t.s.qt.tmp);
	char *shq = xasprintf("%s/public/showq.sock", t.s.qt.tmp), *conf, *slog;
	const char *sargs[] = { "-t", "5", NULL };
	struct tl_result r;
	struct buf why = BUF_INIT, page = BUF_INIT;
	const char *from;

	if (!tl_is_root())
		cr_skip_test("needs root to run weir-metrics as nobody");
	cr_assert(chmod(t.s.qt.tmp, 0755) == 0);
	conf = xasprintf("gate_status_socket = \"%s\"\nshowq_socket = \"%s\"\n", pub, shq);
	sh_conf_append(&t.s, conf);
	relay_under_load(17, "  user = \"nobody\"\n");
	cr_assert(sh_wait_for(answers, pub, 10000), "no status socket %s", pub);
	slog = xasprintf("%s/showq.log", t.s.qt.tmp);
	showq_pid = tl_spawn("weir-showq", t.s.qt.conf, sargs, slog);
	cr_assert(sh_wait_for(answers, shq, 10000), "no weir-showq on %s", shq);
	start_metrics();
	cr_assert(sh_wait_for(full_and_still, &doc, 120000), "isp's window never full:\n%s",
	    rt_send_logs_tail(&t, 3000));
	json_object_put(doc);
	/* Stopped: nothing is in flight (the window is full, nothing held). */
	rt_send_kill9(&t);
	doc = status_json();
	mine = jp_get(doc, "queue");
	from = jp_str(jp_get(mine, "read_from"));
	cr_assert(from && strcmp(from, shq) == 0, "read from %s", from ? from : "(null)");
	cr_assert_null(jp_str(jp_get(mine, "error")), "%s", jp_str(jp_get(mine, "error")));
	r = rt_run(&t, "weir", args, 2, NULL);
	cr_assert_eq(r.status, 0, "weir status --json: %s", buf_cstr(&r.err));
	roots = json_parse_strict(r.out.s, r.out.len, 64 << 20, &why);
	cr_assert_not_null(roots, "%s", buf_cstr(&why));
	cr_assert(json_object_equal(jp_get(mine, "states"), jp_get(jp_get(roots, "queue"), "states")),
	    "weir-metrics via weir-showq:\n%s\nroot from the queue:\n%s",
	    json_object_to_json_string(jp_get(mine, "states")),
	    json_object_to_json_string(jp_get(jp_get(roots, "queue"), "states")));
	cr_assert_eq(num(jp_get(mine, "messages")), num(jp_get(jp_get(roots, "queue"), "messages")));
	cr_assert_eq(num(jp_get(mine, "recipients_not_done")),
	    num(jp_get(jp_get(roots, "queue"), "recipients_not_done")));
	cr_assert_eq(num(jp_get(jp_get(jp_get(mine, "states"), "deferred"), "messages")), 3);
	get_ok("/", &page);
	cr_assert(strstr(page.s, DEFERRED_ROW), "%s", page.s);
	nothing_secret("the page", page.s);
	tl_result_free(&r);
	json_object_put(doc);
	json_object_put(roots);
	buf_free(&why);
	buf_free(&page);
	free(pub);
	free(shq);
	free(conf);
	free(slog);
}

/* ---- who may see it ---- */

/* openssl passwd -6 -salt abc secret */
#define PASSWORD "secret"
#define HASH "$6$abc$IdWKNKTJEb8LxY7CGg8YBXlvtfZzFw7Mp/r6niK9YB2mdvgY..TKjv1T..8RadRt2qvUHYRLr/TsVArtr91iR1"

/* weir-gate and weir-metrics (its metrics section's extra keys) on a
 * queue with upstream isp (the secret file RT_SECRET; weir-send is not
 * started) and one message. */
static void
gate_and_metrics(const char *metrics_extra)
{
	const char *r[] = { "bob@dest.example" };
	char *conf = xasprintf("metrics {\n  address = \"127.0.0.1:0\"\n%s}\n", metrics_extra);

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	sh_conf_append(&t.s, conf);
	rt_policy(&t, "upstream \"isp\" { rate = {\"5 per 10s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_sendmail(&t, "alice@src.example", r, 1, "Subject: one\n\nhello\n");
	start_metrics();
	free(conf);
}

static int
logged(void *arg)
{
	struct buf b = BUF_INIT;
	int yes;

	tl_read(mlog, &b);
	yes = b.s && strstr(b.s, (const char *)arg);
	buf_free(&b);
	return yes;
}

/*
 * allow = 127.0.0.1/32: a client on 127.0.0.2 is closed before a byte
 * (curl: an empty reply or a reset), with a log line.  auth_file: each
 * page 401 without a user, or with a wrong password, 200 with the
 * right one; neither the password nor its hash nor the upstream's
 * secret on any of them.
 */
Test(statuspage, allow_and_basic_auth)
{
	static const char *const paths[] = { "/", "/status.json", "/metrics" };
	char *users = xasprintf("%s/metrics.users", t.s.qt.tmp), *line, *extra;
	struct buf body = BUF_INIT;
	int code, rc;
	size_t i;

	line = xasprintf("# the page's viewers\nadmin:%s\n", HASH);
	tl_write(users, line, strlen(line));
	cr_assert(chmod(users, 0600) == 0);
	extra = xasprintf("  allow = {\"127.0.0.1/32\"}\n  auth_file = \"%s\"\n", users);
	gate_and_metrics(extra);
	rc = curl_full("/", "127.0.0.2", "admin:" PASSWORD, &body, &code);
	cr_assert(rc == 52 || rc == 56, "from 127.0.0.2: curl exit %d, HTTP %d:\n%s", rc, code,
	    buf_cstr(&body));
	cr_assert(sh_wait_for(logged, "connection from 127.0.0.2 refused: not in metrics allow",
	    10000), "no log line for the refusal");
	for (i = 0; i < 3; i++) {
		buf_reset(&body);
		cr_assert_eq(curl_full(paths[i], NULL, NULL, &body, &code), 0);
		cr_assert_eq(code, 401, "%s without a password: %d\n%s", paths[i], code, body.s);
		cr_assert(strstr(body.s, "weir_") == NULL && strstr(body.s, "upstream") == NULL,
		    "%s", body.s);
		buf_reset(&body);
		cr_assert_eq(curl_full(paths[i], NULL, "admin:Secret", &body, &code), 0);
		cr_assert_eq(code, 401, "%s with a wrong password: %d", paths[i], code);
		buf_reset(&body);
		cr_assert_eq(curl_full(paths[i], NULL, "admin:" PASSWORD, &body, &code), 0);
		cr_assert_eq(code, 200, "%s with the password: %d\n%s", paths[i], code, body.s);
		cr_assert(strstr(body.s, i == 0 ? "<h2>upstream isp " : i == 1 ?
		    "\"drain_estimate\":" : "weir_queue_messages 1"), "%s", body.s);
		cr_assert(strstr(body.s, PASSWORD) == NULL && strstr(body.s, "$6$abc$") == NULL &&
		    strstr(body.s, RT_SECRET) == NULL, "%s shows a secret:\n%s", paths[i], body.s);
	}
	cr_assert(sh_wait_for(logged, "basic authentication refused for user admin", 10000));
	buf_free(&body);
	free(users);
	free(line);
	free(extra);
}

/* ---- the limits, through libmicrohttpd ---- */

/* A TCP connection to weir-metrics from the loopback address from. */
static int
connect_from(const char *from)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	cr_assert_eq(inet_pton(AF_INET, from, &a.sin_addr), 1);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "bind %s: %s", from,
	    strerror(errno));
	a.sin_port = htons((uint16_t)port);
	cr_assert_eq(inet_pton(AF_INET, "127.0.0.1", &a.sin_addr), 1);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s",
	    strerror(errno));
	return fd;
}

/* Wait (up to ms) for fd to say something or end; what came into out;
 * 1 if it ended. */
static int
read_to_end(int fd, struct buf *out, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char tmp[4096];
	ssize_t k;

	for (;;) {
		if (poll(&p, 1, ms) != 1)
			return 0;
		k = read(fd, tmp, sizeof tmp);
		if (k <= 0)
			return 1;
		buf_add(out, tmp, (size_t)k);
	}
}

/* A request from the address from on a new connection: 1 when it is
 * answered 200 within ms. */
static int
served_from(const char *from, int ms)
{
	struct buf out = BUF_INIT;
	int fd = connect_from(from), ok;

	cr_assert(send(fd, "GET /metrics HTTP/1.0\r\n\r\n", 25, MSG_NOSIGNAL) == 25);
	ok = read_to_end(fd, &out, ms) && out.s && strncmp(out.s, "HTTP/1.1 200 ", 13) == 0;
	close(fd);
	buf_free(&out);
	return ok;
}

/*
 * The heads' stage (src/metrics/http.c): a connection whose head does
 * not all come within 5 s of its connect is closed, though it sends a
 * header line every second (a deadline, not an idle time); 16 waiting
 * from one address: a 17th from it closes the oldest of them (logged)
 * and is served; 256 waiting in all: one more, from an address with
 * none, closes the oldest of the address with the most and is served.
 */
Test(statuspage, limits)
{
	int trickle, five[16], many[240], i;
	struct buf out = BUF_INIT;
	struct timespec t0, t1, step = { 1, 0 };
	char from[32];
	double secs;

	gate_and_metrics("");
	for (i = 0; i < 16; i++)
		five[i] = connect_from("127.0.0.5");
	cr_assert(served_from("127.0.0.5", 10000), "a 17th from 127.0.0.5 not served");
	cr_assert(read_to_end(five[0], &out, 10000) && out.len == 0,
	    "the oldest of 127.0.0.5's was not closed for the 17th: %s", buf_cstr(&out));
	cr_assert(sh_wait_for(logged, "connection from 127.0.0.5 closed before its request head, "
	    "to make room (its address's limit)", 10000), "no log line for it");
	/* 15 + 240 = 255 waiting, then 127.0.0.1's: 256; one from 127.0.0.7
	 * takes the place of the oldest of the addresses with 16. */
	for (i = 0; i < 240; i++) {
		snprintf(from, sizeof from, "127.0.1.%d", 1 + i / 16);
		many[i] = connect_from(from);
	}
	trickle = connect_from("127.0.0.1");
	cr_assert(served_from("127.0.0.7", 10000), "one more from 127.0.0.7 not served at the "
	    "limit");
	cr_assert(sh_wait_for(logged, "to make room (the limit of waiting connections)", 10000),
	    "no connection closed to make room");
	for (i = 1; i < 16; i++)
		close(five[i]);
	for (i = 0; i < 240; i++)
		close(many[i]);
	/* The trickle: a request line, then a header line every second
	 * (the scenario, not a wait), closed 5 s after its connect. */
	close(trickle);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	trickle = connect_from("127.0.0.1");
	cr_assert(send(trickle, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL) == 16);
	for (i = 0; i < 30 && send(trickle, "X-a: b\r\n", 8, MSG_NOSIGNAL) == 8; i++) {
		struct pollfd p = { trickle, POLLIN, 0 };

		if (poll(&p, 1, 0) == 1)
			break;
		nanosleep(&step, NULL);
	}
	buf_reset(&out);
	cr_assert(read_to_end(trickle, &out, 10000), "the trickle was kept past 10 s");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(out.len == 0 && secs >= 4.5 && secs < 9.0, "the trickle closed after %.1f s: %s",
	    secs, buf_cstr(&out));
	cr_assert(sh_wait_for(logged, "connection from 127.0.0.1 closed: no whole request head "
	    "within 5 s", 10000));
	close(trickle);
	get_ok("/metrics", &out);
	buf_free(&out);
}

/* ---- as the package runs it (issue 33) ---- */

/* The package's accounts, made for this test with useradd --system
 * (names of this process's pid: two test binaries at once make their
 * own), removed in its teardown. */
static char accts[4][32];	/* the queue group, send_user, gate_user, metrics.user */
static int nacct;

/* Run argv (a program of the passwd package) under flock on a lock file
 * of ours, so that our test binaries change /etc/passwd one at a time;
 * a few tries: another program may hold the file's own lock. */
static int
accounts_cmd(const char *const *argv)
{
	const char *full[16] = { "/usr/bin/flock", "/run/lock/weir-test-accounts.lock" };
	struct tl_run run = { .argv = full, .timeout_s = 60 };
	struct tl_result r;
	struct timespec pause = { 0, 200 * 1000 * 1000 };
	int i, st = -1, tries;

	for (i = 0; argv[i] && i < 13; i++)
		full[2 + i] = argv[i];
	for (tries = 0; tries < 10; tries++) {
		tl_run(&run, &r);
		st = r.status;
		tl_result_free(&r);
		/* 1 and 10: /etc/passwd or /etc/group locked by someone else
		 * (no event to wait for: a short pause). */
		if (st != 1 && st != 10)
			break;
		nanosleep(&pause, NULL);
	}
	return st;
}

static void
accounts_remove(void)
{
	int i;

	for (i = nacct - 1; i >= 1; i--)
		(void)accounts_cmd((const char *const[]){ "/usr/sbin/userdel", accts[i], NULL });
	if (nacct > 0)
		(void)accounts_cmd((const char *const[]){ "/usr/sbin/groupdel", accts[0], NULL });
	nacct = 0;
}

static void
accounts_make(void)
{
	static const char *const role[] = { "q", "send", "gate", "metrics" };
	int i, st;

	for (i = 0; i < 4; i++)
		snprintf(accts[i], sizeof accts[i], "wt%ld-%s", (long)getpid(), role[i]);
	/* Left by a killed run of a process with the same pid. */
	for (i = 3; i >= 1; i--)
		(void)accounts_cmd((const char *const[]){ "/usr/sbin/userdel", accts[i], NULL });
	(void)accounts_cmd((const char *const[]){ "/usr/sbin/groupdel", accts[0], NULL });
	st = accounts_cmd((const char *const[]){ "/usr/sbin/groupadd", "--system", accts[0], NULL });
	cr_assert_eq(st, 0, "groupadd %s: %d", accts[0], st);
	nacct = 1;
	for (i = 1; i < 4; i++) {
		st = accounts_cmd((const char *const[]){ "/usr/sbin/useradd", "--system",
		    "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
		    "/usr/sbin/nologin", "--groups", i == 1 ? accts[0] : "", accts[i], NULL });
		cr_assert_eq(st, 0, "useradd %s: %d", accts[i], st);
		nacct = i + 1;
	}
}

static void
packaged_teardown(void)
{
	teardown();
	accounts_remove();
}

/* The child of parent named name (in /proc; another weir on the machine
 * is not ours): its real uid and its groups, as /proc/PID/status has
 * them ("Uid:" and "Groups:" lines, after "Name:" and "PPid:"). */
static int
proc_of(const char *name, pid_t parent, uid_t *uid, char *groups, size_t max)
{
	char path[64], line[512];
	struct dirent *de;
	DIR *d = opendir("/proc");
	FILE *f;
	int found = 0;

	while (d && !found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%.32s/status", de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		while (fgets(line, sizeof line, f)) {
			if (strncmp(line, "Name:\t", 6) == 0 && (strncmp(line + 6, name,
			    strlen(name)) != 0 || line[6 + strlen(name)] != '\n'))
				break;
			if (strncmp(line, "PPid:\t", 6) == 0 && strtol(line + 6, NULL, 10) != parent)
				break;
			if (strncmp(line, "Uid:\t", 5) == 0)
				*uid = (uid_t)strtoul(line + 5, NULL, 10);
			if (strncmp(line, "Groups:\t", 8) == 0) {
				snprintf(groups, max, " %.200s", line + 8);
				found = 1;
			}
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

static int
run_serving(void *arg)
{
	char *log = rt_run_log(&t), *p = strstr(log, "serving http://127.0.0.1:");

	(void)arg;
	if (p)
		port = (unsigned)atoi(p + strlen("serving http://127.0.0.1:"));
	free(log);
	return p != NULL && port > 0;
}

/* weir-send's kept session to isp is open (its grant the one held) and
 * the window full, as the gate has it (through root's weir status
 * --json). */
static int
settled(void *arg)
{
	struct json_object **out = arg;
	struct tl_result r = rt_run(&t, "weir", (const char *const[]){ "status", "--json" }, 2,
	    NULL);
	struct buf why = BUF_INIT;
	struct json_object *doc = json_parse_strict(r.out.s, r.out.len, 64 << 20, &why), *isp;
	int yes;

	isp = up_named(doc, "isp");
	yes = num(jp_get(jp_get(isp, "send"), "sessions_open")) == 1 &&
	    num(jp_get(jp_at(jp_get(isp, "windows"), 0), "logged")) == 3 &&
	    num(jp_get(isp, "held")) == 1 && num(jp_get(isp, "waiting")) > 0;
	tl_result_free(&r);
	buf_free(&why);
	if (yes && out)
		*out = doc;
	else
		json_object_put(doc);
	return yes;
}

/*
 * The Debian package's set-up (issue 33, item 1): weir run as root,
 * weir-gate, weir-send and weir-showq under accounts of their own made
 * as postinst makes them, weir-metrics under one in none of weir's
 * groups, the gate's read-only status socket.  With 8 messages, a
 * window of 3 per minute (full) and a kept session open, weir-metrics'
 * /metrics has the queue's families and weir-send's sessions (as many as
 * root's weir status sees), the page its Sessions card and each
 * upstream's sessions, the queue as root reads it, and weir-metrics
 * logged no "Permission denied"; headless Chromium's screenshots of it
 * are kept (test-artefacts/statuspage-packaged*.png).  Before: "Unknown:
 * weir-send has not run", "sessions open: 0", no weir_queue_* families,
 * a warning per request.
 */
Test(statuspage, as_the_package_runs_it, .fini = packaged_teardown)
{
	const char *rc[] = { "r@dest.example" };
	struct json_object *roots = NULL, *mine;
	struct buf conf = BUF_INIT, body = BUF_INIT, page = BUF_INIT;
	char *log, *url, groups[256], *dirs[4];
	struct passwd *pw;
	struct group *g;
	uid_t uid = 0;
	int i;

	if (!tl_is_root() || access("/usr/sbin/useradd", X_OK) != 0 ||
	    access("/usr/bin/flock", X_OK) != 0)
		cr_skip_test("needs root, useradd and flock to make the package's accounts");
	accounts_make();
	cr_assert(chmod(t.s.qt.tmp, 0755) == 0);
	dirs[0] = xasprintf("%s/run/gate.sock", t.s.qt.tmp);
	dirs[1] = xasprintf("%s/lib/gate.journal", t.s.qt.tmp);
	dirs[2] = xasprintf("%s/status/gate.sock", t.s.qt.tmp);
	dirs[3] = xasprintf("%s/showq/showq.sock", t.s.qt.tmp);
	free(t.sock);
	t.sock = xstrdup(dirs[0]);
	buf_printf(&conf, "# as the package runs it (statuspage_test.c)\nqueue_dir = \"%s\"\n"
	    "queue_split = 23\nhostname = \"" SH_HOST "\"\nadmin = \"" SH_ADMIN "\"\n"
	    "aliases_file = \"/dev/null\"\npolicy_file = \"%s\"\nconcurrency = 1\n"
	    "gate_socket = \"%s\"\ngate_journal = \"%s\"\ngate_status_socket = \"%s\"\n"
	    "showq_socket = \"%s\"\nqueue_group = \"%s\"\nsend_user = \"%s\"\n"
	    "gate_user = \"%s\"\nmetrics {\n  address = \"127.0.0.1:0\"\n  user = \"%s\"\n}\n",
	    t.s.qt.qdir, t.policy, dirs[0], dirs[1], dirs[2], dirs[3], accts[0], accts[1], accts[2],
	    accts[3]);
	tl_write(t.s.qt.conf, conf.s, conf.len);
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, "  session_idle = \"10m\"\n");
	rt_policy(&t, "upstream \"isp\" { rate = {\"3 per 1m\"} }\n");
	pw = getpwnam(accts[1]);
	cr_assert_not_null(pw);
	cr_assert(chown(t.secret, pw->pw_uid, 0) == 0);
	{
		struct tl_result r = rt_run(&t, "weir", (const char *const[]){ "queue-init" }, 1,
		    NULL);

		cr_assert_eq(r.status, 0, "weir queue-init: %s%s", buf_cstr(&r.out), buf_cstr(&r.err));
		tl_result_free(&r);
	}
	rt_run_start(&t);
	cr_assert(sh_wait_for(run_serving, NULL, 20000), "no weir-metrics:\n%s", rt_run_log(&t));
	for (i = 0; i < 8; i++)
		rt_sendmail(&t, "alice@src.example", rc, 1, "Subject: packaged\n\nhello\n");
	cr_assert(sh_wait_for(settled, &roots, 60000), "never a full window with a kept session:"
	    "\n%s", rt_run_log(&t));
	/* weir-metrics: its account, in none of weir's groups. */
	cr_assert(proc_of("weir-metrics", t.run, &uid, groups, sizeof groups),
	    "no weir-metrics child of weir run %ld", (long)t.run);
	pw = getpwnam(accts[3]);
	cr_assert(pw && uid == pw->pw_uid, "weir-metrics runs as uid %lu", (unsigned long)uid);
	for (i = 0; i < 3; i++) {
		char *gid;

		if (i == 0)
			g = getgrnam(accts[0]);
		else
			g = getgrgid(getpwnam(accts[i])->pw_gid);
		cr_assert_not_null(g);
		gid = xasprintf(" %lu ", (unsigned long)g->gr_gid);
		cr_assert(strstr(groups, gid) == NULL, "weir-metrics is in group %s:%s", g->gr_name,
		    groups);
		free(gid);
	}
	/* /metrics: the queue's families, weir-send's sessions. */
	get_ok("/metrics", &body);
	cr_assert(strstr(body.s, "\nweir_queue_up 1\n"), "%s", body.s);
	{
		char *want = xasprintf("\nweir_queue_messages %lld\n",
		    num(jp_get(jp_get(roots, "queue"), "messages")));

		cr_assert(strstr(body.s, want), "root's weir status: %s\n%s", want + 1, body.s);
		free(want);
	}
	cr_assert(strstr(body.s, "\nweir_queue_oldest_message_age_seconds "), "%s", body.s);
	cr_assert(strstr(body.s, "\nweir_sessions_open{upstream=\"isp\"} 1\n"), "%s", body.s);
	cr_assert(strstr(body.s, "\nweir_deliveries_in_flight{upstream=\"isp\"} 0\n"), "%s", body.s);
	/* The page: the sessions, the queue as root reads it. */
	get_ok("/", &page);
	cr_assert(strstr(page.s, "weir-send has not run") == NULL, "%s", page.s);
	cr_assert(strstr(page.s, "kept sessions open: <b>1</b>"), "%s", page.s);
	cr_assert(strstr(page.s, "<h2>Sessions</h2><table>") && strstr(page.s, "<tr><td>isp</td>"),
	    "%s", page.s);
	mine = status_json();
	cr_assert(json_object_equal(jp_get(jp_get(mine, "queue"), "states"),
	    jp_get(jp_get(roots, "queue"), "states")), "weir-metrics: %s\nroot: %s",
	    json_object_to_json_string(jp_get(jp_get(mine, "queue"), "states")),
	    json_object_to_json_string(jp_get(jp_get(roots, "queue"), "states")));
	json_object_put(mine);
	log = rt_run_log(&t);
	cr_assert(strstr(log, "Permission denied") == NULL, "weir run's log:\n%s", log);
	free(log);
	/* What an operator sees, phone and desktop. */
	if (access(CHROMIUM, X_OK) == 0) {
		url = xasprintf("http://127.0.0.1:%u/", port);
		screenshots(url, "statuspage-packaged", 1400);
		free(url);
	}
	json_object_put(roots);
	for (i = 0; i < 4; i++)
		free(dirs[i]);
	buf_free(&conf);
	buf_free(&body);
	buf_free(&page);
}
