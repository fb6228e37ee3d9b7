/*
 * qlist.h: the queue listing, byte for byte as qmail's qmail-qread, with
 * the not-yet-preprocessed messages of todo/ added after it and
 * qmail-qstat's two counts at the end.  Used by mailq (sendmail -bp),
 * "weir queue" (also as JSON) and "weir status" (which counts).
 *
 *   21 Nov 2026 23:35:57 GMT  #457  1234  <alice@example.org>  bouncing
 *   \tremote\tbob@example.net
 *     done\tremote\tcarol@example.net
 *   21 Nov 2026 23:36:01 GMT  #460  321  <alice@example.org>  held
 *   \ttodo\tdave@example.net
 *   messages in queue: 2
 *   messages in queue but not yet preprocessed: 1
 *
 * " held" (after " bouncing") marks a message `weir hold` held; a stock
 * qmail queue has none, so its listing is qmail-qread's byte for byte.
 * Messages are sorted by queue time (the info or todo file's mtime), then
 * id.  Bytes outside 32..126 print as '_'.  A message whose files cannot
 * be read gets "warning: trouble with #id: reason" and the listing goes
 * on; a message that leaves the queue while we list it is skipped.
 *
 * One scan (qlist_scan) reads the queue and hands each message, parsed,
 * to a function; the text and JSON listings are two such functions, so
 * they cannot disagree about what is in the queue.
 *
 * Trusts: nothing in the queue; every file is parsed strictly.  Reads
 * only.  Config keys: queue_dir, queue_split (through struct queue).
 */
#ifndef WEIR_QLIST_H
#define WEIR_QLIST_H

#include <stddef.h>
#include <time.h>

#include "lib/buf.h"
#include "mail/queue.h"

struct qlist_stats {
	size_t queued;		/* messages listed (info/ and todo/) */
	size_t todo;		/* of which in todo/ */
	size_t trouble;		/* messages with a warning */
};

/* One line of a message after its heading: a recipient, or a warning. */
struct qlist_item {
	int trouble;		/* 1: text is a warning ("cannot read ...") */
	enum qdir chan;		/* Q_LOCAL, Q_REMOTE, or Q_TODO (not preprocessed) */
	int done;		/* a D record: finished */
	size_t off, len;	/* the address or warning: in the message's text */
	size_t reason_off, reason_len;	/* the last reply (reply/N), in text; len 0: none */
};

/* One message, as the scan found it.  Byte strings live in text. */
struct qlist_msg {
	unsigned long id;
	time_t mtime;		/* queue time: the info or todo file's mtime */
	char qid[QUEUE_ID_MAX];	/* its id in the logs (mail/queue.h) */
	int preprocessed;	/* 1: info/ (and local/, remote/); 0: todo/ */
	int head;		/* size, sender and bouncing are known */
	long long size;		/* of mess/ */
	size_t sender_off, sender_len;
	int bouncing;		/* a bounce/ file exists */
	int held;		/* hold/N (mail/qctl.h): `weir hold` */
	long long next_attempt;	/* reply/N's next attempt, wall time; 0: none known */
	size_t via_off, via_len;	/* reply/N's via: the upstream the operator
					 * sent it through (weir requeue --via); 0: none */
	int trouble;		/* at least one item is a warning */
	struct qlist_item *items;
	size_t nitems, cap;
	struct buf text;
};

/* Called once per listed message, in listing order. */
typedef void (*qlist_fn)(const struct qlist_msg *m, void *arg);

/* Scan q, calling fn for each message.  0 ok (st filled), -1 a folder
 * cannot be read (reason in why; fn may have seen some messages). */
int qlist_scan(const struct queue *q, qlist_fn fn, void *arg, struct qlist_stats *st,
    struct buf *why);

enum qlist_format {
	QLIST_TEXT,		/* qmail-qread's, as above */
	QLIST_JSON,		/* one JSON document; see weir(8) "queue" */
	QLIST_SUMMARY,		/* not a listing: weir-showq's "summary" (mail/qsummary.h) */
};

/* Write the listing of q to fd.  0 listed without trouble, 1 listed with
 * warnings, -1 fatal (a folder cannot be read, or fd cannot be written):
 * the reason in why, the listing possibly partial (for JSON: possibly
 * not a whole document). */
int qlist_write(const struct queue *q, int fd, enum qlist_format f, struct qlist_stats *st,
    struct buf *why);
/* The messages the listing would list, by names and modification times
 * alone (no file is opened): info/'s and todo/'s, the oldest queue time
 * (0: none).  0 ok; -1 a folder cannot be read (why). */
struct qlist_count {
	unsigned long long messages, todo;
	time_t oldest;
};
int qlist_count(const struct queue *q, struct qlist_count *c, struct buf *why);
/* qlist_write(q, fd, QLIST_TEXT, st, why). */
int qlist_print(const struct queue *q, int fd, struct qlist_stats *st, struct buf *why);

#endif
