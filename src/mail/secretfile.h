/*
 * secretfile.h: the rule a secret_file must follow, in one place for
 * weir-remote (which refuses to read a file that breaks it) and weir
 * check-config (which says so beforehand): a regular file, no permission
 * at all for group or others, at most SECRET_MAX bytes.
 *
 * Trusts: the stat it is given.  Config keys: secret_file (the caller's).
 */
#ifndef WEIR_SECRETFILE_H
#define WEIR_SECRETFILE_H

#include <sys/stat.h>

#include "lib/buf.h"

#define SECRET_MAX 65536

/* 0: st (the file at path) may hold a secret; -1: it may not, the reason
 * ("secret_file PATH: ...") appended to err. */
int secretfile_check(const struct stat *st, const char *path, struct buf *err);

#endif
