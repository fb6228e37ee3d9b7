/*
 * mailq.c: mailq and sendmail -bp: the queue listing of qlist.h on
 * stdout.  Exit 0, or 1 if some message could not be listed, or 75 if the
 * queue cannot be read at all.
 *
 * Root and the queue's owner read the queue themselves (that works with
 * weir stopped).  Anyone else may not (QUEUE.md), and asks weir-showq
 * for the same listing (mail/showq.h), as Postfix's postqueue asks its
 * showq; with weir stopped that says so and exits 75.  With
 * showq_socket "" everyone reads the queue themselves, and an ordinary
 * user is told it cannot be read.
 *
 * Trusts: nothing in the queue; weir-showq as far as showq.c's parser.
 * Config keys: queue_dir, queue_split, showq_socket.
 */
#include <errno.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "mail/qlist.h"
#include "mail/queue.h"
#include "mail/showq.h"
#include "sendmail/sendmail.h"

int
mailq_run(const struct weir_config *cfg)
{
	struct queue q;
	struct qlist_stats st;
	struct buf why = BUF_INIT;
	int rc;

	if (cfg->showq_socket && showq_needed(cfg->queue_dir)) {
		rc = showq_ask(cfg->showq_socket, QLIST_TEXT, STDOUT_FILENO,
		    SHOWQ_CLIENT_TIMEOUT_MS, &why);
		if (rc == -1)
			sm_say("the queue listing is unavailable: %s", buf_cstr(&why));
		else if (rc == -2)
			sm_say("%s", buf_cstr(&why));
		buf_free(&why);
		return rc < 0 ? EX_TEMPFAIL : rc;
	}
	if (queue_open(&q, cfg->queue_dir, cfg->queue_split) < 0) {
		sm_say("cannot open the queue %s: %s", cfg->queue_dir, strerror(errno));
		return EX_TEMPFAIL;
	}
	rc = qlist_print(&q, STDOUT_FILENO, &st, &why);
	if (rc < 0) {
		sm_say("%s: %s", cfg->queue_dir, buf_cstr(&why));
		rc = EX_TEMPFAIL;
	}
	buf_free(&why);
	queue_close(&q);
	return rc;
}
