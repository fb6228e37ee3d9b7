/*
 * queue.h: the qmail 1.03 queue layout, shared by every weir program.
 * See QUEUE.md beside this file for the states S1-S5, who owns each
 * folder, and which fsync precedes which link.
 *
 * Trusts: the queue directory it is given.  Config keys: queue_dir,
 * queue_split (via struct weir_config).
 */
#ifndef WEIR_QUEUE_H
#define WEIR_QUEUE_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/io.h"

#define QUEUE_SPLIT_DEFAULT 23
#define QUEUE_SPLIT_MAX     1000

/* qmail's limit: an address of up to 1002 bytes fits, 1003 does not. */
#define ADDR_MAX 1002

/* Message folders.  The first four are split into queue_split subfolders
 * named 0..split-1 by id % split; the others are flat. */
enum qdir { Q_MESS, Q_INFO, Q_LOCAL, Q_REMOTE, Q_PID, Q_INTD, Q_TODO, Q_BOUNCE, Q_NDIRS };

extern const char *const qdir_name[Q_NDIRS];

static inline int qdir_is_split(enum qdir d) { return d <= Q_REMOTE; }

/* Large enough for "remote/999/18446744073709551615". */
#define QPATH_MAX 48

struct queue {
	int dfd;		/* open on the queue directory */
	unsigned split;
	char *path;
};

/* Open an existing queue.  0 ok; -1 with errno. */
int queue_open(struct queue *q, const char *path, unsigned split) MUST_CHECK;
void queue_close(struct queue *q);

/* "mess/5/457", relative to the queue directory. */
void queue_path(char buf[QPATH_MAX], const struct queue *q, enum qdir d, unsigned long id);
/* "mess/5": the folder holding id's file. */
void queue_dirpath(char buf[QPATH_MAX], const struct queue *q, enum qdir d, unsigned long id);

/* Parse a queue file name (decimal, no leading zeros, fits unsigned
 * long).  0 ok, -1 not a message number. */
int queue_parse_id(const char *name, unsigned long *id);

/*
 * The install table: every folder and special file of a queue, its type,
 * mode and owning role.  queue_init() creates from it and queue-check
 * verifies against it; the package (later) chowns by role from it.
 */
enum qrole { ROLE_QUEUE, ROLE_SEND };	/* qmail's qmailq and qmails */
enum qkind { QK_DIR, QK_SPLITDIR, QK_FILE, QK_FIFO };

struct qnode {
	const char *path;
	enum qkind kind;
	mode_t mode;
	enum qrole owner;
};

extern const struct qnode queue_layout[];
extern const size_t queue_layout_len;

/* Create whatever of the layout is missing under path (and path itself);
 * existing parts are left alone.  0 ok; -1 with an error in *why. */
int queue_init(const char *path, unsigned split, struct buf *why);

#endif
