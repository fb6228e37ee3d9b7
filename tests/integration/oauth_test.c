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
static struct buf outputs = BUF_INIT;	/* everything the test read from commands */

static void
teardown(void)
{
	if (idp.pid > 0) {
		kill(-idp.pid, SIGKILL);
		kill(idp.pid, SIGKILL);
		while (waitpid(idp.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	rt_teardown(&t);
	free(idp.record);
	free(idp.issued);
	free(idp.secrets);
	free(idp.url);
	memset(&idp, 0, sizeof idp);
	buf_free(&outputs);
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

/* upstream "isp" with an oauth section at idp.py; extra lines in the
 * oauth section and in the upstream's. */
static void
conf_isp(const char *oauth_extra, const char *up_extra)
{
	char *s = xasprintf("upstream \"isp\" {\n  host = \"127.0.0.1\"\n  port = %u\n"
	    "  ca_file = \"%s/ca.pem\"\n  username = \"%s\"\n  timeout_connect = 5s\n"
	    "  timeout_command = 10s\n%s  oauth {\n    provider = generic\n"
	    "    client_id = \"weir-test-client\"\n"
	    "    scope = \"https://outlook.office.com/SMTP.Send offline_access\"\n"
	    "    device_endpoint = \"%s/devicecode\"\n    authorize_endpoint = \"%s/authorize\"\n"
	    "    token_endpoint = \"%s/token\"\n    ca_file = \"%s/ca.pem\"\n"
	    "    token_file = \"%s/oauth/isp\"\n%s  }\n}\n", t.port, t.certs, RT_USER,
	    up_extra ? up_extra : "", idp.url, idp.url, idp.url, t.certs, t.s.qt.tmp,
	    oauth_extra ? oauth_extra : "");

	sh_conf_append(&t.s, s);
	free(s);
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
		    strcmp(e->d_name, "client.secret") != 0) {
			/* The token file (and a copy of it cut short) is where the
			 * tokens belong, the client's secret file where its secret
			 * does; everything else must not hold one. */
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
		{ "after the answer (a new refresh token lost)", "open@/oauth/isp.tmp=1:KILL" },
		{ "mid-write of the new token file", "write@/oauth/isp.tmp=1:KILL" },
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
		cr_assert_eq(after - before, i == 0 ? 0 : 1, "%s: %zu refreshes", steps[i].step,
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
	idp_control("{\"mode\": \"drop\"}");
	rt_flush(&t);
	rt_wait_log(&t, "deferred <carol@dest.example>", 2, 30000);
	idp_control("{\"mode\": \"slow:10\"}");
	rt_flush(&t);
	rt_wait_log(&t, "deferred <carol@dest.example>", 3, 30000);
	q = rt_send_logs(&t);
	cr_assert(strstr(q, "imed out") || strstr(q, "Timeout"), "no timeout said:\n%s", q);
	free(q);
	rt_rec_load(&t, &r);
	/* No AUTH without a valid token: the upstream saw none. */
	cr_assert_eq(r.nauth, 0, "%zu AUTHs tried without a token", r.nauth);
	cr_assert_eq(r.n, 0);
	nauth0 = r.nauth;
	rt_rec_free(&r);
	idp_control("{\"mode\": \"ok\"}");
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
