/*
 * sessproto.h: the kept-session protocol, between weir-send
 * (src/send/session.c) and `weir-remote -S` (src/remote/session.c).
 * Datagrams on a SOCK_SEQPACKET socketpair whose other end is the
 * deliverer's fd 0; nothing else travels on it.
 *
 * weir-send to the deliverer:
 *
 *   SP_TLS      "tls" NUL DER        a TLS session to resume (once, before
 *                                    the first message; no descriptor);
 *                                    DER: 1 to SESSION_TLS_MAX bytes
 *   SP_MESSAGE  ID NUL GRACE NUL SENDER NUL RCPT NUL ... RCPT NUL
 *                                    a message, with SP_NFD descriptors in
 *                                    the order of enum sp_fd: mess/S/N
 *                                    (read-only), the write end of the
 *                                    report pipe (qmail-remote's reports,
 *                                    remote.h) and of the outcome pipe
 *                                    (mail/outcome.h).  ID is the message
 *                                    id (mail/queue.h's INODE.SEC.NSEC);
 *                                    GRACE, in seconds (decimal, 0 to
 *                                    SP_GRACE_MAX), is its grant's grace
 *                                    (weir-gate's GRANT): see "Left
 *                                    alone" below; SENDER may be empty
 *                                    (<>); at least one RCPT, none empty;
 *                                    every address as mail/envelope.h
 *                                    allows; at most SESSION_REQUEST_MAX
 *                                    bytes in all (a bigger batch goes to
 *                                    a deliverer of its own)
 *   end of file                      no more: QUIT and exit
 *
 * The deliverer to weir-send, after each message, once its reports and
 * outcome are written and their pipes closed:
 *
 *   SP_READY    "ready"              it takes another message
 *               "ready" NUL DER      the same, with the connection's TLS
 *                                    session (when it is new) for later
 *                                    sessions to resume; DER: 1 to
 *                                    SESSION_TLS_MAX bytes
 *   SP_CLOSING  "closing"            the session ends (it QUITs)
 *   end of file                      it ended (or died)
 *
 * Nothing else is well formed: a datagram that does not parse, or comes
 * out of turn, ends the session.
 *
 * The flight file.  A message's outcome must survive the death of the
 * weir-send that handed it over (the upstream may be answering its final
 * dot): weir-send makes one file per session, flight/NAME in the queue
 * (weir's own folder, src/mail/QUEUE.md), locks it (flock, LOCK_EX) and
 * gives the open file to the deliverer as its descriptor SP_FLIGHT_FD
 * (weir-remote -S -f 3), so that the lock is held as long as either of
 * them lives: the deliverer never opens anything of the queue.  The file
 * holds the message on the session, records appended in this order:
 *
 *   weir-send, before the request (the file emptied first):
 *     "msg" SP ID SP UPSTREAM SP GRANT SP BOOT SP N (SP OFFSET){N} LF
 *       the grant's id at weir-gate, the boot it was handed over in
 *       (lib/bootid.h: a 250's time is CLOCK_MONOTONIC), and where the N
 *       recipients of the request stand in remote/S/N, in request order
 *   the deliverer, once it takes the request, before any SMTP:
 *     "taken" LF
 *   the deliverer, once the transaction is over, before its pipes:
 *     "done" SP LEN LF, LEN bytes of reports, the outcome line
 *       (fdatasync'ed when weir-send is gone)
 *
 * and weir-send empties it once the message's marks are durable.  A
 * weir-send that finds one at start, unlocked: "done" is the outcome to
 * apply (and to SETTLE at weir-gate); "msg" alone, the request never
 * reached the deliverer (a refund); "taken" without "done", the deliverer
 * died mid-way (unknown).  Locked: its deliverer still works; weir-send
 * waits for the file's close (inotify) before it touches the message.
 *
 * Left alone.  A deliverer whose weir-send died (its death signal,
 * SIGTERM, or the parent gone) takes no new message, and finishes the
 * one it holds only while weir-gate still counts it: it sends nothing
 * and stops waiting GRACE / 2 seconds after it took the request, since
 * the gate counts a dropped grant as accepted until the drop + GRACE.
 *
 * Trusts: nothing; every datagram is checked here.  Config keys: none.
 */
#ifndef WEIR_SESSPROTO_H
#define WEIR_SESSPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "lib/bootid.h"
#include "lib/buf.h"
#include "mail/outcome.h"
#include "mail/policy.h"
#include "mail/queue.h"

#define SESSION_REQUEST_MAX	(256 * 1024)	/* an SP_MESSAGE datagram */
#define SP_GRACE_MAX		(366 * 86400)	/* GRACE, seconds */
#define SP_FLIGHT_FD		3		/* the deliverer's flight file */
#define SP_FLIGHT_MAX		(REPORT_MAX + OUTCOME_MAX + 64 + SESSION_REQUEST_MAX)
#define SESSION_TLS_MAX		(64 * 1024)	/* a TLS session's DER */
#define SESSION_WORD_MAX	(6 + SESSION_TLS_MAX)	/* "ready" NUL DER */

enum sp_kind { SP_TLS = 1, SP_MESSAGE, SP_READY, SP_CLOSING };

/* The descriptors an SP_MESSAGE carries, in this order. */
enum sp_fd { SP_FD_MESSAGE, SP_FD_REPORT, SP_FD_OUTCOME, SP_NFD };

struct sp_request {
	enum sp_kind kind;		/* SP_TLS or SP_MESSAGE */
	const char *der;		/* SP_TLS: into the datagram */
	size_t derlen;
	unsigned grace;			/* SP_MESSAGE: seconds */
	const char *qid, *sender;	/* SP_MESSAGE: into the datagram */
	const char **rcpts;		/* SP_MESSAGE: malloc'ed (sp_request_free) */
	size_t nrcpt;
};

struct sp_word {
	enum sp_kind kind;		/* SP_READY or SP_CLOSING */
	const char *der;		/* SP_READY: the TLS session, or NULL */
	size_t derlen;
};

const char *sp_kind_name(enum sp_kind k);

/* The datagrams, appended to b.  The caller passes valid fields (the
 * message's are weir-send's own; panic otherwise: a bug, not input). */
void sp_fmt_tls(struct buf *b, const void *der, size_t n);
void sp_fmt_message(struct buf *b, const char *qid, unsigned grace, const char *sender,
    const char *const *rcpts, size_t n);
/* The length sp_fmt_message would give. */
size_t sp_message_len(const char *qid, unsigned grace, const char *sender,
    const char *const *rcpts, size_t n);
void sp_fmt_word(struct buf *b, enum sp_kind kind, const void *der, size_t n);

/* A datagram p[0..n) that came with nfd descriptors, from weir-send: 0,
 * or -1 with what is wrong in *why. */
int sp_parse_request(const char *p, size_t n, size_t nfd, struct sp_request *r,
    const char **why);
void sp_request_free(struct sp_request *r);
/* A datagram from the deliverer: 0, or -1 with *why. */
int sp_parse_word(const char *p, size_t n, struct sp_word *w, const char **why);

/* A flight file, as sp_parse_flight reads it. */
struct sp_flight {
	int empty;			/* nothing on the session */
	char qid[QUEUE_ID_MAX];
	char upstream[POLICY_NAME_MAX + 1];
	uint64_t grant;
	char boot[BOOT_ID_MAX];
	size_t n, *offs;		/* malloc'ed (sp_flight_free) */
	int taken, done;
	const char *report;		/* done: into the file's bytes */
	size_t reportlen;
	const char *outcome;		/* done: the line, with its LF */
	size_t outcomelen;
};

/* The records, appended to b (the caller passes valid fields). */
void sp_fmt_flight_msg(struct buf *b, const char *qid, const char *upstream, uint64_t grant,
    const char *boot, const size_t *offs, size_t n);
void sp_fmt_flight_taken(struct buf *b);
void sp_fmt_flight_done(struct buf *b, const char *report, size_t reportlen,
    const char *outcome, size_t outcomelen);
/* The whole file p[0..n) into f: 0, or -1 with *why (torn or not
 * weir's: the caller counts it as unknown). */
int sp_parse_flight(const char *p, size_t n, struct sp_flight *f, const char **why);
void sp_flight_free(struct sp_flight *f);

#endif
