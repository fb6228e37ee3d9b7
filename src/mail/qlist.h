/*
 * qlist.h: the queue listing, byte for byte as qmail's qmail-qread, with
 * the not-yet-preprocessed messages of todo/ added after it and
 * qmail-qstat's two counts at the end.  Used by mailq (sendmail -bp) and
 * later by "weir queue".
 *
 *   21 Nov 2026 23:35:57 GMT  #457  1234  <alice@example.org>  bouncing
 *   \tremote\tbob@example.net
 *     done\tremote\tcarol@example.net
 *   21 Nov 2026 23:36:01 GMT  #460  321  <alice@example.org> 
 *   \ttodo\tdave@example.net
 *   messages in queue: 2
 *   messages in queue but not yet preprocessed: 1
 *
 * Messages are sorted by queue time (the info or todo file's mtime), then
 * id.  Bytes outside 32..126 print as '_'.  A message whose files cannot
 * be read gets "warning: trouble with #id: reason" and the listing goes
 * on; a message that leaves the queue while we list it is skipped.
 *
 * Trusts: nothing in the queue; every file is parsed strictly.  Reads
 * only.  Config keys: queue_dir, queue_split (through struct queue).
 */
#ifndef WEIR_QLIST_H
#define WEIR_QLIST_H

#include <stddef.h>

#include "lib/buf.h"
#include "mail/queue.h"

struct qlist_stats {
	size_t queued;		/* messages listed (info/ and todo/) */
	size_t todo;		/* of which in todo/ */
	size_t trouble;		/* warnings printed */
};

/* Write the listing of q to fd.  0 listed without trouble, 1 listed with
 * warnings, -1 fatal (a folder cannot be read, or fd cannot be written):
 * the reason in why, the listing possibly partial. */
int qlist_print(const struct queue *q, int fd, struct qlist_stats *st, struct buf *why);

#endif
