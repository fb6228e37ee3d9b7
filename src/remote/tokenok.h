/*
 * tokenok.h: the end of an OAuth alarm at an accepted AUTH (mail/oauth.h,
 * oauth_token_worked).  weir-remote runs TLS and SMTP as its caller
 * (set-user-id: remote.c's remote_prepare), which may not write the token
 * status file; so, only while that file says a login is needed (or an
 * error), a helper forked before the change of ids keeps the deliverer's
 * identity and waits on a pipe for word that the upstream accepted AUTH
 * with the token; then it ends the alarm, if token_file still holds that
 * token.  Without word (the process ends, AUTH refused) it does nothing.
 *
 * Trusts: its own parent.  Config keys: the upstream's oauth section.
 */
#ifndef WEIR_TOKENOK_H
#define WEIR_TOKENOK_H

#include <sys/types.h>

#include "lib/buf.h"
#include "mail/config.h"

struct tokenok {
	pid_t pid;	/* the helper, or 0 */
	int fd;		/* the pipe to it, or -1 */
};

/* Before the change of ids, with the token in tok: the helper started if
 * up's status file says a login is needed or an error (else nothing). */
void tokenok_arm(struct tokenok *k, const struct weir_upstream *up, const struct buf *tok);
/* AUTH was accepted (accepted) or will not be: the helper told (if
 * armed) and reaped. */
void tokenok_done(struct tokenok *k, int accepted);

#endif
