/*
 * pwfile.h: a password file, for weir-smtpd's AUTH (listen.password_file)
 * and weir-metrics' HTTP basic authentication (metrics.auth_file).
 *
 * It holds "user:hash" lines, the hash from crypt(3): "$6$salt$..."
 * (SHA-512, `openssl passwd -6` or `mkpasswd -m sha-512`); other crypt(3)
 * schemes with a "$id$" prefix (yescrypt "$y$") work too, the old DES
 * form does not.  Empty lines and lines starting with '#' are skipped;
 * any other malformed line makes the whole file unusable (the reason
 * names its line), never a guess.  The file must be a regular file not
 * readable or writable by group or others, at most 1 MB.  pw_check reads
 * it at each call, so a change needs no restart; an unknown user costs
 * a crypt(3) of the file's first hash, as long as a user of that scheme
 * and cost (a file of one scheme: as long as any of its users).
 *
 * Trusts: the file (its owner).  Config keys: none (the callers pass
 * listen.password_file or metrics.auth_file).
 */
#ifndef WEIR_PWFILE_H
#define WEIR_PWFILE_H

#include "lib/buf.h"

enum pw_result { PW_OK, PW_BAD, PW_TROUBLE };

/* Check user and password against the file.  PW_TROUBLE: the reason in
 * why (the file, not the client, is at fault). */
enum pw_result pw_check(const char *path, const char *user, const char *pass,
    struct buf *why);

#endif
