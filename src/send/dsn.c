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

#define DOUBLE_BOUNCE_SENDER "#@[]"
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

/* The enhanced status code (RFC 3463, "5.1.1") in the reply text, as a
 * permanent code: a 4.x.x reply that expired in our queue is reported
 * as 5.x.x.  5.0.0 when there is none. */
static void
status_code(const char *t, size_t n, char out[16])
{
	size_t i, a, b;

	strcpy(out, "5.0.0");
	for (i = 0; i + 4 < n; i++) {
		if ((t[i] != '4' && t[i] != '5') || (i > 0 && t[i - 1] != ' ') || t[i + 1] != '.')
			continue;
		a = digits(t, n, i + 2);
		if (a == 0 || a >= n || t[a] != '.')
			continue;
		b = digits(t, n, a + 1);
		if (b == 0 || (b < n && t[b] != ' ' && t[b] != '\n'))
			continue;
		memcpy(out, t + i, b - i);
		out[b - i] = '\0';
		out[0] = '5';
		return;
	}
}

struct entry {
	const char *addr, *text;
	size_t alen, tlen;
};

/* Entries of a bounce/N that is not in the strict format: every line
 * "<addr>:" starts one, the text up to the next such line is its text. */
static long
loose_entries(const char *s, size_t n, struct entry **out)
{
	struct entry *v = NULL;
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
entries(const char *s, size_t n, struct entry **out)
{
	struct entry *v = NULL;
	size_t nv = 0, i = 0;

	while (i < n) {
		const char *gt, *end;
		struct entry e;

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

int
dsn_build(struct queue *q, unsigned long id, const struct dsn_opts *o, struct buf *msg)
{
	char path[QPATH_MAX], date[DATE_RFC5322_MAX], arrival[DATE_RFC5322_MAX];
	char boundary[64], code[16];
	struct buf info = BUF_INIT, notes = BUF_INIT, why = BUF_INIT;
	unsigned char rnd[8];
	struct entry *ev = NULL;
	struct qrec sender;
	struct stat st;
	long ne, i;
	int fd, rc = -1;

	queue_path(path, q, Q_INFO, id);
	if (read_file_at(q->dfd, path, &info, 4096) != 0 || fstatat(q->dfd, path, &st, 0) < 0) {
		log_warn("msg %lu: read %s", id, path);
		goto out;
	}
	if (info_parse(info.s, info.len, &sender, &why) < 0) {
		log_warnx("msg %lu: %s is corrupt: %s", id, path, why.s);
		goto out;
	}
	queue_path(path, q, Q_BOUNCE, id);
	if (read_file_at(q->dfd, path, &notes, 16 << 20) != 0) {
		log_warn("msg %lu: read %s", id, path);
		goto out;
	}
	ne = entries(notes.s, notes.len, &ev);
	if (ne < 0) {
		log_warnx("msg %lu: %s is not in qmail's bounce format; reading it loosely",
		    id, path);
		ne = loose_entries(notes.s, notes.len, &ev);
	}
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		memset(rnd, 0, sizeof rnd);
	snprintf(boundary, sizeof boundary, "weir-%lu-%02x%02x%02x%02x%02x%02x%02x%02x", id,
	    rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	date_rfc5322(date, o->now);
	date_rfc5322(arrival, st.st_mtime);

	buf_printf(msg, "From: Mail Delivery System <MAILER-DAEMON@%s>\n", o->hostname);
	buf_adds(msg, "To: ");
	if (sender.len == 0)
		buf_adds(msg, o->admin);
	else
		buf_add_oneline(msg, sender.addr, sender.len);
	buf_addc(msg, '\n');
	buf_printf(msg, "Subject: %s\n", sender.len ? "failure notice" : "failure notice (double bounce)");
	buf_printf(msg, "Date: %s\n", date);
	buf_printf(msg, "Message-ID: <%ld.%lu.%s@%s>\n", (long)o->now, id, boundary + 5, o->hostname);
	buf_adds(msg, "Auto-Submitted: auto-replied\nMIME-Version: 1.0\n");
	buf_printf(msg, "Content-Type: multipart/report; report-type=delivery-status;\n"
	    "\tboundary=\"%s\"\n\n", boundary);
	buf_adds(msg, "This is a MIME-encapsulated message.\n\n");

	/* Part 1: for people. */
	buf_printf(msg, "--%s\nContent-Type: text/plain; charset=utf-8\n\n", boundary);
	buf_printf(msg, "This is weir at %s.\n\n", o->hostname);
	buf_adds(msg, "I could not deliver your message to the recipients below.  These are\n"
	    "permanent failures: I have given up on them.\n\n");
	for (i = 0; i < ne; i++) {
		buf_printf(msg, "<%.*s>:\n", (int)ev[i].alen, ev[i].addr);
		buf_add(msg, ev[i].text, ev[i].tlen);
		buf_adds(msg, "\n\n");
	}

	/* Part 2: for programs (RFC 3464). */
	buf_printf(msg, "--%s\nContent-Type: message/delivery-status\n\n", boundary);
	buf_printf(msg, "Reporting-MTA: dns; %s\nArrival-Date: %s\n", o->hostname, arrival);
	for (i = 0; i < ne; i++) {
		buf_adds(msg, "\nFinal-Recipient: rfc822; ");
		buf_add_oneline(msg, ev[i].addr, ev[i].alen);
		status_code(ev[i].text, ev[i].tlen, code);
		buf_printf(msg, "\nAction: failed\nStatus: %s\nDiagnostic-Code: smtp; ", code);
		buf_add_oneline(msg, ev[i].text, ev[i].tlen);
		buf_addc(msg, '\n');
	}
	buf_addc(msg, '\n');

	/* Part 3: the original header, so the sender can tell which message. */
	buf_printf(msg, "--%s\nContent-Type: text/rfc822-headers\n\n", boundary);
	queue_path(path, q, Q_MESS, id);
	fd = openat(q->dfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		log_warn("msg %lu: open %s", id, path);
		goto out;
	}
	{
		char *h = xmalloc(HEADER_MAX + 1), *end;
		ssize_t r = full_read(fd, h, HEADER_MAX);

		close(fd);
		if (r < 0) {
			log_warn("msg %lu: read %s", id, path);
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
	free(ev);
	buf_free(&info);
	buf_free(&notes);
	buf_free(&why);
	return rc;
}

int
dsn_send(struct queue *q, unsigned long id, const struct dsn_opts *o)
{
	char path[QPATH_MAX];
	struct buf info = BUF_INIT, why = BUF_INIT, msg = BUF_INIT;
	struct qq_child c;
	struct qrec sender;
	struct stat st;
	char *to;
	const char *from;
	int rc = -1, code;

	queue_path(path, q, Q_BOUNCE, id);
	if (fstatat(q->dfd, path, &st, 0) < 0) {
		if (errno == ENOENT)
			return 0;
		log_warn("msg %lu: stat %s", id, path);
		return -1;
	}
	if (st.st_size == 0) {
		/* A crash between creating and writing the first note: the
		 * recipient was not marked done, so nothing is lost. */
		log_info("msg %lu: removing an empty %s", id, path);
		goto unlink;
	}
	queue_path(path, q, Q_INFO, id);
	if (read_file_at(q->dfd, path, &info, 4096) != 0 ||
	    info_parse(info.s, info.len, &sender, &why) < 0) {
		log_warnx("msg %lu: cannot read the sender from %s", id, path);
		goto out;
	}
	if (sender.len == strlen(DOUBLE_BOUNCE_SENDER) &&
	    memcmp(sender.addr, DOUBLE_BOUNCE_SENDER, sender.len) == 0) {
		log_warnx("msg %lu: a double bounce failed; discarding it", id);
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
	if (qq_start(&c, o->qq_program, &why) < 0) {
		log_warnx("msg %lu: bounce: %s", id, why.s);
		free(to);
		goto out;
	}
	qq_put(&c, msg.s, msg.len);
	code = qq_finish(&c, from, &to, 1, &why);
	if (code != 0) {
		log_warnx("msg %lu: bounce to <%s> not queued: %s", id, to, why.s);
		free(to);
		goto out;
	}
	log_info("msg %lu: bounce to <%s> queued", id, to);
	free(to);
unlink:
	queue_path(path, q, Q_BOUNCE, id);
	if (unlinkat(q->dfd, path, 0) < 0) {
		/* The bounce is queued: at worst it is sent twice. */
		log_warn("msg %lu: unlink %s", id, path);
		goto out;
	}
	/* Durable before the message's other files go: else a power cut
	 * can bring back bounce/N without the message, and a later message
	 * that gets inode N would inherit its notes. */
	if (fsync_dir(q->dfd, "bounce") < 0) {
		log_warn("msg %lu: fsync folder bounce", id);
		goto out;
	}
	rc = 0;
out:
	buf_free(&info);
	buf_free(&why);
	buf_free(&msg);
	return rc;
}
