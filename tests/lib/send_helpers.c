/* send_helpers.c: see send_helpers.h. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send_helpers.h"

void
sh_setup(struct sht *s, const char *extra_conf)
{
	struct buf conf = BUF_INIT;

	memset(s, 0, sizeof *s);
	buf_adds(&conf, "hostname = \"" SH_HOST "\"\nadmin = \"" SH_ADMIN "\"\n");
	/* Not this machine's /etc/aliases, unless the test names one. */
	if (extra_conf == NULL || strstr(extra_conf, "aliases_file") == NULL)
		buf_adds(&conf, "aliases_file = \"/dev/null\"\n");
	if (extra_conf)
		buf_adds(&conf, extra_conf);
	qt_setup(&s->qt, 23, conf.s);
	cr_assert(queue_open(&s->q, s->qt.qdir, 23) == 0, "queue_open %s: %s", s->qt.qdir,
	    strerror(errno));
	buf_free(&conf);
}

void
sh_teardown(struct sht *s)
{
	if (s->q.path)
		queue_close(&s->q);
	if (s->qt.tmp)
		qt_teardown(&s->qt);
	memset(s, 0, sizeof *s);
}

char *
sh_qpath(struct sht *s, enum qdir d, unsigned long id)
{
	char rel[QPATH_MAX];

	queue_path(rel, &s->q, d, id);
	return xasprintf("%s/%s", s->qt.qdir, rel);
}

int
sh_exists(struct sht *s, enum qdir d, unsigned long id)
{
	char *p = sh_qpath(s, d, id);
	struct stat st;
	int r = lstat(p, &st) == 0;

	free(p);
	return r;
}

void
sh_write(struct sht *s, enum qdir d, unsigned long id, const char *data, size_t len)
{
	char *p = sh_qpath(s, d, id);

	tl_write(p, data, len);
	free(p);
}

char *
sh_escape(const char *s, size_t n)
{
	struct buf b = BUF_INIT;
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\0')
			buf_adds(&b, "\\0");
		else if (c == '\n')
			buf_adds(&b, "\\n");
		else if (c == '\\')
			buf_adds(&b, "\\\\");
		else if (c < 0x20 || c >= 0x7f)
			buf_printf(&b, "\\x%02x", c);
		else
			buf_addc(&b, (char)c);
	}
	buf_addc(&b, '\0');
	return b.s;
}

void
sh_assert_bytes(const char *got, size_t glen, const char *want, size_t wlen, const char *what)
{
	size_t i;

	for (i = 0; i < glen && i < wlen && got[i] == want[i]; i++)
		;
	if (glen != wlen || i != wlen) {
		char *g = sh_escape(got ? got : "", got ? glen : 0), *w = sh_escape(want, wlen);

		cr_assert_fail("%s: %zu bytes, expected %zu; first difference at %zu\n"
		    "  got:  \"%s\"\n  want: \"%s\"", what, glen, wlen, i, g, w);
	}
}

void
sh_assert_file(struct sht *s, enum qdir d, unsigned long id, const char *want, size_t wlen)
{
	char *p = sh_qpath(s, d, id);
	struct buf b = BUF_INIT;

	cr_assert(access(p, F_OK) == 0, "%s does not exist", p);
	tl_read(p, &b);
	sh_assert_bytes(b.s, b.len, want, wlen, p);
	buf_free(&b);
	free(p);
}

void
sh_set_mtime(const char *path, time_t t)
{
	struct timespec ts[2] = { { t, 0 }, { t, 0 } };

	cr_assert(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) == 0, "utimensat %s: %s",
	    path, strerror(errno));
}

time_t
sh_mtime(const char *path)
{
	struct stat st;

	cr_assert(stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
	return st.st_mtime;
}

/* A pid/ file holding mess, linked as mess/S/N; returns N. */
unsigned long
sh_put_mess(struct sht *s, const char *mess, size_t mlen)
{
	char *pid = xasprintf("%s/pid/test.%ld", s->qt.qdir, (long)getpid()), *mp;
	struct stat st;
	unsigned long id;
	int fd = open(pid, O_WRONLY | O_CREAT | O_EXCL, 0644);

	cr_assert(fd >= 0, "create %s: %s", pid, strerror(errno));
	cr_assert(fstat(fd, &st) == 0);
	id = (unsigned long)st.st_ino;
	cr_assert(write(fd, mess, mlen) == (ssize_t)mlen);
	close(fd);
	mp = sh_qpath(s, Q_MESS, id);
	cr_assert(link(pid, mp) == 0, "link %s %s: %s", pid, mp, strerror(errno));
	cr_assert(unlink(pid) == 0);
	free(mp);
	free(pid);
	return id;
}

unsigned long
sh_put_s4(struct sht *s, const char *mess, size_t mlen, const char *todo, size_t tlen,
    int with_intd)
{
	unsigned long id = sh_put_mess(s, mess, mlen);
	char *intd = sh_qpath(s, Q_INTD, id), *todop = sh_qpath(s, Q_TODO, id);

	if (with_intd) {
		tl_write(intd, todo, tlen);
		cr_assert(link(intd, todop) == 0, "link %s: %s", todop, strerror(errno));
	} else {
		tl_write(todop, todo, tlen);
	}
	free(intd);
	free(todop);
	return id;
}

/* ---- weir-send in the background ---- */

void
shd_start(struct shd *d, struct sht *s, const char *const *env)
{
	char *bin = tl_bin("weir-send");
	pid_t parent = getpid();
	static unsigned runs;
	int fd;

	free(d->log);
	d->log = xasprintf("%s/weir-send.%u.log", s->qt.tmp, ++runs);
	fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "open %s: %s", d->log, strerror(errno));
	d->pid = fork();
	cr_assert(d->pid >= 0, "fork: %s", strerror(errno));
	if (d->pid == 0) {
		size_t i;

		/* Its own process group, so that teardown can kill it and
		 * every deliverer it started at once; and it dies with us. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		unsetenv("WEIR_QUEUE");
		unsetenv("WEIR_CONFIG");
		unsetenv("QMAILQUEUE");
		unsetenv("WEIR_REMOTE");
		for (i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		dup2(fd, 1);
		dup2(fd, 2);
		fd = open("/dev/null", O_RDONLY);
		dup2(fd, 0);
		if (d->wrap) {
			const char *argv[32];
			size_t k = 0;

			for (i = 0; d->wrap[i] && k < 28; i++)
				argv[k++] = d->wrap[i];
			argv[k++] = bin;
			argv[k++] = "-c";
			argv[k++] = s->qt.conf;
			argv[k] = NULL;
			execvp(argv[0], (char *const *)argv);
			_exit(127);
		}
		execl(bin, bin, "-c", s->qt.conf, (char *)NULL);
		_exit(127);
	}
	setpgid(d->pid, d->pid);
	close(fd);
	free(bin);
}

int
shd_exited(struct shd *d, int *status)
{
	pid_t r;

	if (d->pid <= 0)
		return 1;
	r = waitpid(d->pid, status, WNOHANG);
	if (r == d->pid) {
		d->pid = 0;
		return 1;
	}
	return 0;
}

void
shd_kill9(struct shd *d)
{
	int st;

	if (d->pid > 0) {
		kill(-d->pid, SIGKILL);
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
		d->pid = 0;
	}
}

void
shd_stop(struct shd *d)
{
	int st, i;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		for (i = 0; i < 500; i++) {
			if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
				d->pid = 0;
				break;
			}
			usleep(10000);
		}
	}
	/* Whatever is left of its group (a deliverer still running). */
	shd_kill9(d);
	free(d->log);
	d->log = NULL;
}

int
sh_wait_for(int (*cond)(void *), void *arg, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (cond(arg))
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return cond(arg);
		usleep(10000);
	}
}

char *
sh_listing(struct sht *s)
{
	struct buf b = BUF_INIT;
	char *cmd = xasprintf("cd '%s' && find . -type f ! -path './lock/*' -printf '%%p %%s\\n' "
	    "2>&1 | head -50", s->qt.qdir), line[256];
	FILE *f = popen(cmd, "r");

	while (f && fgets(line, sizeof line, f))
		buf_adds(&b, line);
	if (f)
		pclose(f);
	free(cmd);
	buf_addc(&b, '\0');
	return b.s;
}

int
sh_queue_check(struct sht *s, struct buf *out)
{
	return sh_weir(s, "queue-check", out);
}

int
sh_weir(struct sht *s, const char *cmd, struct buf *out)
{
	char *weir = tl_bin("weir");
	const char *argv[] = { weir, "-c", s->qt.conf, cmd, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	int code;

	tl_run(&run, &r);
	buf_reset(out);
	buf_add(out, r.out.s, r.out.len);
	buf_add(out, r.err.s, r.err.len);
	code = r.status;
	tl_result_free(&r);
	free(weir);
	return code;
}

void
sh_conf_append(struct sht *s, const char *text)
{
	struct buf b = BUF_INIT;

	tl_read(s->qt.conf, &b);
	buf_adds(&b, text);
	tl_write(s->qt.conf, b.s, b.len);
	buf_free(&b);
}

void
shd_start_gate(struct shd *g, struct sht *s, const char *sock)
{
	free(g->log);
	g->log = xasprintf("%s/gate.log", s->qt.tmp);
	g->pid = sh_gate_spawn(s->qt.conf, NULL, g->log, sock);
}

pid_t
sh_gate_spawn(const char *conf, const char *grace, const char *log, const char *sock)
{
	char *bin = tl_bin("weir-gate");
	pid_t parent = getpid(), pid;
	int fd, i, st;

	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "open %s: %s", log, strerror(errno));
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(fd, 1);
		dup2(fd, 2);
		fd = open("/dev/null", O_RDONLY);
		dup2(fd, 0);
		if (grace)
			execl(bin, bin, "-c", conf, "-g", grace, (char *)NULL);
		else
			execl(bin, bin, "-c", conf, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	close(fd);
	free(bin);
	for (i = 0; i < 500; i++) {
		if (tl_sock_answers(sock))
			return pid;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			struct buf b = BUF_INIT;

			tl_read(log, &b);
			cr_assert_fail("weir-gate exited (status 0x%x):\n%s", st, buf_cstr(&b));
		}
		usleep(10000);
	}
	kill(-pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	cr_assert_fail("weir-gate did not answer on %s", sock);
	return -1;
}
