/*
 * envelope.h: qmail's envelope byte formats.
 *
 *   qmail-queue input (fd 1):  F<sender>\0 T<rcpt>\0 ... \0
 *   todo/ and intd/ files:     u<uid>\0 p<pid>\0 F<sender>\0 T<rcpt>\0 ...
 *   info/ files:               F<sender>\0
 *   local/ and remote/ files:  T<rcpt>\0 or D<rcpt>\0, repeated
 *
 * Addresses are at most ADDR_MAX (1002) bytes, hold no NUL (the
 * terminator) and, in weir, no ASCII control byte: an address with CR or
 * LF in it would let a sender smuggle SMTP commands later.
 *
 * Trusts: nothing; every parser here rejects what does not fit exactly.
 */
#ifndef WEIR_ENVELOPE_H
#define WEIR_ENVELOPE_H

#include <stddef.h>

#include "lib/buf.h"
#include "mail/queue.h"

/* NULL if the address may stand in an envelope, else the reason. */
const char *envelope_addr_problem(const char *addr, size_t len);

/* Streaming parser for qmail-queue's fd 1 input. */
enum env_status {
	ENV_MORE,	/* need more input */
	ENV_DONE,	/* terminator seen; nothing past it is read */
	ENV_TOOLONG,	/* an address over ADDR_MAX bytes (qmail-queue 11) */
	ENV_FORMAT,	/* anything else malformed (qmail-queue 91) */
};

struct env_parser {
	int state;
	size_t pos;		/* bytes consumed so far, for messages */
	size_t alen;		/* bytes of the current address */
	size_t nrcpt;
	size_t addr_start;	/* offset in out of the current address */
	char addr[ADDR_MAX];	/* the current address, for the check at its end
				   (the caller may flush out between feeds) */
	char why[160];
};

void env_parser_init(struct env_parser *p);
/* Consume up to n bytes of in, appending the F and T records, validated,
 * to out.  *used says how many bytes were consumed (fewer than n only at
 * ENV_DONE or on error). */
enum env_status env_parser_feed(struct env_parser *p, const char *in, size_t n,
    size_t *used, struct buf *out);

/* One NUL-terminated record: a type byte and an address. */
struct qrec {
	char type;
	const char *addr;
	size_t len;
};

/* Next record of s[*off..n): 1 got one, 0 at end, -1 malformed (reason in
 * *why).  Checks only the framing; callers check the types they allow. */
int qrec_next(const char *s, size_t n, size_t *off, struct qrec *r, const char **why);

/* A parsed todo/ (or intd/) file.  Pointers point into the parsed bytes. */
struct todo_env {
	unsigned long uid;
	unsigned long pid;
	struct qrec sender;
	size_t rcpt_off;	/* offset of the first T record */
	size_t nrcpt;
};

/* Strict parsers for the four file kinds: 0 ok, -1 with a reason in why. */
int todo_parse(const char *s, size_t n, struct todo_env *e, struct buf *why);
int info_parse(const char *s, size_t n, struct qrec *sender, struct buf *why);
/* The parsers check framing only, so that listings show what a stock
 * qmail put in a queue.  Before weir sends to or from an address it
 * checks it (envelope_addr_problem); this does so for a whole todo/ file
 * parsed into e: 0 clean, -1 with the reason. */
int todo_check_addrs(const char *s, size_t n, const struct todo_env *e, struct buf *why);
/* local/ and remote/: counts of not-done (T) and done (D) recipients. */
int rcptfile_parse(const char *s, size_t n, size_t *todo, size_t *done, struct buf *why);

#endif
