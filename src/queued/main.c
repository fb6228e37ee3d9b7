/*
 * weir-queued: the long-lived queue writer.  weir-smtpd and sendmail
 * hand it their messages over queue_socket (mail/qwproto.h) instead of
 * running weir-queue for each; it writes them exactly as weir-queue
 * does (mail/inject.c, QUEUE.md) and makes the messages that arrive
 * together durable together (server.h).  weir-queue stays the
 * qmail-queue compatible entry point for everyone else.
 *
 *   weir-queued [-c FILE]
 *
 * `weir run` starts it when queue_socket is set.  As root it makes the
 * socket's folder if missing (mode 0755), binds queue_socket (mode 0666:
 * anyone may queue, as anyone may run weir-queue; the uid each client
 * runs as is what the queue records), then becomes queued_user (an
 * account whose primary group is queue_group: lib/privdrop.h) before it
 * reads a byte; then it serves until SIGTERM.  Exit codes: 2 bad usage
 * or configuration (queue_socket unset), 111 temporary trouble (bind,
 * the queue).
 *
 * Trusts: its invoker; nothing from its clients.  Config keys:
 * queue_socket, queued_user, queue_dir, queue_split, inject_timeout,
 * log_level.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/privdrop.h"
#include "lib/unixlisten.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "mail/rundir.h"
#include "mail/supervised.h"
#include "queued/server.h"

#define MAX_CLIENTS 512

static const char help[] = "usage: weir-queued [-c FILE]\n";

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT;
	struct queued_opts o;
	struct queue q;
	char dir[PATH_MAX];
	const char *cfile = NULL;
	int ch, rc, lfd;

	log_init("weir-queued");
	if ((rc = usage_std(argc, argv, "weir-queued", help)) >= 0)
		return rc;
	while ((ch = getopt(argc, argv, "c:")) != -1) {
		if (ch != 'c') {
			fputs(help, stderr);
			return 2;
		}
		cfile = optarg;
	}
	if (optind != argc) {
		fputs(help, stderr);
		return 2;
	}
	if (config_load(&cfg, cfile, &err) < 0) {
		fputs(err.s, stderr);
		return 2;
	}
	if (cfg.queue_socket == NULL)
		fatalx(2, "queue_socket is not set in %s: nothing to serve",
		    cfg.file ? cfg.file : "the configuration");
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fatal(111, "signal");
	rundir_of(cfg.queue_socket, dir, sizeof dir);
	if (mkdir(dir, 0755) == 0)
		log_info("made %s (the folder of queue_socket), mode 0755", dir);
	else if (errno != EEXIST)
		fatal(111, "make %s (the folder of queue_socket)", dir);
	lfd = unix_listen(cfg.queue_socket, 0666, 128, SOCK_NONBLOCK, "weir-queued");
	/* The one place weir-queued gives up root: after the bind, before
	 * it opens the queue or reads a client's byte. */
	privdrop_daemon("queued_user", cfg.queued_user, 2);
	supervised_arm();	/* after the drop, which would clear it */
	umask(033);	/* files 0644, as weir-queue's (QUEUE.md) */
	if (queue_open(&q, cfg.queue_dir, cfg.queue_split) < 0)
		fatal(111, "open queue %s", cfg.queue_dir);
	memset(&o, 0, sizeof o);
	o.q = &q;
	o.timeout_s = (int)cfg.inject_timeout;
	o.max_clients = MAX_CLIENTS;
	log_info("taking messages on %s into %s", cfg.queue_socket, cfg.queue_dir);
	rc = queued_serve(lfd, &o);
	queue_close(&q);
	config_free(&cfg);
	return rc;
}
