/*
 * tls.c: the OpenSSL code of weir-remote, and its only file that
 * includes OpenSSL headers; see tls.h.
 *
 * Security stance: TLS 1.2 or later; with verify on, the chain must lead
 * to the CA file (or the system store) and the certificate must name the
 * host (SSL_set1_host, or the IP address for a literal), else the
 * handshake fails; a configured fingerprint (SHA-256 of the DER
 * certificate) must match as well, verify or not.  No renegotiation, no
 * compression (OpenSSL 3 defaults).  What weir-smtpd's TLS shares with
 * it (the context's floor, the handshake, reads and writes until a
 * deadline, OpenSSL's errors as text) is lib/tlsio.c.
 *
 * Trusts: the CA store.  Config keys: verify, ca_file, fingerprint.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "lib/alloc.h"
#include "lib/tlsio.h"
#include "mail/sessproto.h"
#include "remote/tls.h"

/* tls.h's statuses are tlsio's, without OpenSSL in tls.h. */
_Static_assert(TLS_OK == (int)TLSIO_OK && TLS_ERROR == (int)TLSIO_ERROR &&
    TLS_TIMEOUT == (int)TLSIO_TIMEOUT && TLS_EOF == (int)TLSIO_EOF, "tls_status");

struct tls_client {
	SSL_CTX *ctx;
	int verify;
	unsigned char pin[32];
	int pinned;
	SSL_SESSION *resume;	/* offered in the next handshake; NULL: none */
};

struct tls_session {
	SSL *ssl;
};

static int
parse_pin(const char *hex, unsigned char out[32])
{
	size_t n = 0;
	int hi = -1;

	for (; *hex; hex++) {
		int v;

		if (*hex == ':')
			continue;
		if (*hex >= '0' && *hex <= '9')
			v = *hex - '0';
		else if (*hex >= 'a' && *hex <= 'f')
			v = *hex - 'a' + 10;
		else if (*hex >= 'A' && *hex <= 'F')
			v = *hex - 'A' + 10;
		else
			return -1;
		if (hi < 0) {
			hi = v;
			continue;
		}
		if (n >= 32)
			return -1;
		out[n++] = (unsigned char)(hi << 4 | v);
		hi = -1;
	}
	return n == 32 && hi < 0 ? 0 : -1;
}

struct tls_client *
tls_client_new(int verify, const char *ca_file, const char *fingerprint, struct buf *err)
{
	struct tls_client *c = xcalloc(1, sizeof *c);

	c->verify = verify;
	if (fingerprint) {
		if (parse_pin(fingerprint, c->pin) < 0) {
			buf_printf(err, "fingerprint: not 64 hex digits");
			goto fail;
		}
		c->pinned = 1;
	}
	c->ctx = tlsio_ctx_new(TLS_client_method(), err);
	if (c->ctx == NULL)
		goto fail;
	if (ca_file) {
		if (SSL_CTX_load_verify_locations(c->ctx, ca_file, NULL) != 1) {
			tlsio_errors(err, "");
			buf_printf(err, " (ca_file %s)", ca_file);
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(c->ctx) != 1) {
		tlsio_errors(err, "cannot load the system CA store");
		goto fail;
	}
	SSL_CTX_set_verify(c->ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	return c;
fail:
	tls_client_free(c);
	return NULL;
}

void
tls_client_free(struct tls_client *c)
{
	if (c == NULL)
		return;
	if (c->resume)
		SSL_SESSION_free(c->resume);
	if (c->ctx)
		SSL_CTX_free(c->ctx);
	free(c);
}

int
tls_client_resume(struct tls_client *c, const void *der, size_t n)
{
	const unsigned char *p = der;
	SSL_SESSION *ss;

	if (n == 0 || n > SESSION_TLS_MAX || (ss = d2i_SSL_SESSION(NULL, &p, (long)n)) == NULL)
		return -1;
	if (p != (const unsigned char *)der + n || !SSL_SESSION_is_resumable(ss)) {
		SSL_SESSION_free(ss);
		return -1;
	}
	if (c->resume)
		SSL_SESSION_free(c->resume);
	c->resume = ss;
	return 0;
}

int
tls_session_export(struct tls_session *s, struct buf *out)
{
	SSL_SESSION *ss = SSL_get1_session(s->ssl);
	unsigned char *p;
	int n;

	buf_reset(out);
	if (ss == NULL)
		return -1;
	if (!SSL_SESSION_is_resumable(ss) || (n = i2d_SSL_SESSION(ss, NULL)) <= 0 ||
	    n > SESSION_TLS_MAX) {
		SSL_SESSION_free(ss);
		return -1;
	}
	buf_reserve(out, (size_t)n);
	p = (unsigned char *)out->s;
	if (i2d_SSL_SESSION(ss, &p) != n) {
		SSL_SESSION_free(ss);
		return -1;
	}
	out->len = (size_t)n;
	SSL_SESSION_free(ss);
	return 0;
}

int
tls_session_resumed(const struct tls_session *s)
{
	return SSL_session_reused(s->ssl) == 1;
}

static int
check_pin(struct tls_client *c, struct tls_session *s, struct buf *err)
{
	X509 *cert;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int ok;

	if (!c->pinned)
		return 0;
	cert = SSL_get1_peer_certificate(s->ssl);
	if (cert == NULL) {
		buf_printf(err, "the server sent no certificate");
		return -1;
	}
	ok = X509_digest(cert, EVP_sha256(), md, &mdlen) == 1 && mdlen == 32 &&
	    memcmp(md, c->pin, 32) == 0;
	X509_free(cert);
	if (!ok)
		buf_printf(err, "certificate fingerprint does not match the pinned SHA-256");
	return ok ? 0 : -1;
}

enum tls_status
tls_handshake(struct tls_client *c, int fd, const char *host, uint64_t deadline_ms,
    struct tls_session **out, struct buf *err)
{
	struct tls_session *s = xcalloc(1, sizeof *s);
	unsigned char addr[16];
	enum tlsio_status k;
	int ip;
	long vr;

	*out = NULL;
	ERR_clear_error();
	s->ssl = SSL_new(c->ctx);
	if (s->ssl == NULL || SSL_set_fd(s->ssl, fd) != 1) {
		tlsio_errors(err, "SSL_new");
		goto fail;
	}
	ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
	if (ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), host) != 1) {
			tlsio_errors(err, "cannot set the address to verify");
			goto fail;
		}
	} else if (SSL_set_tlsext_host_name(s->ssl, host) != 1 || SSL_set1_host(s->ssl, host) != 1) {
		tlsio_errors(err, "cannot set the host name to verify");
		goto fail;
	}
	/* A session this upstream gave an earlier connection (verified as
	 * strictly then: the chain, the name and the pin are checked below
	 * on the certificate it carries all the same). */
	if (c->resume && SSL_set_session(s->ssl, c->resume) != 1) {
		tlsio_errors(err, "cannot offer the session to resume");
		goto fail;
	}
	SSL_set_connect_state(s->ssl);
	if ((k = tlsio_handshake(s->ssl, deadline_ms, "TLS handshake", err)) != TLSIO_OK) {
		if (k == TLSIO_ERROR && (vr = SSL_get_verify_result(s->ssl)) != X509_V_OK) {
			buf_reset(err);
			buf_printf(err, "certificate verification failed: %s",
			    X509_verify_cert_error_string(vr));
		} else if (k == TLSIO_EOF) {
			buf_printf(err, "connection closed during the TLS handshake");
		} else if (k == TLSIO_TIMEOUT) {
			buf_printf(err, "timeout in the TLS handshake");
		}
		SSL_free(s->ssl);
		free(s);
		return k == TLSIO_EOF ? TLS_ERROR : (enum tls_status)k;
	}
	if (c->verify && (vr = SSL_get_verify_result(s->ssl)) != X509_V_OK) {
		buf_printf(err, "certificate verification failed: %s",
		    X509_verify_cert_error_string(vr));
		goto fail;
	}
	if (check_pin(c, s, err) < 0)
		goto fail;
	*out = s;
	return TLS_OK;
fail:
	if (s->ssl)
		SSL_free(s->ssl);
	free(s);
	return TLS_ERROR;
}

ssize_t
tls_read(struct tls_session *s, void *p, size_t n, uint64_t deadline_ms, struct buf *err)
{
	return tlsio_read(s->ssl, p, n, deadline_ms, err);
}

enum tls_status
tls_write(struct tls_session *s, const void *p, size_t n, uint64_t deadline_ms, struct buf *err)
{
	return (enum tls_status)tlsio_write(s->ssl, p, n, deadline_ms, err);
}

const char *
tls_describe(const struct tls_session *s, char *buf, size_t max)
{
	char d[128];

	snprintf(buf, max, "%s%s", tlsio_describe(s->ssl, d, sizeof d),
	    tls_session_resumed(s) ? " (resumed)" : "");
	return buf;
}

const char *
tls_peer_describe(const struct tls_session *s, char *buf, size_t max)
{
	X509 *cert = SSL_get0_peer_certificate(s->ssl);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	size_t o;
	char subject[256] = "?", issuer[256] = "?", hex[3 * EVP_MAX_MD_SIZE + 1] = "?";
	BIO *b;

	if (cert == NULL) {
		snprintf(buf, max, "no certificate");
		return buf;
	}
	/* RFC 2253 order, one line, UTF-8 kept, no escaping of it. */
	if ((b = BIO_new(BIO_s_mem())) != NULL) {
		int n;

		if (X509_NAME_print_ex(b, X509_get_subject_name(cert), 0,
		    XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0 &&
		    (n = BIO_read(b, subject, sizeof subject - 1)) >= 0)
			subject[n] = '\0';
		(void)BIO_reset(b);
		if (X509_NAME_print_ex(b, X509_get_issuer_name(cert), 0,
		    XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0 &&
		    (n = BIO_read(b, issuer, sizeof issuer - 1)) >= 0)
			issuer[n] = '\0';
		BIO_free(b);
	}
	if (X509_digest(cert, EVP_sha256(), md, &mdlen) == 1)
		for (i = 0, o = 0; i < mdlen && o + 4 <= sizeof hex; i++)
			o += (size_t)snprintf(hex + o, sizeof hex - o, "%s%02X", i ? ":" : "", md[i]);
	ERR_clear_error();
	snprintf(buf, max, "subject %s, issuer %s, SHA-256 %s", subject, issuer, hex);
	return buf;
}

void
tls_session_free(struct tls_session *s)
{
	if (s == NULL)
		return;
	(void)SSL_shutdown(s->ssl);	/* close_notify; the reply is not awaited */
	ERR_clear_error();
	SSL_free(s->ssl);
	free(s);
}
