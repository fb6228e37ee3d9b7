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
	cr_assert(strstr(o.s, "<span class=\"mine\" style=\"width:50.0%\"></span><span "
	    "class=\"others\" style=\"width:30.0%\"></span>"));
	cr_assert(strstr(o.s, "Windows shared with other relays through redis://10.0.0.5:6379/0: "
	    "the store answers."));
	/* The calendar window: its use is drawn, no note; its free slot
	 * unknown while grants are held. */
	cr_assert(strstr(o.s, "7 of 100 recipients per 1d</span><span class=\"mut\">resets at "
	    "fixed times</span>"), "%s", o.s);
	cr_assert(strstr(o.s, "A window longer than the hour") == NULL);
	cr_assert(strstr(o.s, "next free slot: when a delivery in flight is reported"));
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
	struct json_object *doc = load("status"), *down = load("gate_down"), *q;
	struct buf o = BUF_INIT;

	/* isp: 5 sends since the oldest message came, 18 to go. */
	page_render(&o, doc, "relay.example", now_of(doc));
	cr_assert(strstr(o.s, "5 of 23 sends made since 06:43:32 UTC (the oldest message "
	    "came), 18 to go</p>"), "%s", o.s);
	cr_assert(strstr(o.s, "<span style=\"width:21.7%\"></span>"));
	/* backup: 1 done (its throttled try), 1 to go. */
	cr_assert(strstr(o.s, "1 of 2 sends made since 06:43:32 UTC"), "%s", o.s);
	buf_reset(&o);
	/* A message older than the hour: the bar counts from an hour ago. */
	q = jp_get(doc, "queue");
	json_object_object_add(q, "oldest_queue_time", json_object_new_string("2026-11-26T05:00:00Z"));
	page_render(&o, doc, "relay.example", now_of(doc));
	cr_assert(strstr(o.s, "5 of 23 sends made since 05:43:39 UTC (an hour ago)"), "%s", o.s);
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
	cr_assert(strstr(o.s, "<script") == NULL);
	buf_free(&o);
	json_object_put(doc);
}
