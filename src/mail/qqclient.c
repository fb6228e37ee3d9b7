/*
 * qqclient.c: see qqclient.h.  The connection to weir-queued that
 * carried the last message queued is kept (kept, kept_path) and carries
 * the next one (qwproto.h: after a K the next message may follow), so
 * that a process queueing one message after another (weir-smtpd's
 * session processes) costs weir-queued no accept per message, and the
 * messages of several such processes reach it on connections it is
 * already reading, ready for one group commit.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/io.h"
#include "lib/log.h"
#include "mail/qqcode.h"
#include "mail/libexec.h"
#include "mail/qqclient.h"
#include "mail/qwproto.h"

#define QQ_CHUNK 65536

const char *
qq_program(void)
{
	static char *path;
	const char *p = getenv("QMAILQUEUE");

	if (p && *p)
		return p;
	if (path == NULL)
		path = libexec_path("weir-queue");
	return path;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);	/* a pipe: nothing to lose on close */
	*fd = -1;
}

int
qq_start(struct qq_child *c, const char *prog, struct buf *why)
{
	int msg[2] = { -1, -1 }, env[2] = { -1, -1 }, st[2] = { -1, -1 }, id[2] = { -1, -1 };
	int err = 0;
	char idv[16];
	const char *base = strrchr(prog, '/');
	char *argv[2];
	ssize_t r;

	memset(c, 0, sizeof *c);
	c->msgfd = c->envfd = c->idfd = c->sock = -1;
	c->pid = -1;
	if (pipe2(msg, O_CLOEXEC) < 0 || pipe2(env, O_CLOEXEC) < 0 ||
	    pipe2(st, O_CLOEXEC) < 0 || pipe2(id, O_CLOEXEC) < 0) {
		buf_printf(why, "cannot make a pipe: %s", strerror(errno));
		goto fail;
	}
	snprintf(idv, sizeof idv, "%d", id[1]);
	c->pid = fork();
	if (c->pid < 0) {
		buf_printf(why, "cannot fork: %s", strerror(errno));
		goto fail;
	}
	if (c->pid == 0) {
		/* fds 0-2 are open (sm_stdfds), so the pipes are all >= 3. */
		if (dup2(msg[0], 0) < 0 || dup2(env[0], 1) < 0 || fcntl(id[1], F_SETFD, 0) < 0)
			err = errno;
		if (err == 0 && setenv("WEIR_QUEUE_IDFD", idv, 1) < 0)
			err = errno;
		signal(SIGPIPE, SIG_DFL);
		argv[0] = (char *)(base ? base + 1 : prog);
		argv[1] = NULL;
		if (err == 0) {
			execv(prog, argv);
			err = errno;
		}
		/* Tell the parent why; it reports. */
		if (write(st[1], &err, sizeof err) < 0)
			_exit(127);
		_exit(127);
	}
	close_fd(&msg[0]);
	close_fd(&env[0]);
	close_fd(&st[1]);
	close_fd(&id[1]);
	c->msgfd = msg[1];
	c->envfd = env[1];
	c->idfd = id[0];
	/* The status pipe closes on a successful exec: EOF means it runs. */
	do
		r = read(st[0], &err, sizeof err);
	while (r < 0 && errno == EINTR);
	close_fd(&st[0]);
	if (r > 0) {
		buf_printf(why, "cannot run %s: %s", prog, strerror(err));
		qq_abort(c);
		return -1;
	}
	return 0;
fail:
	close_fd(&msg[0]); close_fd(&msg[1]);
	close_fd(&env[0]); close_fd(&env[1]);
	close_fd(&st[0]); close_fd(&st[1]);
	close_fd(&id[0]); close_fd(&id[1]);
	return -1;
}

const char *
qq_socket_path(const char *sock)
{
	const char *p = getenv("QMAILQUEUE");

	return p && *p ? NULL : sock;
}

/* The connection kept after a K, to the socket at kept_path; -1: none. */
static int kept = -1;
static char kept_path[sizeof ((struct sockaddr_un *)0)->sun_path];

/* The kept connection to sock if it is still good: the writer says
 * nothing between messages, so anything readable (its end of file) means
 * it is gone. */
static int
take_kept(const char *sock)
{
	struct pollfd p = { kept, POLLIN, 0 };
	int fd = kept;

	if (fd < 0)
		return -1;
	kept = -1;
	if (strcmp(kept_path, sock) == 0 && poll(&p, 1, 0) == 0)
		return fd;
	(void)close(fd);	/* between messages: nothing to lose */
	return -1;
}

int
qq_start_any(struct qq_child *c, const char *sock, const char *prog, struct buf *why)
{
	struct sockaddr_un sa;

	if (sock == NULL || strlen(sock) >= sizeof sa.sun_path)
		return qq_start(c, prog, why);
	memset(c, 0, sizeof *c);
	c->msgfd = c->envfd = c->idfd = -1;
	c->pid = -1;
	if ((c->sock = take_kept(sock)) >= 0)
		return 0;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, sock, strlen(sock));
	c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->sock >= 0 && connect(c->sock, (struct sockaddr *)&sa, sizeof sa) == 0) {
		snprintf(kept_path, sizeof kept_path, "%s", sock);
		return 0;
	}
	/* Not running, or not reachable: weir-queue does the same job. */
	log_debug("weir-queued at %s: %s; running %s", sock, strerror(errno), prog);
	if (c->sock >= 0)
		(void)close(c->sock);	/* never used: nothing to lose */
	return qq_start(c, prog, why);
}

/* Records of type for p[0..n) to the writer (qwproto.h). */
static void
send_records(struct qq_child *c, char type, const char *p, size_t n)
{
	struct buf rec = BUF_INIT;
	size_t k;

	while (n > 0 && c->werr == 0) {
		k = n < QW_CHUNK_MAX ? n : QW_CHUNK_MAX;
		buf_reset(&rec);
		qw_hdr_put(&rec, type, k);
		buf_add(&rec, p, k);
		if (full_write(c->sock, rec.s, rec.len) < 0)
			c->werr = errno ? errno : EIO;
		p += k;
		n -= k;
	}
	buf_free(&rec);
}

static void
flush(struct qq_child *c)
{
	if (c->out.len > 0 && c->werr == 0) {
		if (c->sock >= 0)
			send_records(c, 'M', c->out.s, c->out.len);
		else if (full_write(c->msgfd, c->out.s, c->out.len) < 0)
			c->werr = errno ? errno : EIO;
	}
	buf_reset(&c->out);
}

/* The writer's one reply line: its code, the id into c->id. */
static int
sock_reply(struct qq_child *c, struct buf *why)
{
	char b[QW_REPLY_MAX];
	size_t n = 0, len;
	ssize_t r;
	int code, p = 0;

	while (n < sizeof b && (p = qw_reply_parse(b, n, &code, c->id, &len)) == 0) {
		r = read(c->sock, b + n, sizeof b - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			buf_printf(why, "weir-queued: the connection %s before its answer%s%s "
			    "(temporary)", r == 0 ? "ended" : "failed", c->werr ? ": " : "",
			    c->werr ? strerror(c->werr) : "");
			return QQ_BUG;
		}
		n += (size_t)r;
	}
	if (p != 1 || len != n) {
		buf_printf(why, "weir-queued: a malformed answer (temporary)");
		return QQ_BUG;
	}
	if (code != 0)
		buf_printf(why, "weir-queued: %s", qq_describe(code));
	return code;
}

void
qq_put(struct qq_child *c, const void *p, size_t n)
{
	buf_add(&c->out, p, n);
	if (c->out.len >= QQ_CHUNK)
		flush(c);
}

void
qq_putc(struct qq_child *c, char ch)
{
	if (c->out.len + 1 >= c->out.cap)
		buf_reserve(&c->out, QQ_CHUNK);
	c->out.s[c->out.len++] = ch;	/* buf_reserve keeps room for the NUL */
	c->out.s[c->out.len] = '\0';
	if (c->out.len >= QQ_CHUNK)
		flush(c);
}

static int
reap(struct qq_child *c, int *status)
{
	pid_t r;

	do
		r = waitpid(c->pid, status, 0);
	while (r < 0 && errno == EINTR);
	c->pid = -1;
	return r < 0 ? -1 : 0;
}

/* The id weir-queue wrote (it has exited: the read ends), kept only
 * when it is one (queue_parse_msgid) and a newline. */
static void
read_id(struct qq_child *c)
{
	char b[sizeof c->id + 1];
	size_t n = 0;
	ssize_t r;
	unsigned long id;
	struct timespec t;

	c->id[0] = '\0';
	while (n < sizeof b) {
		r = read(c->idfd, b + n, sizeof b - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (n < 2 || n >= sizeof b || b[n - 1] != '\n')
		return;
	b[n - 1] = '\0';
	if (queue_parse_msgid(b, &id, &t) == 0)
		memcpy(c->id, b, n);
}

int
qq_finish(struct qq_child *c, const char *sender, char *const *rcpt, size_t nrcpt,
    struct buf *why)
{
	struct buf env = BUF_INIT;
	size_t i;
	int status, code;

	flush(c);
	buf_free(&c->out);
	close_fd(&c->msgfd);
	if (c->werr == 0) {
		buf_addc(&env, 'F');
		buf_adds(&env, sender);
		buf_addc(&env, '\0');
		for (i = 0; i < nrcpt; i++) {
			buf_addc(&env, 'T');
			buf_adds(&env, rcpt[i]);
			buf_addc(&env, '\0');
		}
		buf_addc(&env, '\0');
		if (c->sock >= 0)
			send_records(c, 'E', env.s, env.len);
		else if (full_write(c->envfd, env.s, env.len) < 0)
			c->werr = errno;
		buf_free(&env);
	}
	if (c->sock >= 0) {
		code = sock_reply(c, why);
		if (code == 0 && c->werr == 0 && kept < 0) {
			kept = c->sock;		/* for the next message */
			c->sock = -1;
		}
		close_fd(&c->sock);
		return code;
	}
	close_fd(&c->envfd);
	if (reap(c, &status) < 0) {
		buf_printf(why, "weir-queue: cannot wait for it: %s", strerror(errno));
		return QQ_BUG;
	}
	if (WIFSIGNALED(status)) {
		buf_printf(why, "weir-queue: killed by signal %d (temporary)", WTERMSIG(status));
		return QQ_BUG;
	}
	code = WIFEXITED(status) ? WEXITSTATUS(status) : QQ_BUG;
	if (code == 0)
		read_id(c);
	close_fd(&c->idfd);
	if (code != 0)
		buf_printf(why, "weir-queue: %s", qq_describe(code));
	return code;
}

void
qq_abort(struct qq_child *c)
{
	int status;

	close_fd(&c->sock);	/* the writer cancels what it has */
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		close_fd(&c->msgfd);
		close_fd(&c->envfd);
		(void)reap(c, &status);
	}
	close_fd(&c->msgfd);
	close_fd(&c->envfd);
	close_fd(&c->idfd);
	buf_free(&c->out);
}

void
qq_cancel(struct qq_child *c)
{
	int status;

	buf_free(&c->out);
	close_fd(&c->sock);
	close_fd(&c->msgfd);
	close_fd(&c->envfd);
	if (c->pid > 0)
		(void)reap(c, &status);
	close_fd(&c->idfd);
}
