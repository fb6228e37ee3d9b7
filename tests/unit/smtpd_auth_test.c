/*
 * smtpd_auth_test.c: weir-smtpd's strict base64 and the password file
 * (smtpd/auth.c).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "smtpd/auth.h"
#include "testlib.h"

static void
dec_ok(const char *in, const char *want, size_t wantlen)
{
	struct buf out = BUF_INIT;

	cr_assert_eq(b64_decode(in, strlen(in), &out), 0, "%s refused", in);
	cr_assert_eq(out.len, wantlen, "%s", in);
	cr_assert(memcmp(out.s ? out.s : "", want, wantlen) == 0, "%s", in);
	buf_free(&out);
}

static void
dec_bad(const char *in)
{
	struct buf out = BUF_INIT;

	cr_assert_eq(b64_decode(in, strlen(in), &out), -1, "%s accepted", in);
	buf_free(&out);
}

Test(b64, strict)
{
	dec_ok("", "", 0);
	dec_ok("AGFsaWNlAHNlY3JldA==", "\0alice\0secret", 13);
	dec_ok("Zm9v", "foo", 3);
	dec_ok("Zm8=", "fo", 2);
	dec_ok("Zg==", "f", 1);
	dec_bad("Zg");
	dec_bad("Zg=");
	dec_bad("Zg=a");
	dec_bad("Z===");
	dec_bad("Zh==");		/* non-zero bits under the padding */
	dec_bad("Zm9v\r\n");
	dec_bad("Zm 9");
	dec_bad("Zm9v====");
	dec_bad("Zg==Zm9v");
}

static char *dir;

static void setup(void) { dir = tl_tmpdir(); }
static void teardown(void) { tl_rmtree(dir); free(dir); }

TestSuite(pwfile, .init = setup, .fini = teardown);

static char *
pwfile(const char *text, mode_t m)
{
	char *p = xasprintf("%s/pw", dir);

	tl_write(p, text, strlen(text));
	cr_assert(chmod(p, m) == 0);
	return p;
}

/* openssl passwd -6 -salt abc secret */
#define HASH "$6$abc$IdWKNKTJEb8LxY7CGg8YBXlvtfZzFw7Mp/r6niK9YB2mdvgY..TKjv1T..8RadRt2qvUHYRLr/TsVArtr91iR1"

Test(pwfile, check)
{
	char *p = pwfile("# comment\n\nbob:" HASH "\nalice:" HASH "\n", 0600);
	struct buf why = BUF_INIT;

	cr_assert_eq(pw_check(p, "alice", "secret", &why), PW_OK, "%s", buf_cstr(&why));
	cr_assert_eq(pw_check(p, "alice", "Secret", &why), PW_BAD);
	cr_assert_eq(pw_check(p, "carol", "secret", &why), PW_BAD);
	cr_assert_eq(pw_check(p, "Alice", "secret", &why), PW_BAD);
	cr_assert_eq(pw_check(p, "alic", "secret", &why), PW_BAD);
	free(p);
	buf_free(&why);
}

Test(pwfile, refused_files)
{
	struct buf why = BUF_INIT;
	char *p;

	p = pwfile("alice:" HASH "\n", 0640);
	cr_assert_eq(pw_check(p, "alice", "secret", &why), PW_TROUBLE);
	cr_assert(strstr(why.s, "mode 640"), "%s", why.s);
	free(p);
	buf_reset(&why);
	p = pwfile("alice:secret\n", 0600);
	cr_assert_eq(pw_check(p, "alice", "secret", &why), PW_TROUBLE, "a clear password");
	cr_assert(strstr(why.s, ":1: not"), "%s", why.s);
	free(p);
	buf_reset(&why);
	p = pwfile("alice:" HASH ":extra\n", 0600);
	cr_assert_eq(pw_check(p, "alice", "secret", &why), PW_TROUBLE);
	free(p);
	buf_reset(&why);
	p = pwfile("alice:abXYZ\n", 0600);
	cr_assert_eq(pw_check(p, "alice", "secret", &why), PW_TROUBLE, "DES hash");
	free(p);
	buf_reset(&why);
	cr_assert_eq(pw_check("/nonexistent/pw", "alice", "secret", &why), PW_TROUBLE);
	buf_free(&why);
}
