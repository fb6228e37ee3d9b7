/*
 * dsn.c: see dsn.h.  The notes in bounce/N are qmail's format, one
 * entry per failed recipient: "<addr>:\n", the reply text (no blank
 * lines inside), a blank line.
 *
 * Trusts: the queue's files; the reply text came from the upstream, so
 * it is reduced to printable ASCII before it goes into header-like
 * fields of the report.
 * Config keys: hostname, admin (through struct dsn_opts).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/envelope.h"
#include "mail/qqclient.h"
#include "mail/qqcode.h"
#include "send/dsn.h"

#define HEADER_MAX (64 * 1024)	/* of the original, quoted in the report */

/* Index past 1 to 3 digits at t[i], or 0 if there are none. */
static size_t
digits(const char *t, size_t n, size_t i)
{
	size_t j = i;

	while (j < n && j < i + 3 && t[j] >= '0' && t[j] <= '9')
		j++;
	return j > i ? j : 0;
}

/* The enhanced status code (RFC 3463, "5.1.1") in the reply text, with
 * the class given: a 4.x.x reply that expired in our queue is reported
 * as 5.x.x in a bounce, and every code as 4.x.x in a delay warning.
 * X.0.0 when there is none. */
static void
status_code(const char *t, size_t n, char class, char out[16])
{
	size_t i, a, b;

	snprintf(out, 16, "%c.0.0", class);
	for (i = 0; i + 4 < n; i++) {
		/* "5.1.1 " as SMTP replies write it, or "(#5.1.3)" as qmail's
		 * own texts do. */
		if ((t[i] != '4' && t[i] != '5') || (i > 0 && t[i - 1] != ' ' && t[i - 1] != '#') ||
		    t[i + 1] != '.')
			continue;
		a = digits(t, n, i + 2);
		if (a == 0 || a >= n || t[a] != '.')
			continue;
		b = digits(t, n, a + 1);
		if (b == 0 || (b < n && t[b] != ' ' && t[b] != '\n' && t[b] != ')'))
			continue;
		memcpy(out, t + i, b - i);
		out[b - i] = '\0';
		out[0] = class;
		return;
	}
}

/* Entries of a bounce/N that is not in the strict format: every line
 * "<addr>:" starts one, the text up to the next such line is its text. */
static long
loose_entries(const char *s, size_t n, struct dsn_rcpt **out)
{
	struct dsn_rcpt *v = NULL;
	const char *p = s, *end = s + n, *nl;
	size_t nv = 0;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		if (nl - p >= 3 && p[0] == '<' && nl[-1] == ':' && nl[-2] == '>') {
			v = xrealloc(v, (nv + 1) * sizeof *v);
			v[nv].addr = p + 1;
			v[nv].alen = (size_t)(nl - p) - 3;
			v[nv].text = nl < end ? nl + 1 : end;
			v[nv].tlen = 0;
			nv++;
		} else if (nv > 0) {
			v[nv - 1].tlen = (size_t)(nl - v[nv - 1].text);
		}
		p = nl < end ? nl + 1 : end;
	}
	*out = v;
	return (long)nv;
}

/* Split bounce/N into entries.  Returns the count; -1 if malformed. */
static long
entries(const char *s, size_t n, struct dsn_rcpt **out)
{
	struct dsn_rcpt *v = NULL;
	size_t nv = 0, i = 0;

	while (i < n) {
		const char *gt, *end;
		struct dsn_rcpt e;

		if (s[i] != '<')
			goto bad;
		gt = memmem(s + i, n - i, ">:\n", 3);
		if (gt == NULL)
			goto bad;
		e.addr = s + i + 1;
		e.alen = (size_t)(gt - e.addr);
		e.text = gt + 3;
		end = memmem(e.text, n - (size_t)(e.text - s), "\n\n", 2);
		if (end == NULL) {
			if (s[n - 1] != '\n' || e.text > s + n - 1)
				goto bad;
			end = s + n - 1;	/* tolerate a missing final blank line */
		}
		e.tlen = (size_t)(end - e.text);
		v = xrealloc(v, (nv + 1) * sizeof *v);
		v[nv++] = e;
		i = (size_t)(end - s) + 2;
	}
	*out = v;
	return (long)nv;
bad:
	free(v);
	return -1;
}

/* The parts that differ between a bounce and a delay warning. */
struct kind {
	char class;		/* of the Status codes */
	const char *subject, *double_subject;
	const char *intro;	/* the text part's first paragraph */
	const char *action;
};

static const struct kind failed = {
	'5', "failure notice", "failure notice (double bounce)",
	"I could not deliver your message to the recipients below.  These are\n"
	"permanent failures: I have given up on them.\n\n",
	"failed",
};
static const struct kind delayed = {
	'4', "delivery delayed (still trying)", NULL,
	"I have not yet been able to deliver your message to the recipients\n"
	"below.  This is only a warning: I am still trying, and you do not need\n"
	"to send it again.  You will hear from me again only if I give up.\n\n",
	"delayed",
};

/* A recipient without a reply: not tried yet (a delay warning lists
 * every recipient still pending). */
static const char not_tried[] = "No reply yet: it waits for its turn behind other recipients "
    "of this message.";

/*
 * Build the DSN for message id: the recipients ev[0..ne), the kind's
 * wording, and for a delay warning (until != 0) the time weir gives up,
 * as Will-Retry-Until.
 */
static int
build(struct queue *q, unsigned long id, const struct dsn_opts *o, const struct kind *k,
    const struct dsn_rcpt *ev, size_t ne, time_t until, struct buf *msg)
{
	char path[QPATH_MAX], date[DATE_RFC5322_MAX], arrival[DATE_RFC5322_MAX];
	char qid[QUEUE_ID_MAX];
	char boundary[64], code[16], retry[DATE_RFC5322_MAX];
	struct buf info = BUF_INIT, why = BUF_INIT;
	unsigned char rnd[8];
	struct qrec sender;
	struct stat st;
	size_t i;
	int fd, rc = -1;

	queue_path(path, q, Q_INFO, id);
	if (read_file_at(q->dfd, path, &info, 4096) != 0 || fstatat(q->dfd, path, &st, 0) < 0) {
		log_warn("msg %s: read %s", queue_msgid_of(q, id, qid), path);
		goto out;
	}
	if (info_parse(info.s, info.len, &sender, &why) < 0) {
		log_warnx("msg %s: %s is corrupt: %s", queue_msgid(qid, id, &st.st_mtim), path,
		    why.s);
		goto out;
	}
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		memset(rnd, 0, sizeof rnd);
	snprintf(boundary, sizeof boundary, "weir-%lu-%02x%02x%02x%02x%02x%02x%02x%02x", id,
	    rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	date_rfc5322(date, o->now);
	date_rfc5322(arrival, st.st_mtime);
	if (until)
		date_rfc5322(retry, until);

	buf_printf(msg, "From: Mail Delivery System <MAILER-DAEMON@%s>\n", o->hostname);
	buf_adds(msg, "To: ");
	if (sender.len == 0)
		buf_adds(msg, o->admin);
	else
		buf_add_oneline(msg, sender.addr, sender.len);
	buf_addc(msg, '\n');
	buf_printf(msg, "Subject: %s\n", sender.len || !k->double_subject ? k->subject :
	    k->double_subject);
	buf_printf(msg, "Date: %s\n", date);
	buf_printf(msg, "Message-ID: <%ld.%lu.%s@%s>\n", (long)o->now, id, boundary + 5, o->hostname);
	buf_adds(msg, "Auto-Submitted: auto-replied\nMIME-Version: 1.0\n");
	buf_printf(msg, "Content-Type: multipart/report; report-type=delivery-status;\n"
	    "\tboundary=\"%s\"\n\n", boundary);
	buf_adds(msg, "This is a MIME-encapsulated message.\n\n");

	/* Part 1: for people. */
	buf_printf(msg, "--%s\nContent-Type: text/plain; charset=utf-8\n\n", boundary);
	buf_printf(msg, "This is weir at %s.\n\n", o->hostname);
	buf_adds(msg, k->intro);
	if (until)
		buf_printf(msg, "I will keep trying until %s.\n\n", retry);
	for (i = 0; i < ne; i++) {
		buf_printf(msg, "<%.*s>:\n", (int)ev[i].alen, ev[i].addr);
		if (ev[i].tlen)
			buf_add(msg, ev[i].text, ev[i].tlen);
		else
			buf_adds(msg, not_tried);
		buf_adds(msg, "\n\n");
	}

	/* Part 2: for programs (RFC 3464). */
	buf_printf(msg, "--%s\nContent-Type: message/delivery-status\n\n", boundary);
	queue_msgid(qid, id, &st.st_mtim);
	buf_printf(msg, "Reporting-MTA: dns; %s\nX-Weir-Queue-ID: %s\nArrival-Date: %s\n",
	    o->hostname, qid, arrival);
	for (i = 0; i < ne; i++) {
		buf_adds(msg, "\nFinal-Recipient: rfc822; ");
		buf_add_oneline(msg, ev[i].addr, ev[i].alen);
		status_code(ev[i].text, ev[i].tlen, k->class, code);
		buf_printf(msg, "\nAction: %s\nStatus: %s\n", k->action, code);
		if (ev[i].tlen) {
			buf_adds(msg, "Diagnostic-Code: smtp; ");
			buf_add_oneline(msg, ev[i].text, ev[i].tlen);
			buf_addc(msg, '\n');
		}
		if (until)
			buf_printf(msg, "Will-Retry-Until: %s\n", retry);
	}
	buf_addc(msg, '\n');

	/* Part 3: the original header, so the sender can tell which message. */
	buf_printf(msg, "--%s\nContent-Type: text/rfc822-headers\n\n", boundary);
	queue_path(path, q, Q_MESS, id);
	fd = openat(q->dfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		log_warn("msg %s: open %s", queue_msgid_of(q, id, qid), path);
		goto out;
	}
	{
		char *h = xmalloc(HEADER_MAX + 1), *end;
		ssize_t r = full_read(fd, h, HEADER_MAX);

		close(fd);
		if (r < 0) {
			log_warn("msg %s: read %s", queue_msgid_of(q, id, qid), path);
			free(h);
			goto out;
		}
		h[r] = '\0';
		end = memmem(h, (size_t)r, "\n\n", 2);
		buf_add(msg, h, end ? (size_t)(end - h) + 1 : (size_t)r);
		if (msg->s[msg->len - 1] != '\n')
			buf_addc(msg, '\n');
		free(h);
	}
	buf_printf(msg, "\n--%s--\n", boundary);
	rc = 0;
out:
	buf_free(&info);
	buf_free(&why);
	return rc;
}

int
dsn_build(struct queue *q, unsigned long id, const struct dsn_opts *o, struct buf *msg)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX];
	struct buf notes = BUF_INIT;
	struct dsn_rcpt *ev = NULL;
	long ne;
	int rc;

	queue_path(path, q, Q_BOUNCE, id);
	if (read_file_at(q->dfd, path, &notes, 16 << 20) != 0) {
		log_warn("msg %s: read %s", queue_msgid_of(q, id, qid), path);
		buf_free(&notes);
		return -1;
	}
	ne = entries(notes.s ? notes.s : "", notes.len, &ev);
	if (ne < 0) {
		log_warnx("msg %s: %s is not in qmail's bounce format; reading it loosely",
		    queue_msgid_of(q, id, qid), path);
		ne = loose_entries(notes.s ? notes.s : "", notes.len, &ev);
	}
	rc = build(q, id, o, &failed, ev, (size_t)ne, 0, msg);
	free(ev);
	buf_free(&notes);
	return rc;
}

int
dsn_build_delayed(struct queue *q, unsigned long id, const struct dsn_opts *o,
    const struct dsn_rcpt *v, size_t n, time_t until, struct buf *msg)
{
	return build(q, id, o, &delayed, v, n, until, msg);
}

int
dsn_inject(const struct dsn_opts *o, const char *who, const char *what, const char *from,
    const char *to, const struct buf *msg)
{
	struct buf why = BUF_INIT;
	struct qq_child c;
	char *rcpt = xstrdup(to);
	int code, rc = -1;

	if (qq_start(&c, o->qq_program, &why) < 0) {
		log_warnx("%s: %s: %s", who, what, why.s);
		goto out;
	}
	qq_put(&c, msg->s, msg->len);
	code = qq_finish(&c, from, &rcpt, 1, &why);
	if (code != 0) {
		log_warnx("%s: %s to <%s> not queued: %s", who, what, rcpt, why.s);
		goto out;
	}
	log_info("%s: %s to <%s> queued as %s", who, what, rcpt, c.id);
	rc = 0;
out:
	free(rcpt);
	buf_free(&why);
	return rc;
}

int
dsn_send(struct queue *q, unsigned long id, const struct dsn_opts *o)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX], who[QUEUE_ID_MAX + 8];
	struct buf info = BUF_INIT, why = BUF_INIT, msg = BUF_INIT;
	struct qrec sender;
	struct stat st;
	char *to;
	const char *from;
	int rc = -1;

	queue_path(path, q, Q_BOUNCE, id);
	if (fstatat(q->dfd, path, &st, 0) < 0) {
		if (errno == ENOENT)
			return 0;
		log_warn("msg %s: stat %s", queue_msgid_of(q, id, qid), path);
		return -1;
	}
	queue_msgid_of(q, id, qid);
	if (st.st_size == 0) {
		/* A crash between creating and writing the first note: the
		 * recipient was not marked done, so nothing is lost. */
		log_info("msg %s: removing an empty %s", qid, path);
		goto unlink;
	}
	queue_path(path, q, Q_INFO, id);
	if (read_file_at(q->dfd, path, &info, 4096) != 0 ||
	    info_parse(info.s, info.len, &sender, &why) < 0) {
		log_warnx("msg %s: cannot read the sender from %s", qid, path);
		goto out;
	}
	if (sender.len == strlen(DOUBLE_BOUNCE_SENDER) &&
	    memcmp(sender.addr, DOUBLE_BOUNCE_SENDER, sender.len) == 0) {
		log_warnx("msg %s: a double bounce failed; discarding it", qid);
		goto unlink;
	}
	if (dsn_build(q, id, o, &msg) < 0)
		goto out;
	if (sender.len == 0) {
		from = DOUBLE_BOUNCE_SENDER;
		to = xstrdup(o->admin);
	} else {
		from = "";
		to = xstrndup(sender.addr, sender.len);
	}
	snprintf(who, sizeof who, "msg %s", qid);
	rc = dsn_inject(o, who, "bounce", from, to, &msg);
	free(to);
	if (rc < 0)
		goto out;
unlink:
	rc = -1;
	queue_path(path, q, Q_BOUNCE, id);
	if (unlinkat(q->dfd, path, 0) < 0) {
		/* The bounce is queued: at worst it is sent twice. */
		log_warn("msg %s: unlink %s", qid, path);
		goto out;
	}
	/* Durable before the message's other files go: else a power cut
	 * can bring back bounce/N without the message, and a later message
	 * that gets inode N would inherit its notes. */
	if (fsync_dir(q->dfd, "bounce") < 0) {
		log_warn("msg %s: fsync folder bounce", qid);
		goto out;
	}
	rc = 0;
out:
	buf_free(&info);
	buf_free(&why);
	buf_free(&msg);
	return rc;
}

int
dsn_sender_wants_warning(const char *sender)
{
	return *sender != '\0' && strcmp(sender, DOUBLE_BOUNCE_SENDER) != 0;
}

int
dsn_send_delayed(struct queue *q, unsigned long id, const struct dsn_opts *o,
    const char *sender, const struct dsn_rcpt *v, size_t n, time_t until)
{
	char qid[QUEUE_ID_MAX], who[QUEUE_ID_MAX + 8];
	struct buf msg = BUF_INIT;
	int rc = -1;

	queue_msgid_of(q, id, qid);
	snprintf(who, sizeof who, "msg %s", qid);
	if (!dsn_sender_wants_warning(sender)) {
		log_warnx("msg %s: no delay warning to <%s>", qid, sender);
		return -1;
	}
	if (dsn_build_delayed(q, id, o, v, n, until, &msg) == 0)
		rc = dsn_inject(o, who, "delay warning", "", sender, &msg);
	buf_free(&msg);
	return rc;
}
