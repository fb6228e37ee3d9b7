/*
 * alloc.h: allocators that never return NULL.  On failure they log and exit
 * with the status set by alloc_set_exit_status() (weir-queue uses 51, as
 * qmail-queue does; the default is 111, a temporary failure).
 */
#ifndef WEIR_ALLOC_H
#define WEIR_ALLOC_H

#include <stddef.h>

#include "lib/log.h"

void alloc_set_exit_status(int status);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) PRINTFLIKE(1, 2);

#endif
