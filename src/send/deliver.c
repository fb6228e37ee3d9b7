/*
 * deliver.c: stage 3 of an attempt (sendint.h): granted jobs to run
 * slots, `concurrency` per upstream.
 *
 *   deliver_granted()  a granted job runs at once if a slot is free,
 *                      else when one is (deliver_kick)
 *   spawn()            a job asked with a connection runs its own
 *                      deliverer: remote_program -n -r 3 -c CONFIG -u
 *                      UPSTREAM HOST SENDER RCPT... with mess/S/N on fd
 *                      0, its report on fd 1 and its word for the gate on
 *                      fd 3; one asked without goes to an idle kept
 *                      session (session.c), which gets the same three
 *   maybe_complete()   once the deliverer is done and both pipes are
 *                      read: complete_job (complete.c), then what the
 *                      batch said of the upstream, then the free slot
 *
 * Trusts: nothing of the deliverer's output (complete.c parses it);
 * reads at most REPORT_MAX and OUTCOME_MAX bytes, and kills a deliverer
 * after remote_timeout (an hour, main.c).  Config keys: concurrency,
 * upstream (name, host, session_idle through session.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "mail/outcome.h"
#include "send/rcptfile.h"
#include "send/report.h"
#include "send/sendint.h"

#define WAIT_NOTE_MS	1000	/* a wait this long is named in the "delivering" line */

static struct upq *
upq_of(struct sched *s, const struct job *j)
{
	return &s->ups[j->up];
}

static void
on_watchdog(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct job *j = arg;

	(void)ev; (void)t;
	j->watchdog = NULL;
	log_warnx("msg %s: deliverer %ld ran too long; killing it", j->m->qid, (long)j->pid);
	/* Its own process group: a helper it started (a secret_command)
	 * goes too, and a pid already reaped is never signalled. */
	kill(-j->pid, SIGKILL);
}

/* The upstream said "slow down": grants received but not yet used go
 * back to the gate unused, and their messages ask again (and wait out
 * the suspension there), so a throttle is never answered by a burst. */
static void
give_back_grants(struct sched *s, size_t up)
{
	struct upq *u = &s->ups[up];
	struct job *g;

	while ((g = u->ghead) != NULL) {
		u->ghead = g->gnext;
		if (u->ghead == NULL)
			u->gtail = NULL;
		(void)gatelink_tell(s, g, GP_REFUND, 0, NULL);
		job_drop(s, g);
	}
}

void
deliver_refund_unstarted(struct sched *s, size_t up)
{
	struct job *g;

	for (g = s->ups[up].ghead; g; g = g->gnext)
		(void)gatelink_tell(s, g, GP_REFUND, 0, NULL);
}

/* j is done once its deliverer exited (or its session said so) and its
 * pipes are read: the completion stage takes it; then what the batch
 * said of the upstream is acted on here, and the run slot it leaves
 * free goes to a granted job, then more may ask. */
static void
maybe_complete(struct sched *s, struct job *j)
{
	size_t up = j->up, primary = j->primary;

	if (!j->exited || j->outfd >= 0 || j->ocfd >= 0)
		return;
	switch (complete_job(s, j)) {
	case UP_OK:
		break;
	case UP_THROTTLES:
		give_back_grants(s, up);
		sess_end_idle(s, up, "the upstream is throttling us");
		break;
	case UP_CLOSES_IDLE:
		sess_end_idle(s, up, "the upstream closes idle sessions");
		break;
	}
	deliver_kick(s, up);
	/* A fallback's batch: its primary's FIFO may go on (via.c). */
	if (primary != up && primary < s->nups)
		batch_pump(s, primary);
}

void
deliver_exited(struct sched *s, struct job *j, int status)
{
	j->exited = 1;
	j->status = status;
	maybe_complete(s, j);
}

static void
on_output(struct evloop *ev, int fd, int events, void *arg)
{
	struct job *j = arg;
	int oc = fd == j->ocfd;
	struct buf *b = oc ? &j->oc : &j->out;
	size_t max = oc ? OUTCOME_MAX : REPORT_MAX;
	char chunk[8192];
	ssize_t r;

	(void)events;
	r = read_retry(fd, chunk, sizeof chunk);
	if (r > 0) {
		if (b->len + (size_t)r <= max)
			buf_add(b, chunk, (size_t)r);
		return;
	}
	if (r < 0 && errno == EAGAIN)
		return;
	evloop_unwatch(ev, fd);
	close(fd);
	if (oc)
		j->ocfd = -1;
	else
		j->outfd = -1;
	maybe_complete(j->m->s, j);
}

void
deliver_on_child(struct evloop *ev, int signo, void *arg)
{
	struct sched *s = arg;
	struct job *j;
	int status;
	pid_t pid;

	(void)ev; (void)signo;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (sess_reaped(s, pid, status) || keepalive_reaped(s, pid, status))
			continue;
		for (j = s->jobs; j; j = j->next)
			if (j->state == J_RUNNING && j->pid == pid && j->sess == NULL)
				break;
		if (j != NULL)
			deliver_exited(s, j, status);
	}
}

/* Is the program installed set-user-id or set-group-id? */
static int
program_is_setid(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0;
}

void
deliver_argv(struct sched *s, size_t up, const char **argv, const char *mode,
    const char *qid)
{
	const struct sched_opts *o = s->o;
	const struct weir_upstream *u = &s->cfg->upstreams[up];
	size_t k = 0;

	argv[k++] = o->remote_program;
	if (strncmp(mode, "-S", 2) == 0) {
		argv[k++] = "-S";	/* a kept session (session.c) */
		if (strcmp(mode, "-Sf") == 0) {
			argv[k++] = "-f";	/* its flight file (flight.c) */
			argv[k++] = "3";
		}
	} else if (strcmp(mode, "-K") == 0) {
		argv[k++] = "-K";	/* the OAuth keep-alive (keepalive.c) */
	} else {
		argv[k++] = "-n";	/* weir-send holds the grant */
		argv[k++] = "-r";
		argv[k++] = "3";
		if (qid && o->sessions) {	/* weir-remote's: its lines name it */
			argv[k++] = "-q";
			argv[k++] = qid;
		}
	}
	/* What weir-send has in force; but a set-id weir-remote (the
	 * package's) reads only a file owned by root, never one weir-send
	 * could have written: it gets the file itself. */
	if (s->snapfd >= 0 && !program_is_setid(o->remote_program)) {
		argv[k++] = "-c";
		argv[k++] = s->snappath;
	} else if (s->cfg->file) {
		argv[k++] = "-c";
		argv[k++] = s->cfg->file;
	}
	argv[k++] = "-u";
	argv[k++] = u->name;
	if (strcmp(mode, "-K") != 0)	/* the keep-alive connects nowhere */
		argv[k++] = u->host ? u->host : u->name;
	argv[k] = NULL;
}

pid_t
deliver_fork(const char *const *argv, int fd0, int fd1, int fd3, int deathsig)
{
	pid_t parent = getpid(), pid;

	pid = fork();
	if (pid < 0) {
		log_warn("fork");
		return -1;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (setpgid(0, 0) < 0)
			_exit(111);
		/* If weir-send dies, a deliverer of its own dies too (SIGKILL):
		 * weir-gate counts a dropped grant only until the drop + its
		 * grace, and nothing would hand its outcome on.  A kept
		 * session with a flight file gets SIGTERM: it finishes the
		 * message it holds within that (remote's session.c) and hands
		 * the outcome on through the file (flight.c). */
		if (prctl(PR_SET_PDEATHSIG, deathsig) < 0 || getppid() != parent)
			_exit(111);
		/* fd3 first: it may be 0, 1 or 3 itself only if those were
		 * closed, which main() does not allow. */
		if ((fd3 >= 0 && dup2(fd3, 3) < 0) || dup2(fd0, 0) < 0 ||
		    (fd1 >= 0 && dup2(fd1, 1) < 0))
			_exit(111);
		execv(argv[0], (char *const *)argv);
		log_warn("exec %s", argv[0]);
		_exit(111);
	}
	return pid;
}

int
deliver_open(struct sched *s, struct job *j, int *mfd, int wr[2])
{
	char path[QPATH_MAX];
	int out[2] = { -1, -1 }, oc[2] = { -1, -1 };

	queue_path(path, s->o->q, Q_MESS, j->m->id);
	*mfd = openat(s->o->q->dfd, path, O_RDONLY | O_CLOEXEC);
	if (*mfd < 0) {
		log_warn("msg %s: open %s", j->m->qid, path);
		return -1;
	}
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(oc, O_CLOEXEC) < 0) {
		log_warn("msg %s: pipe", j->m->qid);
		close(*mfd);
		if (out[0] >= 0) {
			close(out[0]);
			close(out[1]);
		}
		return -1;
	}
	wr[0] = out[1];
	wr[1] = oc[1];
	j->outfd = out[0];
	j->ocfd = oc[0];
	if (fd_nonblock(j->outfd, 1) < 0 || fd_nonblock(j->ocfd, 1) < 0)
		log_warn("msg %s: non-blocking pipe", j->m->qid);
	evloop_watch(s->ev, j->outfd, EV_READ, on_output, j);
	evloop_watch(s->ev, j->ocfd, EV_READ, on_output, j);
	j->watchdog = evloop_timer_at(s->ev, clock_mono_ms() +
	    (uint64_t)s->o->remote_timeout * 1000, on_watchdog, j);
	return 0;
}

void
deliver_unopen(struct sched *s, struct job *j)
{
	evloop_unwatch(s->ev, j->outfd);
	evloop_unwatch(s->ev, j->ocfd);
	close(j->outfd);
	close(j->ocfd);
	j->outfd = j->ocfd = -1;
	evloop_timer_cancel(s->ev, j->watchdog);
	j->watchdog = NULL;
}

/* A deliverer of j's own: remote_program -n -r 3 -c CONFIG -u UPSTREAM
 * HOST SENDER RCPT... with mess/S/N on fd 0, its report on fd 1 and its
 * word for the gate on fd 3.  0, -1, or GRANT_LOST. */
static int
spawn(struct sched *s, struct job *j)
{
	const char **argv;
	int mfd, wr[2];
	size_t i, k;

	if (j->up >= s->cfg->nupstreams) {
		log_warnx("msg %s: upstream %s is no longer configured", j->m->qid,
		    s->ups[j->up].name);
		return -1;
	}
	if (deliver_open(s, j, &mfd, wr) < 0)
		return -1;
	if (gatelink_use(s, &j->tag) < 0) {
		j->grant = 0;
		close(mfd);
		close(wr[0]);
		close(wr[1]);
		deliver_unopen(s, j);
		return GRANT_LOST;
	}
	argv = xcalloc(j->n + 14, sizeof *argv);
	deliver_argv(s, j->up, argv, "-n", j->m->qid);
	for (k = 0; argv[k]; k++)
		;
	argv[k++] = j->m->sender;
	for (i = 0; i < j->n; i++)
		argv[k++] = j->addrs[i];
	argv[k] = NULL;
	j->pid = deliver_fork(argv, mfd, wr[0], wr[1], SIGKILL);
	free(argv);
	close(mfd);
	close(wr[0]);
	close(wr[1]);
	if (j->pid < 0) {
		deliver_unopen(s, j);
		return -1;
	}
	return 0;
}

void
deliver_running(struct sched *s, struct job *j)
{
	uint64_t waited = j->m->wait_since ? clock_mono_ms() - j->m->wait_since : 0;
	char after[64] = "";

	j->state = J_RUNNING;
	upq_of(s, j)->running++;
	wait_end(j->m);
	/* A wait of note: in line for the upstream's window or a run slot. */
	if (waited >= WAIT_NOTE_MS)
		snprintf(after, sizeof after, ", after %llu s in line",
		    (unsigned long long)(waited / 1000));
	log_info("msg %s: delivering to %zu recipient%s via %s, %s %ld%s", j->m->qid, j->n,
	    j->n == 1 ? "" : "s", upq_of(s, j)->name, j->sess ? "session" : "pid", (long)j->pid,
	    after);
}

/* Take *p out of u's granted list. */
static void
granted_unlink(struct upq *u, struct job **p)
{
	struct job *g = *p;

	*p = g->gnext;
	g->gnext = NULL;
	u->gtail = NULL;
	for (p = &u->ghead; *p; p = &(*p)->gnext)
		u->gtail = *p;
}

/* Granted jobs to free run slots: a job asked without a connection
 * goes to an idle kept session (session.c), one with a connection to a
 * deliverer of its own; more sessions are asked for those waiting. */
static void
run_granted(struct sched *s, size_t up)
{
	struct upq *u = &s->ups[up];
	struct job **p = &u->ghead, *g;
	unsigned waiting = 0;
	int k;

	while ((g = *p) != NULL && u->running < s->concurrency) {
		if (g->conn) {
			granted_unlink(u, p);
			if ((k = spawn(s, g)) < 0)
				complete_unrun(s, g, k);
			else
				deliver_running(s, g);
			continue;
		}
		if ((k = sess_run(s, g)) == 0) {
			waiting++;
			p = &g->gnext;
			continue;
		}
		granted_unlink(u, p);
		if (k < 0)
			complete_unrun(s, g, k);
		else
			deliver_running(s, g);
	}
	for (; g; g = g->gnext)
		waiting += !g->conn;
	if (waiting)
		sess_open(s, up, waiting);
}

void
deliver_granted(struct sched *s, struct job *j)
{
	struct upq *u = upq_of(s, j);

	j->gnext = NULL;
	if (u->gtail)
		u->gtail->gnext = j;
	else
		u->ghead = j;
	u->gtail = j;
	run_granted(s, j->up);
}

void
deliver_kick(struct sched *s, size_t up)
{
	run_granted(s, up);
	batch_pump(s, up);
}
