/* testlib.c: see testlib.h. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "testlib.h"

char *
tl_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *t = xasprintf("%s/weir-test.XXXXXX", base && *base ? base : "/tmp");

	cr_assert(mkdtemp(t) != NULL, "mkdtemp: %s", strerror(errno));
	return t;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

void
tl_rmtree(const char *path)
{
	if (path)
		nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

char *
tl_bin(const char *name)
{
	const char *dir = getenv("WEIR_BIN");

	return xasprintf("%s/%s", dir && *dir ? dir : "build/bin", name);
}

char *
tl_src_path(const char *rel)
{
	const char *bin = getenv("WEIR_BIN");

	if (access(rel, F_OK) == 0)
		return xstrdup(rel);
	return xasprintf("%s/../../%s", bin && *bin ? bin : "build/bin", rel);
}

int
tl_make_certs(const char *dir)
{
	char *script = tl_src_path("tests/upstream/mkcerts.sh");
	char *cmd = xasprintf("sh '%s' '%s' >/dev/null 2>&1", script, dir);
	int r = system(cmd) == 0 ? 0 : -1;

	free(cmd);
	free(script);
	return r;
}

void
tl_certs_make_all(const char *tag)
{
	char *d = xasprintf("/tmp/weir-%s-certs.%ld", tag, (long)getpid());

	if (tl_make_certs(d) < 0) {
		fprintf(stderr, "%s: making the test certificates in %s failed\n", tag, d);
		exit(1);
	}
	setenv("WEIR_TEST_CERTS", d, 1);
	free(d);
}

const char *
tl_certs(void)
{
	const char *c = getenv("WEIR_TEST_CERTS");

	cr_assert(c && *c, "WEIR_TEST_CERTS unset: the PRE_ALL hook did not run");
	return c;
}

void
tl_certs_remove(void)
{
	const char *d = getenv("WEIR_TEST_CERTS");

	if (d && strncmp(d, "/tmp/weir-", 10) == 0 && strstr(d, "-certs."))
		tl_rmtree(d);
}

int
tl_is_root(void)
{
	return geteuid() == 0;
}

static void
drain(int fd, struct buf *b, int *open_flag)
{
	char chunk[8192];
	ssize_t r = read(fd, chunk, sizeof chunk);

	if (r > 0)
		buf_add(b, chunk, (size_t)r);
	else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
		close(fd);
		*open_flag = 0;
	}
}

void
tl_run(const struct tl_run *run, struct tl_result *r)
{
	int in[2], out[2], err[2];
	const char *inp = run->in, *envp = run->fd1in;
	size_t inleft = run->inlen, envleft = run->fd1len;
	int in_open = 1, out_open = 1, err_open = 1, status, i;
	time_t deadline = time(NULL) + (run->timeout_s ? run->timeout_s : 30);
	pid_t pid;

	memset(r, 0, sizeof *r);
	cr_assert(pipe(in) == 0 && pipe(out) == 0 && pipe(err) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* fd 1 is either the envelope pipe (read end) or stdout. */
		dup2(in[0], 0);
		dup2(run->fd1in ? out[0] : out[1], 1);
		dup2(err[1], 2);
		for (i = 3; i < 64; i++)
			close(i);
		for (i = 0; run->env && run->env[i]; i++)
			putenv((char *)run->env[i]);
		execv(run->argv[0], (char *const *)run->argv);
		_exit(127);
	}
	close(in[0]); close(out[run->fd1in ? 0 : 1]); close(err[1]);
	signal(SIGPIPE, SIG_IGN);
	if (fd_nonblock(in[1], 1) < 0 || fd_nonblock(out[run->fd1in ? 1 : 0], 1) < 0 ||
	    fd_nonblock(err[0], 1) < 0)
		cr_assert_fail("fcntl");
	if (inleft == 0 && !run->close_in_early) {
		close(in[1]);
		in_open = 0;
	}
	if (run->fd1in && envleft == 0) {
		close(out[1]);
		out_open = 0;
	}
	while (out_open || err_open || (in_open && !run->close_in_early)) {
		struct pollfd p[3];
		int n = 0, outfd = run->fd1in ? out[1] : out[0];

		if (time(NULL) > deadline) {
			kill(pid, SIGKILL);
			break;
		}
		if (in_open && inleft > 0)
			p[n++] = (struct pollfd){ in[1], POLLOUT, 0 };
		if (out_open)
			p[n++] = (struct pollfd){ outfd, run->fd1in ? POLLOUT : POLLIN, 0 };
		if (err_open)
			p[n++] = (struct pollfd){ err[0], POLLIN, 0 };
		if (n == 0)
			break;
		if (poll(p, (nfds_t)n, 200) < 0 && errno != EINTR)
			cr_assert_fail("poll: %s", strerror(errno));
		for (i = 0; i < n; i++) {
			if (!p[i].revents)
				continue;
			if (p[i].fd == in[1]) {
				ssize_t w = write(in[1], inp, inleft);
				if (w > 0) {
					inp += w;
					inleft -= (size_t)w;
				}
				if (w < 0 && errno != EAGAIN && errno != EINTR)
					inleft = 0;
				if (inleft == 0 && !run->close_in_early) {
					close(in[1]);
					in_open = 0;
				}
			} else if (p[i].fd == outfd && run->fd1in) {
				ssize_t w = write(out[1], envp, envleft);
				if (w > 0) {
					envp += w;
					envleft -= (size_t)w;
				}
				if (w < 0 && errno != EAGAIN && errno != EINTR)
					envleft = 0;
				if (envleft == 0) {
					close(out[1]);
					out_open = 0;
				}
			} else if (p[i].fd == outfd) {
				drain(out[0], &r->out, &out_open);
			} else {
				drain(err[0], &r->err, &err_open);
			}
		}
	}
	if (in_open)
		close(in[1]);
	if (out_open)
		close(run->fd1in ? out[1] : out[0]);
	if (err_open)
		close(err[0]);
	while (waitpid(pid, &status, 0) < 0)
		cr_assert(errno == EINTR, "waitpid: %s", strerror(errno));
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void
tl_result_free(struct tl_result *r)
{
	buf_free(&r->out);
	buf_free(&r->err);
}

void
tl_read(const char *path, struct buf *b)
{
	cr_assert(read_file_at(AT_FDCWD, path, b, 1 << 30) == 0, "read %s: %s", path,
	    strerror(errno));
}

void
tl_write(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	cr_assert(full_write(fd, data, len) == 0);
	cr_assert(close(fd) == 0);
}

static int nfiles;

pid_t
tl_spawn(const char *prog, const char *conf, const char *const *args, const char *log)
{
	char *bin = tl_bin(prog), *dir = xstrdup(bin);
	const char *argv[16] = { bin, "-c", conf };
	pid_t parent = getpid(), pid;
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644), n = 3;

	cr_assert(fd >= 0, "open %s: %s", log, strerror(errno));
	while (args && *args) {
		cr_assert(n < 15, "tl_spawn: too many arguments");
		argv[n++] = *args++;
	}
	argv[n] = NULL;
	*strrchr(dir, '/') = '\0';
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || setenv("WEIR_LIBEXEC", dir, 1) < 0 ||
		    dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	setpgid(pid, pid);	/* the child does too: whoever is first */
	close(fd);
	free(bin);
	free(dir);
	return pid;
}

size_t
tl_count(const char *hay, const char *needle)
{
	size_t n = 0;

	while (hay && (hay = strstr(hay, needle)) != NULL) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

static int
count_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path; (void)ftw;
	if (flag == FTW_F && S_ISREG(st->st_mode))
		nfiles++;
	return 0;
}

int
tl_count_files(const char *dir)
{
	nfiles = 0;
	nftw(dir, count_one, 32, FTW_PHYS);
	return nfiles;
}

pid_t
tl_upstream_start(const char *const *args, const char *log, unsigned *port)
{
	const char *argv[72];
	char *script = tl_src_path("tests/upstream/upstream.py"), line[128];
	pid_t pid;
	int n = 0;

	argv[n++] = "/usr/bin/python3";
	argv[n++] = script;
	for (; *args; args++) {
		cr_assert(n < 71, "too many upstream arguments");
		argv[n++] = *args;
	}
	argv[n] = NULL;
	pid = tl_upstream_spawn(argv, log, port, line, sizeof line);
	cr_assert(pid > 0, "cannot start the upstream: %s", strerror(errno));
	free(script);
	if (*port == 0) {
		struct buf b = BUF_INIT;

		if (access(log, F_OK) == 0)
			tl_read(log, &b);
		cr_assert_fail("upstream did not start: [%s]\n%s", line, buf_cstr(&b));
	}
	return pid;
}

pid_t
tl_start_listening(const char *const *argv, const char *log, const char *sock, unsigned port)
{
	pid_t pid, parent = getpid();
	int i, st, fd;

	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (i = 0; i < 1000; i++) {
		if (sock ? tl_sock_answers(sock) : tl_port_answers(port))
			return pid;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			struct buf b = BUF_INIT;

			tl_read(log, &b);
			cr_assert_fail("%s exited before it answered: %s", argv[0], buf_cstr(&b));
		}
		poll(NULL, 0, 10);
	}
	cr_assert_fail("%s does not answer after 10 s", argv[0]);
	return -1;
}

pid_t
tl_redis_start(const char *dir, const char *sock)
{
	char *log = xasprintf("%s/redis.log", dir);
	const char *argv[] = { "redis-server", "--port", "0", "--unixsocket", sock,
		"--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir, NULL };
	pid_t pid;

	unlink(sock);
	pid = tl_start_listening(argv, log, sock, 0);
	free(log);
	return pid;
}

pid_t
tl_redis_start_tcp(const char *dir, unsigned port, const char *const *extra)
{
	const char *argv[40] = { "redis-server", "--bind", "127.0.0.1", "--port", NULL,
		"--save", "", "--appendonly", "no", "--dir", dir };
	char p[16], *log;
	size_t n = 11;
	pid_t pid;

	snprintf(p, sizeof p, "%u", port);
	argv[4] = p;
	while (extra && *extra) {
		cr_assert(n < sizeof argv / sizeof argv[0] - 1, "too many arguments");
		argv[n++] = *extra++;
	}
	argv[n] = NULL;
	log = xasprintf("%s/redis-%u.log", dir, port);
	pid = tl_start_listening(argv, log, NULL, port);
	free(log);
	return pid;
}

unsigned
tl_free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unsigned p;

	cr_assert(fd >= 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	p = ntohs(sa.sin_port);
	close(fd);
	return p;
}

void
tl_redis_up(struct tl_redis *r)
{
	memset(r, 0, sizeof *r);
	r->dir = tl_tmpdir();
	r->sock = xasprintf("%s/redis.sock", r->dir);
	r->spec = xasprintf("unix:%s", r->sock);
	r->pid = tl_redis_start(r->dir, r->sock);
	r->c = redisConnectUnix(r->sock);
	cr_assert(r->c != NULL && !r->c->err, "redis: %s", r->c ? r->c->errstr : "no memory");
}

void
tl_redis_down(struct tl_redis *r)
{
	int st;

	if (r->c)
		redisFree(r->c);
	if (r->pid > 0) {
		kill(r->pid, SIGKILL);
		while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	if (r->dir)
		tl_rmtree(r->dir);
	free(r->dir);
	free(r->sock);
	free(r->spec);
	memset(r, 0, sizeof *r);
}

void
tl_redis_cmd(struct tl_redis *r, const char *fmt, ...)
{
	redisReply *rep;
	va_list ap;

	va_start(ap, fmt);
	rep = redisvCommand(r->c, fmt, ap);
	va_end(ap);
	cr_assert(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s: %s", fmt,
	    rep ? rep->str : r->c->errstr);
	freeReplyObject(rep);
}

/* The value of "key:" in INFO's text. */
static char *
info_field(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	cr_assert(p != NULL && p[strlen(key)] == ':', "INFO has no %s", key);
	p += strlen(key) + 1;
	return xstrndup(p, strcspn(p, "\r\n"));
}

void
tl_redis_whole(struct tl_redis *r, const char *up, const char *host)
{
	redisReply *rep = redisCommand(r->c, "INFO server replication");
	char *run, *repl;

	cr_assert(rep != NULL && rep->type == REDIS_REPLY_STRING, "INFO");
	run = info_field(rep->str, "\nrun_id");
	repl = info_field(rep->str, "\nmaster_replid");
	freeReplyObject(rep);
	tl_redis_cmd(r, "SET weir:{%s}:gen %s:%s", up, run, repl);
	tl_redis_cmd(r, "HSET weir:{%s}:built %s 1", up, host);
	free(run);
	free(repl);
}

int
tl_gate_reply(struct gate_client *gc, struct gp_reply *r, int ms)
{
	struct pollfd p = { gc->fd, POLLIN, 0 };
	const char *why;
	int rc;

	for (;;) {
		rc = gc_next_reply(gc, r, &why);
		cr_assert(rc >= 0, "protocol: %s", why);
		if (rc == 1)
			return 1;
		rc = poll(&p, 1, ms);
		cr_assert(rc >= 0);
		if (rc == 0)
			return 0;
		cr_assert_eq(gc_fill(gc), 1, "the gate closed");
	}
}

char *
tl_gate_status(const char *conf, const char *sock, int json)
{
	char *bin = tl_bin("weir-gate"), *out;
	const char *argv[] = { bin, "-c", conf, "-s", sock, "status", json ? "json" : NULL, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result res;

	tl_run(&run, &res);
	cr_assert_eq(res.status, 0, "weir-gate status: exit %d: %s", res.status,
	    buf_cstr(&res.err));
	out = xstrdup(buf_cstr(&res.out));
	tl_result_free(&res);
	free(bin);
	return out;
}

int
tl_idle_after(const char *log, const char *after, size_t n, const char *state)
{
	const char *p = log;
	char *want;
	int r;

	for (; n > 0; n--) {
		if ((p = strstr(p, after)) == NULL)
			return 0;
		p += strlen(after);
	}
	want = xasprintf("]: debug: idle: %s", state);
	r = strstr(p, want) != NULL;
	free(want);
	return r;
}
