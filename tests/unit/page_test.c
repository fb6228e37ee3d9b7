/*
 * page_test.c: weir-metrics' status page (src/metrics/page.c) made of
 * status documents (tests/fuzz/corpus/statusdoc, also the fuzzer's
 * seeds): every string from the document escaped (a reply holding
 * "<script>" shows as text), addresses in the upstreams' replies masked
 * by page_mask, an authentication suspension with what to fix and the
 * command that lifts it, a shared window's split between this relay and
 * the others, a calendar window's note-free chart, the upstream's preset, the journal and the
 * gate's trouble said first; the drain's progress: the sends of the
 * gate's history since the oldest message came, against the ones to go.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonparse.h"
#include "metrics/metrics.h"
#include "testlib.h"

static struct json_object *
load(const char *name)
{
	char *path, *rel = malloc(strlen(name) + 64);
	struct buf text = BUF_INIT, why = BUF_INIT;
	struct json_object *doc;

	cr_assert_not_null(rel);
	strcpy(rel, "tests/fuzz/corpus/statusdoc/");
	strcat(rel, name);
	path = tl_src_path(rel);
	tl_read(path, &text);
	doc = json_parse_strict(text.s, text.len, 1 << 20, &why);
	cr_assert_not_null(doc, "%s: %s", path, buf_cstr(&why));
	free(rel);
	free(path);
	buf_free(&text);
	buf_free(&why);
	return doc;
}

static long long
now_of(struct json_object *doc)
{
	long long v;

	cr_assert_eq(jp_ll(jp_get(jp_get(doc, "gate"), "now_ms"), &v), 0);
	return v;
}

Test(page, hostile_document_escaped_and_masked)
{
	struct json_object *doc = load("hostile");
	struct buf o = BUF_INIT;

	page_mask(doc);
	page_render(&o, doc, "relay<1>.example", now_of(doc));
	cr_assert(strstr(o.s, "<script") == NULL, "%s", o.s);
	cr_assert(strstr(o.s, "<title>weir on relay&lt;1&gt;.example</title>"));
	/* weir.conf's preset of the upstream, escaped too */
	cr_assert(strstr(o.s, "<span class=\"badge mut\">preset &lt;b&gt;isp-preset&lt;/b&gt;"
	    "</span>"), "%s", o.s);
	cr_assert(strstr(o.s, "Authentication failed: <q>535 5.7.8 &lt;script&gt;alert(1)"
	    "&lt;/script&gt; for &lt;address&gt;</q>"), "%s", o.s);
	cr_assert(strstr(o.s, "me@example.org") == NULL);
	/* isp has an oauth section (the document's "oauth" names it): the
	 * fix of its refused credentials is a login, not its secret. */
	cr_assert(strstr(o.s, "Run weir auth login isp (the login lifts the suspension; if AUTH "
	    "is still refused after it, check username: the mailbox the token is for). To try "
	    "again now: <code>weir resume isp</code>"), "%s", o.s);
	cr_assert(strstr(o.s, "secret_file") == NULL, "%s", o.s);
	cr_assert(strstr(o.s, "weir-gate's journal is not durable</b>: it grants nothing until it "
	    "is (No space left on device)"));
	/* OAuth: a login needed, with the command; a good token's end. */
	cr_assert(strstr(o.s, "<b>OAuth: a login is needed</b> (the provider refuses the refresh "
	    "token, or there is none). Run <code>weir auth login isp</code>. Last error: "
	    "<q>invalid_grant: AADSTS70043 &lt;expired&gt;</q>"), "%s", o.s);
	cr_assert(strstr(o.s, "<p>OAuth access token until 07:43:39 UTC (in 59m59s) (refreshed "
	    "before).</p>"), "%s", o.s);
	/* Shared: 8 of 10 for all relays, 5 of them this one's. */
	cr_assert(strstr(o.s, "all relays: <b>8 of 10</b> (this relay 5, the others 3)"), "%s", o.s);
	cr_assert(strstr(o.s, "<rect width=\"50.0\" height=\"1\"/><rect class=\"others\" "
	    "x=\"50.0\" width=\"30.0\" height=\"1\"/>"), "%s", o.s);
	cr_assert(strstr(o.s, "Windows shared with other relays through redis://10.0.0.5:6379/0: "
	    "the store answers."));
	/* The calendar window: its use is drawn, no note; its free slot
	 * unknown while grants are held. */
	cr_assert(strstr(o.s, "7 of 100 recipients per 1d</span><span class=\"mut\">resets at "
	    "fixed times</span>"), "%s", o.s);
	cr_assert(strstr(o.s, "A window longer than the hour") == NULL);
	cr_assert(strstr(o.s, "full until a grant held is reported"));
	cr_assert_eq(strstr(strstr(o.s, "per 1d"), "class=\"use\"") != NULL, 1);
	/* Without an oauth section, the secret is what to fix. */
	json_object_object_del(doc, "oauth");
	buf_reset(&o);
	page_render(&o, doc, "relay<1>.example", now_of(doc));
	cr_assert(strstr(o.s, "Fix username, secret_file or secret_command of upstream isp in "
	    "weir.conf (or the secret file itself), then reload or restart weir (a restart with the "
	    "same credentials keeps the suspension). To try again now: <code>weir resume "
	    "isp</code>"), "%s", o.s);
	cr_assert(strstr(o.s, "weir auth login") == NULL, "%s", o.s);
	buf_free(&o);
	json_object_put(doc);
}

Test(page, gate_down_and_progress)
{
	struct json_object *doc = load("status"), *down = load("gate_down"), *pr;
	struct buf o = BUF_INIT;

	/* isp: 5 sends since its backlog began, 18 to go. */
	page_render(&o, doc, "relay.example", now_of(doc));
	cr_assert(strstr(o.s, "5 of 23 sends made since 06:43:33 UTC (the backlog began), 18 to "
	    "go</p>"), "%s", o.s);
	cr_assert(strstr(o.s, "<rect width=\"21.7\" height=\"1\"/>"), "%s", o.s);
	/* backup: its one try was throttled, no send. */
	cr_assert(strstr(o.s, "0 of 1 sends made since 06:43:33 UTC"), "%s", o.s);
	buf_reset(&o);
	/* A backlog older than the gate's history: counted from there. */
	pr = jp_get(jp_at(jp_get(jp_get(doc, "drain_estimate"), "upstreams"), 0), "progress");
	json_object_object_add(pr, "from_ms", json_object_new_int64(1795671819883));
	page_render(&o, doc, "relay.example", now_of(doc));
	cr_assert(strstr(o.s, "5 of 23 sends made since 05:43:39 UTC (the gate's history "
	    "begins)"), "%s", o.s);
	buf_reset(&o);
	/* The gate down: said, for each upstream; no bar without its history. */
	page_render(&o, down, "relay.example", now_of(doc));
	cr_assert(strstr(o.s, "<b>weir-gate is not answering</b>: connect: No such file or "
	    "directory. Nothing is sent until it does."), "%s", o.s);
	cr_assert(strstr(o.s, "<h2>upstream isp <span class=\"badge bad\">weir-gate not "
	    "answering</span></h2>"), "%s", o.s);
	cr_assert(strstr(o.s, "sends made") == NULL, "%s", o.s);
	buf_free(&o);
	json_object_put(doc);
	json_object_put(down);
}

/*
 * One meaning per figure, as the gate and relaystatus give them (issue
 * 33): in flight is the gate's in_flight (isp holds one grant, its kept
 * session's, and has nothing in flight); the kept sessions are weir-
 * send's count; a suspended upstream's next free slot is the
 * suspension's end, not "now"; deferred mail's retry time is said and
 * sets the estimate.
 */
Test(page, one_meaning_per_figure)
{
	struct json_object *doc = load("status");
	struct buf o = BUF_INIT;
	char *isp, *bk;

	page_render(&o, doc, "relay.example", now_of(doc));
	isp = strstr(o.s, "<h2>upstream isp ");
	bk = strstr(o.s, "<h2>upstream backup ");
	cr_assert(isp && bk, "%s", o.s);
	cr_assert(strstr(isp, "deliveries in flight: <b>0</b>"), "%s", isp);
	cr_assert(strstr(isp, "kept sessions open: <b>1</b>"), "%s", isp);
	cr_assert(strstr(isp, "3 deferred messages wait for their retry time, the last in "
	    "<b>20m</b>, which sets the estimate"), "%s", isp);
	cr_assert(strstr(isp, "about <b>20m</b>"), "%s", isp);
	*strstr(bk, "</section>") = '\0';
	cr_assert(strstr(bk, "next free slot: <b>07:13:33 UTC</b> (in 29m53s), when the "
	    "suspension ends"), "%s", bk);
	cr_assert(strstr(bk, "next free slot: <b>now</b>") == NULL, "%s", bk);
	buf_free(&o);
	json_object_put(doc);
}

/*
 * The summary first (issue 33): one box before anything else saying
 * what is wrong and what to do, the title saying it too, and the
 * upstream in trouble before the healthy one (on a phone, on the first
 * screen: statuspage_test looks); without trouble, "Mail flows".
 */
Test(page, summary_first)
{
	struct json_object *doc = load("status"), *sum;
	struct buf o = BUF_INIT;
	const char *box, *first;

	page_render(&o, doc, "relay.example", now_of(doc));
	cr_assert(strstr(o.s, "<title>1 problem: weir on relay.example</title>"), "%s", o.s);
	box = strstr(o.s, "<div class=\"summary bad\" role=\"alert\"><b>1 problem</b><ul><li><b>"
	    "upstream backup</b>: suspended until 2026-11-26T07:13:33Z: it said 421 4.7.0 Too many "
	    "messages from &lt;address&gt; slow down. <span class=\"todo\">To do: weir resume backup "
	    "lifts it</span></li></ul></div>");
	first = strstr(o.s, "<section");
	cr_assert(box && first && box < first, "%s", o.s);
	cr_assert(strstr(o.s, "<h2>upstream backup ") < strstr(o.s, "<h2>upstream isp "),
	    "the suspended upstream is not first");
	buf_reset(&o);
	sum = jp_get(doc, "summary");
	json_object_object_add(sum, "ok", json_object_new_boolean(1));
	json_object_object_add(sum, "problems", json_object_new_array());
	json_object_object_add(sum, "line", json_object_new_string("mail flows: 2 upstreams "
	    "active; 19 messages queued, the oldest 7s old"));
	page_render(&o, doc, "relay.example", now_of(doc));
	cr_assert(strstr(o.s, "<title>OK: weir on relay.example</title>"), "%s", o.s);
	cr_assert(strstr(o.s, "<div class=\"summary\" role=\"status\"><b>mail flows: 2 "
	    "upstreams active; 19 messages queued, the oldest 7s old</b></div>"), "%s", o.s);
	cr_assert(strstr(o.s, "<h2>upstream isp ") < strstr(o.s, "<h2>upstream backup "));
	buf_free(&o);
	json_object_put(doc);
}

/* Backup relays (weir.conf's fallback): each upstream passed over with
 * why and where its mail goes, each waiting message's upstream; the
 * reason masked and escaped like an upstream's reply. */
Test(page, routes)
{
	struct json_object *doc = load("routes");
	struct buf o = BUF_INIT;

	page_mask(doc);
	page_render(&o, doc, "relay.example", now_of(doc));
	cr_assert(strstr(o.s, "<section class=\"card\"><h2>Routes</h2>"), "%s", o.s);
	cr_assert(strstr(o.s, "<li><b>isp</b> <span class=\"badge bad\">passed over</span> "
	    "unreachable since 2026-11-26T06:42:39Z (554 5.3.2 &lt;address&gt; no "
	    "&lt;script&gt;service); next probe 2026-11-26T06:43:41Z; its mail goes through "
	    "<b>backup</b></li>"), "%s", o.s);
	cr_assert(strstr(o.s, "<tr><td><code>1234.1795675000.123456789</code></td>"
	    "<td class=\"n\">3</td><td>backup</td><td>isp: unreachable</td></tr>"), "%s", o.s);
	cr_assert(strstr(o.s, "<td>isp</td><td></td></tr>"), "%s", o.s);
	/* A primary in trouble its fallback_when does not name keeps its
	 * mail, as weir status says: not "takes its mail". */
	cr_assert(strstr(o.s, "<li><b>lan</b> <span class=\"badge bad\">keeps its mail</span> "
	    "authentication suspended until 2026-11-26T07:00:00Z &lt;b&gt;</li>"), "%s", o.s);
	cr_assert(strstr(o.s, "takes its mail") == NULL, "%s", o.s);
	cr_assert(strstr(o.s, "<script") == NULL);
	buf_free(&o);
	json_object_put(doc);
}

/* A shared window's store through Redis Sentinel: where its master is
 * (escaped), its last switch, and a rebuild said in bold; then whole. */
Test(page, shared_store_master_and_rebuild)
{
	struct json_object *doc = load("hostile"), *isp;
	struct buf o = BUF_INIT;
	long long now;

	now = now_of(doc);
	isp = jp_at(jp_get(jp_get(doc, "gate"), "upstreams"), 0);
	cr_assert_str_eq(jp_str(jp_get(isp, "name")), "isp");
	json_object_object_add(isp, "shared_master", json_object_new_string("master m<1> "
	    "10.0.0.7:6379"));
	json_object_object_add(isp, "shared_switches", json_object_new_int64(2));
	json_object_object_add(isp, "shared_last_switch_ms", json_object_new_int64(now - 90000));
	json_object_object_add(isp, "shared_window", json_object_new_string("rebuilding"));
	page_render(&o, doc, "relay.example", now);
	cr_assert(strstr(o.s, "through redis://10.0.0.5:6379/0: the store answers; found at master "
	    "m&lt;1&gt; 10.0.0.7:6379 after 2 switches of master, the last at "), "%s", o.s);
	cr_assert(strstr(o.s, " (1m30s ago); <b>the window is being rebuilt</b>: nothing is granted "
	    "until every relay has written its own sends back.</p>"), "%s", o.s);
	json_object_object_add(isp, "shared_window", json_object_new_string("whole"));
	buf_reset(&o);
	page_render(&o, doc, "relay.example", now);
	cr_assert(strstr(o.s, " ago); the window is whole.</p>"), "%s", o.s);
	buf_free(&o);
	json_object_put(doc);
}
