/*
 * creds.h: weir-gate's view of each upstream's credentials, so that an
 * authentication suspension belongs to the credentials that failed
 * (issue 22): a new suspension is noted with the fingerprint of the
 * credentials in force (mail/credfp.h; the journal keeps it, never a
 * secret), and at start one whose credentials have changed since is
 * lifted, one whose credentials are the same is kept.  A reload lifts
 * every authentication suspension anyway (server.c): it is the
 * operator's "try again"; a restart may be anything's (a crash, a boot,
 * the kill of a supervisor), and must not bring back the tries of a
 * wrong password.
 *
 * The fingerprints are taken as weir-gate's own user, at start and at
 * SIGHUP (weir.conf read again for them), with a stat of secret_file
 * and ca_file: weir-gate may not read the secret.
 *
 * Trusts: weir.conf.  Config keys: the upstream sections' (credfp.h).
 */
#ifndef WEIR_GATE_CREDS_H
#define WEIR_GATE_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include "gate/journal.h"
#include "gate/window.h"
#include "mail/config.h"

struct creds {
	size_t n;
	char **name;		/* weir.conf's upstream sections */
	uint64_t *fp;
	int *oauth;		/* it has an oauth section: a login mends refused credentials */
};

/* The fingerprints of ups[0..n) (what replaced c's), each file that
 * cannot be looked at said in a line. */
void creds_note(struct creds *c, const struct weir_upstream *ups, size_t n);
/* The same from the file (config_load(): NULL is the default place); a
 * file that does not load leaves c as it was, with a line. */
void creds_reload(struct creds *c, const char *config_file);
/* name's fingerprint (credfp_none() without a section). */
uint64_t creds_of(const struct creds *c, const char *name);
/* 1 if name's section has an oauth section (cred_fix's kind). */
int creds_oauth(const struct creds *c, const char *name);
void creds_free(struct creds *c);

/* At start, after the journal's replay into g: each authentication
 * suspension still running is lifted (with an E record in j) if its
 * credentials are not c's, else kept (its kind noted: auth_oauth); one
 * line each.  wmm: wall ms minus
 * monotonic ms, for the times in the lines. */
void creds_check(const struct creds *c, struct wgate *g, struct journal *j, int64_t now,
    int64_t wmm);

#endif
