/*
 * tlsio.h: what weir's two TLS endpoints share, weir-remote's client
 * (remote/tls.c) and weir-smtpd's server (smtpd/tls.c), each its
 * program's only file that includes OpenSSL: a context that refuses
 * anything before TLS 1.2, the OpenSSL error queue as text, and the
 * handshake, reads and writes of one SSL on non-blocking descriptors
 * (the ones set on it: a socket, or weir-smtpd --pipe's two pipes),
 * waiting in poll(2) for what OpenSSL asks until a deadline on the
 * monotonic clock (clock_mono_ms).  Where a function takes err, it may
 * be NULL: the reason is then dropped.
 *
 * Only programs linked with OpenSSL may call it (the Makefile's PKGS_
 * lines: weir-remote, weir-smtpd; weir-queue is set-id and must not
 * load OpenSSL): the archive member is linked only where it is used.
 *
 * Trusts: nothing the peer sends.  Config keys: none.
 */
#ifndef WEIR_LIB_TLSIO_H
#define WEIR_LIB_TLSIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/buf.h"

/* OpenSSL's own names for them, without its headers here. */
typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_method_st SSL_METHOD;

enum tlsio_status {
	TLSIO_OK = 0,
	TLSIO_ERROR = -1,	/* protocol, certificate or system failure; reason in err */
	TLSIO_TIMEOUT = -2,
	TLSIO_EOF = -3,		/* the peer closed (with close_notify or without) */
};

/* A context for method (TLS_client_method(), TLS_server_method()):
 * TLS 1.2 or later, partial writes.  NULL with the reason in err. */
SSL_CTX *tlsio_ctx_new(const SSL_METHOD *method, struct buf *err);

/* The OpenSSL error queue, emptied into err as "what: error; error"
 * (what alone if the queue is empty). */
void tlsio_errors(struct buf *err, const char *what);

/* The handshake of ssl, set to connect or accept, its descriptors set.
 * TLSIO_OK, or a negative status with the reason after "what: " in err
 * (EOF and timeout: none; the caller says it). */
enum tlsio_status tlsio_handshake(SSL *ssl, uint64_t deadline_ms, const char *what,
    struct buf *err);
/* Bytes read (> 0), or a negative enum tlsio_status. */
ssize_t tlsio_read(SSL *ssl, void *p, size_t n, uint64_t deadline_ms, struct buf *err);
/* All n bytes (TLSIO_OK), or a negative enum tlsio_status. */
enum tlsio_status tlsio_write(SSL *ssl, const void *p, size_t n, uint64_t deadline_ms,
    struct buf *err);

/* "TLSv1.3 TLS_AES_256_GCM_SHA384", for logs and the Received field. */
const char *tlsio_describe(const SSL *ssl, char *buf, size_t max);

#endif
