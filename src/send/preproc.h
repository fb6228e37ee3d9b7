/*
 * preproc.h: weir-send's preprocessing, S4 to S5 (src/mail/QUEUE.md):
 * todo/N becomes info/S/N and remote/S/N, local recipients through the
 * local rule (aliases_file, else the admin address).
 */
#ifndef WEIR_PREPROC_H
#define WEIR_PREPROC_H

#include "mail/aliases.h"
#include "mail/queue.h"

struct preproc_opts {
	const char *hostname;	/* hostname: names this host */
	const char *admin;	/* admin: where local recipients go */
	struct aliases *aliases; /* aliases_file, or NULL: none */
};

/* Is addr local to this host: no domain, @localhost, or @hostname? */
int addr_is_local(const char *addr, size_t len, const char *hostname);

/* Preprocess message id.  0: now in S5; -1: the todo file is corrupt (or
 * mess/ is gone), logged and left alone for the admin; -2: trouble on
 * this host (I/O, disk full), logged, the message stays in S4 and wants
 * another try soon.  *nrcpt gets the recipient count. */
int preprocess(struct queue *q, unsigned long id, const struct preproc_opts *o,
    size_t *nrcpt);

/* One message of preprocess_batch(): the caller sets id; rc and nrcpt
 * are preprocess()'s answers; the rest is the batch's own. */
struct preproc_msg {
	unsigned long id;
	int rc;
	size_t nrcpt;
	char qid[QUEUE_ID_MAX];
	char sender[ADDR_MAX + 1];
	long long size;
	unsigned long uid, pid;
	int fd[2];		/* info/S/N, remote/S/N being written; -1: none */
	int had[2];		/* that file was written */
};

/* Preprocess v[0..n) together, each step for all of them before the
 * next (QUEUE.md's order holds for each): every info/ and remote/ file
 * written, then fsynced, then their folders (once each), then every
 * intd/N unlinked and intd/ fsynced once, then every todo/N and todo/:
 * a few journal commits for the batch, not six per message. */
void preprocess_batch(struct queue *q, const struct preproc_opts *o, struct preproc_msg *v,
    size_t n);

/* Recipients a stock qmail-send left pending (T) in local/S/N go to the
 * local rule: appended to remote/S/N (made if need be, fsynced), then
 * local/S/N is removed (fsynced).  1: some were taken over; 0: no
 * local/S/N, or only done ones (removed); -1: trouble, logged, local/S/N
 * left as it was (the message must not end). */
int local_takeover(struct queue *q, unsigned long id, const struct preproc_opts *o);

#endif
