/*
 * confparse.h: running libconfuse the one way weir does, for weir.conf
 * (config.c) and policy.conf (policy.c): the file must be a regular file
 * (libconfuse's scanner exits the whole process on a read error, for
 * instance when given a folder), and every error, libconfuse's own and
 * those of the validate callbacks (cfg_error), is collected as one line
 * "file:line: what" in err.  In a set-id process (AT_SECURE) the file
 * must also belong to root and be writable by no one else: the caller of
 * a set-id weir-remote must not be able to make it read a config of its
 * own (which could name the secret and a host of the caller's choosing).
 */
#ifndef WEIR_CONFPARSE_H
#define WEIR_CONFPARSE_H

#include <confuse.h>

#include "lib/buf.h"

/* The file's text, checked as above, comments turned into spaces (lines
 * kept), in text (a new buffer).  0 ok; -1 with the error in err. */
int confparse_read(const char *path, struct buf *text, struct buf *err);

/* Parse text as confparse_read() gave it (path names it in errors).
 * 0 parsed; -1 with the errors in err. */
int confparse_text(cfg_t *cfg, const char *path, const struct buf *text, struct buf *err);

/* libconfuse keeps no line for a key, only for a section's end: the
 * line (from 1) in text (a file as confparse_read() gives it, or the
 * file itself) of key set as "key =" at the start of a line, at the top
 * level (section NULL: the first line setting it) or in upstream
 * "section" (from the line opening it to last, its closing brace; 0: no
 * bound); key NULL: the section's opening line; with quoted (key NULL),
 * the first line of the section holding "quoted" in double quotes (an
 * entry of a list).  0 when not found (a default, several keys on one
 * line). */
int confparse_key_line(const char *text, const char *section, const char *key,
    const char *quoted, int last);

/* confparse_read() then confparse_text().  0 parsed; -1 with the errors
 * in err. */
int confparse(cfg_t *cfg, const char *path, struct buf *err);

#endif
