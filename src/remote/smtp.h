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
 * One session carries one transaction (one grant of weir-gate covers
 * one message, one connection): its recipients are the first ones, up
 * to max_recipients, the gate's cap and RCPTMAX (RFC 9422 LIMITS, when
 * offered).  The recipients beyond are "undone": reported 's' ("not
 * attempted"), never tried, counted in res->undone; they are always the
 * last ones of the list, so the caller can send them with a grant of
 * their own.
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
	int authfail;		/* AUTH refused (5xx) or the TLS certificate failed */
	struct buf throttle;	/* that reply (or the TLS failure), one line */
	int relay_failure;	/* connect, TLS, AUTH or MAIL FROM failed */
	int connected;		/* a connection to the upstream was made */
	int mail_accepted;	/* MAIL FROM was accepted */
	int dot_unanswered;	/* the final dot went out; no reply came */
	int64_t accepted_at;	/* clock_mono_ms() of the 250 to the dot; -1: none */
	size_t undone;		/* last recipients not attempted (one transaction) */
	size_t transactions;	/* transactions that reached DATA */
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
/* Connect, greet, STARTTLS, AUTH as for a delivery, then QUIT: no MAIL.
 * What each step did goes to res->steps.  Never fails as a function. */
void smtp_probe(const struct smtp_params *p, struct smtp_result *res);
void smtp_result_free(struct smtp_result *res);

#endif
