/*
 * remote.c: weir-remote's logic between main() and the state machine:
 * arguments, the upstream, the message, the secret, the reports; see
 * remote.h for the interface.
 *
 * The gate (see remote.h) is spoken to only through mail/gateclient.h,
 * in gate_acquire() and gate_report() below.
 *
 * Trusts: the caller's arguments, weir.conf.  Config keys: hostname,
 * gate_socket, upstream sections.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/privdrop.h"
#include "mail/config.h"
#include "mail/gateclient.h"
#include "mail/trouble.h"
#include "remote/body.h"
#include "remote/remote.h"
#include "remote/secret.h"
#include "remote/smtp.h"
#include "remote/tls.h"

#define MESSAGE_MAX (1024UL * 1024 * 1024)	/* 1 GiB: beyond it, "Z" */

static void
add_text(struct buf *out, const char *t)
{
	for (; t && *t; t++)
		buf_addc(out, *t);	/* a C string: no NUL inside by construction */
}

void
remote_format(const struct smtp_result *res, struct buf *out)
{
	size_t i;

	for (i = 0; i < res->nrcpt; i++) {
		buf_addc(out, res->rcpt[i].kind);
		add_text(out, res->rcpt[i].text.s);
		buf_addc(out, '\0');
	}
	buf_addc(out, res->kind);
	add_text(out, res->text.s);
	buf_addc(out, '\0');
}

static int
emit(const struct smtp_result *res)
{
	struct buf out = BUF_INIT;
	int r;

	remote_format(res, &out);
	r = full_write(STDOUT_FILENO, out.s, out.len);
	if (r < 0)
		log_warn("writing the reports");
	buf_free(&out);
	return r < 0 ? 111 : 0;
}

/* A message-level report with no recipient reports: qmail-remote's way
 * of saying every recipient shares the fate. */
static int PRINTFLIKE(2, 3)
whole(size_t nrcpt, const char *fmt, ...)
{
	struct smtp_result res;
	va_list ap;
	char text[1024];
	size_t i;
	int r;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	memset(&res, 0, sizeof res);
	res.nrcpt = nrcpt;
	res.rcpt = xcalloc(nrcpt ? nrcpt : 1, sizeof *res.rcpt);
	for (i = 0; i < nrcpt; i++) {
		res.rcpt[i].kind = 's';
		buf_adds(&res.rcpt[i].text, text);
	}
	res.kind = 'Z';
	buf_adds(&res.text, text);
	log_warnx("%s", text);
	r = emit(&res);
	smtp_result_free(&res);
	return r;
}

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

/* What the gate must hear: nothing reached the upstream (no connection
 * was made, so no window of any unit was used); it said slow down; it
 * refused our credentials or certificate; the session ended before MAIL
 * FROM was accepted (only a connection was used); the final dot went
 * out and no answer came (it may have taken the message, at any moment
 * until the final-dot timeout); or the send happened, with this many
 * recipients accepted. */
enum outcome { OUT_REFUND, OUT_THROTTLED, OUT_AUTHFAIL, OUT_NOMAIL, OUT_UNKNOWN, OUT_SENT };

static enum outcome
outcome(const struct smtp_result *res)
{
	if (!res->connected)
		return OUT_REFUND;
	if (res->suspend)
		return OUT_THROTTLED;
	if (res->authfail)
		return OUT_AUTHFAIL;
	if (res->dot_unanswered)
		return OUT_UNKNOWN;
	return res->mail_accepted ? OUT_SENT : OUT_NOMAIL;
}

/* For a caller that holds the grant (-n -r FD): one line on FD,
 *   "refund", "nomail", "unknown", "throttled REPLY", "authfail REPLY",
 *   "sent N AT UNDONE" or "relay N AT UNDONE"
 * where relay means the upstream refused us (relaying denied, the same
 * refusal for every recipient), not the recipients; N recipients were
 * accepted; AT is clock_mono_ms() when the 250 to the final dot was
 * read (-1: no 250); the last UNDONE recipients were not attempted
 * (one transaction per send, smtp.h). */
static void
outcome_write(int fd, const struct smtp_result *res)
{
	struct buf b = BUF_INIT;

	switch (outcome(res)) {
	case OUT_THROTTLED:
	case OUT_AUTHFAIL:
		buf_adds(&b, res->suspend ? "throttled " : "authfail ");
		buf_add_oneline(&b, res->throttle.s ? res->throttle.s : "",
		    res->throttle.s ? res->throttle.len : 0);
		break;
	case OUT_REFUND:
		buf_adds(&b, "refund");
		break;
	case OUT_NOMAIL:
		buf_adds(&b, "nomail");
		break;
	case OUT_UNKNOWN:
		buf_adds(&b, "unknown");
		break;
	case OUT_SENT:
		buf_printf(&b, "%s %zu %lld %zu", res->relay_failure ? "relay" : "sent",
		    res->delivered, (long long)res->accepted_at, res->undone);
		break;
	}
	buf_addc(&b, '\n');
	if (full_write(fd, b.s, b.len) < 0)
		log_warn("writing the outcome to fd %d", fd);
	buf_free(&b);
}

/* Tell the gate how it went: throttled, nothing sent, or how many. */
static void
gate_report(struct gate *g, const struct smtp_result *res)
{
	struct gp_reply r;
	const char *perr = NULL;
	int k;

	log_debug("outcome: %zu of %zu recipient(s) accepted, %zu not attempted%s%s%s%s",
	    res->delivered, res->nrcpt, res->undone,
	    res->relay_failure ? ", relay-level failure" : "",
	    res->dot_unanswered ? ", no answer to the final dot" : "",
	    res->suspend ? ", throttled: " : res->authfail ? ", refused us: " : "",
	    res->suspend || res->authfail ? res->throttle.s : "");
	if (!g->on)
		return;
	switch (outcome(res)) {
	case OUT_THROTTLED:
		k = gc_report_throttled(&g->gc, g->tag, res->throttle.s ? res->throttle.s : "");
		break;
	case OUT_AUTHFAIL:
		k = gc_report_authfail(&g->gc, g->tag, res->throttle.s ? res->throttle.s : "");
		break;
	case OUT_REFUND:
		k = gc_report_refund(&g->gc, g->tag);
		break;
	case OUT_NOMAIL:
		k = gc_report_nomail(&g->gc, g->tag);
		break;
	case OUT_UNKNOWN:
		k = gc_report_unknown(&g->gc, g->tag);
		break;
	default:
		k = gc_report_sent(&g->gc, g->tag, (uint32_t)res->delivered, res->accepted_at);
		break;
	}
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

/* What replies mean (mail/trouble.h): policy.conf's throttle_reply
 * patterns first, then the built-in rules.  Without a readable policy
 * file, the built-in rules alone (logged, unless there is none). */
static struct trouble_rules *
rules_new(const struct weir_config *cfg)
{
	struct trouble_rules *t = trouble_new();
	struct policy pol;
	struct buf err = BUF_INIT;

	memset(&pol, 0, sizeof pol);
	if (cfg->policy_file == NULL || (access(cfg->policy_file, F_OK) < 0 && errno == ENOENT))
		return t;
	if (policy_load(&pol, cfg->policy_file, &err) < 0)
		log_warnx("%s: %s; only the built-in throttle replies apply", cfg->policy_file,
		    err.s ? err.s : "unreadable");
	else
		trouble_add_policy(t, &pol);
	policy_free(&pol);
	buf_free(&err);
	return t;
}

static unsigned
default_port(int tls)
{
	return tls == UP_TLS_SMTPS ? 465 : tls == UP_TLS_NONE ? 25 : 587;
}

/* The secret (when up has a username) and the TLS client (unless tls =
 * none) into p.  0 ok; -1 with the reason in err. */
static int
prepare(const struct weir_upstream *up, struct smtp_params *p, struct buf *secret,
    struct buf *err)
{
	int rc;

	if (up->username) {
		if (up->secret_file)
			rc = secret_from_file(up->secret_file, secret, err);
		else
			rc = secret_from_command(up->secret_command,
			    clock_mono_ms() + (uint64_t)up->timeout_command * 1000, secret, err);
		if (rc < 0)
			return -1;
		p->secret = secret->s;
		p->secretlen = secret->len;
	}
	/* Set-user-id: the secret is read; TLS and SMTP run as the caller
	 * (the change of ids clears the death signal: remote_run asks again). */
	privdrop_setid(111);
	if (up->tls != UP_TLS_NONE &&
	    (p->tls = tls_client_new(up->verify, up->ca_file, up->fingerprint, err)) == NULL) {
		buf_printf(err, " (TLS set-up)");
		return -1;
	}
	return 0;
}

/* weir-remote -T -u NAME: the probe (see remote.h).  Exit 0 when every
 * step worked, 1 when one failed (its line says which and why), 2 for
 * bad usage. */
static int
probe(const char *cfile, const char *upname)
{
	struct weir_config cfg;
	const struct weir_upstream *up;
	struct buf err = BUF_INIT, secret = BUF_INIT, out = BUF_INIT;
	struct smtp_params p;
	struct smtp_result res;
	struct trouble_rules *rules = NULL;
	int rc = 1, have_cfg = 0;
	size_t i;

	memset(&p, 0, sizeof p);
	memset(&res, 0, sizeof res);
	if (config_load(&cfg, cfile, &err) < 0) {
		for (i = 0; i < err.len; i++)	/* "file:line: what" lines, on one */
			if (err.s[i] == '\n')
				err.s[i] = i + 1 < err.len ? ' ' : '\0';
		buf_printf(&out, "config failed: %s\n", err.s);
		goto out;
	}
	have_cfg = 1;
	if ((up = config_upstream(&cfg, upname)) == NULL) {
		buf_printf(&out, "config failed: no upstream \"%s\" in %s\n", upname,
		    cfg.file ? cfg.file : "the configuration");
		goto out;
	}
	if (up->host == NULL) {
		/* A delivery takes the caller's host; the probe has none. */
		buf_printf(&out, "config failed: upstream \"%s\" has no host to connect to\n",
		    upname);
		goto out;
	}
	p.up = up;
	p.host = up->host;
	p.port = up->port ? up->port : default_port(up->tls);
	p.helo = cfg.hostname;
	if (prepare(up, &p, &secret, &err) < 0) {
		buf_printf(&out, "%s failed: %s\n", up->username && !p.secret ? "secret" : "tls",
		    err.s);
		goto out;
	}
	rules = rules_new(&cfg);
	p.rules = rules;
	log_info("probing upstream %s at %s:%u: no mail, no grant", up->name, p.host, p.port);
	smtp_probe(&p, &res);
	secret_wipe(&secret);
	buf_add(&out, res.steps.s ? res.steps.s : "", res.steps.len);
	rc = res.probe_failed ? 1 : 0;
out:
	if (full_write(STDOUT_FILENO, out.s ? out.s : "", out.len) < 0) {
		log_warn("writing the probe's lines");
		rc = 1;
	}
	smtp_result_free(&res);
	secret_wipe(&secret);
	trouble_free(rules);
	tls_client_free(p.tls);
	buf_free(&err);
	buf_free(&out);
	if (have_cfg)
		config_free(&cfg);
	return rc;
}

/* -n in a set-id process: the kernel cleared the PR_SET_PDEATHSIG
 * weir-send set (it does so on every set-id exec), and the delivery must
 * still die with weir-send (remote.h, send/deliver.c).  If the parent is
 * already gone, it went before the prctl could watch it. */
static void
die_with_parent(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		fatal(111, "prctl PR_SET_PDEATHSIG");
	if (parent <= 1 || getppid() != parent)
		fatalx(111, "the caller (pid %ld) is gone; not sending", (long)parent);
}

int
remote_run(int argc, char **argv, pid_t parent)
{
	struct weir_config cfg;
	struct weir_upstream fallback;
	const struct weir_upstream *up;
	struct buf err = BUF_INIT, secret = BUF_INIT;
	struct body body;
	struct smtp_params p;
	struct smtp_result res;
	struct trouble_rules *rules = NULL;
	const char *cfile = NULL, *upname = NULL, *host, *sender;
	const char *const *rcpts;
	struct gate gate;
	size_t nrcpt;
	int opt, rc, have_fallback = 0, have_cfg = 0, use_gate = 1, outfd = -1, test = 0;
	char *end;

	memset(&p, 0, sizeof p);
	memset(&body, 0, sizeof body);	/* body_close() is safe on it */
	memset(&gate, 0, sizeof gate);
	gate.gc.fd = -1;
	opterr = 0;
	while ((opt = getopt(argc, argv, "+c:nr:Tu:")) != -1) {
		switch (opt) {
		case 'c': cfile = optarg; break;
		case 'n': use_gate = 0; break;
		case 'T': test = 1; break;
		case 'r':
			outfd = (int)strtol(optarg, &end, 10);
			if (*end || outfd < 3 || fcntl(outfd, F_GETFD) < 0)
				return whole(0, "weir-remote was invoked improperly: -r needs an "
				    "open descriptor above 2. (#4.3.5)\n");
			break;
		case 'u': upname = optarg; break;
		default:
			return whole(0, "weir-remote was invoked improperly: unknown option "
			    "-%c. (#4.3.5)\n", optopt);
		}
	}
	if (!use_gate && config_untrusted_env())
		die_with_parent(parent);
	if (test) {
		if (upname == NULL || optind != argc || use_gate == 0 || outfd >= 0) {
			log_warnx("usage: weir-remote [-c FILE] -T -u UPSTREAM");
			return 2;
		}
		return probe(cfile, upname);
	}
	if (argc - optind < 3)
		return whole(0, "weir-remote was invoked improperly: usage: weir-remote "
		    "[-c FILE] [-u UPSTREAM] [-n [-r FD]] host sender recip... (#4.3.5)\n");
	host = argv[optind];
	sender = argv[optind + 1];
	rcpts = (const char *const *)argv + optind + 2;
	nrcpt = (size_t)(argc - optind - 2);

	if (config_load(&cfg, cfile, &err) < 0) {
		size_t i;

		/* "file:line: what" lines, on one line of the report. */
		while (err.len > 0 && err.s[err.len - 1] == '\n')
			err.s[--err.len] = '\0';
		for (i = 0; i < err.len; i++)
			if (err.s[i] == '\n')
				err.s[i] = ' ';
		rc = whole(nrcpt, "weir-remote: configuration: %s (#4.3.0)\n", err.s);
		goto out;
	}
	have_cfg = 1;
	if (upname) {
		up = config_upstream(&cfg, upname);
		if (up == NULL) {
			rc = whole(nrcpt, "weir-remote: no upstream \"%s\" in %s. (#4.3.0)\n",
			    upname, cfg.file ? cfg.file : "the configuration");
			goto out;
		}
	} else if ((up = config_upstream_for(&cfg, sender)) == NULL) {
		config_upstream_defaults(&fallback);
		fallback.port = 25;
		have_fallback = 1;
		up = &fallback;
	}
	p.up = up;
	p.host = up->host ? up->host : host;
	p.port = up->port ? up->port : default_port(up->tls);
	p.helo = cfg.hostname;
	log_debug("upstream %s: %s:%u, tls %s%s", up->name ? up->name : "(none)", p.host, p.port,
	    up->tls == UP_TLS_SMTPS ? "smtps" : up->tls == UP_TLS_NONE ? "none" : "starttls",
	    up->tls != UP_TLS_NONE && !up->verify ? " (not verified)" : "");

	if (body_open(&body, STDIN_FILENO, MESSAGE_MAX, &err) < 0) {
		rc = whole(nrcpt, "weir-remote: %s. (#4.3.0)\n", err.s);
		goto out;
	}
	if (body.info.too_long_line) {
		struct smtp_result bad;
		size_t i;
		int perm;

		memset(&bad, 0, sizeof bad);
		bad.nrcpt = nrcpt;
		bad.rcpt = xcalloc(nrcpt ? nrcpt : 1, sizeof *bad.rcpt);
		buf_printf(&bad.text, "Line %zu of the message is %zu bytes long; SMTP allows "
		    "%d (RFC 5322 2.1.1), so it cannot be sent as it is. (#5.6.0)\n",
		    body.info.too_long_line, body.info.too_long_len, BODY_LINE_MAX);
		perm = trouble_situation(SIT_LINE_TOO_LONG) == T_BOUNCE;
		for (i = 0; i < nrcpt; i++) {
			bad.rcpt[i].kind = perm ? 'h' : 's';
			buf_adds(&bad.rcpt[i].text, bad.text.s);
		}
		bad.kind = perm ? 'D' : 'Z';
		log_warnx("%s", bad.text.s);
		rc = emit(&bad);
		smtp_result_free(&bad);
		goto out;
	}
	if (prepare(up, &p, &secret, &err) < 0) {
		rc = whole(nrcpt, "weir-remote: %s. (#4.3.0)\n", err.s);
		goto out;
	}
	if (!use_gate && config_untrusted_env())
		die_with_parent(parent);
	rules = rules_new(&cfg);
	p.rules = rules;
	if (use_gate && !gate_acquire(&gate, cfg.gate_socket, up, sender, nrcpt, &err)) {
		rc = whole(nrcpt, "weir-remote: %s; not sending. (#4.3.0)\n", err.s);
		goto out;
	}
	p.max_rcpt = gate.max_rcpt;
	smtp_deliver(&p, sender, rcpts, nrcpt, &body, &res);
	secret_wipe(&secret);
	gate_report(&gate, &res);
	if (outfd >= 0)
		outcome_write(outfd, &res);
	rc = emit(&res);
	smtp_result_free(&res);
out:
	if (gate.gc.fd >= 0)
		gc_close(&gate.gc);
	secret_wipe(&secret);
	trouble_free(rules);
	tls_client_free(p.tls);
	body_close(&body);
	buf_free(&err);
	if (have_fallback)
		config_upstream_free(&fallback);
	if (have_cfg)
		config_free(&cfg);
	return rc;
}
