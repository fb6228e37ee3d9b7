/*
 * listener.c: see listener.h.  One process, one event loop (lib/evloop):
 * the listening sockets and SIGCHLD/SIGTERM/SIGINT.  The table of running
 * sessions (pid, client address) is what both limits count.  With every
 * slot taken, the listener stops accepting: new connections wait in the
 * kernel's queue until a session ends, as Postfix's master does at a
 * process limit.  Over max_per_client, a connection waits in its slot
 * up to PER_CLIENT_WAIT_MS for a session of its address to end, then
 * gets 421: a client that reconnects right after its QUIT is answered,
 * not refused for the session that is still exiting.
 */
#include <arpa/inet.h>
#include <errno.h>
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

/* A slot: free (pid 0), a session (pid > 0), or a connection waiting for
 * a session of its address to end (pid -1: fd and timer set). */
struct conn {
	pid_t pid;
	char addr[64];
	int fd;
	struct evtimer *wait;
	struct listener *L;
};

struct listener {
	const struct smtpd_conf *conf;
	const struct weir_listen *l;
	struct evloop *ev;
	int *fds;
	size_t nfds;
	struct conn *conns;	/* max_connections slots; pid 0: free */
	size_t nconns;
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

/* The sessions that have ended leave the table. */
static void
reap(struct listener *L)
{
	pid_t pid;
	size_t i;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (i = 0; i < L->l->max_connections; i++)
			if (L->conns[i].pid == pid) {
				L->conns[i].pid = 0;
				L->nconns--;
				break;
			}
		if (WIFSIGNALED(status))
			log_warnx("session %ld killed by signal %d", (long)pid, WTERMSIG(status));
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

/* The session of slot c, on fd (closed here). */
static void
serve(struct listener *L, struct conn *c, int fd)
{
	sigset_t none;
	size_t i;
	pid_t pid;
	int rc;

	pid = fork();
	if (pid < 0) {
		log_warn("fork");
		refuse(fd, L->conf, c->addr, "Cannot serve you now");
		close(fd);
		c->pid = 0;
		L->nconns--;
		return;
	}
	if (pid == 0) {
		for (i = 0; i < L->nfds; i++)
			close(L->fds[i]);
		signal(SIGCHLD, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		rc = smtpd_session(L->conf, fd, fd, c->addr);
		close(fd);
		_exit(rc);
	}
	close(fd);
	c->pid = pid;
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
	if (L->stopping && L->nconns == 0)
		evloop_stop(ev);
}

static void
on_stop(struct evloop *ev, int signo, void *arg)
{
	struct listener *L = arg;
	size_t i;

	log_info("signal %d: no more connections; %zu session(s) finishing", signo, L->nconns);
	L->stopping = 1;
	for (i = 0; i < L->nfds; i++) {
		evloop_unwatch(ev, L->fds[i]);
		close(L->fds[i]);
	}
	L->nfds = 0;
	if (L->nconns == 0)
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
	evloop_free(L.ev);
	free(L.fds);
	free(L.conns);
	return rc;
}
