/*
 * run.c: `weir [-c FILE] run`: the foreground supervisor.  Starts the
 * daemons (weir-gate, then weir-send, then `weir-smtpd -l` when weir.conf
 * has a listen section), each with the same config file,
 * restarts one that exits or crashes (crash-only: there is no special
 * shutdown path in them, so restarting is recovery), forwards SIGHUP (re-
 * read config and policy), and on SIGTERM or SIGINT stops them all and
 * exits.  A child that keeps failing is restarted after 1, 2, 4 ... 60
 * seconds; one that ran for a minute starts again at 1.
 *
 * One `weir run` per queue: it takes an exclusive lock on lock/run in
 * the queue (pidlock.h) before it starts anything, and its children
 * inherit the lock's descriptor, so after a kill -9 of `weir run` the
 * lock stays taken while any daemon it started still runs; a second
 * `weir run` then exits 111 with one line naming the holder.
 *
 * Programs are found with libexec_path().  Config keys: queue_dir (for
 * the lock), and those of the children; this file looks only at whether
 * a listen section exists.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "lib/pidlock.h"
#include "mail/libexec.h"
#include "weir/weir.h"

#define BACKOFF_MIN_MS	1000
#define BACKOFF_MAX_MS	60000
#define HEALTHY_MS	60000

struct run;

struct child {
	struct run *r;
	const char *name;
	const char *arg;	/* one extra argument, or NULL */
	char *path;
	pid_t pid;
	uint64_t started;
	uint64_t backoff;
	struct evtimer *restart;
};

struct run {
	struct evloop *ev;
	struct child *c;
	size_t n;
	const char *cfile;
	int stopping;
};

static void
start_child(struct run *r, struct child *c)
{
	const char *argv[5];
	size_t k = 0;
	sigset_t none;

	argv[k++] = c->path;
	if (r->cfile) {
		argv[k++] = "-c";
		argv[k++] = r->cfile;
	}
	if (c->arg)
		argv[k++] = c->arg;
	argv[k] = NULL;
	c->pid = fork();
	if (c->pid < 0) {
		log_warn("fork for %s", c->name);
		return;
	}
	if (c->pid == 0) {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(c->path, (char *const *)argv);
		log_warn("exec %s", c->path);
		_exit(111);
	}
	c->started = clock_mono_ms();
	log_info("started %s, pid %ld", c->name, (long)c->pid);
}

static void
on_restart(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct child *c = arg;
	struct run *r = c->r;

	(void)ev; (void)t;
	c->restart = NULL;
	if (!r->stopping)
		start_child(r, c);
}

static void
on_child(struct evloop *ev, int signo, void *arg)
{
	struct run *r = arg;
	struct child *c;
	int status;
	size_t i;
	pid_t pid;

	(void)signo;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (i = 0; i < r->n; i++)
			if (r->c[i].pid == pid)
				break;
		if (i == r->n)
			continue;
		c = &r->c[i];
		c->pid = 0;
		if (WIFSIGNALED(status))
			log_warnx("%s (pid %ld) killed by signal %d", c->name, (long)pid,
			    WTERMSIG(status));
		else
			log_warnx("%s (pid %ld) exited with status %d", c->name, (long)pid,
			    WEXITSTATUS(status));
		if (r->stopping)
			continue;
		if (clock_mono_ms() - c->started >= HEALTHY_MS)
			c->backoff = BACKOFF_MIN_MS;
		log_info("restarting %s in %llu ms", c->name, (unsigned long long)c->backoff);
		c->restart = evloop_timer_at(ev, clock_mono_ms() + c->backoff, on_restart, c);
		c->backoff = c->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff * 2;
	}
	if (r->stopping) {
		for (i = 0; i < r->n; i++)
			if (r->c[i].pid > 0)
				return;
		evloop_stop(ev);
	}
}

static void
on_stop(struct evloop *ev, int signo, void *arg)
{
	struct run *r = arg;
	size_t i, alive = 0;

	log_info("signal %d: stopping", signo);
	r->stopping = 1;
	for (i = 0; i < r->n; i++) {
		evloop_timer_cancel(ev, r->c[i].restart);
		r->c[i].restart = NULL;
		if (r->c[i].pid > 0) {
			kill(r->c[i].pid, SIGTERM);
			alive++;
		}
	}
	if (alive == 0)
		evloop_stop(ev);
}

static void
on_hup(struct evloop *ev, int signo, void *arg)
{
	struct run *r = arg;
	size_t i;

	(void)ev;
	for (i = 0; i < r->n; i++)
		if (r->c[i].pid > 0)
			kill(r->c[i].pid, signo);
}

int
cmd_run(int argc, char **argv, struct weir_config *cfg)
{
	static const char *const daemons[][2] = {
		{ "weir-gate", NULL }, { "weir-send", NULL }, { "weir-smtpd", "-l" },
	};
	struct run r;
	size_t i;
	char *lock;
	long holder;
	int lockfd;

	if (argc != 1) {
		log_warnx("usage: weir [-c FILE] run (unexpected \"%s\")", argv[1]);
		return 2;
	}
	/* Inherited by the daemons on purpose (see the top of the file);
	 * never closed: it goes with the last of us. */
	lock = xasprintf("%s/lock/run", cfg->queue_dir);
	lockfd = pidlock_take(lock, 1, &holder);
	if (lockfd < 0) {
		if (errno == EWOULDBLOCK && holder > 0)
			fatalx(111, "another weir run (pid %ld, or a daemon it started) runs on %s: "
			    "not starting", holder, cfg->queue_dir);
		if (errno == EWOULDBLOCK)
			fatalx(111, "another weir run (or a daemon it started) runs on %s: "
			    "not starting", cfg->queue_dir);
		fatal(111, "lock %s", lock);
	}
	free(lock);
	memset(&r, 0, sizeof r);
	r.cfile = cfg->file;
	r.n = sizeof daemons / sizeof daemons[0];
	if (!cfg->listen.present)
		r.n--;		/* weir-smtpd, last, only with a listen section */
	r.c = xcalloc(r.n, sizeof *r.c);
	r.ev = evloop_new();
	evloop_signal(r.ev, SIGCHLD, on_child, &r);
	evloop_signal(r.ev, SIGTERM, on_stop, &r);
	evloop_signal(r.ev, SIGINT, on_stop, &r);
	evloop_signal(r.ev, SIGHUP, on_hup, &r);
	for (i = 0; i < r.n; i++) {
		r.c[i].r = &r;
		r.c[i].name = daemons[i][0];
		r.c[i].arg = daemons[i][1];
		r.c[i].path = libexec_path(daemons[i][0]);
		r.c[i].backoff = BACKOFF_MIN_MS;
		if (access(r.c[i].path, X_OK) < 0) {
			log_warn("cannot run %s", r.c[i].path);
			return 1;
		}
	}
	for (i = 0; i < r.n; i++)
		start_child(&r, &r.c[i]);
	if (evloop_run(r.ev) < 0)
		fatal(111, "event loop");
	log_info("stopped");
	return 0;
}
