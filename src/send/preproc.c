/*
 * preproc.c: S4 to S5, step by step as src/mail/QUEUE.md says:
 *
 *   read todo/N (strictly: a corrupt todo file, or one whose sender holds
 *   a control byte, is logged and left alone for `weir queue-check` and
 *   the admin; nothing is guessed.  A recipient with a control byte, which
 *   a stock qmail-queue lets in, is kept as it is: deliver.c bounces it
 *   and the others go)
 *   remove any info/S/N, local/S/N, remote/S/N from an earlier try
 *   write info/S/N (F<sender>), mtime set to todo/N's: the queue time
 *   write remote/S/N (T<rcpt> each), fsync both files and both folders
 *   unlink intd/N, fsync intd/, unlink todo/N, fsync todo/: now S5
 *
 * weir has one channel, the upstream: local/ is never written.  A
 * recipient local to this host is rewritten to the admin address (the
 * local rule).  local_takeover() hands the recipients a stock qmail-send
 * left pending in local/ to the same rule.
 *
 * Trusts: the queue's files, parsed strictly all the same.
 * Config keys: hostname, admin (through struct preproc_opts).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The local rule: where mail for a local recipient goes. */
static void
add_local(struct buf *out, const struct preproc_opts *o, unsigned long id, const char *addr,
    size_t len, const char *what)
{
	log_info("msg %lu: %s <%.*s> rewritten to <%s>", id, what, (int)len, addr, o->admin);
	buf_adds(out, o->admin);
}

/* Create path afresh, write b, fsync.  0 ok, -1 logged. */
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
	if (fsync(fd) < 0) {
		log_warn("fsync %s", path);
		goto fail;
	}
	if (close(fd) < 0) {
		log_warn("close %s", path);
		return -1;
	}
	return 0;
fail:
	close(fd);
	return -1;
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

int
preprocess(struct queue *q, unsigned long id, const struct preproc_opts *o, size_t *nrcpt)
{
	char todo[QPATH_MAX], intd[QPATH_MAX], info[QPATH_MAX], remote[QPATH_MAX];
	char local[QPATH_MAX], dir[QPATH_MAX], mess[QPATH_MAX];
	struct buf t = BUF_INIT, why = BUF_INIT, out = BUF_INIT;
	struct todo_env e;
	struct stat st, ms;
	struct qrec r;
	const char *w;
	size_t off;
	int rc = -1;

	*nrcpt = 0;
	queue_path(todo, q, Q_TODO, id);
	queue_path(intd, q, Q_INTD, id);
	queue_path(info, q, Q_INFO, id);
	queue_path(local, q, Q_LOCAL, id);
	queue_path(remote, q, Q_REMOTE, id);
	queue_path(mess, q, Q_MESS, id);

	if (fstatat(q->dfd, mess, &ms, 0) < 0) {
		log_warn("msg %lu: stat %s", id, mess);
		return errno == ENOENT ? -1 : -2;
	}
	if (fstatat(q->dfd, todo, &st, 0) < 0) {
		log_warn("msg %lu: stat %s", id, todo);
		return errno == ENOENT ? -1 : -2;
	}
	rc = -2;
	if (read_file_at(q->dfd, todo, &t, 64 << 20) != 0) {
		log_warn("read %s", todo);
		goto out;
	}
	if (todo_parse(t.s, t.len, &e, &why) == 0 &&
	    (w = envelope_addr_problem(e.sender.addr, e.sender.len)) != NULL)
		buf_printf(&why, "sender: %s", w);
	if (why.len > 0) {
		log_warnx("msg %lu: %s is corrupt (%s); left for the admin", id, todo, why.s);
		rc = -1;
		goto out;
	}
	if (unlink_if_there(q, info) < 0 || unlink_if_there(q, local) < 0 ||
	    unlink_if_there(q, remote) < 0)
		goto out;

	buf_addc(&out, 'F');
	buf_add(&out, e.sender.addr, e.sender.len);
	buf_addc(&out, '\0');
	if (write_new(q, info, &out, &st.st_mtim) < 0)
		goto out;

	buf_reset(&out);
	for (off = e.rcpt_off; qrec_next(t.s, t.len, &off, &r, &w) == 1; ) {
		const char *bad = envelope_addr_problem(r.addr, r.len);

		buf_addc(&out, 'T');
		if (bad != NULL)
			log_warnx("msg %lu: recipient %zu: %s; it will be bounced", id, *nrcpt, bad);
		if (bad == NULL && addr_is_local(r.addr, r.len, o->hostname))
			add_local(&out, o, id, r.addr, r.len, "local recipient");
		else
			buf_add(&out, r.addr, r.len);
		buf_addc(&out, '\0');
		(*nrcpt)++;
	}
	if (*nrcpt > 0 && write_new(q, remote, &out, NULL) < 0)
		goto out;
	queue_dirpath(dir, q, Q_INFO, id);
	if (fsync_dir(q->dfd, dir) < 0) {
		log_warn("fsync folder %s", dir);
		goto out;
	}
	queue_dirpath(dir, q, Q_REMOTE, id);
	if (*nrcpt > 0 && fsync_dir(q->dfd, dir) < 0) {
		log_warn("fsync folder %s", dir);
		goto out;
	}
	/* intd/N must be gone for good before todo/N is: S5 has no intd. */
	if (unlink_if_there(q, intd) < 0)
		goto out;
	if (fsync_dir(q->dfd, "intd") < 0) {
		log_warn("fsync folder intd");
		goto out;
	}
	if (unlinkat(q->dfd, todo, 0) < 0) {
		log_warn("unlink %s", todo);
		goto out;
	}
	if (fsync_dir(q->dfd, "todo") < 0) {
		/* todo/N may come back after a crash: preprocessing is then
		 * simply done again, from the start. */
		log_warn("fsync folder todo");
		goto out;
	}
	log_info("msg %lu: new, from <%.*s>, %zu recipients, %lld bytes", id,
	    (int)e.sender.len, e.sender.addr, *nrcpt, (long long)ms.st_size);
	rc = 0;
out:
	buf_free(&t);
	buf_free(&why);
	buf_free(&out);
	return rc;
}

int
local_takeover(struct queue *q, unsigned long id, const struct preproc_opts *o)
{
	char local[QPATH_MAX], remote[QPATH_MAX], dir[QPATH_MAX];
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
		log_warn("msg %lu: read %s", id, local);
		goto out;
	}
	if (rcptfile_parse(l.s, l.len, &todo, &done, &why) < 0) {
		log_warnx("msg %lu: %s is corrupt (%s); left for the admin", id, local, why.s);
		goto out;
	}
	for (; todo > 0 && qrec_next(l.s, l.len, &off, &r, &w) == 1; ) {
		if (r.type != 'T')
			continue;
		buf_addc(&out, 'T');
		if (envelope_addr_problem(r.addr, r.len) != NULL) {
			/* deliver.c bounces it, as any other. */
			log_warnx("msg %lu: recipient left pending in %s holds a control byte; "
			    "it will be bounced", id, local);
			buf_add(&out, r.addr, r.len);
		} else {
			add_local(&out, o, id, r.addr, r.len, "recipient left pending in local/ by qmail");
		}
		buf_addc(&out, '\0');
		n++;
	}
	/* Appended to remote/S/N (made if need be) and on disk before
	 * local/S/N goes: a crash in between sends them twice, never not at
	 * all.  The append is one write: ext4 (data=ordered) never shows a
	 * size whose bytes are not written. */
	if (n > 0) {
		created = fstatat(q->dfd, remote, &st, 0) < 0;
		fd = openat(q->dfd, remote, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			log_warn("msg %lu: open %s", id, remote);
			goto out;
		}
		if (full_write(fd, out.s, out.len) < 0 || fsync(fd) < 0) {
			log_warn("msg %lu: append to %s", id, remote);
			close(fd);
			goto out;
		}
		if (close(fd) < 0) {
			log_warn("msg %lu: close %s", id, remote);
			goto out;
		}
		queue_dirpath(dir, q, Q_REMOTE, id);
		if (created && fsync_dir(q->dfd, dir) < 0) {
			log_warn("msg %lu: fsync folder %s", id, dir);
			goto out;
		}
	}
	if (unlinkat(q->dfd, local, 0) < 0 && errno != ENOENT) {
		log_warn("msg %lu: unlink %s", id, local);
		goto out;
	}
	queue_dirpath(dir, q, Q_LOCAL, id);
	if (fsync_dir(q->dfd, dir) < 0) {
		log_warn("msg %lu: fsync folder %s", id, dir);
		goto out;
	}
	if (n > 0)
		log_info("msg %lu: %zu recipient%s taken over from %s", id, n, n == 1 ? "" : "s",
		    local);
	rc = n > 0;
out:
	buf_free(&l);
	buf_free(&why);
	buf_free(&out);
	return rc;
}
