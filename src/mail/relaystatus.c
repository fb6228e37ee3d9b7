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
	for (i = 0; i < qm->nitems; i++)
		if (!qm->items[i].trouble && !qm->items[i].done)
			m.left++;
	if (qm->head) {
		m.sender = xmalloc(qm->sender_len + 1);
		memcpy(m.sender, qm->text.s + qm->sender_off, qm->sender_len);
		m.sender[qm->sender_len] = '\0';
	}
	count_msg(rs, &m);
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
	for (i = 0; i < jp_len(rc); i++) {
		if ((st = jp_str(jp_get(r = jp_at(rc, i), "state"))) == NULL)
			return -1;
		m.left += strcmp(st, "done") != 0;
	}
	count_msg(rs, &m);
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

/* One STATUS request (JSON with the history when json); the body into
 * body.  0 ok, -1 with why. */
static int
gate_ask_one(struct gate_client *gc, int json, struct buf *body, struct buf *why)
{
	struct gp_reply r;
	const char *perr = "the gate closed the connection";
	int k;

	if ((json ? gc_status_history(gc, RS_HISTORY_S) : gc_status(gc, 0)) < 0) {
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
	if (gate_ask_one(&gc, 0, &rs->gtext, &rs->gwhy) < 0 ||
	    (json && gate_ask_one(&gc, 1, &rs->gjson, &rs->gwhy) < 0))
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
	buf_free(&perr);
	rs->nup = cfg->nupstreams;
	rs->up = xcalloc(rs->nup + 1, sizeof *rs->up);
	for (i = 0; i < rs->nup; i++) {
		const struct policy_upstream *pu = rs->have_pol ?
		    policy_upstream(&rs->pol, cfg->upstreams[i].name) : NULL;

		rs->up[i].name = cfg->upstreams[i].name;
		rs->up[i].cap = cfg->upstreams[i].max_recipients;
		if (pu && pu->max_recipients && (unsigned long long)pu->max_recipients <
		    rs->up[i].cap)
			rs->up[i].cap = (unsigned)pu->max_recipients;
	}
	rs->gate_ok = gate_ask(rs, flags & RS_JSON) == 0;
	if (rs->gate_ok)
		gate_numbers(rs, rs->gtext.s ? rs->gtext.s : "");
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

	for (i = 0; i < rs->nup; i++)
		free(rs->up[i].win);
	free(rs->up);
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
