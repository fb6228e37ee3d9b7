/*
 * session.c: weir-remote -S, the kept session server for weir-send
 * (remote.h): one connection to the upstream, set up once (TLS, AUTH),
 * carrying message after message that weir-send hands over on fd 0, a
 * SOCK_SEQPACKET socket, in the datagrams of mail/sessproto.h.  For each
 * message: its reports and outcome line on the pipes that came with it,
 * then "ready" (or "closing").  End of file on fd 0 ends the session
 * (QUIT).  weir-send holds every grant: nothing here asks weir-gate.
 *
 * With -f FD, the session's flight file (sessproto.h): each message's
 * outcome goes there too, before its pipes, so that it outlives a
 * weir-send that dies meanwhile.  Left alone (weir-send's death signal,
 * SIGTERM, or another parent), the deliverer takes no new message and
 * finishes the one it holds within half its grant's grace from taking it
 * (remote/wait.h: nothing is sent, and no wait lasts, past that), makes
 * the outcome durable (fdatasync), QUITs and exits; the next weir-send
 * reads the outcome from the file.
 *
 * Trusts: weir-send's datagrams only through sp_parse_request().
 * Config keys: as remote.c (hostname, the upstream section).
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/log.h"
#include "mail/sessproto.h"
#include "remote/remote.h"
#include "remote/remoteint.h"
#include "remote/tls.h"
#include "remote/wait.h"

struct server {
	struct remote r;
	struct smtp_session *ss;	/* NULL: the session could not be set up */
	struct buf why;			/* then why */
	pid_t parent;			/* weir-send */
	int flight;			/* -f: the flight file; -1: none */
	struct buf tls;			/* the TLS session last handed back */
};

/* weir-send is gone: its death signal came, or we have another parent. */
static int
alone(const struct server *sv)
{
	return wait_orphaned() || getppid() != sv->parent;
}

/* Append a record to the flight file (sessproto.h); durable when weir-send
 * is gone, as no one else will be there to make the outcome so. */
static void
flight_add(struct server *sv, const struct buf *rec)
{
	struct stat st;

	if (sv->flight < 0)
		return;
	if (fstat(sv->flight, &st) < 0 || pwrite(sv->flight, rec->s, rec->len, st.st_size) !=
	    (ssize_t)rec->len)
		log_warn("session: writing the flight file (the outcome may be lost with weir-send)");
	else if (alone(sv) && fdatasync(sv->flight) < 0)
		log_warn("session: fdatasync of the flight file");
}

/* The request is taken: said in the flight file before any SMTP. */
static void
flight_taken(struct server *sv)
{
	struct buf rec = BUF_INIT;

	sp_fmt_flight_taken(&rec);
	flight_add(sv, &rec);
	buf_free(&rec);
}

/* One message of the session, delivered over sv->ss: the result in res
 * (whatever happened).  1: the session can take another message. */
static int
one_message(struct server *sv, const struct sp_request *rq, int mfd, struct smtp_result *res)
{
	struct body body;
	struct buf envsender = BUF_INIT, err = BUF_INIT;
	int more = 0;

	memset(&body, 0, sizeof body);
	if (sv->ss == NULL) {
		remote_whole_result(res, rq->nrcpt, "%s", sv->why.s);
	} else if (remote_open_message(&body, rq->qid, mfd, rq->nrcpt, res) < 0) {
		more = 1;	/* this message's trouble, not the session's */
	} else if (remote_rewrite_sender(sv->r.up, sv->r.cfg.hostname, rq->sender, &body,
	    &envsender, &err) < 0) {
		remote_whole_result(res, rq->nrcpt, "weir-remote: configuration: %s. (#4.3.0)\n",
		    err.s);
	} else {
		smtp_session_deliver(sv->ss, buf_cstr(&envsender), rq->rcpts, rq->nrcpt, &body, res);
		if (res->auth_ok)
			tokenok_done(&sv->r.tok, 1);
		more = smtp_session_open(sv->ss);
	}
	body_close(&body);
	buf_free(&envsender);
	buf_free(&err);
	return more;
}

/* res's reports and outcome line (for a message not even tried when
 * the session could not be set up: remote_not_sent's): into the flight
 * file, then on the pipes.  0, or -1 if they could not be written. */
static int
answer(struct server *sv, const struct smtp_result *res, const int fds[SP_NFD])
{
	struct buf rep = BUF_INIT, oc = BUF_INIT, rec = BUF_INIT;
	int rc = 0;

	remote_format(res, &rep);
	if (sv->ss == NULL)
		remote_not_sent(&sv->r, &oc);
	else
		remote_outcome(res, &oc);
	sp_fmt_flight_done(&rec, rep.s, rep.len, oc.s, oc.len);
	flight_add(sv, &rec);
	/* Written even when alone: a stray SIGTERM is no proof that no
	 * weir-send reads them (then their loss is no news: the file has
	 * them). */
	if (full_write(fds[SP_FD_OUTCOME], oc.s, oc.len) < 0 ||
	    full_write(fds[SP_FD_REPORT], rep.s, rep.len) < 0) {
		if (!alone(sv))
			log_warn("writing the reports or the outcome");
		rc = -1;
	}
	buf_free(&rep);
	buf_free(&oc);
	buf_free(&rec);
	return rc;
}

/* The word that a message's reports are complete: "ready" (with the
 * connection's TLS session for later sessions to resume, when it is
 * new: it holds no secret of the upstream account) or "closing".  1 if
 * the session goes on. */
static int
say_ready(struct server *sv, int more)
{
	struct buf w = BUF_INIT, der = BUF_INIT;
	int ok, fresh;

	fresh = more && smtp_session_tls(sv->ss, &der) == 0 &&
	    (der.len != sv->tls.len || memcmp(der.s, sv->tls.s, der.len) != 0);
	sp_fmt_word(&w, more ? SP_READY : SP_CLOSING, fresh ? der.s : NULL, der.len);
	if (fresh) {
		buf_reset(&sv->tls);
		buf_add(&sv->tls, der.s, der.len);
	}
	ok = send(STDIN_FILENO, w.s, w.len, MSG_NOSIGNAL) == (ssize_t)w.len;
	buf_free(&w);
	buf_free(&der);
	return more && ok;
}

static void
close_all(int *fds, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (fds[i] >= 0)
			(void)close(fds[i]);	/* read-only or a pipe end: nothing to lose */
}

/* A message request with its descriptors: taken, delivered, answered.
 * 1: the session goes on. */
static int
take(struct server *sv, const struct sp_request *rq, int fds[SP_NFD])
{
	struct smtp_result res;
	int more;

	/* Sends and waits end half the grace after this, once alone. */
	wait_orphan_until(clock_mono_ms() + (uint64_t)rq->grace * 500);
	flight_taken(sv);
	more = one_message(sv, rq, fds[SP_FD_MESSAGE], &res);
	if (alone(sv))
		log_info("session: msg %s finished with weir-send gone; its outcome is in the "
		    "flight file for the next one", rq->qid);
	if (answer(sv, &res, fds) < 0)
		more = 0;
	smtp_result_free(&res);
	return more;
}

int
remote_session(const char *cfile, const char *upname, const char *host, pid_t parent,
    int flight)
{
	struct server sv;
	struct buf req = BUF_INIT;
	struct sp_request rq;
	const char *perr;
	int fds[SP_NFD], trunc, more = 1;
	size_t nfd;
	ssize_t n;

	memset(&sv, 0, sizeof sv);
	sv.parent = parent;
	sv.flight = flight;
	if (wait_orphan_setup() < 0)
		fatal(111, "sigaction SIGTERM");
	if (remote_find_upstream(&sv.r, cfile, upname, host, "", &sv.why) == 0 &&
	    remote_get_ready(&sv.r, &sv.why) == 0)
		sv.ss = smtp_session_new(&sv.r.p);
	/* Left alone, finish the message in hand: SIGTERM, not SIGKILL. */
	if (config_untrusted_env())
		remote_die_with_parent(parent, SIGTERM);
	buf_reserve(&req, SESSION_REQUEST_MAX);
	while (more) {
		n = fd_recv(STDIN_FILENO, req.s, req.cap, fds, SP_NFD, &nfd, &trunc);
		if (n < 0) {
			log_warn("session: reading the next request");
			break;
		}
		if ((n == 0 && nfd == 0) || alone(&sv)) {
			close_all(fds, nfd);
			break;	/* weir-send closed its end, or is gone: nothing new */
		}
		if (trunc || sp_parse_request(req.s, (size_t)n, nfd, &rq, &perr) < 0) {
			struct smtp_result bad;

			if (trunc || nfd != SP_NFD) {
				log_warnx("session: %s; ending the session", trunc ?
				    "a request too big for its buffer" : perr);
				close_all(fds, nfd);
				break;
			}
			/* Its pipes are there: say so on them (nothing was sent). */
			remote_whole_result(&bad, 0, "weir-remote: a malformed request from "
			    "weir-send (%s). (#4.3.5)\n", perr);
			flight_taken(&sv);
			(void)answer(&sv, &bad, fds);
			smtp_result_free(&bad);
			close_all(fds, nfd);
			(void)say_ready(&sv, 0);
			break;
		}
		if (rq.kind == SP_TLS) {
			if (sv.r.p.tls == NULL || tls_client_resume(sv.r.p.tls, rq.der, rq.derlen) < 0)
				log_debug("session: the TLS session offered cannot be resumed");
			continue;
		}
		more = take(&sv, &rq, fds);
		sp_request_free(&rq);
		close_all(fds, SP_NFD);
		more = say_ready(&sv, more);
	}
	smtp_session_free(sv.ss);
	remote_free(&sv.r);
	buf_free(&req);
	buf_free(&sv.why);
	buf_free(&sv.tls);
	return 0;
}
