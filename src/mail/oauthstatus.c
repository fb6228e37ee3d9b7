/*
 * oauthstatus.c: the part of mail/oauth.h its readers need (weir-send,
 * weir-metrics, weir status, weir check-config): the token status file,
 * read with lib/jsonparse.h (no HTTPS: oauth.c has that), and the helpers
 * oauth.c shares.
 *
 * Trusts: the status file only as it parses.  Config keys: the oauth
 * section (token_file, refresh_margin).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/jsonparse.h"
#include "mail/oauth.h"

long long
oauth_margin(const struct weir_oauth *o, long long lifetime)
{
	return lifetime / 10 > o->refresh_margin ? lifetime / 10 : o->refresh_margin;
}

long long
oauth_last_use(const struct oauth_status *st)
{
	return st->refreshed_at > st->login_at ? st->refreshed_at : st->login_at;
}

void
oauth_time(char *out, size_t max, long long t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL || strftime(out, max, "%Y-%m-%d %H:%M:%S %z", &tm) == 0)
		snprintf(out, max, "@%lld", t);
}

char *
oauth_status_path(const struct weir_oauth *o)
{
	return xasprintf("%s.status", o->token_file);
}

void
oauth_one_line(char *out, size_t max, const char *s, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n && k + 1 < max; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\r' || c == '\n')
			break;
		out[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	out[k] = '\0';
}

int
oauth_read_file(const char *path, int private, struct buf *b, struct buf *err)
{
	struct stat st;
	int fd, r;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		buf_printf(err, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0)
		buf_printf(err, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		buf_printf(err, "%s: not a regular file", path);
	else if (private && (st.st_mode & 077))
		buf_printf(err, "%s: open to group or others (chmod 600 %s)", path, path);
	else {
		buf_reserve(b, OAUTH_FILE_MAX + 1);
		r = read_fd_all(fd, b, OAUTH_FILE_MAX);
		(void)close(fd);
		if (r < 0) {
			buf_printf(err, "%s: %s", path, r == -2 ? "too big" : strerror(errno));
			return -1;
		}
		return 1;
	}
	(void)close(fd);
	return -1;
}

int
oauth_status_load(const struct weir_oauth *o, struct oauth_status *st, struct buf *err)
{
	/* Version 2 adds the back-off and the refused token (oauth.h);
	 * version 1, an older weir's, has neither. */
	static const char *const keys[] = { "version", "login_at", "refresh_since",
	    "refreshed_at", "expires_at", "lifetime", "error_at", "error", "login_needed",
	    "failures", "next_try", "refused", NULL };
	static const char *const keys1[] = { "version", "login_at", "refresh_since",
	    "refreshed_at", "expires_at", "lifetime", "error_at", "error", "login_needed",
	    NULL };
	struct json_object *j = NULL;
	struct buf b = BUF_INIT, why = BUF_INIT;
	char *path = oauth_status_path(o);
	const char *e;
	long long v = 0;
	int r, rc = -1;

	memset(st, 0, sizeof *st);
	r = oauth_read_file(path, 0, &b, err);
	if (r <= 0) {
		rc = r;
		goto out;
	}
	if ((j = json_parse_object(b.s, b.len, OAUTH_FILE_MAX, &why)) == NULL) {
		buf_printf(err, "%s: %s", path, why.s);
		goto out;
	}
	e = jp_str(jp_get(j, "error"));
	st->login_needed = jp_bool(jp_get(j, "login_needed"));
	if (jp_u53(jp_get(j, "version"), &v) < 0 || (v != 1 && v != 2) ||
	    !jp_only_keys(j, v == 1 ? keys1 : keys) ||
	    (v == 2 && (jp_u53(jp_get(j, "failures"), &st->failures) < 0 ||
	    jp_u53(jp_get(j, "next_try"), &st->next_try) < 0 ||
	    jp_u53(jp_get(j, "refused"), &st->refused) < 0)) ||
	    jp_u53(jp_get(j, "login_at"), &st->login_at) < 0 ||
	    jp_u53(jp_get(j, "refresh_since"), &st->refresh_since) < 0 ||
	    jp_u53(jp_get(j, "refreshed_at"), &st->refreshed_at) < 0 ||
	    jp_u53(jp_get(j, "expires_at"), &st->expires_at) < 0 ||
	    jp_u53(jp_get(j, "lifetime"), &st->lifetime) < 0 ||
	    jp_u53(jp_get(j, "error_at"), &st->error_at) < 0 ||
	    e == NULL || st->login_needed < 0) {
		buf_printf(err, "%s: a key missing, of the wrong type, or unknown", path);
		memset(st, 0, sizeof *st);
		goto out;
	}
	oauth_one_line(st->error, sizeof st->error, e, strlen(e));
	rc = 1;
out:
	json_object_put(j);
	buf_free(&b);
	buf_free(&why);
	free(path);
	return rc;
}
