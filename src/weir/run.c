/*
 * run.c: `weir [-c FILE] run`: the foreground supervisor.  Starts the
 * daemons (weir-gate, then weir-send, then `weir-smtpd -l` when weir.conf
 * has a listen section, then weir-metrics when it has a metrics section,
 * then weir-showq unless showq_socket is "", then weir-queued when
 * queue_socket is set), each with the same config file,
 * restarts one that exits or crashes (crash-only: there is no special
 * shutdown path in them, so restarting is recovery), forwards SIGHUP (re-
 * read config and policy), and on SIGTERM or SIGINT stops them all and
 * exits.  A child that keeps failing is restarted after 1, 2, 4 ... 60
 * seconds; one that ran for a minute starts again at 1.  A child that
 * exits because it was told to (SIGTERM at the stop, exit 0 or the
 * signal) is logged as information, anything else as a warning.  Before
 * the first start it makes the run-time folders that are missing, with
 * the owners and modes of mail/rundir.c (a box without systemd).
 *
 * No daemon outlives weir run (mail/supervised.h): each gets SIGTERM
 * from the kernel when weir run dies, however it dies, and stops as
 * when weir run stops it.  weir run must therefore stay one thread.
 *
 * One `weir run` per queue, and one generation of daemons: before it
 * starts anything it binds a Unix socket to an abstract name made of the
 * queue folder's device and inode (run_lock), and its children inherit
 * the socket (all but weir-smtpd -l, whose sessions may go on as long as
 * their clients talk and conflict with nothing: each message goes
 * through weir-queue), and so do theirs (the deliverers), so the name
 * stays taken while any of them runs.  A second `weir run` finds it
 * taken: if the weir run that took it lives (its pid is the socket's
 * peer), it exits 111 with one line; if that one is dead (kill -9, a
 * crash), its daemons are going, and the deliverers may be finishing
 * their transactions: it says so in one line and waits, woken when the
 * last of them lets go (a connection to the socket hangs up), for at
 * most the time a deliverer may take to finish its transaction (the sum
 * of an upstream's timeouts from MAIL to the final dot's reply, the
 * largest of the upstreams', plus a minute: 26 minutes by default), then
 * exits 111 if they have not gone.  An abstract name needs no write
 * access anywhere (under weir.service root has no CAP_DAC_OVERRIDE and
 * cannot write inside the queue) and is never left behind stale.  It
 * holds within one network namespace.
 *
 * Before it starts weir-showq it makes sure no other weir-showq answers
 * on showq_socket (another weir's, sharing the socket): if one does, it
 * says so once and does not start it, where weir-showq would exit at
 * every start.
 *
 * It starts nothing when the configuration is one weir check-config
 * refuses: the policy file does not load, or it and weir.conf disagree
 * (check_config_refusals: the same lines, "FILE:LINE: what"); weir.conf
 * itself was loaded by main.c, which refuses its errors.
 *
 * Programs are found with libexec_path().  Config keys: queue_dir (for
 * the lock), the upstreams' timeouts (the wait), showq_socket, and
 * those of the children; this file looks only at whether a listen
 * section and a metrics section exist and queue_socket is set.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "mail/supervised.h"
#include "weir/weir.h"

#define BACKOFF_MIN_MS	1000
#define BACKOFF_MAX_MS	60000
#define HEALTHY_MS	60000
#define LOCK_BACKLOG	64	/* waiting weir runs, each one connection */

struct run;

struct child {
	struct run *r;
	const char *name;
	const char *arg;	/* one extra argument, or NULL */
	int no_lock;		/* does not inherit the lock (weir-smtpd -l) */
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
	int lockfd;		/* run_lock()'s */
	int stopping;
	int lock_wait;		/* run_lock()'s wait: LOCK_FREE, LOCK_TIMEOUT */
};

enum { LOCK_WAITING, LOCK_FREE, LOCK_TIMEOUT };

static void
start_child(struct run *r, struct child *c)
{
	const char *argv[5];
	size_t k = 0;
	sigset_t hup;

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
		/* SIGHUP blocked, all else not: a reload forwarded before the
		 * daemon has said what SIGHUP means to it waits (pending)
		 * until it has, instead of killing it (a weir-metrics started
		 * 25 ms before a reload died of it: supervise_test
		 * stop_and_reload_are_no_trouble, 1 run of make check).
		 * Each daemon watches SIGHUP or ignores it. */
		sigemptyset(&hup);
		sigaddset(&hup, SIGHUP);
		sigprocmask(SIG_SETMASK, &hup, NULL);
		if (c->no_lock)
			(void)close(r->lockfd);
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
		/* Told to stop (on_stop), it did: nothing to act on. */
		if (r->stopping && ((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
		    (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)))
			log_info("%s (pid %ld) stopped", c->name, (long)pid);
		else if (WIFSIGNALED(status))
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

/* Connected to the Unix socket sa, and the pid of the process that
 * called listen() on it, as the kernel tells a client (SO_PEERCRED; 0 if
 * it cannot be had).  While the connection is kept, not accepted, it
 * hangs up (POLLHUP) when the last holder of the listening socket
 * closes it.  -1 (errno) if no connection. */
static int
peer_connect(const struct sockaddr_un *sa, socklen_t len, long *pid)
{
	struct ucred cr;
	socklen_t crlen = sizeof cr;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), saved;

	*pid = 0;
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)sa, len) < 0) {
		saved = errno;
		(void)close(fd);
		errno = saved;
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0)
		*pid = cr.pid;
	return fd;
}

/* Is pid a process that has not ended?  A zombie has (the weir run its
 * parent has not reaped yet); a pid that cannot be asked is taken to
 * live. */
static int
pid_lives(long pid)
{
	char path[64], b[256], *p;
	ssize_t n;
	int fd;

	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return 0;
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno != ENOENT;
	n = read(fd, b, sizeof b - 1);
	(void)close(fd);
	if (n <= 0)
		return 1;
	b[n] = '\0';
	/* "pid (comm) state ...": comm may hold anything. */
	if ((p = strrchr(b, ')')) == NULL || p[1] != ' ')
		return 1;
	return p[2] != 'Z' && p[2] != 'X';
}

static void
on_lock_free(struct evloop *ev, int fd, int events, void *arg)
{
	struct run *r = arg;

	(void)fd; (void)events;
	r->lock_wait = LOCK_FREE;
	evloop_stop(ev);
}

static void
on_lock_timeout(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct run *r = arg;

	(void)t;
	r->lock_wait = LOCK_TIMEOUT;
	evloop_stop(ev);
}

/* The longest a deliverer of an earlier generation may take to finish
 * its transaction: each step from MAIL to the final dot's reply taking
 * its whole timeout, for the slowest upstream, plus a minute. */
static uint64_t
lock_wait_ms(const struct weir_config *cfg)
{
	long long most = 0, t;
	size_t i;

	for (i = 0; i < cfg->nupstreams; i++) {
		const struct weir_upstream *u = &cfg->upstreams[i];

		t = u->timeout_mail + u->timeout_rcpt + u->timeout_data_init +
		    u->timeout_data_block + u->timeout_data_end;
		if (t > most)
			most = t;
	}
	return (uint64_t)(most + 60) * 1000;
}

/*
 * The lock of one `weir run` per queue (see the top of the file): the
 * bound socket, inherited by the daemons.  It listens only so that a
 * second `weir run` can learn the holder's pid and wait for it to go;
 * nobody accepts.  -1: SIGTERM or SIGINT came while waiting.
 */
static int
run_lock(struct run *r, const struct weir_config *cfg)
{
	const char *dir = cfg->queue_dir;
	uint64_t wait_ms = lock_wait_ms(cfg), deadline = clock_mono_ms() + wait_ms;
	struct sockaddr_un sa;
	struct evtimer *t;
	struct stat st;
	socklen_t len;
	int fd, n, said = 0;
	long pid = 0;

	if (stat(dir, &st) < 0)
		fatal(111, "stat %s", dir);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "weir-run/%llx/%llu",
	    (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	for (;;) {
		if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
			fatal(111, "socket for the lock of %s", dir);
		if (bind(fd, (struct sockaddr *)&sa, len) == 0)
			break;
		if (errno != EADDRINUSE)
			fatal(111, "bind the lock of %s", dir);
		(void)close(fd);
		/* Taken.  By a weir run that lives, or that cannot be asked
		 * (the name bound but not listening yet, every slot of its
		 * backlog waiting): not us. */
		fd = peer_connect(&sa, len, &pid);
		if (fd < 0 || pid <= 0 || pid_lives(pid)) {
			if (pid > 0)
				fatalx(111, "another weir run (pid %ld, or a daemon it started) runs "
				    "on %s: not starting", pid, dir);
			fatalx(111, "another weir run (or a daemon it started) runs on %s: "
			    "not starting", dir);
		}
		/* Its weir run is dead: its daemons are going. */
		if (!said++)
			log_info("the daemons of weir run pid %ld (gone) still run on %s: waiting up "
			    "to %llu s for them to exit (a deliverer may be finishing its "
			    "transaction)", pid, dir, (unsigned long long)(wait_ms / 1000));
		r->lock_wait = LOCK_WAITING;
		evloop_watch(r->ev, fd, EV_READ, on_lock_free, r);
		t = evloop_timer_at(r->ev, deadline, on_lock_timeout, r);
		if (evloop_run(r->ev) < 0)
			fatal(111, "event loop");
		evloop_unwatch(r->ev, fd);
		if (r->lock_wait != LOCK_TIMEOUT)
			evloop_timer_cancel(r->ev, t);
		(void)close(fd);
		if (r->stopping)
			return -1;
		if (r->lock_wait == LOCK_TIMEOUT)
			fatalx(111, "the daemons of weir run pid %ld still run on %s after %llu s: "
			    "not starting (the processes holding the abstract socket "
			    "@weir-run/%llx/%llu)", pid, dir, (unsigned long long)(wait_ms / 1000),
			    (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	}
	if (said)
		log_info("the daemons of weir run pid %ld have exited: starting", pid);
	if (listen(fd, LOCK_BACKLOG) < 0)
		fatal(111, "listen on the lock of %s", dir);
	return fd;
}

/* weir-showq would exit at every start if another one (another weir's,
 * sharing showq_socket) answers there: 1 if one does, said once. */
static int
showq_taken(const char *path)
{
	struct sockaddr_un sa;
	long pid;
	int fd;

	if (strlen(path) >= sizeof sa.sun_path)
		return 0;	/* weir-showq says what is wrong */
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	if ((fd = peer_connect(&sa, sizeof sa, &pid)) < 0)
		return 0;
	(void)close(fd);
	log_warnx("showq_socket %s is served by another process (pid %ld; the weir-showq of "
	    "another weir?): not starting weir-showq; give each weir.conf a showq_socket "
	    "of its own", path, pid);
	return 1;
}

int
cmd_run(int argc, char **argv, struct weir_config *cfg)
{
	static const char *const daemons[][2] = {
		{ "weir-gate", NULL }, { "weir-send", NULL }, { "weir-smtpd", "-l" },
		{ "weir-metrics", NULL }, { "weir-showq", NULL }, { "weir-queued", NULL },
	};
	struct run r;
	struct buf refused = BUF_INIT;
	size_t i, d;
	int nref;

	if (argc != 1) {
		log_warnx("usage: weir [-c FILE] run (unexpected \"%s\")", argv[1]);
		return 2;
	}
	/* What check-config refuses in the configuration, refused here with
	 * the same lines; mail is still queued meanwhile (the injectors
	 * need only the queue's place). */
	if ((nref = check_config_refusals(cfg, &refused)) > 0) {
		const char *p = refused.s, *nl;

		for (; p && *p; p = nl ? nl + 1 : NULL) {
			nl = strchr(p, '\n');
			log_warnx("%.*s", (int)(nl ? nl - p : (long)strlen(p)), p);
		}
		log_warnx("not starting: %d error%s in the configuration (weir check-config says "
		    "the same); mail is still queued", nref, nref == 1 ? "" : "s");
		buf_free(&refused);
		return 1;
	}
	buf_free(&refused);
	memset(&r, 0, sizeof r);
	r.cfile = cfg->file;
	r.ev = evloop_new();
	evloop_signal(r.ev, SIGCHLD, on_child, &r);
	evloop_signal(r.ev, SIGTERM, on_stop, &r);
	evloop_signal(r.ev, SIGINT, on_stop, &r);
	evloop_signal(r.ev, SIGHUP, on_hup, &r);
	/* Inherited by the daemons on purpose (see the top of the file);
	 * never closed: it goes with the last of us. */
	if ((r.lockfd = run_lock(&r, cfg)) < 0) {
		log_info("stopped while waiting");
		return 0;
	}
	r.c = xcalloc(sizeof daemons / sizeof daemons[0], sizeof *r.c);
	for (d = 0; d < sizeof daemons / sizeof daemons[0]; d++) {
		/* weir-smtpd only with a listen section, weir-metrics only
		 * with a metrics section, weir-showq unless turned off,
		 * weir-queued only with a queue_socket (until it listens,
		 * weir-smtpd and sendmail run weir-queue). */
		if ((d == 2 && !cfg->listen.present) || (d == 3 && !cfg->metrics.present) ||
		    (d == 4 && (cfg->showq_socket == NULL || showq_taken(cfg->showq_socket))) ||
		    (d == 5 && cfg->queue_socket == NULL))
			continue;
		i = r.n++;
		r.c[i].r = &r;
		r.c[i].name = daemons[d][0];
		r.c[i].arg = daemons[d][1];
		r.c[i].no_lock = d == 2;
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
	supervised_name_self();
	for (i = 0; i < r.n; i++)
		start_child(&r, &r.c[i]);
	if (evloop_run(r.ev) < 0)
		fatal(111, "event loop");
	log_info("stopped");
	return 0;
}
