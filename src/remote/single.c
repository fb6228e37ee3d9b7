/*
 * single.c: weir-remote's one-message run (remote.h's first form),
 * qmail-remote's way: the message on fd 0, a report per recipient and
 * one for the message on fd 1, and with -n -r FD the outcome line on FD
 * (weir-send's deliverers of their own).  Unless -n says the caller holds
 * the grant, it is asked of weir-gate before connecting and the outcome
 * reported after: the gate is spoken to only through mail/gateclient.h,
 * in gate_acquire() and gate_report() below.
 *
 * Trusts: the caller's arguments; the gate's replies through
 * gateclient's parser.  Config keys: gate_socket, and remote.c's.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "lib/io.h"
#include "lib/log.h"
#include "mail/config.h"
#include "mail/gateclient.h"
#include "mail/outcome.h"
#include "remote/body.h"
#include "remote/remoteint.h"
#include "remote/secret.h"
#include "remote/smtp.h"

struct gate {
	struct gate_client gc;
	int on;			/* connected and granted */
	uint32_t tag;
	unsigned max_rcpt;
};

/* 1: go ahead (granted, or no gate here); 0: do not send, reason in why. */
static int
gate_acquire(struct gate *g, const char *path, const struct weir_upstream *up,
    const char *sender, size_t nrcpt, struct buf *why)
{
	struct gp_reply r;
	const char *perr = NULL;
	int k;

	memset(g, 0, sizeof *g);
	g->gc.fd = -1;
	if (up->name == NULL) {
		log_debug("no upstream section: not asking weir-gate");
		return 1;
	}
	if (gc_connect(&g->gc, path) < 0) {
		if (errno == ENOENT) {
			log_warnx("no weir-gate at %s: sending without a grant", path);
			return 1;
		}
		buf_printf(why, "weir-gate at %s: %s", path, strerror(errno));
		return 0;
	}
	g->tag = 1;
	if (gc_acquire(&g->gc, g->tag, up->name, NULL,
	    gp_valid_word(sender, GP_SENDER_MAX) ? sender : NULL, 1,
	    nrcpt > GP_WEIGHT_MAX ? GP_WEIGHT_MAX : (uint32_t)nrcpt, 1) < 0) {
		buf_printf(why, "weir-gate: sending the request: %s", strerror(errno));
		goto fail;
	}
	log_debug("waiting for a grant from weir-gate for upstream %s", up->name);
	k = gc_wait_reply(&g->gc, &r, &perr);
	if (k <= 0) {
		buf_printf(why, "weir-gate: %s", k == 0 ? "closed the connection" :
		    perr ? perr : strerror(errno));
		goto fail;
	}
	if (r.verb == GP_R_ERR) {
		buf_printf(why, "weir-gate refused: %s %s", gp_code_name(r.code), r.text);
		goto fail;
	}
	if (r.verb != GP_R_GRANT || r.tag != g->tag) {
		buf_printf(why, "weir-gate: unexpected reply");
		goto fail;
	}
	g->on = 1;
	g->max_rcpt = r.max_rcpt;
	log_debug("weir-gate granted send %llu (recipients per transaction: %u)",
	    (unsigned long long)r.id, r.max_rcpt);
	return 1;
fail:
	gc_close(&g->gc);
	return 0;
}

/* The outcome line b on fd. */
static void
line_write(int fd, const struct buf *b)
{
	if (full_write(fd, b->s, b->len) < 0)
		log_warn("writing the outcome to fd %d", fd);
}

static void
outcome_write(int fd, const struct smtp_result *res)
{
	struct buf b = BUF_INIT;

	remote_outcome(res, &b);
	line_write(fd, &b);
	buf_free(&b);
}

/* Tell the gate how it went: throttled, nothing sent, or how many. */
static void
gate_report(struct gate *g, const struct smtp_result *res)
{
	struct gp_reply r;
	const char *perr = NULL;
	char text[GP_TEXT_MAX + 1];
	int k;

	log_debug("outcome: %zu of %zu recipient(s) accepted, %zu not attempted%s%s%s%s",
	    res->delivered, res->nrcpt, res->undone,
	    res->relay_failure ? ", relay-level failure" : "",
	    res->dot_unanswered ? ", no answer to the final dot" : "",
	    res->suspend ? ", throttled: " : res->authfail ? ", refused us: " : "",
	    res->suspend || res->authfail ? res->throttle.s : "");
	if (!g->on)
		return;
	remote_outcome_text(res, remote_outcome_kind(res), text, sizeof text);
	k = gc_report(&g->gc, g->tag, outcome_gate(remote_outcome_kind(res)), (uint32_t)res->delivered,
	    res->accepted_at, text);
	if (k < 0)
		log_warn("weir-gate: reporting (the gate counts the send as made)");
	else if ((k = gc_wait_reply(&g->gc, &r, &perr)) <= 0)
		log_warnx("weir-gate: no answer to the report: %s", k == 0 ? "closed" :
		    perr ? perr : "error");
	else if (r.verb == GP_R_SUSPENDED)
		log_warnx("weir-gate suspended the upstream for %llu s",
		    (unsigned long long)r.secs);
	else if (r.verb == GP_R_ERR)
		log_warnx("weir-gate: report refused: %s %s", gp_code_name(r.code), r.text);
	gc_close(&g->gc);
	g->on = 0;
}

/* One message from the caller (fd 0), as qmail-remote takes it. */
int
remote_single(const char *cfile, const char *upname, const char *qid, int use_gate, int outfd,
    pid_t parent, const char *host, const char *sender, const char *const *rcpts, size_t nrcpt)
{
	struct remote r;
	struct buf why = BUF_INIT, envsender = BUF_INIT;
	struct body body;
	struct smtp_result res;
	struct gate gate;
	int rc;

	memset(&r, 0, sizeof r);
	memset(&body, 0, sizeof body);	/* body_close() is safe on it */
	memset(&gate, 0, sizeof gate);
	gate.gc.fd = -1;
	if (remote_find_upstream(&r, cfile, upname, host, sender, &why) < 0) {
		rc = remote_whole(STDOUT_FILENO, nrcpt, "%s", why.s);
		goto out;
	}
	if (remote_open_message(&body, qid, STDIN_FILENO, nrcpt, &res) < 0) {
		rc = remote_emit(STDOUT_FILENO, &res);
		smtp_result_free(&res);
		goto out;
	}
	if (remote_rewrite_sender(r.up, r.cfg.hostname, sender, &body, &envsender, &why) < 0) {
		rc = remote_whole(STDOUT_FILENO, nrcpt, "weir-remote: configuration: %s. (#4.3.0)\n",
		    why.s);
		goto out;
	}
	if (remote_get_ready(&r, &why) < 0) {
		rc = remote_whole(STDOUT_FILENO, nrcpt, "%s", why.s);
		if (outfd >= 0) {
			struct buf b = BUF_INIT;

			remote_not_sent(&r, &b);
			line_write(outfd, &b);
			buf_free(&b);
		}
		goto out;
	}
	if (!use_gate && config_untrusted_env())
		remote_die_with_parent(parent, SIGKILL);
	if (use_gate && !gate_acquire(&gate, r.cfg.gate_socket, r.up, sender, nrcpt, &why)) {
		rc = remote_whole(STDOUT_FILENO, nrcpt, "weir-remote: %s; not sending. (#4.3.0)\n",
		    why.s);
		goto out;
	}
	r.p.max_rcpt = gate.max_rcpt;
	smtp_deliver(&r.p, buf_cstr(&envsender), rcpts, nrcpt, &body, &res);
	tokenok_done(&r.tok, res.auth_ok);
	secret_wipe(&r.secret);
	gate_report(&gate, &res);
	if (outfd >= 0)
		outcome_write(outfd, &res);
	rc = remote_emit(STDOUT_FILENO, &res);
	smtp_result_free(&res);
out:
	if (gate.gc.fd >= 0)
		gc_close(&gate.gc);
	body_close(&body);
	remote_free(&r);
	buf_free(&why);
	buf_free(&envsender);
	return rc;
}
