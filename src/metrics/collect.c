/*
 * collect.c: one scrape, as Prometheus text format 0.0.4 (every family
 * with HELP and TYPE lines, its samples together; what each one counts
 * is in weir-metrics(8)).
 *
 *   the gate  one STATUS JSON request through mail/gateclient.h, with a
 *             deadline; its document is read with lib/jsonparse.h (json-c,
 *             strict, at most GP_STATUS_MAX bytes), and a field that is
 *             missing or not a number leaves its sample out (never
 *             guessed).  No answer: weir_gate_up 0 and no gate
 *             families.
 *   the queue the entries of mess/0..split-1 (every message, as qmail-
 *             qstat counts) with the oldest one's mtime, and of todo/ (not
 *             yet preprocessed).  Only names and mtimes: no file is opened,
 *             so weir-metrics needs only the queue group's read access.
 *
 * Trusts: the gate's document as far as jsonparse.c parses it; nothing in
 * the queue.  Config keys: gate_status_socket or gate_socket, queue_dir,
 * queue_split (through struct metrics_src).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/jsonparse.h"
#include "lib/log.h"
#include "mail/gateclient.h"
#include "mail/queue.h"
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
	struct timeval tv;
	const char *why = "connection closed";
	int rc = -1;

	tv.tv_sec = src->gate_timeout_ms / 1000;
	tv.tv_usec = (src->gate_timeout_ms % 1000) * 1000;
	if (gc_connect(&gc, src->gate_socket) < 0)
		return -1;
	if (setsockopt(gc.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
	    setsockopt(gc.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
		goto out;
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
	struct json_object *a = jp_get(doc, "upstreams");

	return a && json_object_is_type(a, json_type_array) ? a : NULL;
}

static const char *
up_name(struct json_object *u)
{
	return jp_str(jp_get(u, "name"));
}

/* The window label of window i of u: its period ("60s"), with "#2", "#3"
 * after it for a later window of the same period and unit (so label sets
 * never repeat).  0 ok, -1 the window is not readable. */
static int
window_labels(struct json_object *wins, size_t i, char *out, size_t max)
{
	struct json_object *w = jp_at(wins, i);
	const char *unit = jp_str(jp_get(w, "unit")), *u2;
	long long per, per2;
	size_t j, same = 1;

	if (jp_ll(jp_get(w, "per_s"), &per) < 0 || unit == NULL)
		return -1;
	for (j = 0; j < i; j++) {
		u2 = jp_str(jp_get(jp_at(wins, j), "unit"));
		if (jp_ll(jp_get(jp_at(wins, j), "per_s"), &per2) == 0 && per2 == per && u2 &&
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
		struct json_object *wins = jp_get(jp_at(ups, i), "windows");
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
		{ "throttle", "suspended", "suspended_until_ms" },
		{ "auth", "auth_suspended", "auth_suspended_until_ms" },
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
		{ "sent", "sent" }, { "refunded", "refunded" }, { "throttled", "throttled" },
		{ "unknown", "unknown" }, { "nomail", "nomail" }, { "authfail", "authfail" },
	};
	size_t i, k;
	char lab[64];

	family(o, "weir_gate_reports_total", "counter",
	    "Outcomes the deliverers reported to the gate since it started, by outcome "
	    "(sent: the upstream accepted the transaction).");
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
	static const char *const outcomes[] = { "queued", "delivered", "deferred", "bounced" };
	static const char *const fam[][3] = {
		{ "weir_messages_total", "messages", "Messages weir-send counted since it started, "
		    "by outcome (queued: preprocessed for the upstream; delivered, deferred, "
		    "bounced: attempts with at least one recipient so)." },
		{ "weir_recipients_total", "recipients", "Recipients weir-send counted since it "
		    "started, by outcome (queued: preprocessed for the upstream; delivered, "
		    "deferred, bounced: each attempt's result)." },
	};
	size_t i, f, k, n = 0;
	char lab[64];

	for (i = 0; i < jp_len(ups); i++)
		n += up_name(jp_at(ups, i)) && jp_get(jp_at(ups, i), "send") != NULL;
	if (n == 0)
		return;
	for (f = 0; f < 2; f++) {
		family(o, fam[f][0], "counter", fam[f][2]);
		for (i = 0; i < jp_len(ups); i++) {
			struct json_object *c = jp_get(jp_get(jp_at(ups, i), "send"), fam[f][1]);

			for (k = 0; k < 4 && c && up_name(jp_at(ups, i)); k++) {
				snprintf(lab, sizeof lab, "outcome=\"%s\"", outcomes[k]);
				sample_up(o, fam[f][0], up_name(jp_at(ups, i)), lab,
				    jp_get(c, outcomes[k]));
			}
		}
	}
	up_family(o, ups, "weir_sessions_open", "gauge", "send.sessions_open",
	    "Kept sessions weir-send has open to the upstream (as of its last report, "
	    "at most a second old).");
	up_family(o, ups, "weir_fallback_switches_total", "counter", "send.fallback.switches",
	    "Times the upstream's mail began going through a fallback (weir.conf's fallback), "
	    "since weir-send started.");
	up_family(o, ups, "weir_fallback_returns_total", "counter", "send.fallback.returns",
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
		if (up_name(jp_at(ups, i)) && jp_get(jp_at(ups, i), "route")) {
			buf_adds(o, "weir_upstream_unreachable{upstream=");
			label_value(o, up_name(jp_at(ups, i)));
			buf_printf(o, "} %d\n", jp_get(jp_get(jp_at(ups, i), "route"),
			    "unreachable_since_ms") != NULL);
		}
	up_family(o, ups, "weir_gate_passed_over_total", "counter", "route.passed_over",
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
		{ "weir_shared_store_up", "shared", "ok" },
		{ "weir_shared_window_whole", "shared_window", "whole" },
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
		    (s = jp_str(jp_get(jp_at(ups, i), "shared_master")))) {
			buf_adds(o, "weir_shared_master_info{upstream=");
			label_value(o, up);
			buf_adds(o, ",master=");
			label_value(o, s);
			buf_adds(o, "} 1\n");
		}
	up_family(o, ups, "weir_shared_master_switches_total", "counter", "shared_switches",
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
	buf_printf(o, "weir_gate_journal_durable %d\n", is_true(jp_get(doc, "journal_durable")));
	window_family(o, ups, "weir_window_used", "used",
	    "Weight the window holds now: sends logged in it plus grants held.");
	window_family(o, ups, "weir_window_limit", "limit",
	    "The window's limit, in its unit, per its period.");
	up_family(o, ups, "weir_grants_waiting", "gauge", "waiting",
	    "Requests waiting for a grant.");
	up_family(o, ups, "weir_deliveries_in_flight", "gauge", "held",
	    "Grants held: deliveries under way, not yet reported.");
	if (jp_ll(jp_get(doc, "now_ms"), &now_ms) == 0)
		suspension(o, ups, now_ms);
	up_family(o, ups, "weir_gate_grants_total", "counter", "granted",
	    "Grants the gate gave since it started.");
	reports(o, ups);
	route_families(o, ups);
	shared_families(o, ups);
	up_family(o, ups, "weir_recipients_accepted_total", "counter", "rcpt_accepted",
	    "Recipients the upstream accepted, as the deliverers reported them to the gate, "
	    "since the gate started.");
	send_counts(o, ups);
}

/* ---- the queue ---- */

/* Count the entries of one folder (relative to dfd); oldest mtime. */
static int
count_dir(int dfd, const char *rel, unsigned long long *n, time_t *oldest)
{
	struct dirent *de;
	struct stat st;
	unsigned long id;
	DIR *d;
	int fd;

	if ((fd = openat(dfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (queue_parse_id(de->d_name, &id) < 0)
			continue;
		(*n)++;
		if (oldest && fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (*oldest == 0 || st.st_mtime < *oldest))
			*oldest = st.st_mtime;
	}
	fd = errno;
	closedir(d);
	errno = fd;
	return fd ? -1 : 0;
}

void
metrics_queue_scan(const char *dir, unsigned split, struct metrics_queue *q)
{
	char rel[QPATH_MAX];
	unsigned i;
	int dfd;

	memset(q, 0, sizeof *q);
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		log_warn("queue %s", dir);
		return;
	}
	q->ok = 1;
	for (i = 0; i < split && q->ok; i++) {
		snprintf(rel, sizeof rel, "mess/%u", i);
		if (count_dir(dfd, rel, &q->messages, &q->oldest) < 0) {
			log_warn("queue %s/%s", dir, rel);
			q->ok = 0;
		}
	}
	if (q->ok && count_dir(dfd, "todo", &q->todo, NULL) < 0) {
		log_warn("queue %s/todo", dir);
		q->ok = 0;
	}
	close(dfd);
}

static void
queue_text(struct buf *o, const struct metrics_queue *q, time_t now)
{
	family(o, "weir_queue_up", "gauge", "1 if the queue's folders could be read, else 0.");
	buf_printf(o, "weir_queue_up %d\n", q->ok);
	if (!q->ok)
		return;
	family(o, "weir_queue_messages", "gauge",
	    "Messages in the queue (mess/), preprocessed or not.");
	buf_printf(o, "weir_queue_messages %llu\n", q->messages);
	family(o, "weir_queue_messages_not_preprocessed", "gauge",
	    "Messages in todo/, not yet preprocessed by weir-send.");
	buf_printf(o, "weir_queue_messages_not_preprocessed %llu\n", q->todo);
	family(o, "weir_queue_oldest_message_age_seconds", "gauge",
	    "Age of the oldest message (its mess/ file's mtime); 0 when the queue is empty.");
	buf_printf(o, "weir_queue_oldest_message_age_seconds %lld\n",
	    q->oldest && now > q->oldest ? (long long)(now - q->oldest) : 0LL);
}

void
metrics_format(const char *json, size_t jlen, const struct metrics_queue *q, time_t now,
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
	struct buf body = BUF_INIT;
	struct metrics_queue q;
	int up;

	up = gate_fetch(src, &body) == 0;
	metrics_queue_scan(src->queue_dir, src->queue_split, &q);
	metrics_format(up ? (body.s ? body.s : "") : NULL, body.len, &q, time(NULL), out);
	metrics_oauth(src->cfg, out);
	buf_free(&body);
	return up;
}
