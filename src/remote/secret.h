/*
 * secret.h: the SASL secret (password or OAuth token) of an upstream,
 * from secret_file (which must not be open to group or others: refused
 * otherwise) or from the standard output of secret_command (run with
 * /bin/sh -c, no stdin, stderr passed through, exit 0 required, in a
 * process group of its own with no descriptor but 0, 1 and 2; once it
 * has exited, or at the deadline, the whole group is killed, so nothing
 * it started outlives it or holds a descriptor of weir-remote's).  One
 * trailing LF or CRLF is removed.  The caller wipes it with
 * secret_wipe(); it never goes to argv, the environment or a log.
 *
 * Trusts: the file's owner and the command (both named by the
 * administrator in weir.conf).  Config keys: secret_file, secret_command.
 */
#ifndef WEIR_SECRET_H
#define WEIR_SECRET_H

#include <stdint.h>

#include "lib/buf.h"
#include "mail/secretfile.h"	/* SECRET_MAX, and the rule for secret_file */

/* 0 ok (secret in out); -1 with a reason in err. */
int secret_from_file(const char *path, struct buf *out, struct buf *err);
int secret_from_command(const char *command, uint64_t deadline_ms, struct buf *out,
    struct buf *err);
/* Zero the bytes (explicit_bzero) and free. */
void secret_wipe(struct buf *b);

#endif
