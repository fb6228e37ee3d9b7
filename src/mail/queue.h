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
#include <time.h>

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

/* The ids of the message files of folder dir (names queue_parse_id
 * takes), appended to *v: *n of them, room for *cap.  0, or -1 with
 * errno when the folder could not be opened or read (what was read
 * stays). */
int queue_dir_ids(int dfd, const char *dir, unsigned long **v, size_t *n, size_t *cap);

/* A message's id in logs, replies, bounces and listings:
 * "INODE.SEC.NSEC", its inode (qmail's id) and its queue time (todo/'s
 * mtime, kept as info/'s) to the nanosecond, NSEC in 9 digits.
 * weir-queue sets that time past the last one the inode had
 * (src/mail/inject.c), so that an id never repeats in a queue's life. */
#define QUEUE_ID_MAX 48
const char *queue_msgid(char out[QUEUE_ID_MAX], unsigned long id, const struct timespec *t);
/* Message id's, from info/'s mtime (todo/'s before preprocessing;
 * "INODE" alone when neither is there): out.  errno is kept, for the log
 * line it goes into. */
const char *queue_msgid_of(const struct queue *q, unsigned long id, char out[QUEUE_ID_MAX]);
/* Parse one (as queue_msgid writes it): 0 ok, -1 not an id. */
int queue_parse_msgid(const char *s, unsigned long *id, struct timespec *t);

/*
 * The install table: every folder and special file of a queue, its type,
 * mode and group; the owner of every node is the scheduler's user
 * (send_user).  queue_init() creates from it, queue_apply_owners() gives
 * it to the configured accounts, queue-check verifies against it; nothing
 * else knows owners or modes.  QUEUE.md has the table in prose.
 *
 * ROLE_QUEUE nodes are where the set-group-id writer, weir-queue, makes
 * entries (group queue_group, group-writable, sticky so that one caller's
 * weir-queue cannot remove another's files; the owner, weir-send, may);
 * ROLE_SEND nodes are the scheduler's own (group: send_user's primary
 * group, no group bits).
 */
enum qrole { ROLE_QUEUE, ROLE_SEND };	/* group: queue_group, send_user's group */
enum qkind { QK_DIR, QK_SPLITDIR, QK_FILE, QK_FIFO };

struct qnode {
	const char *path;
	enum qkind kind;
	mode_t mode;		/* the node itself */
	mode_t submode;		/* QK_SPLITDIR: its subfolders 0..split-1 */
	enum qrole group;
};

extern const struct qnode queue_layout[];
extern const size_t queue_layout_len;

/* The accounts the queue belongs to (send_user, queue_group). */
struct queue_owners {
	uid_t uid;		/* send_user */
	gid_t send_gid;		/* send_user's primary group */
	gid_t queue_gid;	/* queue_group */
};

/* Look the accounts up.  0 ok; -1 with why (no such user or group). */
int queue_owners_lookup(const char *send_user, const char *queue_group,
    struct queue_owners *o, struct buf *why);
/* The uid and gid node n must have. */
void queue_node_ids(const struct qnode *n, const struct queue_owners *o, uid_t *uid,
    gid_t *gid);

/* Create whatever of the layout is missing under path (and path itself);
 * existing parts are left alone.  0 ok; -1 with an error in *why. */
int queue_init(const char *path, unsigned split, struct buf *why);

/* Give every node of the layout (the split subfolders too) its owner,
 * group and mode from the table; message files are not touched.  Root
 * only; idempotent.  Symbolic links and hard-linked files are refused,
 * never followed.  0 ok; -1 with an error in *why. */
int queue_apply_owners(const char *path, unsigned split, const struct queue_owners *o,
    struct buf *why);

#endif
