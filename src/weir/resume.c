/*
 * resume.c: `weir resume UPSTREAM`: lift the upstream's suspensions
 * (after a throttle or an authentication failure) now instead of when
 * they run out, through weir-gate's RESUME request (mail/gateclient.h);
 * weir-gate logs it and keeps it in its journal.  Messages waiting for
 * the upstream then ask again at once, still within every window.
 * Exit 0 lifted, 1 the gate refused (no such upstream), 2 usage or no
 * answer from the gate.
 *
 * Trusts: the local admin; the gate's reply through the stub's parser.
 * Config keys: gate_socket.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "lib/log.h"
#include "mail/gateclient.h"
#include "weir/weir.h"

#define RESUME_TIMEOUT_S 5

int
cmd_resume(int argc, char **argv, struct weir_config *cfg)
{
	struct timeval tv = { RESUME_TIMEOUT_S, 0 };
	struct gate_client gc;
	struct gp_reply r;
	const char *perr = "the gate closed the connection";
	int k, rc = 2;

	if (argc != 2 || argv[1][0] == '-') {
		log_warnx("usage: weir resume UPSTREAM");
		return 2;
	}
	if (gc_connect(&gc, cfg->gate_socket) < 0) {
		log_warn("connect to weir-gate at %s", cfg->gate_socket);
		return 2;
	}
	if (setsockopt(gc.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
	    setsockopt(gc.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
		log_warn("setsockopt");
		goto out;
	}
	if (gc_resume(&gc, argv[1]) < 0) {
		log_warn("RESUME %s", argv[1]);
		goto out;
	}
	k = gc_wait_reply(&gc, &r, &perr);
	if (k <= 0) {
		log_warnx("weir-gate: %s", k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ?
		    "no answer within 5 seconds" : perr);
		goto out;
	}
	if (r.verb == GP_R_OK) {
		printf("upstream %s: suspensions lifted\n", argv[1]);
		rc = 0;
	} else if (r.verb == GP_R_ERR) {
		printf("upstream %s: weir-gate refused: %s\n", argv[1], r.text);
		rc = 1;
	} else {
		log_warnx("weir-gate: unexpected reply to RESUME");
	}
out:
	gc_close(&gc);
	return rc;
}
