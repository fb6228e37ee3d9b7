/*
 * auth.h: what weir-smtpd's AUTH needs that is not the SMTP dialogue: a
 * strict base64 decoder (RFC 4648: no whitespace, padding only at the
 * end, nothing after it) and the password file (listen.password_file,
 * lib/pwfile.h: read at each AUTH, so a change needs no restart).
 *
 * Trusts: the password file (its owner).  Config keys:
 * listen.password_file (passed by the caller).
 */
#ifndef WEIR_SMTPD_AUTH_H
#define WEIR_SMTPD_AUTH_H

#include <stddef.h>

#include "lib/buf.h"
#include "lib/pwfile.h"

/* 0 ok with the bytes in out (reset first); -1 not strict base64. */
int b64_decode(const char *s, size_t n, struct buf *out);

#endif
