/*
 * authreply.h: what an upstream's refusal of AUTH means and what fixes
 * it, for the replies of Exchange Online and Gmail whose fix is not a new
 * secret or a new login (an SMTP AUTH turned off for the tenant, a
 * mailbox without the right, an app password asked for...).  One table,
 * in authreply.c, each row with the provider's document it comes from.
 * Its advice replaces the generic one (mail/credfp.h's cred_fix) in
 * weir-gate's log and STATUS (weir status), weir-send's log and the
 * admin's notice, and the status page.
 *
 * Trusts: nothing (the reply is matched, never parsed further).
 * Config keys: none.
 */
#ifndef WEIR_AUTHREPLY_H
#define WEIR_AUTHREPLY_H

struct authreply {
	const char *pattern;	/* fnmatch(3), case folded, on the reply line */
	const char *provider;	/* whose reply it is */
	const char *means;	/* what it means */
	const char *fix;	/* what the administrator does about it */
	const char *source;	/* the provider's document: title, date */
};

/* The row for the reply line (code, enhanced code and text on one line,
 * as the deliverer reports it), or NULL. */
const struct authreply *authreply_find(const char *reply);

/* The rows, NULL-ended (the tests walk them). */
extern const struct authreply authreply_table[];

#endif
