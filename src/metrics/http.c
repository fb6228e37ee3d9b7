/*
 * http.c: weir-metrics' HTTP server on GNU libmicrohttpd, and the
 * textfile timer, on one event loop (lib/evloop.h).  It serves
 *
 *   /metrics      the Prometheus text (collect.c)
 *   /status.json  the relay's status, `weir status --json`'s document
 *                 (mail/relaystatus.h)
 *   /             the status page made of it (page.c)
 *
 * libmicrohttpd runs without threads of its own (MHD_USE_EPOLL, driven
 * by MHD_run when its epoll descriptor is readable or its timeout is
 * due), so a request is answered in the loop, as the textfile is
 * written.
 *
 * Limits, set explicitly: HTTP_CONN_MAX connections at once
 * (HTTP_CONN_PER_IP from one address), more wait in the listen backlog;
 * a connection idle for HTTP_IDLE_S seconds is closed; a request head
 * is held in HTTP_POOL bytes of memory (a longer one gets 431, or 414
 * for a request line alone that long).  One request per connection
 * (every answer says "Connection: close").
 *
 * What libmicrohttpd parses strictly (MHD_OPTION_STRICT_FOR_CLIENT 1:
 * HTTP/1.1 without Host, spaces in the target) it refuses itself; the
 * rest is checked here before anything is answered: a method of upper-
 * case letters (else 400), GET or HEAD (else 405), an origin-form target
 * (400), at most one Host header (400), no body (Content-Length other
 * than 0, or any Transfer-Encoding: 400), no query string (404).  Then
 * the client's address must be in metrics.allow (checked at accept: a
 * stranger's connection is closed unanswered, and logged), and with
 * metrics.auth_file every request must carry HTTP basic authentication
 * that the file accepts (else 401; lib/pwfile.h reads the file at each
 * request).
 *
 * Each answer is made in the loop: a scrape gives the gate
 * gate_timeout_ms to answer and reads the queue's folder names; the
 * status, RS_GATE_TIMEOUT_S per gate answer, and the queue (or weir-
 * showq's listing).
 *
 * Trusts: nothing from clients.  Config keys: metrics.address,
 * metrics.textfile, metrics.interval, metrics.allow, metrics.auth_file
 * (through struct metrics_opts), and those of mail/relaystatus.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "lib/netaddr.h"
#include "lib/jsonparse.h"
#include "lib/pwfile.h"
#include "mail/config.h"
#include "mail/gateproto.h"
#include "mail/relaystatus.h"
#include "metrics/metrics.h"

#define HTTP_REALM "weir"
/* The status document read back: the gate's (GP_STATUS_MAX) and more. */
#define STATUS_JSON_MAX (GP_STATUS_MAX + (1 << 20))

struct server {
	struct evloop *ev;
	const struct metrics_opts *o;
	struct MHD_Daemon *d;
	struct evtimer *mhd_timer;	/* MHD_get_timeout's deadline */
};

/* ---- the answers ---- */

static const char *
reason(unsigned status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 500: return "Internal Server Error";
	default: return "Internal Server Error";
	}
}

/* Queue status with body (NULL: "STATUS REASON\n") of type; a 401 asks
 * for basic authentication. */
static enum MHD_Result
answer(struct MHD_Connection *c, unsigned status, const char *type, const struct buf *body)
{
	struct MHD_Response *r;
	struct buf text = BUF_INIT;
	enum MHD_Result rc;

	if (body == NULL) {
		buf_printf(&text, "%u %s\n", status, reason(status));
		body = &text;
		type = "text/plain; charset=utf-8";
	}
	r = MHD_create_response_from_buffer(body->len, body->s ? body->s : (char *)"",
	    MHD_RESPMEM_MUST_COPY);
	buf_free(&text);
	if (r == NULL)
		return MHD_NO;
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_NO ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_NO ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") == MHD_NO ||
	    (status == 405 && MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
	    "GET, HEAD") == MHD_NO)) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	if (status == 401)
		rc = MHD_queue_basic_auth_fail_response(c, HTTP_REALM, r);
	else
		rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* ---- who may see it ---- */

/* The client's address as text (for cidr_addr and the log). */
static void
peer_text(const struct sockaddr *sa, char *out, size_t max)
{
	const void *a = sa->sa_family == AF_INET6 ?
	    (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr :
	    (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    inet_ntop(sa->sa_family, a, out, (socklen_t)max) == NULL)
		snprintf(out, max, "?");
}

/* At accept: is the client in metrics.allow?  A stranger's connection
 * is closed before a byte is read. */
static enum MHD_Result
on_accept(void *cls, const struct sockaddr *sa, socklen_t len)
{
	const struct server *s = cls;
	struct cidr a;
	char text[INET6_ADDRSTRLEN];
	size_t i;

	(void)len;
	peer_text(sa, text, sizeof text);
	if (cidr_addr(text, &a) == 0)
		for (i = 0; i < s->o->nallow; i++)
			if (cidr_match(&s->o->allow[i], &a))
				return MHD_YES;
	log_info("http: connection from %s refused: not in metrics allow", text);
	return MHD_NO;
}

/* With metrics.auth_file: 0 the request carries a user and password the
 * file accepts, else the status to answer (401; 500 when the file
 * cannot be used, said in the log). */
static unsigned
unauthorized(const struct server *s, struct MHD_Connection *c)
{
	char *user, *pass = NULL;
	struct buf why = BUF_INIT;
	unsigned st = 401;

	if (s->o->auth_file == NULL)
		return 0;
	if ((user = MHD_basic_auth_get_username_password(c, &pass)) == NULL)
		goto out;
	switch (pw_check(s->o->auth_file, user, pass ? pass : "", &why)) {
	case PW_OK:
		st = 0;
		break;
	case PW_BAD:
		log_info("http: basic authentication refused for user %s", user);
		break;
	case PW_TROUBLE:
		log_warnx("http: metrics auth_file %s", why.s);
		st = 500;
		break;
	}
out:
	if (pass) {
		explicit_bzero(pass, strlen(pass));
		MHD_free(pass);
	}
	if (user)
		MHD_free(user);
	buf_free(&why);
	return st;
}

/* ---- the request's checks ---- */

struct heads {
	unsigned hosts;
	int body;		/* a body is announced */
	int bad;		/* a name that is not a token, a control byte in a value */
};

static int
is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static enum MHD_Result
on_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct heads *h = cls;
	const char *v = value ? value : "", *p;

	(void)kind;
	for (p = key; is_tchar(*p); p++)
		;
	if (p == key || *p != '\0')
		h->bad = 1;
	for (p = v; *p; p++)
		if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
			h->bad = 1;
	if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
		h->hosts++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
		h->body = 1;
	else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0 &&
	    (v[strspn(v, "0")] != '\0' || *v == '\0'))
		h->body = 1;
	return MHD_YES;
}

static enum MHD_Result
count_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind; (void)key; (void)value;
	(*(unsigned *)cls)++;
	return MHD_YES;
}

/* The status for a request that is not served (0: it may be). */
static unsigned
refused(struct MHD_Connection *c, const char *url, const char *method, const char *version)
{
	struct heads h = { 0, 0, 0 };
	const char *p;

	for (p = method; *p >= 'A' && *p <= 'Z'; p++)
		;
	if (p == method || *p != '\0' || url[0] != '/')
		return 400;
	MHD_get_connection_values(c, MHD_HEADER_KIND, on_header, &h);
	if (h.bad || h.hosts > 1 || h.body || (h.hosts == 0 &&
	    strcmp(version, MHD_HTTP_VERSION_1_0) != 0))
		return 400;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return 405;
	return 0;
}

/* The relay's status (mail/relaystatus.h): its JSON document, or with
 * html the page made of it.  Without metrics.auth_file the viewer is
 * not authenticated: the addresses in the upstreams' replies are masked
 * in both.  200, or 500 (logged). */
static unsigned
status(struct server *s, int html, struct buf *out)
{
	struct relay_status rs;
	struct buf json = BUF_INIT, why = BUF_INIT;
	struct json_object *doc;
	struct timespec ts;
	unsigned st = 500;

	relay_status_get(&rs, s->o->src.cfg, RS_JSON, s->o->src.gate_timeout_ms);
	relay_status_json(&rs, &json);
	relay_status_free(&rs);
	if ((doc = json_parse_strict(json.s, json.len, STATUS_JSON_MAX, &why)) == NULL) {
		log_warnx("http: the relay's status is not JSON: %s", why.s);
		goto out;
	}
	if (s->o->auth_file == NULL)
		page_mask(doc);
	clock_gettime(CLOCK_REALTIME, &ts);
	if (html)
		page_render(out, doc, s->o->src.cfg->hostname,
		    (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	else if (s->o->auth_file == NULL) {
		buf_adds(out, json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN |
		    JSON_C_TO_STRING_NOSLASHESCAPE));
		buf_addc(out, '\n');
	} else
		buf_add(out, json.s, json.len);
	st = 200;
out:
	json_object_put(doc);
	buf_free(&json);
	buf_free(&why);
	return st;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct server *s = cls;
	struct buf body = BUF_INIT;
	enum MHD_Result rc;
	unsigned st, args = 0;

	(void)upload_data;
	/* Everything is decided on the first call, before any body (there
	 * is none to be had: a request that announces one is refused). */
	if (*con_cls != NULL || *upload_data_size != 0)
		return MHD_NO;
	*con_cls = s;
	if ((st = refused(c, url, method, version)) != 0 || (st = unauthorized(s, c)) != 0)
		return answer(c, st, NULL, NULL);
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, count_arg, &args);
	if (args == 0 && strcmp(url, "/metrics") == 0) {
		metrics_collect(&s->o->src, &body);
		rc = answer(c, 200, "text/plain; version=0.0.4; charset=utf-8", &body);
	} else if (args == 0 && (strcmp(url, "/") == 0 || strcmp(url, "/status.json") == 0)) {
		st = status(s, url[1] == '\0', &body);
		rc = answer(c, st, url[1] == '\0' ? "text/html; charset=utf-8" :
		    "application/json", st == 200 ? &body : NULL);
	} else
		rc = answer(c, 404, NULL, NULL);
	buf_free(&body);
	return rc;
}

/* ---- libmicrohttpd in the loop ---- */

static void on_mhd_timer(struct evloop *ev, struct evtimer *t, void *arg);

static unsigned
connections(const struct server *s)
{
	const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->d,
	    MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

	return i ? i->num_connections : 0;
}

/* Run libmicrohttpd, then arm the timer it asks for.  At HTTP_CONN_MAX
 * it takes the listening socket out of its epoll set, and puts it back
 * only at the start of a run once a connection has gone, a run nothing
 * else would start (0.9.75 asks no timeout for it; a run may reach the
 * limit and leave it again).  So below the limit it runs once more, and
 * again while a run changes the connections (a few times at most). */
static void
mhd_run(struct server *s)
{
	MHD_UNSIGNED_LONG_LONG ms;
	unsigned before, i = 0;

	do {
		before = connections(s);
		if (MHD_run(s->d) == MHD_NO)
			log_warnx("libmicrohttpd: MHD_run failed");
	} while (++i < 8 && connections(s) < HTTP_CONN_MAX &&
	    (i == 1 || connections(s) != before));
	if (s->mhd_timer)
		evloop_timer_cancel(s->ev, s->mhd_timer);
	s->mhd_timer = NULL;
	if (MHD_get_timeout(s->d, &ms) == MHD_YES)
		s->mhd_timer = evloop_timer_at(s->ev, clock_mono_ms() + ms, on_mhd_timer, s);
}

static void
on_mhd_timer(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct server *s = arg;

	(void)ev; (void)t;
	s->mhd_timer = NULL;
	mhd_run(s);
}

static void
on_mhd_fd(struct evloop *ev, int fd, int events, void *arg)
{
	(void)ev; (void)fd; (void)events;
	mhd_run(arg);
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof line, fmt, ap);
	n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	log_info("http: %s", line);
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
	if (listen(fd, HTTP_BACKLOG) < 0)
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

static void
serve(struct server *s)
{
	const union MHD_DaemonInfo *info;
	int lfd = listen_on(s->o->address);

	s->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, on_accept, s,
	    on_request, s,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)lfd,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_MAX,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_CONN_PER_IP,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_POOL,
	    MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
	    MHD_OPTION_END);
	if (s->d == NULL)
		fatalx(111, "libmicrohttpd would not start on %s", s->o->address);
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL)
		fatalx(111, "libmicrohttpd has no epoll descriptor");
	evloop_watch(s->ev, info->epoll_fd, EV_READ, on_mhd_fd, s);
	mhd_run(s);
}

int
metrics_run(const struct metrics_opts *o)
{
	struct server s;

	memset(&s, 0, sizeof s);
	s.o = o;
	s.ev = evloop_new();
	if (o->address)
		serve(&s);
	if (o->textfile) {
		log_info("writing %s every %lld s", o->textfile, o->interval);
		evloop_timer_at(s.ev, clock_mono_ms(), on_textfile, &s);
	}
	if (evloop_run(s.ev) < 0)
		fatal(111, "event loop");
	return 0;
}
