/*
 * listener.c: see listener.h.  One process, one event loop (lib/evloop):
 * the listening sockets, the session processes' control sockets and
 * SIGCHLD/SIGTERM/SIGINT.  The table of running sessions (the process
 * serving it, the client address) is what both limits count.  With every
 * slot taken, the listener stops accepting: new connections wait in the
 * kernel's queue until a session ends, as Postfix's master does at a
 * process limit.  Over max_per_client, a connection waits in its slot
 * up to PER_CLIENT_WAIT_MS for a session of its address to end, then
 * gets 421: a client that reconnects right after its QUIT is answered,
 * not refused for the session that is still ending.
 *
 * Session processes (workers) are forked on demand and serve one
 * connection at a time, one after another, as Postfix's smtpd under its
 * master: the listener hands a worker the accepted socket and the
 * client's address over a SOCK_SEQPACKET pair (SCM_RIGHTS); the worker
 * runs smtpd_session() on it, closes it and answers one byte; it is
 * then idle.  A connection goes to an idle worker, else to a new one, so
 * there are never more workers than max_connections.  A worker that
 * has served MAX_USE connections, or was idle MAX_IDLE_MS, or any idle
 * worker once the listener stops, has its control socket closed and
 * exits.  Nothing of one session survives into the next but the heap's
 * freed memory (secrets are wiped: session.c) and what lives for the
 * process anyway (the configuration, the TLS context).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/netaddr.h"
#include "smtpd/listener.h"

/* How long a connection over max_per_client waits for a session of its
 * address to end before its 421. */
#define PER_CLIENT_WAIT_MS 1000
/* Connections one worker serves before it exits (Postfix's max_use). */
#define MAX_USE 100
/* An idle worker exits after this long without a connection. */
#define MAX_IDLE_MS 60000

struct worker;

/* A slot: free (pid 0), a session (pid > 0: its worker's, w set), or a
 * connection waiting for a session of its address to end (pid -1: fd
 * and timer set). */
struct conn {
	pid_t pid;
	struct worker *w;
	char addr[64];
	int fd;
	struct evtimer *wait;
	struct listener *L;
};

/* A session process: busy (c set) or idle (idle timer set). */
struct worker {
	pid_t pid;
	int ctl;		/* our end of its control pair; -1: closed */
	struct conn *c;
	unsigned uses;
	struct evtimer *idle;
	struct listener *L;
	struct worker *next;
};

struct listener {
	const struct smtpd_conf *conf;
	const struct weir_listen *l;
	struct evloop *ev;
	int *fds;
	size_t nfds;
	struct conn *conns;	/* max_connections slots; pid 0: free */
	size_t nconns;
	struct worker *workers;
	size_t nworkers;
	int stopping;
	int paused;		/* every slot taken: not accepting */
};

static void
peer_text(const struct sockaddr_storage *ss, char *out, size_t n)
{
	snprintf(out, n, "unknown");
	if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out, (socklen_t)n);
	else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;

		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
			inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], out, (socklen_t)n);
		else
			inet_ntop(AF_INET6, &a->sin6_addr, out, (socklen_t)n);
	}
}

/* Refuse a connection over a limit without a process for it. */
static void
refuse(int fd, const struct smtpd_conf *conf, const char *addr, const char *what)
{
	char line[300];
	int n;

	n = snprintf(line, sizeof line, "421 4.7.0 %s %s, try again later\r\n",
	    conf->hostname, what);
	log_warnx("%s: %s: refused", addr, what);
	/* Best effort on a non-blocking socket: the reply fits in any
	 * socket buffer; if it does not go, the close says enough. */
	if (n > 0 && write(fd, line, (size_t)n) < 0)
		log_warn("%s: write", addr);
}

/* A worker's session is over: its slot is free. */
static void
session_ended(struct worker *w)
{
	struct listener *L = w->L;

	if (w->c == NULL)
		return;
	w->c->pid = 0;
	w->c->w = NULL;
	w->c = NULL;
	L->nconns--;
}

/* The worker takes no more connections: closing its control socket
 * makes it exit once its session (if any) is over. */
static void
retire(struct worker *w)
{
	if (w->ctl < 0)
		return;
	evloop_unwatch(w->L->ev, w->ctl);
	(void)close(w->ctl);	/* a socket we only signal through */
	w->ctl = -1;
	evloop_timer_cancel(w->L->ev, w->idle);
	w->idle = NULL;
}

static void
on_idle_over(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct worker *w = arg;

	(void)ev; (void)t;
	w->idle = NULL;
	retire(w);
}

/* The end of a session the worker reported: it is idle, or retired. */
static void
worker_done(struct worker *w)
{
	struct listener *L = w->L;

	session_ended(w);
	if (L->stopping || w->uses >= MAX_USE)
		retire(w);
	else if (w->idle == NULL)
		w->idle = evloop_timer_at(L->ev, clock_mono_ms() + MAX_IDLE_MS, on_idle_over, w);
}

/* Read what a worker said: one byte per session ended; end of file or
 * an error: it is gone (reap() frees it). */
static void
worker_read(struct worker *w)
{
	char b[16];
	ssize_t r, i;

	while (w->ctl >= 0) {
		r = recv(w->ctl, b, sizeof b, MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			retire(w);
			return;
		}
		for (i = 0; i < r; i++)
			worker_done(w);
	}
}

/* The sessions that have ended leave the table: the workers that said
 * so, and the ones that exited (a worker killed mid-session frees its
 * slot here). */
static void
reap(struct listener *L)
{
	struct worker **p, *w;
	pid_t pid;
	int status;

	for (w = L->workers; w; w = w->next)
		if (w->c)
			worker_read(w);
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (p = &L->workers; (w = *p) != NULL && w->pid != pid; p = &w->next)
			;
		if (w == NULL)
			continue;
		if (WIFSIGNALED(status))
			log_warnx("session process %ld killed by signal %d%s", (long)pid,
			    WTERMSIG(status), w->c ? " during a session" : "");
		session_ended(w);
		retire(w);
		*p = w->next;
		L->nworkers--;
		free(w);
	}
}

/* Sessions from addr (not the connections waiting). */
static size_t
count_from(const struct listener *L, const char *addr)
{
	size_t i, n = 0;

	for (i = 0; i < L->l->max_connections; i++)
		n += L->conns[i].pid > 0 && strcmp(L->conns[i].addr, addr) == 0;
	return n;
}

static void on_accept(struct evloop *ev, int lfd, int events, void *arg);
static void on_ctl(struct evloop *ev, int fd, int events, void *arg);

/* Every slot is taken: new connections wait in the kernel's queue (the
 * listen backlog) until a session ends (on_child). */
static void
pause_accepting(struct listener *L)
{
	size_t i;

	if (L->paused)
		return;
	L->paused = 1;
	for (i = 0; i < L->nfds; i++)
		evloop_unwatch(L->ev, L->fds[i]);
	log_warnx("max_connections (%u) sessions running: new connections wait for one to end",
	    L->l->max_connections);
}

/* A worker's life: sessions handed over ctl, one after another, until
 * the listener closes ctl. */
static void
worker_main(struct listener *L, int ctl)
{
	char addr[sizeof L->conns[0].addr];
	size_t nfd;
	ssize_t n;
	int fd, trunc;

	for (;;) {
		n = fd_recv(ctl, addr, sizeof addr - 1, &fd, 1, &nfd, &trunc);
		if (n <= 0 || nfd != 1 || trunc) {
			if (nfd == 1)
				(void)close(fd);
			if (n < 0)
				log_warn("session process: reading the listener's socket");
			else if (n > 0)
				log_warnx("session process: a malformed hand-over from the listener");
			_exit(n == 0 ? 0 : 1);
		}
		addr[n] = '\0';
		(void)smtpd_session(L->conf, fd, fd, addr);
		(void)close(fd);	/* everything said was flushed */
		if (fd_send(ctl, "d", 1, NULL, 0) < 0)
			_exit(1);	/* the listener is gone */
	}
}

/* A new worker, or NULL (logged).  conn: the connection about to be
 * handed to it, which it gets over its control socket, not by fork: a
 * copy inherited would keep the connection open after the session
 * closed it (the client would see no end of file until the worker
 * exits). */
static struct worker *
spawn(struct listener *L, int conn)
{
	struct worker *w;
	sigset_t none;
	size_t i;
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_warn("socketpair");
		return NULL;
	}
	pid = fork();
	if (pid < 0) {
		log_warn("fork");
		(void)close(sv[0]);
		(void)close(sv[1]);
		return NULL;
	}
	if (pid == 0) {
		/* Nothing of the listener's but the configuration: its
		 * sockets, the other workers' control sockets and the
		 * waiting connections would stay open through ours. */
		for (i = 0; i < L->nfds; i++)
			close(L->fds[i]);
		for (w = L->workers; w; w = w->next)
			if (w->ctl >= 0)
				close(w->ctl);
		for (i = 0; i < L->l->max_connections; i++)
			if (L->conns[i].pid == -1)
				close(L->conns[i].fd);
		close(conn);
		close(sv[0]);
		signal(SIGCHLD, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		worker_main(L, sv[1]);
		_exit(0);
	}
	(void)close(sv[1]);
	w = xcalloc(1, sizeof *w);
	w->pid = pid;
	w->ctl = sv[0];
	w->L = L;
	w->next = L->workers;
	L->workers = w;
	L->nworkers++;
	if (fd_nonblock(w->ctl, 1) < 0)
		log_warn("fd_nonblock");	/* reads pass MSG_DONTWAIT anyway */
	evloop_watch(L->ev, w->ctl, EV_READ, on_ctl, w);
	return w;
}

/* The session of slot c, on fd (closed here): an idle worker's, else a
 * new one's. */
static void
serve(struct listener *L, struct conn *c, int fd)
{
	struct worker *w;

	for (;;) {
		for (w = L->workers; w && (w->c || w->ctl < 0); w = w->next)
			;
		if (w == NULL && (w = spawn(L, fd)) == NULL) {
			refuse(fd, L->conf, c->addr, "Cannot serve you now");
			close(fd);
			c->pid = 0;
			L->nconns--;
			return;
		}
		if (fd_send(w->ctl, c->addr, strlen(c->addr), &fd, 1) == 0)
			break;
		/* It died idle (reap() will free it): the next one. */
		log_warn("handing a connection to session process %ld", (long)w->pid);
		retire(w);
	}
	close(fd);
	evloop_timer_cancel(L->ev, w->idle);
	w->idle = NULL;
	w->uses++;
	w->c = c;
	c->w = w;
	c->pid = w->pid;
}

/* A connection over max_per_client waited long enough: 421. */
static void
on_wait_over(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct conn *c = arg;

	(void)ev; (void)t;
	c->wait = NULL;
	refuse(c->fd, c->L->conf, c->addr, "Too many connections from your address");
	close(c->fd);
	c->pid = 0;
	c->L->nconns--;
}

static void
on_accept(struct evloop *ev, int lfd, int events, void *arg)
{
	struct listener *L = arg;
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	struct conn *c = NULL;
	size_t i;
	int fd;

	(void)events;
	if (L->nconns >= L->l->max_connections) {
		reap(L);
		if (L->nconns >= L->l->max_connections) {
			pause_accepting(L);
			return;
		}
	}
	fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warn("accept");
		return;
	}
	for (i = 0; i < L->l->max_connections && c == NULL; i++)
		if (L->conns[i].pid == 0)
			c = &L->conns[i];
	peer_text(&ss, c->addr, sizeof c->addr);
	L->nconns++;
	if (count_from(L, c->addr) >= L->l->max_per_client)
		reap(L);
	if (count_from(L, c->addr) < L->l->max_per_client) {
		serve(L, c, fd);
		return;
	}
	c->pid = -1;
	c->fd = fd;
	c->L = L;
	c->wait = evloop_timer_at(ev, clock_mono_ms() + PER_CLIENT_WAIT_MS, on_wait_over, c);
}

static void
on_child(struct evloop *ev, int signo, void *arg)
{
	struct listener *L = arg;
	size_t i;

	(void)signo;
	reap(L);
	for (i = 0; i < L->l->max_connections; i++) {
		struct conn *c = &L->conns[i];

		if (c->pid == -1 && count_from(L, c->addr) < L->l->max_per_client) {
			evloop_timer_cancel(ev, c->wait);
			c->wait = NULL;
			serve(L, c, c->fd);
		}
	}
	if (L->paused && L->nconns < L->l->max_connections && !L->stopping) {
		L->paused = 0;
		for (i = 0; i < L->nfds; i++)
			evloop_watch(ev, L->fds[i], EV_READ, on_accept, L);
		log_info("a session ended: accepting connections again");
	}
	if (L->stopping && L->nconns == 0 && L->nworkers == 0)
		evloop_stop(ev);
}

/* A worker said its session ended (or its socket ended): as a child's
 * end. */
static void
on_ctl(struct evloop *ev, int fd, int events, void *arg)
{
	struct worker *w = arg;

	(void)fd; (void)events;
	worker_read(w);
	on_child(ev, 0, w->L);
}

static void
on_stop(struct evloop *ev, int signo, void *arg)
{
	struct listener *L = arg;
	struct worker *w;
	size_t i;

	log_info("signal %d: no more connections; %zu session(s) finishing", signo, L->nconns);
	L->stopping = 1;
	for (i = 0; i < L->nfds; i++) {
		evloop_unwatch(ev, L->fds[i]);
		close(L->fds[i]);
	}
	L->nfds = 0;
	for (w = L->workers; w; w = w->next)
		if (w->c == NULL)
			retire(w);
	if (L->nconns == 0 && L->nworkers == 0)
		evloop_stop(ev);
}

static void
on_hup(struct evloop *ev, int signo, void *arg)
{
	(void)ev; (void)signo; (void)arg;
	log_info("SIGHUP: the listen section is read at start; restart weir-smtpd to change it");
}

static int
bind_one(struct listener *L, const char *spec)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct buf why = BUF_INIT;
	int fd, on = 1;
	char port[16];

	if (hostport_parse(spec, &ss, &len, &why) < 0) {
		log_warnx("listen.address: %s", why.s);
		buf_free(&why);
		return -2;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		log_warn("socket for %s", spec);
		return -1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0 ||
	    (ss.ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) < 0)) {
		log_warn("setsockopt for %s", spec);
		close(fd);
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
		log_warn("cannot listen on %s", spec);
		close(fd);
		return -1;
	}
	len = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		log_warn("getsockname for %s", spec);
		close(fd);
		return -1;
	}
	snprintf(port, sizeof port, "%u", ntohs(ss.ss_family == AF_INET ?
	    ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port));
	log_info("listening on %s port %s", spec, port);
	L->fds[L->nfds++] = fd;
	evloop_watch(L->ev, fd, EV_READ, on_accept, L);
	return 0;
}

int
smtpd_listen(const struct smtpd_conf *conf, const struct weir_listen *l,
    void (*after_bind)(void *), void *arg)
{
	struct listener L;
	struct worker *w;
	size_t i;
	int r, rc = 0;

	memset(&L, 0, sizeof L);
	L.conf = conf;
	L.l = l;
	L.ev = evloop_new();
	L.fds = xcalloc(l->address.n + 1, sizeof *L.fds);
	L.conns = xcalloc(l->max_connections, sizeof *L.conns);
	for (i = 0; i < l->address.n; i++)
		if ((r = bind_one(&L, l->address.v[i])) < 0) {
			rc = r == -2 ? 2 : 111;
			goto out;
		}
	if (after_bind)
		after_bind(arg);
	evloop_signal(L.ev, SIGCHLD, on_child, &L);
	evloop_signal(L.ev, SIGTERM, on_stop, &L);
	evloop_signal(L.ev, SIGINT, on_stop, &L);
	evloop_signal(L.ev, SIGHUP, on_hup, &L);
	if (evloop_run(L.ev) < 0) {
		log_warn("event loop");
		rc = 111;
	}
out:
	for (i = 0; i < L.nfds; i++)
		close(L.fds[i]);
	while ((w = L.workers) != NULL) {
		L.workers = w->next;
		retire(w);
		free(w);
	}
	evloop_free(L.ev);
	free(L.fds);
	free(L.conns);
	return rc;
}
