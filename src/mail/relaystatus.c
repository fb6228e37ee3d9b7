/*
 * relaystatus.c: see relaystatus.h.
 * Trusts: the gate as far as gateproto.c parses it, weir-showq as far as
 * lib/jsonparse.c does, nothing in the queue.  Config keys: those of
 * relaystatus.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/json.h"
#include "lib/jsonparse.h"
#include "lib/timefmt.h"
#include "mail/credfp.h"
#include "mail/gateclient.h"
#include "mail/gatestatus.h"
#include "mail/oauth.h"
#include "mail/qlist.h"
#include "mail/qsummary.h"
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

/* n recipients of message m that go through upstream sp: the backlog
 * its windows pace, and a deferred message's retry time (item 3). */
static void
up_add(struct relay_status *rs, struct rs_up *sp, unsigned long long n, const struct rs_msg *m)
{
	sp->messages++;
	sp->recipients += n;
	sp->sends += sp->cap ? (n + sp->cap - 1) / sp->cap : 1;
	if (m->preprocessed && !m->held && m->next_attempt > (long long)rs->now) {
		sp->deferred++;
		if (m->next_attempt > sp->retry_last)
			sp->retry_last = m->next_attempt;
	}
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
	for (j = 0; j < n; j++)
		up_add(rs, up_find(rs, mine[j].via), mine[j].recipients, m);
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
	up_add(rs, sp ? sp : &rs->other, m->left, m);
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

/* One line of weir-showq's listing at *p (before end): its start and
 * length without the newline; *p moves past it.  NULL: no newline. */
static const char *
next_line(const char **p, const char *end, size_t *n)
{
	const char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));

	if (nl == NULL)
		return NULL;
	*n = (size_t)(nl - s);
	*p = nl + 1;
	return s;
}

/*
 * The queue through weir-showq (this process may not read it): its JSON
 * listing, which qlist.c writes a message per line, read a line at a
 * time from the memory it was written to.  A queue of 100,000 is a
 * listing of 30 MB: read and parsed whole, it was not counted beyond 16
 * MB (issue 36).  The message lines are each parsed strictly, the last
 * line too, and the count it gives must be the messages read.
 */
static int
queue_by_showq(struct relay_status *rs, int showq_ms)
{
	static const char head[] = "{\"messages\":[";
	struct buf why = BUF_INIT, tail = BUF_INIT;
	struct json_object *o = NULL;
	const char *text = MAP_FAILED, *p, *end, *line;
	size_t i = 0, n, len = 0;
	long long count;
	struct stat st;
	int fd, k, comma = 0, rc = -1;

	rs->qsrc = rs->cfg->showq_socket;
	if ((fd = memfd_create("weir-showq", MFD_CLOEXEC)) < 0) {
		buf_printf(&rs->qwhy, "memfd_create: %s", strerror(errno));
		return -1;
	}
	k = showq_ask(rs->cfg->showq_socket, QLIST_JSON, fd, showq_ms, &why);
	if (k < 0) {
		buf_printf(&rs->qwhy, "%s", why.s);
		goto out;
	}
	if (fstat(fd, &st) < 0 || (len = (size_t)st.st_size) > RS_SHOWQ_MAX ||
	    (len > 0 && (text = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)) {
		buf_printf(&rs->qwhy, "weir-showq's listing: %s", len > RS_SHOWQ_MAX ?
		    "larger than 1 GB: not counted" : strerror(errno));
		goto out;
	}
	p = len > 0 ? text : "";
	end = p + len;
	if (len < sizeof head - 1 || memcmp(p, head, sizeof head - 1) != 0) {
		buf_adds(&rs->qwhy, "weir-showq's listing has no messages");
		goto out;
	}
	p += sizeof head - 1;
	if (p < end && *p == '\n') {
		for (p++; (line = next_line(&p, end, &n)) != NULL && n > 0 && *line == '{'; i++) {
			/* Each after a comma, the last without one. */
			if (i > 0 && !comma)
				break;
			if ((comma = line[n - 1] == ','))
				n--;
			if ((o = json_parse_object(line, n, n, &why)) == NULL ||
			    count_listed(rs, o) < 0) {
				buf_printf(&rs->qwhy, "weir-showq's listing: message %zu is not one%s%s",
				    i, why.len ? ": " : "", buf_cstr(&why));
				goto out;
			}
			json_object_put(o);
			o = NULL;
		}
		p = line;
	}
	/* "],"messages_in_queue":N,"not_yet_preprocessed":M}\n", read as
	 * the object it ends. */
	if (p == NULL || p >= end || *p != ']' || end[-1] != '\n' || comma) {
		buf_adds(&rs->qwhy, "weir-showq's listing is cut short");
		goto out;
	}
	buf_adds(&tail, "{\"messages\":null");
	buf_add(&tail, p + 1, (size_t)(end - p - 2));
	if ((o = json_parse_object(tail.s, tail.len, tail.len, &why)) == NULL ||
	    jp_u53(jp_get(o, "messages_in_queue"), &count) < 0 || count != (long long)i) {
		buf_printf(&rs->qwhy, "weir-showq's listing: %zu messages, not as it ends%s%s", i,
		    why.len ? ": " : "", buf_cstr(&why));
		goto out;
	}
	rc = 0;
out:
	json_object_put(o);
	if (text != MAP_FAILED)
		munmap((void *)text, len);
	close(fd);
	buf_free(&tail);
	buf_free(&why);
	return rc;
}

static int
queue_read(struct relay_status *rs, int showq_ms)
{
	struct qlist_stats qs;
	struct queue q;
	int rc;

	if (rs->cfg->showq_socket && showq_needed(rs->cfg->queue_dir) == 1)
		return queue_by_showq(rs, showq_ms);
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
		    "no answer in time" : perr);
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
 * rs->gsock is the one that answered.  The JSON document, with the
 * history for RS_JSON; the text too for RS_GATE_TEXT (to be printed,
 * never read).  Each answer within timeout_ms. */
static int
gate_ask(struct relay_status *rs, int flags, int timeout_ms)
{
	struct gate_client gc;
	const char *used;
	int rc = -1;

	rs->gsock = rs->cfg->gate_socket;
	if ((used = gc_connect_status(&gc, rs->cfg->gate_socket,
	    rs->cfg->gate_status_socket, timeout_ms)) == NULL) {
		buf_printf(&rs->gwhy, "%s", errno == EAGAIN ? "its socket's backlog is full: it "
		    "does not accept" : strerror(errno));
		return -1;
	}
	rs->gsock = used;
	if (gate_ask_one(&gc, flags & RS_JSON ? 2 : 1, &rs->gjson, &rs->gwhy) < 0 ||
	    ((flags & RS_GATE_TEXT) && gate_ask_one(&gc, 0, &rs->gtext, &rs->gwhy) < 0))
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

/* A time member of the gate's JSON, wall ms; 0 when absent or null. */
static int64_t
ms_of(struct json_object *o, const char *key)
{
	long long v;

	return jp_ll(jp_get(o, key), &v) == 0 && v > 0 ? (int64_t)v : 0;
}

/* Window w of the gate's document into u: its use (every host's, as
 * Redis counts it, when that is higher: it paces the backlog), and a
 * calendar window's boundaries from its period's start.  A window that
 * does not read is left out of the estimate, never guessed. */
static void
gate_window(struct rs_up *u, struct json_object *w)
{
	long long limit, per, used, all, start = 0;
	enum policy_unit unit;
	int cal = jp_bool(jp_get(w, GS_W_CALENDAR)) == 1;
	const char *us = jp_str(jp_get(w, GS_W_UNIT));

	if (jp_ll(jp_get(w, GS_W_LIMIT), &limit) < 0 || jp_ll(jp_get(w, GS_W_PER_S), &per) < 0 ||
	    jp_ll(jp_get(w, GS_W_USED), &used) < 0 || us == NULL ||
	    policy_unit_parse(us, &unit) < 0 || limit <= 0 || per <= 0 ||
	    (cal && jp_ll(jp_get(w, GS_W_PERIOD_START_MS), &start) < 0))
		return;
	if (jp_ll(jp_get(jp_get(w, GS_W_ALL_HOSTS), GS_W_USED), &all) == 0 && all > used)
		used = all;
	add_win(u, limit, unit, per, used, cal, cal ? (start / 1000) % per : 0);
}

/* The drain's progress of sp (gatestatus.h): the sends of upstream u's
 * history since its backlog began (or the history's start, if later),
 * each with a recipient accepted (or not known: a send the journal gave
 * back). */
static void
gate_progress(struct rs_up *sp, struct json_object *u)
{
	struct json_object *h = jp_get(u, GS_HISTORY), *sends = jp_get(h, GS_H_SENDS), *e;
	long long t, m, ok;
	size_t i;

	sp->backlog_since = ms_of(u, GS_BACKLOG_SINCE_MS);
	sp->progress_from = ms_of(h, GS_H_COMPLETE_SINCE_MS);
	if (sp->backlog_since == 0 || h == NULL)
		return;
	if (sp->progress_from < sp->backlog_since)
		sp->progress_from = sp->backlog_since;
	sp->sent_since = 0;
	for (i = 0; i < jp_len(sends); i++) {
		e = jp_at(sends, i);
		if (jp_ll(jp_at(e, GS_SEND_T), &t) == 0 && t >= sp->progress_from &&
		    jp_ll(jp_at(e, GS_SEND_M), &m) == 0 && m > 0 &&
		    (jp_at(e, GS_SEND_ACCEPTED) == NULL ||
		    (jp_ll(jp_at(e, GS_SEND_ACCEPTED), &ok) == 0 && ok > 0)))
			sp->sent_since++;
	}
}

/* What the estimate, the routes and the summary need of the gate's
 * JSON (kept in rs->gdoc): each upstream's windows and their use, its
 * suspensions' time left, its state for route.h's judge (wall ms), its
 * backlog's progress. */
static void
gate_read(struct relay_status *rs)
{
	struct buf why = BUF_INIT;
	struct json_object *doc, *ups, *u, *r, *wins;
	struct rs_up *sp;
	long long v;
	int64_t until;
	size_t i, j;

	doc = json_parse_strict(rs->gjson.s ? rs->gjson.s : "", rs->gjson.len, GP_STATUS_MAX, &why);
	ups = jp_get(doc, GS_UPSTREAMS);
	if (jp_ll(jp_get(doc, GS_NOW_MS), &v) == 0 && v > 0)
		rs->gnow_ms = v;
	for (i = 0; i < jp_len(ups); i++) {
		u = jp_at(ups, i);
		if (jp_str(jp_get(u, GS_NAME)) == NULL ||
		    (sp = up_find(rs, jp_str(jp_get(u, GS_NAME)))) == NULL)
			continue;
		sp->listed = 1;
		/* Not in the policy: the gate refuses it, nothing to go by. */
		sp->known = jp_bool(jp_get(u, GS_IN_POLICY)) == 1;
		wins = jp_get(u, GS_WINDOWS);
		for (j = 0; sp->known && j < jp_len(wins); j++)
			gate_window(sp, jp_at(wins, j));
		r = jp_get(u, GS_ROUTE);
		sp->st.down_since = ms_of(r, GS_R_UNREACHABLE_SINCE_MS);
		sp->st.probe_at = ms_of(r, GS_R_PROBE_AT_MS);
		sp->st.probe_out = jp_bool(jp_get(r, GS_R_PROBE_OUT)) == 1;
		sp->st.auth_since = ms_of(r, GS_R_AUTH_SINCE_MS);
		sp->st.auth_until = ms_of(u, GS_AUTH_UNTIL_MS);
		sp->st.auth_probe_out = jp_bool(jp_get(r, GS_R_AUTH_PROBE_OUT)) == 1;
		sp->st.susp_until = ms_of(u, GS_SUSPENDED_UNTIL_MS);
		sp->st.free_at = ms_of(r, GS_R_FREE_AT_MS) ? ms_of(r, GS_R_FREE_AT_MS) : -1;
		if (sp->st.down_since && jp_str(jp_get(r, GS_R_UNREACHABLE_REASON)))
			sp->down_reason = xstrdup(jp_str(jp_get(r, GS_R_UNREACHABLE_REASON)));
		/* The suspension that ends last, in whole seconds. */
		until = sp->st.susp_until > sp->st.auth_until ? sp->st.susp_until : sp->st.auth_until;
		if (until > rs->gnow_ms)
			sp->suspended = (until - rs->gnow_ms + 999) / 1000;
		gate_progress(sp, u);
	}
	rs->gdoc = doc;
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
	/* Deferred mail goes no sooner than its retry time. */
	if (u->estimate >= 0 && u->retry_last > (long long)now &&
	    u->retry_last - (long long)now > u->estimate) {
		u->estimate = u->retry_last - (long long)now;
		u->retry_bound = 1;
	}
}

/* ---- the summary (relaystatus.h, item 0) ---- */

static void PRINTFLIKE(4, 5)
problem(struct relay_status *rs, const char *upstream, const char *todo, const char *fmt, ...)
{
	struct rs_problem *p;
	char what[2048];
	va_list ap;

	rs->problems = xrealloc(rs->problems, (rs->nproblems + 1) * sizeof *rs->problems);
	p = &rs->problems[rs->nproblems++];
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	p->upstream = upstream;
	p->what = xstrdup(what);
	p->todo = todo ? xstrdup(todo) : NULL;
}

/* An upstream's trouble, from the gate's document u (NULL: not listed)
 * and its OAuth status. */
static void
up_problems(struct relay_status *rs, const struct weir_upstream *cu, struct json_object *u)
{
	const struct rs_up *sp = up_find(rs, cu->name);
	struct oauth_status st;
	struct buf fix = BUF_INIT, why = BUF_INIT;
	char when[32];
	const char *s;

	if (cu->oauth.present && (oauth_status_load(&cu->oauth, &st, &why) != 1 || st.login_needed)) {
		buf_printf(&fix, "weir auth login %s", cu->name);
		problem(rs, cu->name, fix.s, "its OAuth provider refuses the refresh token, or there "
		    "is none yet: its mail waits");
	}
	if (u == NULL)
		goto out;
	if (jp_bool(jp_get(u, GS_IN_POLICY)) == 0) {
		buf_reset(&fix);
		buf_printf(&fix, "add an upstream \"%s\" section to %s", cu->name, rs->cfg->policy_file);
		problem(rs, cu->name, fix.s, "no policy names it: weir-gate grants nothing");
	}
	if (sp->st.auth_until > rs->gnow_ms) {
		buf_reset(&fix);
		cred_fix(&fix, cu->name, cu->oauth.present, jp_str(jp_get(u, GS_AUTH_REASON)));
		buf_printf(&fix, "; weir resume %s tries again now", cu->name);
		date_iso(when, sizeof when, (time_t)(sp->st.auth_until / 1000));
		problem(rs, cu->name, fix.s, "authentication refused: suspended until %s (%s)", when,
		    (s = jp_str(jp_get(u, GS_AUTH_REASON))) ? s : "");
	}
	if (sp->st.susp_until > rs->gnow_ms) {
		buf_reset(&fix);
		buf_printf(&fix, "weir resume %s lifts it", cu->name);
		date_iso(when, sizeof when, (time_t)(sp->st.susp_until / 1000));
		problem(rs, cu->name, fix.s, "suspended until %s%s: it said %s", when,
		    jp_bool(jp_get(u, GS_SUSPEND_QUOTA)) == 1 ? " (its quota)" : "",
		    (s = jp_str(jp_get(u, GS_SUSPEND_REASON))) ? s : "");
	}
	if (sp->st.down_since) {
		date_iso(when, sizeof when, (time_t)(sp->st.down_since / 1000));
		problem(rs, cu->name, cu->fallback.n ? "its mail goes to its fallbacks meanwhile" :
		    NULL, "unreachable since %s (%s): probed until it answers", when,
		    sp->down_reason ? sp->down_reason : "?");
	}
	if ((s = jp_str(jp_get(u, GS_SHARED))) && strcmp(s, "down") == 0)
		problem(rs, cu->name, NULL, "its shared store does not answer (%s): weir-gate grants "
		    "nothing", (s = jp_str(jp_get(u, GS_SHARED_ERROR))) ? s : "?");
out:
	buf_free(&fix);
	buf_free(&why);
}

/* The problems, and the line that says them first. */
static void
summarize(struct relay_status *rs)
{
	struct json_object *ups = jp_get(rs->gdoc, GS_UPSTREAMS), *u;
	const char *n, *s;
	char d[64];
	size_t i, j;

	if (!rs->gate_ok)
		problem(rs, NULL, "see that weir runs (weir run, or systemctl status weir) and its "
		    "log", "weir-gate is not answering (%s): nothing is sent", buf_cstr(&rs->gwhy));
	else if (jp_bool(jp_get(rs->gdoc, GS_JOURNAL_DURABLE)) == 0)
		problem(rs, NULL, "see weir-gate's log", "weir-gate's journal is not durable (%s): "
		    "nothing is granted", (s = jp_str(jp_get(rs->gdoc, GS_JOURNAL_ERROR))) ? s : "?");
	if (!rs->q_ok)
		problem(rs, NULL, NULL, "the queue cannot be read (%s)", buf_cstr(&rs->qwhy));
	if (rs->cfg->nupstreams == 0)
		problem(rs, NULL, "dpkg-reconfigure weir, or an upstream section; weir presets",
		    "no upstream is configured in %s: mail is queued and nothing is sent",
		    rs->cfg->file ? rs->cfg->file : "weir.conf");
	for (i = 0; i < rs->cfg->nupstreams; i++) {
		const struct weir_upstream *cu = &rs->cfg->upstreams[i];

		for (j = 0, u = NULL; j < jp_len(ups); j++)
			if ((n = jp_str(jp_get(jp_at(ups, j), GS_NAME))) && strcmp(n, cu->name) == 0)
				u = jp_at(ups, j);
		up_problems(rs, cu, u);
	}
	if (rs->nproblems > 0) {
		const struct rs_problem *p = &rs->problems[0];

		buf_printf(&rs->line, "%zu problem%s: %s%s%s", rs->nproblems,
		    rs->nproblems == 1 ? "" : "s", p->upstream ? "upstream " : "",
		    p->upstream ? p->upstream : "", p->upstream ? ": " : "");
		buf_adds(&rs->line, p->what);
		if (p->todo)
			buf_printf(&rs->line, " (%s)", p->todo);
		if (rs->nproblems > 1)
			buf_printf(&rs->line, "; and %zu more", rs->nproblems - 1);
		return;
	}
	buf_printf(&rs->line, "mail flows: %zu upstream%s active", rs->nup, rs->nup == 1 ? "" :
	    "s");
	if (rs->messages == 0)
		buf_adds(&rs->line, "; the queue is empty");
	else {
		duration_format(d, sizeof d, rs->now > rs->oldest ? (long long)(rs->now -
		    rs->oldest) : 0);
		buf_printf(&rs->line, "; %llu message%s queued, the oldest %s old", rs->messages,
		    rs->messages == 1 ? "" : "s", d);
	}
}

/* ---- gathering ---- */

static void
begin(struct relay_status *rs, const struct weir_config *cfg)
{
	struct buf perr = BUF_INIT;
	size_t i;

	memset(rs, 0, sizeof *rs);
	rs->cfg = cfg;
	rs->now = time(NULL);
	rs->gnow_ms = (long long)rs->now * 1000;
	rs->have_pol = policy_load(&rs->pol, cfg->policy_file, &perr) == 0;
	if (rs->have_pol)
		config_preset_limits(cfg->upstreams, cfg->nupstreams, &rs->pol);
	buf_free(&perr);
	rs->nup = cfg->nupstreams;
	rs->up = xcalloc(rs->nup + 1, sizeof *rs->up);
	rs->other.st.free_at = -1;
	for (i = 0; i < rs->nup; i++) {
		rs->up[i].st.free_at = -1;	/* not known: no quota reason */
		rs->up[i].sent_since = -1;
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
}

/* Everything after the gate's part. */
static int
finish(struct relay_status *rs, int showq_ms)
{
	const struct weir_config *cfg = rs->cfg;
	size_t i, j;

	if (rs->gate_ok)
		gate_read(rs);
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
	rs->q_ok = queue_read(rs, showq_ms) == 0;
	keep_reasons(rs);
	/* weir-send's kept sessions: sched/sessions, or weir-showq's summary. */
	rs->have_qs = qsummary_get(cfg, showq_ms, &rs->qs, &rs->qs_from, &rs->qs_why) == 0;
	for (i = 0; i < rs->nup; i++) {
		estimate(&rs->up[i], rs->now);
		rs->up[i].at_least = -1;
		if (!rs->gate_ok && rs->up[i].estimate >= 0) {
			/* Nothing goes while the gate is down. */
			rs->up[i].at_least = rs->up[i].estimate;
			rs->up[i].estimate = -1;
		}
	}
	summarize(rs);
	return rs->gate_ok && rs->q_ok;
}

int
relay_status_get(struct relay_status *rs, const struct weir_config *cfg, int flags,
    int gate_ms)
{
	begin(rs, cfg);
	rs->gate_ok = gate_ask(rs, flags, gate_ms) == 0;
	return finish(rs, RS_SHOWQ_TIMEOUT_MS);
}

int
relay_status_from(struct relay_status *rs, const struct weir_config *cfg, const char *gsock,
    const char *gjson, size_t glen, const char *gwhy, int showq_ms)
{
	begin(rs, cfg);
	rs->gsock = gsock;
	if (gjson)
		buf_add(&rs->gjson, gjson, glen);
	else
		buf_adds(&rs->gwhy, gwhy);
	rs->gate_ok = gjson != NULL;
	return finish(rs, showq_ms);
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
	json_object_put(rs->gdoc);
	for (i = 0; i < rs->nproblems; i++) {
		free(rs->problems[i].what);
		free(rs->problems[i].todo);
	}
	free(rs->problems);
	buf_free(&rs->line);
	qsummary_free(&rs->qs);
	buf_free(&rs->qs_why);
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

/* An upstream the verdict lets take its mail, but in trouble its
 * fallback_when does not name: its mail waits for it (issue 31: not
 * "takes its mail").  Says so on o ("keeps its mail: ...") and returns
 * 1; 0 when it is in no such trouble.  The text and the JSON (and so
 * the status page) both say it from here. */
static int
keeps_words(struct buf *o, const struct relay_status *rs, const struct rs_up *self)
{
	char d[32];

	if (self->st.auth_until > rs->gnow_ms)
		buf_printf(o, "keeps its mail: authentication suspended until %s",
		    ms_iso(d, sizeof d, self->st.auth_until));
	else if (self->st.susp_until > rs->gnow_ms)
		buf_printf(o, "keeps its mail: suspended until %s",
		    ms_iso(d, sizeof d, self->st.susp_until));
	else if (self->st.down_since)
		buf_printf(o, "keeps its mail: unreachable since %s",
		    ms_iso(d, sizeof d, self->st.down_since));
	else
		return 0;
	return 1;
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
			buf_printf(o, "  %s: ", u->name);
			if (keeps_words(o, rs, self))
				buf_addc(o, '\n');
			else
				buf_printf(o, "takes its mail%s\n",
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
		buf_adds(o, ",\"keeps\":");
		buf_reset(&w);
		json_cstr(o, v == RV_GO && keeps_words(&w, rs, self) ? buf_cstr(&w) : NULL);
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
	const struct qsummary *q = &rs->qs;
	char when[32], d[64];
	size_t i;

	if (!rs->have_qs || !q->have_sessions) {
		if (json)
			buf_adds(o, "null");
		else
			buf_printf(o, "sessions with the upstreams: unknown (%s)\n", rs->have_qs ?
			    "weir-send has not run" : rs->qs_why.s ? rs->qs_why.s : "?");
		return;
	}
	buf_adds(o, json ? "[" : "sessions with the upstreams (weir-send):\n");
	for (i = 0; i < q->nsessions; i++) {
		const struct schedsession *ss = &q->sessions[i];

		date_iso(when, sizeof when, (time_t)ss->since);
		if (json) {
			buf_adds(o, i ? ",{\"upstream\":" : "{\"upstream\":");
			json_cstr(o, ss->upstream);
			buf_printf(o, ",\"pid\":%lld,\"since\":\"%s\",\"messages\":%lld}", ss->pid,
			    when, ss->messages);
		} else {
			duration_format(d, sizeof d, rs->now > ss->since ? (long long)rs->now -
			    ss->since : 0);
			buf_printf(o, "  upstream %s: pid %lld, open %s (since %s), %lld message%s\n",
			    ss->upstream, ss->pid, d, when, ss->messages, ss->messages == 1 ? "" : "s");
		}
	}
	if (json)
		buf_addc(o, ']');
	else if (q->nsessions == 0)
		buf_adds(o, "  none open\n");
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
	buf_printf(o, ",\n\"summary\":{\"ok\":%s,\"line\":", rs->nproblems ? "false" : "true");
	json_cstr(o, rs->line.s);
	buf_adds(o, ",\"problems\":[");
	for (i = 0; i < rs->nproblems; i++) {
		buf_adds(o, i ? ",{\"upstream\":" : "{\"upstream\":");
		json_cstr(o, rs->problems[i].upstream);
		buf_adds(o, ",\"what\":");
		json_cstr(o, rs->problems[i].what);
		buf_adds(o, ",\"do\":");
		json_cstr(o, rs->problems[i].todo);
		buf_addc(o, '}');
	}
	buf_adds(o, "]}");
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
		buf_printf(o, ",\"deferred\":{\"messages\":%llu,\"last_retry_s\":", u->deferred);
		if (u->retry_last > (long long)rs->now)
			buf_printf(o, "%lld", u->retry_last - (long long)rs->now);
		else
			buf_adds(o, "null");
		buf_printf(o, "},\"retry_bound\":%s,\"progress\":", u->retry_bound ? "true" : "false");
		if (u->sent_since >= 0)
			buf_printf(o, "{\"backlog_since_ms\":%lld,\"from_ms\":%lld,\"sent\":%lld}",
			    u->backlog_since, u->progress_from, u->sent_since);
		else
			buf_adds(o, "null");
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
