/*
 * cleanup.c: see cleanup.h.  A message is a leftover when mess/S/N is old
 * and neither todo/N nor info/S/N exists (S2 or S3).  A message being
 * eliminated is in S2 for an instant only, and by weir-send itself, which
 * runs this pass between its own steps.  weir's own sched/S/N notes are
 * removed, whatever their age, once mess/S/N is gone, and so are its
 * hold/N and reply/N (mail/qctl.h; left by a crash in a delete, or by a
 * failed removal).
 *
 * Trusts: the queue.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "mail/qctl.h"
#include "mail/schedfile.h"
#include "send/cleanup.h"

static int
exists(struct queue *q, enum qdir d, unsigned long id)
{
	char path[QPATH_MAX];
	struct stat st;

	queue_path(path, q, d, id);
	return fstatat(q->dfd, path, &st, 0) == 0 || errno != ENOENT;
}

static unsigned long
remove_old(struct queue *q, const char *path, time_t now)
{
	struct stat st;

	if (fstatat(q->dfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    now - st.st_mtime < CLEANUP_AGE)
		return 0;
	if (unlinkat(q->dfd, path, 0) < 0) {
		log_warn("cleanup: unlink %s", path);
		return 0;
	}
	log_info("cleanup: removed %s, a leftover more than 36 hours old", path);
	return 1;
}

static DIR *
opendir_at(struct queue *q, const char *path)
{
	int fd = openat(q->dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0) {
		log_warn("cleanup: open %s", path);
		return NULL;
	}
	d = fdopendir(fd);
	if (d == NULL) {
		log_warn("cleanup: open %s", path);
		close(fd);
	}
	return d;
}

/* weir's own notes (sched/S/N) of messages that are gone: any age, as
 * no one but weir-send writes them, and only for messages in S5. */
static unsigned long
sched_leftovers(struct queue *q)
{
	char path[QPATH_MAX];
	unsigned long n = 0, id;
	struct dirent *e;
	unsigned s;
	DIR *d;
	int fd;

	for (s = 0; s < q->split; s++) {
		snprintf(path, sizeof path, SCHED_DIR "/%u", s);
		fd = openat(q->dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOENT)
				log_warn("cleanup: open %s", path);
			continue;
		}
		if ((d = fdopendir(fd)) == NULL) {
			log_warn("cleanup: open %s", path);
			close(fd);
			continue;
		}
		while ((e = readdir(d)) != NULL) {
			if (queue_parse_id(e->d_name, &id) < 0 || exists(q, Q_MESS, id))
				continue;
			schedfile_path(path, q, id);
			if (unlinkat(q->dfd, path, 0) < 0) {
				if (errno != ENOENT)
					log_warn("cleanup: unlink %s", path);
				continue;
			}
			log_info("msg %lu: cleanup: removed %s, its message is gone", id, path);
			n++;
		}
		closedir(d);
	}
	return n;
}

/* hold/N and reply/N of messages that are gone, likewise. */
static unsigned long
flat_leftovers(struct queue *q, const char *dir)
{
	char path[QPATH_MAX];
	unsigned long n = 0, id;
	struct dirent *e;
	DIR *d;
	int fd = openat(q->dfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (errno != ENOENT)
			log_warn("cleanup: open %s", dir);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d)) != NULL) {
		if (queue_parse_id(e->d_name, &id) < 0 || exists(q, Q_MESS, id))
			continue;
		snprintf(path, sizeof path, "%s/%lu", dir, id);
		if (unlinkat(q->dfd, path, 0) < 0) {
			if (errno != ENOENT)
				log_warn("cleanup: unlink %s", path);
			continue;
		}
		log_info("msg %lu: cleanup: removed %s, its message is gone", id, path);
		n++;
	}
	closedir(d);
	return n;
}

unsigned long
cleanup_pass(struct queue *q, time_t now)
{
	char path[QPATH_MAX], intd[QPATH_MAX];
	unsigned long n = 0, id;
	struct dirent *e;
	struct stat st;
	unsigned s;
	DIR *d;

	if ((d = opendir_at(q, "pid")) != NULL) {
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "pid/%.40s", e->d_name);
			n += remove_old(q, path, now);
		}
		closedir(d);
	}
	if ((d = opendir_at(q, "intd")) != NULL) {
		while ((e = readdir(d)) != NULL) {
			if (queue_parse_id(e->d_name, &id) < 0 || exists(q, Q_MESS, id))
				continue;
			queue_path(path, q, Q_INTD, id);
			n += remove_old(q, path, now);
		}
		closedir(d);
	}
	for (s = 0; s < q->split; s++) {
		snprintf(path, sizeof path, "mess/%u", s);
		if ((d = opendir_at(q, path)) == NULL)
			continue;
		while ((e = readdir(d)) != NULL) {
			if (queue_parse_id(e->d_name, &id) < 0)
				continue;
			if (exists(q, Q_TODO, id) || exists(q, Q_INFO, id))
				continue;	/* S4 or S5 */
			queue_path(path, q, Q_MESS, id);
			if (fstatat(q->dfd, path, &st, 0) < 0 || now - st.st_mtime < CLEANUP_AGE)
				continue;
			/* S3 then S2: intd/N first, then mess/S/N. */
			queue_path(intd, q, Q_INTD, id);
			if (unlinkat(q->dfd, intd, 0) == 0)
				n++;
			else if (errno != ENOENT) {
				log_warn("cleanup: unlink %s", intd);
				continue;
			}
			if (unlinkat(q->dfd, path, 0) < 0) {
				log_warn("cleanup: unlink %s", path);
				continue;
			}
			log_info("msg %lu: cleanup: removed a message left in S2/S3 more "
			    "than 36 hours ago", id);
			n++;
		}
		closedir(d);
	}
	return n + sched_leftovers(q) + flat_leftovers(q, QCTL_HOLD_DIR) +
	    flat_leftovers(q, QCTL_REPLY_DIR);
}
