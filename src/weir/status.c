/*
 * status.c: `weir [-c FILE] status [--json]`: what the relay is doing.
 *
 *   1. weir-gate's status, asked through mail/gateclient.h (the only way
 *      to speak to the gate): its windows, grants held, waiting requests,
 *      suspension with reason and end.  Printed as the gate wrote it (or,
 *      with --json, its JSON document embedded as "gate").
 *   2. The queue, through qlist_scan (the scan mailq and `weir queue`
 *      use): messages, not yet preprocessed, recipients not done, the
 *      oldest message's queue time and age.
 *   3. An estimate of the time to drain the backlog at the current
 *      policy, per upstream (the upstream of a message is the one weir-
 *      send picks: config_upstream_for its sender):
 *        sends      = sum over messages of ceil(not-done recipients /
 *                     recipients per transaction), each one message and
 *                     one connection for the gate (as weir-remote asks);
 *        for each window (N per T, U already used): weight B of the
 *                     backlog in its unit; sliding: time =
 *                     floor((B + U - 1) / N) * T; calendar (it resets at
 *                     fixed boundaries): 0 if B fits in N - U, else the
 *                     time to the next boundary + floor((B - (N - U) - 1)
 *                     / N) * T;
 *        estimate   = the largest of those, plus what is left of a
 *                     suspension.
 *      It is a lower bound: it assumes every attempt succeeds and counts
 *      no time for the deliveries themselves.  The windows and their use
 *      come from the gate (what it enforces now; a calendar window's
 *      boundaries from policy_file, else UTC midnight's phase); for an
 *      upstream the gate does not list yet, from policy_file with nothing
 *      used.  "unknown" when there is nothing to go by: no policy for the
 *      upstream (the gate would refuse it), or weir-gate not answering
 *      (nothing is sent until it does: the policy's figure is then
 *      given as what it will take at least once the gate is back).
 *   4. For each upstream with an oauth section, its token's state from
 *      the token status file (auth.c; no secret in it): when the access
 *      token expires, the refresh token's age, the last refresh error,
 *      and "LOGIN NEEDED ... run weir auth login NAME" while the
 *      provider refuses the refresh token (--json: "oauth").
 *
 * The gate's text status is read for the numbers of step 3 (lines
 * "upstream NAME: ..." and "  window N UNIT per Ts...: ... = U of N", as
 * src/gate/status.c writes them, and for an upstream whose windows are
 * shared through Redis the line below each, "    all hosts: ... = U of
 * N", every host's use, which counts when it is higher); a line that
 * does not parse leaves that window out of the estimate, it is never
 * guessed.  The gate's text, printed as it is, shows the shared store,
 * whether it answers, and both counts of each window.
 *
 * --watch shows a short form of the same every second, on a timer (no
 * busy loop), until SIGINT or SIGTERM: each window as a bar of its use
 * of the limit, and the drain estimate.  On a terminal the screen is
 * cleared for each frame; otherwise the frames follow one another, each
 * starting with a blank line and "weir status at TIME".
 *
 * Exit 0; 1 when the gate did not answer or the queue could not be read
 * (everything else is printed all the same); 2 for bad usage.
 *
 * Trusts: the gate's replies as far as gateproto.c parses them, nothing
 * in the queue.  Config keys: gate_socket, gate_status_socket (asked
 * when gate_socket cannot be reached), policy_file, queue_dir,
 * queue_split, upstream sections (names, senders, max_recipients,
 * oauth).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/gateclient.h"
#include "mail/policy.h"
#include "mail/qlist.h"
#include "mail/queue.h"
#include "mail/schedfile.h"
#include "weir/weir.h"

#define GATE_TIMEOUT_S 5

struct swin {
	long long limit, per, used;
	enum policy_unit unit;
	int calendar;
	long long align;	/* calendar: boundaries at align (mod per), UTC */
};

/* Per upstream: the backlog, and the windows that pace it. */
struct sup {
	char *name;
	unsigned long long messages, recipients, sends;
	unsigned cap;			/* recipients per transaction */
	struct swin *win;
	size_t nwin;
	int known;			/* windows known (gate or policy) */
	long long suspended;		/* seconds left, from the gate */
	long long estimate;		/* seconds, or -1: unknown */
	long long at_least;		/* the gate down: the policy's figure, or -1 */
	int listed;			/* the gate listed it */
	const struct swin *bottleneck;
};

struct st {
	const struct weir_config *cfg;
	const struct policy *pol;	/* NULL: policy_file does not load */
	time_t now;
	struct sup *up;
	size_t nup;
	struct sup other;		/* no upstream section for the sender */
	unsigned long long messages, todo, rcpt_left, trouble;
	time_t oldest;
	int have_oldest;
};

static struct sup *
sup_find(struct st *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->nup; i++)
		if (strcmp(s->up[i].name, name) == 0)
			return &s->up[i];
	return NULL;
}

/* ---- the queue ---- */

static void
count_one(const struct qlist_msg *m, void *arg)
{
	struct st *s = arg;
	const struct weir_upstream *u;
	struct sup *sp;
	unsigned long long left = 0;
	size_t i;
	char *sender;

	s->messages++;
	if (!m->preprocessed)
		s->todo++;
	if (m->trouble)
		s->trouble++;
	if (!s->have_oldest || m->mtime < s->oldest) {
		s->oldest = m->mtime;
		s->have_oldest = 1;
	}
	for (i = 0; i < m->nitems; i++)
		if (!m->items[i].trouble && !m->items[i].done)
			left++;
	s->rcpt_left += left;
	if (!m->head || left == 0)
		return;
	sender = xmalloc(m->sender_len + 1);
	memcpy(sender, m->text.s + m->sender_off, m->sender_len);
	sender[m->sender_len] = '\0';
	u = config_upstream_for(s->cfg, sender);
	free(sender);
	sp = u ? sup_find(s, u->name) : NULL;
	if (sp == NULL)
		sp = &s->other;
	sp->messages++;
	sp->recipients += left;
	sp->sends += sp->cap ? (left + sp->cap - 1) / sp->cap : 1;
}

/* ---- the gate ---- */

/* One STATUS request; the body into body.  0 ok, -1 with why. */
static int
gate_status(struct gate_client *gc, int json, struct buf *body, struct buf *why)
{
	struct gp_reply r;
	const char *perr = "the gate closed the connection";
	int k;

	if (gc_status(gc, json) < 0) {
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

/* STATUS from the gate's socket *sock, or from its read-only status
 * socket rsock (may be NULL) when the first cannot be reached (a user
 * outside weir-send's group); *sock is then rsock. */
static int
gate_ask(const char **sock, const char *rsock, struct buf *text, struct buf *json,
    struct buf *why)
{
	struct gate_client gc;
	struct timeval tv = { GATE_TIMEOUT_S, 0 };
	const char *used;
	int rc = -1;

	if ((used = gc_connect_status(&gc, *sock, rsock)) == NULL) {
		buf_printf(why, "%s", strerror(errno));
		return -1;
	}
	*sock = used;
	if (setsockopt(gc.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
	    setsockopt(gc.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
		buf_printf(why, "setsockopt: %s", strerror(errno));
		goto out;
	}
	if (gate_status(&gc, 0, text, why) < 0 || (json && gate_status(&gc, 1, json, why) < 0))
		goto out;
	rc = 0;
out:
	gc_close(&gc);
	return rc;
}

static void
add_win(struct sup *u, long long limit, enum policy_unit unit, long long per, long long used,
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
calendar_align(const struct st *s, const char *up, long long limit, enum policy_unit unit,
    long long per)
{
	const struct policy_upstream *pu = s->pol ? policy_upstream(s->pol, up) : NULL;
	size_t i;

	for (i = 0; pu && i < pu->nwin; i++)
		if (pu->win[i].calendar && pu->win[i].limit == limit && pu->win[i].unit == unit &&
		    pu->win[i].per == per)
			return pu->win[i].align;
	return 0;
}

/* The numbers of the gate's text status (see the top of the file). */
static void
gate_numbers(struct st *s, const char *text)
{
	const char *p = text, *nl, *q;
	struct sup *cur = NULL;
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
			if ((cur = sup_find(s, name)) == NULL)
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
			    cal ? calendar_align(s, cur->name, limit, pu, per) : 0);
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
window_time(const struct swin *w, unsigned long long b, time_t now)
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
estimate(struct sup *u, time_t now)
{
	size_t i;

	u->estimate = u->known ? 0 : -1;
	u->bottleneck = NULL;
	for (i = 0; u->known && i < u->nwin; i++) {
		const struct swin *w = &u->win[i];
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

static void
iso(char *out, size_t max, time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, max, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- output ---- */

/* ---- weir-send's kept sessions ---- */

/* sched/sessions (src/send/session.c: "UPSTREAM PID SINCE SENT" lines)
 * as text or a JSON array; a line that does not parse is left out. */
static void
sessions_out(struct buf *o, const struct weir_config *cfg, int json, time_t now)
{
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
		iso(when, sizeof when, (time_t)since);
		if (json) {
			buf_adds(o, n ? ",{\"upstream\":" : "{\"upstream\":");
			json_cstr(o, name);
			buf_printf(o, ",\"pid\":%lld,\"since\":\"%s\",\"messages\":%lld}", pid,
			    when, sent);
		} else {
			duration_format(d, sizeof d, now > since ? (long long)now - since : 0);
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

static void
text_out(struct buf *o, const struct st *s, const char *sock, int gate_ok,
    const struct buf *gtext, const struct buf *gwhy, int q_ok, const struct buf *qwhy,
    const char *winsrc, time_t now)
{
	char d[64], when[32];
	const char *p, *nl;
	size_t i;

	if (gate_ok) {
		buf_printf(o, "weir-gate (%s):\n", sock);
		for (p = gtext->s; p && *p; p = nl ? nl + 1 : NULL) {
			nl = strchr(p, '\n');
			buf_printf(o, "  %.*s\n", (int)(nl ? nl - p : (long)strlen(p)), p);
		}
	} else
		buf_printf(o, "weir-gate (%s): not answering: %s\n", sock, gwhy->s);
	buf_printf(o, "queue %s:\n", s->cfg->queue_dir);
	if (!q_ok)
		buf_printf(o, "  cannot be read: %s\n", qwhy->s);
	buf_printf(o, "  messages: %llu (not yet preprocessed: %llu)\n", s->messages, s->todo);
	buf_printf(o, "  recipients not done: %llu\n", s->rcpt_left);
	if (s->trouble)
		buf_printf(o, "  messages with trouble: %llu (see weir queue)\n", s->trouble);
	if (s->have_oldest) {
		duration_format(d, sizeof d, now > s->oldest ? (long long)(now - s->oldest) : 0);
		iso(when, sizeof when, s->oldest);
		buf_printf(o, "  oldest message: %s old (queued %s)\n", d, when);
	} else
		buf_adds(o, "  oldest message: none\n");
	sessions_out(o, s->cfg, 0, now);
	auth_status_out(o, s->cfg, 0, now);
	buf_printf(o, "drain estimate (a lower bound: every attempt succeeding, windows from "
	    "%s):\n", winsrc);
	for (i = 0; i < s->nup; i++) {
		const struct sup *u = &s->up[i];

		buf_printf(o, "  upstream %s: %llu message%s, %llu recipient%s, %llu send%s: ",
		    u->name, u->messages, u->messages == 1 ? "" : "s", u->recipients,
		    u->recipients == 1 ? "" : "s", u->sends, u->sends == 1 ? "" : "s");
		if (u->estimate < 0 && u->at_least < 0) {
			buf_adds(o, "unknown (no policy for it: weir-gate refuses it)\n");
			continue;
		}
		duration_format(d, sizeof d, u->estimate < 0 ? u->at_least : u->estimate);
		if (u->estimate < 0)
			buf_printf(o, "unknown (weir-gate is not answering; once it does, at least %s",
			    d);
		else
			buf_printf(o, "about %s", d);
		if (u->bottleneck) {
			char per[32];

			duration_format(per, sizeof per, u->bottleneck->per);
			buf_printf(o, " (window %lld %s per %s, %lld used)", u->bottleneck->limit,
			    policy_unit_name(u->bottleneck->unit), per, u->bottleneck->used);
		}
		if (u->suspended > 0) {
			duration_format(d, sizeof d, u->suspended);
			buf_printf(o, ", of which %s suspended", d);
		}
		if (u->estimate < 0)
			buf_addc(o, ')');
		buf_addc(o, '\n');
	}
	if (s->other.messages)
		buf_printf(o, "  no upstream section: %llu message%s, %llu recipient%s: not "
		    "paced by the gate\n", s->other.messages, s->other.messages == 1 ? "" : "s",
		    s->other.recipients, s->other.recipients == 1 ? "" : "s");
}

static void
json_out(struct buf *o, const struct st *s, const char *sock, int gate_ok,
    const struct buf *gjson, const struct buf *gwhy, int q_ok, const struct buf *qwhy,
    const char *winsrc, time_t now)
{
	char when[32];
	size_t i, n;

	buf_adds(o, "{\"gate_socket\":");
	json_cstr(o, sock);
	n = gjson->len;
	while (n > 0 && (gjson->s[n - 1] == '\n' || gjson->s[n - 1] == ' '))
		n--;
	/* The gate's own document, if it looks like one. */
	if (gate_ok && n >= 2 && gjson->s[0] == '{' && gjson->s[n - 1] == '}') {
		buf_adds(o, ",\"gate\":");
		buf_add(o, gjson->s, n);
		buf_adds(o, ",\"gate_error\":null");
	} else {
		buf_adds(o, ",\"gate\":null,\"gate_error\":");
		json_cstr(o, gate_ok ? "the gate's JSON status is not an object" : gwhy->s);
	}
	buf_adds(o, ",\n\"queue\":{\"dir\":");
	json_cstr(o, s->cfg->queue_dir);
	buf_adds(o, ",\"error\":");
	json_cstr(o, q_ok ? NULL : qwhy->s);
	buf_printf(o, ",\"messages\":%llu,\"not_yet_preprocessed\":%llu,"
	    "\"recipients_not_done\":%llu,\"trouble\":%llu,", s->messages, s->todo,
	    s->rcpt_left, s->trouble);
	if (s->have_oldest) {
		iso(when, sizeof when, s->oldest);
		buf_printf(o, "\"oldest_queue_time\":\"%s\",\"oldest_age_s\":%lld}", when,
		    now > s->oldest ? (long long)(now - s->oldest) : 0);
	} else
		buf_adds(o, "\"oldest_queue_time\":null,\"oldest_age_s\":null}");
	buf_adds(o, ",\n\"sessions\":");
	sessions_out(o, s->cfg, 1, now);
	buf_adds(o, ",\n\"oauth\":[");
	auth_status_out(o, s->cfg, 1, now);
	buf_addc(o, ']');
	buf_adds(o, ",\n\"drain_estimate\":{\"lower_bound\":true,\"windows_from\":");
	json_cstr(o, winsrc);
	buf_adds(o, ",\"upstreams\":[");
	for (i = 0; i < s->nup; i++) {
		const struct sup *u = &s->up[i];

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
	    s->other.messages, s->other.recipients);
}

/* ---- --watch: one frame a second ---- */

#define BAR_WIDTH 20

static void
watch_out(struct buf *o, const struct st *s, const char *sock, int gate_ok,
    const struct buf *gwhy, int q_ok, const struct buf *qwhy, const char *winsrc, time_t now)
{
	char d[64], when[32];
	size_t i, j, k, fill;

	iso(when, sizeof when, now);
	buf_printf(o, "weir status at %s (every second; interrupt to stop)\n", when);
	if (!gate_ok)
		buf_printf(o, "weir-gate (%s): not answering: %s\n", sock, gwhy->s);
	for (i = 0; i < s->nup; i++) {
		const struct sup *u = &s->up[i];

		buf_printf(o, "upstream %s: ", u->name);
		if (u->suspended > 0) {
			duration_format(d, sizeof d, u->suspended);
			buf_printf(o, "suspended for %s\n", d);
		} else
			buf_adds(o, u->known ? "active\n" : "no windows known\n");
		for (j = 0; j < u->nwin; j++) {
			const struct swin *w = &u->win[j];
			char label[96];

			duration_format(d, sizeof d, w->per);
			snprintf(label, sizeof label, "%s per %s", policy_unit_name(w->unit), d);
			fill = w->used <= 0 ? 0 : w->used >= w->limit ? BAR_WIDTH :
			    (size_t)((w->used * BAR_WIDTH + w->limit - 1) / w->limit);
			buf_printf(o, "  %-22s [", label);
			for (k = 0; k < BAR_WIDTH; k++)
				buf_addc(o, k < fill ? '#' : '.');
			buf_printf(o, "] %lld of %lld\n", w->used, w->limit);
		}
		buf_printf(o, "  drain: %llu message%s, %llu recipient%s: ", u->messages,
		    u->messages == 1 ? "" : "s", u->recipients, u->recipients == 1 ? "" : "s");
		if (u->estimate < 0)
			buf_adds(o, "unknown (no windows for it)\n");
		else {
			duration_format(d, sizeof d, u->estimate);
			buf_printf(o, "about %s\n", d);
		}
	}
	buf_printf(o, "queue: %llu message%s (%llu not preprocessed), %llu recipient%s not done",
	    s->messages, s->messages == 1 ? "" : "s", s->todo, s->rcpt_left,
	    s->rcpt_left == 1 ? "" : "s");
	if (s->have_oldest) {
		duration_format(d, sizeof d, now > s->oldest ? (long long)(now - s->oldest) : 0);
		buf_printf(o, ", oldest %s old", d);
	}
	buf_addc(o, '\n');
	if (!q_ok)
		buf_printf(o, "queue cannot be read: %s\n", qwhy->s);
	buf_printf(o, "(windows from %s; the drain is a lower bound, see weir(8))\n", winsrc);
}

enum status_mode { ST_TEXT, ST_JSON, ST_WATCH };

/* One status, into out.  1 when the gate answered and the queue was read. */
static int
status_once(struct weir_config *cfg, enum status_mode mode, struct buf *out)
{
	struct buf gtext = BUF_INIT, gjson = BUF_INIT, gwhy = BUF_INIT, qwhy = BUF_INIT;
	struct buf perr = BUF_INIT;
	struct qlist_stats qs;
	struct policy pol;
	struct queue q;
	struct st s;
	const char *winsrc, *gsock = cfg->gate_socket;
	int json = mode == ST_JSON, gate_ok, q_ok = 0, have_pol;
	time_t now = time(NULL);
	size_t i, j;

	memset(&s, 0, sizeof s);
	s.cfg = cfg;
	s.now = now;
	have_pol = policy_load(&pol, cfg->policy_file, &perr) == 0;
	s.pol = have_pol ? &pol : NULL;
	s.nup = cfg->nupstreams;
	s.up = xcalloc(s.nup + 1, sizeof *s.up);
	for (i = 0; i < s.nup; i++) {
		const struct policy_upstream *pu = have_pol ?
		    policy_upstream(&pol, cfg->upstreams[i].name) : NULL;

		s.up[i].name = cfg->upstreams[i].name;
		s.up[i].cap = cfg->upstreams[i].max_recipients;
		if (pu && pu->max_recipients && (unsigned long long)pu->max_recipients < s.up[i].cap)
			s.up[i].cap = (unsigned)pu->max_recipients;
	}

	gate_ok = gate_ask(&gsock, cfg->gate_status_socket, &gtext, json ? &gjson : NULL,
	    &gwhy) == 0;
	if (gate_ok)
		gate_numbers(&s, gtext.s ? gtext.s : "");
	/* What the gate does not list (it has not seen the upstream yet, or
	 * does not answer): the policy's windows, nothing used. */
	for (i = 0; have_pol && i < s.nup; i++) {
		const struct policy_upstream *pu = policy_upstream(&pol, s.up[i].name);

		if (s.up[i].listed)
			continue;
		for (j = 0; pu && j < pu->nwin; j++)
			add_win(&s.up[i], pu->win[j].limit, pu->win[j].unit, pu->win[j].per, 0,
			    pu->win[j].calendar, pu->win[j].align);
		if (pu)
			s.up[i].known = 1;
	}
	if (gate_ok)
		winsrc = "weir-gate";
	else if (have_pol)
		winsrc = cfg->policy_file;
	else
		winsrc = "nowhere (no gate, and the policy file does not load)";

	if (queue_open(&q, cfg->queue_dir, cfg->queue_split) < 0)
		buf_printf(&qwhy, "%s", strerror(errno));
	else {
		q_ok = qlist_scan(&q, count_one, &s, &qs, &qwhy) == 0;
		queue_close(&q);
	}
	for (i = 0; i < s.nup; i++) {
		estimate(&s.up[i], now);
		s.up[i].at_least = -1;
		if (!gate_ok && s.up[i].estimate >= 0) {
			/* Nothing goes while the gate is down. */
			s.up[i].at_least = s.up[i].estimate;
			s.up[i].estimate = -1;
		}
	}

	if (mode == ST_JSON)
		json_out(out, &s, gsock, gate_ok, &gjson, &gwhy, q_ok, &qwhy, winsrc,
		    now);
	else if (mode == ST_WATCH)
		watch_out(out, &s, gsock, gate_ok, &gwhy, q_ok, &qwhy, winsrc, now);
	else
		text_out(out, &s, gsock, gate_ok, &gtext, &gwhy, q_ok, &qwhy, winsrc,
		    now);
	for (i = 0; i < s.nup; i++)
		free(s.up[i].win);
	free(s.up);
	policy_free(&pol);
	buf_free(&gtext);
	buf_free(&gjson);
	buf_free(&gwhy);
	buf_free(&qwhy);
	buf_free(&perr);
	return gate_ok && q_ok;
}

struct watch {
	struct weir_config *cfg;
	uint64_t next;		/* the next frame, monotonic ms */
	int tty;
	int rc;
};

static void
on_frame(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct watch *w = arg;
	struct buf out = BUF_INIT;

	(void)t;
	/* A terminal is cleared (cursor home, erase); a pipe or file gets
	 * the frames one after the other, a blank line between them. */
	buf_adds(&out, w->tty ? "\033[H\033[2J" : "\n");
	status_once(w->cfg, ST_WATCH, &out);
	if (full_write(STDOUT_FILENO, out.s, out.len) < 0) {
		log_warn("write");
		w->rc = 1;
		evloop_stop(ev);
	} else {
		w->next += 1000;
		if (w->next < clock_mono_ms())	/* a slow frame: no catching up */
			w->next = clock_mono_ms() + 1000;
		evloop_timer_at(ev, w->next, on_frame, w);
	}
	buf_free(&out);
}

static void
on_interrupt(struct evloop *ev, int signo, void *arg)
{
	(void)signo; (void)arg;
	evloop_stop(ev);
}

/* Until SIGINT or SIGTERM (exit 0) or stdout fails (exit 1). */
static int
watch(struct weir_config *cfg)
{
	struct watch w;
	struct evloop *ev = evloop_new();

	memset(&w, 0, sizeof w);
	w.cfg = cfg;
	w.tty = isatty(STDOUT_FILENO);
	w.next = clock_mono_ms();
	evloop_signal(ev, SIGINT, on_interrupt, &w);
	evloop_signal(ev, SIGTERM, on_interrupt, &w);
	evloop_timer_at(ev, w.next, on_frame, &w);
	if (evloop_run(ev) < 0) {
		log_warn("event loop");
		w.rc = 1;
	}
	evloop_free(ev);
	return w.rc;
}

int
cmd_status(int argc, char **argv, struct weir_config *cfg)
{
	struct buf out = BUF_INIT;
	int json = 0, ok;

	if (argc == 2 && strcmp(argv[1], "--watch") == 0)
		return watch(cfg);
	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1) {
		log_warnx("usage: weir status [--json | --watch]");
		return 2;
	}
	ok = status_once(cfg, json ? ST_JSON : ST_TEXT, &out);
	if (fwrite(out.s, 1, out.len, stdout) != out.len || fflush(stdout) != 0) {
		log_warn("write");
		ok = 0;
	}
	buf_free(&out);
	return ok ? 0 : 1;
}
