/*
 * rcptfile.h: a message's remote/S/N file in memory, and the durable
 * changes weir-send makes to it: a recipient is done when its T byte
 * becomes D (one-byte pwrite, then fsync), and a permanent failure is
 * first noted in bounce/N (qmail's format, fsynced).
 */
#ifndef WEIR_RCPTFILE_H
#define WEIR_RCPTFILE_H

#include <stddef.h>

#include "mail/queue.h"

struct rcpt {
	size_t off;		/* file offset of the T/D byte */
	const char *addr;	/* into the file's bytes; NUL-terminated */
	size_t len;
	int done;
};

struct rcptfile {
	struct buf data;
	struct rcpt *v;
	size_t n;
	size_t ndone;
};

/* Load remote/S/N.  0 ok; 1 no such file (nothing to do); -1 trouble,
 * logged (also for a corrupt file). */
int rcptfile_load(struct queue *q, unsigned long id, struct rcptfile *f);
/* Part of remote/S/N: its records from byte offset `from` (a record's
 * start) on, as far as the want-th one not done or the end of the file,
 * so that a batch in the middle of a pass reads what it needs, not the
 * whole file again (issue 36: a message to 100,000 recipients read the
 * whole file for each batch of 100).  f->n and f->ndone count the records
 * read; offsets are the file's.  The same results as rcptfile_load, for
 * the part read. */
int rcptfile_load_part(struct queue *q, unsigned long id, size_t from, size_t want,
    struct rcptfile *f);
void rcptfile_free(struct rcptfile *f);

/* Mark recipients done: a one-byte write of D at each offset, then one
 * fsync.  0 ok, -1 logged (the marks may or may not have reached the
 * disk: at worst a recipient is tried again, never lost). */
int rcpt_mark_done(struct queue *q, unsigned long id, const size_t *offs, size_t n);

/* Append a permanent failure to bounce/N in qmail's format:
 * "<addr>:\n" then the text (blank lines become "/"), then a blank
 * line; fsync the file, and the folder when the file is new. */
int bounce_note(struct queue *q, unsigned long id, const char *addr, const char *text);

#endif
