/*
 * conn.h: one connection to the upstream, plain or TLS, with deadlines.
 * Reads replies line by line (CRLF-terminated, at most
 * SMTP_REPLY_LINE_MAX bytes with the CRLF), writes whole buffers, and
 * switches to TLS in place for STARTTLS, refusing to if the peer has
 * sent anything past the STARTTLS reply.
 *
 * Trusts: nothing the peer sends.  Config keys: none (timeouts arrive as
 * deadlines from smtp.c).
 */
#ifndef WEIR_CONN_H
#define WEIR_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/buf.h"
#include "mail/smtpreply.h"
#include "remote/tls.h"

enum conn_status {
	CONN_OK = 0,
	CONN_ERROR = -1,	/* I/O or TLS error; reason in err */
	CONN_TIMEOUT = -2,
	CONN_EOF = -3,		/* the peer closed the connection */
	CONN_BADLINE = -4,	/* line too long, bare CR or LF, NUL */
};

struct conn {
	int fd;
	struct tls_session *tls;
	char peer[64];		/* "127.0.0.1:2525", for logs */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char in[4096];
	size_t inpos, inlen;
};

/* Resolve host with getaddrinfo and connect to each address in turn until
 * one answers.  On failure err says why for every address tried. */
enum conn_status conn_connect(struct conn *c, const char *host, unsigned port,
    uint64_t deadline_ms, struct buf *err);
/* Is the connected peer a loopback address (127/8, ::1, ::ffff:127/104)? */
int conn_peer_is_loopback(const struct conn *c);
/* One line without its CRLF into line (at least SMTP_REPLY_LINE_MAX). */
enum conn_status conn_read_line(struct conn *c, char *line, size_t *len, uint64_t deadline_ms,
    struct buf *err);
enum conn_status conn_write(struct conn *c, const void *p, size_t n, uint64_t deadline_ms,
    struct buf *err);
/* Bytes received and not yet consumed. */
static inline size_t conn_pending(const struct conn *c) { return c->inlen - c->inpos; }
/* Start TLS on the connection (for STARTTLS or smtps).  Fails if bytes
 * are pending: they came in the clear and would be read as if protected. */
enum conn_status conn_start_tls(struct conn *c, struct tls_client *tc, const char *host,
    uint64_t deadline_ms, struct buf *err);
void conn_close(struct conn *c);

#endif
