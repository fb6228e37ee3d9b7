/*
 * queue_helpers.h: helpers for the tests of weir-queue: a scratch queue
 * (with its own config file), building qmail-queue envelopes, running
 * weir-queue on a message, and checking what it left in the queue
 * against the byte formats of qmail 1.03 (see src/mail/QUEUE.md).
 *
 * Trusts: the queue the test made.  Test code only (Criterion asserts).
 */
#ifndef WEIR_QUEUE_HELPERS_H
#define WEIR_QUEUE_HELPERS_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/buf.h"
#include "testlib.h"

/* A scratch folder holding a queue (dir/queue) and a config (dir/weir.conf). */
struct qt {
	char *tmp;	/* the scratch folder */
	char *qdir;	/* tmp/queue */
	char *conf;	/* tmp/weir.conf */
	unsigned split;
	unsigned long uid;	/* the uid weir-queue runs as: getuid() unless a test changes it */
	char *envs[8];	/* "WEIR_QUEUE=...", "WEIR_CONFIG=...", extra, NULL */
};

/* Make a queue with queue_split = split and a config naming it (plus the
 * extra config lines, or NULL).  WEIR_QUEUE and WEIR_CONFIG are set in
 * q->envs for qt_inject. */
void qt_setup(struct qt *q, unsigned split, const char *extra_conf);
void qt_teardown(struct qt *q);
/* (Re)create q->qdir's queue: `weir queue-init --split`, or queue_init()
 * when the weir binary is not built. */
void qt_init_queue(struct qt *q);
/* Rewrite the config file. */
void qt_config(struct qt *q, const char *text);
/* Add "NAME=value" to the environment qt_inject passes. */
void qt_setenv(struct qt *q, const char *assignment);

/* An envelope: F<sender>\0 T<rcpt>\0 ... \0 */
void qt_env_start(struct buf *e, const char *sender);
void qt_env_rcpt(struct buf *e, const char *rcpt);
void qt_env_end(struct buf *e);
/* The whole envelope for a sender and a NULL-ended list of recipients. */
void qt_envelope(struct buf *e, const char *sender, const char *const *rcpts);

/* Run weir-queue with msg on fd 0 and env on fd 1, q->envs plus extra
 * (NULL-ended, may be NULL) in the environment. */
void qt_inject(struct qt *q, const char *msg, size_t msglen, const char *env,
    size_t envlen, const char *const *extra, struct tl_result *r);
/* The same; keep_fd0_open leaves fd 0 open after msg (no end of file). */
void qt_inject_ex(struct qt *q, const char *msg, size_t msglen, const char *env,
    size_t envlen, const char *const *extra, int keep_fd0_open, struct tl_result *r);
/* Assert a failure: exit code, one "weir-queue: fatal: " line on stderr,
 * nothing left in the queue. */
void qt_assert_fails(struct qt *q, struct tl_result *r, int code, const char *what);

/* Names (ids) of the files in a flat queue folder ("todo"), sorted;
 * returns how many, *ids malloc'ed.  A folder that is not a folder
 * (a test replaced it with a file) holds nothing. */
size_t qt_list(struct qt *q, const char *folder, unsigned long **ids);
/* Regular files left in mess/ (every split subfolder that is a folder),
 * intd/, todo/, pid/, info/, local/, remote/, bounce/. */
int qt_leftovers(struct qt *q);
/* Fails unless every file left in the message folders is a mess/ file:
 * S2, the state a kill during elimination may leave (QUEUE.md), as
 * many as the batch being eliminated held. */
void qt_assert_only_s2(struct qt *q, const char *what);
/* Assert nothing is left, with a listing in the failure message. */
void qt_assert_clean(struct qt *q, const char *what);

/* One queued message as weir-queue left it, all checked: mess inode
 * is id, modes 0644, todo/intd share an inode (or intd is absent),
 * Received line well-formed and dated in [t0, t1], todo starts
 * u<uid>\0p<pid>\0 with the pid of the Received line. */
struct qt_msg {
	unsigned long id;
	unsigned long pid;
	struct buf body;	/* mess without the Received line */
	struct buf env;		/* todo without the u and p records */
	int has_intd;
};
void qt_load(struct qt *q, unsigned long id, time_t t0, time_t t1, struct qt_msg *m);
void qt_msg_free(struct qt_msg *m);

/* The one message in the queue (asserts there is exactly one). */
void qt_load_only(struct qt *q, time_t t0, time_t t1, struct qt_msg *m);

/* Path of a queue file: "<qdir>/<rel>" (malloc'ed). */
char *qt_path(struct qt *q, const char *rel);
/* Write queue file rel ("info/8/100") with data, its mtime t (0: as
 * written). */
void qt_put(struct qt *q, const char *rel, const char *data, size_t len, time_t t);
/* Replace a queue folder by a regular file (to make it unusable). */
void qt_replace_with_file(struct qt *q, const char *rel);

/* Does the environment have the fault-injection shim? */
const char *qt_faultinj(void);

#endif
