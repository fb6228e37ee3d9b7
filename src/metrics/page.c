/*
 * page.c: weir-metrics' status page: one HTML page, made from the relay's
 * status document (mail/relaystatus.h, the /status.json it also serves),
 * with the charts drawn as inline SVG: no script, no font, no image,
 * nothing fetched from anywhere (the page refreshes itself with a meta
 * refresh every PAGE_REFRESH_S seconds).  It reads well on a phone: one
 * column, charts as wide as the screen, their labels in HTML.
 *
 * Per upstream: its state (active, suspended with the upstream's reply
 * and the command that lifts it), the next grant, grants held, requests
 * waiting, sessions open, its OAuth token (a login needed said with the
 * command that does it); per window "U of N UNIT per T", the next free
 * slot, and a chart of the last hour: each send the gate logged as a mark
 * at its logged time (an unknown outcome as a bar over its interval), the
 * grants held and the requests waiting marked at their times, the limit
 * as a line, and the window's use as a line where the history makes it
 * exact (a sliding window of at most an hour: from an hour ago plus its
 * period on; a calendar one: since its last boundary; a longer sliding
 * window: not drawn, its marks are); a shared window, this relay's part
 * and the others'.  Then the queue by state with the deferral reasons,
 * the drain estimate with a progress bar while a backlog drains (the
 * sends of the gate's history since the oldest message came, against
 * those and the ones to go), where waiting messages go (with backup
 * relays or routes by recipient: each upstream passed over or not and
 * why, each message's upstream), and weir-send's kept sessions.
 *
 * Everything from the document is escaped; it holds no message content
 * and no address but in the upstreams' replies, which page_mask masks
 * for a viewer who did not authenticate.
 *
 * Trusts: the document as far as lib/jsonparse.c parsed it (a field
 * missing or of another kind is left out).  Config keys: none.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/jsonparse.h"
#include "lib/timefmt.h"
#include "mail/credfp.h"
#include "mail/gatestatus.h"
#include "mail/policy.h"
#include "mail/relaystatus.h"
#include "metrics/metrics.h"

#define HOUR_MS	(3600LL * 1000)
/* The chart's viewBox: the plot, then a band for the marks below it. */
#define CW	600
#define PLOT_TOP 8
#define PLOT_BOT 150
#define BAND_TOP 156
#define BAND_H	18
#define CH	(BAND_TOP + BAND_H + 2)

/* ---- text ---- */

static void
esc(struct buf *o, const char *s)
{
	for (; s && *s; s++)
		switch (*s) {
		case '&': buf_adds(o, "&amp;"); break;
		case '<': buf_adds(o, "&lt;"); break;
		case '>': buf_adds(o, "&gt;"); break;
		case '"': buf_adds(o, "&quot;"); break;
		case '\'': buf_adds(o, "&#39;"); break;
		default: buf_addc(o, *s); break;
		}
}

/* A number of the document, kept within +-2^53 (times in ms, counts,
 * periods: far beyond any real one), so that no sum or product of two
 * overflows whatever the document says.  0 with *out, else -1. */
#define NUM_MAX (1LL << 53)
static int
num(struct json_object *o, long long *out)
{
	long long v;

	if (jp_ll(o, &v) < 0)
		return -1;
	*out = v > NUM_MAX ? NUM_MAX : v < -NUM_MAX ? -NUM_MAX : v;
	return 0;
}

static long long
ll_or(struct json_object *o, long long dflt)
{
	long long v;

	return num(o, &v) == 0 ? v : dflt;
}

/* "06:21:05 UTC", with the date when it is not today's. */
static void
clock_str(char *out, size_t n, long long wall_ms, long long now_ms)
{
	time_t t = (time_t)(wall_ms / 1000), now = (time_t)(now_ms / 1000);
	struct tm tm, tn;

	gmtime_r(&t, &tm);
	gmtime_r(&now, &tn);
	if (tm.tm_yday == tn.tm_yday && tm.tm_year == tn.tm_year)
		strftime(out, n, "%H:%M:%S UTC", &tm);
	else
		strftime(out, n, "%Y-%m-%d %H:%M UTC", &tm);
}

/* " (in 52s)", " (5m ago)". */
static void
rel_str(char *out, size_t n, long long wall_ms, long long now_ms)
{
	char d[64];
	long long s = (wall_ms - now_ms) / 1000;

	duration_format(d, sizeof d, s < 0 ? -s : s);
	snprintf(out, n, s < 0 ? " (%s ago)" : " (in %s)", d);
}

/* "2026-11-26T06:00:00Z" in wall ms, or -1. */
static long long
iso_ms(const char *s)
{
	time_t t = date_iso_parse(s);

	return t < 0 ? -1 : (long long)t * 1000;
}

static const char *
plural(long long n)
{
	return n == 1 ? "" : "s";
}

/* "messages" of a window: "message" for one. */
static void
unit_str(char *out, size_t n, const char *unit, long long count)
{
	size_t len = strlen(unit);

	if (count == 1 && len > 1 && unit[len - 1] == 's')
		snprintf(out, n, "%.*s", (int)(len - 1), unit);
	else
		snprintf(out, n, "%s", unit);
}

/* ---- masking ---- */

static void
mask_member(struct json_object *o, const char *key)
{
	const char *s = jp_str(jp_get(o, key));
	char *m;

	if (s == NULL)
		return;
	m = rs_mask_addresses(s, strlen(s));
	json_object_object_add(o, key, json_object_new_string(m));
	free(m);
}

void
page_mask(struct json_object *doc)
{
	struct json_object *ups = jp_get(jp_get(doc, "gate"), "upstreams");
	size_t i;

	for (i = 0; i < jp_len(ups); i++) {
		mask_member(jp_at(ups, i), "suspend_reason");
		mask_member(jp_at(ups, i), "auth_reason");
		mask_member(jp_get(jp_at(ups, i), "route"), "unreachable_reason");
	}
	ups = jp_get(jp_get(doc, "routes"), "upstreams");
	for (i = 0; i < jp_len(ups); i++)
		mask_member(jp_at(ups, i), "detail");
	ups = jp_get(jp_get(doc, "summary"), "problems");
	for (i = 0; i < jp_len(ups); i++)
		mask_member(jp_at(ups, i), "what");
	mask_member(jp_get(doc, "summary"), "line");
}

/* ---- the chart ---- */

struct chart {
	long long t0, t1;	/* the hour shown, wall ms */
	double ymax;
	struct buf *o;
};

static double
cx(const struct chart *c, long long t)
{
	if (t < c->t0)
		t = c->t0;
	if (t > c->t1)
		t = c->t1;
	return (double)(t - c->t0) * CW / (double)(c->t1 - c->t0);
}

static double
cy(const struct chart *c, double v)
{
	return PLOT_BOT - v * (PLOT_BOT - PLOT_TOP) / c->ymax;
}

/* Weight of a history entry ([t, from, m, r, c] or [g, m, r, c]) in unit
 * u (0 messages, 1 recipients, 2 connections), counted from index off. */
static long long
weight(struct json_object *e, int u, size_t off)
{
	long long w = ll_or(jp_at(e, off + (size_t)u), 0);

	/* The gate's weights are at most GP_WEIGHT_MAX. */
	return w < 0 ? 0 : w > 1000000 ? 1000000 : w;
}

struct ev {
	long long t, d;
};

static int
by_time(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	return x->t < y->t ? -1 : x->t > y->t;
}

/* The window's use as a step line from `from` to the chart's end:
 * base the use at from, evs (sorted) the changes after it. */
static void
use_line(const struct chart *c, const struct ev *evs, size_t n, long long from, long long base)
{
	struct buf *o = c->o;
	long long use = base;
	size_t i;

	buf_printf(o, "<path class=\"use\" d=\"M%.1f %d V%.1f", cx(c, from), PLOT_BOT,
	    cy(c, (double)use));
	for (i = 0; i < n && evs[i].t <= c->t1; i++) {
		use += evs[i].d;
		if (i + 1 < n && evs[i + 1].t == evs[i].t)
			continue;
		buf_printf(o, " H%.1f V%.1f", cx(c, evs[i].t), cy(c, (double)use));
	}
	buf_printf(o, " H%d V%d Z\"/>", CW, PLOT_BOT);
}

/* The use of window w as events (time, change), from the history:
 * where the history makes it exact (see the top), *from is where that
 * begins and *base the use just before it; else *from is -1. */
static struct ev *
use_events(struct json_object *h, struct json_object *w, int u, long long t1, size_t *n,
    long long *from, long long *base)
{
	struct json_object *sends = jp_get(h, "sends");
	long long per = ll_or(jp_get(w, "per_s"), 0) * 1000, wt, t, t0;
	struct ev *evs = xcalloc(2 * jp_len(sends) + 1, sizeof *evs);
	size_t i;

	*n = 0;
	*from = -1;
	*base = 0;
	t0 = ll_or(jp_get(h, "complete_since_ms"), t1 - HOUR_MS);
	if (jp_bool(jp_get(w, "calendar")) == 1) {
		/* Nothing leaves before the next boundary: the use since the
		 * last one is what is logged now less what came since. */
		*from = ll_or(jp_get(w, "period_start_ms"), t1);
		if (*from < t0)
			*from = t0;
		*base = ll_or(jp_get(w, "logged"), 0);
		for (i = 0; i < jp_len(sends); i++) {
			t = ll_or(jp_at(jp_at(sends, i), 0), 0);
			if (t > *from && (wt = weight(jp_at(sends, i), u, 2)) > 0) {
				evs[*n].t = t;
				evs[(*n)++].d = wt;
				*base -= wt;
			}
		}
	} else if (per > 0 && per <= HOUR_MS) {
		/* Each send counts from its time (an unknown outcome from the
		 * start of its interval) until its end + T. */
		*from = t0 + per;
		for (i = 0; i < jp_len(sends); i++) {
			struct json_object *e = jp_at(sends, i);

			if ((wt = weight(e, u, 2)) == 0)
				continue;
			evs[*n].t = ll_or(jp_at(e, 1), 0);
			evs[(*n)++].d = wt;
			evs[*n].t = ll_or(jp_at(e, 0), 0) + per;
			evs[(*n)++].d = -wt;
		}
	}
	qsort(evs, *n, sizeof *evs, by_time);
	return evs;
}

/* A chart of window w (unit index u) of upstream up over [t1 - span,
 * t1], in a figure of class cls ("hour" or "recent"), with its time axis. */
static void
chart(struct buf *o, struct json_object *up, struct json_object *w, int u, long long t1,
    long long span, const char *cls, const char *caption)
{
	struct json_object *h = jp_get(up, "history"), *sends = jp_get(h, "sends");
	struct json_object *held = jp_get(h, "held"), *waiting = jp_get(h, "waiting");
	long long limit = ll_or(jp_get(w, "limit"), 0), used = ll_or(jp_get(w, "used"), 0);
	long long from, base, run, peak = 0, wt, t, tf;
	struct chart c;
	struct ev *evs;
	size_t i, n, marks = 0;
	char lab[64];

	c.o = o;
	c.t1 = t1;
	c.t0 = t1 - span;
	evs = use_events(h, w, u, t1, &n, &from, &base);
	if (from >= 0 && from < c.t0)
		from = c.t0;
	for (i = 0, run = base; from >= 0 && i < n; i++) {
		run += evs[i].d;
		if (evs[i].t >= from && evs[i].t <= c.t1 && run > peak)
			peak = run;
	}
	c.ymax = (double)(limit > peak ? limit : peak);
	if (used > c.ymax)
		c.ymax = (double)used;
	c.ymax = c.ymax * 1.15 + 0.5;
	buf_printf(o, "<figure class=\"%s\"><figcaption>%s</figcaption>"
	    "<svg class=\"chart\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">",
	    cls, caption, CW, CH, caption);
	buf_printf(o, "<rect class=\"plot\" x=\"0\" y=\"0\" width=\"%d\" height=\"%d\"/>", CW,
	    PLOT_BOT);
	for (i = 1; i < 4; i++)
		buf_printf(o, "<line class=\"grid\" x1=\"%zu\" y1=\"0\" x2=\"%zu\" y2=\"%d\"/>",
		    i * CW / 4, i * CW / 4, PLOT_BOT);
	if (from >= 0 && from < c.t1) {
		/* The use just before from, then the line. */
		for (i = 0, run = base; i < n && evs[i].t <= from; i++)
			run += evs[i].d;
		use_line(&c, evs + i, n - i, from, run);
	}
	buf_printf(o, "<line class=\"limit\" x1=\"0\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>",
	    cy(&c, (double)limit), CW, cy(&c, (double)limit));
	/* Now: the use the gate counts, logged and held. */
	buf_printf(o, "<rect class=\"now\" x=\"%d\" y=\"%.1f\" width=\"3\" height=\"%.1f\">"
	    "<title>now: %lld of %lld</title></rect>", CW - 3, cy(&c, (double)used),
	    PLOT_BOT - cy(&c, (double)used), used, limit);
	/* The marks: one per send with weight in this unit. */
	for (i = 0; i < jp_len(sends); i++) {
		struct json_object *e = jp_at(sends, i);

		t = ll_or(jp_at(e, 0), 0);
		tf = ll_or(jp_at(e, 1), t);
		if ((wt = weight(e, u, 2)) == 0 || t <= c.t0 || tf > c.t1)
			continue;
		if (tf < t)	/* an unknown outcome: its interval */
			buf_printf(o, "<rect class=\"send maybe\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
			    "height=\"%d\"/>", cx(&c, tf), BAND_TOP + 4, cx(&c, t) - cx(&c, tf) + 1.5,
			    BAND_H - 8);
		else
			buf_printf(o, "<rect class=\"send\" x=\"%.1f\" y=\"%d\" width=\"1.5\" "
			    "height=\"%d\"/>", cx(&c, t) - 0.75, BAND_TOP, BAND_H);
		marks++;
	}
	for (i = 0; i < jp_len(held); i++)
		if (weight(jp_at(held, i), u, 1) > 0)
			buf_printf(o, "<circle class=\"held\" cx=\"%.1f\" cy=\"%d\" r=\"4\"/>",
			    cx(&c, ll_or(jp_at(jp_at(held, i), 0), c.t1)), BAND_TOP + BAND_H / 2);
	for (i = 0; i < jp_len(waiting); i++)
		if (weight(jp_at(waiting, i), u, 1) > 0)
			buf_printf(o, "<path class=\"wait\" d=\"M%.1f %d l5 -10 h-10 Z\"/>",
			    cx(&c, ll_or(jp_at(jp_at(waiting, i), 0), c.t1)), PLOT_BOT - 1);
	buf_printf(o, "<title>%s: %zu send%s</title></svg><div class=\"axis\">", caption, marks,
	    plural((long long)marks));
	for (i = 4; i > 0; i--) {
		duration_format(lab, sizeof lab, (long long)i * span / 4000);
		buf_printf(o, "<span>\xe2\x88\x92%s</span>", lab);
	}
	buf_adds(o, "<span>now</span></div></figure>");
	free(evs);
}

/* The window's charts: the last hour, and for a window of at most
 * ZOOM_PER_MAX the last ZOOM_WINDOWS periods (at least a minute), where
 * each send shows. */
#define ZOOM_PER_MAX	(5 * 60 * 1000LL)
#define ZOOM_WINDOWS	12
static void
charts(struct buf *o, struct json_object *up, struct json_object *w, int u, long long now_ms)
{
	long long per = ll_or(jp_get(w, "per_s"), 0) * 1000, span;
	char cap[64], d[32];

	buf_adds(o, "<div class=\"charts\">");
	chart(o, up, w, u, now_ms, HOUR_MS, "hour", "the last hour");
	if (per > 0 && per <= ZOOM_PER_MAX) {
		span = per * ZOOM_WINDOWS < 60000 ? 60000 : per * ZOOM_WINDOWS;
		duration_format(d, sizeof d, span / 1000);
		snprintf(cap, sizeof cap, "the last %s", d);
		chart(o, up, w, u, now_ms, span, "recent", cap);
	}
	buf_adds(o, "</div>");
	if (!(per > 0 && per <= HOUR_MS) && jp_bool(jp_get(w, "calendar")) != 1)
		buf_adds(o, "<p class=\"note\">A window longer than the hour shown: its use over "
		    "the hour is not drawn (the sends leaving it are older than the history); "
		    "its sends are.</p>");
}

/* ---- sections ---- */

static void bar(struct buf *o, const char *cls, double a, double b);

static const char *const unit_names[] = { "messages", "recipients", "connections" };

static int
unit_index(const char *unit)
{
	int i;

	for (i = 0; unit && i < 3; i++)
		if (strcmp(unit, unit_names[i]) == 0)
			return i;
	return -1;
}

static void
window(struct buf *o, struct json_object *up, struct json_object *w, long long now_ms)
{
	const char *unit = jp_str(jp_get(w, "unit"));
	long long limit, per, used, logged, held, free_at;
	struct json_object *all = jp_get(w, "all_hosts");
	char d[64], when[64], rel[64], un[32];
	int u = unit_index(unit);

	if (u < 0 || num(jp_get(w, "limit"), &limit) < 0 || num(jp_get(w, "per_s"), &per) < 0 ||
	    num(jp_get(w, "used"), &used) < 0)
		return;
	logged = ll_or(jp_get(w, "logged"), 0);
	held = ll_or(jp_get(w, "held"), 0);
	duration_format(d, sizeof d, per);
	unit_str(un, sizeof un, unit, limit);
	buf_printf(o, "<div class=\"win\"><div class=\"head\"><span class=\"big\">%lld of %lld "
	    "%s per %s</span>", used, limit, un, d);
	if (jp_bool(jp_get(w, "calendar")) == 1)
		buf_adds(o, "<span class=\"mut\">resets at fixed times</span>");
	buf_printf(o, "<span class=\"mut\">%lld logged + %lld held</span>", logged, held);
	/* The window's own room; the upstream's next slot (suspensions
	 * too) is said once, above the windows. */
	if (json_object_object_get_ex(w, GS_W_FREE_AT_MS, NULL)) {
		if (num(jp_get(w, GS_W_FREE_AT_MS), &free_at) < 0)
			buf_adds(o, "<span>full until a grant held is reported</span>");
		else if (free_at > now_ms) {
			clock_str(when, sizeof when, free_at, now_ms);
			rel_str(rel, sizeof rel, free_at, now_ms);
			buf_printf(o, "<span>full until <b>%s</b>%s</span>", when, rel);
		}
	}
	buf_adds(o, "</div>");
	if (json_object_object_get_ex(w, "all_hosts", NULL)) {
		long long au;

		if (num(jp_get(all, "used"), &au) < 0)
			buf_adds(o, "<p class=\"alert\">Shared window: the store does not answer, "
			    "so every relay's use is unknown.</p>");
		else {
			long long other = au > used ? au - used : 0;
			double pm = limit ? 100.0 * (double)(au - other) / (double)limit : 0;
			double po = limit ? 100.0 * (double)other / (double)limit : 0;

			if (pm + po > 100) {
				po = po > 100 ? 100 : po;
				pm = 100 - po;
			}
			buf_printf(o, "<div class=\"share\"><span>all relays: <b>%lld of %lld</b> "
			    "(this relay %lld, the others %lld)</span>", au, limit, au - other, other);
			bar(o, "", pm, po);
			buf_adds(o, "</div>");
		}
	}
	charts(o, up, w, u, now_ms);
	buf_adds(o, "</div>");
}

/* up's suspensions; oauth: the upstream has an oauth section (the
 * document's "oauth" has it), whose refused credentials a login mends. */
static void
suspension(struct buf *o, struct json_object *up, const char *name, int oauth, long long now_ms)
{
	static const char *const kinds[][4] = {
		{ "suspended", "suspended_until_ms", "suspend_reason", "It said" },
		{ "auth_suspended", "auth_suspended_until_ms", "auth_reason",
		    "Authentication failed" },
	};
	char when[64], rel[64];
	struct buf fix = BUF_INIT;
	const char *by;
	long long until;
	size_t k;

	for (k = 0; k < 2; k++) {
		if (jp_bool(jp_get(up, kinds[k][0])) != 1)
			continue;
		until = ll_or(jp_get(up, kinds[k][1]), now_ms);
		clock_str(when, sizeof when, until, now_ms);
		rel_str(rel, sizeof rel, until, now_ms);
		buf_printf(o, "<div class=\"alert\"><b>Suspended until %s</b>%s. %s: <q>", when, rel,
		    k == 0 && jp_bool(jp_get(up, GS_SUSPEND_QUOTA)) == 1 ?
		    "Its quota is spent; it said" : kinds[k][3]);
		esc(o, jp_str(jp_get(up, kinds[k][2])));
		buf_adds(o, "</q>.<br>");
		/* Another relay's, shared through the store (weir-gate(8)). */
		if (k == 0 && (by = jp_str(jp_get(up, GS_SUSPENDED_BY))) != NULL) {
			buf_adds(o, "Met by ");
			esc(o, by);
			buf_adds(o, ", shared through the store. ");
		}
		if (k == 1) {
			/* weir-gate's own advice (mail/credfp.h), as a sentence. */
			buf_reset(&fix);
			cred_fix(&fix, name, oauth, jp_str(jp_get(up, kinds[k][2])));
			fix.s[0] = (char)toupper((unsigned char)fix.s[0]);
			esc(o, fix.s);
			buf_adds(o, ". To try again now: ");
		} else
			buf_adds(o, "Nothing is sent to it until then. To lift it now: ");
		buf_adds(o, "<code>weir resume ");
		esc(o, name);
		buf_adds(o, "</code></div>");
	}
	buf_free(&fix);
}

/* The element of arr whose key is name. */
static struct json_object *
by_key(struct json_object *arr, const char *key, const char *name)
{
	size_t i;
	const char *n;

	for (i = 0; i < jp_len(arr); i++)
		if ((n = jp_str(jp_get(jp_at(arr, i), key))) && strcmp(n, name) == 0)
			return jp_at(arr, i);
	return NULL;
}

static struct json_object *
by_upstream(struct json_object *arr, const char *name)
{
	return by_key(arr, "upstream", name);
}

static struct json_object *
by_name(struct json_object *arr, const char *name)
{
	return by_key(arr, "name", name);
}

/* A bar with parts a and b (percent, b the others'), in SVG: a style
 * attribute would need the CSP to allow every inline style. */
static void
bar(struct buf *o, const char *cls, double a, double b)
{
	buf_printf(o, "<svg class=\"bar%s\" viewBox=\"0 0 100 1\" preserveAspectRatio=\"none\" "
	    "aria-hidden=\"true\"><rect width=\"%.1f\" height=\"1\"/>", cls, a);
	if (b > 0)
		buf_printf(o, "<rect class=\"others\" x=\"%.1f\" width=\"%.1f\" height=\"1\"/>", a, b);
	buf_adds(o, "</svg>");
}

/* The drain estimate d of an upstream (relaystatus.h, item 3): what it
 * leaves to retry times, and while a backlog drains, a bar of the sends
 * it has made against those and the ones to go. */
static void
drain(struct buf *o, struct json_object *d, long long now_ms)
{
	struct json_object *lim = jp_get(d, "limited_by"), *def = jp_get(d, "deferred");
	struct json_object *pr = jp_get(d, "progress");
	long long msgs = ll_or(jp_get(d, "messages"), 0), rcpts = ll_or(jp_get(d, "recipients"), 0);
	long long sends = ll_or(jp_get(d, "sends"), 0), secs, least, from, done, n, retry;
	char dur[64], when[64], per[64];

	buf_printf(o, "<p><b>%lld message%s</b>, %lld recipient%s, %lld send%s: ", msgs,
	    plural(msgs), rcpts, plural(rcpts), sends, plural(sends));
	if (num(jp_get(d, "seconds"), &secs) == 0) {
		duration_format(dur, sizeof dur, secs);
		clock_str(when, sizeof when, now_ms + secs * 1000, now_ms);
		if (sends == 0)
			buf_adds(o, "nothing to drain");
		else
			buf_printf(o, "about <b>%s</b>, done by about %s", dur, when);
	} else if (num(jp_get(d, "at_least_s"), &least) == 0) {
		duration_format(dur, sizeof dur, least);
		buf_printf(o, "unknown: weir-gate is not answering (once it does, at least %s)", dur);
	} else
		buf_adds(o, "unknown: no policy for it (weir-gate refuses it)");
	if (lim && jp_bool(jp_get(d, "retry_bound")) != 1) {
		const char *unit = jp_str(jp_get(lim, "unit"));

		duration_format(per, sizeof per, ll_or(jp_get(lim, "per_s"), 0));
		buf_printf(o, "; limited by %lld ", ll_or(jp_get(lim, "limit"), 0));
		esc(o, unit ? unit : "?");
		buf_printf(o, " per %s", per);
	}
	if ((n = ll_or(jp_get(def, "messages"), 0)) > 0 &&
	    num(jp_get(def, "last_retry_s"), &retry) == 0) {
		duration_format(dur, sizeof dur, retry);
		buf_printf(o, "; %lld deferred message%s wait%s for %s retry time, the last in "
		    "<b>%s</b>%s", n, plural(n), n == 1 ? "s" : "", n == 1 ? "its" : "their", dur,
		    jp_bool(jp_get(d, "retry_bound")) == 1 ? ", which sets the estimate" : "");
	}
	buf_adds(o, "</p>");
	if (sends > 0 && pr && num(jp_get(pr, "from_ms"), &from) == 0 &&
	    num(jp_get(pr, "sent"), &done) == 0) {
		clock_str(when, sizeof when, from, now_ms);
		bar(o, " big", 100.0 * (double)done / (double)(done + sends), 0);
		buf_printf(o, "<p class=\"mut\">%lld of %lld sends made since %s (%s), %lld to go</p>",
		    done, done + sends, when, from == ll_or(jp_get(pr, "backlog_since_ms"), -1) ?
		    "the backlog began" : "the gate's history begins", sends);
	}
}

/* An upstream's OAuth token, from the document's "oauth" entry oa. */
static void
oauth_token(struct buf *o, struct json_object *oa, const char *name, long long now_ms)
{
	const char *err = jp_str(jp_get(oa, "error"));
	long long exp = iso_ms(jp_str(jp_get(oa, "access_expires")));
	char when[64], rel[64];

	if (jp_bool(jp_get(oa, "login_needed")) == 1) {
		buf_adds(o, "<div class=\"alert\"><b>OAuth: a login is needed</b> (the provider "
		    "refuses the refresh token, or there is none). Run <code>weir auth login ");
		esc(o, name);
		buf_adds(o, "</code>");
		if (err && *err) {
			buf_adds(o, ". Last error: <q>");
			esc(o, err);
			buf_adds(o, "</q>");
		}
		buf_adds(o, "</div>");
	} else if (exp >= 0) {
		clock_str(when, sizeof when, exp, now_ms);
		rel_str(rel, sizeof rel, exp, now_ms);
		buf_printf(o, "<p>OAuth access token until %s%s (refreshed before).</p>", when, rel);
	}
}

/* The upstream's next free slot (gatestatus.h's next_slot_ms: the
 * windows' room and the suspensions' end) and the next grant. */
static void
next_times(struct buf *o, struct json_object *gup, long long now_ms)
{
	long long t, su = 0, au = 0;
	char when[64], rel[64];

	if (json_object_object_get_ex(gup, GS_NEXT_SLOT_MS, NULL)) {
		if (num(jp_get(gup, GS_NEXT_SLOT_MS), &t) < 0)
			buf_adds(o, "<span>next free slot: when a grant held is reported</span>");
		else if (t <= now_ms)
			buf_adds(o, "<span>next free slot: <b>now</b></span>");
		else {
			(void)num(jp_get(gup, GS_SUSPENDED_UNTIL_MS), &su);
			(void)num(jp_get(gup, GS_AUTH_UNTIL_MS), &au);
			clock_str(when, sizeof when, t, now_ms);
			rel_str(rel, sizeof rel, t, now_ms);
			buf_printf(o, "<span>next free slot: <b>%s</b>%s%s</span>", when, rel,
			    t == su || t == au ? ", when the suspension ends" : "");
		}
	}
	if (num(jp_get(gup, GS_NEXT_GRANT_MS), &t) == 0) {
		clock_str(when, sizeof when, t, now_ms);
		rel_str(rel, sizeof rel, t, now_ms);
		buf_printf(o, "<span>next grant: <b>%s</b>%s</span>", when, t > now_ms ? rel : "");
	}
}

/* Where the shared store was found (its master, under Redis Sentinel),
 * its switches, and whether the window is whole or being rebuilt: the
 * gate's shared_* members (weir-gate(8), SHARED WINDOWS). */
static void
shared_store(struct buf *o, struct json_object *gup, long long now_ms)
{
	const char *m = jp_str(jp_get(gup, GS_SHARED_MASTER)), *w;
	long long n, at;
	char when[64], rel[64];

	if (m) {
		buf_adds(o, "; found at ");
		esc(o, m);
	}
	if (num(jp_get(gup, GS_SHARED_SWITCHES), &n) == 0 && n > 0 &&
	    num(jp_get(gup, GS_SHARED_LAST_SWITCH_MS), &at) == 0) {
		clock_str(when, sizeof when, at, now_ms);
		rel_str(rel, sizeof rel, at, now_ms);
		buf_printf(o, " after %lld switch%s of master, the last at %s%s", n,
		    n == 1 ? "" : "es", when, rel);
	}
	if ((w = jp_str(jp_get(gup, GS_SHARED_WINDOW))) != NULL && strcmp(w, "rebuilding") == 0)
		buf_adds(o, "; <b>the window is being rebuilt</b>: nothing is granted until every "
		    "relay has written its own sends back");
	else if (w && strcmp(w, "whole") == 0)
		buf_adds(o, "; the window is whole");
}

static void
upstream(struct buf *o, const char *name, struct json_object *gup, struct json_object *d,
    struct json_object *oa, long long now_ms, int gate_up)
{
	struct json_object *wins = jp_get(gup, GS_WINDOWS), *send = jp_get(gup, GS_SEND);
	int susp = jp_bool(jp_get(gup, GS_SUSPENDED)) == 1 ||
	    jp_bool(jp_get(gup, GS_AUTH_SUSPENDED)) == 1;
	long long n;
	const char *s;
	size_t i;

	buf_adds(o, "<section class=\"card\"><h2>upstream ");
	esc(o, name);
	if ((s = jp_str(jp_get(d, "preset"))) != NULL) {	/* weir.conf's preset */
		buf_adds(o, " <span class=\"badge mut\">preset ");
		esc(o, s);
		buf_adds(o, "</span>");
	}
	if (gup == NULL && !gate_up)
		buf_adds(o, " <span class=\"badge bad\">weir-gate not answering</span>");
	else if (gup == NULL)
		buf_adds(o, " <span class=\"badge mut\">not known to weir-gate yet</span>");
	else if (susp)
		buf_adds(o, " <span class=\"badge bad\">suspended</span>");
	else if (jp_bool(jp_get(gup, GS_IN_POLICY)) == 0)
		buf_adds(o, " <span class=\"badge bad\">not in the policy</span>");
	else
		buf_adds(o, " <span class=\"badge ok\">active</span>");
	buf_adds(o, "</h2>");
	if (oa)
		oauth_token(o, oa, name, now_ms);
	if (gup) {
		suspension(o, gup, name, oa != NULL, now_ms);
		if (jp_bool(jp_get(gup, GS_PROBE)) == 1)
			buf_adds(o, "<p>Probing: one delivery at a time until one gets through.</p>");
		buf_adds(o, "<p class=\"facts\">");
		next_times(o, gup, now_ms);
		if (num(jp_get(gup, GS_IN_FLIGHT), &n) == 0)
			buf_printf(o, "<span>deliveries in flight: <b>%lld</b></span>", n);
		buf_printf(o, "<span>requests waiting: <b>%lld</b></span>",
		    ll_or(jp_get(gup, GS_WAITING), 0));
		/* weir-send's own count, as weir_sessions_open says it. */
		if (num(jp_get(send, GS_S_SESSIONS_OPEN), &n) == 0)
			buf_printf(o, "<span>kept sessions open: <b>%lld</b></span>", n);
		else
			buf_adds(o, "<span>kept sessions open: not known (no word from weir-send "
			    "yet)</span>");
		buf_adds(o, "</p>");
		if ((s = jp_str(jp_get(gup, GS_SHARED))) != NULL) {
			buf_adds(o, "<p>Windows shared with other relays through ");
			esc(o, jp_str(jp_get(gup, GS_SHARED_STORE)));
			buf_printf(o, ": the store %s", strcmp(s, "ok") == 0 ? "answers" :
			    strcmp(s, "down") == 0 ? "<b>does not answer</b>: nothing is granted" :
			    "has not been asked yet");
			if (jp_str(jp_get(gup, GS_SHARED_ERROR))) {
				buf_adds(o, " (");
				esc(o, jp_str(jp_get(gup, GS_SHARED_ERROR)));
				buf_adds(o, ")");
			}
			shared_store(o, gup, now_ms);
			buf_adds(o, ".</p>");
		}
		for (i = 0; i < jp_len(wins); i++)
			window(o, gup, jp_at(wins, i), now_ms);
	}
	if (d) {
		buf_adds(o, "<h3>Drain</h3>");
		drain(o, d, now_ms);
	}
	buf_adds(o, "</section>");
}

static void
queue(struct buf *o, struct json_object *q, long long now_ms)
{
	static const char *const states[][2] = {
		{ "waiting", "waiting for the window" }, { "deferred", "deferred" },
		{ "held", "held (weir hold)" }, { "not_yet_preprocessed", "not yet preprocessed" },
	};
	struct json_object *st = jp_get(q, "states"), *reasons;
	const char *err = jp_str(jp_get(q, "error")), *oldest = jp_str(jp_get(q, "oldest_queue_time"));
	long long msgs = ll_or(jp_get(q, "messages"), 0), rc = ll_or(jp_get(q, "recipients_not_done"), 0);
	long long t;
	char d[64], when[64];
	size_t i;

	buf_adds(o, "<section class=\"card\"><h2>Queue</h2>");
	if (err) {
		buf_adds(o, "<p class=\"alert\">The queue could not be read: ");
		esc(o, err);
		buf_adds(o, "</p>");
	}
	buf_printf(o, "<p class=\"facts\"><span><b>%lld</b> message%s</span><span><b>%lld</b> "
	    "recipient%s not done</span>", msgs, plural(msgs), rc, plural(rc));
	if (oldest && (t = iso_ms(oldest)) >= 0) {
		duration_format(d, sizeof d, ll_or(jp_get(q, "oldest_age_s"), 0));
		clock_str(when, sizeof when, t, now_ms);
		buf_printf(o, "<span>oldest: <b>%s</b> old (queued %s)</span>", d, when);
	}
	buf_adds(o, "</p><table><thead><tr><th>state</th><th class=\"n\">messages</th>"
	    "<th class=\"n\">recipients</th></tr></thead><tbody>");
	for (i = 0; i < sizeof states / sizeof states[0]; i++) {
		struct json_object *s = jp_get(st, states[i][0]);

		buf_printf(o, "<tr><td>%s</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td>"
		    "</tr>", states[i][1], ll_or(jp_get(s, "messages"), 0),
		    ll_or(jp_get(s, "recipients"), 0));
	}
	buf_adds(o, "</tbody></table>");
	reasons = jp_get(jp_get(st, "deferred"), "reasons");
	if (jp_len(reasons)) {
		buf_adds(o, "<h3>Why deferred (the upstream's last reply)</h3><ul class=\"reasons\">");
		for (i = 0; i < jp_len(reasons); i++) {
			long long n = ll_or(jp_get(jp_at(reasons, i), "recipients"), 0);

			buf_adds(o, "<li><q>");
			esc(o, jp_str(jp_get(jp_at(reasons, i), "reply")));
			buf_printf(o, "</q> <span class=\"mut\">%lld recipient%s</span></li>", n,
			    plural(n));
		}
		if (ll_or(jp_get(jp_get(st, "deferred"), "other_reasons"), 0))
			buf_printf(o, "<li>other replies <span class=\"mut\">%lld recipients</span></li>",
			    ll_or(jp_get(jp_get(st, "deferred"), "other_reasons"), 0));
		buf_adds(o, "</ul>");
	}
	buf_adds(o, "</section>");
}

#define ROUTES_ROWS 50	/* waiting messages listed with their route */

/* Where waiting messages go (relaystatus.h, item 5): each upstream with
 * fallbacks, passed over or not and why, then the first ROUTES_ROWS
 * messages and the upstream each will go through. */
static void
routes_card(struct buf *o, struct json_object *routes)
{
	struct json_object *ups = jp_get(routes, "upstreams"), *msgs = jp_get(routes, "messages");
	const char *v, *why;
	size_t i;

	if (jp_bool(jp_get(routes, "configured")) != 1)
		return;
	buf_adds(o, "<section class=\"card\"><h2>Routes</h2><ul class=\"reasons\">");
	for (i = 0; i < jp_len(ups); i++) {
		struct json_object *u = jp_at(ups, i);

		v = jp_str(jp_get(u, "verdict"));
		buf_adds(o, "<li><b>");
		esc(o, jp_str(jp_get(u, "name")));
		if (v && strcmp(v, "avoid") == 0) {
			buf_adds(o, "</b> <span class=\"badge bad\">passed over</span> ");
			esc(o, jp_str(jp_get(u, "detail")));
			buf_adds(o, "; its mail goes through <b>");
			esc(o, jp_str(jp_get(u, "via")));
			buf_adds(o, "</b>");
		} else if (v && strcmp(v, "hold") == 0) {
			buf_adds(o, "</b> <span class=\"badge bad\">holding its mail</span> ");
			esc(o, jp_str(jp_get(u, "detail")));
		} else if ((why = jp_str(jp_get(u, "keeps"))) != NULL) {
			/* In trouble its fallback_when does not name: its mail
			 * waits for it ("keeps its mail: ..."). */
			buf_adds(o, "</b> <span class=\"badge bad\">keeps its mail</span> ");
			esc(o, strncmp(why, "keeps its mail: ", 16) == 0 ? why + 16 : why);
		} else {
			buf_adds(o, "</b> <span class=\"badge ok\">takes its mail</span>");
		}
		buf_adds(o, "</li>");
	}
	buf_adds(o, "</ul>");
	if (jp_len(msgs) == 0) {
		buf_adds(o, "<p class=\"mut\">No message waiting.</p></section>");
		return;
	}
	buf_adds(o, "<table><thead><tr><th>message</th><th class=\"n\">recipients</th>"
	    "<th>through</th><th>why</th></tr></thead><tbody>");
	for (i = 0; i < jp_len(msgs) && i < ROUTES_ROWS; i++) {
		struct json_object *m = jp_at(msgs, i);

		buf_adds(o, "<tr><td><code>");
		esc(o, jp_str(jp_get(m, "queue_id")));
		buf_printf(o, "</code></td><td class=\"n\">%lld</td><td>",
		    ll_or(jp_get(m, "recipients"), 0));
		esc(o, jp_str(jp_get(m, "via")));
		buf_adds(o, "</td><td>");
		if ((why = jp_str(jp_get(m, "why"))) != NULL) {
			esc(o, jp_str(jp_get(m, "primary")));
			buf_adds(o, ": ");
			esc(o, why);
		}
		buf_adds(o, "</td></tr>");
	}
	buf_adds(o, "</tbody></table>");
	if (jp_len(msgs) > ROUTES_ROWS || ll_or(jp_get(routes, "messages_left_out"), 0) > 0)
		buf_adds(o, "<p class=\"mut\">More in <a href=\"/status.json\">/status.json</a>.</p>");
	buf_adds(o, "</section>");
}

static void
sessions_list(struct buf *o, struct json_object *sessions, long long now_ms)
{
	size_t i;
	char d[64], when[64];

	buf_adds(o, "<section class=\"card\"><h2>Sessions</h2>");
	if (!json_object_is_type(sessions, json_type_array)) {
		buf_adds(o, "<p class=\"mut\">Unknown: weir-send has not run.</p></section>");
		return;
	}
	if (jp_len(sessions) == 0)
		buf_adds(o, "<p class=\"mut\">None open.</p>");
	else
		buf_adds(o, "<table><thead><tr><th>upstream</th><th>open since</th>"
		    "<th class=\"n\">messages</th></tr></thead><tbody>");
	for (i = 0; i < jp_len(sessions); i++) {
		struct json_object *s = jp_at(sessions, i);
		const char *since = jp_str(jp_get(s, "since"));
		long long t;

		buf_adds(o, "<tr><td>");
		esc(o, jp_str(jp_get(s, "upstream")));
		buf_adds(o, "</td><td>");
		if ((t = iso_ms(since)) >= 0) {
			clock_str(when, sizeof when, t, now_ms);
			duration_format(d, sizeof d, (now_ms - t) / 1000);
			buf_printf(o, "%s <span class=\"mut\">(%s)</span>", when, d);
		}
		buf_printf(o, "</td><td class=\"n\">%lld</td></tr>", ll_or(jp_get(s, "messages"), 0));
	}
	if (jp_len(sessions))
		buf_adds(o, "</tbody></table>");
	buf_adds(o, "</section>");
}

const char page_style[] =
    ":root{--fg:#1c2331;--mut:#5d6678;--bg:#f4f5f8;--card:#fff;--line:#d8dce4;"
    "--ok:#1d7a3c;--bad:#b3261e;--badbg:#fdecea;--use:#3565c8;--usefill:rgba(53,101,200,.13);"
    "--send:#1c2331;--held:#c96a00;--wait:#b3261e;--limit:#b3261e;--plot:#fafbfc;--others:#93a4c8}"
    "@media (prefers-color-scheme:dark){:root{--fg:#e4e7ee;--mut:#9aa3b5;--bg:#14171d;"
    "--card:#1c2029;--line:#343a47;--ok:#5cc684;--bad:#ff8a80;--badbg:#3a1f1f;--use:#7ea3ff;"
    "--usefill:rgba(126,163,255,.16);--send:#e4e7ee;--held:#ffb44d;--wait:#ff8a80;"
    "--limit:#ff8a80;--plot:#181b22;--others:#56627e}}"
    "*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg);"
    "font:15px/1.45 system-ui,-apple-system,\"Segoe UI\",Roboto,\"Noto Sans\",sans-serif}"
    "main{max-width:60rem;margin:0 auto;padding:.75rem}"
    "header{display:flex;flex-wrap:wrap;align-items:baseline;gap:.25rem 1rem;padding:.25rem 0}"
    "h1{font-size:1.3rem;margin:0}h2{font-size:1.1rem;margin:0 0 .5rem}"
    "h3{font-size:1rem;margin:1rem 0 .25rem}p{margin:.4rem 0}"
    ".mut{color:var(--mut)}.card{background:var(--card);border:1px solid var(--line);"
    "border-radius:10px;padding:.9rem 1rem;margin:.9rem 0}"
    ".badge{font-size:.8rem;font-weight:600;padding:.1rem .5rem;border-radius:1rem;"
    "border:1px solid currentColor;vertical-align:middle}.badge.ok{color:var(--ok)}"
    ".badge.bad{color:var(--bad)}.alert{background:var(--badbg);border-left:4px solid var(--bad);"
    "padding:.55rem .8rem;border-radius:4px;margin:.5rem 0}"
    ".facts{display:flex;flex-wrap:wrap;gap:.2rem 1.25rem}"
    ".win{margin:1rem 0 .5rem}.win .head{display:flex;flex-wrap:wrap;align-items:baseline;"
    "gap:.1rem 1rem;margin-bottom:.3rem}.big{font-size:1.15rem;font-weight:650}"
    "svg.chart{display:block;width:100%;height:auto}"
    ".chart .plot{fill:var(--plot);stroke:var(--line)}.chart .grid{stroke:var(--line);"
    "stroke-width:.5}.chart .use{fill:var(--usefill);stroke:var(--use);stroke-width:1.5;"
    "stroke-linejoin:round}.chart .limit{stroke:var(--limit);stroke-width:1.5;"
    "stroke-dasharray:6 4}.chart .now{fill:var(--use)}.chart .send{fill:var(--send)}"
    ".chart .send.maybe{fill:var(--held);opacity:.6}.chart .held{fill:none;stroke:var(--held);"
    "stroke-width:2}.chart .wait{fill:var(--wait)}"
    ".axis{display:flex;justify-content:space-between;color:var(--mut);font-size:.78rem;"
    "margin-top:.1rem}.charts{display:grid;grid-template-columns:1fr 1fr;gap:.4rem 1rem}"
    "@media (max-width:40rem){.charts{grid-template-columns:1fr}}"
    "figure{margin:0;min-width:0}figcaption{color:var(--mut);font-size:.8rem}.note{color:var(--mut);font-size:.85rem}"
    ".legend{display:flex;flex-wrap:wrap;gap:.2rem 1rem;color:var(--mut);font-size:.82rem}"
    ".k{display:inline-block;width:.9rem;height:.7rem;margin-right:.3rem;vertical-align:middle}"
    ".k.send{width:.2rem;background:var(--send)}.k.maybe{background:var(--held);opacity:.6}"
    ".k.held{border:2px solid var(--held);border-radius:50%;width:.7rem}"
    ".k.wait{width:0;height:0;border-left:.35rem solid transparent;border-right:.35rem solid "
    "transparent;border-top:.6rem solid var(--wait)}.k.limit{height:0;border-top:2px dashed "
    "var(--limit)}.k.use{background:var(--usefill);border-top:2px solid var(--use)}"
    "svg.bar{display:block;width:100%;height:.6rem;background:var(--line);border-radius:.3rem;"
    "margin:.3rem 0}svg.bar.big{height:1rem}.bar rect{fill:var(--use)}"
    ".bar .others{fill:var(--others)}.share{margin:.2rem 0 .4rem}"
    ".summary{border-radius:8px;padding:.7rem .9rem;margin:.6rem 0;font-size:1.02rem;"
    "border:1px solid var(--line);border-left:6px solid var(--ok);background:var(--card)}"
    ".summary.bad{border-left-color:var(--bad);background:var(--badbg)}"
    ".summary ul{margin:.35rem 0 0;padding-left:1.1rem}.summary li{margin:.2rem 0}"
    "table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .4rem;"
    "border-bottom:1px solid var(--line)}th{font-weight:600;color:var(--mut);font-size:.85rem}"
    ".n{text-align:right;font-variant-numeric:tabular-nums}"
    "code{background:var(--bg);border:1px solid var(--line);border-radius:4px;"
    "padding:.05rem .35rem;font-size:.9em}q{font-family:ui-monospace,monospace;font-size:.9em}"
    "ul.reasons{padding-left:1.2rem;margin:.3rem 0}footer{color:var(--mut);font-size:.82rem;"
    "padding:.5rem 0 1.5rem}footer a{color:inherit}";

/* The summary (relaystatus.h, item 0): whether mail flows, what keeps
 * it from flowing and what to do, first. */
static void
summary(struct buf *o, struct json_object *sum)
{
	struct json_object *ps = jp_get(sum, "problems"), *p;
	const char *up, *todo;
	size_t i, n = jp_len(ps);

	if (sum == NULL)
		return;
	if (n == 0) {
		buf_adds(o, "<div class=\"summary\" role=\"status\"><b>");
		esc(o, jp_str(jp_get(sum, "line")));
		buf_adds(o, "</b></div>");
		return;
	}
	buf_printf(o, "<div class=\"summary bad\" role=\"alert\"><b>%zu problem%s</b><ul>", n,
	    n == 1 ? "" : "s");
	for (i = 0; i < n; i++) {
		p = jp_at(ps, i);
		buf_adds(o, "<li>");
		if ((up = jp_str(jp_get(p, "upstream"))) != NULL) {
			buf_adds(o, "<b>upstream ");
			esc(o, up);
			buf_adds(o, "</b>: ");
		}
		esc(o, jp_str(jp_get(p, "what")));
		if ((todo = jp_str(jp_get(p, "do"))) != NULL) {
			buf_adds(o, ". <span class=\"todo\">To do: ");
			esc(o, todo);
			buf_adds(o, "</span>");
		}
		buf_adds(o, "</li>");
	}
	buf_adds(o, "</ul></div>");
}

/* Is upstream name among the summary's problems? */
static int
in_trouble(struct json_object *sum, const char *name)
{
	return by_upstream(jp_get(sum, "problems"), name) != NULL;
}

void
page_render(struct buf *o, struct json_object *doc, const char *host, long long now_ms)
{
	struct json_object *gate = jp_get(doc, "gate"), *gups = jp_get(gate, GS_UPSTREAMS);
	struct json_object *dups = jp_get(jp_get(doc, "drain_estimate"), "upstreams");
	struct json_object *sessions = jp_get(doc, "sessions"), *oas = jp_get(doc, "oauth");
	struct json_object *sum = jp_get(doc, "summary");
	size_t np = jp_len(jp_get(sum, "problems"));
	const char *name;
	char when[64];
	size_t i;
	int pass;

	/* The gate's clock, as its history's times are. */
	(void)num(jp_get(gate, GS_NOW_MS), &now_ms);
	clock_str(when, sizeof when, now_ms, now_ms);
	buf_printf(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
	    "<meta http-equiv=\"refresh\" content=\"%d\"><title>", PAGE_REFRESH_S);
	if (np)
		buf_printf(o, "%zu problem%s: ", np, np == 1 ? "" : "s");
	else if (sum)
		buf_adds(o, "OK: ");
	buf_adds(o, "weir on ");
	esc(o, host);
	buf_printf(o, "</title><style>%s</style></head><body><main><header><h1>weir on ", page_style);
	esc(o, host);
	buf_printf(o, "</h1><span class=\"mut\">at %s, refreshed every %d s</span></header>",
	    when, PAGE_REFRESH_S);
	summary(o, sum);
	if (gate == NULL) {
		buf_adds(o, "<p class=\"alert\"><b>weir-gate is not answering</b>");
		if (jp_str(jp_get(doc, "gate_error"))) {
			buf_adds(o, ": ");
			esc(o, jp_str(jp_get(doc, "gate_error")));
		}
		buf_adds(o, ". Nothing is sent until it does.</p>");
	} else if (jp_bool(jp_get(gate, GS_JOURNAL_DURABLE)) == 0) {
		buf_adds(o, "<p class=\"alert\"><b>weir-gate's journal is not durable</b>: it grants "
		    "nothing until it is (");
		esc(o, jp_str(jp_get(gate, GS_JOURNAL_ERROR)));
		buf_adds(o, ").</p>");
	}
	/* The upstreams in trouble first, then the others. */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < jp_len(gups); i++)
			if ((name = jp_str(jp_get(jp_at(gups, i), GS_NAME))) != NULL &&
			    in_trouble(sum, name) == !pass)
				upstream(o, name, jp_at(gups, i), by_name(dups, name),
				    by_upstream(oas, name), now_ms, 1);
		for (i = 0; i < jp_len(dups); i++)
			if ((name = jp_str(jp_get(jp_at(dups, i), "name"))) != NULL &&
			    by_name(gups, name) == NULL && in_trouble(sum, name) == !pass)
				upstream(o, name, NULL, jp_at(dups, i), by_upstream(oas, name), now_ms,
				    gate != NULL);
	}
	buf_adds(o, "<p class=\"legend\"><span><i class=\"k send\"></i>a send, at its "
	    "logged time</span><span><i class=\"k maybe\"></i>maybe sent (outcome "
	    "unknown)</span><span><i class=\"k held\"></i>a grant held, since it was "
	    "given</span><span><i class=\"k wait\"></i>a request waiting, since it came</span>"
	    "<span><i class=\"k limit\"></i>the limit</span><span><i class=\"k use\"></i>the "
	    "window's use</span></p>");
	queue(o, jp_get(doc, "queue"), now_ms);
	routes_card(o, jp_get(doc, "routes"));
	sessions_list(o, sessions, now_ms);
	buf_adds(o, "<footer>The same as JSON: <a href=\"/status.json\">/status.json</a> "
	    "(<code>weir status --json</code>); for Prometheus: <a href=\"/metrics\">/metrics</a>. "
	    "Times in UTC; the drain estimate is a lower bound (every attempt succeeding).</footer>"
	    "</main></body></html>\n");
}
