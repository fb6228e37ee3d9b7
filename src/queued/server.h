/*
 * server.h: weir-queued's work (server.c): accept clients on
 * queue_socket, take their messages (mail/qwproto.h) into the queue with
 * mail/inject.c's steps, and make every message whose envelope ended in
 * the same turn of the event loop durable together (group commit):
 *
 *   1. fsync each message's mess/S/N and intd/N file, and each folder
 *      mess/S once for all its messages;
 *   2. link each intd/N as todo/N (each message's commit point);
 *   3. fsync todo/ once; pull weir-send's trigger once;
 *   4. answer each client K<id> (or Z<code> for one whose step failed).
 *
 * QUEUE.md's order holds for each message: its files and its mess/
 * entry are durable before its todo/ link, and its todo/ entry before
 * its answer.  A client that goes away before its envelope ended leaves
 * nothing (its files are removed); a message not done within
 * inject_timeout is removed and answered Z52.
 *
 * Trusts: nothing from its clients; who they are from the kernel
 * (SO_PEERCRED).  Config keys: through struct queued_opts.
 */
#ifndef WEIR_QUEUED_SERVER_H
#define WEIR_QUEUED_SERVER_H

#include "mail/queue.h"

struct queued_opts {
	struct queue *q;
	int timeout_s;		/* inject_timeout */
	unsigned max_clients;	/* connections at once; more are closed at once */
};

/* Serve on the listening socket lfd until SIGTERM or SIGINT; returns the
 * exit code (0, or 111 when the event loop failed). */
int queued_serve(int lfd, const struct queued_opts *o);

#endif
