/*
 * https.h: one HTTPS POST of a form, for OAuth's token and device
 * endpoints (mail/oauth.c); https.c is the only file that includes
 * libcurl's headers.
 *
 * Always: https only (no other scheme, no redirect followed), the peer's
 * certificate chain and name verified (against ca_file when given, else
 * the system's store), no proxy but the one given (an HTTP proxy, the
 * TLS tunnelled through it with CONNECT, its credentials if any by basic
 * authentication; the environment's proxy variables are ignored, as
 * they are in the set-user-id weir-remote anyway), the whole
 * exchange within the timeout, the answer at most HTTPS_BODY_MAX bytes.
 * The form is handed to libcurl without a copy; the caller wipes it.
 *
 * Trusts: nothing the server sends (the body is returned, not read).
 * Config keys: none (the caller's oauth section: ca_file, timeout,
 * proxy, proxy_auth_file).
 */
#ifndef WEIR_HTTPS_H
#define WEIR_HTTPS_H

#include <stddef.h>

#include "lib/buf.h"

#define HTTPS_BODY_MAX (64 * 1024)

struct https_post {
	const char *url;	/* https://... */
	const char *ca_file;	/* NULL: the system's store */
	long long timeout;	/* seconds for the whole exchange */
	const char *form;	/* application/x-www-form-urlencoded */
	size_t formlen;
	const char *proxy;	/* "http://host:port", or NULL: none */
	const char *proxy_auth;	/* "user:password" for it, or NULL */
};

/* POST the form.  0: an answer came, its status in *status and its body
 * in body; -1: none (connection, TLS, timeout, an answer over
 * HTTPS_BODY_MAX), the reason in err. */
int https_post(const struct https_post *p, long *status, struct buf *body, struct buf *err);

/* Append s to b, form-encoded (RFC 3986 unreserved bytes as they are,
 * every other byte %XX). */
void https_form_add(struct buf *b, const char *name, const char *s, size_t n);

#endif
