/*
 * qlist.c: see qlist.h.
 *
 * Races with weir-send are expected, not errors: todo/ is scanned (and
 * each todo file read) before info/, so a message preprocessed meanwhile
 * is listed once, from its todo/ file (its info/ file may be half
 * written while todo/ still exists, so info/ is not read for it); a message
 * whose info file has gone when we read it was finished and is skipped;
 * one that came in after the todo/ scan and is half preprocessed when we
 * read it is skipped too (it is listed by the next scan).
 *
 * The scan builds a struct qlist_msg per message (those of todo/ are
 * kept until the end, as they are listed last); the renderers below turn
 * one into text or JSON.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/json.h"
#include "lib/timefmt.h"
#include "mail/envelope.h"
#include "mail/qctl.h"
#include "mail/qlist.h"

/* Envelope files beyond this are trouble, not something to list. */
#define INFO_MAX	(ADDR_MAX + 16)
#define RCPTFILE_MAX	((size_t)1 << 30)
#define OUT_FLUSH	65536

struct qent {
	unsigned long id;
	struct timespec mtime;
	struct qlist_msg *m;	/* todo entries: the message read, or NULL: gone */
};

struct qents {
	struct qent *v;
	size_t n, cap;
};

static void
qents_add(struct qents *q, unsigned long id, struct timespec mtime)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->v = xrealloc(q->v, q->cap * sizeof *q->v);
	}
	q->v[q->n].id = id;
	q->v[q->n].mtime = mtime;
	q->v[q->n].m = NULL;
	q->n++;
}

static int
qent_cmp(const void *a, const void *b)
{
	const struct qent *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int
id_cmp(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* Ids and mtimes of the message files in one folder. */
static int
scan_dir(int dfd, const char *dir, struct qents *q, struct buf *why)
{
	struct dirent *de;
	struct stat st;
	unsigned long id;
	DIR *d;
	int fd;

	fd = openat(dfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		buf_printf(why, "cannot open %s: %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (de == NULL)
			break;
		if (queue_parse_id(de->d_name, &id) < 0)
			continue;	/* not a message, as qmail-qread */
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;	/* left the queue meanwhile */
			st.st_mtim.tv_sec = st.st_mtim.tv_nsec = 0;	/* listed; reading it will say why */
		}
		qents_add(q, id, st.st_mtim);
	}
	if (errno != 0) {
		buf_printf(why, "cannot read %s: %s", dir, strerror(errno));
		closedir(d);
		return -1;
	}
	closedir(d);
	return 0;
}

/* ---- building a message ---- */

static void
msg_start(struct qlist_msg *m, unsigned long id, struct timespec mtime, int preprocessed)
{
	m->id = id;
	m->mtime = mtime.tv_sec;
	queue_msgid(m->qid, id, &mtime);
	m->preprocessed = preprocessed;
	m->head = m->bouncing = m->trouble = m->held = 0;
	m->next_attempt = 0;
	m->via_off = m->via_len = 0;
	m->size = 0;
	m->sender_off = m->sender_len = 0;
	m->nitems = 0;
	buf_reset(&m->text);
}

static void
msg_free(struct qlist_msg *m)
{
	free(m->items);
	buf_free(&m->text);
	memset(m, 0, sizeof *m);
}

static struct qlist_item *
msg_item(struct qlist_msg *m)
{
	struct qlist_item *it;

	if (m->nitems == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 16;
		m->items = xrealloc(m->items, m->cap * sizeof *m->items);
	}
	it = &m->items[m->nitems++];
	memset(it, 0, sizeof *it);
	it->off = m->text.len;
	return it;
}

static void
msg_head(struct qlist_msg *m, long long size, const struct qrec *sender, int bouncing)
{
	m->head = 1;
	m->size = size;
	m->bouncing = bouncing;
	m->sender_off = m->text.len;
	m->sender_len = sender->len;
	buf_add(&m->text, sender->addr, sender->len);
}

static void
msg_rcpt(struct qlist_msg *m, enum qdir chan, const struct qrec *r)
{
	struct qlist_item *it = msg_item(m);

	it->chan = chan;
	it->done = r->type == 'D';
	buf_add(&m->text, r->addr, r->len);
	it->len = r->len;
}

static void
msg_trouble(struct qlist_msg *m, const char *prefix, const char *path, int err,
    const char *why)
{
	struct qlist_item *it = msg_item(m);

	it->trouble = 1;
	m->trouble = 1;
	buf_printf(&m->text, "%s%s", prefix, path);
	if (err)
		buf_printf(&m->text, ": %s", strerror(err));
	if (why)
		buf_printf(&m->text, ": %s", why);
	it->len = m->text.len - it->off;
}

/* ---- reading a message ---- */

/* Size of mess/ for id: 0 ok, else errno (ENOENT: message gone). */
static int
mess_size(const struct queue *q, unsigned long id, long long *size)
{
	char path[QPATH_MAX];
	struct stat st;

	queue_path(path, q, Q_MESS, id);
	if (fstatat(q->dfd, path, &st, 0) < 0)
		return errno;
	*size = (long long)st.st_size;
	return 0;
}

static int
file_exists(const struct queue *q, enum qdir d, unsigned long id)
{
	char path[QPATH_MAX];
	struct stat st;

	queue_path(path, q, d, id);
	return fstatat(q->dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Read queue file d/id into file.  0 ok; 1 trouble (a warning added to
 * m); 2 gone (ENOENT: the caller decides what that means). */
static int
load(const struct queue *q, enum qdir d, struct qlist_msg *m, struct buf *file, size_t max)
{
	char path[QPATH_MAX];
	int rc;

	queue_path(path, q, d, m->id);
	rc = read_file_at(q->dfd, path, file, max);
	if (rc == -1 && errno == ENOENT)
		return 2;
	if (rc == -1)
		msg_trouble(m, "cannot read ", path, errno, NULL);
	else if (rc == -2)
		msg_trouble(m, "", path, 0, "too large");
	return rc == 0 ? 0 : 1;
}

/* A parser's verdict on d/id: 0 ok, else 1 with a warning added. */
static int
parsed(const struct queue *q, enum qdir d, struct qlist_msg *m, int rc, struct buf *why)
{
	char path[QPATH_MAX];

	if (rc == 0)
		return 0;
	queue_path(path, q, d, m->id);
	msg_trouble(m, "", path, 0, buf_cstr(why));
	buf_free(why);
	return 1;
}

/* One channel file (local/ or remote/) of m.  0 ok, 1 trouble. */
static int
read_channel(const struct queue *q, struct qlist_msg *m, enum qdir d, struct buf *file)
{
	struct buf why = BUF_INIT;
	struct qrec r;
	size_t off = 0, ntodo, ndone;
	const char *w;
	int rc;

	rc = load(q, d, m, file, RCPTFILE_MAX);
	if (rc == 2)
		return 0;	/* no recipients on this channel */
	if (rc == 1 || parsed(q, d, m,
	    rcptfile_parse(file->s, file->len, &ntodo, &ndone, &why), &why))
		return 1;
	while (qrec_next(file->s, file->len, &off, &r, &w) == 1)
		msg_rcpt(m, d, &r);
	return 0;
}

/* Held by `weir hold`?  An unreadable hold/N counts as held, as
 * weir-send takes it. */
static int
is_held(const struct queue *q, const struct qlist_msg *m)
{
	struct buf why = BUF_INIT;
	long long since;
	int r = qctl_held(q, m->id, (long long)m->mtime, &since, &why);

	buf_free(&why);
	return r != 0;
}

/* weir-send's last replies and next attempt (reply/N, a hint: one that
 * does not parse or is stale is ignored) onto m's recipients not done. */
static void
read_replies(const struct queue *q, struct qlist_msg *m, struct buf *file)
{
	char path[QPATH_MAX];
	const char *body, *r, *via;
	long long birth, next;
	size_t i, blen, rlen, vialen;

	snprintf(path, sizeof path, QCTL_REPLY_DIR "/%lu", m->id);
	buf_reset(file);
	if (read_file_at(q->dfd, path, file, QCTL_REPLY_MAX) != 0 ||
	    qctl_reply_parse(file->s, file->len, &birth, &next, &via, &vialen, &body, &blen) < 0 ||
	    birth != (long long)m->mtime)
		return;
	m->next_attempt = next;
	if (via) {
		m->via_off = m->text.len;
		m->via_len = vialen;
		buf_add(&m->text, via, vialen);
	}
	for (i = 0; i < m->nitems; i++) {
		struct qlist_item *it = &m->items[i];

		if (it->trouble || it->done ||
		    (r = qctl_reply_find(body, blen, m->text.s + it->off, it->len, &rlen)) == NULL)
			continue;
		it->reason_off = m->text.len;
		it->reason_len = rlen;
		buf_add(&m->text, r, rlen);
	}
}

/* A preprocessed message into m.  0 read, 1 read or not with trouble,
 * 2 skipped (left the queue). */
static int
read_info(const struct queue *q, struct qlist_msg *m, struct buf *file)
{
	char path[QPATH_MAX];
	struct buf why = BUF_INIT;
	struct qrec sender;
	long long size = 0;
	int rc, err, bad = 0;

	if ((rc = load(q, Q_INFO, m, file, INFO_MAX)) != 0)
		return rc;	/* 2: finished since the scan */
	if (parsed(q, Q_INFO, m, info_parse(file->s, file->len, &sender, &why), &why))
		return 1;
	if ((err = mess_size(q, m->id, &size)) != 0) {
		if (err == ENOENT && !file_exists(q, Q_INFO, m->id))
			return 2;
		queue_path(path, q, Q_MESS, m->id);
		msg_trouble(m, "cannot stat ", path, err, NULL);
		return 1;
	}
	msg_head(m, size, &sender, file_exists(q, Q_BOUNCE, m->id));
	m->held = is_held(q, m);
	bad |= read_channel(q, m, Q_LOCAL, file);
	bad |= read_channel(q, m, Q_REMOTE, file);
	read_replies(q, m, file);
	return bad;
}

/* A message in todo/ into m.  Same results. */
static int
read_todo(const struct queue *q, struct qlist_msg *m, struct buf *file)
{
	char path[QPATH_MAX];
	struct buf why = BUF_INIT;
	struct todo_env env;
	struct qrec r;
	const char *w;
	long long size = 0;
	size_t off;
	int rc, err;

	if ((rc = load(q, Q_TODO, m, file, RCPTFILE_MAX)) != 0)
		return rc;	/* 2: preprocessed since the scan */
	if (parsed(q, Q_TODO, m, todo_parse(file->s, file->len, &env, &why), &why))
		return 1;
	if ((err = mess_size(q, m->id, &size)) != 0) {
		queue_path(path, q, Q_MESS, m->id);
		msg_trouble(m, "cannot stat ", path, err, NULL);
		return 1;
	}
	msg_head(m, size, &env.sender, 0);
	m->held = is_held(q, m);
	for (off = env.rcpt_off; qrec_next(file->s, file->len, &off, &r, &w) == 1; )
		msg_rcpt(m, Q_TODO, &r);
	return 0;
}

static int
scan_info(const struct queue *q, struct qents *info, struct buf *why)
{
	char dir[QPATH_MAX];
	unsigned s;

	for (s = 0; s < q->split; s++) {
		/* queue_dirpath() wants an id; id s lives in folder s. */
		queue_dirpath(dir, q, Q_INFO, s);
		if (scan_dir(q->dfd, dir, info, why) < 0)
			return -1;
	}
	return 0;
}

int
qlist_scan(const struct queue *q, qlist_fn fn, void *arg, struct qlist_stats *st,
    struct buf *why)
{
	struct qents todo = { NULL, 0, 0 }, info = { NULL, 0, 0 };
	struct qlist_msg m;
	struct buf file = BUF_INIT;
	unsigned long *tids = NULL;
	size_t ntids = 0;
	size_t i;
	int rc = -1, r;

	memset(st, 0, sizeof *st);
	memset(&m, 0, sizeof m);
	/* todo/ first, read at once: see the comment at the top. */
	if (scan_dir(q->dfd, qdir_name[Q_TODO], &todo, why) < 0)
		goto out;
	for (i = 0; i < todo.n; i++) {
		struct qlist_msg *t = xcalloc(1, sizeof *t);

		msg_start(t, todo.v[i].id, todo.v[i].mtime, 0);
		if (read_todo(q, t, &file) == 2) {
			msg_free(t);
			free(t);
			continue;	/* gone: m stays NULL */
		}
		todo.v[i].m = t;
	}
	if (scan_info(q, &info, why) < 0)
		goto out;
	tids = xcalloc(todo.n + 1, sizeof *tids);
	if (info.n > 0)
		qsort(info.v, info.n, sizeof *info.v, qent_cmp);
	if (todo.n > 0)
		qsort(todo.v, todo.n, sizeof *todo.v, qent_cmp);

	for (i = 0; i < todo.n; i++)
		if (todo.v[i].m)
			tids[ntids++] = todo.v[i].id;
	qsort(tids, ntids, sizeof *tids, id_cmp);
	for (i = 0; i < info.n; i++) {
		/* Still in todo/ when we looked: being preprocessed. */
		if (bsearch(&info.v[i].id, tids, ntids, sizeof *tids, id_cmp))
			continue;
		msg_start(&m, info.v[i].id, info.v[i].mtime, 1);
		r = read_info(q, &m, &file);
		if (r == 1) {
			/* The message may have come in after the todo/ scan
			 * and been half preprocessed: skipped while todo/N
			 * is there (listed next time), read again once
			 * preprocessing has finished. */
			msg_start(&m, info.v[i].id, info.v[i].mtime, 1);
			r = file_exists(q, Q_TODO, m.id) ? 2 : read_info(q, &m, &file);
		}
		if (r == 2)
			continue;
		st->queued++;
		if (m.trouble)
			st->trouble++;
		fn(&m, arg);
	}
	for (i = 0; i < todo.n; i++) {
		const struct qent *e = &todo.v[i];

		if (e->m == NULL)
			continue;
		st->queued++;
		st->todo++;
		if (e->m->trouble)
			st->trouble++;
		fn(e->m, arg);
	}
	rc = 0;
out:
	for (i = 0; i < todo.n; i++)
		if (todo.v[i].m) {
			msg_free(todo.v[i].m);
			free(todo.v[i].m);
		}
	msg_free(&m);
	free(tids);
	free(todo.v);
	free(info.v);
	buf_free(&file);
	return rc;
}

/* ---- the listings ---- */

struct out {
	int fd;
	enum qlist_format f;
	size_t n;		/* messages written */
	struct buf b;
	int err;		/* errno of a failed write, or 0 */
};

static void
out_flush(struct out *o)
{
	if (o->b.len > 0 && o->err == 0 && full_write(o->fd, o->b.s, o->b.len) < 0)
		o->err = errno ? errno : EIO;
	buf_reset(&o->b);
}

/* Text as qmail-qread prints it: bytes outside 32..126 become '_'. */
static void
clean_add(struct buf *b, const char *s, size_t n)
{
	size_t i;

	buf_reserve(b, n);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		b->s[b->len++] = (c >= 32 && c <= 126) ? (char)c : '_';
	}
	b->s[b->len] = '\0';
}

/* "21 Nov 2026 23:35:57 GMT  #457  1234  <sender> [ bouncing]", then
 * the recipients and warnings in the order they were read. */
static void
render_text(struct buf *t, const struct qlist_msg *m)
{
	char date[DATE_QMAIL_MAX];
	struct buf raw = BUF_INIT;
	size_t dl, i;

	if (m->head) {
		date_qmail(date, m->mtime);
		dl = strlen(date);
		if (dl > 6)
			date[dl - 6] = '\0';	/* drop " -0000", as qmail-qread */
		buf_printf(&raw, "%s GMT  #%lu  %lld  <", date, m->id, m->size);
		buf_add(&raw, m->text.s + m->sender_off, m->sender_len);
		buf_adds(&raw, "> ");
		if (m->bouncing)
			buf_adds(&raw, " bouncing");
		if (m->held)
			buf_adds(&raw, " held");
		else if (m->next_attempt > 0) {
			date_qmail(date, (time_t)m->next_attempt);
			dl = strlen(date);
			if (dl > 6)
				date[dl - 6] = '\0';
			buf_printf(&raw, " next %s GMT", date);
		}
		if (m->via_len) {
			buf_adds(&raw, " via ");
			buf_add(&raw, m->text.s + m->via_off, m->via_len);
			buf_adds(&raw, " (requeued)");
		}
		clean_add(t, raw.s, raw.len);
		buf_addc(t, '\n');
	}
	for (i = 0; i < m->nitems; i++) {
		const struct qlist_item *it = &m->items[i];

		if (it->trouble) {
			buf_reset(&raw);
			buf_printf(&raw, "warning: trouble with #%lu: ", m->id);
			buf_add(&raw, m->text.s + it->off, it->len);
			clean_add(t, raw.s, raw.len);
		} else {
			if (it->done)
				buf_adds(t, "  done");
			buf_adds(t, it->chan == Q_LOCAL ? "\tlocal\t" :
			    it->chan == Q_REMOTE ? "\tremote\t" : "\ttodo\t");
			clean_add(t, m->text.s + it->off, it->len);
			if (it->reason_len) {
				buf_adds(t, "\n\t\t(");
				clean_add(t, m->text.s + it->reason_off, it->reason_len);
				buf_addc(t, ')');
			}
		}
		buf_addc(t, '\n');
	}
	buf_free(&raw);
}

/* One JSON object per message; see weir(8). */
static void
render_json(struct buf *t, const struct qlist_msg *m)
{
	struct tm tm;
	char when[32];
	size_t i, n;

	gmtime_r(&m->mtime, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	buf_printf(t, "{\"id\":%lu,\"queue_id\":\"%s\",\"queue_time\":\"%s\","
	    "\"preprocessed\":%s,", m->id, m->qid, when, m->preprocessed ? "true" : "false");
	if (m->head) {
		buf_printf(t, "\"size\":%lld,\"sender\":", m->size);
		json_str(t, m->text.s + m->sender_off, m->sender_len);
	} else
		buf_adds(t, "\"size\":null,\"sender\":null");
	buf_printf(t, ",\"bouncing\":%s,\"held\":%s,\"next_attempt\":",
	    m->bouncing ? "true" : "false", m->held ? "true" : "false");
	if (m->next_attempt > 0 && !m->held) {
		time_t na = (time_t)m->next_attempt;

		gmtime_r(&na, &tm);
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		buf_printf(t, "\"%s\"", when);
	} else
		buf_adds(t, "null");
	if (m->via_len) {	/* only while weir requeue --via holds */
		buf_adds(t, ",\"via\":");
		json_str(t, m->text.s + m->via_off, m->via_len);
	}
	buf_adds(t, ",\"recipients\":[");
	for (i = n = 0; i < m->nitems; i++) {
		const struct qlist_item *it = &m->items[i];

		if (it->trouble)
			continue;
		buf_adds(t, n++ ? ",{\"address\":" : "{\"address\":");
		json_str(t, m->text.s + it->off, it->len);
		buf_printf(t, ",\"channel\":%s,\"state\":\"%s\",\"delay_reason\":",
		    it->chan == Q_LOCAL ? "\"local\"" : it->chan == Q_REMOTE ? "\"remote\"" : "null",
		    it->chan == Q_TODO ? "not-preprocessed" : it->done ? "done" : "todo");
		if (it->reason_len)
			json_str(t, m->text.s + it->reason_off, it->reason_len);
		else
			buf_adds(t, "null");
		buf_addc(t, '}');
	}
	buf_adds(t, "],\"trouble\":[");
	for (i = n = 0; i < m->nitems; i++) {
		const struct qlist_item *it = &m->items[i];

		if (!it->trouble)
			continue;
		if (n++)
			buf_addc(t, ',');
		json_str(t, m->text.s + it->off, it->len);
	}
	buf_adds(t, "]}");
}

static void
write_one(const struct qlist_msg *m, void *arg)
{
	struct out *o = arg;

	if (o->f == QLIST_JSON) {
		buf_adds(&o->b, o->n ? ",\n" : "\n");
		render_json(&o->b, m);
	} else
		render_text(&o->b, m);
	o->n++;
	if (o->b.len >= OUT_FLUSH)
		out_flush(o);
}

int
qlist_write(const struct queue *q, int fd, enum qlist_format f, struct qlist_stats *st,
    struct buf *why)
{
	struct out o = { fd, f, 0, BUF_INIT, 0 };
	int rc = -1;

	if (f == QLIST_JSON)
		buf_adds(&o.b, "{\"messages\":[");
	if (qlist_scan(q, write_one, &o, st, why) < 0) {
		out_flush(&o);
		goto out;
	}
	if (f == QLIST_JSON)
		buf_printf(&o.b, "%s],\"messages_in_queue\":%zu,\"not_yet_preprocessed\":%zu}\n",
		    o.n ? "\n" : "", st->queued, st->todo);
	else
		buf_printf(&o.b, "messages in queue: %zu\n"
		    "messages in queue but not yet preprocessed: %zu\n", st->queued, st->todo);
	out_flush(&o);
	if (o.err) {
		buf_printf(why, "write: %s", strerror(o.err));
		goto out;
	}
	rc = st->trouble ? 1 : 0;
out:
	buf_free(&o.b);
	return rc;
}

int
qlist_print(const struct queue *q, int fd, struct qlist_stats *st, struct buf *why)
{
	return qlist_write(q, fd, QLIST_TEXT, st, why);
}

int
qlist_count(const struct queue *q, struct qlist_count *c, struct buf *why)
{
	struct qents todo = { NULL, 0, 0 }, info = { NULL, 0, 0 };
	unsigned long *tids = NULL;
	size_t i;
	int rc = -1;

	memset(c, 0, sizeof *c);
	/* todo/ first, as qlist_scan: a message preprocessed meanwhile is
	 * in one of the two. */
	if (scan_dir(q->dfd, qdir_name[Q_TODO], &todo, why) < 0 || scan_info(q, &info, why) < 0)
		goto out;
	tids = xcalloc(todo.n + 1, sizeof *tids);
	for (i = 0; i < todo.n; i++) {
		tids[i] = todo.v[i].id;
		if (c->messages == 0 || todo.v[i].mtime.tv_sec < c->oldest)
			c->oldest = todo.v[i].mtime.tv_sec;
		c->messages++;
	}
	c->todo = todo.n;
	qsort(tids, todo.n, sizeof *tids, id_cmp);
	for (i = 0; i < info.n; i++) {
		if (bsearch(&info.v[i].id, tids, todo.n, sizeof *tids, id_cmp))
			continue;
		if (c->messages == 0 || info.v[i].mtime.tv_sec < c->oldest)
			c->oldest = info.v[i].mtime.tv_sec;
		c->messages++;
	}
	rc = 0;
out:
	free(todo.v);
	free(info.v);
	free(tids);
	return rc;
}
