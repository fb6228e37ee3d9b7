/*
 * listener.h: weir-smtpd -l: bind every listen.address, accept, and hand
 * each connection to a session process running smtpd_session(); a
 * session process serves connections one after another (at most 100,
 * as Postfix's smtpd under its master) and exits after a minute idle, so
 * a connection costs no fork once the processes exist.  At most
 * listen.max_connections sessions at once and listen.max_per_client from
 * one client address; a connection over either limit gets "421 4.7.0" and
 * is closed at once.  SIGTERM or SIGINT: stop listening, leave the running
 * sessions to finish, exit 0.  SIGHUP (weir run forwards it): logged and
 * ignored; the config is read at start.
 *
 * Addresses: lib/netaddr.h's hostport_parse(); port 0 is a free port the
 * kernel picks, and the log says which (for tests).
 *
 * Trusts: the config.  Config keys: listen.address,
 * listen.max_connections, listen.max_per_client.
 */
#ifndef WEIR_SMTPD_LISTENER_H
#define WEIR_SMTPD_LISTENER_H

#include <sys/socket.h>

#include "mail/config.h"
#include "smtpd/session.h"

/* Run the listener; returns the exit code.  after_bind(arg), if not
 * NULL, runs once every address is bound and before the first accept:
 * weir-smtpd gives up root there. */
int smtpd_listen(const struct smtpd_conf *conf, const struct weir_listen *l,
    void (*after_bind)(void *), void *arg);

#endif
