/*
 * deliver.c: one attempt at a message, start to finish.
 *
 *   pump()      takes messages from an upstream's FIFO while the upstream
 *               has fewer than concurrency + LOOKAHEAD jobs
 *   start()     puts up to max_recipients not-done recipients in a job and
 *               asks weir-gate for it (gatelink.c)
 *   granted     runs the deliverer at once if fewer than `concurrency`
 *               run for this upstream, else when one finishes
 *   spawn()     remote_program -n -r 3 -c CONFIG -u UPSTREAM HOST SENDER
 *               RCPT... with mess/S/N on fd 0, its report on fd 1 and its
 *               word for the gate on fd 3
 *   complete()  applies the report (D marks, bounce notes), tells the gate,
 *               and schedules the message's next step
 *
 * Trusts: the deliverer's output only through report_parse() and the
 * strict outcome parser below.  Config keys: concurrency, queue_lifetime,
 * retry_skip, delay_warning, upstream (max_recipients, name, host).
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
#include "send/rcptfile.h"
#include "send/report.h"
#include "send/sendint.h"

#define REPORT_MAX	(1 << 20)
#define OUTCOME_MAX	2048
#define THROTTLE_GUARD_MS 5000	/* a throttle holds grants this long at least */

static void spawn_or_wait(struct sched *s, struct job *j);

static struct upq *
upq_of(struct sched *s, const struct job *j)
{
	return &s->ups[j->up];
}

static void
job_free(struct sched *s, struct job *j)
{
	struct upq *u = upq_of(s, j);
	struct job **p;
	size_t i;

	for (p = &s->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	for (p = &u->ghead; *p; p = &(*p)->gnext)
		if (*p == j) {
			*p = j->gnext;
			break;
		}
	u->gtail = NULL;
	for (p = &u->ghead; *p; p = &(*p)->gnext)
		u->gtail = *p;
	if (j->outfd >= 0) {
		evloop_unwatch(s->ev, j->outfd);
		close(j->outfd);
	}
	if (j->ocfd >= 0) {
		evloop_unwatch(s->ev, j->ocfd);
		close(j->ocfd);
	}
	evloop_timer_cancel(s->ev, j->watchdog);
	if (j->state == J_RUNNING)
		u->running--;
	u->jobs--;
	j->m->job = NULL;
	for (i = 0; i < j->n; i++)
		free(j->addrs[i]);
	free(j->addrs);
	free(j->offs);
	buf_free(&j->out);
	buf_free(&j->oc);
	free(j);
}

void
job_drop(struct sched *s, struct job *j)
{
	struct msg *m = j->m;

	job_free(s, j);
	enqueue(s, m);
}

/* The end of a pass over m's recipients: 1 if one was put off (the
 * message wants a retry). */
static int
pass_over(struct msg *m)
{
	int deferred = m->pass_deferred;

	m->pass_off = 0;
	m->pass_deferred = 0;
	return deferred;
}

/* The size of u's next batch, at most cap, by what was learnt (struct
 * upq): below the smallest size found too big, halfway up from the
 * largest that went (so a few refusals find the size that fits, and
 * then none). */
static size_t
fit_size(const struct upq *u, size_t cap)
{
	size_t n;

	if (u->fit_hi == 0)
		return cap;
	n = u->fit_lo + 1 >= u->fit_hi ? u->fit_lo : (u->fit_lo + u->fit_hi + 1) / 2;
	return n > 0 && n < cap ? n : cap;
}

/* n recipients were too many for u: 1 if that is news. */
static int
fit_toobig(struct upq *u, size_t n)
{
	if (n == 0 || (u->fit_hi && u->fit_hi <= n))
		return 0;
	u->fit_hi = n;
	if (u->fit_lo >= n)
		u->fit_lo = 0;
	return 1;
}

static void
start(struct sched *s, struct msg *m)
{
	const struct weir_upstream *u;
	struct rcptfile f;
	struct job *j;
	size_t i, cap;
	int r, trouble = 0;

	if (m->up == NO_UPSTREAM) {
		log_warnx("msg %lu: no upstream in %s takes mail from <%s>; will try again",
		    m->id, s->cfg->file ? s->cfg->file : "the config", m->sender);
		schedule(s, m, sched_next_retry(m->birth, wall(), s->retry_skip));
		return;
	}
	r = rcptfile_load(s->o->q, m->id, &f);
	if (r < 0) {
		schedule(s, m, wall() + SYSFAIL_S);
		return;
	}
	if (r == 1 || f.ndone == f.n) {
		rcptfile_free(&f);
		finish(s, m);
		return;
	}
	u = &s->cfg->upstreams[m->up];
	cap = u->max_recipients ? u->max_recipients : 100;
	if (s->ups[m->up].cap && s->ups[m->up].cap < cap)
		cap = s->ups[m->up].cap;
	cap = fit_size(&s->ups[m->up], cap);
	j = xcalloc(1, sizeof *j);
	j->m = m;
	j->up = m->up;
	j->state = J_ASKING;
	j->outfd = j->ocfd = -1;
	j->sent_at = -1;
	j->offs = xcalloc(cap, sizeof *j->offs);
	j->addrs = xcalloc(cap, sizeof *j->addrs);
	for (i = 0; i < f.n && j->n < cap; i++) {
		const char *bad;

		if (f.v[i].done || f.v[i].off < m->pass_off)
			continue;
		/* A stock qmail-send may have let such an address in; it must
		 * never reach an SMTP command line. */
		if ((bad = envelope_addr_problem(f.v[i].addr, f.v[i].len)) != NULL) {
			log_warnx("msg %lu: recipient %zu: %s; bouncing it", m->id, i, bad);
			if (bounce_note(s->o->q, m->id, f.v[i].addr, "The address cannot be "
			    "used in SMTP: it holds a control character. (#5.1.3)") < 0 ||
			    rcpt_mark_done(s->o->q, m->id, &f.v[i].off, 1) < 0)
				trouble = 1;
			f.ndone++;
			continue;
		}
		j->offs[j->n] = f.v[i].off;
		j->addrs[j->n] = xstrndup(f.v[i].addr, f.v[i].len);
		j->n++;
	}
	for (; i < f.n && !j->more; i++)
		j->more = !f.v[i].done;
	rcptfile_free(&f);
	if (j->n == 0) {
		free(j->offs);
		free(j->addrs);
		free(j);
		/* Only bad addresses were left in this pass: a retry if an
		 * earlier batch put one off, else finish (from the top), or
		 * retry the notes. */
		if (pass_over(m))
			schedule(s, m, sched_next_retry(m->birth, wall(), s->retry_skip));
		else
			schedule(s, m, trouble ? wall() + SYSFAIL_S : wall());
		return;
	}
	m->job = j;
	j->next = s->jobs;
	s->jobs = j;
	s->ups[m->up].jobs++;
	gate_ask(s, j);
}

/* Does m outrank a request for up still waiting at the gate? */
static int
outranks(const struct sched *s, size_t up, const struct msg *m)
{
	const struct job *j;

	for (j = s->jobs; j; j = j->next)
		if (j->up == up && j->state == J_ASKING && j->m->prio < m->prio)
			return 1;
	return 0;
}

void
pump(struct sched *s, size_t up)
{
	struct upq *u = &s->ups[up];
	struct msg *m;

	while (u->head && (u->jobs < s->concurrency + LOOKAHEAD ||
	    (u->jobs < s->concurrency + 2 * LOOKAHEAD && outranks(s, up, u->head)))) {
		m = u->head;
		u->head = m->qnext;
		if (u->head == NULL)
			u->tail = NULL;
		m->queued = 0;
		m->qnext = NULL;
		start(s, m);
	}
}

/* Shrink a job to its first n recipients. */
static void
shrink(struct job *j, size_t n)
{
	if (j->n > n)
		j->more = 1;
	while (j->n > n)
		free(j->addrs[--j->n]);
}

void
job_granted(struct sched *s, struct job *j, uint32_t cap)
{
	uint64_t now = clock_mono_ms();
	struct upq *u = upq_of(s, j);
	struct msg *m = j->m;

	j->state = J_GRANTED;
	if (cap)
		u->cap = cap;
	if (j->n > u->fit_lo && (u->fit_hi == 0 || j->n < u->fit_hi))
		u->fit_lo = j->n;	/* it fits */
	if (j->up != m->up) {
		/* A reload sent the message to another upstream (or none). */
		gate_tell(s, j, GP_REFUND, 0, NULL);
		job_drop(s, j);
		return;
	}
	if (now < u->hold_until) {
		/* Granted before the gate read our throttle report: give it
		 * back and ask again once the hold is over (not at once: a
		 * gate that did not suspend would grant it again at once). */
		gate_tell(s, j, GP_REFUND, 0, NULL);
		job_free(s, j);
		schedule_held(s, m, wall() + (long long)((u->hold_until - now + 999) / 1000));
		return;
	}
	/* The grant covers the weight we asked for; a smaller cap only
	 * shapes the next requests. */
	spawn_or_wait(s, j);
}

void
job_refused(struct sched *s, struct job *j, enum gp_code code, const char *text)
{
	struct msg *m = j->m;

	if (code == GP_TOOBIG && j->n > 1) {
		/* More recipients than a window or cap allows at once: halve
		 * this batch; the next ones stay below this size (each
		 * refusal lowers it, so they converge on the size that fits). */
		(void)fit_toobig(upq_of(s, j), j->n);
		shrink(j, fit_size(upq_of(s, j), j->n - 1));
		log_info("msg %lu: weir-gate: %s; asking for %zu recipients", m->id, text, j->n);
		gate_ask(s, j);
		return;
	}
	log_warnx("msg %lu: weir-gate refused: %s %s; will try again in %d s", m->id,
	    gp_code_name(code), text, SYSFAIL_S);
	job_free(s, j);
	schedule(s, m, wall() + SYSFAIL_S);
}

static void complete(struct sched *s, struct job *j);

static void
on_watchdog(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct job *j = arg;

	(void)ev; (void)t;
	j->watchdog = NULL;
	log_warnx("msg %lu: deliverer %ld ran too long; killing it", j->m->id, (long)j->pid);
	/* Its own process group: a helper it started (a secret_command)
	 * goes too, and a pid already reaped is never signalled. */
	kill(-j->pid, SIGKILL);
}

static void
maybe_complete(struct sched *s, struct job *j)
{
	if (j->exited && j->outfd < 0 && j->ocfd < 0)
		complete(s, j);
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
on_child(struct evloop *ev, int signo, void *arg)
{
	struct sched *s = arg;
	struct job *j;
	int status;
	pid_t pid;

	(void)ev; (void)signo;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (j = s->jobs; j; j = j->next)
			if (j->state == J_RUNNING && j->pid == pid)
				break;
		if (j == NULL)
			continue;
		j->exited = 1;
		j->status = status;
		maybe_complete(s, j);
	}
}

/* Is the program installed set-user-id or set-group-id? */
static int
program_is_setid(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0;
}

static int
spawn(struct sched *s, struct job *j)
{
	const struct sched_opts *o = s->o;
	const struct weir_upstream *u;
	char path[QPATH_MAX];
	const char **argv;
	int out[2] = { -1, -1 }, oc[2] = { -1, -1 }, mfd;
	size_t i, k = 0;
	pid_t parent;

	if (j->up >= s->cfg->nupstreams) {
		log_warnx("msg %lu: upstream %s is no longer configured", j->m->id,
		    s->ups[j->up].name);
		return -1;
	}
	u = &s->cfg->upstreams[j->up];
	queue_path(path, o->q, Q_MESS, j->m->id);
	mfd = openat(o->q->dfd, path, O_RDONLY | O_CLOEXEC);
	if (mfd < 0) {
		log_warn("msg %lu: open %s", j->m->id, path);
		return -1;
	}
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(oc, O_CLOEXEC) < 0) {
		log_warn("msg %lu: pipe", j->m->id);
		close(mfd);
		if (out[0] >= 0) {
			close(out[0]);
			close(out[1]);
		}
		return -1;
	}
	argv = xcalloc(j->n + 12, sizeof *argv);
	argv[k++] = o->remote_program;
	argv[k++] = "-n";	/* weir-send holds the grant */
	argv[k++] = "-r";
	argv[k++] = "3";
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
	argv[k++] = u->host ? u->host : u->name;
	argv[k++] = j->m->sender;
	for (i = 0; i < j->n; i++)
		argv[k++] = j->addrs[i];
	argv[k] = NULL;
	parent = getpid();
	j->pid = fork();
	if (j->pid < 0) {
		log_warn("msg %lu: fork", j->m->id);
		close(mfd); close(out[0]); close(out[1]); close(oc[0]); close(oc[1]);
		free(argv);
		return -1;
	}
	if (j->pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (setpgid(0, 0) < 0)
			_exit(111);
		/* If weir-send dies, so does the delivery: weir-gate logs a
		 * dropped grant as sent at that instant, so the send must not
		 * go on for minutes after it (the next weir-send retries it). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(111);
		/* oc[1] first: it may be 0, 1 or 3 itself only if those were
		 * closed, which main() does not allow. */
		if (dup2(oc[1], 3) < 0 || dup2(mfd, 0) < 0 || dup2(out[1], 1) < 0)
			_exit(111);
		execv(argv[0], (char *const *)argv);
		log_warn("exec %s", argv[0]);
		_exit(111);
	}
	free(argv);
	close(mfd);
	close(out[1]);
	close(oc[1]);
	j->outfd = out[0];
	j->ocfd = oc[0];
	if (fd_nonblock(j->outfd, 1) < 0 || fd_nonblock(j->ocfd, 1) < 0)
		log_warn("msg %lu: non-blocking pipe", j->m->id);
	evloop_watch(s->ev, j->outfd, EV_READ, on_output, j);
	evloop_watch(s->ev, j->ocfd, EV_READ, on_output, j);
	j->watchdog = evloop_timer_at(s->ev, clock_mono_ms() + (uint64_t)o->remote_timeout * 1000,
	    on_watchdog, j);
	return 0;
}

static void
run_job(struct sched *s, struct job *j)
{
	struct upq *u = upq_of(s, j);

	j->state = J_RUNNING;
	u->running++;
	wait_end(j->m);
	if (spawn(s, j) < 0) {
		struct msg *m = j->m;

		/* Nothing reached the upstream: give the slot back. */
		gate_tell(s, j, GP_REFUND, 0, NULL);
		job_free(s, j);
		schedule(s, m, wall() + SYSFAIL_S);
		return;
	}
	log_info("msg %lu.%lld: delivering to %zu recipient%s via %s, pid %ld", j->m->id,
	    j->m->birth, j->n,
	    j->n == 1 ? "" : "s", u->name, (long)j->pid);
}

static void
spawn_or_wait(struct sched *s, struct job *j)
{
	struct upq *u = upq_of(s, j);

	if (u->running < s->concurrency) {
		run_job(s, j);
		return;
	}
	j->gnext = NULL;
	if (u->gtail)
		u->gtail->gnext = j;
	else
		u->ghead = j;
	u->gtail = j;
}

/* The deliverer's word for the gate (weir-remote -r): one line (see
 * outcome_write in remote/remote.c). */
enum oc_kind {
	OC_NONE, OC_REFUND, OC_NOMAIL, OC_UNKNOWN, OC_THROTTLED, OC_AUTHFAIL, OC_SENT,
	OC_RELAY, OC_BAD
};

/* "N AT UNDONE" after "sent " or "relay ": 0, or -1 if malformed. */
static int
parse_sent(const char *p, unsigned long *n, long long *at, unsigned long *undone)
{
	char *end;

	if (*p < '0' || *p > '9')
		return -1;
	*n = strtoul(p, &end, 10);
	if (*end != ' ' || (end[1] != '-' && (end[1] < '0' || end[1] > '9')))
		return -1;
	*at = strtoll(end + 1, &end, 10);
	if (*end != ' ' || end[1] < '0' || end[1] > '9' || *at < -1)
		return -1;
	*undone = strtoul(end + 1, &end, 10);
	return *end ? -1 : 0;
}

static enum oc_kind
parse_outcome(struct buf *b, unsigned long *n, long long *at, unsigned long *undone,
    const char **text)
{

	buf_add(b, "", 0);
	if (b->len == 0)
		return OC_NONE;
	if (b->s[b->len - 1] != '\n' || memchr(b->s, '\n', b->len) != b->s + b->len - 1)
		return OC_BAD;
	b->s[--b->len] = '\0';
	if (strcmp(b->s, "refund") == 0)
		return OC_REFUND;
	if (strcmp(b->s, "nomail") == 0)
		return OC_NOMAIL;
	if (strcmp(b->s, "unknown") == 0)
		return OC_UNKNOWN;
	if (strncmp(b->s, "throttled ", 10) == 0) {
		*text = b->s + 10;
		return OC_THROTTLED;
	}
	if (strncmp(b->s, "authfail ", 9) == 0) {
		*text = b->s + 9;
		return OC_AUTHFAIL;
	}
	if (strncmp(b->s, "sent ", 5) == 0)
		return parse_sent(b->s + 5, n, at, undone) < 0 ? OC_BAD : OC_SENT;
	if (strncmp(b->s, "relay ", 6) == 0)
		return parse_sent(b->s + 6, n, at, undone) < 0 ? OC_BAD : OC_RELAY;
	return OC_BAD;
}

/* Tell the gate what the deliverer said happened; *undone: how many of
 * the batch's last recipients it did not attempt. */
static enum oc_kind
tell_gate(struct sched *s, struct job *j, size_t *undone)
{
	const char *text = "";
	unsigned long n = 0, und = 0;
	long long at = -1;
	enum oc_kind k = parse_outcome(&j->oc, &n, &at, &und, &text);
	int crashed = WIFSIGNALED(j->status);

	*undone = 0;
	switch (k) {
	case OC_REFUND:
		gate_tell(s, j, GP_REFUND, 0, NULL);
		break;
	case OC_NOMAIL:
		gate_tell(s, j, GP_NOMAIL, 0, NULL);
		break;
	case OC_THROTTLED:
		log_warnx("msg %lu.%lld: the upstream is throttling us: %s", j->m->id, j->m->birth,
		    text);
		gate_tell(s, j, GP_THROTTLED, 0, text);
		break;
	case OC_AUTHFAIL:
		log_warnx("msg %lu.%lld: the upstream refused our credentials or certificate: %s; "
		    "check username, secret_file (or secret_command), verify and ca_file of "
		    "upstream %s", j->m->id, j->m->birth, text, s->ups[j->up].name);
		gate_tell(s, j, GP_AUTHFAIL, 0, text);
		break;
	case OC_SENT:
	case OC_RELAY:
		/* Only the last ones of the batch can be undone, never all. */
		if (und < j->n && (k == OC_SENT || und == 0))
			*undone = und;
		j->sent_at = at;
		gate_tell(s, j, GP_SENT, n > j->n ? (uint32_t)j->n : (uint32_t)n, NULL);
		break;
	case OC_NONE:
		if (!crashed) {
			/* It stopped before connecting (config, secret). */
			gate_tell(s, j, GP_REFUND, 0, NULL);
			break;
		}
		/* A crash may come after the final dot: the outcome is unknown. */
		/* fall through */
	case OC_UNKNOWN:
	case OC_BAD:
		if (k == OC_BAD)
			log_warnx("msg %lu: the deliverer's outcome line is malformed", j->m->id);
		gate_tell(s, j, GP_UNKNOWN, 0, NULL);
		break;
	}
	return k;
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
		gate_tell(s, g, GP_REFUND, 0, NULL);
		job_drop(s, g);
	}
}

/* Apply a finished deliverer's report: D marks, bounce notes, retry. */
static void
complete(struct sched *s, struct job *j)
{
	struct msg *m = j->m;
	struct rresult *res = xcalloc(j->n, sizeof *res);
	size_t *done = xcalloc(j->n, sizeof *done);
	size_t i, ndone = 0, ntemp = 0, nperm = 0, up = j->up, undone, tried;
	const char *mtext = "", *why = NULL;
	int more;
	size_t next_off;
	long long now = wall();
	enum oc_kind how = tell_gate(s, j, &undone);
	/* Only a "sent" session can tell a recipient's own failure. */
	int own = how == OC_SENT;
	/* The upstream said slow down, or refused our credentials: the
	 * gate suspends it; the message waits there, no attempt counted. */
	int throttled = how == OC_THROTTLED || how == OC_AUTHFAIL;
	int expired = now - m->birth - msg_waited(m) > s->lifetime;
	struct buf note = BUF_INIT, shown = BUF_INIT;

	if (WIFSIGNALED(j->status))
		why = "the deliverer crashed";
	else if (WEXITSTATUS(j->status) != 0)
		why = "the deliverer could not run";
	if (why) {
		for (i = 0; i < j->n; i++)
			res[i] = (struct rresult){ RS_TEMP, why, 0 };
	} else {
		buf_add(&j->out, "", 0);
		report_parse(j->out.s ? j->out.s : "", j->out.len, j->n, res, &mtext);
	}
	/* The last `undone` recipients were not attempted (one transaction
	 * per grant): not a failure, they go in the next batch; and batches
	 * of this upstream are no bigger than what it took from now on. */
	tried = j->n - undone;
	if (undone > 0) {
		struct upq *u = upq_of(s, j);

		u->fit_lo = tried;
		if (fit_toobig(u, tried + 1))
			log_info("msg %lu: %s takes %zu recipients per transaction; batches of "
			    "%zu from now on", m->id, u->name, tried, tried);
	}
	for (i = 0; i < tried; i++) {
		const char *text = res[i].text ? res[i].text : "";

		/* Trouble with the relay (connect, TLS, AUTH, MAIL FROM, a
		 * throttle) never turns into a bounce, whatever the report
		 * says; and only a recipient's own temporary failure can
		 * expire it. */
		if (res[i].st == RS_PERM && (how == OC_RELAY || how == OC_REFUND ||
		    how == OC_NOMAIL || throttled))
			res[i].st = RS_TEMP;
		if (res[i].st == RS_TEMP && res[i].own && own && expired) {
			buf_reset(&note);
			buf_printf(&note, "%s\nI'm not going to try again; this message has been "
			    "in the queue too long.", text);
			res[i].st = RS_PERM;
			text = note.s;
		}
		buf_reset(&shown);
		buf_add_oneline(&shown, text, strlen(text));
		switch (res[i].st) {
		case RS_DELIVERED:
			log_info("msg %lu.%lld: delivered to <%s>: %s", m->id, m->birth, j->addrs[i],
			    shown.s);
			done[ndone++] = j->offs[i];
			break;
		case RS_PERM:
			log_info("msg %lu.%lld: bounced <%s>: %s", m->id, m->birth, j->addrs[i], shown.s);
			/* The note must be durable before the D mark. */
			if (bounce_note(s->o->q, m->id, j->addrs[i], text) == 0) {
				done[ndone++] = j->offs[i];
				nperm++;
			} else {
				ntemp++;
			}
			break;
		case RS_TEMP:
			log_info("msg %lu.%lld: deferred <%s>: %s", m->id, m->birth, j->addrs[i], shown.s);
			ntemp++;
			break;
		}
	}
	control_replies(s, m, j, res);
	if (rcpt_mark_done(s->o->q, m->id, done, ndone) < 0)
		ntemp++;
	/* Tell the sender now, not when the last recipient is done. */
	if (nperm && ntemp) {
		s->dsn.now = (time_t)now;
		(void)dsn_send(s->o->q, m->id, &s->dsn);	/* kept for later on failure */
	}
	if (ntemp && !throttled)
		maybe_warn(s, m, j, res);
	buf_free(&note);
	buf_free(&shown);
	free(res);
	free(done);
	more = j->more || undone > 0;
	next_off = undone > 0 ? j->offs[tried] : j->offs[j->n - 1] + 1;
	job_free(s, j);
	if (throttled) {
		schedule(s, m, now);	/* the same batch, after the suspension at the gate */
	} else if (ntemp && !own) {
		/* Trouble with the relay: the pass goes on from this batch
		 * at the next attempt. */
		schedule(s, m, sched_next_retry(m->birth, now, s->retry_skip));
	} else if (more) {
		/* The rest of the pass first: recipients put off here must
		 * not keep the later ones from ever being tried. */
		m->pass_off = next_off;
		m->pass_deferred |= ntemp != 0;
		schedule(s, m, now);
	} else if (pass_over(m) || ntemp) {
		schedule(s, m, sched_next_retry(m->birth, now, s->retry_skip));
	} else {
		finish(s, m);		/* needs no job slot */
	}
	if (throttled) {
		/* Until the gate answers the report with the suspension. */
		s->ups[up].hold_until = clock_mono_ms() + THROTTLE_GUARD_MS;
		give_back_grants(s, up);
	}
	/* A run slot is free: a granted job may go, then more may ask. */
	kick(s, up);
}

void
kick(struct sched *s, size_t up)
{
	struct upq *u = &s->ups[up];
	struct job *g;

	while ((g = u->ghead) != NULL && u->running < s->concurrency) {
		u->ghead = g->gnext;
		if (u->ghead == NULL)
			u->gtail = NULL;
		run_job(s, g);
	}
	pump(s, up);
}
