/*
 * oauth.h: OAuth 2.0 tokens for an upstream's SASL XOAUTH2 and
 * OAUTHBEARER (weir.conf's oauth { } section): the token state, its
 * refresh (RFC 6749 section 6) by the deliverer, and the two logins of
 * `weir auth login`: the device authorization grant (RFC 8628) and the
 * authorization code grant with PKCE (RFC 7636) for a provider whose
 * device grant does not give the mail scope (Google's).
 *
 * Files, in the folder of token_file (the deliverer's, 0755):
 *
 *   token_file          0600, the deliverer's: the refresh token and the
 *                       access token (JSON, oauth.c says its keys)
 *   token_file.status   0644: what may be shown, no secret: when the
 *                       login and the last refresh were, the access
 *                       token's expiry, the last error, and whether a
 *                       login is needed (struct oauth_status); for weir
 *                       status, weir auth status, weir-send's notice and
 *                       weir-metrics, none of which may read token_file
 *   token_file.lock     0600: flock'ed around every refresh and every
 *                       write of the two files above
 *   *.tmp               a new version of either, renamed over it
 *
 * Every write is durable before it counts: the new version is written
 * to its .tmp, fsynced, renamed over the old one, and the folder
 * fsynced.  So a kill -9 at any instant leaves the old or the new
 * version whole, never a mix, and a rotated refresh token is on disk
 * before anything uses it (its predecessor stays valid until then at
 * providers that rotate: Microsoft's).
 *
 * Refresh: an access token is used while more than the larger of
 * refresh_margin and a tenth of its lifetime is left, so no AUTH goes
 * out with one about to expire (Exchange Online refuses a token in its
 * last 10 minutes).  Then one deliverer refreshes it under the lock
 * while the others wait for the lock and take the new one; a freshly
 * refreshed token is used even when its whole lifetime is below the
 * margin (there is none better).
 *
 * Keep-alive: a refresh token dies unused (90 days at Microsoft), and a
 * dead one (revoked, or a Google app's in testing, 7 days after the
 * login) is found only when it is used.  So weir-send has it used at
 * least every refresh_idle (a day) with no mail at all: it runs the
 * deliverer in its keep-alive mode (weir-remote -K: oauth_keepalive),
 * which refreshes, under the lock, when neither a refresh nor a login
 * has used it for refresh_idle, and otherwise does nothing.  A refusal
 * found that way raises the alarm a delivery's would.
 *
 * App-only flows (client_credentials, service_account: oauthapp.c):
 * no user and no refresh token; the application's credentials get a new
 * access token, under the same lock and with the same margin, when the
 * one in token_file (its refresh_token "") has less left; nothing to
 * keep alive.  `weir auth login` for them gets a token at once.
 *
 * One conversation with the provider per upstream at a time, and a
 * provider in trouble asked less and less: every request is made under
 * token_file.lock, and the status file keeps the failures in a row and
 * when the next request may go (next_try: BACKOFF_FIRST seconds after
 * the first failure, doubling up to BACKOFF_MAX, each with jitter: a
 * random half of it added to its other half).  Until then every
 * deliverer, in every process, gives up at once (OAUTH_TEMP, no
 * request); a success ends it.  A refresh token the provider refused
 * is noted (refused: its refresh_since) and not presented again until a
 * login brings another one.
 *
 * A rotation never loses the working login: before a refresh the space
 * the new token file needs is reserved (token_file.tmp given
 * TOKEN_FILE_MAX bytes); when it cannot be, no refresh is made (the old
 * refresh token stays valid and on disk).  A token that still could not
 * be saved raises the alarm at once: login_needed, with the reason.
 * The alarm ends when a token works: a refresh or a token of the app
 * flows that works, a login, or an AUTH the upstream accepted with the
 * token in token_file (oauth_token_worked).
 *
 * expires_in: absent (RFC 6749 only recommends it), an hour is taken
 * (OAUTH_LIFETIME_DEFAULT); above a day, a day (OAUTH_LIFETIME_MAX);
 * each with a warning (struct oauth_grant's note).
 *
 * Results: OAUTH_OK; OAUTH_TEMP: none for now, mail waits (the token
 * endpoint down, slow, answering 5xx or something that is not an
 * answer; local trouble: a file that cannot be read or written);
 * OAUTH_REFUSED: the provider refused the refresh token (invalid_grant:
 * it expired, was revoked, the password changed) or the client
 * (invalid_client and the like), or there is no token yet: the status
 * file then says a login is needed and what to run, and the caller
 * treats it as refused credentials (the gate suspends the upstream).
 *
 * No token, refresh token, device code or client secret is ever put in
 * a message, a log line or the status file: only the provider's error
 * code and its description's first line.  What lives in memory is wiped
 * where it is ours (libcurl and json-c keep copies of their own, in a
 * process that cannot dump core).
 *
 * oauth.c does the HTTPS (libcurl) and writes; oauthstatus.c is what the
 * readers of the status file link (json-c alone).
 *
 * Trusts: the provider only to answer as RFC 6749 says (every answer is
 * parsed strictly, every token checked to be printable ASCII); the files
 * only when they pass the same parse.  Config keys: the oauth section
 * (struct weir_oauth), username (for the login hint).
 */
#ifndef WEIR_OAUTH_H
#define WEIR_OAUTH_H

#include "lib/buf.h"
#include "mail/config.h"

#define OAUTH_TOKEN_MAX 16384	/* bytes of one token */
#define OAUTH_TEXT_MAX 512	/* an error's text in the status file */

enum oauth_result { OAUTH_OK, OAUTH_TEMP, OAUTH_REFUSED };

/* token_file.status: times are wall seconds, 0 for never. */
struct oauth_status {
	long long login_at;	/* the last login (weir auth login) */
	long long refresh_since; /* the refresh token in use was issued */
	long long refreshed_at;	/* the last refresh that worked */
	long long expires_at;	/* the access token's end */
	long long lifetime;	/* its lifetime as the provider gave it */
	long long error_at;	/* the last failure since the last success */
	char error[OAUTH_TEXT_MAX]; /* what it was (no secret) */
	int login_needed;	/* refused, or no token: weir auth login */
	long long failures;	/* failed requests in a row (the back-off) */
	long long next_try;	/* no request before (wall s; 0: any time) */
	long long refused;	/* the refresh token refused: its refresh_since (0: none) */
};

#define BACKOFF_FIRST 5		/* s after the first failure */
#define BACKOFF_MAX 600		/* s at most between two requests */
#define OAUTH_LIFETIME_DEFAULT 3600	/* expires_in absent */
#define OAUTH_LIFETIME_MAX 86400	/* expires_in above: capped */

/* For the deliverer: an access token for u with more than the margin
 * left, refreshed first when needed.  OAUTH_OK: the token in tok (wipe
 * it: secret_wipe), what was done in how; otherwise why in err. */
enum oauth_result oauth_access_token(const struct weir_upstream *u, struct buf *tok,
    struct buf *how, struct buf *err);

/* For the keep-alive (weir-remote -K): u's refresh token used, by a
 * refresh, when nothing has used it for refresh_idle; else nothing.
 * OAUTH_OK with what was done in how; otherwise as oauth_access_token. */
enum oauth_result oauth_keepalive(const struct weir_upstream *u, struct buf *how,
    struct buf *err);
/* weir auth test: a new access token now, whatever the margin and the
 * back-off (a refresh, or the app flow's grant), saved as a delivery's
 * would be.  OAUTH_OK with what was done in how; otherwise why in err. */
enum oauth_result oauth_test(const struct weir_upstream *u, struct buf *how, struct buf *err);

/* The upstream accepted an AUTH with tok: if token_file still holds it
 * and the status says a login is needed (or an error), the alarm ends
 * (under the lock).  1 it ended, 0 nothing to do, -1 the files could not
 * be read or written (why in err). */
int oauth_token_worked(const struct weir_upstream *u, const struct buf *tok, struct buf *err);

/* weir-remote -K's exit status, which weir-send reads. */
#define OAUTH_KA_OK		0	/* refreshed, or not due */
#define OAUTH_KA_TEMP		1	/* not now (the endpoint, local trouble): later */
#define OAUTH_KA_USAGE		2	/* bad usage, no such upstream with oauth */
#define OAUTH_KA_REFUSED	3	/* refused, or no token: a login is needed */

/* When st says the refresh token was last used: the last refresh that
 * worked or the login, whichever came last (0: never). */
long long oauth_last_use(const struct oauth_status *st);

/* The status file of o: 1 read; 0 there is none; -1 unreadable or
 * malformed (why in err). */
int oauth_status_load(const struct weir_oauth *o, struct oauth_status *st, struct buf *err);
/* token_file.status, malloc'ed. */
char *oauth_status_path(const struct weir_oauth *o);

/* ---- weir auth login: the device grant (RFC 8628) ---- */

struct oauth_device {
	struct buf device_code;	/* secret: wiped by oauth_device_free() */
	char user_code[64];
	char uri[512];		/* verification_uri (Google: verification_url) */
	char uri_complete[1024]; /* verification_uri_complete, or "" */
	long long expires_at;	/* wall seconds */
	long long interval;	/* seconds between polls (slow_down adds 5) */
};

/* Ask the device endpoint for a code: 0, or -1 with why in err. */
int oauth_device_start(const struct weir_upstream *u, struct oauth_device *d, struct buf *err);
/* Poll the token endpoint once.  OAUTH_OK: the user approved and the
 * tokens are saved (durably, with the status: login done); OAUTH_TEMP
 * with *wait 1: not yet (authorization_pending, or slow_down, which has
 * made d->interval longer): poll again after d->interval; OAUTH_TEMP
 * with *wait 0: the endpoint failed (why in err; polling again may
 * work); OAUTH_REFUSED: denied, expired or refused (why in err). */
enum oauth_result oauth_device_poll(const struct weir_upstream *u, struct oauth_device *d,
    int *wait, struct buf *err);
void oauth_device_free(struct oauth_device *d);

/* ---- weir auth login: the code grant with PKCE (RFC 7636) ---- */

struct oauth_code {
	char verifier[64];	/* secret: zeroed by oauth_code_free() */
	char state[40];
	char redirect[64];	/* http://127.0.0.1:PORT/: nothing listens there */
};

/* The URL for the user's browser into url: 0, or -1 with why in err. */
int oauth_code_start(const struct weir_upstream *u, struct oauth_code *c, struct buf *url,
    struct buf *err);
/* What the user pasted: the address the browser was sent to (with
 * code= and state=), or the code alone.  Exchanges the code for the
 * tokens and saves them: OAUTH_OK, or another with why in err. */
enum oauth_result oauth_code_finish(const struct weir_upstream *u, struct oauth_code *c,
    const char *pasted, struct buf *err);
void oauth_code_free(struct oauth_code *c);

/* ---- an endpoint's answer, read strictly (also for the tests) ---- */

struct json_object;

struct oauth_grant {
	struct buf access, refresh;	/* secret: oauth_grant_wipe() */
	long long expires_in;
	char error[64];			/* an OAuth error's code */
	char desc[256];			/* its description's first line */
	char note[128];			/* a token answer taken with a warning
					 * (expires_in absent or capped), or "" */
};

enum oauth_answer {
	OAUTH_A_TOKENS,		/* 200 with tokens (RFC 6749 5.1), in the grant */
	OAUTH_A_ERROR,		/* 400 or 401 with an OAuth error (5.2), in the grant */
	OAUTH_A_NONE		/* anything else: why in err */
};

/* The answer of url: its HTTP status and body.  A token answer needs an
 * access_token and a refresh_token (if any) of printable ASCII, at most
 * OAUTH_TOKEN_MAX bytes, token_type Bearer and expires_in (a number, or
 * a string of digits) above 0, or none (OAUTH_LIFETIME_DEFAULT taken;
 * above OAUTH_LIFETIME_MAX, that; g->note says so); other keys are left
 * alone.  With jout,
 * a 200's object is handed over unread instead (the device endpoint's:
 * json_object_put() it). */
enum oauth_answer oauth_answer_read(const char *url, long status, const char *body,
    size_t len, struct oauth_grant *g, struct json_object **jout, struct buf *err);
void oauth_grant_wipe(struct oauth_grant *g);

/* ---- shared with the readers ---- */

/* The margin below which an access token of this lifetime is refreshed:
 * the larger of refresh_margin and a tenth of the lifetime. */
long long oauth_margin(const struct weir_oauth *o, long long lifetime);

/* "2026-11-25 14:45:53 +0000" in local time. */
#define OAUTH_TIME_MAX 40
void oauth_time(char *out, size_t max, long long t);

/* Between oauth.c and oauthstatus.c (the readers' part, without
 * HTTPS).  The file at path into b: 1 read; 0 there is none; -1 it
 * cannot be read, is not a regular file, is over OAUTH_FILE_MAX, or
 * (private) is open to group or others: why in err. */
#define OAUTH_FILE_MAX (64 * 1024)
int oauth_read_file(const char *path, int private, struct buf *b, struct buf *err);
/* s[0..n)'s first line, printable ASCII (any other byte '?'), cut to
 * fit out: what may go in a log line or the status file. */
void oauth_one_line(char *out, size_t max, const char *s, size_t n);

/* Between oauth.c and oauthapp.c: the token request of an app-only flow
 * (client_credentials, service_account) appended to form (reserved; the
 * caller wipes it): 0, or -1 with why in err (a credential file that
 * cannot be read or used). */
int oauth_app_form(const struct weir_upstream *u, struct buf *form, struct buf *err);

#endif
