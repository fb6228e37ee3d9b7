/*
 * metrics.h: weir-metrics, the Prometheus exporter (weir-metrics(8)).
 *
 *   collect.c  one scrape: the gate's STATUS JSON (through
 *              mail/gateclient.h) and a count of the queue's mess/ and
 *              todo/, as Prometheus text format 0.0.4
 *   http.c     the GET /metrics server on libmicrohttpd: strict request
 *              checks, bounded requests, an idle timeout, one request
 *              per connection
 *   textfile.c the same text for node_exporter's textfile collector,
 *              written to PATH.tmp and renamed into place
 *   page.c     the status page (/), from the relay's status document
 *              (mail/relaystatus.h), which is also /status.json
 *   oauth.c    the OAuth token state of the upstreams with an oauth
 *              section, from their status files (mail/oauth.h)
 *
 * Trusts: the gate as far as gateclient.c and lib/jsonparse.c parse it,
 * nothing in the queue (only names and mtimes are read), nothing from
 * HTTP clients.  Config keys: gate_status_socket (else gate_socket),
 * queue_dir, queue_split, and the metrics section (address, textfile,
 * interval, user, allow, auth_file).
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
	const char *gate_socket;	/* gate_status_socket, else gate_socket */
	const char *queue_dir;
	unsigned queue_split;
	int gate_timeout_ms;	/* for the gate's answer */
	const struct weir_config *cfg;	/* its oauth upstreams; NULL: none */
};

/* One scrape, appended to out.  Never fails: what cannot be read is said
 * by weir_gate_up 0 or weir_queue_up 0.  Returns 1 if the gate answered. */
int metrics_collect(const struct metrics_src *src, struct buf *out);
/* The text for a gate STATUS JSON document (json NULL: the gate is
 * down) and queue counts, at wall time now (ms); for the unit tests. */
struct metrics_queue {
	int ok;			/* the folders could be read */
	unsigned long long messages, todo;
	time_t oldest;		/* mtime of the oldest mess/ file; 0: none */
};
void metrics_format(const char *json, size_t jlen, const struct metrics_queue *q,
    time_t now, struct buf *out);
/* Count mess/ and todo/ of the queue. */
void metrics_queue_scan(const char *dir, unsigned split, struct metrics_queue *q);

/* oauth.c: the OAuth families of cfg's oauth upstreams (none without). */
void metrics_oauth(const struct weir_config *cfg, struct buf *out);

/* Write text to path atomically (path.tmp, fsync, rename).  0 ok, -1 with
 * errno. */
int metrics_textfile(const char *path, const struct buf *text);

/* ---- http.c ---- */

#define HTTP_CONN_MAX	32	/* connections at once; more wait in the backlog */
#define HTTP_CONN_PER_IP 16	/* of them from one address */
#define HTTP_BACKLOG	64	/* the listen backlog */
#define HTTP_IDLE_S	10	/* a connection idle this long is closed */
#define HTTP_POOL	8192	/* bytes of memory per connection: its request head */

/* ---- page.c ---- */

#define PAGE_REFRESH_S	10	/* the page's meta refresh */

struct json_object;
/* Mask the addresses in the upstreams' replies of doc (for a viewer who
 * did not authenticate). */
void page_mask(struct json_object *doc);
/* The HTML page of a status document (mail/relaystatus.h's), at wall
 * time now_ms (the gate's clock when it answered). */
void page_render(struct buf *out, struct json_object *doc, const char *host, long long now_ms);

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
