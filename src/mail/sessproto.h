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
 *   SP_MESSAGE  ID NUL SENDER NUL RCPT NUL ... RCPT NUL
 *                                    a message, with SP_NFD descriptors in
 *                                    the order of enum sp_fd: mess/S/N
 *                                    (read-only), the write end of the
 *                                    report pipe (qmail-remote's reports,
 *                                    remote.h) and of the outcome pipe
 *                                    (mail/outcome.h).  ID is the message
 *                                    id (mail/queue.h's INODE.SEC.NSEC);
 *                                    SENDER may be empty (<>); at least
 *                                    one RCPT, none empty; every address
 *                                    as mail/envelope.h allows; at most
 *                                    SESSION_REQUEST_MAX bytes in all (a
 *                                    bigger batch goes to a deliverer of
 *                                    its own)
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
 * Trusts: nothing; every datagram is checked here.  Config keys: none.
 */
#ifndef WEIR_SESSPROTO_H
#define WEIR_SESSPROTO_H

#include <stddef.h>

#include "lib/buf.h"

#define SESSION_REQUEST_MAX	(256 * 1024)	/* an SP_MESSAGE datagram */
#define SESSION_TLS_MAX		(64 * 1024)	/* a TLS session's DER */
#define SESSION_WORD_MAX	(6 + SESSION_TLS_MAX)	/* "ready" NUL DER */

enum sp_kind { SP_TLS = 1, SP_MESSAGE, SP_READY, SP_CLOSING };

/* The descriptors an SP_MESSAGE carries, in this order. */
enum sp_fd { SP_FD_MESSAGE, SP_FD_REPORT, SP_FD_OUTCOME, SP_NFD };

struct sp_request {
	enum sp_kind kind;		/* SP_TLS or SP_MESSAGE */
	const char *der;		/* SP_TLS: into the datagram */
	size_t derlen;
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
void sp_fmt_message(struct buf *b, const char *qid, const char *sender,
    const char *const *rcpts, size_t n);
/* The length sp_fmt_message would give. */
size_t sp_message_len(const char *qid, const char *sender, const char *const *rcpts,
    size_t n);
void sp_fmt_word(struct buf *b, enum sp_kind kind, const void *der, size_t n);

/* A datagram p[0..n) that came with nfd descriptors, from weir-send: 0,
 * or -1 with what is wrong in *why. */
int sp_parse_request(const char *p, size_t n, size_t nfd, struct sp_request *r,
    const char **why);
void sp_request_free(struct sp_request *r);
/* A datagram from the deliverer: 0, or -1 with *why. */
int sp_parse_word(const char *p, size_t n, struct sp_word *w, const char **why);

#endif
