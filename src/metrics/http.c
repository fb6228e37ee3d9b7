/*
 * http.c: weir-metrics' server: HTTP/1.0 and 1.1, GET (and HEAD) of
 * /metrics only, one request per connection, on one event loop
 * (lib/evloop.h), and the textfile timer.
 *
 * A request head is read whole (at most HTTP_REQ_MAX bytes, else 431)
 * and parsed strictly (http_parse): a request line of an upper-case
 * method, an origin-form target and HTTP/1.0 or HTTP/1.1, header lines
 * "name: value" of token names and visible bytes, every line ending in
 * CRLF (a bare CR or LF, a folded line or a NUL is 400), HTTP/1.1 with
 * exactly one Host header, no body (Content-Length other than 0 or any
 * Transfer-Encoding is 400).  Then the answer, "Connection: close", and
 * the connection ends.  Each connection has HTTP_TIMEOUT_MS for all of
 * it (a client that sends nothing gets 408); at most HTTP_CONN_MAX at
 * once, the rest wait in the listen backlog.  The scrape itself is done
 * in the loop (the gate has gate_timeout_ms to answer; the queue scan
 * reads directories only).
 *
 * Trusts: nothing from clients.  Config keys: metrics.address,
 * metrics.textfile, metrics.interval (through struct metrics_opts).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/netaddr.h"
#include "metrics/metrics.h"

/* ---- the parser ---- */

static int
is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* One header line [p, e) (no CRLF): 0 ok, -1 bad.  Counts Host and
 * refuses a body. */
static int
header(const char *p, const char *e, int *hosts)
{
	const char *colon = p, *v;
	size_t nlen;

	while (colon < e && is_tchar(*colon))
		colon++;
	if (colon == p || colon == e || *colon != ':')
		return -1;
	nlen = (size_t)(colon - p);
	for (v = colon + 1; v < e; v++)
		if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
			return -1;
	for (v = colon + 1; v < e && (*v == ' ' || *v == '\t'); v++)
		;
	if (nlen == 4 && strncasecmp(p, "Host", 4) == 0)
		(*hosts)++;
	if (nlen == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0)
		return -1;
	if (nlen == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
		while (v < e && *v == '0')
			v++;
		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		if (v != e || e[-1] != '0')
			return -1;
	}
	return 0;
}

int
http_parse(const char *s, size_t len, int *head)
{
	const char *end = NULL, *p, *e, *sp1, *sp2;
	size_t i;
	int hosts = 0, v11;

	*head = 0;
	/* Every CR before an LF, every LF after a CR, no NUL. */
	for (i = 0; i < len; i++) {
		if (s[i] == '\0' || (s[i] == '\r' && i + 1 < len && s[i + 1] != '\n') ||
		    (s[i] == '\n' && (i == 0 || s[i - 1] != '\r')))
			return 400;
		if (s[i] == '\n' && i >= 3 && s[i - 2] == '\n') {
			end = s + i + 1;
			break;
		}
	}
	if (end == NULL)
		return len >= HTTP_REQ_MAX ? 431 : 0;
	/* The request line. */
	e = memchr(s, '\r', (size_t)(end - s));
	for (p = s; p < e && *p >= 'A' && *p <= 'Z'; p++)
		;
	sp1 = p;
	if (sp1 == s || sp1 == e || *sp1 != ' ')
		return 400;
	for (p = sp1 + 1; p < e && (unsigned char)*p > ' ' && *p != 0x7f; p++)
		;
	sp2 = p;
	if (sp2 == sp1 + 1 || sp1[1] != '/' || sp2 == e || *sp2 != ' ')
		return 400;
	if (e - sp2 - 1 != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
		return 400;
	if (sp2[8] != '0' && sp2[8] != '1')
		return sp2[8] >= '2' && sp2[8] <= '9' ? 505 : 400;
	v11 = sp2[8] == '1';
	/* The headers, up to the empty line. */
	for (p = e + 2; p < end - 2; p = e + 2) {
		e = memchr(p, '\r', (size_t)(end - p));
		if (header(p, e, &hosts) < 0)
			return 400;
	}
	if (v11 ? hosts != 1 : hosts > 1)
		return 400;
	*head = sp1 - s == 4 && strncmp(s, "HEAD", 4) == 0;
	if (!*head && !(sp1 - s == 3 && strncmp(s, "GET", 3) == 0))
		return 405;
	if (sp2 - sp1 - 1 != 8 || strncmp(sp1 + 1, "/metrics", 8) != 0)
		return 404;
	return 200;
}

/* ---- the server ---- */

struct server;

struct conn {
	struct server *s;
	int fd;
	struct buf in, out;
	size_t off;		/* of out, written */
	struct evtimer *deadline;
	struct conn *next;
};

struct server {
	struct evloop *ev;
	const struct metrics_opts *o;
	int lfd;
	struct conn *conns;
	size_t nconn;
	int paused;		/* not accepting: HTTP_CONN_MAX reached */
};

static void on_accept(struct evloop *ev, int fd, int events, void *arg);

static void
conn_free(struct conn *c)
{
	struct server *s = c->s;
	struct conn **pp;

	for (pp = &s->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	evloop_unwatch(s->ev, c->fd);
	evloop_timer_cancel(s->ev, c->deadline);
	close(c->fd);
	buf_free(&c->in);
	buf_free(&c->out);
	free(c);
	s->nconn--;
	if (s->paused) {
		s->paused = 0;
		evloop_watch(s->ev, s->lfd, EV_READ, on_accept, s);
	}
}

static void
on_write(struct evloop *ev, int fd, int events, void *arg)
{
	struct conn *c = arg;
	ssize_t k;

	(void)ev; (void)events;
	while (c->off < c->out.len) {
		k = send(fd, c->out.s + c->off, c->out.len - c->off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0) {
			conn_free(c);
			return;
		}
		c->off += (size_t)k;
	}
	conn_free(c);
}

static const char *
reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 505: return "HTTP Version Not Supported";
	default: return "Internal Server Error";
	}
}

/* Queue the answer and start writing it. */
static void
respond(struct conn *c, int status, int head)
{
	struct buf body = BUF_INIT;

	if (status == 200)
		metrics_collect(&c->s->o->src, &body);
	else
		buf_printf(&body, "%d %s\n", status, reason(status));
	buf_printf(&c->out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	    "%sConnection: close\r\n\r\n", status, reason(status), status == 200 ?
	    "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8", body.len,
	    status == 405 ? "Allow: GET, HEAD\r\n" : "");
	if (!head)
		buf_add(&c->out, body.s ? body.s : "", body.len);
	buf_free(&body);
	if (shutdown(c->fd, SHUT_RD) < 0 && errno != ENOTCONN)
		log_warn("shutdown");
	evloop_watch(c->s->ev, c->fd, EV_WRITE, on_write, c);
}

static void
on_deadline(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct conn *c = arg;

	(void)ev; (void)t;
	c->deadline = NULL;
	if (c->out.len)		/* the answer would not go: give up */
		conn_free(c);
	else
		respond(c, 408, 0);
}

static void
on_read(struct evloop *ev, int fd, int events, void *arg)
{
	struct conn *c = arg;
	char tmp[2048];
	size_t room = HTTP_REQ_MAX - c->in.len;
	ssize_t k;
	int status, head;

	(void)ev; (void)events;
	k = read(fd, tmp, sizeof tmp < room ? sizeof tmp : room);
	if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (k <= 0) {
		conn_free(c);
		return;
	}
	buf_add(&c->in, tmp, (size_t)k);
	status = http_parse(c->in.s, c->in.len, &head);
	if (status != 0)
		respond(c, status, head);
}

static void
on_accept(struct evloop *ev, int fd, int events, void *arg)
{
	struct server *s = arg;
	struct conn *c;
	int cfd;

	(void)events;
	while (s->nconn < HTTP_CONN_MAX) {
		cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				log_warn("accept");
			return;
		}
		c = xcalloc(1, sizeof *c);
		c->s = s;
		c->fd = cfd;
		c->next = s->conns;
		s->conns = c;
		s->nconn++;
		c->deadline = evloop_timer_at(ev, clock_mono_ms() + HTTP_TIMEOUT_MS, on_deadline, c);
		evloop_watch(ev, cfd, EV_READ, on_read, c);
	}
	s->paused = 1;
	evloop_unwatch(ev, fd);
}

/* ---- the textfile ---- */

static void
on_textfile(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct server *s = arg;
	struct buf text = BUF_INIT;

	(void)t;
	metrics_collect(&s->o->src, &text);
	if (metrics_textfile(s->o->textfile, &text) < 0)
		log_warn("write %s", s->o->textfile);
	buf_free(&text);
	evloop_timer_at(ev, clock_mono_ms() + (uint64_t)s->o->interval * 1000, on_textfile, s);
}

/* Bind and listen; log the address (with the port the kernel chose for
 * port 0). */
static int
listen_on(const char *address)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct buf why = BUF_INIT;
	char host[INET6_ADDRSTRLEN];
	int fd, one = 1;
	unsigned port;

	if (hostport_parse(address, &ss, &len, &why) < 0)
		fatalx(2, "metrics address %s: %s", address, why.s);
	buf_free(&why);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatal(111, "socket");
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
		fatal(111, "setsockopt");
	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		fatal(111, "bind %s", address);
	if (listen(fd, 64) < 0)
		fatal(111, "listen %s", address);
	len = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		fatal(111, "getsockname");
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
		port = ntohs(a->sin_port);
		log_info("serving http://%s:%u/metrics", host, port);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
		port = ntohs(a->sin6_port);
		log_info("serving http://[%s]:%u/metrics", host, port);
	}
	return fd;
}

int
metrics_run(const struct metrics_opts *o)
{
	struct server s;

	memset(&s, 0, sizeof s);
	s.o = o;
	s.lfd = -1;
	s.ev = evloop_new();
	if (o->address) {
		s.lfd = listen_on(o->address);
		evloop_watch(s.ev, s.lfd, EV_READ, on_accept, &s);
	}
	if (o->textfile) {
		log_info("writing %s every %lld s", o->textfile, o->interval);
		evloop_timer_at(s.ev, clock_mono_ms(), on_textfile, &s);
	}
	if (evloop_run(s.ev) < 0)
		fatal(111, "event loop");
	return 0;
}
