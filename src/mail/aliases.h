/*
 * aliases.h: the aliases file (aliases(5), Debian's /etc/aliases) as a
 * table of names and their values, for weir-send's local rule.
 *
 *   name: value, value, ...     one entry; the name case-insensitive
 *   <blank> value, ...          continues the entry above
 *   # ...                       a comment (also indented); blank lines nothing
 *
 * A value is kept as written (without surrounding double quotes): an
 * address, a local name, ":include:/path", "|command" or "/file".  What
 * they mean is the caller's business (send/preproc.c).  The file is read
 * again when its identity, size or mtime changes; a missing file is an
 * empty table; an unreadable one keeps the last table read (logged once).
 *
 * Trusts: the file's owner (root's /etc/aliases); a line is never
 * longer than the file, and nothing in it is executed.
 * Config keys: aliases_file (the caller's path).
 */
#ifndef WEIR_ALIASES_H
#define WEIR_ALIASES_H

#include <sys/stat.h>

#include "lib/buf.h"

struct alias {
	char *name;
	char **v;
	size_t n;
};

struct aliases {
	char *path;		/* NULL or "": no aliases */
	struct alias *a;
	size_t n;
	struct stat st;		/* of the file read; st_ino 0: none read */
	int warned;		/* an unreadable file was logged */
};

void aliases_init(struct aliases *al, const char *path);
void aliases_free(struct aliases *al);
/* Read the file again if it changed (or was never read). */
void aliases_refresh(struct aliases *al);
/* The entry for name[0..len), case-insensitive, or NULL. */
const struct alias *aliases_find(const struct aliases *al, const char *name, size_t len);
/* The values of an :include: file (commas or lines between them, #
 * comments): appended to *v, *n.  0 ok; -1 with the reason in why. */
int aliases_include(const char *path, char ***v, size_t *n, struct buf *why);
/* Split text[0..len) at commas outside double quotes into values,
 * trimmed and unquoted, appended to *v, *n (empty ones dropped). */
void aliases_split(const char *text, size_t len, char ***v, size_t *n);

#endif
