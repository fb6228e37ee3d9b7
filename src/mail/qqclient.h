/*
 * qqclient.h: running weir-queue (or any qmail-queue) as a child: the
 * message into its fd 0, then the envelope into its fd 1, then its exit
 * code (mail/qqcode.h).  Used by sendmail, and by weir-send for bounces.
 * Write errors (EPIPE when it died) stop the writing and leave the verdict
 * to its exit status: only an exit 0 is success.
 *
 * Which program: $QMAILQUEUE if set and not empty (qmail's convention),
 * else weir-queue where libexec_path() finds it.  The child inherits the environment
 * ($WEIR_CONFIG, $WEIR_QUEUE).  The caller ignores SIGPIPE.
 *
 * weir-queue also tells the new message's id ("INODE.SEC.NSEC", the id weir
 * logs it by) through a pipe named by $WEIR_QUEUE_IDFD, set in the
 * child: after an exit 0 it is in id, or "" (a stock qmail-queue).
 *
 * Or, with qq_start_any() and a socket, no program at all: the message
 * goes to weir-queued, the long-lived writer (mail/qwproto.h), which
 * answers with the same codes; a writer that cannot be reached (not
 * running, no socket) means weir-queue as above, so nothing is lost by
 * its absence.  $QMAILQUEUE, when set, always wins (qq_socket_path()).
 * The connection that carried a queued message is kept for the process's
 * next one (weir-smtpd's session processes queue one after another), and
 * replaced when the writer has closed it meanwhile.
 *
 * Trusts: the program it runs, for its exit code, and for the id only as
 * digits, one dot, digits; the writer only through qw_reply_parse().
 * Config keys: none (the callers pass queue_socket).
 */
#ifndef WEIR_QQCLIENT_H
#define WEIR_QQCLIENT_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/buf.h"
#include "mail/queue.h"

struct qq_child {
	pid_t pid;		/* the program; -1 with a socket */
	int sock;		/* weir-queued's socket, or -1 */
	int msgfd;		/* its fd 0 */
	int envfd;		/* its fd 1 */
	int werr;		/* errno of the first failed write, or 0 */
	int idfd;		/* the id pipe's reading end */
	char id[QUEUE_ID_MAX];	/* after qq_finish() returned 0: the id, or "" */
	struct buf out;		/* message bytes not yet written */
};

/* The program to run. */
const char *qq_program(void);

/* Start it.  0 ok; -1 with the reason in why. */
int qq_start(struct qq_child *c, const char *prog, struct buf *why);
/* The socket to try first: sock (queue_socket, NULL: none), unless
 * $QMAILQUEUE names a program to run. */
const char *qq_socket_path(const char *sock);
/* Connect to weir-queued at sock (not NULL) or, if that fails, start
 * prog as qq_start().  0 ok; -1 with the reason in why. */
int qq_start_any(struct qq_child *c, const char *sock, const char *prog, struct buf *why);
/* Queue message bytes (written in large chunks). */
void qq_put(struct qq_child *c, const void *p, size_t n);
void qq_putc(struct qq_child *c, char ch);
/* End the message, send the envelope (F sender, T rcpts, NUL), wait.
 * Returns the qmail-queue exit code: 0 queued; otherwise the reason,
 * "weir-queue: ...", is in why, and a crash or a failure to wait is
 * reported as QQ_BUG (temporary). */
int qq_finish(struct qq_child *c, const char *sender, char *const *rcpt, size_t nrcpt,
    struct buf *why);
/* Kill it so that nothing is queued, and reap it. */
void qq_abort(struct qq_child *c);
/* End it without an envelope, so that it fails (qmail-queue's 54, or 91)
 * and removes what it wrote, and reap it: nothing is queued and, unlike
 * qq_abort(), nothing is left for the 36-hour cleanup. */
void qq_cancel(struct qq_child *c);

#endif
