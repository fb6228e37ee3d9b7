/*
 * queued_test.c: weir-queued, the long-lived queue writer, run for real
 * on a scratch queue and spoken to over its socket (mail/qwproto.h) and
 * through sendmail.  What it proves: a message lands in todo/ in
 * weir-queue's format with the client's uid and pid from the kernel;
 * twenty clients at once all get their answer and their message; a
 * malformed record, bytes after the envelope's end and a client that
 * hangs up halfway leave nothing in the queue; sendmail uses it when
 * queue_socket is set and runs weir-queue when it is not running.
 * Durability (the fsyncs before the answer) is the crash replay's
 * (tests/durability/, make crash-check), which has a mutant for each.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/io.h"
#include "mail/qwproto.h"
#include "queue_helpers.h"
#include "testlib.h"

static struct qt q;
static pid_t qd;
static char *sock, *qlog;

/* Does weir-queued's log say what? */
static int
logged(const char *what)
{
	struct buf b = BUF_INIT;
	int r;

	tl_read(qlog, &b);
	r = strstr(buf_cstr(&b), what) != NULL;
	buf_free(&b);
	return r;
}

static void
start_queued(void)
{
	char *bin = tl_bin("weir-queued");
	int i;

	qd = fork();
	cr_assert(qd >= 0);
	if (qd == 0) {
		int fd = open(qlog, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execl(bin, bin, "-c", q.conf, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 1000 && !tl_sock_answers(sock); i++)
		usleep(10000);	/* its socket is the event; 10 s at most */
	cr_assert(i < 1000, "weir-queued did not listen on %s", sock);
	free(bin);
}

static void
stop_queued(void)
{
	if (qd > 0) {
		kill(qd, SIGKILL);
		waitpid(qd, NULL, 0);
		qd = 0;
	}
}

static void
setup(void)
{
	char *extra;

	qt_setup(&q, 3, NULL);
	sock = xasprintf("%s/queued.sock", q.tmp);
	qlog = xasprintf("%s/queued.log", q.tmp);
	extra = xasprintf("queue_dir = \"%s\"\nqueue_split = 3\nqueue_socket = \"%s\"\n", q.qdir, sock);
	qt_config(&q, extra);
	free(extra);
	start_queued();
}

static void
teardown(void)
{
	stop_queued();
	qt_teardown(&q);
	free(sock);
	free(qlog);
}

TestSuite(queued, .init = setup, .fini = teardown, .timeout = 60);

static int
dial(void)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
	return fd;
}

/* The records of one message (qwproto.h). */
static void
records(struct buf *b, const char *msg, const char *sender, const char *rcpt)
{
	struct buf env = BUF_INIT;

	qw_hdr_put(b, 'M', strlen(msg));
	buf_adds(b, msg);
	qt_env_start(&env, sender);
	qt_env_rcpt(&env, rcpt);
	qt_env_end(&env);
	qw_hdr_put(b, 'E', env.len);
	buf_add(b, env.s, env.len);
	buf_free(&env);
}

/* Read the answer line (10 s at most); "" when the connection ended. */
static void
answer(int fd, char *out, size_t n)
{
	size_t got = 0;
	struct pollfd p = { fd, POLLIN, 0 };

	out[0] = '\0';
	while (got + 1 < n && (got == 0 || out[got - 1] != '\n')) {
		ssize_t r;

		cr_assert(poll(&p, 1, 10000) == 1, "no answer in 10 s");
		r = read(fd, out + got, n - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		out[got] = '\0';
	}
}

Test(queued, one_message_like_weir_queue)
{
	struct buf b = BUF_INIT, todo = BUF_INIT;
	char ans[128], path[256], *nl;
	int fd = dial();

	records(&b, "Subject: one\n\nbody\n", "a@src.example", "b@dst.example");
	cr_assert(full_write(fd, b.s, b.len) == 0);
	answer(fd, ans, sizeof ans);
	cr_assert(ans[0] == 'K', "answer \"%s\" (log %s)", ans, qlog);
	cr_assert_eq(tl_count_files(xasprintf("%s/todo", q.qdir)), 1);
	/* K<inode>.<sec>.<nsec>: todo/<inode> holds u<our uid> p<our pid>. */
	nl = strchr(ans, '.');
	cr_assert(nl);
	snprintf(path, sizeof path, "%s/todo/%.*s", q.qdir, (int)(nl - ans - 1), ans + 1);
	tl_read(path, &todo);
	{
		char want[64];
		int n = snprintf(want, sizeof want, "u%lu%cp%ld%cFa@src.example%cTb@dst.example%c",
		    (unsigned long)getuid(), 0, (long)getpid(), 0, 0, 0);

		cr_assert(todo.len == (size_t)n && memcmp(todo.s, want, (size_t)n) == 0,
		    "todo/ is not weir-queue's format for uid %lu pid %ld", (unsigned long)getuid(),
		    (long)getpid());
	}
	close(fd);
	buf_free(&b);
	buf_free(&todo);
}

Test(queued, twenty_at_once)
{
	int fds[20], i;
	char ans[128];

	for (i = 0; i < 20; i++) {
		struct buf b = BUF_INIT;
		char subj[64];

		fds[i] = dial();
		snprintf(subj, sizeof subj, "Subject: %d\n\nbody\n", i);
		records(&b, subj, "a@src.example", "b@dst.example");
		cr_assert(full_write(fds[i], b.s, b.len) == 0);
		buf_free(&b);
	}
	for (i = 0; i < 20; i++) {
		answer(fds[i], ans, sizeof ans);
		cr_assert(ans[0] == 'K', "client %d: answer \"%s\"", i, ans);
		close(fds[i]);
	}
	cr_assert_eq(tl_count_files(xasprintf("%s/todo", q.qdir)), 20);
}

/* What a client sends, then nothing is left of it in the queue. */
static void
refused(const char *bytes, size_t n, int hang_up, const char *want)
{
	char ans[128];
	int fd = dial();

	cr_assert(full_write(fd, bytes, n) == 0);
	if (hang_up) {
		int i;

		close(fd);
		/* The event: its line in the log (10 s at most). */
		for (i = 0; i < 1000 && !logged("went away before its envelope's end"); i++)
			usleep(10000);
		cr_assert(i < 1000, "weir-queued did not see the hang-up");
	} else {
		answer(fd, ans, sizeof ans);
		cr_assert_str_eq(ans, want);
		close(fd);
	}
	qt_assert_clean(&q, "after the refused message");
	/* A later message is answered: the earlier one was dealt with. */
	{
		struct buf b = BUF_INIT;

		fd = dial();
		records(&b, "Subject: after\n\nx\n", "a@src.example", "b@dst.example");
		cr_assert(full_write(fd, b.s, b.len) == 0);
		answer(fd, ans, sizeof ans);
		cr_assert(ans[0] == 'K');
		close(fd);
		buf_free(&b);
	}
	cr_assert_eq(tl_count_files(xasprintf("%s/todo", q.qdir)), 1);
}

Test(queued, malformed_header_leaves_nothing)
{
	static const char m[] = "M5\nhello" "X3\nabc";

	refused(m, sizeof m - 1, 0, "Z81\n");
}

Test(queued, leading_zero_refused)
{
	static const char m[] = "M05\nhello";

	refused(m, sizeof m - 1, 0, "Z81\n");
}

Test(queued, bytes_after_envelope_end_refused)
{
	static const char m[] = "M5\nhello" "E21\nFa@b.example\0Tc@d.ex\0\0Z";

	refused(m, sizeof m - 1, 0, "Z81\n");
}

Test(queued, hangup_halfway_leaves_nothing)
{
	static const char m[] = "M100\nonly part of the message";

	refused(m, sizeof m - 1, 1, NULL);
}

Test(queued, sendmail_through_it_then_weir_queue_without_it)
{
	const char *argv[] = { NULL, "-f", "a@src.example", "b@dst.example", NULL };
	struct tl_run run = { .argv = argv, .in = "Subject: s\n\nbody\n", .inlen = 17,
		.timeout_s = 30 };
	struct tl_result r;
	const char *env[8];
	const char *bin = getenv("WEIR_BIN");
	char *real = realpath(bin && *bin ? bin : "build/bin", NULL);
	/* First no weir-queue to fall back on: only weir-queued can queue. */
	char *none = xasprintf("WEIR_LIBEXEC=%s/none", q.tmp), *libexec = xasprintf("WEIR_LIBEXEC=%s", real);
	int i, k = 0;

	for (i = 0; q.envs[i]; i++)
		if (strncmp(q.envs[i], "QMAILQUEUE=", 11) != 0)
			env[k++] = q.envs[i];
	env[k] = none;
	env[k + 1] = NULL;
	run.env = env;
	argv[0] = tl_bin("sendmail");
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "sendmail through weir-queued: %s", buf_cstr(&r.err));
	cr_assert_eq(tl_count_files(xasprintf("%s/todo", q.qdir)), 1);
	tl_result_free(&r);
	/* Without weir-queued, and without weir-queue: a temporary failure. */
	stop_queued();
	tl_run(&run, &r);
	cr_assert_eq(r.status, 75, "sendmail with neither: exit %d", r.status);
	tl_result_free(&r);
	/* Without weir-queued, with weir-queue: queued by weir-queue. */
	env[k] = libexec;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "sendmail without weir-queued: %s", buf_cstr(&r.err));
	cr_assert_eq(tl_count_files(xasprintf("%s/todo", q.qdir)), 2);
	tl_result_free(&r);
	free(none);
	free(libexec);
	free(real);
}
