/*
 * gateclient.h: the only client of weir-gate (see gateproto.h for the
 * wire format).  One connection carries any number of requests, each
 * named by a tag the caller chooses.  Blocking use: gc_connect, then
 * gc_acquire / gc_report / ... and gc_wait_reply.  Event-loop use: make
 * the fd non-blocking, call gc_fill when it is readable and gc_next_reply
 * until it returns 0.  Requests are written with full_write (they are
 * small; a non-blocking caller sees EAGAIN as an error and reconnects).
 *
 * Closing the connection gives up every waiting request; a granted one
 * is then counted by the gate as an unknown outcome (maybe accepted at any
 * instant until now + its upstream's grace, 10 minutes by default), until
 * a SETTLE (gc_settle) says what became of it.
 *
 * Trusts: the gate only as far as gateproto.c's parser.  Config keys:
 * gate_socket (the caller passes the path).
 */
#ifndef WEIR_GATECLIENT_H
#define WEIR_GATECLIENT_H

#include "lib/buf.h"
#include "lib/io.h"
#include "mail/gateproto.h"

struct gate_client {
	int fd;
	struct buf in;
	size_t off;		/* parsed up to here */
	struct buf status;	/* the body of the last STATUS reply */
};

/* 0 ok, -1 with errno. */
int gc_connect(struct gate_client *gc, const char *path) MUST_CHECK;
/* For STATUS: connect to sock or, when that fails and rsock is set, to
 * rsock (the gate's read-only status socket: a user outside weir-send's
 * group).  timeout_ms > 0: each connect, and each send and receive on
 * the connection, waits at most that long (a gate that does not accept,
 * read or answer); < 0: a non-blocking socket (a connect that would wait:
 * EAGAIN).  The path connected to, or NULL with sock's errno. */
const char *gc_connect_status(struct gate_client *gc, const char *sock, const char *rsock,
    int timeout_ms);
void gc_close(struct gate_client *gc);

/* Send one request.  0 ok, -1 with errno.  cls, sender: NULL or "" for none. */
int gc_acquire(struct gate_client *gc, uint32_t tag, const char *upstream,
    const char *cls, const char *sender, uint32_t messages, uint32_t recipients,
    uint32_t connections) MUST_CHECK;
/* The same with <unless> (NULL, or every kind RK_OFF: none): the gate
 * answers LATER instead of making the request wait while one holds
 * (gateproto.h, mail/route.h). */
int gc_acquire_unless(struct gate_client *gc, uint32_t tag, const char *upstream,
    const char *cls, const char *sender, uint32_t messages, uint32_t recipients,
    uint32_t connections, const struct route_when *unless) MUST_CHECK;
/* REPORT how for tag.  accepted, at_mono_ms: for GP_SENT (at_mono_ms:
 * clock_mono_ms() when the upstream's 250 to the final dot was read, or
 * -1 when unknown: the gate then logs the send at once); reply: for
 * GP_THROTTLED and GP_AUTHFAIL, the upstream's reply (or a description
 * of the TLS failure where there is none), for GP_UNREACHED and
 * GP_NOGREETING what failed; bytes that cannot travel are
 * replaced by '?' and it is cut to GP_TEXT_MAX.  The gc_report_* below
 * are its short forms. */
int gc_report(struct gate_client *gc, uint32_t tag, enum gp_outcome how, uint32_t accepted,
    int64_t at_mono_ms, const char *reply) MUST_CHECK;
int gc_report_sent(struct gate_client *gc, uint32_t tag, uint32_t accepted,
    int64_t at_mono_ms) MUST_CHECK;
int gc_report_refund(struct gate_client *gc, uint32_t tag) MUST_CHECK;
/* The final dot may have reached the upstream; its answer is unknown. */
int gc_report_unknown(struct gate_client *gc, uint32_t tag) MUST_CHECK;
/* Connected, but the session ended before MAIL FROM was accepted. */
int gc_report_nomail(struct gate_client *gc, uint32_t tag) MUST_CHECK;
int gc_report_throttled(struct gate_client *gc, uint32_t tag, const char *reply) MUST_CHECK;
/* AUTH refused or TLS verification failed. */
int gc_report_authfail(struct gate_client *gc, uint32_t tag, const char *reply) MUST_CHECK;
/* SETTLE: what became of grant (the gate's id) on upstream, whose client
 * went away holding it (not GP_UNKNOWN); the rest as gc_report.
 * Answered "OK -" or ERR. */
int gc_settle(struct gate_client *gc, const char *upstream, uint64_t grant,
    enum gp_outcome how, uint32_t accepted, int64_t at_mono_ms, const char *reply) MUST_CHECK;
int gc_cancel(struct gate_client *gc, uint32_t tag) MUST_CHECK;
/* STARTS: this connection's grants are in use only from their START,
 * which is sent before a grant is handed to a deliverer; a grant not
 * STARTed when the connection goes is refunded (gateproto.h). */
int gc_starts(struct gate_client *gc) MUST_CHECK;
int gc_start(struct gate_client *gc, uint32_t tag) MUST_CHECK;
int gc_status(struct gate_client *gc, int json) MUST_CHECK;
/* STATUS JSON with each upstream's history of the last secs seconds
 * (1 to GP_HISTORY_MAX_S; else -1, EINVAL). */
int gc_status_history(struct gate_client *gc, unsigned secs) MUST_CHECK;
/* Lift every suspension of the upstream: answered "OK -" or ERR. */
int gc_resume(struct gate_client *gc, const char *upstream) MUST_CHECK;
/* The upstream's credentials were refused outside a send (why, made
 * to travel as gc_report's reply): answered "OK -" or ERR. */
int gc_refused(struct gate_client *gc, const char *upstream, const char *why) MUST_CHECK;
/* weir-send's counters for the upstream (enum gp_count order, each at
 * most GP_COUNT_MAX): answered "OK -" or ERR. */
int gc_counts(struct gate_client *gc, const char *upstream,
    const uint64_t counts[GP_NCOUNTS]) MUST_CHECK;

/* One read(2) into the buffer: 1 bytes came, 0 end of file, -1 error
 * (errno; EAGAIN on a non-blocking fd). */
int gc_fill(struct gate_client *gc) MUST_CHECK;
/* Take one complete reply from the buffer: 1 got one (for STATUS the body
 * is in gc->status), 0 need more bytes, -1 protocol error (*why). */
int gc_next_reply(struct gate_client *gc, struct gp_reply *r, const char **why) MUST_CHECK;
/* Block until one reply: 1 got one, 0 the gate closed, -1 error (*why). */
int gc_wait_reply(struct gate_client *gc, struct gp_reply *r, const char **why) MUST_CHECK;

#endif
