/*
 * workload.c: the representative run the crash-replay harness records.
 * A scratch queue (split CR_SPLIT) under a fresh root, a real weir-gate
 * (journal in root/gate), a real weir-send delivering through a scripted
 * qmail-remote(8) compatible deliverer, and nine messages: six injected
 * before weir-send starts (four with weir-queue, one of them of 120 KB,
 * one with sendmail, one of 115 KB over SMTP to the real weir-smtpd),
 * three while it runs (one each way); sendmail and weir-smtpd hand their
 * messages to the real weir-queued (queue_socket; recorded too), so its
 * group commit is replayed as weir-queue's steps are; every body has a lone dot line
 * and lines that begin with a dot (SMTP's dot-stuffing, in and out).
 * Two injections are killed halfway and must never become deliverable:
 * a weir-queue killed (SIGKILL) halfway through its message, and an SMTP
 * client that hangs up in the middle of DATA (210 KB, three quarters
 * sent) once weir-smtpd's weir-queue has written some of it.
 * Recipients "bad*" fail permanently (bounce notes, then bounces, which
 * are delivered in turn), "slow*" are deferred (the retry is minutes
 * away: those messages stay queued), the others are delivered; the
 * policy's max_recipients = 2 splits a message into several
 * transactions.  weir-gate is restarted (each start compacts its
 * journal: the live sends to a new file) once weir-send has four
 * confirmations, before the three later injections, and again at the
 * end, when every expected confirmation came and only the two messages
 * with a deferred recipient (and the killed weir-queue's file) are left.
 * With -r (race), m1 goes first and its weir-queue is held between its
 * todo/ link and its fsync of todo/ while weir-send starts and takes the
 * entry (inject_race()).
 *
 * The recorded programs run with the recorder preloaded; the harness
 * itself adds the promises it sees: "Q" when an injection exits 0 (after
 * waitpid), or when weir-smtpd answers 250 to the final dot, and the
 * deliverer adds "Y" for each recipient it accepted (r) or refused for
 * good (h), before it tells weir-send.  The scripted deliverer is what
 * makes those confirmations part of the ordered log; the delivery of
 * recovered states (wl_deliver) uses the real weir-remote instead, to
 * the stand-in upstream tests/upstream/upstream.py.
 *
 * Trusts: the scratch folder it made.  Test code only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "lib/buf.h"
#include "lib/io.h"
#include "crash.h"
#include "testlib.h"

#define WAIT_MS 120000		/* for the whole delivery phase */
#define EXPECT_CONFIRMED 17	/* see msgs[] and the two bounces */
#define EXPECT_LEFT 3		/* two with a "slow" recipient, the killed one */

enum { BY_QUEUE, BY_SENDMAIL, BY_SMTP };	/* how a message is injected */

struct msgspec {
	const char *id, *sender, *rcpts[4];
	int by;
	size_t lines;		/* of the body; 0: 12 */
};

static const struct msgspec before[] = {
	{ "m1", "a@src.example", { "ok1@dst.example" }, BY_QUEUE, 0 },
	{ "m2", "b@src.example", { "ok2@dst.example", "bad2@dst.example", "ok3@dst.example" }, BY_QUEUE, 0 },
	{ "m3", "c@src.example", { "ok4@dst.example", "slow3@dst.example" }, BY_QUEUE, 0 },
	{ "m4", "d@src.example", { "bad4@dst.example", "slow4@dst.example" }, BY_SENDMAIL, 0 },
	{ "m7", "g@src.example", { "ok9@dst.example" }, BY_QUEUE, 1600 },	/* 120 KB */
	{ "m8", "i@src.example", { "ok10@dst.example", "ok11@dst.example" }, BY_SMTP, 1700 },	/* 115 KB */
};
/* Killed halfway: never acknowledged, never to be delivered. */
static const struct msgspec killed = { "k1", "h@src.example", { "gone@dst.example" }, BY_QUEUE, 1800 };
static const struct msgspec hungup = { "k2", "j@src.example", { "gone2@dst.example" }, BY_SMTP, 3000 };
static const struct msgspec during[] = {
	{ "m5", "e@src.example", { "ok5@dst.example" }, BY_QUEUE, 0 },
	{ "m6", "f@src.example", { "ok6@dst.example", "ok7@dst.example", "ok8@dst.example" }, BY_SENDMAIL, 0 },
	{ "m9", "k@src.example", { "ok12@dst.example", "ok13@dst.example" }, BY_SMTP, 0 },
};

static pid_t send_pid, gate_run, upstream_pid, queued_pid;

static const char deliverer_py[] =
    "#!/usr/bin/python3\n"
    "# qmail-remote(8) stand-in for the crash-replay harness: logs each\n"
    "# recipient it accepts or refuses for good before it says so.\n"
    "import os, sys\n"
    "LOG = %s\n"
    "def fnv(b):\n"
    "    h = 0xcbf29ce484222325\n"
    "    for c in b:\n"
    "        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff\n"
    "    return h\n"
    TL_PY_REMOTE_ARGS
    "msg = sys.stdin.buffer.read()\n"
    "host, sender, rcpts = a[0], a[1], a[2:]\n"
    "k = '-'\n"
    "for line in msg.split(b'\\n\\n', 1)[0].split(b'\\n'):\n"
    "    if line.startswith(b'X-Crash-Id: '):\n"
    "        k = line[12:].decode()\n"
    "h = '%%016x' %% fnv(msg)\n"
    "with open(os.path.join(os.path.dirname(LOG), 'etc', 'delivered', h), 'wb') as f:\n"
    "    f.write(msg)\n"
    "out = sys.stdout.buffer\n"
    "n = 0\n"
    "for r in rcpts:\n"
    "    if 'slow' in r:\n"
    "        out.write(b's127.0.0.1 does not like recipient.\\nRemote host said: 451 4.2.1 try later\\0')\n"
    "        continue\n"
    "    code = 'h' if 'bad' in r else 'r'\n"
    "    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND)\n"
    "    os.write(fd, ('%%d Y %%s %%s %%s %%s\\n' %% (os.getpid(), h, k, r, code)).encode())\n"
    "    os.close(fd)\n"
    "    if code == 'h':\n"
    "        out.write(b'h127.0.0.1 does not like recipient.\\nRemote host said: 550 5.1.1 <' + r.encode() + b'>: no such user\\0')\n"
    "    else:\n"
    "        out.write(b'r\\0')\n"
    "        n += 1\n"
    "out.write(b'K127.0.0.1 accepted message.\\nRemote host said: 250 ok\\0' if n else b'DGiving up on 127.0.0.1\\0')\n"
    "out.flush()\n"
    "if ocfd >= 0:\n"
    "    os.write(ocfd, ('sent %%d\\n' %% n).encode())\n";

void
cr_die(const char *fmt, ...)
{
	va_list ap;

	fputs("crashreplay: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

uint64_t
cr_hash(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n--)
		h = (h ^ *s++) * 0x100000001b3ULL;
	return h;
}

const char *
cr_body(const char *m, size_t n, size_t *blen)
{
	const char *e = memmem(m, n, "\n\n", 2);

	if (e == NULL) {
		*blen = 0;
		return m + n;
	}
	*blen = n - (size_t)(e + 2 - m);
	return e + 2;
}

static void
write_file(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd) < 0)
		cr_die("write %s: %s", path, strerror(errno));
}

static void
append_log(const struct workload *w, const char *line)
{
	int fd = open(w->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line) || close(fd) < 0)
		cr_die("append to %s: %s", w->log, strerror(errno));
}

/* Fork and exec argv with fds 0 and 1 from files (NULL: /dev/null) and
 * stderr appended to errlog; in its own process group if group. */
static pid_t
spawn(const char *const *argv, const char *in0, const char *in1, const char *errlog, int group)
{
	pid_t pid = fork();

	if (pid < 0)
		cr_die("fork: %s", strerror(errno));
	if (pid == 0) {
		int e = open(errlog, O_WRONLY | O_APPEND | O_CREAT, 0644);
		int a = open(in0 ? in0 : "/dev/null", O_RDONLY);
		int b = in1 ? open(in1, O_RDONLY) : e;

		if (group) {
			/* Its own group, stopped as one; and it dies with us. */
			setpgid(0, 0);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
		}
		if (e < 0 || a < 0 || b < 0 || dup2(a, 0) < 0 || dup2(b, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (group)
		setpgid(pid, pid);
	return pid;
}

static int
wait_exit(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			cr_die("waitpid: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* SIGTERM to the group, up to 5 s, then SIGKILL. */
static void
stop_group(pid_t *pid)
{
	int i, st;

	if (*pid <= 0)
		return;
	kill(-*pid, SIGTERM);
	for (i = 0; i < 500; i++) {
		if (waitpid(*pid, &st, WNOHANG) == *pid)
			break;
		usleep(10000);
	}
	kill(-*pid, SIGKILL);
	if (i == 500)
		waitpid(*pid, &st, 0);
	*pid = 0;
}

static void
stop_all(void)
{
	stop_group(&send_pid);
	stop_group(&gate_run);
	stop_group(&upstream_pid);
	stop_group(&queued_pid);
}

void
wl_setup(struct workload *w)
{
	const char *tmp = getenv("TMPDIR");
	char *t = xasprintf("%s/weir-crash.XXXXXX", tmp && *tmp ? tmp : "/tmp"), real[PATH_MAX];
	struct buf b = BUF_INIT;
	char *p, *q;
	const char *argv[6];
	int code;

	if (atexit(stop_all) != 0)
		cr_die("atexit failed");
	if (mkdtemp(t) == NULL || realpath(t, real) == NULL)
		cr_die("mkdtemp %s: %s", t, strerror(errno));
	free(t);
	w->root = xstrdup(real);
	w->log = xasprintf("%s/rec.log", w->root);
	w->conf = xasprintf("%s/etc/weir.conf", w->root);
	for (code = 0; code < 4; code++) {
		static const char *const sub[] = { "etc", "etc/delivered", "gate", "run" };

		p = xasprintf("%s/%s", w->root, sub[code]);
		if (mkdir(p, 0755) < 0)
			cr_die("mkdir %s: %s", p, strerror(errno));
		free(p);
	}
	buf_printf(&b, "queue_dir = \"%s/queue\"\nqueue_split = %d\nhostname = \"%s\"\n"
	    "admin = \"%s\"\nconcurrency = 2\ngate_socket = \"%s/run/gate.sock\"\n"
	    "policy_file = \"%s/etc/policy.conf\"\ngate_journal = \"%s/gate/gate.journal\"\n"
	    "queue_socket = \"%s/run/queued.sock\"\n"
	    "upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n}\n",
	    w->root, CR_SPLIT, CR_HOST, CR_ADMIN, w->root, w->root, w->root, w->root);
	write_file(w->conf, b.s, b.len, 0644);
	buf_reset(&b);
	buf_adds(&b, "upstream \"up1\" { rate = \"100000 per 1d\" max_recipients = 2 }\n");
	p = xasprintf("%s/etc/policy.conf", w->root);
	write_file(p, b.s, b.len, 0644);
	free(p);
	buf_reset(&b);
	q = xasprintf("'%s'", w->log);
	buf_printf(&b, deliverer_py, q);
	free(q);
	p = xasprintf("%s/etc/deliver.py", w->root);
	write_file(p, b.s, b.len, 0755);
	buf_free(&b);
	write_file(w->log, "", 0, 0644);

	if (setenv("WEIR_CONFIG", w->conf, 1) < 0 || unsetenv("WEIR_QUEUE") < 0 ||
	    setenv("WEIR_REMOTE", p, 1) < 0)
		cr_die("setenv: %s", strerror(errno));
	free(p);
	/* The built programs (weir-queue when weir-queued is not reached,
	 * and for bounces); no QMAILQUEUE, which would bypass weir-queued. */
	if (setenv("WEIR_LIBEXEC", w->bindir, 1) < 0 || unsetenv("QMAILQUEUE") < 0)
		cr_die("setenv: %s", strerror(errno));

	p = xasprintf("%s/weir", w->bindir);
	q = xasprintf("%s/setup.log", w->root);
	argv[0] = p;
	argv[1] = "-c";
	argv[2] = w->conf;
	argv[3] = "queue-init";
	argv[4] = NULL;
	if ((code = wait_exit(spawn(argv, NULL, NULL, q, 0))) != 0)
		cr_die("weir queue-init exited %d (see %s)", code, q);
	free(p);
	free(q);
}

/* From now on the programs we start record. */
static void
record_from_here(const struct workload *w)
{
	if (setenv("LD_PRELOAD", w->recorder, 1) < 0 || setenv("WEIR_REC_LOG", w->log, 1) < 0 ||
	    setenv("WEIR_REC_ROOT", w->root, 1) < 0 || setenv("WEIR_REC_DIRS", "queue:gate", 1) < 0)
		cr_die("setenv: %s", strerror(errno));
	if (w->skip && setenv("WEIR_REC_SKIP", w->skip, 1) < 0)
		cr_die("setenv: %s", strerror(errno));
}

static void
make_msg(const struct msgspec *m, struct buf *msg, struct buf *env)
{
	size_t i;

	buf_printf(msg, "From: <%s>\nTo: <%s>\nSubject: crash test %s\nX-Crash-Id: %s\n\n",
	    m->sender, m->rcpts[0], m->id, m->id);
	/* A lone dot and lines that begin with one: SMTP's transparency
	 * (dot-stuffing) on the way in (weir-smtpd) and out (weir-remote). */
	for (i = 1; i <= (m->lines ? m->lines : 12); i++)
		buf_printf(msg, i == 5 ? ".\n" : "%sline %zu of message %s, long enough to span a "
		    "few hundred bytes.\n", i % 100 == 7 ? "." : "", i, m->id);
	buf_printf(env, "F%s%c", m->sender, 0);
	for (i = 0; i < 4 && m->rcpts[i]; i++)
		buf_printf(env, "T%s%c", m->rcpts[i], 0);
	buf_addc(env, '\0');
}

/* Does the log hold a record "<pid> <kind> "? */
static int
log_has(const struct workload *w, pid_t pid, char kind)
{
	struct buf b = BUF_INIT;
	char *pat = xasprintf("\n%ld %c ", (long)pid, kind);
	int r;

	if (read_file_at(AT_FDCWD, w->log, &b, 1u << 30) != 0)
		cr_die("read %s: %s", w->log, strerror(errno));
	r = b.len && memmem(b.s, b.len, pat, strlen(pat)) != NULL;	/* data holds NULs */
	buf_free(&b);
	free(pat);
	return r;
}

/* weir-queue gets half the message through a FIFO; once it has written
 * some of it to its mess/ file (a W record), SIGKILL. */
static void
inject_killed(struct workload *w, const struct msgspec *m)
{
	char *fifo = xasprintf("%s/etc/%s.fifo", w->root, m->id);
	char *ep = xasprintf("%s/etc/%s.env", w->root, m->id);
	char *elog = xasprintf("%s/inject.log", w->root);
	const char *argv[2];
	struct buf msg = BUF_INIT, env = BUF_INIT;
	pid_t pid;
	int fd, ms;

	argv[0] = xasprintf("%s/weir-queue", w->bindir);
	argv[1] = NULL;
	make_msg(m, &msg, &env);
	write_file(ep, env.s, env.len, 0644);
	if (mkfifo(fifo, 0600) < 0)
		cr_die("mkfifo %s: %s", fifo, strerror(errno));
	pid = spawn(argv, fifo, ep, elog, 0);
	if ((fd = open(fifo, O_WRONLY | O_CLOEXEC)) < 0 ||
	    write(fd, msg.s, msg.len / 2) != (ssize_t)(msg.len / 2))
		cr_die("write %s: %s", fifo, strerror(errno));
	for (ms = 0; ms < 10000 && !log_has(w, pid, 'W'); ms += 10)
		usleep(10000);
	if (ms >= 10000)
		cr_die("weir-queue (pid %ld) wrote nothing of %s's first half in 10 s (see %s)",
		    (long)pid, m->id, elog);
	kill(pid, SIGKILL);
	(void)wait_exit(pid);
	close(fd);
	buf_free(&msg);
	buf_free(&env);
	free((char *)argv[0]);
	free(fifo);
	free(ep);
	free(elog);
}

/* The harness's promise: the message m (msg as injected) is queued. */
static void
promise(struct workload *w, const struct msgspec *m, const struct buf *msg)
{
	struct buf rec = BUF_INIT;
	const char *body;
	size_t blen;
	int i;

	body = cr_body(msg->s, msg->len, &blen);
	buf_printf(&rec, "%ld Q %s %016llx %s ", (long)getpid(), m->id,
	    (unsigned long long)cr_hash(body, blen), m->sender);
	for (i = 0; i < 4 && m->rcpts[i]; i++)
		buf_printf(&rec, "%s%s", i ? "," : "", m->rcpts[i]);
	buf_addc(&rec, '\n');
	append_log(w, buf_cstr(&rec));
	w->injected++;
	buf_free(&rec);
}

/* ---- SMTP to the real weir-smtpd: one session on a socketpair, as
 * inetd runs it, the client's address in $TCPREMOTEIP ---- */

struct smtp {
	int fd;
	pid_t pid;
	struct buf in;		/* what weir-smtpd said, not yet read */
	const char *elog;
};

static void
smtp_start(struct workload *w, struct smtp *c, const char *elog)
{
	char *prog = xasprintf("%s/weir-smtpd", w->bindir);
	int sv[2];

	memset(c, 0, sizeof c[0]);
	c->elog = elog;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		cr_die("socketpair: %s", strerror(errno));
	if ((c->pid = fork()) < 0)
		cr_die("fork: %s", strerror(errno));
	if (c->pid == 0) {
		int e = open(elog, O_WRONLY | O_APPEND | O_CREAT, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (e < 0 || dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0 || dup2(e, 2) < 0 ||
		    setenv("TCPREMOTEIP", "127.0.0.1", 1) < 0)
			_exit(126);
		execl(prog, prog, (char *)NULL);
		_exit(127);
	}
	if (close(sv[1]) < 0)
		cr_die("close: %s", strerror(errno));
	c->fd = sv[0];
	free(prog);
}

static void
smtp_write(struct smtp *c, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t r = write(c->fd, s, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			cr_die("write to weir-smtpd: %s (see %s)", strerror(errno), c->elog);
		s += r;
		n -= (size_t)r;
	}
}

/* Read one reply (up to 30 s); die unless its code is want. */
static void
smtp_expect(struct smtp *c, int want)
{
	time_t until = time(NULL) + 30;

	for (;;) {
		const char *p = c->in.s, *nl;

		/* A reply ends with a line "DDD " (or "DDD" alone). */
		while (c->in.len && (nl = memchr(p, '\n', c->in.len - (size_t)(p - c->in.s)))) {
			if (nl - p >= 3 && (nl - p == 3 || p[3] == ' ' || p[3] == '\r')) {
				int code = atoi(p);

				if (code != want)
					cr_die("weir-smtpd answered \"%.*s\", not %d (see %s)",
					    (int)(nl - p), p, want, c->elog);
				c->in.len -= (size_t)(nl + 1 - c->in.s);
				memmove(c->in.s, nl + 1, c->in.len);
				return;
			}
			p = nl + 1;
		}
		{
			struct pollfd pf = { c->fd, POLLIN, 0 };
			char tmp[4096];
			ssize_t r;

			if (time(NULL) > until)
				cr_die("weir-smtpd did not answer in 30 s (see %s)", c->elog);
			if (poll(&pf, 1, 1000) <= 0)
				continue;
			r = read(c->fd, tmp, sizeof tmp);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				cr_die("weir-smtpd closed the connection waiting for %d (see %s)",
				    want, c->elog);
			buf_add(&c->in, tmp, (size_t)r);
		}
	}
}

/* Say "<verb><arg>" and expect the reply want. */
static void
smtp_cmd(struct smtp *c, int want, const char *verb, const char *arg)
{
	struct buf b = BUF_INIT;

	buf_printf(&b, "%s%s\r\n", verb, arg);
	smtp_write(c, b.s, b.len);
	smtp_expect(c, want);
	buf_free(&b);
}

/* Hang up, reap weir-smtpd: it exits 0 after QUIT, 1 when the client
 * just went (hangup, in the middle of DATA). */
static void
smtp_end(struct smtp *c, int hangup)
{
	int code;

	if (c->fd >= 0 && close(c->fd) < 0)
		cr_die("close: %s", strerror(errno));
	c->fd = -1;
	if ((code = wait_exit(c->pid)) != hangup)
		cr_die("weir-smtpd exited %d (see %s)", code, c->elog);
	buf_free(&c->in);
}

/* Message m over SMTP; with hangup, the client goes after three
 * quarters of DATA (weir-smtpd and weir-queue pass it on in 64 KB
 * chunks: m must be well over 128 KB), once weir-smtpd's weir-queue has
 * written some of it to its mess/ file (the message id in a W record);
 * nothing must come of it. */
static void
inject_smtp(struct workload *w, const struct msgspec *m, const struct buf *msg, int hangup)
{
	char *elog = xasprintf("%s/inject.log", w->root);
	char *mark = xasprintf("X-Crash-Id: %s\n", m->id), *path;
	struct buf data = BUF_INIT, logb = BUF_INIT;
	struct smtp c;
	size_t i, ms;
	int bol = 1;

	for (i = 0; i < msg->len; i++) {	/* CRLF, dot-stuffed */
		if (bol && msg->s[i] == '.')
			buf_addc(&data, '.');
		if (msg->s[i] == '\n')
			buf_addc(&data, '\r');
		buf_addc(&data, msg->s[i]);
		bol = msg->s[i] == '\n';
	}
	smtp_start(w, &c, elog);
	smtp_expect(&c, 220);
	smtp_cmd(&c, 250, "EHLO ", "client.example");
	path = xasprintf("<%s>", m->sender);
	smtp_cmd(&c, 250, "MAIL FROM:", path);
	for (i = 0; i < 4 && m->rcpts[i]; i++) {
		free(path);
		path = xasprintf("<%s>", m->rcpts[i]);
		smtp_cmd(&c, 250, "RCPT TO:", path);
	}
	free(path);
	smtp_cmd(&c, 354, "DATA", "");
	if (hangup) {
		smtp_write(&c, data.s, data.len / 4 * 3);
		for (ms = 0; ms < 10000; ms += 10) {
			buf_reset(&logb);
			if (read_file_at(AT_FDCWD, w->log, &logb, 1u << 30) != 0)
				cr_die("read %s: %s", w->log, strerror(errno));
			if (logb.len && memmem(logb.s, logb.len, mark, strlen(mark)))
				break;
			usleep(10000);
		}
		if (ms >= 10000)
			cr_die("weir-smtpd's weir-queue wrote nothing of %s in 10 s "
			    "(see %s)", m->id, elog);
	} else {
		smtp_write(&c, data.s, data.len);
		smtp_write(&c, ".\r\n", 3);
		smtp_expect(&c, 250);
		promise(w, m, msg);
		smtp_cmd(&c, 221, "QUIT", "");
	}
	smtp_end(&c, hangup);
	buf_free(&data);
	buf_free(&logb);
	free(mark);
	free(elog);
}

/* Inject one message; on success log the promise. */
static void
inject(struct workload *w, const struct msgspec *m)
{
	char *mp = xasprintf("%s/etc/%s.msg", w->root, m->id);
	char *ep = xasprintf("%s/etc/%s.env", w->root, m->id);
	char *elog = xasprintf("%s/inject.log", w->root);
	char *prog = xasprintf("%s/%s", w->bindir, m->by == BY_SENDMAIL ? "sendmail" : "weir-queue");
	const char *argv[12];
	struct buf msg = BUF_INIT, env = BUF_INIT;
	int i, n = 0, code;

	make_msg(m, &msg, &env);
	write_file(mp, msg.s, msg.len, 0644);
	write_file(ep, env.s, env.len, 0644);
	if (m->by == BY_SMTP) {
		inject_smtp(w, m, &msg, 0);
		goto out;
	}
	argv[n++] = prog;
	if (m->by == BY_SENDMAIL) {
		argv[n++] = "-oi";
		argv[n++] = "-f";
		argv[n++] = m->sender;
		for (i = 0; i < 4 && m->rcpts[i]; i++)
			argv[n++] = m->rcpts[i];
	}
	argv[n] = NULL;
	code = wait_exit(spawn(argv, mp, m->by == BY_SENDMAIL ? NULL : ep, elog, 0));
	if (code != 0) {
		fprintf(stderr, "crashreplay: %s of %s exited %d (see %s)\n", prog, m->id, code, elog);
		w->refused++;
	} else {
		promise(w, m, &msg);
	}
out:
	buf_free(&msg);
	buf_free(&env);
	free(mp);
	free(ep);
	free(elog);
	free(prog);
}

/* The log's text so far (W data holds NULs: search it with memmem). */
static void
read_log(const struct workload *w, struct buf *b)
{
	buf_reset(b);
	if (read_file_at(AT_FDCWD, w->log, b, 1u << 30) != 0)
		cr_die("read %s: %s", w->log, strerror(errno));
}

/* -r: weir-queue, with m, is held between its todo/ link and that
 * folder's fsync (the recorder's WEIR_REC_PAUSE) while wake() starts
 * weir-send, which lists todo/ as it starts and begins on m's entry
 * (opens its info/ file); then weir-queue goes on.  A power cut in that
 * window may keep anything weir-send did and lose the todo/ link. */
static void
inject_race(struct workload *w, const struct msgspec *m, void (*wake)(struct workload *))
{
	char *ep = xasprintf("%s/etc/%s.env", w->root, m->id), *mp = xasprintf("%s/etc/%s.msg", w->root, m->id);
	char *go = xasprintf("%s/etc/race.go", w->root), *pz = xasprintf("weir-queue:queue/todo/:%s", go);
	char *elog = xasprintf("%s/inject.log", w->root), *pat = NULL, *id = NULL;
	const char *argv[2];
	struct buf msg = BUF_INIT, env = BUF_INIT, logb = BUF_INIT;
	pid_t pid;
	int ms, code, sp, seen = 0;

	make_msg(m, &msg, &env);
	write_file(mp, msg.s, msg.len, 0644);
	write_file(ep, env.s, env.len, 0644);
	argv[0] = xasprintf("%s/weir-queue", w->bindir);
	argv[1] = NULL;
	if (setenv("WEIR_REC_PAUSE", pz, 1) < 0)
		cr_die("setenv: %s", strerror(errno));
	pid = spawn(argv, mp, ep, elog, 0);
	if (unsetenv("WEIR_REC_PAUSE") < 0)
		cr_die("unsetenv: %s", strerror(errno));
	/* Its todo/ link: "<pid> L <ino> queue/intd/<id> queue/todo/<id>". */
	pat = xasprintf("\n%ld L ", (long)pid);
	for (ms = 0; ms < 10000 && id == NULL; ms += 10) {
		const char *p, *t, *nl;

		read_log(w, &logb);
		for (p = logb.s; id == NULL && logb.len &&
		    (p = memmem(p, logb.len - (size_t)(p - logb.s), pat, strlen(pat))) != NULL; p = nl) {
			if ((nl = memchr(p + 1, '\n', logb.len - (size_t)(p + 1 - logb.s))) == NULL)
				break;
			if ((t = memmem(p, (size_t)(nl - p), " queue/todo/", 12)) != NULL)
				id = xstrndup(t + 12, (size_t)(nl - t - 12));
		}
		if (id == NULL)
			usleep(10000);
	}
	if (id == NULL)
		cr_die("weir-queue (pid %ld) did not link %s into todo/ in 10 s (see %s)",
		    (long)pid, m->id, elog);
	wake(w);
	for (ms = 0; ms < 30000 && !seen; ms += 10) {
		read_log(w, &logb);
		for (sp = 0; sp < CR_SPLIT && !seen; sp++) {
			free(pat);
			pat = xasprintf(" queue/info/%d/%s ", sp, id);
			seen = logb.len && memmem(logb.s, logb.len, pat, strlen(pat)) != NULL;
		}
		if (!seen)
			usleep(10000);
	}
	if (!seen)
		cr_die("weir-send did not begin on todo/%s (%s) in 30 s", id, m->id);
	write_file(go, "", 0, 0644);
	if ((code = wait_exit(pid)) != 0) {
		fprintf(stderr, "crashreplay: weir-queue of %s exited %d (see %s)\n", m->id, code, elog);
		w->refused++;
	} else {
		promise(w, m, &msg);
	}
	buf_free(&msg);
	buf_free(&env);
	buf_free(&logb);
	free((char *)argv[0]);
	free(ep);
	free(mp);
	free(go);
	free(pz);
	free(elog);
	free(pat);
	free(id);
}

static size_t
count_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static size_t
count_mess(const struct workload *w)
{
	char *p;
	size_t n = 0;
	int s;

	for (s = 0; s < CR_SPLIT; s++) {
		p = xasprintf("%s/queue/mess/%d", w->root, s);
		n += count_in(p);
		free(p);
	}
	return n;
}

static size_t
count_confirmed(const struct workload *w)
{
	FILE *f = fopen(w->log, "r");
	char line[4096];
	size_t n = 0;

	if (f == NULL)
		return 0;
	/* A data record could hold anything, but not a line like this one. */
	while (fgets(line, sizeof line, f)) {
		char hash[17];
		long pid;

		n += sscanf(line, "%ld Y %16[0-9a-f] ", &pid, hash) == 2 && strlen(hash) == 16;
	}
	fclose(f);
	return n;
}

static int
finished(const struct workload *w)
{
	char *todo = xasprintf("%s/queue/todo", w->root), *bounce = xasprintf("%s/queue/bounce", w->root);
	int r = count_confirmed(w) >= EXPECT_CONFIRMED && count_mess(w) == EXPECT_LEFT &&
	    count_in(todo) == 0 && count_in(bounce) == 0;

	free(todo);
	free(bounce);
	return r;
}

static void
start_send(struct workload *w)
{
	char *send = xasprintf("%s/weir-send", w->bindir), *slog = xasprintf("%s/send.log", w->root);
	const char *argv[] = { send, "-c", w->conf, NULL };

	send_pid = spawn(argv, NULL, NULL, slog, 1);
	free(send);
	free(slog);
}

/* Start weir-gate (stopping the one running, if any: a restart compacts
 * its journal) and wait until it answers. */
static void
start_gate(struct workload *w)
{
	char *gate = xasprintf("%s/weir-gate", w->bindir), *sock = xasprintf("%s/run/gate.sock", w->root);
	char *glog = xasprintf("%s/gate.log", w->root);
	const char *argv[] = { gate, "-c", w->conf, NULL };
	int ms;

	if (w->ngate == sizeof w->gate_pid / sizeof w->gate_pid[0])
		cr_die("too many weir-gate runs");
	stop_group(&gate_run);
	w->gate_pid[w->ngate++] = gate_run = spawn(argv, NULL, NULL, glog, 1);
	for (ms = 0; ms < 10000 && !tl_sock_answers(sock); ms += 10)
		usleep(10000);
	if (ms >= 10000)
		cr_die("weir-gate (run %zu) does not answer on %s (see %s)", w->ngate, sock, glog);
	free(gate);
	free(sock);
	free(glog);
}

/* weir-queued, recorded, and wait for its socket. */
static void
start_queued(struct workload *w)
{
	char *prog = xasprintf("%s/weir-queued", w->bindir), *sock = xasprintf("%s/run/queued.sock", w->root);
	char *qlog = xasprintf("%s/queued.log", w->root);
	const char *argv[] = { prog, "-c", w->conf, NULL };
	int ms;

	queued_pid = spawn(argv, NULL, NULL, qlog, 1);
	for (ms = 0; ms < 10000 && !tl_sock_answers(sock); ms += 10)
		usleep(10000);
	if (ms >= 10000)
		cr_die("weir-queued does not answer on %s (see %s)", sock, qlog);
	free(prog);
	free(sock);
	free(qlog);
}

/* Did weir-queued take at least one message (a pid/ file of its pid)? */
static int
queued_took(const struct workload *w)
{
	struct buf b = BUF_INIT;
	char *pat = xasprintf(" queue/pid/%ld.", (long)queued_pid);
	int r;

	if (read_file_at(AT_FDCWD, w->log, &b, 1u << 30) != 0)
		cr_die("read %s: %s", w->log, strerror(errno));
	r = b.len && memmem(b.s, b.len, pat, strlen(pat)) != NULL;
	buf_free(&b);
	free(pat);
	return r;
}

int
wl_run(struct workload *w)
{
	char *slog = xasprintf("%s/send.log", w->root);
	size_t i;
	int ms, rc = 0;

	record_from_here(w);
	start_gate(w);
	start_queued(w);

	/* -r: m1 first, alone in todo/ (else weir-send's fsync of todo/
	 * after an older entry would close the window), held after its
	 * todo/ link while weir-send starts; the others come after. */
	if (w->race)
		inject_race(w, &before[0], start_send);
	for (i = w->race ? 1 : 0; i < sizeof before / sizeof before[0]; i++)
		inject(w, &before[i]);
	inject_killed(w, &killed);
	{
		struct buf msg = BUF_INIT, env = BUF_INIT;

		make_msg(&hungup, &msg, &env);
		inject_smtp(w, &hungup, &msg, 1);
		buf_free(&msg);
		buf_free(&env);
	}
	if (!w->race)
		start_send(w);
	/* Once weir-send has some through, a restart of weir-gate: it
	 * compacts its journal (every send of the window, to a new file)
	 * with deliveries on both sides of it. */
	for (ms = 0; ms < WAIT_MS && count_confirmed(w) < 4; ms += 10)
		usleep(10000);
	start_gate(w);
	for (i = 0; i < sizeof during / sizeof during[0]; i++)
		inject(w, &during[i]);
	for (ms = 0; ms < WAIT_MS && !finished(w); ms += 50)
		usleep(50000);
	if (!finished(w)) {
		fprintf(stderr, "crashreplay: the workload did not finish in %d s: %zu of %d "
		    "confirmations, %zu messages left (expected %d); see %s\n", WAIT_MS / 1000,
		    count_confirmed(w), EXPECT_CONFIRMED, count_mess(w), EXPECT_LEFT, slog);
		rc = -1;
	}
	if (!queued_took(w)) {
		fprintf(stderr, "crashreplay: weir-queued took no message: sendmail and weir-smtpd "
		    "ran weir-queue instead (see %s/queued.log)\n", w->root);
		rc = -1;
	}
	/* And at the end, with only the deferred messages left. */
	start_gate(w);
	wl_stop(w);
	if (unsetenv("LD_PRELOAD") < 0)
		cr_die("unsetenv: %s", strerror(errno));
	free(slog);
	return rc;
}

void
wl_stop(struct workload *w)
{
	(void)w;	/* w->gate_pid stays: the replay knows the journal by them */
	stop_all();
}

/* The stand-in upstream (w->upstream, tests/upstream/upstream.py) on a
 * loopback port the kernel picks, recording to record (each message's
 * content to record.N), with the replies in replies; its own process
 * group.  Returns the port. */
static unsigned
upstream_start(const struct workload *w, const char *record, const char *replies,
    const char *errlog)
{
	const char *argv[] = { "/usr/bin/python3", w->upstream, "--port", "0", "--record", record,
		"--reply-file", replies, NULL };
	char said[128];
	unsigned port;

	if ((upstream_pid = tl_upstream_spawn(argv, errlog, &port, said, sizeof said)) < 0)
		cr_die("fork: %s", strerror(errno));
	if (port == 0)
		cr_die("the upstream %s did not say its port in 15 s: \"%s\" (see %s)", w->upstream,
		    said, errlog);
	return port;
}

/* Run the real weir-gate, weir-send and weir-remote on the queue and
 * journal under root/state, after `weir flush`, delivering to the
 * stand-in upstream (root/upstream.jsonl; "bad" recipients refused with
 * 550, "slow" ones deferred with 451), until ready(record) or ms pass;
 * then stop them and the upstream.  1 if ready() came true. */
int
wl_deliver(struct workload *w, const char *root, int (*ready)(const char *record), int ms)
{
	char *conf = xasprintf("%s/weir.conf", root), *rec = xasprintf("%s/upstream.jsonl", root);
	char *replies = xasprintf("%s/replies", root), *sock = xasprintf("%s/gate.sock", root);
	char *gate = xasprintf("%s/weir-gate", w->bindir), *send = xasprintf("%s/weir-send", w->bindir);
	char *weir = xasprintf("%s/weir", w->bindir), *elog = xasprintf("%s/run.log", root);
	char *remote = xasprintf("%s/weir-remote", w->bindir);
	const struct msgspec *const all[] = { before, during, &killed, &hungup };
	const size_t nall[] = { sizeof before / sizeof before[0], sizeof during / sizeof during[0], 1, 1 };
	const char *argv[5];
	struct buf b = BUF_INIT;
	size_t i, j, r;
	unsigned port;
	int t, ok = 0;

	for (i = 0; i < 4; i++)
		for (j = 0; j < nall[i]; j++)
			for (r = 0; r < 4 && all[i][j].rcpts[r]; r++) {
				const char *a = all[i][j].rcpts[r];

				if (strncmp(a, "bad", 3) == 0)
					buf_printf(&b, "rcpt:%s=550 5.1.1 <%s>: no such user\n", a, a);
				else if (strncmp(a, "slow", 4) == 0)
					buf_printf(&b, "rcpt:%s=451 4.2.1 try later\n", a);
			}
	write_file(replies, b.s, b.len, 0644);
	buf_reset(&b);
	port = upstream_start(w, rec, replies, elog);
	buf_printf(&b, "queue_dir = \"%s/state/queue\"\nqueue_split = %d\nhostname = \"%s\"\n"
	    "admin = \"%s\"\nconcurrency = 2\ngate_socket = \"%s\"\n"
	    "policy_file = \"%s/etc/policy.conf\"\ngate_journal = \"%s/state/gate/gate.journal\"\n"
	    "upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = %u\n  tls = \"none\"\n}\n",
	    root, CR_SPLIT, CR_HOST, CR_ADMIN, sock, w->root, root, port);
	write_file(conf, b.s, b.len, 0644);
	if (setenv("WEIR_CONFIG", conf, 1) < 0 || setenv("WEIR_REMOTE", remote, 1) < 0)
		cr_die("setenv: %s", strerror(errno));
	argv[0] = weir;
	argv[1] = "flush";
	argv[2] = NULL;
	if (wait_exit(spawn(argv, NULL, NULL, elog, 0)) != 0)
		cr_die("weir flush failed (see %s)", elog);
	argv[0] = gate;
	argv[1] = NULL;
	gate_run = spawn(argv, NULL, NULL, elog, 1);
	for (t = 0; t < 10000 && !tl_sock_answers(sock); t += 10)
		usleep(10000);
	if (t >= 10000)
		cr_die("weir-gate on a recovered journal does not answer (see %s)", elog);
	argv[0] = send;
	send_pid = spawn(argv, NULL, NULL, elog, 1);
	for (t = 0; t < ms && !(ok = ready(rec)); t += 50)
		usleep(50000);
	stop_all();
	if (setenv("WEIR_CONFIG", w->conf, 1) < 0)
		cr_die("setenv: %s", strerror(errno));
	buf_free(&b);
	free(conf);
	free(rec);
	free(replies);
	free(sock);
	free(gate);
	free(send);
	free(weir);
	free(elog);
	free(remote);
	return ok;
}
