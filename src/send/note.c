/*
 * note.c: see note.h.
 *
 * Trusts: the queue; a note is used only if it parses and its birth is
 * the message's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "send/note.h"

/* mkdir path in the queue unless it exists; *made is set if it did not. */
static int
make_dir(struct queue *q, const char *path, int *made)
{
	if (mkdirat(q->dfd, path, 0700) == 0) {
		*made = 1;
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	log_warn("create %s in the queue (`weir queue-init` makes it); without it no "
	    "waiting credit outlives a restart and no delay warning is sent", path);
	return -1;
}

int
note_init(struct queue *q)
{
	char path[QPATH_MAX];
	unsigned s;
	int made = 0;

	if (make_dir(q, SCHED_DIR, &made) < 0)
		return -1;
	for (s = 0; s < q->split; s++) {
		snprintf(path, sizeof path, SCHED_DIR "/%u", s);
		if (make_dir(q, path, &made) < 0)
			return -1;
	}
	if (made && (fsync_dir(q->dfd, SCHED_DIR) < 0 || fsync_dir(q->dfd, ".") < 0)) {
		log_warn("fsync %s", SCHED_DIR);
		return -1;
	}
	return 0;
}

int
note_load(struct queue *q, unsigned long id, long long birth, struct schednote *n)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX];
	struct buf b = BUF_INIT, why = BUF_INIT;
	int r;

	schedfile_path(path, q, id);
	r = read_file_at(q->dfd, path, &b, SCHEDFILE_MAX);
	if (r == -1 && errno == ENOENT) {
		buf_free(&b);
		return 0;
	}
	if (r != 0) {
		if (r == -2)
			log_warnx("msg %s: %s is too long to be ours", queue_msgid_of(q, id, qid), path);
		else
			log_warn("msg %s: read %s", queue_msgid_of(q, id, qid), path);
		buf_free(&b);
		return -1;
	}
	r = schedfile_parse(b.s, b.len, n, &why);
	buf_free(&b);
	if (r < 0) {
		log_warnx("msg %s: %s is malformed: %s", queue_msgid_of(q, id, qid), path, why.s);
		buf_free(&why);
		return -1;
	}
	buf_free(&why);
	if (n->birth != birth) {
		/* An earlier message with the same inode number left it. */
		log_info("msg %s: removing %s, left by an earlier message", queue_msgid_of(q, id, qid), path);
		(void)note_remove(q, id);
		return 0;
	}
	return 1;
}

/* Write bytes to sched/tmp and rename it to path; dir is path's folder. */
static int
replace(struct queue *q, const char *path, const char *dir, const struct buf *b, int durable)
{
	int fd;

	fd = openat(q->dfd, SCHED_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		log_warn("create %s", SCHED_TMP);
		return -1;
	}
	if (full_write(fd, b->s, b->len) < 0 || (durable && fsync(fd) < 0)) {
		log_warn("write %s", SCHED_TMP);
		close(fd);
		return -1;
	}
	if (close(fd) < 0) {
		log_warn("close %s", SCHED_TMP);
		return -1;
	}
	if (renameat(q->dfd, SCHED_TMP, q->dfd, path) < 0) {
		log_warn("rename %s to %s", SCHED_TMP, path);
		return -1;
	}
	if (durable && fsync_dir(q->dfd, dir) < 0) {
		log_warn("fsync %s", dir);
		return -1;
	}
	return 0;
}

int
note_save(struct queue *q, unsigned long id, const struct schednote *n, int durable)
{
	char qid[QUEUE_ID_MAX];
	char path[QPATH_MAX], dir[QPATH_MAX];
	struct buf b = BUF_INIT;
	int r;

	schedfile_path(path, q, id);
	schedfile_dirpath(dir, q, id);
	schedfile_format(n, &b);
	r = replace(q, path, dir, &b, durable);
	buf_free(&b);
	if (r < 0)
		log_warnx("msg %s: %s not written", queue_msgid_of(q, id, qid), path);
	return r;
}

int
note_remove(struct queue *q, unsigned long id)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX];

	schedfile_path(path, q, id);
	if (unlinkat(q->dfd, path, 0) < 0 && errno != ENOENT) {
		log_warn("msg %s: unlink %s", queue_msgid_of(q, id, qid), path);
		return -1;
	}
	return 0;
}

int
note_alive_save(struct queue *q, long long now)
{
	struct buf b = BUF_INIT;
	int r;

	buf_printf(&b, "%lld\n", now);
	r = replace(q, SCHED_ALIVE, SCHED_DIR, &b, 0);
	buf_free(&b);
	return r;
}

int
note_alive_load(struct queue *q, long long *t)
{
	struct buf b = BUF_INIT;
	int r;

	r = read_file_at(q->dfd, SCHED_ALIVE, &b, 32);
	if (r == 0)
		r = schedfile_parse_alive(b.s, b.len, t);
	else
		r = -1;
	buf_free(&b);
	return r;
}

int
note_waits_save(struct queue *q, const struct buf *b)
{
	if (b->len > 0)
		return replace(q, SCHED_WAITS, SCHED_DIR, b, 0);
	if (unlinkat(q->dfd, SCHED_WAITS, 0) < 0 && errno != ENOENT) {
		log_warn("unlink %s", SCHED_WAITS);
		return -1;
	}
	return 0;
}

int
note_waits_load(struct queue *q, struct schedwait **v, size_t *n)
{
	struct buf b = BUF_INIT, why = BUF_INIT;
	int r;

	*v = NULL;
	*n = 0;
	r = read_file_at(q->dfd, SCHED_WAITS, &b, SCHEDWAITS_MAX);
	if (r == -1 && errno == ENOENT)
		r = 0;
	else if (r == -2)
		log_warnx("%s is over %lu bytes: open waits are credited from the notes only",
		    SCHED_WAITS, SCHEDWAITS_MAX);
	else if (r != 0)
		log_warn("read %s: open waits are credited from the notes only", SCHED_WAITS);
	else if ((r = schedfile_parse_waits(b.s, b.len, v, n, &why)) < 0)
		log_warnx("%s is malformed: %s; open waits are credited from the notes only",
		    SCHED_WAITS, why.s);
	buf_free(&b);
	buf_free(&why);
	return r < 0 ? -1 : 0;
}

int
note_oauth_save(struct queue *q, const char *upstream, long long t)
{
	char path[QPATH_MAX];
	struct buf b = BUF_INIT;
	int r;

	snprintf(path, sizeof path, SCHED_OAUTH "%s", upstream);
	buf_printf(&b, "%lld\n", t);
	r = replace(q, path, SCHED_DIR, &b, 1);
	buf_free(&b);
	return r;
}

int
note_oauth_load(struct queue *q, const char *upstream, long long *t)
{
	char path[QPATH_MAX];
	struct buf b = BUF_INIT;
	int r;

	snprintf(path, sizeof path, SCHED_OAUTH "%s", upstream);
	r = read_file_at(q->dfd, path, &b, 32);
	r = r == 0 ? schedfile_parse_alive(b.s, b.len, t) : -1;
	buf_free(&b);
	return r;
}
