/*
 * showq.h: weir-showq's protocol (src/showq/, weir-showq(8)) and its
 * client stub, the only way mailq and `weir queue` speak to it.  An
 * ordinary user may not read the queue (QUEUE.md: its folders are
 * send_user's); weir-showq, running as send_user, lists it for them on
 * a socket anyone may connect to, as Postfix's showq does for postqueue.
 *
 * One request per connection, then the server closes:
 *
 *   request   "list\n" (mailq's listing), "json\n" (`weir queue
 *             --json`'s) or "summary\n" (counts and weir-send's kept
 *             sessions, mail/qsummary.h: weir-metrics'); nothing else,
 *             nothing after it, at most SHOWQ_REQ_MAX bytes, within the
 *             server's deadline.
 *   answer    one header line, then the bytes it announces:
 *             "ok RC LEN\n"       the listing, LEN bytes; RC 0, or 1 when
 *                                 some message had trouble (listed with a
 *                                 warning: qlist.h)
 *             "fail LEN REASON\n" the queue could not be read; the LEN
 *                                 bytes listed before that follow; REASON
 *                                 is what root's mailq says
 *             "error REASON\n"    the request was refused; nothing follows
 *
 * The listing is qlist_write()'s, byte for byte what root gets from the
 * queue itself; the summary qsummary_json()'s.  Headers are at most SHOWQ_HEAD_MAX bytes, parsed
 * strictly (no leading zeros, no trailing bytes); an answer longer or
 * shorter than announced is an error.
 *
 * Trusts: the server only as far as these parsers.  Config keys:
 * showq_socket (the caller passes it), queue_dir (showq_needed).
 */
#ifndef WEIR_SHOWQ_H
#define WEIR_SHOWQ_H

#include <stddef.h>

#include "lib/buf.h"
#include "mail/qlist.h"

#define SHOWQ_REQ_MAX	64	/* bytes of a request, newline included */
#define SHOWQ_HEAD_MAX	1024	/* bytes of an answer's header line */
#define SHOWQ_REASON_MAX 900	/* bytes of a REASON */
/* How long the client waits for the whole answer; the server kills a
 * connection's child after its own deadline, which is shorter
 * (weir-showq's -T, 30 s by default). */
#define SHOWQ_CLIENT_TIMEOUT_MS 60000

enum showq_kind { SHOWQ_OK, SHOWQ_FAIL, SHOWQ_ERROR };

struct showq_head {
	enum showq_kind kind;
	int rc;			/* SHOWQ_OK: 0 or 1 */
	unsigned long long len;	/* SHOWQ_OK, SHOWQ_FAIL: bytes that follow */
	size_t reason_off, reason_len;	/* SHOWQ_FAIL, SHOWQ_ERROR: in the header */
};

/* A request line (with its '\n').  0 ok, *f set; -1 refused, the reason
 * (one line) in why. */
int showq_parse_request(const char *s, size_t n, enum qlist_format *f, struct buf *why);

/* An answer's header line, without its '\n'.  0 ok; -1 malformed (why). */
int showq_parse_head(const char *s, size_t n, struct showq_head *h, struct buf *why);

/* Should this process ask weir-showq rather than read the queue at
 * queue_dir itself?  1 when the queue's folder or its info/ is there but
 * not readable to us (EACCES: an ordinary user); 0 otherwise (root, the
 * queue's owner or group as far as info/ goes, or a queue that is not
 * there: reading it says why, as before). */
int showq_needed(const char *queue_dir);

/* Ask weir-showq at path for the listing in format f (QLIST_SUMMARY:
 * the summary) and copy it to outfd, all within timeout_ms (the connect
 * too).  0 or 1: listed, as qlist_write; -1 no listing from weir-showq
 * (why: "weir is not running (weir-showq: connect PATH: ...)", or what
 * went wrong); -2 weir-showq could not read the queue: what it listed
 * before that is written, why has its reason. */
int showq_ask(const char *path, enum qlist_format f, int outfd, int timeout_ms,
    struct buf *why);

#endif
