/*
 * queue.c: queue paths and creation.  See queue.h and QUEUE.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/decimal.h"
#include "mail/queue.h"

const char *const qdir_name[Q_NDIRS] = {
	"mess", "info", "local", "remote", "pid", "intd", "todo", "bounce",
};

/* qmail 1.03's layout (hier.c); its two owners qmailq and qmails become
 * one owner, weir-send, and a group for the set-group-id weir-queue (see
 * queue.h and QUEUE.md). */
const struct qnode queue_layout[] = {
	{ ".",              QK_DIR,      0750,  0,     ROLE_QUEUE },
	{ "pid",            QK_DIR,      01770, 0,     ROLE_QUEUE },
	{ "intd",           QK_DIR,      01770, 0,     ROLE_QUEUE },
	{ "todo",           QK_DIR,      01770, 0,     ROLE_QUEUE },
	{ "bounce",         QK_DIR,      0700,  0,     ROLE_SEND },
	{ "mess",           QK_SPLITDIR, 0750,  01770, ROLE_QUEUE },
	{ "info",           QK_SPLITDIR, 0700,  0700,  ROLE_SEND },
	{ "local",          QK_SPLITDIR, 0700,  0700,  ROLE_SEND },
	{ "remote",         QK_SPLITDIR, 0700,  0700,  ROLE_SEND },
	{ "sched",          QK_SPLITDIR, 0700,  0700,  ROLE_SEND },	/* weir's own: QUEUE.md */
	{ "hold",           QK_DIR,      0700,  0,     ROLE_SEND },	/* weir's own: mail/qctl.h */
	{ "ctl",            QK_DIR,      0700,  0,     ROLE_SEND },	/* weir's own: mail/qctl.h */
	{ "reply",          QK_DIR,      0700,  0,     ROLE_SEND },	/* weir's own: mail/qctl.h */
	{ "flight",         QK_DIR,      0700,  0,     ROLE_SEND },	/* weir's own: mail/sessproto.h */
	{ "lock",           QK_DIR,      0750,  0,     ROLE_QUEUE },
	{ "lock/sendmutex", QK_FILE,     0600,  0,     ROLE_SEND },
	{ "lock/trigger",   QK_FIFO,     0620,  0,     ROLE_QUEUE },
};
const size_t queue_layout_len = sizeof queue_layout / sizeof queue_layout[0];

int
queue_open(struct queue *q, const char *path, unsigned split)
{
	q->dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (q->dfd < 0)
		return -1;
	q->split = split;
	q->path = xstrdup(path);
	return 0;
}

void
queue_close(struct queue *q)
{
	if (q->dfd >= 0)
		close(q->dfd);
	q->dfd = -1;
	free(q->path);
	q->path = NULL;
}

void
queue_path(char buf[QPATH_MAX], const struct queue *q, enum qdir d, unsigned long id)
{
	if (qdir_is_split(d))
		snprintf(buf, QPATH_MAX, "%s/%lu/%lu", qdir_name[d], id % q->split, id);
	else
		snprintf(buf, QPATH_MAX, "%s/%lu", qdir_name[d], id);
}

void
queue_dirpath(char buf[QPATH_MAX], const struct queue *q, enum qdir d, unsigned long id)
{
	if (qdir_is_split(d))
		snprintf(buf, QPATH_MAX, "%s/%lu", qdir_name[d], id % q->split);
	else
		snprintf(buf, QPATH_MAX, "%s", qdir_name[d]);
}

int
queue_parse_id(const char *name, unsigned long *id)
{
	uint64_t v;

	if (dec_parse(name, strlen(name), ULONG_MAX, &v) < 0)
		return -1;
	*id = (unsigned long)v;
	return 0;
}

int
queue_dir_ids(int dfd, const char *dir, unsigned long **v, size_t *n, size_t *cap)
{
	struct dirent *de;
	unsigned long id;
	int fd, saved;
	DIR *d;

	fd = openat(dfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		saved = errno;
		if (fd >= 0)
			close(fd);
		errno = saved;
		return -1;
	}
	for (;;) {
		errno = 0;
		if ((de = readdir(d)) == NULL)
			break;
		if (queue_parse_id(de->d_name, &id) < 0)
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 256;
			*v = xrealloc(*v, *cap * sizeof **v);
		}
		(*v)[(*n)++] = id;
	}
	saved = errno;
	closedir(d);
	errno = saved;
	return saved ? -1 : 0;
}

const char *
queue_msgid(char out[QUEUE_ID_MAX], unsigned long id, const struct timespec *t)
{
	snprintf(out, QUEUE_ID_MAX, "%lu.%lld.%09ld", id, (long long)t->tv_sec, t->tv_nsec);
	return out;
}

const char *
queue_msgid_of(const struct queue *q, unsigned long id, char out[QUEUE_ID_MAX])
{
	static const enum qdir where[] = { Q_INFO, Q_TODO };
	char path[QPATH_MAX];
	struct stat st;
	int saved = errno;
	size_t i;

	snprintf(out, QUEUE_ID_MAX, "%lu", id);
	for (i = 0; i < sizeof where / sizeof where[0]; i++) {
		queue_path(path, q, where[i], id);
		if (fstatat(q->dfd, path, &st, 0) == 0) {
			queue_msgid(out, id, &st.st_mtim);
			break;
		}
	}
	errno = saved;
	return out;
}

int
queue_parse_msgid(const char *s, unsigned long *id, struct timespec *t)
{
	const char *d1 = strchr(s, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	char inode[24], sec[24];
	unsigned long v;
	long ns = 0;
	int i;

	if (d2 == NULL || (size_t)(d1 - s) >= sizeof inode ||
	    (size_t)(d2 - d1 - 1) >= sizeof sec || strlen(d2 + 1) != 9 ||
	    strspn(d2 + 1, "0123456789") != 9)
		return -1;
	snprintf(inode, sizeof inode, "%.*s", (int)(d1 - s), s);
	snprintf(sec, sizeof sec, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
	if (queue_parse_id(inode, id) < 0 || queue_parse_id(sec, &v) < 0 ||
	    v > (unsigned long)LLONG_MAX)
		return -1;
	for (i = 1; i <= 9; i++)
		ns = ns * 10 + (d2[i] - '0');
	t->tv_sec = (time_t)v;
	t->tv_nsec = ns;
	return 0;
}

/* Create one node if missing; check the kind if present. */
static int
make_node(int dfd, const char *path, enum qkind kind, mode_t mode, struct buf *why)
{
	struct stat st;
	int fd;

	if (fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if ((kind == QK_FILE && S_ISREG(st.st_mode)) ||
		    (kind == QK_FIFO && S_ISFIFO(st.st_mode)) ||
		    ((kind == QK_DIR || kind == QK_SPLITDIR) && S_ISDIR(st.st_mode)))
			return 0;
		buf_printf(why, "%s exists but is not a %s", path,
		    kind == QK_FILE ? "regular file" : kind == QK_FIFO ? "FIFO" : "directory");
		return -1;
	}
	if (errno != ENOENT) {
		buf_printf(why, "stat %s: %s", path, strerror(errno));
		return -1;
	}
	switch (kind) {
	case QK_DIR:
	case QK_SPLITDIR:
		if (mkdirat(dfd, path, mode) < 0)
			goto fail;
		break;
	case QK_FIFO:
		if (mkfifoat(dfd, path, mode) < 0)
			goto fail;
		break;
	case QK_FILE:
		fd = openat(dfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (fd < 0)
			goto fail;
		if (close(fd) < 0)
			goto fail;
		break;
	}
	/* The umask must not narrow the table's modes. */
	if (fchmodat(dfd, path, mode, 0) < 0)
		goto fail;
	return 0;
fail:
	buf_printf(why, "create %s: %s", path, strerror(errno));
	return -1;
}

/* An existing queue's mess/ split must be the one asked for: adding
 * folders to a queue made with another split would hide its messages. */
static int
split_in_use(int dfd, unsigned split, struct buf *why)
{
	struct dirent *e;
	unsigned long n, top = 0;
	int fd = openat(dfd, "mess", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return 0;	/* a new queue */
	d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		buf_printf(why, "open mess: %s", strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL)
		if (queue_parse_id(e->d_name, &n) == 0 && n + 1 > top)
			top = n + 1;
	closedir(d);
	if (top != 0 && top != split) {
		buf_printf(why, "the queue exists with queue_split %lu, not %u", top, split);
		return -1;
	}
	return 0;
}

int
queue_init(const char *path, unsigned split, struct buf *why)
{
	char sub[QPATH_MAX];
	size_t i;
	unsigned s;
	int dfd, rc = -1;

	if (split == 0 || split > QUEUE_SPLIT_MAX) {
		buf_printf(why, "queue_split %u out of range 1..%d", split, QUEUE_SPLIT_MAX);
		return -1;
	}
	if (mkdir(path, 0750) == 0) {
		/* The queue's own entry must be durable too. */
		char *parent = xstrdup(path), *slash = strrchr(parent, '/');

		if (slash == parent)
			slash[1] = '\0';
		else if (slash)
			*slash = '\0';
		else
			strcpy(parent, ".");
		if (fsync_dir(AT_FDCWD, parent) < 0) {
			buf_printf(why, "fsync %s: %s", parent, strerror(errno));
			free(parent);
			return -1;
		}
		free(parent);
	} else if (errno != EEXIST) {
		buf_printf(why, "mkdir %s: %s", path, strerror(errno));
		return -1;
	}
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		buf_printf(why, "open %s: %s", path, strerror(errno));
		return -1;
	}
	if (split_in_use(dfd, split, why) < 0)
		goto out;
	for (i = 0; i < queue_layout_len; i++) {
		const struct qnode *n = &queue_layout[i];

		if (strcmp(n->path, ".") == 0) {
			continue;
		}
		if (make_node(dfd, n->path, n->kind, n->mode, why) < 0)
			goto out;
		for (s = 0; n->kind == QK_SPLITDIR && s < split; s++) {
			snprintf(sub, sizeof sub, "%s/%u", n->path, s);
			if (make_node(dfd, sub, QK_DIR, n->submode, why) < 0)
				goto out;
		}
	}
	/* Make the new entries durable: every folder we may have added to. */
	for (i = 0; i < queue_layout_len; i++)
		if (queue_layout[i].kind == QK_DIR || queue_layout[i].kind == QK_SPLITDIR)
			if (fsync_dir(dfd, queue_layout[i].path) < 0) {
				buf_printf(why, "fsync %s: %s", queue_layout[i].path, strerror(errno));
				goto out;
			}
	rc = 0;
out:
	close(dfd);
	return rc;
}

int
queue_owners_lookup(const char *send_user, const char *queue_group,
    struct queue_owners *o, struct buf *why)
{
	struct passwd *pw;
	struct group *gr;

	errno = 0;
	if ((pw = getpwnam(send_user)) == NULL) {
		buf_printf(why, "send_user \"%s\": %s", send_user,
		    errno && errno != ENOENT && errno != ESRCH ? strerror(errno) :
		    "no such user on this system");
		return -1;
	}
	o->uid = pw->pw_uid;
	o->send_gid = pw->pw_gid;
	errno = 0;
	if ((gr = getgrnam(queue_group)) == NULL) {
		buf_printf(why, "queue_group \"%s\": %s", queue_group,
		    errno && errno != ENOENT && errno != ESRCH ? strerror(errno) :
		    "no such group on this system");
		return -1;
	}
	o->queue_gid = gr->gr_gid;
	return 0;
}

void
queue_node_ids(const struct qnode *n, const struct queue_owners *o, uid_t *uid, gid_t *gid)
{
	*uid = o->uid;
	*gid = n->group == ROLE_QUEUE ? o->queue_gid : o->send_gid;
}

/* Open path (one or two components below dfd) without following a
 * symbolic link anywhere in it: the queue's folders belong to weir-send,
 * and root must not be led out of the queue by a link planted there.
 * O_NONBLOCK opens the FIFO without waiting for a writer. */
static int
open_node(int dfd, const char *path, struct buf *why)
{
	const char *slash = strchr(path, '/');
	int fd, pfd = dfd;

	if (strcmp(path, ".") == 0)
		fd = dup(dfd);
	else {
		if (slash) {
			char first[QPATH_MAX];

			snprintf(first, sizeof first, "%.*s", (int)(slash - path), path);
			pfd = openat(dfd, first, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (pfd < 0) {
				buf_printf(why, "open %s: %s", first, strerror(errno));
				return -1;
			}
			path = slash + 1;
		}
		fd = openat(pfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (pfd != dfd)
			close(pfd);
	}
	if (fd < 0)
		buf_printf(why, "open %s: %s", path, strerror(errno));
	return fd;
}

static int
own_node(int dfd, const char *path, enum qkind kind, mode_t mode, uid_t uid, gid_t gid,
    struct buf *why)
{
	struct stat st;
	int fd = open_node(dfd, path, why), ok;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		buf_printf(why, "fstat %s: %s", path, strerror(errno));
		goto fail;
	}
	ok = kind == QK_FILE ? S_ISREG(st.st_mode) && st.st_nlink == 1 :
	     kind == QK_FIFO ? S_ISFIFO(st.st_mode) : S_ISDIR(st.st_mode);
	if (!ok) {
		buf_printf(why, "%s is not a %s", path, kind == QK_FILE ?
		    "regular file with one link" : kind == QK_FIFO ? "FIFO" : "directory");
		goto fail;
	}
	/* chown first: it clears the set-id bits that chmod then sets. */
	if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0) {
		buf_printf(why, "chown %s to %lu:%lu: %s", path, (unsigned long)uid,
		    (unsigned long)gid, strerror(errno));
		goto fail;
	}
	if (fchmod(fd, mode) < 0) {
		buf_printf(why, "chmod %s %04o: %s", path, (unsigned)mode, strerror(errno));
		goto fail;
	}
	if (close(fd) < 0) {
		buf_printf(why, "close %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
fail:
	close(fd);
	return -1;
}

int
queue_apply_owners(const char *path, unsigned split, const struct queue_owners *o,
    struct buf *why)
{
	char sub[QPATH_MAX];
	size_t i;
	unsigned s;
	uid_t uid;
	gid_t gid;
	int dfd, rc = -1;

	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		buf_printf(why, "open %s: %s", path, strerror(errno));
		return -1;
	}
	for (i = 0; i < queue_layout_len; i++) {
		const struct qnode *n = &queue_layout[i];

		queue_node_ids(n, o, &uid, &gid);
		if (own_node(dfd, n->path, n->kind, n->mode, uid, gid, why) < 0)
			goto out;
		for (s = 0; n->kind == QK_SPLITDIR && s < split; s++) {
			snprintf(sub, sizeof sub, "%s/%u", n->path, s);
			if (own_node(dfd, sub, QK_DIR, n->submode, uid, gid, why) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	close(dfd);
	return rc;
}
