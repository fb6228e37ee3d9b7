/*
 * libexec.h: where one weir program finds another.  $WEIR_LIBEXEC/NAME
 * when that is set (tests, demos, a build tree) and the environment is
 * trusted (not set-id), else LIBEXECDIR/NAME as installed.
 */
#ifndef WEIR_LIBEXEC_H
#define WEIR_LIBEXEC_H

/* A new string; free it. */
char *libexec_path(const char *name);

#endif
