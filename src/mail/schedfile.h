/*
 * schedfile.h: weir's own per-message file beside qmail's (QUEUE.md,
 * "weir's own files"): sched/S/N, S = N % queue_split, written only by
 * weir-send, read by weir-send and by `weir queue-check`.  Four lines,
 * each a name, one space, and a decimal number:
 *
 *   birth 1700000000     info/S/N's mtime when written: a file whose
 *                        birth is not the message's belongs to an earlier
 *                        message with the same inode number (stale)
 *   waited 3600          seconds of waiting credited so far (waits for
 *                        weir-gate, a suspension, a run slot): not age
 *   since 1700007200     wall time an open wait began; 0: none
 *   warned 1700014400    wall time the delay warning was queued; 0: not
 *
 * sched/waits: every open wait at weir-send's last sweep, one line per
 * waiting message, four numbers separated by one space:
 *
 *   ID BIRTH WAITED SINCE  the message's id (its inode number), birth and
 *                          waited as in its note, and the wall time its
 *                          open wait began
 *
 * One file rewritten every sweep instead of one note per waiting
 * message (send/wait.c says when each is written): a backlog of 10,000
 * throttled messages costs one file of 10,000 lines every 10 s, not
 * 10,000 files.  A line and a message's note are each a record of its
 * credit as it was when written; credit only grows, so weir-send takes
 * the larger of the two.
 *
 * sched/alive holds one number and a newline: the last wall time at which
 * weir-send was known to run; an open wait is credited up to it after a
 * restart.  It is written after sched/waits in each sweep, so it never
 * says weir-send ran at a time when sched/waits was older.
 * sched/oauth.NAME, in the same form: when the admin was last mailed
 * that upstream NAME needs an OAuth login (send/notice.c).
 * sched/tmp is where a new version is written before it is renamed over
 * sched/S/N, sched/waits, sched/alive or sched/oauth.NAME.
 *
 * Trusts: nothing; parsed strictly.
 */
#ifndef WEIR_SCHEDFILE_H
#define WEIR_SCHEDFILE_H

#include "lib/buf.h"
#include "mail/policy.h"
#include "mail/queue.h"

#define SCHED_DIR	"sched"
#define SCHED_ALIVE	"sched/alive"
#define SCHED_WAITS	"sched/waits"
#define SCHED_TMP	"sched/tmp"
#define SCHED_OAUTH	"sched/oauth."	/* + the upstream's name */
/* weir-send's open sessions, for weir status (src/send/session.c), and
 * where a new list is written before it is renamed over it: hints. */
#define SCHED_SESSIONS	"sched/sessions"
#define SCHED_SESSIONS_TMP "sched/sessions.tmp"
#define SCHEDFILE_MAX	128	/* longer is not ours */

struct schednote {
	long long birth;
	long long waited;
	long long since;
	long long warned;
};

/* "sched/S/N" and its folder "sched/S". */
void schedfile_path(char buf[QPATH_MAX], const struct queue *q, unsigned long id);
void schedfile_dirpath(char buf[QPATH_MAX], const struct queue *q, unsigned long id);

/* Append the file's bytes for n to b. */
void schedfile_format(const struct schednote *n, struct buf *b);
/* Parse a file's bytes.  0 ok; -1 with the reason in why. */
int schedfile_parse(const char *s, size_t len, struct schednote *n, struct buf *why);
/* A line of sched/waits. */
struct schedwait {
	unsigned long id;
	long long birth;
	long long waited;
	long long since;
};
#define SCHEDWAITS_MAX	(64UL << 20)	/* bytes: over 800,000 lines */

/* Append w's line of sched/waits to b. */
void schedfile_format_wait(const struct schedwait *w, struct buf *b);

/* Parse sched/waits: 0 and *v (malloc'ed, sorted by id, *n lines; free
 * it), or -1 with the line and the reason in why, *v NULL. */
int schedfile_parse_waits(const char *s, size_t len, struct schedwait **v, size_t *n,
    struct buf *why);

/* The line of id in v (sorted, n lines), or NULL. */
const struct schedwait *schedfile_find_wait(const struct schedwait *v, size_t n,
    unsigned long id);

/* sched/alive: one number and a newline.  0 ok; -1 malformed. */
int schedfile_parse_alive(const char *s, size_t len, long long *t);

/* One line of sched/sessions (QUEUE.md): "UPSTREAM PID SINCE SENT\n",
 * the upstream a policy name, the numbers lib/decimal.h's (PID not 0).
 * 0 ok; -1 malformed. */
struct schedsession {
	char upstream[POLICY_NAME_MAX + 1];
	long long pid, since, messages;
};
int schedfile_parse_session(const char *s, size_t len, struct schedsession *ss);

#endif
