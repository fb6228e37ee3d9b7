/*
 * tls.h: TLS for the remote deliverer.  tls.c is weir-remote's only file
 * that includes OpenSSL headers (with lib/tlsio.c, the part weir-smtpd
 * shares); everything else sees these opaque types.
 *
 * A tls_client holds what every connection shares: the CA (a file, or
 * the system store), whether to verify the chain and the host name, and
 * an optional SHA-256 fingerprint the peer's certificate must have.  A
 * tls_session is one handshake on a connected, non-blocking socket; reads
 * and writes wait in poll() until a deadline on the monotonic clock.
 *
 * Trusts: the CA store it is given; nothing the peer sends.
 * Config keys (through struct weir_upstream): verify, ca_file, fingerprint.
 */
#ifndef WEIR_TLS_H
#define WEIR_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/buf.h"

struct tls_client;
struct tls_session;

/* NULL with a reason in err (a CA file that cannot be read). */
struct tls_client *tls_client_new(int verify, const char *ca_file, const char *fingerprint,
    struct buf *err);
void tls_client_free(struct tls_client *c);

enum tls_status {
	TLS_OK = 0,
	TLS_ERROR = -1,		/* protocol or certificate failure; reason in err */
	TLS_TIMEOUT = -2,
	TLS_EOF = -3,		/* the peer closed the connection */
};

/* Handshake as a client on fd for host (SNI and name check; an address
 * literal is checked against the certificate's IP addresses).  On TLS_OK
 * *out is the session. */
enum tls_status tls_handshake(struct tls_client *c, int fd, const char *host,
    uint64_t deadline_ms, struct tls_session **out, struct buf *err);
/* Bytes read (> 0), or a negative enum tls_status. */
ssize_t tls_read(struct tls_session *s, void *p, size_t n, uint64_t deadline_ms,
    struct buf *err);
/* All n bytes, or a negative enum tls_status. */
enum tls_status tls_write(struct tls_session *s, const void *p, size_t n, uint64_t deadline_ms,
    struct buf *err);
/* TLS session resumption (RFC 8446 2.2, RFC 5077): a session this
 * client's upstream gave an earlier connection, as DER, offered in the
 * next handshakes (0; -1 if it does not parse or cannot be resumed).
 * The certificate it carries is checked as in a full handshake (chain
 * and name as verified then, the pin again). */
int tls_client_resume(struct tls_client *c, const void *der, size_t n);
/* The connection's session as DER into out, once resumable (a TLS 1.3
 * ticket arrives after the handshake: ask after a reply was read); 0, or
 * -1 (none yet). */
int tls_session_export(struct tls_session *s, struct buf *out);
int tls_session_resumed(const struct tls_session *s);
/* "TLSv1.3 TLS_AES_256_GCM_SHA384", for the log. */
const char *tls_describe(const struct tls_session *s, char *buf, size_t max);
/* The peer's certificate, for weir-remote -T: "subject CN=..., issuer
 * CN=..., SHA-256 AB:CD:...", or "no certificate". */
const char *tls_peer_describe(const struct tls_session *s, char *buf, size_t max);
/* Send close_notify (no waiting) and free. */
void tls_session_free(struct tls_session *s);

#endif
