/*
 * relaystatus.c: see relaystatus.h.
 * Trusts: the gate as far as gateproto.c parses it, weir-showq as far as
 * lib/jsonparse.c does, nothing in the queue.  Config keys: those of
 * relaystatus.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/json.h"
#include "lib/jsonparse.h"
#include "lib/timefmt.h"
#include "mail/gateclient.h"
#include "mail/oauth.h"
#include "mail/qlist.h"
#include "mail/queue.h"
#include "mail/relaystatus.h"
#include "mail/schedfile.h"
#include "mail/showq.h"

static struct rs_up *
up_find(struct relay_status *rs, const char *name)
{
	size_t i;

	for (i = 0; i < rs->nup; i++)
		if (strcmp(rs->up[i].name, name) == 0)
			return &rs->up[i];
	return NULL;
}

/* ---- the queue ---- */

/* A message as either source gives it. */
struct rs_msg {
	time_t mtime;
	int preprocessed, held, trouble, head;
	long long next_attempt;		/* wall s; 0: none */
	char *sender;			/* NULL: not known */
	unsigned long long left;	/* recipients not done */
	const char *qid;
	char **rcpt;			/* the recipients not done (left of them) */
	char *via;			/* the operator's upstream (reply/N), or NULL */
};

char *
rs_mask_addresses(const char *s, size_t n)
{
	struct buf b = BUF_INIT;
	size_t i = 0, j;

	while (i < n) {
		if (s[i] == ' ') {
			buf_addc(&b, ' ');
			i++;
			continue;
		}
		for (j = i; j < n && s[j] != ' '; j++)
			;
		if (memchr(s + i, '@', j - i))
			buf_adds(&b, "<address>");
		else
			buf_add_oneline(&b, s + i, j - i);
		i = j;
	}
	return b.s ? b.s : xstrdup("");
}

static void
add_reason(struct relay_status *rs, const char *reply, size_t n)
{
	char *m = rs_mask_addresses(reply, n);
	size_t i;

	for (i = 0; i < rs->nreasons; i++)
		if (strcmp(rs->reasons[i].reply, m) == 0) {
			rs->reasons[i].recipients++;
			free(m);
			return;
		}
	rs->reasons = xrealloc(rs->reasons, (rs->nreasons + 1) * sizeof *rs->reasons);
	rs->reasons[rs->nreasons].reply = m;
	rs->reasons[rs->nreasons++].recipients = 1;
}

/* ---- routes (relaystatus.h, item 5) ---- */

/* The upstream the mail of primary p will go through: its route's first
 * that p's fallback_when does not pass over, judged as the gate judges
 * (mail/route.h) on the gate's state; *why (-1: none passed over) and
 * *holding (the upstream chosen holds it: unreachable, not long enough).
 * route_pick: the same for recipient rcpt of sender's mail (*primary its
 * primary); NULL: no upstream takes it. */
static struct rs_up *
route_via(struct relay_status *rs, const struct weir_upstream *p, int *why, int *holding)
{
	const struct weir_config *c = rs->cfg;
	const struct weir_upstream **route = xcalloc(c->nupstreams + 1, sizeof *route);
	struct rs_up *sp = NULL;
	enum route_kind k;
	enum route_verdict v;
	int64_t until;
	size_t i, n = config_route(c, p, route, c->nupstreams);

	*why = -1;
	*holding = 0;
	for (i = 0; i < n; i++) {
		sp = up_find(rs, route[i]->name);
		if (i + 1 == n || sp == NULL)
			break;
		v = route_judge(&p->when, &sp->st, rs->gnow_ms, &k, &until);
		/* PROBE: one request goes there as the probe, the others on. */
		if (v != RV_AVOID && v != RV_PROBE) {
			*holding = v == RV_HOLD;
			break;
		}
		if (*why < 0)
			*why = (int)k;
	}
	free(route);
	return sp;
}

static struct rs_up *
route_pick(struct relay_status *rs, const char *sender, const char *rcpt,
    const struct weir_upstream **primary, int *why, int *holding)
{
	*primary = config_upstream_route(rs->cfg, sender, rcpt);
	if (*primary == NULL) {
		*why = -1;
		*holding = 0;
		return NULL;
	}
	return route_via(rs, *primary, why, holding);
}

/* m's recipients by route: listed (at most RS_ROUTES_MAX messages) and
 * counted for the drain estimate at the upstream each goes through. */
static void
route_msg(struct relay_status *rs, const struct rs_msg *m, int list)
{
	struct rs_route *mine = xcalloc(m->left + 1, sizeof *mine);
	const struct weir_upstream *p;
	struct rs_up *sp;
	size_t i, j, n = 0;
	int why, holding;

	for (i = 0; i < m->left; i++) {
		sp = route_pick(rs, m->sender, m->rcpt[i], &p, &why, &holding);
		/* weir requeue --via: every recipient there (send/via.c). */
		if (m->via && up_find(rs, m->via) && p) {
			sp = up_find(rs, m->via);
			why = RS_WHY_OPERATOR;
			holding = 0;
		}
		if (sp == NULL) {
			rs->other.recipients++;
			continue;
		}
		for (j = 0; j < n && mine[j].via != sp->name; j++)
			;
		if (j == n) {
			snprintf(mine[n].qid, sizeof mine[n].qid, "%s", m->qid ? m->qid : "?");
			mine[n].via = sp->name;
			mine[n].primary = p->name;
			mine[n].why = why;
			mine[n].holding = holding;
			n++;
		}
		mine[j].recipients++;
	}
	for (j = 0; j < n; j++) {
		sp = up_find(rs, mine[j].via);
		sp->messages++;
		sp->recipients += mine[j].recipients;
		sp->sends += sp->cap ? (mine[j].recipients + sp->cap - 1) / sp->cap : 1;
	}
	if (list && rs->nroutes + n > RS_ROUTES_MAX) {
		rs->routes_left_out++;
	} else if (list && n > 0) {
		rs->routes = xrealloc(rs->routes, (rs->nroutes + n) * sizeof *rs->routes);
		memcpy(rs->routes + rs->nroutes, mine, n * sizeof *mine);
		rs->nroutes += n;
	}
	free(mine);
}

static void
count_msg(struct relay_status *rs, const struct rs_msg *m)
{
	const struct weir_upstream *u;
	struct rs_up *sp;
	struct rs_count *state;

	rs->messages++;
	if (!m->preprocessed)
		rs->todo++;
	if (m->trouble)
		rs->trouble++;
	if (!rs->have_oldest || m->mtime < rs->oldest) {
		rs->oldest = m->mtime;
		rs->have_oldest = 1;
	}
	rs->rcpt_left += m->left;
	if (!m->preprocessed)
		state = &rs->not_preprocessed;
	else if (m->left == 0)
		state = NULL;		/* done, being removed */
	else if (m->held)
		state = &rs->held;
	else if (m->next_attempt > (long long)rs->now)
		state = &rs->deferred;
	else
		state = &rs->waiting;
	if (state) {
		state->messages++;
		state->recipients += m->left;
	}
	if (!m->head || m->sender == NULL || m->left == 0)
		return;
	if (rs->routing || m->via) {
		route_msg(rs, m, m->preprocessed && !m->held);
		return;
	}
	u = config_upstream_for(rs->cfg, m->sender);
	sp = u ? up_find(rs, u->name) : NULL;
	if (sp == NULL)
		sp = &rs->other;
	sp->messages++;
	sp->recipients += m->left;
	sp->sends += sp->cap ? (m->left + sp->cap - 1) / sp->cap : 1;
}

/* qlist_scan's messages. */
static void
count_scanned(const struct qlist_msg *qm, void *arg)
{
	struct relay_status *rs = arg;
	struct rs_msg m;
	size_t i;

	memset(&m, 0, sizeof m);
	m.mtime = qm->mtime;
	m.preprocessed = qm->preprocessed;
	m.held = qm->held;
	m.trouble = qm->trouble;
	m.head = qm->head;
	m.next_attempt = qm->next_attempt;
	m.qid = qm->qid;
	m.via = qm->via_len ? xstrndup(qm->text.s + qm->via_off, qm->via_len) : NULL;
	m.rcpt = xcalloc(qm->nitems + 1, sizeof *m.rcpt);
	for (i = 0; i < qm->nitems; i++)
		if (!qm->items[i].trouble && !qm->items[i].done)
			m.rcpt[m.left++] = xstrndup(qm->text.s + qm->items[i].off, qm->items[i].len);
	if (qm->head) {
		m.sender = xmalloc(qm->sender_len + 1);
		memcpy(m.sender, qm->text.s + qm->sender_off, qm->sender_len);
		m.sender[qm->sender_len] = '\0';
	}
	count_msg(rs, &m);
	for (i = 0; i < m.left; i++)
		free(m.rcpt[i]);
	free(m.rcpt);
	free(m.via);
	if (qm->preprocessed && !qm->held && m.left && m.next_attempt > (long long)rs->now)
		for (i = 0; i < qm->nitems; i++)
			if (!qm->items[i].trouble && !qm->items[i].done && qm->items[i].reason_len)
				add_reason(rs, qm->text.s + qm->items[i].reason_off,
				    qm->items[i].reason_len);
	free(m.sender);
}

/* One message of weir-showq's JSON listing (qlist.c's render_json):
 * 0 counted, -1 not of that shape. */
static int
count_listed(struct relay_status *rs, struct json_object *o)
{
	struct json_object *rc = jp_get(o, "recipients"), *r;
	const char *na = jp_str(jp_get(o, "next_attempt")), *st, *why;
	struct rs_msg m;
	size_t i;

	memset(&m, 0, sizeof m);
	if ((m.mtime = date_iso_parse(jp_str(jp_get(o, "queue_time")))) < 0 ||
	    (m.preprocessed = jp_bool(jp_get(o, "preprocessed"))) < 0 ||
	    (m.held = jp_bool(jp_get(o, "held"))) < 0 ||
	    !json_object_is_type(rc, json_type_array) ||
	    !json_object_is_type(jp_get(o, "trouble"), json_type_array) ||
	    (na && (m.next_attempt = date_iso_parse(na)) < 0))
		return -1;
	m.trouble = jp_len(jp_get(o, "trouble")) > 0;
	m.sender = (char *)jp_str(jp_get(o, "sender"));
	m.head = m.sender != NULL;
	m.qid = jp_str(jp_get(o, "queue_id"));
	m.via = (char *)jp_str(jp_get(o, "via"));	/* weir requeue --via; may be absent */
	m.rcpt = xcalloc(jp_len(rc) + 1, sizeof *m.rcpt);
	for (i = 0; i < jp_len(rc); i++) {
		if ((st = jp_str(jp_get(r = jp_at(rc, i), "state"))) == NULL ||
		    jp_str(jp_get(r, "address")) == NULL) {
			free(m.rcpt);
			return -1;
		}
		if (strcmp(st, "done") != 0)
			m.rcpt[m.left++] = (char *)jp_str(jp_get(r, "address"));
	}
	count_msg(rs, &m);
	free(m.rcpt);
	if (m.preprocessed && !m.held && m.next_attempt > (long long)rs->now)
		for (i = 0; i < jp_len(rc); i++)
			if (strcmp(jp_str(jp_get(r = jp_at(rc, i), "state")), "done") != 0 &&
			    (why = jp_str(jp_get(r, "delay_reason"))) != NULL)
				add_reason(rs, why, strlen(why));
	return 0;
}

/* The queue through weir-showq (this process may not read it). */
static int
queue_by_showq(struct relay_status *rs)
{
	struct buf text = BUF_INIT, why = BUF_INIT;
	struct json_object *doc = NULL, *msgs;
	int fd, k, rc = -1;
	size_t i;

	rs->qsrc = rs->cfg->showq_socket;
	if ((fd = memfd_create("weir-showq", MFD_CLOEXEC)) < 0) {
		buf_printf(&rs->qwhy, "memfd_create: %s", strerror(errno));
		return -1;
	}
	k = showq_ask(rs->cfg->showq_socket, QLIST_JSON, fd, RS_SHOWQ_TIMEOUT_MS, &why);
	if (k < 0) {
		buf_printf(&rs->qwhy, "%s", why.s);
		goto out;
	}
	if (lseek(fd, 0, SEEK_SET) < 0 || (k = read_fd_all(fd, &text, RS_SHOWQ_MAX)) != 0) {
		buf_printf(&rs->qwhy, "weir-showq's listing: %s", k == -2 ?
		    "larger than 16 MB: not counted" : strerror(errno));
		goto out;
	}
	if ((doc = json_parse_strict(text.s ? text.s : "", text.len, RS_SHOWQ_MAX, &why)) == NULL) {
		buf_printf(&rs->qwhy, "weir-showq's listing: %s", why.s);
		goto out;
	}
	msgs = jp_get(doc, "messages");
	if (!json_object_is_type(msgs, json_type_array)) {
		buf_adds(&rs->qwhy, "weir-showq's listing has no messages");
		goto out;
	}
	for (i = 0; i < jp_len(msgs); i++)
		if (count_listed(rs, jp_at(msgs, i)) < 0) {
			buf_printf(&rs->qwhy, "weir-showq's listing: message %zu is not one", i);
			goto out;
		}
	rc = 0;
out:
	json_object_put(doc);
	close(fd);
	buf_free(&text);
	buf_free(&why);
	return rc;
}

static int
queue_read(struct relay_status *rs)
{
	struct qlist_stats qs;
	struct queue q;
	int rc;

	if (rs->cfg->showq_socket && showq_needed(rs->cfg->queue_dir) == 1)
		return queue_by_showq(rs);
	rs->qsrc = rs->cfg->queue_dir;
	if (queue_open(&q, rs->cfg->queue_dir, rs->cfg->queue_split) < 0) {
		buf_printf(&rs->qwhy, "%s", strerror(errno));
		return -1;
	}
	rc = qlist_scan(&q, count_scanned, rs, &qs, &rs->qwhy);
	queue_close(&q);
	return rc;
}

/* Most recipients first. */
static int
by_recipients(const void *a, const void *b)
{
	const struct rs_reason *x = a, *y = b;

	return x->recipients < y->recipients ? 1 : x->recipients > y->recipients ? -1 :
	    strcmp(x->reply, y->reply);
}

static void
keep_reasons(struct relay_status *rs)
{
	size_t i;

	if (rs->nreasons)
		qsort(rs->reasons, rs->nreasons, sizeof *rs->reasons, by_recipients);
	for (i = RS_REASONS_MAX; i < rs->nreasons; i++) {
		rs->reasons_other += rs->reasons[i].recipients;
		free(rs->reasons[i].reply);
	}
	if (rs->nreasons > RS_REASONS_MAX)
		rs->nreasons = RS_REASONS_MAX;
}

/* ---- the gate ---- */

/* One STATUS request: TEXT (json 0), JSON (1) or JSON with the history
 * (2); the body into body.  0 ok, -1 with why. */
static int
gate_ask_one(struct gate_client *gc, int json, struct buf *body, struct buf *why)
{
	struct gp_reply r;
	const char *perr = "the gate closed the connection";
	int k;

	if ((json == 2 ? gc_status_history(gc, RS_HISTORY_S) : gc_status(gc, json)) < 0) {
		buf_printf(why, "sending STATUS: %s", strerror(errno));
		return -1;
	}
	k = gc_wait_reply(gc, &r, &perr);
	if (k <= 0) {
		buf_printf(why, "%s", k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ?
		    "no answer within 5 seconds" : perr);
		return -1;
	}
	if (r.verb != GP_R_STATUS) {
		buf_printf(why, "unexpected reply to STATUS");
		return -1;
	}
	buf_add(body, gc->status.s ? gc->status.s : "", gc->status.len);
	return 0;
}

/* STATUS from the gate's socket, or from its read-only status socket
 * when the first cannot be reached (a user outside weir-send's group);
 * rs->gsock is the one that answered. */
static int
gate_ask(struct relay_status *rs, int json)
{
	struct gate_client gc;
	struct timeval tv = { RS_GATE_TIMEOUT_S, 0 };
	const char *used;
	int rc = -1;

	rs->gsock = rs->cfg->gate_socket;
	if ((used = gc_connect_status(&gc, rs->cfg->gate_socket,
	    rs->cfg->gate_status_socket)) == NULL) {
		buf_printf(&rs->gwhy, "%s", strerror(errno));
		return -1;
	}
	rs->gsock = used;
	if (setsockopt(gc.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
	    setsockopt(gc.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
		buf_printf(&rs->gwhy, "setsockopt: %s", strerror(errno));
		goto out;
	}
	/* The JSON for the routes' state (item 5) in any case. */
	if (gate_ask_one(&gc, 0, &rs->gtext, &rs->gwhy) < 0 ||
	    gate_ask_one(&gc, json ? 2 : 1, &rs->gjson, &rs->gwhy) < 0)
		goto out;
	rc = 0;
out:
	gc_close(&gc);
	return rc;
}

static void
add_win(struct rs_up *u, long long limit, enum policy_unit unit, long long per, long long used,
    int calendar, long long align)
{
	u->win = xrealloc(u->win, (u->nwin + 1) * sizeof *u->win);
	u->win[u->nwin].limit = limit;
	u->win[u->nwin].unit = unit;
	u->win[u->nwin].per = per;
	u->win[u->nwin].used = used;
	u->win[u->nwin].calendar = calendar;
	u->win[u->nwin].align = align;
	u->nwin++;
	u->known = 1;
}

/* A calendar window's phase, from the policy's same window; 0 (UTC
 * midnight for a daily one) when the policy does not have it. */
static long long
calendar_align(const struct relay_status *rs, const char *up, long long limit,
    enum policy_unit unit, long long per)
{
	const struct policy_upstream *pu = rs->have_pol ? policy_upstream(&rs->pol, up) : NULL;
	size_t i;

	for (i = 0; pu && i < pu->nwin; i++)
		if (pu->win[i].calendar && pu->win[i].limit == limit && pu->win[i].unit == unit &&
		    pu->win[i].per == per)
			return pu->win[i].align;
	return 0;
}

/* The numbers of the gate's text status (see relaystatus.h). */
static void
gate_numbers(struct relay_status *rs, const char *text)
{
	const char *p = text, *nl, *q;
	struct rs_up *cur = NULL;
	char line[1024], unit[32];
	long long limit, per, used, of, secs;
	enum policy_unit pu;

	for (; p && *p; p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		snprintf(line, sizeof line, "%.*s", (int)(nl ? nl - p : (long)strlen(p)), p);
		if (strncmp(line, "upstream ", 9) == 0) {
			char name[POLICY_NAME_MAX + 1];
			size_t n = strcspn(line + 9, ":");

			cur = NULL;
			if (n == 0 || n > POLICY_NAME_MAX || line[9 + n] != ':')
				continue;
			memcpy(name, line + 9, n);
			name[n] = '\0';
			if ((cur = up_find(rs, name)) == NULL)
				continue;
			cur->listed = 1;
			/* Not in the policy: the gate refuses it, nothing to go by. */
			cur->known = strstr(line, " (not in the policy)") == NULL;
			if ((q = strstr(line, " suspended until ")) != NULL &&
			    (q = strchr(q, '(')) != NULL && sscanf(q, "(%lld s)", &secs) == 1)
				cur->suspended = secs;
		} else if (cur && sscanf(line, "  window %lld %31s per %llds", &limit, unit,
		    &per) == 3 && (q = strstr(line, " = ")) != NULL &&
		    sscanf(q, " = %lld of %lld", &used, &of) == 2 && of == limit &&
		    policy_unit_parse(unit, &pu) == 0 && limit > 0 && per > 0) {
			int cal = strstr(line, " (calendar):") != NULL;

			add_win(cur, limit, pu, per, used, cal,
			    cal ? calendar_align(rs, cur->name, limit, pu, per) : 0);
		} else if (cur && cur->nwin > 0 && strncmp(line, "    all hosts: ", 15) == 0 &&
		    (q = strstr(line, " = ")) != NULL && sscanf(q, " = %lld of %lld", &used,
		    &of) == 2 && of == cur->win[cur->nwin - 1].limit &&
		    used > cur->win[cur->nwin - 1].used) {
			/* A shared upstream: every host's use of the window
			 * just read, as Redis counts it, paces the backlog. */
			cur->win[cur->nwin - 1].used = used;
		}
	}
}

/* A time member of the gate's JSON, wall ms; 0 when absent or null. */
static int64_t
ms_of(struct json_object *o, const char *key)
{
	long long v;

	return jp_ll(jp_get(o, key), &v) == 0 && v > 0 ? (int64_t)v : 0;
}

/* Each upstream's state for route.h's judge, from the gate's JSON. */
static void
gate_routes(struct relay_status *rs)
{
	struct buf why = BUF_INIT;
	struct json_object *doc, *ups, *u, *r;
	struct rs_up *sp;
	long long v;
	size_t i;

	doc = json_parse_strict(rs->gjson.s ? rs->gjson.s : "", rs->gjson.len, GP_STATUS_MAX, &why);
	ups = jp_get(doc, "upstreams");
	if (jp_ll(jp_get(doc, "now_ms"), &v) == 0 && v > 0)
		rs->gnow_ms = v;
	for (i = 0; i < jp_len(ups); i++) {
		u = jp_at(ups, i);
		if (jp_str(jp_get(u, "name")) == NULL ||
		    (sp = up_find(rs, jp_str(jp_get(u, "name")))) == NULL)
			continue;
		r = jp_get(u, "route");
		sp->st.down_since = ms_of(r, "unreachable_since_ms");
		sp->st.probe_at = ms_of(r, "probe_at_ms");
		sp->st.probe_out = jp_bool(jp_get(r, "probe_out")) == 1;
		sp->st.auth_since = ms_of(r, "auth_trouble_since_ms");
		sp->st.auth_until = ms_of(u, "auth_suspended_until_ms");
		sp->st.auth_probe_out = jp_bool(jp_get(r, "auth_probe_out")) == 1;
		sp->st.susp_until = ms_of(u, "suspended_until_ms");
		sp->st.free_at = ms_of(r, "free_at_ms") ? ms_of(r, "free_at_ms") : -1;
		if (sp->st.down_since && jp_str(jp_get(r, "unreachable_reason")))
			sp->down_reason = xstrdup(jp_str(jp_get(r, "unreachable_reason")));
	}
	json_object_put(doc);
	buf_free(&why);
}

/* ---- the estimate ---- */

/* Seconds until window w holds b more, now. */
static long long
window_time(const struct rs_win *w, unsigned long long b, time_t now)
{
	unsigned long long n = (unsigned long long)w->limit, room, rest;
	long long phase, next;

	if (!w->calendar)
		return (long long)((b + (unsigned long long)w->used - 1) / n) * w->per;
	room = w->used < w->limit ? (unsigned long long)(w->limit - w->used) : 0;
	if (b <= room)
		return 0;
	rest = b - room;
	/* The next boundary after now: boundaries at align (mod per). */
	phase = ((long long)now - w->align) % w->per;
	if (phase < 0)
		phase += w->per;
	next = w->per - phase;
	return next + (long long)((rest - 1) / n) * w->per;
}

static void
estimate(struct rs_up *u, time_t now)
{
	size_t i;

	u->estimate = u->known ? 0 : -1;
	u->bottleneck = NULL;
	for (i = 0; u->known && i < u->nwin; i++) {
		const struct rs_win *w = &u->win[i];
		unsigned long long b = w->unit == UNIT_RECIPIENTS ? u->recipients : u->sends;
		long long t;

		if (b == 0)
			continue;
		t = window_time(w, b, now);
		if (t > u->estimate || (t == u->estimate && u->bottleneck == NULL)) {
			u->estimate = t;
			u->bottleneck = w;
		}
	}
	if (u->estimate >= 0 && u->messages > 0)
		u->estimate += u->suspended;
}

/* ---- gathering ---- */

int
relay_status_get(struct relay_status *rs, const struct weir_config *cfg, int flags)
{
	struct buf perr = BUF_INIT;
	size_t i, j;

	memset(rs, 0, sizeof *rs);
	rs->cfg = cfg;
	rs->now = time(NULL);
	rs->have_pol = policy_load(&rs->pol, cfg->policy_file, &perr) == 0;
	if (rs->have_pol)
		config_preset_limits(cfg->upstreams, cfg->nupstreams, &rs->pol);
	buf_free(&perr);
	rs->nup = cfg->nupstreams;
	rs->up = xcalloc(rs->nup + 1, sizeof *rs->up);
	rs->other.st.free_at = -1;
	for (i = 0; i < rs->nup; i++) {
		rs->up[i].st.free_at = -1;	/* not known: no quota reason */
		rs->routing |= cfg->upstreams[i].fallback.n > 0 ||
		    cfg->upstreams[i].recipient_domains.n > 0;
		const struct policy_upstream *pu = rs->have_pol ?
		    policy_upstream(&rs->pol, cfg->upstreams[i].name) : NULL;

		rs->up[i].name = cfg->upstreams[i].name;
		rs->up[i].cap = cfg->upstreams[i].max_recipients;
		if (pu && pu->max_recipients && (unsigned long long)pu->max_recipients <
		    rs->up[i].cap)
			rs->up[i].cap = (unsigned)pu->max_recipients;
	}
	rs->gate_ok = gate_ask(rs, flags & RS_JSON) == 0;
	rs->gnow_ms = (long long)rs->now * 1000;
	if (rs->gate_ok) {
		gate_numbers(rs, rs->gtext.s ? rs->gtext.s : "");
		gate_routes(rs);
	}
	/* What the gate does not list (it has not seen the upstream yet, or
	 * does not answer): the policy's windows, nothing used. */
	for (i = 0; rs->have_pol && i < rs->nup; i++) {
		const struct policy_upstream *pu = policy_upstream(&rs->pol, rs->up[i].name);

		if (rs->up[i].listed)
			continue;
		for (j = 0; pu && j < pu->nwin; j++)
			add_win(&rs->up[i], pu->win[j].limit, pu->win[j].unit, pu->win[j].per, 0,
			    pu->win[j].calendar, pu->win[j].align);
		if (pu)
			rs->up[i].known = 1;
	}
	if (rs->gate_ok)
		rs->winsrc = "weir-gate";
	else if (rs->have_pol)
		rs->winsrc = cfg->policy_file;
	else
		rs->winsrc = "nowhere (no gate, and the policy file does not load)";
	rs->q_ok = queue_read(rs) == 0;
	keep_reasons(rs);
	for (i = 0; i < rs->nup; i++) {
		estimate(&rs->up[i], rs->now);
		rs->up[i].at_least = -1;
		if (!rs->gate_ok && rs->up[i].estimate >= 0) {
			/* Nothing goes while the gate is down. */
			rs->up[i].at_least = rs->up[i].estimate;
			rs->up[i].estimate = -1;
		}
	}
	return rs->gate_ok && rs->q_ok;
}

void
relay_status_free(struct relay_status *rs)
{
	size_t i;

	for (i = 0; i < rs->nup; i++) {
		free(rs->up[i].win);
		free(rs->up[i].down_reason);
	}
	free(rs->up);
	free(rs->routes);
	for (i = 0; i < rs->nreasons; i++)
		free(rs->reasons[i].reply);
	free(rs->reasons);
	if (rs->have_pol)
		policy_free(&rs->pol);
	buf_free(&rs->gtext);
	buf_free(&rs->gjson);
	buf_free(&rs->gwhy);
	buf_free(&rs->qwhy);
}

/* ---- output ---- */

static const char *
ms_iso(char *out, size_t max, int64_t ms)
{
	date_iso(out, max, (time_t)(ms / 1000));
	return out;
}

/* Why u's mail is passed over (k: a route_kind), in words: "unreachable
 * since T (what failed); next probe T". */
static void
why_words(struct buf *o, const struct relay_status *rs, const struct rs_up *u, int k)
{
	char a[32], b[32];

	switch (k) {
	case RK_UNREACHABLE:
		buf_printf(o, "unreachable since %s (%s); ", ms_iso(a, sizeof a, u->st.down_since),
		    u->down_reason ? u->down_reason : "?");
		if (u->st.probe_out)
			buf_adds(o, "a probe is out");
		else
			buf_printf(o, "next probe %s", ms_iso(b, sizeof b, u->st.probe_at));
		break;
	case RK_AUTH:
		buf_printf(o, "authentication refused since %s; ", ms_iso(a, sizeof a,
		    u->st.auth_since));
		if (u->st.auth_until > rs->gnow_ms)
			buf_printf(o, "suspended until %s", ms_iso(b, sizeof b, u->st.auth_until));
		else
			buf_adds(o, "one probe at a time");
		break;
	case RK_THROTTLED:
		buf_printf(o, "throttled until %s", ms_iso(a, sizeof a, u->st.susp_until));
		break;
	case RK_QUOTA:
		buf_printf(o, "quota: next free slot %s", ms_iso(a, sizeof a, u->st.free_at));
		break;
	default:
		break;
	}
}

/* The state of each upstream that has fallbacks, judged with its own
 * fallback_when: k (the condition, -1 none), the verdict, the upstream
 * its mail goes through. */
static enum route_verdict
primary_state(const struct relay_status *rs, const struct weir_upstream *u,
    const struct rs_up **self, const struct rs_up **via, int *k)
{
	enum route_kind kind;
	enum route_verdict v;
	int64_t until;
	int why, holding;

	*self = up_find((struct relay_status *)rs, u->name);
	*via = route_via((struct relay_status *)rs, u, &why, &holding);
	v = route_judge(&u->when, &(*self)->st, rs->gnow_ms, &kind, &until);
	*k = v == RV_GO ? -1 : (int)kind;
	return v;
}

void
relay_status_routes_text(const struct relay_status *rs, struct buf *o, size_t max)
{
	const struct rs_up *self, *via;
	char d[32];
	size_t i, j;
	int k;

	if (!rs->routing && rs->nroutes == 0)
		return;
	buf_adds(o, "routes (weir-send asks each batch's first upstream first; fallback_when "
	    "passes it over):\n");
	for (i = 0; i < rs->cfg->nupstreams; i++) {
		const struct weir_upstream *u = &rs->cfg->upstreams[i];

		if (u->fallback.n == 0)
			continue;
		switch (primary_state(rs, u, &self, &via, &k)) {
		case RV_AVOID:
		case RV_PROBE:
			buf_printf(o, "  %s: passed over: ", u->name);
			why_words(o, rs, self, k);
			buf_printf(o, "; its mail goes through %s\n", via ? via->name : "?");
			break;
		case RV_HOLD:
			buf_printf(o, "  %s: holding its mail: ", u->name);
			why_words(o, rs, self, k);
			buf_printf(o, "; its fallbacks after %s\n", ms_iso(d, sizeof d,
			    self->st.down_since + u->when.s[RK_UNREACHABLE] * 1000));
			break;
		default:
			/* Its fallback_when does not name its trouble: the mail
			 * waits for it (issue 31: not "takes its mail"). */
			if (self->st.auth_until > rs->gnow_ms)
				buf_printf(o, "  %s: keeps its mail: authentication suspended "
				    "until %s\n", u->name, ms_iso(d, sizeof d, self->st.auth_until));
			else if (self->st.susp_until > rs->gnow_ms)
				buf_printf(o, "  %s: keeps its mail: suspended until %s\n", u->name,
				    ms_iso(d, sizeof d, self->st.susp_until));
			else if (self->st.down_since)
				buf_printf(o, "  %s: keeps its mail: unreachable since %s\n", u->name,
				    ms_iso(d, sizeof d, self->st.down_since));
			else
				buf_printf(o, "  %s: takes its mail%s\n", u->name,
				    self->st.auth_since ? ", one probe at a time" : "");
			break;
		}
	}
	buf_adds(o, "waiting messages and the upstream each will go through:\n");
	for (i = 0, j = 0; i < rs->nroutes && j < max; j++) {
		const char *qid = rs->routes[i].qid;

		buf_printf(o, "  msg %s: ", qid);
		for (k = 0; i < rs->nroutes && strcmp(rs->routes[i].qid, qid) == 0; i++, k++) {
			const struct rs_route *r = &rs->routes[i];

			buf_printf(o, "%s%llu recipient%s via %s", k ? "; " : "", r->recipients,
			    r->recipients == 1 ? "" : "s", r->via);
			if (r->why >= 0) {
				buf_printf(o, " (%s ", r->primary);
				why_words(o, rs, up_find((struct relay_status *)rs, r->primary), r->why);
				buf_addc(o, ')');
			} else if (r->why == RS_WHY_OPERATOR) {
				buf_adds(o, " (requeued there by the operator)");
			} else if (r->holding) {
				buf_adds(o, " (held there: ");
				why_words(o, rs, up_find((struct relay_status *)rs, r->via), RK_UNREACHABLE);
				buf_addc(o, ')');
			}
		}
		buf_addc(o, '\n');
	}
	if (i < rs->nroutes || rs->routes_left_out)
		buf_printf(o, "  ... and more (weir status --json lists up to %d messages)\n",
		    RS_ROUTES_MAX);
	if (rs->nroutes == 0)
		buf_adds(o, "  none\n");
}

/* Item 5 as JSON: "routes". */
static void
routes_json(const struct relay_status *rs, struct buf *o)
{
	static const char *const verdicts[] = { "go", "probe", "hold", "avoid" };
	const struct rs_up *self, *via;
	struct buf w = BUF_INIT;
	enum route_verdict v;
	size_t i, n = 0;
	int k;

	buf_printf(o, "{\"configured\":%s,\"upstreams\":[", rs->routing ? "true" : "false");
	for (i = 0; rs->routing && i < rs->cfg->nupstreams; i++) {
		const struct weir_upstream *u = &rs->cfg->upstreams[i];

		if (u->fallback.n == 0)
			continue;
		v = primary_state(rs, u, &self, &via, &k);
		buf_adds(o, n++ ? ",{\"name\":" : "{\"name\":");
		json_cstr(o, u->name);
		buf_printf(o, ",\"verdict\":\"%s\",\"why\":", verdicts[v]);
		json_cstr(o, k >= 0 ? route_kind_word((enum route_kind)k) : NULL);
		buf_adds(o, ",\"via\":");
		json_cstr(o, via ? via->name : NULL);
		buf_adds(o, ",\"detail\":");
		buf_reset(&w);
		if (k >= 0)
			why_words(&w, rs, self, k);
		json_cstr(o, k >= 0 ? buf_cstr(&w) : NULL);
		buf_addc(o, '}');
	}
	buf_adds(o, "],\"messages\":[");
	for (i = 0; i < rs->nroutes; i++) {
		const struct rs_route *r = &rs->routes[i];

		buf_adds(o, i ? ",{\"queue_id\":" : "{\"queue_id\":");
		json_cstr(o, r->qid);
		buf_printf(o, ",\"recipients\":%llu,\"via\":", r->recipients);
		json_cstr(o, r->via);
		buf_adds(o, ",\"primary\":");
		json_cstr(o, r->primary);
		buf_adds(o, ",\"why\":");
		json_cstr(o, r->why >= 0 ? route_kind_word((enum route_kind)r->why) :
		    r->why == RS_WHY_OPERATOR ? "operator" : r->holding ? "unreachable" : NULL);
		buf_printf(o, ",\"held_there\":%s}", r->holding ? "true" : "false");
	}
	buf_printf(o, "],\"messages_left_out\":%llu}", rs->routes_left_out);
	buf_free(&w);
}

void
relay_status_sessions(const struct relay_status *rs, struct buf *o, int json)
{
	const struct weir_config *cfg = rs->cfg;
	struct buf b = BUF_INIT;
	char path[4096], name[POLICY_NAME_MAX + 1], when[32], d[64];
	const char *p, *nl, *sp;
	long long pid, since, sent;
	size_t n = 0;
	int end;

	snprintf(path, sizeof path, "%s/%s", cfg->queue_dir, SCHED_SESSIONS);
	if (read_file_at(AT_FDCWD, path, &b, 1 << 20) < 0) {
		if (json)
			buf_adds(o, "null");
		else
			buf_printf(o, "sessions with the upstreams: unknown (%s: %s)\n", path,
			    errno == ENOENT ? "weir-send has not run" : strerror(errno));
		buf_free(&b);
		return;
	}
	buf_adds(o, json ? "[" : "sessions with the upstreams (weir-send):\n");
	for (p = b.s; p && *p; p = nl + 1) {
		if ((nl = strchr(p, '\n')) == NULL)
			break;
		sp = memchr(p, ' ', (size_t)(nl - p));
		end = 0;
		if (sp == NULL || sp == p || sp - p > POLICY_NAME_MAX ||
		    sscanf(sp, " %lld %lld %lld%n", &pid, &since, &sent, &end) != 3 ||
		    sp + end != nl || pid <= 0 || since < 0 || sent < 0)
			continue;
		memcpy(name, p, (size_t)(sp - p));
		name[sp - p] = '\0';
		date_iso(when, sizeof when, (time_t)since);
		if (json) {
			buf_adds(o, n ? ",{\"upstream\":" : "{\"upstream\":");
			json_cstr(o, name);
			buf_printf(o, ",\"pid\":%lld,\"since\":\"%s\",\"messages\":%lld}", pid,
			    when, sent);
		} else {
			duration_format(d, sizeof d, rs->now > since ? (long long)rs->now - since : 0);
			buf_printf(o, "  upstream %s: pid %lld, open %s (since %s), %lld message%s\n",
			    name, pid, d, when, sent, sent == 1 ? "" : "s");
		}
		n++;
	}
	if (json)
		buf_addc(o, ']');
	else if (n == 0)
		buf_adds(o, "  none open\n");
	buf_free(&b);
}

void
relay_status_oauth_json(const struct weir_config *cfg, time_t now, struct buf *o)
{
	struct oauth_status st;
	struct buf why = BUF_INIT;
	char when[32];
	size_t i, n = 0;
	int have;

	for (i = 0; i < cfg->nupstreams; i++) {
		const struct weir_upstream *u = &cfg->upstreams[i];

		if (!u->oauth.present)
			continue;
		buf_reset(&why);
		have = oauth_status_load(&u->oauth, &st, &why) == 1;
		buf_adds(o, n++ ? ",{\"upstream\":" : "{\"upstream\":");
		json_cstr(o, u->name);
		buf_printf(o, ",\"token\":%s,\"login_needed\":%s", have ? "true" : "false",
		    !have || st.login_needed ? "true" : "false");
		if (have) {
			date_iso(when, sizeof when, (time_t)st.expires_at);
			buf_printf(o, ",\"access_expires\":\"%s\",\"refresh_token_age_s\":%lld", when,
			    (long long)now - st.refresh_since);
			buf_adds(o, ",\"error\":");
			json_cstr(o, st.error_at ? st.error : NULL);
		}
		buf_addc(o, '}');
	}
	buf_free(&why);
}

static void
json_count(struct buf *o, const char *name, const struct rs_count *c)
{
	buf_printf(o, "\"%s\":{\"messages\":%llu,\"recipients\":%llu", name, c->messages,
	    c->recipients);
}

void
relay_status_json(const struct relay_status *rs, struct buf *o)
{
	const struct buf *gjson = &rs->gjson;
	char when[32];
	size_t i, n;

	buf_adds(o, "{\"gate_socket\":");
	json_cstr(o, rs->gsock);
	n = gjson->len;
	while (n > 0 && (gjson->s[n - 1] == '\n' || gjson->s[n - 1] == ' '))
		n--;
	/* The gate's own document, if it looks like one. */
	if (rs->gate_ok && n >= 2 && gjson->s[0] == '{' && gjson->s[n - 1] == '}') {
		buf_adds(o, ",\"gate\":");
		buf_add(o, gjson->s, n);
		buf_adds(o, ",\"gate_error\":null");
	} else {
		buf_adds(o, ",\"gate\":null,\"gate_error\":");
		json_cstr(o, rs->gate_ok ? "the gate's JSON status is not an object" :
		    rs->gwhy.s);
	}
	buf_adds(o, ",\n\"queue\":{\"dir\":");
	json_cstr(o, rs->cfg->queue_dir);
	buf_adds(o, ",\"read_from\":");
	json_cstr(o, rs->qsrc);
	buf_adds(o, ",\"error\":");
	json_cstr(o, rs->q_ok ? NULL : rs->qwhy.s);
	buf_printf(o, ",\"messages\":%llu,\"not_yet_preprocessed\":%llu,"
	    "\"recipients_not_done\":%llu,\"trouble\":%llu,", rs->messages, rs->todo,
	    rs->rcpt_left, rs->trouble);
	if (rs->have_oldest) {
		date_iso(when, sizeof when, rs->oldest);
		buf_printf(o, "\"oldest_queue_time\":\"%s\",\"oldest_age_s\":%lld", when,
		    rs->now > rs->oldest ? (long long)(rs->now - rs->oldest) : 0);
	} else
		buf_adds(o, "\"oldest_queue_time\":null,\"oldest_age_s\":null");
	buf_adds(o, ",\"states\":{");
	json_count(o, "not_yet_preprocessed", &rs->not_preprocessed);
	buf_adds(o, "},");
	json_count(o, "waiting", &rs->waiting);
	buf_adds(o, "},");
	json_count(o, "deferred", &rs->deferred);
	buf_adds(o, ",\"reasons\":[");
	for (i = 0; i < rs->nreasons; i++) {
		buf_adds(o, i ? ",{\"reply\":" : "{\"reply\":");
		json_cstr(o, rs->reasons[i].reply);
		buf_printf(o, ",\"recipients\":%llu}", rs->reasons[i].recipients);
	}
	buf_printf(o, "],\"other_reasons\":%llu},", rs->reasons_other);
	json_count(o, "held", &rs->held);
	buf_adds(o, "}}}");
	buf_adds(o, ",\n\"routes\":");
	routes_json(rs, o);
	buf_adds(o, ",\n\"sessions\":");
	relay_status_sessions(rs, o, 1);
	buf_adds(o, ",\n\"oauth\":[");
	relay_status_oauth_json(rs->cfg, rs->now, o);
	buf_addc(o, ']');
	buf_adds(o, ",\n\"drain_estimate\":{\"lower_bound\":true,\"windows_from\":");
	json_cstr(o, rs->winsrc);
	buf_adds(o, ",\"upstreams\":[");
	for (i = 0; i < rs->nup; i++) {
		const struct rs_up *u = &rs->up[i];

		buf_adds(o, i ? ",{\"name\":" : "{\"name\":");
		json_cstr(o, u->name);
		buf_adds(o, ",\"preset\":");	/* weir.conf's preset key, or null */
		if (rs->cfg->upstreams[i].preset)
			json_cstr(o, rs->cfg->upstreams[i].preset);
		else
			buf_adds(o, "null");
		buf_printf(o, ",\"messages\":%llu,\"recipients\":%llu,\"sends\":%llu,"
		    "\"suspended_s\":%lld,\"seconds\":", u->messages, u->recipients, u->sends,
		    u->suspended);
		if (u->estimate < 0)
			buf_adds(o, "null");
		else
			buf_printf(o, "%lld", u->estimate);
		buf_adds(o, ",\"at_least_s\":");
		if (u->at_least < 0)
			buf_adds(o, "null");
		else
			buf_printf(o, "%lld", u->at_least);
		buf_adds(o, ",\"limited_by\":");
		if (u->bottleneck)
			buf_printf(o, "{\"limit\":%lld,\"unit\":\"%s\",\"per_s\":%lld,\"used\":%lld,"
			    "\"calendar\":%s}", u->bottleneck->limit,
			    policy_unit_name(u->bottleneck->unit), u->bottleneck->per,
			    u->bottleneck->used, u->bottleneck->calendar ? "true" : "false");
		else
			buf_adds(o, "null");
		buf_addc(o, '}');
	}
	buf_printf(o, "],\"unpaced\":{\"messages\":%llu,\"recipients\":%llu}}}\n",
	    rs->other.messages, rs->other.recipients);
}
