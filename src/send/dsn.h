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
 *
 * The same builder makes delay warnings (RFC 3464 Action: delayed, with
 * Will-Retry-Until), from <> to the sender, never for <> or <#@[]>.
 */
#ifndef WEIR_DSN_H
#define WEIR_DSN_H

#include <time.h>

#include "lib/buf.h"
#include "mail/queue.h"

/* The sender of double bounces (qmail's) and of weir's notices to the
 * admin: a failure of one is logged and dropped. */
#define DOUBLE_BOUNCE_SENDER "#@[]"

struct dsn_opts {
	const char *hostname;	/* hostname: Reporting-MTA, From: */
	const char *admin;	/* admin: double bounces */
	const char *qq_program;	/* weir-queue */
	time_t now;
};

/* One recipient in a report; text (the upstream's last reply) may be
 * NULL with tlen 0 in a delay warning: not tried yet. */
struct dsn_rcpt {
	const char *addr, *text;
	size_t alen, tlen;
};

/* Build the DSN text for message id from its info/, bounce/ and mess/
 * files into msg.  0 ok, -1 logged. */
int dsn_build(struct queue *q, unsigned long id, const struct dsn_opts *o, struct buf *msg);

/* Inject the bounce for id (if bounce/N exists) and remove bounce/N.
 * 0 done (or nothing to do), -1 trouble, logged: try again later. */
int dsn_send(struct queue *q, unsigned long id, const struct dsn_opts *o);

/* Build a delay warning for message id listing the n recipients still
 * pending (until: when weir gives up on them).  0 ok, -1 logged. */
int dsn_build_delayed(struct queue *q, unsigned long id, const struct dsn_opts *o,
    const struct dsn_rcpt *v, size_t n, time_t until, struct buf *msg);

/* Does a message from this envelope sender get delay warnings?  Not
 * from <> (a bounce) nor from <#@[]> (a double bounce). */
int dsn_sender_wants_warning(const char *sender);

/* Build the delay warning and queue it from <> to sender.  0 queued;
 * -1 logged (also for a sender that gets none). */
int dsn_send_delayed(struct queue *q, unsigned long id, const struct dsn_opts *o,
    const char *sender, const struct dsn_rcpt *v, size_t n, time_t until);

/* Queue msg from <from> to <to> through weir-queue (o->qq_program); who
 * ("msg ID", "upstream NAME") and what name it in the log line.  0
 * queued, -1 logged. */
int dsn_inject(const struct dsn_opts *o, const char *who, const char *what, const char *from,
    const char *to, const struct buf *msg);

#endif
