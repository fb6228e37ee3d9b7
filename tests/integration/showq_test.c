/*
 * showq_test.c: mailq and `weir queue` as an ordinary user (nobody, via
 * setpriv), who may not read the queue (root's here), get the listing
 * from the real weir-showq: the same bytes root reads from the queue
 * itself, with messages queued, held and put off with a reply; a
 * malformed or oversized request is refused with a reason and the daemon
 * goes on; clients that connect and say nothing (as many as its cap)
 * hold up another's listing no longer than the request deadline (-t 1);
 * a second copy on the same socket refuses to start and the first goes
 * on; one killed with -9 leaves its socket file for the next to take;
 * with weir-showq stopped mailq says weir is not running and exits 75;
 * with showq_socket "" the user is told the queue cannot be read, as
 * before; `weir status` counts a listing over 16 MB as root does.
 * Needs root (to be another user); skipped otherwise.
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
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "queue_helpers.h"
#include "testlib.h"

static struct qt q;
static char *sock;
static pid_t showq = -1;

static void
write_conf(const char *socket)
{
	char *c = xasprintf("queue_dir = \"%s\"\nqueue_split = 23\nshowq_socket = \"%s\"\n",
	    q.qdir, socket);

	qt_config(&q, c);
	free(c);
}

static void
setup(void)
{
	if (!tl_is_root())
		cr_skip_test("needs root to run mailq as another user");
	qt_setup(&q, 23, NULL);
	/* nobody reaches weir.conf and the socket, not the queue (0750 root). */
	cr_assert(chmod(q.tmp, 0755) == 0);
	sock = xasprintf("%s/public/showq.sock", q.tmp);
	write_conf(sock);
}

static void
stop_showq(void)
{
	if (showq > 0) {
		kill(-showq, SIGKILL);
		waitpid(showq, NULL, 0);
		showq = -1;
	}
}

static void
teardown(void)
{
	stop_showq();
	if (q.tmp)
		qt_teardown(&q);
	free(sock);
	sock = NULL;
}

TestSuite(showq, .init = setup, .fini = teardown, .timeout = 60);

#define S(x) x, sizeof(x) - 1

/* Messages in several states: deferred with the upstream's reply (#100),
 * held (#54), not yet preprocessed (#300), and one done recipient. */
static void
build_queue(void)
{
	qt_put(&q, "mess/8/100", S("Subject: a\n\nbody\n"), 0);
	qt_put(&q, "info/8/100", S("Falice@example.org\0"), 1700000100);
	qt_put(&q, "remote/8/100", S("Dbob@example.net\0Tcarol@example.net\0"), 0);
	qt_put(&q, "reply/100", S("birth 1700000100\nnext 1700003700\n"
	    "carol@example.net\0" "451 4.7.1 try again later\n"), 0);
	qt_put(&q, "mess/8/54", S("Subject: b\n\nbody\n"), 0);
	qt_put(&q, "info/8/54", S("Fheld@example.org\0"), 1700000050);
	qt_put(&q, "remote/8/54", S("Tdave@example.net\0"), 0);
	qt_put(&q, "hold/54", S("birth 1700000050\nsince 1700000060\n"), 0);
	qt_put(&q, "mess/1/300", S("Subject: c\n\nbody\n"), 0);
	qt_put(&q, "todo/300", S("u1000\0p4242\0Fsender@example.org\0Tt1@example.net\0"), 1700003600);
}

/* Start argv in its own process group (its pid in showq at once, for
 * the teardown to kill the group), stderr to a pipe we read until
 * weir-showq's line saying it serves. */
static void
spawn_until_serving(const char *const *argv)
{
	char line[4096];
	int p[2];
	size_t n = 0;
	uint64_t deadline = clock_mono_ms() + 15000;
	char *lib = xstrdup(argv[0]);
	pid_t pid;

	*strrchr(lib, '/') = '\0';	/* weir run finds the daemons there */
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	showq = pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (setpgid(0, 0) < 0 || dup2(p[1], 2) < 0 || setenv("WEIR_LIBEXEC", lib, 1) < 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	(void)setpgid(pid, pid);	/* the child does too: whoever is first */
	close(p[1]);
	free(lib);
	for (;;) {
		struct pollfd pf = { p[0], POLLIN, 0 };
		uint64_t now = clock_mono_ms();
		ssize_t r;

		cr_assert(now < deadline, "weir-showq did not start: %.*s", (int)n, line);
		if (poll(&pf, 1, (int)(deadline - now)) <= 0)
			continue;	/* the deadline, or EINTR */
		r = read(p[0], line + n, sizeof line - 1 - n);
		cr_assert(r > 0, "ended: %.*s", (int)n, line);
		n += (size_t)r;
		line[n] = '\0';
		if (strstr(line, "weir-showq") && strstr(line, "serving the queue listing"))
			break;
		cr_assert(n < sizeof line - 1, "%s", line);
	}
	close(p[0]);	/* later lines: EPIPE, which it ignores */
}

/* weir-showq -t SECONDS, alone. */
static void
start_showq_t(const char *deadline)
{
	char *bin = tl_bin("weir-showq");
	const char *argv[] = { bin, "-c", q.conf, "-t", deadline, NULL };

	spawn_until_serving(argv);
	free(bin);
}

/* With a request deadline a loaded machine never reaches (a client of
 * these tests writes its request right after its connect); the tests
 * of the deadline itself start it with -t 1. */
static void
start_showq(void)
{
	start_showq_t("30");
}

/* prog args as root (as_nobody 0) or as nobody, with WEIR_CONFIG. */
static void
run(int as_nobody, const char *prog, const char *arg, struct tl_result *r)
{
	char *bin = tl_bin(prog);
	const char *argv[12];
	const char *env[] = { q.envs[1], NULL };	/* WEIR_CONFIG */
	struct tl_run t = { 0 };
	int n = 0;

	if (as_nobody) {
		argv[n++] = "/usr/bin/setpriv";
		argv[n++] = "--reuid=65534";
		argv[n++] = "--regid=65534";
		argv[n++] = "--clear-groups";
		argv[n++] = "--";
	}
	argv[n++] = bin;
	if (strcmp(prog, "weir") == 0 && !(arg && strcmp(arg, "status") == 0)) {
		argv[n++] = "queue";
	}
	if (arg)
		argv[n++] = arg;
	argv[n] = NULL;
	t.argv = argv;
	t.env = env;
	t.timeout_s = 30;
	tl_run(&t, r);
	free(bin);
}

/* Send req on a new connection, read the answer to its end. */
static void
ask_raw(const char *req, size_t len, struct buf *out)
{
	struct sockaddr_un sa;
	char b[4096];
	ssize_t r;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s",
	    strerror(errno));
	cr_assert(write(fd, req, len) == (ssize_t)len);
	while ((r = read(fd, b, sizeof b)) > 0)
		buf_add(out, b, (size_t)r);
	close(fd);
}

Test(showq, nobody_gets_roots_listing)
{
	struct tl_result root, user;

	build_queue();
	start_showq();
	run(0, "mailq", NULL, &root);
	cr_assert_eq(root.status, 0, "root's mailq: %s", buf_cstr(&root.err));
	cr_assert(strstr(buf_cstr(&root.out), "held") &&
	    strstr(root.out.s, "451 4.7.1 try again later") &&
	    strstr(root.out.s, "messages in queue: 3\n"), "%s", root.out.s);
	run(1, "mailq", NULL, &user);
	cr_assert_eq(user.status, 0, "nobody's mailq: exit %d: %s", user.status,
	    buf_cstr(&user.err));
	cr_assert_str_eq(buf_cstr(&user.out), root.out.s);
	cr_assert_eq(user.err.len, 0, "%s", user.err.s);
	tl_result_free(&root);
	tl_result_free(&user);

	/* weir queue --json, the same way. */
	run(0, "weir", "--json", &root);
	cr_assert_eq(root.status, 0, "%s", buf_cstr(&root.err));
	run(1, "weir", "--json", &user);
	cr_assert_eq(user.status, 0, "nobody's weir queue --json: exit %d: %s", user.status,
	    buf_cstr(&user.err));
	cr_assert_str_eq(buf_cstr(&user.out), buf_cstr(&root.out));
	cr_assert(strstr(root.out.s, "\"messages_in_queue\":3"), "%s", root.out.s);
	tl_result_free(&root);
	tl_result_free(&user);
}

/* The line of `weir status` that starts with what, malloc'ed ("" if none). */
static char *
status_line(const char *out, const char *what)
{
	const char *p = strstr(out, what), *nl;

	if (p == NULL)
		return xstrdup("");
	nl = strchr(p, '\n');
	return xstrndup(p, nl ? (size_t)(nl - p) : strlen(p));
}

/*
 * Issue 36: `weir status` by a user who may not read the queue counts it
 * through weir-showq's JSON listing.  It read the listing whole, at most
 * 16 MB, and counted nothing beyond (100,000 messages make 30 MB); it now
 * reads it a message per line.  Here a list post to 230,000 recipients,
 * a listing of about 19 MB: nobody's status counts what root's does.
 */
Test(showq, status_counts_a_listing_over_16_mb)
{
	enum { N = 230000 };
	struct tl_result root, user;
	struct buf r = BUF_INIT;
	char *a, *b;
	size_t i;

	build_queue();
	for (i = 0; i < N; i++) {
		buf_printf(&r, "Tr%zu@example.net", i);
		buf_addc(&r, '\0');
	}
	qt_put(&q, "mess/9/101", S("Subject: list\n\nbody\n"), 0);
	qt_put(&q, "info/9/101", S("Flist@example.org\0"), 1700000200);
	qt_put(&q, "remote/9/101", r.s, r.len, 0);
	start_showq();
	run(1, "weir", "--json", &user);
	cr_assert(user.out.len > 16 << 20, "a listing of %zu bytes only", user.out.len);
	tl_result_free(&user);
	run(0, "weir", "status", &root);
	run(1, "weir", "status", &user);
	a = status_line(buf_cstr(&root.out), "  messages: ");
	cr_assert_str_eq(a, "  messages: 4 (not yet preprocessed: 1)", "%s", root.out.s);
	b = status_line(buf_cstr(&user.out), "  messages: ");
	cr_assert_str_eq(b, a, "nobody's status:\n%s%s", buf_cstr(&user.out), buf_cstr(&user.err));
	free(a);
	free(b);
	a = status_line(root.out.s, "  recipients not done: ");
	b = status_line(user.out.s, "  recipients not done: ");
	cr_assert_str_eq(a, "  recipients not done: 230003", "%s", root.out.s);
	cr_assert_str_eq(b, a, "nobody's status:\n%s", user.out.s);
	free(a);
	free(b);
	tl_result_free(&root);
	tl_result_free(&user);
	buf_free(&r);
}

Test(showq, trouble_listed_and_exit_1_as_for_root)
{
	struct tl_result root, user;

	build_queue();
	qt_put(&q, "info/8/54", S("Fheld@example.org\0junk"), 1700000050);
	start_showq();
	run(0, "mailq", NULL, &root);
	run(1, "mailq", NULL, &user);
	cr_assert_eq(root.status, 1);
	cr_assert_eq(user.status, 1, "%s", buf_cstr(&user.err));
	cr_assert_str_eq(buf_cstr(&user.out), buf_cstr(&root.out));
	cr_assert(strstr(root.out.s, "warning: trouble with #54"), "%s", root.out.s);
	tl_result_free(&root);
	tl_result_free(&user);
}

Test(showq, bad_requests_refused_daemon_goes_on)
{
	struct buf a = BUF_INIT;
	char big[200];
	struct tl_result user;

	start_showq_t("1");
	ask_raw(S("bogus\n"), &a);
	cr_assert_str_eq(buf_cstr(&a),
	    "error unknown request \"bogus\" (want \"list\", \"json\" or \"summary\")\n");
	buf_reset(&a);
	memset(big, 'x', sizeof big);
	ask_raw(big, sizeof big, &a);
	cr_assert_str_eq(buf_cstr(&a), "error request longer than 64 bytes\n");
	buf_reset(&a);
	ask_raw(S("list\nlist\n"), &a);
	cr_assert_str_eq(buf_cstr(&a), "error bytes after the request line\n");
	buf_reset(&a);
	ask_raw(S("list"), &a);	/* then nothing: the deadline */
	cr_assert_str_eq(buf_cstr(&a), "error no request within 1000 ms\n");
	buf_reset(&a);
	ask_raw(S("list\n"), &a);
	cr_assert_str_eq(buf_cstr(&a), "ok 0 67\nmessages in queue: 0\n"
	    "messages in queue but not yet preprocessed: 0\n");
	buf_free(&a);
	run(1, "mailq", NULL, &user);
	cr_assert_eq(user.status, 0, "%s", buf_cstr(&user.err));
	tl_result_free(&user);
}

Test(showq, silent_clients_hold_up_others_only_until_the_deadline)
{
	struct sockaddr_un sa;
	struct tl_result user;
	int fds[4], i;
	char b[256];
	ssize_t r;
	uint64_t t0;

	build_queue();
	start_showq_t("1");
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	/* As many silent clients as weir-showq serves at once (its cap). */
	for (i = 0; i < 4; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert(fds[i] >= 0);
		cr_assert(connect(fds[i], (struct sockaddr *)&sa, sizeof sa) == 0);
	}
	t0 = clock_mono_ms();
	run(1, "mailq", NULL, &user);
	cr_assert_eq(user.status, 0, "%s", buf_cstr(&user.err));
	cr_assert(strstr(buf_cstr(&user.out), "messages in queue: 3\n"), "%s", user.out.s);
	/* Served once a silent client's deadline (1 s) freed a place; well
	 * before mailq's own 60 s. */
	cr_assert(clock_mono_ms() - t0 < 20000);
	for (i = 0; i < 4; i++) {
		struct buf a = BUF_INIT;

		while ((r = read(fds[i], b, sizeof b)) > 0)
			buf_add(&a, b, (size_t)r);
		cr_assert_str_eq(buf_cstr(&a), "error no request within 1000 ms\n");
		buf_free(&a);
		close(fds[i]);
	}
	tl_result_free(&user);
}

/*
 * Two copies, and the worst kill: a second weir-showq on the same socket
 * refuses to start (exit 111, naming the one serving) and the first goes
 * on answering; a weir-showq killed with -9 leaves its socket file, and
 * the next one removes it and serves (lib/unixlisten.c).
 */
Test(showq, second_copy_refused_killed_ones_socket_taken_over)
{
	char *bin = tl_bin("weir-showq");
	const char *argv[] = { bin, "-c", q.conf, NULL };
	struct tl_run second = { .argv = argv, .timeout_s = 30 };
	struct tl_result r;
	struct buf a = BUF_INIT;
	char *want = xasprintf("another weir-showq is serving %s", sock);

	build_queue();
	start_showq();
	tl_run(&second, &r);
	cr_assert_eq(r.status, 111, "the second copy: exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.err), want), "%s", buf_cstr(&r.err));
	tl_result_free(&r);
	ask_raw(S("list\n"), &a);
	cr_assert(strstr(buf_cstr(&a), "messages in queue: 3\n"), "the first copy: %s",
	    buf_cstr(&a));
	stop_showq();	/* kill -9 */
	cr_assert(access(sock, F_OK) == 0, "the killed copy's socket file is gone");
	start_showq();
	buf_reset(&a);
	ask_raw(S("list\n"), &a);
	cr_assert(strstr(buf_cstr(&a), "messages in queue: 3\n"), "after the takeover: %s",
	    buf_cstr(&a));
	buf_free(&a);
	free(want);
	free(bin);
}

Test(showq, not_running_says_so_and_exits_75)
{
	struct tl_result user;
	char *want;

	/* Never started: no socket file. */
	run(1, "mailq", NULL, &user);
	cr_assert_eq(user.status, EX_TEMPFAIL, "exit %d: %s", user.status, buf_cstr(&user.err));
	want = xasprintf("mailq: the queue listing is unavailable: weir is not running "
	    "(weir-showq: connect %s: No such file or directory)\n", sock);
	cr_assert_str_eq(buf_cstr(&user.err), want);
	cr_assert_eq(user.out.len, 0);
	free(want);
	tl_result_free(&user);

	/* Started, then killed: its socket file stays, nobody listens. */
	start_showq();
	stop_showq();
	run(1, "mailq", NULL, &user);
	cr_assert_eq(user.status, EX_TEMPFAIL, "exit %d: %s", user.status, buf_cstr(&user.err));
	want = xasprintf("mailq: the queue listing is unavailable: weir is not running "
	    "(weir-showq: connect %s: Connection refused)\n", sock);
	cr_assert_str_eq(buf_cstr(&user.err), want);
	free(want);
	tl_result_free(&user);

	/* weir queue: its own exit code for an unreadable queue, 2. */
	run(1, "weir", NULL, &user);
	cr_assert_eq(user.status, 2, "exit %d: %s", user.status, buf_cstr(&user.err));
	cr_assert(strstr(buf_cstr(&user.err), "the queue listing is unavailable: weir is not "
	    "running"), "%s", user.err.s);
	tl_result_free(&user);
}

Test(showq, off_means_the_queue_is_not_readable)
{
	struct tl_result user;

	write_conf("");	/* showq_socket = "": off */
	run(1, "mailq", NULL, &user);
	cr_assert_eq(user.status, EX_TEMPFAIL, "exit %d", user.status);
	cr_assert(strstr(buf_cstr(&user.err), "mailq: cannot open the queue ") &&
	    strstr(user.err.s, "Permission denied"), "%s", user.err.s);
	cr_assert(!strstr(user.err.s, "weir-showq"), "%s", user.err.s);
	tl_result_free(&user);
}

Test(showq, weir_run_starts_it)
{
	char *pol = xasprintf("%s/policy.conf", q.tmp), *bin = tl_bin("weir");
	char *c = xasprintf("queue_dir = \"%s\"\nqueue_split = 23\nshowq_socket = \"%s\"\n"
	    "gate_socket = \"%s/run/gate.sock\"\ngate_journal = \"%s/lib/gate.journal\"\n"
	    "policy_file = \"%s\"\n", q.qdir, sock, q.tmp, q.tmp, pol);
	const char *argv[] = { bin, "-c", q.conf, "run", NULL };
	struct tl_result root, user;
	int status;

	tl_write(pol, S("upstream \"*\" { rate = \"100 per 1s\" }\n"));
	qt_config(&q, c);
	/* A held message: weir-send, started too, leaves it as it is. */
	qt_put(&q, "mess/8/54", S("Subject: b\n\nbody\n"), 0);
	qt_put(&q, "info/8/54", S("Fheld@example.org\0"), 1700000050);
	qt_put(&q, "remote/8/54", S("Tdave@example.net\0"), 0);
	qt_put(&q, "hold/54", S("birth 1700000050\nsince 1700000060\n"), 0);
	spawn_until_serving(argv);
	run(1, "mailq", NULL, &user);
	run(0, "mailq", NULL, &root);
	cr_assert_eq(user.status, 0, "nobody's mailq: exit %d: %s", user.status,
	    buf_cstr(&user.err));
	cr_assert_str_eq(buf_cstr(&user.out), buf_cstr(&root.out));
	cr_assert(strstr(user.out.s, "#54  ") && strstr(user.out.s, ">  held\n"), "%s",
	    user.out.s);
	/* weir run stops it with the others. */
	cr_assert(kill(showq, SIGTERM) == 0);
	cr_assert(waitpid(showq, &status, 0) == showq);
	showq = -1;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "weir run: status %d", status);
	tl_result_free(&root);
	tl_result_free(&user);
	free(pol);
	free(bin);
	free(c);
}
