/*
 * tls.c: see tls.h.  The handshake, reads and writes are lib/tlsio.c's,
 * shared with weir-remote; this file loads the certificate and keeps
 * weir-smtpd's own return values (a timeout per call).
 */
#include <stdint.h>
#include <stdlib.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/tlsio.h"
#include "smtpd/tls.h"

struct tls_server {
	SSL_CTX *ctx;
};

struct tls_conn {
	SSL *ssl;
};

struct tls_server *
tls_server_new(const char *cert_file, const char *key_file, struct buf *why)
{
	struct tls_server *t = xcalloc(1, sizeof *t);

	t->ctx = tlsio_ctx_new(TLS_server_method(), why);
	if (t->ctx == NULL)
		goto fail;
	SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_file) != 1) {
		tlsio_errors(why, cert_file);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(t->ctx, key_file, SSL_FILETYPE_PEM) != 1) {
		tlsio_errors(why, key_file);
		goto fail;
	}
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		buf_printf(why, "%s does not match %s", key_file, cert_file);
		tlsio_errors(why, "");
		goto fail;
	}
	return t;
fail:
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

static uint64_t
deadline_in(int timeout_ms)
{
	return clock_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
}

struct tls_conn *
tls_accept(struct tls_server *t, int rfd, int wfd, int timeout_ms, struct buf *why)
{
	struct tls_conn *c = xcalloc(1, sizeof *c);

	ERR_clear_error();
	c->ssl = SSL_new(t->ctx);
	if (c->ssl == NULL || SSL_set_rfd(c->ssl, rfd) != 1 || SSL_set_wfd(c->ssl, wfd) != 1) {
		tlsio_errors(why, "cannot start TLS");
		goto fail;
	}
	SSL_set_accept_state(c->ssl);
	switch (tlsio_handshake(c->ssl, deadline_in(timeout_ms), "TLS handshake failed", why)) {
	case TLSIO_OK:
		return c;
	case TLSIO_EOF:
		buf_adds(why, "TLS handshake failed: the client closed the connection");
		break;
	case TLSIO_TIMEOUT:
		buf_adds(why, "TLS handshake timed out");
		break;
	case TLSIO_ERROR:
		break;
	}
fail:
	tls_conn_free(c);
	return NULL;
}

ssize_t
tls_conn_read(struct tls_conn *c, void *p, size_t n, int timeout_ms)
{
	ssize_t r = tlsio_read(c->ssl, p, n, deadline_in(timeout_ms), NULL);

	return r == TLSIO_EOF ? 0 : r;
}

int
tls_conn_write(struct tls_conn *c, const void *p, size_t n, int timeout_ms)
{
	return tlsio_write(c->ssl, p, n, deadline_in(timeout_ms), NULL) == TLSIO_OK ? 0 : -1;
}

void
tls_conn_describe(struct tls_conn *c, struct buf *out)
{
	char d[128];

	buf_adds(out, tlsio_describe(c->ssl, d, sizeof d));
}

void
tls_conn_free(struct tls_conn *c)
{
	if (c == NULL)
		return;
	SSL_free(c->ssl);
	free(c);
}
