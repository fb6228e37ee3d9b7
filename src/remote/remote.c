/*
 * remote.c: weir-remote's shared core, what each of its modes uses (the
 * one-message run, single.c; the kept session, session.c; the probe,
 * probe.c; run.c picks the mode): the upstream and how to reach it, the
 * secret and TLS, what the upstream's replies mean, the message read and
 * its sender rewritten, the reports and the outcome line.  It calls
 * none of the modes.  remote.h is the interface, remoteint.h declares
 * what is shared here.
 *
 * Sender rewriting (mail/rewrite.h) is applied in remote_rewrite_sender(),
 * before the session: the envelope sender handed to smtp_deliver() and
 * the From: address in the wire form of the message (remote/body.h),
 * never the queue file.
 *
 * Trusts: weir.conf.  Config keys: hostname, policy_file (its
 * throttle_reply patterns), upstream sections (rewrite_* among them).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/privdrop.h"
#include "mail/config.h"
#include "mail/outcome.h"
#include "mail/queue.h"
#include "mail/rewrite.h"
#include "mail/trouble.h"
#include "remote/body.h"
#include "remote/remote.h"
#include "remote/remoteint.h"
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

int
remote_emit(int fd, const struct smtp_result *res)
{
	struct buf out = BUF_INIT;
	int r;

	remote_format(res, &out);
	r = full_write(fd, out.s, out.len);
	if (r < 0)
		log_warn("writing the reports");
	buf_free(&out);
	return r < 0 ? 111 : 0;
}

/* A message-level report with no recipient reports: qmail-remote's way
 * of saying every recipient shares the fate (logged). */
static void
whole_text(struct smtp_result *res, size_t nrcpt, const char *text)
{
	size_t i;

	memset(res, 0, sizeof *res);
	res->nrcpt = nrcpt;
	res->rcpt = xcalloc(nrcpt ? nrcpt : 1, sizeof *res->rcpt);
	for (i = 0; i < nrcpt; i++) {
		res->rcpt[i].kind = 's';
		buf_adds(&res->rcpt[i].text, text);
	}
	res->kind = 'Z';
	buf_adds(&res->text, text);
	log_warnx("%s", text);
}

void
remote_whole_result(struct smtp_result *res, size_t nrcpt, const char *fmt, ...)
{
	va_list ap;
	char text[1024];

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	whole_text(res, nrcpt, text);
}

/* The same, its reports on fd (one message's trouble, bad usage): the
 * exit status. */
int
remote_whole(int fd, size_t nrcpt, const char *fmt, ...)
{
	struct smtp_result res;
	va_list ap;
	char text[1024];
	int r;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	whole_text(&res, nrcpt, text);
	r = remote_emit(fd, &res);
	smtp_result_free(&res);
	return r;
}

/* What the gate must hear: nothing reached the upstream (no connection
 * was made, so no window of any unit was used); it said slow down; it
 * refused our credentials or certificate; the session ended before MAIL
 * FROM was accepted (only a connection was used); the final dot went
 * out and no answer came (it may have taken the message, at any moment
 * until the final-dot timeout); or the send happened, with this many
 * recipients accepted. */
enum outcome_kind
remote_outcome_kind(const struct smtp_result *res)
{
	if (!res->connected)
		return res->unreached ? OUTCOME_UNREACHED : OUTCOME_REFUND;
	if (res->stale)
		return OUTCOME_STALE;	/* a kept session's: nothing of it sent */
	if (res->suspend)
		return res->quota ? OUTCOME_QUOTA : OUTCOME_THROTTLED;
	if (res->authfail)
		return OUTCOME_AUTHFAIL;
	if (!res->greeted)
		return OUTCOME_NOGREETING;	/* TLS, the greeting or EHLO failed */
	if (res->dot_unanswered)
		return OUTCOME_UNKNOWN;
	if (!res->mail_accepted)
		return OUTCOME_NOMAIL;
	return res->relay_failure ? OUTCOME_RELAY : OUTCOME_SENT;
}

/* The text that goes with outcome k: the throttle reply or certificate
 * failure, or for an upstream not reached what failed (the report's
 * first line). */
void
remote_outcome_text(const struct smtp_result *res, enum outcome_kind k, char *out, size_t max)
{
	const char *t = res->throttle.s ? res->throttle.s : "";
	size_t n;

	if ((k == OUTCOME_UNREACHED || k == OUTCOME_NOGREETING) && res->text.s)
		t = res->text.s;
	n = strcspn(t, "\n");
	if (n >= max)
		n = max - 1;
	memcpy(out, t, n);
	out[n] = '\0';
}

/* For a caller that holds the grant (-n -r FD, -S): the outcome line
 * (mail/outcome.h) on fd.  One transaction per message (smtp.h): the
 * recipients not attempted are the last ones. */
void
remote_outcome(const struct smtp_result *res, struct buf *line)
{
	struct outcome o;

	memset(&o, 0, sizeof o);
	o.kind = remote_outcome_kind(res);
	o.accepted = res->delivered;
	o.at = res->accepted_at;
	o.undone = res->undone;
	remote_outcome_text(res, o.kind, o.text, sizeof o.text);
	outcome_format(&o, line);
}

void
remote_not_sent(const struct remote *r, struct buf *line)
{
	struct outcome o;

	memset(&o, 0, sizeof o);
	o.kind = r->refused.len ? OUTCOME_AUTHFAIL : OUTCOME_REFUND;
	snprintf(o.text, sizeof o.text, "%s", r->refused.s ? r->refused.s : "");
	outcome_format(&o, line);
}

/* What replies mean (mail/trouble.h): policy.conf's throttle_reply
 * patterns first, then upstream up's reply_rules, then the built-in
 * rules.  Without a readable policy file, the rest alone (logged,
 * unless there is none). */
struct trouble_rules *
remote_rules(const struct weir_config *cfg, const struct weir_upstream *up)
{
	struct trouble_rules *t = trouble_new();
	struct policy pol;
	struct buf err = BUF_INIT;

	trouble_add_rules(t, &up->reply_rules);
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

/* The message, for the log: "msg ID" with the id weir-send gave, else
 * "msg N" with the inode of the file (qmail's id), or "message". */
static void
message_name(const struct body *b, char *out, size_t max)
{
	struct stat st;

	if (b->qid)
		snprintf(out, max, "msg %s", b->qid);
	else if (fstat(b->fd, &st) == 0 && S_ISREG(st.st_mode))
		snprintf(out, max, "msg %llu", (unsigned long long)st.st_ino);
	else
		snprintf(out, max, "message");
}

/* Sender rewriting for upstream up (mail/rewrite.h), at delivery only:
 * the envelope sender into out (sender itself when no rule applies), and
 * with rewrite_header_from the From: address in body.  Each change, and
 * a From: left as it was for a reason, is logged once for the message.
 * 0 ok; -1 the rules do not build (config.c checked them), why in err. */
int
remote_rewrite_sender(const struct weir_upstream *up, const char *hostname, const char *sender,
    struct body *body, struct buf *out, struct buf *err)
{
	static const char *const left[] = {
		[RWF_SEVERAL] = "not one mailbox", [RWF_UNPARSABLE] = "unparsable",
		[RWF_ODD_FORM] = "not plain",
	};
	struct rewrite rw;
	struct buf old = BUF_INIT, nu = BUF_INIT, why = BUF_INIT;
	const char *val;
	char name[QUEUE_ID_MAX + 8];
	size_t len, off, alen, n;
	enum rewrite_from r;

	buf_reset(out);
	buf_adds(out, sender);
	if (rewrite_init(&rw, (const char *const *)up->rewrite_sender.v, up->rewrite_sender.n,
	    up->rewrite_default, (const char *const *)up->rewrite_domains.v,
	    up->rewrite_domains.n, hostname, err) < 0)
		return -1;
	if (!rewrite_active(&rw))
		goto done;
	message_name(body, name, sizeof name);
	if (rewrite_address(&rw, sender, &nu)) {
		log_info("%s: upstream %s: envelope sender <%s> -> <%s>", name, up->name, sender,
		    nu.s);
		buf_reset(out);
		buf_add(out, nu.s, nu.len);
	}
	if (!up->rewrite_header_from)
		goto done;
	n = body_from(body, &val, &len);
	if (n != 1 || val == NULL) {
		if (n != 0)
			log_warnx("%s: upstream %s: From: left as it is: %s", name, up->name,
			    n > 1 ? "several From: fields" : "the field is too long");
		goto done;
	}
	r = rewrite_from(&rw, val, len, &off, &alen, &old, &nu, &why);
	if (r == RWF_REWRITTEN && body_from_replace(body, off, alen, nu.s, nu.len, &why) == 0)
		log_info("%s: upstream %s: From: %s -> %s", name, up->name, old.s, nu.s);
	else if (r != RWF_SAME)
		log_warnx("%s: upstream %s: From: left as it is: %s%s%s", name, up->name,
		    r == RWF_REWRITTEN ? "" : left[r], r == RWF_REWRITTEN ? "" : ": ",
		    buf_cstr(&why));
done:
	rewrite_free(&rw);
	buf_free(&old);
	buf_free(&nu);
	buf_free(&why);
	return 0;
}

unsigned
remote_default_port(int tls)
{
	return tls == UP_TLS_SMTPS ? 465 : tls == UP_TLS_NONE ? 25 : 587;
}

/* The secret (when up has a username) and the TLS client (unless tls =
 * none) into p.  0 ok; -1 with the reason in err; -2 the OAuth provider
 * refused the credentials (secret.h), the reason in err.  how: what the
 * OAuth step did. */
int
remote_prepare(const struct weir_upstream *up, struct smtp_params *p, struct buf *secret,
    struct tokenok *tok, struct buf *how, struct buf *err)
{
	int rc;

	if (up->username) {
		if ((rc = secret_get(up, secret, how, err)) < 0)
			return rc;
		p->secret = secret->s;
		p->secretlen = secret->len;
		tokenok_arm(tok, up, secret);	/* before the change of ids */
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

/* -n in a set-id process: the kernel cleared the PR_SET_PDEATHSIG
 * weir-send set (it does so on every set-id exec), and the delivery must
 * still die with weir-send (remote.h, send/deliver.c).  If the parent is
 * already gone, it went before the prctl could watch it. */
void
remote_die_with_parent(pid_t parent, int sig)
{
	if (prctl(PR_SET_PDEATHSIG, sig) < 0)
		fatal(111, "prctl PR_SET_PDEATHSIG");
	if (parent <= 1 || getppid() != parent)
		fatalx(111, "the caller (pid %ld) is gone; not sending", (long)parent);
}

/* "file:line: what" lines of a config error, on one line. */
static void
flatten(struct buf *err)
{
	size_t i;

	while (err->len > 0 && err->s[err->len - 1] == '\n')
		err->s[--err->len] = '\0';
	for (i = 0; i < err->len; i++)
		if (err->s[i] == '\n')
			err->s[i] = ' ';
}

/* The config and the upstream for sender (or -u upname) into r: 0, or
 * -1 with the report's text in why. */
int
remote_find_upstream(struct remote *r, const char *cfile, const char *upname, const char *host,
    const char *sender, struct buf *why)
{
	struct buf err = BUF_INIT;
	int rc = -1;

	if (config_load(&r->cfg, cfile, &err) < 0) {
		flatten(&err);
		buf_printf(why, "weir-remote: configuration: %s (#4.3.0)\n", err.s);
		goto out;
	}
	r->have_cfg = 1;
	if (upname) {
		r->up = config_upstream(&r->cfg, upname);
		if (r->up == NULL) {
			buf_printf(why, "weir-remote: no upstream \"%s\" in %s. (#4.3.0)\n",
			    upname, r->cfg.file ? r->cfg.file : "the configuration");
			goto out;
		}
	} else if ((r->up = config_upstream_for(&r->cfg, sender)) == NULL) {
		config_upstream_defaults(&r->fallback);
		r->fallback.port = 25;
		r->have_fallback = 1;
		r->up = &r->fallback;
	}
	r->p.up = r->up;
	r->p.host = r->up->host ? r->up->host : host;
	r->p.port = r->up->port ? r->up->port : remote_default_port(r->up->tls);
	r->p.helo = r->cfg.hostname;
	log_debug("upstream %s: %s:%u, tls %s%s", r->up->name ? r->up->name : "(none)",
	    r->p.host, r->p.port, r->up->tls == UP_TLS_SMTPS ? "smtps" :
	    r->up->tls == UP_TLS_NONE ? "none" : "starttls",
	    r->up->tls != UP_TLS_NONE && !r->up->verify ? " (not verified)" : "");
	rc = 0;
out:
	buf_free(&err);
	return rc;
}

/* The secret, TLS and the reply rules: 0, or -1 with the report's text
 * in why. */
int
remote_get_ready(struct remote *r, struct buf *why)
{
	struct buf err = BUF_INIT, how = BUF_INIT;
	int rc = 0, k;

	if ((k = remote_prepare(r->up, &r->p, &r->secret, &r->tok, &how, &err)) < 0) {
		buf_printf(why, "weir-remote: %s. (#4.3.0)\n", err.s);
		if (k == -2)
			buf_adds(&r->refused, err.s);
		rc = -1;
	} else {
		if (how.len)
			log_debug("upstream %s: OAuth: %s", r->up->name, how.s);
		r->rules = remote_rules(&r->cfg, r->up);
		r->p.rules = r->rules;
	}
	buf_free(&err);
	buf_free(&how);
	return rc;
}

void
remote_free(struct remote *r)
{
	tokenok_done(&r->tok, 0);
	secret_wipe(&r->secret);
	buf_free(&r->refused);
	trouble_free(r->rules);
	tls_client_free(r->p.tls);
	if (r->have_fallback)
		config_upstream_free(&r->fallback);
	if (r->have_cfg)
		config_free(&r->cfg);
}

int
remote_open_message(struct body *body, const char *qid, int mfd, size_t nrcpt,
    struct smtp_result *bad)
{
	struct buf err = BUF_INIT;
	char name[QUEUE_ID_MAX + 8];
	size_t i;
	int perm;

	if (body_open(body, mfd, MESSAGE_MAX, &err) < 0) {
		remote_whole_result(bad, nrcpt, "weir-remote: %s. (#4.3.0)\n", err.s);
		buf_free(&err);
		return -1;
	}
	body->qid = qid;
	if (!body->info.too_long_line)
		return 0;
	memset(bad, 0, sizeof *bad);
	bad->nrcpt = nrcpt;
	bad->rcpt = xcalloc(nrcpt ? nrcpt : 1, sizeof *bad->rcpt);
	buf_printf(&bad->text, "Line %zu of the message is %zu bytes long; SMTP allows "
	    "%d (RFC 5322 2.1.1), so it cannot be sent as it is. (#5.6.0)\n",
	    body->info.too_long_line, body->info.too_long_len, BODY_LINE_MAX);
	perm = trouble_situation(SIT_LINE_TOO_LONG) == T_BOUNCE;
	for (i = 0; i < nrcpt; i++) {
		bad->rcpt[i].kind = perm ? 'h' : 's';
		buf_adds(&bad->rcpt[i].text, bad->text.s);
	}
	bad->kind = perm ? 'D' : 'Z';
	message_name(body, name, sizeof name);
	log_warnx("%s: %s", name, bad->text.s);
	return -1;
}
