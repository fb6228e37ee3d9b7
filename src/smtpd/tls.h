/*
 * tls.h: weir-smtpd's server side of STARTTLS, the only file of weir-smtpd
 * that includes OpenSSL.  TLS 1.2 or later, the certificate chain and key
 * from listen.cert_file and listen.key_file, loaded once at start (before
 * the listener forks, so a bad file is an error at start, not per
 * client).  Reads and writes run on the session's non-blocking socket;
 * timeout_ms bounds the whole call, however the peer dribbles its bytes
 * (the handshake, one read, one write).  The handshake, reads and
 * writes are lib/tlsio.c's, shared with weir-remote; the names here are
 * weir-smtpd's own (tls_conn_*), apart from weir-remote's tls_*.
 *
 * Trusts: the certificate files (the administrator's).  Config keys:
 * listen.cert_file, listen.key_file.
 */
#ifndef WEIR_SMTPD_TLS_H
#define WEIR_SMTPD_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/buf.h"

struct tls_server;	/* the loaded certificate (an SSL_CTX) */
struct tls_conn;	/* one connection (an SSL) */

/* NULL with the reason in why. */
struct tls_server *tls_server_new(const char *cert_file, const char *key_file, struct buf *why);
void tls_server_free(struct tls_server *t);

/* The handshake, reading rfd and writing wfd (one socket, or the two
 * pipes of a --pipe client).  NULL with the reason in why. */
struct tls_conn *tls_accept(struct tls_server *t, int rfd, int wfd, int timeout_ms,
    struct buf *why);
/* >0 bytes, 0 end of stream (the client closed, with close_notify or
 * without), -1 error, -2 timeout. */
ssize_t tls_conn_read(struct tls_conn *c, void *p, size_t n, int timeout_ms);
/* 0 all written, -1 error or timeout. */
int tls_conn_write(struct tls_conn *c, const void *p, size_t n, int timeout_ms);
/* "TLSv1.3 TLS_AES_256_GCM_SHA384", for the Received field and logs. */
void tls_conn_describe(struct tls_conn *c, struct buf *out);
void tls_conn_free(struct tls_conn *c);

#endif
