/*
 * journal.h: weir-gate's append-only journal, so that a restart or a
 * crash keeps the windows.  One record per line, each ending in a CRC-32
 * of the line, so a torn or corrupt tail is recognised and dropped:
 *
 *   B <boot id> <wall ms> <mono ms>                 a run of the gate starts
 *   G <id> <upstream> <msgs> <rcpts> <conns> <wall> <mono>   a grant
 *   S <id> <wall> <mono>                            accepted at that time
 *   X <id> <wall> <mono>                            outcome unknown: maybe
 *                                                   accepted from the grant
 *                                                   until that time
 *   N <id> <wall> <mono>                            no MAIL: only the
 *                                                   connection, at that time
 *   R <id> <wall> <mono>                            refunded
 *   L <upstream> <msgs> <rcpts> <conns> <wall> <mono>  a logged send (compaction)
 *   P <upstream> <msgs> <rcpts> <conns> <from wall> <from mono> <wall> <mono>
 *                                                   a logged interval (compaction)
 *   Z <id> <upstream> <msgs> <rcpts> <conns> <wall> <mono>
 *                                                   grant id's unknown outcome
 *                                                   settled (SETTLE): a send of
 *                                                   these weights at that time
 *                                                   instead (0 0 0: nothing)
 *   I <next id>                                     the next grant id (compaction)
 *   U <upstream> <until wall> <until mono> <len ms> <reason>  suspension
 *   Q <upstream> <until wall> <until mono> <len ms> <reason>  a quota's
 *                                   suspension (the reply said the sender's
 *                                   or account's quota is spent)
 *   C <upstream> <until wall> <until mono> <len ms> <credentials> <reason>
 *                                                   auth suspension of the
 *                                                   credentials whose
 *                                                   fingerprint (credfp.h)
 *                                                   is <credentials>, 16
 *                                                   hex digits
 *   A <upstream> <until wall> <until mono> <len ms> <reason>  auth suspension
 *                                                   (credentials not noted:
 *                                                   an older gate's; read,
 *                                                   no longer written)
 *   E <upstream> auth|all                           suspensions lifted
 *
 * Times belong to the boot of the last B record before them.  Grants are
 * made durable (fdatasync, batched) before the gate answers them; the
 * other records ride along with the next sync: losing one only makes the
 * replay more conservative.
 *
 * Replay places each time on today's monotonic axis: the same boot, its
 * monotonic time; another boot, "now" minus the time this boot has
 * provably been up (or less, if the wall clock says so): after a reboot
 * an entry may look younger than it is, never older.  A grant with no
 * report may have been accepted at any instant from the grant until the
 * end of its gate's run plus a grace period (its client may still be
 * sending): it is logged as that interval, which moves no other send.
 * The end of a run is the next B record, or for the last run the replay
 * itself.
 *
 * Compaction rewrites the live state (sends still inside a window, held
 * grants, suspensions, the next grant id) to a new file, fsyncs it,
 * renames it over the journal and fsyncs the directory; an unknown
 * outcome stays a G and an X record, so that it can still be settled.
 * Grant ids are never given twice over the journal's life.
 *
 * Trusts: the journal file only after its CRC and strict parsing.
 * Config keys: none (weir-gate's -j and -g; policy's grace through wg_grace).
 */
#ifndef WEIR_GATE_JOURNAL_H
#define WEIR_GATE_JOURNAL_H

#include <stdint.h>
#include <sys/types.h>

#include "gate/window.h"
#include "lib/bootid.h"
#include "lib/buf.h"
#include "lib/io.h"

struct journal {
	int fd;
	int lockfd;		/* path.lock, held for the gate's life */
	char *path;
	char boot[BOOT_ID_MAX];
	off_t size;		/* bytes in the file, written or pending */
	struct buf pending;	/* records not yet written */
	int dirty;		/* written but not synced */
	struct buf compact;	/* the next file, while compacting */
};

/* Take the lock path.lock (a second gate on the same journal is refused,
 * with the holder's pid in the log line, before anything reads or writes
 * the journal), open (creating) path, replay it into g (before any policy is set: the
 * policy counts the history afterwards), then compact.  now_mono, now_wall:
 * the caller's clocks in ms.  A grant left without a report by a stopped
 * gate may still be in flight (its client does not stop sending because
 * the gate did): such a send is logged at [grant, end of that run +
 * grace], the grace being its upstream's in pol (may be NULL), else
 * grace_ms (wg_grace).  0 ok; -1 with a log line. */
int journal_open(struct journal *j, const char *path, struct wgate *g,
    const struct policy *pol, int64_t now_mono, int64_t now_wall, int64_t grace_ms) MUST_CHECK;
void journal_close(struct journal *j);

/* Queue records. */
void journal_grant(struct journal *j, const struct wg_req *r, int64_t mono, int64_t wall);
void journal_end(struct journal *j, uint64_t id, char type, int64_t mono, int64_t wall);
/* Grant id's unknown outcome on u settled as d says (wg_settle). */
void journal_settle(struct journal *j, const struct wg_up *u, uint64_t id,
    const struct wg_done *d, int64_t mono, int64_t wall);
/* u's throttle suspension, or (auth) its authentication suspension. */
void journal_suspend(struct journal *j, const struct wg_up *u, int auth, int64_t mono,
    int64_t wall);
/* u's suspensions lifted: the authentication one (auth_only) or all. */
void journal_lift(struct journal *j, const struct wg_up *u, int auth_only);

/* Write what is queued (journal_write), and make everything written
 * durable (journal_sync).  0 ok, -1 (errno). */
int journal_write(struct journal *j) MUST_CHECK;
int journal_sync(struct journal *j) MUST_CHECK;

/* Should the journal be compacted now, with this many records of live
 * state (sends still in a window, held grants, suspensions)? */
int journal_wants_compaction(const struct journal *j, size_t live_records);

/* Compaction in three steps: begin writes the sends and suspensions of g
 * to path.tmp; the caller adds each held grant; commit makes it durable
 * and renames it over the journal.  0 ok; -1 (errno): not durable, and
 * the journal in use is whichever file is at the path (the old one if
 * the rename did not happen).  The gate then grants nothing and tries
 * again (weir-gate(8)): a rewrite is also how it recovers from a failed
 * write or fdatasync, after which the page cache cannot be trusted.
 * journal_sync fails (ESTALE) if the file at the path is no longer the
 * one it appends to. */
int journal_compact_begin(struct journal *j, struct wgate *g, int64_t mono, int64_t wall) MUST_CHECK;
void journal_compact_grant(struct journal *j, const struct wg_req *r, int64_t mono, int64_t wall);
int journal_compact_commit(struct journal *j) MUST_CHECK;

/* For tests: the CRC-32 used in the records. */
uint32_t journal_crc32(const void *p, size_t n);

#endif
