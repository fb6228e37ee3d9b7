/*
 * weir-metrics: Prometheus metrics for weir (see metrics.h).
 *
 *   weir-metrics [-c weir.conf]                    the daemon (weir run starts it)
 *   weir-metrics [-c weir.conf] --textfile PATH    write the textfile once
 *
 * The daemon serves GET /metrics on metrics.address and/or rewrites
 * metrics.textfile every metrics.interval, until killed.  Exit codes: 0
 * done (--textfile), 2 bad usage or configuration (no metrics section
 * for the daemon), 111 temporary trouble (bind, write).
 *
 * Trusts: its invoker.  Config keys: gate_status_socket (the gate's
 * read-only socket) when set, else gate_socket; queue_dir, queue_split,
 * metrics { address, textfile, interval, user, allow, auth_file } (started
 * as root, it becomes metrics.user before anything else: lib/privdrop.h).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/privdrop.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "mail/supervised.h"
#include "metrics/metrics.h"

#define GATE_TIMEOUT_MS 3000

static const char help[] =
    "usage: weir-metrics [-c FILE]\n"
    "       weir-metrics [-c FILE] --textfile PATH\n";

static const struct option longopts[] = {
	{ "textfile", required_argument, NULL, 't' },
	{ NULL, 0, NULL, 0 },
};

static int
usage(void)
{
	fputs(help, stderr);
	return 2;
}

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT, text = BUF_INIT;
	struct metrics_opts o;
	const char *cfile = NULL, *once = NULL;
	struct cidr *allow;
	size_t i;
	int ch, rc;

	log_init("weir-metrics");
	if ((rc = usage_std(argc, argv, "weir-metrics", help)) >= 0)
		return rc;
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': cfile = optarg; break;
		case 't': once = optarg; break;
		default: return usage();
		}
	}
	if (optind != argc)
		return usage();
	if (config_load(&cfg, cfile, &err) < 0) {
		fputs(err.s, stderr);
		return 2;
	}
	if (!once && !cfg.metrics.present)
		fatalx(2, "%s has no metrics section: nothing to serve",
		    cfg.file ? cfg.file : "the configuration");
	/* The one place weir-metrics gives up root, before it reads or
	 * binds anything. */
	privdrop_daemon("metrics user", cfg.metrics.user, 2);
	supervised_arm();	/* after the drop, which would clear it */
	memset(&o, 0, sizeof o);
	/* STATUS is all it asks: the read-only socket, which needs no group. */
	o.src.gate_socket = cfg.gate_status_socket ? cfg.gate_status_socket : cfg.gate_socket;
	o.src.cfg = &cfg;
	o.src.gate_timeout_ms = GATE_TIMEOUT_MS;
	o.src.queue_timeout_ms = QUEUE_WAIT_MS;
	if (once) {
		metrics_collect(&o.src, &text);
		if (metrics_textfile(once, &text) < 0)
			fatal(111, "write %s", once);
		buf_free(&text);
		config_free(&cfg);
		return 0;
	}
	/* SIGHUP (weir run passes it on) has nothing to re-read here: the
	 * metrics section is read at start. */
	if (signal(SIGHUP, SIG_IGN) == SIG_ERR)
		fatal(111, "signal");
	o.address = cfg.metrics.address;
	o.textfile = cfg.metrics.textfile;
	o.interval = cfg.metrics.interval;
	o.auth_file = cfg.metrics.auth_file;
	o.nallow = cfg.metrics.allow.n;
	allow = xcalloc(o.nallow + 1, sizeof *allow);
	for (i = 0; i < o.nallow; i++)
		if (cidr_parse(cfg.metrics.allow.v[i], &allow[i], &err) < 0)
			panic("metrics allow %s: %s", cfg.metrics.allow.v[i], err.s);
	o.allow = allow;
	rc = metrics_run(&o);
	free(allow);
	config_free(&cfg);
	return rc;
}
