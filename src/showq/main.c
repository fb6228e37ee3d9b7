/*
 * weir-showq: the queue listing for those who may not read the queue
 * (mailq and `weir queue` as an ordinary user), as Postfix's showq.
 *
 *   weir-showq [-c weir.conf] [-t SECONDS] [-T SECONDS]
 *
 * `weir run` starts it unless showq_socket is "".  As root it makes the
 * socket's folder if missing, binds showq_socket (mode 0666), then
 * becomes send_user (the queue's owner; lib/privdrop.h) before it reads
 * anything; then it answers connections until killed (server.h).  -t:
 * how long a client has to send its request (5 s); -T: how long one
 * connection may last in all (30 s).  Exit codes: 2 bad usage or
 * configuration (showq_socket ""), 111 temporary trouble (bind, accept).
 *
 * Trusts: its invoker; nothing from its clients.  Config keys:
 * showq_socket, send_user, queue_dir, queue_split, log_level.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/decimal.h"
#include "lib/log.h"
#include "lib/privdrop.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "mail/supervised.h"
#include "showq/server.h"

static const char help[] =
    "usage: weir-showq [-c FILE] [-t SECONDS] [-T SECONDS]\n";

static int
usage(void)
{
	fputs(help, stderr);
	return 2;
}

/* 1..3600, a number (lib/decimal.h), nothing else. */
static int
seconds(const char *s, int *v)
{
	uint64_t n;

	if (dec_parse(s, strlen(s), 3600, &n) < 0 || n == 0)
		return -1;
	*v = (int)n;
	return 0;
}

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT;
	struct showq_opts o;
	const char *cfile = NULL;
	int ch, rc, lfd, req_s = 5, answer_s = 30;

	log_init("weir-showq");
	if ((rc = usage_std(argc, argv, "weir-showq", help)) >= 0)
		return rc;
	while ((ch = getopt(argc, argv, "c:t:T:")) != -1) {
		switch (ch) {
		case 'c': cfile = optarg; break;
		case 't':
			if (seconds(optarg, &req_s) < 0)
				fatalx(2, "-t %s: want seconds, 1 to 3600", optarg);
			break;
		case 'T':
			if (seconds(optarg, &answer_s) < 0)
				fatalx(2, "-T %s: want seconds, 1 to 3600", optarg);
			break;
		default: return usage();
		}
	}
	if (optind != argc)
		return usage();
	if (config_load(&cfg, cfile, &err) < 0) {
		fputs(err.s, stderr);
		return 2;
	}
	if (cfg.showq_socket == NULL)
		fatalx(2, "showq_socket is \"\" in %s: the queue listing for users is off",
		    cfg.file ? cfg.file : "the configuration");
	/* SIGHUP (weir run passes it on) has nothing to re-read here. */
	if (signal(SIGHUP, SIG_IGN) == SIG_ERR)
		fatal(111, "signal");
	lfd = showq_listen(cfg.showq_socket);
	/* The one place weir-showq gives up root: after the bind, before it
	 * reads the queue or a client's byte. */
	privdrop_daemon("send_user", cfg.send_user, 2);
	supervised_arm();	/* after the drop, which would clear it */
	memset(&o, 0, sizeof o);
	o.socket = cfg.showq_socket;
	o.queue_dir = cfg.queue_dir;
	o.queue_split = cfg.queue_split;
	o.req_ms = req_s * 1000;
	o.answer_s = answer_s;
	rc = showq_serve(lfd, &o);
	config_free(&cfg);
	return rc;
}
