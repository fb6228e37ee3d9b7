/*
 * queue_test.c: weir-queue against its contract (qmail-queue(8)): the
 * real binary, a scratch queue, the bytes it leaves in mess/, todo/ and
 * intd/ checked one by one, every exit code that can be provoked without
 * root (some through the fault-injection shim, $WEIR_FAULTINJ), and 200
 * injections at once.  Faults at every step are in queue_faults_test.c.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "queue_helpers.h"

static struct qt q;

static void
setup(void)
{
	qt_setup(&q, 23, NULL);
}

static void
teardown(void)
{
	qt_teardown(&q);
}

TestSuite(queue, .init = setup, .fini = teardown, .timeout = 120);

/* Inject msg with envelope env; assert exit 0 and load the one message. */
static void
inject_ok(const char *msg, size_t msglen, const struct buf *env, struct qt_msg *m)
{
	struct tl_result r;
	time_t t0 = time(NULL), t1;

	qt_inject(&q, msg, msglen, env->s, env->len, NULL, &r);
	t1 = time(NULL);
	cr_assert_eq(r.status, 0, "exit %d; stderr: %s", r.status, buf_cstr(&r.err));
	cr_assert_eq(r.err.len, 0, "stderr on success: %s", buf_cstr(&r.err));
	qt_load_only(&q, t0, t1, m);
	tl_result_free(&r);
}

static void
assert_bytes(const struct buf *got, const char *want, size_t wlen, const char *what)
{
	size_t i;

	for (i = 0; i < got->len && i < wlen && got->s[i] == want[i]; i++)
		;
	cr_assert(got->len == wlen && i == wlen, "%s: %zu bytes, expected %zu; first difference at %zu",
	    what, got->len, wlen, i);
}

/* ---- formats ---- */

Test(queue, format_byte_by_byte)
{
	static const char msg[] = "Subject: hi\nTo: bob@example.net\n\nline one\r\nline two\n";
	static const char want_env[] = "Falice@example.org\0Tbob@example.net\0Tcarol@example.com\0";
	const char *rcpts[] = { "bob@example.net", "carol@example.com", NULL };
	struct buf env = BUF_INIT;
	struct qt_msg m;
	unsigned long *ids;

	qt_envelope(&env, "alice@example.org", rcpts);
	inject_ok(msg, sizeof msg - 1, &env, &m);
	assert_bytes(&m.body, msg, sizeof msg - 1, "mess body");
	/* no extra NUL at the end of todo */
	assert_bytes(&m.env, want_env, sizeof want_env - 1, "todo after u and p");
	cr_assert_eq(qt_list(&q, "pid", &ids), 0, "pid/ is not empty");
	free(ids);
	qt_msg_free(&m);
	buf_free(&env);
}

Test(queue, trigger_gets_a_byte)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;
	struct qt_msg m;
	char *fifo = qt_path(&q, "lock/trigger"), c;
	int fd = open(fifo, O_RDONLY | O_NONBLOCK);

	cr_assert(fd >= 0, "open %s: %s", fifo, strerror(errno));
	qt_envelope(&env, "a@b", rcpts);
	inject_ok("x\n", 2, &env, &m);
	cr_assert_eq(read(fd, &c, 1), 1, "nothing written to lock/trigger");
	close(fd);
	qt_msg_free(&m);
	buf_free(&env);
	free(fifo);
}

/* The trigger write must not block: a reader that never reads, FIFO full. */
Test(queue, full_trigger_does_not_block)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;
	struct qt_msg m;
	char *fifo = qt_path(&q, "lock/trigger"), junk[4096];
	int rfd = open(fifo, O_RDONLY | O_NONBLOCK), wfd;

	cr_assert(rfd >= 0, "open %s: %s", fifo, strerror(errno));
	wfd = open(fifo, O_WRONLY | O_NONBLOCK);
	cr_assert(wfd >= 0, "open %s: %s", fifo, strerror(errno));
	memset(junk, 'x', sizeof junk);
	while (write(wfd, junk, sizeof junk) > 0)
		;
	while (write(wfd, junk, 1) > 0)
		;
	cr_assert_eq(errno, EAGAIN);
	qt_envelope(&env, "a@b", rcpts);
	inject_ok("x\n", 2, &env, &m);	/* exit 0, within tl_run's timeout */
	close(wfd);
	close(rfd);
	qt_msg_free(&m);
	buf_free(&env);
	free(fifo);
}

Test(queue, empty_sender)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;
	struct qt_msg m;

	qt_envelope(&env, "", rcpts);
	cr_assert_eq(memcmp(env.s, "F\0T", 3), 0);
	inject_ok("bounce\n", 7, &env, &m);
	assert_bytes(&m.env, "F\0Tbob@example.net\0", 19, "todo");
	qt_msg_free(&m);
	buf_free(&env);
}

Test(queue, thousand_recipients_in_order)
{
	struct buf env = BUF_INIT, want = BUF_INIT;
	struct qt_msg m;
	char a[64];
	int i;

	qt_env_start(&env, "list@example.org");
	buf_add(&want, "Flist@example.org", 18);
	for (i = 0; i < 1000; i++) {
		snprintf(a, sizeof a, "member%04d@example%d.net", i, i % 7);
		qt_env_rcpt(&env, a);
		buf_addc(&want, 'T');
		buf_add(&want, a, strlen(a) + 1);
	}
	qt_env_end(&env);
	inject_ok("list mail\n", 10, &env, &m);
	assert_bytes(&m.env, want.s, want.len, "todo with 1000 recipients");
	qt_msg_free(&m);
	buf_free(&env);
	buf_free(&want);
}

/* An address of exactly n bytes. */
static char *
addr_of(size_t n)
{
	char *a = xmalloc(n + 1);

	memset(a, 'a', n);
	memcpy(a + n - 12, "@example.org", 12);
	a[n] = '\0';
	return a;
}

Test(queue, address_of_1002_bytes_accepted)
{
	char *a = addr_of(1002);
	const char *rcpts[] = { a, "bob@example.net", NULL };
	struct buf env = BUF_INIT, want = BUF_INIT;
	struct qt_msg m;

	qt_envelope(&env, a, rcpts);
	inject_ok("x\n", 2, &env, &m);
	buf_addc(&want, 'F');
	buf_add(&want, a, 1003);
	buf_addc(&want, 'T');
	buf_add(&want, a, 1003);
	buf_add(&want, "Tbob@example.net", 17);
	assert_bytes(&m.env, want.s, want.len, "todo");
	qt_msg_free(&m);
	buf_free(&env);
	buf_free(&want);
	free(a);
}

Test(queue, binary_body_kept_exactly)
{
	char body[1024 + 5];
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;
	struct qt_msg m;
	int i;

	for (i = 0; i < 1024; i++)
		body[i] = (char)(i % 256);
	memcpy(body + 1024, "\0\r\r\n.", 5);	/* NUL, bare CR, no final LF */
	qt_envelope(&env, "a@b", rcpts);
	inject_ok(body, sizeof body, &env, &m);
	assert_bytes(&m.body, body, sizeof body, "binary body");
	qt_msg_free(&m);
	buf_free(&env);
}

Test(queue, empty_message)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;
	struct qt_msg m;

	qt_envelope(&env, "a@b", rcpts);
	inject_ok("", 0, &env, &m);
	cr_assert_eq(m.body.len, 0, "empty message: %zu bytes after Received", m.body.len);
	qt_msg_free(&m);
	buf_free(&env);
}

Test(queue, ten_megabytes)
{
	size_t n = 10 * 1024 * 1024, i;
	char *body = xmalloc(n);
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;
	struct qt_msg m;

	for (i = 0; i < n; i++)
		body[i] = (i % 77 == 76) ? '\n' : (char)('A' + (i * 7 + i / 77) % 26);
	qt_envelope(&env, "a@b", rcpts);
	inject_ok(body, n, &env, &m);
	assert_bytes(&m.body, body, n, "10 MB body");
	qt_msg_free(&m);
	buf_free(&env);
	free(body);
}

Test(queue, nothing_past_the_terminator_is_used)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;
	struct qt_msg m;

	qt_envelope(&env, "a@b", rcpts);
	buf_add(&env, "Tevil@example.com\0\0garbage", 26);
	inject_ok("x\n", 2, &env, &m);
	assert_bytes(&m.env, "Fa@b\0Tbob@example.net\0", 22, "todo");
	qt_msg_free(&m);
	buf_free(&env);
}

/* queue_split and queue_dir from the config file, WEIR_QUEUE unset. */
Test(queue, split_7_from_config)
{
	struct qt q7;
	struct buf env = BUF_INIT;
	const char *rcpts[] = { "bob@example.net", NULL };
	struct tl_result r;
	struct qt_msg m;
	time_t t0 = time(NULL);
	char *m7;
	struct stat st;

	qt_setup(&q7, 7, NULL);
	free(q7.envs[0]);		/* no WEIR_QUEUE: the config's queue_dir */
	q7.envs[0] = NULL;
	qt_envelope(&env, "a@b", rcpts);
	qt_inject(&q7, "x\n", 2, env.s, env.len, NULL, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, buf_cstr(&r.err));
	qt_load_only(&q7, t0, time(NULL), &m);	/* looks in mess/<id % 7>/ */
	m7 = qt_path(&q7, "mess/7");
	cr_assert(stat(m7, &st) < 0, "mess/7 exists with queue_split = 7");
	qt_msg_free(&m);
	tl_result_free(&r);
	buf_free(&env);
	free(m7);
	qt_teardown(&q7);
}

Test(queue, weir_queue_env_wins_over_config)
{
	struct qt other;
	struct buf env = BUF_INIT, conf = BUF_INIT;
	const char *rcpts[] = { "bob@example.net", NULL };
	struct tl_result r;
	struct qt_msg m;
	time_t t0 = time(NULL);

	/* q's config names another, valid queue; WEIR_QUEUE names q's. */
	qt_setup(&other, 23, NULL);
	buf_printf(&conf, "queue_dir = \"%s\"\n", other.qdir);
	qt_config(&q, conf.s);
	qt_envelope(&env, "a@b", rcpts);
	qt_inject(&q, "x\n", 2, env.s, env.len, NULL, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, buf_cstr(&r.err));
	qt_load_only(&q, t0, time(NULL), &m);
	qt_assert_clean(&other, "the config's queue");
	qt_msg_free(&m);
	tl_result_free(&r);
	buf_free(&env);
	buf_free(&conf);
	qt_teardown(&other);
}

/* qmail-queue takes no arguments and ignores any it is given, and so
 * does weir-queue (weir-queue(8), "Where the queue is"): a caller made
 * for qmail-queue (a QMAILQUEUE wrapper that passes its own argv on)
 * must not get a temporary failure for them, and -c in particular
 * cannot move the queue.  (The page once said any argument gives 81.) */
Test(queue, arguments_ignored)
{
	char *bin = tl_bin("weir-queue"), *elsewhere = xasprintf("%s/none.conf", q.tmp);
	const char *argv[] = { bin, "-c", elsewhere, "-x", "extra", NULL };
	const char *rcpts[] = { "bob@example.net", NULL };
	const char *envv[10];
	struct buf env = BUF_INIT;
	struct tl_run run;
	struct tl_result r;
	struct qt_msg m;
	time_t t0 = time(NULL);
	int i, n = 0;

	for (i = 0; i < 8; i++)
		if (q.envs[i])
			envv[n++] = q.envs[i];
	envv[n] = NULL;
	qt_envelope(&env, "a@b", rcpts);
	memset(&run, 0, sizeof run);
	run.argv = argv;
	run.env = envv;
	run.in = "Subject: x\n\nbody\n";
	run.inlen = strlen(run.in);
	run.fd1in = env.s;
	run.fd1len = env.len;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert_eq(r.err.len, 0, "stderr: %s", buf_cstr(&r.err));
	qt_load_only(&q, t0, time(NULL), &m);
	qt_msg_free(&m);
	tl_result_free(&r);
	buf_free(&env);
	free(bin);
	free(elsewhere);
}

/* ---- exit codes ---- */

/* Inject a small message with the raw envelope e (length n) and the
 * extra environment (or NULL); expect code and a clean queue. */
static void
expect_code_env(const char *e, size_t n, const char *const *extra, int code, const char *what)
{
	struct tl_result r;

	qt_inject(&q, "Subject: x\n\nbody\n", 17, e, n, extra, &r);
	qt_assert_fails(&q, &r, code, what);
	tl_result_free(&r);
}

static void
expect_env_code(const char *e, size_t n, int code, const char *what)
{
	expect_code_env(e, n, NULL, code, what);
}

/* The same with a well-formed envelope. */
static void
expect_code(const char *const *extra, int code, const char *what)
{
	static const char good[] = "Fa@b\0Tbob@example.net\0\0";

	expect_code_env(good, sizeof good - 1, extra, code, what);
}

Test(queue, exit_11_sender_1003_bytes)
{
	char *a = addr_of(1003);
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;

	qt_envelope(&env, a, rcpts);
	expect_env_code(env.s, env.len, 11, "1003-byte sender");
	buf_free(&env);
	free(a);
}

Test(queue, exit_11_recipient_1003_bytes)
{
	char *a = addr_of(1003);
	const char *rcpts[] = { "bob@example.net", a, NULL };
	struct buf env = BUF_INIT;

	qt_envelope(&env, "a@b", rcpts);
	expect_env_code(env.s, env.len, 11, "1003-byte recipient");
	buf_free(&env);
	free(a);
}

Test(queue, exit_52_timeout)
{
	static const char conf_fmt[] = "queue_dir = \"%s\"\ninject_timeout = \"1s\"\n";
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT, conf = BUF_INIT;
	struct tl_result r;
	time_t t0 = time(NULL);

	buf_printf(&conf, conf_fmt, q.qdir);
	qt_config(&q, conf.s);
	qt_envelope(&env, "a@b", rcpts);
	qt_inject_ex(&q, "Subject: half a message\n", 24, env.s, env.len, NULL, 1, &r);
	qt_assert_fails(&q, &r, 52, "fd 0 never reaches end of file");
	cr_assert(time(NULL) - t0 < 20, "took %ld s for a 1 s timeout", (long)(time(NULL) - t0));
	tl_result_free(&r);
	buf_free(&env);
	buf_free(&conf);
}

/* Inject a small message with WEIR_FAULT=fault; expect code. */
static void
expect_fault_code(const char *fault, int code)
{
	const char *shim = qt_faultinj();
	char *pre, *f;

	if (shim == NULL)
		cr_skip_test("no $WEIR_FAULTINJ (run through tests/run.sh)");
	pre = xasprintf("LD_PRELOAD=%s", shim);
	f = xasprintf("WEIR_FAULT=%s", fault);
	{
		const char *extra[] = { pre, f, NULL };

		expect_code(extra, code, fault);
	}
	free(pre);
	free(f);
}

Test(queue, exit_53_write_enospc) { expect_fault_code("write=1:ENOSPC", 53); }
Test(queue, exit_53_write_edquot) { expect_fault_code("write=1:EDQUOT", 53); }
Test(queue, exit_53_intd_write_eio) { expect_fault_code("write@/intd/=1:EIO", 53); }
Test(queue, exit_53_first_fsync_eio) { expect_fault_code("fsync=1:EIO", 53); }
Test(queue, exit_53_intd_fsync_eio) { expect_fault_code("fsync@/intd/=1:EIO", 53); }

Test(queue, exit_54_empty_envelope)
{
	expect_env_code("", 0, 54, "envelope: end of file right away");
}

Test(queue, exit_54_truncated_envelope)
{
	expect_env_code("Fa@b\0Tbob@example.net\0", 22, 54, "envelope without the final NUL");
}

Test(queue, exit_54_truncated_inside_address)
{
	expect_env_code("Fa@b\0Tbob@exam", 14, 54, "envelope ends inside an address");
}

/* The first read of a pipe: the message (the config file is read first). */
Test(queue, exit_54_read_error) { expect_fault_code("read@pipe:=1:EIO", 54); }

/* A config problem: exit 55 whatever the queue. */
static void
expect_config_55(const char *text, const char *what)
{
	if (text)
		qt_config(&q, text);
	expect_code(NULL, 55, what);
}

Test(queue, exit_55_syntax) { expect_config_55("queue_dir = \"/x\n{{{ =\n", "syntax error"); }

/* A mistake that leaves the queue's place known: one warning line, and
 * queued (weir.conf(5): errors and the injectors). */
static void
expect_config_warning(const char *text, const char *what)
{
	static const char good[] = "Fa@b\0Tbob@example.net\0\0";
	struct tl_result r;
	unsigned long *ids;

	qt_config(&q, text);
	qt_inject(&q, "Subject: x\n\nbody\n", 17, good, sizeof good - 1, NULL, &r);
	cr_assert_eq(r.status, 0, "%s: exit %d: %s", what, r.status, buf_cstr(&r.err));
	cr_assert(strncmp(buf_cstr(&r.err), "weir-queue: warning: ", 21) == 0 &&
	    strchr(r.err.s, '\n') == r.err.s + r.err.len - 1, "%s: %s", what, r.err.s);
	cr_assert_eq(qt_list(&q, "todo", &ids), 1u, "%s: not queued", what);
	free(ids);
	tl_result_free(&r);
}

Test(queue, unknown_key_only_warns) { expect_config_warning("no_such_key = 3\n", "unknown key"); }
Test(queue, bad_timeout_only_warns)
{
	expect_config_warning("inject_timeout = \"soon\"\n", "bad duration");
}
Test(queue, exit_55_split_zero) { expect_config_55("queue_split = 0\n", "queue_split 0"); }

Test(queue, exit_55_config_is_a_folder)
{
	free(q.envs[1]);
	q.envs[1] = xasprintf("WEIR_CONFIG=%s", q.tmp);
	expect_config_55(NULL, "config file is a folder");
}

Test(queue, exit_55_config_missing)
{
	free(q.envs[1]);
	q.envs[1] = xasprintf("WEIR_CONFIG=%s/no-such.conf", q.tmp);
	expect_config_55(NULL, "$WEIR_CONFIG names no file");
}

Test(queue, exit_62_no_queue_dir)
{
	free(q.envs[0]);
	q.envs[0] = xasprintf("WEIR_QUEUE=%s/absent", q.tmp);
	expect_code(NULL, 62, "queue folder missing");
}

Test(queue, exit_62_queue_dir_is_a_file)
{
	free(q.envs[0]);
	q.envs[0] = xasprintf("WEIR_QUEUE=%s", q.conf);
	expect_code(NULL, 62, "queue folder is a file");
}

/* Replace a folder by a file and expect code. */
static void
expect_folder_code(const char *folder, int code)
{
	qt_replace_with_file(&q, folder);
	expect_code(NULL, code, folder);
}

Test(queue, exit_63_pid_is_a_file) { expect_folder_code("pid", 63); }
Test(queue, exit_64_mess_is_a_file) { expect_folder_code("mess", 64); }
Test(queue, exit_65_intd_is_a_file) { expect_folder_code("intd", 65); }
Test(queue, exit_66_todo_is_a_file) { expect_folder_code("todo", 66); }

Test(queue, exit_63_pid_create_fails)
{
	expect_fault_code("open@/pid/=1:EACCES,openat@/pid/=1:EACCES", 63);
}

Test(queue, exit_64_mess_rename_fails)
{
	expect_fault_code("rename@/mess/=1:EACCES,renameat@/mess/=1:EACCES,"
	    "link@/mess/=1:EACCES,linkat@/mess/=1:EACCES", 64);
}

Test(queue, exit_65_intd_create_fails)
{
	expect_fault_code("open@/intd/=1:EACCES,openat@/intd/=1:EACCES", 65);
}

Test(queue, exit_66_todo_link_fails)
{
	expect_fault_code("link@/todo/=1:EMLINK,linkat@/todo/=1:EMLINK", 66);
}

Test(queue, exit_91_first_byte_not_F)
{
	expect_env_code("Xa@b\0Tbob@example.net\0\0", 24, 91, "first byte not F");
}

Test(queue, exit_91_record_not_T)
{
	expect_env_code("Fa@b\0Xbob@example.net\0\0", 24, 91, "record not starting with T");
}

Test(queue, exit_91_second_F)
{
	expect_env_code("Fa@b\0Fc@d\0Tbob@example.net\0\0", 29, 91, "second F record");
}

Test(queue, exit_91_no_recipient)
{
	expect_env_code("Fa@b\0\0", 6, 91, "no recipient");
}

Test(queue, exit_91_control_bytes)
{
	static const char ctl[] = { '\r', '\n', '\001', '\037', '\177', '\t' };
	size_t i;

	for (i = 0; i < sizeof ctl; i++) {
		struct buf env = BUF_INIT;
		char what[64];

		/* in the sender */
		buf_add(&env, "Fa", 2);
		buf_addc(&env, ctl[i]);
		buf_add(&env, "@b\0Tbob@example.net\0\0", 21);
		snprintf(what, sizeof what, "byte 0x%02x in the sender", (unsigned char)ctl[i]);
		expect_env_code(env.s, env.len, 91, what);
		/* in the second recipient */
		buf_reset(&env);
		buf_add(&env, "Fa@b\0Tbob@example.net\0Tc", 24);
		buf_addc(&env, ctl[i]);
		buf_add(&env, "@d\0\0", 4);
		snprintf(what, sizeof what, "byte 0x%02x in a recipient", (unsigned char)ctl[i]);
		expect_env_code(env.s, env.len, 91, what);
		buf_free(&env);
	}
}

/* ---- 200 at once ---- */

#define NPAR 200

/* Start weir-queue on a small message; the pipes are filled before the
 * exec (both fit in a pipe buffer), so no driver process is needed.
 * With keep_open, fd 0 stays open (its write end in *keep_open).  As uid
 * (and gid uid) unless uid is -1. */
static pid_t
start_as(const char *bin, const char *body, const struct buf *env, const char *errpath,
    int *keep_open, uid_t uid)
{
	int m[2], e[2], errfd;
	pid_t pid;

	cr_assert(pipe(m) == 0 && pipe(e) == 0);
	cr_assert(write(m[1], body, strlen(body)) == (ssize_t)strlen(body));
	cr_assert(write(e[1], env->s, env->len) == (ssize_t)env->len);
	if (keep_open)
		*keep_open = m[1];
	else
		close(m[1]);
	close(e[1]);
	errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert(errfd >= 0);
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(m[0], 0);
		dup2(e[0], 1);
		dup2(errfd, 2);
		for (int i = 3; i < 64; i++)
			close(i);
		putenv(q.envs[0]);
		putenv(q.envs[1]);
		if (uid != (uid_t)-1 && (setgroups(0, NULL) < 0 || setgid(uid) < 0 ||
		    setuid(uid) < 0))
			_exit(126);
		execl(bin, bin, (char *)NULL);
		_exit(127);
	}
	close(m[0]);
	close(e[0]);
	close(errfd);
	return pid;
}

static pid_t
start_one(const char *bin, const char *body, const struct buf *env, const char *errpath,
    int *keep_open)
{
	return start_as(bin, body, env, errpath, keep_open, (uid_t)-1);
}

Test(queue, two_hundred_at_once)
{
	char *bin = tl_bin("weir-queue");
	char *bodies[NPAR];
	pid_t pids[NPAR];
	int seen[NPAR] = { 0 };
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT;
	unsigned long *ids;
	time_t t0 = time(NULL), t1;
	size_t n, i;
	int k, status;

	qt_envelope(&env, "par@example.org", rcpts);
	for (k = 0; k < NPAR; k++) {
		char *errpath = xasprintf("%s/err.%d", q.tmp, k);

		bodies[k] = xasprintf("Subject: parallel %d\n\nbody number %d of %d\n", k, k, NPAR);
		pids[k] = start_one(bin, bodies[k], &env, errpath, NULL);
		free(errpath);
	}
	for (k = 0; k < NPAR; k++) {
		cr_assert(waitpid(pids[k], &status, 0) == pids[k]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			char *errpath = xasprintf("%s/err.%d", q.tmp, k);
			struct buf err = BUF_INIT;

			tl_read(errpath, &err);
			cr_assert_fail("injection %d: status 0x%x: %s", k, status, buf_cstr(&err));
		}
	}
	t1 = time(NULL);
	n = qt_list(&q, "todo", &ids);
	cr_assert_eq(n, NPAR, "%zu files in todo/, expected %d", n, NPAR);
	for (i = 0; i < n; i++) {
		struct qt_msg m;
		int found = -1;

		cr_assert(i == 0 || ids[i] != ids[i - 1], "id %lu twice", ids[i]);
		qt_load(&q, ids[i], t0, t1, &m);
		assert_bytes(&m.env, "Fpar@example.org\0Tbob@example.net\0", 34, "todo");
		for (k = 0; k < NPAR; k++)
			if (m.body.len == strlen(bodies[k]) &&
			    memcmp(m.body.s, bodies[k], m.body.len) == 0)
				found = k;
		cr_assert(found >= 0, "message %lu: body matches no injection", ids[i]);
		cr_assert_eq(seen[found], 0, "body %d queued twice", found);
		seen[found] = 1;
		/* the p record names the process that injected it */
		cr_assert_eq(m.pid, (unsigned long)pids[found], "message %lu: p%lu, injected by %ld",
		    ids[i], m.pid, (long)pids[found]);
		qt_msg_free(&m);
	}
	free(ids);
	n = qt_list(&q, "pid", &ids);
	cr_assert_eq(n, 0, "pid/ not empty after 200 injections");
	free(ids);
	for (k = 0; k < NPAR; k++)
		free(bodies[k]);
	buf_free(&env);
	free(bin);
}

/* How many bytes written into the pipe of which fd is an end are still
 * unread (FIONREAD answers on either end). */
static int
unread(int fd)
{
	int n;

	cr_assert(ioctl(fd, FIONREAD, &n) == 0, "FIONREAD: %s", strerror(errno));
	return n;
}

/* A crash (here a SIGSEGV from outside, mid-message) is exit 81, one
 * line on stderr, and nothing left behind. */
Test(queue, exit_81_crash_mid_message)
{
	char *bin = tl_bin("weir-queue"), *errpath = xasprintf("%s/err", q.tmp);
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT, err = BUF_INIT;
	struct timespec ms = { 0, 1000000 };
	int wfd, status, i;
	pid_t pid;

	qt_envelope(&env, "a@b", rcpts);
	pid = start_one(bin, "Subject: never finished\n", &env, errpath, &wfd);
	/* Until it has read what the message has so far: it reads fd 0 only
	 * once pid/ is linked to mess/ and unlinked (a listing taken in
	 * between can miss both names). */
	for (i = 0; i < 5000 && unread(wfd) > 0; i++)
		nanosleep(&ms, NULL);
	cr_assert_eq(unread(wfd), 0, "weir-queue did not read the message in 5 s");
	cr_assert(qt_leftovers(&q) > 0, "weir-queue made no file");
	cr_assert(kill(pid, SIGSEGV) == 0);
	cr_assert(waitpid(pid, &status, 0) == pid);
	close(wfd);
	tl_read(errpath, &err);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 81,
	    "SIGSEGV: status 0x%x, expected exit 81; stderr: %s", status, buf_cstr(&err));
	{
		struct tl_result r = { .status = 81, .err = err };

		qt_assert_fails(&q, &r, 81, "crash mid-message");
	}
	buf_free(&err);
	buf_free(&env);
	free(errpath);
	free(bin);
}

/* Another caller's uid is in the Received line and the u record. */
Test(queue, uid_of_the_caller)
{
	char *bin = tl_bin("weir-queue"), *errpath = xasprintf("%s/err", q.tmp);
	char *cmd = xasprintf("chown -R 65534:65534 '%s' && chmod 0755 '%s'", q.qdir, q.tmp);
	const char *rcpts[] = { "bob@example.net", NULL };
	struct buf env = BUF_INIT, err = BUF_INIT;
	struct qt_msg m;
	time_t t0 = time(NULL);
	int status;
	pid_t pid;

	if (!tl_is_root())
		cr_skip_test("needs root to run weir-queue as another user");
	cr_assert(system(cmd) == 0, "%s", cmd);
	qt_envelope(&env, "a@b", rcpts);
	pid = start_as(bin, "from nobody\n", &env, errpath, NULL, 65534);
	cr_assert(waitpid(pid, &status, 0) == pid);
	tl_read(errpath, &err);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "as uid 65534: status 0x%x: %s",
	    status, buf_cstr(&err));
	q.uid = 65534;
	qt_load_only(&q, t0, time(NULL), &m);
	qt_msg_free(&m);
	buf_free(&env);
	buf_free(&err);
	free(cmd);
	free(errpath);
	free(bin);
}
