/*
 * qlist.c: see qlist.h.
 *
 * Races with weir-send are expected, not errors: todo/ is scanned (and
 * each todo file read) before info/, so a message preprocessed meanwhile
 * is found in info/ and its todo entry dropped as a duplicate; a message
 * whose info file has gone when we read it was finished and is skipped.
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
#include "lib/timefmt.h"
#include "mail/envelope.h"
#include "mail/qlist.h"

/* Envelope files beyond this are trouble, not something to list. */
#define INFO_MAX	(ADDR_MAX + 16)
#define RCPTFILE_MAX	((size_t)1 << 30)
#define OUT_FLUSH	65536

struct qent {
	unsigned long id;
	time_t mtime;
	size_t off, len;	/* todo entries: their text in the todo buffer */
	int trouble;		/* todo entries: the text is a warning */
};

struct qents {
	struct qent *v;
	size_t n, cap;
};

struct out {
	int fd;
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

static void
out_raw(struct out *o, const char *s)
{
	buf_adds(&o->b, s);
	if (o->b.len >= OUT_FLUSH)
		out_flush(o);
}

static void
out_text(struct out *o, const struct buf *b)
{
	buf_add(&o->b, b->s, b->len);
	if (o->b.len >= OUT_FLUSH)
		out_flush(o);
}

static void
qents_add(struct qents *q, unsigned long id, time_t mtime)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->v = xrealloc(q->v, q->cap * sizeof *q->v);
	}
	q->v[q->n].id = id;
	q->v[q->n].mtime = mtime;
	q->v[q->n].off = q->v[q->n].len = 0;
	q->v[q->n].trouble = 0;
	q->n++;
}

static int
qent_cmp(const void *a, const void *b)
{
	const struct qent *x = a, *y = b;

	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
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
			st.st_mtime = 0;	/* listed; reading it will say why */
		}
		qents_add(q, id, st.st_mtime);
	}
	if (errno != 0) {
		buf_printf(why, "cannot read %s: %s", dir, strerror(errno));
		closedir(d);
		return -1;
	}
	closedir(d);
	return 0;
}

/* "21 Nov 2026 23:35:57 GMT  #457  1234  <sender> [ bouncing]" */
static void
stats_line(struct buf *t, unsigned long id, time_t mtime, long long size,
    const struct qrec *sender, int bouncing)
{
	char date[DATE_QMAIL_MAX];
	size_t dl;
	struct buf raw = BUF_INIT;

	date_qmail(date, mtime);
	dl = strlen(date);
	if (dl > 6)
		date[dl - 6] = '\0';	/* drop " -0000", as qmail-qread */
	buf_printf(&raw, "%s GMT  #%lu  %lld  <", date, id, size);
	buf_add(&raw, sender->addr, sender->len);
	buf_adds(&raw, "> ");
	if (bouncing)
		buf_adds(&raw, " bouncing");
	clean_add(t, raw.s, raw.len);
	buf_addc(t, '\n');
	buf_free(&raw);
}

static void
trouble(struct buf *t, unsigned long id, const char *prefix, const char *path, int err,
    const char *why)
{
	struct buf raw = BUF_INIT;

	buf_printf(&raw, "warning: trouble with #%lu: ", id);
	buf_printf(&raw, "%s%s", prefix, path);
	if (err)
		buf_printf(&raw, ": %s", strerror(err));
	if (why)
		buf_printf(&raw, ": %s", why);
	clean_add(t, raw.s, raw.len);
	buf_addc(t, '\n');
	buf_free(&raw);
}

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

/* Read queue file d/id into file.  0 ok; 1 trouble (a warning appended
 * to t); 2 gone (ENOENT: the caller decides what that means). */
static int
load(const struct queue *q, enum qdir d, unsigned long id, struct buf *t, struct buf *file,
    size_t max)
{
	char path[QPATH_MAX];
	int rc;

	queue_path(path, q, d, id);
	rc = read_file_at(q->dfd, path, file, max);
	if (rc == -1 && errno == ENOENT)
		return 2;
	if (rc == -1)
		trouble(t, id, "cannot read ", path, errno, NULL);
	else if (rc == -2)
		trouble(t, id, "", path, 0, "too large");
	return rc == 0 ? 0 : 1;
}

/* A parser's verdict on d/id: 0 ok, else 1 with a warning appended. */
static int
parsed(const struct queue *q, enum qdir d, unsigned long id, struct buf *t, int rc,
    struct buf *why)
{
	char path[QPATH_MAX];

	if (rc == 0)
		return 0;
	queue_path(path, q, d, id);
	trouble(t, id, "", path, 0, buf_cstr(why));
	buf_free(why);
	return 1;
}

/* One channel file (local/ or remote/) of id, appended to t.  0 ok,
 * 1 trouble (a warning appended). */
static int
list_channel(const struct queue *q, unsigned long id, enum qdir d, struct buf *t,
    struct buf *file)
{
	const char *chan = d == Q_LOCAL ? "\tlocal\t" : "\tremote\t", *w;
	struct buf why = BUF_INIT;
	struct qrec r;
	size_t off = 0, ntodo, ndone;
	int rc;

	rc = load(q, d, id, t, file, RCPTFILE_MAX);
	if (rc == 2)
		return 0;	/* no recipients on this channel */
	if (rc == 1 || parsed(q, d, id, t,
	    rcptfile_parse(file->s, file->len, &ntodo, &ndone, &why), &why))
		return 1;
	while (qrec_next(file->s, file->len, &off, &r, &w) == 1) {
		if (r.type == 'D')
			buf_adds(t, "  done");
		buf_adds(t, chan);
		clean_add(t, r.addr, r.len);
		buf_addc(t, '\n');
	}
	return 0;
}

/* A preprocessed message: its text appended to t.  0 listed, 1 listed
 * or not with trouble, 2 skipped (left the queue). */
static int
list_info(const struct queue *q, const struct qent *e, struct buf *t, struct buf *file)
{
	char path[QPATH_MAX];
	struct buf why = BUF_INIT;
	struct qrec sender;
	long long size = 0;
	int rc, err, bad = 0;

	if ((rc = load(q, Q_INFO, e->id, t, file, INFO_MAX)) != 0)
		return rc;	/* 2: finished since the scan */
	if (parsed(q, Q_INFO, e->id, t, info_parse(file->s, file->len, &sender, &why), &why))
		return 1;
	if ((err = mess_size(q, e->id, &size)) != 0) {
		if (err == ENOENT && !file_exists(q, Q_INFO, e->id))
			return 2;
		queue_path(path, q, Q_MESS, e->id);
		trouble(t, e->id, "cannot stat ", path, err, NULL);
		return 1;
	}
	stats_line(t, e->id, e->mtime, size, &sender, file_exists(q, Q_BOUNCE, e->id));
	bad |= list_channel(q, e->id, Q_LOCAL, t, file);
	bad |= list_channel(q, e->id, Q_REMOTE, t, file);
	return bad;
}

/* A message in todo/: its text appended to t.  Same results. */
static int
list_todo(const struct queue *q, struct qent *e, struct buf *t, struct buf *file)
{
	char path[QPATH_MAX];
	struct buf why = BUF_INIT;
	struct todo_env env;
	struct qrec r;
	const char *w;
	long long size = 0;
	size_t off;
	int rc, err;

	if ((rc = load(q, Q_TODO, e->id, t, file, RCPTFILE_MAX)) != 0)
		return rc;	/* 2: preprocessed since the scan */
	if (parsed(q, Q_TODO, e->id, t, todo_parse(file->s, file->len, &env, &why), &why))
		return 1;
	if ((err = mess_size(q, e->id, &size)) != 0) {
		queue_path(path, q, Q_MESS, e->id);
		trouble(t, e->id, "cannot stat ", path, err, NULL);
		return 1;
	}
	stats_line(t, e->id, e->mtime, size, &env.sender, 0);
	for (off = env.rcpt_off; qrec_next(file->s, file->len, &off, &r, &w) == 1; ) {
		buf_adds(t, "\ttodo\t");
		clean_add(t, r.addr, r.len);
		buf_addc(t, '\n');
	}
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
qlist_print(const struct queue *q, int fd, struct qlist_stats *st, struct buf *why)
{
	struct qents todo = { NULL, 0, 0 }, info = { NULL, 0, 0 };
	struct buf todotext = BUF_INIT, t = BUF_INIT, file = BUF_INIT;
	struct out o = { fd, BUF_INIT, 0 };
	unsigned long *ids = NULL;
	size_t i, start, ntodo = 0;
	int rc = -1, r;
	char line[128];

	memset(st, 0, sizeof *st);
	/* todo/ first, read at once: see the comment at the top. */
	if (scan_dir(q->dfd, qdir_name[Q_TODO], &todo, why) < 0)
		goto out;
	for (i = 0; i < todo.n; i++) {
		start = todotext.len;
		r = list_todo(q, &todo.v[i], &todotext, &file);
		if (r == 2) {
			todo.v[i].id = 0;	/* gone: id 0 is never a message */
			continue;
		}
		todo.v[i].off = start;
		todo.v[i].len = todotext.len - start;
		todo.v[i].trouble = r;
	}
	if (scan_info(q, &info, why) < 0)
		goto out;
	ids = xcalloc(info.n + 1, sizeof *ids);
	if (info.n > 0) {
		qsort(info.v, info.n, sizeof *info.v, qent_cmp);
		for (i = 0; i < info.n; i++)
			ids[i] = info.v[i].id;
		qsort(ids, info.n, sizeof *ids, id_cmp);
	}
	if (todo.n > 0)
		qsort(todo.v, todo.n, sizeof *todo.v, qent_cmp);

	for (i = 0; i < info.n; i++) {
		buf_reset(&t);
		r = list_info(q, &info.v[i], &t, &file);
		if (r == 2)
			continue;
		st->queued++;
		if (r == 1)
			st->trouble++;
		out_text(&o, &t);
	}
	for (i = 0; i < todo.n; i++) {
		const struct qent *e = &todo.v[i];

		if (e->id == 0 || bsearch(&e->id, ids, info.n, sizeof *ids, id_cmp))
			continue;
		buf_reset(&t);
		buf_add(&t, todotext.s + e->off, e->len);
		out_text(&o, &t);
		st->queued++;
		ntodo++;
		if (e->trouble)
			st->trouble++;
	}
	st->todo = ntodo;
	snprintf(line, sizeof line, "messages in queue: %zu\n", st->queued);
	out_raw(&o, line);
	snprintf(line, sizeof line, "messages in queue but not yet preprocessed: %zu\n",
	    st->todo);
	out_raw(&o, line);
	out_flush(&o);
	if (o.err) {
		buf_printf(why, "write: %s", strerror(o.err));
		goto out;
	}
	rc = st->trouble ? 1 : 0;
out:
	if (rc < 0)
		out_flush(&o);
	free(ids);
	free(todo.v);
	free(info.v);
	buf_free(&todotext);
	buf_free(&t);
	buf_free(&file);
	buf_free(&o.b);
	return rc;
}
