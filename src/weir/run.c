/*
 * run.c: `weir [-c FILE] run`: the foreground supervisor.  Starts the
 * daemons (weir-gate, then weir-send, then `weir-smtpd -l` when weir.conf
 * has a listen section, then weir-metrics when it has a metrics section,
 * then weir-showq unless showq_socket is ""), each with the same config
 * file,
 * restarts one that exits or crashes (crash-only: there is no special
 * shutdown path in them, so restarting is recovery), forwards SIGHUP (re-
 * read config and policy), and on SIGTERM or SIGINT stops them all and
 * exits.  A child that keeps failing is restarted after 1, 2, 4 ... 60
 * seconds; one that ran for a minute starts again at 1.  Before the
 * first start it makes the run-time folders that are missing, with the
 * owners and modes of mail/rundir.c (a box without systemd).
 *
 * One `weir run` per queue: before it starts anything it binds a Unix
 * socket to an abstract name made of the queue folder's device and
 * inode (run_lock), and its children inherit the socket, so after a
 * kill -9 of `weir run` the name stays taken while any daemon it started
 * still runs; a second `weir run` then exits 111 with one line.  An
 * abstract name needs no write access anywhere (under weir.service root
 * has no CAP_DAC_OVERRIDE and cannot write inside the queue) and is never
 * left behind stale.  It holds within one network namespace.
 *
 * Programs are found with libexec_path().  Config keys: queue_dir (for
 * the lock), and those of the children; this file looks only at whether
 * a listen section and a metrics section exist and showq_socket and
 * queue_socket are set.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "mail/libexec.h"
#include "mail/rundir.h"
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

/* Who holds the lock: the pid that called listen() on it, as the
 * kernel tells a client (SO_PEERCRED); 0 if it cannot be had. */
static long
run_lock_holder(const struct sockaddr_un *sa, socklen_t len)
{
	struct ucred cr;
	socklen_t crlen = sizeof cr;
	long pid = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	if (connect(fd, (const struct sockaddr *)sa, len) == 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0)
		pid = cr.pid;
	(void)close(fd);
	return pid;
}

/* The lock of one `weir run` per queue (see the top of the file): the
 * bound socket, inherited by the daemons.  It listens only so that a
 * second `weir run` can learn the holder's pid; nobody accepts. */
static int
run_lock(const char *dir)
{
	struct sockaddr_un sa;
	struct stat st;
	socklen_t len;
	long pid;
	int fd, n;

	if (stat(dir, &st) < 0)
		fatal(111, "stat %s", dir);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "weir-run/%llx/%llu",
	    (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
		fatal(111, "socket for the lock of %s", dir);
	if (bind(fd, (struct sockaddr *)&sa, len) < 0) {
		if (errno != EADDRINUSE)
			fatal(111, "bind the lock of %s", dir);
		if ((pid = run_lock_holder(&sa, len)) > 0)
			fatalx(111, "another weir run (pid %ld, or a daemon it started) runs on %s: "
			    "not starting", pid, dir);
		fatalx(111, "another weir run (or a daemon it started) runs on %s: not starting",
		    dir);
	}
	if (listen(fd, 4) < 0)
		fatal(111, "listen on the lock of %s", dir);
	return fd;
}

int
cmd_run(int argc, char **argv, struct weir_config *cfg)
{
	static const char *const daemons[][2] = {
		{ "weir-gate", NULL }, { "weir-send", NULL }, { "weir-smtpd", "-l" },
		{ "weir-metrics", NULL }, { "weir-showq", NULL }, { "weir-queued", NULL },
	};
	struct run r;
	size_t i, d;

	if (argc != 1) {
		log_warnx("usage: weir [-c FILE] run (unexpected \"%s\")", argv[1]);
		return 2;
	}
	/* Inherited by the daemons on purpose (see the top of the file);
	 * never closed: it goes with the last of us. */
	(void)run_lock(cfg->queue_dir);
	memset(&r, 0, sizeof r);
	r.cfile = cfg->file;
	r.c = xcalloc(sizeof daemons / sizeof daemons[0], sizeof *r.c);
	r.ev = evloop_new();
	evloop_signal(r.ev, SIGCHLD, on_child, &r);
	evloop_signal(r.ev, SIGTERM, on_stop, &r);
	evloop_signal(r.ev, SIGINT, on_stop, &r);
	evloop_signal(r.ev, SIGHUP, on_hup, &r);
	for (d = 0; d < sizeof daemons / sizeof daemons[0]; d++) {
		/* weir-smtpd only with a listen section, weir-metrics only
		 * with a metrics section, weir-showq unless turned off,
		 * weir-queued only with a queue_socket (until it listens,
		 * weir-smtpd and sendmail run weir-queue). */
		if ((d == 2 && !cfg->listen.present) || (d == 3 && !cfg->metrics.present) ||
		    (d == 4 && cfg->showq_socket == NULL) || (d == 5 && cfg->queue_socket == NULL))
			continue;
		i = r.n++;
		r.c[i].r = &r;
		r.c[i].name = daemons[d][0];
		r.c[i].arg = daemons[d][1];
		r.c[i].path = libexec_path(daemons[d][0]);
		r.c[i].backoff = BACKOFF_MIN_MS;
		if (access(r.c[i].path, X_OK) < 0) {
			log_warn("cannot run %s", r.c[i].path);
			return 1;
		}
	}
	/* No systemd-tmpfiles on this box, perhaps: the folders weir-gate
	 * needs (weir-gate makes them too when started alone). */
	(void)rundir_make_all(cfg, NULL, NULL);
	for (i = 0; i < r.n; i++)
		start_child(&r, &r.c[i]);
	if (evloop_run(r.ev) < 0)
		fatal(111, "event loop");
	log_info("stopped");
	return 0;
}
