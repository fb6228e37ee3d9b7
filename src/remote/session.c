/*
 * session.c: weir-remote -S, the kept session server for weir-send
 * (remote.h): one connection to the upstream, set up once (TLS, AUTH),
 * carrying message after message that weir-send hands over on fd 0, a
 * SOCK_SEQPACKET socket, in the datagrams of mail/sessproto.h.  For each
 * message: its reports and outcome line on the pipes that came with it,
 * then "ready" (or "closing").  End of file on fd 0 ends the session
 * (QUIT).  weir-send holds every grant: nothing here asks weir-gate.
 *
 * Trusts: weir-send's datagrams only through sp_parse_request().
 * Config keys: as remote.c (hostname, the upstream section).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/io.h"
#include "lib/log.h"
#include "mail/sessproto.h"
#include "remote/remoteint.h"
#include "remote/tls.h"

/* The outcome of a message that never reached the upstream. */
static void
refund(int fd)
{
	struct smtp_result none;

	memset(&none, 0, sizeof none);
	remote_outcome_write(fd, &none);
}

/* One message of the session: delivered over ss (NULL: the session
 * could not be set up, why says so), its reports and outcome written.
 * 1: the session can take another message. */
static int
one_message(const struct remote *r, struct smtp_session *ss, const struct sp_request *rq,
    const int fds[SP_NFD], const struct buf *why)
{
	struct smtp_result res;
	struct body body;
	struct buf envsender = BUF_INIT, err = BUF_INIT;
	int rc = 0, more = 0;

	memset(&body, 0, sizeof body);
	if (ss == NULL) {
		(void)remote_whole(fds[SP_FD_REPORT], rq->nrcpt, "%s", why->s);
		refund(fds[SP_FD_OUTCOME]);
	} else if (remote_open_message(&body, rq->qid, fds[SP_FD_MESSAGE], rq->nrcpt,
	    fds[SP_FD_REPORT], &rc) < 0) {
		refund(fds[SP_FD_OUTCOME]);
		more = rc == 0;
	} else if (remote_rewrite_sender(r->up, r->cfg.hostname, rq->sender, &body, &envsender,
	    &err) < 0) {
		(void)remote_whole(fds[SP_FD_REPORT], rq->nrcpt,
		    "weir-remote: configuration: %s. (#4.3.0)\n", err.s);
		refund(fds[SP_FD_OUTCOME]);
	} else {
		smtp_session_deliver(ss, buf_cstr(&envsender), rq->rcpts, rq->nrcpt, &body, &res);
		remote_outcome_write(fds[SP_FD_OUTCOME], &res);
		more = remote_emit(fds[SP_FD_REPORT], &res) == 0 && smtp_session_open(ss);
		smtp_result_free(&res);
	}
	body_close(&body);
	buf_free(&envsender);
	buf_free(&err);
	return more;
}

/* The word that a message's reports are complete: "ready" (with the
 * connection's TLS session for later sessions to resume, when it is
 * new: it holds no secret of the upstream account) or "closing".  1 if
 * the session goes on. */
static int
say_ready(struct smtp_session *ss, int more, struct buf *sent)
{
	struct buf w = BUF_INIT, der = BUF_INIT;
	int ok, fresh;

	fresh = more && smtp_session_tls(ss, &der) == 0 &&
	    (der.len != sent->len || memcmp(der.s, sent->s, der.len) != 0);
	sp_fmt_word(&w, more ? SP_READY : SP_CLOSING, fresh ? der.s : NULL, der.len);
	if (fresh) {
		buf_reset(sent);
		buf_add(sent, der.s, der.len);
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

int
remote_session(const char *cfile, const char *upname, const char *host, pid_t parent)
{
	struct remote r;
	struct buf why = BUF_INIT, req = BUF_INIT, tls = BUF_INIT;
	struct smtp_session *ss = NULL;
	struct sp_request rq;
	const char *perr;
	int fds[SP_NFD], trunc, more = 1;
	size_t nfd;
	ssize_t n;

	memset(&r, 0, sizeof r);
	if (remote_find_upstream(&r, cfile, upname, host, "", &why) == 0 &&
	    remote_get_ready(&r, &why) == 0)
		ss = smtp_session_new(&r.p);
	if (config_untrusted_env())
		remote_die_with_parent(parent);
	buf_reserve(&req, SESSION_REQUEST_MAX);
	while (more) {
		n = fd_recv(STDIN_FILENO, req.s, req.cap, fds, SP_NFD, &nfd, &trunc);
		if (n < 0) {
			log_warn("session: reading the next request");
			break;
		}
		if (n == 0 && nfd == 0)
			break;	/* weir-send closed its end */
		if (trunc || sp_parse_request(req.s, (size_t)n, nfd, &rq, &perr) < 0) {
			if (trunc || nfd != SP_NFD) {
				log_warnx("session: %s; ending the session", trunc ?
				    "a request too big for its buffer" : perr);
				close_all(fds, nfd);
				break;
			}
			/* Its pipes are there: say so on them. */
			(void)remote_whole(fds[SP_FD_REPORT], 0, "weir-remote: a malformed request "
			    "from weir-send (%s). (#4.3.5)\n", perr);
			refund(fds[SP_FD_OUTCOME]);
			close_all(fds, nfd);
			(void)say_ready(ss, 0, &tls);
			break;
		}
		if (rq.kind == SP_TLS) {
			if (r.p.tls == NULL || tls_client_resume(r.p.tls, rq.der, rq.derlen) < 0)
				log_debug("session: the TLS session offered cannot be resumed");
			continue;
		}
		more = one_message(&r, ss, &rq, fds, &why);
		sp_request_free(&rq);
		close_all(fds, SP_NFD);
		more = say_ready(ss, more, &tls);
	}
	smtp_session_free(ss);
	remote_free(&r);
	buf_free(&req);
	buf_free(&why);
	buf_free(&tls);
	return 0;
}
