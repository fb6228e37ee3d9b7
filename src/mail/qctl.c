/*
 * qctl.c: see qctl.h.  Shared by weir-send (src/send/control.c) and the
 * `weir` command (src/weir/control.c), which acts itself only while it
 * holds lock/sendmutex.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/decimal.h"
#include "mail/policy.h"
#include "mail/qctl.h"
#include "mail/schedfile.h"

int
qctl_state(const struct queue *q, unsigned long id, enum qctl_state *st, long long *birth)
{
	char path[QPATH_MAX];
	struct stat sb;

	*st = QS_NONE;
	*birth = 0;
	queue_path(path, q, Q_MESS, id);
	if (fstatat(q->dfd, path, &sb, 0) < 0)
		return errno == ENOENT ? 0 : -1;
	queue_path(path, q, Q_TODO, id);
	if (fstatat(q->dfd, path, &sb, 0) == 0) {
		*st = QS_TODO;
		*birth = (long long)sb.st_mtime;
		return 0;
	}
	if (errno != ENOENT)
		return -1;
	queue_path(path, q, Q_INFO, id);
	if (fstatat(q->dfd, path, &sb, 0) == 0) {
		*st = QS_INFO;
		*birth = (long long)sb.st_mtime;
		return 0;
	}
	return errno == ENOENT ? 0 : -1;
}

/* One "name N\n" line at *s; advances it.  0 ok; -1 not that. */
static int
parse_line(const char **s, const char *end, const char *name, long long *v)
{
	size_t n = strlen(name), k;
	const char *p = *s;
	uint64_t x;

	if ((size_t)(end - p) < n + 3 || memcmp(p, name, n) != 0 || p[n] != ' ')
		return -1;
	p += n + 1;
	k = dec_prefix(p, (size_t)(end - p), LLONG_MAX, &x);
	if (k == 0 || p + k == end || p[k] != '\n')
		return -1;
	*v = (long long)x;
	*s = p + k + 1;
	return 0;
}

int
qctl_hold_parse(const char *s, size_t len, long long *birth, long long *since)
{
	const char *end = s + len;

	if (parse_line(&s, end, "birth", birth) < 0 || parse_line(&s, end, "since", since) < 0)
		return -1;
	return s == end ? 0 : -1;
}

int
qctl_via_parse(const char *s, size_t len, char *out)
{
	if (len < 2 || len > POLICY_NAME_MAX + 1 || s[len - 1] != '\n' ||
	    memchr(s, '\0', len) != NULL)
		return -1;
	memcpy(out, s, len - 1);
	out[len - 1] = '\0';
	return policy_valid_name(out) ? 0 : -1;
}

int
qctl_reply_parse(const char *s, size_t len, long long *birth, long long *next,
    const char **via, size_t *vialen, const char **body, size_t *bodylen)
{
	const char *end = s + len, *p, *nul, *nl;
	char name[POLICY_NAME_MAX + 1];

	if (parse_line(&s, end, "birth", birth) < 0 || parse_line(&s, end, "next", next) < 0)
		return -1;
	*via = NULL;
	*vialen = 0;
	if (end - s > 4 && memcmp(s, "via ", 4) == 0) {
		nl = memchr(s + 4, '\n', (size_t)(end - s - 4));
		if (nl == NULL || qctl_via_parse(s + 4, (size_t)(nl + 1 - s - 4), name) < 0)
			return -1;
		*via = s + 4;
		*vialen = (size_t)(nl - s - 4);
		s = nl + 1;
	}
	for (p = s; p < end; p = nl + 1) {
		nul = memchr(p, '\0', (size_t)(end - p));
		if (nul == NULL || nul == p)
			return -1;
		nl = memchr(nul, '\n', (size_t)(end - nul));
		if (nl == NULL || memchr(nul + 1, '\0', (size_t)(nl - nul - 1)) != NULL)
			return -1;
	}
	*body = s;
	*bodylen = (size_t)(end - s);
	return 0;
}

const char *
qctl_reply_find(const char *body, size_t len, const char *addr, size_t alen, size_t *rlen)
{
	const char *p = body, *end = body + len, *nul, *nl;

	for (; p < end; p = nl + 1) {
		nul = memchr(p, '\0', (size_t)(end - p));
		nl = memchr(nul, '\n', (size_t)(end - nul));
		if ((size_t)(nul - p) == alen && memcmp(p, addr, alen) == 0) {
			*rlen = (size_t)(nl - nul - 1);
			return nul + 1;
		}
	}
	return NULL;
}

int
qctl_held(const struct queue *q, unsigned long id, long long birth, long long *since,
    struct buf *why)
{
	char path[QPATH_MAX];
	struct buf b = BUF_INIT;
	long long hb;
	int r;

	snprintf(path, sizeof path, QCTL_HOLD_DIR "/%lu", id);
	r = read_file_at(q->dfd, path, &b, QCTL_FILE_MAX);
	if (r == -1 && errno == ENOENT) {
		buf_free(&b);
		return 0;
	}
	if (r != 0) {
		buf_printf(why, "read %s: %s", path, r == -2 ? "too long" : strerror(errno));
		buf_free(&b);
		return -1;
	}
	/* Written durably, so one that does not parse was not written by
	 * weir: held (the safe reading) since its writing is unknown: now. */
	if (qctl_hold_parse(b.s, b.len, &hb, since) < 0) {
		buf_free(&b);
		*since = 0;
		return 1;
	}
	buf_free(&b);
	return hb == birth;
}

int
qctl_hold(struct queue *q, unsigned long id, long long birth, long long now,
    struct buf *why)
{
	char path[QPATH_MAX];
	struct buf b = BUF_INIT;
	int fd, rc = -1;

	snprintf(path, sizeof path, QCTL_HOLD_DIR "/%lu", id);
	buf_printf(&b, "birth %lld\nsince %lld\n", birth, now);
	fd = openat(q->dfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		buf_printf(why, "create %s: %s", path, strerror(errno));
		goto out;
	}
	if (full_write(fd, b.s, b.len) < 0 || fsync(fd) < 0) {
		buf_printf(why, "write %s: %s", path, strerror(errno));
		close(fd);
		goto out;
	}
	if (close(fd) < 0 || fsync_dir(q->dfd, QCTL_HOLD_DIR) < 0) {
		buf_printf(why, "fsync %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	buf_free(&b);
	return rc;
}

/* unlinkat, then fsync the folder (also when it was gone already: an
 * earlier try's fsync may have failed). */
static int
remove_durably(struct queue *q, const char *path, const char *dir, struct buf *why)
{
	if (unlinkat(q->dfd, path, 0) < 0 && errno != ENOENT) {
		buf_printf(why, "unlink %s: %s", path, strerror(errno));
		return -1;
	}
	if (fsync_dir(q->dfd, dir) < 0) {
		buf_printf(why, "fsync %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

int
qctl_unhold(struct queue *q, unsigned long id, struct buf *why)
{
	char path[QPATH_MAX];

	snprintf(path, sizeof path, QCTL_HOLD_DIR "/%lu", id);
	return remove_durably(q, path, QCTL_HOLD_DIR, why);
}

int
qctl_delete(struct queue *q, unsigned long id, struct buf *why)
{
	/* S5 loses bounce, remote, local (still S5), info (S2), mess (S1);
	 * S4 loses its leftovers, intd (still S4), todo (S2), mess (S1). */
	static const enum qdir order[] = { Q_BOUNCE, Q_REMOTE, Q_LOCAL, Q_INFO, Q_INTD,
	    Q_TODO, Q_MESS };
	char path[QPATH_MAX], dir[QPATH_MAX];
	size_t i;

	/* The credit and reply notes are hints, not fsynced: their removal
	 * needs no order (a stale one is told by its birth). */
	schedfile_path(path, q, id);
	if (unlinkat(q->dfd, path, 0) < 0 && errno != ENOENT) {
		buf_printf(why, "unlink %s: %s", path, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof path, QCTL_REPLY_DIR "/%lu", id);
	if (unlinkat(q->dfd, path, 0) < 0 && errno != ENOENT) {
		buf_printf(why, "unlink %s: %s", path, strerror(errno));
		return -1;
	}
	for (i = 0; i < sizeof order / sizeof order[0]; i++) {
		queue_path(path, q, order[i], id);
		queue_dirpath(dir, q, order[i], id);
		if (remove_durably(q, path, dir, why) < 0)
			return -1;
	}
	return qctl_unhold(q, id, why);
}
