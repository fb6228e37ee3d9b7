/*
 * libexec.h: where one weir program finds another.  $WEIR_LIBEXEC/NAME
 * when that is set (tests, demos, a build tree) and the environment is
 * trusted (not set-id), else LIBEXECDIR/NAME as installed.
 */
#ifndef WEIR_LIBEXEC_H
#define WEIR_LIBEXEC_H

#include <stddef.h>
#include <sys/types.h>

#include "mail/config.h"

/* A new string; free it. */
char *libexec_path(const char *name);

/* Who the deliverer runs as: the owner of a set-user-id weir-remote
 * ($WEIR_REMOTE when set, as weir-send runs it; the package's), else
 * send_user; unknown when neither (it runs as whoever runs weir-send).
 * 1 known: *uid, *gid (its account's group, else the file's) and its
 * name (or the number) in name; 0 unknown. */
int libexec_deliverer(const struct weir_config *c, uid_t *uid, gid_t *gid, char *name,
    size_t max);

#endif
