/*
 * http.c: weir-metrics' HTTP server and the textfile timer, on one event
 * loop (lib/evloop.h).  It serves
 *
 *   /metrics      the Prometheus text (collect.c)
 *   /status.json  the relay's status, `weir status --json`'s document
 *                 (mail/relaystatus.h)
 *   /             the status page made of it (page.c)
 *
 * A connection goes through two stages:
 *
 *   1. its head.  weir-metrics accepts it itself: a client outside
 *      metrics.allow is closed unanswered; at most HTTP_PENDING_MAX
 *      connections, HTTP_PENDING_PER_IP from one address, wait for their
 *      request head, which must all come within HTTP_HEAD_MS of the
 *      connect (a deadline, not an idle time: a header line every few
 *      seconds does not keep it).  At either limit the newcomer is taken
 *      and the oldest waiting connection of the address with the most is
 *      closed, so that no one address, nor many slow ones, keeps another
 *      from being served.  The head is read with MSG_PEEK (the bytes stay
 *      for libmicrohttpd) on an edge-triggered epoll set of its own, and
 *      checked by head.c; a head that fails is answered here (one head,
 *      the security headers) and the connection closed.
 *   2. its answer.  A head that passes is handed to GNU libmicrohttpd
 *      (MHD_add_connection; MHD_USE_EPOLL, driven by MHD_run when its
 *      epoll descriptor is readable or its timeout is due), at most
 *      HTTP_ANSWERING_MAX at once (503 beyond), one request per
 *      connection ("Connection: close"), an answer not taken for
 *      HTTP_IDLE_S dropped.  With metrics.auth_file every request must
 *      carry basic authentication that lib/pwfile.h accepts (401, or 500
 *      when the file cannot be used); after AUTH_FREE_FAILS failures in a
 *      row an address waits 1 s, doubling up to AUTH_WAIT_MAX_S, before a
 *      try is checked again (429 with Retry-After meanwhile, no crypt(3)).
 *
 * Every answer carries "X-Content-Type-Options: nosniff", "Referrer-
 * Policy: no-referrer", "X-Frame-Options: DENY", "Cache-Control: no-
 * store" and a Content-Security-Policy that allows nothing but the
 * page's one inline style sheet, by its SHA-256 (no script, no frame
 * ancestor, no form, no base).
 *
 * The gate is asked in the loop, never waited for long: one STATUS JSON
 * 3600 at a time on a non-blocking connection (gate_status_socket, else
 * gate_socket).  An answer younger than GATE_FRESH_MS is used as it is;
 * else a new question is asked, and a request waits for its answer at
 * most GATE_WAIT_MS from when it was asked (libmicrohttpd's suspend),
 * then is answered without it: weir_gate_up 0, the page saying the gate
 * did not answer in time.  A question not answered after GATE_GIVEUP_MS
 * is given up.  What is made of an answer (the scrape, the status) is
 * kept SNAPSHOT_MS and served again meanwhile.  The queue's part is had
 * when a scrape or a status is made: weir-showq's summary (QUEUE_WAIT_MS
 * at most) or its listing (SHOWQ_WAIT_MS), or the queue itself when this
 * user may read it.
 *
 * Log lines of a refusal (not in allow, a head too slow, a connection
 * closed to make room, basic authentication refused) say each kind from
 * one address at most once every LOG_EVERY_MS, with the number since.
 *
 * Trusts: nothing from clients.  Config keys: metrics.address,
 * metrics.textfile, metrics.interval, metrics.allow, metrics.auth_file
 * (through struct metrics_opts), and those of mail/relaystatus.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/jsonparse.h"
#include "lib/log.h"
#include "lib/netaddr.h"
#include "lib/pwfile.h"
#include "mail/config.h"
#include "mail/gateclient.h"
#include "mail/gateproto.h"
#include "mail/qsummary.h"
#include "mail/relaystatus.h"
#include "metrics/metrics.h"

#define HTTP_REALM "weir"
/* The status document read back: the gate's (GP_STATUS_MAX) and more. */
#define STATUS_JSON_MAX (GP_STATUS_MAX + (1 << 20))

/* A connection whose request head has not all come. */
struct pend {
	int fd;
	struct sockaddr_storage sa;
	socklen_t salen;
	char ip[INET6_ADDRSTRLEN];
	uint64_t since;			/* accepted, monotonic ms */
	struct pend *prev, *next;	/* oldest first */
};

/* What is remembered of an address: its authentication failures, and
 * the refusals logged (LK_QUEUE: the queue's summary not had, under the
 * address "-"). */
enum log_kind { LK_ALLOW, LK_SLOW, LK_EVICT, LK_AUTH, LK_QUEUE, LK_N };
struct addr {
	char ip[INET6_ADDRSTRLEN];
	uint64_t seen;			/* last used, monotonic ms */
	unsigned fails;			/* failures in a row */
	uint64_t wait_until;		/* no try checked before */
	uint64_t logged[LK_N];		/* a line of that kind last written */
	unsigned quiet[LK_N];		/* refusals since, not written */
};

/* A request waiting for the gate (c NULL: the textfile). */
struct waiter {
	struct MHD_Connection *c;
	uint64_t until;
	struct waiter *next;
};

/* A request being answered (libmicrohttpd's per-request pointer). */
struct req {
	enum http_path path;
	int waited;			/* it was suspended once */
};

/* A made answer, served again while it is young. */
struct snapshot {
	struct buf body;
	uint64_t at;			/* monotonic ms; 0: none */
};

struct server {
	struct evloop *ev;
	const struct metrics_opts *o;
	struct MHD_Daemon *d;
	struct evtimer *mhd_timer;	/* MHD_get_timeout's deadline */
	int in_run, rerun;		/* in MHD_run; run again after it */
	int lfd, pfd;			/* listening; the pending heads' epoll set */
	struct pend *pend, *pend_tail;
	size_t npend;
	struct evtimer *head_timer;	/* the oldest pending head's deadline */
	/* The gate. */
	struct gate_client gc;
	int asking;			/* a STATUS is out on gc */
	uint64_t asked;			/* when */
	struct buf gdoc;		/* its last document */
	int gok;			/* the last question was answered */
	uint64_t gat;			/* when it was answered or failed; 0: never */
	char gwhy[256];
	struct waiter *waiters;
	struct evtimer *wait_timer;
	struct snapshot metrics, status;
	struct addr *addrs;
	size_t naddrs;
	char csp[256];
};

/* ---- log lines, at most one a minute per kind and address ---- */

static struct addr *
addr_get(struct server *s, const char *ip)
{
	struct addr *a, *old = NULL;
	size_t i;

	for (i = 0; i < s->naddrs; i++) {
		if (strcmp(s->addrs[i].ip, ip) == 0) {
			a = &s->addrs[i];
			goto found;
		}
		if (old == NULL || s->addrs[i].seen < old->seen)
			old = &s->addrs[i];
	}
	if (s->naddrs < AUTH_ADDRS_MAX) {
		s->addrs = xrealloc(s->addrs, (s->naddrs + 1) * sizeof *s->addrs);
		a = &s->addrs[s->naddrs++];
	} else
		a = old;	/* the one longest unused is forgotten */
	memset(a, 0, sizeof *a);
	snprintf(a->ip, sizeof a->ip, "%s", ip);
found:
	a->seen = clock_mono_ms();
	return a;
}

static void PRINTFLIKE(4, 5)
limited(struct server *s, const char *ip, enum log_kind k, const char *fmt, ...)
{
	struct addr *a = addr_get(s, ip);
	uint64_t now = clock_mono_ms();
	char line[512];
	va_list ap;

	if (a->logged[k] && now - a->logged[k] < LOG_EVERY_MS) {
		a->quiet[k]++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (a->quiet[k])
		log_info("http: %s (and %u more from %s in the last minute, not logged)", line,
		    a->quiet[k], ip);
	else
		log_info("http: %s", line);
	a->logged[k] = now;
	a->quiet[k] = 0;
}

/* ---- the headers of every answer ---- */

static const char *const sec_headers[][2] = {
	{ "X-Content-Type-Options", "nosniff" },
	{ "Referrer-Policy", "no-referrer" },
	{ "X-Frame-Options", "DENY" },
	{ "Cache-Control", "no-store" },
};

/* The Content-Security-Policy, with the page's style sheet's hash. */
static void
make_csp(struct server *s)
{
	unsigned char md[EVP_MAX_MD_SIZE], b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
	unsigned len = 0;

	if (EVP_Digest(page_style, strlen(page_style), md, &len, EVP_sha256(), NULL) != 1)
		fatalx(111, "SHA-256 of the page's style sheet");
	EVP_EncodeBlock(b64, md, (int)len);
	snprintf(s->csp, sizeof s->csp, "default-src 'none'; style-src 'sha256-%s'; "
	    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'", b64);
}

static const char *
reason(unsigned status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 414: return "URI Too Long";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Internal Server Error";
	}
}

/* ---- the answers of libmicrohttpd (stage 2) ---- */

/* Queue status with body (NULL: "STATUS REASON\n") of type; a 401 asks
 * for basic authentication, a 429 says when to try again. */
static enum MHD_Result
answer(struct server *s, struct MHD_Connection *c, unsigned status, const char *type,
    const struct buf *body, unsigned retry_s)
{
	struct MHD_Response *r;
	struct buf text = BUF_INIT;
	char after[32];
	enum MHD_Result rc;
	size_t i;
	int ok;

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
	ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_YES &&
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES &&
	    MHD_add_response_header(r, "Content-Security-Policy", s->csp) == MHD_YES;
	for (i = 0; ok && i < sizeof sec_headers / sizeof sec_headers[0]; i++)
		ok = MHD_add_response_header(r, sec_headers[i][0], sec_headers[i][1]) == MHD_YES;
	if (ok && status == 429) {
		snprintf(after, sizeof after, "%u", retry_s);
		ok = MHD_add_response_header(r, "Retry-After", after) == MHD_YES;
	}
	if (!ok) {
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

/* A user name from a client, for a log line: printable ASCII, cut. */
static void
printable(char *out, size_t max, const char *in)
{
	size_t i;

	for (i = 0; in[i] && i + 1 < max && i < 64; i++)
		out[i] = (unsigned char)in[i] >= ' ' && (unsigned char)in[i] < 0x7f ? in[i] : '?';
	out[i] = '\0';
}

/* With metrics.auth_file: 0 the request carries a user and password the
 * file accepts; else the status to answer (401; 429 while its address
 * waits, *retry_s; 500 when the file cannot be used, said in the log). */
static unsigned
unauthorized(struct server *s, struct MHD_Connection *c, unsigned *retry_s)
{
	const union MHD_ConnectionInfo *ci;
	char *user, *pass = NULL, ip[INET6_ADDRSTRLEN] = "?", name[80];
	struct buf why = BUF_INIT;
	struct addr *a;
	uint64_t now = clock_mono_ms(), wait;
	unsigned st = 401;

	if (s->o->auth_file == NULL)
		return 0;
	if ((ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS)) != NULL)
		peer_text(ci->client_addr, ip, sizeof ip);
	a = addr_get(s, ip);
	if (now < a->wait_until) {
		*retry_s = (unsigned)((a->wait_until - now + 999) / 1000);
		limited(s, ip, LK_AUTH, "basic authentication from %s not checked: %u failures in "
		    "a row, it waits %u s", ip, a->fails, *retry_s);
		return 429;
	}
	if ((user = MHD_basic_auth_get_username_password(c, &pass)) == NULL)
		goto out;
	switch (pw_check(s->o->auth_file, user, pass ? pass : "", &why)) {
	case PW_OK:
		a->fails = 0;
		st = 0;
		break;
	case PW_BAD:
		if (++a->fails > AUTH_FREE_FAILS) {
			wait = 1000ULL << (a->fails - AUTH_FREE_FAILS - 1 < 6 ?
			    a->fails - AUTH_FREE_FAILS - 1 : 6);
			if (wait > AUTH_WAIT_MAX_S * 1000ULL)
				wait = AUTH_WAIT_MAX_S * 1000ULL;
			a->wait_until = clock_mono_ms() + wait;
		}
		printable(name, sizeof name, user);
		limited(s, ip, LK_AUTH, "basic authentication refused for user %s from %s (%u in "
		    "a row)", name, ip, a->fails);
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

/* ---- the gate, asked in the loop ---- */

static void mhd_run(struct server *s);
static void resume_waiters(struct server *s, int all);

static void
gate_done(struct server *s, int ok, const char *fmt, ...) PRINTFLIKE(3, 4);

static void
gate_done(struct server *s, int ok, const char *fmt, ...)
{
	va_list ap;

	if (s->asking)
		evloop_unwatch(s->ev, s->gc.fd);
	if (s->gc.fd >= 0)
		gc_close(&s->gc);
	s->asking = 0;
	s->gok = ok;
	s->gat = clock_mono_ms();
	va_start(ap, fmt);
	vsnprintf(s->gwhy, sizeof s->gwhy, fmt, ap);
	va_end(ap);
	resume_waiters(s, 1);
}

static void
on_gate(struct evloop *ev, int fd, int events, void *arg)
{
	struct server *s = arg;
	struct gp_reply r;
	const char *why = "?";
	int k;

	(void)ev; (void)fd; (void)events;
	k = gc_fill(&s->gc);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k <= 0) {
		gate_done(s, 0, "%s", k == 0 ? "it closed the connection" : strerror(errno));
		return;
	}
	if ((k = gc_next_reply(&s->gc, &r, &why)) == 0) {
		if (s->gc.in.len > GP_STATUS_MAX + GP_LINE_MAX)
			gate_done(s, 0, "its answer is too long");
		return;
	}
	if (k < 0 || r.verb != GP_R_STATUS) {
		gate_done(s, 0, "%s", k < 0 ? why : "not a STATUS answer");
		return;
	}
	buf_reset(&s->gdoc);
	buf_add(&s->gdoc, s->gc.status.s ? s->gc.status.s : "", s->gc.status.len);
	gate_done(s, 1, "answered");
}

/* Ask the gate now, unless a question is out. */
static void
gate_ask(struct server *s)
{
	const char *sock = s->o->src.gate_socket;

	if (s->asking)
		return;
	if (gc_connect_status(&s->gc, sock, NULL, -1) == NULL) {
		gate_done(s, 0, "connect %s: %s", sock, errno == EAGAIN ? "its backlog is full "
		    "(it does not accept)" : strerror(errno));
		return;
	}
	if (gc_status_history(&s->gc, RS_HISTORY_S) < 0) {
		gate_done(s, 0, "write to %s: %s", sock, strerror(errno));
		return;
	}
	s->asking = 1;
	s->asked = clock_mono_ms();
	evloop_watch(s->ev, s->gc.fd, EV_READ, on_gate, s);
}

/* 1 when the gate's last answer (or failure) is young enough to serve;
 * else a question is asked (or given up, if out too long), and 0. */
static int
gate_current(struct server *s)
{
	uint64_t now = clock_mono_ms();

	if (s->asking && now - s->asked >= GATE_GIVEUP_MS)
		gate_done(s, 0, "no answer in %d s: given up", GATE_GIVEUP_MS / 1000);
	if (s->gat && now - s->gat < GATE_FRESH_MS)
		return 1;
	gate_ask(s);
	return s->gat && now - s->gat < GATE_FRESH_MS;
}

/* The gate's document to use now, or NULL with why: its last answer if
 * young enough, else it did not answer in time. */
static const struct buf *
gate_doc(struct server *s, char *why, size_t max)
{
	uint64_t now = clock_mono_ms();

	if (s->gat && now - s->gat < GATE_FRESH_MS) {
		snprintf(why, max, "%s", s->gwhy);
		return s->gok ? &s->gdoc : NULL;
	}
	if (s->asking)
		snprintf(why, max, "no answer within %.1f s (asked %.1f s ago)",
		    GATE_WAIT_MS / 1000.0, (double)(now - s->asked) / 1000.0);
	else
		snprintf(why, max, "not asked");
	return NULL;
}

/* ---- what is served ---- */

static void
make_metrics(struct server *s)
{
	const struct buf *g;
	struct qsummary q;
	struct buf why = BUF_INIT;
	const char *from;
	char gwhy[256];
	int qok;

	buf_reset(&s->metrics.body);
	g = gate_doc(s, gwhy, sizeof gwhy);
	qok = qsummary_get(s->o->src.cfg, QUEUE_WAIT_MS, &q, &from, &why) == 0;
	if (!qok)
		limited(s, "-", LK_QUEUE, "the queue's summary (%s): %s", from, why.s);
	metrics_format(g ? (g->s ? g->s : "") : NULL, g ? g->len : 0, qok ? &q : NULL, time(NULL),
	    &s->metrics.body);
	metrics_oauth(s->o->src.cfg, &s->metrics.body);
	if (qok)
		qsummary_free(&q);
	buf_free(&why);
	s->metrics.at = clock_mono_ms();
}

static void
make_status(struct server *s)
{
	struct relay_status rs;
	const struct buf *g;
	char gwhy[256];

	buf_reset(&s->status.body);
	g = gate_doc(s, gwhy, sizeof gwhy);
	relay_status_from(&rs, s->o->src.cfg, s->o->src.gate_socket, g ? g->s : NULL,
	    g ? g->len : 0, gwhy, SHOWQ_WAIT_MS);
	relay_status_json(&rs, &s->status.body);
	relay_status_free(&rs);
	s->status.at = clock_mono_ms();
}

/* The relay's status, made (or the snapshot): its JSON document, or
 * with html the page made of it.  Without metrics.auth_file the viewer
 * is not authenticated: the addresses in the upstreams' replies are
 * masked in both.  200, or 500 (logged). */
static unsigned
status(struct server *s, int html, struct buf *out)
{
	const struct buf *json = &s->status.body;
	struct buf why = BUF_INIT;
	struct json_object *doc;
	struct timespec ts;
	unsigned st = 500;

	if ((doc = json_parse_strict(json->s ? json->s : "", json->len, STATUS_JSON_MAX, &why)) ==
	    NULL) {
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
		buf_add(out, json->s, json->len);
	st = 200;
out:
	json_object_put(doc);
	buf_free(&why);
	return st;
}

static int
young(const struct snapshot *sn)
{
	return sn->at && clock_mono_ms() - sn->at < SNAPSHOT_MS;
}

/* Serve r now (its snapshot made if it is not young). */
static enum MHD_Result
serve(struct server *s, struct MHD_Connection *c, const struct req *r)
{
	struct buf body = BUF_INIT;
	enum MHD_Result rc;
	unsigned st;

	if (r->path == HP_METRICS) {
		if (!young(&s->metrics))
			make_metrics(s);
		return answer(s, c, 200, "text/plain; version=0.0.4; charset=utf-8",
		    &s->metrics.body, 0);
	}
	if (!young(&s->status))
		make_status(s);
	st = status(s, r->path == HP_PAGE, &body);
	rc = answer(s, c, st, r->path == HP_PAGE ? "text/html; charset=utf-8" :
	    "application/json", st == 200 ? &body : NULL, 0);
	buf_free(&body);
	return rc;
}

/* ---- waiting for the gate ---- */

static void on_wait_timer(struct evloop *ev, struct evtimer *t, void *arg);
static void write_textfile(struct server *s);

static void
arm_wait_timer(struct server *s)
{
	struct waiter *w;
	uint64_t first = 0;

	if (s->wait_timer)
		evloop_timer_cancel(s->ev, s->wait_timer);
	s->wait_timer = NULL;
	for (w = s->waiters; w; w = w->next)
		if (first == 0 || w->until < first)
			first = w->until;
	if (first)
		s->wait_timer = evloop_timer_at(s->ev, first, on_wait_timer, s);
}

/* Let the waiting requests go on: all, or those whose time is up. */
static void
resume_waiters(struct server *s, int all)
{
	struct waiter **pp = &s->waiters, *w;
	uint64_t now = clock_mono_ms();
	int any = 0;

	while ((w = *pp) != NULL) {
		if (!all && w->until > now) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		if (w->c)
			MHD_resume_connection(w->c);
		else
			write_textfile(s);
		free(w);
		any = 1;
	}
	arm_wait_timer(s);
	if (any && s->d)
		mhd_run(s);
}

static void
on_wait_timer(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct server *s = arg;

	(void)ev; (void)t;
	s->wait_timer = NULL;
	resume_waiters(s, 0);
}

static void
wait_for_gate(struct server *s, struct MHD_Connection *c)
{
	struct waiter *w = xcalloc(1, sizeof *w);

	w->c = c;
	w->until = s->asked + GATE_WAIT_MS;
	w->next = s->waiters;
	s->waiters = w;
	if (c)
		MHD_suspend_connection(c);
	arm_wait_timer(s);
}

/* Must r wait for the gate?  Not when its snapshot or the gate's answer
 * is young, nor when the question out has had its GATE_WAIT_MS. */
static int
must_wait(struct server *s, enum http_path path)
{
	if (young(path == HP_METRICS ? &s->metrics : &s->status) || gate_current(s))
		return 0;
	return s->asking && clock_mono_ms() < s->asked + GATE_WAIT_MS;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct server *s = cls;
	struct req *r = *con_cls;
	unsigned st, retry = 0;

	(void)method; (void)version; (void)upload_data;
	if (*upload_data_size != 0)
		return MHD_NO;	/* head.c let no body through */
	if (r == NULL) {
		/* head.c said the target is one of these three. */
		r = xcalloc(1, sizeof *r);
		r->path = strcmp(url, "/metrics") == 0 ? HP_METRICS :
		    strcmp(url, "/status.json") == 0 ? HP_JSON : HP_PAGE;
		*con_cls = r;
		if ((st = unauthorized(s, c, &retry)) != 0)
			return answer(s, c, st, NULL, NULL, retry);
		if (must_wait(s, r->path)) {
			r->waited = 1;
			wait_for_gate(s, c);
			return MHD_YES;
		}
	}
	return serve(s, c, r);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	(void)cls; (void)c; (void)toe;
	free(*con_cls);
	*con_cls = NULL;
}

/* ---- libmicrohttpd in the loop ---- */

static void on_mhd_timer(struct evloop *ev, struct evtimer *t, void *arg);

/* Run libmicrohttpd (once more, if something asked for a run while it
 * ran: MHD_run is not to be called from its own callbacks), then arm
 * the timer it asks for. */
static void
mhd_run(struct server *s)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (s->in_run) {
		s->rerun = 1;
		return;
	}
	s->in_run = 1;
	do {
		s->rerun = 0;
		if (MHD_run(s->d) == MHD_NO)
			log_warnx("libmicrohttpd: MHD_run failed");
	} while (s->rerun);
	s->in_run = 0;
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

/* No unescaping: head.c matched the target byte for byte. */
static size_t
no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls; (void)c;
	return strlen(s);
}

/* ---- the heads (stage 1) ---- */

static void on_head_timer(struct evloop *ev, struct evtimer *t, void *arg);

static void
pend_unlink(struct server *s, struct pend *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		s->pend = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		s->pend_tail = p->prev;
	s->npend--;
	if (epoll_ctl(s->pfd, EPOLL_CTL_DEL, p->fd, NULL) < 0)
		log_warn("epoll_ctl DEL");
}

static void
arm_head_timer(struct server *s)
{
	if (s->head_timer)
		evloop_timer_cancel(s->ev, s->head_timer);
	s->head_timer = s->pend ? evloop_timer_at(s->ev, s->pend->since + HTTP_HEAD_MS,
	    on_head_timer, s) : NULL;
}

/* Close p (unlinked first), unanswered. */
static void
pend_drop(struct server *s, struct pend *p)
{
	pend_unlink(s, p);
	(void)close(p->fd);
	free(p);
	arm_head_timer(s);
}

/* Answer p's head with status (one head, the security headers), then
 * close: what it sent is read first, so that the close sends no reset
 * ahead of the answer. */
static void
pend_refuse(struct server *s, struct pend *p, unsigned status)
{
	struct buf a = BUF_INIT;
	char body[64], date[64], junk[4096];
	time_t now = time(NULL);
	struct tm tm;
	size_t i;
	ssize_t k;

	gmtime_r(&now, &tm);
	strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	snprintf(body, sizeof body, "%u %s\n", status, reason(status));
	buf_printf(&a, "HTTP/1.1 %u %s\r\nDate: %s\r\nConnection: close\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
	    "Content-Security-Policy: %s\r\n", status, reason(status), date, strlen(body),
	    s->csp);
	for (i = 0; i < sizeof sec_headers / sizeof sec_headers[0]; i++)
		buf_printf(&a, "%s: %s\r\n", sec_headers[i][0], sec_headers[i][1]);
	if (status == 405)
		buf_adds(&a, "Allow: GET, HEAD\r\n");
	buf_printf(&a, "\r\n%s", body);
	do
		k = recv(p->fd, junk, sizeof junk, MSG_DONTWAIT);
	while (k > 0 || (k < 0 && errno == EINTR));
	/* Small, into an empty socket buffer: it goes at once or never. */
	if (send(p->fd, a.s, a.len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		log_debug("http: answer %s: %s", p->ip, strerror(errno));
	(void)shutdown(p->fd, SHUT_WR);
	buf_free(&a);
	pend_drop(s, p);
}

/* Hand p, whose head passed, to libmicrohttpd. */
static void
pend_hand(struct server *s, struct pend *p)
{
	const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->d,
	    MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

	if (i && i->num_connections >= HTTP_ANSWERING_MAX) {
		pend_refuse(s, p, 503);
		return;
	}
	pend_unlink(s, p);
	if (MHD_add_connection(s->d, p->fd, (const struct sockaddr *)&p->sa, p->salen) == MHD_NO)
		log_warnx("http: libmicrohttpd did not take the connection from %s", p->ip);
	free(p);
	arm_head_timer(s);
	mhd_run(s);
}

/* What p has sent so far: served, refused, or waited for. */
static void
pend_look(struct server *s, struct pend *p)
{
	char head[HTTP_HEAD_MAX + 1];
	struct http_head h;
	ssize_t n;
	unsigned st;

	n = recv(p->fd, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		pend_drop(s, p);	/* gone (or reset) before its head */
		return;
	}
	if ((st = http_head_check(head, (size_t)n, &h)) == 0)
		return;
	if (st == 200)
		pend_hand(s, p);
	else
		pend_refuse(s, p, st);
}

static void
on_pending(struct evloop *ev, int fd, int events, void *arg)
{
	struct server *s = arg;
	struct epoll_event e[64];
	int n, i;

	(void)ev; (void)fd; (void)events;
	while ((n = epoll_wait(s->pfd, e, 64, 0)) > 0)
		for (i = 0; i < n; i++)
			pend_look(s, e[i].data.ptr);
	if (n < 0 && errno != EINTR)
		log_warn("epoll_wait");
}

static void
on_head_timer(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct server *s = arg;
	uint64_t now = clock_mono_ms();

	(void)ev; (void)t;
	s->head_timer = NULL;
	while (s->pend && now >= s->pend->since + HTTP_HEAD_MS) {
		limited(s, s->pend->ip, LK_SLOW, "connection from %s closed: no whole request head "
		    "within %d s", s->pend->ip, HTTP_HEAD_MS / 1000);
		pend_drop(s, s->pend);
	}
	arm_head_timer(s);
}

/* Room for one more from ip: at the limits, the oldest waiting
 * connection of the address with the most (ip's own at its limit). */
static void
make_room(struct server *s, const char *ip)
{
	struct pend *p, *q, *victim = NULL;
	size_t mine = 0, most = 0, k;

	for (p = s->pend; p; p = p->next)
		mine += strcmp(p->ip, ip) == 0;
	if (mine >= HTTP_PENDING_PER_IP) {
		for (victim = s->pend; strcmp(victim->ip, ip) != 0; victim = victim->next)
			;
	} else if (s->npend >= HTTP_PENDING_MAX) {
		for (p = s->pend; p; p = p->next) {
			for (k = 0, q = s->pend; q; q = q->next)
				k += strcmp(q->ip, p->ip) == 0;
			if (k > most) {
				most = k;
				victim = p;	/* the oldest of the first address with most */
			}
		}
	}
	if (victim == NULL)
		return;
	limited(s, victim->ip, LK_EVICT, "connection from %s closed before its request head, "
	    "to make room (%s)", victim->ip, mine >= HTTP_PENDING_PER_IP ?
	    "its address's limit" : "the limit of waiting connections");
	pend_drop(s, victim);
}

static void
on_accept(struct evloop *ev, int fd, int events, void *arg)
{
	struct server *s = arg;
	struct epoll_event e;
	struct pend *p;
	struct cidr a;
	size_t i;
	int cfd, ok;

	(void)ev; (void)fd; (void)events;
	for (;;) {
		p = xcalloc(1, sizeof *p);
		p->salen = sizeof p->sa;
		cfd = accept4(s->lfd, (struct sockaddr *)&p->sa, &p->salen,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			free(p);
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				log_warn("http: accept");
			return;
		}
		p->fd = cfd;
		p->since = clock_mono_ms();
		peer_text((struct sockaddr *)&p->sa, p->ip, sizeof p->ip);
		ok = cidr_addr(p->ip, &a) == 0;
		for (i = 0; ok && i < s->o->nallow && !cidr_match(&s->o->allow[i], &a); i++)
			;
		if (!ok || i == s->o->nallow) {
			limited(s, p->ip, LK_ALLOW, "connection from %s refused: not in metrics allow",
			    p->ip);
			(void)close(cfd);
			free(p);
			continue;
		}
		make_room(s, p->ip);
		p->prev = s->pend_tail;
		if (s->pend_tail)
			s->pend_tail->next = p;
		else
			s->pend = p;
		s->pend_tail = p;
		s->npend++;
		memset(&e, 0, sizeof e);
		e.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
		e.data.ptr = p;
		if (epoll_ctl(s->pfd, EPOLL_CTL_ADD, cfd, &e) < 0)
			fatal(111, "epoll_ctl ADD");
		if (s->head_timer == NULL)
			arm_head_timer(s);
		/* A client that sent its head with its connect is served now,
		 * before the next accept may need room. */
		pend_look(s, p);
	}
}

/* ---- the textfile ---- */

static void
write_textfile(struct server *s)
{
	make_metrics(s);
	if (metrics_textfile(s->o->textfile, &s->metrics.body) < 0)
		log_warn("write %s", s->o->textfile);
}

static void
on_textfile(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct server *s = arg;

	(void)t;
	if (must_wait(s, HP_METRICS) && !young(&s->metrics))
		wait_for_gate(s, NULL);
	else
		write_textfile(s);
	evloop_timer_at(ev, clock_mono_ms() + (uint64_t)s->o->interval * 1000, on_textfile, s);
}

/* ---- start ---- */

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
start_http(struct server *s)
{
	const union MHD_DaemonInfo *info;

	s->lfd = listen_on(s->o->address);
	if ((s->pfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		fatal(111, "epoll_create1");
	/* Heads are checked before (head.c): libmicrohttpd's own strict
	 * mode would only add the answers it writes twice (0.9.75). */
	s->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET |
	    MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, on_request, s,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	    MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, s,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_ANSWERING_MAX + 1,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_POOL,
	    MHD_OPTION_STRICT_FOR_CLIENT, (int)0,
	    MHD_OPTION_END);
	if (s->d == NULL)
		fatalx(111, "libmicrohttpd would not start on %s", s->o->address);
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL)
		fatalx(111, "libmicrohttpd has no epoll descriptor");
	evloop_watch(s->ev, info->epoll_fd, EV_READ, on_mhd_fd, s);
	evloop_watch(s->ev, s->lfd, EV_READ, on_accept, s);
	evloop_watch(s->ev, s->pfd, EV_READ, on_pending, s);
	mhd_run(s);
}

int
metrics_run(const struct metrics_opts *o)
{
	struct server s;

	memset(&s, 0, sizeof s);
	s.o = o;
	s.ev = evloop_new();
	s.gc.fd = -1;
	s.lfd = s.pfd = -1;
	make_csp(&s);
	if (o->address)
		start_http(&s);
	if (o->textfile) {
		log_info("writing %s every %lld s", o->textfile, o->interval);
		evloop_timer_at(s.ev, clock_mono_ms(), on_textfile, &s);
	}
	if (evloop_run(s.ev) < 0)
		fatal(111, "event loop");
	return 0;
}
