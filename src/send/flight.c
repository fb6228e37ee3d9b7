/*
 * flight.c: a kept session's message outlives the weir-send that handed
 * it over (mail/sessproto.h, "The flight file"; src/mail/QUEUE.md).
 *
 * Each session's deliverer gets a flight file, flight/PID.N, made and
 * locked here when it starts (flight_open) and given to it as its
 * descriptor 3; before each message the file gets the message's record
 * (flight_hand), and once the message's job is complete (its marks
 * durable) it is emptied (flight_clear); it goes with the session
 * (flight_close).
 *
 * At start (flight_recover), every flight file an earlier weir-send left
 * is read once its deliverer, which may have outlived that weir-send, is
 * done with it (its lock is free; inotify says when the file is closed):
 * the message on it gets a job, as if this weir-send had handed it over,
 * completed the usual way (complete.c) from the report and outcome the
 * deliverer wrote there.  The grant it had from weir-gate was dropped
 * with the dead weir-send's connection, so gatelink_tell settles it (SETTLE)
 * instead of reporting it: the send is logged at the 250's time, not
 * over its grace.  Until then the message is in no queue (its job holds
 * it, and a run slot of its upstream): it is never sent twice because
 * of a crash whose outcome could be known.  A file with the request
 * alone (the deliverer never took it) gives the grant back; one whose
 * deliverer died before its outcome counts as a crashed delivery, the
 * gate keeping the grace.
 *
 * Trusts: a flight file only through sp_parse_flight(), its offsets only
 * where remote/S/N has a recipient.  Config keys: none.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/bootid.h"
#include "lib/io.h"
#include "lib/log.h"
#include "mail/sessproto.h"
#include "send/rcptfile.h"
#include "send/sendint.h"

#define FLIGHT_DIR	"flight"
#define RETRY_MS	1000	/* without inotify: look at a locked file again */

/* A flight file of an earlier weir-send whose deliverer is still at work. */
struct pending {
	char name[64];
	int fd;
	struct job *j;		/* its message's, or NULL (no message to hold) */
	struct pending *next;
};

/* Make flight/ if missing (`weir queue-init` does; an older queue may
 * lack it): 0, or -1 logged. */
static int
flight_dir(struct sched *s)
{
	if (mkdirat(s->o->q->dfd, FLIGHT_DIR, 0700) == 0) {
		if (fsync_dir(s->o->q->dfd, ".") < 0) {
			log_warn("fsync the queue folder after making " FLIGHT_DIR);
			return -1;
		}
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	log_warn("create %s in the queue (`weir queue-init` makes it); without it a message "
	    "in flight when weir-send dies is sent again", FLIGHT_DIR);
	return -1;
}

int
flight_open(struct sched *s, char *name, size_t max)
{
	static unsigned seq;
	char path[96];
	int fd = -1, tries;

	if (!s->flight_ok)
		return -1;
	for (tries = 0; tries < 100 && fd < 0; tries++) {
		snprintf(name, max, "%ld.%u", (long)getpid(), ++seq);
		snprintf(path, sizeof path, FLIGHT_DIR "/%s", name);
		fd = openat(s->o->q->dfd, path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		log_warn("create a flight file in %s (a message in flight when weir-send dies "
		    "will be sent again)", FLIGHT_DIR);
		return -1;
	}
	/* Held by the deliverer too (one open file): free once both are gone.
	 * The name is durable before any outcome can be written in it. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 || fsync_dir(s->o->q->dfd, FLIGHT_DIR) < 0) {
		log_warn("flight file %s", path);
		flight_close(s, fd, name);
		return -1;
	}
	return fd;
}

void
flight_close(struct sched *s, int fd, const char *name)
{
	char path[96];

	snprintf(path, sizeof path, FLIGHT_DIR "/%s", name);
	if (unlinkat(s->o->q->dfd, path, 0) < 0)
		log_warn("unlink %s", path);
	if (close(fd) < 0)
		log_warn("close %s", path);
}

int
flight_hand(struct sched *s, int fd, const struct job *j)
{
	struct buf b = BUF_INIT;
	int rc = 0;

	sp_fmt_flight_msg(&b, j->m->qid, s->ups[j->up].name, j->grant, s->boot, j->offs, j->n);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, b.s, b.len, 0) != (ssize_t)b.len) {
		log_warn("msg %s: writing its flight file (sent again if weir-send dies)",
		    j->m->qid);
		rc = -1;
	}
	buf_free(&b);
	return rc;
}

void
flight_clear(struct sched *s, int fd)
{
	(void)s;
	if (ftruncate(fd, 0) < 0)
		log_warn("emptying a flight file");
}

/* ---- recovery ---- */

/* A job for the message on flight file f, running on a deliverer of an
 * earlier weir-send: it holds the message and a run slot of its
 * upstream.  NULL when there is nothing to hold (the message is gone,
 * or its recipients there are all done). */
static struct job *
orphan_job(struct sched *s, const struct sp_flight *f)
{
	struct timespec t;
	struct rcptfile rf;
	unsigned long id;
	struct msg *m;
	struct job *j;
	size_t i, k, up, todo = 0, before = 0, after = 0;
	int known;

	if (queue_parse_msgid(f->qid, &id, &t) < 0 || (m = msg_load(s, id)) == NULL ||
	    strcmp(m->qid, f->qid) != 0 || m->job || rcptfile_load(s->o->q, id, &rf) != 0)
		return NULL;
	for (up = 0; up < s->nups; up++)
		if (s->ups[up].name && strcmp(s->ups[up].name, f->upstream) == 0)
			break;
	known = up < s->nups;
	if (!known)
		up = sched_upidx(s, m);	/* gone from the config: not settled */
	j = job_new(s, m, up, f->n);
	via_adopt(s, j);
	for (i = 0; i < f->n; i++) {
		for (k = 0; k < rf.n && rf.v[k].off != f->offs[i]; k++)
			;
		if (k == rf.n)
			break;	/* not a recipient of this message */
		j->offs[i] = rf.v[k].off;
		j->addrs[i] = xstrndup(rf.v[k].addr, rf.v[k].len);
		j->n++;
		todo += !rf.v[k].done;
	}
	/* The recipients not done around the batch (its offsets ascend, and
	 * hold every one not done between the first and the last): those
	 * after it are the rest of the pass; those before it were put off
	 * earlier in the pass, as far as this run can tell: a retry. */
	for (k = 0; j->n == f->n && k < rf.n; k++)
		if (!rf.v[k].done && rf.v[k].off < j->offs[0])
			before++;
		else if (!rf.v[k].done && rf.v[k].off > j->offs[j->n - 1])
			after++;
	rcptfile_free(&rf);
	if (j->n < f->n || todo == 0) {
		if (j->n < f->n)
			log_warnx("msg %s: its flight file names recipients it does not have; "
			    "ignored", m->qid);
		job_free(s, j);
		return NULL;
	}
	/* A 250's time of another boot means nothing to this one's gate. */
	j->grant = known && strcmp(s->boot, f->boot) == 0 ? f->grant : 0;
	j->state = J_RUNNING;
	j->orphan = 1;
	j->more = after > 0;
	m->pass_deferred = before > 0;
	sched_unlink(s, m);
	evloop_timer_cancel(s->ev, m->due);
	m->due = NULL;
	s->ups[j->up].running++;
	return j;
}

/* The outcome of flight file fd (free: no deliverer has it): j completes
 * from it; the file goes. */
static void
settle_file(struct sched *s, int fd, const char *name, struct job *j)
{
	struct buf data = BUF_INIT;
	struct sp_flight f;
	const char *why = NULL;
	int r;

	r = lseek(fd, 0, SEEK_SET) < 0 ? -1 : read_fd_all(fd, &data, SP_FLIGHT_MAX);
	if (r < 0 || sp_parse_flight(data.s ? data.s : "", data.len, &f, &why) < 0) {
		log_warnx("flight file %s/%s: %s; its message is tried again as after a crash",
		    FLIGHT_DIR, name, r == -2 ? "too long" : r < 0 ? strerror(errno) : why);
		memset(&f, 0, sizeof f);
		f.taken = 1;	/* unknown */
	} else if (j == NULL && !f.empty) {
		j = orphan_job(s, &f);
	}
	if (j != NULL) {
		if (!f.taken) {
			log_info("msg %s: its deliverer never took it (weir-send died): again",
			    j->m->qid);
			(void)gatelink_tell(s, j, GP_REFUND, 0, NULL);
			j->m->pass_deferred = 0;	/* the pass starts again from the top */
			job_drop(s, j);
		} else if (!f.done) {
			log_warnx("msg %s: its deliverer died before the outcome (weir-send "
			    "died too): it may have been delivered", j->m->qid);
			deliver_exited(s, j, SIGKILL);	/* the wait status of a kill: unknown */
		} else {
			log_info("msg %s: outcome handed on by the deliverer of an earlier "
			    "weir-send", j->m->qid);
			buf_add(&j->out, f.report, f.reportlen);
			buf_add(&j->oc, f.outcome, f.outcomelen);
			deliver_exited(s, j, 0);
		}
	}
	/* Its marks are durable (complete.c): the record may go. */
	sp_flight_free(&f);
	buf_free(&data);
	flight_close(s, fd, name);
}

static void on_inotify(struct evloop *ev, int fd, int events, void *arg);
static void on_retry(struct evloop *ev, struct evtimer *t, void *arg);

/* Every pending file whose deliverer is done: settled. */
static void
look_again(struct sched *s)
{
	struct pending **pp = &s->flight_pending, *p;

	while ((p = *pp) != NULL) {
		if (flock(p->fd, LOCK_EX | LOCK_NB) < 0) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		settle_file(s, p->fd, p->name, p->j);
		free(p);
	}
	if (s->flight_pending == NULL && s->flight_ifd >= 0) {
		evloop_unwatch(s->ev, s->flight_ifd);
		(void)close(s->flight_ifd);	/* inotify: nothing to lose */
		s->flight_ifd = -1;
	} else if (s->flight_pending && s->flight_ifd < 0) {
		evloop_timer_at(s->ev, clock_mono_ms() + RETRY_MS, on_retry, s);
	}
}

static void
on_inotify(struct evloop *ev, int fd, int events, void *arg)
{
	char chunk[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	(void)ev; (void)events;
	while (read_retry(fd, chunk, sizeof chunk) > 0)
		;
	look_again(arg);
}

static void
on_retry(struct evloop *ev, struct evtimer *t, void *arg)
{
	(void)ev; (void)t;
	look_again(arg);
}

/* Watch flight/ for closes (a deliverer's exit); -1: no inotify. */
static int
watch(struct sched *s)
{
	char *dir = xasprintf("%s/" FLIGHT_DIR, s->o->q->path);
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (fd >= 0 && inotify_add_watch(fd, dir, IN_CLOSE_WRITE) < 0) {
		(void)close(fd);	/* inotify: nothing to lose */
		fd = -1;
	}
	if (fd < 0)
		log_warn("inotify on %s: looking at its locked files every second", dir);
	else
		evloop_watch(s->ev, fd, EV_READ, on_inotify, s);
	free(dir);
	return fd;
}

void
flight_recover(struct sched *s)
{
	struct buf data = BUF_INIT;
	struct sp_flight f;
	struct pending *p;
	struct dirent *e;
	const char *why;
	char path[96];
	int dfd, fd;
	DIR *d;

	s->flight_ifd = -1;
	boot_id(s->boot, sizeof s->boot);
	s->flight_ok = flight_dir(s) == 0;
	if (!s->flight_ok)
		return;
	dfd = openat(s->o->q->dfd, FLIGHT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || (d = fdopendir(dfd)) == NULL) {
		log_warn("open %s", FLIGHT_DIR);
		if (dfd >= 0)
			(void)close(dfd);	/* a folder read: nothing to lose */
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof p->name)
			continue;
		snprintf(path, sizeof path, FLIGHT_DIR "/%s", e->d_name);
		fd = openat(s->o->q->dfd, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			log_warn("open %s", path);
			continue;
		}
		p = xcalloc(1, sizeof *p);
		snprintf(p->name, sizeof p->name, "%s", e->d_name);
		p->fd = fd;
		/* Its deliverer may still be at work: its message waits for
		 * it, held by a job. */
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			buf_reset(&data);
			if (read_fd_all(fd, &data, SP_FLIGHT_MAX) == 0 &&
			    sp_parse_flight(data.s ? data.s : "", data.len, &f, &why) == 0) {
				if (!f.empty && (p->j = orphan_job(s, &f)) != NULL)
					log_info("msg %s: its deliverer outlived the last weir-send; "
					    "waiting for its outcome", p->j->m->qid);
				sp_flight_free(&f);
			}
			if (s->flight_ifd < 0 && s->flight_pending == NULL)
				s->flight_ifd = watch(s);
		}
		p->next = s->flight_pending;
		s->flight_pending = p;
	}
	closedir(d);
	buf_free(&data);
	look_again(s);
}
