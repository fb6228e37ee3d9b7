/*
 * queuelist.c: `weir queue [--json]`: the queue listing of mail/qlist.h
 * on standard output, as mailq prints it, or as one JSON document (the
 * same scan, rendered by qlist_write; weir(8) describes the fields).
 * Exit 0, 1 if some message had trouble (listed with a warning), 2 if
 * the queue cannot be read at all or standard output cannot be written.
 * A user who may not read the queue gets the listing from weir-showq,
 * as mailq does (mail/showq.h).
 *
 * Trusts: nothing in the queue.  Config keys: queue_dir, queue_split,
 * showq_socket.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "mail/qlist.h"
#include "mail/queue.h"
#include "mail/showq.h"
#include "weir/weir.h"

int
cmd_queue(int argc, char **argv, struct weir_config *cfg)
{
	struct qlist_stats st;
	struct buf why = BUF_INIT;
	struct queue q;
	int rc, json = 0;

	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1) {
		log_warnx("usage: weir queue [--json]");
		return 2;
	}
	if (cfg->showq_socket && showq_needed(cfg->queue_dir)) {
		rc = showq_ask(cfg->showq_socket, json ? QLIST_JSON : QLIST_TEXT, STDOUT_FILENO,
		    SHOWQ_CLIENT_TIMEOUT_MS, &why);
		if (rc == -1)
			log_warnx("the queue listing is unavailable: %s", buf_cstr(&why));
		else if (rc == -2)
			log_warnx("%s", buf_cstr(&why));
		buf_free(&why);
		return rc < 0 ? 2 : rc;
	}
	if (queue_open(&q, cfg->queue_dir, cfg->queue_split) < 0) {
		log_warn("cannot open the queue %s", cfg->queue_dir);
		return 2;
	}
	rc = qlist_write(&q, STDOUT_FILENO, json ? QLIST_JSON : QLIST_TEXT, &st, &why);
	if (rc < 0) {
		log_warnx("%s: %s", cfg->queue_dir, buf_cstr(&why));
		rc = 2;
	}
	buf_free(&why);
	queue_close(&q);
	return rc;
}
