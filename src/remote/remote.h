/*
 * remote.h: weir-remote, the qmail-remote(8) compatible deliverer.
 *
 *   weir-remote [-c FILE] [-u UPSTREAM] [-n [-r FD]] [-q ID] host sender recip...
 *   weir-remote [-c FILE] -T -u UPSTREAM
 *   weir-remote [-c FILE] -S [-f FD] -u UPSTREAM host
 *   weir-remote [-c FILE] -K -u UPSTREAM
 *
 * One message (the first form): it is read from fd 0 (a qmail mess
 * file).  On fd 1 come one report per recipient, in argument order: "r"
 * delivered, "h" permanent failure, "s" temporary failure; then one
 * message report: "K" delivered (to the recipients reported "r"), "Z"
 * temporary failure, "D" permanent failure.  Each report is a letter,
 * human text, and a NUL (remote_format).
 * The exit status is 0 whenever the reports were written (111 if even
 * that failed); a crash counts as a temporary failure for the caller.
 * Our own trouble (bad usage, config, secret, memory) is always "Z":
 * mail is never bounced because weir-remote could not run.
 *
 *   -n      the caller holds the grant: weir-gate is not asked (below);
 *           set-id, the process dies with its caller (PR_SET_PDEATHSIG)
 *   -r FD   with -n: the outcome line (mail/outcome.h) on FD (3 or
 *           above), for the caller to report to weir-gate
 *   -q ID   the message's id (mail/queue.h, INODE.SEC.NSEC) for the log
 *           lines about it; without it they name the file's inode
 *
 * The kept session (-S, session.c): for weir-send, which holds a grant
 * for each message it hands over.  fd 0 is a SOCK_SEQPACKET socket
 * carrying the datagrams of mail/sessproto.h: each message comes with
 * its file and the pipes for its reports and outcome line, all of them
 * over one connection to the upstream (smtp.h's kept session); "ready"
 * or "closing" after each; end of file on fd 0 ends it (QUIT, exit 0).
 * With -f FD, the session's flight file: each message's outcome goes
 * there too, so that it outlives weir-send (mail/sessproto.h), and a
 * deliverer left alone by weir-send (SIGTERM, its death signal) finishes
 * the message it holds within half its grace, then exits.
 *
 * The upstream: -u names an upstream section of weir.conf; without -u,
 * the first whose senders match the sender, else the first without
 * senders; with no section at all, host itself on port 25 with
 * tls = starttls and verification.  An upstream without host = uses the
 * host argument; without port =, 587 (starttls), 465 (smtps) or 25
 * (none).
 *
 * The gate: unless -n says the caller already holds a grant, weir-remote
 * asks weir-gate (gate_socket) for one before connecting: ACQUIRE for
 * the upstream's name, 1 message, the recipients, 1 connection; the
 * grant's recipient cap bounds the one transaction (smtp.h).  Afterwards
 * it reports the outcome (remote_outcome_kind() in remote.c): SENT with
 * the recipients accepted and the instant of the 250, UNKNOWN, NOMAIL,
 * REFUND, THROTTLED or AUTHFAIL.  No socket at
 * gate_socket (ENOENT) means no gate runs here: weir-remote sends, and
 * logs that it did so without a grant.  A gate that exists but does not
 * answer, or refuses, is "Z": never send ungoverned past a gate.  An
 * upstream without a section (no name) is not gated.
 *
 * The probe (-T, for weir test-relay): connect to the upstream, banner,
 * EHLO, STARTTLS, EHLO, AUTH, QUIT, through the same state machine
 * (smtp_probe), reading no message, sending no MAIL and asking the gate
 * for nothing.  On fd 1, one line per step: "STEP ok: what" or "STEP
 * failed: why" (STEP: config, secret, connect, tls, banner, ehlo, helo,
 * starttls, auth, quit; "auth skipped: ..." without a username); exit 0
 * if every step worked, 1 if one failed, 2 for bad usage.
 *
 * The OAuth keep-alive (-K, run by weir-send at least every refresh_idle
 * of the upstream's oauth section, mail or none): the refresh token
 * used by a refresh when nothing has used it for refresh_idle, else
 * nothing (keepalive.c, mail/oauth.h); no SMTP, no grant.  A refusal
 * (or no token) leaves the status file saying a login is needed and is
 * told to weir-gate (REFUSED), which suspends the upstream.  Log lines
 * only; the exit status is mail/oauth.h's OAUTH_KA_*: 0 refreshed or not
 * due, 1 not now (the endpoint, local trouble), 2 bad usage or no such
 * upstream with an oauth section, 3 refused: a login is needed.
 *
 * Trusts: its caller (weir-send or qmail-rspawn) for the arguments; the
 * administrator for weir.conf and the secret.  Config keys: hostname
 * (for EHLO), gate_socket (the one-message run, single.c), and the
 * upstream sections.
 */
#ifndef WEIR_REMOTE_H
#define WEIR_REMOTE_H

#include <sys/types.h>

#include "lib/buf.h"
#include "remote/smtp.h"

/* Everything after main's set-up: returns the exit status.  parent is
 * getppid() as main() found it first thing (for -n when set-id). */
int remote_run(int argc, char **argv, pid_t parent);

/* The reports for res as the NUL-terminated bytes written to fd 1. */
void remote_format(const struct smtp_result *res, struct buf *out);

#endif
