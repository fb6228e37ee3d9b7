/*
 * qcheck.h: verify a queue's structure and every file's format without
 * changing anything (`weir queue-check`).  Problems are states the queue
 * can never legitimately be in (a corrupt file, an info/ without mess/,
 * a file in the wrong split folder); notes are states a crash or a running
 * injector can leave (S2/S3 leftovers, pid/ files) and the scheduler
 * cleans up.  It may run on a live queue: a message whose listed files
 * make a problem is looked at again (qcheck.c, look_again), and a file
 * that weir-send removes after its folder was read is a note when its
 * message's other files were seen, else not counted.
 */
#ifndef WEIR_QCHECK_H
#define WEIR_QCHECK_H

#include <stdio.h>

#include "mail/queue.h"

struct qcheck_result {
	unsigned long messages;	/* mess/ files */
	unsigned long problems;
	unsigned long notes;
};

/* Check the queue at q, printing one line per problem or note to out.
 * own: the configured owners (send_user, queue_group), whose every
 * mismatch with the layout table, and every mode that differs from it,
 * is then a problem; NULL: a mode that differs is a note, owners are
 * not looked at. */
void qcheck_run(struct queue *q, const struct queue_owners *own, FILE *out,
    struct qcheck_result *res);

/* Only the layout's nodes (their types, owners and modes), as above:
 * no message is read. */
void qcheck_layout(struct queue *q, const struct queue_owners *own, FILE *out,
    struct qcheck_result *res);

#endif
