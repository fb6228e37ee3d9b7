/*
 * oauthapp.c: the token request of the app-only flows (mail/oauth.h),
 * where the application's own credentials, not a user's refresh token,
 * get each access token:
 *
 *   client_credentials (RFC 6749 4.4), Microsoft Entra ID's way for an
 *     application to send as a mailbox it was given rights on: with a
 *     client secret (client_secret_file), or with a certificate
 *     (certificate_file, private_key_file): the client assertion of RFC
 *     7523 2.2, a JWT signed with the key, its header naming the
 *     certificate by its thumbprints (x5t: SHA-1, x5t#S256: SHA-256),
 *     its claims aud (the token endpoint), iss and sub (client_id), jti
 *     (random), nbf, iat and exp (5 minutes).
 *   service_account: Google's service account with domain-wide
 *     delegation, the JWT bearer grant of RFC 7523 2.1: a JWT signed with
 *     the key of key_file (the JSON key Google hands out: private_key,
 *     client_email, private_key_id), claims iss (client_email), sub (the
 *     mailbox it acts for: the upstream's username), scope, aud (the
 *     token endpoint), iat and exp (an hour, Google's most).
 *
 * Every file is read as a secret (mail/secretfile.h's rule: 0600 and
 * the deliverer's); the key and the assertion live in wiped buffers.
 *
 * Trusts: the files only as they parse.  Config keys: the oauth section
 * (flow, client_id, client_secret_file, certificate_file,
 * private_key_file, key_file, scope, token_endpoint), username.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/json.h"
#include "lib/jsonparse.h"
#include "mail/https.h"
#include "mail/jwt.h"
#include "mail/oauth.h"
#include "mail/secretfile.h"

#define ASSERTION_TYPE "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#define JWT_BEARER_GRANT "urn:ietf:params:oauth:grant-type:jwt-bearer"
#define ASSERTION_LIFE 300	/* s: a client assertion is used at once */
#define BEARER_LIFE 3600	/* s: Google takes at most an hour */

/* The key in the PEM file key (config key name) path. */
static EVP_PKEY *
key_from_file(const char *key, const char *path, struct buf *err)
{
	struct buf pem = BUF_INIT;
	EVP_PKEY *k = NULL;
	char *what;

	if (secretfile_read(key, path, &pem, err) < 0)
		return NULL;
	what = xasprintf("%s %s", key, path);
	k = jwt_key_pem(pem.s, pem.len, what, err);
	free(what);
	secret_wipe(&pem);
	return k;
}

/* A random jti (RFC 7519 4.1.7): 16 bytes, hex. */
static int
jti(char out[33], struct buf *err)
{
	unsigned char r[16];
	ssize_t n;
	size_t i;

	while ((n = getrandom(r, sizeof r, 0)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof r) {
		buf_printf(err, "getrandom: %s", n < 0 ? strerror(errno) : "short");
		return -1;
	}
	for (i = 0; i < sizeof r; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	return 0;
}

/* client_credentials with a certificate: the client assertion into
 * form. */
static int
client_assertion(const struct weir_oauth *o, struct buf *form, struct buf *err)
{
	struct buf hdr = BUF_INIT, claims = BUF_INIT, jwt = BUF_INIT;
	char x5t[32], x5t256[48], id[33];
	long long now = (long long)time(NULL);
	EVP_PKEY *k;
	int rc = -1;

	if ((k = key_from_file("private_key_file", o->private_key_file, err)) == NULL)
		return -1;
	if (jwt_cert_thumbprints(o->certificate_file, k, x5t, x5t256, err) < 0 ||
	    jti(id, err) < 0)
		goto out;
	buf_printf(&hdr, "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"x5t\":\"%s\",\"x5t#S256\":\"%s\"}",
	    x5t, x5t256);
	buf_adds(&claims, "{\"aud\":");
	json_cstr(&claims, o->token_endpoint);
	buf_adds(&claims, ",\"iss\":");
	json_cstr(&claims, o->client_id);
	buf_adds(&claims, ",\"sub\":");
	json_cstr(&claims, o->client_id);
	buf_printf(&claims, ",\"jti\":\"%s\",\"nbf\":%lld,\"iat\":%lld,\"exp\":%lld}", id, now,
	    now, now + ASSERTION_LIFE);
	buf_reserve(&jwt, 8192);
	if (jwt_sign(k, hdr.s, claims.s, &jwt, err) < 0)
		goto out;
	https_form_add(form, "grant_type", "client_credentials", 18);
	https_form_add(form, "client_id", o->client_id, strlen(o->client_id));
	https_form_add(form, "scope", o->scope, strlen(o->scope));
	https_form_add(form, "client_assertion_type", ASSERTION_TYPE, strlen(ASSERTION_TYPE));
	https_form_add(form, "client_assertion", jwt.s, jwt.len);
	rc = 0;
out:
	EVP_PKEY_free(k);
	buf_free(&hdr);
	buf_free(&claims);
	secret_wipe(&jwt);
	return rc;
}

/* service_account: the JWT bearer grant into form. */
static int
service_account(const struct weir_upstream *u, struct buf *form, struct buf *err)
{
	static const char *const need[] = { "private_key", "client_email", NULL };
	const struct weir_oauth *o = &u->oauth;
	struct buf file = BUF_INIT, why = BUF_INIT, hdr = BUF_INIT, claims = BUF_INIT;
	struct buf jwt = BUF_INIT;
	struct json_object *j = NULL;
	const char *pk, *email, *kid, *type;
	long long now = (long long)time(NULL);
	EVP_PKEY *k = NULL;
	char *what = NULL;
	size_t i;
	int rc = -1;

	if (secretfile_read("key_file", o->key_file, &file, err) < 0)
		return -1;
	if ((j = json_parse_object(file.s, file.len, SECRET_MAX, &why)) == NULL) {
		buf_printf(err, "key_file %s: not JSON: %s", o->key_file, why.s);
		goto out;
	}
	type = jp_str(jp_get(j, "type"));
	for (i = 0; need[i] && jp_str(jp_get(j, need[i])) && *jp_str(jp_get(j, need[i])); i++)
		;
	if (need[i] || (type && strcmp(type, "service_account") != 0)) {
		buf_printf(err, "key_file %s: not a service account's key (type "
		    "\"service_account\", private_key, client_email)", o->key_file);
		goto out;
	}
	pk = jp_str(jp_get(j, "private_key"));
	email = jp_str(jp_get(j, "client_email"));
	kid = jp_str(jp_get(j, "private_key_id"));
	what = xasprintf("key_file %s's private_key", o->key_file);
	if ((k = jwt_key_pem(pk, strlen(pk), what, err)) == NULL)
		goto out;
	buf_adds(&hdr, "{\"alg\":\"RS256\",\"typ\":\"JWT\"");
	if (kid && *kid) {
		buf_adds(&hdr, ",\"kid\":");
		json_cstr(&hdr, kid);
	}
	buf_addc(&hdr, '}');
	buf_adds(&claims, "{\"iss\":");
	json_cstr(&claims, email);
	buf_adds(&claims, ",\"sub\":");
	json_cstr(&claims, u->username);
	buf_adds(&claims, ",\"scope\":");
	json_cstr(&claims, o->scope);
	buf_adds(&claims, ",\"aud\":");
	json_cstr(&claims, o->token_endpoint);
	buf_printf(&claims, ",\"iat\":%lld,\"exp\":%lld}", now, now + BEARER_LIFE);
	buf_reserve(&jwt, 8192);
	if (jwt_sign(k, hdr.s, claims.s, &jwt, err) < 0)
		goto out;
	https_form_add(form, "grant_type", JWT_BEARER_GRANT, strlen(JWT_BEARER_GRANT));
	https_form_add(form, "assertion", jwt.s, jwt.len);
	rc = 0;
out:
	EVP_PKEY_free(k);
	jp_wipe(j, "private_key");
	json_object_put(j);
	secret_wipe(&file);
	secret_wipe(&jwt);
	buf_free(&why);
	buf_free(&hdr);
	buf_free(&claims);
	free(what);
	return rc;
}

int
oauth_app_form(const struct weir_upstream *u, struct buf *form, struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	struct buf secret = BUF_INIT;

	if (o->flow == OAUTH_FLOW_SERVICE)
		return service_account(u, form, err);
	if (o->certificate_file)
		return client_assertion(o, form, err);
	if (secretfile_read("client_secret_file", o->client_secret_file, &secret, err) < 0)
		return -1;
	https_form_add(form, "grant_type", "client_credentials", 18);
	https_form_add(form, "client_id", o->client_id, strlen(o->client_id));
	https_form_add(form, "client_secret", secret.s, secret.len);
	https_form_add(form, "scope", o->scope, strlen(o->scope));
	secret_wipe(&secret);
	return 0;
}
