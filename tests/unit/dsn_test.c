/*
 * dsn_test.c: bounces (src/send/dsn.c).  dsn_build(): the RFC 3464
 * multipart/report (report-type=delivery-status) with a text part, a
 * message/delivery-status part (Reporting-MTA, Arrival-Date = info/'s
 * mtime, per recipient Final-Recipient, Action: failed, Status from the
 * enhanced code in the reply, 4.x.x reported as 5.x.x, 5.0.0 when
 * absent, Diagnostic-Code on one line of printable ASCII) and a
 * text/rfc822-headers part holding exactly the original header; notes
 * written by bounce_note() all come out as recipients.  dsn_send(): the
 * routing through the real weir-queue ($WEIR_BIN/weir-queue, with
 * $WEIR_QUEUE): <s> gets a bounce from <>, <> a double bounce from
 * <#@[]> to the admin, <#@[]> is dropped; bounce/N removed only once the
 * bounce is queued.  dsn_build_delayed(): the same three parts for a
 * delay warning: Subject, the text part's wording and the time weir
 * gives up, Action: delayed, Status 4.x.x (also for a 5.x.x code in a
 * temporary reply), no Diagnostic-Code for a recipient not tried yet,
 * Will-Retry-Until per recipient; dsn_send_delayed() queues it from <>
 * to the sender through the real weir-queue, never for <> or <#@[]>.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/timefmt.h"
#include "send/dsn.h"
#include "send/rcptfile.h"
#include "send_helpers.h"

#define S(x) x, sizeof(x) - 1
#define ARRIVAL 1700000000

static struct sht s;
static struct dsn_opts o;
static char *qqbin;

static void
setup(void)
{
	sh_setup(&s, NULL);
	o.hostname = SH_HOST;
	o.admin = SH_ADMIN;
	qqbin = tl_bin("weir-queue");
	o.qq_program = qqbin;
	o.now = time(NULL);
	/* weir-queue, run by dsn_send, finds the queue through these. */
	setenv("WEIR_QUEUE", s.qt.qdir, 1);
	setenv("WEIR_CONFIG", s.qt.conf, 1);
}

static void
teardown(void)
{
	free(qqbin);
	sh_teardown(&s);
}

TestSuite(dsn, .init = setup, .fini = teardown, .timeout = 60);

static const char orig[] =
    "Received: (weir 11 invoked by uid 1000); 21 Nov 2026 10:00:00 -0000\n"
    "From: Alice <alice@example.org>\n"
    "To: bob@example.net\n"
    "Subject: the original\n"
    "\tfolded\n"
    "\n"
    "Body line one.\n"
    "\n"
    "Body line two.\n";
static const char orig_header[] =
    "Received: (weir 11 invoked by uid 1000); 21 Nov 2026 10:00:00 -0000\n"
    "From: Alice <alice@example.org>\n"
    "To: bob@example.net\n"
    "Subject: the original\n"
    "\tfolded\n";

/* A message in S5 with all its recipients done and these bounce notes. */
static unsigned long
s5_msg(const char *sender, const char *mess, size_t mlen, const char *notes, size_t nlen)
{
	unsigned long id = sh_put_mess(&s, mess, mlen);
	struct buf info = BUF_INIT;
	char *ip;

	buf_addc(&info, 'F');
	buf_adds(&info, sender);
	buf_addc(&info, '\0');
	sh_write(&s, Q_INFO, id, info.s, info.len);
	ip = sh_qpath(&s, Q_INFO, id);
	sh_set_mtime(ip, ARRIVAL);
	sh_write(&s, Q_REMOTE, id, S("Dbob@example.net\0"));
	if (notes)
		sh_write(&s, Q_BOUNCE, id, notes, nlen);
	buf_free(&info);
	free(ip);
	return id;
}

/* ---- pulling the DSN apart ---- */

struct dsn {
	struct buf all;
	char *header;		/* the top-level header, up to the blank line */
	char *boundary;
	char *part[4];		/* each part: its header, blank line, body */
	int nparts;
	char *preamble;
};

static char *
dupn(const char *p, size_t n)
{
	char *r = xmalloc(n + 1);

	memcpy(r, p, n);
	r[n] = '\0';
	return r;
}

static void
split_dsn(struct dsn *d)
{
	const char *s0 = buf_cstr(&d->all), *hend, *b, *e, *p;
	char delim[128], close[128];

	hend = strstr(s0, "\n\n");
	cr_assert(hend, "no end of header in the DSN");
	d->header = dupn(s0, (size_t)(hend - s0) + 1);
	b = strstr(d->header, "boundary=\"");
	cr_assert(b, "no boundary in: %s", d->header);
	b += 10;
	e = strchr(b, '"');
	cr_assert(e);
	d->boundary = dupn(b, (size_t)(e - b));
	cr_assert(strlen(d->boundary) > 10 && strlen(d->boundary) < 70, "boundary \"%s\"",
	    d->boundary);
	snprintf(delim, sizeof delim, "\n--%s\n", d->boundary);
	snprintf(close, sizeof close, "\n--%s--\n", d->boundary);
	p = hend + 1;	/* so that the first delimiter's leading \n is found */
	e = strstr(p, delim);
	cr_assert(e, "no first part");
	d->preamble = dupn(hend + 2, (size_t)(e - hend - 1));
	d->nparts = 0;
	for (;;) {
		const char *start = e + strlen(delim), *next = strstr(start - 1, delim);
		const char *fin = strstr(start - 1, close);

		cr_assert(d->nparts < 4, "more than 4 parts");
		if (next && (!fin || next < fin)) {
			d->part[d->nparts++] = dupn(start, (size_t)(next - start));
			e = next;
			continue;
		}
		cr_assert(fin, "no closing delimiter");
		d->part[d->nparts++] = dupn(start, (size_t)(fin - start));
		cr_assert_str_eq(fin + strlen(close), "", "bytes after the closing delimiter");
		break;
	}
}

static void
build(unsigned long id, struct dsn *d)
{
	memset(d, 0, sizeof *d);
	cr_assert_eq(dsn_build(&s.q, id, &o, &d->all), 0);
	split_dsn(d);
}

static void
dsn_free(struct dsn *d)
{
	int i;

	buf_free(&d->all);
	free(d->header);
	free(d->boundary);
	free(d->preamble);
	for (i = 0; i < d->nparts; i++)
		free(d->part[i]);
}

static int
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
			return 1;
	return 0;
}

static void
want_status_part(const struct dsn *d, unsigned long id, const char *per_rcpt)
{
	char date[DATE_RFC5322_MAX];
	struct buf want = BUF_INIT;

	date_rfc5322(date, ARRIVAL);
	buf_printf(&want, "Content-Type: message/delivery-status\n\n"
	    "Reporting-MTA: dns; " SH_HOST "\nX-Weir-Queue-ID: %lu.%d.000000000\n"
	    "Arrival-Date: %s\n%s", id, ARRIVAL, date, per_rcpt);
	cr_assert_eq(d->nparts, 3);
	sh_assert_bytes(d->part[1], strlen(d->part[1]), want.s, want.len, "delivery-status part");
	buf_free(&want);
}

/* ---- dsn_build ---- */

Test(dsn, structure)
{
	static const char notes[] = "<bob@example.net>:\n550 5.1.1 <bob@example.net>: no such user\n\n";
	unsigned long id = s5_msg("alice@example.org", S(orig), S(notes));
	struct dsn d;
	char date[DATE_RFC5322_MAX];
	char line[128];

	build(id, &d);
	/* Top-level header. */
	cr_assert(has_line(d.header, "From: Mail Delivery System <MAILER-DAEMON@" SH_HOST ">"),
	    "%s", d.header);
	cr_assert(has_line(d.header, "To: alice@example.org"), "%s", d.header);
	cr_assert(has_line(d.header, "Subject: failure notice"), "%s", d.header);
	cr_assert(has_line(d.header, "MIME-Version: 1.0"), "%s", d.header);
	cr_assert(has_line(d.header, "Auto-Submitted: auto-replied"), "%s", d.header);
	date_rfc5322(date, o.now);
	snprintf(line, sizeof line, "Date: %s", date);
	cr_assert(has_line(d.header, line), "no \"%s\" in: %s", line, d.header);
	snprintf(line, sizeof line,
	    "Content-Type: multipart/report; report-type=delivery-status;\n\tboundary=\"%s\"",
	    d.boundary);
	cr_assert(strstr(d.header, line), "no \"%s\" in: %s", line, d.header);
	cr_assert(strstr(d.header, "Message-ID: <"), "%s", d.header);
	/* The boundary does not occur inside any part. */
	cr_assert_eq(d.nparts, 3, "%d parts", d.nparts);
	/* Part 1: for people. */
	cr_assert(strncmp(d.part[0], "Content-Type: text/plain; charset=utf-8\n\n", 41) == 0,
	    "part 1: %s", d.part[0]);
	cr_assert(strstr(d.part[0], "<bob@example.net>:\n550 5.1.1 <bob@example.net>: no such user\n"),
	    "part 1 lacks the note: %s", d.part[0]);
	/* Part 2: for programs. */
	want_status_part(&d, id,
	    "\nFinal-Recipient: rfc822; bob@example.net\n"
	    "Action: failed\n"
	    "Status: 5.1.1\n"
	    "Diagnostic-Code: smtp; 550 5.1.1 <bob@example.net>: no such user\n");
	/* Part 3: exactly the original header. */
	{
		struct buf want = BUF_INIT;

		buf_adds(&want, "Content-Type: text/rfc822-headers\n\n");
		buf_adds(&want, orig_header);
		sh_assert_bytes(d.part[2], strlen(d.part[2]), want.s, want.len, "headers part");
		buf_free(&want);
	}
	cr_assert(!strstr(d.all.s, "Body line"), "the body is in the DSN");
	dsn_free(&d);
}

Test(dsn, status_codes_and_diagnostics)
{
	static const char notes[] =
	    "<a@x.example>:\n451 4.2.2 mailbox full\nI'm not going to try again; this message has "
	    "been in the queue too long.\n\n"
	    "<b@x.example>:\nConnected to 192.0.2.1 but sender was rejected.\n"
	    "Remote host said: 550 no code here\n\n"
	    "<c@x.example>:\nRemote host said: 550-5.7.1 first line\n550 5.7.1 second\tline\r\n\n"
	    "<d@x.example>:\n554 5.123.456 three digits\n\n"
	    "<e@x.example>:\nbinary \x01\x7f\xc3\xa9 bytes   and  spaces\n\n";
	unsigned long id = s5_msg("alice@example.org", S(orig), S(notes));
	struct dsn d;

	build(id, &d);
	want_status_part(&d, id,
	    "\nFinal-Recipient: rfc822; a@x.example\nAction: failed\nStatus: 5.2.2\n"
	    "Diagnostic-Code: smtp; 451 4.2.2 mailbox full I'm not going to try again; this "
	    "message has been in the queue too long.\n"
	    "\nFinal-Recipient: rfc822; b@x.example\nAction: failed\nStatus: 5.0.0\n"
	    "Diagnostic-Code: smtp; Connected to 192.0.2.1 but sender was rejected. Remote host "
	    "said: 550 no code here\n"
	    "\nFinal-Recipient: rfc822; c@x.example\nAction: failed\nStatus: 5.7.1\n"
	    "Diagnostic-Code: smtp; Remote host said: 550-5.7.1 first line 550 5.7.1 second line\n"
	    "\nFinal-Recipient: rfc822; d@x.example\nAction: failed\nStatus: 5.123.456\n"
	    "Diagnostic-Code: smtp; 554 5.123.456 three digits\n"
	    "\nFinal-Recipient: rfc822; e@x.example\nAction: failed\nStatus: 5.0.0\n"
	    "Diagnostic-Code: smtp; binary ???? bytes and spaces\n");
	dsn_free(&d);
}

/* Every line of the delivery-status part is printable ASCII, whatever
 * the upstream said. */
Test(dsn, status_part_printable)
{
	struct buf notes = BUF_INIT;
	struct dsn d;
	unsigned long id;
	int c;
	const char *p;

	buf_adds(&notes, "<a@x.example>:\n550 ");
	for (c = 1; c < 256; c++)
		if (c != '\n')
			buf_addc(&notes, (char)c);
	buf_adds(&notes, "\n\n");
	id = s5_msg("alice@example.org", S(orig), notes.s, notes.len);
	build(id, &d);
	for (p = d.part[1]; *p; p++)
		cr_assert(*p == '\n' || (*p >= 0x20 && *p < 0x7f), "byte 0x%02x in the status part",
		    (unsigned char)*p);
	cr_assert(strstr(d.part[1], "\nStatus: 5.0.0\nDiagnostic-Code: smtp; 550 "));
	buf_free(&notes);
	dsn_free(&d);
}

/* A 4.x.x code after a 5.x.x-looking IP address: the address is no code. */
Test(dsn, status_not_from_an_address)
{
	static const char notes[] = "<a@x.example>:\nConnected to 5.1.2.3 but 450 4.7.1 greylisted\n\n";
	unsigned long id = s5_msg("alice@example.org", S(orig), S(notes));
	struct dsn d;

	build(id, &d);
	cr_assert(strstr(d.part[1], "\nStatus: 5.7.1\n"), "%s", d.part[1]);
	dsn_free(&d);
}

Test(dsn, double_bounce_header)
{
	static const char notes[] = "<alice@example.org>:\n550 5.1.1 gone\n\n";
	unsigned long id = s5_msg("", S(orig), S(notes));
	struct dsn d;

	build(id, &d);
	cr_assert(has_line(d.header, "To: " SH_ADMIN), "%s", d.header);
	cr_assert(has_line(d.header, "Subject: failure notice (double bounce)"), "%s", d.header);
	dsn_free(&d);
}

/* Notes as bounce_note() writes them, whatever the texts, all come out
 * as one recipient each. */
Test(dsn, every_noted_recipient_reported)
{
	static const char *const texts[] = {
		"550 5.1.1 plain",
		"550 ends with a newline\n",
		"550 inner\n\nblank line",
		"",
		"550 ends with a blank line\n\n",
		"\n550 starts with a newline",
		"550 last",
	};
	size_t n = sizeof texts / sizeof texts[0], i;
	unsigned long id = s5_msg("alice@example.org", S(orig), NULL, 0);
	char addr[32], line[64];
	struct dsn d;
	const char *p;
	size_t count = 0;

	for (i = 0; i < n; i++) {
		snprintf(addr, sizeof addr, "r%zu@x.example", i);
		cr_assert_eq(bounce_note(&s.q, id, addr, texts[i]), 0);
	}
	build(id, &d);
	for (p = d.part[1]; (p = strstr(p, "Final-Recipient:")); p++)
		count++;
	for (i = 0; i < n; i++) {
		snprintf(line, sizeof line, "Final-Recipient: rfc822; r%zu@x.example", i);
		cr_assert(has_line(d.part[1], line), "no \"%s\" in:\n%s", line, d.part[1]);
	}
	cr_assert_eq(count, n, "%zu recipients reported, %zu noted:\n%s", count, n, d.part[1]);
	dsn_free(&d);
}

/* A message with no blank line: all of it is header. */
Test(dsn, header_only_message)
{
	static const char mess[] = "Received: (weir 1 invoked by uid 0); x\nSubject: h\n";
	unsigned long id = s5_msg("a@b.example", S(mess), S("<c@d>:\n550 no\n\n"));
	struct dsn d;

	build(id, &d);
	sh_assert_bytes(d.part[2], strlen(d.part[2]),
	    S("Content-Type: text/rfc822-headers\n\n" "Received: (weir 1 invoked by uid 0); x\nSubject: h\n"),
	    "headers part");
	dsn_free(&d);
}

Test(dsn, build_fails_without_info)
{
	unsigned long id = s5_msg("a@b.example", S(orig), S("<c@d>:\n550 no\n\n"));
	char *ip = sh_qpath(&s, Q_INFO, id);
	struct buf b = BUF_INIT;

	cr_assert(unlink(ip) == 0);
	cr_assert_eq(dsn_build(&s.q, id, &o, &b), -1);
	buf_free(&b);
	free(ip);
}

/* ---- dsn_send: routing through the real weir-queue ---- */

/* The one message in todo/ other than skip: its envelope and mess. */
static unsigned long
queued_bounce(unsigned long skip, struct qt_msg *m, time_t t0)
{
	unsigned long *ids, id = 0;
	size_t n = qt_list(&s.qt, "todo", &ids), i, found = 0;

	for (i = 0; i < n; i++)
		if (ids[i] != skip) {
			id = ids[i];
			found++;
		}
	free(ids);
	cr_assert_eq(found, 1, "%zu new messages in todo/, expected 1", found);
	qt_load(&s.qt, id, t0, time(NULL), m);
	return id;
}

static void
route_case(const char *sender, const char *want_env, size_t wlen, const char *want_to)
{
	static const char notes[] = "<bob@example.net>:\n550 5.1.1 no such user\n\n";
	unsigned long id = s5_msg(sender, S(orig), S(notes));
	time_t t0 = time(NULL);
	struct qt_msg m;
	char line[128];

	cr_assert_eq(dsn_send(&s.q, id, &o), 0);
	cr_assert(!sh_exists(&s, Q_BOUNCE, id), "bounce/%lu not removed", id);
	queued_bounce(id, &m, t0);
	sh_assert_bytes(m.env.s, m.env.len, want_env, wlen, "the bounce's envelope");
	snprintf(line, sizeof line, "To: %s", want_to);
	cr_assert(has_line(buf_cstr(&m.body), line), "no \"%s\" in the bounce:\n%s", line,
	    buf_cstr(&m.body));
	cr_assert(strstr(buf_cstr(&m.body), "report-type=delivery-status"));
	cr_assert(strstr(buf_cstr(&m.body), "Final-Recipient: rfc822; bob@example.net\n"));
	/* The original message itself is left alone. */
	sh_assert_file(&s, Q_MESS, id, S(orig));
	cr_assert(sh_exists(&s, Q_INFO, id));
	qt_msg_free(&m);
}

Test(dsn, send_to_sender)
{
	route_case("alice@example.org", S("F\0Talice@example.org\0"), "alice@example.org");
}

Test(dsn, send_double_bounce_to_admin)
{
	route_case("", S("F#@[]\0T" SH_ADMIN "\0"), SH_ADMIN);
}

Test(dsn, send_drops_failed_double_bounce)
{
	unsigned long id = s5_msg("#@[]", S(orig), S("<" SH_ADMIN ">:\n550 no\n\n"));
	unsigned long *ids;

	cr_assert_eq(dsn_send(&s.q, id, &o), 0);
	cr_assert(!sh_exists(&s, Q_BOUNCE, id), "bounce/%lu not removed", id);
	cr_assert_eq(qt_list(&s.qt, "todo", &ids), 0, "something was queued");
	free(ids);
	cr_assert_eq(qt_list(&s.qt, "intd", &ids), 0, "something was queued");
	free(ids);
	sh_assert_file(&s, Q_MESS, id, S(orig));
}

Test(dsn, send_nothing_to_do)
{
	unsigned long id = s5_msg("alice@example.org", S(orig), NULL, 0);
	unsigned long *ids;

	cr_assert_eq(dsn_send(&s.q, id, &o), 0);
	cr_assert_eq(qt_list(&s.qt, "todo", &ids), 0, "something was queued");
	free(ids);
}

/* The injector fails: bounce/N stays for the next try, nothing queued. */
static void
qq_fails(const char *prog)
{
	static const char notes[] = "<bob@example.net>:\n550 no\n\n";
	unsigned long id = s5_msg("alice@example.org", S(orig), S(notes));
	unsigned long *ids;

	o.qq_program = prog;
	cr_assert_eq(dsn_send(&s.q, id, &o), -1);
	sh_assert_file(&s, Q_BOUNCE, id, S(notes));
	cr_assert_eq(qt_list(&s.qt, "todo", &ids), 0, "something was queued");
	free(ids);
}

Test(dsn, send_injector_missing) { qq_fails("/nonexistent/weir-queue"); }
Test(dsn, send_injector_fails) { qq_fails("/bin/false"); }

/* weir-queue refuses (no queue there): temporary, bounce/N kept. */
Test(dsn, send_injector_refuses)
{
	static const char notes[] = "<bob@example.net>:\n550 no\n\n";
	unsigned long id = s5_msg("alice@example.org", S(orig), S(notes));

	setenv("WEIR_QUEUE", "/nonexistent/queue", 1);
	cr_assert_eq(dsn_send(&s.q, id, &o), -1);
	sh_assert_file(&s, Q_BOUNCE, id, S(notes));
}

/* ---- senders with control bytes (an info/ file from a stock qmail-send) ---- */

static const char evil_sender[] = "a@b.example\nBcc: victim@example.net";

/* The sender goes into To: -- never as a second header line: dsn_build
 * either refuses such an info/ file or writes a clean header. */
Test(dsn, to_header_not_injectable)
{
	unsigned long id = s5_msg(evil_sender, S(orig), S("<c@d>:\n550 no\n\n"));
	struct dsn d;

	memset(&d, 0, sizeof d);
	if (dsn_build(&s.q, id, &o, &d.all) != 0) {
		buf_free(&d.all);
		return;		/* refused: left for the admin */
	}
	split_dsn(&d);
	cr_assert(!has_line(d.header, "Bcc: victim@example.net"), "header injected:\n%s", d.header);
	cr_assert(!strstr(d.header, "\nBcc:"), "header injected:\n%s", d.header);
	dsn_free(&d);
}

/* Its bounce cannot go to it (weir-queue refuses the address): either
 * dsn_send settles bounce/N (a double bounce to the admin, or dropped),
 * or it leaves bounce/N exactly as it was; it never queues a bounce to
 * the raw address. */
Test(dsn, send_to_unusable_sender)
{
	static const char notes[] = "<c@d>:\n550 no\n\n";
	unsigned long id = s5_msg(evil_sender, S(orig), S(notes));
	unsigned long *ids;
	size_t n;

	if (dsn_send(&s.q, id, &o) != 0) {
		sh_assert_file(&s, Q_BOUNCE, id, S(notes));
		cr_assert_eq(qt_list(&s.qt, "todo", &ids), 0, "something was queued");
		free(ids);
		return;
	}
	cr_assert(!sh_exists(&s, Q_BOUNCE, id), "bounce/%lu not removed", id);
	n = qt_list(&s.qt, "todo", &ids);
	if (n == 1) {
		struct qt_msg m;

		qt_load(&s.qt, ids[0], 0, time(NULL), &m);
		sh_assert_bytes(m.env.s, m.env.len, S("F#@[]\0T" SH_ADMIN "\0"), "double bounce");
		qt_msg_free(&m);
	} else {
		cr_assert_eq(n, 0);
	}
	free(ids);
}

/* ---- delay warnings ---- */

#define UNTIL (ARRIVAL + 7 * 86400)

static void
build_delayed(unsigned long id, const struct dsn_rcpt *v, size_t n, struct dsn *d)
{
	memset(d, 0, sizeof *d);
	cr_assert_eq(dsn_build_delayed(&s.q, id, &o, v, n, UNTIL, &d->all), 0);
	split_dsn(d);
}

static const char greylisted[] = "127.0.0.1 does not like recipient.\n"
    "Remote host said: 451 4.7.1 greylisted, try again";
static const char odd[] = "Remote host said: 452 5.2.2 mailbox full";

Test(dsn, delayed_structure)
{
	unsigned long id = s5_msg("alice@example.org", S(orig), NULL, 0);
	struct dsn_rcpt v[] = {
		{ "bob@example.net", greylisted, 15, sizeof greylisted - 1 },
		{ "carol@example.net", NULL, 17, 0 },
		{ "dave@example.net", odd, 16, sizeof odd - 1 },
	};
	char until[DATE_RFC5322_MAX], line[128];
	struct buf want = BUF_INIT;
	struct dsn d;

	build_delayed(id, v, 3, &d);
	cr_assert(has_line(d.header, "To: alice@example.org"), "%s", d.header);
	cr_assert(has_line(d.header, "Subject: delivery delayed (still trying)"), "%s", d.header);
	cr_assert(has_line(d.header, "Auto-Submitted: auto-replied"), "%s", d.header);
	cr_assert_eq(d.nparts, 3, "%d parts", d.nparts);
	date_rfc5322(until, UNTIL);
	snprintf(line, sizeof line, "I will keep trying until %s.\n\n<bob@example.net>:\n", until);
	cr_assert(strstr(d.part[0], "This is only a warning"), "%s", d.part[0]);
	cr_assert(strstr(d.part[0], line), "no \"%s\" in: %s", line, d.part[0]);
	cr_assert(strstr(d.part[0], "<carol@example.net>:\nNo reply yet"), "%s", d.part[0]);
	buf_printf(&want,
	    "\nFinal-Recipient: rfc822; bob@example.net\n"
	    "Action: delayed\n"
	    "Status: 4.7.1\n"
	    "Diagnostic-Code: smtp; 127.0.0.1 does not like recipient. Remote host said: 451 4.7.1 "
	    "greylisted, try again\n"
	    "Will-Retry-Until: %s\n"
	    "\nFinal-Recipient: rfc822; carol@example.net\n"
	    "Action: delayed\n"
	    "Status: 4.0.0\n"
	    "Will-Retry-Until: %s\n"
	    "\nFinal-Recipient: rfc822; dave@example.net\n"
	    "Action: delayed\n"
	    "Status: 4.2.2\n"
	    "Diagnostic-Code: smtp; Remote host said: 452 5.2.2 mailbox full\n"
	    "Will-Retry-Until: %s\n", until, until, until);
	want_status_part(&d, id, want.s);
	{
		struct buf h = BUF_INIT;

		buf_adds(&h, "Content-Type: text/rfc822-headers\n\n");
		buf_adds(&h, orig_header);
		sh_assert_bytes(d.part[2], strlen(d.part[2]), h.s, h.len, "headers part");
		buf_free(&h);
	}
	buf_free(&want);
	dsn_free(&d);
}

Test(dsn, delayed_sent_to_sender_from_null)
{
	unsigned long id = s5_msg("alice@example.org", S(orig), NULL, 0);
	struct dsn_rcpt v[] = { { "bob@example.net", greylisted, 15, sizeof greylisted - 1 } };
	time_t t0 = time(NULL);
	struct qt_msg m;

	cr_assert_eq(dsn_send_delayed(&s.q, id, &o, "alice@example.org", v, 1, UNTIL), 0);
	queued_bounce(id, &m, t0);
	sh_assert_bytes(m.env.s, m.env.len, S("F\0Talice@example.org\0"), "the warning's envelope");
	cr_assert(has_line(buf_cstr(&m.body), "To: alice@example.org"), "%s", buf_cstr(&m.body));
	cr_assert(strstr(buf_cstr(&m.body), "Action: delayed\n"), "%s", buf_cstr(&m.body));
	sh_assert_file(&s, Q_MESS, id, S(orig));
	qt_msg_free(&m);
}

Test(dsn, delayed_never_for_bounces)
{
	struct dsn_rcpt v[] = { { "bob@example.net", greylisted, 15, sizeof greylisted - 1 } };
	unsigned long *ids;
	unsigned long id;

	cr_assert(!dsn_sender_wants_warning(""));
	cr_assert(!dsn_sender_wants_warning("#@[]"));
	cr_assert(dsn_sender_wants_warning("alice@example.org"));
	id = s5_msg("", S(orig), NULL, 0);
	cr_assert_eq(dsn_send_delayed(&s.q, id, &o, "", v, 1, UNTIL), -1);
	id = s5_msg("#@[]", S(orig), NULL, 0);
	cr_assert_eq(dsn_send_delayed(&s.q, id, &o, "#@[]", v, 1, UNTIL), -1);
	cr_assert_eq(qt_list(&s.qt, "todo", &ids), 0, "something was queued");
	free(ids);
}
