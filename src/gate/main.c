/*
 * weir-gate: the send-rate coordinator (see server.h, window.h).
 *
 *   weir-gate [-c weir.conf] [-p policy.conf] [-s socket] [-j journal] [-g grace]
 *   weir-gate [-c weir.conf] [-s socket] status [json]
 *
 * The first form runs the daemon in the foreground until SIGTERM; the
 * second asks a running gate for its status.  Exit codes: 0 stopped
 * cleanly, 2 bad usage or configuration, 111 temporary trouble (socket,
 * journal, a journal locked by another gate).
 *
 * Trusts: its invoker (the administrator, or weir run).
 * Config keys: gate_socket, policy_file, gate_journal (weir.conf; -s, -p
 * and -j override), gate_status_socket (the read-only socket; the status
 * form asks it when gate_socket cannot be reached and -s is not given),
 * gate_user (started as root, the daemon becomes it
 * before anything else; see lib/privdrop.h).  -g (a duration, default
 * 10m, RFC 5321's wait for the reply to the final dot) is how long after
 * its last sign of life a send whose outcome is unknown (REPORT UNKNOWN,
 * its client gone, its grant open in the journal at start) may still be
 * accepted by the upstream.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gate/server.h"
#include "lib/log.h"
#include "lib/privdrop.h"
#include "lib/timefmt.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "mail/gateclient.h"
#include "mail/rundir.h"
#include "mail/supervised.h"

static const char help[] =
    "usage: weir-gate [-c FILE] [-p POLICY] [-s SOCKET] [-j JOURNAL] [-g GRACE]\n"
    "       weir-gate [-c FILE] [-s SOCKET] status [json]\n";

static int
usage(void)
{
	fputs(help, stderr);
	return 2;
}

/* Ask sock, else (when it cannot be reached) the status socket rsock. */
static int
status(const char *sock, const char *rsock, int json)
{
	struct gate_client gc;
	struct gp_reply r;
	const char *why = "connection closed", *used;

	if ((used = gc_connect_status(&gc, sock, rsock, 0)) == NULL)
		fatal(111, "connect %s", sock);
	sock = used;
	if (gc_status(&gc, json) < 0)
		fatal(111, "write %s", sock);
	if (gc_wait_reply(&gc, &r, &why) != 1 || r.verb != GP_R_STATUS)
		fatalx(111, "status: %s", why);
	if (fwrite(gc.status.s, 1, gc.status.len, stdout) != gc.status.len || fflush(stdout) != 0)
		fatal(111, "write");
	gc_close(&gc);
	return 0;
}

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT;
	struct gate_opts o;
	int rc;
	const char *cfile = NULL, *policy = NULL, *sock = NULL, *journal = NULL;
	const char *grace = "10m", *why;
	long long gsecs;
	int ch;

	log_init("weir-gate");
	if ((rc = usage_std(argc, argv, "weir-gate", help)) >= 0)
		return rc;
	while ((ch = getopt(argc, argv, "c:p:s:j:g:")) != -1) {
		switch (ch) {
		case 'c': cfile = optarg; break;
		case 'p': policy = optarg; break;
		case 's': sock = optarg; break;
		case 'j': journal = optarg; break;
		case 'g': grace = optarg; break;
		default: return usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (strcmp(grace, "0") == 0)
		gsecs = 0;
	else if (duration_parse(grace, &gsecs, &why) < 0)
		fatalx(2, "-g %s: %s", grace, why);
	if (config_load(&cfg, cfile, &err) < 0) {
		fputs(err.s, stderr);
		return 2;
	}
	if (argc > 0) {
		if (strcmp(argv[0], "status") != 0 || argc > 2 ||
		    (argc == 2 && strcmp(argv[1], "json") != 0))
			return usage();
		rc = status(sock ? sock : cfg.gate_socket, sock ? NULL : cfg.gate_status_socket,
		    argc == 2);
		config_free(&cfg);
		return rc;
	}
	/* Its folders, if no one made them (a box without systemd). */
	(void)rundir_make_all(&cfg, sock, journal);
	/* The one place weir-gate gives up root: before the socket, the
	 * journal and the policy are opened, so all are the user's. */
	privdrop_daemon("gate_user", cfg.gate_user, 2);
	supervised_arm();	/* after the drop, which would clear it */
	umask(007);
	o.socket = sock ? sock : cfg.gate_socket;
	o.status_socket = cfg.gate_status_socket;
	o.policy = policy ? policy : cfg.policy_file;
	o.journal = journal ? journal : cfg.gate_journal;
	o.grace = gsecs;
	o.config_file = cfg.file;
	o.upstreams = cfg.upstreams;
	o.nupstreams = cfg.nupstreams;
	rc = gate_run(&o);
	config_free(&cfg);
	return rc;
}
