/*
 * remote_test.c: the real weir-remote against a real upstream on
 * loopback: tests/upstream/upstream.py (Debian's python3-aiosmtpd, with
 * STARTTLS or implicit TLS and AUTH), told by flags how to misbehave;
 * certificates made for this run by tests/upstream/mkcerts.sh.  Each
 * case checks the exact qmail-remote output and what the server saw.
 *
 * Every server runs with PR_SET_PDEATHSIG, so it dies with the test even
 * when the test crashes; teardown kills it otherwise.  Ports are picked
 * by the kernel (the server binds port 0 and prints the port).
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "mail/gateclient.h"
#include "relay_helpers.h"
#include "testlib.h"

static char *dir;		/* this test's scratch folder */
static pid_t gate = -1;		/* weir-gate, when a test starts one */
static char *record;		/* the server's event log */
static pid_t server = -1;
static unsigned port;

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	(void)set;
	tl_certs_make_all("remote");
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	(void)stats;
	tl_certs_remove();
}

static void
setup(void)
{
	dir = tl_tmpdir();
	record = xasprintf("%s/record.jsonl", dir);
	unsetenv("WEIR_CONFIG");
}

static void
teardown(void)
{
	if (gate > 0) {
		kill(gate, SIGKILL);
		while (waitpid(gate, NULL, 0) < 0 && errno == EINTR)
			;
		gate = -1;
	}
	if (server > 0) {
		kill(server, SIGKILL);
		while (waitpid(server, NULL, 0) < 0 && errno == EINTR)
			;
		server = -1;
	}
	tl_rmtree(dir);
	free(dir);
	free(record);
}

TestSuite(remote, .init = setup, .fini = teardown, .timeout = 30);

/* Start the upstream with cert ("good", "self", ... or NULL for no TLS)
 * and extra flags (NULL-terminated). */
static void
start(const char *cert, const char *const *flags)
{
	const char *args[64];
	char *certp = NULL, *keyp = NULL, *log = xasprintf("%s/server.log", dir);
	int n = 0, i;

	args[n++] = "--record";
	args[n++] = record;
	if (cert) {
		certp = xasprintf("%s/%s.pem", tl_certs(), cert);
		keyp = xasprintf("%s/%s.key", tl_certs(), cert);
		args[n++] = "--cert";
		args[n++] = certp;
		args[n++] = "--key";
		args[n++] = keyp;
	}
	for (i = 0; flags && flags[i]; i++)
		args[n++] = flags[i];
	args[n] = NULL;
	server = tl_upstream_start(args, log, &port);
	free(certp);
	free(keyp);
	free(log);
}

/* weir.conf with upstream "t" at the server, plus extra lines; a key
 * set in extra replaces its default here (each key once in the file). */
static char *
conf(const char *extra)
{
	char *p = xasprintf("%s/weir.conf", dir), *v;
	struct buf t = BUF_INIT;
	char *defaults[] = {
		xasprintf("host = \"127.0.0.1\""), xasprintf("port = %u", port),
		xasprintf("ca_file = \"%s/ca.pem\"", tl_certs()),
		xasprintf("timeout_connect = \"5s\""), xasprintf("timeout_banner = \"10s\""),
		xasprintf("timeout_command = \"10s\""), xasprintf("timeout_mail = \"10s\""),
		xasprintf("timeout_rcpt = \"10s\""), xasprintf("timeout_data_init = \"10s\""),
		xasprintf("timeout_data_block = \"10s\""), xasprintf("timeout_data_end = \"10s\""),
	};
	size_t i;

	/* verbose: these tests read the transcript (weir.conf(5) log_level). */
	buf_printf(&t, "hostname = \"client.test\"\nlog_level = \"verbose\"\n"
	    "gate_socket = \"%s/no-gate.sock\"\n"
	    "upstream \"t\" {\n", dir);
	for (i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
		char key[40];

		snprintf(key, sizeof key, "  %.*s=", (int)strcspn(defaults[i], "="), defaults[i]);
		v = extra ? strstr(extra, key) : NULL;
		if (v == NULL)
			buf_printf(&t, "  %s\n", defaults[i]);
		free(defaults[i]);
	}
	buf_printf(&t, "%s}\n", extra ? extra : "");
	tl_write(p, t.s, t.len);
	buf_free(&t);
	return p;
}

static const char *
auth_lines(const char *password, mode_t mode)
{
	static char lines[512];
	char *sec = xasprintf("%s/secret", dir);

	tl_write(sec, password, strlen(password));
	cr_assert(chmod(sec, mode) == 0);
	snprintf(lines, sizeof lines, "  username = \"me\"\n  secret_file = \"%s\"\n", sec);
	free(sec);
	return lines;
}

static const char msg_default[] = "Subject: test\n\nhello\n";

/* Run weir-remote with this envelope sender; rcpts NULL-terminated. */
static void
run_from(const char *cfg, const char *sender, const char *msg, size_t msglen,
    const char *const *rcpts, struct tl_result *r)
{
	const char *argv[32];
	char *bin = tl_bin("weir-remote");
	struct tl_run rr;
	int n = 0, i;

	argv[n++] = bin;
	argv[n++] = "-c";
	argv[n++] = cfg;
	argv[n++] = "ignored.example";
	argv[n++] = sender;
	for (i = 0; rcpts[i]; i++)
		argv[n++] = rcpts[i];
	argv[n] = NULL;
	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	rr.in = msg;
	rr.inlen = msglen;
	rr.timeout_s = 25;
	tl_run(&rr, r);
	free(bin);
}

static void
run(const char *cfg, const char *msg, size_t msglen, const char *const *rcpts,
    struct tl_result *r)
{
	run_from(cfg, "sender@example.org", msg, msglen, rcpts, r);
}

static void
show(struct buf *out, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] == '\0')
			buf_adds(out, "\\0");
		else if (s[i] == '\n')
			buf_adds(out, "\\n");
		else
			buf_addc(out, s[i]);
}

/* Expected output: reports separated by '|' in want, each turned into a
 * NUL-terminated report; "%P" stands for "127.0.0.1:PORT". */
static void
expect(const struct tl_result *r, const char *want)
{
	struct buf w = BUF_INIT, a = BUF_INIT, b = BUF_INIT;
	char hostport[32];
	const char *p;

	snprintf(hostport, sizeof hostport, "127.0.0.1:%u", port);
	for (p = want; *p; p++) {
		if (*p == '|')
			buf_addc(&w, '\0');
		else if (p[0] == '%' && p[1] == 'P') {
			buf_adds(&w, hostport);
			p++;
		} else
			buf_addc(&w, *p);
	}
	buf_addc(&w, '\0');
	show(&a, r->out.s ? r->out.s : "", r->out.len);
	show(&b, w.s, w.len);
	cr_assert_eq(r->status, 0, "exit %d; stderr: %s", r->status, r->err.s);
	cr_assert(r->out.len == w.len && memcmp(r->out.s, w.s, w.len) == 0,
	    "\n got: %s\nwant: %s\nstderr:\n%s", a.s, b.s, r->err.s);
	buf_free(&w);
	buf_free(&a);
	buf_free(&b);
}

/* The output starts as want does (same form as expect()). */
static void
expect_prefix(const struct tl_result *r, const char *want)
{
	struct buf w = BUF_INIT, a = BUF_INIT;
	char hostport[32];
	const char *p;

	snprintf(hostport, sizeof hostport, "127.0.0.1:%u", port);
	for (p = want; *p; p++) {
		if (*p == '|')
			buf_addc(&w, '\0');
		else if (p[0] == '%' && p[1] == 'P') {
			buf_adds(&w, hostport);
			p++;
		} else
			buf_addc(&w, *p);
	}
	show(&a, r->out.s ? r->out.s : "", r->out.len);
	cr_assert_eq(r->status, 0);
	cr_assert(r->out.len >= w.len && memcmp(r->out.s, w.s, w.len) == 0,
	    "\n got: %s\nwant prefix: %s\nstderr:\n%s", a.s, want, r->err.s);
	cr_assert(r->out.len > 0 && r->out.s[r->out.len - 1] == '\0', "not NUL-terminated");
	buf_free(&w);
	buf_free(&a);
}

static int
recorded(const char *needle)
{
	struct buf b = BUF_INIT;
	int found;

	if (access(record, F_OK) < 0)
		return 0;
	tl_read(record, &b);
	found = b.s && strstr(b.s, needle) != NULL;
	buf_free(&b);
	return found;
}

static int
count_recorded(const char *needle)
{
	struct buf b = BUF_INIT;
	const char *p;
	int n = 0;

	if (access(record, F_OK) < 0)
		return 0;
	tl_read(record, &b);
	for (p = b.s; p && (p = strstr(p, needle)) != NULL; p++)
		n++;
	buf_free(&b);
	return n;
}

static void
expect_message(int n, const char *want, size_t len)
{
	char *p = xasprintf("%s.%d", record, n);
	struct buf b = BUF_INIT, x = BUF_INIT, y = BUF_INIT;

	tl_read(p, &b);
	show(&x, b.s ? b.s : "", b.len);
	show(&y, want, len);
	cr_assert(b.len == len && memcmp(b.s, want, len) == 0, "\n got: %s\nwant: %s", x.s, y.s);
	buf_free(&b);
	buf_free(&x);
	buf_free(&y);
	free(p);
}

static const char *const two[] = { "a@example.net", "b@example.net", NULL };
static const char *const one[] = { "a@example.net", NULL };

/* The common case: start the upstream (cert, flags), write weir.conf
 * with extra lines, deliver the default message to rcpts and compare
 * the whole output with want (as expect() takes it). */
static void
deliver(const char *cert, const char *const *flags, const char *extra,
    const char *const *rcpts, const char *want)
{
	struct tl_result r;
	char *c;

	start(cert, flags);
	c = conf(extra);
	run(c, msg_default, sizeof msg_default - 1, rcpts, &r);
	expect(&r, want);
	tl_result_free(&r);
	free(c);
}

/* ---- success, and the bytes on the wire ---- */

Test(remote, starttls_auth_delivers_exact_bytes)
{
	static const char msg[] = "Subject: dots\n\n.leading dot\n..two\n.\nCRLF\r\nbare CR\rend"
	    "\n \n";
	static const char want[] = "Subject: dots\r\n\r\n.leading dot\r\n..two\r\n.\r\nCRLF\r\n"
	    "bare CR\r\nend\r\n \r\n";
	static const char *const flags[] = { "--auth", "me:s3cret", "--ehlo-extra", "PIPELINING", NULL };
	struct tl_result r;
	char *c;

	start("good", flags);
	c = conf(auth_lines("s3cret\n", 0600));
	run(c, msg, sizeof msg - 1, two, &r);
	expect(&r, "r|r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	/* aiosmtpd removed one dot from each stuffed line: what it kept is
	 * the message itself, with CRLF everywhere. */
	expect_message(1, want, sizeof want - 1);
	cr_assert(recorded("\"event\": \"starttls\""));
	cr_assert(recorded("\"event\": \"auth\", \"mechanism\": \"PLAIN\", \"user\": \"me\", "
	    "\"ok\": true"));
	cr_assert(recorded("\"sender\": \"sender@example.org\", \"options\": [], \"tls\": true, "
	    "\"auth\": true"));
	cr_assert(recorded("\"rcpts\": [\"a@example.net\", \"b@example.net\"]"));
	cr_assert(strstr(r.err.s, "STARTTLS -> TLS"), "transitions are logged: %s", r.err.s);
	cr_assert(!strstr(r.err.s, "s3cret"), "the secret leaked into the log");
	tl_result_free(&r);
	free(c);
}

/* ---- paths: nothing in an address adds to MAIL FROM or RCPT TO ---- */

/* Quoted local parts as qmail-remote writes them; with and without
 * pipelining.  Failed before: the paths went out unquoted, the upstream
 * took "RET=HDRS" and "NOTIFY=NEVER" as parameters. */
static void
paths_quoted(const char *const *flags)
{
	static const char *const rcpts[] = { "evil> NOTIFY=NEVER@remote.example",
		"john doe@remote.example", "a\"b@remote.example", NULL };
	struct tl_result r;
	char *c;

	start(NULL, flags);
	c = conf("  tls = \"none\"\n");
	run_from(c, "x> RET=HDRS@client.example", msg_default, sizeof msg_default - 1, rcpts, &r);
	expect(&r, "r|r|r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(recorded("\"sender\": \"\\\"x> RET=HDRS\\\"@client.example\", \"options\": []"));
	cr_assert(recorded("\"rcpt\": \"\\\"evil> NOTIFY=NEVER\\\"@remote.example\""));
	cr_assert(recorded("\"rcpt\": \"\\\"john doe\\\"@remote.example\""));
	cr_assert(recorded("\"rcpt\": \"\\\"a\\\\\\\"b\\\"@remote.example\""));
	tl_result_free(&r);
	free(c);
}

Test(remote, paths_quoted_pipelined)
{
	static const char *const flags[] = { "--ehlo-extra", "PIPELINING", NULL };

	paths_quoted(flags);
}

Test(remote, paths_quoted_one_at_a_time)
{
	paths_quoted(NULL);
}

/* A recipient whose domain is no domain is bounced, never sent; the
 * others go.  Failed before: "RCPT TO:<r@remote.example> NOTIFY=...>". */
static void
bad_domain_bounced(const char *const *flags)
{
	static const char *const rcpts[] = { "r@remote.example> NOTIFY=SUCCESS ORCPT=rfc822;x",
		"ok@remote.example", "u@under_score.example", NULL };
	struct tl_result r;
	char *c;

	start(NULL, flags);
	c = conf("  tls = \"none\"\n");
	run(c, msg_default, sizeof msg_default - 1, rcpts, &r);
	expect(&r, "hThe recipient address is unusable: invalid character in the domain.\n"
	    "|r|hThe recipient address is unusable: invalid character in the domain.\n"
	    "|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert_eq(count_recorded("\"event\": \"rcpt\""), 1);
	cr_assert(recorded("\"rcpts\": [\"ok@remote.example\"]"));
	cr_assert(!recorded("NOTIFY"));
	tl_result_free(&r);
	free(c);
}

Test(remote, bad_domain_bounced_pipelined)
{
	static const char *const flags[] = { "--ehlo-extra", "PIPELINING", NULL };

	bad_domain_bounced(flags);
}

Test(remote, bad_domain_bounced_one_at_a_time)
{
	bad_domain_bounced(NULL);
}

Test(remote, bad_sender_domain_bounces_the_message)
{
	struct tl_result r;
	char *c;

	start(NULL, NULL);
	c = conf("  tls = \"none\"\n");
	run_from(c, "s@client.example> RET=HDRS", msg_default, sizeof msg_default - 1, one, &r);
	cr_assert_eq(r.status, 0);
	cr_assert(r.out.len > 0 && r.out.s[r.out.len - 1] == '\0');
	static const char want[] = "The sender address is unusable: invalid character in the domain.";

	cr_assert(memmem(r.out.s, r.out.len, want, sizeof want - 1) != NULL, "%s", r.out.s);
	cr_assert(!recorded("\"event\": \"mail\""));
	tl_result_free(&r);
	free(c);
}

/* A message that did not come through sendmail (qmail-queue) with a bare
 * CR in its header: one field on the wire, as sendmail would read it.
 * Failed before: the upstream got Bcc and X-Injected fields. */
Test(remote, bare_cr_in_the_header_stays_in_its_field)
{
	static const char msg[] = "Subject: hi\rBcc: hidden@x\rX-Injected: yes\n\nbody\rend\n";
	static const char want[] = "Subject: hi Bcc: hidden@x X-Injected: yes\r\n\r\nbody\r\nend\r\n";
	struct tl_result r;
	char *c;

	start(NULL, NULL);
	c = conf("  tls = \"none\"\n");
	run(c, msg, sizeof msg - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	expect_message(1, want, sizeof want - 1);
	tl_result_free(&r);
	free(c);
}

Test(remote, without_pipelining_one_command_at_a_time)
{
	struct tl_result r;
	char *c;

	start("good", NULL);
	c = conf(NULL);
	run(c, msg_default, sizeof msg_default - 1, two, &r);
	expect(&r, "r|r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	expect_message(1, "Subject: test\r\n\r\nhello\r\n", 24);
	tl_result_free(&r);
	free(c);
}

Test(remote, smtps_implicit_tls)
{
	static const char *const flags[] = { "--smtps", "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c;

	start("good", flags);
	c = conf(xasprintf("  tls = \"smtps\"\n%s", auth_lines("pw", 0600)));
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(!recorded("starttls"));
	cr_assert(recorded("\"tls\": true, \"auth\": true"));
	tl_result_free(&r);
	free(c);
}

Test(remote, tls_none_to_loopback)
{
	deliver(NULL, NULL, "  tls = \"none\"\n", one,
	    "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(recorded("\"tls\": false"));
}

Test(remote, eight_bit_body_declared)
{
	static const char msg[] = "Subject: caf\xc3\xa9\n\nna\xc3\xafve\n";
	struct tl_result r;
	char *c;

	start("good", NULL);
	c = conf(NULL);
	run(c, msg, sizeof msg - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(recorded("\"options\": [\"BODY=8BITMIME\"]"));
	tl_result_free(&r);
	free(c);
}

Test(remote, secret_from_command)
{
	static const char *const flags[] = { "--auth", "me:fromcmd", NULL };

	deliver("good", flags, "  username = \"me\"\n  secret_command = \"printf 'fromcmd\\\\n'\"\n", one,
	    "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
}

/* 1 while pid lives (a zombie counts as gone). */
static int
alive(pid_t pid)
{
	char *p = xasprintf("/proc/%ld/stat", (long)pid), st[256], *rp;
	FILE *f = fopen(p, "r");
	size_t n;

	free(p);
	if (f == NULL)
		return 0;
	n = fread(st, 1, sizeof st - 1, f);
	fclose(f);
	st[n] = '\0';
	rp = strrchr(st, ')');
	return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* secret_command: only fds 0-2 (weir-send's outcome descriptor, here 7,
 * is not among them), and a child it leaves behind holding the pipe
 * neither stalls weir-remote nor outlives it.  Failed before: fds
 * "0 1 2 7", and weir-remote waited for timeout_command, then deferred
 * ("timed out") and left the sleep running. */
Test(remote, secret_command_group_and_descriptors)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	struct tl_result r;
	struct tl_run rr;
	struct buf b = BUF_INIT;
	struct timespec t0, t1;
	char *extra, *c, *script, *pidf = xasprintf("%s/pid", dir), *fdsf = xasprintf("%s/fds", dir);
	char *bin = tl_bin("weir-remote");
	const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
	pid_t child;
	int i;

	start(NULL, flags);
	extra = xasprintf("  tls = \"none\"\n  timeout_command = \"20s\"\n  username = \"me\"\n"
	    "  secret_command = \"ls /proc/self/fd >%s; sleep 300 & echo $! >%s; echo pw\"\n",
	    fdsf, pidf);
	c = conf(extra);
	script = xasprintf("exec 7>%s/outcome; exec %s -n -r 7 -c %s x s@x.example a@example.net",
	    dir, bin, c);
	argv[2] = script;
	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	rr.in = msg_default;
	rr.inlen = sizeof msg_default - 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	tl_run(&rr, &r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(t1.tv_sec - t0.tv_sec < 15, "weir-remote waited %lds for the sleeping child",
	    (long)(t1.tv_sec - t0.tv_sec));
	tl_read(fdsf, &b);
	/* ls itself has 3: the folder it lists */
	cr_assert_str_eq(buf_cstr(&b), "0\n1\n2\n3\n", "the command had: %s", buf_cstr(&b));
	tl_read(pidf, &b);
	child = (pid_t)atol(buf_cstr(&b));
	cr_assert(child > 1);
	/* Killed with its group: gone at once, or reaped by init soon. */
	for (i = 0; i < 500 && alive(child); i++)
		poll(NULL, 0, 10);
	cr_assert(!alive(child), "the command's child %ld outlived weir-remote", (long)child);
	tl_result_free(&r);
	buf_free(&b);
	free(extra); free(c); free(script); free(pidf); free(fdsf); free(bin);
}

/* ---- certificates ---- */

static void
cert_case(const char *cert, const char *extra, const char *want)
{
	deliver(cert, NULL, extra, one, want);
	cr_assert(recorded("\"event\": \"starttls\""));
	cr_assert(!recorded("\"event\": \"mail\""), "mail went out after a bad certificate");
}

Test(remote, cert_self_signed_refused)
{
	cert_case("self", NULL, "s%P: TLS failed: certificate verification failed: "
	    "self-signed certificate.\n|Z%P: TLS failed: certificate verification failed: "
	    "self-signed certificate.\n");
}

Test(remote, cert_expired_refused)
{
	cert_case("expired", NULL, "s%P: TLS failed: certificate verification failed: "
	    "certificate has expired.\n|Z%P: TLS failed: certificate verification failed: "
	    "certificate has expired.\n");
}

Test(remote, cert_wrong_host_refused)
{
	cert_case("wrong", NULL, "s%P: TLS failed: certificate verification failed: "
	    "IP address mismatch.\n|Z%P: TLS failed: certificate verification failed: "
	    "IP address mismatch.\n");
}

Test(remote, cert_wrong_host_name_refused)
{
	/* The name is what is checked: the server listens on 127.0.0.1 only. */
	deliver("wrong", NULL, "  host = \"localhost\"\n", one,
	    "s%P: TLS failed: certificate verification failed: hostname mismatch.\n"
	    "|Z%P: TLS failed: certificate verification failed: hostname mismatch.\n");
	cr_assert(!recorded("\"event\": \"mail\""));
}

Test(remote, cert_unknown_ca_refused)
{
	char *extra = xasprintf("  ca_file = \"%s/other-ca.pem\"\n", tl_certs());

	deliver("good", NULL, extra, one,
	    "s%P: TLS failed: certificate verification failed: unable to get local "
	    "issuer certificate.\n|Z%P: TLS failed: certificate verification failed: unable to "
	    "get local issuer certificate.\n");
	cr_assert(!recorded("\"event\": \"mail\""));
	free(extra);
}

Test(remote, cert_pinned_fingerprint)
{
	struct buf fp = BUF_INIT;
	char *p = xasprintf("%s/good.sha256", tl_certs()), *extra;
	struct tl_result r;
	char *c;

	tl_read(p, &fp);
	fp.s[strcspn(fp.s, "\n")] = '\0';
	start("good", NULL);
	extra = xasprintf("  fingerprint = \"%s\"\n", fp.s);
	c = conf(extra);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	tl_result_free(&r);
	free(c);
	free(extra);
	/* The same pin against another certificate (verification off, so
	 * only the pin can refuse it). */
	teardown();
	setup();
	start("self", NULL);
	extra = xasprintf("  verify = false\n  fingerprint = \"%s\"\n", fp.s);
	c = conf(extra);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "s%P: TLS failed: certificate fingerprint does not match the pinned "
	    "SHA-256.\n|Z%P: TLS failed: certificate fingerprint does not match the pinned "
	    "SHA-256.\n");
	cr_assert(!recorded("\"event\": \"mail\""));
	tl_result_free(&r);
	free(c);
	free(extra);
	free(p);
	buf_free(&fp);
}

Test(remote, verify_false_accepts_self_signed)
{
	deliver("self", NULL, "  verify = false\n", one,
	    "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
}

/* ---- STARTTLS attacks and absence ---- */

Test(remote, starttls_not_offered)
{
	static const char *const flags[] = { "--no-starttls", "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c;

	start("good", flags);
	c = conf(auth_lines("pw", 0600));
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "s%P does not offer STARTTLS, and tls = starttls requires it; nothing sent "
	    "in the clear.\n|Z%P does not offer STARTTLS, and tls = starttls requires it; "
	    "nothing sent in the clear.\n");
	cr_assert(!recorded("\"event\": \"auth\""));
	cr_assert(!recorded("\"event\": \"mail\""));
	tl_result_free(&r);
	free(c);
}

Test(remote, plaintext_injected_after_starttls)
{
	static const char *const flags[] = { "--inject", "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c;

	start("good", flags);
	c = conf(auth_lines("pw", 0600));
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	/* The injected bytes arrive either with the 220 (refused before the
	 * handshake) or after it (then they break the handshake).  The
	 * server may record the event a moment after weir-remote is done. */
	{
		struct timespec ms = { 0, 10000000 };
		int i;

		for (i = 0; i < 300 && !recorded("\"event\": \"injected\""); i++)
			nanosleep(&ms, NULL);
	}
	cr_assert(recorded("\"event\": \"injected\""));
	cr_assert(r.out.len > 2 && r.out.s[0] == 's', "%s", r.out.s);
	cr_assert(strstr(r.out.s, "STARTTLS injection") || strstr(r.out.s, "TLS failed"),
	    "%s", r.out.s);
	cr_assert(memchr(r.out.s, 'Z', r.out.len));
	cr_assert(!recorded("\"event\": \"auth\""));
	cr_assert(!recorded("\"event\": \"mail\""));
	tl_result_free(&r);
	free(c);
}

/* ---- AUTH and secrets ---- */

Test(remote, auth_535_is_temporary)
{
	static const char *const flags[] = { "--auth", "me:right", NULL };
	struct tl_result r;
	char *c;

	start("good", flags);
	c = conf(auth_lines("wrong", 0600));
	run(c, msg_default, sizeof msg_default - 1, two, &r);
	expect(&r, "sConnected to %P but AUTH PLAIN was refused.\nRemote host said: 535 5.7.8 "
	    "Authentication credentials invalid\n|sConnected to %P but AUTH PLAIN was refused.\n"
	    "Remote host said: 535 5.7.8 Authentication credentials invalid\n|ZConnected to %P "
	    "but AUTH PLAIN was refused.\nRemote host said: 535 5.7.8 Authentication "
	    "credentials invalid\n");
	cr_assert(!recorded("\"event\": \"mail\""));
	cr_assert(!strstr(r.err.s, "wrong"), "the secret leaked into the log");
	tl_result_free(&r);
	free(c);
}

Test(remote, auth_login_mechanism_by_preference)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c, *extra = xasprintf("%s  mechanisms = {\"LOGIN\", \"PLAIN\"}\n", auth_lines("pw", 0600));

	start("good", flags);
	c = conf(extra);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(recorded("\"mechanism\": \"LOGIN\""));
	tl_result_free(&r);
	free(c);
	free(extra);
}

/* A SCRAM server that says 235 without proving it knows the secret (no
 * v= signature) is a failed AUTH: nothing is sent.  Failed before: a
 * warning, then the mail went to it. */
Test(remote, scram_235_without_server_signature_fails)
{
	static const char *const flags[] = { "--scram-lie", "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c, *extra;

	start("good", flags);
	extra = xasprintf("%s  mechanisms = {\"SCRAM-SHA-256\"}\n", auth_lines("pw", 0600));
	c = conf(extra);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "sConnected to %P but AUTH SCRAM-SHA-256 ended before the server proved it "
	    "knows the secret.\nRemote host said: 235 2.7.0 Authentication successful\n|"
	    "ZConnected to %P but AUTH SCRAM-SHA-256 ended before the server proved it knows "
	    "the secret.\nRemote host said: 235 2.7.0 Authentication successful\n");
	cr_assert(recorded("\"mechanism\": \"SCRAM-SHA-256\", \"user\": \"me\""));
	cr_assert(!recorded("\"event\": \"mail\""), "mail went to an unproven server");
	tl_result_free(&r);
	free(extra);
	free(c);
}

Test(remote, auth_cram_md5_through_cyrus)
{
	static const char *const flags[] = { "--cram", "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c;

	/* The default order prefers CRAM-MD5 to PLAIN when both are offered. */
	start("good", flags);
	c = conf(auth_lines("pw", 0600));
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(recorded("\"mechanism\": \"CRAM-MD5\", \"user\": \"me\", \"ok\": true"));
	tl_result_free(&r);
	free(c);
	c = conf(auth_lines("bad", 0600));
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "sConnected to %P but AUTH CRAM-MD5 was refused.\nRemote host said: 535 5.7.8 "
	    "Authentication credentials invalid\n|ZConnected to %P but AUTH CRAM-MD5 was "
	    "refused.\nRemote host said: 535 5.7.8 Authentication credentials invalid\n");
	tl_result_free(&r);
	free(c);
}

Test(remote, auth_no_common_mechanism)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c, *extra = xasprintf("%s  mechanisms = {\"SCRAM-SHA-256\"}\n", auth_lines("pw", 0600));

	start("good", flags);
	c = conf(extra);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "s%P: AUTH: no SASL mechanism in common (server offers: LOGIN PLAIN; we would "
	    "use: SCRAM-SHA-256).\n|Z%P: AUTH: no SASL mechanism in common (server offers: LOGIN "
	    "PLAIN; we would use: SCRAM-SHA-256).\n");
	cr_assert(!recorded("\"event\": \"auth\""));
	cr_assert(!recorded("\"event\": \"mail\""));
	tl_result_free(&r);
	free(c);
	free(extra);
}

Test(remote, secret_file_open_to_others_refused)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c, *want;

	start("good", flags);
	c = conf(auth_lines("pw", 0644));
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	want = xasprintf("sweir-remote: secret_file %s/secret: mode 0644 lets group or others "
	    "in; refusing it (chmod 600 %s/secret). (#4.3.0)\n|Zweir-remote: secret_file "
	    "%s/secret: mode 0644 lets group or others in; refusing it (chmod 600 %s/secret). "
	    "(#4.3.0)\n", dir, dir, dir, dir);
	expect(&r, want);
	cr_assert(!recorded("\"event\": \"ehlo\""), "connected without a usable secret");
	tl_result_free(&r);
	free(c);
	free(want);
}

/* ---- replies ---- */

Test(remote, reply_421_mid_session)
{
	static const char *const flags[] = { "--reply", "rcpt=421 4.7.0 Too busy, closing", NULL };
	struct tl_result r;
	char *c;

	start("good", flags);
	c = conf(NULL);
	run(c, msg_default, sizeof msg_default - 1, two, &r);
	expect(&r, "s%P does not like recipient.\nRemote host said: 421 4.7.0 Too busy, closing\n"
	    "|sConnected to %P but the server closed the session.\nRemote host said: 421 4.7.0 "
	    "Too busy, closing\n|ZConnected to %P but the server closed the session.\nRemote "
	    "host said: 421 4.7.0 Too busy, closing\n");
	cr_assert(strstr(r.err.s, "throttled: 421 4.7.0 Too busy, closing"), "%s", r.err.s);
	tl_result_free(&r);
	free(c);
}

Test(remote, rcpt_550_and_450_per_recipient)
{
	static const char *const flags[] = { "--reply", "rcpt:b@example.net=550 5.1.1 No such user",
		"--reply", "rcpt:c@example.net=450 4.2.1 Mailbox busy", NULL };
	static const char *const three[] = { "a@example.net", "b@example.net", "c@example.net", NULL };
	deliver("good", flags, NULL, three,
	    "r|h%P does not like recipient.\nRemote host said: 550 5.1.1 No such user\n"
	    "|s%P does not like recipient.\nRemote host said: 450 4.2.1 Mailbox busy\n"
	    "|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(recorded("\"rcpts\": [\"a@example.net\"]"));
}

Test(remote, single_rcpt_550_bounces)
{
	static const char *const flags[] = { "--reply", "rcpt=550 5.1.1 No such user", NULL };

	deliver("good", flags, NULL, one,
	    "h%P does not like recipient.\nRemote host said: 550 5.1.1 No such user\n"
	    "|D%P does not like recipient.\nRemote host said: 550 5.1.1 No such user\n");
	cr_assert(!recorded("\"event\": \"data\""));
}

Test(remote, identical_5xx_for_all_is_the_relay)
{
	static const char *const flags[] = { "--reply", "rcpt=554 5.7.1 Go away", NULL };

	deliver("good", flags, NULL, two,
	    "s%P does not like recipient.\nRemote host said: 554 5.7.1 Go away\n(The same "
	    "refusal for every recipient: taken as the relay refusing us, not bounced.)\n"
	    "|s%P does not like recipient.\nRemote host said: 554 5.7.1 Go away\n(The same "
	    "refusal for every recipient: taken as the relay refusing us, not bounced.)\n"
	    "|Z%P does not like recipient.\nRemote host said: 554 5.7.1 Go away\n(The same "
	    "refusal for every recipient: taken as the relay refusing us, not bounced.)\n");
}

/* The same refusals with PIPELINING: replies to commands already sent
 * are read in order (RFC 2920), DATA's included. */
Test(remote, pipelined_rcpt_550_and_mail_553)
{
	static const char *const f1[] = { "--ehlo-extra", "PIPELINING", "--reply",
		"rcpt=550 5.1.1 No such user", NULL };
	static const char *const f2[] = { "--ehlo-extra", "PIPELINING", "--reply",
		"mail=553 5.7.1 Sender not owned", NULL };

	deliver("good", f1, NULL, one,
	    "h%P does not like recipient.\nRemote host said: 550 5.1.1 No such user\n"
	    "|D%P does not like recipient.\nRemote host said: 550 5.1.1 No such user\n");
	cr_assert(!recorded("\"event\": \"data\""));
	teardown();
	setup();
	deliver("good", f2, NULL, two,
	    "sConnected to %P but sender was rejected.\nRemote host said: 553 5.7.1 Sender "
	    "not owned\n|sConnected to %P but sender was rejected.\nRemote host said: 553 5.7.1 "
	    "Sender not owned\n|ZConnected to %P but sender was rejected.\nRemote host said: "
	    "553 5.7.1 Sender not owned\n");
}

/* A 421 greeting is the upstream not reached (issue 31): deferred, as
 * a failed greeting. */
Test(remote, banner_421_is_no_greeting)
{
	static const char *const flags[] = { "--reply", "banner=421 4.3.2 Busy", NULL };

	deliver("good", flags, NULL, one,
	    "sConnected to %P but greeting failed.\nRemote host said: 421 4.3.2 Busy\n"
	    "|ZConnected to %P but greeting failed.\nRemote host said: 421 4.3.2 Busy\n");
}

Test(remote, ehlo_refused_helo_only_in_the_clear)
{
	static const char *const flags[] = { "--reply", "ehlo=502 5.5.1 No EHLO here", NULL };

	/* tls = none, no AUTH: HELO will do. */
	deliver(NULL, flags, "  tls = \"none\"\n", one,
	    "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(recorded("\"event\": \"mail\""));
}

Test(remote, ehlo_refused_with_starttls_required)
{
	static const char *const flags[] = { "--reply", "ehlo=502 5.5.1 No EHLO here", NULL };

	deliver("good", flags, NULL, one,
	    "sConnected to %P but EHLO was refused.\nRemote host said: 502 5.5.1 No EHLO here\n"
	    "|ZConnected to %P but EHLO was refused.\nRemote host said: 502 5.5.1 No EHLO here\n");
	cr_assert(!recorded("\"event\": \"mail\""));
}

Test(remote, mail_from_553_never_bounces)
{
	static const char *const flags[] = { "--reply", "mail=553 5.7.1 Sender not owned", NULL };

	deliver("good", flags, NULL, one,
	    "sConnected to %P but sender was rejected.\nRemote host said: 553 5.7.1 Sender "
	    "not owned\n|ZConnected to %P but sender was rejected.\nRemote host said: 553 5.7.1 "
	    "Sender not owned\n");
}

Test(remote, data_554_bounces)
{
	static const char *const flags[] = { "--reply", "data=554 5.6.0 No data for you", NULL };

	deliver("good", flags, NULL, one,
	    "h%P failed on DATA command.\nRemote host said: 554 5.6.0 No data for you\n"
	    "|D%P failed on DATA command.\nRemote host said: 554 5.6.0 No data for you\n");
}

Test(remote, after_data_5xx_bounces)
{
	static const char *const flags[] = { "--reply", "dataend=554 5.7.1 Spam", NULL };

	deliver("good", flags, NULL, two,
	    "h%P failed after I sent the message.\nRemote host said: 554 5.7.1 Spam\n"
	    "|h%P failed after I sent the message.\nRemote host said: 554 5.7.1 Spam\n"
	    "|D%P failed after I sent the message.\nRemote host said: 554 5.7.1 Spam\n");
}

Test(remote, after_data_4xx_defers)
{
	static const char *const flags[] = { "--reply", "dataend=451 4.3.0 Try later", NULL };

	deliver("good", flags, NULL, one,
	    "s%P failed after I sent the message.\nRemote host said: 451 4.3.0 Try later\n"
	    "|Z%P failed after I sent the message.\nRemote host said: 451 4.3.0 Try later\n");
}

/* ---- time-outs and lost connections ---- */

Test(remote, hang_at_rcpt_times_out)
{
	static const char *const flags[] = { "--hang", "rcpt", NULL };
	time_t t0 = time(NULL);

	deliver("good", flags, "  timeout_rcpt = \"1s\"\n", one,
	    "s%P: timeout at RCPT TO.\n|Z%P: timeout at RCPT TO.\n");
	cr_assert(time(NULL) - t0 < 8, "the 1 s timeout took %ld s", (long)(time(NULL) - t0));
}

Test(remote, hang_at_banner_times_out)
{
	static const char *const flags[] = { "--hang", "banner", NULL };

	deliver("good", flags, "  timeout_banner = \"1s\"\n", one,
	    "s%P: timeout at banner.\n|Z%P: timeout at banner.\n");
}

Test(remote, hang_after_data_times_out_may_duplicate)
{
	static const char *const flags[] = { "--hang", "dataend", NULL };

	deliver("good", flags, "  timeout_data_end = \"1s\"\n", one,
	    "s%P: timeout after the end of data; the message may be delivered twice.\n"
	    "|Z%P: timeout after the end of data; the message may be delivered twice.\n");
}

Test(remote, dropped_mid_data)
{
	static const char *const flags[] = { "--drop-in-data", NULL };
	struct buf big = BUF_INIT;
	struct tl_result r;
	char *c;
	int i;

	/* Big enough that the drop hits while we are still writing. */
	buf_adds(&big, "Subject: big\n\n");
	for (i = 0; i < 40000; i++)
		buf_adds(&big, "0123456789012345678901234567890123456789012345678901234567890123456789\n");
	start("good", flags);
	c = conf(NULL);
	run(c, big.s, big.len, one, &r);
	cr_assert(recorded("\"event\": \"dropped\""));
	expect_prefix(&r, "s%P: connection lost ");
	cr_assert(memchr(r.out.s + 1, 'Z', r.out.len - 1) != NULL);
	cr_assert(!recorded("\"event\": \"data\""));
	tl_result_free(&r);
	buf_free(&big);
	free(c);
}

Test(remote, connection_refused)
{
	struct tl_result r;
	char *c;

	/* Take a free port from a server, then stop it. */
	start(NULL, NULL);
	kill(server, SIGKILL);
	while (waitpid(server, NULL, 0) < 0 && errno == EINTR)
		;
	server = -1;
	c = conf(NULL);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "sSorry, I wasn't able to establish an SMTP connection to %P: %P: Connection "
	    "refused.\n|ZSorry, I wasn't able to establish an SMTP connection to %P: %P: "
	    "Connection refused.\n");
	tl_result_free(&r);
	free(c);
}

/* ---- the message and the limits ---- */

Test(remote, line_over_998_bytes_bounces_before_connecting)
{
	struct buf m = BUF_INIT;
	struct tl_result r;
	char *c;
	int i;

	buf_adds(&m, "Subject: long\n\n");
	for (i = 0; i < 999; i++)
		buf_addc(&m, 'x');
	buf_adds(&m, "\n");
	start("good", NULL);
	c = conf(NULL);
	run(c, m.s, m.len, two, &r);
	expect(&r, "hLine 3 of the message is 999 bytes long; SMTP allows 998 (RFC 5322 2.1.1), "
	    "so it cannot be sent as it is. (#5.6.0)\n|hLine 3 of the message is 999 bytes long; "
	    "SMTP allows 998 (RFC 5322 2.1.1), so it cannot be sent as it is. (#5.6.0)\n"
	    "|DLine 3 of the message is 999 bytes long; SMTP allows 998 (RFC 5322 2.1.1), so it "
	    "cannot be sent as it is. (#5.6.0)\n");
	cr_assert(!recorded("\"event\": \"ehlo\""));
	tl_result_free(&r);
	buf_free(&m);
	free(c);
}

Test(remote, size_over_the_servers_limit_bounces)
{
	static const char *const flags[] = { "--ehlo-extra", "SIZE 10", NULL };

	deliver("good", flags, NULL, one,
	    "h%P accepts messages of up to 10 bytes (SIZE); this one is 24 bytes.\n"
	    "|D%P accepts messages of up to 10 bytes (SIZE); this one is 24 bytes.\n");
	cr_assert(!recorded("\"event\": \"mail\""));
}

/* SIZE with a parameter that is no number (RFC 1870: 1*20DIGIT) is no
 * limit: the message goes.  Before, "10k" read as 10 bytes bounced it. */
Test(remote, size_not_a_number_is_no_limit)
{
	static const char *const flags[] = { "--ehlo-extra", "SIZE 10k", NULL };

	deliver("good", flags, NULL, one,
	    "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
}

/* weir-remote delivering a message of size bytes from a file (fd 0, as
 * weir-send gives it) to an upstream that never answers the final dot:
 * its VmHWM, in kB, once everything is sent. */
static long
peak_kb_sending(size_t size)
{
	static char block[1 << 20];
	char *msgp = xasprintf("%s/big.%zu", dir, size), *c = conf("  tls = \"none\"\n");
	char *bin = tl_bin("weir-remote"), *rec = xasprintf("%s/record.jsonl", dir);
	size_t off, i;
	pid_t pid;
	long kb;
	int fd, status;

	for (i = 0; i < sizeof block; i++)	/* 76-byte lines */
		block[i] = i % 77 == 76 ? '\n' : 'a' + i % 26;
	fd = open(msgp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	cr_assert(write(fd, "Subject: big\n\n", 14) == 14);
	for (off = 0; off < size; off += sizeof block)
		cr_assert(write(fd, block, size - off < sizeof block ? size - off : sizeof block) > 0);
	cr_assert(close(fd) == 0);
	unlink(rec);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int in = open(msgp, O_RDONLY), null = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (in < 0 || null < 0 || dup2(in, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(126);
		execl(bin, "weir-remote", "-n", "-c", c, "x", "s@x.example", "a@example.net",
		    (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 6000 && !recorded("\"stage\": \"dataend\""); i++)
		poll(NULL, 0, 10);
	cr_assert(recorded("\"stage\": \"dataend\""), "the upstream never got the end of data");
	kb = rt_status_kb(pid, "VmHWM");
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	unlink(msgp);
	free(msgp); free(c); free(bin); free(rec);
	return kb;
}

/* Streamed: memory does not grow with the message.  Failed before:
 * 100 MB took over 200 MB (the message and its wire copy held). */
Test(remote, big_message_streamed_in_bounded_memory, .timeout = 180)
{
	static const char *const flags[] = { "--hang", "dataend", NULL };
	long small, big;

	start(NULL, flags);
	small = peak_kb_sending(1024);
	big = peak_kb_sending(100 * 1000 * 1000);
	cr_log_info("weir-remote VmHWM: %ld kB for 1 KB, %ld kB for 100 MB", small, big);
	cr_assert(small > 0 && big > 0);
	cr_assert(big - small < 4096, "VmHWM %ld kB for 100 MB, %ld kB for 1 KB", big, small);
}

Test(remote, size_declared_in_mail_from)
{
	static const char *const flags[] = { "--ehlo-extra", "SIZE 100000", NULL };

	deliver("good", flags, NULL, one,
	    "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(recorded("\"options\": [\"SIZE=24\"]"));
}

#define NOT_ATTEMPTED "sNot attempted: %P took the recipients before this one in this " \
	"send's one transaction; try again. (#4.5.3)\n"

/* One send, one transaction (issue 12, item 1): the recipients beyond
 * RCPTMAX are not attempted, and said so; the upstream sees one
 * transaction (it used to see two in one session). */
Test(remote, limits_rcptmax_one_transaction)
{
	static const char *const flags[] = { "--ehlo-extra", "LIMITS RCPTMAX=2 MAILMAX=5",
		"--ehlo-extra", "PIPELINING", NULL };
	static const char *const three[] = { "a@example.net", "b@example.net", "c@example.net", NULL };
	deliver("good", flags, NULL, three,
	    "r|r|" NOT_ATTEMPTED "|K%P accepted message.\nRemote host said: 250 2.0.0 OK "
	    "queued as TEST1\n");
	cr_assert_eq(count_recorded("\"event\": \"data\""), 1);
	cr_assert_eq(count_recorded("\"event\": \"mail\""), 1);
	cr_assert(recorded("\"rcpts\": [\"a@example.net\", \"b@example.net\"]"));
}

/* The same with weir-remote's own max_recipients smaller than what its
 * caller sent (a set-id weir-remote reading another weir.conf). */
Test(remote, max_recipients_from_config)
{
	deliver("good", NULL, "  max_recipients = 1\n", two,
	    "r|" NOT_ATTEMPTED "|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued "
	    "as TEST1\n");
	cr_assert_eq(count_recorded("\"event\": \"data\""), 1);
	cr_assert_eq(count_recorded("\"event\": \"mail\""), 1);
}

/* weir-remote run with argv[1..] (argv[0] filled in) answers want. */
static void
expect_run(const char **argv, const char *want)
{
	struct tl_run rr;
	struct tl_result r;
	char *bin = tl_bin("weir-remote");

	argv[0] = bin;
	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	tl_run(&rr, &r);
	expect(&r, want);
	tl_result_free(&r);
	free(bin);
}

Test(remote, bad_usage_is_temporary)
{
	const char *argv[] = { NULL, "host", "sender", NULL };

	expect_run(argv, "Zweir-remote was invoked improperly: usage: weir-remote [-c FILE] "
	    "[-u UPSTREAM] [-n [-r FD]] [-q ID] host sender recip... (#4.3.5)\n");
}

/* -q takes only a queue id (mail/queue.h): it goes into log lines. */
Test(remote, bad_queue_id_is_temporary)
{
	const char *argv[] = { NULL, "-q", "12.34\nfake line", "host", "sender", "rcpt", NULL };

	expect_run(argv, "Zweir-remote was invoked improperly: -q needs a queue id "
	    "INODE.SEC.NSEC. (#4.3.5)\n");
}

/* A section without host is refused: the caller's host argument never
 * gets the secret.  Failed before: weir-remote connected to the host it
 * was given and authenticated there. */
Test(remote, upstream_without_host_is_refused)
{
	static const char *const flags[] = { "--auth", "me:pw", NULL };
	struct tl_result r;
	char *c = xasprintf("%s/weir.conf", dir), *text;
	const char *argv[] = { NULL, "-c", NULL, "127.0.0.1", "s@x.example", "r@y.example", NULL };
	struct tl_run rr;

	start(NULL, flags);
	text = xasprintf("hostname = \"client.test\"\ngate_socket = \"%s/no-gate.sock\"\n"
	    "upstream \"t\" {\n  port = %u\n  tls = \"none\"\n%s}\n", dir, port,
	    auth_lines("pw", 0600));
	tl_write(c, text, strlen(text));
	argv[0] = tl_bin("weir-remote");
	argv[2] = c;
	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	rr.in = msg_default;
	rr.inlen = sizeof msg_default - 1;
	tl_run(&rr, &r);
	cr_assert_eq(r.status, 0);
	cr_assert(r.out.s && r.out.s[0] == 's' && strstr(r.out.s, "no host"), "%s", r.out.s);
	cr_assert(!recorded("\"event\": \"ehlo\""), "weir-remote spoke to the caller's host");
	tl_result_free(&r);
	free((char *)argv[0]);
	free(text);
	free(c);
}

Test(remote, unknown_upstream_is_temporary)
{
	const char *argv[] = { NULL, "-c", NULL, "-u", "nope", "host", "s@x", "r@y", NULL };
	struct tl_run rr;
	struct tl_result r;
	char *bin = tl_bin("weir-remote"), *c, *want;

	start(NULL, NULL);
	c = conf(NULL);
	argv[0] = bin;
	argv[2] = c;
	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	tl_run(&rr, &r);
	want = xasprintf("sweir-remote: no upstream \"nope\" in %s. (#4.3.0)\n|Zweir-remote: no "
	    "upstream \"nope\" in %s. (#4.3.0)\n", c, c);
	expect(&r, want);
	tl_result_free(&r);
	free(want);
	free(bin);
	free(c);
}

/* ---- weir-gate ---- */

/* Start the real weir-gate on dir/gate.sock with this policy. */
static char *
start_gate(const char *policy_text)
{
	char *bin = tl_bin("weir-gate"), *sock = xasprintf("%s/gate.sock", dir);
	char *pol = xasprintf("%s/policy.conf", dir), *jr = xasprintf("%s/journal", dir);
	char *wc = xasprintf("%s/gate-weir.conf", dir), *lg = xasprintf("%s/gate.log", dir);
	struct gate_client gc;
	int i, lfd;

	tl_write(pol, policy_text, strlen(policy_text));
	tl_write(wc, "", 0);
	gate = fork();
	cr_assert(gate >= 0);
	if (gate == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		lfd = open(lg, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (lfd < 0 || dup2(lfd, 2) < 0)
			_exit(127);
		execl(bin, bin, "-c", wc, "-p", pol, "-s", sock, "-j", jr, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 500; i++) {
		struct pollfd none;

		if (gc_connect(&gc, sock) == 0) {
			gc_close(&gc);
			break;
		}
		(void)poll(&none, 0, 10);
	}
	cr_assert(i < 500, "weir-gate did not start");
	free(bin); free(pol); free(jr); free(wc); free(lg);
	return sock;
}

/* conf() with gate_socket pointing at sock. */
static char *
conf_gate(const char *sock, const char *extra)
{
	char *c = conf(extra), *needle = xasprintf("%s/no-gate.sock", dir);
	struct buf b = BUF_INIT, out = BUF_INIT;
	char *at;

	tl_read(c, &b);
	at = strstr(b.s, needle);
	cr_assert_not_null(at);
	buf_add(&out, b.s, (size_t)(at - b.s));
	buf_adds(&out, sock);
	buf_adds(&out, at + strlen(needle));
	tl_write(c, out.s, out.len);
	buf_free(&b);
	buf_free(&out);
	free(needle);
	return c;
}

static int
file_has(const char *name, const char *needle)
{
	char *p = xasprintf("%s/%s", dir, name);
	struct buf b = BUF_INIT;
	int found;

	tl_read(p, &b);
	found = b.s && strstr(b.s, needle) != NULL;
	buf_free(&b);
	free(p);
	return found;
}

Test(remote, gate_grants_then_holds_back)
{
	struct tl_result r;
	char *sock, *c;
	const char *argv[] = { NULL, "-c", NULL, "host", "s@example.org", "a@example.net", NULL };
	struct tl_run rr;
	char *bin = tl_bin("weir-remote");

	start("good", NULL);
	sock = start_gate("upstream \"t\" { rate = \"2 per 1m\" }\n");
	c = conf_gate(sock, NULL);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	cr_assert(strstr(r.err.s, "weir-gate granted send"), "%s", r.err.s);
	tl_result_free(&r);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	tl_result_free(&r);
	/* The third in the same minute waits for its grant: nothing sent. */
	argv[0] = bin;
	argv[2] = c;
	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	rr.in = msg_default;
	rr.inlen = sizeof msg_default - 1;
	rr.timeout_s = 2;
	tl_run(&rr, &r);
	cr_assert_eq(r.status, 128 + SIGKILL, "not held back: %d %s", r.status, r.err.s);
	cr_assert_eq(r.out.len, 0);
	cr_assert(strstr(r.err.s, "waiting for a grant"), "%s", r.err.s);
	cr_assert_eq(count_recorded("\"event\": \"data\""), 2);
	tl_result_free(&r);
	free(bin);
	free(sock);
	free(c);
}

Test(remote, gate_hears_the_throttle_reply)
{
	static const char *const flags[] = { "--reply", "rcpt=421 4.7.0 Slow down", NULL };
	struct tl_result r;
	char *sock, *c;

	start("good", flags);
	sock = start_gate("upstream \"t\" { rate = \"10 per 1m\" }\n"
	    "throttle_reply { pattern = \"421 *\" suspend = \"5m\" }\n");
	c = conf_gate(sock, NULL);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "s%P does not like recipient.\nRemote host said: 421 4.7.0 Slow down\n"
	    "|ZConnected to %P but the server closed the session.\nRemote host said: 421 4.7.0 "
	    "Slow down\n");
	cr_assert(strstr(r.err.s, "weir-gate suspended the upstream for 300 s"), "%s", r.err.s);
	cr_assert(file_has("gate.log", "upstream t suspended for 300 s"));
	tl_result_free(&r);
	free(sock);
	free(c);
}

Test(remote, gate_refund_when_nothing_sent)
{
	struct tl_result r;
	char *sock, *c;

	/* No connection at all (the port's server is gone): a refund. */
	start("good", NULL);
	kill(server, SIGKILL);
	while (waitpid(server, NULL, 0) < 0 && errno == EINTR)
		;
	server = -1;
	sock = start_gate("upstream \"t\" { rate = \"1 per 1m\" }\n");
	c = conf_gate(sock, NULL);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "sSorry, I wasn't able to establish an SMTP connection to %P: %P: Connection "
	    "refused.\n|ZSorry, I wasn't able to establish an SMTP connection to %P: %P: "
	    "Connection refused.\n");
	tl_result_free(&r);
	/* Refunded: the one send of the minute is still there to take. */
	start("good", NULL);
	free(c);
	c = conf_gate(sock, NULL);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
	tl_result_free(&r);
	free(sock);
	free(c);
}

/* weir-gate's status text, asked of the gate at sock. */
static char *
gate_status(const char *sock)
{
	char *bin = tl_bin("weir-gate"), *wc = xasprintf("%s/gate-weir.conf", dir), *out;
	const char *argv[] = { bin, "-c", wc, "-s", sock, "status", NULL };
	struct tl_run rr;
	struct tl_result r;

	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	tl_run(&rr, &r);
	cr_assert_eq(r.status, 0, "weir-gate status: %s", buf_cstr(&r.err));
	out = xstrdup(buf_cstr(&r.out));
	tl_result_free(&r);
	free(bin);
	free(wc);
	return out;
}

/* A session that ended before MAIL FROM was accepted used a connection,
 * not a message: the gate hears NOMAIL, and the message window stays
 * empty (it used to count one). */
Test(remote, gate_counts_a_session_without_a_message)
{
	static const char *const flags[] = { "--reply", "mail=451 4.3.0 Not now", NULL };
	struct tl_result r;
	char *sock, *c, *status;

	start("good", flags);
	sock = start_gate("upstream \"t\" { rate = \"1 per 1m\" }\n");
	c = conf_gate(sock, NULL);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	expect(&r, "sConnected to %P but sender was rejected.\nRemote host said: 451 4.3.0 Not "
	    "now\n|ZConnected to %P but sender was rejected.\nRemote host said: 451 4.3.0 Not "
	    "now\n");
	tl_result_free(&r);
	status = gate_status(sock);
	cr_assert(strstr(status, "0 logged") && strstr(status, "no mail 1"), "%s", status);
	free(status);
	free(sock);
	free(c);
}

Test(remote, gate_down_means_no_mail)
{
	struct sockaddr_un sa;
	struct tl_result r;
	char *sock = xasprintf("%s/dead.sock", dir), *c, *want;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	/* A socket file nobody listens on: the gate is configured but down. */
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	close(fd);
	start("good", NULL);
	c = conf_gate(sock, NULL);
	run(c, msg_default, sizeof msg_default - 1, one, &r);
	want = xasprintf("sweir-remote: weir-gate at %s: Connection refused; not sending. "
	    "(#4.3.0)\n|Zweir-remote: weir-gate at %s: Connection refused; not sending. "
	    "(#4.3.0)\n", sock, sock);
	expect(&r, want);
	cr_assert(!recorded("\"event\": \"ehlo\""));
	tl_result_free(&r);
	free(want);
	/* -n: the caller holds a grant; the gate is not asked. */
	{
		const char *argv[] = { NULL, "-n", "-c", NULL, "host", "sender@example.org",
			"a@example.net", NULL };
		struct tl_run rr;
		char *bin = tl_bin("weir-remote");

		argv[0] = bin;
		argv[3] = c;
		memset(&rr, 0, sizeof rr);
		rr.argv = argv;
		rr.in = msg_default;
		rr.inlen = sizeof msg_default - 1;
		tl_run(&rr, &r);
		expect(&r, "r|K%P accepted message.\nRemote host said: 250 2.0.0 OK queued as TEST1\n");
		tl_result_free(&r);
		free(bin);
	}
	free(sock);
	free(c);
}

Test(remote, bad_config_is_temporary)
{
	const char *argv[] = { NULL, "-c", NULL, "host", "s@x", "r@y", NULL };
	struct tl_run rr;
	struct tl_result r;
	char *bin = tl_bin("weir-remote"), *c = xasprintf("%s/weir.conf", dir), *want;
	static const char text[] = "upstream \"a\" {\n  tls = \"ssl\"\n}\n";

	tl_write(c, text, sizeof text - 1);
	argv[0] = bin;
	argv[2] = c;
	memset(&rr, 0, sizeof rr);
	rr.argv = argv;
	tl_run(&rr, &r);
	want = xasprintf("sweir-remote: configuration: %s:2: tls = \"ssl\": must be one of "
	    "starttls, smtps, none (#4.3.0)\n|Zweir-remote: configuration: %s:2: tls = \"ssl\": "
	    "must be one of starttls, smtps, none (#4.3.0)\n", c, c);
	expect(&r, want);
	tl_result_free(&r);
	free(want);
	free(bin);
	free(c);
}
