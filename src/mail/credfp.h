/*
 * credfp.h: a fingerprint of the credentials an upstream's deliveries
 * authenticate with, so that weir-gate can tie an authentication
 * suspension to the credentials that failed and lift it when they
 * change (weir-gate(8)), without ever reading the secret.
 *
 * What goes in: the upstream's host, port and tls; username; the secret's
 * source: for secret_command the command string, for secret_file its
 * path and the identity of the file found there (device, inode, size,
 * mtime and ctime: a changed file, in place or renamed over, changes
 * them, and its ctime cannot be set back), or the error of its stat; for
 * an oauth section the client (client_id, the identity of
 * client_secret_file, certificate_file, private_key_file, key_file), scope, token_endpoint and the identity of
 * token_file (none before the first login), which a login replaces, and
 * so does each refresh: an OAuth upstream's suspension is lifted at a
 * restart that follows a login or a refresh, which is harmless (a try
 * with a token, unlike one with a wrong password, locks no account out);
 * and what a certificate failure (also an AUTHFAIL) depends on: verify,
 * fingerprint, ca_file and its identity.  weir-gate and weir-send may
 * not read the secret file nor the token file (only the deliverer's user
 * may); a stat needs only search permission on its folders.  The result
 * is a 64-bit FNV-1a hash of those bytes: no secret in it, nothing to
 * guess a password from.  A change it cannot see: what secret_command
 * prints (only its string counts), and a secret_file whose folder
 * weir-gate may not search (every stat fails alike).
 *
 * cred_fix() says what refused credentials ask of the administrator, by
 * the upstream's kind: the one text of weir-gate's log line and STATUS,
 * and of weir-metrics' status page.
 *
 * Trusts: the config.  Config keys: the upstream section's host, port,
 * tls, verify, fingerprint, ca_file, username, secret_file,
 * secret_command, and its oauth section's client_id, client_secret_file,
 * scope, token_endpoint, token_file.
 */
#ifndef WEIR_CREDFP_H
#define WEIR_CREDFP_H

#include <stdint.h>

#include "lib/buf.h"
#include "mail/config.h"

/* u's fingerprint.  *why: NULL, or the key whose file could not be
 * looked at ("secret_file", "ca_file": its stat failed with *err):
 * changes to that file are not seen. */
uint64_t credfp(const struct weir_upstream *u, const char **why, int *err);

/* The fingerprint of an upstream without a section in weir.conf. */
uint64_t credfp_none(void);

/* What to do about refused credentials of upstream name, appended to b
 * as a clause without a capital or a full stop: for a reply the table
 * of mail/authreply.h knows (reply: the upstream's, NULL if none), its
 * advice; else with oauth (it has an oauth section) a new login, else a
 * fix of the secret and a reload. */
void cred_fix(struct buf *b, const char *name, int oauth, const char *reply);

#endif
