/*
 * queuecmd.c: `weir queue-init [--split N] [DIR]` creates a queue (what
 * is missing of it; running it again changes nothing) and `weir
 * queue-check [DIR]` verifies one without changing it.  DIR defaults to
 * queue_dir.  queue-check exits 0 when the queue is sound (notes about
 * leftovers are not problems), 1 when it found problems, 2 when it could
 * not check.
 *
 * With send_user and queue_group set, queue-init (root only) also gives
 * every part of the layout the owner, group and mode of the table in
 * mail/queue.c (each run, so it repairs), and queue-check reports a
 * part whose owner or mode differs as a problem.  That table is the only
 * place owners and modes are written down; the package's postinst runs
 * queue-init and knows nothing of them.
 *
 * With send_user and gate_user set, queue-init also makes the run-time
 * folders that are missing (mail/rundir.h: gate_socket's, gate_journal's).
 *
 * Config keys: queue_dir, queue_split, send_user, queue_group, and
 * through mail/rundir.c gate_socket, gate_journal, gate_user.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "mail/qcheck.h"
#include "mail/queue.h"
#include "mail/rundir.h"
#include "weir/weir.h"

int
cmd_queue_init(int argc, char **argv, struct weir_config *cfg)
{
	struct buf why = BUF_INIT;
	struct queue_owners own;
	unsigned split = cfg->queue_split;
	const char *dir = cfg->queue_dir;
	char *end;
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--split") == 0 && i + 1 < argc) {
			unsigned long v = strtoul(argv[++i], &end, 10);

			if (*end || v == 0 || v > QUEUE_SPLIT_MAX) {
				log_warnx("--split must be 1..%d", QUEUE_SPLIT_MAX);
				return 2;
			}
			split = (unsigned)v;
		} else if (argv[i][0] == '-') {
			log_warnx("usage: weir queue-init [--split N] [DIR]");
			return 2;
		} else if (i == argc - 1) {
			dir = argv[i];
		} else {
			log_warnx("usage: weir queue-init [--split N] [DIR]");
			return 2;
		}
	}
	if (cfg->send_user) {
		/* Before anything is made: a queue half given away helps no one. */
		if (geteuid() != 0) {
			log_warnx("queue-init %s: send_user and queue_group are set: only root "
			    "can give the queue to them", dir);
			return 1;
		}
		if (queue_owners_lookup(cfg->send_user, cfg->queue_group, &own, &why) < 0) {
			log_warnx("queue-init %s: %s", dir, why.s);
			buf_free(&why);
			return 1;
		}
	}
	if (queue_init(dir, split, &why) < 0 ||
	    (cfg->send_user && queue_apply_owners(dir, split, &own, &why) < 0)) {
		log_warnx("queue-init %s: %s", dir, why.s);
		buf_free(&why);
		return 1;
	}
	/* With the owners set (the package's), the run-time folders that
	 * are missing too (postinst runs queue-init: the journal's folder). */
	if (cfg->send_user && cfg->gate_user && rundir_make_all(cfg, NULL, NULL) < 0)
		return 1;
	if (cfg->send_user)
		printf("queue %s ready (queue_split %u, owner %s, group %s for weir-queue)\n",
		    dir, split, cfg->send_user, cfg->queue_group);
	else
		printf("queue %s ready (queue_split %u)\n", dir, split);
	return 0;
}

int
cmd_queue_check(int argc, char **argv, struct weir_config *cfg)
{
	struct qcheck_result res;
	struct queue_owners own;
	struct buf why = BUF_INIT;
	struct queue q;
	const char *dir = cfg->queue_dir;

	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		log_warnx("usage: weir queue-check [DIR]");
		return 2;
	}
	if (argc == 2)
		dir = argv[1];
	if (queue_open(&q, dir, cfg->queue_split) < 0) {
		log_warn("queue-check: open %s", dir);
		return 2;
	}
	if (cfg->send_user &&
	    queue_owners_lookup(cfg->send_user, cfg->queue_group, &own, &why) < 0) {
		log_warnx("queue-check: %s", why.s);
		buf_free(&why);
		queue_close(&q);
		return 2;
	}
	qcheck_run(&q, cfg->send_user ? &own : NULL, stdout, &res);
	queue_close(&q);
	printf("%s: %lu messages, %lu problems, %lu notes\n", dir, res.messages,
	    res.problems, res.notes);
	if (fflush(stdout) != 0)
		return 2;
	return res.problems ? 1 : 0;
}
