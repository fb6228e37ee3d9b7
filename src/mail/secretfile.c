/*
 * secretfile.c: see secretfile.h.
 * Trusts: the stat it is given.  Config keys: secret_file.
 */
#include "mail/secretfile.h"

int
secretfile_check(const struct stat *st, const char *path, struct buf *err)
{
	if (!S_ISREG(st->st_mode)) {
		buf_printf(err, "secret_file %s: not a regular file", path);
		return -1;
	}
	if (st->st_mode & 077) {
		buf_printf(err, "secret_file %s: mode %04o lets group or others in; "
		    "refusing it (chmod 600 %s)", path, (unsigned)(st->st_mode & 07777), path);
		return -1;
	}
	if (st->st_size > SECRET_MAX) {
		buf_printf(err, "secret_file %s: over %d bytes", path, SECRET_MAX);
		return -1;
	}
	return 0;
}
