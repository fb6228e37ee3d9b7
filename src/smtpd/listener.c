/*
 * listener.c: see listener.h.  One process, one event loop (lib/evloop):
 * the listening sockets and SIGCHLD/SIGTERM/SIGINT.  The table of running
 * sessions (pid, client address) is what both limits count.
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

struct conn {
	pid_t pid;
	char addr[64];
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

static void
on_accept(struct evloop *ev, int lfd, int events, void *arg)
{
	struct listener *L = arg;
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	char addr[64];
	size_t i, same = 0, slot = L->l->max_connections;
	sigset_t none;
	pid_t pid;
	int fd, rc;

	(void)ev; (void)events;
	fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warn("accept");
		return;
	}
	peer_text(&ss, addr, sizeof addr);
	for (i = 0; i < L->l->max_connections; i++) {
		if (L->conns[i].pid == 0) {
			if (slot == L->l->max_connections)
				slot = i;
		} else if (strcmp(L->conns[i].addr, addr) == 0)
			same++;
	}
	if (slot == L->l->max_connections) {
		refuse(fd, L->conf, addr, "Too many connections");
		close(fd);
		return;
	}
	if (same >= L->l->max_per_client) {
		refuse(fd, L->conf, addr, "Too many connections from your address");
		close(fd);
		return;
	}
	pid = fork();
	if (pid < 0) {
		log_warn("fork");
		refuse(fd, L->conf, addr, "Cannot serve you now");
		close(fd);
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
		rc = smtpd_session(L->conf, fd, fd, addr);
		close(fd);
		_exit(rc);
	}
	close(fd);
	L->conns[slot].pid = pid;
	snprintf(L->conns[slot].addr, sizeof L->conns[slot].addr, "%s", addr);
	L->nconns++;
}

static void
on_child(struct evloop *ev, int signo, void *arg)
{
	struct listener *L = arg;
	pid_t pid;
	size_t i;
	int status;

	(void)signo;
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
