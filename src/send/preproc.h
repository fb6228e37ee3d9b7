/*
 * preproc.h: weir-send's preprocessing, S4 to S5 (src/mail/QUEUE.md):
 * todo/N becomes info/S/N and remote/S/N, local recipients rewritten to
 * the admin address.
 */
#ifndef WEIR_PREPROC_H
#define WEIR_PREPROC_H

#include "mail/queue.h"

struct preproc_opts {
	const char *hostname;	/* hostname: names this host */
	const char *admin;	/* admin: where local recipients go */
};

/* Is addr local to this host: no domain, @localhost, or @hostname? */
int addr_is_local(const char *addr, size_t len, const char *hostname);

/* Preprocess message id.  0: now in S5; -1: trouble, logged, the message
 * stays in S4 for the next scan.  *nrcpt gets the recipient count. */
int preprocess(struct queue *q, unsigned long id, const struct preproc_opts *o,
    size_t *nrcpt);

#endif
