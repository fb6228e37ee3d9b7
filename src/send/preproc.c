/*
 * preproc.c: S4 to S5, step by step as src/mail/QUEUE.md says:
 *
 *   read todo/N (strictly: a corrupt todo file, or one whose sender holds
 *   a control byte, is logged and left alone for `weir queue-check` and
 *   the admin; nothing is guessed.  A recipient with a control byte, which
 *   a stock qmail-queue lets in, is kept as it is: batch.c bounces it
 *   and the others go)
 *   remove any info/S/N, local/S/N, remote/S/N from an earlier try
 *   write info/S/N (F<sender>), mtime set to todo/N's: the queue time
 *   write remote/S/N (T<rcpt> each), fsync both files and both folders
 *   unlink intd/N, fsync intd/, unlink todo/N, fsync todo/: now S5
 *
 * weir has one channel, the upstream: local/ is never written.  A
 * recipient local to this host goes through the local rule: its local
 * part is looked up in aliases_file (mail/aliases.h; values with a domain
 * go there, local ones are looked up in turn, :include: files read,
 * pipes and files refused with a log line), else it is rewritten to the
 * admin address.  local_takeover() hands the recipients a stock qmail-send
 * left pending in local/ to the same rule.
 *
 * Trusts: the queue's files, parsed strictly all the same.
 * Config keys: hostname, admin, aliases_file (through struct preproc_opts).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "send/preproc.h"

int
addr_is_local(const char *addr, size_t len, const char *hostname)
{
	const char *at = memrchr(addr, '@', len);
	size_t dlen;

	if (at == NULL)
		return 1;
	at++;
	dlen = len - (size_t)(at - addr);
	if (dlen == 9 && strncasecmp(at, "localhost", 9) == 0)
		return 1;
	return dlen == strlen(hostname) && strncasecmp(at, hostname, dlen) == 0;
}

#define ALIAS_DEPTH 10

struct dests {
	char **v;
	size_t n;
};

static void
dest_add(struct dests *d, const char *addr)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (strcasecmp(d->v[i], addr) == 0)
			return;
	d->v = xrealloc(d->v, (d->n + 1) * sizeof *d->v);
	d->v[d->n++] = xstrdup(addr);
}

static void expand(const struct preproc_opts *o, const char *qid, const struct alias *a,
    int depth, struct dests *d);

/* One value of alias a (or of a file it includes). */
static void
take(const struct preproc_opts *o, const char *qid, const struct alias *a, const char *x,
    int depth, struct dests *d)
{
	const char *at;
	const struct alias *sub;

	if (x[0] == '|' || x[0] == '/') {
		log_warnx("msg %s: %s: alias %s: \"%s\" refused: weir delivers nothing to pipes "
		    "or files on this host", qid, o->aliases->path, a->name, x);
	} else if (strncasecmp(x, ":include:", 9) == 0) {
		struct buf why = BUF_INIT;
		char **v = NULL;
		size_t n = 0, i;

		if (depth >= ALIAS_DEPTH || aliases_include(x + 9, &v, &n, &why) < 0)
			log_warnx("msg %s: %s: alias %s: %s refused: %s", qid, o->aliases->path,
			    a->name, x, why.len ? why.s : "nested too deep");
		for (i = 0; i < n; i++) {
			take(o, qid, a, v[i], depth + 1, d);
			free(v[i]);
		}
		free(v);
		buf_free(&why);
	} else if (envelope_addr_problem(x, strlen(x)) != NULL) {
		log_warnx("msg %s: %s: alias %s: a value holds a control character; refused", qid,
		    o->aliases->path, a->name);
	} else if (!addr_is_local(x, strlen(x), o->hostname)) {
		dest_add(d, x);
	} else {
		at = strrchr(x, '@');
		sub = aliases_find(o->aliases, x, at ? (size_t)(at - x) : strlen(x));
		if (sub && sub != a && depth < ALIAS_DEPTH)
			expand(o, qid, sub, depth + 1, d);
		else
			dest_add(d, o->admin);
	}
}

static void
expand(const struct preproc_opts *o, const char *qid, const struct alias *a, int depth,
    struct dests *d)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		take(o, qid, a, a->v[i], depth, d);
}

/* The local rule: a local recipient goes where aliases_file says, else
 * (no entry, or nothing usable in it) to the admin address.  Appends a
 * T record for each address; returns how many. */
static size_t
add_local(struct buf *out, const struct preproc_opts *o, const char *qid, const char *addr,
    size_t len, const char *what)
{
	const char *at = memrchr(addr, '@', len);
	const struct alias *a = NULL;
	struct dests d = { NULL, 0 };
	struct buf shown = BUF_INIT;
	size_t i, n;

	if (o->aliases)
		a = aliases_find(o->aliases, addr, at ? (size_t)(at - addr) : len);
	if (a)
		expand(o, qid, a, 0, &d);
	if (d.n == 0)
		dest_add(&d, o->admin);
	for (i = 0; i < d.n; i++) {
		buf_printf(&shown, "%s<%s>", i ? ", " : "", d.v[i]);
		buf_addc(out, 'T');
		buf_adds(out, d.v[i]);
		buf_addc(out, '\0');
		free(d.v[i]);
	}
	log_info("msg %s: %s <%.*s> rewritten to %s%s%s", qid, what, (int)len, addr, shown.s,
	    a ? " by " : "", a ? o->aliases->path : "");
	n = d.n;
	free(d.v);
	buf_free(&shown);
	return n;
}

/* Create path afresh and write b: its descriptor (to be fsynced), or -1
 * logged. */
static int
write_new(struct queue *q, const char *path, const struct buf *b, const struct timespec *mtime)
{
	int fd = openat(q->dfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0) {
		log_warn("create %s", path);
		return -1;
	}
	if (full_write(fd, b->s, b->len) < 0) {
		log_warn("write %s", path);
		goto fail;
	}
	if (mtime) {
		struct timespec ts[2] = { *mtime, *mtime };

		if (futimens(fd, ts) < 0) {
			log_warn("set the time of %s", path);
			goto fail;
		}
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* fsync and close fd (path's); -1 logged.  fd -1: nothing to do. */
static int
sync_close(int fd, const char *path)
{
	int rc = 0;

	if (fd < 0)
		return 0;
	if (fsync(fd) < 0) {
		log_warn("fsync %s", path);
		rc = -1;
	}
	if (close(fd) < 0 && rc == 0) {
		log_warn("close %s", path);
		rc = -1;
	}
	return rc;
}

static int
unlink_if_there(struct queue *q, const char *path)
{
	if (unlinkat(q->dfd, path, 0) < 0 && errno != ENOENT) {
		log_warn("unlink %s", path);
		return -1;
	}
	return 0;
}

/* One message of a batch: the first part, up to its new files written
 * (not yet durable).  p->rc: 1 so far so good, else preprocess()'s. */
static void
stage(struct queue *q, const struct preproc_opts *o, struct preproc_msg *p)
{
	char todo[QPATH_MAX], info[QPATH_MAX], remote[QPATH_MAX], local[QPATH_MAX];
	char mess[QPATH_MAX];
	struct buf t = BUF_INIT, why = BUF_INIT, out = BUF_INIT;
	unsigned long id = p->id;
	struct todo_env e;
	struct stat st, ms;
	struct qrec r;
	const char *w;
	size_t off;

	p->nrcpt = 0;
	p->fd[0] = p->fd[1] = -1;
	p->rc = -1;
	queue_path(todo, q, Q_TODO, id);
	queue_path(info, q, Q_INFO, id);
	queue_path(local, q, Q_LOCAL, id);
	queue_path(remote, q, Q_REMOTE, id);
	queue_path(mess, q, Q_MESS, id);

	if (fstatat(q->dfd, mess, &ms, 0) < 0) {
		log_warn("msg %lu: stat %s", id, mess);
		p->rc = errno == ENOENT ? -1 : -2;
		return;
	}
	if (fstatat(q->dfd, todo, &st, 0) < 0) {
		log_warn("msg %lu: stat %s", id, todo);
		p->rc = errno == ENOENT ? -1 : -2;
		return;
	}
	queue_msgid(p->qid, id, &st.st_mtim);
	p->size = (long long)ms.st_size;
	p->rc = -2;
	if (read_file_at(q->dfd, todo, &t, 64 << 20) != 0) {
		log_warn("read %s", todo);
		goto out;
	}
	if (todo_parse(t.s, t.len, &e, &why) == 0 &&
	    (w = envelope_addr_problem(e.sender.addr, e.sender.len)) != NULL)
		buf_printf(&why, "sender: %s", w);
	if (why.len > 0) {
		log_warnx("msg %s: %s is corrupt (%s); left for the admin", p->qid, todo, why.s);
		p->rc = -1;
		goto out;
	}
	p->uid = e.uid;
	p->pid = e.pid;
	snprintf(p->sender, sizeof p->sender, "%.*s", (int)e.sender.len, e.sender.addr);
	if (unlink_if_there(q, info) < 0 || unlink_if_there(q, local) < 0 ||
	    unlink_if_there(q, remote) < 0)
		goto out;

	buf_addc(&out, 'F');
	buf_add(&out, e.sender.addr, e.sender.len);
	buf_addc(&out, '\0');
	if ((p->fd[0] = write_new(q, info, &out, &st.st_mtim)) < 0)
		goto out;

	buf_reset(&out);
	for (off = e.rcpt_off; qrec_next(t.s, t.len, &off, &r, &w) == 1; ) {
		const char *bad = envelope_addr_problem(r.addr, r.len);

		if (bad != NULL)
			log_warnx("msg %s: recipient %zu: %s; it will be bounced", p->qid, p->nrcpt,
			    bad);
		if (bad == NULL && addr_is_local(r.addr, r.len, o->hostname)) {
			p->nrcpt += add_local(&out, o, p->qid, r.addr, r.len, "local recipient");
			continue;
		}
		buf_addc(&out, 'T');
		buf_add(&out, r.addr, r.len);
		buf_addc(&out, '\0');
		p->nrcpt++;
	}
	if (p->nrcpt > 0 && (p->fd[1] = write_new(q, remote, &out, NULL)) < 0)
		goto out;
	p->rc = 1;
out:
	if (p->rc != 1) {
		if (p->fd[0] >= 0)
			close(p->fd[0]);
		p->fd[0] = -1;
	}
	buf_free(&t);
	buf_free(&why);
	buf_free(&out);
}

/* fsync folder d/S once for the batch's messages in it that are still
 * going (rc 1; fd says which have a file there, or all: fdk < 0); a
 * failure puts them all off (-2). */
static void
sync_folders(struct queue *q, enum qdir d, struct preproc_msg *v, size_t n, int fdk)
{
	unsigned char *done = xcalloc(q->split, 1);
	char dir[QPATH_MAX];
	size_t i, j;
	unsigned k;

	for (i = 0; i < n; i++) {
		if (v[i].rc != 1 || (fdk >= 0 && !v[i].had[fdk]))
			continue;
		k = (unsigned)(v[i].id % q->split);
		if (done[k])
			continue;
		done[k] = 1;
		queue_dirpath(dir, q, d, v[i].id);
		if (fsync_dir(q->dfd, dir) == 0)
			continue;
		log_warn("fsync folder %s", dir);
		for (j = 0; j < n; j++)
			if (v[j].rc == 1 && v[j].id % q->split == k)
				v[j].rc = -2;
	}
	free(done);
}

/* unlink d/N of each message still going, then fsync the flat folder d
 * once; a failure puts off the messages it concerns (-2). */
static void
drop_all(struct queue *q, enum qdir d, struct preproc_msg *v, size_t n)
{
	char path[QPATH_MAX];
	size_t i, going = 0;

	for (i = 0; i < n; i++) {
		if (v[i].rc != 1)
			continue;
		queue_path(path, q, d, v[i].id);
		/* todo/N must be there (S4): it is what the batch is of. */
		if (d == Q_TODO ? unlinkat(q->dfd, path, 0) < 0 : unlink_if_there(q, path) < 0) {
			if (d == Q_TODO)
				log_warn("unlink %s", path);
			v[i].rc = -2;
		} else
			going++;
	}
	if (going > 0 && fsync_dir(q->dfd, qdir_name[d]) < 0) {
		/* todo/N may come back after a crash: preprocessing is then
		 * simply done again, from the start. */
		log_warn("fsync folder %s", qdir_name[d]);
		for (i = 0; i < n; i++)
			if (v[i].rc == 1)
				v[i].rc = -2;
	}
}

void
preprocess_batch(struct queue *q, const struct preproc_opts *o, struct preproc_msg *v, size_t n)
{
	char path[QPATH_MAX];
	size_t i, k;

	if (o->aliases)
		aliases_refresh(o->aliases);
	for (i = 0; i < n; i++)
		stage(q, o, &v[i]);
	/* The new files and their folders durable: the first fsync commits
	 * the batch's writes, the rest find them done. */
	for (i = 0; i < n; i++) {
		static const enum qdir d[2] = { Q_INFO, Q_REMOTE };

		for (k = 0; k < 2; k++) {
			v[i].had[k] = v[i].fd[k] >= 0;
			queue_path(path, q, d[k], v[i].id);
			if (sync_close(v[i].fd[k], path) < 0 && v[i].rc == 1)
				v[i].rc = -2;
			v[i].fd[k] = -1;
		}
	}
	sync_folders(q, Q_INFO, v, n, -1);
	sync_folders(q, Q_REMOTE, v, n, 1);
	/* intd/N gone for good before todo/N is: S5 has no intd. */
	drop_all(q, Q_INTD, v, n);
	drop_all(q, Q_TODO, v, n);
	for (i = 0; i < n; i++) {
		if (v[i].rc != 1)
			continue;
		v[i].rc = 0;
		log_info("msg %s: queued, from <%s>, %zu recipient(s), %lld bytes, by uid %lu "
		    "pid %lu", v[i].qid, v[i].sender, v[i].nrcpt, v[i].size, v[i].uid, v[i].pid);
	}
}

int
preprocess(struct queue *q, unsigned long id, const struct preproc_opts *o, size_t *nrcpt)
{
	struct preproc_msg p;

	memset(&p, 0, sizeof p);
	p.id = id;
	preprocess_batch(q, o, &p, 1);
	*nrcpt = p.nrcpt;
	return p.rc;
}

int
local_takeover(struct queue *q, unsigned long id, const struct preproc_opts *o)
{
	char local[QPATH_MAX], remote[QPATH_MAX], dir[QPATH_MAX], qid[QUEUE_ID_MAX];
	struct buf l = BUF_INIT, why = BUF_INIT, out = BUF_INIT;
	size_t off = 0, todo, done, n = 0;
	struct stat st;
	struct qrec r;
	const char *w;
	int fd, created, rc = -1;

	queue_path(local, q, Q_LOCAL, id);
	queue_path(remote, q, Q_REMOTE, id);
	if (read_file_at(q->dfd, local, &l, 256 << 20) != 0) {
		if (errno == ENOENT)
			return 0;
		log_warn("msg %s: read %s", queue_msgid_of(q, id, qid), local);
		goto out;
	}
	queue_msgid_of(q, id, qid);
	if (rcptfile_parse(l.s, l.len, &todo, &done, &why) < 0) {
		log_warnx("msg %lu: %s is corrupt (%s); left for the admin", id, local, why.s);
		goto out;
	}
	if (todo > 0 && o->aliases)
		aliases_refresh(o->aliases);
	for (; todo > 0 && qrec_next(l.s, l.len, &off, &r, &w) == 1; ) {
		if (r.type != 'T')
			continue;
		if (envelope_addr_problem(r.addr, r.len) != NULL) {
			/* batch.c (batch_fill) bounces it, as any other. */
			log_warnx("msg %lu: recipient left pending in %s holds a control byte; "
			    "it will be bounced", id, local);
			buf_addc(&out, 'T');
			buf_add(&out, r.addr, r.len);
			buf_addc(&out, '\0');
			n++;
		} else {
			n += add_local(&out, o, qid, r.addr, r.len,
			    "recipient left pending in local/ by qmail");
		}
	}
	/* Appended to remote/S/N (made if need be) and on disk before
	 * local/S/N goes: a crash in between sends them twice, never not at
	 * all.  The append is one write: ext4 (data=ordered) never shows a
	 * size whose bytes are not written. */
	if (n > 0) {
		created = fstatat(q->dfd, remote, &st, 0) < 0;
		fd = openat(q->dfd, remote, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			log_warn("msg %s: open %s", qid, remote);
			goto out;
		}
		if (full_write(fd, out.s, out.len) < 0 || fsync(fd) < 0) {
			log_warn("msg %s: append to %s", qid, remote);
			close(fd);
			goto out;
		}
		if (close(fd) < 0) {
			log_warn("msg %s: close %s", qid, remote);
			goto out;
		}
		queue_dirpath(dir, q, Q_REMOTE, id);
		if (created && fsync_dir(q->dfd, dir) < 0) {
			log_warn("msg %s: fsync folder %s", qid, dir);
			goto out;
		}
	}
	if (unlinkat(q->dfd, local, 0) < 0 && errno != ENOENT) {
		log_warn("msg %s: unlink %s", qid, local);
		goto out;
	}
	queue_dirpath(dir, q, Q_LOCAL, id);
	if (fsync_dir(q->dfd, dir) < 0) {
		log_warn("msg %s: fsync folder %s", qid, dir);
		goto out;
	}
	if (n > 0)
		log_info("msg %s: %zu recipient%s taken over from %s", qid, n, n == 1 ? "" : "s",
		    local);
	rc = n > 0;
out:
	buf_free(&l);
	buf_free(&why);
	buf_free(&out);
	return rc;
}
