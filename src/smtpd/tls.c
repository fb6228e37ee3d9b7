/*
 * tls.c: see tls.h.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "smtpd/tls.h"

struct tls_server {
	SSL_CTX *ctx;
};

struct tls_conn {
	SSL *ssl;
	int rfd, wfd;
};

static void
ssl_errors(struct buf *why)
{
	unsigned long e;
	char s[256];

	while ((e = ERR_get_error()) != 0) {
		ERR_error_string_n(e, s, sizeof s);
		buf_printf(why, "%s%s", why->len ? "; " : "", s);
	}
}

struct tls_server *
tls_server_new(const char *cert_file, const char *key_file, struct buf *why)
{
	struct tls_server *t = xcalloc(1, sizeof *t);

	t->ctx = SSL_CTX_new(TLS_server_method());
	if (t->ctx == NULL) {
		buf_adds(why, "cannot make a TLS context: ");
		goto fail;
	}
	if (!SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION)) {
		buf_adds(why, "cannot require TLS 1.2: ");
		goto fail;
	}
	SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_file) != 1) {
		buf_printf(why, "%s: ", cert_file);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(t->ctx, key_file, SSL_FILETYPE_PEM) != 1) {
		buf_printf(why, "%s: ", key_file);
		goto fail;
	}
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		buf_printf(why, "%s does not match %s: ", key_file, cert_file);
		goto fail;
	}
	return t;
fail:
	ssl_errors(why);
	tls_server_free(t);
	return NULL;
}

void
tls_server_free(struct tls_server *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

/* Wait for what OpenSSL asked for, until deadline (clock_mono_ms).  0
 * ready, -1 error, -2 timeout. */
static int
wait_for(struct tls_conn *c, int sslerr, uint64_t deadline)
{
	struct pollfd p = { sslerr == SSL_ERROR_WANT_WRITE ? c->wfd : c->rfd,
	    sslerr == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, 0 };
	uint64_t now;
	int r;

	do {
		now = clock_mono_ms();
		if (now >= deadline)
			return -2;
		r = poll(&p, 1, (int)(deadline - now > INT_MAX ? INT_MAX : deadline - now));
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -1 : r == 0 ? -2 : 0;
}

static uint64_t
deadline_in(int timeout_ms)
{
	return clock_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
}

struct tls_conn *
tls_accept(struct tls_server *t, int rfd, int wfd, int timeout_ms, struct buf *why)
{
	struct tls_conn *c = xcalloc(1, sizeof *c);
	uint64_t deadline = deadline_in(timeout_ms);
	int r, e;

	c->rfd = rfd;
	c->wfd = wfd;
	c->ssl = SSL_new(t->ctx);
	if (c->ssl == NULL || SSL_set_rfd(c->ssl, rfd) != 1 || SSL_set_wfd(c->ssl, wfd) != 1) {
		buf_adds(why, "cannot start TLS: ");
		ssl_errors(why);
		goto fail;
	}
	for (;;) {
		ERR_clear_error();
		if ((r = SSL_accept(c->ssl)) == 1)
			return c;
		e = SSL_get_error(c->ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
			buf_adds(why, "TLS handshake failed");
			if (e == SSL_ERROR_SYSCALL && errno)
				buf_printf(why, ": %s", strerror(errno));
			else if (e == SSL_ERROR_SSL || e == SSL_ERROR_SYSCALL) {
				buf_adds(why, ": ");
				ssl_errors(why);
			}
			goto fail;
		}
		if ((r = wait_for(c, e, deadline)) < 0) {
			buf_adds(why, r == -2 ? "TLS handshake timed out" : "poll failed");
			goto fail;
		}
	}
fail:
	tls_conn_free(c);
	return NULL;
}

ssize_t
tls_read(struct tls_conn *c, void *p, size_t n, int timeout_ms)
{
	uint64_t deadline = deadline_in(timeout_ms);
	int r, e;

	for (;;) {
		ERR_clear_error();
		r = SSL_read(c->ssl, p, n > 1 << 30 ? 1 << 30 : (int)n);
		if (r > 0)
			return r;
		e = SSL_get_error(c->ssl, r);
		if (e == SSL_ERROR_ZERO_RETURN)
			return 0;
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			return e == SSL_ERROR_SYSCALL && errno == 0 ? 0 : -1;
		if ((r = wait_for(c, e, deadline)) < 0)
			return r;
	}
}

int
tls_write(struct tls_conn *c, const void *p, size_t n, int timeout_ms)
{
	const char *s = p;
	uint64_t deadline = deadline_in(timeout_ms);
	int r, e;

	while (n > 0) {
		ERR_clear_error();
		r = SSL_write(c->ssl, s, n > 1 << 30 ? 1 << 30 : (int)n);
		if (r > 0) {
			s += r;
			n -= (size_t)r;
			continue;
		}
		e = SSL_get_error(c->ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			return -1;
		if (wait_for(c, e, deadline) < 0)
			return -1;
	}
	return 0;
}

void
tls_describe(struct tls_conn *c, struct buf *out)
{
	buf_printf(out, "%s %s", SSL_get_version(c->ssl), SSL_get_cipher_name(c->ssl));
}

void
tls_conn_free(struct tls_conn *c)
{
	if (c == NULL)
		return;
	SSL_free(c->ssl);
	free(c);
}
