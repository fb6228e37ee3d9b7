/*
 * sendmail.h: the sendmail(8)-compatible front end and mailq.
 *
 * sendmail reads a message on stdin, completes its header (Date,
 * Message-ID, From when missing; Bcc removed), builds the envelope from
 * the command line and, with -t, the To/Cc/Bcc headers, and hands both
 * to weir-queue ($QMAILQUEUE, else LIBEXECDIR/weir-queue).  It never says
 * a message was accepted unless weir-queue exited 0.
 *
 * Exit codes (sysexits): 0 queued; 64 usage (unknown or refused option,
 * bad command-line address, no recipients, a sender too long for From:);
 * 65 bad message data (header too large, NUL in the header, bad address
 * in a header) or a permanent weir-queue failure (11..40); 67 no login
 * name for the sender (-bv: a bad address); 69 (-bv) no upstream; 74
 * read error on stdin; 75 temporary failure (weir-queue's other codes,
 * killed by a signal, cannot run it, the queue's place unknown).
 *
 * Trusts: the invoking user (it runs with no privilege); the message and
 * its addresses are checked, not trusted.  Config keys: hostname (sender
 * domain, Message-ID, bare addresses); queue_dir, queue_split and
 * showq_socket for mailq;
 * admin and the upstreams for -bv.  Loaded by config_load_inject(): any
 * error but where the queue is is one warning.
 */
#ifndef WEIR_SENDMAIL_H
#define WEIR_SENDMAIL_H

#include <stddef.h>

#include "lib/buf.h"
#include "lib/log.h"
#include "mail/config.h"

/* -bm (default), -bp (mailq), -bs, -bv, -bi (newaliases), -q. */
enum sm_mode { SM_DELIVER, SM_LIST, SM_SMTP, SM_VERIFY, SM_NEWALIASES, SM_FLUSH };

struct sm_opts {
	enum sm_mode mode;
	int extract;		/* -t: recipients from To/Cc/Bcc too */
	int dot_ends;		/* no -i/-oi: a "." line ends the input */
	const char *sender;	/* -f/-r, or NULL */
	const char *fullname;	/* -F, or NULL */
	const char *config;	/* -C: another weir.conf, or NULL */
	int no_bounce;		/* -N never: queued from <>, so no bounce */
	int verbose;		/* -v: say the queued message's id */
	char *const *rcpt;	/* command-line recipients */
	size_t nrcpt;
};

/* Parse argv (argv[0] "mailq" means -bp).  0 ok; else the exit code
 * (64) with a one-line message in why. */
int sm_parse_args(int argc, char *const *argv, struct sm_opts *o, struct buf *why);

/* "sendmail: text" on stderr (the program name as invoked). */
void sm_say(const char *fmt, ...) PRINTFLIKE(1, 2);

/* Make sure fds 0, 1 and 2 are open (on /dev/null if they were closed),
 * so that no pipe we make can land on them.  0 ok, -1 errno. */
int sm_stdfds(void);

/* Inject the message on fd 0.  Returns the exit code; messages said. */
int sendmail_run(const struct sm_opts *o, const struct weir_config *cfg);

/* List the queue (mailq, sendmail -bp).  0, 1 with warnings, 75 fatal. */
int mailq_run(const struct weir_config *cfg);

/* The other modes (modes.c).  Each returns the exit code, said. */
int sm_smtp_run(const struct sm_opts *o);	/* -bs: execs weir-smtpd */
int sm_verify_run(const struct sm_opts *o, const struct weir_config *cfg); /* -bv */
int sm_flush_run(const struct sm_opts *o);	/* -q: execs `weir flush` as root */
int sm_newaliases_run(void);			/* -bi, newaliases */

#endif
