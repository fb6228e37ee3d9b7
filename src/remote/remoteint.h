/*
 * remoteint.h: weir-remote's internals: the shared core (remote.c) and
 * the modes that use it, each a file of its own: the one-message run
 * (single.c), the probe (probe.c, -T), the kept session (session.c, -S)
 * and the OAuth keep-alive (keepalive.c, -K), one of which run.c runs.
 * Not for other programs; the interface is remote.h.
 *
 * Trusts: see remote.h.  Config keys: those of remote.c.
 */
#ifndef WEIR_REMOTEINT_H
#define WEIR_REMOTEINT_H

#include <sys/types.h>

#include "lib/buf.h"
#include "lib/log.h"
#include "mail/config.h"
#include "mail/outcome.h"
#include "mail/trouble.h"
#include "remote/body.h"
#include "remote/smtp.h"
#include "remote/tokenok.h"

/* The upstream and how to reach it, from -c and -u (or the sender). */
struct remote {
	struct weir_config cfg;
	int have_cfg;
	struct weir_upstream fallback;
	int have_fallback;
	const struct weir_upstream *up;
	struct smtp_params p;
	struct buf secret;
	struct trouble_rules *rules;
	struct buf refused;	/* the OAuth provider refused the credentials: why */
	struct tokenok tok;	/* an OAuth alarm's end at an accepted AUTH */
};

/* The modes (run.c runs one), each returning the exit status.  One
 * message (single.c): its reports on fd 1, the outcome line on outfd
 * (-r; -1: none); use_gate 0 (-n): the caller holds the grant. */
int remote_single(const char *cfile, const char *upname, const char *qid, int use_gate,
    int outfd, pid_t parent, const char *host, const char *sender, const char *const *rcpts,
    size_t nrcpt);
/* -T (probe.c): a line per step on fd 1; exit 0, 1 (a step failed), 2. */
int remote_probe(const char *cfile, const char *upname);

/* The config and the upstream for sender (or -u upname) into r: 0, or
 * -1 with the report's text in why. */
int remote_find_upstream(struct remote *r, const char *cfile, const char *upname,
    const char *host, const char *sender, struct buf *why);
/* The secret, TLS and the reply rules: 0, or -1 with the report's text
 * in why. */
int remote_get_ready(struct remote *r, struct buf *why);
void remote_free(struct remote *r);
/* The port of an upstream without port =: by its tls. */
unsigned remote_default_port(int tls);
/* up's secret (when it has a username) into secret and p, and the TLS
 * client (unless tls = none), then the set-id's ids dropped: 0; -1 with
 * the reason in err; -2 the OAuth provider refused the credentials
 * (secret.h).  how: what the OAuth step did. */
int remote_prepare(const struct weir_upstream *up, struct smtp_params *p, struct buf *secret,
    struct tokenok *tok, struct buf *how, struct buf *err);
/* What replies mean for up (mail/trouble.h): policy.conf's
 * throttle_reply patterns, up's reply_rules, the built-in rules. */
struct trouble_rules *remote_rules(const struct weir_config *cfg, const struct weir_upstream *up);

/* -K (keepalive.c): the exit status (mail/oauth.h's OAUTH_KA_*). */
int remote_keepalive(const char *cfile, const char *upname);

/* Set-id: ask again for the death signal weir-send set, sig (the set-id
 * exec and the change of ids clear it); exit 111 if the caller is gone. */
void remote_die_with_parent(pid_t parent, int sig);

/* The message on mfd, read through: 0, or -1 when it cannot be sent as
 * it is, with its reports in *bad (smtp_result_free). */
int remote_open_message(struct body *body, const char *qid, int mfd, size_t nrcpt,
    struct smtp_result *bad);
/* Sender rewriting (mail/rewrite.h): the envelope sender into out, and
 * the From: in body.  0, or -1 (the rules do not build) with why. */
int remote_rewrite_sender(const struct weir_upstream *up, const char *hostname,
    const char *sender, struct body *body, struct buf *out, struct buf *err);

/* The reports for res on fd: 0, or 111 if they could not be written. */
int remote_emit(int fd, const struct smtp_result *res);
/* remote_whole_result()'s reports on fd: the exit status, as
 * remote_emit() (one message's trouble before its session, bad usage). */
int remote_whole(int fd, size_t nrcpt, const char *fmt, ...) PRINTFLIKE(3, 4);
/* Into res: one message-level "Z" for all nrcpt recipients (each "s"),
 * logged; nothing reached the upstream (smtp_result_free). */
void remote_whole_result(struct smtp_result *res, size_t nrcpt, const char *fmt, ...)
    PRINTFLIKE(3, 4);
/* The outcome line (mail/outcome.h) for res, appended to line; its
 * kind, what the gate must hear, and the text that goes with it (at
 * most max - 1 bytes), for a caller that reports to the gate itself. */
void remote_outcome(const struct smtp_result *res, struct buf *line);
enum outcome_kind remote_outcome_kind(const struct smtp_result *res);
void remote_outcome_text(const struct smtp_result *res, enum outcome_kind k, char *out,
    size_t max);
/* The same for a message r could not even try (the session could not be
 * set up): a refund; or, when the OAuth provider refused the credentials
 * (r->refused), authfail, as a 535 would have been, for the gate to
 * suspend the upstream. */
void remote_not_sent(const struct remote *r, struct buf *line);

/* -S: the kept session server (session.c), with its flight file (-f; -1:
 * none); the exit status. */
int remote_session(const char *cfile, const char *upname, const char *host, pid_t parent,
    int flight);

#endif
