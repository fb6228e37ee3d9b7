/*
 * secret.h: the SASL secret (password or OAuth token) of an upstream,
 * from secret_file (which must not be open to group or others: refused
 * otherwise: mail/secretfile.h), from the oauth section (an access token
 * weir obtains and refreshes itself, here in the deliverer: mail/oauth.h)
 * or from the standard output of secret_command (run with
 * /bin/sh -c, no stdin, stderr passed through, exit 0 required, in a
 * process group of its own with no descriptor but 0, 1 and 2; once it
 * has exited, or at the deadline, the whole group is killed, so nothing
 * it started outlives it or holds a descriptor of weir-remote's).  One
 * trailing LF or CRLF is removed.  The caller wipes it with
 * secret_wipe(); it never goes to argv, the environment or a log.
 *
 * Trusts: the file's owner and the command (both named by the
 * administrator in weir.conf), the OAuth provider (mail/oauth.h).
 * Config keys: secret_file, secret_command, oauth.
 */
#ifndef WEIR_SECRET_H
#define WEIR_SECRET_H

#include <stdint.h>

#include "lib/buf.h"
#include "mail/config.h"
#include "mail/secretfile.h"	/* SECRET_MAX, the rule for secret_file, secret_wipe */

/* 0 ok (secret in out); -1 with a reason in err. */
int secret_from_command(const char *command, uint64_t deadline_ms, struct buf *out,
    struct buf *err);

/* up's secret from whichever source it names (up->username set).
 * 0 ok, the secret in out; -1 none for now (the reason in err: local
 * trouble, or the OAuth token endpoint down, slow or failing: mail
 * waits); -2 the OAuth provider refused the refresh token or the client
 * (err says what to run): the credentials are refused, as by a 535.
 * With oauth, how gets what was done ("cached access token ...",
 * "refreshed ..."), for the probe's token line. */
int secret_get(const struct weir_upstream *up, struct buf *out, struct buf *how,
    struct buf *err);

#endif
