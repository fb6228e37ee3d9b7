/*
 * control.c: the operator's requests while weir-send runs (`weir hold`,
 * release, delete, requeue; QUEUE.md, "Held messages and control
 * requests").  A request is an empty file ctl/VERB.N; the trigger, the
 * start, the end of an attempt and the end of a preprocessing pass make
 * weir-send read ctl/, act, and remove each request it is done with.
 * The `weir` command waits for that removal and reads the result off
 * the queue.
 *
 * A held message (hold/N) is in memory with no timer and in no FIFO:
 * never attempted, so never expired; its release credits the time it was
 * held as waiting (wait.c), so holding does not age it.  A message whose
 * attempt is in flight is not changed under its deliverer: a hold takes
 * effect when the attempt ends, a delete waits for it (its request stays
 * until then).
 *
 * `weir requeue --via NAME` leaves ctl/via.N holding NAME: the message's
 * next pass goes through upstream NAME (via.c), reply/N says so for the
 * listings, and its pass's end forgets it.
 *
 * Trusts: ctl/ names and via.N's bytes, parsed strictly.  Config keys:
 * upstream names.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "mail/qctl.h"
#include "send/sendint.h"

enum verb { V_HOLD, V_RELEASE, V_DELETE, V_REQUEUE, V_VIA, V_N };
static const char *const verbs[V_N] = { "hold", "release", "delete", "requeue", "via" };

static void
on_again(struct evloop *ev, struct evtimer *t, void *arg)
{
	(void)ev; (void)t;
	control_scan(arg);
}

/* After this turn of the loop: m may be ending now. */
static void
scan_soon(struct sched *s)
{
	s->ctl_again = 1;
	evloop_timer_at(s->ev, 0, on_again, s);
}

void
control_restore(struct sched *s, struct msg *m)
{
	struct buf why = BUF_INIT;
	int r = qctl_held(s->o->q, m->id, m->birth, &m->held_since, &why);

	if (r < 0) {
		/* The safe reading: an operator wanted it held. */
		log_warnx("msg %s: %s; taken as held", m->qid, why.s);
		m->held_since = 0;
	}
	m->held = r != 0;
	if (m->held && m->held_since == 0)
		m->held_since = sched_wall();
	buf_free(&why);
}

int
control_stops(struct sched *s, struct msg *m)
{
	if (!m->held && !m->del_pending)
		return 0;
	evloop_timer_cancel(s->ev, m->due);
	m->due = NULL;
	sched_unlink(s, m);
	wait_end(m);
	if (m->del_pending && !m->job)
		scan_soon(s);
	return 1;
}

/* reply/N as m's replies and next attempt say (none: removed). */
static void
reply_save(struct sched *s, struct msg *m, long long next)
{
	char path[QPATH_MAX];
	struct queue *q = s->o->q;
	struct buf b = BUF_INIT;
	int fd;

	snprintf(path, sizeof path, QCTL_REPLY_DIR "/%lu", m->id);
	m->replies_dirty = 0;
	m->next_saved = next;
	if (m->replies.len == 0 && m->via_up == NO_UPSTREAM) {
		if (unlinkat(q->dfd, path, 0) < 0 && errno != ENOENT)
			log_warn("msg %s: unlink %s", m->qid, path);
		return;
	}
	buf_printf(&b, "birth %lld\nnext %lld\n", m->birth, next);
	if (m->via_up != NO_UPSTREAM && m->via_up < s->cfg->nupstreams)
		buf_printf(&b, "via %s\n", s->cfg->upstreams[m->via_up].name);
	buf_add(&b, m->replies.s, m->replies.len);
	fd = openat(q->dfd, QCTL_REPLY_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0644);
	if (fd < 0 || full_write(fd, b.s, b.len) < 0 || close(fd) < 0 ||
	    renameat(q->dfd, QCTL_REPLY_TMP, q->dfd, path) < 0) {
		/* A hint for the listings: the message goes on without it. */
		if (errno != ENOENT)
			log_warn("msg %s: write %s", m->qid, path);
		if (fd >= 0)
			close(fd);
	}
	buf_free(&b);
}

void
control_next(struct sched *s, struct msg *m, long long when)
{
	if (m->held || m->del_pending)
		when = 0;
	if (m->replies_dirty || ((m->replies.len || m->via_up != NO_UPSTREAM) &&
	    when != m->next_saved))
		reply_save(s, m, when);
}

void
control_replies(struct sched *s, struct msg *m, const struct job *j,
    const struct rresult *res)
{
	struct buf keep = BUF_INIT;
	const char *p, *end, *nul, *nl;
	size_t i, alen;

	(void)s;
	/* Lines of recipients outside this batch stay. */
	for (p = m->replies.s, end = p + m->replies.len; p && p < end; p = nl + 1) {
		nul = memchr(p, '\0', (size_t)(end - p));
		nl = memchr(nul, '\n', (size_t)(end - nul));
		for (i = 0; i < j->n; i++)
			if (strlen(j->addrs[i]) == (size_t)(nul - p) &&
			    memcmp(j->addrs[i], p, (size_t)(nul - p)) == 0)
				break;
		if (i == j->n)
			buf_add(&keep, p, (size_t)(nl + 1 - p));
	}
	for (i = 0; i < j->n; i++) {
		if (res[i].st != RS_TEMP)
			continue;
		alen = strlen(j->addrs[i]);
		buf_add(&keep, j->addrs[i], alen + 1);
		buf_add_oneline(&keep, res[i].text ? res[i].text : "", res[i].text ?
		    strlen(res[i].text) : 0);
		buf_addc(&keep, '\n');
	}
	buf_free(&m->replies);
	m->replies = keep;
	m->replies_dirty = 1;
}

void
control_forget(struct sched *s, struct msg *m)
{
	char path[QPATH_MAX];
	struct buf why = BUF_INIT;

	if (m->replies.len || m->next_saved) {
		snprintf(path, sizeof path, QCTL_REPLY_DIR "/%lu", m->id);
		if (unlinkat(s->o->q->dfd, path, 0) < 0 && errno != ENOENT)
			log_warn("msg %s: unlink %s", m->qid, path);
	}
	buf_free(&m->replies);

	/* Held while its last attempt delivered everything. */
	if (m->held && qctl_unhold(s->o->q, m->id, &why) < 0)
		log_warnx("msg %s: %s (a stale hold/ file: its birth tells it)", m->qid, why.s);
	if (m->del_pending)
		scan_soon(s);
	buf_free(&why);
}

/* `weir hold`: m is held; at once, or after the attempt in flight. */
static void
hold(struct sched *s, struct msg *m, long long now, struct buf *why)
{
	if (m->held)
		return;
	if (qctl_hold(s->o->q, m->id, m->birth, now, why) < 0) {
		log_warnx("msg %s: hold: %s", m->qid, why->s);
		return;
	}
	m->held = 1;
	m->held_since = now;
	log_info("msg %s: held by the operator%s", m->qid,
	    m->job ? " (after the attempt in flight)" : "");
	if (!m->job)
		(void)control_stops(s, m);
}

/* `weir release`: the time m was held counts as waiting; it goes now. */
static void
release(struct sched *s, struct msg *m, long long now, struct buf *why)
{
	if (!m->held)
		return;
	if (qctl_unhold(s->o->q, m->id, why) < 0) {
		log_warnx("msg %s: release: %s", m->qid, why->s);
		return;
	}
	m->held = 0;
	if (now > m->held_since)
		m->waited_ms += (now - m->held_since) * 1000;
	log_info("msg %s: released by the operator after %lld s held", m->qid,
	    now - m->held_since);
	sched_at(s, m, now);
}

/* `weir delete` of m, no attempt in flight: 0 m is gone (freed), -1
 * not (logged). */
static int
delete(struct sched *s, struct msg *m, struct buf *why)
{
	if (qctl_delete(s->o->q, m->id, why) < 0) {
		log_warnx("msg %s: delete: %s", m->qid, why->s);
		return -1;
	}
	log_info("msg %s: deleted by the operator", m->qid);
	buf_free(&m->replies);
	msg_forget(s, m);
	return 0;
}

/* ctl/via.N's upstream: its index in the config, or NO_UPSTREAM
 * (logged). */
static size_t
via_of(struct sched *s, unsigned long id)
{
	char path[64], name[POLICY_NAME_MAX + 1];
	struct buf b = BUF_INIT;
	const struct weir_upstream *u = NULL;

	snprintf(path, sizeof path, QCTL_DIR "/via.%lu", id);
	if (read_file_at(s->o->q->dfd, path, &b, QCTL_FILE_MAX) != 0 ||
	    qctl_via_parse(b.s ? b.s : "", b.len, name) < 0)
		log_warnx("ctl: %s: not an upstream's name; ignored", path);
	else if ((u = config_upstream(s->cfg, name)) == NULL)
		log_warnx("ctl: %s: no upstream \"%s\" in %s; ignored", path, name,
		    s->cfg->file ? s->cfg->file : "the configuration");
	buf_free(&b);
	return u ? (size_t)(u - s->cfg->upstreams) : NO_UPSTREAM;
}

/* 1: done with the request; 0: it waits (an attempt in flight, or the
 * message is not yet preprocessed). */
static int
act(struct sched *s, enum verb v, unsigned long id)
{
	struct buf why = BUF_INIT;
	enum qctl_state st;
	struct msg *m = msg_by_id(s, id);
	long long birth, now = sched_wall();
	int fresh = 0;

	if (m == NULL) {
		if (qctl_state(s->o->q, id, &st, &birth) < 0) {
			log_warn("ctl: %s %lu", verbs[v], id);
			return 1;
		}
		if (st == QS_TODO)
			return 0;
		if (st == QS_NONE || (m = msg_load(s, id)) == NULL) {
			log_info("ctl: %s %lu: no such message", verbs[v], id);
			return 1;
		}
		fresh = 1;	/* scheduled below, as a scan of info/ would */
	}
	if (m->finishing) {
		log_info("ctl: %s %lu: the message has ended", verbs[v], id);
		return 1;
	}
	switch (v) {
	case V_HOLD:
		hold(s, m, now, &why);
		break;
	case V_RELEASE:
		release(s, m, now, &why);
		break;
	case V_REQUEUE:
		if (m->held) {
			log_info("msg %s: requeue: held; release it", m->qid);
			break;
		}
		log_info("msg %s: requeued by the operator", m->qid);
		sched_at(s, m, now);	/* through the gate, as always */
		break;
	case V_VIA:
		if (m->held) {
			log_info("msg %s: requeue: held; release it", m->qid);
			break;
		}
		if ((m->via_up = via_of(s, id)) == NO_UPSTREAM)
			break;
		m->replies_dirty = 1;
		log_info("msg %s: requeued by the operator through upstream %s%s", m->qid,
		    s->cfg->upstreams[m->via_up].name, m->job && m->job->state != J_ASKING ?
		    " (after the attempt in flight)" : "");
		/* A batch still waiting at the gate moves now (via.c). */
		if (m->job && m->job->state == J_ASKING && m->job->up != m->via_up)
			via_recall(s, m->job);
		if (!m->job) {
			m->pass_off = 0;	/* its next pass, from the top, goes there */
			m->pass_up = 0;
		}
		sched_at(s, m, now);
		break;
	case V_DELETE:
		if (m->job) {
			if (!m->del_pending)
				log_info("msg %s: delete waits for the attempt in flight", m->qid);
			m->del_pending = 1;
			return 0;
		}
		if (delete(s, m, &why) == 0)
			m = NULL;
		break;
	case V_N:
		break;
	}
	if (fresh && m)
		sched_at(s, m, now);
	buf_free(&why);
	return 1;
}

void
control_scan(struct sched *s)
{
	char path[sizeof QCTL_DIR + 256];
	struct queue *q = s->o->q;
	struct dirent *e;
	unsigned long id;
	const char *dot;
	enum verb v;
	DIR *d;
	int fd;

	s->ctl_again = 0;
	fd = openat(q->dfd, QCTL_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (errno != ENOENT)
			log_warn("open %s", QCTL_DIR);
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		dot = strchr(e->d_name, '.');
		for (v = 0; v < V_N; v++)
			if (dot && (size_t)(dot - e->d_name) == strlen(verbs[v]) &&
			    memcmp(e->d_name, verbs[v], strlen(verbs[v])) == 0)
				break;
		if (v == V_N || queue_parse_id(dot + 1, &id) < 0) {
			log_warnx("%s/%s: not a request; ignored", QCTL_DIR, e->d_name);
			continue;
		}
		if (act(s, v, id) == 0) {
			s->ctl_again = 1;
			continue;
		}
		snprintf(path, sizeof path, QCTL_DIR "/%s", e->d_name);
		if (unlinkat(q->dfd, path, 0) < 0 && errno != ENOENT)
			log_warn("unlink %s", path);
	}
	closedir(d);
}
