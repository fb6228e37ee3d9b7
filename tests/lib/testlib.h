/*
 * testlib.h: helpers shared by the Criterion tests: scratch folders,
 * running the real binaries with given stdin / fd 1 input and captured
 * output, reading files.  Binaries are found in $WEIR_BIN (set by
 * tests/run.sh to build/bin); the fault-injection shim is $WEIR_FAULTINJ.
 */
#ifndef WEIR_TESTLIB_H
#define WEIR_TESTLIB_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/buf.h"
#include "lib/log.h"
#include "mail/gateclient.h"

/* A fresh folder under $TMPDIR (or /tmp), removed by tl_rmtree(). */
char *tl_tmpdir(void);
void tl_rmtree(const char *path);

/* Path of a built program: $WEIR_BIN/name. */
char *tl_bin(const char *name);
/* A file of the source tree: relative to the current folder (make runs
 * the tests from the top of the tree), else to $WEIR_BIN/../.. */
char *tl_src_path(const char *rel);
/* The test certificates (tests/upstream/mkcerts.sh) made in dir: 0 ok. */
int tl_make_certs(const char *dir);
/* For a whole test binary, from its ReportHooks: make the certificates in
 * /tmp/weir-TAG-certs.PID and name them in $WEIR_TEST_CERTS (exits on
 * failure); tl_certs() is that folder; tl_certs_remove() removes it. */
void tl_certs_make_all(const char *tag);
const char *tl_certs(void);
void tl_certs_remove(void);

struct tl_run {
	const char *const *argv;	/* argv[0] is a path */
	const char *const *env;		/* extra "NAME=value" entries, NULL-ended, or NULL */
	const char *in;			/* bytes for fd 0 */
	size_t inlen;
	const char *fd1in;		/* if set, fd 1 is a pipe we write this into
					   (qmail-queue's envelope); stdout is then not captured */
	size_t fd1len;
	int close_in_early;		/* leave fd 0 open without writing (timeouts) */
	int timeout_s;			/* kill after this long; 0 = 30 s */
};

struct tl_result {
	int status;		/* exit code, or 128+signal */
	struct buf out;		/* stdout (when fd 1 is not the envelope pipe) */
	struct buf err;		/* stderr */
};

/* Run and wait.  Never fails the test itself; result in r. */
void tl_run(const struct tl_run *run, struct tl_result *r);
void tl_result_free(struct tl_result *r);

/* Whole file into b (cr_assert on failure). */
void tl_read(const char *path, struct buf *b);
/* Write a file (cr_assert on failure). */
void tl_write(const char *path, const char *data, size_t len);
/* Start $WEIR_BIN/prog -c conf args... (NULL-ended, or NULL) in its own
 * process group, dying with the test (PR_SET_PDEATHSIG), stdout and
 * stderr appended to log, WEIR_LIBEXEC set to $WEIR_BIN (weir run finds
 * its daemons there); returns its pid at once. */
pid_t tl_spawn(const char *prog, const char *conf, const char *const *args, const char *log);
/* How many times needle stands in hay (not overlapping; hay NULL: 0). */
size_t tl_count(const char *hay, const char *needle);
/* Number of regular files under dir, recursively. */
int tl_count_files(const char *dir);
int tl_is_root(void);
/* Start the stand-in upstream tests/upstream/upstream.py with args
 * (NULL-ended, after the script) in its own process group, dying with
 * the test, stderr appended to log; wait up to 15 s for its "PORT n"
 * line.  Returns its pid, the port in *port; fails the test (showing the
 * log) if it does not start. */
pid_t tl_upstream_start(const char *const *args, const char *log, unsigned *port);
/* The same without Criterion (testlib_sock.c): argv is the whole command
 * (python3, the script, its arguments).  Returns the pid, or -1 if it
 * cannot fork; *port is 0 if no "PORT n" line came in 15 s, and said
 * holds what did. */
pid_t tl_upstream_spawn(const char *const *argv, const char *log, unsigned *port, char *said,
    size_t saidsz);
/* Start argv (a daemon that listens) with stdout and stderr appended to
 * log, dying with the test; return its pid once the Unix socket sock
 * (or, sock NULL, the loopback TCP port) accepts a connection (10 s at
 * most; fails the test with the log otherwise). */
pid_t tl_start_listening(const char *const *argv, const char *log, const char *sock,
    unsigned port);
/* A loopback TCP port nobody listens on now (the kernel's pick). */
unsigned tl_free_port(void);
/* 1 if 127.0.0.1:port accepts a connection (testlib_sock.c). */
int tl_port_answers(unsigned port);
/* A redis-server on 127.0.0.1:port in dir, without persistence, then
 * the extra arguments (NULL-ended, or NULL: later ones override), its
 * output appended to dir/redis-PORT.log, dying with the test. */
pid_t tl_redis_start_tcp(const char *dir, unsigned port, const char *const *extra);
/* A redis-server of the test's own, listening on the Unix socket sock
 * only (no TCP port), without persistence, in dir (its output appended
 * to dir/redis.log), dying with the test.  Returns its pid once it
 * answers; fails the test (showing its log) if it does not. */
pid_t tl_redis_start(const char *dir, const char *sock);
/* The same in a scratch folder of its own, with the test's connection
 * to it: tl_redis_up starts it (fails the test if it cannot);
 * tl_redis_down stops it, removes the folder and frees the fields. */
struct tl_redis {
	char *dir;
	char *sock;
	char *spec;			/* "unix:SOCK", as policy.conf's `shared` */
	pid_t pid;
	struct redisContext *c;
};
void tl_redis_up(struct tl_redis *r);
void tl_redis_down(struct tl_redis *r);
/* A command on r->c (as hiredis's redisCommand) that must not fail. */
void tl_redis_cmd(struct tl_redis *r, const char *fmt, ...) PRINTFLIKE(2, 3);
/* The store's history of upstream up made whole on r (its gen, as
 * weir-gate reads the Redis's ident: "RUNID:REPLID", src/gate/shared.h)
 * with host's written back: no rebuild holds the first grant. */
void tl_redis_whole(struct tl_redis *r, const char *up, const char *host);
/* Wait up to ms for gc's next reply from weir-gate: 1 with *r, 0 if none
 * came (fails the test on a protocol error or a closed connection). */
int tl_gate_reply(struct gate_client *gc, struct gp_reply *r, int ms);
/* `weir-gate -c conf -s sock status [json]` (exit 0 asserted), malloc'ed. */
char *tl_gate_status(const char *conf, const char *sock, int json);
/* 1 if the Unix stream socket at path accepts a connection (a daemon is
 * up), else 0.  In testlib_sock.c, free of Criterion: the crash-replay
 * harness uses it too. */
int tl_sock_answers(const char *path);

/* weir-send's "idle" lines (weir-send(8), LOGS; log_level verbose): 1 if
 * log holds `after` n times (n >= 1) and, after the n-th, an idle line
 * whose text starts with state (e.g. "0 running, 0 granted, 0 asking
 * weir-gate,": nothing in flight). */
int tl_idle_after(const char *log, const char *after, size_t n, const char *state);

/* Python lines for the qmail-remote(8) stand-ins the tests write: parse
 * the command line weir-send gives a deliverer (options, then host,
 * sender, recipients) into opts, the rest in a, and the outcome fd
 * (-r, else -1) in ocfd.  Needs "import sys". */
#define TL_PY_REMOTE_ARGS \
	"a = sys.argv[1:]\n" \
	"opts = {}\n" \
	"while a and len(a[0]) == 2 and a[0][0] == '-':\n" \
	"    o = a.pop(0)\n" \
	"    opts[o] = True if o == '-n' else a.pop(0)\n" \
	"ocfd = int(opts['-r']) if '-r' in opts else -1\n"

#endif
