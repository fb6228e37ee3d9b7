/*
 * qctl.h: the operator's queue control on disk (QUEUE.md, "Held
 * messages and control requests"): weir's own folders hold/ and ctl/.
 *
 *   hold/N        "birth B\nsince T\n": message N (queued at B, info/'s
 *                 or todo/'s mtime) is held since wall time T.  Written
 *                 durably; a file whose birth is not its message's is
 *                 stale (an earlier message with the same inode) and
 *                 means nothing.
 *   reply/N       "birth B\nnext T\n", "via NAME\n" when the operator
 *                 sent it through upstream NAME (`weir requeue --via`),
 *                 then "ADDR\0REPLY\n" per recipient
 *                 put off at its last attempt: the upstream's last reply
 *                 (one line) and the next attempt's wall time (0: now,
 *                 or held).  weir-send's, written when it defers (via
 *                 reply/tmp and a rename, not fsynced: a hint for the
 *                 listings); stale when its birth is not the message's.
 *   ctl/VERB.N    a request to weir-send (hold, release, delete,
 *                 requeue); empty; weir-send acts and removes it.
 *   ctl/via.N     requeue message N through upstream NAME now: "NAME\n"
 *                 (at most QCTL_FILE_MAX bytes, a name as policy.h's).
 *
 * Whoever changes a message holds lock/sendmutex: weir-send, or a `weir`
 * command while weir-send is stopped.  These functions assume the caller
 * holds it.  Trusts: nothing in the queue; parsed strictly.
 */
#ifndef WEIR_QCTL_H
#define WEIR_QCTL_H

#include "lib/buf.h"
#include "mail/queue.h"

#define QCTL_HOLD_DIR	"hold"
#define QCTL_DIR	"ctl"
#define QCTL_REPLY_DIR	"reply"
#define QCTL_REPLY_TMP	"reply/tmp"
#define QCTL_REPLY_MAX	(256 * 1024)	/* longer is not ours */
#define QCTL_FILE_MAX	64

enum qctl_state { QS_NONE, QS_TODO, QS_INFO };	/* S1-S3 / S4 / S5 */

/* Where message id is, and its birth (info/S/N's mtime in S5, todo/N's
 * in S4, as preprocessing keeps it).  -1 on error (errno). */
int qctl_state(const struct queue *q, unsigned long id, enum qctl_state *st, long long *birth)
    MUST_CHECK;

/* Parse hold/N's bytes.  0 ok; -1 malformed. */
int qctl_hold_parse(const char *s, size_t len, long long *birth, long long *since);

/* Is message id (queued at birth) held?  1 yes, *since the hold's wall
 * time; 0 no (no file, or a stale one); -1 unreadable (errno, why). */
int qctl_held(const struct queue *q, unsigned long id, long long birth, long long *since,
    struct buf *why) MUST_CHECK;

/* Write hold/N durably (file, then folder).  0 ok; -1 with why. */
int qctl_hold(struct queue *q, unsigned long id, long long birth, long long now,
    struct buf *why) MUST_CHECK;

/* Remove hold/N durably (none is fine).  0 ok; -1 with why. */
int qctl_unhold(struct queue *q, unsigned long id, struct buf *why) MUST_CHECK;

/* Parse reply/N: 0 ok (*body, *bodylen: the ADDR\0REPLY\n lines, each
 * checked; *via, *vialen: the via line's NAME, or NULL); -1 malformed. */
int qctl_reply_parse(const char *s, size_t len, long long *birth, long long *next,
    const char **via, size_t *vialen, const char **body, size_t *bodylen);
/* Parse ctl/via.N's bytes: 0 and the name (a policy.h name) in out
 * (POLICY_NAME_MAX + 1 bytes); -1 malformed. */
int qctl_via_parse(const char *s, size_t len, char *out);
/* The reply for addr in a parsed body, or NULL; *rlen its length. */
const char *qctl_reply_find(const char *body, size_t len, const char *addr, size_t alen,
    size_t *rlen);

/* Remove message id (S4 or S5) from the queue, no bounce: each removal
 * followed by an fsync of its folder, in an order where every step
 * leaves a sound state (QUEUE.md); hold/N last, so a crash midway never
 * lets a held message go.  0 ok; -1 with why (call again). */
int qctl_delete(struct queue *q, unsigned long id, struct buf *why) MUST_CHECK;

#endif
