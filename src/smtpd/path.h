/*
 * path.h: RFC 5321 reverse-path and forward-path ("<local@domain>"), parsed
 * strictly for weir-smtpd, refusing the old relay tricks outright:
 *
 *   source routes     <@a,@b:user@c>        refused
 *   the % hack        <user%c@a>            refused
 *   bang paths        <c!user@a>            refused
 *   quoted local part "a@b"@c, "a b"@c     refused when the quotes hide
 *                     anything a dot-string could not say ("x.y"@c is x.y@c)
 *
 * Domains are LDH labels (1-63 bytes, no leading or trailing '-', no
 * empty label, no trailing dot) or address literals [1.2.3.4] and
 * [IPv6:...] checked by inet_pton.  Local part at most 64 bytes, domain
 * 255, path 256 (RFC 5321 4.5.3.1).  No SMTPUTF8: bytes >= 0x80 are
 * refused.  The address comes back unquoted, qmail's envelope form.
 *
 * Trusts: nothing.  Config keys: none.
 */
#ifndef WEIR_SMTPD_PATH_H
#define WEIR_SMTPD_PATH_H

#include <stddef.h>

#include "lib/buf.h"

#define PATH_NULL_OK	0x1	/* "<>" allowed (MAIL FROM) */
#define PATH_POSTMASTER	0x2	/* "<postmaster>" without domain allowed (RCPT TO) */

/* Parse the path at the start of s (which must begin with '<').  0 ok:
 * the address in out (reset first; "" for <>), *used = bytes up to and
 * including '>'.  -1: a reason for the client in *why. */
int smtp_path_parse(const char *s, int flags, struct buf *out, size_t *used,
    const char **why);

#endif
