/*
 * sendmail.c: sendmail_run(), the injection: header, envelope, weir-queue.
 * See sendmail.h for the interface and exit codes.
 *
 * Order: everything that can be refused (options, addresses, the header)
 * is checked before weir-queue starts, so a refused message leaves no
 * trace in the queue; then the header goes out, then the body streams
 * from stdin to weir-queue, then the envelope.
 *
 * Added when missing, in this order before the message's own header:
 * Date, Message-ID, From.  Bcc is always removed (its addresses are
 * recipients only with -t).  Duplicate recipients are sent once.
 */
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/timefmt.h"
#include "mail/address.h"
#include "mail/envelope.h"
#include "sendmail/input.h"
#include "mail/qqclient.h"
#include "mail/qqcode.h"
#include "sendmail/sendmail.h"

struct job {
	const struct sm_opts *o;
	const struct weir_config *cfg;
	struct sm_header h;
	struct buf sender;	/* envelope sender, qualified */
	struct buf login;	/* the user's own address, for From: */
	char *gecos;		/* full name from the passwd entry, or NULL */
	struct addrlist rcpt;
	int has_date, has_msgid, has_from;
};

/* The invoking user: login@hostname and the GECOS name. */
static int
who_am_i(struct job *j, struct buf *why)
{
	struct passwd *pw;
	const char *name = NULL;
	char *comma;

	errno = 0;
	pw = getpwuid(getuid());
	if (pw && pw->pw_name && *pw->pw_name) {
		name = pw->pw_name;
		if (pw->pw_gecos && *pw->pw_gecos) {
			struct buf g = BUF_INIT;
			const char *s;

			/* Up to the first comma; '&' is the login name, capitalised. */
			comma = strchr(pw->pw_gecos, ',');
			for (s = pw->pw_gecos; *s && s != comma; s++) {
				if (*s == '&') {
					buf_addc(&g, (char)(name[0] >= 'a' && name[0] <= 'z' ?
					    name[0] - 'a' + 'A' : name[0]));
					buf_adds(&g, name + 1);
				} else {
					buf_addc(&g, *s);
				}
			}
			if (g.len > 0)
				j->gecos = xstrdup(g.s);
			buf_free(&g);
		}
	} else {
		name = getenv("LOGNAME");
		if (name == NULL || *name == '\0')
			name = getenv("USER");
	}
	if (name == NULL || *name == '\0')
		return 0;	/* an error only if we need it: build_sender() */
	if (addr_parse_one(name, 0, j->cfg->hostname, &j->login, why) < 0) {
		buf_reset(why);
		buf_printf(why, "the login name %s is not usable as an address", name);
		return EX_NOUSER;
	}
	return 0;
}

/* An address for a message: control bytes shown as \n or \xNN. */
static const char *
shown(struct buf *b, const char *s)
{
	buf_reset(b);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\n')
			buf_adds(b, "\\n");
		else if (c < 0x20 || c == 0x7f)
			buf_printf(b, "\\x%02x", c);
		else
			buf_addc(b, (char)c);
	}
	return buf_cstr(b);
}

static int
check_addr(const char *what, const char *addr, struct buf *why, int code)
{
	const char *p = envelope_addr_problem(addr, strlen(addr));
	struct buf s = BUF_INIT;

	if (p == NULL)
		return 0;
	buf_printf(why, "bad %s address %s: %s", what, shown(&s, addr), p);
	buf_free(&s);
	return code;
}

static int
build_sender(struct job *j, struct buf *why)
{
	struct buf w = BUF_INIT, s = BUF_INIT;

	if (j->o->sender == NULL) {
		if (j->login.len == 0) {
			buf_printf(why, "cannot find the login name of uid %lu (use -f)",
			    (unsigned long)getuid());
			return EX_NOUSER;
		}
		buf_adds(&j->sender, j->login.s);
	} else if (addr_parse_one(j->o->sender, 1, j->cfg->hostname, &j->sender, &w) < 0) {
		buf_printf(why, "bad sender address %s: %s", shown(&s, j->o->sender),
		    buf_cstr(&w));
		buf_free(&w);
		buf_free(&s);
		return EX_USAGE;
	}
	buf_free(&w);
	return check_addr("sender", buf_cstr(&j->sender), why, EX_USAGE);
}

static int
command_line_rcpts(struct job *j, struct buf *why)
{
	struct buf a = BUF_INIT, w = BUF_INIT, s = BUF_INIT;
	size_t i;
	int rc = 0;

	for (i = 0; i < j->o->nrcpt && rc == 0; i++) {
		if (addr_parse_one(j->o->rcpt[i], 0, j->cfg->hostname, &a, &w) < 0) {
			buf_printf(why, "bad recipient address %s: %s", shown(&s, j->o->rcpt[i]),
			    buf_cstr(&w));
			rc = EX_USAGE;
		} else {
			addrlist_add(&j->rcpt, a.s, a.len);
		}
	}
	buf_free(&a);
	buf_free(&w);
	buf_free(&s);
	return rc;
}

/* Look at each field: note the ones we would add, collect -t's
 * recipients, check them. */
static int
scan_header(struct job *j, struct buf *why)
{
	struct buf w = BUF_INIT;
	const char *v;
	size_t i, len, first;
	int rc = 0;

	for (i = 0; i < j->h.n && rc == 0; i++) {
		if (sm_field_is(&j->h, i, "date"))
			j->has_date = 1;
		else if (sm_field_is(&j->h, i, "message-id"))
			j->has_msgid = 1;
		else if (sm_field_is(&j->h, i, "from"))
			j->has_from = 1;
		if (!j->o->extract)
			continue;
		if (!sm_field_is(&j->h, i, "to") && !sm_field_is(&j->h, i, "cc") &&
		    !sm_field_is(&j->h, i, "bcc"))
			continue;
		sm_field_value(&j->h, i, &v, &len);
		first = j->rcpt.n;
		if (addr_parse_list(v, len, j->cfg->hostname, &j->rcpt, &w) < 0) {
			buf_printf(why, "bad address in the %.*s header: %s",
			    (int)j->h.f[i].namelen, j->h.text.s + j->h.f[i].off, buf_cstr(&w));
			rc = EX_DATAERR;
			break;
		}
		for (; first < j->rcpt.n && rc == 0; first++)
			rc = check_addr("recipient", j->rcpt.v[first], why, EX_DATAERR);
	}
	buf_free(&w);
	return rc;
}

static uint64_t
fnv1a(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* Drop exact duplicates, keeping the first of each, in order. */
static void
dedup(struct addrlist *l)
{
	size_t size = 16, i, k, out = 0;
	char **slot;

	while (size < l->n * 2)
		size *= 2;
	slot = xcalloc(size, sizeof *slot);
	for (i = 0; i < l->n; i++) {
		for (k = fnv1a(l->v[i]) & (size - 1); slot[k]; k = (k + 1) & (size - 1))
			if (strcmp(slot[k], l->v[i]) == 0)
				break;
		if (slot[k]) {
			free(l->v[i]);
			continue;
		}
		slot[k] = l->v[i];
		l->v[out++] = l->v[i];
	}
	l->n = out;
	free(slot);
}

/* "Name" with '"' and '\\' escaped and control bytes dropped, cut at
 * NAME_MAX bytes of name (at a character boundary in UTF-8 text). */
#define NAME_MAX_BYTES 200
static void
add_quoted(struct buf *b, const char *s)
{
	size_t n = strlen(s), i;

	if (n > NAME_MAX_BYTES) {
		n = NAME_MAX_BYTES;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;	/* s[n] continues a character: cut before it */
	}
	buf_addc(b, '"');
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			continue;
		if (c == '"' || c == '\\')
			buf_addc(b, '\\');
		buf_addc(b, (char)c);
	}
	buf_addc(b, '"');
}

static void
message_id(struct buf *b, const char *host)
{
	unsigned char rnd[8];
	struct timespec ts;
	struct tm tm;
	uint64_t r = 0;
	size_t i;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) == (ssize_t)sizeof rnd) {
		for (i = 0; i < sizeof rnd; i++)
			r = r << 8 | rnd[i];
	} else {
		/* No entropy yet (early boot): time and pid still make it unique here. */
		r = (uint64_t)ts.tv_nsec << 20 ^ (uint64_t)getpid();
	}
	gmtime_r(&ts.tv_sec, &tm);
	buf_printf(b, "Message-ID: <%04d%02d%02d%02d%02d%02d.%ld.%016llx@%s>\n",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    (long)getpid(), (unsigned long long)r, host);
}

/* The header fields we add, in order. */
static void
added_fields(const struct job *j, struct buf *b)
{
	char date[DATE_RFC5322_MAX];
	const char *name = j->o->fullname ? j->o->fullname : j->gecos;
	/* The From: address is the sender's, or the user's for a null sender. */
	const char *from = j->sender.len ? j->sender.s : j->login.len ? j->login.s : NULL;

	if (!j->has_date) {
		date_rfc5322(date, time(NULL));
		buf_printf(b, "Date: %s\n", date);
	}
	if (!j->has_msgid)
		message_id(b, j->cfg->hostname);
	if (!j->has_from) {
		buf_adds(b, "From: ");
		if (from == NULL)	/* -f '' by a user without a login name */
			buf_printf(b, "MAILER-DAEMON@%s\n", j->cfg->hostname);
		else if (name && *name) {
			size_t start = b->len - 6;	/* "From: " */

			add_quoted(b, name);
			/* Folded before the address when one line would be too long. */
			buf_printf(b, "%s<%s>\n", b->len - start + 2 + strlen(from) + 1 >
			    HDR_LINE_MAX ? "\n " : " ", from);
		} else {
			buf_printf(b, "%s\n", from);
		}
	}
}

/* The From: weir adds holds the address on one line: refuse an address
 * too long for that (longer than RFC 5321 allows by far), rather than
 * write a header line longer than 998 bytes. */
static int
from_fits(const struct job *j, struct buf *why)
{
	size_t n = j->sender.len ? j->sender.len : j->login.len;

	if (n + 6 <= HDR_LINE_MAX)	/* "From: address" */
		return 0;
	buf_printf(why, "the sender address is %zu bytes, too long for the From: header "
	    "weir would add; give the message a From: header", n);
	return EX_USAGE;
}

/* Header out to weir-queue, then the body streamed. */
static int
send_message(struct job *j, struct sm_reader *rd, struct qq_child *c, struct buf *why)
{
	struct buf add = BUF_INIT;
	size_t i;
	int ch;

	added_fields(j, &add);
	qq_put(c, add.s, add.len);
	buf_free(&add);
	for (i = 0; i < j->h.n; i++)
		if (!sm_field_is(&j->h, i, "bcc"))
			qq_put(c, j->h.text.s + j->h.f[i].off, j->h.f[i].len);
	qq_put(c, j->h.body.s ? j->h.body.s : "", j->h.body.len);
	for (;;) {
		ch = rd_get(rd);
		if (ch >= 0)
			qq_putc(c, (char)ch);
		else if (ch == RD_NL)
			qq_putc(c, '\n');
		else if (ch == RD_END)
			return 0;
		else {
			buf_printf(why, "read error on standard input: %s", strerror(rd->err));
			return EX_IOERR;
		}
		/* weir-queue has gone: stop copying, its exit code tells why. */
		if (c->werr)
			return 0;
	}
}

int
sendmail_run(const struct sm_opts *o, const struct weir_config *cfg)
{
	struct job j;
	struct buf why = BUF_INIT;
	struct sm_reader *rd = xmalloc(sizeof *rd);
	struct qq_child c;
	int rc;

	memset(&j, 0, sizeof j);
	j.o = o;
	j.cfg = cfg;
	signal(SIGPIPE, SIG_IGN);
	if (!o->extract && o->nrcpt == 0) {
		rc = EX_USAGE;
		buf_adds(&why, "no recipients given");
		goto out;
	}
	if ((rc = who_am_i(&j, &why)) != 0 || (rc = build_sender(&j, &why)) != 0 ||
	    (rc = command_line_rcpts(&j, &why)) != 0)
		goto out;
	for (size_t i = 0; i < j.rcpt.n; i++)
		if ((rc = check_addr("recipient", j.rcpt.v[i], &why, EX_USAGE)) != 0)
			goto out;
	rd_init(rd, STDIN_FILENO, o->dot_ends);
	if ((rc = sm_read_header(rd, &j.h, &why)) != 0 || (rc = scan_header(&j, &why)) != 0)
		goto out;
	if (!j.has_from && (rc = from_fits(&j, &why)) != 0)
		goto out;
	dedup(&j.rcpt);
	if (j.rcpt.n == 0) {
		rc = EX_USAGE;
		buf_adds(&why, "no recipients given");
		goto out;
	}
	if (qq_start_any(&c, qq_socket_path(cfg->queue_socket), qq_program(), &why) != 0) {
		rc = EX_TEMPFAIL;
		goto out;
	}
	if ((rc = send_message(&j, rd, &c, &why)) != 0) {
		qq_abort(&c);	/* a truncated message must not be queued */
		goto out;
	}
	/* -N never: from the null sender, which nobody bounces to. */
	rc = qq_finish(&c, o->no_bounce ? "" : buf_cstr(&j.sender), j.rcpt.v, j.rcpt.n, &why);
	if (rc != 0)
		rc = qq_permanent(rc) ? EX_DATAERR : EX_TEMPFAIL;
	else if (o->verbose)
		printf("queued as %s\n", c.id[0] ? c.id : "(no id: not weir-queue)");
out:
	if (rc != 0)
		sm_say("%s", buf_cstr(&why));
	buf_free(&why);
	sm_header_free(&j.h);
	buf_free(&j.sender);
	buf_free(&j.login);
	free(j.gecos);
	addrlist_free(&j.rcpt);
	free(rd);
	return rc;
}

/* Is this qualified address for this host (weir-send hands it to the
 * admin address)? */
static int
is_local(const char *addr, const char *hostname)
{
	const char *at = strrchr(addr, '@');

	return at == NULL || strcasecmp(at + 1, hostname) == 0 ||
	    strcasecmp(at + 1, "localhost") == 0;
}

static void
say_upstream(struct buf *b, const struct weir_upstream *u)
{
	unsigned port = u->port ? u->port : u->tls == UP_TLS_SMTPS ? 465 :
	    u->tls == UP_TLS_NONE ? 25 : 587;

	buf_printf(b, "upstream \"%s\" (%s:%u)", u->name, u->host ? u->host : "no host set",
	    port);
}

int
sm_verify_run(const struct sm_opts *o, const struct weir_config *cfg)
{
	const struct weir_upstream *u;
	struct job j;
	struct buf why = BUF_INIT, out = BUF_INIT;
	size_t i;
	int rc;

	memset(&j, 0, sizeof j);
	j.o = o;
	j.cfg = cfg;
	if ((rc = who_am_i(&j, &why)) != 0 || (rc = build_sender(&j, &why)) != 0 ||
	    (rc = command_line_rcpts(&j, &why)) != 0)
		goto out;
	u = config_upstream_for(cfg, buf_cstr(&j.sender));
	for (i = 0; i < j.rcpt.n; i++) {
		buf_reset(&out);
		buf_printf(&out, "%s: ", j.rcpt.v[i]);
		if (check_addr("recipient", j.rcpt.v[i], &why, EX_USAGE) != 0) {
			buf_printf(&out, "not deliverable: %s", buf_cstr(&why));
			buf_reset(&why);
			rc = EX_NOUSER;
		} else if (u == NULL) {
			buf_printf(&out, "not deliverable: %s has no upstream for the sender <%s>",
			    cfg->file ? cfg->file : "weir.conf", buf_cstr(&j.sender));
			rc = EX_UNAVAILABLE;
		} else {
			if (is_local(j.rcpt.v[i], cfg->hostname))
				buf_printf(&out, "local, to the admin address <%s>, ", cfg->admin);
			buf_adds(&out, "deliverable through ");
			say_upstream(&out, u);
			buf_printf(&out, " for the sender <%s>", buf_cstr(&j.sender));
		}
		buf_addc(&out, '\n');
		if (full_write(STDOUT_FILENO, out.s, out.len) < 0) {
			buf_printf(&why, "write to standard output: %s", strerror(errno));
			rc = EX_IOERR;
			goto out;
		}
	}
out:
	if (why.len)
		sm_say("%s", buf_cstr(&why));
	buf_free(&why);
	buf_free(&out);
	buf_free(&j.sender);
	buf_free(&j.login);
	free(j.gecos);
	addrlist_free(&j.rcpt);
	return rc;
}
