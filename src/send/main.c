/*
 * weir-send: the scheduler (qmail-send's role).  `weir-send [-c FILE]`.
 * main loads the config, opens the queue and runs sched_run().
 *
 * Environment: $WEIR_REMOTE names the deliverer (default: weir-remote
 * where libexec_path() finds it; any qmail-remote(8) compatible program
 * will do); $QMAILQUEUE the injector used for bounces (default:
 * weir-queue, likewise).  Config keys: queue_dir, queue_split, hostname, admin,
 * concurrency, queue_lifetime, retry_skip, delay_warning, upstream sections,
 * send_user (started as root, it becomes that user before opening the queue).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/privdrop.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "mail/libexec.h"
#include "mail/qqclient.h"
#include "mail/supervised.h"
#include "send/sched.h"

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct sched_opts o;
	const char *slash;
	struct buf err = BUF_INIT;
	struct queue q;
	const char *cfile = NULL, *remote;
	int ch;

	log_init("weir-send");
	if ((ch = usage_std(argc, argv, "weir-send", "usage: weir-send [-c FILE]\n")) >= 0)
		return ch;
	while ((ch = getopt(argc, argv, "c:")) != -1) {
		switch (ch) {
		case 'c':
			cfile = optarg;
			break;
		default:
			fatalx(2, "usage: weir-send [-c FILE]");
		}
	}
	if (optind != argc)
		fatalx(2, "usage: weir-send [-c FILE]");
	if (config_load(&cfg, cfile, &err) < 0)
		fatalx(111, "%s", strtok(err.s, "\n"));
	privdrop_daemon("send_user", cfg.send_user, 111);	/* the one place */
	supervised_arm();	/* after the drop, which would clear it */
	if (queue_open(&q, cfg.queue_dir, cfg.queue_split) < 0)
		fatal(111, "open queue %s", cfg.queue_dir);
	/* Children (weir-queue for bounces, the deliverer) must use this
	 * queue and this config, whatever the environment said. */
	if (setenv("WEIR_QUEUE", cfg.queue_dir, 1) < 0 ||
	    (cfg.file && setenv("WEIR_CONFIG", cfg.file, 1) < 0))
		fatal(111, "setenv");
	remote = getenv("WEIR_REMOTE");
	memset(&o, 0, sizeof o);
	o.q = &q;
	o.cfg = &cfg;
	o.config_file = cfg.file;
	o.remote_program = remote && *remote ? remote : libexec_path("weir-remote");
	o.qq_program = qq_program();
	o.concurrency = cfg.concurrency;
	o.lifetime = cfg.queue_lifetime;
	o.delay_warning = cfg.delay_warning;
	o.retry_skip = cfg.retry_skip;
	o.remote_timeout = 3600;	/* longer than any SMTP timeout */
	/* A qmail-remote takes one message per run: kept sessions are
	 * weir-remote's (-S). */
	slash = strrchr(o.remote_program, '/');
	o.sessions = strcmp(slash ? slash + 1 : o.remote_program, "weir-remote") == 0;
	return sched_run(&o);
}
