/*
 * server.c: see server.h.  A client is in one of these states:
 *
 *   IDLE   between messages: the next record begins one (qinject_begin)
 *   MESS   M records going into mess/S/N
 *   ENV    E records going into intd/N (an M now is a protocol error)
 *   READY  the envelope ended: waiting for the group commit; its socket
 *          is not read until it has its answer
 *
 * The group commit runs from a timer set for "now" when the first
 * message of a group becomes READY: the loop first reads every client
 * that has bytes waiting, so messages that arrive together share the
 * fsyncs of one commit; messages that arrive during a commit (its
 * fsyncs block the loop) wait in their sockets and go in the next one.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/fsyncall.h"
#include "lib/io.h"
#include "lib/log.h"
#include "mail/inject.h"
#include "mail/qqcode.h"
#include "mail/qwproto.h"
#include "queued/server.h"

enum cstate { C_IDLE, C_MESS, C_ENV, C_READY };

struct server;

struct client {
	struct server *S;
	int fd;
	struct qinject_who who;		/* SO_PEERCRED */
	enum cstate state;
	char rtype;			/* the record being read */
	size_t left;			/* its payload bytes still to come; 0: a header is next */
	char rbuf[QW_HDR_MAX + QW_CHUNK_MAX];
	size_t rlen;
	struct qinject in;
	struct evtimer *timeout;	/* inject_timeout, while a message is open */
	struct client *next;		/* all clients */
	struct client *next_ready;	/* the group waiting for the commit */
	size_t dirjob;			/* sync_group(): its folder's job */
};

struct server {
	const struct queued_opts *o;
	struct evloop *ev;
	int lfd;
	struct client *clients;
	unsigned nclients;
	struct client *ready;		/* READY, in arrival order (reversed) */
	struct evtimer *commit;		/* set while a group waits */
	unsigned long seq;		/* pid/ names: pid/<our pid>.<time>.<seq> */
	pid_t mypid;
	int stopping;
};

static void on_read(struct evloop *ev, int fd, int events, void *arg);

/* One answer line; the client may be gone: then it is closed anyway. */
static int
answer(struct client *c, const char *line)
{
	size_t n = strlen(line);

	if (send(c->fd, line, n, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n) {
		log_warnx("uid %lu pid %ld: cannot answer \"%.*s\"", (unsigned long)c->who.uid,
		    (long)c->who.pid, (int)n - 1, line);
		return -1;
	}
	return 0;
}

static void
client_free(struct client *c)
{
	struct server *S = c->S;
	struct client **p;

	if (c->state == C_MESS || c->state == C_ENV)
		(void)qinject_undo(&c->in);	/* cancelled: nothing of it stays */
	qinject_close(&c->in);
	evloop_timer_cancel(S->ev, c->timeout);
	evloop_unwatch(S->ev, c->fd);
	if (close(c->fd) < 0)
		log_warn("close a client's socket");
	for (p = &S->clients; *p != c; p = &(*p)->next)
		;
	*p = c->next;
	S->nclients--;
	free(c);
}

/* The message failed (its step logged why and undid it): Z, then close. */
static void
client_fail(struct client *c, int code)
{
	char line[16];

	c->state = C_IDLE;	/* nothing left to undo */
	snprintf(line, sizeof line, "Z%d\n", code);
	(void)answer(c, line);
	client_free(c);
}

/* A framing error: undo the open message, Z81, close. */
static void
client_protocol(struct client *c, const char *what)
{
	if (c->state == C_MESS || c->state == C_ENV)
		(void)qinject_fail(&c->in, QQ_BUG, 0, "uid %lu pid %ld: %s; nothing queued",
		    (unsigned long)c->who.uid, (long)c->who.pid, what);
	else
		log_warnx("uid %lu pid %ld: %s", (unsigned long)c->who.uid, (long)c->who.pid, what);
	client_fail(c, QQ_BUG);
}

static void
on_timeout(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct client *c = arg, **p;

	(void)ev; (void)t;
	c->timeout = NULL;
	for (p = &c->S->ready; *p; p = &(*p)->next_ready)
		if (*p == c) {
			*p = c->next_ready;	/* not in this group any more */
			break;
		}
	(void)qinject_fail(&c->in, QQ_TIMEOUT, 0, "uid %lu pid %ld: inject_timeout expired; "
	    "nothing queued", (unsigned long)c->who.uid, (long)c->who.pid);
	client_fail(c, QQ_TIMEOUT);
}

/* ---- the group commit ---- */

/* Step 1 for the group, all at once (lib/fsyncall.h): each message's two
 * files, and each folder mess/S once for all its messages.  A message
 * whose fsync failed is answered Z53 and dropped from the group. */
static void
sync_group(struct server *S)
{
	struct client **p, *c, *d;
	struct fsync_job *jobs;
	size_t n = 0, nj = 0, i;
	int dfd = S->o->q->dfd, err;

	for (c = S->ready; c; c = c->next_ready)
		n++;
	/* Two files per message, then one folder per message at most. */
	jobs = xcalloc(3 * n, sizeof *jobs);
	for (c = S->ready, i = 0; c; c = c->next_ready, i++) {
		jobs[2 * i].fd = c->in.messfd;
		jobs[2 * i + 1].fd = c->in.intdfd;
	}
	nj = 2 * n;
	for (c = S->ready; c; c = c->next_ready) {
		/* The folder's job is the one of the first message in it. */
		for (d = S->ready; d != c && strcmp(d->in.messdir, c->in.messdir) != 0;
		    d = d->next_ready)
			;
		if (d != c) {
			c->dirjob = d->dirjob;
			continue;
		}
		c->dirjob = nj;
		jobs[nj].fd = openat(dfd, c->in.messdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		jobs[nj].err = jobs[nj].fd < 0 ? errno : 0;
		nj++;
	}
	for (i = 0; i < 2 * n; i++)
		writeback_start(jobs[i].fd);	/* one journal commit for all (lib/io.h) */
	(void)fsync_all(jobs, nj);	/* a folder that did not open keeps its err */
	for (i = 2 * n; i < nj; i++)
		if (jobs[i].fd >= 0 && close(jobs[i].fd) < 0 && jobs[i].err == 0)
			jobs[i].err = errno;	/* a folder: nothing written through it */
	for (p = &S->ready, i = 0; (c = *p) != NULL; i++) {
		const char *what = c->in.messfn;

		err = jobs[2 * i].err;
		if (err == 0 && (err = jobs[2 * i + 1].err) != 0)
			what = c->in.intdfn;
		if (err == 0 && (err = jobs[c->dirjob].err) != 0)
			what = c->in.messdir;
		if (err) {
			*p = c->next_ready;
			client_fail(c, qinject_fail(&c->in, QQ_WRITE, err, "fsync %s", what));
			continue;
		}
		p = &c->next_ready;
	}
	free(jobs);
}

static void
commit(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct server *S = arg;
	struct client **p, *c, *group;
	char id[QUEUE_ID_MAX], line[QW_REPLY_MAX + 1];
	int todo_err = 0;

	(void)t;
	S->commit = NULL;
	sync_group(S);
	/* Step 2: each message's commit point. */
	for (p = &S->ready; (c = *p) != NULL;) {
		if (qinject_link(&c->in) != 0) {
			*p = c->next_ready;
			client_fail(c, QQ_TODO);
			continue;
		}
		p = &c->next_ready;
	}
	group = S->ready;
	S->ready = NULL;
	if (group == NULL)
		return;
	/* Step 3: every todo/ entry of the group durable at once. */
	if (fsync_dir(S->o->q->dfd, "todo") < 0)
		todo_err = errno;
	else
		qinject_trigger(S->o->q->dfd);
	/* Step 4. */
	while ((c = group) != NULL) {
		group = c->next_ready;
		c->next_ready = NULL;
		qinject_id(&c->in, id);
		if (todo_err) {
			/* S4 may or may not survive a crash; say so, do not undo. */
			log_line("warning", todo_err, "fsync folder todo after linking %s; the "
			    "message may be queued and may be delivered even though its "
			    "injection failed", c->in.todofn);
			c->state = C_IDLE;
			client_fail(c, QQ_WRITE);
			continue;
		}
		log_debug("msg %s: queued for uid %lu pid %ld", id, (unsigned long)c->who.uid,
		    (long)c->who.pid);
		qinject_close(&c->in);
		evloop_timer_cancel(ev, c->timeout);
		c->timeout = NULL;
		c->state = C_IDLE;
		snprintf(line, sizeof line, "K%s\n", id);
		if (answer(c, line) < 0) {
			client_free(c);
			continue;
		}
		/* Bytes it sent past the envelope are the next message. */
		evloop_watch(ev, c->fd, EV_READ, on_read, c);
		if (c->rlen > 0)
			on_read(ev, c->fd, 0, c);
	}
}

/* ---- reading a client ---- */

/* Use what is in c->rbuf.  0 go on reading; -1 the client was freed or
 * is READY (stop). */
static int
take(struct client *c)
{
	struct server *S = c->S;
	size_t off = 0, k, hl, used;
	int code;

	while (off < c->rlen) {
		if (c->left == 0) {
			char type;
			int r = qw_hdr_parse(c->rbuf + off, c->rlen - off, &type, &c->left, &hl);

			if (r == 0)
				break;
			if (r < 0) {
				client_protocol(c, "malformed record header");
				return -1;
			}
			if (type == 'M' && c->state == C_ENV) {
				client_protocol(c, "message bytes after the envelope began");
				return -1;
			}
			off += hl;
			c->rtype = type;
			if (c->state == C_IDLE) {
				code = qinject_begin(&c->in, S->o->q, &c->who, S->mypid, &S->seq,
				    "warning");
				if (code != 0) {
					client_fail(c, code);
					return -1;
				}
				c->timeout = evloop_timer_at(S->ev, clock_mono_ms() +
				    (uint64_t)S->o->timeout_s * 1000, on_timeout, c);
				c->state = C_MESS;
			}
			if (type == 'E')
				c->state = C_ENV;
			continue;
		}
		k = c->rlen - off < c->left ? c->rlen - off : c->left;
		if (c->rtype == 'M')
			code = qinject_write(&c->in, c->rbuf + off, k);
		else {
			code = qinject_env(&c->in, c->rbuf + off, k, &used);
			if (code == 0 && c->in.env_done && (used != k || c->left != k)) {
				client_protocol(c, "bytes after the envelope's end");
				return -1;
			}
		}
		if (code != 0) {
			client_fail(c, code);
			return -1;
		}
		off += k;
		c->left -= k;
		if (c->rtype == 'E' && c->in.env_done) {
			c->state = C_READY;
			memmove(c->rbuf, c->rbuf + off, c->rlen - off);
			c->rlen -= off;
			evloop_unwatch(S->ev, c->fd);
			c->next_ready = S->ready;
			S->ready = c;
			if (S->commit == NULL)
				S->commit = evloop_timer_at(S->ev, clock_mono_ms(), commit, S);
			return -1;
		}
	}
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
	return 0;
}

static void
on_read(struct evloop *ev, int fd, int events, void *arg)
{
	struct client *c = arg;
	ssize_t r;

	(void)ev; (void)events;
	if (take(c) < 0)
		return;
	r = read(fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		if (r < 0 && errno != ECONNRESET)
			log_warn("uid %lu pid %ld: read", (unsigned long)c->who.uid, (long)c->who.pid);
		{
			/* Its files go first, then the line that says so. */
			struct qinject_who who = c->who;
			int open = c->state != C_IDLE;

			client_free(c);
			if (open)
				log_info("uid %lu pid %ld: went away before its envelope's end: "
				    "nothing queued", (unsigned long)who.uid, (long)who.pid);
		}
		return;
	}
	c->rlen += (size_t)r;
	(void)take(c);
}

/* Every connection waiting is taken, and read at once: the messages of
 * clients that connected during a commit go into the next one together
 * (one accept per round made every group one message). */
static void
on_accept(struct evloop *ev, int lfd, int events, void *arg)
{
	struct server *S = arg;
	struct client *c;
	struct ucred cr;
	socklen_t len;
	int fd;

	(void)events;
	for (;;) {
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("accept");
			return;
		}
		len = sizeof cr;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
		    S->nclients >= S->o->max_clients) {
			if (S->nclients >= S->o->max_clients)
				log_warnx("%u clients already: one more refused", S->nclients);
			else
				log_warn("SO_PEERCRED");
			(void)close(fd);	/* nothing read, nothing to lose */
			continue;
		}
		c = xcalloc(1, sizeof *c);
		c->S = S;
		c->fd = fd;
		c->who.uid = cr.uid;
		c->who.pid = cr.pid;
		c->in.messfd = c->in.intdfd = -1;
		c->next = S->clients;
		S->clients = c;
		S->nclients++;
		evloop_watch(ev, fd, EV_READ, on_read, c);
		on_read(ev, fd, EV_READ, c);
	}
}

static void
on_stop(struct evloop *ev, int signo, void *arg)
{
	struct server *S = arg;

	log_info("signal %d: stopping; %u client(s) dropped", signo, S->nclients);
	/* The group waiting now is committed; open messages are cancelled
	 * (their clients hear the connection end: a temporary failure). */
	if (S->commit) {
		evloop_timer_cancel(ev, S->commit);
		commit(ev, NULL, S);
	}
	while (S->clients)
		client_free(S->clients);
	evloop_unwatch(ev, S->lfd);
	evloop_stop(ev);
}

static void
on_hup(struct evloop *ev, int signo, void *arg)
{
	(void)ev; (void)signo; (void)arg;
	log_info("SIGHUP: nothing to re-read (restart weir-queued to change its settings)");
}

int
queued_serve(int lfd, const struct queued_opts *o)
{
	struct server S;
	int rc = 0;

	memset(&S, 0, sizeof S);
	S.o = o;
	S.lfd = lfd;
	S.ev = evloop_new();
	S.mypid = getpid();
	S.seq = 1;
	evloop_watch(S.ev, lfd, EV_READ, on_accept, &S);
	evloop_signal(S.ev, SIGTERM, on_stop, &S);
	evloop_signal(S.ev, SIGINT, on_stop, &S);
	evloop_signal(S.ev, SIGHUP, on_hup, &S);
	if (evloop_run(S.ev) < 0) {
		log_warn("event loop");
		rc = 111;
	}
	evloop_free(S.ev);
	return rc;
}
