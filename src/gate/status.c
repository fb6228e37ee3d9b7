/*
 * status.c: weir-gate's status, for people and as JSON (the document's
 * members and what each means: mail/gatestatus.h, whose names this file
 * writes): every window's use, grants held and the deliveries in flight
 * among them, waiting requests per class, the next grant time, the next
 * free slot (the windows' room and the suspensions' end), the
 * suspensions with their reasons and ends, whether the journal is
 * durable, the sends of unknown outcome a window still counts (each
 * holds its slot until the upstream's grace is over), counters (since
 * the gate started; a send is a SENT report with a recipient accepted;
 * rcpt_accepted sums the recipient counts of the SENT reports, JSON
 * only), when the upstream's backlog began (JSON), and weir-send's
 * latest COUNTS for the upstream,
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
#include "mail/gatestatus.h"

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

static int64_t next_slot(struct wg_up *u, int64_t now);
static long long in_flight(struct wg_up *u, const struct status_history *h);

/* Where the shared store was found, its switches of master and whether
 * the window is whole (shared.h): one line. */
static void
text_store(struct buf *b, const struct shared_info *si, int64_t now)
{
	buf_printf(b, "    at %s", si->addr ? si->addr : "(not found yet)");
	if (si->switches)
		buf_printf(b, " (%u switch%s of master, the last %lld s ago)", si->switches,
		    si->switches == 1 ? "" : "es", (long long)((now - si->switch_at) / 1000));
	if (si->down)
		buf_adds(b, "; window: unknown");
	else if (si->written && !si->rebuilding)
		buf_adds(b, "; window: whole");
	else
		buf_adds(b, "; window: REBUILDING (no grant until every host wrote its history back)");
	if (si->rebuilt_at)
		buf_printf(b, "; this host's history written back %lld s ago",
		    (long long)((now - si->rebuilt_at) / 1000));
	buf_addc(b, '\n');
}


static void
text_up(struct buf *b, struct wg_up *u, int64_t now, int64_t wmm, struct shared *sh,
    const struct status_history *hist)
{
	long long fl = in_flight(u, hist);
	struct cls_count cc[32];
	struct shared_view v;
	struct wg_susp su;
	size_t i, ncc;
	int64_t next;
	char when[64];

	buf_printf(b, "upstream %s:%s", u->name, u->in_policy ? "" : " (not in the policy)");
	wg_suspension(u, now, &su);
	/* One "suspended until" for both kinds (weir status reads it). */
	if (u->auth_until > now && u->auth_until >= su.until) {
		wall_str(when, sizeof when, u->auth_until + wmm);
		buf_printf(b, " suspended until %s (%lld s): authentication failed\n", when,
		    (long long)((u->auth_until - now + 999) / 1000));
	} else if (su.until > now) {
		wall_str(when, sizeof when, su.until + wmm);
		buf_printf(b, " suspended until %s (%lld s%s): %s\n", when,
		    (long long)((su.until - now + 999) / 1000), su.quota ? ", its quota" : "",
		    su.reason ? su.reason : "");
	} else {
		buf_adds(b, " active\n");
	}
	if (su.until > now && su.host)
		buf_printf(b, "  met by %s and shared through the store\n", su.host);
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
		struct shared_info si;

		if (shared_info(sh, u->name, &si) < 0)
			buf_adds(b, "  shared store (none yet): not asked yet\n");
		else if (si.down)
			buf_printf(b, "  shared store %s: UNREACHABLE (%s): granting nothing\n",
			    si.store, si.why);
		else
			buf_printf(b, "  shared store %s: answers (windows count every host's sends; "
			    "\"all hosts\": as Redis counts them)\n", si.store);
		if (si.store)
			text_store(b, &si, now);
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
	buf_adds(b, ncc ? ")" : "");
	if (fl >= 0)
		buf_printf(b, "; deliveries in flight: %lld", fl);
	buf_addc(b, '\n');
	next = wg_head_fit(u, now);
	if (next == -1 && !u->in_policy)
		buf_adds(b, "  next grant: when a policy names this upstream\n");
	else if (next == -1)
		buf_adds(b, "  next grant: when a held grant is reported\n");
	else if (next >= 0) {
		wall_str(when, sizeof when, next + wmm);
		buf_printf(b, "  next grant: %s (in %lld ms)\n", when, (long long)(next - now));
	}
	if ((next = next_slot(u, now)) > now) {
		wall_str(when, sizeof when, next + wmm);
		buf_printf(b, "  next free slot: %s (in %lld ms)%s\n", when, (long long)(next - now),
		    next == su.until || next == u->auth_until ? ", the suspension's end" : "");
	}
	buf_printf(b, "  totals: granted %llu, sent %llu, sent with no recipient accepted %llu, "
	    "refunded %llu, throttled %llu, unknown %llu, no mail %llu, auth failed %llu, unknown "
	    "settled later %llu, unreachable %llu, passed over %llu\n",
	    (unsigned long long)u->n_granted, (unsigned long long)u->n_sent,
	    (unsigned long long)u->n_sent_none, (unsigned long long)u->n_refunded,
	    (unsigned long long)u->n_throttled,
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

/* ,"key": (first: without the comma) */
static void
key(struct buf *b, const char *k)
{
	buf_printf(b, ",\"%s\":", k);
}

/* ,"key": a time t on the now axis as wall ms, or null when t < 0. */
static void
key_at(struct buf *b, const char *k, int64_t t, int64_t wmm)
{
	key(b, k);
	if (t >= 0)
		buf_printf(b, "%lld", (long long)(t + wmm));
	else
		buf_adds(b, "null");
}

static void
key_bool(struct buf *b, const char *k, int v)
{
	buf_printf(b, ",\"%s\":%s", k, v ? "true" : "false");
}

static void
key_num(struct buf *b, const char *k, unsigned long long v)
{
	buf_printf(b, ",\"%s\":%llu", k, v);
}

/* text_store()'s facts in JSON (mail/gatestatus.h): shared_master, shared_switches,
 * shared_last_switch_ms, shared_window, shared_written_back_ms. */
static void
json_store(struct buf *b, const struct shared_info *si, int st, int64_t wmm)
{
	key(b, GS_SHARED_MASTER);
	if (si->addr)
		quoted(b, si->addr);
	else
		buf_adds(b, "null");
	key_num(b, GS_SHARED_SWITCHES, si->switches);
	key_at(b, GS_SHARED_LAST_SWITCH_MS, si->switch_at ? si->switch_at : -1, wmm);
	key(b, GS_SHARED_WINDOW);
	quoted(b, st != 0 ? "unknown" : si->written && !si->rebuilding ? "whole" : "rebuilding");
	key_at(b, GS_SHARED_WRITTEN_BACK_MS, si->rebuilt_at ? si->rebuilt_at : -1, wmm);
}

/* "route": what route.h's judge reads (weir status says where each
 * waiting message goes from it), and the requests passed over. */
static void
json_route(struct buf *b, struct wg_up *u, int64_t now, int64_t wmm)
{
	struct route_state st;

	wg_route_state(u, NULL, now, &st);
	key(b, GS_ROUTE);
	buf_printf(b, "{\"%s\":", GS_R_UNREACHABLE_SINCE_MS);
	json_ms(b, st.down_since, wmm);
	key(b, GS_R_UNREACHABLE_REASON);
	if (st.down_since > 0)
		quoted(b, u->down_reason ? u->down_reason : "");
	else
		buf_adds(b, "null");
	key(b, GS_R_PROBE_AT_MS);
	json_ms(b, st.down_since > 0 ? st.probe_at : 0, wmm);
	key_bool(b, GS_R_PROBE_OUT, st.probe_out);
	key(b, GS_R_AUTH_SINCE_MS);
	json_ms(b, st.auth_since, wmm);
	key_bool(b, GS_R_AUTH_PROBE_OUT, st.auth_probe_out);
	key_at(b, GS_R_FREE_AT_MS, st.free_at, wmm);
	key_num(b, GS_R_PASSED_OVER, u->n_later);
	key_num(b, GS_R_UNREACHABLE_REPORTS, u->n_unreached);
	buf_addc(b, '}');
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

/* When one message could next be granted on the now axis (mail/
 * gatestatus.h's next_slot_ms): the windows' room for it, and the end
 * of each suspension; -1: only a report frees it, or no policy. */
static int64_t
next_slot(struct wg_up *u, int64_t now)
{
	struct route_state st;
	int64_t t;

	wg_route_state(u, NULL, now, &st);
	if ((t = st.free_at) < 0)
		return -1;
	if (st.susp_until > t)
		t = st.susp_until;
	if (u->auth_until > t)
		t = u->auth_until;
	return t;
}

/* Deliveries in flight (gatestatus.h's in_flight): held grants for a
 * message, handed to a deliverer; -1 when the held grants cannot be
 * listed. */
static long long
in_flight(struct wg_up *u, const struct status_history *h)
{
	struct wg_req **held;
	size_t i, n;
	long long k = 0;

	if (h == NULL || h->held == NULL)
		return -1;
	held = h->held(h->arg, u, &n);
	for (i = 0; held && i < n; i++)
		k += held[i]->started && held[i]->w[UNIT_MESSAGES] > 0;
	free(held);
	return k;
}

/* "history" (STATUS JSON <seconds>): since_ms, when the period began;
 * complete_since_ms, from when on every send is there (later than
 * since_ms when the ring was full and dropped some); sends, each
 * [t, from, messages, recipients, connections, accepted] in wall ms
 * (from < t: maybe accepted at any instant between, an unknown outcome;
 * accepted null: not known); held, each [granted, messages, recipients,
 * connections]; waiting, each [queued, messages, recipients,
 * connections, class] in queue order.  At most STATUS_LIST_MAX held and
 * waiting each. */
static void
json_history(struct buf *b, struct wg_up *u, int64_t now, int64_t wmm,
    const struct status_history *h)
{
	int64_t since = now - h->ms, complete = since;
	struct wg_req **held, *r;
	size_t i, n, k;

	if (u->hdropped > complete)
		complete = u->hdropped;
	key(b, GS_HISTORY);
	buf_printf(b, "{\"%s\":%lld", GS_H_SINCE_MS, (long long)(since + wmm));
	key(b, GS_H_COMPLETE_SINCE_MS);
	buf_printf(b, "%lld", (long long)(complete + wmm));
	key(b, GS_H_SENDS);
	buf_addc(b, '[');
	for (i = k = 0; i < u->hn; i++) {
		const struct wg_send *e = wg_history_at(u, i);

		if (e->t <= since)
			continue;
		buf_printf(b, "%s[%lld,%lld,%u,%u,%u,", k++ ? "," : "", (long long)(e->t + wmm),
		    (long long)(e->from + wmm), e->w[UNIT_MESSAGES], e->w[UNIT_RECIPIENTS],
		    e->w[UNIT_CONNECTIONS]);
		if (e->ok < 0)
			buf_adds(b, "null]");
		else
			buf_printf(b, "%ld]", (long)e->ok);
	}
	buf_addc(b, ']');
	key(b, GS_H_HELD);
	buf_addc(b, '[');
	held = h->held ? h->held(h->arg, u, &n) : NULL;
	for (i = 0; held && i < n && i < STATUS_LIST_MAX; i++)
		buf_printf(b, "%s[%lld,%u,%u,%u]", i ? "," : "", (long long)(held[i]->since + wmm),
		    held[i]->w[UNIT_MESSAGES], held[i]->w[UNIT_RECIPIENTS],
		    held[i]->w[UNIT_CONNECTIONS]);
	free(held);
	buf_addc(b, ']');
	key(b, GS_H_WAITING);
	buf_addc(b, '[');
	for (r = u->wait_head, i = 0; r && i < STATUS_LIST_MAX; r = r->next, i++) {
		buf_printf(b, "%s[%lld,%u,%u,%u,", i ? "," : "", (long long)(r->since + wmm),
		    r->w[UNIT_MESSAGES], r->w[UNIT_RECIPIENTS], r->w[UNIT_CONNECTIONS]);
		quoted(b, r->cls[0] ? r->cls : "default");
		buf_addc(b, ']');
	}
	buf_adds(b, "]}");
}

static void
json_window(struct buf *b, struct wg_up *u, size_t i, const struct shared_view *v, int64_t now,
    int64_t wmm)
{
	const struct wg_win *w = &u->win[i];

	buf_printf(b, "%s{\"%s\":%lld", i ? "," : "", GS_W_LIMIT, (long long)w->limit);
	key_num(b, GS_W_PER_S, (unsigned long long)(w->per / 1000));
	key(b, GS_W_UNIT);
	quoted(b, policy_unit_name(w->unit));
	key_bool(b, GS_W_CALENDAR, w->calendar);
	key_num(b, GS_W_LOGGED, (unsigned long long)w->sum);
	key_num(b, GS_W_HELD, (unsigned long long)u->held[w->unit]);
	key_num(b, GS_W_USED, (unsigned long long)wg_win_used(u, i));
	/* Every host's, as Redis counts them (null: no answer). */
	if (v->ok) {
		key(b, GS_W_ALL_HOSTS);
		buf_printf(b, "{\"%s\":%lld", GS_W_LOGGED, (long long)v->lg[i]);
		key_num(b, GS_W_HELD, (unsigned long long)v->hd[i]);
		key_num(b, GS_W_USED, (unsigned long long)(v->lg[i] + v->hd[i]));
		buf_addc(b, '}');
	} else if (u->shared) {
		key(b, GS_W_ALL_HOSTS);
		buf_adds(b, "null");
	}
	if (w->calendar)
		key_num(b, GS_W_PERIOD_START_MS, (unsigned long long)(period_start(w, now) + wmm));
	key_at(b, GS_W_FREE_AT_MS, win_free_at(u, i, now), wmm);
	buf_addc(b, '}');
}

/* The counters since the gate started, and weir-send's. */
static void
json_counts(struct buf *b, const struct wg_up *u)
{
	static const char *const what[] = { GS_S_QUEUED, GS_S_DELIVERED, GS_S_DEFERRED,
		GS_S_BOUNCED };
	size_t i;

	key_num(b, GS_GRANTED, u->n_granted);
	key_num(b, GS_SENT, u->n_sent);
	key_num(b, GS_SENT_NONE, u->n_sent_none);
	key_num(b, GS_REFUNDED, u->n_refunded);
	key_num(b, GS_THROTTLED, u->n_throttled);
	key_num(b, GS_UNKNOWN, u->n_unknown);
	key_num(b, GS_NOMAIL, u->n_nomail);
	key_num(b, GS_AUTHFAIL, u->n_authfail);
	key_num(b, GS_SETTLED, u->n_settled);
	key_num(b, GS_RCPT_ACCEPTED, u->n_rcpt_accepted);
	if (!u->has_counts)
		return;
	key(b, GS_SEND);
	buf_printf(b, "{\"%s\":{", GS_S_MESSAGES);
	for (i = 0; i < 4; i++)
		buf_printf(b, "%s\"%s\":%llu", i ? "," : "", what[i], C(2 * i));
	buf_addc(b, '}');
	key(b, GS_S_RECIPIENTS);
	buf_addc(b, '{');
	for (i = 0; i < 4; i++)
		buf_printf(b, "%s\"%s\":%llu", i ? "," : "", what[i], C(2 * i + 1));
	buf_addc(b, '}');
	key_num(b, GS_S_SESSIONS_OPEN, C(GP_C_SESSIONS));
	key(b, GS_S_FALLBACK);
	buf_printf(b, "{\"%s\":%llu", GS_S_SWITCHES, C(GP_C_SWITCHES));
	key_num(b, GS_S_RETURNS, C(GP_C_RETURNS));
	buf_adds(b, "}}");
}

static void
json_up(struct buf *b, struct wg_up *u, int64_t now, int64_t wmm, struct shared *sh,
    const struct status_history *hist)
{
	struct cls_count cc[32];
	struct shared_view v;
	struct wg_susp su;
	size_t i, ncc, n;
	long long fl;
	uint64_t s;

	buf_printf(b, "{\"%s\":", GS_NAME);
	quoted(b, u->name);
	key_bool(b, GS_IN_POLICY, u->in_policy);
	wg_suspension(u, now, &su);
	key_bool(b, GS_SUSPENDED, su.until > now);
	if (su.until > now) {
		key_num(b, GS_SUSPENDED_UNTIL_MS, (unsigned long long)(su.until + wmm));
		key(b, GS_SUSPEND_REASON);
		quoted(b, su.reason ? su.reason : "");
		key_bool(b, GS_SUSPEND_QUOTA, su.quota);
		if (su.host) {
			key(b, GS_SUSPENDED_BY);
			quoted(b, su.host);
		}
	}
	key_bool(b, GS_AUTH_SUSPENDED, u->auth_until > now);
	if (u->auth_until > now) {
		key_num(b, GS_AUTH_UNTIL_MS, (unsigned long long)(u->auth_until + wmm));
		key(b, GS_AUTH_REASON);
		quoted(b, u->auth_reason ? u->auth_reason : "");
	}
	key_bool(b, GS_PROBE, u->probe);
	json_route(b, u, now, wmm);
	view_get(&v, sh, u, now, wmm);
	if (u->shared) {
		struct shared_info si;
		int st = shared_info(sh, u->name, &si) < 0 ? -1 : si.down;

		key(b, GS_SHARED);
		quoted(b, st == 0 ? "ok" : st == 1 ? "down" : "unknown");
		if (si.store) {
			key(b, GS_SHARED_STORE);
			quoted(b, si.store);
		}
		if (st == 1) {
			key(b, GS_SHARED_ERROR);
			quoted(b, si.why);
		}
		json_store(b, &si, st, wmm);
	}
	key(b, GS_WINDOWS);
	buf_addc(b, '[');
	for (i = 0; i < u->nwin; i++)
		json_window(b, u, i, &v, now, wmm);
	buf_addc(b, ']');
	view_free(&v);
	key_num(b, GS_GRACE_S, (unsigned long long)(u->grace / 1000));
	key(b, GS_UNKNOWN_SENDS);
	buf_addc(b, '[');
	for (s = counted_from(u), n = 0; s < u->lseq + u->ln; s++) {
		const struct wg_send *e = wg_log_at(u, s);

		if (e->from != e->t)
			buf_printf(b, "%s{\"%s\":%lld,\"%s\":%lld}", n++ ? "," : "", GS_U_GRANTED_MS,
			    (long long)(e->from + wmm), GS_U_UNTIL_MS, (long long)(e->t + wmm));
	}
	buf_addc(b, ']');
	key_num(b, GS_HELD, u->nheld);
	key(b, GS_IN_FLIGHT);
	if ((fl = in_flight(u, hist)) >= 0)
		buf_printf(b, "%lld", fl);
	else
		buf_adds(b, "null");
	key_num(b, GS_MAX_CONNECTIONS, (unsigned long long)u->max_conn);
	key_num(b, GS_WAITING, u->nwait);
	key(b, GS_WAITING_BY_CLASS);
	buf_addc(b, '{');
	ncc = count_classes(u, cc, 32);
	for (i = 0; i < ncc; i++) {
		buf_adds(b, i ? "," : "");
		quoted(b, cc[i].name);
		buf_printf(b, ":%zu", cc[i].n);
	}
	buf_addc(b, '}');
	key_at(b, GS_NEXT_GRANT_MS, wg_head_fit(u, now), wmm);
	key_at(b, GS_NEXT_SLOT_MS, next_slot(u, now), wmm);
	key(b, GS_BACKLOG_SINCE_MS);
	json_ms(b, wg_backlog_since(u, now), wmm);
	json_counts(b, u);
	if (hist && hist->ms > 0)
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
		buf_printf(b, "{\"%s\":%lld", GS_NOW_MS, (long long)(now + wall_minus_mono));
		key_bool(b, GS_JOURNAL_DURABLE, journal_error == NULL);
		if (journal_error) {
			key(b, GS_JOURNAL_ERROR);
			quoted(b, journal_error);
		}
		key(b, GS_UPSTREAMS);
		buf_addc(b, '[');
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
			text_up(b, u, now, wall_minus_mono, sh, hist);
		}
	}
	if (json)
		buf_adds(b, "]}\n");
}
