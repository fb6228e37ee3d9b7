/*
 * oauth.c: OAuth 2.0 tokens; see oauth.h.  HTTPS goes through
 * mail/https.c; answers and files are read with lib/jsonparse.h,
 * strictly (one JSON object, nothing after it, no NUL, each key of the
 * type it must have); files are written with lib/json.h's writer into
 * buffers that are wiped.
 *
 * token_file: {"version":1,"refresh_token":S,"access_token":S,
 * "expires_at":N,"lifetime":N,"refresh_since":N,"login_at":N} (an
 * access_token of "" is none).  token_file.status: {"version":1,
 * "login_at":N,"refresh_since":N,"refreshed_at":N,"expires_at":N,
 * "lifetime":N,"error_at":N,"error":S,"login_needed":B}.  Both: every
 * key required, no other key.
 *
 * Trusts: the provider's answers only after that parse.  Config keys:
 * the oauth section, username.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/json.h"
#include "lib/jsonparse.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/https.h"
#include "mail/jwt.h"
#include "mail/oauth.h"
#include "mail/secretfile.h"

#define DEVICE_GRANT "urn:ietf:params:oauth:grant-type:device_code"

/* A token as it may travel: 1 to OAUTH_TOKEN_MAX bytes of printable
 * ASCII (no space: RFC 6750's b64token is narrower still). */
static int
token_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > OAUTH_TOKEN_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}

static char *
sibling(const struct weir_oauth *o, const char *suffix)
{
	return xasprintf("%s%s", o->token_file, suffix);
}

/* ---- files ---- */

/* The bytes the token file can take at most: two tokens, each byte
 * escaped at worst to two, and the rest. */
#define TOKEN_FILE_MAX (4 * OAUTH_TOKEN_MAX + 1024)

/* PATH.tmp, made anew (mode) and, with size, given that many bytes on
 * the disk (posix_fallocate): so that what is written there later
 * cannot fail for want of space.  Its descriptor, or -1 with err. */
static int
tmp_open(const char *path, mode_t mode, size_t size, struct buf *err)
{
	char *tmp = xasprintf("%s.tmp", path);
	int fd, r = 0;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 || fchmod(fd, mode) < 0 ||
	    (size && (r = posix_fallocate(fd, 0, (off_t)size)) != 0)) {
		buf_printf(err, "%s: %s", tmp, strerror(r ? r : errno));
		if (fd >= 0) {
			(void)close(fd);
			(void)unlink(tmp);
		}
		fd = -1;
	}
	free(tmp);
	return fd;
}

/* Give back what tmp_open() made, unused. */
static void
tmp_drop(const char *path, int fd)
{
	char *tmp = xasprintf("%s.tmp", path);

	(void)close(fd);
	(void)unlink(tmp);
	free(tmp);
}

/* data as the new version of path, durably, through fd (tmp_open's,
 * closed here): written, cut to its length, fsynced, renamed over path,
 * the folder fsynced.  0, or -1 with err. */
static int
tmp_commit(int fd, const char *path, const char *data, size_t len, struct buf *err)
{
	char *tmp = xasprintf("%s.tmp", path), *dir = xstrdup(path), *slash;
	int rc = -1;

	if (full_write(fd, data, len) < 0 || ftruncate(fd, (off_t)len) < 0 || fsync(fd) < 0) {
		buf_printf(err, "%s: %s", tmp, strerror(errno));
		(void)close(fd);
		(void)unlink(tmp);
		goto out;
	}
	if (close(fd) < 0) {
		buf_printf(err, "%s: close: %s", tmp, strerror(errno));
		(void)unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) < 0) {
		buf_printf(err, "rename %s to %s: %s", tmp, path, strerror(errno));
		(void)unlink(tmp);
		goto out;
	}
	slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	if (fsync_dir(AT_FDCWD, slash ? dir : ".") < 0) {
		buf_printf(err, "fsync %s: %s", slash ? dir : ".", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	free(dir);
	return rc;
}

/* data as the new version of path (mode), durably. */
static int
write_durably(const char *path, mode_t mode, const char *data, size_t len, struct buf *err)
{
	int fd = tmp_open(path, mode, 0, err);

	return fd < 0 ? -1 : tmp_commit(fd, path, data, len, err);
}

/* The token file's contents. */
struct tokens {
	struct buf refresh, access;
	long long expires_at, lifetime, refresh_since, login_at;
};

static void
tokens_wipe(struct tokens *t)
{
	secret_wipe(&t->refresh);
	secret_wipe(&t->access);
	memset(t, 0, sizeof *t);
}

enum load { L_OK, L_NONE, L_BAD, L_TROUBLE };

/* token_file: L_OK (in t), L_NONE (no file), L_BAD (malformed: only a
 * login mends it) or L_TROUBLE (cannot be read now); err says why. */
static enum load
tokens_load(const struct weir_oauth *o, struct tokens *t, struct buf *err)
{
	static const char *const keys[] = { "version", "refresh_token", "access_token",
	    "expires_at", "lifetime", "refresh_since", "login_at", NULL };
	struct json_object *j = NULL;
	struct buf b = BUF_INIT, why = BUF_INIT;
	const char *rt = NULL, *at = NULL;
	long long v = 0;
	enum load l = L_BAD;
	int r;

	memset(t, 0, sizeof *t);
	r = oauth_read_file(o->token_file, 1, &b, err);
	if (r <= 0) {
		secret_wipe(&b);
		return r == 0 ? L_NONE : L_TROUBLE;
	}
	if ((j = json_parse_object(b.s, b.len, OAUTH_FILE_MAX, &why)) == NULL)
		goto out;
	buf_adds(&why, "a key missing, of the wrong type, or unknown");
	rt = jp_str(jp_get(j, "refresh_token"));
	at = jp_str(jp_get(j, "access_token"));
	if (!jp_only_keys(j, keys) || jp_u53(jp_get(j, "version"), &v) < 0 || v != 1 ||
	    rt == NULL || (!(OAUTH_APP_ONLY(o) && *rt == '\0') && !token_ok(rt, strlen(rt))) ||
	    at == NULL || (*at != '\0' && !token_ok(at, strlen(at))) ||
	    jp_u53(jp_get(j, "expires_at"), &t->expires_at) < 0 ||
	    jp_u53(jp_get(j, "lifetime"), &t->lifetime) < 0 ||
	    jp_u53(jp_get(j, "refresh_since"), &t->refresh_since) < 0 ||
	    jp_u53(jp_get(j, "login_at"), &t->login_at) < 0)
		goto out;
	buf_reserve(&t->refresh, OAUTH_TOKEN_MAX + 1);
	buf_reserve(&t->access, OAUTH_TOKEN_MAX + 1);
	buf_adds(&t->refresh, rt);
	buf_adds(&t->access, at);
	l = L_OK;
out:
	if (l == L_BAD)
		buf_printf(err, "%s: not a token file of weir's: %s", o->token_file, why.s);
	jp_wipe(j, "refresh_token");
	jp_wipe(j, "access_token");
	json_object_put(j);
	secret_wipe(&b);
	buf_free(&why);
	return l;
}

/* t as token_file, durably; through fd (tmp_open's, with the space
 * reserved) if not -1. */
static int
tokens_save(const struct weir_oauth *o, const struct tokens *t, int fd, struct buf *err)
{
	struct buf b = BUF_INIT;
	int rc;

	buf_reserve(&b, 2 * OAUTH_TOKEN_MAX + 512);	/* no realloc: wiped once */
	buf_adds(&b, "{\"version\":1,\"refresh_token\":");
	json_str(&b, t->refresh.s ? t->refresh.s : "", t->refresh.len);
	buf_adds(&b, ",\"access_token\":");
	json_str(&b, t->access.s ? t->access.s : "", t->access.len);
	buf_printf(&b, ",\"expires_at\":%lld,\"lifetime\":%lld,\"refresh_since\":%lld,"
	    "\"login_at\":%lld}\n", t->expires_at, t->lifetime, t->refresh_since, t->login_at);
	if (fd < 0)
		fd = tmp_open(o->token_file, 0600, 0, err);
	rc = fd < 0 ? -1 : tmp_commit(fd, o->token_file, b.s, b.len, err);
	secret_wipe(&b);
	return rc;
}

static int
status_save(const struct weir_oauth *o, const struct oauth_status *st, struct buf *err)
{
	struct buf b = BUF_INIT;
	char *path = oauth_status_path(o);
	int rc;

	buf_printf(&b, "{\"version\":2,\"login_at\":%lld,\"refresh_since\":%lld,"
	    "\"refreshed_at\":%lld,\"expires_at\":%lld,\"lifetime\":%lld,\"error_at\":%lld,"
	    "\"error\":", st->login_at, st->refresh_since, st->refreshed_at, st->expires_at,
	    st->lifetime, st->error_at);
	json_cstr(&b, st->error);
	buf_printf(&b, ",\"login_needed\":%s,\"failures\":%lld,\"next_try\":%lld,"
	    "\"refused\":%lld}\n", st->login_needed ? "true" : "false", st->failures,
	    st->next_try, st->refused);
	rc = write_durably(path, 0644, b.s, b.len, err);
	buf_free(&b);
	free(path);
	return rc;
}

/* What happened, for the status file. */
enum st_kind {
	ST_GOT,		/* tokens t obtained (by a login: login) */
	ST_WORKED,	/* an AUTH with t's access token was accepted */
	ST_TEMP,	/* a failure that may pass: the back-off */
	ST_REFUSED,	/* the provider refused: a login is needed; a refresh
			 * token is not presented again, app credentials are
			 * tried again after the back-off */
	ST_ALARM,	/* a login may be needed (a token not saved, none, a
			 * damaged file): said, nothing held back */
};

/* The wait after the n-th failure in a row: BACKOFF_FIRST doubled n - 1
 * times, at most BACKOFF_MAX, half of it random (jitter). */
static long long
backoff(long long n)
{
	long long d = BACKOFF_FIRST;
	unsigned r = 0;

	while (--n > 0 && d < BACKOFF_MAX)
		d *= 2;
	if (d > BACKOFF_MAX)
		d = BACKOFF_MAX;
	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
		r = (unsigned)getpid() ^ (unsigned)time(NULL);
	return d - d / 2 + (long long)(r % (unsigned)(d / 2 + 1));
}

/* The status after k (why: what failed, NULL for ST_GOT and ST_WORKED).
 * A status that cannot be written is logged: it is a view, the tokens
 * are what count. */
static void
status_update(const struct weir_oauth *o, const struct tokens *t, enum st_kind k, int login,
    const char *why, long long now)
{
	struct oauth_status st;
	struct buf err = BUF_INIT;

	if (oauth_status_load(o, &st, &err) < 0)
		memset(&st, 0, sizeof st);	/* rewritten whole below */
	buf_reset(&err);
	if (why) {
		st.error_at = now;
		oauth_one_line(st.error, sizeof st.error, why, strlen(why));
		if (k == ST_REFUSED || k == ST_ALARM)
			st.login_needed = 1;
		if (k == ST_REFUSED && !OAUTH_APP_ONLY(o))
			st.refused = t->refresh_since;
		if (k == ST_TEMP || (k == ST_REFUSED && OAUTH_APP_ONLY(o))) {
			st.failures++;
			st.next_try = now + backoff(st.failures);
		}
	} else {
		st.error_at = st.failures = st.next_try = st.refused = 0;
		st.error[0] = '\0';
		st.login_needed = 0;
		st.expires_at = t->expires_at;
		st.lifetime = t->lifetime;
		st.refresh_since = t->refresh_since;
		st.login_at = t->login_at;
		if (!login && k == ST_GOT)
			st.refreshed_at = now;
	}
	if (status_save(o, &st, &err) < 0)
		log_warnx("OAuth status: %s", err.s);
	buf_free(&err);
}

static int
folder_exists(const struct weir_oauth *o)
{
	char *dir = xstrdup(o->token_file), *slash = strrchr(dir, '/');
	struct stat st;
	int yes;

	if (slash)
		*slash = '\0';
	yes = slash && slash != dir ? stat(dir, &st) == 0 : 1;
	free(dir);
	return yes;
}

/* token_file.lock, taken (blocking: whoever holds it is doing one
 * bounded HTTPS exchange and a write): its descriptor, or -1 with err. */
static int
lock_take(const struct weir_oauth *o, struct buf *err)
{
	char *path = sibling(o, ".lock");
	int fd, r;

	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		buf_printf(err, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
		;
	if (r < 0) {
		buf_printf(err, "%s: flock: %s", path, strerror(errno));
		(void)close(fd);
		fd = -1;
	}
	free(path);
	return fd;
}

/* ---- the token endpoint ---- */

void
oauth_grant_wipe(struct oauth_grant *g)
{
	secret_wipe(&g->access);
	secret_wipe(&g->refresh);
	memset(g, 0, sizeof *g);
}

/* key's seconds in o: a whole number, or (Microsoft's v1 endpoint) a
 * string of at most 15 digits.  1 (*v), 0 absent, -1 anything else (a
 * null too). */
static int
seconds(struct json_object *o, const char *key, long long *v)
{
	struct json_object *x;
	const char *s;

	if (!json_object_object_get_ex(o, key, &x))
		return 0;
	if (jp_u53(x, v) == 0)
		return 1;
	s = jp_str(x);
	if (s == NULL || *s == '\0' || strlen(s) > 15 || s[strspn(s, "0123456789")] != '\0')
		return -1;
	*v = strtoll(s, NULL, 10);
	return 1;
}

/* An OAuth error answer (RFC 6749 5.2) into g: 0, or -1 if it is none. */
static int
error_parse(struct json_object *j, struct oauth_grant *g)
{
	struct json_object *d = jp_get(j, "error_description");
	const char *e = jp_str(jp_get(j, "error")), *ds;
	size_t i;

	/* RFC 6749 5.2: the code is printable ASCII (and the usual ones are
	 * words and underscores). */
	if (e == NULL || *e == '\0' || strlen(e) >= sizeof g->error)
		return -1;
	for (i = 0; e[i]; i++)
		if ((unsigned char)e[i] < 0x20 || (unsigned char)e[i] > 0x7e)
			return -1;
	oauth_one_line(g->error, sizeof g->error, e, strlen(e));
	/* The description is optional; one that is not a string makes the
	 * answer none, one with a NUL in it is left out. */
	if (d != NULL && !json_object_is_type(d, json_type_string))
		return -1;
	if ((ds = jp_str(d)) != NULL)
		oauth_one_line(g->desc, sizeof g->desc, ds, strlen(ds));
	return 0;
}

/* A successful token answer (RFC 6749 5.1) into g: 0, or -1 with why. */
static int
tokens_parse(struct json_object *j, struct oauth_grant *g, const char **why)
{
	struct json_object *r = jp_get(j, "refresh_token");
	const char *at = jp_str(jp_get(j, "access_token")), *rt = jp_str(r);
	const char *tt = jp_str(jp_get(j, "token_type"));

	if (at == NULL || !token_ok(at, strlen(at))) {
		*why = "no access_token, or one that is not printable ASCII";
		return -1;
	}
	if (tt == NULL || strcasecmp(tt, "Bearer") != 0) {
		*why = "token_type is not Bearer";
		return -1;
	}
	switch (seconds(j, "expires_in", &g->expires_in)) {
	case 0:		/* RFC 6749 5.1 only recommends it */
		g->expires_in = OAUTH_LIFETIME_DEFAULT;
		snprintf(g->note, sizeof g->note, "the answer has no expires_in: taken as %d s",
		    OAUTH_LIFETIME_DEFAULT);
		break;
	case 1:
		if (g->expires_in == 0) {
			*why = "expires_in is 0";
			return -1;
		}
		if (g->expires_in > OAUTH_LIFETIME_MAX) {
			snprintf(g->note, sizeof g->note, "expires_in %lld is absurd: taken as %d s",
			    g->expires_in, OAUTH_LIFETIME_MAX);
			g->expires_in = OAUTH_LIFETIME_MAX;
		}
		break;
	default:
		*why = "expires_in is not a number of seconds";
		return -1;
	}
	if (r != NULL && (rt == NULL || !token_ok(rt, strlen(rt)))) {
		*why = "a refresh_token that is not printable ASCII";
		return -1;
	}
	buf_reserve(&g->access, OAUTH_TOKEN_MAX + 1);
	buf_reserve(&g->refresh, OAUTH_TOKEN_MAX + 1);
	buf_adds(&g->access, at);
	if (rt != NULL)
		buf_adds(&g->refresh, rt);
	return 0;
}

/* Add client_id, and client_secret when the client has one, to form. */
static int
add_client(const struct weir_oauth *o, struct buf *form, struct buf *err)
{
	struct buf secret = BUF_INIT;

	https_form_add(form, "client_id", o->client_id, strlen(o->client_id));
	if (o->client_secret_file == NULL)
		return 0;
	if (secretfile_read("client_secret_file", o->client_secret_file, &secret, err) < 0)
		return -1;
	https_form_add(form, "client_secret", secret.s, secret.len);
	secret_wipe(&secret);
	return 0;
}

enum oauth_answer
oauth_answer_read(const char *url, long status, const char *body, size_t len,
    struct oauth_grant *g, struct json_object **jout, struct buf *err)
{
	struct json_object *j = NULL;
	struct buf jwhy = BUF_INIT;
	const char *why = NULL;
	enum oauth_answer a = OAUTH_A_NONE;

	memset(g, 0, sizeof *g);
	if (status == 200 || status == 400 || status == 401) {
		j = json_parse_object(body ? body : "", len, HTTPS_BODY_MAX, &jwhy);
		if (j == NULL) {
			buf_printf(err, "%s answered HTTP %ld, not with JSON: %s", url, status,
			    jwhy.s);
			goto out;
		}
	}
	if (status == 200 && jout) {
		a = OAUTH_A_TOKENS;	/* the caller reads j */
	} else if (status == 200) {
		if (tokens_parse(j, g, &why) < 0)
			buf_printf(err, "%s answered HTTP 200 but %s", url, why);
		else
			a = OAUTH_A_TOKENS;
	} else if (status == 400 || status == 401) {
		if (error_parse(j, g) < 0)
			buf_printf(err, "%s answered HTTP %ld without an OAuth error", url, status);
		else
			a = OAUTH_A_ERROR;
	} else {
		buf_printf(err, "%s answered HTTP %ld", url, status);
	}
out:
	if (jout && a == OAUTH_A_TOKENS) {
		*jout = j;
	} else {
		jp_wipe(j, "access_token");
		jp_wipe(j, "refresh_token");
		jp_wipe(j, "device_code");
		json_object_put(j);
	}
	buf_free(&jwhy);
	return a;
}

/* POST form (wiped here) to url and read the answer (oauth_answer_read;
 * no answer at all is OAUTH_A_NONE too, why in err). */
static enum oauth_answer
post(const struct weir_oauth *o, const char *url, struct buf *form, struct oauth_grant *g,
    struct json_object **jout, struct buf *err)
{
	struct https_post p = { url, o->ca_file, o->timeout, form->s, form->len, o->proxy, NULL };
	struct buf body = BUF_INIT, pauth = BUF_INIT;
	enum oauth_answer a = OAUTH_A_NONE;
	long status = 0;

	memset(g, 0, sizeof *g);
	if (o->proxy_auth_file) {
		if (secretfile_read("proxy_auth_file", o->proxy_auth_file, &pauth, err) < 0)
			goto out;
		p.proxy_auth = pauth.s;
	}
	if (https_post(&p, &status, &body, err) == 0)
		a = oauth_answer_read(url, status, body.s, body.len, g, jout, err);
out:
	secret_wipe(&pauth);
	secret_wipe(&body);
	secret_wipe(form);
	return a;
}

/* An error that says "later", not "no". */
static int
error_temporary(const struct oauth_grant *g)
{
	return strcmp(g->error, "temporarily_unavailable") == 0 ||
	    strcmp(g->error, "server_error") == 0;
}

/* "invalid_grant: AADSTS70008: ..." */
static void
error_text(const struct oauth_grant *g, struct buf *out)
{
	buf_printf(out, "%s%s%s", g->error, g->desc[0] ? ": " : "", g->desc);
}

/* ---- the deliverer's refresh ---- */

static int
usable(const struct weir_oauth *o, const struct tokens *t, long long now)
{
	return t->access.len > 0 && t->expires_at - now > oauth_margin(o, t->lifetime);
}

static void
say_cached(const struct tokens *t, long long now, struct buf *how, const char *extra)
{
	char when[OAUTH_TIME_MAX], left[64];

	oauth_time(when, sizeof when, t->expires_at);
	duration_format(left, sizeof left, t->expires_at - now);
	buf_printf(how, "access token%s, expires %s (in %s)", extra, when, left);
}

/* 1 if the back-off in st holds requests back at now: why in err. */
static int
held_back(const struct oauth_status *st, long long now, struct buf *err)
{
	char when[OAUTH_TIME_MAX], left[64];

	if (st->next_try <= now)
		return 0;
	oauth_time(when, sizeof when, st->next_try);
	duration_format(left, sizeof left, st->next_try - now);
	buf_printf(err, "OAuth: no request to the provider before %s (in %s): it failed %lld "
	    "time%s in a row, the last: %s", when, left, st->failures, st->failures == 1 ? "" :
	    "s", st->error);
	return 1;
}

/* The request for a new access token into form: a refresh with t's
 * refresh token, or the app flow's grant.  0, or -1 with why in err. */
static int
request_form(const struct weir_upstream *u, const struct tokens *t, struct buf *form,
    struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;

	buf_reserve(form, 3 * OAUTH_TOKEN_MAX);
	if (OAUTH_APP_ONLY(o))
		return oauth_app_form(u, form, err);
	https_form_add(form, "grant_type", "refresh_token", 13);
	https_form_add(form, "refresh_token", t->refresh.s, t->refresh.len);
	https_form_add(form, "scope", o->scope, strlen(o->scope));
	return add_client(o, form, err);
}

/* Under the lock: a new access token into t (saved), from the provider.
 * force (weir auth test): whatever the back-off.  OAUTH_OK, or another
 * result with why in err. */
static enum oauth_result
fetch(const struct weir_upstream *u, struct tokens *t, int force, struct buf *how,
    struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	struct buf form = BUF_INIT, why = BUF_INIT;
	struct oauth_status st;
	struct oauth_grant g;
	long long now = (long long)time(NULL);
	char when[OAUTH_TIME_MAX], life[64];
	enum oauth_result res = OAUTH_TEMP;
	int rotated, fd = -1, app = OAUTH_APP_ONLY(o);

	memset(&g, 0, sizeof g);
	if (oauth_status_load(o, &st, &why) < 0)
		memset(&st, 0, sizeof st);
	buf_reset(&why);
	if (!force && held_back(&st, now, err))
		return OAUTH_TEMP;
	if (!app && st.refused && st.refused == t->refresh_since) {
		oauth_time(when, sizeof when, st.error_at);
		buf_printf(err, "OAuth: the provider refused this refresh token at %s: not "
		    "presented again; mail waits: run weir auth login %s", when, u->name);
		return OAUTH_REFUSED;
	}
	/* The room for a rotated refresh token, before it exists: without
	 * it, no refresh (the one on disk stays valid). */
	if (!app && (fd = tmp_open(o->token_file, 0600, TOKEN_FILE_MAX, &why)) < 0) {
		buf_printf(err, "OAuth: no room to save a new refresh token (%s): not refreshing, "
		    "the login is kept", why.s);
		log_warnx("upstream %s: %s", u->name, err->s);
		status_update(o, t, ST_TEMP, 0, err->s, now);
		goto out;
	}
	if (request_form(u, t, &form, &why) < 0) {
		secret_wipe(&form);
		buf_printf(err, "OAuth: %s", why.s);
		status_update(o, t, ST_TEMP, 0, err->s, now);
		goto out;
	}
	switch (post(o, o->token_endpoint, &form, &g, NULL, &why)) {
	case OAUTH_A_NONE:
		buf_printf(err, "OAuth: the token endpoint: %s", why.s);
		status_update(o, t, ST_TEMP, 0, err->s, now);
		goto out;
	case OAUTH_A_ERROR:
		buf_printf(err, "OAuth: the provider refused %s: ", app ? "the application's "
		    "credentials" : "the refresh");
		error_text(&g, err);
		if (error_temporary(&g)) {
			status_update(o, t, ST_TEMP, 0, err->s, now);
			goto out;
		}
		if (app)
			buf_printf(err, "; mail waits: check client_id, the credential files, "
			    "scope and the application's rights, then run weir auth login %s",
			    u->name);
		else
			buf_printf(err, "; mail waits: run weir auth login %s%s", u->name,
			    strcmp(g.error, "invalid_grant") == 0 ? "" :
			    " (after checking client_id, client_secret_file and scope)");
		status_update(o, t, ST_REFUSED, 0, err->s, now);
		res = OAUTH_REFUSED;
		goto out;
	case OAUTH_A_TOKENS:
		break;
	}
	if (g.note[0])
		log_warnx("upstream %s: OAuth: %s", u->name, g.note);
	rotated = !app && g.refresh.len > 0;
	buf_reset(&t->access);
	buf_add(&t->access, g.access.s, g.access.len);
	t->expires_at = now + g.expires_in;
	t->lifetime = g.expires_in;
	if (rotated) {
		buf_reset(&t->refresh);
		buf_add(&t->refresh, g.refresh.s, g.refresh.len);
		t->refresh_since = now;
	}
	if (app && t->login_at == 0)
		t->login_at = t->refresh_since = now;	/* its first token */
	/* Durable before use; if it cannot be, the access token still
	 * serves this delivery, and the old refresh token stays on disk:
	 * which the provider may refuse once the new one is used. */
	buf_reset(&why);
	if (tokens_save(o, t, fd, &why) < 0) {
		fd = -1;
		if (rotated) {
			struct buf alarm = BUF_INIT;

			buf_printf(&alarm, "OAuth: the new refresh token could not be saved (%s); "
			    "the provider may refuse the old one: run weir auth login %s if the next "
			    "refresh is refused", why.s, u->name);
			log_warnx("upstream %s: %s", u->name, alarm.s);
			status_update(o, t, ST_ALARM, 0, alarm.s, now);
			buf_free(&alarm);
		} else {
			log_warnx("upstream %s: OAuth: the new access token could not be saved: %s",
			    u->name, why.s);
			status_update(o, t, ST_GOT, 0, NULL, now);
		}
	} else {
		fd = -1;
		status_update(o, t, ST_GOT, 0, NULL, now);
	}
	oauth_time(when, sizeof when, t->expires_at);
	duration_format(life, sizeof life, g.expires_in);
	if (app)
		buf_printf(how, "a new access token from the token endpoint (%s): for %s, "
		    "expires %s", o->flow == OAUTH_FLOW_SERVICE ? "service account" :
		    o->certificate_file ? "client credentials, certificate" :
		    "client credentials, secret", life, when);
	else
		buf_printf(how, "refreshed at the token endpoint: a new access token for %s, "
		    "expires %s; the refresh token %s", life, when, rotated ? "rotated (saved)" :
		    "kept");
	if (g.note[0])
		buf_printf(how, " (%s)", g.note);
	log_info("upstream %s: OAuth access token %s: valid %s, until %s%s", u->name,
	    app ? "obtained" : "refreshed", life, when, rotated ? "; refresh token rotated" : "");
	if (g.expires_in <= oauth_margin(o, g.expires_in))
		log_debug("upstream %s: OAuth: the provider's access tokens live %s, within "
		    "the refresh margin: each delivery refreshes", u->name, life);
	res = OAUTH_OK;
out:
	if (fd >= 0)
		tmp_drop(o->token_file, fd);
	oauth_grant_wipe(&g);
	buf_free(&why);
	return res;
}

/* After a load without the lock found l (t wiped): the tokens into t
 * under token_file.lock (its descriptor into *lk: the caller closes
 * it).  One conversation at a time: whoever had the lock may have had
 * one.  OAUTH_OK; OAUTH_TEMP: the file or the lock cannot be had now;
 * OAUTH_REFUSED: no token, or a file only a login mends (the status file
 * says so); why in err.  An app flow starts from nothing instead. */
static enum oauth_result
load_locked(const struct weir_upstream *u, enum load l, struct tokens *t, int *lk,
    struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	int app = OAUTH_APP_ONLY(o);

	*lk = -1;
	if (l == L_TROUBLE)
		return OAUTH_TEMP;
	buf_reset(err);
	/* With no token at all there is nothing to refresh (and perhaps no
	 * folder yet to lock in). */
	if ((l != L_NONE || app) && (*lk = lock_take(o, err)) < 0) {
		if (app)
			buf_printf(err, " (run weir auth login %s: it makes the folder)", u->name);
		return OAUTH_TEMP;
	}
	if (l != L_NONE || app)
		l = tokens_load(o, t, err);
	if (app && (l == L_NONE || l == L_BAD)) {
		if (l == L_BAD)	/* nothing in it a new token does not replace */
			log_warnx("upstream %s: %s: a new token replaces it", u->name, err->s);
		tokens_wipe(t);
		buf_reset(err);
		return OAUTH_OK;
	}
	switch (l) {
	case L_TROUBLE:
		return OAUTH_TEMP;
	case L_NONE:
	case L_BAD:
		if (l == L_NONE)
			buf_printf(err, "OAuth: no token yet (%s)", o->token_file);
		buf_printf(err, "; mail waits: run weir auth login %s", u->name);
		if (l == L_BAD || folder_exists(o))
			status_update(o, t, ST_ALARM, 0, err->s, (long long)time(NULL));
		return OAUTH_REFUSED;
	case L_OK:
		break;
	}
	return OAUTH_OK;
}

enum oauth_result
oauth_access_token(const struct weir_upstream *u, struct buf *tok, struct buf *how,
    struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	struct oauth_status st;
	struct tokens t;
	long long now = (long long)time(NULL);
	enum oauth_result res = OAUTH_TEMP;
	enum load l;
	int lk = -1;

	l = tokens_load(o, &t, err);
	if (l == L_OK && usable(o, &t, now)) {
		say_cached(&t, now, how, " from the token file");
		goto ok;
	}
	tokens_wipe(&t);
	/* Held back: no waiting in line for the lock either. */
	if (oauth_status_load(o, &st, err) == 1 && held_back(&st, now, err))
		goto out;
	buf_reset(err);
	if ((res = load_locked(u, l, &t, &lk, err)) != OAUTH_OK)
		goto out;
	now = (long long)time(NULL);
	if (usable(o, &t, now)) {
		say_cached(&t, now, how, " refreshed meanwhile by another delivery");
		goto ok;
	}
	if ((res = fetch(u, &t, 0, how, err)) != OAUTH_OK)
		goto out;
ok:
	buf_reset(tok);
	buf_reserve(tok, OAUTH_TOKEN_MAX + 1);
	buf_add(tok, t.access.s, t.access.len);
	res = OAUTH_OK;
out:
	tokens_wipe(&t);
	if (lk >= 0)
		(void)close(lk);	/* the lock goes with it */
	return res;
}

enum oauth_result
oauth_test(const struct weir_upstream *u, struct buf *how, struct buf *err)
{
	struct tokens t;
	enum oauth_result res;
	enum load l;
	int lk = -1;

	l = tokens_load(&u->oauth, &t, err);
	tokens_wipe(&t);
	if ((res = load_locked(u, l, &t, &lk, err)) == OAUTH_OK)
		res = fetch(u, &t, 1, how, err);
	tokens_wipe(&t);
	if (lk >= 0)
		(void)close(lk);
	return res;
}

int
oauth_token_worked(const struct weir_upstream *u, const struct buf *tok, struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	struct oauth_status st;
	struct tokens t;
	int lk, rc = 0;

	if ((lk = lock_take(o, err)) < 0)
		return -1;
	if (tokens_load(o, &t, err) != L_OK) {
		rc = -1;
		goto out;
	}
	/* Only the token the file holds proves the file good. */
	if (t.access.len != tok->len || memcmp(t.access.s, tok->s, tok->len) != 0)
		goto out;
	if (oauth_status_load(o, &st, err) < 0) {
		buf_reset(err);
		memset(&st, 0, sizeof st);
		st.login_needed = 1;	/* unreadable: written anew */
	}
	if (!st.login_needed && !st.error_at)
		goto out;
	status_update(o, &t, ST_WORKED, 0, NULL, (long long)time(NULL));
	log_info("upstream %s: OAuth: the upstream accepted the token in %s: the alarm is "
	    "over (it said: %s)", u->name, o->token_file, st.error);
	rc = 1;
out:
	tokens_wipe(&t);
	(void)close(lk);
	return rc;
}

enum oauth_result
oauth_keepalive(const struct weir_upstream *u, struct buf *how, struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	struct oauth_status st;
	struct buf why = BUF_INIT;
	struct tokens t;
	char ago[64], idle[64];
	long long now, last;
	enum oauth_result res;
	enum load l;
	int lk = -1;

	if (OAUTH_APP_ONLY(o)) {
		buf_adds(how, "nothing to keep alive: the flow has no refresh token");
		return OAUTH_OK;
	}
	l = tokens_load(o, &t, err);
	tokens_wipe(&t);
	if ((res = load_locked(u, l, &t, &lk, err)) != OAUTH_OK)
		goto out;
	/* The last use: the status file's (it has the last refresh of a
	 * provider that does not rotate), or the token file's own times
	 * (a status that could not be written is no reason to wait). */
	if (oauth_status_load(o, &st, &why) < 0)
		memset(&st, 0, sizeof st);
	last = oauth_last_use(&st);
	if (t.refresh_since > last)
		last = t.refresh_since;
	if (t.login_at > last)
		last = t.login_at;
	now = (long long)time(NULL);
	duration_format(ago, sizeof ago, now - last);
	duration_format(idle, sizeof idle, o->refresh_idle);
	if (now - last < o->refresh_idle) {
		buf_printf(how, "not due: the refresh token was used %s ago (refresh_idle %s)", ago,
		    idle);
		goto out;
	}
	buf_printf(how, "the refresh token unused for %s (refresh_idle %s): ", ago, idle);
	res = fetch(u, &t, 0, how, err);
out:
	tokens_wipe(&t);
	buf_free(&why);
	if (lk >= 0)
		(void)close(lk);	/* the lock goes with it */
	return res;
}

/* ---- logins ---- */

/* After a login: g's tokens saved, under the lock, with the status. */
static enum oauth_result
login_save(const struct weir_oauth *o, const struct oauth_grant *g, long long t0,
    struct buf *err)
{
	struct tokens t;
	int lk;
	enum oauth_result res = OAUTH_TEMP;

	memset(&t, 0, sizeof t);
	if (g->refresh.len == 0) {
		buf_printf(err, "the provider gave no refresh token (does scope ask for "
		    "offline access, as Microsoft's offline_access?)");
		return OAUTH_REFUSED;
	}
	buf_reserve(&t.refresh, OAUTH_TOKEN_MAX + 1);
	buf_reserve(&t.access, OAUTH_TOKEN_MAX + 1);
	buf_add(&t.refresh, g->refresh.s, g->refresh.len);
	buf_add(&t.access, g->access.s, g->access.len);
	t.expires_at = t0 + g->expires_in;
	t.lifetime = g->expires_in;
	t.refresh_since = t.login_at = t0;
	if ((lk = lock_take(o, err)) < 0)
		goto out;
	if (tokens_save(o, &t, -1, err) == 0) {
		status_update(o, &t, ST_GOT, 1, NULL, t0);
		res = OAUTH_OK;
	}
	(void)close(lk);
out:
	tokens_wipe(&t);
	return res;
}

void
oauth_device_free(struct oauth_device *d)
{
	secret_wipe(&d->device_code);
	memset(d, 0, sizeof *d);
}

/* key's string into out (printable, fits): 1; 0 absent; -1 otherwise. */
static int
jcopy(struct json_object *j, const char *key, char *out, size_t max)
{
	struct json_object *x = jp_get(j, key);
	const char *v = jp_str(x);
	size_t n, i;

	if (x == NULL)
		return 0;
	if (v == NULL || (n = strlen(v)) == 0 || n >= max)
		return -1;
	for (i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
			return -1;
	memcpy(out, v, n);
	out[n] = '\0';
	return 1;
}

int
oauth_device_start(const struct weir_upstream *u, struct oauth_device *d, struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	struct json_object *j = NULL;
	struct buf form = BUF_INIT, why = BUF_INIT;
	struct oauth_grant g;
	const char *dc;
	long long exp = 0, iv = 5, now = (long long)time(NULL);
	int rc = -1, r;

	memset(d, 0, sizeof *d);
	https_form_add(&form, "client_id", o->client_id, strlen(o->client_id));
	https_form_add(&form, "scope", o->scope, strlen(o->scope));
	switch (post(o, o->device_endpoint, &form, &g, &j, &why)) {
	case OAUTH_A_NONE:
		buf_printf(err, "the device endpoint: %s", why.s);
		goto out;
	case OAUTH_A_ERROR:
		buf_adds(err, "the provider refused the device login: ");
		error_text(&g, err);
		goto out;
	case OAUTH_A_TOKENS:
		break;
	}
	r = jcopy(j, "verification_uri", d->uri, sizeof d->uri);
	if (r == 0)	/* Google's name for it */
		r = jcopy(j, "verification_url", d->uri, sizeof d->uri);
	dc = jp_str(jp_get(j, "device_code"));
	if (dc == NULL || !token_ok(dc, strlen(dc)) ||
	    jcopy(j, "user_code", d->user_code, sizeof d->user_code) != 1 || r != 1 ||
	    jcopy(j, "verification_uri_complete", d->uri_complete, sizeof d->uri_complete) < 0 ||
	    seconds(j, "expires_in", &exp) != 1 || exp == 0 || seconds(j, "interval", &iv) < 0) {
		buf_printf(err, "the device endpoint's answer lacks device_code, user_code, "
		    "verification_uri or expires_in, or has one malformed");
		goto out;
	}
	buf_reserve(&d->device_code, OAUTH_TOKEN_MAX + 1);
	buf_adds(&d->device_code, dc);
	d->expires_at = now + exp;
	d->interval = iv < 1 ? 1 : iv > 60 ? 60 : iv;
	rc = 0;
out:
	jp_wipe(j, "device_code");
	json_object_put(j);
	oauth_grant_wipe(&g);
	buf_free(&why);
	if (rc < 0)
		oauth_device_free(d);
	return rc;
}

enum oauth_result
oauth_device_poll(const struct weir_upstream *u, struct oauth_device *d, int *wait,
    struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	struct buf form = BUF_INIT, why = BUF_INIT;
	struct oauth_grant g;
	long long t0 = (long long)time(NULL);
	enum oauth_result res = OAUTH_TEMP;

	*wait = 0;
	buf_reserve(&form, 2 * OAUTH_TOKEN_MAX);
	https_form_add(&form, "grant_type", DEVICE_GRANT, strlen(DEVICE_GRANT));
	https_form_add(&form, "device_code", d->device_code.s, d->device_code.len);
	if (add_client(o, &form, err) < 0) {
		secret_wipe(&form);
		return OAUTH_REFUSED;
	}
	switch (post(o, o->token_endpoint, &form, &g, NULL, &why)) {
	case OAUTH_A_NONE:
		buf_printf(err, "the token endpoint: %s", why.s);
		break;
	case OAUTH_A_ERROR:
		if (strcmp(g.error, "authorization_pending") == 0) {
			*wait = 1;
		} else if (strcmp(g.error, "slow_down") == 0) {
			d->interval += 5;	/* RFC 8628 3.5 */
			*wait = 1;
		} else {
			buf_adds(err, "the provider refused the login: ");
			error_text(&g, err);
			res = error_temporary(&g) ? OAUTH_TEMP : OAUTH_REFUSED;
		}
		break;
	case OAUTH_A_TOKENS:
		res = login_save(o, &g, t0, err);
		break;
	}
	oauth_grant_wipe(&g);
	buf_free(&why);
	return res;
}

/* ---- the code grant with PKCE ---- */

static int
random_bytes(unsigned char *p, size_t n, struct buf *err)
{
	ssize_t r;

	while ((r = getrandom(p, n, 0)) < 0 && errno == EINTR)
		;
	if (r != (ssize_t)n) {
		buf_printf(err, "getrandom: %s", r < 0 ? strerror(errno) : "short");
		return -1;
	}
	return 0;
}

void
oauth_code_free(struct oauth_code *c)
{
	explicit_bzero(c, sizeof *c);
}

int
oauth_code_start(const struct weir_upstream *u, struct oauth_code *c, struct buf *url,
    struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	unsigned char rnd[32], md[32];
	char challenge[64];
	struct buf q = BUF_INIT;
	unsigned mdlen = 0;
	unsigned port;

	memset(c, 0, sizeof *c);
	if (random_bytes(rnd, sizeof rnd, err) < 0)
		return -1;
	b64url_encode(rnd, sizeof rnd, c->verifier);	/* 43 characters: RFC 7636 4.1 */
	if (EVP_Digest(c->verifier, strlen(c->verifier), md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != sizeof md) {
		buf_printf(err, "SHA-256 failed");
		return -1;
	}
	b64url_encode(md, sizeof md, challenge);
	if (random_bytes(rnd, 18, err) < 0)
		return -1;
	b64url_encode(rnd, 18, c->state);
	/* A loopback port nothing listens on: the browser shows the address
	 * it was sent to, code and all, for the user to paste. */
	port = 20000 + ((unsigned)rnd[0] << 8 | rnd[1]) % 40000;
	snprintf(c->redirect, sizeof c->redirect, "http://127.0.0.1:%u/", port);
	explicit_bzero(rnd, sizeof rnd);
	https_form_add(&q, "response_type", "code", 4);
	https_form_add(&q, "client_id", o->client_id, strlen(o->client_id));
	https_form_add(&q, "redirect_uri", c->redirect, strlen(c->redirect));
	https_form_add(&q, "scope", o->scope, strlen(o->scope));
	https_form_add(&q, "state", c->state, strlen(c->state));
	https_form_add(&q, "code_challenge", challenge, strlen(challenge));
	https_form_add(&q, "code_challenge_method", "S256", 4);
	/* Google's words for "a refresh token, also on a second login". */
	https_form_add(&q, "access_type", "offline", 7);
	https_form_add(&q, "prompt", "consent", 7);
	if (u->username)
		https_form_add(&q, "login_hint", u->username, strlen(u->username));
	buf_printf(url, "%s%s%s", o->authorize_endpoint,
	    strchr(o->authorize_endpoint, '?') ? "&" : "?", q.s);
	buf_free(&q);
	return 0;
}

static int
hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The value of name in the query s (up to '#'), percent-decoded, into
 * out: 1, 0 absent, -1 malformed. */
static int
query_get(const char *s, const char *name, struct buf *out)
{
	size_t n = strlen(name);
	const char *p = s, *end = s + strcspn(s, "#");

	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;

		if ((size_t)(stop - p) > n && strncmp(p, name, n) == 0 && p[n] == '=') {
			for (p += n + 1; p < stop; p++) {
				if (*p == '%') {
					if (stop - p < 3 || hexval(p[1]) < 0 || hexval(p[2]) < 0)
						return -1;
					buf_addc(out, (char)(hexval(p[1]) << 4 | hexval(p[2])));
					p += 2;
				} else {
					buf_addc(out, *p == '+' ? ' ' : *p);
				}
			}
			return 1;
		}
		p = amp ? amp + 1 : end;
	}
	return 0;
}

enum oauth_result
oauth_code_finish(const struct weir_upstream *u, struct oauth_code *c, const char *pasted,
    struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	struct buf code = BUF_INIT, state = BUF_INIT, e = BUF_INIT, form = BUF_INIT;
	struct buf why = BUF_INIT;
	struct oauth_grant g;
	const char *q;
	long long t0;
	enum oauth_result res = OAUTH_REFUSED;

	memset(&g, 0, sizeof g);
	while (*pasted == ' ' || *pasted == '\t')
		pasted++;
	buf_reserve(&code, OAUTH_TOKEN_MAX + 1);
	if ((q = strchr(pasted, '?')) != NULL || strchr(pasted, '=') != NULL) {
		q = q ? q + 1 : pasted;
		if (query_get(q, "error", &e) == 1) {
			buf_printf(err, "the provider refused the login: %s", buf_cstr(&e));
			goto out;
		}
		if (query_get(q, "code", &code) != 1 || query_get(q, "state", &state) != 1) {
			buf_printf(err, "no code= and state= in what was pasted");
			goto out;
		}
		if (strcmp(buf_cstr(&state), c->state) != 0) {
			buf_printf(err, "the address pasted is from another login (its state "
			    "differs): paste the one this login's address led to");
			goto out;
		}
	} else {
		buf_adds(&code, pasted);
	}
	while (code.len > 0 && strchr(" \t\r\n", code.s[code.len - 1]))
		code.s[--code.len] = '\0';
	if (!token_ok(code.s, code.len)) {
		buf_printf(err, "the code is empty or not printable ASCII");
		goto out;
	}
	buf_reserve(&form, 2 * OAUTH_TOKEN_MAX);
	https_form_add(&form, "grant_type", "authorization_code", 18);
	https_form_add(&form, "code", code.s, code.len);
	https_form_add(&form, "redirect_uri", c->redirect, strlen(c->redirect));
	https_form_add(&form, "code_verifier", c->verifier, strlen(c->verifier));
	if (add_client(o, &form, err) < 0) {
		secret_wipe(&form);
		goto out;
	}
	t0 = (long long)time(NULL);
	switch (post(o, o->token_endpoint, &form, &g, NULL, &why)) {
	case OAUTH_A_NONE:
		buf_printf(err, "the token endpoint: %s", why.s);
		res = OAUTH_TEMP;
		break;
	case OAUTH_A_ERROR:
		buf_adds(err, "the provider refused the code: ");
		error_text(&g, err);
		break;
	case OAUTH_A_TOKENS:
		res = login_save(o, &g, t0, err);
		break;
	}
out:
	oauth_grant_wipe(&g);
	secret_wipe(&code);
	buf_free(&state);
	buf_free(&e);
	buf_free(&why);
	return res;
}
