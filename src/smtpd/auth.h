/*
 * auth.h: what weir-smtpd's AUTH needs that is not the SMTP dialogue: a
 * strict base64 decoder (RFC 4648: no whitespace, padding only at the
 * end, nothing after it) and the password file.
 *
 * The password file (listen.password_file) holds "user:hash" lines, the
 * hash from crypt(3): "$6$salt$..." (SHA-512, `openssl passwd -6` or
 * `mkpasswd -m sha-512`); other crypt(3) schemes with a "$id$" prefix
 * (yescrypt "$y$") work too, the old DES form does not.  Empty lines and
 * lines starting with '#' are skipped; any other malformed line makes the
 * whole file unusable (temporary failure, logged with its line number),
 * never a guess.  The file must be a regular file not readable or
 * writable by group or others.  It is read at each AUTH, so a change
 * needs no restart.
 *
 * Trusts: the password file (its owner).  Config keys:
 * listen.password_file (passed by the caller).
 */
#ifndef WEIR_SMTPD_AUTH_H
#define WEIR_SMTPD_AUTH_H

#include <stddef.h>

#include "lib/buf.h"

/* 0 ok with the bytes in out (reset first); -1 not strict base64. */
int b64_decode(const char *s, size_t n, struct buf *out);

enum pw_result { PW_OK, PW_BAD, PW_TROUBLE };

/* Check user and password against the file.  PW_TROUBLE: the reason in
 * why (the file, not the client, is at fault). */
enum pw_result pw_check(const char *path, const char *user, const char *pass,
    struct buf *why);

#endif
