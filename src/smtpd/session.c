/*
 * session.c: see session.h.  The states:
 *
 *   GREET  before EHLO/HELO: only EHLO, HELO, NOOP, RSET, VRFY, HELP, QUIT
 *   READY  after EHLO/HELO, no transaction: MAIL starts one
 *   MAIL   after MAIL: RCPT
 *   RCPT   at least one recipient accepted: RCPT, DATA
 *
 * RSET and EHLO/HELO go back to READY (GREET for RSET before a greeting).
 * DATA runs the message through dataend.c into weir-queue and comes back
 * to READY, or ends the session when the message broke the line rules
 * (bare CR or LF: the client and we no longer agree where lines end).
 *
 * Lines: commands are at most 512 bytes with CRLF (RFC 5321 4.5.3.1.4),
 * end with CRLF, hold no NUL.  A longer line is read to its end and
 * refused; a bare CR or LF in a command ends the session.  Replies are
 * buffered and written when the client's input is used up, which is what
 * PIPELINING needs (RFC 2920).  Clocks, as Postfix's smtpd_timeout with
 * per-request deadlines: a command line must arrive whole within the
 * timeout from the moment we wait for it, and DATA within the timeout
 * plus one second per min_data_rate bytes received, however the client
 * dribbles its bytes (TLS too); then 421 4.4.2 and the end.  A write
 * waits at most the timeout.  NOOP, RSET, HELP, VRFY and unknown
 * commands count as junk: past junk_command_limit (the count starts
 * again after each queued message), 421 and the end.
 *
 * Before the greeting: a pause (greet_pause; loopback clients only with
 * greet_pause_loopback), then a last look; a client that sent anything
 * before the greeting is refused with 554 and disconnected.
 *
 * Relay: a client whose address is in conf->allow may name any recipient;
 * any other gets 550 5.7.1 for every RCPT.
 *
 * STARTTLS (RFC 3207): offered when a certificate is configured, once.
 * Bytes the client sent after STARTTLS before the handshake (the
 * plaintext command injection of CVE-2011-0411) end the session with
 * nothing answered inside TLS.  After the handshake the session starts
 * again from GREET: nothing said in clear carries over.
 *
 * AUTH (RFC 4954): PLAIN and LOGIN against the password file (auth.h),
 * offered over TLS or to a loopback client, outside a transaction, once
 * per session.  Success lets the client relay.  A failure is 535 and
 * counts as an error (max_errors ends a guessing client's session).
 *
 * Trusts: nothing from the client.  Config keys: see session.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/envelope.h"
#include "mail/qqclient.h"
#include "mail/qqcode.h"
#include "smtpd/auth.h"
#include "smtpd/dataend.h"
#include "smtpd/path.h"
#include "smtpd/session.h"

#define CMD_MAX		512	/* with CRLF */
#define HELO_MAX	255

enum state { ST_GREET, ST_READY, ST_MAIL, ST_RCPT };

/* Why a read gave no line. */
enum rd { RD_OK, RD_EOF, RD_TIMEOUT, RD_ERROR };

struct session {
	const struct smtpd_conf *conf;
	int in, out;
	const char *addr;
	int relay_ok;
	enum state state;
	char *helo;
	int esmtp;
	unsigned errors;
	unsigned junk;		/* junk commands since the last queued message */
	uint64_t deadline;	/* clock_mono_ms: the command's, or DATA's, end */
	int dead;		/* writing failed: stop */
	/* input */
	char rbuf[16384];
	size_t rpos, rlen;
	/* output */
	struct buf wbuf;
	/* transaction */
	struct buf sender;
	char **rcpt;
	size_t nrcpt;
	size_t declared_size;
	unsigned long msgs;
	struct tls_conn *tls;	/* after STARTTLS */
	int loopback;		/* the client is on this host */
	char *authuser;		/* after AUTH */
	struct buf tlsinfo;	/* protocol and cipher, for Received */
};

int
smtpd_conf_init(struct smtpd_conf *conf, const struct weir_config *c, struct buf *why)
{
	size_t i;

	memset(conf, 0, sizeof *conf);
	conf->hostname = c->hostname;
	conf->max_size = c->listen.max_size;
	conf->max_rcpt = c->listen.max_recipients;
	conf->max_errors = c->listen.max_errors;
	conf->timeout_ms = (int)(c->listen.timeout * 1000);
	conf->min_data_rate = c->listen.min_data_rate;
	conf->junk_limit = c->listen.junk_command_limit;
	conf->greet_pause_ms = (int)(c->listen.greet_pause * 1000);
	conf->greet_pause_loopback = c->listen.greet_pause_loopback;
	conf->qqprog = qq_program();
	conf->qqsock = qq_socket_path(c->queue_socket);
	conf->allow = xcalloc(c->listen.allow.n + 1, sizeof *conf->allow);
	for (i = 0; i < c->listen.allow.n; i++) {
		if (cidr_parse(c->listen.allow.v[i], &conf->allow[i], why) < 0) {
			free(conf->allow);
			conf->allow = NULL;
			return -1;
		}
	}
	conf->nallow = c->listen.allow.n;
	conf->password_file = c->listen.password_file;
	if (c->listen.cert_file) {
		conf->tls = tls_server_new(c->listen.cert_file, c->listen.key_file, why);
		if (conf->tls == NULL) {
			smtpd_conf_free(conf);
			return -1;
		}
	}
	return 0;
}

void
smtpd_conf_free(struct smtpd_conf *conf)
{
	free(conf->allow);
	conf->allow = NULL;
	tls_server_free(conf->tls);
	conf->tls = NULL;
}

void
smtpd_client_addr(int fd, char *out, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	const char *env;
	struct cidr tmp;

	snprintf(out, n, "unknown");
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)n);
			return;
		}
		if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
				inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], out, (socklen_t)n);
			else
				inet_ntop(AF_INET6, &s6->sin6_addr, out, (socklen_t)n);
			return;
		}
	}
	/* Not an IP socket (a pipe, a socketpair): the wrapper's word. */
	env = getenv("TCPREMOTEIP");
	if (env == NULL || *env == '\0')
		env = getenv("REMOTE_ADDR");
	if (env && strlen(env) < n && cidr_addr(env, &tmp) == 0)
		snprintf(out, n, "%s", env);
}

static int
is_loopback(const char *addr)
{
	struct cidr a, lo4, lo6;
	struct buf why = BUF_INIT;

	if (cidr_parse("127.0.0.0/8", &lo4, &why) < 0 || cidr_parse("::1", &lo6, &why) < 0)
		panic("is_loopback: %s", why.s);
	return cidr_addr(addr, &a) == 0 && (cidr_match(&lo4, &a) || cidr_match(&lo6, &a));
}

static int
relay_allowed(const struct smtpd_conf *conf, const char *addr)
{
	struct cidr a;
	size_t i;

	if (cidr_addr(addr, &a) < 0)
		return 0;
	for (i = 0; i < conf->nallow; i++)
		if (cidr_match(&conf->allow[i], &a))
			return 1;
	return 0;
}

/* ---- output ---- */

static void
flush_out(struct session *s)
{
	size_t off = 0;

	if (s->tls && !s->dead && s->wbuf.len > 0 &&
	    tls_conn_write(s->tls, s->wbuf.s, s->wbuf.len, s->conf->timeout_ms) < 0) {
		log_warnx("%s: cannot write to the client over TLS", s->addr);
		s->dead = 1;
	}
	if (s->tls)
		off = s->wbuf.len;
	while (!s->dead && off < s->wbuf.len) {
		struct pollfd p = { s->out, POLLOUT, 0 };
		ssize_t w;
		int r = poll(&p, 1, s->conf->timeout_ms);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			log_warnx("%s: %s writing to the client", s->addr,
			    r == 0 ? "timeout" : "poll failed");
			s->dead = 1;
			break;
		}
		w = write(s->out, s->wbuf.s + off, s->wbuf.len - off);
		if (w < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (w <= 0) {
			log_warnx("%s: cannot write to the client: %s", s->addr,
			    w < 0 ? strerror(errno) : "no progress");
			s->dead = 1;
			break;
		}
		off += (size_t)w;
	}
	buf_reset(&s->wbuf);
}

static void reply(struct session *s, const char *fmt, ...) PRINTFLIKE(2, 3);

/* One reply line (without CRLF); a reply is 5xx: counts as an error. */
static void
reply(struct session *s, const char *fmt, ...)
{
	va_list ap;
	char line[600];
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0)
		panic("reply: vsnprintf");
	buf_adds(&s->wbuf, line);
	buf_adds(&s->wbuf, "\r\n");
	if (line[0] == '5' && line[3] == ' ')
		s->errors++;
}

/* ---- input ---- */

/* Milliseconds left before s->deadline (0: passed). */
static int
left_ms(const struct session *s)
{
	uint64_t now = clock_mono_ms();

	if (now >= s->deadline)
		return 0;
	return s->deadline - now > INT_MAX ? INT_MAX : (int)(s->deadline - now);
}

/* Make input available: flush replies first, then wait for the client,
 * at most until s->deadline. */
static enum rd
fill(struct session *s)
{
	ssize_t r;

	if (s->rpos < s->rlen)
		return RD_OK;
	flush_out(s);
	if (s->dead)
		return RD_ERROR;
	if (left_ms(s) == 0)
		return RD_TIMEOUT;
	if (s->tls) {
		r = tls_conn_read(s->tls, s->rbuf, sizeof s->rbuf, left_ms(s));
		if (r <= 0)
			return r == 0 ? RD_EOF : r == -2 ? RD_TIMEOUT : RD_ERROR;
		s->rpos = 0;
		s->rlen = (size_t)r;
		return RD_OK;
	}
	for (;;) {
		struct pollfd p = { s->in, POLLIN, 0 };
		int pr = poll(&p, 1, left_ms(s));

		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return RD_ERROR;
		if (pr == 0)
			return RD_TIMEOUT;
		r = read(s->in, s->rbuf, sizeof s->rbuf);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0) {
			if (errno != ECONNRESET)
				log_warn("%s: read", s->addr);
			return RD_ERROR;
		}
		if (r == 0)
			return RD_EOF;
		s->rpos = 0;
		s->rlen = (size_t)r;
		return RD_OK;
	}
}

enum cmdline { CL_OK, CL_TOOLONG, CL_BARE, CL_NUL };

/* One command line into line (without CRLF). */
static enum rd
read_cmd(struct session *s, struct buf *line, enum cmdline *cl)
{
	int cr = 0;
	enum rd r;

	buf_reset(line);
	*cl = CL_OK;
	s->deadline = clock_mono_ms() + (uint64_t)s->conf->timeout_ms;
	for (;;) {
		char c;

		if ((r = fill(s)) != RD_OK)
			return r;
		c = s->rbuf[s->rpos++];
		if (cr) {
			if (c != '\n') {
				*cl = CL_BARE;
				return RD_OK;
			}
			return RD_OK;
		}
		if (c == '\r') {
			cr = 1;
			continue;
		}
		if (c == '\n') {
			*cl = CL_BARE;
			return RD_OK;
		}
		if (c == '\0' && *cl == CL_OK)
			*cl = CL_NUL;
		if (line->len + 2 < CMD_MAX)
			buf_addc(line, c);
		else
			*cl = CL_TOOLONG;
	}
}

/* After a refusal that ends the session: say it, stop writing, and read
 * (and ignore) what the client still sends for a moment, so that the
 * reply is not lost to a reset. */
static void
close_after(struct session *s)
{
	char junk[4096];
	size_t total = 0;

	flush_out(s);
	if (shutdown(s->out, SHUT_WR) < 0 && errno != ENOTSOCK)
		log_warn("%s: shutdown", s->addr);
	while (total < 1024 * 1024) {
		struct pollfd p = { s->in, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, 2000) <= 0)
			break;
		r = read(s->in, junk, sizeof junk);
		if (r <= 0)
			break;
		total += (size_t)r;
	}
}

/* ---- the transaction ---- */

static void
txn_reset(struct session *s)
{
	size_t i;

	for (i = 0; i < s->nrcpt; i++)
		free(s->rcpt[i]);
	free(s->rcpt);
	s->rcpt = NULL;
	s->nrcpt = 0;
	buf_reset(&s->sender);
	s->declared_size = 0;
	if (s->state != ST_GREET)
		s->state = ST_READY;
}

/* Does the argument start with word (case-insensitive), e.g. "FROM:"? */
static const char *
after_word(const char *arg, const char *word)
{
	size_t n = strlen(word);

	if (strncasecmp(arg, word, n) != 0)
		return NULL;
	arg += n;
	if (*arg == ' ')	/* "MAIL FROM: <a@b>": common, and unambiguous */
		arg++;
	return arg;
}

static void
cmd_helo(struct session *s, const char *arg, int esmtp)
{
	const char *p;

	if (*arg == '\0') {
		reply(s, "501 5.5.4 %s needs a host name", esmtp ? "EHLO" : "HELO");
		return;
	}
	for (p = arg; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
			reply(s, "501 5.5.4 The host name must be one word of printable ASCII");
			return;
		}
	if (strlen(arg) > HELO_MAX) {
		reply(s, "501 5.5.4 Host name too long");
		return;
	}
	free(s->helo);
	s->helo = xstrdup(arg);
	s->esmtp = esmtp;
	s->state = ST_READY;
	txn_reset(s);
	if (!esmtp) {
		reply(s, "250 %s", s->conf->hostname);
		return;
	}
	reply(s, "250-%s", s->conf->hostname);
	reply(s, "250-PIPELINING");
	reply(s, "250-SIZE %zu", s->conf->max_size);
	reply(s, "250-8BITMIME");
	if (s->conf->tls && !s->tls)
		reply(s, "250-STARTTLS");
	if (s->conf->password_file && (s->tls || s->loopback) && !s->authuser)
		reply(s, "250-AUTH PLAIN LOGIN");
	reply(s, "250 ENHANCEDSTATUSCODES");
}

static void
cmd_mail(struct session *s, const char *arg)
{
	const char *p, *why;
	size_t used;

	if (s->state == ST_GREET) {
		reply(s, "503 5.5.1 Send EHLO or HELO first");
		return;
	}
	if (s->state != ST_READY) {
		reply(s, "503 5.5.1 Nested MAIL command");
		return;
	}
	if ((p = after_word(arg, "FROM:")) == NULL) {
		reply(s, "501 5.5.4 Syntax: MAIL FROM:<address>");
		return;
	}
	if (smtp_path_parse(p, PATH_NULL_OK, &s->sender, &used, &why) < 0) {
		reply(s, "553 5.1.7 Bad sender address: %s", why);
		return;
	}
	p += used;
	s->declared_size = 0;
	while (*p) {
		const char *kw, *val;
		size_t kwlen;

		if (*p != ' ' || p[1] == '\0' || p[1] == ' ') {
			reply(s, "501 5.5.4 Syntax error in the parameters");
			return;
		}
		kw = ++p;
		while (*p && *p != ' ' && *p != '=')
			p++;
		kwlen = (size_t)(p - kw);
		val = NULL;
		if (*p == '=') {
			val = ++p;
			while (*p && *p != ' ')
				p++;
		}
		if (kwlen == 4 && strncasecmp(kw, "SIZE", 4) == 0 && val && p > val) {
			unsigned long long v = 0;
			const char *q;

			for (q = val; q < p; q++) {
				if (*q < '0' || *q > '9' || q - val > 18) {	/* 19 digits: no overflow */
					reply(s, "501 5.5.4 Bad SIZE value");
					return;
				}
				v = v * 10 + (unsigned)(*q - '0');
			}
			if (v > s->conf->max_size) {
				reply(s, "552 5.3.4 Message size exceeds the limit of %zu bytes",
				    s->conf->max_size);
				return;
			}
			s->declared_size = (size_t)v;
		} else if (kwlen == 4 && strncasecmp(kw, "AUTH", 4) == 0 && val && p > val) {
			;	/* RFC 4954 5: the submitter's identity; not kept */
		} else if (kwlen == 4 && strncasecmp(kw, "BODY", 4) == 0 && val &&
		    (((size_t)(p - val) == 4 && strncasecmp(val, "7BIT", 4) == 0) ||
		     ((size_t)(p - val) == 8 && strncasecmp(val, "8BITMIME", 8) == 0))) {
			;	/* both stored as they come */
		} else {
			reply(s, "555 5.5.4 Unsupported MAIL parameter");
			return;
		}
	}
	if ((why = envelope_addr_problem(s->sender.s ? s->sender.s : "", s->sender.len)) != NULL) {
		reply(s, "553 5.1.7 Bad sender address: %s", why);
		return;
	}
	s->state = ST_MAIL;
	reply(s, "250 2.1.0 Ok");
}

static void
cmd_rcpt(struct session *s, const char *arg)
{
	struct buf a = BUF_INIT;
	const char *p, *why;
	size_t used;

	if (s->state == ST_GREET || s->state == ST_READY) {
		reply(s, "503 5.5.1 Need MAIL before RCPT");
		return;
	}
	if (!s->relay_ok) {
		reply(s, "550 5.7.1 Relaying denied for %s", s->addr);
		return;
	}
	if ((p = after_word(arg, "TO:")) == NULL) {
		reply(s, "501 5.5.4 Syntax: RCPT TO:<address>");
		return;
	}
	if (smtp_path_parse(p, PATH_POSTMASTER, &a, &used, &why) < 0) {
		reply(s, "553 5.1.3 Bad recipient address: %s", why);
		goto out;
	}
	if (p[used] != '\0') {
		reply(s, "555 5.5.4 RCPT parameters are not supported");
		goto out;
	}
	if ((why = envelope_addr_problem(a.s, a.len)) != NULL) {
		reply(s, "553 5.1.3 Bad recipient address: %s", why);
		goto out;
	}
	if (s->nrcpt >= s->conf->max_rcpt) {
		reply(s, "452 4.5.3 Too many recipients");
		goto out;
	}
	s->rcpt = xrealloc(s->rcpt, (s->nrcpt + 1) * sizeof *s->rcpt);
	s->rcpt[s->nrcpt++] = xstrdup(a.s);
	s->state = ST_RCPT;
	reply(s, "250 2.1.5 Ok");
out:
	buf_free(&a);
}

static void
received(struct session *s, struct qq_child *qq)
{
	struct buf h = BUF_INIT;
	char date[DATE_RFC5322_MAX];

	date_rfc5322(date, time(NULL));
	buf_adds(&h, "Received: from ");
	buf_add_oneline(&h, s->helo, strlen(s->helo));
	buf_printf(&h, " ([%s])\n\tby %s (weir-smtpd) with %s%s", s->addr,
	    s->conf->hostname, s->esmtp ? "ESMTP" : "SMTP", s->tls ? "S" : "");
	if (s->authuser)
		buf_addc(&h, 'A');
	if (s->tls || s->authuser)
		buf_printf(&h, " (%s%s%s)", s->tls ? s->tlsinfo.s : "",
		    s->tls && s->authuser ? ", " : "", s->authuser ? "authenticated" : "");
	buf_printf(&h, ";\n\t%s\n", date);
	qq_put(qq, h.s, h.len);
	buf_free(&h);
}

/* DATA: 0 the session goes on, -1 it ends. */
static int
cmd_data(struct session *s, const char *arg)
{
	struct qq_child qq;
	struct dataend de;
	struct buf out = BUF_INIT, why = BUF_INIT;
	enum de_status st = DE_MORE;
	enum rd r;
	int code, rc = 0;
	uint64_t start;
	size_t total = 0;

	if (*arg) {
		reply(s, "501 5.5.4 DATA takes no argument");
		return 0;
	}
	if (s->state != ST_RCPT) {
		reply(s, "503 5.5.1 %s", s->state == ST_MAIL ? "Need RCPT before DATA"
		    : "Need MAIL before DATA");
		return 0;
	}
	if (qq_start_any(&qq, s->conf->qqsock, s->conf->qqprog, &why) < 0) {
		log_warnx("%s: %s", s->addr, why.s);
		reply(s, "451 4.3.0 Cannot queue the message now, try again later");
		txn_reset(s);
		buf_free(&why);
		return 0;
	}
	reply(s, "354 End data with <CR><LF>.<CR><LF>");
	received(s, &qq);
	dataend_init(&de, s->conf->max_size);
	/* The whole of DATA: timeout, plus 1 s per min_data_rate bytes. */
	start = clock_mono_ms() + (uint64_t)s->conf->timeout_ms;
	s->deadline = start;
	while (st == DE_MORE) {
		size_t used;

		if ((r = fill(s)) != RD_OK)
			break;
		st = dataend_feed(&de, s->rbuf + s->rpos, s->rlen - s->rpos, &used, &out);
		s->rpos += used;
		total += used;
		s->deadline = start + (uint64_t)(total * 1000 / s->conf->min_data_rate);
		if (out.len > 0 && de.flags == 0)
			qq_put(&qq, out.s, out.len);
		buf_reset(&out);
	}
	buf_free(&out);
	if (st == DE_MORE) {
		qq_cancel(&qq);
		log_warnx("%s: %s during DATA: nothing queued", s->addr,
		    r == RD_TIMEOUT ? "timeout" : r == RD_EOF ? "disconnected" : "read error");
		if (r == RD_TIMEOUT)
			reply(s, "421 4.4.2 %s Timeout, closing", s->conf->hostname);
		rc = -1;
		goto out;
	}
	if (st == DE_BARE_CR || st == DE_BARE_LF) {
		qq_cancel(&qq);
		log_warnx("%s: bare %s in DATA: message refused, closing", s->addr,
		    st == DE_BARE_CR ? "CR" : "LF");
		reply(s, "554 5.6.0 Bare %s in the message: lines must end with CRLF "
		    "(RFC 5321 2.3.8); closing", st == DE_BARE_CR ? "CR" : "LF");
		close_after(s);
		rc = -1;
		goto out;
	}
	if (de.flags) {
		qq_cancel(&qq);
		if (de.flags & DE_OVERSIZE)
			reply(s, "552 5.3.4 Message size exceeds the limit of %zu bytes",
			    s->conf->max_size);
		else if (de.flags & DE_TOOLONG)
			reply(s, "554 5.6.0 A line is longer than %d bytes", DE_LINE_MAX);
		else
			reply(s, "554 5.6.0 NUL byte in the message");
		log_warnx("%s: message refused (flags %d), nothing queued", s->addr, de.flags);
		goto reset;
	}
	code = qq_finish(&qq, s->sender.s ? s->sender.s : "", s->rcpt, s->nrcpt, &why);
	if (code == 0) {
		s->msgs++;
		s->junk = 0;
		log_info("msg %s: queued from <%s>, %zu recipient(s), %zu bytes, client %s",
		    qq.id[0] ? qq.id : "?", s->sender.s ? s->sender.s : "", s->nrcpt, de.size,
		    s->addr);
		if (qq.id[0])
			reply(s, "250 2.0.0 Ok: queued as %s", qq.id);
		else
			reply(s, "250 2.0.0 Ok: queued");
	} else if (qq_permanent(code)) {
		log_warnx("%s: %s", s->addr, why.s);
		reply(s, "554 5.3.0 Queueing refused: %s", qq_describe(code));
	} else {
		log_warnx("%s: %s", s->addr, why.s);
		reply(s, "451 4.3.0 Temporary queue failure: %s", qq_describe(code));
	}
reset:
	txn_reset(s);
out:
	buf_free(&why);
	return rc;
}

/* STARTTLS: 0 the session goes on (again from GREET), -1 it ends. */
static int
cmd_starttls(struct session *s, const char *arg)
{
	struct buf why = BUF_INIT;

	if (s->conf->tls == NULL) {
		reply(s, "502 5.5.1 STARTTLS is not available");
		return 0;
	}
	if (s->tls) {
		reply(s, "503 5.5.1 TLS is already active");
		return 0;
	}
	if (*arg) {
		reply(s, "501 5.5.4 STARTTLS takes no argument");
		return 0;
	}
	if (s->rpos < s->rlen) {
		log_warnx("%s: commands pipelined after STARTTLS: closing", s->addr);
		reply(s, "554 5.5.0 Commands after STARTTLS before the handshake; closing");
		close_after(s);
		return -1;
	}
	reply(s, "220 2.0.0 Ready to start TLS");
	flush_out(s);
	if (s->dead)
		return -1;
	s->tls = tls_accept(s->conf->tls, s->in, s->out, s->conf->timeout_ms, &why);
	if (s->tls == NULL) {
		log_warnx("%s: %s", s->addr, why.s);
		buf_free(&why);
		s->dead = 1;
		return -1;
	}
	tls_conn_describe(s->tls, &s->tlsinfo);
	log_info("%s: TLS started: %s", s->addr, s->tlsinfo.s);
	txn_reset(s);
	s->state = ST_GREET;
	free(s->helo);
	s->helo = NULL;
	s->esmtp = 0;
	free(s->authuser);	/* RFC 3207 4.2: forget what was said in clear */
	s->authuser = NULL;
	s->relay_ok = s->conf->local || relay_allowed(s->conf, s->addr);
	buf_free(&why);
	return 0;
}

/* One AUTH continuation line, decoded.  0 ok; 1 the client cancelled or
 * sent bad base64 (replied); -1 the session ends. */
static int
auth_read(struct session *s, struct buf *line, struct buf *out)
{
	enum cmdline cl;

	if (read_cmd(s, line, &cl) != RD_OK)
		return -1;
	if (cl == CL_BARE) {
		reply(s, "500 5.5.2 Lines must end with CRLF; closing");
		close_after(s);
		return -1;
	}
	if (cl != CL_OK) {
		reply(s, "500 5.5.6 Authentication exchange line too long");
		return 1;
	}
	if (strcmp(buf_cstr(line), "*") == 0) {
		reply(s, "501 5.0.0 Authentication cancelled");
		return 1;
	}
	if (b64_decode(line->s, line->len, out) < 0) {
		reply(s, "501 5.5.2 Cannot decode the response (base64)");
		return 1;
	}
	return 0;
}

/* AUTH: 0 the session goes on, -1 it ends. */
static int
cmd_authenticate(struct session *s, const char *arg)
{
	struct buf line = BUF_INIT, resp = BUF_INIT, user = BUF_INIT, pass = BUF_INIT, why = BUF_INIT;
	const char *ir = NULL, *p;
	int plain, rc = 0, r;
	size_t mlen = strcspn(arg, " ");

	if (s->conf->password_file == NULL) {
		reply(s, "502 5.5.1 AUTH is not available");
		goto out;
	}
	if (s->state == ST_GREET) {
		reply(s, "503 5.5.1 Send EHLO first");
		goto out;
	}
	if (s->state != ST_READY) {
		reply(s, "503 5.5.1 AUTH is not allowed during a transaction");
		goto out;
	}
	if (s->authuser) {
		reply(s, "503 5.5.1 Already authenticated");
		goto out;
	}
	if (!s->tls && !s->loopback) {
		reply(s, "538 5.7.11 Encryption required: use STARTTLS first");
		goto out;
	}
	if (mlen == 5 && strncasecmp(arg, "PLAIN", 5) == 0)
		plain = 1;
	else if (mlen == 5 && strncasecmp(arg, "LOGIN", 5) == 0)
		plain = 0;
	else {
		reply(s, "504 5.5.4 Unrecognized authentication mechanism");
		goto out;
	}
	if (arg[mlen] == ' ')
		ir = arg + mlen + 1;
	/* The first response: on the AUTH line, or asked for. */
	if (ir && strcmp(ir, "=") == 0)
		buf_reset(&resp);
	else if (ir && b64_decode(ir, strlen(ir), &resp) < 0) {
		reply(s, "501 5.5.2 Cannot decode the response (base64)");
		goto out;
	} else if (ir == NULL) {
		reply(s, plain ? "334 " : "334 VXNlcm5hbWU6");	/* "Username:" */
		if ((r = auth_read(s, &line, &resp)) != 0) {
			rc = r < 0 ? -1 : 0;
			goto out;
		}
	}
	if (plain) {
		/* authzid NUL authcid NUL passwd; authzid empty or authcid. */
		const char *n1 = memchr(resp.s ? resp.s : "", '\0', resp.len), *n2;

		n2 = n1 ? memchr(n1 + 1, '\0', resp.len - (size_t)(n1 + 1 - resp.s)) : NULL;
		if (n1 == NULL || n2 == NULL ||
		    memchr(n2 + 1, '\0', resp.len - (size_t)(n2 + 1 - resp.s)) != NULL) {
			reply(s, "501 5.5.2 Malformed PLAIN response");
			goto out;
		}
		buf_add(&user, n1 + 1, (size_t)(n2 - n1 - 1));
		buf_add(&pass, n2 + 1, resp.len - (size_t)(n2 + 1 - resp.s));
		if (n1 != resp.s && ((size_t)(n1 - resp.s) != user.len ||
		    memcmp(resp.s, user.s, user.len) != 0)) {
			reply(s, "535 5.7.8 Authorization identity not allowed");
			goto out;
		}
	} else {
		buf_add(&user, resp.s, resp.len);
		reply(s, "334 UGFzc3dvcmQ6");		/* "Password:" */
		if ((r = auth_read(s, &line, &pass)) != 0) {
			rc = r < 0 ? -1 : 0;
			goto out;
		}
	}
	for (p = buf_cstr(&user); *p; p++)
		if ((unsigned char)*p <= ' ' || *p == ':' || (unsigned char)*p == 0x7f)
			break;
	if (user.len == 0 || *p != '\0' || user.len > 255 ||
	    memchr(buf_cstr(&pass), '\0', pass.len) != NULL) {
		reply(s, "535 5.7.8 Authentication credentials invalid");
		log_warnx("%s: AUTH with a malformed user name or password", s->addr);
		goto out;
	}
	switch (pw_check(s->conf->password_file, user.s, buf_cstr(&pass), &why)) {
	case PW_OK:
		s->authuser = xstrdup(user.s);
		s->relay_ok = 1;
		log_info("%s: authenticated as %s", s->addr, user.s);
		reply(s, "235 2.7.0 Authentication successful");
		break;
	case PW_BAD:
		log_warnx("%s: AUTH failed for user \"%s\"", s->addr, user.s);
		reply(s, "535 5.7.8 Authentication credentials invalid");
		break;
	case PW_TROUBLE:
		log_warnx("%s: AUTH: %s", s->addr, why.s);
		reply(s, "454 4.7.0 Temporary authentication failure");
		break;
	}
out:
	if (pass.s)
		explicit_bzero(pass.s, pass.cap);
	if (resp.s)
		explicit_bzero(resp.s, resp.cap);
	if (line.s)
		explicit_bzero(line.s, line.cap);
	buf_free(&line);
	buf_free(&resp);
	buf_free(&user);
	buf_free(&pass);
	buf_free(&why);
	return rc;
}

/* ---- the command loop ---- */

/* Is the verb of line (up to a space or its end) cmd?  *arg: what follows. */
static int
verb(const char *line, const char *cmd, const char **arg)
{
	size_t n = strlen(cmd);

	if (strncasecmp(line, cmd, n) != 0 || (line[n] != ' ' && line[n] != '\0'))
		return 0;
	*arg = line[n] == ' ' ? line + n + 1 : line + n;
	return 1;
}

/* NOOP, RSET, HELP, VRFY or an unknown command: 1 if one too many. */
static int
junk(struct session *s)
{
	if (++s->junk <= s->conf->junk_limit)
		return 0;
	reply(s, "421 4.7.0 %s Too many NOOP, RSET, HELP, VRFY or unknown commands, closing",
	    s->conf->hostname);
	log_warnx("%s: junk command limit (%u) reached: closing", s->addr, s->conf->junk_limit);
	return 1;
}

static int
is_junk(const char *line)
{
	static const char *const known[] = { "EHLO", "HELO", "MAIL", "RCPT", "DATA", "QUIT",
		"EXPN", "STARTTLS", "AUTH", NULL };
	const char *arg;
	size_t i;

	for (i = 0; known[i]; i++)
		if (verb(line, known[i], &arg))
			return 0;
	return 1;
}

/* 0 the session goes on; 1 it ends with QUIT; -1 it ends otherwise. */
static int
command(struct session *s, const char *line)
{
	const char *arg;

	if (is_junk(line) && junk(s))
		return -1;
	if (verb(line, "EHLO", &arg))
		cmd_helo(s, arg, 1);
	else if (verb(line, "HELO", &arg))
		cmd_helo(s, arg, 0);
	else if (verb(line, "MAIL", &arg))
		cmd_mail(s, arg);
	else if (verb(line, "RCPT", &arg))
		cmd_rcpt(s, arg);
	else if (verb(line, "DATA", &arg))
		return cmd_data(s, arg);
	else if (verb(line, "RSET", &arg)) {
		if (*arg)
			reply(s, "501 5.5.4 RSET takes no argument");
		else {
			txn_reset(s);
			reply(s, "250 2.0.0 Ok");
		}
	} else if (verb(line, "NOOP", &arg))
		reply(s, "250 2.0.0 Ok");
	else if (verb(line, "QUIT", &arg)) {
		if (*arg) {
			reply(s, "501 5.5.4 QUIT takes no argument");
			return 0;
		}
		reply(s, "221 2.0.0 %s Bye", s->conf->hostname);
		return 1;
	} else if (verb(line, "VRFY", &arg)) {
		if (*arg == '\0')
			reply(s, "501 5.5.4 Syntax: VRFY address");
		else
			reply(s, "252 2.0.0 Cannot VRFY, but will take a message for it");
	} else if (verb(line, "HELP", &arg))
		reply(s, "214 2.0.0 EHLO HELO MAIL RCPT DATA RSET NOOP VRFY QUIT");
	else if (verb(line, "EXPN", &arg))
		reply(s, "502 5.5.1 EXPN is not implemented");
	else if (verb(line, "STARTTLS", &arg))
		return cmd_starttls(s, arg);
	else if (verb(line, "AUTH", &arg))
		return cmd_authenticate(s, arg);
	else
		reply(s, "500 5.5.2 Command not recognized");
	return 0;
}

int
smtpd_session(const struct smtpd_conf *conf, int infd, int outfd, const char *addr)
{
	struct session s;
	struct buf line = BUF_INIT;
	enum cmdline cl;
	struct pollfd p = { infd, POLLIN, 0 };
	int rc = 1, c, pause, pr;
	enum rd r;

	memset(&s, 0, sizeof s);
	s.conf = conf;
	s.in = infd;
	s.out = outfd;
	s.addr = addr;
	s.relay_ok = conf->local || relay_allowed(conf, addr);
	s.loopback = is_loopback(addr);
	s.state = ST_GREET;
	if (fd_nonblock(infd, 1) < 0 || fd_nonblock(outfd, 1) < 0)
		log_warn("%s: cannot make the connection non-blocking", addr);
	log_info("%s: connected%s", addr, s.relay_ok ? "" : " (may not relay)");
	/* Talking before the greeting: a spammer or a confused client.  The
	 * pause gives its early bytes time to arrive.  A local user's
	 * session (sendmail -bs) may talk first. */
	pr = 0;
	if (!conf->local) {
		pause = !s.loopback || conf->greet_pause_loopback ? conf->greet_pause_ms : 0;
		while ((pr = poll(&p, 1, pause)) < 0 && errno == EINTR)
			;
	}
	if (pr > 0 && (p.revents & POLLIN)) {
		reply(&s, "554 5.5.0 %s Talking before the greeting; closing", conf->hostname);
		log_warnx("%s: sent data before the greeting", addr);
		close_after(&s);
		goto out;
	}
	reply(&s, "220 %s ESMTP weir", conf->hostname);
	for (;;) {
		if ((r = read_cmd(&s, &line, &cl)) != RD_OK) {
			if (r == RD_TIMEOUT) {
				reply(&s, "421 4.4.2 %s Timeout, closing", conf->hostname);
				log_warnx("%s: timeout", addr);
			}
			break;
		}
		if (cl == CL_BARE) {
			reply(&s, "500 5.5.2 Command lines must end with CRLF; closing");
			log_warnx("%s: bare CR or LF in a command: closing", addr);
			close_after(&s);
			break;
		}
		if (cl == CL_TOOLONG)
			reply(&s, "500 5.5.2 Command line longer than %d bytes", CMD_MAX);
		else if (cl == CL_NUL)
			reply(&s, "500 5.5.2 NUL byte in a command");
		else if ((c = command(&s, buf_cstr(&line))) != 0) {
			rc = c > 0 && !s.dead ? 0 : 1;
			break;
		}
		if (s.errors >= conf->max_errors) {
			reply(&s, "421 4.7.0 %s Too many errors, closing", conf->hostname);
			log_warnx("%s: too many errors: closing", addr);
			break;
		}
		if (s.dead)
			break;
	}
out:
	flush_out(&s);
	log_info("%s: disconnected, %lu message(s) queued", addr, s.msgs);
	txn_reset(&s);
	free(s.helo);
	tls_conn_free(s.tls);
	free(s.authuser);
	buf_free(&s.tlsinfo);
	buf_free(&s.sender);
	buf_free(&s.wbuf);
	buf_free(&line);
	return rc;
}
