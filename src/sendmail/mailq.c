/*
 * mailq.c: mailq and sendmail -bp: the queue listing of qlist.h on
 * stdout.  Exit 0, or 1 if some message could not be listed, or 75 if the
 * queue cannot be read at all (usually: not run as root or the queue's
 * owner, as qmail-qread).
 *
 * Trusts: nothing in the queue.  Config keys: queue_dir, queue_split.
 */
#include <errno.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "mail/qlist.h"
#include "mail/queue.h"
#include "sendmail/sendmail.h"

int
mailq_run(const struct weir_config *cfg)
{
	struct queue q;
	struct qlist_stats st;
	struct buf why = BUF_INIT;
	int rc;

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
