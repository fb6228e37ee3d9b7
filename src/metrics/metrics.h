/*
 * metrics.h: weir-metrics, the Prometheus exporter (weir-metrics(8)).
 *
 *   collect.c  one scrape: the gate's STATUS JSON and the queue's summary
 *              (mail/qsummary.h), as Prometheus text format 0.0.4
 *   head.c     the request head's checks, on its bytes, before
 *              libmicrohttpd sees them
 *   http.c     the server: its own accept, per-address limits and a
 *              deadline for each request head, then libmicrohttpd for
 *              the answer; the gate asked in the loop, never waited for
 *              long; basic authentication with a back-off per address
 *   textfile.c the same text for node_exporter's textfile collector,
 *              written to PATH.tmp and renamed into place
 *   page.c     the status page (/), from the relay's status document
 *              (mail/relaystatus.h), which is also /status.json
 *   oauth.c    the OAuth token state of the upstreams with an oauth
 *              section, from their status files (mail/oauth.h)
 *
 * Trusts: the gate as far as gateclient.c and lib/jsonparse.c parse it,
 * weir-showq's summary as far as mail/qsummary.h does, nothing from HTTP
 * clients (head.c checks every byte of a request head).  Config keys:
 * gate_status_socket (else gate_socket), queue_dir, queue_split,
 * showq_socket, and the metrics section (address, textfile, interval,
 * user, allow, auth_file).
 */
#ifndef WEIR_METRICS_H
#define WEIR_METRICS_H

#include <stddef.h>
#include <time.h>

#include "lib/buf.h"
#include "lib/netaddr.h"
#include "mail/config.h"

/* Where a scrape reads from. */
struct metrics_src {
	const struct weir_config *cfg;	/* its oauth upstreams, its queue; the page's too */
	const char *gate_socket;	/* gate_status_socket, else gate_socket */
	int gate_timeout_ms;		/* metrics_collect: for the gate's connect and answer */
	int queue_timeout_ms;		/* for weir-showq's summary */
};

struct qsummary;
/* One scrape, appended to out, the gate asked here (the textfile).  Never
 * fails: what cannot be had is said by weir_gate_up 0 or weir_queue_up 0.
 * Returns 1 if the gate answered. */
int metrics_collect(const struct metrics_src *src, struct buf *out);
/* The text for a gate STATUS JSON document (json NULL: no answer) and
 * the queue's summary (NULL: none), at wall time now. */
void metrics_format(const char *json, size_t jlen, const struct qsummary *q, time_t now,
    struct buf *out);

/* oauth.c: the OAuth families of cfg's oauth upstreams (none without). */
void metrics_oauth(const struct weir_config *cfg, struct buf *out);

/* Write text to path atomically (path.tmp, fsync, rename).  0 ok, -1 with
 * errno. */
int metrics_textfile(const char *path, const struct buf *text);

/* ---- head.c: the request head, checked before libmicrohttpd sees it ---- */

#define HTTP_HEAD_MAX	8192	/* bytes of a request head */

enum http_path { HP_NONE, HP_PAGE, HP_JSON, HP_METRICS };

struct http_head {
	const char *method, *target;	/* in the bytes checked */
	size_t method_len, target_len;
	int http11, head;		/* HTTP/1.1; the method is HEAD */
	unsigned hosts;
	int body;			/* a body announced */
	enum http_path path;
	size_t len;			/* the head's bytes */
};

/* The head at s[0..n) (the bytes received so far): 0 more are needed;
 * 200 it may be served (h filled); else the status to answer (400, 404,
 * 405, 414, 431, 505). */
unsigned http_head_check(const char *s, size_t n, struct http_head *h);

/* ---- http.c ---- */

#define HTTP_BACKLOG	1024	/* the listen backlog (the kernel may cap it: somaxconn) */
#define HTTP_PENDING_MAX 256	/* connections whose request head has not all come */
#define HTTP_PENDING_PER_IP 16	/* of them from one address */
#define HTTP_HEAD_MS	5000	/* a connection's head must all come within this */
#define HTTP_ANSWERING_MAX 64	/* requests being answered at once (libmicrohttpd) */
#define HTTP_IDLE_S	10	/* an answer not taken for this long is dropped */
#define HTTP_POOL	(2 * HTTP_HEAD_MAX)	/* libmicrohttpd's memory per connection */
/* The gate's document: one younger than GATE_FRESH_MS is used as it
 * is; a request waits at most GATE_WAIT_MS for a new one; a STATUS not
 * answered after GATE_GIVEUP_MS is given up. */
#define GATE_FRESH_MS	1000
#define GATE_WAIT_MS	500
#define GATE_GIVEUP_MS	10000
#define SNAPSHOT_MS	1000	/* a scrape or a status this young is served again */
#define QUEUE_WAIT_MS	1000	/* for weir-showq's summary */
#define SHOWQ_WAIT_MS	3000	/* for weir-showq's listing (the page) */
/* Basic authentication: AUTH_FREE_FAILS failures in a row from one
 * address, then it must wait 1 s, doubling to AUTH_WAIT_MAX_S, before
 * a try is checked again (429 meanwhile); AUTH_ADDRS_MAX addresses
 * remembered (the oldest forgotten first). */
#define AUTH_FREE_FAILS	3
#define AUTH_WAIT_MAX_S	60
#define AUTH_ADDRS_MAX	1024
#define LOG_EVERY_MS	60000	/* a refusal of one kind from one address: one line a minute */

/* ---- page.c ---- */

#define PAGE_REFRESH_S	10	/* the page's meta refresh */

struct json_object;
/* Mask the addresses in the upstreams' replies of doc (for a viewer who
 * did not authenticate). */
void page_mask(struct json_object *doc);
/* The HTML page of a status document (mail/relaystatus.h's), at wall
 * time now_ms (the gate's clock when it answered). */
void page_render(struct buf *out, struct json_object *doc, const char *host, long long now_ms);
/* The page's style sheet, its one inline style (http.c allows it by its
 * hash in the Content-Security-Policy). */
extern const char page_style[];

struct metrics_opts {
	struct metrics_src src;		/* its cfg: the status page's too */
	const char *address;	/* NULL: no HTTP */
	const struct cidr *allow;	/* who may connect */
	size_t nallow;
	const char *auth_file;	/* basic authentication (lib/pwfile.h); NULL: none */
	const char *textfile;	/* NULL: none */
	long long interval;	/* seconds, for the textfile */
};
/* The daemon: runs until killed; returns an exit status on failure. */
int metrics_run(const struct metrics_opts *o);

#endif
