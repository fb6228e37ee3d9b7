/*
 * conn.c: see conn.h.  Sockets are non-blocking; every wait is a poll()
 * bounded by the caller's deadline on the monotonic clock.  Writes use
 * send(MSG_NOSIGNAL), so a closed peer is an error, not a SIGPIPE.
 * Trusts: nothing the peer sends.  Config keys: none.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "remote/conn.h"
#include "remote/wait.h"

/* 0 ready, CONN_TIMEOUT, CONN_ERROR (reason in err). */
static int
wait_for(int fd, short ev, uint64_t deadline, struct buf *err)
{
	switch (wait_fd(fd, ev, deadline)) {
	case WAIT_READY:
		return 0;
	case WAIT_TIMEOUT:
		return CONN_TIMEOUT;
	default:
		buf_printf(err, "poll: %s", strerror(errno));
		return CONN_ERROR;
	}
}

static void
addr_text(const struct sockaddr *sa, char *out, size_t max)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		(void)inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);	/* fits */
		port = ntohs(s4->sin_port);
		snprintf(out, max, "%s:%u", host, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		(void)inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);	/* fits */
		port = ntohs(s6->sin6_port);
		snprintf(out, max, "[%s]:%u", host, port);
	} else {
		snprintf(out, max, "?");
	}
}

/* One address: 0 connected, else a conn_status with err appended. */
static int
try_one(struct conn *c, const struct addrinfo *ai, uint64_t deadline, struct buf *err)
{
	int fd, r, soerr = 0;
	socklen_t len = sizeof soerr;
	char text[64];

	addr_text(ai->ai_addr, text, sizeof text);
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0) {
		buf_printf(err, "%s%s: socket: %s", err->len ? "; " : "", text, strerror(errno));
		return CONN_ERROR;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			buf_printf(err, "%s%s: %s", err->len ? "; " : "", text, strerror(errno));
			(void)close(fd);	/* never connected: nothing to lose */
			return CONN_ERROR;
		}
		r = wait_for(fd, POLLOUT, deadline, err);
		if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (r != 0 || soerr != 0) {
			buf_printf(err, "%s%s: %s", err->len ? "; " : "", text,
			    r == CONN_TIMEOUT ? "connect timed out" : strerror(soerr ? soerr : EIO));
			(void)close(fd);	/* never connected: nothing to lose */
			return r ? r : CONN_ERROR;
		}
	}
	c->fd = fd;
	memcpy(&c->addr, ai->ai_addr, ai->ai_addrlen);
	c->addrlen = ai->ai_addrlen;
	snprintf(c->peer, sizeof c->peer, "%s", text);
	return 0;
}

enum conn_status
conn_connect(struct conn *c, const char *host, unsigned port, uint64_t deadline_ms,
    struct buf *err)
{
	struct addrinfo hints, *res = NULL, *ai;
	char service[16];
	int r, last = CONN_ERROR;

	memset(c, 0, sizeof *c);
	c->fd = -1;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	snprintf(service, sizeof service, "%u", port);
	r = getaddrinfo(host, service, &hints, &res);
	if (r == EAI_ADDRFAMILY || r == EAI_NONAME) {
		hints.ai_flags = 0;	/* loopback-only hosts: no configured address */
		r = getaddrinfo(host, service, &hints, &res);
	}
	if (r != 0) {
		buf_printf(err, "cannot resolve %s: %s", host,
		    r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
		return CONN_ERROR;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		last = try_one(c, ai, deadline_ms, err);
		if (last == 0 || last == CONN_TIMEOUT)
			break;
	}
	freeaddrinfo(res);
	return last == 0 ? CONN_OK : (enum conn_status)last;
}

int
conn_peer_is_loopback(const struct conn *c)
{
	if (c->addr.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&c->addr;

		return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
	}
	if (c->addr.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&c->addr;

		if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
			return 1;
		return IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && s6->sin6_addr.s6_addr[12] == 127;
	}
	return 0;
}

/* Refill the input buffer: CONN_OK with at least one byte, or why not. */
static enum conn_status
fill(struct conn *c, uint64_t deadline, struct buf *err)
{
	ssize_t r;

	if (c->inpos > 0) {
		memmove(c->in, c->in + c->inpos, c->inlen - c->inpos);
		c->inlen -= c->inpos;
		c->inpos = 0;
	}
	if (c->inlen >= sizeof c->in)
		return CONN_BADLINE;
	if (c->tls) {
		r = tls_read(c->tls, c->in + c->inlen, sizeof c->in - c->inlen, deadline, err);
		if (r > 0) {
			c->inlen += (size_t)r;
			return CONN_OK;
		}
		return r == TLS_TIMEOUT ? CONN_TIMEOUT : r == TLS_EOF ? CONN_EOF : CONN_ERROR;
	}
	for (;;) {
		int w;

		r = read(c->fd, c->in + c->inlen, sizeof c->in - c->inlen);
		if (r > 0) {
			c->inlen += (size_t)r;
			return CONN_OK;
		}
		if (r == 0)
			return CONN_EOF;
		if (errno == ECONNRESET)
			return CONN_EOF;
		if (errno != EAGAIN && errno != EINTR) {
			buf_printf(err, "read: %s", strerror(errno));
			return CONN_ERROR;
		}
		if ((w = wait_for(c->fd, POLLIN, deadline, err)) != 0)
			return (enum conn_status)w;
	}
}

enum conn_status
conn_read_line(struct conn *c, char *line, size_t *len, uint64_t deadline_ms, struct buf *err)
{
	size_t scanned = 0;

	for (;;) {
		size_t i, avail = c->inlen - c->inpos;
		const char *p = c->in + c->inpos;
		enum conn_status st;

		for (i = scanned; i < avail; i++) {
			if (p[i] == '\0' || (p[i] == '\n' && (i == 0 || p[i - 1] != '\r')) ||
			    (i > 0 && p[i - 1] == '\r' && p[i] != '\n')) {
				buf_printf(err, "%s in a reply line",
				    p[i] == '\0' ? "NUL" : p[i] == '\n' ? "bare LF" : "bare CR");
				return CONN_BADLINE;
			}
			if (p[i] == '\n') {
				if (i + 1 > SMTP_REPLY_LINE_MAX) {
					buf_printf(err, "reply line over %d bytes", SMTP_REPLY_LINE_MAX);
					return CONN_BADLINE;
				}
				memcpy(line, p, i - 1);
				line[i - 1] = '\0';
				*len = i - 1;
				c->inpos += i + 1;
				return CONN_OK;
			}
		}
		scanned = avail;
		if (avail >= SMTP_REPLY_LINE_MAX) {
			buf_printf(err, "reply line over %d bytes", SMTP_REPLY_LINE_MAX);
			return CONN_BADLINE;
		}
		/* fill() moves the bytes to the start: scanned stays valid. */
		if ((st = fill(c, deadline_ms, err)) != CONN_OK)
			return st;
	}
}

enum conn_status
conn_write(struct conn *c, const void *p, size_t n, uint64_t deadline_ms, struct buf *err)
{
	const char *s = p;

	/* Left alone past the deadline (wait.h): weir-gate may no longer
	 * count what this would make the upstream accept. */
	if (wait_too_late()) {
		buf_printf(err, "weir-send is gone and its grant's grace is running out");
		return CONN_TIMEOUT;
	}
	if (c->tls) {
		enum tls_status t = tls_write(c->tls, p, n, deadline_ms, err);

		return t == TLS_OK ? CONN_OK : t == TLS_TIMEOUT ? CONN_TIMEOUT :
		    t == TLS_EOF ? CONN_EOF : CONN_ERROR;
	}
	while (n > 0) {
		ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
		int k;

		if (w > 0) {
			s += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
			return CONN_EOF;
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			buf_printf(err, "write: %s", strerror(errno));
			return CONN_ERROR;
		}
		if ((k = wait_for(c->fd, POLLOUT, deadline_ms, err)) != 0)
			return (enum conn_status)k;
	}
	return CONN_OK;
}

enum conn_status
conn_start_tls(struct conn *c, struct tls_client *tc, const char *host, uint64_t deadline_ms,
    struct buf *err)
{
	enum tls_status t;

	if (conn_pending(c) > 0) {
		buf_printf(err, "%zu bytes arrived in the clear after the STARTTLS reply",
		    conn_pending(c));
		return CONN_BADLINE;
	}
	c->inpos = c->inlen = 0;
	t = tls_handshake(tc, c->fd, host, deadline_ms, &c->tls, err);
	return t == TLS_OK ? CONN_OK : t == TLS_TIMEOUT ? CONN_TIMEOUT : CONN_ERROR;
}

void
conn_close(struct conn *c)
{
	if (c->tls) {
		tls_session_free(c->tls);
		c->tls = NULL;
	}
	if (c->fd >= 0 && close(c->fd) < 0)
		log_warn("close %s", c->peer);
	c->fd = -1;
	c->inpos = c->inlen = 0;
}
