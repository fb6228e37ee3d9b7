/*
 * oauth_test.c: OAuth 2.0 built in (issue 24), with real parts only:
 * weir auth, weir-gate, weir-send, weir-remote, sendmail, the stand-in
 * provider tests/upstream/idp.py (TLS, its certificate made for the
 * test) and the stand-in upstream tests/upstream/upstream.py, which
 * takes only the access tokens idp.py issued and refuses one within
 * --oauth-margin of its expiry (Exchange's 10 minutes, made 4 s here for
 * tokens of 20 s).  tests/upstream/oauth_user.py is the user at the
 * browser.
 *
 *   device_login_then_mail
 *                  no token: test-relay fails at the token step and
 *                  check-config names the command; weir auth login with
 *                  the device grant (the first poll answered slow_down:
 *                  the next one waits the interval plus 5 s, the others
 *                  the interval), the tokens 0600 and the status 0644,
 *                  weir auth status, test-relay's token step, a message
 *                  delivered through XOAUTH2
 *   code_login     the code grant with PKCE: the address the browser is
 *                  sent to pasted back; a pasted address of another login
 *                  refused
 *   three_hundred_through_sessions
 *                  300 messages over kept sessions, access tokens of 20 s
 *                  refreshed with 10 s left (the upstream refusing the
 *                  last 4 s), every refresh slow (0.3 s) so deliverers
 *                  overlap: 0 refused AUTHs, every message once, several
 *                  refreshes, no refresh token presented twice (one
 *                  refresh at a time: the lock)
 *   kill9_at_each_step_of_a_rotation
 *                  the refreshing process killed before the request,
 *                  during it, after the answer, mid-write, before the
 *                  rename and before the folder's fsync: each time the
 *                  next refresh works
 *   endpoint_trouble_is_temporary
 *                  the token endpoint answering 503, dropping the
 *                  connection, too slow: the message deferred each time,
 *                  no AUTH tried, nothing bounced, weir status says it;
 *                  then it goes, once
 *   invalid_grant_suspends_until_login
 *                  the refresh token revoked: the upstream suspended,
 *                  weir status, check-config, the metric and the log say
 *                  to run weir auth login isp, the admin mailed once
 *                  (also after a second refusal), nothing bounces; after
 *                  the login, with no restart, every message goes once,
 *                  the notice too
 *   keepalive_with_no_mail
 *                  refresh_idle 3 s, tokens of an hour, no mail: weir-send's
 *                  keep-alive (weir-remote -K) refreshes, each time a
 *                  refresh_idle after the last use (idp.py's record), and
 *                  the upstream sees nothing; the token revoked: the next
 *                  keep-alive finds it, and the alarm goes as for a
 *                  delivery (weir-gate's suspension and log, weir status,
 *                  the metric, one notice to the admin, also at the next
 *                  looks); the provider is not asked again; after the
 *                  login the notice goes and the keep-alive goes on
 *   keepalive_by_hand
 *                  weir-remote -K's exit status: no token (refused: 3),
 *                  no such upstream (2), not due right after a login (0,
 *                  the provider not asked)
 *
 * Every test ends by looking for each secret idp.py made (tokens,
 * codes: its --secrets file), and the client's secret where the test
 * gives the client one (device_login_then_mail: idp.py then refuses a
 * token request without it), in every file of the test's folder but the
 * token file, the client's secret file and idp.py's own, and in every
 * output it read: none may appear.  Ports are picked by the kernel, loopback only; every
 * process is killed at the end, even on failure.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "mail/oauth.h"
#include "relay_helpers.h"

#define SENDER "alice@src.example"

static struct rt t;

struct idp {
	pid_t pid;
	unsigned port;
	char *record, *issued, *secrets, *url;
	char client_secret[48];	/* the client's, when the test gives it one */
};
static struct idp idp;
static void proxy_stop(void);
static int auth(const char *arg, struct buf *out);
static struct buf outputs = BUF_INIT;	/* everything the test read from commands */
/* Key material the test made (private keys' bodies), searched for as
 * the provider's secrets are. */
static char *made_secrets[8];
static size_t nmade;

static void
teardown(void)
{
	if (idp.pid > 0) {
		kill(-idp.pid, SIGKILL);
		kill(idp.pid, SIGKILL);
		while (waitpid(idp.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	proxy_stop();
	rt_teardown(&t);
	free(idp.record);
	free(idp.issued);
	free(idp.secrets);
	free(idp.url);
	memset(&idp, 0, sizeof idp);
	buf_free(&outputs);
	while (nmade > 0)
		free(made_secrets[--nmade]);
}

TestSuite(oauth, .fini = teardown, .timeout = 240);

static void
idp_start(const char *const *flags)
{
	const char *argv[40];
	char *script = tl_src_path("tests/upstream/idp.py");
	char *cert = xasprintf("%s/good.pem", t.certs), *key = xasprintf("%s/good.key", t.certs);
	char *log = xasprintf("%s/idp.log", t.s.qt.tmp), said[128];
	int n = 0;

	idp.record = xasprintf("%s/idp.jsonl", t.s.qt.tmp);
	idp.issued = xasprintf("%s/idp.issued", t.s.qt.tmp);
	idp.secrets = xasprintf("%s/idp.secrets", t.s.qt.tmp);
	argv[n++] = "/usr/bin/python3";
	argv[n++] = script;
	argv[n++] = "--cert";
	argv[n++] = cert;
	argv[n++] = "--key";
	argv[n++] = key;
	argv[n++] = "--record";
	argv[n++] = idp.record;
	argv[n++] = "--issued";
	argv[n++] = idp.issued;
	argv[n++] = "--secrets";
	argv[n++] = idp.secrets;
	for (; flags && *flags; flags++)
		argv[n++] = *flags;
	argv[n] = NULL;
	idp.pid = tl_upstream_spawn(argv, log, &idp.port, said, sizeof said);
	cr_assert(idp.pid > 0 && idp.port > 0, "idp.py did not start: [%s]", said);
	idp.url = xasprintf("https://127.0.0.1:%u", idp.port);
	free(script);
	free(cert);
	free(key);
	free(log);
}

/* POST json to idp.py's /control (the test changing the provider). */
static void
idp_control(const char *json)
{
	char *ca = xasprintf("%s/ca.pem", t.certs), *url = xasprintf("%s/control", idp.url);
	const char *argv[] = { "/usr/bin/curl", "-sS", "--fail", "--cacert", ca, "-d", json, url,
	    NULL };
	struct tl_run run = { .argv = argv, .timeout_s = 20 };
	struct tl_result r;

	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "curl %s: %s", url, buf_cstr(&r.err));
	tl_result_free(&r);
	free(ca);
	free(url);
}

/* The stand-in upstream, taking idp.py's tokens with more than margin s. */
static void
upstream_start(const char *margin)
{
	const char *flags[] = { "--oauth-issued", NULL, "--oauth-margin", margin, NULL };

	flags[1] = idp.issued;
	rt_upstream_start(&t, "good", flags, 0);
}

/* upstream "isp" at the stand-in upstream, with up_extra lines, and an
 * oauth section of oauth_lines with the token endpoint, its CAs and
 * token_file at idp.py's and in the test's folder. */
static void
conf_oauth(const char *up_extra, const char *oauth_lines)
{
	char *s = xasprintf("upstream \"isp\" {\n  host = \"127.0.0.1\"\n  port = %u\n"
	    "  ca_file = \"%s/ca.pem\"\n  username = \"%s\"\n  timeout_connect = 5s\n"
	    "  timeout_command = 10s\n%s  oauth {\n%s    token_endpoint = \"%s/token\"\n"
	    "    ca_file = \"%s/ca.pem\"\n    token_file = \"%s/oauth/isp\"\n  }\n}\n", t.port,
	    t.certs, RT_USER, up_extra ? up_extra : "", oauth_lines, idp.url, t.certs,
	    t.s.qt.tmp);

	sh_conf_append(&t.s, s);
	free(s);
}

/* upstream "isp" with a user's oauth section (provider generic) at
 * idp.py; extra lines in the oauth section and in the upstream's. */
static void
conf_isp(const char *oauth_extra, const char *up_extra)
{
	char *o = xasprintf("    provider = generic\n    client_id = \"weir-test-client\"\n"
	    "    scope = \"https://outlook.office.com/SMTP.Send offline_access\"\n"
	    "    device_endpoint = \"%s/devicecode\"\n    authorize_endpoint = \"%s/authorize\"\n"
	    "%s", idp.url, idp.url, oauth_extra ? oauth_extra : "");

	conf_oauth(up_extra, o);
	free(o);
}

/* Run prog args with the queue's environment; its status, the output
 * kept for the secrets check, stdout into out (may be NULL). */
static int
run(const char *prog, const char *const *args, size_t n, const char *const *env,
    struct buf *out)
{
	struct tl_result r = rt_run_env(&t, prog, args, n, NULL, env);
	int st = r.status;

	buf_add(&outputs, r.out.s ? r.out.s : "", r.out.len);
	buf_add(&outputs, r.err.s ? r.err.s : "", r.err.len);
	if (out) {
		buf_reset(out);
		buf_add(out, r.out.s ? r.out.s : "", r.out.len);
		buf_add(out, r.err.s ? r.err.s : "", r.err.len);
		buf_addc(out, '\0');
		out->len--;
	}
	tl_result_free(&r);
	return st;
}

/* weir auth login isp, the user played by oauth_user.py (extra: its
 * own options, NULL-ended); its status, what it printed in out. */
static int
login(const char *const *extra, struct buf *out)
{
	const char *argv[24];
	char *script = tl_src_path("tests/upstream/oauth_user.py"), *weir = tl_bin("weir");
	char *ca = xasprintf("%s/ca.pem", t.certs);
	const char *env[12];
	struct tl_run run = { .argv = argv, .env = env, .timeout_s = 120 };
	struct tl_result r;
	int n = 0, k = 0, st;
	size_t i;

	argv[n++] = "/usr/bin/python3";
	argv[n++] = script;
	argv[n++] = "--idp";
	argv[n++] = idp.url;
	argv[n++] = "--ca";
	argv[n++] = ca;
	for (; extra && *extra; extra++)
		argv[n++] = *extra;
	argv[n++] = "--";
	argv[n++] = weir;
	argv[n++] = "auth";
	argv[n++] = "login";
	argv[n++] = "isp";
	argv[n] = NULL;
	for (i = 0; i < 8 && t.s.qt.envs[i]; i++)
		env[k++] = t.s.qt.envs[i];
	env[k] = NULL;
	tl_run(&run, &r);
	st = r.status;
	buf_add(&outputs, r.out.s ? r.out.s : "", r.out.len);
	buf_add(&outputs, r.err.s ? r.err.s : "", r.err.len);
	if (out) {
		buf_reset(out);
		buf_printf(out, "%s%s", buf_cstr(&r.out), buf_cstr(&r.err));
	}
	tl_result_free(&r);
	free(script);
	free(weir);
	free(ca);
	return st;
}

static void
start_relay(unsigned concurrency, const char *policy)
{
	rt_policy(&t, policy);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	(void)concurrency;
}

static void
send1(const char *rcpt)
{
	const char *r[] = { rcpt };

	rt_sendmail(&t, SENDER, r, 1, "Subject: token\n\nhello\n");
}

/* How many lines of idp.py's record hold every one of what[] (NULL-ended);
 * with v, the times of the first max of them into v. */
static size_t
idp_times(const char *const *what, double *v, size_t max)
{
	FILE *f = fopen(idp.record, "r");
	char line[4096], *p;
	size_t n = 0, i;

	while (f && fgets(line, sizeof line, f)) {
		for (i = 0; what[i] && strstr(line, what[i]); i++)
			;
		if (what[i] != NULL)
			continue;
		if (v && n < max)
			v[n] = (p = strstr(line, "\"time\": ")) ? strtod(p + 8, NULL) : 0;
		n++;
	}
	if (f)
		fclose(f);
	return n;
}

static size_t
idp_count(const char *const *what)
{
	return idp_times(what, NULL, 0);
}

/* The refresh tokens (short hashes) of the refreshes idp.py answered
 * with new tokens, in order, into v (at most max); how many. */
static size_t
refreshes_ok(char v[][16], size_t max)
{
	FILE *f = fopen(idp.record, "r");
	char line[4096], *p;
	size_t n = 0;

	while (f && n < max && fgets(line, sizeof line, f)) {
		if (!strstr(line, "\"grant\": \"refresh_token\"") || !strstr(line, "\"result\": \"ok\""))
			continue;
		p = strstr(line, "\"rt\": \"");
		cr_assert(p, "%s", line);
		snprintf(v[n++], 16, "%.12s", p + 7);
	}
	if (f)
		fclose(f);
	return n;
}

/* ---- no secret anywhere ---- */

static int
ends(const char *s, const char *end)
{
	size_t n = strlen(s), k = strlen(end);

	return n >= k && strcmp(s + n - k, end) == 0;
}

static void
scan_dir(const char *dir, char **secrets, size_t ns)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	cr_assert(d, "opendir %s", dir);
	while ((e = readdir(d)) != NULL) {
		char *p;
		struct stat st;
		struct buf b = BUF_INIT;
		size_t i;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		p = xasprintf("%s/%s", dir, e->d_name);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
			scan_dir(p, secrets, ns);
		} else if (S_ISREG(st.st_mode) && strcmp(e->d_name, "idp.secrets") != 0 &&
		    strcmp(e->d_name, "isp") != 0 && strcmp(e->d_name, "isp.tmp") != 0 &&
		    strcmp(e->d_name, "isp.copy") != 0 &&
		    strcmp(e->d_name, "client.secret") != 0 && !ends(e->d_name, ".key") &&
		    strcmp(e->d_name, "sa.json") != 0 && strcmp(e->d_name, "proxy.auth") != 0 &&
		    strcmp(e->d_name, "tinyproxy.conf") != 0) {
			/* The token file (and a copy of it cut short) is where the
			 * tokens belong, the client's secret file where its secret
			 * does, a key file where its key does; everything else
			 * must not hold one. */
			cr_assert(read_file_at(AT_FDCWD, p, &b, 1 << 28) == 0, "read %s", p);
			for (i = 0; i < ns; i++)
				cr_assert(b.len == 0 || memmem(b.s, b.len, secrets[i],
				    strlen(secrets[i])) == NULL, "a secret made by the provider is in "
				    "%s", p);
			if (strncmp(e->d_name, "core", 4) == 0)
				rt_say("oauth: %s (a core) searched", p);
		}
		buf_free(&b);
		free(p);
	}
	closedir(d);
}

/* Every secret idp.py made, in no file of the test's folder but the
 * token file, and in no output the test read. */
static void
assert_no_secret_leaked(void)
{
	struct buf s = BUF_INIT;
	char *v[4096], *p, *save = NULL;
	size_t n = 0, i;

	tl_read(idp.secrets, &s);
	buf_addc(&s, '\0');
	for (p = strtok_r(s.s, "\n", &save); p && n < 4095; p = strtok_r(NULL, "\n", &save))
		v[n++] = p;
	if (idp.client_secret[0])
		v[n++] = idp.client_secret;
	for (i = 0; i < nmade && n < 4095; i++)
		v[n++] = made_secrets[i];	/* private keys */
	cr_assert_gt(n, 0, "idp.py made no secret");
	scan_dir(t.s.qt.tmp, v, n);
	for (i = 0; i < n; i++)
		cr_assert(outputs.len == 0 || memmem(outputs.s, outputs.len, v[i], strlen(v[i])) ==
		    NULL, "a secret made by the provider is in a command's output");
	{
		char *logs = rt_send_logs(&t);

		for (i = 0; i < n; i++)
			cr_assert(strstr(logs, v[i]) == NULL, "a secret is in weir-send's log");
		free(logs);
	}
	rt_say("oauth: %zu secrets looked for, found nowhere", n);
	buf_free(&s);
}

/* ---- the tests ---- */

/* The client's secret: a file for weir, the flag for idp.py (which
 * then refuses a token request without it). */
static void
client_secret(const char **flag)
{
	char *path = xasprintf("%s/client.secret", t.s.qt.tmp);

	snprintf(idp.client_secret, sizeof idp.client_secret, "cs-%08lx%08lx", (long)getpid(),
	    (long)time(NULL));
	tl_write(path, idp.client_secret, strlen(idp.client_secret));
	cr_assert(chmod(path, 0600) == 0);
	flag[0] = "--client-secret";
	flag[1] = idp.client_secret;
	free(path);
}

Test(oauth, device_login_then_mail)
{
	const char *idpflags[] = { "--interval", "1", "--slow-down-first", "1", NULL, NULL, NULL };
	char *csf;
	const char *tr[] = { "test-relay", "isp" }, *cc[] = { "check-config" };
	const char *as[] = { "auth", "status" };
	struct buf out = BUF_INIT;
	char *path;
	struct stat st;
	FILE *f;
	char line[4096];
	double times[64], prev = 0;
	size_t npoll = 0, i, want = 1;
	struct rt_rec r;

	rt_setup(&t, 2);
	client_secret(&idpflags[4]);
	idp_start(idpflags);
	upstream_start("600");
	csf = xasprintf("    client_secret_file = \"%s/client.secret\"\n", t.s.qt.tmp);
	conf_isp(csf, NULL);
	free(csf);
	/* No token yet: the token step fails and says what to run. */
	cr_assert_eq(run("weir", tr, 2, (const char *const[]){ t.env_libexec, NULL }, &out), 1,
	    "%s", out.s);
	cr_assert(strstr(out.s, "isp: token failed: OAuth: no token yet") &&
	    strstr(out.s, "run weir auth login isp") && strstr(out.s, "FAILED (token)"), "%s",
	    out.s);
	run("weir", cc, 1, NULL, &out);
	cr_assert(strstr(out.s, "upstream \"isp\": no token yet") &&
	    strstr(out.s, "run weir auth login isp"), "%s", out.s);

	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "enter the code ") && strstr(out.s, "logged in: the tokens are in"),
	    "%s", out.s);
	/* The polls: slow_down first, then 1 + 5 s apart, then 1 s. */
	f = fopen(idp.record, "r");
	while (f && fgets(line, sizeof line, f))
		if (strstr(line, "\"grant\": \"device_code\"") && npoll < 64) {
			char *tp = strstr(line, "\"time\": ");

			times[npoll++] = tp ? strtod(tp + 8, NULL) : 0;
			if (npoll == 1)
				cr_assert(strstr(line, "\"result\": \"slow_down\""), "%s", line);
		}
	if (f)
		fclose(f);
	cr_assert_geq(npoll, 2, "%zu polls", npoll);
	for (i = 1; i < npoll; i++) {
		double gap = times[i] - times[i - 1];

		cr_assert_geq(gap, i == 1 ? 5.9 : 0.95, "poll %zu came %.3f s after the one before",
		    i + 1, gap);
	}
	prev = times[npoll - 1];
	(void)prev;
	cr_assert_eq(idp_count((const char *const[]){ "\"result\": \"slow_down\"", NULL }), 1);
	path = xasprintf("%s/oauth/isp", t.s.qt.tmp);
	cr_assert(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600, "token file mode %o",
	    st.st_mode & 07777);
	free(path);
	path = xasprintf("%s/oauth/isp.status", t.s.qt.tmp);
	cr_assert(stat(path, &st) == 0 && (st.st_mode & 07777) == 0644);
	free(path);
	cr_assert_eq(run("weir", as, 2, NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "account relay, provider generic") &&
	    strstr(out.s, "access token: expires ") && strstr(out.s, "last refresh: none since "
	    "the login"), "%s", out.s);
	cr_assert_eq(run("weir", tr, 2, (const char *const[]){ t.env_libexec, NULL }, &out), 0,
	    "%s", out.s);
	cr_assert(strstr(out.s, "isp: token ok: access token from the token file, expires ") &&
	    strstr(out.s, "isp: auth ok: XOAUTH2 as relay"), "%s", out.s);

	start_relay(2, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	send1("bob@dest.example");
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 30000), "not delivered:\n%s",
	    rt_send_logs_tail(&t, 4000));
	rt_rec_load(&t, &r);
	cr_assert_eq(rt_rec_count(&r, SENDER, "bob@dest.example"), 1);
	cr_assert_eq(r.nauth_fail, 0);
	rt_rec_free(&r);
	assert_no_secret_leaked();
	buf_free(&out);
}

Test(oauth, code_login)
{
	const char *cc[] = { "check-config" };
	const char *bad[] = { "--paste", "http://127.0.0.1:1/?state=someone-elses&code=ac-x", NULL };
	struct buf out = BUF_INIT;

	rt_setup(&t, 1);
	idp_start(NULL);
	upstream_start("600");
	conf_isp("    flow = code\n", NULL);
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	cr_assert_eq(login(bad, &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "login failed: the address pasted is from another login"), "%s",
	    out.s);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "Copy that whole address") && strstr(out.s, "logged in"), "%s",
	    out.s);
	cr_assert_eq(idp_count((const char *const[]){ "\"event\": \"authorize\"", "\"ok\": true",
	    "\"access_type\": \"offline\"", "\"login_hint\": \"relay\"", NULL }), 2);
	cr_assert_eq(idp_count((const char *const[]){ "\"grant\": \"authorization_code\"",
	    "\"result\": \"ok\"", NULL }), 1, "PKCE or redirect_uri refused");
	run("weir", cc, 1, NULL, &out);
	cr_assert(strstr(out.s, "refuses the refresh token") == NULL &&
	    strstr(out.s, "no token yet") == NULL, "%s", out.s);
	assert_no_secret_leaked();
	buf_free(&out);
}

Test(oauth, three_hundred_through_sessions)
{
	enum { N = 300 };
	const char *idpflags[] = { "--lifetime", "20", "--rotate", "--refresh-delay", "0.3", NULL };
	char **to = rt_addrs("s", "dest.example", 1, N);
	char rts[256][16];
	struct buf out = BUF_INIT;
	struct rt_rec r;
	size_t i, k, nref;
	time_t t0;

	rt_setup(&t, 3);
	idp_start(idpflags);
	upstream_start("4");
	conf_isp("    refresh_margin = 10s\n", NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	/* About 25 s of sending: more than one token's lifetime; a session
	 * carries 4 messages, so AUTHs are many and spread out. */
	start_relay(3, "upstream \"isp\" { rate = {\"12 per 1s\"} max_connections = 3 "
	    "messages_per_connection = 4 }\n");
	t0 = time(NULL);
	for (i = 0; i < N; i++)
		send1(to[i]);
	rt_wait_empty(&t, 150000);
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1, "<%s> delivered %zu times", to[i],
		    rt_rec_count(&r, SENDER, to[i]));
	cr_assert_eq(r.n, N);
	cr_assert_eq(r.nauth_fail, 0, "%zu AUTHs refused (of %zu)", r.nauth_fail, r.nauth);
	cr_assert_geq(r.nauth, N / 4, "%zu AUTHs", r.nauth);
	nref = refreshes_ok(rts, 256);
	cr_assert_geq(nref, 2, "%zu refreshes over %lld s", nref, (long long)(time(NULL) - t0));
	/* One refresh at a time: no refresh token presented twice. */
	for (i = 0; i < nref; i++)
		for (k = i + 1; k < nref; k++)
			cr_assert(strcmp(rts[i], rts[k]) != 0, "refresh token %s used twice (refreshes "
			    "%zu and %zu)", rts[i], i + 1, k + 1);
	rt_say("oauth: %d messages over %zu AUTHs in %lld s, %zu refreshes, 0 refused", N, r.nauth,
	    (long long)(time(NULL) - t0), nref);
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
	rt_addrs_free(to, N);
	assert_no_secret_leaked();
	buf_free(&out);
}

/* weir-remote's probe (a refresh every time: refresh_margin is above the
 * tokens' lifetime), with the fault shim's rule if any; its status. */
static int
probe(const char *fault, struct buf *out)
{
	const char *args[] = { "-T", "-u", "isp" };
	char *rule = fault ? xasprintf("WEIR_FAULT=%s", fault) : NULL;
	char *pre = xasprintf("LD_PRELOAD=%s", getenv("WEIR_FAULTINJ"));
	const char *env[] = { pre, "WEIR_FAULT_PROG=weir-remote", rule, NULL };
	int st = run("weir-remote", args, 3, fault ? env : NULL, out);

	free(rule);
	free(pre);
	return st;
}

Test(oauth, kill9_at_each_step_of_a_rotation)
{
	static const struct {
		const char *step, *rule;
	} steps[] = {
		{ "holding the lock, before the request", "openr@/oauth/isp=2:KILL" },
		{ "reserving the room for the new token file", "open@/oauth/isp.tmp=1:KILL" },
		{ "after the answer, mid-write of the new token file",
		    "write@/oauth/isp.tmp=1:KILL" },
		{ "before the rename", "rename@/oauth/isp.tmp=1:KILL" },
		{ "after the rename, before the folder's fsync", "fsync@/oauth=2:KILL" },
	};
	const char *idpflags[] = { "--lifetime", "20", "--rotate", NULL };
	struct buf out = BUF_INIT;
	size_t i, before, after, ok0;
	char *tmp;
	struct stat st;
	const char *refresh_ok[] = { "\"grant\": \"refresh_token\"", "\"result\": \"ok\"", NULL };
	const char *refresh_any[] = { "\"grant\": \"refresh_token\"", NULL };

	cr_assert(getenv("WEIR_FAULTINJ"), "no $WEIR_FAULTINJ");
	rt_setup(&t, 1);
	idp_start(idpflags);
	upstream_start("4");
	conf_isp("    refresh_margin = 30s\n", NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		before = idp_count(refresh_any);
		cr_assert_eq(probe(steps[i].rule, &out), 128 + SIGKILL, "%s: not killed: %s",
		    steps[i].step, out.s);
		after = idp_count(refresh_any);
		/* The kill came where it was meant to. */
		cr_assert_eq(after - before, i <= 1 ? 0 : 1, "%s: %zu refreshes", steps[i].step,
		    after - before);
		tmp = xasprintf("%s/oauth/isp.tmp", t.s.qt.tmp);
		if (i == 2)
			cr_assert(stat(tmp, &st) == 0 && st.st_size > 0, "%s: no partial file",
			    steps[i].step);
		free(tmp);
		ok0 = idp_count(refresh_ok);
		cr_assert_eq(probe(NULL, &out), 0, "after a kill %s: %s", steps[i].step, out.s);
		cr_assert(strstr(out.s, "token ok: refreshed at the token endpoint") &&
		    strstr(out.s, "auth ok: XOAUTH2"), "after a kill %s: %s", steps[i].step, out.s);
		cr_assert_eq(idp_count(refresh_ok), ok0 + 1);
	}
	/* Killed during the request: the provider holds its answer 5 s. */
	idp_control("{\"mode\": \"slow:5\"}");
	{
		char *weir_remote = tl_bin("weir-remote");
		const char *argv[] = { weir_remote, "-T", "-u", "isp", NULL };
		pid_t pid = fork();
		int status;

		cr_assert(pid >= 0);
		if (pid == 0) {
			execve(weir_remote, (char *const *)argv, (char *const *)(const char *const[]){
			    t.s.qt.envs[0], t.s.qt.envs[1], t.s.qt.envs[2], NULL });
			_exit(127);
		}
		for (i = 0; i < 1000 && idp_count((const char *const[]){ "\"result\": \"slow\"",
		    NULL }) == 0; i++)
			usleep(10000);
		cr_assert_eq(idp_count((const char *const[]){ "\"result\": \"slow\"", NULL }), 1,
		    "the request never reached the provider");
		kill(pid, SIGKILL);
		cr_assert(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
		free(weir_remote);
	}
	idp_control("{\"mode\": \"ok\"}");
	cr_assert_eq(probe(NULL, &out), 0, "after a kill during the request: %s", out.s);
	cr_assert(strstr(out.s, "token ok: refreshed"), "%s", out.s);
	assert_no_secret_leaked();
	buf_free(&out);
}

Test(oauth, endpoint_trouble_is_temporary)
{
	const char *idpflags[] = { "--lifetime", "20", NULL };
	const char *stat_args[] = { "status" };
	struct buf out = BUF_INIT;
	struct rt_rec r;
	size_t nauth0, want = 1;
	char *q;

	rt_setup(&t, 1);
	idp_start(idpflags);
	upstream_start("4");
	conf_isp("    refresh_margin = 30s\n    timeout = 2s\n", NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	idp_control("{\"mode\": \"500\"}");
	start_relay(1, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	send1("carol@dest.example");
	rt_wait_log(&t, "deferred <carol@dest.example>", 1, 30000);
	q = rt_send_logs(&t);
	cr_assert(strstr(q, "token endpoint") && strstr(q, "answered HTTP 503"), "%s", q);
	free(q);
	run("weir", stat_args, 1, NULL, &out);
	cr_assert(strstr(out.s, "last refresh failed: OAuth: the token endpoint:") &&
	    strstr(out.s, "HTTP 503"), "%s", out.s);
	/* Tried again at once: held back, the provider not asked (the
	 * back-off); weir status says until when. */
	rt_flush(&t);
	rt_wait_log(&t, "deferred <carol@dest.example>", 2, 30000);
	q = rt_send_logs(&t);
	cr_assert(strstr(q, "OAuth: no request to the provider before "), "%s", q);
	free(q);
	cr_assert_eq(idp_count((const char *const[]){ "\"result\": \"503\"", NULL }), 1);
	cr_assert_eq(auth("status", &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "back-off: 1 failure in a row; no request before "), "%s", out.s);
	/* The other troubles, through weir auth test (whatever the back-off). */
	idp_control("{\"mode\": \"drop\"}");
	cr_assert_eq(auth("test", &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "token failed: OAuth: the token endpoint: "), "%s", out.s);
	idp_control("{\"mode\": \"slow:10\"}");
	cr_assert_eq(auth("test", &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "imed out") || strstr(out.s, "Timeout"), "no timeout said:\n%s",
	    out.s);
	rt_rec_load(&t, &r);
	/* No AUTH without a valid token: the upstream saw none. */
	cr_assert_eq(r.nauth, 0, "%zu AUTHs tried without a token", r.nauth);
	cr_assert_eq(r.n, 0);
	nauth0 = r.nauth;
	rt_rec_free(&r);
	idp_control("{\"mode\": \"ok\"}");
	cr_assert_eq(auth("test", &out), 0, "%s", out.s);	/* the back-off ends */
	rt_flush(&t);
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 30000), "not delivered once the endpoint "
	    "answers:\n%s", rt_send_logs_tail(&t, 4000));
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	cr_assert_eq(rt_rec_count(&r, SENDER, "carol@dest.example"), 1);
	cr_assert_eq(r.nauth, nauth0 + 1);
	cr_assert_eq(r.nauth_fail, 0);
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
	assert_no_secret_leaked();
	buf_free(&out);
}

/* weir-metrics' one scrape (-t FILE), into out. */
static void
metrics_once(struct buf *out)
{
	char *file = xasprintf("%s/metrics.prom", t.s.qt.tmp);
	const char *args[] = { "--textfile", file };

	cr_assert_eq(run("weir-metrics", args, 2, NULL, NULL), 0);
	buf_reset(out);
	tl_read(file, out);
	buf_addc(out, '\0');
	free(file);
}

static int
authfails(struct rt *rt, void *arg)
{
	return rt_log_count(rt, "refused our OAuth token, or its provider our refresh token") >=
	    *(size_t *)arg;
}

Test(oauth, invalid_grant_suspends_until_login)
{
	const char *idpflags[] = { "--lifetime", "20", "--rotate", NULL };
	const char *stat_args[] = { "status" }, *cc[] = { "check-config" };
	const char *resume[] = { "resume", "isp" };
	struct buf out = BUF_INIT, glog = BUF_INIT;
	struct rt_rec r;
	size_t want, n;
	char *logs;

	rt_setup(&t, 1);
	idp_start(idpflags);
	upstream_start("4");
	conf_isp("    refresh_margin = 30s\n", NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	start_relay(1, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	/* The refresh token dies (a password change, a revocation). */
	idp_control("{\"revoke\": true}");
	send1("dave@dest.example");
	send1("erin@dest.example");
	want = 1;
	cr_assert(rt_wait(authfails, &t, &want, 30000), "no authfail:\n%s",
	    rt_send_logs_tail(&t, 4000));
	rt_wait_log(&t, "OAuth login notice to <" SH_ADMIN "> queued", 1, 30000);
	logs = rt_send_logs(&t);
	cr_assert(strstr(logs, "invalid_grant") && strstr(logs, "run weir auth login isp"), "%s",
	    logs);
	free(logs);
	run("weir", stat_args, 1, NULL, &out);
	cr_assert(strstr(out.s, "suspended until") && strstr(out.s, "authentication failed"),
	    "weir status:\n%s", out.s);
	cr_assert(strstr(out.s, "upstream isp: LOGIN NEEDED since ") &&
	    strstr(out.s, "run weir auth login isp"), "weir status:\n%s", out.s);
	/* weir-gate's own advice, in weir status and its log: the login,
	 * not a secret this upstream does not have. */
	cr_assert(strstr(out.s, "; run weir auth login isp (the login lifts the suspension") &&
	    strstr(out.s, "secret_file") == NULL, "weir status:\n%s", out.s);
	tl_read(t.gate_log, &glog);
	buf_addc(&glog, '\0');
	cr_assert(strstr(glog.s, "upstream isp: authentication failed: ") &&
	    strstr(glog.s, "; run weir auth login isp (the login lifts the suspension") &&
	    strstr(glog.s, "secret_file") == NULL, "weir-gate's log:\n%s", glog.s);
	buf_free(&glog);
	/* An upstream that needs a login needs attention; the configuration
	 * is not broken: a warning, exit 0 (weir starts, for the others). */
	cr_assert_eq(run("weir", cc, 1, NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "warning: upstream \"isp\": the provider refuses the refresh token") &&
	    strstr(out.s, "run weir auth login isp"), "%s", out.s);
	metrics_once(&out);
	cr_assert(strstr(out.s, "weir_oauth_login_needed{upstream=\"isp\"} 1\n"), "%s", out.s);
	/* A second refusal (the suspension lifted by hand): no second notice
	 * within the day. */
	cr_assert_eq(run("weir", resume, 2, NULL, &out), 0, "%s", out.s);
	want = 2;
	cr_assert(rt_wait(authfails, &t, &want, 30000), "no second authfail:\n%s",
	    rt_send_logs_tail(&t, 4000));
	cr_assert_eq(rt_log_count(&t, "OAuth login notice to <"), 1);
	/* The dead refresh token was presented once, not at each try. */
	cr_assert_eq(idp_count((const char *const[]){ "\"grant\": \"refresh_token\"",
	    "\"result\": \"invalid_grant\"", NULL }), 1, "a refresh token known dead presented "
	    "again");
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 0, "mail went without a token");
	cr_assert_eq(r.nauth, 0, "AUTH tried without a token");
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);

	/* The login: mail flows at once, no restart. */
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "upstream isp: suspensions lifted"), "%s", out.s);
	want = 3;
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 30000), "mail did not flow after the "
	    "login:\n%s", rt_send_logs_tail(&t, 4000));
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	cr_assert_eq(rt_rec_count(&r, SENDER, "dave@dest.example"), 1);
	cr_assert_eq(rt_rec_count(&r, SENDER, "erin@dest.example"), 1);
	for (n = 0, want = 0; want < r.n; want++)
		n += r.v[want].nrcpt == 1 && strcmp(r.v[want].rcpts[0], SH_ADMIN) == 0;
	cr_assert_eq(n, 1, "%zu notices reached the admin", n);
	cr_assert_eq(r.nauth_fail, 0);
	rt_rec_free(&r);
	metrics_once(&out);
	cr_assert(strstr(out.s, "weir_oauth_login_needed{upstream=\"isp\"} 0\n"), "%s", out.s);
	assert_no_secret_leaked();
	buf_free(&out);
}

struct idp_want {
	const char *const *what;
	size_t n;
};

static int
idp_has(struct rt *rt, void *arg)
{
	const struct idp_want *w = arg;

	(void)rt;
	return idp_count(w->what) >= w->n;
}

Test(oauth, keepalive_with_no_mail)
{
	/* Access tokens of an hour: no refresh is due for them; only the
	 * keep-alive (refresh_idle 3 s) uses the refresh token. */
	const char *idpflags[] = { "--lifetime", "3600", "--rotate", NULL };
	const char *stat_args[] = { "status" };
	const char *refresh_ok[] = { "\"grant\": \"refresh_token\"", "\"result\": \"ok\"", NULL };
	const char *refused[] = { "\"grant\": \"refresh_token\"", "\"result\": \"invalid_grant\"",
	    NULL };
	const char *login_ok[] = { "\"grant\": \"device_code\"", "\"result\": \"ok\"", NULL };
	struct idp_want w = { refresh_ok, 3 };
	struct buf out = BUF_INIT, glog = BUF_INIT;
	double used[8], ref[8];
	struct rt_rec r;
	size_t i, n, want, nref;
	char *logs;

	rt_setup(&t, 1);
	idp_start(idpflags);
	upstream_start("600");
	conf_isp("    refresh_idle = 3s\n", NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	start_relay(1, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");

	/* Three refreshes with no mail at all, each a refresh_idle after the
	 * token's last use (the login, then each refresh), to the second the
	 * status file keeps. */
	cr_assert(rt_wait(idp_has, &t, &w, 60000), "%zu keep-alive refreshes:\n%s",
	    idp_count(refresh_ok), rt_send_logs_tail(&t, 4000));
	cr_assert_eq(idp_times(login_ok, used, 1), 1);
	nref = idp_times(refresh_ok, ref, 3);
	nref = nref < 3 ? nref : 3;
	for (i = 0; i < nref; i++) {
		cr_assert_geq(ref[i] - used[0], 2.0, "refresh %zu came %.3f s after the token's "
		    "last use (refresh_idle 3 s)", i + 1, ref[i] - used[0]);
		used[0] = ref[i];
	}
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 0, "mail went");
	cr_assert_eq(r.nauth, 0, "the upstream saw an AUTH");
	rt_rec_free(&r);
	cr_assert_eq(rt_log_count(&t, "delivering to"), 0);
	cr_assert_geq(rt_log_count(&t, "upstream isp: OAuth keep-alive: its refresh token unused "
	    "for "), 3);

	/* The refresh token dies; the next keep-alive finds it, and the alarm
	 * goes as for a delivery: the upstream suspended (weir-gate told by
	 * weir-remote -K), weir status, the metric, the admin mailed. */
	idp_control("{\"revoke\": true}");
	rt_wait_log(&t, "OAuth login notice to <" SH_ADMIN "> queued", 1, 30000);
	cr_assert_eq(idp_count(refused), 1);
	tl_read(t.gate_log, &glog);
	buf_addc(&glog, '\0');
	cr_assert(strstr(glog.s, "upstream isp: authentication failed: keep-alive: OAuth: the "
	    "provider refused the refresh: invalid_grant") &&
	    strstr(glog.s, "; run weir auth login isp (the login lifts the suspension"),
	    "weir-gate's log:\n%s", glog.s);
	run("weir", stat_args, 1, NULL, &out);
	cr_assert(strstr(out.s, "authentication failed: suspended until") &&
	    strstr(out.s, "keep-alive: OAuth: the provider refused the refresh: invalid_grant") &&
	    strstr(out.s, "upstream isp: LOGIN NEEDED since "), "weir status:\n%s", out.s);
	metrics_once(&out);
	cr_assert(strstr(out.s, "weir_oauth_login_needed{upstream=\"isp\"} 1\n"), "%s", out.s);
	logs = rt_send_logs(&t);
	cr_assert(strstr(logs, "the provider refuses the refresh token (or there is none): a "
	    "login is needed") && strstr(logs, "no keep-alive until weir auth login isp"), "%s",
	    logs);
	free(logs);
	/* Looked at again (hourly; here each refresh_idle): no second notice
	 * within the day, no dead token offered to the provider again, and
	 * the notice itself held by the suspension. */
	rt_wait_log(&t, "upstream isp: OAuth: a login is needed since", 3, 30000);
	cr_assert_eq(rt_log_count(&t, "OAuth login notice to <"), 1);
	cr_assert_eq(idp_count(refused), 1);
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 0);
	cr_assert_eq(r.nauth, 0);
	rt_rec_free(&r);

	/* The login: the notice goes, and the keep-alive with the new token. */
	n = idp_count(refresh_ok);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "upstream isp: suspensions lifted"), "%s", out.s);
	want = 1;
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 30000), "the notice did not go:\n%s",
	    rt_send_logs_tail(&t, 4000));
	w.n = n + 1;
	cr_assert(rt_wait(idp_has, &t, &w, 30000), "no keep-alive after the login:\n%s",
	    rt_send_logs_tail(&t, 4000));
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(rt_rec_count(&r, NULL, SH_ADMIN), 1);
	cr_assert_eq(r.nauth_fail, 0);
	rt_rec_free(&r);
	rt_say("oauth: %zu keep-alive refreshes with no mail, a dead token found by one", n);
	assert_no_secret_leaked();
	buf_free(&out);
	buf_free(&glog);
}

/* weir-remote -K by hand: no token yet is refused (3) and leaves the
 * status saying so; an upstream without an oauth section is bad usage
 * (2); right after a login nothing is due (0): the provider is not
 * asked (refresh_idle is a day by default). */
Test(oauth, keepalive_by_hand)
{
	const char *ka[] = { "-K", "-u", "isp" }, *nosuch[] = { "-K", "-u", "nosuch" };
	const char *as[] = { "auth", "status" };
	const char *refresh_any[] = { "\"grant\": \"refresh_token\"", NULL };
	struct buf out = BUF_INIT;
	char *dir;

	rt_setup(&t, 1);
	idp_start(NULL);
	upstream_start("600");
	conf_isp(NULL, NULL);
	dir = xasprintf("%s/oauth", t.s.qt.tmp);
	cr_assert_eq(mkdir(dir, 0755), 0);
	free(dir);
	cr_assert_eq(run("weir-remote", ka, 3, NULL, &out), OAUTH_KA_REFUSED, "%s", out.s);
	cr_assert(strstr(out.s, "OAuth keep-alive: OAuth: no token yet") &&
	    strstr(out.s, "run weir auth login isp"), "%s", out.s);
	cr_assert_eq(run("weir", as, 2, NULL, &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "LOGIN NEEDED"), "%s", out.s);
	cr_assert_eq(run("weir-remote", nosuch, 3, NULL, &out), OAUTH_KA_USAGE, "%s", out.s);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	cr_assert_eq(run("weir-remote", ka, 3, NULL, &out), OAUTH_KA_OK, "%s", out.s);
	cr_assert_eq(idp_count(refresh_any), 0, "a refresh that was not due");
	assert_no_secret_leaked();
	buf_free(&out);
}

/* ---- issue 34: organisations ---- */


/* A command that must work (argv[0] a path). */
static void
must_run(const char *const *argv)
{
	struct tl_run run = { .argv = argv, .timeout_s = 60 };
	struct tl_result r;

	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "%s: %s", argv[0], buf_cstr(&r.err));
	tl_result_free(&r);
}

/* An RSA key (name.key, 0600) and its self-signed certificate
 * (name.crt) in the test's folder, made now with openssl; the key's
 * middle line is kept as a secret to look for. */
static void
make_keypair(const char *name)
{
	char *key = xasprintf("%s/%s.key", t.s.qt.tmp, name);
	char *crt = xasprintf("%s/%s.crt", t.s.qt.tmp, name);
	const char *argv[] = { "/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048",
	    "-nodes", "-keyout", key, "-out", crt, "-subj", "/CN=weir-test-app", "-days", "2",
	    NULL };
	struct buf b = BUF_INIT;
	char *line;

	must_run(argv);
	cr_assert_eq(chmod(key, 0600), 0);
	tl_read(key, &b);
	buf_addc(&b, '\0');
	line = strchr(strchr(b.s, '\n') + 1, '\n') + 1;	/* the third line */
	*strchr(line, '\n') = '\0';
	cr_assert_lt(nmade, 8);
	made_secrets[nmade++] = xstrdup(line);
	buf_free(&b);
	free(key);
	free(crt);
}

/* The folder of token_file, as weir auth login would make it. */
static void
token_folder(void)
{
	char *dir = xasprintf("%s/oauth", t.s.qt.tmp);

	cr_assert(mkdir(dir, 0755) == 0 || errno == EEXIST);
	free(dir);
}

/* upstream "isp" with an app-only oauth section of provider at idp.py
 * (extra: its lines), and the folder of its token_file. */
static void
conf_app(const char *provider, const char *extra)
{
	char *o = xasprintf("    provider = %s\n%s", provider, extra);

	conf_oauth(NULL, o);
	free(o);
	token_folder();
}

/* weir auth ARG isp; its status, the output in out. */
static int
auth(const char *arg, struct buf *out)
{
	const char *args[] = { "auth", arg, "isp" };

	return run("weir", args, 3, NULL, out);
}

/* One message through the relay and the upstream, by XOAUTH2. */
static void
deliver_one(const char *rcpt)
{
	struct rt_rec r;
	size_t want = 1;

	if (!t.gate)
		start_relay(1, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	send1(rcpt);
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 30000), "not delivered:\n%s",
	    rt_send_logs_tail(&t, 4000));
	rt_rec_load(&t, &r);
	cr_assert_eq(rt_rec_count(&r, SENDER, rcpt), 1);
	cr_assert_eq(r.nauth_fail, 0);
	rt_rec_free(&r);
}

/* Item 1: Microsoft's client credentials grant with a client secret:
 * no login, no refresh token; weir auth test, auth status, check-config
 * and a delivery. */
Test(oauth, client_credentials_with_a_secret)
{
	const char *idpflags[] = { NULL, NULL, NULL };
	const char *cc[] = { "check-config" };
	const char *as[] = { "auth", "status" };
	const char *app_ok[] = { "\"grant\": \"client_credentials\"", "\"how\": \"secret\"",
	    "\"result\": \"ok\"", NULL };
	struct buf out = BUF_INIT;
	char *extra;

	rt_setup(&t, 1);
	client_secret(idpflags);
	idp_start(idpflags);
	upstream_start("600");
	extra = xasprintf("    flow = client_credentials\n    client_id = \"weir-test-client\"\n"
	    "    client_secret_file = \"%s/client.secret\"\n", t.s.qt.tmp);
	conf_app("microsoft", extra);
	free(extra);
	run("weir", cc, 1, NULL, &out);
	cr_assert(strstr(out.s, "no token fetched yet") && strstr(out.s, "weir auth test isp"),
	    "%s", out.s);
	cr_assert_eq(auth("test", &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "upstream isp: token ok: a new access token from the token "
	    "endpoint (client credentials, secret)"), "%s", out.s);
	cr_assert_eq(idp_count(app_ok), 1, "the scope .default, the secret: as Entra wants");
	cr_assert_eq(run("weir", as, 2, NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "flow client_credentials") && strstr(out.s, "refresh token:") ==
	    NULL, "%s", out.s);
	deliver_one("bob@dest.example");
	cr_assert_eq(idp_count(app_ok), 1, "the token from weir auth test served the delivery");
	/* A wrong secret: refused, said, and the alarm up. */
	extra = xasprintf("%s/client.secret", t.s.qt.tmp);
	tl_write(extra, "wrong", 5);
	free(extra);
	cr_assert_eq(auth("test", &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "token failed: OAuth: the provider refused the application's "
	    "credentials: invalid_client") && strstr(out.s, "run weir auth login isp"), "%s",
	    out.s);
	cr_assert_eq(run("weir", as, 2, NULL, &out), 1, "%s", out.s);
	assert_no_secret_leaked();
	buf_free(&out);
}

/* weir.conf with its first "from" made "to". */
static void
conf_replace(const char *from, const char *to)
{
	char *path = xasprintf("%s/weir.conf", t.s.qt.tmp), *p;
	struct buf c = BUF_INIT, n = BUF_INIT;

	tl_read(path, &c);
	buf_addc(&c, '\0');
	p = strstr(c.s, from);
	cr_assert(p, "no %s in weir.conf", from);
	buf_add(&n, c.s, (size_t)(p - c.s));
	buf_adds(&n, to);
	buf_adds(&n, p + strlen(from));
	tl_write(path, n.s, n.len);
	buf_free(&c);
	buf_free(&n);
	free(path);
}

/* Item 1: the client credentials grant with a certificate, as Microsoft
 * recommends: the signed client assertion of RFC 7523 (idp.py checks the
 * signature, x5t and x5t#S256, aud, iss, sub, exp, nbf and jti); one
 * signed by a key the provider does not know is refused; a certificate
 * that is not the key's is said before any request. */
Test(oauth, client_credentials_with_a_certificate)
{
	const char *idpflags[] = { "--client-cert", NULL, NULL };
	const char *app_ok[] = { "\"grant\": \"client_credentials\"", "\"how\": \"assertion\"",
	    "\"result\": \"ok\"", NULL };
	const char *sig_bad[] = { "\"how\": \"assertion\"", "\"why\": \"signature\"", NULL };
	const char *any[] = { "\"grant\": \"client_credentials\"", NULL };
	struct buf out = BUF_INIT;
	char *extra, *crt;

	rt_setup(&t, 1);
	make_keypair("app");
	make_keypair("other");
	crt = xasprintf("%s/app.crt", t.s.qt.tmp);
	idpflags[1] = crt;
	idp_start(idpflags);
	upstream_start("600");
	extra = xasprintf("    flow = client_credentials\n    client_id = \"weir-test-client\"\n"
	    "    certificate_file = \"%s/app.crt\"\n    private_key_file = \"%s/app.key\"\n",
	    t.s.qt.tmp, t.s.qt.tmp);
	conf_app("microsoft", extra);
	free(extra);
	cr_assert_eq(auth("test", &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "token ok: a new access token from the token endpoint (client "
	    "credentials, certificate)"), "%s", out.s);
	cr_assert_eq(idp_count(app_ok), 1);
	deliver_one("bob@dest.example");
	/* The key of "other", the certificate of "app": said, nothing sent. */
	conf_replace("app.key", "other.key");
	cr_assert_eq(auth("test", &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "is not the certificate of private_key_file's key"), "%s", out.s);
	cr_assert_eq(idp_count(any), 1, "a request with a mismatched pair");
	/* "other" with its own certificate: a key the provider does not know. */
	conf_replace("app.crt", "other.crt");
	cr_assert_eq(auth("test", &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "the provider refused the application's credentials: "
	    "invalid_client"), "%s", out.s);
	cr_assert_eq(idp_count(sig_bad), 1, "not refused for its signature");
	free(crt);
	assert_no_secret_leaked();
	buf_free(&out);
}

/* Item 1: a Google service account with domain-wide delegation: the JWT
 * bearer grant of RFC 7523, signed with the key of its JSON key file,
 * acting for the mailbox (sub = username); idp.py checks signature,
 * kid, iss, sub, scope, aud and the hour. */
Test(oauth, service_account_jwt_bearer)
{
	const char *idpflags[] = { "--sa-cert", NULL, "--sa-email",
	    "relay@weir-test.iam.gserviceaccount.com", "--sa-sub", RT_USER, "--sa-kid", "k1",
	    NULL };
	const char *ok[] = { "\"grant\": \"urn:ietf:params:oauth:grant-type:jwt-bearer\"",
	    "\"result\": \"ok\"", NULL };
	struct buf out = BUF_INIT, key = BUF_INIT, json = BUF_INIT;
	char *crt, *path, *extra;

	rt_setup(&t, 1);
	make_keypair("sa");
	crt = xasprintf("%s/sa.crt", t.s.qt.tmp);
	idpflags[1] = crt;
	path = xasprintf("%s/sa.key", t.s.qt.tmp);
	tl_read(path, &key);
	free(path);
	buf_adds(&json, "{\"type\":\"service_account\",\"project_id\":\"weir-test\","
	    "\"private_key_id\":\"k1\",\"private_key\":\"");
	for (size_t i = 0; i < key.len; i++) {
		if (key.s[i] == '\n')
			buf_adds(&json, "\\n");
		else
			buf_addc(&json, key.s[i]);
	}
	buf_adds(&json, "\",\"client_email\":\"relay@weir-test.iam.gserviceaccount.com\","
	    "\"client_id\":\"1234\",\"token_uri\":\"https://oauth2.googleapis.com/token\"}\n");
	path = xasprintf("%s/sa.json", t.s.qt.tmp);
	tl_write(path, json.s, json.len);
	cr_assert_eq(chmod(path, 0600), 0);
	idp_start(idpflags);
	upstream_start("600");
	extra = xasprintf("    flow = service_account\n    key_file = \"%s\"\n", path);
	conf_app("google", extra);
	free(extra);
	free(path);
	cr_assert_eq(auth("test", &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "token ok: a new access token from the token endpoint (service "
	    "account)"), "%s", out.s);
	cr_assert_eq(idp_count(ok), 1);
	deliver_one("bob@dest.example");
	/* Acting for another mailbox: refused (sub). */
	conf_replace("username = \"" RT_USER "\"", "username = \"someone-else\"");
	cr_assert_eq(auth("test", &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "invalid_grant") && strstr(out.s, "sub someone-else"), "%s",
	    out.s);
	free(crt);
	buf_free(&key);
	buf_free(&json);
	assert_no_secret_leaked();
	buf_free(&out);
}

/* A free TCP port on 127.0.0.1 (nothing else runs in the test's own
 * network namespace to take it meanwhile). */
static unsigned
free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t n = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &n) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

static int
port_open(struct rt *rt, void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	(void)rt;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(*(unsigned *)arg);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static pid_t proxy_pid;

static void
proxy_stop(void)
{
	if (proxy_pid > 0) {
		kill(proxy_pid, SIGKILL);
		while (waitpid(proxy_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	proxy_pid = 0;
}

/* Item 2: the token endpoint reached only through an HTTP proxy
 * (Debian's tinyproxy, with basic authentication) in the test's own
 * network namespace, whose firewall refuses every connection to the
 * provider's port but the proxy's (it runs as nobody): the way without
 * the proxy is shown closed, weir without proxy fails, weir with it gets
 * its tokens, at weir auth test and at each delivery. */
Test(oauth, proxy_with_the_direct_way_closed)
{
	const char *idpflags[] = { "--lifetime", "20", NULL, NULL, NULL };
	const char *app_ok[] = { "\"grant\": \"client_credentials\"", "\"result\": \"ok\"", NULL };
	struct buf out = BUF_INIT, plog = BUF_INIT;
	char *conf, *text, *path, *port, *log, *extra;
	unsigned pport;

	if (geteuid() != 0)
		cr_skip_test("root only: a network namespace and its firewall");
	cr_assert_eq(unshare(CLONE_NEWNET), 0, "unshare: %s", strerror(errno));
	must_run((const char *const[]){ "/usr/sbin/ip", "link", "set", "lo", "up", NULL });
	rt_setup(&t, 1);
	client_secret(&idpflags[2]);
	idp_start(idpflags);
	upstream_start("4");
	/* The direct way closed: only nobody (the proxy) reaches the port. */
	port = xasprintf("%u", idp.port);
	must_run((const char *const[]){ "/usr/sbin/iptables", "-A", "OUTPUT", "-o", "lo", "-p",
	    "tcp", "--dport", port, "-m", "owner", "!", "--uid-owner", "65534", "-j", "REJECT",
	    "--reject-with", "tcp-reset", NULL });
	{
		char *ca = xasprintf("%s/ca.pem", t.certs), *url = xasprintf("%s/token", idp.url);
		const char *argv[] = { "/usr/bin/curl", "-sS", "--cacert", ca, "-d", "x=1", url,
		    NULL };
		struct tl_run r1 = { .argv = argv, .timeout_s = 20 };
		struct tl_result r;

		tl_run(&r1, &r);
		cr_assert_eq(r.status, 7, "the provider is reachable without the proxy: %d %s",
		    r.status, buf_cstr(&r.err));
		tl_result_free(&r);
		free(ca);
		free(url);
	}
	/* The proxy, as root dropping to nobody, asking for a password. */
	pport = free_port();
	conf = xasprintf("%s/tinyproxy.conf", t.s.qt.tmp);
	text = xasprintf("User nobody\nGroup nogroup\nPort %u\nListen 127.0.0.1\nTimeout 30\n"
	    "LogLevel Connect\nMaxClients 20\nAllow 127.0.0.1\nBasicAuth weir pr0xy-pw-%ld\n"
	    "ConnectPort %u\n", pport, (long)getpid(), idp.port);
	tl_write(conf, text, strlen(text));
	free(text);
	log = xasprintf("%s/tinyproxy.log", t.s.qt.tmp);
	proxy_pid = fork();
	cr_assert(proxy_pid >= 0);
	if (proxy_pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execl("/usr/bin/tinyproxy", "tinyproxy", "-d", "-c", conf, (char *)NULL);
		_exit(127);
	}
	cr_assert(rt_wait(port_open, &t, &pport, 20000), "tinyproxy did not listen");
	path = xasprintf("%s/proxy.auth", t.s.qt.tmp);
	text = xasprintf("weir:pr0xy-pw-%ld\n", (long)getpid());
	tl_write(path, text, strlen(text));
	cr_assert_eq(chmod(path, 0600), 0);
	made_secrets[nmade++] = xasprintf("pr0xy-pw-%ld", (long)getpid());
	free(text);
	/* Without the proxy: refused on the way, said, nothing reached. */
	extra = xasprintf("    flow = client_credentials\n    client_id = \"weir-test-client\"\n"
	    "    scope = \"https://outlook.office365.com/.default\"\n"
	    "    client_secret_file = \"%s/client.secret\"\n    refresh_margin = 30s\n"
	    "    timeout = 5s\n", t.s.qt.tmp);
	conf_app("generic", extra);
	free(extra);
	cr_assert_eq(auth("test", &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "token failed: OAuth: the token endpoint: ") &&
	    (strstr(out.s, "onnect") || strstr(out.s, "refused")), "%s", out.s);
	cr_assert_eq(idp_count(app_ok), 0);
	/* With it. */
	extra = xasprintf("    proxy = \"http://127.0.0.1:%u\"\n    proxy_auth_file = \"%s\"\n"
	    "    refresh_margin = 30s\n", pport, path);
	conf_replace("    refresh_margin = 30s\n", extra);
	free(extra);
	cr_assert_eq(auth("test", &out), 0, "%s", out.s);
	cr_assert_eq(idp_count(app_ok), 1);
	deliver_one("bob@dest.example");
	cr_assert_eq(idp_count(app_ok), 2, "the deliverer did not get its own token (margin)");
	tl_read(log, &plog);
	buf_addc(&plog, '\0');
	cr_assert_geq(tl_count(plog.s, "CONNECT"), 2, "tinyproxy's log:\n%s", plog.s);
	proxy_stop();
	free(conf);
	free(log);
	free(path);
	free(port);
	assert_no_secret_leaked();
	buf_free(&out);
	buf_free(&plog);
}

/* Item 3: the token endpoint down (HTTP 503) while 100 messages wait,
 * each delivery needing a new access token (tokens of 20 s, margin
 * 30 s): the provider is asked a handful of times, not once per try (the
 * shared back-off in the status file, across every deliverer process);
 * weir auth test asks at once and ends it; then every message goes once.
 * WEIR_OAUTH_OUTAGE_S=60 measures the requests in 60 s of outage
 * instead (scripts/bench/BENCHMARKS.md). */
Test(oauth, outage_asks_the_provider_a_handful_of_times, .timeout = 400)
{
	enum { N = 100 };
	const char *idpflags[] = { "--lifetime", "20", NULL };
	const char *refresh_any[] = { "\"grant\": \"refresh_token\"", NULL };
	const char *refresh_ok[] = { "\"grant\": \"refresh_token\"", "\"result\": \"ok\"", NULL };
	char **to = rt_addrs("w", "dest.example", 1, N);
	const char *window = getenv("WEIR_OAUTH_OUTAGE_S");
	struct buf out = BUF_INIT;
	struct rt_rec r;
	size_t i, asked, want = N;
	double t0;

	rt_setup(&t, 4);
	idp_start(idpflags);
	upstream_start("4");
	conf_isp("    refresh_margin = 30s\n    timeout = 5s\n", NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	idp_control("{\"mode\": \"500\"}");
	start_relay(4, "upstream \"isp\" { rate = {\"100 per 1s\"} max_connections = 4 }\n");
	t0 = rt_now();
	for (i = 0; i < N; i++)
		send1(to[i]);
	rt_wait_log(&t, "deferred <", N, 120000);
	if (window) {
		double end = t0 + atof(window);

		while (rt_now() < end) {
			rt_flush(&t);
			usleep(500000);	/* the measurement's window: a fixed time */
		}
	}
	asked = idp_count(refresh_any);
	rt_say("oauth: %zu token requests in %.1f s of outage, %zu deferrals of %d messages",
	    asked, rt_now() - t0, rt_log_count(&t, "deferred <"), N);
	cr_assert_leq(asked, 8, "%zu requests to a provider that is down", asked);
	cr_assert_geq(asked, 1);
	/* weir auth test asks now, whatever the back-off; its success ends it. */
	idp_control("{\"mode\": \"ok\"}");
	cr_assert_eq(auth("test", &out), 0, "%s", out.s);
	rt_flush(&t);
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 120000), "not all delivered:\n%s",
	    rt_send_logs_tail(&t, 4000));
	rt_wait_empty(&t, 60000);
	rt_rec_load(&t, &r);
	for (i = 0; i < N; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, to[i]), 1);
	cr_assert_eq(r.nauth_fail, 0);
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
	cr_assert_geq(idp_count(refresh_ok), 1);
	rt_addrs_free(to, N);
	assert_no_secret_leaked();
	buf_free(&out);
}

/* Item 4: the disk full at a rotation (a tmpfs of its own under the
 * token folder, in the test's own mount namespace, filled up): weir does
 * not refresh without room to save the new refresh token (the provider
 * is not asked), and the login survives: once there is room the old
 * refresh token works.  Before, the refresh went, the rotated token was
 * lost, and the provider refused the old one. */
Test(oauth, full_disk_keeps_the_login)
{
	const char *idpflags[] = { "--lifetime", "20", "--rotate", NULL };
	const char *refresh_any[] = { "\"grant\": \"refresh_token\"", NULL };
	const char *refresh_ok[] = { "\"grant\": \"refresh_token\"", "\"result\": \"ok\"", NULL };
	struct buf out = BUF_INIT;
	char *dir, *filler, block[4096];
	int fd;
	ssize_t w;

	if (geteuid() != 0)
		cr_skip_test("root only: a mount namespace and a tmpfs");
	cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %s", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	rt_setup(&t, 1);
	idp_start(idpflags);
	upstream_start("4");
	conf_isp("    refresh_margin = 30s\n", NULL);
	dir = xasprintf("%s/oauth", t.s.qt.tmp);
	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert_eq(mount("weir-oauth-test", dir, "tmpfs", 0, "size=256k,mode=0755"), 0,
	    "mount: %s", strerror(errno));
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	/* Full. */
	filler = xasprintf("%s/filler", dir);
	fd = open(filler, O_WRONLY | O_CREAT, 0600);
	cr_assert(fd >= 0);
	memset(block, 'x', sizeof block);
	while ((w = write(fd, block, sizeof block)) > 0)
		;
	cr_assert(w < 0 && errno == ENOSPC, "not full: %s", strerror(errno));
	close(fd);
	cr_assert_neq(probe(NULL, &out), 0, "a refresh on a full disk: %s", out.s);
	cr_assert(strstr(out.s, "token failed: OAuth: no room to save a new refresh token") &&
	    strstr(out.s, "the login is kept"), "%s", out.s);
	cr_assert_eq(idp_count(refresh_any), 0, "the provider was asked with no room to save");
	/* Room again: the login is there. */
	cr_assert_eq(unlink(filler), 0);
	cr_assert_eq(probe(NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "token ok: refreshed at the token endpoint") &&
	    strstr(out.s, "auth ok: XOAUTH2"), "%s", out.s);
	cr_assert_eq(idp_count(refresh_ok), 1);
	assert_no_secret_leaked();
	cr_assert_eq(umount(dir), 0);
	free(filler);
	free(dir);
	buf_free(&out);
}

/* Item 4: a rotated refresh token that could not be saved all the same
 * (its rename fails: EIO, the fault shim in every deliverer) raises the
 * alarm at once: weir auth status, the metric, the log, the admin's
 * notice; the message itself goes (the access token works). */
Test(oauth, unsaved_token_raises_the_alarm)
{
	const char *idpflags[] = { "--lifetime", "20", "--rotate", NULL };
	const char *as[] = { "auth", "status" };
	char *pre = xasprintf("LD_PRELOAD=%s", getenv("WEIR_FAULTINJ"));
	const char *env[] = { pre, "WEIR_FAULT=rename@/oauth/isp.tmp=1:EIO",
	    "WEIR_FAULT_PROG=weir-remote", NULL };
	struct buf out = BUF_INIT;
	size_t want = 1;
	char *logs;

	cr_assert(getenv("WEIR_FAULTINJ"), "no $WEIR_FAULTINJ");
	rt_setup(&t, 1);
	idp_start(idpflags);
	upstream_start("4");
	conf_isp("    refresh_margin = 30s\n", NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	cr_assert_eq(run("weir", as, 2, NULL, &out), 0, "%s", out.s);
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start_env(&t, env);
	send1("bob@dest.example");
	cr_assert(rt_wait(rt_ndata_at_least, &t, &want, 30000), "not delivered:\n%s",
	    rt_send_logs_tail(&t, 4000));
	rt_wait_log(&t, "OAuth login notice to <" SH_ADMIN "> queued", 1, 30000);
	logs = rt_send_logs(&t);
	cr_assert(strstr(logs, "the new refresh token could not be saved"), "%s", logs);
	free(logs);
	cr_assert_eq(run("weir", as, 2, NULL, &out), 1, "%s", out.s);
	cr_assert(strstr(out.s, "LOGIN NEEDED") && strstr(out.s, "could not be saved"), "%s",
	    out.s);
	metrics_once(&out);
	cr_assert(strstr(out.s, "weir_oauth_login_needed{upstream=\"isp\"} 1\n"), "%s", out.s);
	free(pre);
	assert_no_secret_leaked();
	buf_free(&out);
}

/* Item 5: the alarm ends when a token works.  A damaged token file says
 * a login is needed; the file restored, the first AUTH the upstream
 * accepts with its token ends the alarm everywhere (auth status, the
 * metric, check-config), with no refresh and no login. */
Test(oauth, alarm_ends_when_a_token_works)
{
	const char *as[] = { "auth", "status" }, *cc[] = { "check-config" };
	const char *refresh_any[] = { "\"grant\": \"refresh_token\"", NULL };
	struct buf out = BUF_INIT;
	char *file, *copy;

	rt_setup(&t, 1);
	file = xasprintf("%s/oauth/isp", t.s.qt.tmp);
	copy = xasprintf("%s/oauth/isp.copy", t.s.qt.tmp);
	idp_start(NULL);
	upstream_start("600");
	conf_isp(NULL, NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	cr_assert_eq(link(file, copy), 0);
	cr_assert_eq(unlink(file), 0);
	tl_write(file, "{", 1);
	cr_assert_eq(chmod(file, 0600), 0);
	cr_assert_neq(probe(NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "not a token file of weir's"), "%s", out.s);
	cr_assert_eq(run("weir", as, 2, NULL, &out), 1, "%s", out.s);
	cr_assert_eq(rename(copy, file), 0);
	cr_assert_eq(run("weir", as, 2, NULL, &out), 1, "the alarm went before a token worked");
	cr_assert_eq(probe(NULL, &out), 0, "%s", out.s);
	cr_assert(strstr(out.s, "token ok: access token from the token file") &&
	    strstr(out.s, "auth ok: XOAUTH2"), "%s", out.s);
	cr_assert_eq(run("weir", as, 2, NULL, &out), 0, "the alarm outlived a good AUTH:\n%s",
	    out.s);
	metrics_once(&out);
	cr_assert(strstr(out.s, "weir_oauth_login_needed{upstream=\"isp\"} 0\n"), "%s", out.s);
	run("weir", cc, 1, NULL, &out);
	cr_assert(strstr(out.s, "a login is needed") == NULL && strstr(out.s, "not a token "
	    "file") == NULL, "%s", out.s);
	cr_assert_eq(idp_count(refresh_any), 0, "a refresh was made");
	free(file);
	free(copy);
	assert_no_secret_leaked();
	buf_free(&out);
}

/* Item 8: Exchange Online's 535 5.7.139 (SMTP AUTH turned off for the
 * tenant) to a good token: the advice is the provider's fix, not "run
 * weir auth login", in weir-gate's log, weir status, weir-send's log and
 * the admin's notice. */
Test(oauth, exchange_says_smtp_auth_is_off)
{
	/* Microsoft Learn, "Enable or disable SMTP AUTH in Exchange Online". */
	const char *flags[] = { "--oauth-issued", NULL, "--oauth-margin", "600", "--reply",
	    "auth=535 5.7.139 Authentication unsuccessful, SmtpClientAuthentication is disabled "
	    "for the Tenant. Visit https://aka.ms/smtp_auth_disabled for more information.",
	    NULL };
	const char *stat_args[] = { "status" };
	struct buf out = BUF_INIT, glog = BUF_INIT;
	char *logs;

	rt_setup(&t, 1);
	idp_start(NULL);
	flags[1] = idp.issued;
	rt_upstream_start(&t, "good", flags, 0);
	conf_isp(NULL, NULL);
	cr_assert_eq(login(NULL, &out), 0, "%s", out.s);
	start_relay(1, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	send1("bob@dest.example");
	rt_wait_log(&t, "authentication notice to <" SH_ADMIN "> queued", 1, 30000);
	logs = rt_send_logs(&t);
	cr_assert(strstr(logs, "Exchange Online says SMTP AUTH is turned off for the whole "
	    "organisation"), "%s", logs);
	free(logs);
	tl_read(t.gate_log, &glog);
	buf_addc(&glog, '\0');
	cr_assert(strstr(glog.s, "authentication failed: 535 5.7.139") &&
	    strstr(glog.s, "tick Authenticated SMTP") &&
	    strstr(glog.s, "run weir auth login") == NULL, "weir-gate's log:\n%s", glog.s);
	run("weir", stat_args, 1, NULL, &out);
	cr_assert(strstr(out.s, "Exchange Online says SMTP AUTH is turned off") &&
	    strstr(out.s, "run weir auth login isp (the login") == NULL, "weir status:\n%s",
	    out.s);
	assert_no_secret_leaked();
	buf_free(&out);
	buf_free(&glog);
}
