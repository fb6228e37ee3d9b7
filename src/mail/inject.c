/*
 * inject.c: see inject.h.  The steps of src/mail/QUEUE.md:
 *
 *   S1  create pid/<pid>.<time>.<seq>; its inode number is the id N
 *   S2  link it as mess/<N%split>/N, unlink the pid/ name; write the
 *       Received line and the message; start its writeback
 *   S3  create intd/N; write u, p, F and T records; set its mtime (the
 *       queue time) past the mess/ folder's (below); start its
 *       writeback; fsync both files and the mess/<N%split> folder (the
 *       mess entry must be durable before todo/N can be)
 *   S4  link intd/N as todo/N; fsync todo/: only now is the message
 *       queued.  Pull the trigger.
 *
 * On a failure before the todo link, the files made so far are truncated
 * and removed (S2/S3 back to S1), as qmail-queue does; on weir-queue's
 * timeout they are removed by qinject_abort() from the SIGALRM handler
 * (qmail-queue leaves them to qmail-send's 36-hour cleanup).  After the
 * link nothing is undone: weir-send may already be working on todo/N.
 *
 * The message's id in the logs is N.T (mail/queue.h), T the queue time
 * to the nanosecond: todo/N's mtime, which weir-send keeps as info/'s.
 * Inode numbers are reused at once, so T must differ from that of the
 * last message that had inode N.  That message's T was at or before its
 * removal from mess/<N%split>, which set that folder's mtime, as we see
 * it before our link (inode N was free when pid/ gave it to us).  T is
 * therefore set here, once the envelope is written: the clock's time
 * (finer than the kernel's file times, which advance by the tick), or
 * the folder's mtime plus a nanosecond when the clock is not past it
 * (the clock was stepped back).
 *
 * Trusts: nothing in the message or envelope bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/io.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/inject.h"
#include "mail/qqcode.h"

#define CHUNK 65536
#define PID_TRIES 9

/* Is the file at path the one with inode ino?  A name is removed only
 * when it is ours: a queue restored from a backup can hold a mess/N whose
 * inode is not N, and that message must survive our failure. */
static int
ours(int dfd, const char *path, ino_t ino)
{
	struct stat st;

	return ino != 0 && fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == ino;
}

static ino_t
ino_of(int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* Only async-signal-safe calls (fstat, fstatat, unlinkat, ftruncate):
 * qinject_abort() runs it from signal handlers. */
int
qinject_undo(struct qinject *in)
{
	int bad = 0;

	if (in->made_intd && ours(in->dfd, in->intdfn, ino_of(in->intdfd))) {
		if (ftruncate(in->intdfd, 0) < 0 || unlinkat(in->dfd, in->intdfn, 0) < 0)
			bad++;
	}
	if (in->made_mess && ours(in->dfd, in->messfn, (ino_t)in->id)) {
		if (ftruncate(in->messfd, 0) < 0 || unlinkat(in->dfd, in->messfn, 0) < 0)
			bad++;
	}
	/* pid/NAMEPID.TIME.SEQ: no other live process can own that name. */
	if (in->made_pid && unlinkat(in->dfd, in->pidfn, 0) < 0 && errno != ENOENT)
		bad++;
	in->made_intd = in->made_mess = in->made_pid = 0;
	return bad;
}

int
qinject_fail(struct qinject *in, int code, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_line(in->sev, err, "%s", msg);
	if (qinject_undo(in) > 0)
		log_warn("cleanup after the failure; weir-send removes what is left "
		    "after 36 hours");
	return code;
}

/* S1: a fresh pid/ file gives the message its number; S2: mess/S/N. */
int
qinject_begin(struct qinject *in, const struct queue *q, const struct qinject_who *who,
    pid_t namepid, unsigned long *seq, const char *sev)
{
	char date[DATE_QMAIL_MAX];
	struct stat st;
	struct buf b = BUF_INIT;
	time_t now = time(NULL);
	int tries, rc;

	memset(in, 0, sizeof *in);
	in->q = q;
	in->dfd = q->dfd;
	in->sev = sev;
	in->who = *who;
	in->messfd = in->intdfd = -1;
	for (tries = 0; tries < PID_TRIES; tries++, (*seq)++) {
		snprintf(in->pidfn, sizeof in->pidfn, "pid/%ld.%lld.%lu",
		    (long)namepid, (long long)now, *seq);
		/* Flag first: a signal right after the create must find it. */
		in->made_pid = 1;
		in->messfd = openat(in->dfd, in->pidfn,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (in->messfd >= 0)
			break;
		in->made_pid = 0;
		if (errno != EEXIST)
			return qinject_fail(in, QQ_PID, errno, "create %s", in->pidfn);
	}
	(*seq)++;
	if (in->messfd < 0)
		return qinject_fail(in, QQ_PID, 0, "no free name in pid/ after %d tries", PID_TRIES);
	if (fstat(in->messfd, &st) < 0)
		return qinject_fail(in, QQ_PID, errno, "fstat %s", in->pidfn);
	in->id = (unsigned long)st.st_ino;
	queue_path(in->messfn, q, Q_MESS, in->id);
	queue_path(in->intdfn, q, Q_INTD, in->id);
	queue_path(in->todofn, q, Q_TODO, in->id);
	queue_dirpath(in->messdir, q, Q_MESS, in->id);

	if (fstatat(in->dfd, in->messdir, &st, 0) < 0)
		return qinject_fail(in, QQ_MESS, errno, "stat folder %s", in->messdir);
	in->folder_mtime = st.st_mtim;
	in->made_mess = 1;	/* undo checks the inode: never someone else's */
	if (linkat(in->dfd, in->pidfn, in->dfd, in->messfn, 0) < 0)
		return qinject_fail(in, QQ_MESS, errno, "link %s to %s", in->pidfn, in->messfn);
	if (unlinkat(in->dfd, in->pidfn, 0) < 0)
		return qinject_fail(in, QQ_PID, errno, "unlink %s", in->pidfn);
	in->made_pid = 0;

	date_qmail(date, time(NULL));
	buf_printf(&b, "Received: (weir %ld invoked by uid %lu); %s\n",
	    (long)who->pid, (unsigned long)who->uid, date);
	rc = full_write(in->messfd, b.s, b.len);
	buf_free(&b);
	if (rc < 0)
		return qinject_fail(in, QQ_WRITE, errno, "write %s", in->messfn);
	return 0;
}

int
qinject_write(struct qinject *in, const void *p, size_t n)
{
	if (n > 0 && full_write(in->messfd, p, n) < 0)
		return qinject_fail(in, QQ_WRITE, errno, "write %s", in->messfn);
	return 0;
}

/* The queue time, past the folder's mtime (the header comment). */
static int
set_queue_time(struct qinject *in)
{
	const struct timespec *f = &in->folder_mtime;
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, 0 } };
	struct stat st;

	if (clock_gettime(CLOCK_REALTIME, &ts[1]) < 0)
		return qinject_fail(in, QQ_BUG, errno, "clock_gettime");
	if (ts[1].tv_sec < f->tv_sec || (ts[1].tv_sec == f->tv_sec && ts[1].tv_nsec <= f->tv_nsec)) {
		ts[1] = *f;
		if (++ts[1].tv_nsec == 1000000000L) {
			ts[1].tv_sec++;
			ts[1].tv_nsec = 0;
		}
	}
	if (futimens(in->intdfd, ts) < 0)
		return qinject_fail(in, QQ_WRITE, errno, "set the queue time of %s", in->intdfn);
	/* As the file system keeps it (some keep whole seconds only). */
	if (fstat(in->intdfd, &st) < 0)
		return qinject_fail(in, QQ_WRITE, errno, "fstat %s", in->intdfn);
	in->qtime = st.st_mtim;
	return 0;
}

int
qinject_env(struct qinject *in, const char *p, size_t n, size_t *used)
{
	enum env_status st;

	*used = 0;
	if (in->intdfd < 0) {
		in->made_intd = 1;	/* undo checks the inode against intdfd */
		in->intdfd = openat(in->dfd, in->intdfn, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		    0644);
		if (in->intdfd < 0)
			return qinject_fail(in, QQ_INTD, errno, "create %s", in->intdfn);
		buf_printf(&in->envout, "u%lu%cp%ld%c", (unsigned long)in->who.uid, 0,
		    (long)in->who.pid, 0);
		env_parser_init(&in->ep);
	}
	st = env_parser_feed(&in->ep, p, n, used, &in->envout);
	if (st == ENV_TOOLONG)
		return qinject_fail(in, QQ_ADDR_TOO_LONG, 0, "%s", in->ep.why);
	if (st == ENV_FORMAT)
		return qinject_fail(in, QQ_ENVELOPE, 0, "bad envelope: %s", in->ep.why);
	/* Flush big envelopes as they come; memory stays bounded. */
	if (in->envout.len >= CHUNK || st == ENV_DONE) {
		if (full_write(in->intdfd, in->envout.s, in->envout.len) < 0)
			return qinject_fail(in, QQ_WRITE, errno, "write %s", in->intdfn);
		buf_reset(&in->envout);
	}
	if (st == ENV_DONE) {
		in->env_done = 1;
		return set_queue_time(in);
	}
	return 0;
}

int
qinject_link(struct qinject *in)
{
	if (!in->env_done)
		return qinject_fail(in, QQ_BUG, 0, "link %s before its envelope ended", in->intdfn);
	if (linkat(in->dfd, in->intdfn, in->dfd, in->todofn, 0) < 0)
		return qinject_fail(in, QQ_TODO, errno, "link %s to %s", in->intdfn, in->todofn);
	in->made_intd = in->made_mess = in->made_pid = 0;	/* queued: never undone */
	return 0;
}

void
qinject_close(struct qinject *in)
{
	if (in->messfd >= 0)
		(void)close(in->messfd);	/* read-only use from now: nothing to lose */
	if (in->intdfd >= 0)
		(void)close(in->intdfd);
	in->messfd = in->intdfd = -1;
	buf_free(&in->envout);
}

const char *
qinject_id(const struct qinject *in, char out[QUEUE_ID_MAX])
{
	return queue_msgid(out, in->id, &in->qtime);
}

void
qinject_trigger(int dfd)
{
	int fd = openat(dfd, "lock/trigger", O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, "", 1) < 0) {
		/* Nobody listening, or the FIFO is full: weir-send rescans. */
	}
	(void)close(fd);
}

/* ---- weir-queue: one injection per process ---- */

/* The one injection of this process, for qinject_abort(). */
static struct qinject *current;

void
qinject_abort(void)
{
	/* SIGALRM is blocked from the todo link on and current is cleared
	 * after it, so this never removes a queued message. */
	if (current != NULL)
		(void)qinject_undo(current);
}

/* The message's id to the caller's descriptor.  The message is queued
 * whatever happens here: a failure is only a line. */
static void
tell_id(const struct qinject *in, int idfd)
{
	char id[QUEUE_ID_MAX], line[QUEUE_ID_MAX + 1];
	int n;

	if (idfd < 0)
		return;
	qinject_id(in, id);
	n = snprintf(line, sizeof line, "%s\n", id);
	if (full_write(idfd, line, (size_t)n) < 0)
		log_warn("queued as %s, but cannot tell the caller", id);
}

static int
read_mess(struct qinject *in, int msgfd)
{
	static char chunk[CHUNK];
	ssize_t r;
	int code;

	for (;;) {
		r = full_read(msgfd, chunk, sizeof chunk);
		if (r < 0)
			return qinject_fail(in, QQ_READ, errno, "read the message (fd 0)");
		if ((code = qinject_write(in, chunk, (size_t)r)) != 0)
			return code;
		if ((size_t)r < sizeof chunk)
			return 0;
	}
}

static int
read_env(struct qinject *in, int envfd)
{
	static char chunk[CHUNK];
	size_t used;
	ssize_t r;
	int code;

	while (!in->env_done) {
		r = read_retry(envfd, chunk, sizeof chunk);
		if (r < 0)
			return qinject_fail(in, QQ_READ, errno, "read the envelope (fd 1)");
		if (r == 0)
			return qinject_fail(in, QQ_READ, 0, "envelope truncated after %zu bytes "
			    "(end of file before the final NUL)", in->ep.pos);
		if ((code = qinject_env(in, chunk, (size_t)r, &used)) != 0)
			return code;
	}
	return 0;
}

int
qinject_fds(const struct queue *q, const struct qinject_who *who, int msgfd, int envfd,
    int idfd)
{
	struct qinject in;
	unsigned long seq = 1;
	sigset_t alrm;
	int code;

	current = &in;
	if ((code = qinject_begin(&in, q, who, who->pid, &seq, "fatal")) != 0)
		return code;
	if ((code = read_mess(&in, msgfd)) != 0)
		return code;
	writeback_start(in.messfd);	/* while the envelope comes (lib/io.h) */
	if ((code = read_env(&in, envfd)) != 0)
		return code;
	writeback_start(in.intdfd);
	if (fsync(in.messfd) < 0)
		return qinject_fail(&in, QQ_WRITE, errno, "fsync %s", in.messfn);
	if (fsync(in.intdfd) < 0)
		return qinject_fail(&in, QQ_WRITE, errno, "fsync %s", in.intdfn);
	if (fsync_dir(in.dfd, in.messdir) < 0)
		return qinject_fail(&in, QQ_WRITE, errno, "fsync folder %s", in.messdir);

	/* From the link on, a timeout must not report failure for a message
	 * that is queued: hold SIGALRM off until we exit. */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	if (sigprocmask(SIG_BLOCK, &alrm, NULL) < 0)
		return qinject_fail(&in, QQ_BUG, errno, "sigprocmask");
	if ((code = qinject_link(&in)) != 0)
		return code;
	current = NULL;
	if (fsync_dir(in.dfd, "todo") < 0) {
		/* S4 may or may not survive a crash; say so, do not undo. */
		log_line("fatal", errno, "fsync folder todo after linking %s; the message "
		    "may be queued and may be delivered even though this injection failed",
		    in.todofn);
		return QQ_WRITE;
	}
	qinject_trigger(in.dfd);
	tell_id(&in, idfd);
	qinject_close(&in);
	return QQ_OK;
}
