/*
 * dsn.h: bounces.  A message's bounce/N notes become one RFC 3464
 * delivery status notification (multipart/report: a text part listing
 * each failed recipient with the upstream's reply, a message/delivery-
 * status part, and the original message's header), injected through
 * weir-queue:
 *
 *   sender <s>     -> a bounce from <> to <s>
 *   sender <>      -> a double bounce from <#@[]> to the admin address
 *   sender <#@[]>  -> a failed double bounce: logged and dropped
 */
#ifndef WEIR_DSN_H
#define WEIR_DSN_H

#include <time.h>

#include "lib/buf.h"
#include "mail/queue.h"

struct dsn_opts {
	const char *hostname;	/* hostname: Reporting-MTA, From: */
	const char *admin;	/* admin: double bounces */
	const char *qq_program;	/* weir-queue */
	time_t now;
};

/* Build the DSN text for message id from its info/, bounce/ and mess/
 * files into msg.  0 ok, -1 logged. */
int dsn_build(struct queue *q, unsigned long id, const struct dsn_opts *o, struct buf *msg);

/* Inject the bounce for id (if bounce/N exists) and remove bounce/N.
 * 0 done (or nothing to do), -1 trouble, logged: try again later. */
int dsn_send(struct queue *q, unsigned long id, const struct dsn_opts *o);

#endif
