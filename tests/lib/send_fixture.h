/*
 * send_fixture.h: the fixture of the weir-send suites
 * (tests/integration/send_*_test.c): the real weir-send on a scratch
 * queue, fed by the real sendmail and weir-queue, delivering through the
 * stand-in deliverer tests/upstream/deliver.py (its calls in
 * tmp/calls.log, beside weir.conf; how it answers each address is said
 * there), and a real
 * weir-gate with room for everything (upstreams up1, lists and main).
 * weir.conf has log_level "verbose", for weir-send's "idle" lines
 * (weir-send(8), LOGS), which the tests wait for instead of sleeping.
 *
 * One fixture per test process (Criterion runs each test in its own):
 *   TestSuite(name, .init = sf_setup, .fini = sf_teardown);
 * A test that wants another weir.conf calls sf_teardown() and
 * sf_setup_with() first.  Every weir-send and weir-gate runs in its own
 * process group, stopped at teardown (and dying with the test).
 *
 * Trusts: the processes the test started.  Test code only (Criterion).
 */
#ifndef WEIR_SEND_FIXTURE_H
#define WEIR_SEND_FIXTURE_H

#include <stddef.h>

#include "lib/buf.h"
#include "send_helpers.h"

/* A string literal as (bytes, length), NULs inside included. */
#define S(x) x, sizeof(x) - 1

#define SF_MSG1 "From: alice@example.org\nSubject: one\n\nhello\n"
/* weir.conf's upstream when the test names none. */
#define SF_UP1 "upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n}\n"
/* An "idle" line of weir-send with nothing in flight (sf_wait_idle). */
#define SF_QUIET "0 running, 0 granted, 0 asking weir-gate,"

struct send_fixture {
	struct sht s;		/* the queue and weir.conf; s.qt.tmp is the folder */
	struct shd d1, d2;	/* weir-send (d2: a second one) */
	struct shd gate;	/* weir-gate */
	char *gsock;		/* its socket */
	char *calls;		/* the deliverer's tmp/calls.log */
	char *qq;		/* weir-queue */
	/* "NAME=value" for weir-send's environment: WEIR_REMOTE (the
	 * deliverer), QMAILQUEUE (weir-queue), WEIR_CONFIG. */
	char *env_remote, *env_qq, *env_conf;
};
extern struct send_fixture sf;

/* weir.conf: concurrency 2, log_level verbose, then extra (NULL: SF_UP1). */
void sf_setup_with(const char *extra);
void sf_setup(void);
void sf_teardown(void);

/* Start weir-send (d: &sf.d1 or &sf.d2) with the deliverer, weir-queue
 * and (unless bare) $WEIR_CONFIG; for d1, wait until it has scanned the
 * queue. */
void sf_start_send(struct shd *d, int bare);
/* What d logged so far, malloc'ed. */
char *sf_send_log(struct shd *d);
/* A condition for sh_wait_for(): weir-send (d1) logged the string arg. */
int sf_log_has(void *arg);
/* How often d1's log holds what. */
int sf_count_in_log(const char *what);
/*
 * Wait up to ms until d1's log holds `after` n times and, after the n-th,
 * an "idle" line that starts with state (SF_QUIET: nothing in flight; or
 * e.g. "0 running, 0 granted, 1 asking weir-gate,"): `after` and all it
 * set going are over.  Asserts, showing the log.
 */
void sf_wait_idle(const char *after, size_t n, const char *state, int ms);

/* The deliverer's calls (calls.log lines "conf\tup\thost\tsender\trcpts"):
 * how many; wait for n (asserts); call i (from 0) without its newline;
 * its "sender\trcpt,rcpt" part.  Strings malloc'ed. */
size_t sf_ncalls(void);
void sf_wait_calls(size_t n, int ms);
char *sf_call(size_t i);
char *sf_call_env(size_t i);
/* Every recipient "m<i>@example.net", i < n, was in a call. */
void sf_assert_all_delivered(size_t n);
/* The most deliverers at once, from conc.log's lines in b. */
int sf_max_at_once(struct buf *b);

/* sendmail -f sender rcpts... (NULL-ended) < msg; asserts exit 0. */
void sf_inject(const char *sender, const char *const *rcpts, const char *msg);
/* weir-queue with a raw envelope (for senders sendmail would not take). */
void sf_inject_raw(const char *env, size_t envlen, const char *msg);
/* n messages from alice, one each to m<i>@example.net. */
void sf_inject_numbered(size_t n);
/* A message in S5 from sender ("" for <>) to the recipients' remote/
 * bytes, queued age seconds ago; its id. */
unsigned long sf_aged_s5(const char *sender, const char *rcpts, size_t rlen, long long age);
/* An injector that fails (exit 71) while *flag exists, as it does on
 * return; the "QMAILQUEUE=" entry that names it (both malloc'ed). */
char *sf_failing_qq(char **flag);

/* Conditions for sh_wait_for(): nothing left in the queue but S2/S3
 * leftovers a kill may leave (todo, info, local, remote, bounce empty);
 * nothing at all; nothing in todo/.  arg unused. */
int sf_settled(void *arg);
int sf_queue_empty(void *arg);
int sf_todo_empty(void *arg);
/* Wait up to ms for sf_settled / sf_queue_empty; assert with a listing. */
void sf_wait_settled(int ms);
void sf_wait_empty(int ms);
/* The one message in info/ (S5): its id (asserts there is one). */
unsigned long sf_only_info(void);
/* queue-check exit 0, " 0 problems". */
void sf_assert_queue_sound(void);

/* Rewrite policy.conf and wait until weir-gate has loaded it. */
void sf_policy(const char *text);
/* `weir flush`; asserts exit 0. */
void sf_run_flush(void);

#endif
