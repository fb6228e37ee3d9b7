/*
 * server.h: weir-gate's daemon: one process, one event loop, the engine
 * (window.h), the journal (journal.h) and the clients on a local socket.
 * Trusts: its clients only through the protocol parser.  Config keys:
 * gate_socket, gate_status_socket, policy_file (from weir.conf, passed in),
 * the upstream sections' credentials (creds.h).
 */
#ifndef WEIR_GATE_SERVER_H
#define WEIR_GATE_SERVER_H

#include <stddef.h>

#include "mail/config.h"

struct gate_opts {
	const char *socket;	/* gate_socket */
	const char *status_socket; /* gate_status_socket: STATUS only; NULL: none */
	const char *policy;	/* policy_file */
	const char *journal;	/* -j */
	long long grace;	/* -g, seconds: see journal_open() */
	/* weir.conf (NULL: the default place), read again at SIGHUP, and
	 * its upstream sections at start: their credentials (creds.h). */
	const char *config_file;
	const struct weir_upstream *upstreams;
	size_t nupstreams;
};

/* Run until SIGTERM or SIGINT.  Returns the exit status. */
int gate_run(const struct gate_opts *o);

#endif
