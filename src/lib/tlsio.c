/*
 * tlsio.c: see tlsio.h.  After an SSL_* call that did not complete,
 * SSL_get_error says whether OpenSSL waits for the read descriptor or the
 * write one (both set on the SSL: SSL_get_rfd, SSL_get_wfd), whether the
 * peer closed, or what failed.  An end of stream without close_notify,
 * a reset or a broken pipe is the peer closing, as a close_notify is.
 *
 * Trusts: nothing the peer sends.  Config keys: none.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "lib/deadline.h"
#include "lib/evloop.h"
#include "lib/tlsio.h"

SSL_CTX *
tlsio_ctx_new(const SSL_METHOD *method, struct buf *err)
{
	SSL_CTX *ctx = SSL_CTX_new(method);

	if (ctx == NULL) {
		tlsio_errors(err, "cannot make a TLS context");
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		tlsio_errors(err, "cannot require TLS 1.2");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	return ctx;
}

void
tlsio_errors(struct buf *err, const char *what)
{
	unsigned long e;
	char line[256];
	int first = 1;

	if (err == NULL) {
		ERR_clear_error();
		return;
	}
	buf_printf(err, "%s", what);
	while ((e = ERR_get_error()) != 0) {
		ERR_error_string_n(e, line, sizeof line);
		buf_printf(err, "%s%s", first ? ": " : "; ", line);
		first = 0;
	}
}

/* Wait for ssl's read (or write) descriptor until deadline (or the
 * program's limit, lib/deadline.h), in slices that fit poll's int; EINTR
 * goes round again.  0 ready, or a negative status (TLSIO_ERROR: errno). */
static int
wait_for(SSL *ssl, int want_write, uint64_t deadline)
{
	struct pollfd p = { want_write ? SSL_get_wfd(ssl) : SSL_get_rfd(ssl),
	    want_write ? POLLOUT : POLLIN, 0 };

	for (;;) {
		uint64_t now = clock_mono_ms();
		int r;

		deadline = deadline_limit(deadline);	/* the program's limit (deadline.h) */
		if (now >= deadline)
			return TLSIO_TIMEOUT;
		r = poll(&p, 1, (int)(deadline - now > 60000 ? 60000 : deadline - now));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return TLSIO_ERROR;
	}
}

/* After an SSL_* call on ssl returned r <= 0: 1 to call again (waited
 * for what it asked), else a negative status with err filled for
 * TLSIO_ERROR. */
static int
retry(SSL *ssl, int r, uint64_t deadline, const char *what, struct buf *err)
{
	int e = SSL_get_error(ssl, r), w;

	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		w = wait_for(ssl, e == SSL_ERROR_WANT_WRITE, deadline);
		if (w == TLSIO_ERROR && err)
			buf_printf(err, "poll: %s", strerror(errno));
		return w == 0 ? 1 : w;
	case SSL_ERROR_ZERO_RETURN:
		return TLSIO_EOF;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() == 0) {
			if (errno == 0 || errno == ECONNRESET || errno == EPIPE)
				return TLSIO_EOF;
			if (err)
				buf_printf(err, "%s: %s", what, strerror(errno));
			return TLSIO_ERROR;
		}
		tlsio_errors(err, what);
		return TLSIO_ERROR;
	default:
		if (ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
			ERR_clear_error();
			return TLSIO_EOF;
		}
		tlsio_errors(err, what);
		return TLSIO_ERROR;
	}
}

enum tlsio_status
tlsio_handshake(SSL *ssl, uint64_t deadline_ms, const char *what, struct buf *err)
{
	int r;

	ERR_clear_error();
	while ((r = SSL_do_handshake(ssl)) != 1)
		if ((r = retry(ssl, r, deadline_ms, what, err)) != 1)
			return (enum tlsio_status)r;
	return TLSIO_OK;
}

ssize_t
tlsio_read(SSL *ssl, void *p, size_t n, uint64_t deadline_ms, struct buf *err)
{
	size_t got = 0;
	int r;

	ERR_clear_error();
	for (;;) {
		r = SSL_read_ex(ssl, p, n, &got);
		if (r == 1)
			return (ssize_t)got;
		r = retry(ssl, r, deadline_ms, "TLS read", err);
		if (r != 1)
			return r;
	}
}

enum tlsio_status
tlsio_write(SSL *ssl, const void *p, size_t n, uint64_t deadline_ms, struct buf *err)
{
	const char *c = p;
	size_t done;
	int r;

	ERR_clear_error();
	while (n > 0) {
		done = 0;
		r = SSL_write_ex(ssl, c, n, &done);
		if (r == 1) {
			c += done;
			n -= done;
			continue;
		}
		r = retry(ssl, r, deadline_ms, "TLS write", err);
		if (r != 1)
			return (enum tlsio_status)r;
	}
	return TLSIO_OK;
}

const char *
tlsio_describe(const SSL *ssl, char *buf, size_t max)
{
	snprintf(buf, max, "%s %s", SSL_get_version(ssl), SSL_get_cipher_name(ssl));
	return buf;
}
