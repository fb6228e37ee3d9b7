/*
 * smtp.h: the SMTP client of weir-remote, an explicit state machine:
 *
 *   CONNECT -> BANNER -> EHLO -> [STARTTLS -> TLS -> EHLO] -> [AUTH]
 *     -> MAIL -> RCPT... -> DATA -> BODY -> DOT -> (MAIL again | QUIT) -> DONE
 *
 * (smtps: CONNECT -> TLS -> BANNER -> EHLO -> ...).  Every transition is
 * logged.  The probe (smtp_probe, weir-remote -T) runs the same machine
 * and stops after AUTH: ... -> [AUTH] -> QUIT -> DONE, no MAIL.  Each wait has its own timeout (struct weir_upstream, RFC 5321
 * 4.5.3.2 defaults).  With PIPELINING, MAIL, the RCPTs and DATA go out in
 * one write and their replies are read in order (RFC 2920).
 *
 * One message is one transaction (one grant of weir-gate covers one
 * message): its recipients are the first ones, up to max_recipients,
 * the gate's cap and RCPTMAX (RFC 9422 LIMITS, when offered).  The
 * recipients beyond are "undone": reported 's' ("not attempted"), never
 * tried, counted in res->undone; they are always the last ones of the
 * list, so the caller can send them with a grant of their own.
 *
 * smtp_deliver() carries one message over a session of its own.  A kept
 * session (smtp_session_*, weir-remote -S) carries message after message
 * over one connection: connect, greet, STARTTLS, AUTH for the first;
 * then for each, MAIL, RCPT..., DATA, with RSET first when the one before
 * did not end in a 250 to the final dot:
 *
 *   ... -> DOT -> IDLE -> [RSET] -> MAIL -> ... -> DOT -> IDLE ... -> QUIT
 *
 * The session ends (smtp_session_open() says 0) after a failure that
 * leaves it in doubt (no reply, a 421, a refused MAIL or RSET, a throttle
 * reply); a recipient's or a message's own 4xx/5xx leaves it open.  A
 * server that closed the session while it was idle is found before the
 * next message's MAIL, and that message is "stale": not sent, to be sent
 * again at once on a new session.
 *
 * What each reply means is decided by mail/trouble.c, not here.
 *
 * Trusts: nothing the server sends.  Config keys: every key of struct
 * weir_upstream, through struct smtp_params.
 */
#ifndef WEIR_SMTP_H
#define WEIR_SMTP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "mail/config.h"
#include "mail/trouble.h"
#include "remote/body.h"
#include "remote/tls.h"

struct smtp_params {
	const struct weir_upstream *up;	/* timeouts, tls, mechanisms, max_recipients */
	const char *host;		/* where to connect; name checked by TLS */
	unsigned port;
	const char *helo;		/* our name for EHLO */
	struct tls_client *tls;		/* NULL only with tls = none */
	const char *secret;		/* NULL: no AUTH */
	size_t secretlen;
	const struct trouble_rules *rules;
	unsigned max_rcpt;		/* the gate's cap per transaction; 0: none */
};

/* One recipient's fate, as qmail-remote reports it. */
struct smtp_rcpt {
	const char *addr;
	char kind;		/* 'r' delivered, 's' deferred, 'h' bounced, 0 undecided */
	struct buf text;
};

struct smtp_result {
	struct smtp_rcpt *rcpt;
	size_t nrcpt;
	size_t delivered;
	char kind;		/* 'K', 'Z' or 'D' */
	struct buf text;	/* the message report's text */
	int suspend;		/* a throttle reply was seen: suspend the relay */
	int quota;		/* it was a quota reply (mail/replyclass.h) */
	int authfail;		/* AUTH refused (5xx) or the TLS certificate failed */
	struct buf throttle;	/* that reply (or the TLS failure), one line */
	int relay_failure;	/* connect, TLS, AUTH or MAIL FROM failed */
	int connected;		/* a connection to the upstream was made */
	int unreached;		/* a connection was tried and could not be made */
	int greeted;		/* the greeting, TLS and EHLO got through (or a
				 * kept session's earlier message's did) */
	int auth_ok;		/* AUTH was accepted (this message's session) */
	int mail_accepted;	/* MAIL FROM was accepted */
	int dot_unanswered;	/* the final dot went out; no reply came */
	int64_t accepted_at;	/* clock_mono_ms() of the 250 to the dot; -1: none */
	size_t undone;		/* last recipients not attempted (one transaction) */
	size_t transactions;	/* transactions that reached DATA */
	int stale;		/* a kept session was found closed before this
				 * message's MAIL was accepted: nothing sent */
	/* smtp_probe only: one line per step, "STEP ok: what" or "STEP
	 * failed: why" (STEP: connect, tls, banner, ehlo, helo, starttls,
	 * auth, quit), and whether one failed. */
	struct buf steps;
	int probe_failed;
};

/* Deliver the message (opened with body_open, streamed from it for each
 * transaction) from sender to rcpts.  Never fails as a function:
 * everything ends in res. */
void smtp_deliver(const struct smtp_params *p, const char *sender, const char *const *rcpts,
    size_t nrcpt, struct body *body, struct smtp_result *res);
/* A kept session with p (which must outlive it); nothing is sent until
 * its first message. */
struct smtp_session *smtp_session_new(const struct smtp_params *p);
/* One message over the session, as smtp_deliver() for one. */
void smtp_session_deliver(struct smtp_session *ss, const char *sender,
    const char *const *rcpts, size_t nrcpt, struct body *body, struct smtp_result *res);
/* 1: ready for another message (connected, or not tried yet). */
int smtp_session_open(const struct smtp_session *ss);
/* QUIT if open; free. */
void smtp_session_free(struct smtp_session *ss);
/* The connection's TLS session, for the next session to resume
 * (tls_session_export): 0, or -1 if there is none to give. */
int smtp_session_tls(struct smtp_session *ss, struct buf *out);
/* Connect, greet, STARTTLS, AUTH as for a delivery, then QUIT: no MAIL.
 * What each step did goes to res->steps.  Never fails as a function. */
void smtp_probe(const struct smtp_params *p, struct smtp_result *res);
void smtp_result_free(struct smtp_result *res);

#endif
