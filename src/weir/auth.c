/*
 * auth.c: `weir [-c FILE] auth login UPSTREAM` and `weir auth status
 * [UPSTREAM...]`, OAuth for the upstreams with an oauth section
 * (mail/oauth.h), and the OAuth part of `weir status`.
 *
 * login: the grant of the section's flow.  device (RFC 8628): the
 * verification address and the user code are printed, and the token
 * endpoint polled at the interval the provider asks (5 seconds more on
 * each slow_down) until the user approves, refuses, or the code
 * expires.  code (Google's, whose device grant refuses the mail scope):
 * an address for the user's browser (PKCE, a loopback redirect nothing
 * listens on), and the address the browser ends on, pasted back.  Then
 * the tokens are saved durably, the status file says the login is done,
 * and weir-gate is asked to lift the upstream's suspensions (RESUME,
 * as `weir resume`), so that mail waiting for a dead token goes now,
 * with no restart.  The folder of token_file is made if missing (0755;
 * started as root, the deliverer's), and, started as root, the login itself (every HTTPS
 * call, every file written) runs in a child that has become the
 * deliverer (mail/libexec.h's libexec_deliverer: weir-remote's owner),
 * the only identity that may read the client secret and the tokens.
 * Exit 0 logged in, 1 not, 2 usage.
 *
 * For the app-only flows (client_credentials, service_account) login
 * gets a token with the application's credentials (mail/oauth.h's
 * oauth_test), saves it, and asks weir-gate to lift the suspensions the
 * same way.
 *
 * test: a new access token now, whatever the margin and the back-off
 * (a refresh, or the app flow's grant), saved as a delivery's would be,
 * as the deliverer as login is: what the provider thinks of the
 * credentials.  Exit 0 it gave one, 1 not, 2 usage.
 *
 * status: per upstream, the account, the access token's expiry, the
 * refresh token's age, the login, the last refresh and the last error,
 * from token_file.status (readable by anyone: no secret in it).  Exit 0,
 * or 1 when an upstream needs a login.
 *
 * Trusts: the local admin; the provider through mail/oauth.c.  Config
 * keys: the upstream sections (username, oauth), gate_socket,
 * send_user (the deliverer, when weir-remote is not set-user-id).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/privdrop.h"
#include "lib/timefmt.h"
#include "mail/libexec.h"
#include "mail/oauth.h"
#include "mail/relaystatus.h"
#include "mail/rundir.h"
#include "weir/weir.h"

#define LINE_MAX_PASTE (16 * 1024)
#define POLL_FAILURES_MAX 10	/* endpoint failures in a row before giving up */

static const char *const provider_names[] = { "microsoft", "google", "generic" };
static const char *const flow_names[] = { "device", "code", "client_credentials",
    "service_account" };

/* "1h2m ago" / "in 5m": d seconds. */
static void
rel(char *out, size_t max, long long d)
{
	char s[64];

	duration_format(s, sizeof s, d < 0 ? -d : d);
	snprintf(out, max, d <= 0 ? "%s ago" : "in %s", s);
}

/* What st says of u, as indented lines (brief: one line, for weir
 * status).  1 when a login is needed. */
static int
describe(struct buf *o, const struct weir_upstream *u, const struct oauth_status *st,
    int have, const struct buf *why, long long now, int brief)
{
	char when[OAUTH_TIME_MAX], r[80];

	if (!have && OAUTH_APP_ONLY(&u->oauth) && why->len == 0) {
		buf_printf(o, "  upstream %s: no token fetched yet (flow %s: the first delivery, "
		    "or weir auth test %s, gets one)\n", u->name, flow_names[u->oauth.flow],
		    u->name);
		return 0;
	}
	if (!have) {
		buf_printf(o, "  upstream %s: %s%s: run weir auth login %s\n", u->name,
		    why->len ? "token status unreadable: " : "no token yet",
		    why->len ? why->s : "", u->name);
		return 1;
	}
	if (st->login_needed) {
		oauth_time(when, sizeof when, st->error_at);
		buf_printf(o, "  upstream %s: LOGIN NEEDED since %s: %s\n", u->name, when,
		    st->error);
		if (brief || st->login_at == 0) {
			if (!brief)
				buf_printf(o, "  run: weir auth login %s\n", u->name);
			return 1;	/* no token ever: nothing more to say */
		}
	}
	oauth_time(when, sizeof when, st->expires_at);
	rel(r, sizeof r, st->expires_at - now);
	if (brief) {
		char age[64];

		if (OAUTH_APP_ONLY(&u->oauth))
			snprintf(age, sizeof age, "none (flow %s)", flow_names[u->oauth.flow]);
		else
			duration_format(age, sizeof age, now - st->refresh_since);
		buf_printf(o, "  upstream %s: access token %s %s (%s), refresh token %s%s%s%s\n",
		    u->name, st->expires_at > now ? "expires" : "expired", when, r, age,
		    OAUTH_APP_ONLY(&u->oauth) ? "" : " old",
		    !st->error_at ? "" : OAUTH_APP_ONLY(&u->oauth) ? "; last request failed: " :
		    "; last refresh failed: ", st->error_at ? st->error : "");
		return 0;
	}
	buf_printf(o, "  account %s, provider %s%s%s, flow %s, token file %s\n", u->username,
	    provider_names[u->oauth.provider], u->oauth.tenant ? ", tenant " : "",
	    u->oauth.tenant ? u->oauth.tenant : "", flow_names[u->oauth.flow],
	    u->oauth.token_file);
	buf_printf(o, "  access token: %s %s (%s; lifetime ", st->expires_at > now ?
	    "expires" : "expired", when, r);
	duration_format(r, sizeof r, st->lifetime);
	buf_printf(o, "%s, refreshed with less than ", r);
	duration_format(r, sizeof r, oauth_margin(&u->oauth, st->lifetime));
	buf_printf(o, "%s left)\n", r);
	if (!OAUTH_APP_ONLY(&u->oauth)) {
		oauth_time(when, sizeof when, st->refresh_since);
		rel(r, sizeof r, st->refresh_since - now);
		buf_printf(o, "  refresh token: issued %s (%s)\n", when, r);
		oauth_time(when, sizeof when, st->login_at);
		rel(r, sizeof r, st->login_at - now);
		buf_printf(o, "  login: %s (%s)\n", when, r);
	}
	if (st->refreshed_at) {
		oauth_time(when, sizeof when, st->refreshed_at);
		rel(r, sizeof r, st->refreshed_at - now);
		buf_printf(o, "  last refresh: %s (%s)\n", when, r);
	} else if (!OAUTH_APP_ONLY(&u->oauth)) {
		buf_adds(o, "  last refresh: none since the login\n");
	}
	if (st->next_try > now) {
		oauth_time(when, sizeof when, st->next_try);
		rel(r, sizeof r, st->next_try - now);
		buf_printf(o, "  back-off: %lld failure%s in a row; no request before %s (%s)\n",
		    st->failures, st->failures == 1 ? "" : "s", when, r);
	}
	if (st->error_at) {
		oauth_time(when, sizeof when, st->error_at);
		buf_printf(o, "  last error: %s: %s\n", when, st->error);
	} else {
		buf_adds(o, "  last error: none since the last success\n");
	}
	if (st->login_needed)
		buf_printf(o, "  run: weir auth login %s\n", u->name);
	return st->login_needed;
}

void
auth_status_out(struct buf *o, const struct weir_config *cfg, int json, time_t now)
{
	struct oauth_status st;
	struct buf why = BUF_INIT;
	size_t i, n = 0;
	int have;

	if (json) {	/* the JSON is the relay status's (also weir-metrics') */
		relay_status_oauth_json(cfg, now, o);
		return;
	}
	for (i = 0; i < cfg->nupstreams; i++) {
		const struct weir_upstream *u = &cfg->upstreams[i];

		if (!u->oauth.present)
			continue;
		buf_reset(&why);
		have = oauth_status_load(&u->oauth, &st, &why) == 1;
		if (n++ == 0)
			buf_adds(o, "OAuth tokens (weir auth status):\n");
		(void)describe(o, u, &st, have, &why, (long long)now, 1);
	}
	buf_free(&why);
}

static int
status_cmd(int argc, char **argv, struct weir_config *cfg)
{
	struct oauth_status st;
	struct buf o = BUF_INIT, why = BUF_INIT;
	long long now = (long long)time(NULL);
	size_t i, n = 0;
	int need = 0, a, have;

	for (i = 0; i < cfg->nupstreams; i++) {
		const struct weir_upstream *u = &cfg->upstreams[i];

		for (a = 2; a < argc && strcmp(argv[a], u->name) != 0; a++)
			;
		if (!u->oauth.present || (argc > 2 && a == argc))
			continue;
		buf_reset(&why);
		have = oauth_status_load(&u->oauth, &st, &why) == 1;
		buf_printf(&o, "upstream %s:\n", u->name);
		need |= describe(&o, u, &st, have, &why, now, 0);
		n++;
	}
	if (n == 0)
		buf_printf(&o, "no upstream %swith an oauth section in %s\n", argc > 2 ?
		    "of those named " : "", cfg->file ? cfg->file : "the configuration");
	fputs(o.s, stdout);
	buf_free(&o);
	buf_free(&why);
	if (fflush(stdout) != 0)
		return 2;
	return need || n == 0 ? 1 : 0;
}

/* Wait until wall-clock-free monotonic ms from now: the interval the
 * provider asks between polls (RFC 8628 3.5); no event can end it. */
static void
wait_ms(long long ms)
{
	struct timespec t;

	if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
		fatal(1, "clock_gettime");
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
		;
}

static int
device_login(const struct weir_upstream *u)
{
	struct oauth_device d;
	struct buf err = BUF_INIT;
	char left[64];
	int wait, failures = 0, rc = 1;
	enum oauth_result r;

	if (oauth_device_start(u, &d, &err) < 0) {
		printf("login failed: %s\n", err.s);
		goto out;
	}
	duration_format(left, sizeof left, d.expires_at - (long long)time(NULL));
	printf("To sign in, open %s in a browser (on any device), enter the code %s and "
	    "sign in as %s.\n", d.uri, d.user_code, u->username);
	if (d.uri_complete[0])
		printf("(Or open %s, which holds the code.)\n", d.uri_complete);
	printf("Waiting for the sign-in (the code expires in %s)...\n", left);
	fflush(stdout);
	for (;;) {
		wait_ms(d.interval * 1000);
		if ((long long)time(NULL) >= d.expires_at) {
			printf("login failed: the code expired before the sign-in; run weir auth "
			    "login %s again\n", u->name);
			break;
		}
		buf_reset(&err);
		r = oauth_device_poll(u, &d, &wait, &err);
		if (r == OAUTH_OK) {
			rc = 0;
			break;
		}
		if (r == OAUTH_REFUSED) {
			printf("login failed: %s\n", err.s);
			break;
		}
		if (!wait && ++failures >= POLL_FAILURES_MAX) {
			printf("login failed: %s (%d times in a row)\n", err.s, failures);
			break;
		}
		if (!wait)
			printf("(%s; asking again)\n", err.s);
		else
			failures = 0;
		fflush(stdout);
	}
out:
	oauth_device_free(&d);
	buf_free(&err);
	return rc;
}

static int
code_login(const struct weir_upstream *u)
{
	struct oauth_code c;
	struct buf url = BUF_INIT, err = BUF_INIT;
	char *line = xmalloc(LINE_MAX_PASTE);
	int rc = 1;

	if (oauth_code_start(u, &c, &url, &err) < 0) {
		printf("login failed: %s\n", err.s);
		goto out;
	}
	printf("To sign in, open this address in a browser (on any device), sign in as %s "
	    "and allow the access asked:\n\n  %s\n\n", u->username, url.s);
	printf("The browser is then sent to %s?state=...&code=..., which does not load "
	    "(nothing listens there). Copy that whole address from the browser's address "
	    "bar, paste it here and press Enter:\n", c.redirect);
	fflush(stdout);
	if (fgets(line, LINE_MAX_PASTE, stdin) == NULL) {
		printf("login failed: nothing was pasted\n");
		goto out;
	}
	line[strcspn(line, "\r\n")] = '\0';
	if (oauth_code_finish(u, &c, line, &err) == OAUTH_OK)
		rc = 0;
	else
		printf("login failed: %s\n", err.s);
out:
	explicit_bzero(line, LINE_MAX_PASTE);
	free(line);
	oauth_code_free(&c);
	buf_free(&url);
	buf_free(&err);
	return rc;
}

/* weir auth test: a new token now (as the deliverer). */
static int
test_token(const struct weir_upstream *u)
{
	struct buf how = BUF_INIT, err = BUF_INIT;
	int rc = 1;

	if (oauth_test(u, &how, &err) == OAUTH_OK) {
		printf("upstream %s: token ok: %s\n", u->name, how.s);
		rc = 0;
	} else {
		printf("upstream %s: token failed: %s\n", u->name, err.s);
	}
	buf_free(&how);
	buf_free(&err);
	return rc;
}

/* The folder of token_file, made if missing (0755; as root, the
 * deliverer's), and, as root, who the login runs as.  0, or -1 (said). */
static int
prepare_folder(const struct weir_config *cfg, const struct weir_upstream *u, int *drop,
    char *name, size_t max)
{
	char dir[4096];
	uid_t uid = 0;
	gid_t gid = 0;
	int known = geteuid() == 0 && libexec_deliverer(cfg, &uid, &gid, name, max);

	*drop = known && uid != 0;
	rundir_of(u->oauth.token_file, dir, sizeof dir);
	if (mkdir(dir, 0755) == 0) {
		if (known && chown(dir, uid, gid) < 0) {
			log_warn("chown %s", dir);
			return -1;
		}
		printf("made %s (mode 0755%s%s)\n", dir, known ? ", owner " : "",
		    known ? name : "");
	} else if (errno != EEXIST) {
		log_warn("mkdir %s", dir);
		return -1;
	}
	return 0;
}

/* auth login or auth test (test): as the deliverer. */
static int
login_cmd(int argc, char **argv, struct weir_config *cfg, int test)
{
	const struct weir_upstream *u;
	char name[64] = "";
	int drop = 0, status, rc;
	pid_t pid;

	if (argc != 3 || argv[2][0] == '-') {
		log_warnx("usage: weir [-c FILE] auth %s UPSTREAM", test ? "test" : "login");
		return 2;
	}
	u = config_upstream(cfg, argv[2]);
	if (u == NULL || !u->oauth.present) {
		log_warnx("%s: no upstream \"%s\" with an oauth section", cfg->file ?
		    cfg->file : "the configuration", argv[2]);
		return 2;
	}
	if (prepare_folder(cfg, u, &drop, name, sizeof name) < 0)
		return 1;
	if (fflush(stdout) != 0)
		return 2;
	if ((pid = fork()) < 0) {
		log_warn("fork");
		return 1;
	}
	if (pid == 0) {
		/* Every HTTPS call and file as the deliverer. */
		if (drop)
			privdrop(name, 1);
		if (test || OAUTH_APP_ONLY(&u->oauth))
			rc = test_token(u);
		else
			rc = u->oauth.flow == OAUTH_FLOW_CODE ? code_login(u) : device_login(u);
		if (rc == 0 && !test)
			printf("logged in: the tokens are in %s\n", u->oauth.token_file);
		fflush(stdout);
		_exit(rc);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			log_warn("waitpid");
			return 1;
		}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 1;
	if (test)
		return 0;
	/* Mail that waits for the dead token goes now. */
	if (access(cfg->gate_socket, F_OK) == 0) {
		char *rargv[] = { "resume", argv[2], NULL };

		(void)cmd_resume(2, rargv, cfg);
	}
	return 0;
}

int
cmd_auth(int argc, char **argv, struct weir_config *cfg)
{
	if (argc >= 2 && strcmp(argv[1], "login") == 0)
		return login_cmd(argc, argv, cfg, 0);
	if (argc >= 2 && strcmp(argv[1], "test") == 0)
		return login_cmd(argc, argv, cfg, 1);
	if (argc >= 2 && strcmp(argv[1], "status") == 0)
		return status_cmd(argc, argv, cfg);
	log_warnx("usage: weir [-c FILE] auth login UPSTREAM | auth test UPSTREAM | auth status "
	    "[UPSTREAM...]");
	return 2;
}
