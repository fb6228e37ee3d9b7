/*
 * session.h: one SMTP session of weir-smtpd, as an explicit state machine
 * (session.c): greeting, EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, VRFY,
 * HELP, QUIT, with PIPELINING, SIZE, 8BITMIME and ENHANCEDSTATUSCODES.
 * The message goes to weir-queued, or else weir-queue (mail/qqclient.h),
 * while it arrives, and the client hears 250 only once it is durably
 * queued (weir-queued's K answer, weir-queue's exit 0).
 *
 * Trusts: nothing from the client.  Config keys (passed in struct
 * smtpd_conf by main.c): hostname, listen.allow, listen.max_size,
 * listen.max_recipients, listen.max_errors, listen.timeout,
 * listen.min_data_rate, listen.junk_command_limit, listen.greet_pause,
 * listen.greet_pause_loopback,
 * listen.cert_file and listen.key_file (STARTTLS, through tls.h),
 * listen.password_file (AUTH, through auth.h), queue_socket (weir-queued,
 * tried before weir-queue: mail/qqclient.h).
 */
#ifndef WEIR_SMTPD_SESSION_H
#define WEIR_SMTPD_SESSION_H

#include <stddef.h>

#include "mail/config.h"
#include "lib/netaddr.h"
#include "smtpd/tls.h"

struct smtpd_conf {
	const char *hostname;		/* greeting, EHLO, Received */
	struct cidr *allow;		/* networks that may relay */
	size_t nallow;
	size_t max_size;
	size_t max_rcpt;
	unsigned max_errors;
	int timeout_ms;			/* a command line; DATA, with min_data_rate */
	unsigned min_data_rate;		/* bytes/s that extend DATA's time */
	unsigned junk_limit;		/* junk commands between messages */
	int greet_pause_ms;		/* before the greeting */
	int greet_pause_loopback;	/* ... for loopback clients too */
	const char *qqprog;		/* weir-queue or $QMAILQUEUE */
	const char *qqsock;		/* weir-queued's queue_socket, tried first; NULL: none */
	struct tls_server *tls;		/* STARTTLS offered; NULL: not */
	const char *password_file;	/* AUTH offered; NULL: not */
	int local;			/* -s, sendmail -bs: a local user's session,
					   trusted to relay and to talk early */
};

/* Fill conf from the loaded config (allow networks parsed, certificate
 * loaded).  0 ok; -1 with the reason in why. */
int smtpd_conf_init(struct smtpd_conf *conf, const struct weir_config *c, struct buf *why);
void smtpd_conf_free(struct smtpd_conf *conf);

/* The client's address as text: getpeername() on fd if it is an IPv4 or
 * IPv6 socket; else $TCPREMOTEIP, else $REMOTE_ADDR (tcpserver,
 * inetd wrappers), checked to be an address; else "unknown".  */
void smtpd_client_addr(int fd, char *out, size_t n);

/* Run one session on infd/outfd with a client at addr.  Returns when the
 * session is over (QUIT, EOF, timeout, too many errors, a refused
 * message ending); the caller exits, or (the listener's session
 * processes) closes the connection and serves the next.  0 after QUIT,
 * 1 otherwise. */
int smtpd_session(const struct smtpd_conf *conf, int infd, int outfd, const char *addr);

#endif
