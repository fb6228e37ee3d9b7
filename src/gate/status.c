/*
 * status.c: weir-gate's status, for people and as JSON: every window's
 * use, grants held, waiting requests per class, the next grant time, the
 * suspensions with their reasons and ends, whether the journal is
 * durable, the sends of unknown outcome a window still counts (each
 * holds its slot until the upstream's grace is over), counters (since
 * the gate started; rcpt_accepted sums the recipient counts of the SENT
 * reports, JSON only), and weir-send's latest COUNTS for the upstream,
 * if it sent any ("send" in JSON), with how often its mail went to a
 * fallback and came back.  The state fallbacks are judged on (mail/
 * route.h): an unreachable spell with its reason and next probe, in
 * text, and in JSON "route" with the authentication trouble's start and
 * the windows' next free slot for one message, which `weir status` reads
 * to say where each waiting message will go.  For an upstream
 * with a shared store: the store, whether it answers, and each window as
 * Redis counts it for every host ("all hosts", asked of Redis for this
 * report) below this gate's own count.  Asked for a history (STATUS JSON
 * <seconds>), each upstream's sends in that time, its held grants and its
 * waiting requests, with their times (json_history).
 *
 * Trusts: the engine's state.  Config keys: none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gate/shared.h"
#include "gate/status.h"
#include "lib/alloc.h"
#include "mail/credfp.h"
#include "mail/gateproto.h"

/* weir-send's count i of u (gateproto.h's enum gp_count). */
#define C(i) ((unsigned long long)u->counts[i])

static void
wall_str(char *out, size_t n, int64_t wall_ms)
{
	time_t t = (time_t)(wall_ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, n, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/* s as a JSON string, quotes included.  (lib/json.h's json_cstr also
 * escapes DEL and bytes that are not UTF-8.) */
static void
quoted(struct buf *b, const char *s)
{
	buf_addc(b, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_addc(b, '\\');
		if ((unsigned char)*s < 0x20)
			buf_printf(b, "\\u%04x", (unsigned)(unsigned char)*s);
		else
			buf_addc(b, *s);
	}
	buf_addc(b, '"');
}

/* Waiting requests per class, in queue order of first appearance. */
struct cls_count {
	const char *name;
	size_t n;
};

static size_t
count_classes(const struct wg_up *u, struct cls_count *out, size_t max)
{
	const struct wg_req *r;
	size_t n = 0, i;

	for (r = u->wait_head; r; r = r->next) {
		const char *c = r->cls[0] ? r->cls : "default";

		for (i = 0; i < n; i++)
			if (strcmp(out[i].name, c) == 0)
				break;
		if (i == n) {
			if (n == max)
				continue;
			out[n].name = c;
			out[n++].n = 0;
		}
		out[i].n++;
	}
	return n;
}

/* The shared counts of u (sc->ok: Redis answered; lg, hd per window). */
struct shared_view {
	int ok;
	int64_t *lg, *hd;
};

static void
view_get(struct shared_view *v, struct shared *sh, struct wg_up *u, int64_t now, int64_t wmm)
{
	v->lg = xcalloc(u->nwin + 1, sizeof *v->lg);
	v->hd = xcalloc(u->nwin + 1, sizeof *v->hd);
	v->ok = u->shared && shared_counts(sh, u, wmm, now, v->lg, v->hd) == 0;
}

static void
view_free(struct shared_view *v)
{
	free(v->lg);
	free(v->hd);
}

/* The first log entry some window of u still counts (the end: none). */
static uint64_t
counted_from(const struct wg_up *u)
{
	uint64_t first = u->lseq + u->ln;
	size_t i;

	for (i = 0; i < u->nwin; i++)
		if (u->win[i].first < first)
			first = u->win[i].first;
	return first;
}

#define UNKNOWN_SHOWN 5	/* sends of unknown outcome listed one by one */

/* The sends of unknown outcome a window still counts: each holds its
 * slot until its interval's end (the grace after its client went or
 * reported it) plus the window's period. */
static void
text_unknown(struct buf *b, const struct wg_up *u, int64_t wmm)
{
	char from[64], until[64];
	uint64_t s;
	size_t n = 0;

	for (s = counted_from(u); s < u->lseq + u->ln; s++) {
		const struct wg_send *e = wg_log_at(u, s);

		if (e->from == e->t || n++ >= UNKNOWN_SHOWN)
			continue;
		wall_str(from, sizeof from, e->from + wmm);
		wall_str(until, sizeof until, e->t + wmm);
		buf_printf(b, "  outcome unknown: a send granted %s counts as accepted at any "
		    "time up to %s (grace %lld s)\n", from, until, (long long)(u->grace / 1000));
	}
	if (n > UNKNOWN_SHOWN)
		buf_printf(b, "  outcome unknown: %zu more sends\n", n - UNKNOWN_SHOWN);
}

static void
text_up(struct buf *b, struct wg_up *u, int64_t now, int64_t wmm, struct shared *sh)
{
	struct cls_count cc[32];
	struct shared_view v;
	size_t i, ncc;
	int64_t next;
	char when[64];

	buf_printf(b, "upstream %s:%s", u->name, u->in_policy ? "" : " (not in the policy)");
	/* One "suspended until" for both kinds (weir status reads it). */
	if (u->auth_until > now && u->auth_until >= u->susp_until) {
		wall_str(when, sizeof when, u->auth_until + wmm);
		buf_printf(b, " suspended until %s (%lld s): authentication failed\n", when,
		    (long long)((u->auth_until - now + 999) / 1000));
	} else if (u->susp_until > now) {
		wall_str(when, sizeof when, u->susp_until + wmm);
		buf_printf(b, " suspended until %s (%lld s): %s\n", when,
		    (long long)((u->susp_until - now + 999) / 1000),
		    u->susp_reason ? u->susp_reason : "");
	} else {
		buf_adds(b, " active\n");
	}
	if (u->auth_until > now) {
		wall_str(when, sizeof when, u->auth_until + wmm);
		/* What mends it (mail/credfp.h), what lifts it (creds.h): a
		 * reload, a restart with other credentials, a login, a resume. */
		buf_printf(b, "  authentication failed: suspended until %s (%lld s): %s; ", when,
		    (long long)((u->auth_until - now + 999) / 1000),
		    u->auth_reason ? u->auth_reason : "");
		cred_fix(b, u->name, u->auth_oauth, u->auth_reason);
		buf_printf(b, "; `weir resume %s` tries again now\n", u->name);
	}
	if (u->probe)
		buf_adds(b, "  probing: one grant at a time until one gets through\n");
	if (u->down_since > 0) {
		char probe[64];

		wall_str(when, sizeof when, u->down_since + wmm);
		wall_str(probe, sizeof probe, u->probe_at + wmm);
		buf_printf(b, "  unreachable since %s (%lld s): %s; %s%s\n", when,
		    (long long)((now - u->down_since) / 1000), u->down_reason ? u->down_reason : "",
		    u->probe_id ? "a probe is out" : "next probe ", u->probe_id ? "" : probe);
	}
	/* Asked first: a store that stopped answering is marked so. */
	view_get(&v, sh, u, now, wmm);
	if (u->shared) {
		const char *why, *store = shared_store(sh, u->name);

		buf_printf(b, "  shared store %s: ", store ? store : "(none yet)");
		switch (shared_state(sh, u->name, &why)) {
		case 0:
			buf_adds(b, "answers (windows count every host's sends; \"all hosts\": "
			    "as Redis counts them)\n");
			break;
		case 1:
			buf_printf(b, "UNREACHABLE (%s): granting nothing\n", why);
			break;
		default:
			buf_adds(b, "not asked yet\n");
			break;
		}
	}
	for (i = 0; i < u->nwin; i++) {
		const struct wg_win *w = &u->win[i];

		buf_printf(b, "  window %lld %s per %llds%s: %lld logged + %lld held = %lld of %lld\n",
		    (long long)w->limit, policy_unit_name(w->unit), (long long)(w->per / 1000),
		    w->calendar ? " (calendar)" : "", (long long)w->sum,
		    (long long)u->held[w->unit], (long long)wg_win_used(u, i), (long long)w->limit);
		if (v.ok)
			buf_printf(b, "    all hosts: %lld logged + %lld held = %lld of %lld\n",
			    (long long)v.lg[i], (long long)v.hd[i], (long long)(v.lg[i] + v.hd[i]),
			    (long long)w->limit);
		else if (u->shared)
			buf_adds(b, "    all hosts: unknown (the shared store does not answer)\n");
	}
	view_free(&v);
	text_unknown(b, u, wmm);
	buf_printf(b, "  grants held: %zu", u->nheld);
	if (u->max_conn)
		buf_printf(b, " (max %lld)", (long long)u->max_conn);
	buf_printf(b, "; waiting: %zu", u->nwait);
	ncc = count_classes(u, cc, 32);
	for (i = 0; i < ncc; i++)
		buf_printf(b, "%s%s %zu", i ? ", " : " (", cc[i].name, cc[i].n);
	buf_adds(b, ncc ? ")\n" : "\n");
	next = wg_head_fit(u, now);
	if (next == -1 && !u->in_policy)
		buf_adds(b, "  next grant: when a policy names this upstream\n");
	else if (next == -1)
		buf_adds(b, "  next grant: when a held grant is reported\n");
	else if (next >= 0) {
		wall_str(when, sizeof when, next + wmm);
		buf_printf(b, "  next grant: %s (in %lld ms)\n", when, (long long)(next - now));
	}
	buf_printf(b, "  totals: granted %llu, sent %llu, refunded %llu, throttled %llu, "
	    "unknown %llu, no mail %llu, auth failed %llu, unknown settled later %llu, "
	    "unreachable %llu, passed over %llu\n",
	    (unsigned long long)u->n_granted, (unsigned long long)u->n_sent,
	    (unsigned long long)u->n_refunded, (unsigned long long)u->n_throttled,
	    (unsigned long long)u->n_unknown, (unsigned long long)u->n_nomail,
	    (unsigned long long)u->n_authfail, (unsigned long long)u->n_settled,
	    (unsigned long long)u->n_unreached, (unsigned long long)u->n_later);
	if (u->has_counts)
		buf_printf(b, "  weir-send: messages (recipients) queued %llu (%llu), delivered "
		    "%llu (%llu), deferred %llu (%llu), bounced %llu (%llu); sessions open %llu\n",
		    C(GP_C_QUEUED_MSGS), C(GP_C_QUEUED_RCPTS), C(GP_C_DELIVERED_MSGS),
		    C(GP_C_DELIVERED_RCPTS), C(GP_C_DEFERRED_MSGS), C(GP_C_DEFERRED_RCPTS),
		    C(GP_C_BOUNCED_MSGS), C(GP_C_BOUNCED_RCPTS), C(GP_C_SESSIONS));
	if (u->has_counts && (C(GP_C_SWITCHES) || C(GP_C_RETURNS)))
		buf_printf(b, "  weir-send: its mail went to a fallback %llu time%s, came back "
		    "%llu\n", C(GP_C_SWITCHES), C(GP_C_SWITCHES) == 1 ? "" : "s", C(GP_C_RETURNS));
}

/* A time on the now axis as wall ms, or null for 0 (none). */
static void
json_ms(struct buf *b, int64_t t, int64_t wmm)
{
	if (t > 0)
		buf_printf(b, "%lld", (long long)(t + wmm));
	else
		buf_adds(b, "null");
}

/* "route": what route.h's judge reads (weir status says where each
 * waiting message goes from it), and the requests passed over. */
static void
json_route(struct buf *b, struct wg_up *u, int64_t now, int64_t wmm)
{
	struct route_state st;

	wg_route_state(u, NULL, now, &st);
	buf_adds(b, ",\"route\":{\"unreachable_since_ms\":");
	json_ms(b, st.down_since, wmm);
	buf_adds(b, ",\"unreachable_reason\":");
	if (st.down_since > 0)
		quoted(b, u->down_reason ? u->down_reason : "");
	else
		buf_adds(b, "null");
	buf_adds(b, ",\"probe_at_ms\":");
	json_ms(b, st.down_since > 0 ? st.probe_at : 0, wmm);
	buf_printf(b, ",\"probe_out\":%s,\"auth_trouble_since_ms\":",
	    st.probe_out ? "true" : "false");
	json_ms(b, st.auth_since, wmm);
	buf_printf(b, ",\"auth_probe_out\":%s,\"free_at_ms\":", st.auth_probe_out ? "true" :
	    "false");
	if (st.free_at >= 0)
		buf_printf(b, "%lld", (long long)(st.free_at + wmm));
	else
		buf_adds(b, "null");
	buf_printf(b, ",\"passed_over\":%llu,\"unreachable_reports\":%llu}",
	    (unsigned long long)u->n_later, (unsigned long long)u->n_unreached);
}

/* A calendar window's last boundary at or before now. */
static int64_t
period_start(const struct wg_win *w, int64_t now)
{
	int64_t r = (now - w->phase) % w->per;

	return now - (r < 0 ? r + w->per : r);
}

/* When window i of u next has room for one more of its unit, on the now
 * axis: now when it has; when enough of its logged sends leave it (a
 * sliding window: each at its time + T; a calendar one: all at its next
 * boundary); -1 when the grants held alone fill it (only a report helps). */
static int64_t
win_free_at(const struct wg_up *u, size_t i, int64_t now)
{
	const struct wg_win *w = &u->win[i];
	int64_t need = wg_win_used(u, i) - w->limit + 1, acc = 0;
	uint64_t s;

	if (need <= 0)
		return now;
	for (s = w->first; s < u->lseq + u->ln; s++) {
		const struct wg_send *e = wg_log_at(u, s);

		if ((acc += e->w[w->unit]) < need)
			continue;
		return w->calendar ? period_start(w, now) + w->per : e->t + w->per;
	}
	return -1;
}

/* "history" (STATUS JSON <seconds>): since_ms, when the period began;
 * complete_since_ms, from when on every send is there (later than
 * since_ms when the ring was full and dropped some); sends, each
 * [t, from, messages, recipients, connections] in wall ms (from < t:
 * maybe accepted at any instant between, an unknown outcome); held,
 * each [granted, messages, recipients, connections]; waiting, each
 * [queued, messages, recipients, connections, class] in queue order.
 * At most STATUS_LIST_MAX held and waiting each. */
static void
json_history(struct buf *b, struct wg_up *u, int64_t now, int64_t wmm,
    const struct status_history *h)
{
	int64_t since = now - h->ms, complete = since;
	struct wg_req **held, *r;
	size_t i, n, k;

	if (u->hdropped > complete)
		complete = u->hdropped;
	buf_printf(b, ",\"history\":{\"since_ms\":%lld,\"complete_since_ms\":%lld,\"sends\":[",
	    (long long)(since + wmm), (long long)(complete + wmm));
	for (i = k = 0; i < u->hn; i++) {
		const struct wg_send *e = wg_history_at(u, i);

		if (e->t <= since)
			continue;
		buf_printf(b, "%s[%lld,%lld,%u,%u,%u]", k++ ? "," : "", (long long)(e->t + wmm),
		    (long long)(e->from + wmm), e->w[UNIT_MESSAGES], e->w[UNIT_RECIPIENTS],
		    e->w[UNIT_CONNECTIONS]);
	}
	buf_adds(b, "],\"held\":[");
	held = h->held ? h->held(h->arg, u, &n) : NULL;
	for (i = 0; held && i < n && i < STATUS_LIST_MAX; i++)
		buf_printf(b, "%s[%lld,%u,%u,%u]", i ? "," : "", (long long)(held[i]->since + wmm),
		    held[i]->w[UNIT_MESSAGES], held[i]->w[UNIT_RECIPIENTS],
		    held[i]->w[UNIT_CONNECTIONS]);
	free(held);
	buf_adds(b, "],\"waiting\":[");
	for (r = u->wait_head, i = 0; r && i < STATUS_LIST_MAX; r = r->next, i++) {
		buf_printf(b, "%s[%lld,%u,%u,%u,", i ? "," : "", (long long)(r->since + wmm),
		    r->w[UNIT_MESSAGES], r->w[UNIT_RECIPIENTS], r->w[UNIT_CONNECTIONS]);
		quoted(b, r->cls[0] ? r->cls : "default");
		buf_addc(b, ']');
	}
	buf_adds(b, "]}");
}

static void
json_up(struct buf *b, struct wg_up *u, int64_t now, int64_t wmm, struct shared *sh,
    const struct status_history *hist)
{
	struct cls_count cc[32];
	struct shared_view v;
	size_t i, ncc, n;
	int64_t next;
	uint64_t s;

	buf_adds(b, "{\"name\":");
	quoted(b, u->name);
	buf_printf(b, ",\"in_policy\":%s,\"suspended\":%s", u->in_policy ? "true" : "false",
	    u->susp_until > now ? "true" : "false");
	if (u->susp_until > now) {
		buf_printf(b, ",\"suspended_until_ms\":%lld,\"suspend_reason\":",
		    (long long)(u->susp_until + wmm));
		quoted(b, u->susp_reason ? u->susp_reason : "");
	}
	buf_printf(b, ",\"auth_suspended\":%s", u->auth_until > now ? "true" : "false");
	if (u->auth_until > now) {
		buf_printf(b, ",\"auth_suspended_until_ms\":%lld,\"auth_reason\":",
		    (long long)(u->auth_until + wmm));
		quoted(b, u->auth_reason ? u->auth_reason : "");
	}
	buf_printf(b, ",\"probe\":%s", u->probe ? "true" : "false");
	json_route(b, u, now, wmm);
	view_get(&v, sh, u, now, wmm);
	if (u->shared) {
		const char *why, *store = shared_store(sh, u->name);
		int st = shared_state(sh, u->name, &why);

		buf_printf(b, ",\"shared\":\"%s\"", st == 0 ? "ok" : st == 1 ? "down" : "unknown");
		if (store) {
			buf_adds(b, ",\"shared_store\":");
			quoted(b, store);
		}
		if (st == 1) {
			buf_adds(b, ",\"shared_error\":");
			quoted(b, why);
		}
	}
	buf_adds(b, ",\"windows\":[");
	for (i = 0; i < u->nwin; i++) {
		const struct wg_win *w = &u->win[i];

		buf_printf(b, "%s{\"limit\":%lld,\"per_s\":%lld,\"unit\":\"%s\",\"calendar\":%s,"
		    "\"logged\":%lld,\"held\":%lld,\"used\":%lld", i ? "," : "",
		    (long long)w->limit, (long long)(w->per / 1000), policy_unit_name(w->unit),
		    w->calendar ? "true" : "false", (long long)w->sum,
		    (long long)u->held[w->unit], (long long)wg_win_used(u, i));
		/* Every host's, as Redis counts them (null: no answer). */
		if (v.ok)
			buf_printf(b, ",\"all_hosts\":{\"logged\":%lld,\"held\":%lld,\"used\":%lld}",
			    (long long)v.lg[i], (long long)v.hd[i], (long long)(v.lg[i] + v.hd[i]));
		else if (u->shared)
			buf_adds(b, ",\"all_hosts\":null");
		if (w->calendar)
			buf_printf(b, ",\"period_start_ms\":%lld", (long long)(period_start(w, now) + wmm));
		if (win_free_at(u, i, now) >= 0)
			buf_printf(b, ",\"free_at_ms\":%lld", (long long)(win_free_at(u, i, now) + wmm));
		else
			buf_adds(b, ",\"free_at_ms\":null");
		buf_addc(b, '}');
	}
	view_free(&v);
	buf_printf(b, "],\"grace_s\":%lld,\"unknown_sends\":[", (long long)(u->grace / 1000));
	for (s = counted_from(u), n = 0; s < u->lseq + u->ln; s++) {
		const struct wg_send *e = wg_log_at(u, s);

		if (e->from != e->t)
			buf_printf(b, "%s{\"granted_ms\":%lld,\"until_ms\":%lld}", n++ ? "," : "",
			    (long long)(e->from + wmm), (long long)(e->t + wmm));
	}
	buf_printf(b, "],\"held\":%zu,\"max_connections\":%lld,\"waiting\":%zu,\"waiting_by_class\":{",
	    u->nheld, (long long)u->max_conn, u->nwait);
	ncc = count_classes(u, cc, 32);
	for (i = 0; i < ncc; i++) {
		buf_adds(b, i ? "," : "");
		quoted(b, cc[i].name);
		buf_printf(b, ":%zu", cc[i].n);
	}
	next = wg_head_fit(u, now);
	buf_adds(b, "},\"next_grant_ms\":");
	if (next >= 0)
		buf_printf(b, "%lld", (long long)(next + wmm));
	else
		buf_adds(b, "null");
	buf_printf(b, ",\"granted\":%llu,\"sent\":%llu,\"refunded\":%llu,\"throttled\":%llu,"
	    "\"unknown\":%llu,\"nomail\":%llu,\"authfail\":%llu,\"settled\":%llu,"
	    "\"rcpt_accepted\":%llu",
	    (unsigned long long)u->n_granted, (unsigned long long)u->n_sent,
	    (unsigned long long)u->n_refunded, (unsigned long long)u->n_throttled,
	    (unsigned long long)u->n_unknown, (unsigned long long)u->n_nomail,
	    (unsigned long long)u->n_authfail, (unsigned long long)u->n_settled,
	    (unsigned long long)u->n_rcpt_accepted);
	if (u->has_counts) {
		static const char *const what[] = { "queued", "delivered", "deferred", "bounced" };

		buf_adds(b, ",\"send\":{\"messages\":{");
		for (i = 0; i < 4; i++)
			buf_printf(b, "%s\"%s\":%llu", i ? "," : "", what[i], C(2 * i));
		buf_adds(b, "},\"recipients\":{");
		for (i = 0; i < 4; i++)
			buf_printf(b, "%s\"%s\":%llu", i ? "," : "", what[i], C(2 * i + 1));
		buf_printf(b, "},\"sessions_open\":%llu,\"fallback\":{\"switches\":%llu,"
		    "\"returns\":%llu}}", C(GP_C_SESSIONS), C(GP_C_SWITCHES), C(GP_C_RETURNS));
	}
	if (hist)
		json_history(b, u, now, wmm, hist);
	buf_addc(b, '}');
}

void
gate_status(struct buf *b, struct wgate *g, int json, int64_t now, int64_t wall_minus_mono,
    const char *journal_error, struct shared *sh, const struct status_history *hist)
{
	struct wg_up *u;
	char when[64];

	if (json) {
		buf_printf(b, "{\"now_ms\":%lld,\"journal_durable\":%s,",
		    (long long)(now + wall_minus_mono), journal_error ? "false" : "true");
		if (journal_error) {
			buf_adds(b, "\"journal_error\":");
			quoted(b, journal_error);
			buf_addc(b, ',');
		}
		buf_adds(b, "\"upstreams\":[");
	} else {
		wall_str(when, sizeof when, now + wall_minus_mono);
		buf_printf(b, "weir-gate status at %s\n", when);
		if (journal_error)
			buf_printf(b, "journal NOT DURABLE (%s): granting nothing until a rewrite "
			    "succeeds\n", journal_error);
	}
	for (u = g->ups; u; u = u->next) {
		wg_expire(u, now);
		if (json) {
			if (u != g->ups)
				buf_addc(b, ',');
			json_up(b, u, now, wall_minus_mono, sh, hist);
		} else {
			text_up(b, u, now, wall_minus_mono, sh);
		}
	}
	if (json)
		buf_adds(b, "]}\n");
}
