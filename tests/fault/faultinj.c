/*
 * faultinj.c: an LD_PRELOAD shim that makes chosen libc calls fail, for
 * the tests that prove weir's programs crashproof (a failed write, fsync
 * or link must never leave a half-queued message or be reported as
 * success).  Built by the Makefile as $(BUILD)/tests/faultinj.so;
 * tests/run.sh exports its path as $WEIR_FAULTINJ.
 *
 * Use:
 *   LD_PRELOAD=$WEIR_FAULTINJ WEIR_FAULT="fsync=2:EIO,write=3:ENOSPC" prog
 *
 * WEIR_FAULT is a comma-separated list of rules (at most 32):
 *
 *   func[@substring]=N[+]:ERRNO
 *
 *   func       one of the intercepted functions, by the counter name below.
 *   @substring optional: only calls whose path contains substring are
 *              counted by this rule (fd calls: the file the fd is open
 *              on, from /proc/self/fd; path calls: the absolute path,
 *              *at calls resolved against their dirfd; link and rename:
 *              the old or the new path).  It may not hold '=' or ','.
 *   N          fail the N-th counted call, 1-based, counted per rule
 *              within the process (a fork()ed child inherits the counts;
 *              an exec()ed program starts again from zero).
 *   N+         fail the N-th call and every later one ("*" means 1+).
 *   ERRNO      a name (EIO, ENOSPC, EDQUOT, EROFS, EMLINK, EACCES, ENOENT,
 *              EEXIST, EINTR, EPERM, ENOMEM, EAGAIN, EFBIG, ENOTDIR,
 *              EISDIR, EXDEV, EMFILE, ENFILE, ENAMETOOLONG, EBADF,
 *              ENOTEMPTY, ELOOP, ENXIO) or a decimal number; or KILL:
 *              instead of the call, the process kills itself with SIGKILL
 *              (a kill -9 at that very step); a write or pwrite first
 *              writes the first half of its bytes (killed mid-write).
 *
 * Counter names and what a failure does:
 *   write pwrite read fsync fdatasync        the call is not made; -1/errno
 *   link linkat rename renameat unlink       the call is not made; -1/errno
 *   unlinkat mkdir mkdirat
 *   open openat (open64, openat64 are        only calls with O_CREAT (or
 *   aliases; creat counts as open)           O_TMPFILE) count; not made
 *   openr                                    open or openat of an existing
 *                                            file (no O_CREAT, no
 *                                            O_TMPFILE); not made: ENOENT
 *                                            is a file removed since its
 *                                            folder was read
 *   close                                    the fd IS closed (as Linux
 *                                            does), then -1/errno
 * Several rules may name the same function; the first that fires wins.
 *
 * WEIR_FAULT_PROG=name restricts the rules and the log to processes whose
 * executable's base name is name (so a test can run sendmail, which runs
 * weir-queue, and fail only weir-queue's calls).
 *
 * WEIR_FAULT_LOG=path appends one line per intercepted call, written with
 * one write(2) on an O_APPEND descriptor so that concurrent processes do
 * not interleave inside a line:
 *
 *   <pid> fsync fd=3 ino=1234 path=/q/mess/15/1234 -> 0
 *   <pid> write fd=4 ino=1240 path=/q/intd/1234 n=20 -> -1 EIO injected
 *   <pid> link old=/q/intd/1234 new=/q/todo/1234 -> 0
 *   <pid> open path=/q/pid/77.1 flags=0xc1 -> 3
 *
 * Fields: the function (its counter name), its arguments (fd calls: the
 * fd, the file's inode and path as the kernel names it at the time of
 * the call; path calls: absolute paths), "->", the result, and for
 * failures the errno name and "injected" when this shim made it fail.
 * Lines are logged after the call, so a line's position is the order in
 * which calls returned.  An fd's path is the name it was opened by, as
 * /proc shows it: after that name is unlinked it reads "... (deleted)"
 * even if the file lives on under another name; the inode is reliable.
 *
 * Signal-safety: after the constructor (which parses the environment and
 * resolves the real functions with dlsym(RTLD_NEXT)), the hot path uses
 * only stack buffers, atomics and raw system calls: no malloc, no stdio,
 * no locks.  A malformed WEIR_FAULT is reported on stderr and the process
 * exits 125, so that a typo never makes a test pass silently.
 *
 * Limits: calls made inside glibc (stdio's writes, the dynamic loader's
 * opens) are not intercepted; weir calls these functions directly.
 *
 * Trusts: its environment (this is test code; never install it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* The counters, one per function name. */
enum fn {
	F_WRITE, F_PWRITE, F_READ, F_FSYNC, F_FDATASYNC, F_LINK, F_LINKAT,
	F_RENAME, F_RENAMEAT, F_UNLINK, F_UNLINKAT, F_OPEN, F_OPENAT, F_MKDIR,
	F_MKDIRAT, F_CLOSE, F_OPENR, F_NFN
};

static const char *const fn_name[F_NFN] = {
	"write", "pwrite", "read", "fsync", "fdatasync", "link", "linkat",
	"rename", "renameat", "unlink", "unlinkat", "open", "openat", "mkdir",
	"mkdirat", "close", "openr",
};

static const struct { const char *name; int err; } errnames[] = {
	{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
	{ "EROFS", EROFS }, { "EMLINK", EMLINK }, { "EACCES", EACCES },
	{ "ENOENT", ENOENT }, { "EEXIST", EEXIST }, { "EINTR", EINTR },
	{ "EPERM", EPERM }, { "ENOMEM", ENOMEM }, { "EAGAIN", EAGAIN },
	{ "EFBIG", EFBIG }, { "ENOTDIR", ENOTDIR }, { "EISDIR", EISDIR },
	{ "EXDEV", EXDEV }, { "EMFILE", EMFILE }, { "ENFILE", ENFILE },
	{ "ENAMETOOLONG", ENAMETOOLONG }, { "EBADF", EBADF },
	{ "ENOTEMPTY", ENOTEMPTY }, { "ELOOP", ELOOP }, { "ENXIO", ENXIO },
	{ "EPIPE", EPIPE },
	{ "KILL", 1000000 },	/* FAULT_KILL: not an errno */
};
#define FAULT_KILL 1000000

#define MAXRULES 32
#define MAXSUB 128

struct rule {
	enum fn fn;
	unsigned long n;	/* 1-based call to fail */
	int from_n;		/* fail n and every later call */
	int err;
	char sub[MAXSUB];	/* path filter, "" = every call */
	unsigned long count;	/* calls counted so far (atomic) */
};

static struct rule rules[MAXRULES];
static int nrules;
static int active;		/* rules apply to this process */
static int logfd = -1;		/* WEIR_FAULT_LOG, opened once */
static int want_paths;		/* some rule has a filter, or logging is on */
static volatile int inited;

/* The real functions. */
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_read_chk)(int, void *, size_t, size_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_link)(const char *, const char *);
static int (*real_linkat)(int, const char *, int, const char *, int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_creat)(const char *, mode_t);
static int (*real_mkdir)(const char *, mode_t);
static int (*real_mkdirat)(int, const char *, mode_t);
static int (*real_close)(int);

/* ---- small signal-safe string helpers ---- */

struct line {
	char s[PATH_MAX * 2 + 256];
	size_t len;
};

static void
l_adds(struct line *l, const char *s)
{
	while (*s && l->len < sizeof l->s - 2)
		l->s[l->len++] = *s++;
}

static void
l_addl(struct line *l, long v)
{
	char tmp[24];
	int i = 0;
	unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;

	if (v < 0)
		l_adds(l, "-");
	do {
		tmp[i++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	while (i > 0 && l->len < sizeof l->s - 2)
		l->s[l->len++] = tmp[--i];
}

static void
l_addhex(struct line *l, unsigned long v)
{
	char tmp[20];
	int i = 0;

	l_adds(l, "0x");
	do {
		tmp[i++] = "0123456789abcdef"[v % 16];
		v /= 16;
	} while (v);
	while (i > 0 && l->len < sizeof l->s - 2)
		l->s[l->len++] = tmp[--i];
}

static const char *
errname(int e)
{
	size_t i;

	for (i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
		if (errnames[i].err == e)
			return errnames[i].name;
	return NULL;
}

static void
l_adderr(struct line *l, int e)
{
	const char *n = errname(e);

	if (n)
		l_adds(l, n);
	else {
		l_adds(l, "errno=");
		l_addl(l, e);
	}
}

static void
say(const char *s)
{
	ssize_t r = syscall(SYS_write, 2, s, strlen(s));

	(void)r;
}

/* ---- paths ---- */

/* The path an fd is open on, or "?" (buf holds PATH_MAX). */
static void
fd_path(int fd, char *buf)
{
	struct line l;
	long r;

	l.len = 0;
	l_adds(&l, "/proc/self/fd/");
	l_addl(&l, fd);
	l.s[l.len] = '\0';
	r = syscall(SYS_readlink, l.s, buf, PATH_MAX - 1);
	if (r < 0)
		r = 0;
	buf[r] = '\0';
	if (r == 0)
		strcpy(buf, "?");
}

/* Make path absolute against dirfd (AT_FDCWD: the cwd), into buf. */
static void
abs_path(int dirfd, const char *path, char *buf)
{
	size_t n = 0, pl;

	if (path == NULL) {
		strcpy(buf, "(null)");
		return;
	}
	if (path[0] != '/') {
		if (dirfd == AT_FDCWD) {
			if (syscall(SYS_getcwd, buf, PATH_MAX) < 0)
				strcpy(buf, "?");
		} else
			fd_path(dirfd, buf);
		n = strlen(buf);
		if (n + 1 < PATH_MAX && (n == 0 || buf[n - 1] != '/'))
			buf[n++] = '/';
	}
	pl = strlen(path);
	if (n + pl >= PATH_MAX)
		pl = PATH_MAX - 1 - n;
	memcpy(buf + n, path, pl);
	buf[n + pl] = '\0';
}

/* ---- set-up ---- */

static void
bad_spec(const char *why, const char *at)
{
	say("faultinj: bad WEIR_FAULT: ");
	say(why);
	say(" at \"");
	say(at);
	say("\"\n");
	_exit(125);
}

static void
parse_rules(const char *spec)
{
	const char *p = spec;

	while (*p) {
		struct rule *r;
		const char *q, *name_end;
		size_t len;
		int i, found = -1;

		if (*p == ',') {
			p++;
			continue;
		}
		if (nrules == MAXRULES)
			bad_spec("more than 32 rules", p);
		r = &rules[nrules];
		for (q = p; *q && *q != '=' && *q != '@' && *q != ','; q++)
			;
		name_end = q;
		for (i = 0; i < F_NFN; i++)
			if (strlen(fn_name[i]) == (size_t)(name_end - p) &&
			    strncmp(fn_name[i], p, (size_t)(name_end - p)) == 0)
				found = i;
		if (found < 0)
			bad_spec("unknown function", p);
		r->fn = (enum fn)found;
		if (*q == '@') {
			const char *s = ++q;

			while (*q && *q != '=')
				q++;
			len = (size_t)(q - s);
			if (len == 0 || len >= MAXSUB)
				bad_spec("empty or long path filter", s);
			memcpy(r->sub, s, len);
			r->sub[len] = '\0';
			want_paths = 1;
		}
		if (*q != '=')
			bad_spec("expected '='", q);
		q++;
		if (*q == '*') {
			r->n = 1;
			r->from_n = 1;
			q++;
		} else {
			if (*q < '1' || *q > '9')
				bad_spec("expected a call number >= 1", q);
			r->n = 0;
			while (*q >= '0' && *q <= '9')
				r->n = r->n * 10 + (unsigned long)(*q++ - '0');
			if (*q == '+') {
				r->from_n = 1;
				q++;
			}
		}
		if (*q != ':')
			bad_spec("expected ':'", q);
		p = ++q;
		while (*q && *q != ',')
			q++;
		len = (size_t)(q - p);
		r->err = 0;
		if (len > 0 && p[0] >= '0' && p[0] <= '9') {
			const char *d;

			for (d = p; d < q; d++) {
				if (*d < '0' || *d > '9')
					bad_spec("bad errno number", p);
				r->err = r->err * 10 + (*d - '0');
			}
		} else {
			size_t k;

			for (k = 0; k < sizeof errnames / sizeof errnames[0]; k++)
				if (strlen(errnames[k].name) == len &&
				    strncmp(errnames[k].name, p, len) == 0)
					r->err = errnames[k].err;
		}
		if (r->err <= 0)
			bad_spec("unknown errno", p);
		nrules++;
		p = q;
	}
}

/* Does this process's executable match WEIR_FAULT_PROG? */
static int
prog_matches(const char *want)
{
	char exe[PATH_MAX];
	long r = syscall(SYS_readlink, "/proc/self/exe", exe, sizeof exe - 1);
	const char *base;

	if (r <= 0)
		return 0;
	exe[r] = '\0';
	base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	return strcmp(base, want) == 0;
}

#define RESOLVE(var, name) \
	do { if (!(var)) (var) = (__typeof__(var))dlsym(RTLD_NEXT, name); } while (0)

static void
resolve_all(void)
{
	RESOLVE(real_write, "write");
	RESOLVE(real_pwrite, "pwrite");
	RESOLVE(real_read, "read");
	RESOLVE(real_read_chk, "__read_chk");
	RESOLVE(real_fsync, "fsync");
	RESOLVE(real_fdatasync, "fdatasync");
	RESOLVE(real_link, "link");
	RESOLVE(real_linkat, "linkat");
	RESOLVE(real_rename, "rename");
	RESOLVE(real_renameat, "renameat");
	RESOLVE(real_unlink, "unlink");
	RESOLVE(real_unlinkat, "unlinkat");
	RESOLVE(real_open, "open");
	RESOLVE(real_openat, "openat");
	RESOLVE(real_creat, "creat");
	RESOLVE(real_mkdir, "mkdir");
	RESOLVE(real_mkdirat, "mkdirat");
	RESOLVE(real_close, "close");
}

__attribute__((constructor)) static void
faultinj_init(void)
{
	const char *spec, *prog, *logpath;

	if (inited)
		return;
	resolve_all();
	prog = getenv("WEIR_FAULT_PROG");
	active = !(prog && *prog && !prog_matches(prog));
	spec = getenv("WEIR_FAULT");
	if (active && spec)
		parse_rules(spec);
	logpath = getenv("WEIR_FAULT_LOG");
	if (active && logpath && *logpath) {
		logfd = (int)syscall(SYS_openat, AT_FDCWD, logpath,
		    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (logfd < 0) {
			say("faultinj: cannot open WEIR_FAULT_LOG\n");
			_exit(125);
		}
		/* Out of the way of programs that dup2() onto low fds. */
		if (logfd < 100) {
			int hi = (int)syscall(SYS_fcntl, logfd, F_DUPFD_CLOEXEC, 100);

			if (hi >= 0) {
				syscall(SYS_close, logfd);
				logfd = hi;
			}
		}
		want_paths = 1;
	}
	inited = 1;
}

/* ---- the decision and the log ---- */

/* The error to inject for this call of fn on path or path2 (either may
 * be NULL), or 0. */
static int
decide(enum fn fn, const char *path, const char *path2)
{
	int i, err = 0;

	for (i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		unsigned long c;

		if (r->fn != fn)
			continue;
		if (r->sub[0] && !(path && strstr(path, r->sub)) &&
		    !(path2 && strstr(path2, r->sub)))
			continue;
		c = __atomic_add_fetch(&r->count, 1, __ATOMIC_SEQ_CST);
		if (err == 0 && (c == r->n || (r->from_n && c > r->n)))
			err = r->err;
	}
	return err;
}

struct call {
	enum fn fn;
	struct line l;		/* arguments, filled by the wrapper */
	char path[PATH_MAX];	/* for filters: the main path */
	char path2[PATH_MAX];
	/* write and pwrite: their bytes, for a KILL mid-write */
	int wfd;
	const void *wp;
	size_t wn;
	off_t woff;
	int wpos;		/* pwrite: at woff */
};

static void
call_begin(struct call *c, enum fn fn)
{
	c->fn = fn;
	c->wp = NULL;
	c->l.len = 0;
	c->path[0] = '\0';
	c->path2[0] = '\0';
	if (logfd >= 0) {
		l_addl(&c->l, (long)syscall(SYS_getpid));
		l_adds(&c->l, " ");
		l_adds(&c->l, fn_name[fn]);
	}
}

/* fd argument: record "fd=N ino=I path=P". */
static void
call_fd(struct call *c, int fd)
{
	struct stat st;

	if (!want_paths)
		return;
	fd_path(fd, c->path);
	if (logfd < 0)
		return;
	l_adds(&c->l, " fd=");
	l_addl(&c->l, fd);
	if (syscall(SYS_fstat, fd, &st) == 0) {
		l_adds(&c->l, " ino=");
		l_addl(&c->l, (long)st.st_ino);
	}
	l_adds(&c->l, " path=");
	l_adds(&c->l, c->path);
}

/* path argument: record " key=/abs/path". */
static void
call_path(struct call *c, const char *key, int dirfd, const char *path, char *into)
{
	if (!want_paths)
		return;
	abs_path(dirfd, path, into);
	if (logfd < 0)
		return;
	l_adds(&c->l, " ");
	l_adds(&c->l, key);
	l_adds(&c->l, "=");
	l_adds(&c->l, into);
}

static void
call_num(struct call *c, const char *key, long v, int hex)
{
	if (logfd < 0)
		return;
	l_adds(&c->l, " ");
	l_adds(&c->l, key);
	l_adds(&c->l, "=");
	if (hex)
		l_addhex(&c->l, (unsigned long)v);
	else
		l_addl(&c->l, v);
}

/* Log the result; restores errno. */
static void
call_end(struct call *c, long ret, int err, int injected)
{
	if (logfd >= 0) {
		long w;

		l_adds(&c->l, " -> ");
		l_addl(&c->l, ret);
		if (ret < 0) {
			l_adds(&c->l, " ");
			l_adderr(&c->l, err);
		}
		if (injected)
			l_adds(&c->l, " injected");
		c->l.s[c->l.len++] = '\n';
		w = syscall(SYS_write, logfd, c->l.s, c->l.len);
		(void)w;
	}
	errno = err;
}

#define SETUP() do { if (!inited) faultinj_init(); } while (0)

/* KILL: half of a write's bytes first, the log line, then SIGKILL. */
static void
die(struct call *c)
{
	long r = 0;

	if (c->wp && c->wn > 1)
		r = c->wpos ? syscall(SYS_pwrite64, c->wfd, c->wp, c->wn / 2, c->woff) :
		    syscall(SYS_write, c->wfd, c->wp, c->wn / 2);
	if (logfd >= 0) {
		l_adds(&c->l, " -> killed");
		if (c->wp) {
			l_adds(&c->l, " after ");
			l_addl(&c->l, r);
			l_adds(&c->l, " bytes");
		}
		c->l.s[c->l.len++] = '\n';
		r = syscall(SYS_write, logfd, c->l.s, c->l.len);
	}
	(void)r;
	for (;;)
		syscall(SYS_kill, syscall(SYS_getpid), SIGKILL);
}

/* Run one intercepted call: decide, call the real function or fail, log. */
#define RUN(c, expr, closes) \
	do { \
		int inj_ = active ? decide((c).fn, (c).path[0] ? (c).path : NULL, \
		    (c).path2[0] ? (c).path2 : NULL) : 0; \
		int saved_ = errno; \
		long ret_; \
		int err_; \
		if (inj_ == FAULT_KILL) \
			die(&(c)); \
		if (inj_ && !(closes)) { \
			ret_ = -1; \
			err_ = inj_; \
		} else { \
			errno = 0; \
			ret_ = (long)(expr); \
			err_ = ret_ < 0 ? errno : saved_; \
			if (inj_) { \
				ret_ = -1; \
				err_ = inj_; \
			} \
		} \
		call_end(&(c), ret_, err_, inj_ != 0); \
		return (__typeof__(expr))ret_; \
	} while (0)

/* ---- the wrappers ---- */

static ssize_t
do_write(enum fn fn, ssize_t (*f)(int, const void *, size_t), int fd, const void *p, size_t n)
{
	struct call c;

	call_begin(&c, fn);
	call_fd(&c, fd);
	call_num(&c, "n", (long)n, 0);
	c.wfd = fd;
	c.wp = fn == F_WRITE ? p : NULL;
	c.wn = n;
	c.wpos = 0;
	RUN(c, f(fd, p, n), 0);
}

ssize_t
write(int fd, const void *p, size_t n)
{
	SETUP();
	if (logfd >= 0 && fd == logfd)
		return real_write(fd, p, n);
	return do_write(F_WRITE, real_write, fd, p, n);
}

ssize_t
pwrite(int fd, const void *p, size_t n, off_t off)
{
	struct call c;

	SETUP();
	call_begin(&c, F_PWRITE);
	call_fd(&c, fd);
	call_num(&c, "n", (long)n, 0);
	call_num(&c, "off", (long)off, 0);
	c.wfd = fd;
	c.wp = p;
	c.wn = n;
	c.woff = off;
	c.wpos = 1;
	RUN(c, real_pwrite(fd, p, n, off), 0);
}

ssize_t
read(int fd, void *p, size_t n)
{
	struct call c;

	SETUP();
	call_begin(&c, F_READ);
	call_fd(&c, fd);
	call_num(&c, "n", (long)n, 0);
	RUN(c, real_read(fd, p, n), 0);
}

ssize_t __read_chk(int fd, void *p, size_t n, size_t buflen);
ssize_t
__read_chk(int fd, void *p, size_t n, size_t buflen)
{
	struct call c;

	SETUP();
	call_begin(&c, F_READ);
	call_fd(&c, fd);
	call_num(&c, "n", (long)n, 0);
	RUN(c, real_read_chk(fd, p, n, buflen), 0);
}

/* fsync, fdatasync, close: int f(int fd). */
static int
fd_call(enum fn fn, int (*f)(int), int fd, int closes)
{
	struct call c;

	call_begin(&c, fn);
	call_fd(&c, fd);
	RUN(c, f(fd), closes);
}

int
fsync(int fd)
{
	SETUP();
	return fd_call(F_FSYNC, real_fsync, fd, 0);
}

int
fdatasync(int fd)
{
	SETUP();
	return fd_call(F_FDATASYNC, real_fdatasync, fd, 0);
}

int
close(int fd)
{
	SETUP();
	if (logfd >= 0 && fd == logfd)	/* a program closing every fd */
		return 0;
	return fd_call(F_CLOSE, real_close, fd, 1);
}

/* link, rename: int f(const char *old, const char *new). */
static int
two_path_call(enum fn fn, int (*f)(const char *, const char *), const char *a, const char *b)
{
	struct call c;

	call_begin(&c, fn);
	call_path(&c, "old", AT_FDCWD, a, c.path2);
	call_path(&c, "new", AT_FDCWD, b, c.path);
	RUN(c, f(a, b), 0);
}

int
link(const char *a, const char *b)
{
	SETUP();
	return two_path_call(F_LINK, real_link, a, b);
}

int
linkat(int da, const char *a, int db, const char *b, int flags)
{
	struct call c;

	SETUP();
	call_begin(&c, F_LINKAT);
	call_path(&c, "old", da, a, c.path2);
	call_path(&c, "new", db, b, c.path);
	call_num(&c, "flags", flags, 1);
	RUN(c, real_linkat(da, a, db, b, flags), 0);
}

int
rename(const char *a, const char *b)
{
	SETUP();
	return two_path_call(F_RENAME, real_rename, a, b);
}

int
renameat(int da, const char *a, int db, const char *b)
{
	struct call c;

	SETUP();
	call_begin(&c, F_RENAMEAT);
	call_path(&c, "old", da, a, c.path2);
	call_path(&c, "new", db, b, c.path);
	RUN(c, real_renameat(da, a, db, b), 0);
}

int
unlink(const char *a)
{
	struct call c;

	SETUP();
	call_begin(&c, F_UNLINK);
	call_path(&c, "path", AT_FDCWD, a, c.path);
	RUN(c, real_unlink(a), 0);
}

int
unlinkat(int d, const char *a, int flags)
{
	struct call c;

	SETUP();
	call_begin(&c, F_UNLINKAT);
	call_path(&c, "path", d, a, c.path);
	call_num(&c, "flags", flags, 1);
	RUN(c, real_unlinkat(d, a, flags), 0);
}

int
mkdir(const char *a, mode_t mode)
{
	struct call c;

	SETUP();
	call_begin(&c, F_MKDIR);
	call_path(&c, "path", AT_FDCWD, a, c.path);
	RUN(c, real_mkdir(a, mode), 0);
}

int
mkdirat(int d, const char *a, mode_t mode)
{
	struct call c;

	SETUP();
	call_begin(&c, F_MKDIRAT);
	call_path(&c, "path", d, a, c.path);
	RUN(c, real_mkdirat(d, a, mode), 0);
}

/* open and openat: the mode argument exists only with O_CREAT or
 * O_TMPFILE; only those calls are counted as open and openat, the others
 * as openr (logged under their own name). */
static int
creates(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

static int
do_open(enum fn fn, int dirfd, const char *path, int flags, mode_t mode, int at,
    int (*fopen_)(const char *, int, ...), int (*fopenat)(int, const char *, int, ...))
{
	struct call c;

	call_begin(&c, fn);
	call_path(&c, "path", at ? dirfd : AT_FDCWD, path, c.path);
	call_num(&c, "flags", flags, 1);
	if (!creates(flags)) {
		c.fn = F_OPENR;
		if (at)
			RUN(c, fopenat(dirfd, path, flags), 0);
		RUN(c, fopen_(path, flags), 0);
	}
	call_num(&c, "mode", (long)mode, 1);
	if (at)
		RUN(c, fopenat(dirfd, path, flags, mode), 0);
	RUN(c, fopen_(path, flags, mode), 0);
}

static mode_t
open_mode(int flags, va_list ap)
{
	return creates(flags) ? (mode_t)va_arg(ap, int) : 0;
}

int
open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	SETUP();
	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return do_open(F_OPEN, AT_FDCWD, path, flags, mode, 0, real_open, NULL);
}

int
openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	SETUP();
	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return do_open(F_OPENAT, dirfd, path, flags, mode, 1, NULL, real_openat);
}

/* On LP64 (amd64, arm64) the *64 functions are the plain ones. */
_Static_assert(sizeof(off_t) == 8, "faultinj assumes a 64-bit off_t");
int open64(const char *path, int flags, ...) __attribute__((alias("open")));
int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));
ssize_t pwrite64(int fd, const void *p, size_t n, off_t off) __attribute__((alias("pwrite")));

int
creat(const char *path, mode_t mode)
{
	struct call c;

	SETUP();
	call_begin(&c, F_OPEN);
	call_path(&c, "path", AT_FDCWD, path, c.path);
	call_num(&c, "flags", O_CREAT | O_WRONLY | O_TRUNC, 1);
	call_num(&c, "mode", (long)mode, 1);
	RUN(c, real_creat(path, mode), 0);
}
