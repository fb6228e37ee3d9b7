/*
 * relay_helpers.h: helpers for the whole-relay tests (relay_test.c):
 * the real weir-gate, weir-send and weir-remote, mail injected with the
 * real sendmail (QMAILQUEUE = weir-queue), and the stand-in upstream
 * tests/upstream/upstream.py (python3-aiosmtpd with STARTTLS and AUTH)
 * on a loopback port picked by the kernel, with certificates made for
 * the test by tests/upstream/mkcerts.sh.  Each test has its own folder
 * (queue, config, policy, gate socket and journal, certificates, the
 * upstream's record).
 *
 * Every process started here is in its own process group and dies with
 * the test (PR_SET_PDEATHSIG); the test process is also a child
 * subreaper, so deliverers orphaned by a kill -9 of weir-send come back
 * to it and rt_teardown() kills them too.  With $WEIR_TEST_KEEP set,
 * rt_teardown() leaves the folder for a post-mortem and names it.
 *
 * Trusts: the processes the test started.  Test code only (Criterion).
 */
#ifndef WEIR_RELAY_HELPERS_H
#define WEIR_RELAY_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/buf.h"
#include "send_helpers.h"

#define RT_USER "relay"
#define RT_SECRET "s3cret-pw"

struct rt {
	struct sht s;		/* queue and weir.conf: s.qt.tmp is the folder */
	char *certs;		/* tmp/certs */
	char *record;		/* the upstream's event log: tmp/record.jsonl */
	char *sock, *journal, *policy, *secret;
	pid_t up;		/* the upstream, or 0 */
	unsigned port;
	unsigned up_runs;
	struct shd send;	/* weir-send */
	pid_t gate;		/* weir-gate, or 0 */
	char *gate_log;
	pid_t run;		/* `weir run`, or 0 */
	unsigned run_starts;
	const char *const *run_wrap;	/* NULL, or a command that runs `weir run`
					 * (its argv up to the program: strace ...) */
	pid_t queued;		/* weir-queued, or 0 */
	char *env_libexec, *env_qq;
};

/* The folder, the queue, certificates, a secret file (RT_SECRET, 0600)
 * and weir.conf's general part (hostname SH_HOST, admin SH_ADMIN, the
 * gate's socket, journal and policy file in the folder, concurrency). */
void rt_setup(struct rt *t, unsigned concurrency);
/* Kill everything (weir-send, weir-gate, the upstream, orphans), remove
 * the folder. */
void rt_teardown(struct rt *t);

/* Start the upstream with the certificate cert ("good", "wrong", ...),
 * AUTH RT_USER:RT_SECRET, the record, and extra flags (NULL-ended), on
 * port (0: the kernel picks; t->port gets it). */
void rt_upstream_start(struct rt *t, const char *cert, const char *const *flags,
    unsigned port);
/* SIGKILL and reap the upstream. */
void rt_upstream_stop(struct rt *t);

/* Append upstream "isp" { host, port = t->port, starttls, ca_file,
 * username, secret_file, short timeouts (each one extra does not set),
 * then extra lines }. */
void rt_conf_upstream(struct rt *t, const char *extra);
/* The same for upstream "name" at port (a second upstream: rt_peer). */
void rt_conf_upstream_at(struct rt *t, const char *name, unsigned port, const char *extra);
/* Write policy.conf. */
void rt_policy(struct rt *t, const char *text);

/* weir-gate -c CONF -g grace, in its own process group; waits until its
 * socket answers. */
void rt_gate_start(struct rt *t, const char *grace);
void rt_gate_kill9(struct rt *t);
/* `weir-gate -c CONF status` (asserts exit 0), malloc'ed. */
char *rt_gate_status(struct rt *t);
/* A condition for rt_wait(): weir-gate's status holds the string arg. */
int rt_gate_status_has(struct rt *t, void *arg);

/* weir-send -c CONF with WEIR_LIBEXEC and QMAILQUEUE set; waits until
 * it logged "started on". */
void rt_send_start(struct rt *t);
/* The same with extra "NAME=value" entries (NULL-ended; at most 13) in
 * its environment, e.g. the fault shim's. */
void rt_send_start_env(struct rt *t, const char *const *extra);
/* kill -9 weir-send (its process group; its deliverers are in groups
 * of their own and die through PR_SET_PDEATHSIG). */
void rt_send_kill9(struct rt *t);
/* Everything weir-send logged so far (all its runs, and all runs of
 * `weir run`, whose log holds its daemons'), malloc'ed. */
char *rt_send_logs(struct rt *t);

/* ---- `weir run` (weir-gate, weir-send, ... as its children) ---- */

/* `weir -c CONF run` with WEIR_LIBEXEC and QMAILQUEUE set, in its own
 * process group, dying with the test, its output (its daemons' too) to
 * tmp/weir-run.N.log; returns at once. */
void rt_run_spawn(struct rt *t);
/* The same with another config file and log, for a second weir; its pid
 * (the caller stops and reaps it). */
pid_t rt_run_spawn_conf(struct rt *t, const char *conf, const char *log);
/* The same, then waits until its gate answers and its weir-send logged
 * "started on" (in this run's log). */
void rt_run_start(struct rt *t);
/* kill -9 of `weir run` alone (not its daemons), reaped. */
void rt_run_kill9(struct rt *t);
/* SIGTERM to `weir run`, wait for it (up to ms); its wait status, or -1
 * if it did not exit in time. */
int rt_run_stop(struct rt *t, int ms);
/* This run's log (tmp/weir-run.N.log of the latest start), malloc'ed. */
char *rt_run_log(struct rt *t);
/* A condition for rt_wait(): this run's log holds the string arg. */
int rt_run_log_has(struct rt *t, void *arg);
/* The pid of the running child prog (e.g. "weir-send") of `weir run`, or 0. */
pid_t rt_run_child(struct rt *t, const char *prog);

/* Run $WEIR_BIN/prog args[0..nargs) with the queue's environment and
 * stdin in (NULL: empty); the caller frees the result. */
struct tl_result rt_run(struct rt *t, const char *prog, const char *const *args, size_t nargs,
    const char *in);
/* The same with extra "NAME=value" entries (NULL-ended) in its environment. */
struct tl_result rt_run_env(struct rt *t, const char *prog, const char *const *args,
    size_t nargs, const char *in, const char *const *extra);
/* sendmail -f sender rcpt... < msg (any number of recipients). */
void rt_sendmail(struct rt *t, const char *sender, const char *const *rcpts, size_t n,
    const char *msg);
/* `sendmail -bp` (mailq) once todo/ is empty, malloc'ed; asserts exit 0. */
char *rt_mailq(struct rt *t);
/* `weir flush`; asserts exit 0. */
void rt_flush(struct rt *t);
/* queue-check exit 0 with " 0 problems", and nothing left in the queue. */
void rt_assert_queue_sound(struct rt *t);
void rt_assert_queue_empty(struct rt *t);
/* Wait up to ms for the queue to be empty; asserts with a listing. */
void rt_wait_empty(struct rt *t, int ms);
/* `weir flush` every 3 s until the queue is empty, for up to ms (local
 * trouble is retried after 5 minutes otherwise); asserts with a listing. */
void rt_flush_until_empty(struct rt *t, int ms);

/* ---- the upstream's record ---- */

struct rt_data {
	double time;
	char *sender;		/* "<>" for the null sender, as aiosmtpd says */
	char **rcpts;
	size_t nrcpt;
	unsigned n;		/* the stored copy is record.N */
	unsigned conn;		/* the connection it came on (from 1) */
};

struct rt_rec {
	struct rt_data *v;	/* "data" events, in record order */
	size_t n;
	size_t nmail, nauth, nauth_fail, nstarttls, ndropped;
	size_t nconnect, nrset, nidle_close;	/* connections, RSETs, idle closes */
	size_t nmail_unsafe;	/* MAIL without TLS or without AUTH */
	double *mail_times;	/* every "mail" event */
};

void rt_rec_load(struct rt *t, struct rt_rec *r);
/* The same for the record in the file record (an rt_peer's). */
void rt_rec_load_file(const char *record, struct rt_rec *r);
void rt_rec_free(struct rt_rec *r);
/* A condition for rt_wait(): the record holds the string arg (an event
 * such as "\"delaying\"", the upstream holding a final dot). */
int rt_record_has(struct rt *t, void *arg);
/* How many "data" events so far (cheap enough to poll). */
size_t rt_rec_ndata(struct rt *t);
size_t rt_rec_ndata_file(const char *record);
/* A condition for rt_wait(): at least *(size_t *)arg data events. */
int rt_ndata_at_least(struct rt *t, void *arg);
/* A condition for rt_wait(): a data event went to the address arg (not
 * only its RCPT). */
int rt_delivered_to(struct rt *t, void *arg);
/* How many times rcpt was in a data event from sender. */
size_t rt_rec_count(const struct rt_rec *r, const char *sender, const char *rcpt);
/* The first data event before event i that went to addr, or -1. */
ssize_t rt_rec_earlier(const struct rt_rec *r, size_t i, const char *addr);
/* Assert no interval [s, s+per) holds more than limit data events.
 * Returns the largest count seen. */
size_t rt_assert_window(const struct rt_rec *r, size_t limit, double per);
/* The stored copy of data event i, into b. */
void rt_rec_message(struct rt *t, const struct rt_data *d, struct buf *b);

/* Poll until cond or ms; 1 if cond became true. */
int rt_wait(int (*cond)(struct rt *, void *), struct rt *t, void *arg, int ms);
/* A condition for rt_wait(): nothing in todo/, intd/, info/, remote/
 * or bounce/ (arg unused). */
int rt_drained(struct rt *t, void *arg);

/* ---- shared by relay_test, the fault matrix and the soak ---- */

/* The wall clock, as the upstream's record has it. */
double rt_now(void);
/* n addresses PREFIX<from+i>@domain (NULL-ended); rt_addrs_free() frees. */
char **rt_addrs(const char *prefix, const char *domain, size_t from, size_t n);
void rt_addrs_free(char **v, size_t n);
/* No bounce: no data event from <>, nothing in bounce/, no "bounced <"
 * nor "bounce to" in weir-send's logs. */
void rt_assert_no_bounce(struct rt *t, const struct rt_rec *r);
/* How often weir-send's logs hold what; 1 if they hold it n times
 * within ms; wait until n times (asserts). */
size_t rt_log_count(struct rt *t, const char *what);
int rt_logged(struct rt *t, const char *what, size_t n, int ms);
void rt_wait_log(struct rt *t, const char *what, size_t n, int ms);
/* Wait up to ms until weir-send's logs hold `after` n times and, after
 * the n-th, an "idle" line that starts with state (tl_idle_after(); the
 * test puts log_level = "verbose" in weir.conf); asserts. */
void rt_wait_idle(struct rt *t, const char *after, size_t n, const char *state, int ms);
/* The last max bytes of weir-send's logs, malloc'ed. */
char *rt_send_logs_tail(struct rt *t, size_t max);
/* Recipients marked done (D) in remote/. */
size_t rt_done_marks(struct rt *t);
/* mailq's "messages in queue: N". */
long rt_mailq_count(const char *mq);
/* A field of /proc/pid/io ("rchar": bytes read by read(2), pread(2) and
 * the like), or -1. */
long long rt_proc_io(pid_t pid, const char *key);
/* VmRSS of pid in kB, or -1. */
long rt_vmrss_kb(pid_t pid);
/* Any "Key: N kB" line of /proc/pid/status (VmHWM, VmRSS...), or -1. */
long rt_status_kb(pid_t pid, const char *key);
/* Sample weir-send's VmRSS every 10 ms while anything is left in the
 * queue, for up to ms: the largest in kB (0: none); how many samples
 * in *samples. */
long rt_send_peak_rss(struct rt *t, int ms, size_t *samples);

/* ---- deliverers, and the kill -9 soak ---- */

/* Send sig (0: none) to every running deliverer (a live weir-remote
 * child of weir-send, the test's or `weir run`'s); how many (their pids
 * in v, up to max). */
size_t rt_deliverers(struct rt *t, int sig, pid_t *v, size_t max);

/* A line on stderr that tests/run.sh shows even for a passing test
 * (seeds and figures). */
void rt_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define RT_SOAK_SENDER "soak@src.example"

struct rt_soak {
	unsigned long long seed;
	unsigned round;		/* part of the addresses and of the seed */
	size_t messages;	/* every 10th to 1-5 recipients */
	size_t kills;
	unsigned mean_gap_ms;	/* the mean pause before a kill */
	unsigned limit, per;	/* the policy: limit per `per` seconds */
	unsigned cap;		/* max_recipients */
	unsigned concurrency;	/* as given to rt_setup() */
	int supervised;		/* under `weir run`, the kills its own */
};

struct rt_soak_result {
	size_t send_kills, remote_kills, remote_misses, gate_kills, queued_kills, run_kills;
	size_t reinjected;	/* sendmail runs repeated after a temporary failure */
	size_t reinjected_dups;	/* transactions repeating one of those messages */
	size_t in_flight;	/* deliverers running at the kills */
	size_t dup_bound;	/* the most that may be repeated */
	size_t duplicates;	/* transactions repeating a recipient */
	size_t extra_copies;	/* recipients' copies beyond the first */
	size_t recipients, transactions, worst, s2;
	double seconds;
};

/*
 * One round on a fresh rt (rt_setup() done, nothing started): the
 * upstream, weir-gate and weir-send; o->messages injected by a child
 * with sendmail (through weir-queued: queue_socket) while o->kills kill
 * -9s hit weir-send (restarted), the running weir-remotes, weir-gate
 * (restarted on its journal) or weir-queued (restarted; meanwhile
 * sendmail runs weir-queue) at pseudo-random moments from o->seed.  A
 * sendmail that fails for the time being (its weir-queued killed) is run
 * again, as a client would; that message may then come twice (killed
 * between its todo/ link and its answer), and only it.  With
 * o->supervised, the relay runs under `weir run` (weir-gate with its
 * defaults, as the package runs it; weir-queued too) and every kill is
 * of `weir run` itself, a new one started at once (it waits for the old
 * generation, which stops by itself).  Then asserts: the queue drains
 * and passes queue-check, every recipient delivered at least once, each
 * duplicate transaction near a kill of weir-send, weir-remote or weir
 * run and no more of them than could be in flight, no bounce, the window
 * held over the whole round, and (supervised) no process of a generation
 * alive once the next started.  Figures in res.
 */
void rt_soak_round(struct rt *t, const struct rt_soak *o, struct rt_soak_result *res);

/* ---- a second upstream: a backup relay, a route by recipient domain ---- */

/* Another stand-in upstream beside the first (t->up), with its own
 * process, port and record (tmp/record.NAME.jsonl, its data events at
 * its own clock), the same certificate ("good") and AUTH RT_USER:
 * RT_SECRET, so that rt_conf_upstream_at(t, NAME, p->port, ...) differs
 * from the first's section only in name and port.  rt_teardown() kills
 * it (it is the test's child); rt_peer_free() frees it. */
struct rt_peer {
	char name[32];
	pid_t pid;		/* 0: not running */
	unsigned port;
	char *record;		/* kept across stops and starts */
	unsigned runs;
};

/* Start p as upstream name with extra flags (NULL-ended) on port (0: the
 * kernel picks; p->port gets it). */
void rt_peer_start(struct rt *t, struct rt_peer *p, const char *name, const char *const *flags,
    unsigned port);
/* SIGKILL and reap; the port is closed, the record stays. */
void rt_peer_stop(struct rt_peer *p);
void rt_peer_free(struct rt_peer *p);
/* A condition for rt_wait(): arg, a struct rt_peer_count, holds at least
 * n data events in p's record. */
struct rt_peer_count {
	const struct rt_peer *p;
	size_t n;
};
int rt_peer_ndata_at_least(struct rt *t, void *arg);

#endif
