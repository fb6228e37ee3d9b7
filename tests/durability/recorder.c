/*
 * recorder.c: an LD_PRELOAD shim that records, in one ordered log shared
 * by every process, each call of weir-queue, weir-queued, sendmail,
 * weir-send and weir-gate that changes a file under the directories being tested,
 * with the bytes written, so that tests/durability/crashreplay.c can
 * rebuild what a power cut after any of these calls could leave on disk.
 * Built by the Makefile as $(BUILD)/tests/recorder.so.
 *
 * Why not tests/fault/faultinj.c's WEIR_FAULT_LOG: that log is a line
 * per call written after the call, without the data, the file offsets
 * or the inode of a name, and calls of two processes may land in it in
 * another order than they happened.  Replaying a crash needs all four.
 * The shim makes calls fail; this one records them (and, for the
 * self-test of the harness, can leave one fsync out).
 *
 * Environment:
 *   WEIR_REC_LOG=path      the log (opened O_APPEND in each process)
 *   WEIR_REC_ROOT=dir      canonical folder holding the folders under test
 *   WEIR_REC_DIRS=a:b      their names under WEIR_REC_ROOT ("queue:gate")
 *   WEIR_REC_SKIP=prog:p[:file|:dir[:after]]
 *                          in the program prog only, an fsync (or
 *                          fdatasync) of a file or folder whose path
 *                          under the root starts with p is not made
 *                          (returns 0) and not recorded: a deliberately
 *                          broken weir, to show the checks can fail.
 *                          ":file" or ":dir" limits it to files or
 *                          folders; a further ":after" moves it instead:
 *                          the fsync is made (and recorded) just after
 *                          the process's next fsync of a folder whose
 *                          path starts with after (e.g. the mess/ file's
 *                          fsync moved after the todo/ link's)
 *   WEIR_REC_PAUSE=prog:p:file
 *                          in the program prog only, after each link or
 *                          rename to a path under the root that starts
 *                          with p, wait (up to 60 s) until file exists
 *                          (e.g. weir-queue between its todo/ link and
 *                          that folder's fsync, until weir-send took the
 *                          entry): holds a window open so that the
 *                          workload reaches it every run
 *
 * Only processes whose executable is weir-queue, weir-queued, sendmail,
 * weir-send or weir-gate record; the deliverer (a script) writes its own
 * records.  weir-queued fsyncs from several threads at once
 * (lib/fsyncall.c): their flock is the process's, so they do not wait
 * for each other, and each fsync's record is written when it returned,
 * before weir-queued goes on to its links: the log never says a file
 * was durable before it was.
 *
 * The log: one record per call, each written with one writev(2) while
 * holding flock(2) on the log, and the call itself is made under the
 * same lock, so the order of the log is the order of the calls, across
 * processes.  A record is a text line, fields separated by one space,
 * paths relative to WEIR_REC_ROOT, then for W (write) exactly <len> raw
 * bytes and a newline:
 *
 *   <pid> O <ino> <path> <created 0|1> <trunc 0|1>   open with O_CREAT/O_TRUNC
 *   <pid> W <ino> <off> <len>                        write, pwrite, writev
 *   <pid> T <ino> <len>                              ftruncate
 *   <pid> S <ino>                                    fsync, fdatasync of a file
 *   <pid> D <path>                                   fsync of a folder
 *   <pid> L <ino> <old> <new>                        link, linkat
 *   <pid> R <ino> <old> <new>                        rename, renameat(2)
 *   <pid> U <path>                                   unlink, unlinkat, rmdir
 *   <pid> M <path>                                   mkdir, mkdirat
 *   <pid> F <path>                                   mknod, mkfifo
 *   <pid> C <ino>                                    close
 *   <pid> G <grant id>                               weir-gate wrote GRANT on a socket
 *
 * Signal-safety: after the constructor, only stack buffers and raw
 * system calls (weir-queue's SIGALRM handler calls ftruncate and
 * unlinkat).  Trusts: its environment (test code; never install it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAXDIRS 8

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_ftruncate)(int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_link)(const char *, const char *);
static int (*real_linkat)(int, const char *, int, const char *, int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_rmdir)(const char *);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_mkdir)(const char *, mode_t);
static int (*real_mkdirat)(int, const char *, mode_t);
static int (*real_mknod)(const char *, mode_t, dev_t);
static int (*real_mknodat)(int, const char *, mode_t, dev_t);
static int (*real_mkfifo)(const char *, mode_t);
static int (*real_mkfifoat)(int, const char *, mode_t);
static int (*real_close)(int);

static int active;		/* this program records */
static int is_gate;
static char logpath[PATH_MAX];
static int logfd = -1;
static pid_t logpid;		/* the process that opened logfd */
static char root[PATH_MAX];
static size_t rootlen;
static char dirs[MAXDIRS][64];
static int ndirs;
static char skip[PATH_MAX];
static int skip_kind;		/* 0 any, 'f' files, 'd' folders */
static char skip_after[PATH_MAX];	/* non-empty: move, not skip */
static int deferred_fd = -1;	/* the moved fsync's file, until then */
static char pause_path[PATH_MAX];	/* WEIR_REC_PAUSE's p, or empty */
static char pause_go[PATH_MAX];		/* and its file */
static unsigned long long deferred_ino;

/* ---- small helpers on stack buffers ---- */

struct line {
	char s[3 * PATH_MAX];
	size_t len;
};

static void
l_adds(struct line *l, const char *s)
{
	while (*s && l->len < sizeof l->s - 2)
		l->s[l->len++] = *s++;
}

static void
l_addu(struct line *l, unsigned long long v)
{
	char tmp[24];
	int i = 0;

	do {
		tmp[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i > 0 && l->len < sizeof l->s - 2)
		l->s[l->len++] = tmp[--i];
}

static void
l_sp(struct line *l)
{
	l_adds(l, " ");
}

static void
l_begin(struct line *l, char kind)
{
	char k[2] = { kind, '\0' };

	l->len = 0;
	l_addu(l, (unsigned long long)syscall(SYS_getpid));
	l_sp(l);
	l_adds(l, k);
}

static int
fd_path(int fd, char *buf)
{
	char p[64];
	long r;

	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	r = syscall(SYS_readlink, p, buf, PATH_MAX - 1);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	/* The name it was opened by may be gone: the inode is what counts. */
	if (r > 10 && strcmp(buf + r - 10, " (deleted)") == 0)
		buf[r - 10] = '\0';
	return 0;
}

/* Absolute path of path against dirfd, into buf (PATH_MAX). */
static int
abs_path(int dirfd, const char *path, char *buf)
{
	size_t n = 0, pl;

	if (path == NULL)
		return -1;
	if (path[0] != '/') {
		if (dirfd == AT_FDCWD) {
			if (syscall(SYS_getcwd, buf, PATH_MAX) < 0)
				return -1;
		} else if (fd_path(dirfd, buf) < 0)
			return -1;
		n = strlen(buf);
		if (n + 1 < PATH_MAX && buf[n - 1] != '/')
			buf[n++] = '/';
	}
	pl = strlen(path);
	if (n + pl >= PATH_MAX)
		return -1;
	memcpy(buf + n, path, pl + 1);
	return 0;
}

/* The part of an absolute path under the root, if it lies in one of the
 * folders under test; else NULL. */
static const char *
under_test(const char *abs)
{
	const char *rel;
	int i;

	if (rootlen == 0 || strncmp(abs, root, rootlen) != 0 || abs[rootlen] != '/')
		return NULL;
	rel = abs + rootlen + 1;
	for (i = 0; i < ndirs; i++) {
		size_t dl = strlen(dirs[i]);

		if (strncmp(rel, dirs[i], dl) == 0 && (rel[dl] == '/' || rel[dl] == '\0'))
			return rel;
	}
	return NULL;
}

/* Path under test of an fd on a regular file (or a folder if dirs_too),
 * and its stat; NULL if it is not one. */
static const char *
fd_under_test(int fd, char *buf, struct stat *st, int dirs_too)
{
	if (syscall(SYS_fstat, fd, st) < 0) {
		st->st_mode = 0;
		return NULL;
	}
	if (!S_ISREG(st->st_mode) && !(dirs_too && S_ISDIR(st->st_mode)))
		return NULL;
	if (fd_path(fd, buf) < 0)
		return NULL;
	return under_test(buf);
}

static int
log_fd(void)
{
	pid_t me = (pid_t)syscall(SYS_getpid);

	/* A fork()ed child shares the parent's open file, hence its lock:
	 * it needs its own. */
	if (logfd < 0 || logpid != me) {
		logfd = (int)syscall(SYS_openat, AT_FDCWD, logpath,
		    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		logpid = me;
	}
	return logfd;
}

static void
lock(void)
{
	int fd = log_fd();

	if (fd >= 0)
		while (syscall(SYS_flock, fd, LOCK_EX) < 0 && errno == EINTR)
			;
}

static void
unlock(void)
{
	if (logfd >= 0)
		syscall(SYS_flock, logfd, LOCK_UN);
}

/* Write the record: the line, "\n", then the data (if any) and "\n". */
static void
emit(struct line *l, const struct iovec *data, int ndata)
{
	struct iovec v[18];
	int n = 0, i;
	int saved = errno;

	l->s[l->len++] = '\n';
	v[n].iov_base = l->s;
	v[n++].iov_len = l->len;
	for (i = 0; i < ndata && n < 17; i++)
		v[n++] = data[i];
	if (ndata > 0) {
		v[n].iov_base = (void *)"\n";
		v[n++].iov_len = 1;
	}
	if (log_fd() >= 0 && syscall(SYS_writev, logfd, v, n) < 0) {
		static const char m[] = "recorder: cannot write the log\n";

		syscall(SYS_write, 2, m, sizeof m - 1);
	}
	errno = saved;
}

/* ---- set-up ---- */

static void *
sym(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p == NULL) {
		fprintf(stderr, "recorder: no %s in libc\n", name);
		_exit(125);
	}
	return p;
}

__attribute__((constructor)) static void
recorder_init(void)
{
	const char *lp = getenv("WEIR_REC_LOG"), *rt = getenv("WEIR_REC_ROOT");
	const char *ds = getenv("WEIR_REC_DIRS"), *sk = getenv("WEIR_REC_SKIP");
	const char *pz = getenv("WEIR_REC_PAUSE");
	const char *name = program_invocation_short_name;

	real_write = sym("write");
	real_pwrite = sym("pwrite");
	real_writev = sym("writev");
	real_ftruncate = sym("ftruncate");
	real_fsync = sym("fsync");
	real_fdatasync = sym("fdatasync");
	real_link = sym("link");
	real_linkat = sym("linkat");
	real_rename = sym("rename");
	real_renameat = sym("renameat");
	real_renameat2 = sym("renameat2");
	real_unlink = sym("unlink");
	real_unlinkat = sym("unlinkat");
	real_rmdir = sym("rmdir");
	real_openat = sym("openat");
	real_mkdir = sym("mkdir");
	real_mkdirat = sym("mkdirat");
	real_mknod = sym("mknod");
	real_mknodat = sym("mknodat");
	real_mkfifo = sym("mkfifo");
	real_mkfifoat = sym("mkfifoat");
	real_close = sym("close");

	is_gate = strcmp(name, "weir-gate") == 0;
	if (!(is_gate || strcmp(name, "weir-queue") == 0 || strcmp(name, "weir-send") == 0 ||
	    strcmp(name, "sendmail") == 0 || strcmp(name, "weir-queued") == 0))
		return;
	if (lp == NULL || rt == NULL || ds == NULL || strlen(lp) >= sizeof logpath ||
	    strlen(rt) >= sizeof root) {
		fprintf(stderr, "recorder: WEIR_REC_LOG, WEIR_REC_ROOT and WEIR_REC_DIRS are needed\n");
		_exit(125);
	}
	strcpy(logpath, lp);
	strcpy(root, rt);
	rootlen = strlen(root);
	while (*ds && ndirs < MAXDIRS) {
		size_t n = strcspn(ds, ":");

		if (n > 0 && n < sizeof dirs[0]) {
			memcpy(dirs[ndirs], ds, n);
			dirs[ndirs++][n] = '\0';
		}
		ds += n + (ds[n] == ':');
	}
	if (sk && strchr(sk, ':') && strncmp(sk, name, (size_t)(strchr(sk, ':') - sk)) == 0 &&
	    name[strchr(sk, ':') - sk] == '\0' && strlen(sk) < sizeof skip) {
		char *k, *a;

		strcpy(skip, strchr(sk, ':') + 1);
		if ((k = strchr(skip, ':')) != NULL) {
			*k++ = '\0';
			if ((a = strchr(k, ':')) != NULL) {
				*a++ = '\0';
				strcpy(skip_after, a);
			}
			skip_kind = strcmp(k, "file") == 0 ? 'f' : strcmp(k, "dir") == 0 ? 'd' : 0;
		}
	}
	if (pz && strchr(pz, ':') && strncmp(pz, name, (size_t)(strchr(pz, ':') - pz)) == 0 &&
	    name[strchr(pz, ':') - pz] == '\0' && strlen(pz) < sizeof pause_path) {
		char *m;

		strcpy(pause_path, strchr(pz, ':') + 1);
		if ((m = strchr(pause_path, ':')) == NULL) {
			fprintf(stderr, "recorder: WEIR_REC_PAUSE is prog:path:file\n");
			_exit(125);
		}
		*m++ = '\0';
		strcpy(pause_go, m);
	}
	active = 1;
}

/* ---- the calls ---- */

static ssize_t
rec_write(int fd, const struct iovec *iov, int niov, off_t at, int positioned,
    ssize_t (*call)(void *), void *arg)
{
	char buf[PATH_MAX];
	struct stat st;
	struct line l;
	ssize_t r;
	off_t off;

	if (!active)
		return call(arg);
	if (fd_under_test(fd, buf, &st, 0) == NULL) {
		r = call(arg);
		if (is_gate && r > 0 && S_ISSOCK(st.st_mode)) {
			/* A grant answered: every "GRANT <tag> <id> ..." line. */
			const char *p = iov[0].iov_base, *e = p + (niov == 1 ? (size_t)r : 0);

			for (; p + 6 < e; p++) {
				const char *q;

				if ((p != iov[0].iov_base && p[-1] != '\n') || strncmp(p, "GRANT ", 6) != 0)
					continue;
				q = memchr(p + 6, ' ', (size_t)(e - p - 6));
				if (q == NULL)
					continue;
				l_begin(&l, 'G');
				l_sp(&l);
				for (q++; q < e && *q >= '0' && *q <= '9'; q++)
					l.s[l.len++] = *q;
				emit(&l, NULL, 0);
			}
		}
		return r;
	}
	lock();
	r = call(arg);
	if (r > 0) {
		struct iovec d[16];
		size_t left = (size_t)r;
		int i, n = 0;

		off = positioned ? at : (off_t)syscall(SYS_lseek, fd, 0, SEEK_CUR) - r;
		for (i = 0; i < niov && left > 0 && n < 16; i++) {
			d[n].iov_base = iov[i].iov_base;
			d[n].iov_len = iov[i].iov_len < left ? iov[i].iov_len : left;
			left -= d[n++].iov_len;
		}
		l_begin(&l, 'W');
		l_sp(&l);
		l_addu(&l, st.st_ino);
		l_sp(&l);
		l_addu(&l, (unsigned long long)off);
		l_sp(&l);
		l_addu(&l, (unsigned long long)(r - (ssize_t)left));
		emit(&l, d, n);
	}
	unlock();
	return r;
}

struct wargs {
	int fd;
	const void *p;
	size_t n;
	off_t off;
	const struct iovec *iov;
	int niov;
};

static ssize_t
call_write(void *a)
{
	struct wargs *w = a;

	return real_write(w->fd, w->p, w->n);
}

static ssize_t
call_pwrite(void *a)
{
	struct wargs *w = a;

	return real_pwrite(w->fd, w->p, w->n, w->off);
}

static ssize_t
call_writev(void *a)
{
	struct wargs *w = a;

	return real_writev(w->fd, w->iov, w->niov);
}

ssize_t
write(int fd, const void *p, size_t n)
{
	struct wargs w = { fd, p, n, 0, NULL, 0 };
	struct iovec v = { (void *)p, n };

	return rec_write(fd, &v, 1, 0, 0, call_write, &w);
}

ssize_t
pwrite(int fd, const void *p, size_t n, off_t off)
{
	struct wargs w = { fd, p, n, off, NULL, 0 };
	struct iovec v = { (void *)p, n };

	return rec_write(fd, &v, 1, off, 1, call_pwrite, &w);
}
ssize_t pwrite64(int fd, const void *p, size_t n, off_t off) __attribute__((alias("pwrite")));

ssize_t
writev(int fd, const struct iovec *iov, int niov)
{
	struct wargs w = { fd, NULL, 0, 0, iov, niov };

	return rec_write(fd, iov, niov, 0, 0, call_writev, &w);
}

/* An fd call: ftruncate, fsync, fdatasync, close. */
static int
rec_fd(int fd, char kind, off_t len, int (*sync)(int))
{
	char buf[PATH_MAX];
	const char *rel;
	struct stat st;
	struct line l;
	int r;

	if (!active || (rel = fd_under_test(fd, buf, &st, kind == 'S')) == NULL) {
		if (kind == 'T')
			return real_ftruncate(fd, len);
		return kind == 'C' ? real_close(fd) : sync(fd);
	}
	if (kind == 'S' && skip[0] && strncmp(rel, skip, strlen(skip)) == 0 &&
	    (skip_kind == 0 || (skip_kind == 'd') == !!S_ISDIR(st.st_mode))) {
		/* A deliberately broken weir: WEIR_REC_SKIP. */
		if (skip_after[0] && deferred_fd < 0) {
			deferred_fd = (int)syscall(SYS_dup, fd);
			deferred_ino = st.st_ino;
		}
		return 0;
	}
	lock();
	if (kind == 'T')
		r = real_ftruncate(fd, len);
	else if (kind == 'C')
		r = real_close(fd);
	else
		r = sync(fd);
	if (r == 0 || kind == 'C') {
		if (kind == 'S' && S_ISDIR(st.st_mode)) {
			l_begin(&l, 'D');
			l_sp(&l);
			l_adds(&l, rel);
		} else {
			l_begin(&l, kind);
			l_sp(&l);
			l_addu(&l, st.st_ino);
			if (kind == 'T') {
				l_sp(&l);
				l_addu(&l, (unsigned long long)len);
			}
		}
		emit(&l, NULL, 0);
		if (kind == 'S' && S_ISDIR(st.st_mode) && deferred_fd >= 0 &&
		    strncmp(rel, skip_after, strlen(skip_after)) == 0) {
			/* The moved fsync (WEIR_REC_SKIP's after), now. */
			if (sync(deferred_fd) == 0) {
				l_begin(&l, 'S');
				l_sp(&l);
				l_addu(&l, deferred_ino);
				emit(&l, NULL, 0);
			}
			syscall(SYS_close, deferred_fd);
			deferred_fd = -1;
		}
	}
	unlock();
	return r;
}

int ftruncate(int fd, off_t len) { return rec_fd(fd, 'T', len, NULL); }
int ftruncate64(int fd, off_t len) __attribute__((alias("ftruncate")));
int fsync(int fd) { return rec_fd(fd, 'S', 0, real_fsync); }
int fdatasync(int fd) { return rec_fd(fd, 'S', 0, real_fdatasync); }
int close(int fd) { return rec_fd(fd, 'C', 0, NULL); }

/* link and rename: kind L or R. */
static int
rec_two(char kind, int da, const char *a, int db, const char *b, int flags, unsigned rflags)
{
	char pa[PATH_MAX], pb[PATH_MAX];
	const char *ra, *rb;
	struct stat st;
	struct line l;
	int r, known;

	if (!active || abs_path(db, b, pb) < 0 || (rb = under_test(pb)) == NULL ||
	    abs_path(da, a, pa) < 0 || (ra = under_test(pa)) == NULL) {
		if (kind == 'L')
			return real_linkat(da, a, db, b, flags);
		return rflags ? real_renameat2(da, a, db, b, rflags) : real_renameat(da, a, db, b);
	}
	lock();
	known = syscall(SYS_newfstatat, AT_FDCWD, pa, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (kind == 'L')
		r = real_linkat(da, a, db, b, flags);
	else
		r = rflags ? real_renameat2(da, a, db, b, rflags) : real_renameat(da, a, db, b);
	if (r == 0 && known) {
		l_begin(&l, kind);
		l_sp(&l);
		l_addu(&l, st.st_ino);
		l_sp(&l);
		l_adds(&l, ra);
		l_sp(&l);
		l_adds(&l, rb);
		emit(&l, NULL, 0);
	}
	unlock();
	if (r == 0 && pause_path[0] && strncmp(rb, pause_path, strlen(pause_path)) == 0) {
		struct timespec ts = { 0, 10000000L };
		struct stat go;
		int i;

		for (i = 0; i < 6000 && syscall(SYS_newfstatat, AT_FDCWD, pause_go, &go, 0) != 0; i++)
			syscall(SYS_nanosleep, &ts, NULL);	/* WEIR_REC_PAUSE */
	}
	return r;
}

int link(const char *a, const char *b) { return rec_two('L', AT_FDCWD, a, AT_FDCWD, b, 0, 0); }
int linkat(int da, const char *a, int db, const char *b, int f) { return rec_two('L', da, a, db, b, f, 0); }
int rename(const char *a, const char *b) { return rec_two('R', AT_FDCWD, a, AT_FDCWD, b, 0, 0); }
int renameat(int da, const char *a, int db, const char *b) { return rec_two('R', da, a, db, b, 0, 0); }
int
renameat2(int da, const char *a, int db, const char *b, unsigned f)
{
	return rec_two('R', da, a, db, b, 0, f);
}

/* A call on one path: unlink (U), mkdir (M), mknod (F). */
static int
rec_path(char kind, int d, const char *p, int (*call)(void *), void *arg)
{
	char abs[PATH_MAX];
	const char *rel;
	struct line l;
	int r;

	if (!active || abs_path(d, p, abs) < 0 || (rel = under_test(abs)) == NULL)
		return call(arg);
	lock();
	r = call(arg);
	if (r == 0) {
		l_begin(&l, kind);
		l_sp(&l);
		l_adds(&l, rel);
		emit(&l, NULL, 0);
	}
	unlock();
	return r;
}

struct pargs {
	int d;
	const char *p;
	int flags;
	mode_t mode;
	dev_t dev;
	int which;
};

static int
call_path(void *a)
{
	struct pargs *x = a;

	switch (x->which) {
	case 0: return real_unlinkat(x->d, x->p, x->flags);
	case 1: return real_mkdirat(x->d, x->p, x->mode);
	case 2: return real_mknodat(x->d, x->p, x->mode, x->dev);
	case 3: return real_mkfifoat(x->d, x->p, x->mode);
	case 4: return real_unlink(x->p);
	case 5: return real_rmdir(x->p);
	case 6: return real_mkdir(x->p, x->mode);
	case 7: return real_mknod(x->p, x->mode, x->dev);
	default: return real_mkfifo(x->p, x->mode);
	}
}

#define PATHCALL(kind, d, p, fl, m, dv, w) do { \
	struct pargs x_ = { d, p, fl, m, dv, w }; \
	return rec_path(kind, d, p, call_path, &x_); \
} while (0)

int unlinkat(int d, const char *p, int f) { PATHCALL('U', d, p, f, 0, 0, 0); }
int unlink(const char *p) { PATHCALL('U', AT_FDCWD, p, 0, 0, 0, 4); }
int rmdir(const char *p) { PATHCALL('U', AT_FDCWD, p, 0, 0, 0, 5); }
int mkdirat(int d, const char *p, mode_t m) { PATHCALL('M', d, p, 0, m, 0, 1); }
int mkdir(const char *p, mode_t m) { PATHCALL('M', AT_FDCWD, p, 0, m, 0, 6); }
int mknodat(int d, const char *p, mode_t m, dev_t dv) { PATHCALL('F', d, p, 0, m, dv, 2); }
int mknod(const char *p, mode_t m, dev_t dv) { PATHCALL('F', AT_FDCWD, p, 0, m, dv, 7); }
int mkfifoat(int d, const char *p, mode_t m) { PATHCALL('F', d, p, 0, m, 0, 3); }
int mkfifo(const char *p, mode_t m) { PATHCALL('F', AT_FDCWD, p, 0, m, 0, 8); }

static int
rec_open(int d, const char *p, int flags, mode_t mode)
{
	char abs[PATH_MAX];
	const char *rel;
	struct stat st;
	struct line l;
	int r, existed;

	if (!active || !(flags & (O_CREAT | O_TRUNC)) || abs_path(d, p, abs) < 0 ||
	    (rel = under_test(abs)) == NULL)
		return real_openat(d, p, flags, mode);
	lock();
	existed = syscall(SYS_newfstatat, AT_FDCWD, abs, &st, 0) == 0;
	r = real_openat(d, p, flags, mode);
	if (r >= 0 && syscall(SYS_fstat, r, &st) == 0 && S_ISREG(st.st_mode)) {
		l_begin(&l, 'O');
		l_sp(&l);
		l_addu(&l, st.st_ino);
		l_sp(&l);
		l_adds(&l, rel);
		l_adds(&l, existed ? " 0" : " 1");
		l_adds(&l, existed && (flags & O_TRUNC) ? " 1" : " 0");
		emit(&l, NULL, 0);
	}
	unlock();
	return r;
}

static mode_t
mode_arg(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int
open(const char *p, int flags, ...)
{
	va_list ap;
	mode_t m;

	va_start(ap, flags);
	m = mode_arg(flags, ap);
	va_end(ap);
	return rec_open(AT_FDCWD, p, flags, m);
}

int
openat(int d, const char *p, int flags, ...)
{
	va_list ap;
	mode_t m;

	va_start(ap, flags);
	m = mode_arg(flags, ap);
	va_end(ap);
	return rec_open(d, p, flags, m);
}

int open64(const char *p, int flags, ...) __attribute__((alias("open")));
int openat64(int d, const char *p, int flags, ...) __attribute__((alias("openat")));

int
creat(const char *p, mode_t m)
{
	return rec_open(AT_FDCWD, p, O_WRONLY | O_CREAT | O_TRUNC, m);
}
