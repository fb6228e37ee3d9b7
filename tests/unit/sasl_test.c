/*
 * sasl_test.c: weir-remote's SASL client (src/remote/sasl.c) against
 * Cyrus SASL's own server side, in process, with a sasldb in a scratch
 * folder: every mechanism the installed plugins offer, right and wrong
 * passwords; the built-in XOAUTH2 and OAUTHBEARER byte for byte.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sasl/sasl.h>
#include <sasl/saslutil.h>

#include "lib/alloc.h"
#include "remote/sasl.h"
#include "testlib.h"

static char *dir, *dbpath;

static int
srv_getopt(void *ctx, const char *plugin, const char *option, const char **result,
    unsigned *len)
{
	(void)ctx; (void)plugin;
	if (strcmp(option, "sasldb_path") == 0)
		*result = dbpath;
	else if (strcmp(option, "pwcheck_method") == 0)
		*result = "auxprop";
	else if (strcmp(option, "auxprop_plugin") == 0)
		*result = "sasldb";
	else
		return SASL_FAIL;
	if (len)
		*len = (unsigned)strlen(*result);
	return SASL_OK;
}

typedef int (*cbfn)(void);
static sasl_callback_t srv_cb[] = {
	{ SASL_CB_GETOPT, (cbfn)(void (*)(void))srv_getopt, NULL },
	{ SASL_CB_LIST_END, NULL, NULL },
};

static sasl_conn_t *
server(void)
{
	sasl_conn_t *s = NULL;

	cr_assert_eq(sasl_server_new("smtp", "mx.test", NULL, NULL, NULL, NULL, 0, &s), SASL_OK);
	return s;
}

static void
setup(void)
{
	struct buf err = BUF_INIT;
	sasl_conn_t *s;
	int r;

	dir = tl_tmpdir();
	dbpath = xasprintf("%s/sasldb2", dir);
	cr_assert_eq(sasl_server_init(srv_cb, "weir-test"), SASL_OK);
	cr_assert_eq(saslc_init(&err), 0, "%s", err.s);
	s = server();
	r = sasl_setpass(s, "me", "s3cret", 6, NULL, 0, SASL_SET_CREATE);
	cr_assert_eq(r, SASL_OK, "sasl_setpass: %s", sasl_errdetail(s));
	sasl_dispose(&s);
}

static void
teardown(void)
{
	tl_rmtree(dir);
	free(dir);
	free(dbpath);
}

TestSuite(sasl, .init = setup, .fini = teardown);

static void
b64dec(const char *in, size_t n, struct buf *out)
{
	unsigned len = 0;

	buf_reset(out);
	buf_reserve(out, n + 1);
	cr_assert_eq(sasl_decode64(in, (unsigned)n, out->s, (unsigned)n + 1, &len), SASL_OK);
	out->len = len;
}

static void
b64enc(const char *in, size_t n, struct buf *out)
{
	unsigned len = 0;
	size_t cap = (n + 2) / 3 * 4 + 1;

	buf_reset(out);
	buf_reserve(out, cap);
	cr_assert_eq(sasl_encode64(in, (unsigned)n, out->s, (unsigned)cap, &len), SASL_OK);
	out->len = len;
	out->s[len] = '\0';
}

/* One whole exchange: SASL_OK if the server let "me" in with password. */
static int
exchange(const char *mech, const char *password, int *client_complete)
{
	char *prefs_v[] = { (char *)mech, NULL };
	struct strlist prefs = { prefs_v, 1 };
	struct buf err = BUF_INIT, ir = BUF_INIT, raw = BUF_INIT, resp = BUF_INIT, chal = BUF_INIT;
	struct saslc *c = saslc_new("mx.test", 587, "me", password, strlen(password), &err);
	sasl_conn_t *s = server();
	const char *chosen = NULL, *out = NULL;
	unsigned outlen = 0;
	int has_ir = 0, r, rounds = 0;

	cr_assert_not_null(c);
	cr_assert_eq(saslc_start(c, "LOGIN PLAIN CRAM-MD5 DIGEST-MD5 SCRAM-SHA-1 SCRAM-SHA-256",
	    &prefs, &chosen, &has_ir, &ir, &err), 0, "%s: %s", mech, err.s);
	cr_assert_str_eq(chosen, mech);
	if (has_ir) {
		b64dec(ir.s, ir.len, &raw);
		r = sasl_server_start(s, mech, raw.s, (unsigned)raw.len, &out, &outlen);
	} else {
		r = sasl_server_start(s, mech, NULL, 0, &out, &outlen);
	}
	while (r == SASL_CONTINUE && rounds++ < 10) {
		b64enc(out ? out : "", out ? outlen : 0, &chal);
		buf_reset(&err);
		cr_assert_eq(saslc_step(c, chal.s, chal.len, &resp, &err), 0, "%s: %s", mech, err.s);
		b64dec(resp.s, resp.len, &raw);
		r = sasl_server_step(s, raw.s, (unsigned)raw.len, &out, &outlen);
	}
	/* SMTP has no success data (flags 0): the server sent SCRAM's and
	 * DIGEST-MD5's final proof as one more challenge, which the client
	 * checked in the loop; with SASL_OK, out is not meaningful. */
	*client_complete = saslc_complete(c);
	saslc_free(c);
	sasl_dispose(&s);
	buf_free(&err); buf_free(&ir); buf_free(&raw); buf_free(&resp); buf_free(&chal);
	return r;
}

static void
mech_case(const char *mech)
{
	int complete = 0;

	cr_assert(saslc_have(mech), "%s: no Cyrus plugin (apt-get install libsasl2-modules)", mech);
	cr_assert_eq(exchange(mech, "s3cret", &complete), SASL_OK, "%s: right password refused",
	    mech);
	cr_assert(complete, "%s: client not complete after success", mech);
	cr_assert_neq(exchange(mech, "wrong", &complete), SASL_OK, "%s: wrong password accepted",
	    mech);
}

Test(sasl, plain) { mech_case("PLAIN"); }
Test(sasl, login) { mech_case("LOGIN"); }
Test(sasl, cram_md5) { mech_case("CRAM-MD5"); }
Test(sasl, digest_md5) { mech_case("DIGEST-MD5"); }
Test(sasl, scram_sha_1) { mech_case("SCRAM-SHA-1"); }
Test(sasl, scram_sha_256) { mech_case("SCRAM-SHA-256"); }

Test(sasl, preference_order_and_server_offer)
{
	struct buf err = BUF_INIT, ir = BUF_INIT;
	struct saslc *c = saslc_new("mx.test", 587, "me", "pw", 2, &err);
	const char *chosen = NULL;
	char *v[] = { "SCRAM-SHA-256", "LOGIN", "PLAIN", NULL };
	struct strlist prefs = { v, 3 };
	int has_ir;

	/* The server's list decides among ours; case does not matter. */
	cr_assert_eq(saslc_start(c, "plain login", &prefs, &chosen, &has_ir, &ir, &err), 0);
	cr_assert_str_eq(chosen, "LOGIN");
	/* Default order: SCRAM-SHA-256 first when offered. */
	cr_assert_eq(saslc_start(c, "PLAIN SCRAM-SHA-256 LOGIN", NULL, &chosen, &has_ir, &ir, &err), 0);
	cr_assert_str_eq(chosen, "SCRAM-SHA-256");
	/* Nothing in common: a clear error. */
	cr_assert_eq(saslc_start(c, "GSSAPI NTLMX", &prefs, &chosen, &has_ir, &ir, &err), -1);
	cr_assert(strstr(err.s, "no SASL mechanism in common (server offers: GSSAPI NTLMX"), "%s",
	    err.s);
	saslc_free(c);
	buf_free(&err);
	buf_free(&ir);
}

static void
oauth_case(const char *mech, const char *want, size_t wantlen, const char *final_answer,
    size_t final_len)
{
	struct buf err = BUF_INIT, ir = BUF_INIT, raw = BUF_INIT, resp = BUF_INIT, chal = BUF_INIT;
	struct saslc *c = saslc_new("smtp.example.com", 587, "me@example.com", "tok=en", 6, &err);
	char *v[] = { (char *)mech, NULL };
	struct strlist prefs = { v, 1 };
	const char *chosen = NULL;
	int has_ir = 0;

	cr_assert(saslc_have(mech));
	cr_assert_eq(saslc_start(c, "PLAIN XOAUTH2 OAUTHBEARER", &prefs, &chosen, &has_ir, &ir,
	    &err), 0, "%s", err.s);
	cr_assert(has_ir);
	b64dec(ir.s, ir.len, &raw);
	cr_assert(raw.len == wantlen && memcmp(raw.s, want, wantlen) == 0, "%s: %.*s", mech,
	    (int)raw.len, raw.s);
	cr_assert(saslc_complete(c));
	/* A failure report (JSON) is answered so the server can say 535. */
	b64enc("{\"status\":\"401\"}", 16, &chal);
	cr_assert_eq(saslc_step(c, chal.s, chal.len, &resp, &err), 0);
	b64dec(resp.s, resp.len, &raw);
	cr_assert(raw.len == final_len && memcmp(raw.s, final_answer, final_len) == 0);
	cr_assert_eq(saslc_step(c, chal.s, chal.len, &resp, &err), -1);
	saslc_free(c);
	buf_free(&err); buf_free(&ir); buf_free(&raw); buf_free(&resp); buf_free(&chal);
}

Test(sasl, xoauth2_built_in)
{
	static const char want[] = "user=me@example.com\001auth=Bearer tok=en\001\001";

	oauth_case("XOAUTH2", want, sizeof want - 1, "", 0);
}

Test(sasl, oauthbearer_built_in)
{
	static const char want[] = "n,a=me@example.com,\001host=smtp.example.com\001port=587"
	    "\001auth=Bearer tok=en\001\001";

	oauth_case("OAUTHBEARER", want, sizeof want - 1, "\001", 1);
}

Test(sasl, malformed_challenge_is_an_error)
{
	struct buf err = BUF_INIT, ir = BUF_INIT, resp = BUF_INIT;
	struct saslc *c = saslc_new("mx.test", 587, "me", "pw", 2, &err);
	char *v[] = { "CRAM-MD5", NULL };
	struct strlist prefs = { v, 1 };
	const char *chosen = NULL;
	int has_ir = 0;

	cr_assert_eq(saslc_start(c, "CRAM-MD5", &prefs, &chosen, &has_ir, &ir, &err), 0);
	cr_assert_eq(has_ir, 0);
	cr_assert_eq(saslc_step(c, "not*base64!", 11, &resp, &err), -1);
	cr_assert(strstr(err.s, "base64"), "%s", err.s);
	saslc_free(c);
	buf_free(&err); buf_free(&ir); buf_free(&resp);
}
