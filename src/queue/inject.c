/*
 * inject.c: weir-queue's work, following the state table in
 * src/mail/QUEUE.md step by step:
 *
 *   S1  create pid/<pid>.<time>.<seq>; its inode number is the id N
 *   S2  link it as mess/<N%split>/N, unlink the pid/ name; write the
 *       Received line and the message; fsync the file
 *   S3  create intd/N; write u, p, F and T records; set its mtime (the
 *       queue time) past the mess/ folder's (below); fsync the file;
 *       fsync the mess/<N%split> folder (the mess entry must be durable
 *       before todo/N can be)
 *   S4  link intd/N as todo/N; fsync todo/: only now is the message
 *       queued, and only now may we exit 0.  Pull the trigger.
 *
 * On a failure before the todo link, the files made so far are truncated
 * and removed (S2/S3 back to S1), as qmail-queue does; on a timeout they
 * are removed by inject_abort() from the SIGALRM handler (qmail-queue
 * leaves them to qmail-send's 36-hour cleanup).  After the link nothing
 * is undone: weir-send may already be working on todo/N.
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
 * Trusts: nothing it reads on fd 0 or fd 1.
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

#include "lib/buf.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/envelope.h"
#include "mail/qqcode.h"
#include "queue/inject.h"

#define CHUNK 65536
#define PID_TRIES 9

struct inj {
	const struct inject_params *p;
	int dfd;
	unsigned long id;
	char pidfn[64];
	char messfn[QPATH_MAX];
	char intdfn[QPATH_MAX];
	char todofn[QPATH_MAX];
	int messfd, intdfd;
	struct timespec folder_mtime;	/* mess/<N%split>'s, before our link */
	struct timespec qtime;	/* the queue time: the id's T */
	/* Read by inject_abort() from a signal handler. */
	volatile sig_atomic_t made_mess, made_intd, made_pid;
};

/* The one injection of this process, for inject_abort(). */
static struct inj *current;

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

/* S3 and S2 back to S1: remove intd/N, mess/S/N and the pid/ name if
 * they are ours.  Only async-signal-safe calls (fstat, fstatat, unlinkat,
 * ftruncate): inject_abort() runs it from signal handlers.  Returns the
 * number of names it could not remove. */
static int
undo(struct inj *in)
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
	/* pid/PID.TIME.SEQ: no other live process can own that name. */
	if (in->made_pid && unlinkat(in->dfd, in->pidfn, 0) < 0 && errno != ENOENT)
		bad++;
	return bad;
}

/* Undo, then log and return code. */
static int
fail(struct inj *in, int code, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_line("fatal", err, "%s", msg);
	if (undo(in) > 0)
		log_warn("cleanup after the failure; weir-send removes what is left "
		    "after 36 hours");
	return code;
}

/* S1: a fresh pid/ file gives the message its number. */
static int
make_pid_file(struct inj *in)
{
	struct stat st;
	time_t now = time(NULL);
	int seq;

	for (seq = 1; seq <= PID_TRIES; seq++) {
		snprintf(in->pidfn, sizeof in->pidfn, "pid/%ld.%lld.%d",
		    (long)in->p->pid, (long long)now, seq);
		/* Flag first: a signal right after the create must find it. */
		in->made_pid = 1;
		in->messfd = openat(in->dfd, in->pidfn,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (in->messfd >= 0)
			break;
		in->made_pid = 0;
		if (errno != EEXIST)
			return fail(in, QQ_PID, errno, "create %s", in->pidfn);
	}
	if (in->messfd < 0)
		return fail(in, QQ_PID, 0, "no free name in pid/ after %d tries", PID_TRIES);
	if (fstat(in->messfd, &st) < 0)
		return fail(in, QQ_PID, errno, "fstat %s", in->pidfn);
	in->id = (unsigned long)st.st_ino;
	queue_path(in->messfn, in->p->q, Q_MESS, in->id);
	queue_path(in->intdfn, in->p->q, Q_INTD, in->id);
	queue_path(in->todofn, in->p->q, Q_TODO, in->id);
	return 0;
}

/* S2: the message file, durable. */
static int
write_mess(struct inj *in)
{
	char date[DATE_QMAIL_MAX], dir[QPATH_MAX];
	struct stat st;
	static char chunk[CHUNK];
	struct buf b = BUF_INIT;
	ssize_t r;
	int rc;

	queue_dirpath(dir, in->p->q, Q_MESS, in->id);
	if (fstatat(in->dfd, dir, &st, 0) < 0)
		return fail(in, QQ_MESS, errno, "stat folder %s", dir);
	in->folder_mtime = st.st_mtim;
	in->made_mess = 1;	/* undo() checks the inode: never someone else's */
	if (linkat(in->dfd, in->pidfn, in->dfd, in->messfn, 0) < 0)
		return fail(in, QQ_MESS, errno, "link %s to %s", in->pidfn, in->messfn);
	if (unlinkat(in->dfd, in->pidfn, 0) < 0)
		return fail(in, QQ_PID, errno, "unlink %s", in->pidfn);
	in->made_pid = 0;

	date_qmail(date, time(NULL));
	buf_printf(&b, "Received: (weir %ld invoked by uid %lu); %s\n",
	    (long)in->p->pid, (unsigned long)in->p->uid, date);
	rc = full_write(in->messfd, b.s, b.len);
	buf_free(&b);
	if (rc < 0)
		return fail(in, QQ_WRITE, errno, "write %s", in->messfn);
	for (;;) {
		r = full_read(in->p->msgfd, chunk, sizeof chunk);
		if (r < 0)
			return fail(in, QQ_READ, errno, "read the message (fd 0)");
		if (r > 0 && full_write(in->messfd, chunk, (size_t)r) < 0)
			return fail(in, QQ_WRITE, errno, "write %s", in->messfn);
		if ((size_t)r < sizeof chunk)
			break;
	}
	if (fsync(in->messfd) < 0)
		return fail(in, QQ_WRITE, errno, "fsync %s", in->messfn);
	return 0;
}

/* S3: the envelope, read from fd 1 and checked as it comes. */
/* The queue time, past the folder's mtime (the header comment). */
static int
set_queue_time(struct inj *in)
{
	const struct timespec *f = &in->folder_mtime;
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, 0 } };
	struct stat st;

	if (clock_gettime(CLOCK_REALTIME, &ts[1]) < 0)
		return fail(in, QQ_BUG, errno, "clock_gettime");
	if (ts[1].tv_sec < f->tv_sec || (ts[1].tv_sec == f->tv_sec && ts[1].tv_nsec <= f->tv_nsec)) {
		ts[1] = *f;
		if (++ts[1].tv_nsec == 1000000000L) {
			ts[1].tv_sec++;
			ts[1].tv_nsec = 0;
		}
	}
	if (futimens(in->intdfd, ts) < 0)
		return fail(in, QQ_WRITE, errno, "set the queue time of %s", in->intdfn);
	/* As the file system keeps it (some keep whole seconds only). */
	if (fstat(in->intdfd, &st) < 0)
		return fail(in, QQ_WRITE, errno, "fstat %s", in->intdfn);
	in->qtime = st.st_mtim;
	return 0;
}

static int
write_intd(struct inj *in)
{
	static char chunk[CHUNK];
	struct env_parser ep;
	struct buf out = BUF_INIT;
	enum env_status st = ENV_MORE;
	char dir[QPATH_MAX];
	size_t used;
	ssize_t r;
	int code = 0;

	in->made_intd = 1;	/* undo() checks the inode against intdfd */
	in->intdfd = openat(in->dfd, in->intdfn, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (in->intdfd < 0)
		return fail(in, QQ_INTD, errno, "create %s", in->intdfn);

	buf_printf(&out, "u%lu%cp%ld%c", (unsigned long)in->p->uid, 0, (long)in->p->pid, 0);
	env_parser_init(&ep);
	while (st == ENV_MORE) {
		r = read_retry(in->p->envfd, chunk, sizeof chunk);
		if (r < 0) {
			code = fail(in, QQ_READ, errno, "read the envelope (fd 1)");
			goto out;
		}
		if (r == 0) {
			code = fail(in, QQ_READ, 0, "envelope truncated after %zu bytes "
			    "(end of file before the final NUL)", ep.pos);
			goto out;
		}
		st = env_parser_feed(&ep, chunk, (size_t)r, &used, &out);
		if (st == ENV_TOOLONG) {
			code = fail(in, QQ_ADDR_TOO_LONG, 0, "%s", ep.why);
			goto out;
		}
		if (st == ENV_FORMAT) {
			code = fail(in, QQ_ENVELOPE, 0, "bad envelope: %s", ep.why);
			goto out;
		}
		/* Flush big envelopes as they come; memory stays bounded. */
		if (out.len >= CHUNK || st == ENV_DONE) {
			if (full_write(in->intdfd, out.s, out.len) < 0) {
				code = fail(in, QQ_WRITE, errno, "write %s", in->intdfn);
				goto out;
			}
			buf_reset(&out);
		}
	}
	if ((code = set_queue_time(in)) != 0)
		goto out;
	if (fsync(in->intdfd) < 0) {
		code = fail(in, QQ_WRITE, errno, "fsync %s", in->intdfn);
		goto out;
	}
	queue_dirpath(dir, in->p->q, Q_MESS, in->id);
	if (fsync_dir(in->dfd, dir) < 0)
		code = fail(in, QQ_WRITE, errno, "fsync folder %s", dir);
out:
	buf_free(&out);
	return code;
}

void
inject_abort(void)
{
	/* SIGALRM is blocked from the todo link on and current is cleared
	 * after it, so this never removes a queued message. */
	if (current != NULL)
		(void)undo(current);
}

/* Pull weir-send's trigger: one byte, never blocking; failure is fine. */
static void
pull_trigger(int dfd)
{
	int fd = openat(dfd, "lock/trigger", O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, "", 1) < 0) {
		/* Nobody listening, or the FIFO is full: weir-send rescans. */
	}
	close(fd);
}

/* The message's id (mail/queue.h: the queue time in it is todo/N's
 * mtime, as weir-send logs it), to the caller's descriptor.  The message is
 * queued whatever happens here: a failure is only a line. */
static void
tell_id(struct inj *in)
{
	char id[QUEUE_ID_MAX], line[QUEUE_ID_MAX + 1];
	int n;

	if (in->p->idfd < 0)
		return;
	queue_msgid(id, in->id, &in->qtime);
	n = snprintf(line, sizeof line, "%s\n", id);
	if (full_write(in->p->idfd, line, (size_t)n) < 0)
		log_warn("queued as %s, but cannot tell the caller", id);
}

int
inject(const struct inject_params *p)
{
	struct inj in;
	sigset_t alrm;
	int code;

	memset(&in, 0, sizeof in);
	in.p = p;
	in.dfd = p->q->dfd;
	in.messfd = in.intdfd = -1;
	current = &in;

	if ((code = make_pid_file(&in)) != 0)
		return code;
	if ((code = write_mess(&in)) != 0)
		return code;
	if ((code = write_intd(&in)) != 0)
		return code;

	/* From the link on, a timeout must not report failure for a message
	 * that is queued: hold SIGALRM off until we exit. */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	if (sigprocmask(SIG_BLOCK, &alrm, NULL) < 0)
		return fail(&in, QQ_BUG, errno, "sigprocmask");
	if (linkat(in.dfd, in.intdfn, in.dfd, in.todofn, 0) < 0)
		return fail(&in, QQ_TODO, errno, "link %s to %s", in.intdfn, in.todofn);
	current = NULL;
	if (fsync_dir(in.dfd, "todo") < 0) {
		/* S4 may or may not survive a crash; say so, do not undo. */
		log_line("fatal", errno, "fsync folder todo after linking %s; the message "
		    "may be queued and may be delivered even though this injection failed",
		    in.todofn);
		return QQ_WRITE;
	}
	pull_trigger(in.dfd);
	tell_id(&in);
	close(in.messfd);
	close(in.intdfd);
	return QQ_OK;
}
