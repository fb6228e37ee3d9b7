/*
 * credfp_test.c: the fingerprint of an upstream's credentials
 * (mail/credfp.c), as weir-gate takes it without reading the secret:
 * the same while nothing changes; another when the secret file is
 * rewritten (the same size), replaced, or when username, host,
 * port or the secret_command text change; a file that cannot be looked
 * at is named.  For an oauth section: another when the client changes
 * or a login writes the token file; a token file not there yet (no
 * login) is no file that cannot be looked at.  cred_fix: a login for an
 * oauth section, the secret otherwise.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/credfp.h"
#include "testlib.h"

static uint64_t
fp(const struct weir_upstream *u)
{
	const char *why;
	int err;
	uint64_t h = credfp(u, &why, &err);

	cr_assert_null(why, "%s: %s", why, strerror(err));
	return h;
}

/* path rewritten in place with data, its times a second later (the
 * kernel's file times are coarser than two writes in a row). */
static void
rewrite(const char *path, const char *data)
{
	struct stat st;
	struct timespec ts[2];

	tl_write(path, data, strlen(data));
	cr_assert_eq(stat(path, &st), 0);
	ts[0] = ts[1] = st.st_mtim;
	ts[0].tv_sec++;
	ts[1].tv_sec++;
	cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

Test(credfp, changes_with_what_authenticates)
{
	char *dir = tl_tmpdir(), *secret = xasprintf("%s/secret", dir);
	char *other = xasprintf("%s/other", dir);
	struct weir_upstream u;
	uint64_t a, b;
	const char *why;
	int err;

	memset(&u, 0, sizeof u);
	u.name = (char *)"isp";
	u.host = (char *)"smtp.example.net";
	u.port = 587;
	u.username = (char *)"me";
	u.secret_file = secret;
	tl_write(secret, "first", 5);
	a = fp(&u);
	cr_assert_eq(fp(&u), a, "not stable");
	/* Rewritten in place, the same size. */
	rewrite(secret, "other");
	cr_assert_neq(b = fp(&u), a, "a rewritten secret file not seen");
	tl_write(other, "other", 5);
	cr_assert_eq(rename(other, secret), 0);	/* replaced, as editors do */
	cr_assert_neq(fp(&u), b, "a replaced secret file not seen");
	a = fp(&u);
	u.username = (char *)"you";
	cr_assert_neq(fp(&u), a);
	u.username = (char *)"me";
	u.port = 465;
	cr_assert_neq(fp(&u), a);
	u.port = 587;
	u.host = (char *)"smtp2.example.net";
	cr_assert_neq(fp(&u), a);
	u.host = (char *)"smtp.example.net";
	cr_assert_eq(fp(&u), a);
	u.secret_file = NULL;
	u.secret_command = (char *)"/usr/bin/token isp";
	a = fp(&u);
	u.secret_command = (char *)"/usr/bin/token isp2";
	cr_assert_neq(fp(&u), a);
	/* A secret file that cannot be looked at: named, and stable. */
	u.secret_command = NULL;
	u.secret_file = (char *)"/nonexistent/secret";
	a = credfp(&u, &why, &err);
	cr_assert(why && strcmp(why, "secret_file") == 0 && err == ENOENT);
	cr_assert_eq(credfp(&u, &why, &err), a);
	cr_assert_neq(a, credfp_none());
	tl_rmtree(dir);
	free(secret);
	free(other);
	free(dir);
}

Test(credfp, oauth_client_and_login)
{
	char *dir = tl_tmpdir(), *tok = xasprintf("%s/oauth/isp", dir);
	char *cs = xasprintf("%s/client.secret", dir), *sub = xasprintf("%s/oauth", dir);
	struct weir_upstream u;
	uint64_t none, a, b;
	struct buf fix = BUF_INIT;

	memset(&u, 0, sizeof u);
	u.name = (char *)"isp";
	u.host = (char *)"smtp.office365.com";
	u.username = (char *)"me@example.org";
	a = fp(&u);
	u.oauth.present = 1;
	u.oauth.client_id = (char *)"client-1";
	u.oauth.scope = (char *)"https://outlook.office.com/SMTP.Send offline_access";
	u.oauth.token_endpoint = (char *)"https://login.example/token";
	u.oauth.token_file = tok;
	none = fp(&u);		/* no folder, no token: not named (fp() asserts) */
	cr_assert_neq(none, a, "the oauth section not seen");
	cr_assert_eq(fp(&u), none, "not stable");
	cr_assert_eq(mkdir(sub, 0755), 0);
	tl_write(tok, "{}", 2);
	cr_assert_neq(a = fp(&u), none, "the first login not seen");
	/* A later login (or refresh): the file renamed over, the same size. */
	tl_write(cs, "{}", 2);
	cr_assert_eq(rename(cs, tok), 0);
	cr_assert_neq(b = fp(&u), a, "a new token file not seen");
	rewrite(tok, "[]");
	cr_assert_neq(a = fp(&u), b, "a token file rewritten in place not seen");
	u.oauth.client_id = (char *)"client-2";
	cr_assert_neq(fp(&u), a, "another client_id not seen");
	u.oauth.client_id = (char *)"client-1";
	cr_assert_eq(fp(&u), a);
	tl_write(cs, "s3cret", 6);
	u.oauth.client_secret_file = cs;
	cr_assert_neq(fp(&u), a, "a client secret not seen");
	u.oauth.client_secret_file = NULL;
	u.oauth.scope = (char *)"https://mail.google.com/";
	cr_assert_neq(fp(&u), a, "another scope not seen");

	cred_fix(&fix, "isp", 1, NULL);
	cr_assert(strstr(fix.s, "run weir auth login isp (") == fix.s, "%s", fix.s);
	cr_assert(strstr(fix.s, "secret_file") == NULL, "%s", fix.s);
	buf_reset(&fix);
	cred_fix(&fix, "isp", 0, NULL);
	cr_assert(strstr(fix.s, "fix username, secret_file or secret_command of upstream isp in "
	    "weir.conf") == fix.s, "%s", fix.s);
	cr_assert(strstr(fix.s, "auth login") == NULL, "%s", fix.s);
	buf_free(&fix);
	tl_rmtree(dir);
	free(tok);
	free(cs);
	free(sub);
	free(dir);
}
