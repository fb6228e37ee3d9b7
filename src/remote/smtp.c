/*
 * smtp.c: the SMTP client state machine; see smtp.h for the states and
 * mail/trouble.h for what each reply means.  One function per state,
 * each returning the next state; run() logs every transition.
 *
 * Security stance: with tls = starttls nothing but EHLO and STARTTLS is
 * sent before the handshake, and every byte and capability learnt before
 * it is thrown away (bytes already waiting after the STARTTLS reply make
 * the session fail: RFC 3207 forbids pipelining past STARTTLS, and such
 * bytes are the STARTTLS injection attack).  AUTH and mail only go over
 * TLS, or in the clear to a loopback peer with tls = none.  Commands are
 * never logged (AUTH lines carry the secret).
 *
 * Trusts: nothing the server sends.  Config keys: those of struct
 * weir_upstream (timeouts, tls, mechanisms, max_recipients).
 */
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "mail/address.h"
#include "mail/envelope.h"
#include "remote/conn.h"
#include "remote/sasl.h"
#include "remote/smtp.h"

enum state {
	S_CONNECT, S_TLS_IMPLICIT, S_BANNER, S_EHLO, S_HELO, S_STARTTLS, S_TLS, S_AUTH,
	S_MAIL, S_RCPT, S_DATA, S_BODY, S_DOT, S_QUIT, S_DONE,
	/* A kept session (smtp_session_*) only: RSET before the next MAIL
	 * after a transaction that did not end in a 250 to the final dot;
	 * IDLE, where a kept session waits for its next message. */
	S_RSET, S_IDLE,
};

static const char *const state_name[] = {
	"CONNECT", "TLS", "BANNER", "EHLO", "HELO", "STARTTLS", "TLS", "AUTH",
	"MAIL", "RCPT", "DATA", "BODY", "DOT", "QUIT", "DONE", "RSET", "IDLE",
};

/* The probe's names for the steps (smtp.h). */
static const char *const step_name[] = {
	"connect", "tls", "banner", "ehlo", "helo", "starttls", "tls", "auth",
	"mail", "rcpt", "data", "data", "data", "quit", "done", "rset", "idle",
};

struct caps {
	int starttls, pipelining, size, eightbitmime, enhanced;
	unsigned long long sizemax;	/* 0: no limit given */
	char auth[256];			/* mechanisms after AUTH, space-separated */
	unsigned long rcptmax;		/* RFC 9422 LIMITS; 0: not advertised (MAILMAX
					 * needs no care: one transaction a session) */
};

/* Recipient states beyond smtp_rcpt.kind while a session runs. */
#define RC_ACCEPTED 'a'
#define RC_UNDONE 'u'		/* beyond this message's one transaction */

/* How long an idle session's unasked bytes get to make a line. */
#define IDLE_PEEK_MS 200

struct smtp_session {
	const struct smtp_params *p;
	const struct weir_upstream *up;
	struct smtp_result *res;
	const char *sender;
	struct buf paths;		/* RFC 5321 paths, mail/address.c: sender's, */
	size_t *rcpt_path;		/* then each recipient's at these offsets */
	struct body *body;		/* the message, streamed (remote/body.h) */
	struct conn c;
	int connected, usable, banner_seen, tls_active;
	struct smtp_reply r;
	enum reply_class cls;		/* r's class (judge) */
	struct caps caps;
	struct buf err;
	char peer[80];
	/* the current transaction */
	size_t first, count, next;	/* recipients [first, first+count); next to read */
	size_t accepted, same5xx;
	char first5xx[SMTP_REPLY_LINE_MAX * 2];
	int pipelined;
	/* how the session ended, for recipients still undecided */
	char fail_kind;			/* 's' or 'h' */
	struct buf fail_text;
	struct buf ok_text;
	/* the probe (smtp_probe): stop after AUTH, say what each step did */
	int probe;
	const char *step;		/* the step running now */
	/* A kept session: after a transaction the machine stops in IDLE,
	 * not QUIT; reused, this message goes over a connection an
	 * earlier one opened; need_rset, the last transaction did not end
	 * with a 250 to the final dot. */
	int keep, reused, need_rset, idle;
	int attempted;			/* a connection was tried */
};

/* The probe's line for a step that worked. */
static void PRINTFLIKE(3, 4)
probe_ok(struct smtp_session *s, const char *step, const char *fmt, ...)
{
	va_list ap;
	char line[1024];

	if (!s->probe)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	buf_printf(&s->res->steps, "%s ok: ", step);
	buf_add_oneline(&s->res->steps, line, strlen(line));
	buf_addc(&s->res->steps, '\n');
}

static uint64_t
deadline(long long seconds)
{
	return clock_mono_ms() + (uint64_t)seconds * 1000;
}

static void
oneline(struct smtp_session *s, char *out, size_t max)
{
	smtp_reply_oneline(&s->r, out, max);
}

/* Record why the session stops; the first reason wins. */
static void PRINTFLIKE(3, 4)
fail(struct smtp_session *s, enum trouble_action a, const char *fmt, ...)
{
	va_list ap;
	char line[1024];

	if (s->fail_kind)
		return;
	s->fail_kind = a == T_BOUNCE ? 'h' : 's';
	if (a == T_SUSPEND)
		s->res->suspend = 1;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	buf_adds(&s->fail_text, line);
	log_debug("%s: %s: %s", s->peer, trouble_action_name(a), line);
	if (s->probe) {
		size_t n = strlen(line);

		while (n > 0 && line[n - 1] == '\n')
			n--;
		s->res->probe_failed = 1;
		buf_printf(&s->res->steps, "%s failed: ", s->step ? s->step : "setup");
		buf_add_oneline(&s->res->steps, line, n);
		buf_addc(&s->res->steps, '\n');
	}
}

/* What the reply in s->r means at st (mail/trouble.h); its class kept
 * in s->cls. */
static enum trouble_action
judge(struct smtp_session *s, enum smtp_stage st)
{
	struct trouble_verdict v;

	trouble_judge(s->p->rules, st, &s->r, &v);
	s->cls = v.cls;
	return v.action;
}

/* The reply in s->r (its one line: line) suspends the upstream: for the
 * gate, with whether it said the quota is spent. */
static void
suspending(struct smtp_session *s, const char *line)
{
	s->res->suspend = 1;
	if (s->cls == RC_QUOTA)
		s->res->quota = 1;
	buf_reset(&s->res->throttle);
	buf_adds(&s->res->throttle, line);
}

/* A failed reply at a stage, in qmail-remote's words. */
static enum state
fail_reply(struct smtp_session *s, enum smtp_stage st, enum trouble_action a, const char *what)
{
	char line[SMTP_REPLY_LINE_MAX * 2];

	oneline(s, line, sizeof line);
	if (a == T_SUSPEND)
		suspending(s, line);
	if (st <= STAGE_MAIL)
		s->res->relay_failure = 1;
	/* A kept connection the server closes (421) before this message's
	 * MAIL: nothing of it was sent; it goes on a new session. */
	if (s->reused && st <= STAGE_MAIL && s->r.code == 421 && a != T_SUSPEND)
		s->res->stale = 1;
	fail(s, a, "Connected to %s but %s.\nRemote host said: %s\n", s->peer, what, line);
	if (s->r.code == 421)
		s->usable = 0;	/* the server is closing */
	return s->usable ? S_QUIT : S_DONE;
}

/* A failure that is not a reply. */
static enum state
fail_conn(struct smtp_session *s, enum conn_status cs, enum smtp_stage st)
{
	static const char *const why[] = { "ok", "I/O error", "timeout", "connection lost",
		"malformed reply" };
	enum trouble_situation sit = cs == CONN_TIMEOUT ? SIT_TIMEOUT :
	    cs == CONN_BADLINE ? SIT_BADREPLY : SIT_LOST;
	const char *detail = s->err.len ? s->err.s : "";

	s->usable = 0;
	if (st == STAGE_QUIT) {		/* everything was decided before QUIT */
		log_debug("%s: %s after QUIT", s->peer, why[-cs]);
		return S_DONE;
	}
	if (st <= STAGE_MAIL)
		s->res->relay_failure = 1;
	if (s->reused && st <= STAGE_MAIL && (cs == CONN_EOF || cs == CONN_ERROR))
		s->res->stale = 1;	/* as in fail_reply */
	if (st == STAGE_DATA_END)
		fail(s, trouble_situation(sit), "%s: %s after the end of data%s%s; the message "
		    "may be delivered twice.\n", s->peer, why[-cs], *detail ? ": " : "", detail);
	else
		fail(s, trouble_situation(sit), "%s: %s at %s%s%s.\n", s->peer, why[-cs],
		    trouble_stage_name(st), *detail ? ": " : "", detail);
	return S_DONE;
}

/* Read one whole reply into s->r: 0, or the next state after a failure. */
static int
get_reply(struct smtp_session *s, enum smtp_stage st, long long timeout, enum state *next)
{
	char line[SMTP_REPLY_LINE_MAX];
	uint64_t dl = deadline(timeout);
	enum reply_status rs;
	const char *why = NULL;

	smtp_reply_reset(&s->r);
	buf_reset(&s->err);
	do {
		size_t len;
		enum conn_status cs = conn_read_line(&s->c, line, &len, dl, &s->err);

		if (cs != CONN_OK) {
			*next = fail_conn(s, cs, st);
			return -1;
		}
		rs = smtp_reply_feed(&s->r, line, len, &why);
	} while (rs == REPLY_MORE);
	if (rs == REPLY_BAD) {
		buf_reset(&s->err);
		buf_adds(&s->err, why);
		*next = fail_conn(s, CONN_BADLINE, st);
		return -1;
	}
	return 0;
}

static int
put(struct smtp_session *s, const char *data, size_t n, long long timeout, enum smtp_stage st,
    enum state *next)
{
	enum conn_status cs;

	buf_reset(&s->err);
	cs = conn_write(&s->c, data, n, deadline(timeout), &s->err);
	if (cs != CONN_OK) {
		*next = fail_conn(s, cs, st);
		return -1;
	}
	return 0;
}

static enum state
st_connect(struct smtp_session *s)
{
	enum conn_status cs;

	buf_reset(&s->err);
	s->attempted = 1;
	cs = conn_connect(&s->c, s->p->host, s->p->port, deadline(s->up->timeout_connect), &s->err);
	if (cs != CONN_OK) {
		s->res->relay_failure = 1;
		s->res->unreached = 1;
		fail(s, trouble_situation(SIT_CONNECT), "Sorry, I wasn't able to establish an "
		    "SMTP connection to %s:%u: %s.\n", s->p->host, s->p->port,
		    cs == CONN_TIMEOUT ? "timeout" : s->err.s);
		return S_DONE;
	}
	s->connected = 1;
	s->res->connected = 1;
	s->usable = 1;
	snprintf(s->peer, sizeof s->peer, "%s", s->c.peer);
	probe_ok(s, "connect", "%s (%s)", s->c.peer, s->p->host);
	if (s->up->tls == UP_TLS_NONE && !conn_peer_is_loopback(&s->c)) {
		s->usable = 0;
		s->res->relay_failure = 1;
		fail(s, T_DEFER, "%s: tls = none is allowed only to a loopback address; "
		    "not sending in the clear.\n", s->peer);
		return S_DONE;
	}
	return s->up->tls == UP_TLS_SMTPS ? S_TLS_IMPLICIT : S_BANNER;
}

static enum state
st_tls(struct smtp_session *s)
{
	enum conn_status cs;
	char desc[128];

	buf_reset(&s->err);
	cs = conn_start_tls(&s->c, s->p->tls, s->p->host, deadline(s->up->timeout_command),
	    &s->err);
	if (cs != CONN_OK) {
		s->usable = 0;
		s->res->relay_failure = 1;
		if (cs == CONN_BADLINE)
			fail(s, trouble_situation(SIT_INJECTION), "%s: STARTTLS: %s; refusing "
			    "to go on (STARTTLS injection).\n", s->peer, s->err.s);
		else
			fail(s, trouble_situation(cs == CONN_TIMEOUT ? SIT_TIMEOUT : SIT_TLS),
			    "%s: TLS failed: %s.\n", s->peer,
			    cs == CONN_TIMEOUT ? "timeout in the handshake" : s->err.s);
		if (cs != CONN_TIMEOUT && s->err.s && strstr(s->err.s, "certificate")) {
			/* Verification (or the pinned fingerprint) failed: the
			 * same for every message until the operator acts. */
			s->res->authfail = 1;
			buf_reset(&s->res->throttle);
			buf_printf(&s->res->throttle, "TLS: %s", s->err.s);
		}
		return S_DONE;
	}
	s->tls_active = 1;
	memset(&s->caps, 0, sizeof s->caps);	/* nothing learnt in the clear survives */
	log_debug("%s: TLS established: %s", s->peer, tls_describe(s->c.tls, desc, sizeof desc));
	if (s->probe) {
		char peer[1024];

		probe_ok(s, "tls", "%s; certificate %s; %s%s", desc,
		    tls_peer_describe(s->c.tls, peer, sizeof peer),
		    s->up->verify ? "verified (chain and host name)" : "NOT verified (verify = false)",
		    s->up->fingerprint ? ", pinned fingerprint matches" : "");
	}
	return s->banner_seen ? S_EHLO : S_BANNER;
}

static enum state
st_banner(struct smtp_session *s)
{
	enum state next;
	enum trouble_action a;

	if (get_reply(s, STAGE_BANNER, s->up->timeout_banner, &next) < 0)
		return next;
	s->banner_seen = 1;
	a = judge(s, STAGE_BANNER);
	if (a != T_ACCEPT)
		return fail_reply(s, STAGE_BANNER, a, "greeting failed");
	if (s->probe) {
		char line[SMTP_REPLY_LINE_MAX * 2];

		oneline(s, line, sizeof line);
		probe_ok(s, "banner", "%s", line);
	}
	return S_EHLO;
}

static unsigned long
limit_value(const char *p, const char *name)
{
	size_t n = strlen(name);
	unsigned long v = 0;

	while (*p) {
		while (*p == ' ')
			p++;
		if (strncasecmp(p, name, n) == 0 && p[n] == '=') {
			const char *d = p + n + 1;

			for (v = 0; *d >= '0' && *d <= '9' && v < 1000000000UL; d++)
				v = v * 10 + (unsigned long)(*d - '0');
			return (*d == '\0' || *d == ' ') ? v : 0;
		}
		p += strcspn(p, " ");
	}
	return 0;
}

/* SIZE's limit (RFC 1870: 1*20DIGIT), 0 for none.  Anything else, or a
 * number past what we can hold, is taken as no limit: the upstream still
 * refuses at MAIL or DATA what it cannot take, while a limit misread
 * from "10k" would bounce every message as too big. */
static unsigned long long
size_value(const struct smtp_session *s, const char *p)
{
	unsigned long long v = 0;
	size_t n = strspn(p, "0123456789");

	if (n == 0 || n > 20 || p[n] != '\0') {
		log_info("%s: EHLO SIZE \"%.40s\" is not a number: taken as no limit", s->peer, p);
		return 0;
	}
	for (; *p; p++) {
		if (v > (ULLONG_MAX - 9) / 10)
			return 0;
		v = v * 10 + (unsigned long long)(*p - '0');
	}
	return v;
}

/* EHLO keywords, one per line after the first (RFC 5321 4.1.1.1). */
static void
parse_caps(struct smtp_session *s)
{
	const char *t = s->r.text.s ? s->r.text.s : "";
	const char *line = strchr(t, '\n');

	memset(&s->caps, 0, sizeof s->caps);
	while (line) {
		char kw[SMTP_REPLY_LINE_MAX];
		const char *end, *arg;
		size_t n;

		line++;
		end = strchr(line, '\n');
		n = end ? (size_t)(end - line) : strlen(line);
		if (n >= sizeof kw)
			n = sizeof kw - 1;
		memcpy(kw, line, n);
		kw[n] = '\0';
		arg = kw + strcspn(kw, " =");
		if (*arg)
			arg++;
		if (strcasecmp(kw, "STARTTLS") == 0)
			s->caps.starttls = 1;
		else if (strcasecmp(kw, "PIPELINING") == 0)
			s->caps.pipelining = 1;
		else if (strcasecmp(kw, "8BITMIME") == 0)
			s->caps.eightbitmime = 1;
		else if (strcasecmp(kw, "ENHANCEDSTATUSCODES") == 0)
			s->caps.enhanced = 1;
		else if (strncasecmp(kw, "SIZE", 4) == 0 && (kw[4] == '\0' || kw[4] == ' ')) {
			s->caps.size = 1;
			s->caps.sizemax = kw[4] ? size_value(s, kw + 5) : 0;
		} else if (strncasecmp(kw, "AUTH", 4) == 0 && (kw[4] == ' ' || kw[4] == '=')) {
			if (s->caps.auth[0] == '\0')
				snprintf(s->caps.auth, sizeof s->caps.auth, "%s", arg);
		} else if (strncasecmp(kw, "LIMITS", 6) == 0 && kw[6] == ' ') {
			s->caps.rcptmax = limit_value(kw + 7, "RCPTMAX");
		}
		line = end;
	}
	log_debug("%s: EHLO:%s%s%s%s%s%s%s", s->peer, s->caps.starttls ? " STARTTLS" : "",
	    s->caps.pipelining ? " PIPELINING" : "", s->caps.size ? " SIZE" : "",
	    s->caps.eightbitmime ? " 8BITMIME" : "",
	    s->caps.enhanced ? " ENHANCEDSTATUSCODES" : "", s->caps.auth[0] ? " AUTH " : "",
	    s->caps.auth);
}

static enum state
after_hello(struct smtp_session *s)
{
	if (s->up->tls == UP_TLS_STARTTLS && !s->tls_active)
		return S_STARTTLS;
	s->res->greeted = 1;
	if (s->p->secret)
		return S_AUTH;
	if (s->probe) {
		buf_adds(&s->res->steps, "auth skipped: no username in the upstream section\n");
		return S_QUIT;
	}
	return S_MAIL;
}

/* The probe's line for EHLO: every keyword line after the greeting. */
static void
probe_caps(struct smtp_session *s, const char *cmd)
{
	const char *t = s->r.text.s ? s->r.text.s : "", *line = strchr(t, '\n');
	struct buf all = BUF_INIT;

	if (!s->probe)
		return;
	while (line) {
		const char *end = strchr(++line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);

		if (all.len)
			buf_adds(&all, ", ");
		buf_add(&all, line, n);
		line = end;
	}
	probe_ok(s, cmd, "%s%s", all.len ? "capabilities: " : "no capabilities",
	    all.len ? all.s : "");
	buf_free(&all);
}

/* s if it is one printable ASCII word (it goes on a command line),
 * else fallback. */
static const char *
word_or(const char *s, const char *fallback)
{
	const char *p;

	for (p = s; *p; p++)
		if (*p <= ' ' || *p > '~')
			return fallback;
	return p > s ? s : fallback;
}

static enum state
st_ehlo(struct smtp_session *s, int helo)
{
	char cmd[600];
	enum state next;
	enum trouble_action a;
	const char *name = word_or(s->p->helo, "localhost");
	int n = snprintf(cmd, sizeof cmd, "%s %s\r\n", helo ? "HELO" : "EHLO", name);

	if (n < 0 || (size_t)n >= sizeof cmd)
		n = snprintf(cmd, sizeof cmd, "%s localhost\r\n", helo ? "HELO" : "EHLO");
	if (put(s, cmd, (size_t)n, s->up->timeout_command, STAGE_EHLO, &next) < 0 ||
	    get_reply(s, STAGE_EHLO, s->up->timeout_command, &next) < 0)
		return next;
	a = judge(s, STAGE_EHLO);
	if (a == T_ACCEPT) {
		if (helo)
			memset(&s->caps, 0, sizeof s->caps);
		else
			parse_caps(s);
		probe_caps(s, helo ? "helo" : "ehlo");
		return after_hello(s);
	}
	/* HELO only where nothing EHLO offers is needed. */
	if (!helo && s->r.code / 100 == 5 && s->r.code != 421 && s->up->tls != UP_TLS_STARTTLS &&
	    !s->p->secret)
		return S_HELO;
	return fail_reply(s, STAGE_EHLO, a, helo ? "HELO was refused" : "EHLO was refused");
}

static enum state
st_starttls(struct smtp_session *s)
{
	enum state next;
	enum trouble_action a;

	if (!s->caps.starttls) {
		s->res->relay_failure = 1;
		fail(s, trouble_situation(SIT_NO_STARTTLS), "%s does not offer STARTTLS, and "
		    "tls = starttls requires it; nothing sent in the clear.\n", s->peer);
		return S_QUIT;
	}
	if (put(s, "STARTTLS\r\n", 10, s->up->timeout_command, STAGE_STARTTLS, &next) < 0 ||
	    get_reply(s, STAGE_STARTTLS, s->up->timeout_command, &next) < 0)
		return next;
	a = judge(s, STAGE_STARTTLS);
	if (a != T_ACCEPT || s->r.code != 220)
		return fail_reply(s, STAGE_STARTTLS, a == T_ACCEPT ? T_DEFER : a,
		    "STARTTLS was refused");
	if (s->probe) {
		char line[SMTP_REPLY_LINE_MAX * 2];

		oneline(s, line, sizeof line);
		probe_ok(s, "starttls", "%s", line);
	}
	return S_TLS;
}

/* Send one AUTH line ("AUTH MECH [ir]" or a response) with CRLF. */
static int
auth_put(struct smtp_session *s, const char *a, const char *b, enum state *next)
{
	struct buf line = BUF_INIT;
	int r;

	buf_adds(&line, a);
	if (b)
		buf_printf(&line, " %s", b);
	buf_add(&line, "\r\n", 2);
	r = put(s, line.s, line.len, s->up->timeout_command, STAGE_AUTH, next);
	explicit_bzero(line.s, line.len);
	buf_free(&line);
	return r;
}

static enum state
st_auth(struct smtp_session *s)
{
	struct saslc *sc = NULL;
	struct buf ir = BUF_INIT, resp = BUF_INIT, cmd = BUF_INIT, why = BUF_INIT;
	const char *mech = NULL;
	int has_ir = 0, held_ir = 0, rounds;
	enum state next = S_MAIL;
	enum trouble_action a;

	if (s->caps.auth[0] == '\0') {
		s->res->relay_failure = 1;
		fail(s, trouble_situation(SIT_NO_MECH), "%s offers no AUTH, and a username is "
		    "configured; not sending unauthenticated.\n", s->peer);
		return S_QUIT;
	}
	if (saslc_init(&why) < 0 ||
	    (sc = saslc_new(s->p->host, s->p->port, s->up->username, s->p->secret,
	    s->p->secretlen, &why)) == NULL ||
	    saslc_start(sc, s->caps.auth, &s->up->mechanisms, &mech, &has_ir, &ir, &why) < 0) {
		s->res->relay_failure = 1;
		fail(s, trouble_situation(SIT_NO_MECH), "%s: AUTH: %s.\n", s->peer, why.s);
		next = S_QUIT;
		goto out;
	}
	log_debug("%s: AUTH %s as %s", s->peer, mech, s->up->username);
	buf_printf(&cmd, "AUTH %s", mech);
	/* RFC 4954 4: an initial response that would make the line too long
	 * waits for the first (empty) challenge. */
	if (has_ir && cmd.len + 1 + (ir.len ? ir.len : 1) + 2 > 512)
		held_ir = 1;
	if (auth_put(s, cmd.s, has_ir && !held_ir ? (ir.len ? ir.s : "=") : NULL, &next) < 0)
		goto out;
	for (rounds = 0; ; rounds++) {
		if (get_reply(s, STAGE_AUTH, s->up->timeout_command, &next) < 0)
			goto out;
		if (s->r.code != 334)
			break;
		if (rounds >= 20 || s->r.nlines != 1) {
			(void)auth_put(s, "*", NULL, &next);
			s->res->relay_failure = 1;
			fail(s, T_DEFER, "%s: AUTH %s: the server's challenges make no sense.\n",
			    s->peer, mech);
			next = S_DONE;
			s->usable = 0;
			goto out;
		}
		if (held_ir) {
			held_ir = 0;
			if (auth_put(s, ir.len ? ir.s : "=", NULL, &next) < 0)
				goto out;
			continue;
		}
		buf_reset(&why);
		if (saslc_step(sc, s->r.text.s ? s->r.text.s : "", s->r.text.len, &resp, &why) < 0) {
			/* Cancel (RFC 4954 4); the server answers 501. */
			if (auth_put(s, "*", NULL, &next) == 0)
				(void)get_reply(s, STAGE_AUTH, s->up->timeout_command, &next);
			s->res->relay_failure = 1;
			fail(s, T_DEFER, "%s: AUTH %s: %s.\n", s->peer, mech, why.s);
			next = s->usable ? S_QUIT : S_DONE;
			goto out;
		}
		if (auth_put(s, resp.s ? resp.s : "", NULL, &next) < 0)
			goto out;
	}
	a = judge(s, STAGE_AUTH);
	if (a != T_ACCEPT || s->r.code / 100 != 2) {
		char what[96];

		snprintf(what, sizeof what, "AUTH %s was refused", mech);
		next = fail_reply(s, STAGE_AUTH, a == T_ACCEPT ? T_DEFER : a, what);
		if (s->r.code / 100 == 5 && !s->res->suspend) {
			/* The credentials: weir-gate suspends the upstream. */
			char line[SMTP_REPLY_LINE_MAX * 2];

			s->res->authfail = 1;
			buf_reset(&s->res->throttle);
			oneline(s, line, sizeof line);
			buf_adds(&s->res->throttle, line);
		}
		goto out;
	}
	if (!saslc_complete(sc)) {
		/* SCRAM: a 235 without the server's signature is a server
		 * that did not prove it knows the secret: no mail to it. */
		char what[128];

		snprintf(what, sizeof what, "AUTH %s ended before the server proved it knows "
		    "the secret", mech);
		next = fail_reply(s, STAGE_AUTH, T_DEFER, what);
		goto out;
	}
	s->res->auth_ok = 1;
	if (s->probe) {
		char line[SMTP_REPLY_LINE_MAX * 2];

		oneline(s, line, sizeof line);
		probe_ok(s, "auth", "%s as %s: %s", mech, s->up->username, line);
	}
	next = s->probe ? S_QUIT : S_MAIL;	/* the probe stops here */
out:
	saslc_free(sc);
	if (ir.s)
		explicit_bzero(ir.s, ir.cap);
	if (resp.s)
		explicit_bzero(resp.s, resp.cap);
	buf_free(&ir);
	buf_free(&resp);
	buf_free(&cmd);
	buf_free(&why);
	return next;
}

static size_t
remaining(const struct smtp_session *s)
{
	size_t i, n = 0;

	for (i = 0; i < s->res->nrcpt; i++)
		if (s->res->rcpt[i].kind == 0 || s->res->rcpt[i].kind == RC_ACCEPTED)
			n++;
	return n;
}

static void
set_rcpt(struct smtp_session *s, size_t i, char kind, const char *fmt, ...) PRINTFLIKE(4, 5);

static void
set_rcpt(struct smtp_session *s, size_t i, char kind, const char *fmt, ...)
{
	va_list ap;
	char text[1024];

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	s->res->rcpt[i].kind = kind;
	buf_reset(&s->res->rcpt[i].text);
	buf_adds(&s->res->rcpt[i].text, text);
	if (kind == 'r')
		s->res->delivered++;
}

static enum state
st_mail(struct smtp_session *s)
{
	struct buf cmd = BUF_INIT;
	/* SIZE (RFC 1870): the message as sent, without the final ".". */
	size_t cap = s->up->max_recipients, i, wire = s->body->wire_len - 3;
	enum state next = S_RCPT;
	enum trouble_action a;

	if (s->caps.rcptmax && s->caps.rcptmax < cap)
		cap = s->caps.rcptmax;
	if (s->p->max_rcpt && s->p->max_rcpt < cap)
		cap = s->p->max_rcpt;
	if (s->caps.sizemax && wire > s->caps.sizemax) {
		fail(s, trouble_situation(SIT_TOO_BIG), "%s accepts messages of up to %llu "
		    "bytes (SIZE); this one is %zu bytes.\n", s->peer, s->caps.sizemax, wire);
		return S_QUIT;
	}
	/* The next undecided recipients, up to cap. */
	for (s->first = 0; s->first < s->res->nrcpt && s->res->rcpt[s->first].kind; s->first++)
		;
	for (s->count = 0, i = s->first; i < s->res->nrcpt && s->count < cap; i++, s->count++)
		;
	s->next = s->first;
	s->accepted = s->same5xx = 0;
	s->first5xx[0] = '\0';
	s->pipelined = s->caps.pipelining;
	buf_printf(&cmd, "MAIL FROM:%s", s->paths.s);
	if (s->caps.size)
		buf_printf(&cmd, " SIZE=%zu", wire);
	if (s->caps.eightbitmime && s->body->info.eightbit)
		buf_adds(&cmd, " BODY=8BITMIME");
	buf_adds(&cmd, "\r\n");
	if (s->pipelined) {
		for (i = s->first; i < s->first + s->count; i++)
			if (s->res->rcpt[i].kind == 0)	/* not one refused before */
				buf_printf(&cmd, "RCPT TO:%s\r\n", s->paths.s + s->rcpt_path[i]);
		buf_adds(&cmd, "DATA\r\n");
	}
	if (put(s, cmd.s, cmd.len, s->up->timeout_mail, STAGE_MAIL, &next) < 0 ||
	    get_reply(s, STAGE_MAIL, s->up->timeout_mail, &next) < 0)
		goto out;
	a = judge(s, STAGE_MAIL);
	if (a != T_ACCEPT)
		next = fail_reply(s, STAGE_MAIL, a, "sender was rejected");
	else
		s->res->mail_accepted = 1;
out:
	buf_free(&cmd);
	return next;
}

/* One transaction per message (smtp.h): whoever is left is undone.
 * clean: it ended with a 250 to the final dot (no RSET needed). */
static enum state
after_transaction(struct smtp_session *s, int clean)
{
	size_t i;

	for (i = 0; i < s->res->nrcpt; i++)
		if (s->res->rcpt[i].kind == 0)
			s->res->rcpt[i].kind = RC_UNDONE;
	s->need_rset = !clean;
	return s->keep ? S_IDLE : S_QUIT;
}

static enum state
st_rcpt(struct smtp_session *s)
{
	size_t i = s->next;
	const char *addr = s->res->rcpt[i].addr;
	char line[SMTP_REPLY_LINE_MAX * 2];
	enum state next;
	enum trouble_action a;

	if (!s->pipelined) {
		struct buf cmd = BUF_INIT;
		int r;

		buf_printf(&cmd, "RCPT TO:%s\r\n", s->paths.s + s->rcpt_path[i]);
		r = put(s, cmd.s, cmd.len, s->up->timeout_rcpt, STAGE_RCPT, &next);
		buf_free(&cmd);
		if (r < 0)
			return next;
	}
	if (get_reply(s, STAGE_RCPT, s->up->timeout_rcpt, &next) < 0)
		return next;
	a = judge(s, STAGE_RCPT);
	oneline(s, line, sizeof line);
	switch (a) {
	case T_ACCEPT:
		s->res->rcpt[i].kind = RC_ACCEPTED;
		s->accepted++;
		break;
	case T_BOUNCE:
		if (s->same5xx == 0)
			snprintf(s->first5xx, sizeof s->first5xx, "%s", line);
		if (strcmp(s->first5xx, line) == 0)
			s->same5xx++;
		set_rcpt(s, i, 'h', "%s does not like recipient.\nRemote host said: %s\n",
		    s->peer, line);
		break;
	case T_SUSPEND:
		suspending(s, line);
		/* FALLTHROUGH */
	default:
		set_rcpt(s, i, 's', "%s does not like recipient.\nRemote host said: %s\n",
		    s->peer, line);
		break;
	}
	log_debug("%s: RCPT %s: %s", s->peer, addr, trouble_action_name(a));
	if (s->r.code == 421) {
		s->usable = 0;
		return fail_reply(s, STAGE_RCPT, a, "the server closed the session");
	}
	/* Skip recipients refused before the session (no path). */
	while (++s->next < s->first + s->count && s->res->rcpt[s->next].kind)
		;
	if (s->next < s->first + s->count)
		return S_RCPT;
	/* Identical 5xx for every recipient: the relay refusing us. */
	if (trouble_identical_refusals(s->count, s->same5xx, s->accepted)) {
		s->res->relay_failure = 1;
		for (i = s->first; i < s->first + s->count; i++)
			if (s->res->rcpt[i].kind == 'h') {
				s->res->rcpt[i].kind = 's';
				buf_adds(&s->res->rcpt[i].text, "(The same refusal for every "
				    "recipient: taken as the relay refusing us, not bounced.)\n");
			}
	}
	if (s->accepted > 0)
		return S_DATA;
	/* Nobody accepted: a pipelined DATA still has its reply coming. */
	if (s->pipelined) {
		if (get_reply(s, STAGE_DATA, s->up->timeout_data_init, &next) < 0)
			return next;
		if (s->r.code == 354) {	/* RFC 2920 3.1: end the empty data */
			if (put(s, ".\r\n", 3, s->up->timeout_data_block, STAGE_DATA, &next) < 0 ||
			    get_reply(s, STAGE_DATA_END, s->up->timeout_data_end, &next) < 0)
				return next;
		}
	}
	return after_transaction(s, 0);
}

/* The accepted recipients of this transaction get kind and text. */
static void
settle(struct smtp_session *s, char kind, const char *text)
{
	size_t i;

	for (i = s->first; i < s->first + s->count; i++)
		if (s->res->rcpt[i].kind == RC_ACCEPTED)
			set_rcpt(s, i, kind, "%s", text);
}

static enum state
txn_failed(struct smtp_session *s, enum trouble_action a, const char *what)
{
	char line[SMTP_REPLY_LINE_MAX * 2], text[SMTP_REPLY_LINE_MAX * 3];

	oneline(s, line, sizeof line);
	if (a == T_SUSPEND)
		suspending(s, line);
	snprintf(text, sizeof text, "%s %s.\nRemote host said: %s\n", s->peer, what, line);
	settle(s, a == T_BOUNCE ? 'h' : 's', text);
	log_debug("%s: %s: %s", s->peer, trouble_action_name(a), line);
	if (s->r.code == 421) {
		s->usable = 0;
		return fail_reply(s, STAGE_DATA, a, "the server closed the session");
	}
	return after_transaction(s, 0);
}

static enum state
st_data(struct smtp_session *s)
{
	enum state next;
	enum trouble_action a;

	if (!s->pipelined && put(s, "DATA\r\n", 6, s->up->timeout_data_init, STAGE_DATA, &next) < 0)
		return next;
	if (get_reply(s, STAGE_DATA, s->up->timeout_data_init, &next) < 0)
		return next;
	a = judge(s, STAGE_DATA);
	if (a != T_ACCEPT)
		return txn_failed(s, a, "failed on DATA command");
	return S_BODY;
}

static enum state
st_body(struct smtp_session *s)
{
	static char chunk[BODY_CHUNK];
	struct buf why = BUF_INIT;
	enum state next;
	size_t sent = 0;
	ssize_t n;

	body_rewind(s->body);
	while ((n = body_next(s->body, chunk, sizeof chunk, &why)) > 0) {
		/* From here the final dot may reach the server: whatever
		 * happens next, it may have taken the message. */
		sent += (size_t)n;
		if (sent == s->body->wire_len)
			s->res->dot_unanswered = 1;
		if (put(s, chunk, (size_t)n, s->up->timeout_data_block, STAGE_DATA, &next) < 0) {
			buf_free(&why);
			return next;
		}
	}
	if (n < 0) {
		/* No final dot: closing the connection discards the data. */
		fail(s, T_DEFER, "weir-remote: %s; not sent.\n", why.s);
		s->usable = 0;
		buf_free(&why);
		return S_DONE;
	}
	return S_DOT;
}

static enum state
st_dot(struct smtp_session *s)
{
	char line[SMTP_REPLY_LINE_MAX * 2];
	enum state next;
	enum trouble_action a;

	s->res->transactions++;
	if (get_reply(s, STAGE_DATA_END, s->up->timeout_data_end, &next) < 0)
		return next;
	s->res->dot_unanswered = 0;
	a = judge(s, STAGE_DATA_END);
	if (a != T_ACCEPT)
		return txn_failed(s, a, "failed after I sent the message");
	s->res->accepted_at = (int64_t)clock_mono_ms();
	oneline(s, line, sizeof line);
	buf_reset(&s->ok_text);
	buf_printf(&s->ok_text, "%s accepted message.\nRemote host said: %s\n", s->peer, line);
	settle(s, 'r', "");
	log_debug("%s: delivered to %zu recipient(s): %s", s->peer, s->accepted, line);
	return after_transaction(s, 1);
}

/* A kept session's next transaction, after one that did not finish. */
static enum state
st_rset(struct smtp_session *s)
{
	enum state next;
	enum trouble_action a;

	if (put(s, "RSET\r\n", 6, s->up->timeout_command, STAGE_MAIL, &next) < 0 ||
	    get_reply(s, STAGE_MAIL, s->up->timeout_command, &next) < 0)
		return next;
	a = judge(s, STAGE_MAIL);
	if (a != T_ACCEPT)
		return fail_reply(s, STAGE_MAIL, a, "RSET failed");
	s->need_rset = 0;
	return S_MAIL;
}

static enum state
st_quit(struct smtp_session *s)
{
	/* The reply does not matter and a failure here changes nothing, so
	 * it is not worth waiting long for. */
	long long t = s->up->timeout_command < 10 ? s->up->timeout_command : 10;
	enum state next;

	if (put(s, "QUIT\r\n", 6, t, STAGE_QUIT, &next) == 0 &&
	    get_reply(s, STAGE_QUIT, t, &next) == 0 && s->probe && !s->fail_kind) {
		char line[SMTP_REPLY_LINE_MAX * 2];

		oneline(s, line, sizeof line);
		probe_ok(s, "quit", "%s", line);
	}
	s->usable = 0;
	return S_DONE;
}

static enum state
step(struct smtp_session *s, enum state st)
{
	switch (st) {
	case S_CONNECT:		return st_connect(s);
	case S_TLS_IMPLICIT:	return st_tls(s);
	case S_BANNER:		return st_banner(s);
	case S_EHLO:		return st_ehlo(s, 0);
	case S_HELO:		return st_ehlo(s, 1);
	case S_STARTTLS:	return st_starttls(s);
	case S_TLS:		return st_tls(s);
	case S_AUTH:		return st_auth(s);
	case S_MAIL:		return st_mail(s);
	case S_RCPT:		return st_rcpt(s);
	case S_DATA:		return st_data(s);
	case S_BODY:		return st_body(s);
	case S_DOT:		return st_dot(s);
	case S_QUIT:		return st_quit(s);
	case S_RSET:		return st_rset(s);
	case S_DONE:
	case S_IDLE:		break;
	}
	panic("smtp: step in state %d", (int)st);
}

/* Recipients nobody decided on get the session's failure; then the
 * message report. */
static void
conclude(struct smtp_session *s)
{
	struct smtp_result *res = s->res;
	size_t i, nsoft = 0;
	const char *first_soft = NULL, *first_hard = NULL;

	if (!s->fail_kind && remaining(s) > 0)
		fail(s, T_DEFER, "%s: the session ended with recipients left (bug).\n", s->peer);
	for (i = res->nrcpt; i > 0 && res->rcpt[i - 1].kind == RC_UNDONE; i--)
		res->undone++;
	for (i = 0; i < res->nrcpt; i++) {
		struct smtp_rcpt *r = &res->rcpt[i];

		if (r->kind == 0 || r->kind == RC_ACCEPTED)
			set_rcpt(s, i, s->fail_kind, "%s", s->fail_text.s);
		if (r->kind == RC_UNDONE)
			set_rcpt(s, i, 's', "Not attempted: %s took the recipients before this "
			    "one in this send's one transaction; try again. (#4.5.3)\n", s->peer);
		if (r->kind == 's') {
			nsoft++;
			if (!first_soft)
				first_soft = r->text.s;
		}
		if (r->kind == 'h' && !first_hard)
			first_hard = r->text.s;
	}
	buf_reset(&res->text);
	if (res->delivered > 0) {
		res->kind = 'K';
		buf_adds(&res->text, s->ok_text.s ? s->ok_text.s : "accepted\n");
	} else if (nsoft > 0) {
		res->kind = 'Z';
		buf_adds(&res->text, s->fail_text.len ? s->fail_text.s : first_soft);
	} else {
		res->kind = 'D';
		buf_adds(&res->text, s->fail_text.len ? s->fail_text.s :
		    first_hard ? first_hard : "no recipients\n");
	}
}

static void
sess_init(struct smtp_session *s, const struct smtp_params *p, struct smtp_result *res)
{
	memset(s, 0, sizeof *s);
	s->p = p;
	s->up = p->up;
	s->res = res;
	s->c.fd = -1;
	smtp_reply_init(&s->r);
	snprintf(s->peer, sizeof s->peer, "%s:%u", p->host, p->port);
}

static void
sess_free(struct smtp_session *s)
{
	if (s->connected)
		conn_close(&s->c);
	smtp_reply_free(&s->r);
	buf_free(&s->err);
	buf_free(&s->fail_text);
	buf_free(&s->ok_text);
	buf_free(&s->paths);
	free(s->rcpt_path);
}

/* From st to DONE, one logged transition at a time. */
static void
run_machine(struct smtp_session *s, enum state st)
{
	enum state nx;

	while (st != S_DONE && st != S_IDLE) {
		s->step = step_name[st];
		nx = step(s, st);
		log_debug("%s: %s -> %s", s->peer, state_name[st], state_name[nx]);
		st = nx;
	}
	s->idle = st == S_IDLE;
}

/* The server spoke while the session was idle: a 421 before closing
 * it, or its end.  Bytes TLS keeps to itself (a session ticket) read as
 * nothing within the short wait. */
static int
idle_gone(struct smtp_session *s)
{
	struct pollfd pfd = { .fd = s->c.fd, .events = POLLIN };
	char line[SMTP_REPLY_LINE_MAX];
	enum conn_status cs;
	size_t len;

	if (conn_pending(&s->c) == 0 && poll(&pfd, 1, 0) <= 0)
		return 0;
	buf_reset(&s->err);
	cs = conn_read_line(&s->c, line, &len, deadline(0) + IDLE_PEEK_MS, &s->err);
	if (cs == CONN_TIMEOUT)
		return 0;
	log_debug("%s: the server ended the idle session: %s", s->peer,
	    cs == CONN_OK ? "it spoke unasked" : cs == CONN_EOF ? "connection closed" :
	    s->err.s ? s->err.s : "error");
	return 1;
}

struct smtp_session *
smtp_session_new(const struct smtp_params *p)
{
	struct smtp_session *s = xcalloc(1, sizeof *s);

	sess_init(s, p, NULL);
	s->keep = 1;
	return s;
}

/* The next message's state: its paths, its result, where to begin. */
static enum state
message_begin(struct smtp_session *s, const char *sender, const char *const *rcpts, size_t nrcpt,
    struct body *body, struct smtp_result *res)
{
	const char *why;
	size_t i, good = 0;
	int sendable = 1;

	memset(res, 0, sizeof *res);
	res->rcpt = xcalloc(nrcpt ? nrcpt : 1, sizeof *res->rcpt);
	res->nrcpt = nrcpt;
	res->accepted_at = -1;
	s->res = res;
	s->sender = sender;
	s->body = body;
	s->fail_kind = 0;
	buf_reset(&s->fail_text);
	buf_reset(&s->ok_text);
	buf_reset(&s->paths);
	free(s->rcpt_path);

	/* Every path is written by one quoting function: nothing in an
	 * address can add text to MAIL FROM or RCPT TO. */
	if (addr_write_path(&s->paths, sender, strlen(sender), &why) < 0) {
		fail(s, T_BOUNCE, "The sender address is unusable: %s.\n", why);
		sendable = 0;
	}
	buf_addc(&s->paths, '\0');
	s->rcpt_path = xcalloc(nrcpt ? nrcpt : 1, sizeof *s->rcpt_path);
	for (i = 0; i < nrcpt; i++) {
		res->rcpt[i].addr = rcpts[i];
		s->rcpt_path[i] = s->paths.len;
		if (addr_write_path(&s->paths, rcpts[i], strlen(rcpts[i]), &why) < 0)
			set_rcpt(s, i, 'h', "The recipient address is unusable: %s.\n", why);
		else
			good++;
		buf_addc(&s->paths, '\0');
	}
	if (good == 0 || !sendable)
		return S_IDLE;	/* nothing to send: the connection is not touched */
	if (!s->connected)
		return S_CONNECT;
	/* A kept connection, as an earlier message left it. */
	s->reused = 1;
	res->connected = 1;
	res->greeted = 1;
	if (!s->idle || !s->usable || idle_gone(s)) {
		s->usable = 0;
		res->stale = 1;
		fail(s, T_DEFER, "%s closed the session before this message; not sent.\n",
		    s->peer);
		return S_DONE;
	}
	return s->need_rset ? S_RSET : S_MAIL;
}

void
smtp_session_deliver(struct smtp_session *s, const char *sender, const char *const *rcpts,
    size_t nrcpt, struct body *body, struct smtp_result *res)
{
	enum state st = message_begin(s, sender, rcpts, nrcpt, body, res);

	if (st != S_IDLE)	/* S_IDLE: nothing to send, the connection as it was */
		run_machine(s, st);
	conclude(s);
	s->res = NULL;
}

int
smtp_session_open(const struct smtp_session *s)
{
	if (!s->connected)
		return !s->attempted;	/* nothing sent yet */
	return s->usable && s->idle;
}

int
smtp_session_tls(struct smtp_session *s, struct buf *out)
{
	return s->connected && s->c.tls ? tls_session_export(s->c.tls, out) : -1;
}

void
smtp_session_free(struct smtp_session *s)
{
	struct smtp_result none;

	if (s == NULL)
		return;
	if (s->connected && s->usable && s->idle) {
		memset(&none, 0, sizeof none);
		s->res = &none;
		s->keep = 0;
		run_machine(s, S_QUIT);
		smtp_result_free(&none);
	}
	sess_free(s);
	free(s);
}

void
smtp_deliver(const struct smtp_params *p, const char *sender, const char *const *rcpts,
    size_t nrcpt, struct body *body, struct smtp_result *res)
{
	struct smtp_session s;
	enum state st;

	sess_init(&s, p, res);
	st = message_begin(&s, sender, rcpts, nrcpt, body, res);
	if (st != S_IDLE)
		run_machine(&s, st);
	conclude(&s);
	sess_free(&s);
}

void
smtp_probe(const struct smtp_params *p, struct smtp_result *res)
{
	struct smtp_session s;

	memset(res, 0, sizeof *res);
	res->rcpt = xcalloc(1, sizeof *res->rcpt);
	sess_init(&s, p, res);
	s.probe = 1;
	run_machine(&s, S_CONNECT);
	sess_free(&s);
}

void
smtp_result_free(struct smtp_result *res)
{
	size_t i;

	for (i = 0; i < res->nrcpt; i++)
		buf_free(&res->rcpt[i].text);
	free(res->rcpt);
	buf_free(&res->text);
	buf_free(&res->throttle);
	buf_free(&res->steps);
	memset(res, 0, sizeof *res);
}
