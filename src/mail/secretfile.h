/*
 * secretfile.h: the rule a file holding a secret must follow, in one
 * place for its readers (weir-remote's secret_file, OAuth's
 * client_secret_file: they refuse a file that breaks it) and weir
 * check-config (which says so beforehand): a regular file, no permission
 * at all for group or others, at most SECRET_MAX bytes.  And its reading:
 * the bytes live in one struct buf that is wiped before it is freed, and
 * grown only by reserving the maximum first, so no copy is left behind
 * by realloc.
 *
 * Trusts: the stat it is given; the file's owner for its bytes.  Config
 * keys: secret_file, client_secret_file (the caller's).
 */
#ifndef WEIR_SECRETFILE_H
#define WEIR_SECRETFILE_H

#include <sys/stat.h>

#include "lib/buf.h"

#define SECRET_MAX 65536

/* 0: st (the file at path) may hold a secret; -1: it may not, the reason
 * ("secret_file PATH: ...") appended to err. */
int secretfile_check(const struct stat *st, const char *path, struct buf *err);
/* The same, the reason starting with "KEY PATH: ". */
int secretfile_check_key(const struct stat *st, const char *key, const char *path,
    struct buf *err);

/* The secret in the file at path (named by the config key key, for the
 * messages), one trailing LF or CRLF removed: 0, or -1 with the reason
 * in err (out is then empty).  The caller wipes out with secret_wipe(). */
int secretfile_read(const char *key, const char *path, struct buf *out, struct buf *err);
/* Zero the bytes (explicit_bzero) and free. */
void secret_wipe(struct buf *b);
/* Remove one trailing LF or CRLF. */
void secret_chomp(struct buf *b);

#endif
