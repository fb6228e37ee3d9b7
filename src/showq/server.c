/*
 * server.c: see server.h.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/unixlisten.h"
#include "mail/qlist.h"
#include "mail/qsummary.h"
#include "mail/queue.h"
#include "mail/rundir.h"
#include "mail/showq.h"
#include "showq/server.h"

int
showq_listen(const char *path)
{
	char dir[PATH_MAX];

	rundir_of(path, dir, sizeof dir);
	if (mkdir(dir, 0755) == 0)
		log_info("made %s (the folder of showq_socket), mode 0755", dir);
	else if (errno != EEXIST)
		fatal(111, "make %s (the folder of showq_socket)", dir);
	/* Anyone may connect: what it answers is what it shows everyone. */
	return unix_listen(path, 0666, 64, 0, "weir-showq");
}

/* The client's uid, for the log; -1 if unknown. */
static long
peer_uid(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof cr;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -1;
	return (long)cr.uid;
}

/* Refuse the request: "error REASON\n" (best effort: the client may be
 * gone), and one log line. */
static int
refuse(int fd, const char *reason)
{
	struct buf b = BUF_INIT;

	log_warnx("refused a request from uid %ld: %s", peer_uid(fd), reason);
	buf_printf(&b, "error %s\n", reason);
	if (full_write(fd, b.s, b.len) < 0)
		log_debug("write the refusal: %s", strerror(errno));
	buf_free(&b);
	return 1;
}

/* Read the request line within o->req_ms.  0 ok (*f); 1 refused or gone. */
static int
read_request(int fd, const struct showq_opts *o, enum qlist_format *f)
{
	uint64_t deadline = clock_mono_ms() + (uint64_t)o->req_ms, now;
	struct pollfd p = { fd, POLLIN, 0 };
	char req[SHOWQ_REQ_MAX + 1];
	struct buf why = BUF_INIT;
	size_t n = 0;
	ssize_t r;
	int rc;

	while (n <= SHOWQ_REQ_MAX && memchr(req, '\n', n) == NULL) {
		now = clock_mono_ms();
		r = now >= deadline ? 0 : poll(&p, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			log_warn("poll");
			return 1;
		}
		if (r == 0) {
			buf_printf(&why, "no request within %d ms", o->req_ms);
			rc = refuse(fd, why.s);
			buf_free(&why);
			return rc;
		}
		r = read_retry(fd, req + n, sizeof req - n);
		if (r < 0) {
			log_debug("read the request: %s", strerror(errno));
			return 1;
		}
		if (r == 0) {
			if (n == 0)
				return 1;	/* connected and left: a probe */
			break;
		}
		n += (size_t)r;
	}
	if (showq_parse_request(req, n, f, &why) < 0) {
		rc = refuse(fd, why.s);
		buf_free(&why);
		return rc;
	}
	return 0;
}

/* The summary (mail/qsummary.h) into fd: 0, or -1 with why. */
static int
summary(const struct queue *q, int fd, struct buf *why)
{
	struct qsummary s;
	struct buf b = BUF_INIT;
	int rc = -1;

	if (qsummary_read(q, &s, why) < 0)
		return -1;
	qsummary_json(&s, &b);
	if (full_write(fd, b.s, b.len) < 0)
		buf_printf(why, "write: %s", strerror(errno));
	else
		rc = 0;
	qsummary_free(&s);
	buf_free(&b);
	return rc;
}

int
showq_answer(int fd, const struct showq_opts *o)
{
	struct buf why = BUF_INIT, head = BUF_INIT, reason = BUF_INIT;
	struct qlist_stats st;
	enum qlist_format f;
	struct queue q;
	struct stat sb;
	off_t off = 0;
	ssize_t r;
	int mfd = -1, rc = 1, lrc = -1, qopen = 0;

	if (read_request(fd, o, &f) != 0)
		return 1;
	if ((mfd = memfd_create("weir-showq", MFD_CLOEXEC)) < 0) {
		buf_printf(&why, "weir-showq: memfd_create: %s", strerror(errno));
	} else if (queue_open(&q, o->queue_dir, o->queue_split) < 0) {
		buf_printf(&why, "cannot open the queue %s: %s", o->queue_dir, strerror(errno));
	} else {
		qopen = 1;
		/* The same listing root's mailq prints (mailq.c), into memory,
		 * so that the header can say how long it is and how it ended. */
		buf_printf(&why, "%s: ", o->queue_dir);
		lrc = f == QLIST_SUMMARY ? summary(&q, mfd, &why) : qlist_write(&q, mfd, f, &st, &why);
	}
	if (mfd >= 0 && fstat(mfd, &sb) < 0) {
		log_warn("fstat the listing");
		goto out;
	}
	if (lrc >= 0)
		buf_printf(&head, "ok %d %lld\n", lrc, (long long)sb.st_size);
	else {
		buf_add_oneline(&reason, why.s, why.len > SHOWQ_REASON_MAX ? SHOWQ_REASON_MAX : why.len);
		buf_printf(&head, "fail %lld %s\n", mfd >= 0 ? (long long)sb.st_size : 0LL,
		    buf_cstr(&reason));
		log_warnx("listing for uid %ld: %s", peer_uid(fd), buf_cstr(&reason));
	}
	if (full_write(fd, head.s, head.len) < 0) {
		log_debug("write the answer: %s", strerror(errno));
		goto out;
	}
	while (mfd >= 0 && off < sb.st_size) {
		r = sendfile(fd, mfd, &off, (size_t)(sb.st_size - off));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			log_debug("write the listing: %s", r < 0 ? strerror(errno) : "nothing sent");
			goto out;
		}
	}
	rc = 0;
out:
	if (qopen)
		queue_close(&q);
	if (mfd >= 0)
		(void)close(mfd);
	buf_free(&why);
	buf_free(&head);
	buf_free(&reason);
	return rc;
}

int
showq_serve(int lfd, const struct showq_opts *o)
{
	size_t children = 0;
	int fd, status;
	pid_t pid, self = getpid();

	log_info("serving the queue listing of %s on %s", o->queue_dir, o->socket);
	for (;;) {
		/* Reap; at the cap, wait for one (each ends by its deadline). */
		while (children > 0 &&
		    (pid = waitpid(-1, &status, children >= SHOWQ_CHILDREN ? 0 : WNOHANG)) != 0) {
			if (pid < 0) {
				if (errno == EINTR)
					continue;
				log_warn("waitpid");
				return 111;
			}
			children--;
			if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
				log_warnx("a listing (pid %ld) took over %d s: stopped", (long)pid,
				    o->answer_s);
			else if (WIFSIGNALED(status))
				log_warnx("a listing (pid %ld) killed by signal %d", (long)pid,
				    WTERMSIG(status));
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			log_warn("accept on %s", o->socket);
			return 111;
		}
		pid = fork();
		if (pid < 0) {
			log_warn("fork");
			(void)close(fd);
			continue;
		}
		if (pid == 0) {
			/* A listing does not outlive weir-showq: it holds weir
			 * run's lock (weir/run.c), which a restart needs free. */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
				_exit(1);
			(void)close(lfd);
			(void)signal(SIGPIPE, SIG_IGN);
			(void)signal(SIGALRM, SIG_DFL);
			alarm((unsigned)o->answer_s);
			_exit(showq_answer(fd, o));
		}
		children++;
		(void)close(fd);
	}
}
