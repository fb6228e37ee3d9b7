/*
 * sendmail_helpers.h: helpers for the tests of sendmail and mailq: a
 * scratch queue whose config says hostname = "test.example", running the
 * real sendmail (or mailq) on it with $QMAILQUEUE set to the built
 * weir-queue, and comparing a message against a pattern in which a line
 * ending in '*' matches any line with that prefix.
 *
 * Trusts: the queue the test made.  Test code only (Criterion asserts).
 */
#ifndef WEIR_SENDMAIL_HELPERS_H
#define WEIR_SENDMAIL_HELPERS_H

#include <stddef.h>

#include "lib/buf.h"
#include "queue_helpers.h"
#include "testlib.h"

#define SMT_HOST "test.example"

/* qt_setup() with hostname SMT_HOST, and QMAILQUEUE in q->envs. */
void smt_setup(struct qt *q);

/* Run build/bin/<prog> args... (args NULL-ended) with in on stdin, the
 * queue's environment plus extra (NULL-ended, or NULL). */
void smt_run(struct qt *q, const char *prog, const char *const *args, const char *in,
    size_t inlen, const char *const *extra, struct tl_result *r);

/* Run sendmail, assert exit 0 and no output, load the one message. */
void smt_send(struct qt *q, const char *const *args, const char *in, size_t inlen,
    struct qt_msg *m);

/* Assert that sendmail failed with code, printed exactly one line
 * starting "sendmail: " and containing what, and left nothing queued. */
void smt_assert_refused(struct qt *q, struct tl_result *r, int code, const char *what);

/* Assert got matches want line by line ('*' at the end of a want line:
 * any rest of line). */
void smt_assert_like(const struct buf *got, const char *want, const char *what);

/* Assert the envelope (todo file less u and p) is F<sender>\0 T<rcpt>\0...
 * for sender and the NULL-ended recipients. */
void smt_assert_env(const struct qt_msg *m, const char *sender, const char *const *rcpts);

/* The user's login@SMT_HOST and GECOS name (up to a comma; "" if none). */
char *smt_login_addr(void);
char *smt_gecos(void);

/* Run weir-smtpd per connection on a socketpair, with q's environment
 * plus extra (NULL-ended, or NULL): wait for its greeting, send in, read
 * to the end.  Its exit status, what it said (out) and its log (err). */
void smt_smtpd(struct qt *q, const char *const *extra, const char *in, struct tl_result *r);

/* A script in q->tmp that runs "sh -c body"; returns its path. */
char *smt_script(struct qt *q, const char *name, const char *body);

#endif
