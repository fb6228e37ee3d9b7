/*
 * privdrop.h: give up root for good, in one place and one fixed order.
 *
 * Each daemon calls privdrop_daemon() once, where its man page says
 * (weir-gate and weir-send at start-up, weir-smtpd -l after binding its
 * sockets).  The order is OpenSSH's and OpenSMTPD's: look the account up,
 * supplementary groups (initgroups: the account's groups and its primary
 * group, nothing inherited from root), then the real, effective and saved
 * group id, then the real, effective and saved user id; then prove there
 * is no way back (setuid(0) and setgid(0) must fail).  Every step that
 * fails is fatal, and the message names the step and the account.
 *
 * Trusts: its caller for the account name (from weir.conf).
 * Config keys: none itself; the callers pass gate_user, send_user or
 * smtpd_user.
 */
#ifndef WEIR_PRIVDROP_H
#define WEIR_PRIVDROP_H

#include <sys/types.h>

/* Become user (an account name, not root), or exit with status. */
void privdrop(const char *user, int status);

/*
 * A daemon's policy around privdrop(): key is the weir.conf key that
 * named user (for the messages).  Not running as root: nothing happens
 * (the key is ignored).  Root with user NULL: one warning line, and the
 * daemon stays root.  Root with user: privdrop(user, status).
 * Returns 1 if it dropped, 0 if not.
 */
int privdrop_daemon(const char *key, const char *user, int status);

/*
 * A set-user-id or set-group-id program giving up the identity it was
 * installed with, for good, once it has used it (weir-remote, after
 * reading the secret): the real ids become the effective and saved ones,
 * the process stays not dumpable (so the caller, whose uid it now has,
 * cannot ptrace the secret out of it), and the old ids must not come
 * back.  Nothing happens when the ids are all the same.  Every failure
 * exits with status.
 */
void privdrop_setid(int status);

#endif
