/*
 * preproc.c: S4 to S5, step by step as src/mail/QUEUE.md says:
 *
 *   read todo/N (strictly: a corrupt todo file is logged and left alone
 *   for `weir queue-check` and the admin; nothing is guessed)
 *   remove any info/S/N, local/S/N, remote/S/N from an earlier try
 *   write info/S/N (F<sender>), mtime set to todo/N's: the queue time
 *   write remote/S/N (T<rcpt> each), fsync both files and both folders
 *   unlink intd/N, fsync intd/, unlink todo/N, fsync todo/: now S5
 *
 * weir has one channel, the upstream: local/ is never written.  A
 * recipient local to this host is rewritten to the admin address.
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
		return -1;
	}
	if (fstatat(q->dfd, todo, &st, 0) < 0) {
		log_warn("msg %lu: stat %s", id, todo);
		return -1;
	}
	if (read_file_at(q->dfd, todo, &t, 64 << 20) != 0) {
		log_warn("read %s", todo);
		goto out;
	}
	if (todo_parse(t.s, t.len, &e, &why) < 0 || todo_check_addrs(t.s, t.len, &e, &why) < 0) {
		log_warnx("msg %lu: %s is corrupt (%s); left for the admin", id, todo, why.s);
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
		buf_addc(&out, 'T');
		if (addr_is_local(r.addr, r.len, o->hostname)) {
			log_info("msg %lu: local recipient <%.*s> rewritten to <%s>", id,
			    (int)r.len, r.addr, o->admin);
			buf_adds(&out, o->admin);
		} else {
			buf_add(&out, r.addr, r.len);
		}
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
