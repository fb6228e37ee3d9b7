/*
 * control.c: `weir hold|release|requeue [-w SECONDS] ID...`, `weir requeue
 * --via UPSTREAM ID...` (the next pass through UPSTREAM: ctl/via.N) and `weir
 * delete [-w SECONDS] ID...|--all|--from PATTERN|--to PATTERN`: the
 * operator's queue control (QUEUE.md, "Held messages and control
 * requests").
 *
 * Only the holder of lock/sendmutex changes a message.  While weir-send
 * is stopped this command takes the lock and acts itself (hold, delete;
 * a release or requeue is left as a request for weir-send's start, as
 * only it keeps the waiting credit and nothing is sent meanwhile).
 * While weir-send runs it leaves one request ctl/VERB.N per message,
 * pulls lock/trigger and waits, up to -w seconds (default 60), for
 * weir-send to act and remove them (an inotify watch, not polling); a
 * delete of a message being sent waits for that delivery to end.  Then
 * it reads each result off the queue and prints one line per message.
 * A request not done in time stays: weir-send acts on it when it can.
 *
 * Exit 0 all done, 1 some message was not found or not done (yet), 2
 * usage or the queue cannot be used.  Needs the queue owner's rights
 * (root or send_user), as `weir flush`.
 *
 * Trusts: the local admin.  Config keys: queue_dir, queue_split.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/log.h"
#include "mail/qctl.h"
#include "mail/qlist.h"
#include "weir/weir.h"

#define WAIT_DEFAULT_S 60

struct ids {
	unsigned long *v;
	const char **full;	/* the INODE.SEC.NSEC given, or NULL */
	size_t n, cap;
};

static void
ids_add(struct ids *s, unsigned long id, const char *full)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = xrealloc(s->v, s->cap * sizeof *s->v);
		s->full = xrealloc(s->full, s->cap * sizeof *s->full);
	}
	s->full[s->n] = full;
	s->v[s->n++] = id;
}

/* delete --all / --from / --to: the messages whose sender, or one of
 * whose recipients not yet done, matches (shell pattern, any case). */
struct select {
	int field;		/* 'a' all, 'f' from, 't' to */
	const char *pattern;
	struct ids *ids;
};

static int
addr_matches(const struct select *sel, const struct qlist_msg *m, size_t off, size_t len)
{
	char *a = xstrndup(m->text.s + off, len);
	int r = fnmatch(sel->pattern, a, FNM_CASEFOLD) == 0;

	free(a);
	return r;
}

static void
select_one(const struct qlist_msg *m, void *arg)
{
	struct select *sel = arg;
	size_t i;
	int hit = sel->field == 'a';

	if (sel->field == 'f' && m->head)
		hit = addr_matches(sel, m, m->sender_off, m->sender_len);
	for (i = 0; sel->field == 't' && !hit && i < m->nitems; i++)
		if (!m->items[i].trouble && !m->items[i].done)
			hit = addr_matches(sel, m, m->items[i].off, m->items[i].len);
	if (hit)
		ids_add(sel->ids, m->id, NULL);
}

/* The lock weir-send holds while it runs: 1 taken (fd open), 0 weir-send
 * runs, -1 error (logged). */
static int
try_lock(struct queue *q, int *fd)
{
	*fd = openat(q->dfd, "lock/sendmutex", O_WRONLY | O_CLOEXEC);
	if (*fd < 0) {
		log_warn("open %s/lock/sendmutex (root or the queue's owner only)", q->path);
		return -1;
	}
	if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
		return 1;
	if (errno != EWOULDBLOCK) {
		log_warn("lock %s/lock/sendmutex", q->path);
		return -1;
	}
	close(*fd);
	*fd = -1;
	return 0;
}

static void
req_path(char *buf, size_t n, const char *verb, unsigned long id)
{
	snprintf(buf, n, QCTL_DIR "/%s.%lu", verb, id);
}

/* ctl/VERB.N; via.N holds the upstream's name (mail/qctl.h). */
static int
request(struct queue *q, const char *verb, unsigned long id, const char *via)
{
	char path[64];
	struct buf b = BUF_INIT;
	int fd, rc = 0;

	req_path(path, sizeof path, verb, id);
	/* 0644: root may ask; weir-send removes it as the folder's owner. */
	fd = openat(q->dfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		log_warn("create %s/%s", q->path, path);
		return -1;
	}
	if (via) {
		buf_printf(&b, "%s\n", via);
		if (full_write(fd, b.s, b.len) < 0) {
			log_warn("write %s/%s", q->path, path);
			rc = -1;
		}
		buf_free(&b);
	}
	if (close(fd) < 0 && rc == 0) {
		log_warn("close %s/%s", q->path, path);
		rc = -1;
	}
	return rc;
}

static void
pull_trigger(struct queue *q)
{
	int fd = openat(q->dfd, "lock/trigger", O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return;	/* no reader: weir-send reads ctl/ when it starts */
	if (write(fd, "", 1) < 0 && errno != EAGAIN)
		log_warn("write lock/trigger");
	close(fd);
}

/* How many of the requests are still there. */
static size_t
pending(struct queue *q, const char *verb, const struct ids *ids)
{
	char path[64];
	size_t i, n = 0;

	for (i = 0; i < ids->n; i++) {
		req_path(path, sizeof path, verb, ids->v[i]);
		if (faccessat(q->dfd, path, F_OK, 0) == 0)
			n++;
	}
	return n;
}

/* Wait until weir-send removed every request, at most wait_s seconds. */
static void
await(struct queue *q, const char *verb, const struct ids *ids, int ifd, long wait_s)
{
	struct timespec now, end;
	char evbuf[4096];
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += wait_s;
	while (pending(q, verb, ids) > 0) {
		struct pollfd p = { .fd = ifd, .events = POLLIN };

		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (end.tv_sec - now.tv_sec) * 1000 + (end.tv_nsec - now.tv_nsec) / 1000000;
		if (ms <= 0)
			return;
		if (poll(&p, 1, (int)ms) < 0 && errno != EINTR) {
			log_warn("poll");
			return;
		}
		if (p.revents & POLLIN)
			while (read(ifd, evbuf, sizeof evbuf) > 0)
				;
	}
}

/* Act as weir-send would (we hold lock/sendmutex).  0 ok; -1 printed. */
static int
act_direct(struct queue *q, const char *verb, unsigned long id, long long birth)
{
	struct buf why = BUF_INIT;
	long long since;
	int r = 0;

	if (strcmp(verb, "hold") == 0) {
		r = qctl_held(q, id, birth, &since, &why);
		if (r == 0)
			r = qctl_hold(q, id, birth, (long long)time(NULL), &why);
		else if (r == 1)
			r = 0;
	} else if (strcmp(verb, "delete") == 0) {
		r = qctl_delete(q, id, &why);
	}
	if (r < 0)
		printf("%lu: %s failed: %s\n", id, verb, why.s);
	buf_free(&why);
	return r < 0 ? -1 : 0;
}

/* The result, read off the queue: 0 done, 1 not (printed). */
static int
result(struct queue *q, const char *verb, unsigned long id, int asked, long wait_s)
{
	char path[64];
	struct buf why = BUF_INIT;
	enum qctl_state st;
	long long birth, since;
	const char *ok, *bad = NULL;
	int held = 0, rc;

	req_path(path, sizeof path, verb, id);
	if (qctl_state(q, id, &st, &birth) < 0) {
		printf("%lu: %s\n", id, strerror(errno));
		return 1;
	}
	if (st != QS_NONE && (held = qctl_held(q, id, birth, &since, &why)) < 0)
		held = 1;
	buf_free(&why);
	if (asked && faccessat(q->dfd, path, F_OK, 0) == 0) {
		printf("%lu: weir-send has not done it within %ld s (%s); the request stays "
		    "and it acts when it can\n", id, wait_s,
		    strcmp(verb, "delete") == 0 ? "a delivery of it in flight?" : "is it busy?");
		return 1;
	}
	if (strcmp(verb, "delete") == 0)
		ok = st == QS_NONE ? "deleted" : NULL;
	else if (st == QS_NONE)
		ok = NULL, bad = "no such message";
	else if (strcmp(verb, "hold") == 0)
		ok = held ? "held" : NULL;
	else if (strcmp(verb, "release") == 0)
		ok = held ? NULL : "released";
	else if (held)
		ok = NULL, bad = "held: release it instead";
	else if (strcmp(verb, "via") == 0)
		ok = "requeued through the upstream named (weir-send's log says so)";
	else
		ok = "requeued";
	if (ok)
		printf("%lu: %s\n", id, ok);
	else
		printf("%lu: %s\n", id, bad ? bad : "not done (see weir-send's log)");
	rc = ok == NULL;
	return rc;
}

static int
usage(const char *verb)
{
	if (strcmp(verb, "delete") == 0)
		log_warnx("usage: weir delete [-w SECONDS] ID...|--all|--from PATTERN|--to PATTERN");
	else if (strcmp(verb, "requeue") == 0)
		log_warnx("usage: weir requeue [-w SECONDS] [--via UPSTREAM] ID...");
	else
		log_warnx("usage: weir %s [-w SECONDS] ID...", verb);
	return 2;
}

int
cmd_control(int argc, char **argv, struct weir_config *cfg)
{
	const char *verb = argv[0], *via = NULL;
	struct select sel = { 0, NULL, NULL };
	struct ids ids = { NULL, NULL, 0, 0 };
	struct qlist_stats qs;
	struct buf why = BUF_INIT;
	struct queue q;
	enum qctl_state st;
	long long birth;
	long wait_s = WAIT_DEFAULT_S;
	int i, rc = 0, lockfd = -1, ifd = -1, asked = 0;
	char *end;

	for (i = 1; i < argc; i++) {
		struct timespec t;
		unsigned long id;

		if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
			wait_s = strtol(argv[++i], &end, 10);
			if (*end || wait_s < 0 || wait_s > 86400)
				return usage(verb);
		} else if (strcmp(verb, "requeue") == 0 && strcmp(argv[i], "--via") == 0 &&
		    i + 1 < argc && via == NULL) {
			via = argv[++i];
		} else if (strcmp(verb, "delete") == 0 && strcmp(argv[i], "--all") == 0) {
			sel.field = 'a';
		} else if (strcmp(verb, "delete") == 0 && i + 1 < argc &&
		    (strcmp(argv[i], "--from") == 0 || strcmp(argv[i], "--to") == 0)) {
			sel.field = argv[i][2];
			sel.pattern = argv[++i];
		} else if (queue_parse_id(argv[i], &id) == 0) {
			ids_add(&ids, id, NULL);
		} else if (queue_parse_msgid(argv[i], &id, &t) == 0) {
			ids_add(&ids, id, argv[i]);
		} else {
			free(ids.v);
			free(ids.full);
			return usage(verb);
		}
	}
	if ((ids.n == 0) == (sel.field == 0)) {
		free(ids.v);
		free(ids.full);
		return usage(verb);
	}
	if (via && config_upstream(cfg, via) == NULL) {
		log_warnx("requeue --via %s: no upstream \"%s\" in %s", via, via,
		    cfg->file ? cfg->file : "the configuration");
		free(ids.v);
		free(ids.full);
		return 2;
	}
	if (via)
		verb = "via";	/* the request's name: ctl/via.N (mail/qctl.h) */
	if (queue_open(&q, cfg->queue_dir, cfg->queue_split) < 0) {
		log_warn("cannot open the queue %s", cfg->queue_dir);
		free(ids.v);
		free(ids.full);
		return 2;
	}
	if (sel.field) {
		sel.ids = &ids;
		if (qlist_scan(&q, select_one, &sel, &qs, &why) < 0) {
			log_warnx("%s: %s", cfg->queue_dir, buf_cstr(&why));
			rc = 2;
			goto out;
		}
		if (ids.n == 0) {
			printf("no message matches\n");
			goto out;
		}
	}
	/* Unknown ids (or not yet fully queued ones) first. */
	{
		char qid[QUEUE_ID_MAX];
		size_t k, n = 0;

		for (k = 0; k < ids.n; k++) {
			if (qctl_state(&q, ids.v[k], &st, &birth) < 0) {
				printf("%lu: %s\n", ids.v[k], strerror(errno));
				rc = 1;
			} else if (st == QS_NONE) {
				printf("%lu: no such message\n", ids.v[k]);
				rc = 1;
			} else if (ids.full[k] &&
			    strcmp(queue_msgid_of(&q, ids.v[k], qid), ids.full[k]) != 0) {
				printf("%s: no such message (%lu is now %s)\n", ids.full[k],
				    ids.v[k], qid);
				rc = 1;
			} else {
				ids.v[n++] = ids.v[k];
			}
		}
		ids.n = n;
	}
	switch (try_lock(&q, &lockfd)) {
	case -1:
		rc = 2;
		goto out;
	case 1:		/* weir-send is stopped: we hold its lock */
		for (i = 0; (size_t)i < ids.n; i++) {
			int later = strcmp(verb, "release") == 0 || strcmp(verb, "requeue") == 0 ||
			    strcmp(verb, "via") == 0;

			if (qctl_state(&q, ids.v[i], &st, &birth) < 0 || st == QS_NONE ||
			    !later) {
				if (st != QS_NONE && !later && act_direct(&q, verb, ids.v[i], birth) < 0)
					rc = 1;
				rc |= result(&q, verb, ids.v[i], 0, wait_s);
			} else if (request(&q, verb, ids.v[i], via) < 0) {
				rc = 1;
			} else {
				printf("%lu: weir-send is not running: it does the %s when it "
				    "starts\n", ids.v[i], via ? "requeue" : verb);
			}
		}
		goto out;
	}
	/* weir-send runs: ask it.  The watch first, so no removal is missed. */
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ifd < 0) {
		log_warn("inotify");
		rc = 2;
		goto out;
	}
	{
		char dir[4096];

		snprintf(dir, sizeof dir, "%s/" QCTL_DIR, cfg->queue_dir);
		if (inotify_add_watch(ifd, dir, IN_DELETE | IN_MOVED_FROM) < 0) {
			log_warn("watch %s", dir);
			rc = 2;
			goto out;
		}
	}
	for (i = 0; (size_t)i < ids.n; i++)
		if (request(&q, verb, ids.v[i], via) < 0) {
			rc = 2;
			goto out;
		}
	asked = 1;
	pull_trigger(&q);
	await(&q, verb, &ids, ifd, wait_s);
	for (i = 0; (size_t)i < ids.n; i++)
		rc |= result(&q, verb, ids.v[i], asked, wait_s);
out:
	if (ifd >= 0)
		close(ifd);
	if (lockfd >= 0)
		close(lockfd);
	buf_free(&why);
	free(ids.v);
	free(ids.full);
	queue_close(&q);
	if (fflush(stdout) != 0)
		return 2;
	return rc;
}
