/*
 * sasl.h: the SASL client of weir-remote.  sasl.c is the only file that
 * includes Cyrus SASL headers.  Mechanisms come from the Cyrus plugins
 * installed (Debian's libsasl2-modules: PLAIN, LOGIN, CRAM-MD5,
 * DIGEST-MD5, SCRAM-SHA-1, SCRAM-SHA-256, ...); XOAUTH2 and OAUTHBEARER
 * are built in when no plugin provides them, and are only used when the
 * mechanisms list names them (their secret is a token, not a password).
 *
 * Challenges and responses cross this interface in base64, as SMTP AUTH
 * carries them (RFC 4954); the caller never sees the secret's bytes.
 * No SASL security layer is negotiated (max_ssf 0): TLS protects the
 * session.
 *
 * Trusts: nothing the server sends.  Config keys (through struct
 * weir_upstream): username, mechanisms.
 */
#ifndef WEIR_SASL_H
#define WEIR_SASL_H

#include <stddef.h>

#include "lib/buf.h"
#include "mail/config.h"

struct saslc;

/* Once per process.  0 ok; -1 with err. */
int saslc_init(struct buf *err);
/* Does this process have a client for mech (a plugin or built in)? */
int saslc_have(const char *mech);

/* A client for one authentication of user to host:port.  The secret is
 * copied; saslc_free() wipes the copy. */
struct saslc *saslc_new(const char *host, unsigned port, const char *user,
    const char *secret, size_t secretlen, struct buf *err);
void saslc_free(struct saslc *s);

/* Pick the first mechanism of prefs (or of the default order when prefs
 * is empty) that the server offers (server_mechs: the AUTH keyword's
 * words, space-separated) and that we have, and start it.  On 0: *mech
 * names it, and if *has_initial, initial holds the base64 initial
 * response ("" for an empty one).  -1: none in common, or the mechanism
 * failed to start; reason in err. */
int saslc_start(struct saslc *s, const char *server_mechs, const struct strlist *prefs,
    const char **mech, int *has_initial, struct buf *initial, struct buf *err);
/* Answer the base64 challenge of a 334 reply with a base64 response. */
int saslc_step(struct saslc *s, const char *challenge, size_t len, struct buf *response,
    struct buf *err);
/* After 235: 1 if the mechanism finished on our side too (for SCRAM: the
 * server proved it knows the password), 0 if not. */
int saslc_complete(const struct saslc *s);

/* The default preference order, for messages and tests. */
extern const char *const saslc_default_order[];

#endif
