/*
 * collect.c: one scrape, as Prometheus text format 0.0.4 (every family
 * with HELP and TYPE lines, its samples together; what each one counts
 * is in weir-metrics(8)).
 *
 *   the gate  its STATUS JSON document (members: mail/gatestatus.h), read
 *             with lib/jsonparse.h (json-c, strict, at most GP_STATUS_MAX
 *             bytes); a field that is missing or not a number leaves its
 *             sample out (never guessed).  No document: weir_gate_up 0
 *             and no gate families.  The daemon asks it in its loop
 *             (http.c); metrics_collect (the textfile) asks it here, with
 *             a deadline.
 *   the queue its summary (mail/qsummary.h): the messages as the listing
 *             counts them, not yet preprocessed, the oldest; read from
 *             the queue when this process may, else asked of weir-showq,
 *             so that weir-metrics needs no right to the queue.
 *
 * Trusts: the gate's document as far as jsonparse.c parses it, weir-
 * showq's summary as far as qsummary_parse does.  Config keys:
 * gate_status_socket or gate_socket, and those of mail/qsummary.h
 * (through struct metrics_src).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/jsonparse.h"
#include "lib/log.h"
#include "mail/gateclient.h"
#include "mail/gatestatus.h"
#include "mail/qsummary.h"
#include "metrics/metrics.h"

/* ---- output helpers ---- */

static void
family(struct buf *o, const char *name, const char *type, const char *help)
{
	buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped as the text format wants (\\, \", \n). */
static void
label_value(struct buf *o, const char *v)
{
	buf_addc(o, '"');
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			buf_addc(o, '\\');
		if (*v == '\n')
			buf_adds(o, "\\n");
		else
			buf_addc(o, *v);
	}
	buf_addc(o, '"');
}

/* name{upstream="u"[,extra]} value: the number's text from the gate. */
static void
sample_up(struct buf *o, const char *name, const char *up, const char *extra,
    struct json_object *num)
{
	long long v;

	if (jp_ll(num, &v) < 0 || v < 0)
		return;
	buf_printf(o, "%s{upstream=", name);
	label_value(o, up);
	buf_printf(o, "%s%s} %lld\n", extra ? "," : "", extra ? extra : "", v);
}

/* ---- the gate ---- */

static int
gate_fetch(const struct metrics_src *src, struct buf *body)
{
	struct gate_client gc;
	struct gp_reply r;
	const char *why = "connection closed";
	int rc = -1;

	if (gc_connect_status(&gc, src->gate_socket, NULL, src->gate_timeout_ms) == NULL)
		return -1;
	if (gc_status(&gc, 1) < 0 || gc_wait_reply(&gc, &r, &why) != 1 ||
	    r.verb != GP_R_STATUS)
		goto out;
	buf_add(body, gc.status.s ? gc.status.s : "", gc.status.len);
	rc = 0;
out:
	gc_close(&gc);
	return rc;
}

/* The upstreams array, or NULL. */
static struct json_object *
upstreams(struct json_object *doc)
{
	struct json_object *a = jp_get(doc, GS_UPSTREAMS);

	return a && json_object_is_type(a, json_type_array) ? a : NULL;
}

static const char *
up_name(struct json_object *u)
{
	return jp_str(jp_get(u, GS_NAME));
}

/* The window label of window i of u: its period ("60s"), with "#2", "#3"
 * after it for a later window of the same period and unit (so label sets
 * never repeat).  0 ok, -1 the window is not readable. */
static int
window_labels(struct json_object *wins, size_t i, char *out, size_t max)
{
	struct json_object *w = jp_at(wins, i);
	const char *unit = jp_str(jp_get(w, GS_W_UNIT)), *u2;
	long long per, per2;
	size_t j, same = 1;

	if (jp_ll(jp_get(w, GS_W_PER_S), &per) < 0 || unit == NULL)
		return -1;
	for (j = 0; j < i; j++) {
		u2 = jp_str(jp_get(jp_at(wins, j), GS_W_UNIT));
		if (jp_ll(jp_get(jp_at(wins, j), GS_W_PER_S), &per2) == 0 && per2 == per && u2 &&
		    strcmp(u2, unit) == 0)
			same++;
	}
	if (same > 1)
		snprintf(out, max, "window=\"%llds#%zu\",unit=\"%s\"", per, same, unit);
	else
		snprintf(out, max, "window=\"%llds\",unit=\"%s\"", per, unit);
	/* Units are the gate's own words (messages, recipients, connections). */
	return strcspn(unit, "\"\\\n") == strlen(unit) ? 0 : -1;
}

static void
window_family(struct buf *o, struct json_object *ups, const char *name, const char *field,
    const char *help)
{
	size_t i, j;
	char lab[128];

	family(o, name, "gauge", help);
	for (i = 0; i < jp_len(ups); i++) {
		struct json_object *wins = jp_get(jp_at(ups, i), GS_WINDOWS);
		const char *up = up_name(jp_at(ups, i));

		if (up == NULL)
			continue;
		for (j = 0; j < jp_len(wins); j++)
			if (window_labels(wins, j, lab, sizeof lab) == 0)
				sample_up(o, name, up, lab, jp_get(jp_at(wins, j), field));
	}
}

/* The member at a dotted path ("send.fallback.switches") of v, or NULL. */
static struct json_object *
jp_path(struct json_object *v, const char *path)
{
	char key[64];
	size_t n;

	while (v && *path) {
		n = strcspn(path, ".");
		if (n >= sizeof key)
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		v = jp_get(v, key);
		path += n + (path[n] == '.');
	}
	return v;
}

/* A family with one sample per upstream: the number at path in its
 * object (jp_path). */
static void
up_family(struct buf *o, struct json_object *ups, const char *name, const char *type,
    const char *path, const char *help)
{
	size_t i;

	family(o, name, type, help);
	for (i = 0; i < jp_len(ups); i++)
		if (up_name(jp_at(ups, i)))
			sample_up(o, name, up_name(jp_at(ups, i)), NULL, jp_path(jp_at(ups, i), path));
}

static int
is_true(struct json_object *v)
{
	return jp_bool(v) == 1;
}

static void
suspension(struct buf *o, struct json_object *ups, long long now_ms)
{
	static const char *const kinds[][3] = {
		{ "throttle", GS_SUSPENDED, GS_SUSPENDED_UNTIL_MS },
		{ "auth", GS_AUTH_SUSPENDED, GS_AUTH_UNTIL_MS },
	};
	size_t i, k;
	long long until;

	family(o, "weir_upstream_suspended", "gauge",
	    "1 while the gate suspends the upstream (kind throttle: it said slow down; auth: "
	    "authentication failed), else 0.");
	for (i = 0; i < jp_len(ups); i++)
		for (k = 0; k < 2 && up_name(jp_at(ups, i)); k++) {
			buf_adds(o, "weir_upstream_suspended{upstream=");
			label_value(o, up_name(jp_at(ups, i)));
			buf_printf(o, ",kind=\"%s\"} %d\n", kinds[k][0],
			    is_true(jp_get(jp_at(ups, i), kinds[k][1])));
		}
	family(o, "weir_upstream_suspension_remaining_seconds", "gauge",
	    "Seconds until the upstream's suspension ends (0: not suspended).");
	for (i = 0; i < jp_len(ups); i++)
		for (k = 0; k < 2 && up_name(jp_at(ups, i)); k++) {
			double left = 0;

			if (is_true(jp_get(jp_at(ups, i), kinds[k][1])) &&
			    jp_ll(jp_get(jp_at(ups, i), kinds[k][2]), &until) == 0 && until > now_ms)
				left = (double)(until - now_ms) / 1000.0;
			buf_adds(o, "weir_upstream_suspension_remaining_seconds{upstream=");
			label_value(o, up_name(jp_at(ups, i)));
			buf_printf(o, ",kind=\"%s\"} %.3f\n", kinds[k][0], left);
		}
}

static void
reports(struct buf *o, struct json_object *ups)
{
	static const char *const outcomes[][2] = {
		{ "sent", GS_SENT }, { "sent_none", GS_SENT_NONE }, { "refunded", GS_REFUNDED },
		{ "throttled", GS_THROTTLED }, { "unknown", GS_UNKNOWN }, { "nomail", GS_NOMAIL },
		{ "authfail", GS_AUTHFAIL },
	};
	size_t i, k;
	char lab[64];

	family(o, "weir_gate_reports_total", "counter",
	    "Outcomes the deliverers reported to the gate since it started, by outcome "
	    "(sent: the upstream accepted a recipient of the transaction; sent_none: it "
	    "accepted none).");
	for (i = 0; i < jp_len(ups); i++)
		for (k = 0; k < sizeof outcomes / sizeof outcomes[0]; k++)
			if (up_name(jp_at(ups, i))) {
				snprintf(lab, sizeof lab, "outcome=\"%s\"", outcomes[k][0]);
				sample_up(o, "weir_gate_reports_total", up_name(jp_at(ups, i)), lab,
				    jp_get(jp_at(ups, i), outcomes[k][1]));
			}
}

/* weir-send's counters ("send" of an upstream, from its COUNTS lines):
 * a family only if some upstream has them. */
static void
send_counts(struct buf *o, struct json_object *ups)
{
	static const char *const outcomes[] = { GS_S_QUEUED, GS_S_DELIVERED, GS_S_DEFERRED,
		GS_S_BOUNCED };
	static const char *const fam[][3] = {
		{ "weir_messages_total", GS_S_MESSAGES, "Messages weir-send counted since it started, "
		    "by outcome (queued: preprocessed for the upstream; delivered, deferred, "
		    "bounced: attempts with at least one recipient so)." },
		{ "weir_recipients_total", GS_S_RECIPIENTS, "Recipients weir-send counted since it "
		    "started, by outcome (queued: preprocessed for the upstream; delivered, "
		    "deferred, bounced: each attempt's result)." },
	};
	size_t i, f, k, n = 0;
	char lab[64];

	for (i = 0; i < jp_len(ups); i++)
		n += up_name(jp_at(ups, i)) && jp_get(jp_at(ups, i), GS_SEND) != NULL;
	if (n == 0)
		return;
	for (f = 0; f < 2; f++) {
		family(o, fam[f][0], "counter", fam[f][2]);
		for (i = 0; i < jp_len(ups); i++) {
			struct json_object *c = jp_get(jp_get(jp_at(ups, i), GS_SEND), fam[f][1]);

			for (k = 0; k < 4 && c && up_name(jp_at(ups, i)); k++) {
				snprintf(lab, sizeof lab, "outcome=\"%s\"", outcomes[k]);
				sample_up(o, fam[f][0], up_name(jp_at(ups, i)), lab,
				    jp_get(c, outcomes[k]));
			}
		}
	}
	up_family(o, ups, "weir_sessions_open", "gauge", GS_SEND "." GS_S_SESSIONS_OPEN,
	    "Kept sessions weir-send has open to the upstream (as of its last report, "
	    "at most a second old).");
	up_family(o, ups, "weir_fallback_switches_total", "counter",
	    GS_SEND "." GS_S_FALLBACK "." GS_S_SWITCHES,
	    "Times the upstream's mail began going through a fallback (weir.conf's fallback), "
	    "since weir-send started.");
	up_family(o, ups, "weir_fallback_returns_total", "counter",
	    GS_SEND "." GS_S_FALLBACK "." GS_S_RETURNS,
	    "Times the upstream's mail came back to it from a fallback, since weir-send "
	    "started.");
}

/* What the gate judges fallbacks on (mail/route.h): the unreachable
 * spell, the requests passed over. */
static void
route_families(struct buf *o, struct json_object *ups)
{
	size_t i;

	family(o, "weir_upstream_unreachable", "gauge",
	    "1 while the upstream could not be reached (no connection, TLS handshake, greeting "
	    "or EHLO got through since its last failure), else 0.");
	for (i = 0; i < jp_len(ups); i++)
		if (up_name(jp_at(ups, i)) && jp_get(jp_at(ups, i), GS_ROUTE)) {
			buf_adds(o, "weir_upstream_unreachable{upstream=");
			label_value(o, up_name(jp_at(ups, i)));
			buf_printf(o, "} %d\n", jp_get(jp_get(jp_at(ups, i), GS_ROUTE),
			    GS_R_UNREACHABLE_SINCE_MS) != NULL);
		}
	up_family(o, ups, "weir_gate_passed_over_total", "counter", GS_ROUTE "." GS_R_PASSED_OVER,
	    "Requests the gate sent to a fallback (answered LATER: their fallback_when held) "
	    "since it started.");
}

/* A shared window's store (weir-gate(8), SHARED WINDOWS): whether it
 * answers, where its master is and its switches, whether the window is
 * whole; only the upstreams with one. */
static void
shared_families(struct buf *o, struct json_object *ups)
{
	static const char *const fam[][3] = {
		{ "weir_shared_store_up", GS_SHARED, "ok" },
		{ "weir_shared_window_whole", GS_SHARED_WINDOW, "whole" },
	};
	static const char *const help[] = {
		"1 while the upstream's shared store (Redis) answers, else 0.",
		"1 while this gate's history is in the shared store and no rebuild holds the "
		"grants, else 0 (rebuilding after a failover or a restart, or not answering).",
	};
	const char *s, *up;
	size_t i, f;

	for (f = 0; f < 2; f++) {
		family(o, fam[f][0], "gauge", help[f]);
		for (i = 0; i < jp_len(ups); i++)
			if ((up = up_name(jp_at(ups, i))) && (s = jp_str(jp_get(jp_at(ups, i),
			    fam[f][1])))) {
				buf_printf(o, "%s{upstream=", fam[f][0]);
				label_value(o, up);
				buf_printf(o, "} %d\n", strcmp(s, fam[f][2]) == 0);
			}
	}
	family(o, "weir_shared_master_info", "gauge",
	    "1, labelled with where the gate found the shared store: its address, or the "
	    "master the sentinels name (\"master NAME HOST:PORT\").");
	for (i = 0; i < jp_len(ups); i++)
		if ((up = up_name(jp_at(ups, i))) &&
		    (s = jp_str(jp_get(jp_at(ups, i), GS_SHARED_MASTER)))) {
			buf_adds(o, "weir_shared_master_info{upstream=");
			label_value(o, up);
			buf_adds(o, ",master=");
			label_value(o, s);
			buf_adds(o, "} 1\n");
		}
	up_family(o, ups, "weir_shared_master_switches_total", "counter", GS_SHARED_SWITCHES,
	    "Switches of the shared store's master (Redis Sentinel) the gate followed since it "
	    "started.");
}

static void
gate_text(struct buf *o, struct json_object *doc)
{
	struct json_object *ups = upstreams(doc);
	long long now_ms = 0;

	family(o, "weir_gate_up", "gauge", "1 if weir-gate answered this scrape, else 0.");
	buf_printf(o, "weir_gate_up %d\n", ups != NULL);
	if (ups == NULL)
		return;
	family(o, "weir_gate_journal_durable", "gauge",
	    "1 while the gate's journal is durable (0: it grants nothing).");
	buf_printf(o, "weir_gate_journal_durable %d\n", is_true(jp_get(doc, GS_JOURNAL_DURABLE)));
	window_family(o, ups, "weir_window_used", GS_W_USED,
	    "Weight the window holds now: sends logged in it plus grants held.");
	window_family(o, ups, "weir_window_limit", GS_W_LIMIT,
	    "The window's limit, in its unit, per its period.");
	up_family(o, ups, "weir_grants_waiting", "gauge", GS_WAITING,
	    "Requests waiting for a grant.");
	up_family(o, ups, "weir_deliveries_in_flight", "gauge", GS_IN_FLIGHT,
	    "Deliveries in flight: grants for a message handed to a deliverer, not yet "
	    "reported (a kept session's idle connection is none).");
	if (jp_ll(jp_get(doc, GS_NOW_MS), &now_ms) == 0)
		suspension(o, ups, now_ms);
	up_family(o, ups, "weir_gate_grants_total", "counter", GS_GRANTED,
	    "Grants the gate gave since it started.");
	reports(o, ups);
	route_families(o, ups);
	shared_families(o, ups);
	up_family(o, ups, "weir_recipients_accepted_total", "counter", GS_RCPT_ACCEPTED,
	    "Recipients the upstream accepted, as the deliverers reported them to the gate, "
	    "since the gate started.");
	send_counts(o, ups);
}

/* ---- the queue ---- */

static void
queue_text(struct buf *o, const struct qsummary *q, time_t now)
{
	family(o, "weir_queue_up", "gauge", "1 if the queue's summary could be had (from the "
	    "queue, or from weir-showq), else 0.");
	buf_printf(o, "weir_queue_up %d\n", q != NULL);
	if (q == NULL)
		return;
	family(o, "weir_queue_messages", "gauge",
	    "Messages in the queue, preprocessed or not, as the listing counts them.");
	buf_printf(o, "weir_queue_messages %llu\n", q->messages);
	family(o, "weir_queue_messages_not_preprocessed", "gauge",
	    "Messages in todo/, not yet preprocessed by weir-send.");
	buf_printf(o, "weir_queue_messages_not_preprocessed %llu\n", q->todo);
	family(o, "weir_queue_oldest_message_age_seconds", "gauge",
	    "Age of the oldest message (its queue time); 0 when the queue is empty.");
	buf_printf(o, "weir_queue_oldest_message_age_seconds %lld\n",
	    q->oldest && now > q->oldest ? (long long)(now - q->oldest) : 0LL);
}

void
metrics_format(const char *json, size_t jlen, const struct qsummary *q, time_t now,
    struct buf *out)
{
	struct buf why = BUF_INIT;
	struct json_object *doc = json ? json_parse_strict(json, jlen, GP_STATUS_MAX, &why) : NULL;

	if (json && doc == NULL)
		log_warnx("the gate's status is not JSON: %s", why.s);
	gate_text(out, doc);
	json_object_put(doc);
	buf_free(&why);
	queue_text(out, q, now);
}

int
metrics_collect(const struct metrics_src *src, struct buf *out)
{
	struct buf body = BUF_INIT, why = BUF_INIT;
	struct qsummary q;
	const char *from;
	int up, qok;

	up = gate_fetch(src, &body) == 0;
	if (!(qok = qsummary_get(src->cfg, src->queue_timeout_ms, &q, &from, &why) == 0))
		log_warnx("the queue's summary (%s): %s", from, why.s);
	metrics_format(up ? (body.s ? body.s : "") : NULL, body.len, qok ? &q : NULL, time(NULL),
	    out);
	metrics_oauth(src->cfg, out);
	if (qok)
		qsummary_free(&q);
	buf_free(&body);
	buf_free(&why);
	return up;
}
