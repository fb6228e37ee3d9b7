/*
 * gateproto.h: the weir-gate wire format, both directions.  Only
 * gateclient.c (clients) and src/gate/ (the gate) use it.
 *
 * A local stream socket carrying lines of printable ASCII ending in "\n",
 * at most GP_LINE_MAX bytes with the "\n", fields separated by exactly one
 * space, no leading, trailing or empty fields, nothing after the last
 * field.  NUL, CR and other control bytes are errors.  Requests:
 *
 *   ACQUIRE <tag> <upstream> <class|-> <sender|-> <messages> <recipients> <connections>
 *           [<unless>]
 *   REPORT <tag> SENT <accepted> <at|->    the upstream accepted the mail
 *   REPORT <tag> REFUND                    nothing reached the upstream
 *   REPORT <tag> THROTTLED <reply text>    the upstream said "slow down"
 *   REPORT <tag> QUOTA <reply text>        it said the sender's or account's
 *                                          quota is spent
 *   REPORT <tag> UNKNOWN                   the outcome is not known
 *   REPORT <tag> NOMAIL                    connected, but no MAIL accepted
 *   REPORT <tag> AUTHFAIL <reply text>     AUTH or TLS verification refused
 *   REPORT <tag> UNREACHED <text>          no connection could be made
 *   REPORT <tag> NOGREETING <text>         connected, but the TLS handshake,
 *                                          the greeting or EHLO failed
 *   SETTLE <upstream> <grant id> SENT <accepted> <at|-> | REFUND | NOMAIL |
 *          THROTTLED <reply text> | QUOTA <reply text> | AUTHFAIL <reply text> |
 *          UNREACHED <text> | NOGREETING <text>
 *                                          what became of a grant whose
 *                                          client went away (below)
 *   CANCEL <tag>                           drop a waiting request
 *   STARTS                                 this connection's grants are in
 *                                          use only once STARTed (below)
 *   START <tag>                            the grant goes to a deliverer now
 *   RESUME <upstream>                      lift the upstream's suspensions
 *   REFUSED <upstream> <reply text>        its credentials refused, no grant
 *   COUNTS <upstream> <queued_msgs> <queued_rcpts> <delivered_msgs>
 *          <delivered_rcpts> <deferred_msgs> <deferred_rcpts>
 *          <bounced_msgs> <bounced_rcpts> <sessions> <switches> <returns>
 *                                          weir-send's counters (one line)
 *   STATUS TEXT|JSON
 *   STATUS JSON <seconds>                  with each upstream's history
 *
 * On weir-gate's read-only status socket (gate_status_socket) only STATUS
 * is served; any other well-formed request is answered
 * "ERR <tag|-> READONLY only STATUS on this socket" and the connection
 * kept.
 *
 * Replies:
 *
 *   GRANT <tag> <grant id> <max_recipients> <messages_per_connection> <grace>
 *   OK <tag|->                             report, cancel or resume done
 *   SUSPENDED <tag> <seconds>              report done; upstream suspended
 *   LATER <tag> <reason> <seconds>         the ACQUIRE's <unless> holds:
 *                                          ask elsewhere (the request is gone)
 *   ERR <tag|-> <CODE> <text>
 *   STATUS <length>                        then exactly <length> bytes
 *
 * What each report means to the gate (weir-gate(8), "What the gate
 * promises"):
 *
 *   SENT: <at> is the deliverer's CLOCK_MONOTONIC time in ms, rounded
 *   down (clock_mono_ms), at which it read the upstream's 250 to the
 *   final dot, or "-" when it does not know it.  The send is logged at
 *   <at> + 1 ms (the end of that millisecond), clamped into [grant time,
 *   now]; "-" logs it at now.  The gate and its deliverers share one
 *   machine's monotonic clock.
 *   UNKNOWN: the final dot may have reached the upstream but its answer
 *   was not read (connection lost, deliverer killed).  The send counts as
 *   if accepted at any instant from its grant to now + grace (weir-gate
 *   -g, default 10 minutes, RFC 5321's final-dot timeout).  Answer: OK.
 *   NOMAIL: a connection was made but the session ended before MAIL FROM
 *   was accepted (connect, TLS, EHLO, AUTH or MAIL refused): only the
 *   connections weight is logged; messages and recipients are given
 *   back.  Answer: OK.
 *   QUOTA: as THROTTLED (logged, the upstream suspended), but the reply
 *   said the sender's or account's quota is spent (mail/replyclass.h):
 *   the suspension is a quota's (2 hours at first, doubling up to a
 *   day, where no throttle_reply pattern names the reply), and the
 *   fallback_when condition "quota" counts it as a full window until
 *   its end (mail/route.h).  Answer: SUSPENDED with the seconds left.
 *   AUTHFAIL: AUTH was refused (535 and the like) or the TLS certificate
 *   or name check failed.  Counted as NOMAIL, and the upstream is
 *   suspended: 5 minutes, doubling on each repeat up to 1 hour; after the
 *   suspension a probe: one connection and one message at a time, until a
 *   report on a message other than AUTHFAIL or THROTTLED comes.  A policy reload lifts it, and
 *   a restart with other credentials (weir-gate(8)).  Answer:
 *   SUSPENDED with the seconds left.
 *   SETTLE: a grant that counts as an unknown outcome because its client
 *   went away holding it (or the gate stopped), when its outcome became
 *   known after all (weir-send learnt it from a kept session's
 *   deliverer that outlived the weir-send holding the grant: see
 *   mail/sessproto.h): it is logged as that report would have logged it,
 *   the SENT at <at> clamped into the unknown interval, so it frees its
 *   slot <T> after the upstream's 250 and moves no other send.  Only an
 *   unknown outcome whose client is gone is settled, once; an upstream
 *   with a shared store keeps its interval (the store counts it too).
 *   Answered "OK -" (also when there was nothing to settle), or ERR -
 *   STATE while a client still holds the grant, or ERR - NOPOLICY if the
 *   gate has never heard of the upstream.
 *   STARTS, START: a client that holds grants before it uses them (weir-send
 *   asks ahead of its free run slots) says STARTS once; then a grant
 *   counts as in use only from its START <tag>, sent before the grant is
 *   handed to a deliverer.  A grant such a client held, not STARTed,
 *   when it went away reached no upstream: it is refunded, not counted
 *   as unknown.  (Without STARTS every grant is in use at once.)  Both
 *   answered "OK <tag|->", or ERR <tag> TAG/STATE for a START of no such
 *   grant.
 *   GRANT's <grace>: the upstream's grace in seconds (policy.conf's, else
 *   -g): how long after its client went away a send of it may still be
 *   accepted; a deliverer left without its client stops before then.
 *   RESUME: lifts every suspension of the upstream now (throttle and
 *   authentication); answered "OK -", or ERR - NOPOLICY if the gate has
 *   never heard of the upstream.
 *   REFUSED: the upstream's credentials were found refused outside a
 *   send (weir-remote -K, the OAuth keep-alive: the provider refused
 *   the refresh token); the upstream is suspended as by REPORT AUTHFAIL
 *   (a suspension already running is kept as it is), and no window
 *   counts anything.  Answered "OK -", or ERR - NOPOLICY as RESUME.
 *   STATUS JSON <seconds> (1 to GP_HISTORY_MAX_S): the JSON status with,
 *   per upstream, a "history" of that many seconds back: the sends the
 *   gate logged (at most its last WG_HISTORY_MAX, src/gate/window.h), the
 *   grants held and the requests waiting, each with its time (weir-
 *   gate(8), STATUS).
 *   UNREACHED, NOGREETING: the upstream could not be reached (no
 *   connection; or a connection whose TLS handshake, greeting or EHLO
 *   failed, not for our credentials or its certificate: that is
 *   AUTHFAIL).  UNREACHED logs nothing, NOGREETING the connection, as
 *   NOMAIL.  Either starts or continues the upstream's unreachable spell
 *   (mail/route.h), which a report on a message of any other outcome but
 *   REFUND and UNKNOWN ends.  Answer: OK.
 *   <unless>: the conditions of weir.conf's fallback_when under which the
 *   request is not to wait here (mail/route.h): "KIND=SECONDS" items
 *   joined by commas, KIND unreachable, auth, quota, throttled, each at
 *   most once and in that order, SECONDS its threshold (0 to
 *   RK_MAX_S).  While the verdict for them is AVOID the request is
 *   answered LATER and forgotten, at once or while it waits; HOLD keeps it
 *   waiting (an unreachable upstream, before the threshold), PROBE grants
 *   it as the upstream's one unreachable probe.
 *   LATER's <reason>: the KIND that held; <seconds> (1 to GP_LATER_MAX):
 *   when asking here again makes sense (the next probe, the suspension's
 *   end, the next free slot).
 *   COUNTS: weir-send's counters for the upstream since it started
 *   (what each counts: weir-metrics(8)) and its kept sessions open now,
 *   each at most GP_COUNT_MAX; the gate keeps the latest line per
 *   upstream for STATUS, nothing in its journal.  <switches>: how often
 *   its mail began going to a fallback; <returns>: how often it came back.
 *   Answered "OK -", or ERR - NOPOLICY if the gate has never heard of
 *   the upstream.
 *
 * <tag> is the client's name for a request, unique among its live requests
 * on the connection: decimal 1..4294967295, no leading zero.  <grant id>
 * is the gate's, unique over the journal's life (1..2^64-1).  Numbers are
 * decimal without sign or leading zeros.  An ACQUIRE is answered only once
 * it is granted (or refused): waiting is silence, not polling.
 *
 * Trusts: nothing; every field is checked here.  Config keys: none.
 */
#ifndef WEIR_GATEPROTO_H
#define WEIR_GATEPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "mail/policy.h"
#include "mail/route.h"

#define GP_LINE_MAX	1024	/* with the "\n" */
#define GP_SENDER_MAX	320
#define GP_TEXT_MAX	900
#define GP_WEIGHT_MAX	1000000
#define GP_STATUS_MAX	(1 << 24)
#define GP_COUNT_MAX	((uint64_t)1 << 53)	/* a COUNTS number (exact in JSON) */
#define GP_HISTORY_MAX_S 3600	/* STATUS JSON <seconds> */
#define GP_LATER_MAX	(366 * 86400)	/* LATER <seconds> */

/* Error codes, sent as words (gp_code_name). */
enum gp_code {
	GP_OK = 0,
	GP_SYNTAX,	/* well-framed line, bad fields */
	GP_VERB,	/* unknown verb */
	GP_TOOLONG,	/* no "\n" within GP_LINE_MAX bytes */
	GP_NUL,		/* a NUL byte */
	GP_BYTE,	/* a control or non-ASCII byte */
	GP_TAG,		/* no such live request */
	GP_DUPTAG,	/* tag already in use */
	GP_NOPOLICY,	/* RESUME, COUNTS: no such upstream (an ACQUIRE for an upstream
			 * without policy waits for one instead) */
	GP_NOCLASS,	/* no such class */
	GP_TOOBIG,	/* bigger than a window or cap: can never be granted */
	GP_BADWEIGHT,	/* all weights zero */
	GP_STATE,	/* e.g. REPORT of a request not granted */
	GP_LIMIT,	/* too many requests on one connection */
	GP_INTERNAL,	/* the gate cannot go on (journal) */
	GP_READONLY,	/* not STATUS, on the read-only status socket */
	GP_NCODES
};

enum gp_verb { GP_ACQUIRE = 1, GP_REPORT, GP_CANCEL, GP_STATUS, GP_RESUME, GP_COUNTS,
	GP_SETTLE, GP_START, GP_STARTS, GP_REFUSED };
enum gp_outcome { GP_SENT = 1, GP_REFUND, GP_THROTTLED, GP_UNKNOWN, GP_NOMAIL, GP_AUTHFAIL,
	GP_UNREACHED, GP_NOGREETING, GP_QUOTA };

#define GP_AT_MAX	((uint64_t)1 << 53)	/* the largest <at> taken */
#define GP_GRACE_MAX	(366 * 86400)		/* the largest <grace> taken, seconds */

/* COUNTS's numbers, in line order. */
enum gp_count {
	GP_C_QUEUED_MSGS, GP_C_QUEUED_RCPTS, GP_C_DELIVERED_MSGS, GP_C_DELIVERED_RCPTS,
	GP_C_DEFERRED_MSGS, GP_C_DEFERRED_RCPTS, GP_C_BOUNCED_MSGS, GP_C_BOUNCED_RCPTS,
	GP_C_SESSIONS, GP_C_SWITCHES, GP_C_RETURNS, GP_NCOUNTS
};

struct gp_req {
	enum gp_verb verb;
	uint32_t tag;
	char upstream[POLICY_NAME_MAX + 1];	/* ACQUIRE, RESUME, COUNTS, SETTLE, REFUSED */
	uint64_t grant;				/* SETTLE: the grant's id */
	char cls[POLICY_NAME_MAX + 1];		/* "" for "-" */
	char sender[GP_SENDER_MAX + 1];		/* "" for "-" */
	uint32_t w[UNIT_COUNT];
	struct route_when unless;		/* ACQUIRE: RK_OFF each when none */
	enum gp_outcome outcome;
	uint32_t accepted;			/* SENT */
	int64_t at;				/* SENT: ms, -1 for "-" */
	char text[GP_TEXT_MAX + 1];		/* THROTTLED, AUTHFAIL, REFUSED,
						 * UNREACHED, NOGREETING */
	int json;
	unsigned history_s;			/* STATUS JSON <seconds>; 0: none */
	uint64_t counts[GP_NCOUNTS];		/* COUNTS */
};

enum gp_rverb { GP_R_GRANT = 1, GP_R_OK, GP_R_SUSPENDED, GP_R_ERR, GP_R_STATUS, GP_R_LATER };

struct gp_reply {
	enum gp_rverb verb;
	uint32_t tag;		/* 0 for "-" (ERR, OK) */
	uint64_t id;		/* GRANT */
	uint32_t max_rcpt, msgs_per_conn;	/* GRANT: 0 = no cap */
	uint32_t grace;		/* GRANT: the upstream's grace, seconds */
	uint64_t secs;		/* SUSPENDED, LATER */
	enum route_kind why;	/* LATER */
	enum gp_code code;	/* ERR */
	char text[GP_TEXT_MAX + 1];	/* ERR */
	size_t length;		/* STATUS: body bytes that follow */
};

const char *gp_code_name(enum gp_code c);

/* Find one line in buf[0..len): 1 with *linelen (the "\n" included), 0 if
 * more bytes are needed, -1 (GP_TOOLONG) if there is no "\n" within
 * GP_LINE_MAX bytes. */
int gp_frame(const char *buf, size_t len, size_t *linelen);

/* Parse one line, without its "\n".  GP_OK, or an error with *why. */
enum gp_code gp_parse_request(const char *line, size_t len, struct gp_req *r,
    const char **why);
enum gp_code gp_parse_reply(const char *line, size_t len, struct gp_reply *r,
    const char **why);

/* Append one line, "\n" included.  The caller passes valid fields
 * (panic otherwise: a bug, not input). */
void gp_fmt_request(struct buf *b, const struct gp_req *r);
void gp_fmt_reply(struct buf *b, const struct gp_reply *r);

/* Is s a field of the given kind?  (Used by the formatters and callers.) */
int gp_valid_name(const char *s);
int gp_valid_word(const char *s, size_t max);
int gp_valid_text(const char *s, size_t max);

#endif
