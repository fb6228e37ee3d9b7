/*
 * inject.h: writing one message into the queue, qmail-queue(8) style, as
 * the steps of src/mail/QUEUE.md (S1 to S4).  Two writers use it:
 * weir-queue (src/queue/), one message per process, which runs
 * qinject_fds(); and weir-queued (src/queued/), which keeps many
 * messages open at once and makes a group of them durable together
 * (src/queued/server.c), calling the steps one by one.
 *
 * The steps, in the only order allowed:
 *   qinject_begin   S1 pid/ file, S2 its link as mess/S/N, the Received line
 *   qinject_write   message bytes into mess/S/N (any number of times)
 *   qinject_env     the envelope (qmail-queue's fd 1 bytes, in pieces),
 *                   into intd/N, checked as it comes; at its end the
 *                   queue time is set (the id's T)
 *   then fsync of mess/S/N, of intd/N and of the folder mess/S (the caller:
 *   qinject_fds() one at a time, weir-queued for a group)
 *   qinject_link    S3 to S4: the todo/N link; nothing is undone after it
 *   then fsync of todo/ (the caller), and only then "queued".
 * A failing step logs one line, undoes what this message made (S3/S2 back
 * to S1: qinject_undo) and returns a qmail-queue exit code (mail/qqcode.h).
 *
 * Trusts: nothing in the message or envelope bytes; the queue it is given.
 * Config keys: none (queue_dir and queue_split reach it as struct queue).
 */
#ifndef WEIR_INJECT_H
#define WEIR_INJECT_H

#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include "lib/buf.h"
#include "mail/envelope.h"
#include "mail/queue.h"

/* Who asked, for the Received line and the u and p records. */
struct qinject_who {
	uid_t uid;
	pid_t pid;
};

struct qinject {
	const struct queue *q;
	int dfd;
	const char *sev;	/* "fatal" (weir-queue) or "warning": the log's word */
	struct qinject_who who;
	unsigned long id;
	char pidfn[64];
	char messfn[QPATH_MAX];
	char intdfn[QPATH_MAX];
	char todofn[QPATH_MAX];
	char messdir[QPATH_MAX];	/* mess/S */
	int messfd, intdfd;
	struct timespec folder_mtime;	/* mess/S's, before our link */
	struct timespec qtime;		/* the queue time: the id's T */
	struct env_parser ep;
	struct buf envout;		/* intd bytes not yet written */
	int env_done;
	/* Read by qinject_undo() from a signal handler. */
	volatile sig_atomic_t made_mess, made_intd, made_pid;
};

/* S1 and S2: the pid/ file named pid/NAMEPID.TIME.SEQ (*seq counts up
 * through the tries, so a long-lived writer passes its own counter), its
 * link as mess/S/N, the Received line.  sev as above.  0 or a code. */
int qinject_begin(struct qinject *in, const struct queue *q, const struct qinject_who *who,
    pid_t namepid, unsigned long *seq, const char *sev);
/* Message bytes.  0 or QQ_WRITE. */
int qinject_write(struct qinject *in, const void *p, size_t n);
/* Envelope bytes (F sender NUL, T rcpt NUL ..., NUL): intd/N is made at
 * the first call.  *used: bytes consumed; in->env_done once the final
 * NUL came (bytes past it are not consumed: the caller decides).
 * 0 or a code (11, 91, 53, 65). */
int qinject_env(struct qinject *in, const char *p, size_t n, size_t *used);
/* The todo/N link (in->env_done first).  0 or QQ_TODO; after a 0 the
 * message must not be undone. */
int qinject_link(struct qinject *in);
/* Undo (S3 and S2 back to S1): async-signal-safe; the number of names
 * that could not be removed. */
int qinject_undo(struct qinject *in);
/* Undo, log "what" at in->sev with err, return code. */
int qinject_fail(struct qinject *in, int code, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Close the files, free the buffers (no undo). */
void qinject_close(struct qinject *in);
/* The id "INODE.SEC.NSEC" (mail/queue.h) of a linked message. */
const char *qinject_id(const struct qinject *in, char out[QUEUE_ID_MAX]);
/* Pull weir-send's trigger: one byte, never blocking; failure is fine. */
void qinject_trigger(int dfd);

/* weir-queue: the whole of one injection, message from msgfd to its end,
 * envelope from envfd, each fsync in QUEUE.md's order; once queued,
 * "ID\n" to idfd (-1: nowhere).  Returns the exit code. */
int qinject_fds(const struct queue *q, const struct qinject_who *who, int msgfd, int envfd,
    int idfd);
/* Remove what the running qinject_fds() made so far.  Async-signal-safe:
 * for weir-queue's SIGALRM handler. */
void qinject_abort(void);

#endif
