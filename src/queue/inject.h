/*
 * inject.h: put one message into the queue, qmail-queue(8) style.
 * The message comes from msgfd (to end of file), the envelope from envfd.
 * Returns a qmail-queue exit code (mail/qqcode.h); on failure the reason
 * has been logged and nothing that looks queued is left behind.
 */
#ifndef WEIR_INJECT_H
#define WEIR_INJECT_H

#include <sys/types.h>

#include "mail/queue.h"

struct inject_params {
	struct queue *q;
	int msgfd;
	int envfd;
	uid_t uid;	/* for the Received line and the u record */
	pid_t pid;	/* for the Received line, the p record and pid/ */
	int idfd;	/* once queued, "ID\n" goes here (INODE.SEC.NSEC: mail/queue.h); -1: nowhere */
};

int inject(const struct inject_params *p);

/* Remove what the running injection has made so far (S3/S2 to S1).
 * Async-signal-safe: for the SIGALRM handler. */
void inject_abort(void);

#endif
