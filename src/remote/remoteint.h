/*
 * remoteint.h: weir-remote's internals shared by remote.c (arguments,
 * one message, the probe), session.c (the kept session, -S) and
 * keepalive.c (the OAuth keep-alive, -K).  Not for other programs; the
 * interface is remote.h.
 *
 * Trusts: see remote.h.  Config keys: those of remote.c.
 */
#ifndef WEIR_REMOTEINT_H
#define WEIR_REMOTEINT_H

#include <sys/types.h>

#include "lib/buf.h"
#include "lib/log.h"
#include "mail/config.h"
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

/* The config and the upstream for sender (or -u upname) into r: 0, or
 * -1 with the report's text in why. */
int remote_find_upstream(struct remote *r, const char *cfile, const char *upname,
    const char *host, const char *sender, struct buf *why);
/* The secret, TLS and the reply rules: 0, or -1 with the report's text
 * in why. */
int remote_get_ready(struct remote *r, struct buf *why);
void remote_free(struct remote *r);

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
/* Into res: one message-level "Z" for all nrcpt recipients (each "s"),
 * logged; nothing reached the upstream (smtp_result_free). */
void remote_whole_result(struct smtp_result *res, size_t nrcpt, const char *fmt, ...)
    PRINTFLIKE(3, 4);
/* The outcome line (mail/outcome.h) for res, appended to line. */
void remote_outcome(const struct smtp_result *res, struct buf *line);
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
