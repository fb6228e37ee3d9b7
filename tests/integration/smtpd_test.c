/*
 * smtpd_test.c: the real weir-smtpd, queueing through the real
 * weir-queue into a scratch queue, against real clients: raw bytes over a
 * socketpair (weir-smtpd per connection, the client address given as
 * $TCPREMOTEIP as tcpserver does), swaks (--pipe), and Python's smtplib
 * against the listener (weir-smtpd -l) on a port the kernel picks.
 *
 * What is queued is checked in the queue itself (todo/ and mess/, byte by
 * byte through queue_helpers).  Every process started is killed and
 * reaped in teardown: a per-connection weir-smtpd by the test, a listener
 * (or `weir run`) with its whole process group; each also dies with the
 * test (PR_SET_PDEATHSIG).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
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
#include "mail/queue.h"
#include "queue_helpers.h"
#include "testlib.h"

static struct qt q;
static pid_t listener = -1;
static int listener_err = -1;	/* its stderr, to learn the port */
static unsigned port;
static time_t t0;
static const char *top_conf = "";	/* start_listener_at's keys outside listen */

static void
setup_with(const char *extra)
{
	char *libexec = xstrdup(getenv("WEIR_BIN"));

	qt_setup(&q, 23, extra);
	setenv("WEIR_CONFIG", q.conf, 1);
	setenv("WEIR_LIBEXEC", libexec, 1);
	unsetenv("WEIR_QUEUE");
	unsetenv("QMAILQUEUE");
	unsetenv("REMOTE_ADDR");
	setenv("TCPREMOTEIP", "127.0.0.1", 1);
	free(libexec);
	t0 = time(NULL);
}

static void
setup(void)
{
	setup_with("hostname = \"mx.test\"\nlisten {\n timeout = \"5s\"\n}\n");
}

static void
teardown(void)
{
	if (listener > 0) {
		/* Its own process group: the sessions and their weir-queue too. */
		kill(-listener, SIGKILL);
		while (waitpid(listener, NULL, 0) < 0 && errno == EINTR)
			;
		listener = -1;
	}
	if (listener_err >= 0)
		close(listener_err);
	listener_err = -1;
	qt_teardown(&q);
}

/* Rewrite the config: the queue, hostname, then text. */
static void
reconfig(const char *text)
{
	char *c = xasprintf("queue_dir = \"%s\"\nhostname = \"mx.test\"\n%s", q.qdir, text);

	qt_config(&q, c);
	free(c);
}

TestSuite(smtpd, .init = setup, .fini = teardown, .timeout = 60);

/* ---- weir-smtpd per connection on a socketpair ---- */

struct sess {
	pid_t pid;
	int fd;			/* our end */
	struct buf out;		/* everything the server said */
	size_t mark;		/* out up to here was seen by sess_wait_reply */
};

static void
sess_start(struct sess *s)
{
	int sv[2];
	char *bin = tl_bin("weir-smtpd");

	memset(s, 0, sizeof *s);
	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	s->pid = fork();
	cr_assert(s->pid >= 0);
	if (s->pid == 0) {
		char *errpath = xasprintf("%s/smtpd.err", q.tmp);
		int e = open(errpath, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0 || e < 0 || dup2(e, 2) < 0)
			_exit(126);
		execl(bin, "weir-smtpd", (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	s->fd = sv[0];
	free(bin);
}

/* Read until the output ends with a new final reply line (code + space,
 * past what the last call saw); 0 got one, -1 EOF or timeout. */
static int
sess_wait_reply(struct sess *s)
{
	for (;;) {
		char b[4096];
		struct pollfd p = { s->fd, POLLIN, 0 };
		ssize_t r;
		size_t start;

		/* The last complete line: a final reply? */
		if (s->out.len > s->mark && s->out.s[s->out.len - 1] == '\n') {
			start = s->out.len - 1;
			while (start > s->mark && s->out.s[start - 1] != '\n')
				start--;
			if (s->out.len - start >= 4 && s->out.s[start + 3] == ' ') {
				s->mark = s->out.len;
				return 0;
			}
		}
		if (poll(&p, 1, 15000) <= 0)
			return -1;
		r = read(s->fd, b, sizeof b);
		if (r <= 0)
			return -1;
		buf_add(&s->out, b, (size_t)r);
	}
}

static void
sess_send(struct sess *s, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(s->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;		/* the server closed: its replies tell */
		p += w;
		n -= (size_t)w;
	}
}

/* Close our sending side, read everything, reap: the exit status. */
static int
sess_end(struct sess *s)
{
	char b[4096];
	ssize_t r;
	int status;

	shutdown(s->fd, SHUT_WR);
	for (;;) {
		struct pollfd p = { s->fd, POLLIN, 0 };

		if (poll(&p, 1, 20000) <= 0)
			break;
		r = read(s->fd, b, sizeof b);
		if (r <= 0)
			break;
		buf_add(&s->out, b, (size_t)r);
	}
	close(s->fd);
	while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A whole session: wait for the greeting, send in, read to the end. */
static int
converse(const char *in, size_t n, struct buf *out)
{
	struct sess s;
	int rc;

	sess_start(&s);
	cr_assert_eq(sess_wait_reply(&s), 0, "no greeting");
	cr_assert(strncmp(s.out.s, "220 mx.test ESMTP", 17) == 0, "greeting: %s", s.out.s);
	sess_send(&s, in, n);
	rc = sess_end(&s);
	*out = s.out;
	return rc;
}

static size_t
todo_count(void)
{
	unsigned long *ids = NULL;
	size_t n = qt_list(&q, "todo", &ids);

	free(ids);
	return n;
}

/* The one queued message: our Received lines, then body; envelope env. */
static void
assert_one_message(const char *body, const char *env, size_t envlen)
{
	struct qt_msg m;
	const char *p;
	int lines = 0;

	qt_load_only(&q, t0, time(NULL) + 1, &m);
	cr_assert(strncmp(m.body.s, "Received: from ", 15) == 0, "no Received: %s", m.body.s);
	cr_assert(strstr(m.body.s, "([127.0.0.1])\n\tby mx.test (weir-smtpd) with ESMTP;\n\t") != NULL,
	    "Received: %s", m.body.s);
	for (p = m.body.s; lines < 3 && (p = strchr(p, '\n')) != NULL; p++)
		lines++;
	cr_assert(p != NULL);
	cr_assert_str_eq(p, body);
	cr_assert_eq(m.env.len, envlen, "envelope length %zu", m.env.len);
	cr_assert(memcmp(m.env.s, env, envlen) == 0);
	qt_msg_free(&m);
}

static int
has(const struct buf *b, const char *needle)
{
	return b->s && strstr(b->s, needle) != NULL;
}

/* "250 2.0.0 Ok: queued as ID" (mail/queue.h) then "\r\n" and after. */
static int
queued_as(const struct buf *b, const char *after)
{
	const char *p = b->s ? strstr(b->s, "250 2.0.0 Ok: queued as ") : NULL;
	char id[QUEUE_ID_MAX];
	struct timespec t;
	unsigned long ino;
	size_t n;

	if (p == NULL)
		return 0;
	p += strlen("250 2.0.0 Ok: queued as ");
	if ((n = strspn(p, "0123456789.")) == 0 || n >= sizeof id)
		return 0;
	memcpy(id, p, n);
	id[n] = '\0';
	return queue_parse_msgid(id, &ino, &t) == 0 && strncmp(p + n, "\r\n", 2) == 0 &&
	    strncmp(p + n + 2, after, strlen(after)) == 0;
}

#define ENV1 "Fa@b.example\0Tc@d.example\0"

/* ---- basics ---- */

Test(smtpd, one_message_queued_dot_unstuffed_lf_lines)
{
	static const char in[] =
	    "EHLO client.test\r\n"
	    "MAIL FROM:<a@b.example> SIZE=100 BODY=8BITMIME\r\n"
	    "RCPT TO:<c@d.example>\r\n"
	    "DATA\r\n"
	    "Subject: hi\r\n\r\n..leading dot\r\nline\r\n.\r\n"
	    "QUIT\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert(has(&out, "250-PIPELINING\r\n250-SIZE 26214400\r\n250-8BITMIME\r\n"
	    "250 ENHANCEDSTATUSCODES\r\n"), "%s", out.s);
	cr_assert(has(&out, "354 "), "%s", out.s);
	cr_assert(queued_as(&out, "221 2.0.0"), "%s", out.s);
	assert_one_message("Subject: hi\n\n.leading dot\nline\n", ENV1, sizeof ENV1 - 1);
	buf_free(&out);
}

Test(smtpd, pipelined_two_messages_null_sender_postmaster)
{
	static const char in[] =
	    "EHLO client.test\r\n"
	    "MAIL FROM:<>\r\nRCPT TO:<Postmaster>\r\nRCPT TO:<x@y.example>\r\nDATA\r\n"
	    "a\r\n.\r\n"
	    "MAIL FROM:<s@t.example>\r\nRCPT TO:<u@v.example>\r\nDATA\r\n"
	    "b\r\n.\r\nQUIT\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert_eq(todo_count(), 2, "%s", out.s);
	buf_free(&out);
}

Test(smtpd, commands_out_of_order_and_syntax)
{
	static const char in[] =
	    "MAIL FROM:<a@b.example>\r\n"		/* before EHLO */
	    "HELO\r\n"					/* no name */
	    "HELO client.test\r\n"
	    "RCPT TO:<c@d.example>\r\n"			/* before MAIL */
	    "DATA\r\n"					/* before MAIL */
	    "MAIL FROM:a@b.example\r\n"			/* no <> */
	    "MAIL FROM:<a@b.example> FOO=1\r\n"		/* unknown parameter */
	    "MAIL FROM:<a@b.example>\r\n"
	    "MAIL FROM:<a@b.example>\r\n"		/* nested */
	    "DATA\r\n"					/* no RCPT */
	    "VRFY someone\r\n"
	    "NOOP\r\n"
	    "RSET\r\n"
	    "FROB\r\n"
	    "QUIT\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert(has(&out, "503 5.5.1 Send EHLO or HELO first\r\n501 5.5.4 HELO needs a host name\r\n"
	    "250 mx.test\r\n503 5.5.1 Need MAIL before RCPT\r\n503 5.5.1 Need MAIL before DATA\r\n"
	    "553 5.1.7 Bad sender address: the address must be in <>\r\n"), "%s", out.s);
	cr_assert(has(&out, "555 5.5.4 Unsupported MAIL parameter\r\n250 2.1.0 Ok\r\n"
	    "503 5.5.1 Nested MAIL command\r\n503 5.5.1 Need RCPT before DATA\r\n"
	    "252 2.0.0 "), "%s", out.s);
	cr_assert(has(&out, "500 5.5.2 Command not recognized\r\n221 2.0.0 mx.test Bye\r\n"),
	    "%s", out.s);
	cr_assert_eq(todo_count(), 0);
	buf_free(&out);
}

Test(smtpd, too_many_errors_closes)
{
	struct buf in = BUF_INIT, out;
	int i;

	for (i = 0; i < 12; i++)
		buf_adds(&in, "FROB\r\n");
	buf_adds(&in, "QUIT\r\n");
	cr_assert_eq(converse(in.s, in.len, &out), 1);
	cr_assert(has(&out, "421 4.7.0 mx.test Too many errors"), "%s", out.s);
	cr_assert(!has(&out, "221 "), "%s", out.s);
	buf_free(&in);
	buf_free(&out);
}

/* ---- smuggling: every vector, each followed by a smuggled message ---- */

static void
smuggle(const char *eod)
{
	struct buf in = BUF_INIT, out;

	buf_adds(&in, "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"
	    "DATA\r\nSubject: legit\r\n\r\nbody");
	buf_adds(&in, eod);
	buf_adds(&in, "MAIL FROM:<evil@e.example>\r\nRCPT TO:<victim@v.example>\r\nDATA\r\n"
	    "Subject: smuggled\r\n\r\nsmuggled\r\n.\r\nQUIT\r\n");
	cr_assert_eq(converse(in.s, in.len, &out), 1, "%s", out.s);
	cr_assert(has(&out, "354 "), "%s", out.s);
	cr_assert(has(&out, "554 5.6.0 Bare "), "vector %s: %s", eod, out.s);
	cr_assert(!has(&out, "250 2.0.0"), "vector queued something: %s", out.s);
	cr_assert(!has(&out, "221 "), "%s", out.s);
	cr_assert_eq(todo_count(), 0, "vector queued a message");
	qt_assert_clean(&q, eod);
	buf_free(&in);
	buf_free(&out);
}

Test(smtpd, smuggle_lf_dot_lf) { smuggle("\n.\n"); }
Test(smtpd, smuggle_lf_dot_crlf) { smuggle("\n.\r\n"); }
Test(smtpd, smuggle_cr_dot_cr) { smuggle("\r.\r"); }
Test(smtpd, smuggle_crlf_dot_cr) { smuggle("\r\n.\r"); }
Test(smtpd, smuggle_crlf_dot_lf) { smuggle("\r\n.\n"); }
Test(smtpd, smuggle_bare_lf_in_body) { smuggle("\nmore\r\n.\r\n"); }
Test(smtpd, smuggle_bare_cr_in_body) { smuggle("\rmore\r\n.\r\n"); }
Test(smtpd, smuggle_cr_dot_crlf) { smuggle("\r.\r\n"); }

/* The one legitimate message, then a smuggling attempt in a second one:
 * exactly the first is queued. */
Test(smtpd, legit_then_smuggled_only_legit_queued)
{
	static const char in[] =
	    "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"
	    "DATA\r\nline\r\n.\r\n"
	    "MAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\nDATA\r\n"
	    "x\n.\nMAIL FROM:<evil@e.example>\r\nRCPT TO:<victim@v.example>\r\nDATA\r\n"
	    "smuggled\r\n.\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 1, "%s", out.s);
	cr_assert(has(&out, "554 5.6.0 Bare LF"), "%s", out.s);
	assert_one_message("line\n", ENV1, sizeof ENV1 - 1);
	buf_free(&out);
}

Test(smtpd, bare_lf_in_command_closes)
{
	static const char in[] = "EHLO client.test\nMAIL FROM:<a@b.example>\r\nQUIT\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 1);
	cr_assert(has(&out, "500 5.5.2 Command lines must end with CRLF"), "%s", out.s);
	cr_assert(!has(&out, "250"), "%s", out.s);
	buf_free(&out);
}

/* ---- limits ---- */

Test(smtpd, long_command_line_refused)
{
	struct buf in = BUF_INIT, out;

	buf_adds(&in, "EHLO client.test\r\nMAIL FROM:<");
	while (in.len < 700)
		buf_addc(&in, 'a');
	buf_adds(&in, "@b.example>\r\nNOOP\r\nQUIT\r\n");
	cr_assert_eq(converse(in.s, in.len, &out), 0, "%s", out.s);
	cr_assert(has(&out, "500 5.5.2 Command line longer than 512 bytes\r\n250 2.0.0 Ok\r\n221"),
	    "%s", out.s);
	buf_free(&in);
	buf_free(&out);
}

Test(smtpd, nul_in_command_refused)
{
	static const char in[] = "EHLO client.test\r\nNO\0OP\r\nQUIT\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert(has(&out, "500 5.5.2 NUL byte in a command\r\n221"), "%s", out.s);
	buf_free(&out);
}

static void
data_refused(const char *body, size_t n, const char *expect)
{
	struct buf in = BUF_INIT, out;

	buf_adds(&in, "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\nDATA\r\n");
	buf_add(&in, body, n);
	buf_adds(&in, "\r\n.\r\nNOOP\r\nQUIT\r\n");
	cr_assert_eq(converse(in.s, in.len, &out), 0, "%s", out.s);
	cr_assert(has(&out, expect), "expected %s: %s", expect, out.s);
	cr_assert(has(&out, "250 2.0.0 Ok\r\n221 "), "not in step after the refusal: %s", out.s);
	cr_assert_eq(todo_count(), 0);
	qt_assert_clean(&q, expect);
	buf_free(&in);
	buf_free(&out);
}

Test(smtpd, long_text_line_refused)
{
	char line[1001];

	memset(line, 'x', sizeof line);
	data_refused(line, sizeof line, "554 5.6.0 A line is longer than 1000 bytes");
}

Test(smtpd, text_line_of_998_accepted)
{
	struct buf in = BUF_INIT, out, want = BUF_INIT;
	char line[998];

	memset(line, 'y', sizeof line);
	buf_adds(&in, "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\nDATA\r\n");
	buf_add(&in, line, sizeof line);
	buf_adds(&in, "\r\n.\r\nQUIT\r\n");
	cr_assert_eq(converse(in.s, in.len, &out), 0, "%s", out.s);
	buf_add(&want, line, sizeof line);
	buf_addc(&want, '\n');
	assert_one_message(want.s, ENV1, sizeof ENV1 - 1);
	buf_free(&in);
	buf_free(&out);
	buf_free(&want);
}

Test(smtpd, nul_in_data_refused)
{
	data_refused("a\0b", 3, "554 5.6.0 NUL byte in the message");
}

Test(smtpd, oversized_message_refused)
{
	struct buf body = BUF_INIT;
	int i;

	reconfig("listen {\n max_size = 2048\n timeout = \"5s\"\n}\n");
	for (i = 0; i < 40; i++)
		buf_adds(&body, "0123456789012345678901234567890123456789012345678901234567890123456789\r\n");
	data_refused(body.s, body.len, "552 5.3.4 Message size exceeds the limit of 2048 bytes");
	buf_free(&body);
}

Test(smtpd, declared_size_over_limit_refused)
{
	static const char in[] = "EHLO client.test\r\nMAIL FROM:<a@b.example> SIZE=999999999\r\nQUIT\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 0);
	cr_assert(has(&out, "552 5.3.4 "), "%s", out.s);
	buf_free(&out);
}

Test(smtpd, too_many_recipients)
{
	struct buf in = BUF_INIT, out;

	reconfig("listen {\n max_recipients = 2\n timeout = \"5s\"\n}\n");
	buf_adds(&in, "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"
	    "RCPT TO:<e@d.example>\r\nRCPT TO:<f@d.example>\r\nDATA\r\nx\r\n.\r\nQUIT\r\n");
	cr_assert_eq(converse(in.s, in.len, &out), 0, "%s", out.s);
	cr_assert(has(&out, "452 4.5.3 Too many recipients\r\n354 "), "%s", out.s);
	assert_one_message("x\n", "Fa@b.example\0Tc@d.example\0Te@d.example\0",
	    sizeof "Fa@b.example\0Tc@d.example\0Te@d.example\0" - 1);
	buf_free(&in);
	buf_free(&out);
}

Test(smtpd, timeout_closes_with_421)
{
	struct sess s;

	reconfig("listen {\n timeout = \"1s\"\n}\n");
	sess_start(&s);
	cr_assert_eq(sess_wait_reply(&s), 0);
	sess_send(&s, "EHLO c\r\n", 8);
	cr_assert_eq(sess_wait_reply(&s), 0);
	cr_assert_eq(sess_wait_reply(&s), 0, "nothing after the timeout");
	cr_assert(has(&s.out, "421 4.4.2 mx.test Timeout"), "%s", s.out.s);
	cr_assert_eq(sess_end(&s), 1);
	buf_free(&s.out);
}

/* A client that sends and never reads: once its socket is full, a
 * write waits at most the timeout, then the session ends.  (Replies are
 * written first and waited for only when the socket is full.) */
Test(smtpd, client_that_never_reads_is_dropped_after_the_timeout)
{
	static const char ehlo[] = "EHLO c\r\n";	/* about 150 bytes of reply each */
	struct sess s;
	struct buf err = BUF_INIT;
	char *errpath = xasprintf("%s/smtpd.err", q.tmp);
	size_t sent = 0;
	int status;

	reconfig("listen {\n timeout = \"1s\"\n}\n");
	cr_assert(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
	sess_start(&s);
	cr_assert_eq(sess_wait_reply(&s), 0);
	/* Blocking writes: they stop when the server stops reading, and
	 * fail once it has given up. */
	while (sent < 64 * 1024 * 1024 && write(s.fd, ehlo, sizeof ehlo - 1) > 0)
		sent += sizeof ehlo - 1;
	cr_assert(sent < 64 * 1024 * 1024, "the server read 64 MB of EHLO without giving up");
	close(s.fd);
	while (waitpid(s.pid, &status, 0) < 0 && errno == EINTR)
		;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d", status);
	tl_read(errpath, &err);
	cr_assert(strstr(err.s, "127.0.0.1: timeout writing to the client") != NULL, "%s", err.s);
	buf_free(&err);
	buf_free(&s.out);
	free(errpath);
}

/* Send bytes one at a time, gap_ms apart, until the server says
 * something that ends the session (a 421) or we run out; 1 if a 421
 * came, with the elapsed seconds in *secs.  The gap is the wait for the
 * server's answer, so a server that answers stops the dribble at once. */
static int
dribble(struct sess *s, const char *p, size_t n, int gap_ms, double *secs)
{
	struct timespec a, b;
	size_t i;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < n; i++) {
		struct pollfd pf = { s->fd, POLLIN, 0 };
		char buf[4096];
		ssize_t r;

		sess_send(s, p + i, 1);
		if (poll(&pf, 1, gap_ms) <= 0)
			continue;
		r = read(s->fd, buf, sizeof buf);
		if (r <= 0)
			break;
		buf_add(&s->out, buf, (size_t)r);
		if (has(&s->out, "\r\n421 ") || strncmp(s->out.s, "421 ", 4) == 0)
			break;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	*secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	return has(&s->out, "421 4.4.2");
}

/* timeout covers a whole command line: a byte every 300 ms does not keep
 * the session alive.  Failed before: each byte restarted the clock (no
 * 421 after 40 bytes, 12 s, with a 2 s timeout). */
Test(smtpd, slow_command_line_closes_with_421)
{
	static const char line[] = "NOOP aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
	struct sess s;
	double secs = 0;

	reconfig("listen {\n timeout = \"2s\"\n}\n");
	sess_start(&s);
	cr_assert_eq(sess_wait_reply(&s), 0);
	cr_assert(dribble(&s, line, sizeof line - 1, 300, &secs), "no 421 after %.1fs: %s",
	    secs, s.out.s);
	cr_assert(secs < 8, "421 only after %.1fs", secs);
	cr_assert_eq(sess_end(&s), 1);
	buf_free(&s.out);
}

/* DATA: timeout plus 1 s per min_data_rate bytes.  Failed before. */
Test(smtpd, slow_data_closes_with_421)
{
	static const char cmds[] = "EHLO c\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"
	    "DATA\r\n";
	char body[64];
	struct sess s;
	double secs = 0;
	int i;

	memset(body, 'x', sizeof body);
	reconfig("listen {\n timeout = \"2s\"\n}\n");	/* min_data_rate 500 */
	sess_start(&s);
	cr_assert_eq(sess_wait_reply(&s), 0);
	sess_send(&s, cmds, sizeof cmds - 1);
	for (i = 0; i < 5 && !has(&s.out, "354 "); i++)
		cr_assert_eq(sess_wait_reply(&s), 0);
	cr_assert(has(&s.out, "354 "), "%s", s.out.s);
	cr_assert(dribble(&s, body, sizeof body, 300, &secs), "no 421 after %.1fs: %s",
	    secs, s.out.s);
	cr_assert(secs < 8, "421 only after %.1fs", secs);
	sess_end(&s);
	cr_assert_eq(todo_count(), 0);
	buf_free(&s.out);
}

/* Junk commands: one past junk_command_limit ends the session.  Failed
 * before (no limit). */
Test(smtpd, junk_command_limit)
{
	static const char in[] = "NOOP\r\nRSET\r\nHELP\r\nFOO\r\nNOOP\r\n";
	struct buf out;
	int rc;

	reconfig("listen {\n timeout = \"5s\"\n junk_command_limit = 4\n}\n");
	rc = converse(in, sizeof in - 1, &out);
	cr_assert_eq(rc, 1);
	cr_assert(has(&out, "\r\n500 5.5.2 Command not recognized\r\n421 4.7.0 mx.test Too many"),
	    "%s", out.s);
	buf_free(&out);
}

/* With a pause before the greeting, a client that speaks first is always
 * refused.  Failed before (no pause: "EHLO early" was often greeted). */
Test(smtpd, greet_pause_catches_early_talkers)
{
	int i;

	reconfig("listen {\n timeout = \"5s\"\n greet_pause = \"1s\"\n"
	    " greet_pause_loopback = true\n}\n");
	for (i = 0; i < 3; i++) {
		struct sess s;

		sess_start(&s);
		sess_send(&s, "EHLO early\r\n", 12);
		cr_assert_eq(sess_end(&s), 1);
		cr_assert(strncmp(s.out.s, "554 5.5.0 mx.test Talking before the greeting", 45) == 0,
		    "%s", s.out.s);
		buf_free(&s.out);
	}
	{
		struct buf out;

		cr_assert_eq(converse("QUIT\r\n", 6, &out), 0);
		cr_assert(has(&out, "221 "), "%s", out.s);
		buf_free(&out);
	}
}

Test(smtpd, talking_before_greeting_refused)
{
	struct sess s;
	int rc;

	sess_start(&s);
	sess_send(&s, "EHLO early\r\n", 12);
	rc = sess_end(&s);
	/* Either it saw the early bytes (554, closed) or it greeted first. */
	if (strncmp(s.out.s, "554 ", 4) == 0) {
		cr_assert_eq(rc, 1);
		cr_assert(!has(&s.out, "250"), "%s", s.out.s);
	} else
		cr_assert(strncmp(s.out.s, "220 ", 4) == 0, "%s", s.out.s);
	buf_free(&s.out);
}

/* ---- relay control ---- */

static const char *const tricks[] = {
	"<victim@v.example>",
	"<victim%v.example@mx.test>",
	"<@mx.test:victim@v.example>",
	"<@mx.test,@x.test:victim@v.example>",
	"<v.example!victim@mx.test>",
	"<\"victim@v.example\"@mx.test>",
	"<\"victim%v.example\"@mx.test>",
	"<victim@v.example@mx.test>",
	"<victim@[10.0.0.1]>",
	"<postmaster>",
	NULL
};

Test(smtpd, open_relay_refused_for_disallowed_client)
{
	struct buf in = BUF_INIT, out;
	size_t i, n = 0;
	const char *p;

	setenv("TCPREMOTEIP", "127.0.0.2", 1);
	reconfig("listen {\n allow = {\"127.0.0.1/32\", \"::1/128\"}\n max_errors = 50\n}\n");
	buf_adds(&in, "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\n");
	for (i = 0; tricks[i]; i++)
		buf_printf(&in, "RCPT TO:%s\r\n", tricks[i]);
	buf_adds(&in, "DATA\r\nx\r\n.\r\nQUIT\r\n");
	cr_assert_eq(converse(in.s, in.len, &out), 0, "%s", out.s);
	for (p = out.s; (p = strstr(p, "550 5.7.1 Relaying denied for 127.0.0.2\r\n")) != NULL; p++)
		n++;
	cr_assert_eq(n, i, "%zu of %zu refused with 5.7.1: %s", n, i, out.s);
	cr_assert(has(&out, "503 5.5.1 Need RCPT before DATA"), "%s", out.s);
	cr_assert_eq(todo_count(), 0);
	buf_free(&in);
	buf_free(&out);
}

Test(smtpd, relay_tricks_refused_for_allowed_client)
{
	struct buf in = BUF_INIT, out;
	size_t i, n = 0;
	const char *p;

	reconfig("listen {\n max_errors = 50\n}\n");
	buf_adds(&in, "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\n");
	for (i = 1; i < 8; i++)		/* tricks[1..7]: syntax the relay refuses */
		buf_printf(&in, "RCPT TO:%s\r\n", tricks[i]);
	buf_adds(&in, "QUIT\r\n");
	cr_assert_eq(converse(in.s, in.len, &out), 0, "%s", out.s);
	for (p = out.s; (p = strstr(p, "553 5.1.3 Bad recipient address")) != NULL; p++)
		n++;
	cr_assert_eq(n, 7, "%s", out.s);
	cr_assert(!has(&out, "250 2.1.5"), "%s", out.s);
	buf_free(&in);
	buf_free(&out);
}

/* ---- queueing failures ---- */

Test(smtpd, queue_temporary_failure_is_451)
{
	static const char in[] =
	    "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"
	    "DATA\r\nx\r\n.\r\nQUIT\r\n";
	char *script = xasprintf("%s/qq53", q.tmp);
	struct buf out;

	tl_write(script, "#!/bin/sh\ncat >/dev/null\nexit 53\n", 32);
	cr_assert(chmod(script, 0755) == 0);
	setenv("QMAILQUEUE", script, 1);
	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert(has(&out, "451 4.3.0 Temporary queue failure"), "%s", out.s);
	cr_assert(!has(&out, "250 2.0.0"), "%s", out.s);
	cr_assert_eq(todo_count(), 0);
	qt_assert_clean(&q, "after 451");
	free(script);
	buf_free(&out);
}

Test(smtpd, queue_permanent_failure_is_554)
{
	static const char in[] =
	    "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"
	    "DATA\r\nx\r\n.\r\nQUIT\r\n";
	char *script = xasprintf("%s/qq11", q.tmp);
	struct buf out;

	tl_write(script, "#!/bin/sh\ncat >/dev/null\nexit 11\n", 32);
	cr_assert(chmod(script, 0755) == 0);
	setenv("QMAILQUEUE", script, 1);
	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert(has(&out, "554 5.3.0 "), "%s", out.s);
	free(script);
	buf_free(&out);
}

Test(smtpd, disconnect_mid_data_queues_nothing)
{
	static const char in[] =
	    "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"
	    "DATA\r\nSubject: cut\r\n\r\nhalf a message\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 1, "%s", out.s);
	cr_assert(has(&out, "354 "), "%s", out.s);
	cr_assert(!has(&out, "250 2.0.0"), "%s", out.s);
	cr_assert_eq(todo_count(), 0);
	qt_assert_clean(&q, "after a disconnect mid-DATA");
	buf_free(&out);
}

/* ---- real clients ---- */

Test(smtpd, swaks_pipe_pipelining)
{
	char *bin = tl_bin("weir-smtpd");
	const char *argv[] = { "/usr/bin/swaks", "--pipe", bin, "--from", "a@b.example",
	    "--to", "c@d.example,e@d.example", "--pipeline", "--body", "hello from swaks",
	    "--header", "Subject: swaks", NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	struct qt_msg m;

	if (access(argv[0], X_OK) != 0)
		cr_skip_test("swaks is not installed");
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "swaks: %s %s", r.out.s, r.err.s);
	qt_load_only(&q, t0, time(NULL) + 1, &m);
	cr_assert(strstr(m.body.s, "Subject: swaks\n") != NULL, "%s", m.body.s);
	cr_assert(strstr(m.body.s, "hello from swaks\n") != NULL, "%s", m.body.s);
	cr_assert(strchr(m.body.s, '\r') == NULL, "CR stored: %s", m.body.s);
	cr_assert_eq(m.env.len, sizeof "Fa@b.example\0Tc@d.example\0Te@d.example\0" - 1);
	qt_msg_free(&m);
	tl_result_free(&r);
	free(bin);
}

/* Start weir-smtpd -l (or `weir run` when run is set) on 127.0.0.1:0 and
 * learn its port from the log. */
static void
start_listener_at(const char *addr, const char *listen_conf, int run)
{
	char *bin = tl_bin(run ? "weir" : "weir-smtpd");
	struct buf log = BUF_INIT;
	int p[2];
	const char *s;

	char *c = xasprintf("gate_socket = \"%s/gate.sock\"\ngate_journal = \"%s/gate.journal\"\n"
	    "policy_file = \"%s/policy.conf\"\nshowq_socket = \"\"\n%s"
	    "listen {\n address = {\"%s\"}\n%s}\n", q.tmp, q.tmp, q.tmp, top_conf, addr,
	    listen_conf);

	reconfig(c);
	free(c);
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	listener = fork();
	cr_assert(listener >= 0);
	if (listener == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (setpgid(0, 0) < 0 || dup2(p[1], 2) < 0)
			_exit(126);
		if (run)
			execl(bin, "weir", "-c", q.conf, "run", (char *)NULL);
		else
			execl(bin, "weir-smtpd", "-l", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	listener_err = p[0];
	while ((s = strstr(log.s ? log.s : "", " port ")) == NULL || strchr(s, '\n') == NULL) {
		char b[512];
		struct pollfd pf = { p[0], POLLIN, 0 };
		ssize_t r;

		cr_assert(poll(&pf, 1, 10000) > 0, "listener did not start: %s", buf_cstr(&log));
		r = read(p[0], b, sizeof b);
		cr_assert(r > 0, "listener died: %s", buf_cstr(&log));
		buf_add(&log, b, (size_t)r);
	}
	port = (unsigned)atoi(s + 6);
	cr_assert(port > 0);
	buf_free(&log);
	free(bin);
}

static void
start_listener_ex(const char *listen_conf, int run)
{
	start_listener_at("127.0.0.1:0", listen_conf, run);
}

static void
start_listener(const char *listen_conf)
{
	start_listener_ex(listen_conf, 0);
}

/* A TCP connection to the listener from a given loopback address. */
static int
connect_from(const char *src)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	inet_pton(AF_INET, src, &a.sin_addr);
	cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s", src);
	a.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
	return fd;
}

/* Talk over fd: wait for a final reply after sending each chunk. */
static void
tcp_talk(int fd, const char *const *chunks, struct buf *out)
{
	struct sess s;
	size_t i;

	memset(&s, 0, sizeof s);
	s.fd = fd;
	cr_assert_eq(sess_wait_reply(&s), 0, "no greeting");
	for (i = 0; chunks[i]; i++) {
		sess_send(&s, chunks[i], strlen(chunks[i]));
		if (sess_wait_reply(&s) < 0)
			break;
	}
	*out = s.out;
}

Test(smtpd, python_smtplib_via_listener)
{
	char *py;
	const char *argv[] = { "/usr/bin/python3", "-c", NULL, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;

	start_listener("");
	py = xasprintf(
	    "import smtplib, sys\n"
	    "s = smtplib.SMTP('127.0.0.1', %u, timeout=20)\n"
	    "s.ehlo('py.test')\n"
	    "assert s.has_extn('pipelining') and s.has_extn('8bitmime')\n"
	    "assert int(s.esmtp_features['size']) == 26214400\n"
	    "r = s.sendmail('a@b.example', ['c@d.example'], 'Subject: py\\r\\n\\r\\n.dot first\\r\\nend\\r\\n')\n"
	    "assert r == {}, r\n"
	    "try:\n"
	    "    s.sendmail('a@b.example', ['c%%d.example@mx.test'], 'x')\n"
	    "    sys.exit('relay hack accepted')\n"
	    "except smtplib.SMTPRecipientsRefused as e:\n"
	    "    assert e.recipients['c%%d.example@mx.test'][0] == 553, e\n"
	    "s.quit()\n", port);
	argv[2] = py;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "python: %s %s", r.out.s, r.err.s);
	assert_one_message("Subject: py\n\n.dot first\nend\n", ENV1, sizeof ENV1 - 1);
	tl_result_free(&r);
	free(py);
}

Test(smtpd, listener_open_relay_from_127_0_0_2)
{
	struct buf out;
	size_t i, n = 0;
	const char *p;
	const char *chunks[16];
	char *lines[16];
	int fd;

	start_listener(" allow = {\"127.0.0.1/32\"}\n max_errors = 50\n");
	fd = connect_from("127.0.0.2");
	chunks[0] = "EHLO client.test\r\n";
	chunks[1] = "MAIL FROM:<a@b.example>\r\n";
	for (i = 0; tricks[i]; i++) {
		lines[i] = xasprintf("RCPT TO:%s\r\n", tricks[i]);
		chunks[2 + i] = lines[i];
	}
	chunks[2 + i] = "QUIT\r\n";
	chunks[3 + i] = NULL;
	tcp_talk(fd, chunks, &out);
	close(fd);
	for (p = out.s; (p = strstr(p, "550 5.7.1 Relaying denied for 127.0.0.2")) != NULL; p++)
		n++;
	cr_assert_eq(n, i, "%s", out.s);
	cr_assert_eq(todo_count(), 0);
	while (i-- > 0)
		free(lines[i]);
	buf_free(&out);
}

Test(smtpd, listener_per_client_limit)
{
	struct buf out1, out2, out3;
	const char *none[] = { NULL };
	const char *quit[] = { "QUIT\r\n", NULL };
	int a, b, c;

	start_listener(" max_per_client = 1\n");
	a = connect_from("127.0.0.1");
	tcp_talk(a, none, &out1);		/* greeted: the slot is taken */
	b = connect_from("127.0.0.1");
	{
		struct sess s;

		memset(&s, 0, sizeof s);
		s.fd = b;
		cr_assert_eq(sess_wait_reply(&s), 0);
		out2 = s.out;
	}
	cr_assert(has(&out2, "421 4.7.0 mx.test Too many connections from your address"),
	    "%s", out2.s);
	c = connect_from("127.0.0.3");		/* another address is served */
	tcp_talk(c, quit, &out3);
	cr_assert(strncmp(out3.s, "220 ", 4) == 0, "%s", out3.s);
	close(a);
	close(b);
	close(c);
	buf_free(&out1);
	buf_free(&out2);
	buf_free(&out3);
}

/* weir run starts weir-smtpd -l when there is a listen section, and
 * stops it with the rest on SIGTERM. */
Test(smtpd, weir_run_starts_listener)
{
	const char *chunks[] = { "EHLO c\r\n", "MAIL FROM:<a@b.example>\r\n", "RCPT TO:<c@d.example>\r\n",
	    "DATA\r\n", "x\r\n.\r\n", "QUIT\r\n", NULL };
	struct buf out;
	int fd, status;

	tl_write(xasprintf("%s/policy.conf", q.tmp), "", 0);
	start_listener_ex("", 1);
	fd = connect_from("127.0.0.1");
	tcp_talk(fd, chunks, &out);
	close(fd);
	cr_assert(queued_as(&out, "221 "), "%s", out.s);
	cr_assert(kill(listener, SIGTERM) == 0);
	while (waitpid(listener, &status, 0) < 0 && errno == EINTR)
		;
	kill(-listener, SIGKILL);	/* anything weir run left behind */
	listener = -1;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "weir run: status %d", status);
	buf_free(&out);
}

/* ---- STARTTLS ---- */

static char *
certs(void)
{
	char *d = xasprintf("%s/certs", q.tmp);

	cr_assert_eq(tl_make_certs(d), 0, "making certificates in %s failed", d);
	return d;
}

static char *
tls_conf(const char *extra)
{
	char *d = certs();
	char *c = xasprintf(" cert_file = \"%s/good.pem\"\n key_file = \"%s/good.key\"\n%s", d, d,
	    extra ? extra : "");

	free(d);
	return c;
}

Test(smtpd, starttls_python_smtplib)
{
	char *lc = tls_conf(NULL), *py;
	const char *argv[] = { "/usr/bin/python3", "-c", NULL, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	struct qt_msg m;

	start_listener(lc);
	py = xasprintf(
	    "import smtplib, ssl\n"
	    "ctx = ssl.create_default_context(cafile='%s/certs/ca.pem')\n"
	    "s = smtplib.SMTP('127.0.0.1', %u, timeout=20)\n"
	    "s.ehlo('py.test')\n"
	    "assert s.has_extn('starttls')\n"
	    "s.starttls(context=ctx)\n"
	    "s.ehlo('py.test')\n"
	    "assert not s.has_extn('starttls')\n"
	    "code, msg = s.docmd('STARTTLS')\n"
	    "assert code == 503, (code, msg)\n"
	    "s.sendmail('a@b.example', ['c@d.example'], 'Subject: tls\\r\\n\\r\\nsecret\\r\\n')\n"
	    "s.quit()\n", q.tmp, port);
	argv[2] = py;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "python: %s %s", r.out.s, r.err.s);
	qt_load_only(&q, t0, time(NULL) + 1, &m);
	cr_assert(strstr(m.body.s, "by mx.test (weir-smtpd) with ESMTPS (TLSv1.3 ") != NULL, "%s", m.body.s);
	cr_assert(strstr(m.body.s, "\nSubject: tls\n\nsecret\n") != NULL, "%s", m.body.s);
	qt_msg_free(&m);
	tl_result_free(&r);
	free(py);
	free(lc);
}

/* Inside TLS too: a byte per TLS record every 300 ms.  Failed before
 * (each record restarted the clock). */
Test(smtpd, slow_command_line_in_tls_closes_with_421)
{
	char *lc = tls_conf(" timeout = \"2s\"\n"), *py;
	const char *argv[] = { "/usr/bin/python3", "-c", NULL, NULL };
	struct tl_run run = { .argv = argv, .timeout_s = 40 };
	struct tl_result r;

	start_listener(lc);
	py = xasprintf(
	    "import smtplib, ssl, time, select\n"
	    "ctx = ssl.create_default_context(cafile='%s/certs/ca.pem')\n"
	    "s = smtplib.SMTP('127.0.0.1', %u, timeout=20)\n"
	    "s.ehlo('py.test')\n"
	    "s.starttls(context=ctx)\n"
	    "t0 = time.monotonic()\n"
	    "got = b''\n"
	    "s.sock.setblocking(False)\n"
	    "for c in b'NOOP aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa':\n"
	    "    s.sock.send(bytes([c]))\n"
	    "    if select.select([s.sock], [], [], 0.3)[0]:\n"
	    "        try:\n"
	    "            got = s.sock.recv(4096)\n"
	    "        except ssl.SSLWantReadError:\n"
	    "            continue\n"		/* a session ticket, no data */
	    "        break\n"
	    "print(round(time.monotonic() - t0, 1), got)\n", q.tmp, port);
	argv[2] = py;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "python: %s %s", r.out.s, r.err.s);
	cr_assert(strstr(r.out.s, "421 4.4.2") != NULL, "%s", r.out.s);
	cr_assert(atof(r.out.s) < 8, "%s", r.out.s);
	tl_result_free(&r);
	free(py);
	free(lc);
}

Test(smtpd, starttls_swaks)
{
	char *lc = tls_conf(NULL), *portarg;
	const char *argv[] = { "/usr/bin/swaks", "--server", "127.0.0.1", "--port", NULL,
	    "--tls", "--from", "a@b.example", "--to", "c@d.example", "--body", "tls by swaks", NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	struct qt_msg m;

	if (access(argv[0], X_OK) != 0)
		cr_skip_test("swaks is not installed");
	start_listener(lc);
	portarg = xasprintf("%u", port);
	argv[4] = portarg;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "swaks: %s %s", r.out.s, r.err.s);
	qt_load_only(&q, t0, time(NULL) + 1, &m);
	cr_assert(strstr(m.body.s, "with ESMTPS (TLSv1.") != NULL, "%s", m.body.s);
	cr_assert(strstr(m.body.s, "tls by swaks") != NULL, "%s", m.body.s);
	qt_msg_free(&m);
	tl_result_free(&r);
	free(portarg);
	free(lc);
}

static void listener_log_count(const char *needle, int n, struct buf *log);

/* The listener's log until a line holding needle has come (10 s). */
static void
listener_log_until(const char *needle, struct buf *log)
{
	listener_log_count(needle, 1, log);
}

/* A TLS client gone mid-DATA without a close_notify (cut off, or
 * crashed): nothing queued, and "disconnected", as for a client in
 * clear.  It said "read error" (OpenSSL 3 reports the missing
 * close_notify as an error) before weir-smtpd's TLS reads were
 * lib/tlsio's, which weir-remote's are too. */
Test(smtpd, tls_client_gone_mid_data)
{
	char *lc = tls_conf(NULL), *py;
	const char *argv[] = { "/usr/bin/python3", "-c", NULL, NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	struct buf log = BUF_INIT;

	start_listener(lc);
	py = xasprintf(
	    "import smtplib, ssl\n"
	    "ctx = ssl.create_default_context(cafile='%s/certs/ca.pem')\n"
	    "s = smtplib.SMTP('127.0.0.1', %u, timeout=20)\n"
	    "s.ehlo('py.test')\n"
	    "s.starttls(context=ctx)\n"
	    "s.ehlo('py.test')\n"
	    "assert s.docmd('MAIL FROM:<a@b.example>')[0] == 250\n"
	    "assert s.docmd('RCPT TO:<c@d.example>')[0] == 250\n"
	    "assert s.docmd('DATA')[0] == 354\n"
	    "s.send(b'Subject: cut\\r\\n\\r\\nhalf a message\\r\\n')\n"
	    "s.sock.close()\n", q.tmp, port);	/* no close_notify */
	argv[2] = py;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "python: %s %s", r.out.s, r.err.s);
	listener_log_until("during DATA: nothing queued", &log);
	cr_assert(strstr(log.s, ": disconnected during DATA: nothing queued\n") != NULL, "%s",
	    log.s);
	cr_assert_eq(todo_count(), 0);
	qt_assert_clean(&q, "after a TLS client gone mid-DATA");
	buf_free(&log);
	tl_result_free(&r);
	free(py);
	free(lc);
}

/* CVE-2011-0411: commands sent in clear right behind STARTTLS are never
 * answered (inside TLS or not): the session ends. */
Test(smtpd, starttls_plaintext_injection_refused)
{
	char *lc = tls_conf(NULL);
	char *c = xasprintf("listen {\n%s}\n", lc);
	static const char in[] = "EHLO c\r\nSTARTTLS\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n";
	struct buf out;

	reconfig(c);
	cr_assert_eq(converse(in, sizeof in - 1, &out), 1, "%s", out.s);
	cr_assert(has(&out, "250-STARTTLS\r\n"), "%s", out.s);
	cr_assert(has(&out, "554 5.5.0 Commands after STARTTLS"), "%s", out.s);
	cr_assert(!has(&out, "250 2.1.0"), "%s", out.s);
	cr_assert(!has(&out, "220 2.0.0"), "%s", out.s);
	buf_free(&out);
	free(c);
	free(lc);
}

Test(smtpd, no_starttls_without_certificate)
{
	static const char in[] = "EHLO c\r\nSTARTTLS\r\nQUIT\r\n";
	struct buf out;

	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert(!has(&out, "STARTTLS\r\n250"), "%s", out.s);
	cr_assert(has(&out, "502 5.5.1 STARTTLS is not available"), "%s", out.s);
	buf_free(&out);
}

/* ---- AUTH ---- */

/* A password file with alice:secret (SHA-512), mode m; the listen lines
 * naming it (allow excludes every client used here). */
static char *
auth_conf(mode_t m)
{
	char *pw = xasprintf("%s/passwd", q.tmp);
	char *cmd = xasprintf("printf '# users\\nbob:%%s\\nalice:%%s\\n' "
	    "\"$(openssl passwd -6 other)\" \"$(openssl passwd -6 secret)\" > %s", pw);
	char *c;

	cr_assert_eq(system(cmd), 0, "%s", cmd);
	cr_assert(chmod(pw, m) == 0);
	c = xasprintf(" allow = {\"10.0.0.0/8\"}\n password_file = \"%s\"\n", pw);
	free(cmd);
	free(pw);
	return c;
}

static void
swaks_auth(const char *mech, const char *pass, int want_status, const char *want)
{
	char *bin = tl_bin("weir-smtpd");
	const char *argv[] = { "/usr/bin/swaks", "--pipe", bin, "--from", "a@b.example",
	    "--to", "c@d.example", "--auth", mech, "--auth-user", "alice", "--auth-password", pass,
	    NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;

	if (access(argv[0], X_OK) != 0)
		cr_skip_test("swaks is not installed");
	tl_run(&run, &r);
	cr_assert_eq(r.status, want_status, "swaks: %s %s", r.out.s, r.err.s);
	cr_assert(strstr(r.out.s, want) != NULL, "want %s: %s", want, r.out.s);
	tl_result_free(&r);
	free(bin);
}

Test(smtpd, auth_plain_and_login_from_loopback)
{
	char *ac = auth_conf(0600), *c = xasprintf("listen {\n%s}\n", ac);
	struct qt_msg m;
	unsigned long *ids = NULL;

	reconfig(c);
	swaks_auth("PLAIN", "secret", 0, "235 2.7.0 Authentication successful");
	swaks_auth("LOGIN", "secret", 0, "235 2.7.0 Authentication successful");
	cr_assert_eq(qt_list(&q, "todo", &ids), 2);
	qt_load(&q, ids[0], t0, time(NULL) + 1, &m);
	cr_assert(strstr(m.body.s, "with ESMTPA (authenticated);") != NULL, "%s", m.body.s);
	qt_msg_free(&m);
	free(ids);
	free(ac);
	free(c);
}

Test(smtpd, auth_wrong_password_refused)
{
	char *ac = auth_conf(0600), *c = xasprintf("listen {\n%s}\n", ac);

	reconfig(c);
	swaks_auth("PLAIN", "wrong", 28, "535 5.7.8 Authentication credentials invalid");
	cr_assert_eq(todo_count(), 0);
	free(ac);
	free(c);
}

Test(smtpd, auth_file_readable_by_others_refused)
{
	char *ac = auth_conf(0644), *c = xasprintf("listen {\n%s}\n", ac);

	reconfig(c);
	swaks_auth("PLAIN", "secret", 28, "454 4.7.0 Temporary authentication failure");
	cr_assert_eq(todo_count(), 0);
	free(ac);
	free(c);
}

Test(smtpd, auth_raw_errors)
{
	char *ac = auth_conf(0600), *c = xasprintf("listen {\n%s max_errors = 50\n}\n", ac);
	static const char in[] =
	    "AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n"		/* before EHLO */
	    "EHLO c\r\n"
	    "AUTH PLAIN AGFsaWNlAHNlY3JldA\r\n"		/* bad base64: no padding */
	    "AUTH PLAIN AGFsaWNl!HNlY3JldA==\r\n"		/* bad base64: alphabet */
	    "AUTH PLAIN\r\n*\r\n"				/* cancelled */
	    "AUTH CRAM-MD5\r\n"				/* not offered */
	    "AUTH PLAIN Ym9iAGFsaWNlAHNlY3JldA==\r\n"	/* authzid bob for alice */
	    "MAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"	/* not yet */
	    "AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n"		/* in a transaction */
	    "RSET\r\n"
	    "AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n"		/* ok */
	    "AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n"		/* twice */
	    "MAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\nDATA\r\nx\r\n.\r\nQUIT\r\n";
	struct buf out;

	reconfig(c);
	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert(has(&out, "250-AUTH PLAIN LOGIN\r\n"), "%s", out.s);
	cr_assert(has(&out, "503 5.5.1 Send EHLO first\r\n"), "%s", out.s);
	cr_assert(has(&out, "ENHANCEDSTATUSCODES\r\n501 5.5.2 Cannot decode the response (base64)\r\n"
	    "501 5.5.2 Cannot decode the response (base64)\r\n334 \r\n501 5.0.0 Authentication cancelled\r\n"
	    "504 5.5.4 Unrecognized authentication mechanism\r\n535 5.7.8 Authorization identity not allowed\r\n"
	    "250 2.1.0 Ok\r\n550 5.7.1 Relaying denied for 127.0.0.1\r\n"
	    "503 5.5.1 AUTH is not allowed during a transaction\r\n250 2.0.0 Ok\r\n"
	    "235 2.7.0 Authentication successful\r\n503 5.5.1 Already authenticated\r\n"
	    "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 "), "%s", out.s);
	cr_assert_eq(todo_count(), 1);
	buf_free(&out);
	free(ac);
	free(c);
}

Test(smtpd, auth_needs_tls_off_loopback)
{
	char *ac = auth_conf(0600), *c = xasprintf("listen {\n%s}\n", ac);
	static const char in[] = "EHLO c\r\nAUTH PLAIN AGFsaWNlAHNlY3JldA==\r\nQUIT\r\n";
	struct buf out;

	reconfig(c);
	setenv("TCPREMOTEIP", "192.0.2.7", 1);
	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	cr_assert(!has(&out, "AUTH PLAIN"), "AUTH offered in clear: %s", out.s);
	cr_assert(has(&out, "538 5.7.11 Encryption required"), "%s", out.s);
	buf_free(&out);
	free(ac);
	free(c);
}

Test(smtpd, auth_over_starttls_off_loopback)
{
	char *ac = auth_conf(0600), *lc = tls_conf(ac), *c = xasprintf("listen {\n%s}\n", lc);
	char *bin = tl_bin("weir-smtpd");
	const char *argv[] = { "/usr/bin/swaks", "--pipe", bin, "--tls", "--from", "a@b.example",
	    "--to", "c@d.example", "--auth", "PLAIN", "--auth-user", "alice", "--auth-password",
	    "secret", NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	struct qt_msg m;

	if (access(argv[0], X_OK) != 0)
		cr_skip_test("swaks is not installed");
	reconfig(c);
	setenv("TCPREMOTEIP", "192.0.2.7", 1);
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "swaks: %s %s", r.out.s, r.err.s);
	qt_load_only(&q, t0, time(NULL) + 1, &m);
	cr_assert(strstr(m.body.s, "([192.0.2.7])\n\tby mx.test (weir-smtpd) with ESMTPSA (TLSv1.") != NULL,
	    "%s", m.body.s);
	cr_assert(strstr(m.body.s, ", authenticated);") != NULL, "%s", m.body.s);
	qt_msg_free(&m);
	tl_result_free(&r);
	free(bin);
	free(ac);
	free(lc);
	free(c);
}

/* Every slot taken: the next connection waits in the kernel's queue,
 * unanswered (the listener says it has stopped accepting), and is
 * greeted once a session ends; no 421 (as Postfix's master at a
 * process limit). */
Test(smtpd, listener_connection_limit)
{
	struct buf out1, out2, log = BUF_INIT;
	const char *quit[] = { "QUIT\r\n", NULL };
	const char *none[] = { NULL };
	struct pollfd pf;
	struct sess s;
	int a, b;

	start_listener(" max_connections = 1\n");
	a = connect_from("127.0.0.1");
	tcp_talk(a, none, &out1);
	b = connect_from("127.0.0.2");
	listener_log_until("max_connections (1) sessions running: new connections wait", &log);
	pf.fd = b;
	pf.events = POLLIN;
	cr_assert_eq(poll(&pf, 1, 0), 0, "the waiting connection was answered");
	memset(&s, 0, sizeof s);
	s.fd = a;
	s.out = out1;
	s.mark = out1.len;
	sess_send(&s, quit[0], strlen(quit[0]));
	cr_assert_eq(sess_wait_reply(&s), 0);
	memset(&s, 0, sizeof s);
	s.fd = b;
	cr_assert_eq(sess_wait_reply(&s), 0);
	out2 = s.out;
	cr_assert(strncmp(out2.s, "220 ", 4) == 0, "%s", out2.s);
	listener_log_until("accepting connections again", &log);
	close(a);
	close(b);
	buf_free(&out1);
	buf_free(&out2);
	buf_free(&log);
}

/* A client that reconnects as soon as its QUIT is answered is served,
 * whatever max_per_client: the session it just ended is reaped first,
 * not counted against it (seen as 421s under a benchmark's load). */
Test(smtpd, listener_reconnect_after_quit_served)
{
	const char *quit[] = { "QUIT\r\n", NULL };
	struct buf out;
	int i, fd;

	start_listener(" max_per_client = 1\n");
	for (i = 0; i < 40; i++) {
		fd = connect_from("127.0.0.1");
		tcp_talk(fd, quit, &out);
		cr_assert(strncmp(out.s, "220 ", 4) == 0, "connection %d: %s", i + 1, out.s);
		cr_assert(has(&out, "221 "), "connection %d: %s", i + 1, out.s);
		close(fd);
		buf_free(&out);
	}
}

/* The listener's log until n complete lines hold needle (10 s each). */
static void
listener_log_count(const char *needle, int n, struct buf *log)
{
	for (;;) {
		const char *p = buf_cstr(log);
		int k = 0;
		char b[512];
		struct pollfd pf = { listener_err, POLLIN, 0 };
		ssize_t r;

		while ((p = strstr(p, needle)) != NULL && strchr(p, '\n') != NULL) {
			k++;
			p = strchr(p, '\n');
		}
		if (k >= n)
			return;
		cr_assert(poll(&pf, 1, 10000) > 0, "%d of %d \"%s\" in: %s", k, n, needle,
		    buf_cstr(log));
		r = read(listener_err, b, sizeof b);
		cr_assert(r > 0, "listener died: %s", buf_cstr(log));
		buf_add(log, b, (size_t)r);
	}
}

/* Entries of a folder (/proc/PID/fd), . and .. left out. */
static int
count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert(d != NULL, "opendir %s", dir);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The pid in the log line of the nth (from 1) "needle". */
static long
logged_pid(struct buf *log, const char *needle, int nth)
{
	const char *p = buf_cstr(log), *line;

	for (; nth > 0; nth--, p++) {
		p = strstr(p, needle);
		cr_assert(p != NULL, "no \"%s\" %d in %s", needle, nth, buf_cstr(log));
	}
	for (line = p - 1; line > log->s && line[-1] != '\n'; line--)
		;
	line = strstr(line, "weir-smtpd[");
	cr_assert(line != NULL && line < p, "%s", buf_cstr(log));
	return atol(line + strlen("weir-smtpd["));
}

/* Wait (10 s at most) for the peer to close fd: read gives 0. */
static void
wait_eof(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	char b[512];
	ssize_t r;

	do {
		cr_assert(poll(&pf, 1, 10000) > 0, "the session did not close the connection");
		r = read(fd, b, sizeof b);
	} while (r > 0);
	cr_assert_eq(r, 0, "read: %s", strerror(errno));
}

/* Connections are served one after another by the same session process
 * (issue 26: no fork per connection), and nothing of one session is in
 * the next: after an authenticated session that relayed, the next
 * connection of the same process is offered AUTH again and may not
 * relay; the process holds no more descriptors after three sessions
 * than after one.  With max_connections = 1 there is one process at
 * most.  The pids differed before the session processes were reused. */
Test(smtpd, listener_reuses_session_process_not_its_state)
{
	char *ac = auth_conf(0600), *lc = xasprintf("%s max_connections = 1\n", ac);
	const char *authed[] = { "EHLO c\r\n", "AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n",
	    "MAIL FROM:<a@b.example>\r\n", "RCPT TO:<c@d.example>\r\n", "QUIT\r\n", NULL };
	const char *plain[] = { "EHLO c\r\n", "MAIL FROM:<a@b.example>\r\n",
	    "RCPT TO:<c@d.example>\r\n", "QUIT\r\n", NULL };
	struct buf out, log = BUF_INIT;
	char *fds;
	long pid;
	int fd, i, nfd1 = 0, nfd3;

	start_listener(lc);
	for (i = 1; i <= 3; i++) {
		fd = connect_from("127.0.0.1");
		tcp_talk(fd, i == 1 ? authed : plain, &out);
		/* The session process's close of the connection (end of file
		 * here) comes after its "disconnected" line: the descriptors
		 * are counted once it has closed it. */
		wait_eof(fd);
		close(fd);
		if (i == 1) {
			cr_assert(has(&out, "235 2.7.0"), "%s", out.s);
			cr_assert(has(&out, "250 2.1.5 Ok"), "%s", out.s);
		} else {
			cr_assert(has(&out, "250-AUTH PLAIN LOGIN"), "connection %d: %s", i, out.s);
			cr_assert(has(&out, "550 5.7.1 Relaying denied for 127.0.0.1"),
			    "connection %d: %s", i, out.s);
			cr_assert(!has(&out, "250 2.1.5"), "connection %d: %s", i, out.s);
		}
		buf_free(&out);
		listener_log_count("127.0.0.1: disconnected", i, &log);
		pid = logged_pid(&log, "127.0.0.1: connected", i);
		cr_assert_eq(pid, logged_pid(&log, "127.0.0.1: connected", 1),
		    "connection %d in another process: %s", i, log.s);
		fds = xasprintf("/proc/%ld/fd", pid);
		if (i == 1)
			nfd1 = count_entries(fds);
		free(fds);
	}
	fds = xasprintf("/proc/%ld/fd", pid);
	nfd3 = count_entries(fds);
	cr_assert(nfd1 > 0 && nfd3 == nfd1, "descriptors after 1 session %d, after 3 %d", nfd1, nfd3);
	free(fds);
	buf_free(&log);
	free(lc);
	free(ac);
}

/* A session process killed mid-session frees its slot: with
 * max_connections = 1 the next connection is served (by a new one). */
Test(smtpd, listener_session_process_killed_frees_its_slot)
{
	const char *ehlo[] = { "EHLO c\r\n", NULL };
	const char *quit[] = { "QUIT\r\n", NULL };
	struct buf out, log = BUF_INIT;
	long pid;
	int a, b;

	start_listener(" max_connections = 1\n");
	a = connect_from("127.0.0.1");
	tcp_talk(a, ehlo, &out);
	buf_free(&out);
	listener_log_count("127.0.0.1: connected", 1, &log);
	pid = logged_pid(&log, "127.0.0.1: connected", 1);
	cr_assert(kill((pid_t)pid, SIGKILL) == 0);
	listener_log_count("killed by signal 9", 1, &log);
	close(a);
	b = connect_from("127.0.0.1");
	tcp_talk(b, quit, &out);
	close(b);
	cr_assert(strncmp(out.s, "220 ", 4) == 0 && has(&out, "221 "), "%s", out.s);
	listener_log_count("127.0.0.1: connected", 2, &log);
	cr_assert_neq(logged_pid(&log, "127.0.0.1: connected", 2), pid);
	buf_free(&out);
	buf_free(&log);
}

/* weir-queued (re)started, its socket answering. */
static pid_t
queued_start(const char *sock)
{
	char *log = xasprintf("%s/queued.log", q.tmp);
	pid_t pid = tl_spawn("weir-queued", q.conf, NULL, log);
	int i;

	for (i = 0; i < 1000 && !tl_sock_answers(sock); i++)
		usleep(10000);	/* its socket is the event; 10 s at most */
	cr_assert(i < 1000, "weir-queued did not listen on %s", sock);
	free(log);
	return pid;
}

/* A session process keeps its connection to weir-queued from one message
 * to the next (mail/qqclient.c) and notices when the writer restarted in
 * between: the next message is queued, not refused with 451 for the
 * connection that ended.  Failed (451 4.3.0 ... the connection ended
 * before its answer) when the kept connection was used unchecked. */
Test(smtpd, listener_through_queued_survives_its_restart)
{
	const char *msg[] = { "EHLO c\r\n", "MAIL FROM:<a@b.example>\r\n", "RCPT TO:<c@d.example>\r\n",
	    "DATA\r\n", "x\r\n.\r\n", "QUIT\r\n", NULL };
	char *sock = xasprintf("%s/queued.sock", q.tmp);
	char *top = xasprintf("queue_socket = \"%s\"\n", sock);
	struct buf out;
	pid_t qd;
	int i, fd;

	top_conf = top;
	start_listener(" max_connections = 1\n");
	qd = queued_start(sock);
	for (i = 1; i <= 3; i++) {
		fd = connect_from("127.0.0.1");
		tcp_talk(fd, msg, &out);
		close(fd);
		cr_assert(queued_as(&out, "221 "), "message %d: %s", i, out.s);
		buf_free(&out);
		if (i == 2) {
			/* Between messages 2 and 3: a new weir-queued. */
			cr_assert(kill(-qd, SIGTERM) == 0);
			while (waitpid(qd, NULL, 0) < 0 && errno == EINTR)
				;
			qd = queued_start(sock);
		}
	}
	cr_assert_eq(todo_count(), 3);
	kill(-qd, SIGKILL);
	waitpid(qd, NULL, 0);
	top_conf = "";
	free(top);
	free(sock);
}

/* An IPv6 listener; ::1 is in the default allow list. */
Test(smtpd, listener_ipv6_loopback)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	const char *chunks[] = { "EHLO c\r\n", "MAIL FROM:<a@b.example>\r\n", "RCPT TO:<c@d.example>\r\n",
	    "DATA\r\n", "v6\r\n.\r\n", "QUIT\r\n", NULL };
	struct buf out;
	struct qt_msg m;
	int fd;

	start_listener_at("[::1]:0", "", 0);
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	inet_pton(AF_INET6, "::1", &a6.sin6_addr);
	a6.sin6_port = htons((uint16_t)port);
	cr_assert(connect(fd, (struct sockaddr *)&a6, sizeof a6) == 0, "connect [::1]");
	tcp_talk(fd, chunks, &out);
	close(fd);
	cr_assert(has(&out, "250 2.0.0 Ok: queued"), "%s", out.s);
	qt_load_only(&q, t0, time(NULL) + 1, &m);
	cr_assert(strstr(m.body.s, "([::1])\n\tby mx.test") != NULL, "%s", m.body.s);
	qt_msg_free(&m);
	buf_free(&out);
}

/* Disk full inside weir-queue (the fault-injection shim makes its first
 * write fail with ENOSPC): 451, the client keeps the message, the queue
 * holds nothing, and the session goes on. */
Test(smtpd, disk_full_is_451_nothing_lost)
{
	static const char in[] =
	    "EHLO client.test\r\nMAIL FROM:<a@b.example>\r\nRCPT TO:<c@d.example>\r\n"
	    "DATA\r\nfirst\r\n.\r\nQUIT\r\n";
	const char *shim = qt_faultinj();
	struct buf out;

	if (shim == NULL)
		cr_skip_test("no $WEIR_FAULTINJ (run through tests/run.sh)");
	setenv("LD_PRELOAD", shim, 1);
	setenv("WEIR_FAULT", "write=1+:ENOSPC", 1);
	setenv("WEIR_FAULT_PROG", "weir-queue", 1);
	cr_assert_eq(converse(in, sizeof in - 1, &out), 0, "%s", out.s);
	unsetenv("LD_PRELOAD");
	cr_assert(has(&out, "451 4.3.0 Temporary queue failure: "), "%s", out.s);
	cr_assert(!has(&out, "250 2.0.0"), "%s", out.s);
	cr_assert(has(&out, "221 2.0.0"), "%s", out.s);
	qt_assert_clean(&q, "after ENOSPC");
	buf_free(&out);
}
