/*
 * credfp_test.c: the fingerprint of an upstream's credentials
 * (mail/credfp.c), as weir-gate takes it without reading the secret:
 * the same while nothing changes; another when the secret file is
 * rewritten (the same size), replaced, or when username, host,
 * port or the secret_command text change; a file that cannot be looked
 * at is named.
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

Test(credfp, changes_with_what_authenticates)
{
	char *dir = tl_tmpdir(), *secret = xasprintf("%s/secret", dir);
	char *other = xasprintf("%s/other", dir);
	struct weir_upstream u;
	uint64_t a, b;
	struct stat st;
	struct timespec ts[2];
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
	/* Rewritten in place, the same size, a second later (the kernel's
	 * file times are coarser than two writes in a row). */
	tl_write(secret, "other", 5);
	cr_assert_eq(stat(secret, &st), 0);
	ts[0] = ts[1] = st.st_mtim;
	ts[0].tv_sec++;
	ts[1].tv_sec++;
	cr_assert_eq(utimensat(AT_FDCWD, secret, ts, 0), 0);
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
