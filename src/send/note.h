/*
 * note.h: weir-send's reading and writing of its own per-message files,
 * sched/S/N, and of sched/alive (formats in mail/schedfile.h, their
 * place in the queue in src/mail/QUEUE.md).  A new version is written
 * to sched/tmp and renamed over the old one, so a reader sees the old
 * version or the new one, never a mix; weir-send is the only writer
 * (it holds lock/sendmutex), so one temporary name is enough.
 */
#ifndef WEIR_NOTE_H
#define WEIR_NOTE_H

#include "mail/queue.h"
#include "mail/schedfile.h"

/* Create sched/ and sched/0..split-1 where missing (mode 0700), durably
 * (`weir queue-init` makes them; a queue taken over from qmail may lack
 * them).  0 ok; -1 logged: then weir-send runs without notes. */
int note_init(struct queue *q);

/* Read the note of message id, queued at birth (info/'s mtime).
 * 1: *n holds it; 0: there is none (a stale one, from an earlier message
 * with the same id, is removed); -1: unreadable or malformed, logged. */
int note_load(struct queue *q, unsigned long id, long long birth, struct schednote *n);

/* Write the note; durable: fsync the file before the rename and the
 * folder after it.  0 ok; -1 logged. */
int note_save(struct queue *q, unsigned long id, const struct schednote *n, int durable);

/* Remove the note (none is fine).  0 ok; -1 logged. */
int note_remove(struct queue *q, unsigned long id);

/* sched/alive: write now; read it back.  0 ok; -1 (logged by save; load
 * is quiet: a queue that never ran this weir-send has none). */
int note_alive_save(struct queue *q, long long now);
int note_alive_load(struct queue *q, long long *t);

/* sched/waits: write b (not durable: as the notes), or remove the file
 * when b is empty; read it back into *v (sorted; free it), none when it
 * is missing or unreadable.  0 ok; -1 logged. */
int note_waits_save(struct queue *q, const struct buf *b);
int note_waits_load(struct queue *q, struct schedwait **v, size_t *n);

/* sched/oauth.NAME (send/notice.c): when the admin was last told that
 * upstream NAME needs an OAuth login.  Save: durable (fsync before the
 * rename, the folder after).  Load: 0 and *t; -1 none or unreadable. */
int note_oauth_save(struct queue *q, const char *upstream, long long t);
int note_oauth_load(struct queue *q, const char *upstream, long long *t);

#endif
