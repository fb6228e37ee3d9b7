/*
 * report.h: reading qmail-remote(8)'s output, which weir-remote (and a
 * stock qmail-remote) prints: one report per recipient, r (accepted),
 * h (permanent failure) or s (temporary failure), then one message
 * report, K (delivered), Z (temporary) or D (permanent); each a letter,
 * text, and a NUL.
 */
#ifndef WEIR_REPORT_H
#define WEIR_REPORT_H

#include <stddef.h>

#include "lib/buf.h"

enum rstatus { RS_DELIVERED, RS_TEMP, RS_PERM };

struct rresult {
	enum rstatus st;
	const char *text;	/* into the output buffer, NUL-terminated */
	int own;		/* the recipient's own verdict (r/h/s), not the
				   message's: only these can expire a message */
};

/*
 * Decide each of nrcpt recipients' fate from out[0..len).  A recipient
 * with r takes the message report's fate; one without a report (the
 * deliverer stopped before RCPT, e.g. the connection failed) takes the
 * message report's fate as a failure (K there is treated as Z).  Output
 * without a message report, or malformed, makes every recipient
 * temporary: weir never bounces for a deliverer it could not understand.
 * *msgtext gets the message report's text (or why it was unusable).
 */
void report_parse(const char *out, size_t len, size_t nrcpt, struct rresult *res,
    const char **msgtext);

#endif
