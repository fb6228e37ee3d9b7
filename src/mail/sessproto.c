/*
 * sessproto.c: the kept-session datagrams; see sessproto.h for the
 * grammar.
 *
 * Trusts: nothing.  Config keys: none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/decimal.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "mail/queue.h"
#include "mail/sessproto.h"

#define TLS_WORD	"tls"
#define READY_WORD	"ready"
#define CLOSING_WORD	"closing"

const char *
sp_kind_name(enum sp_kind k)
{
	switch (k) {
	case SP_TLS: return "tls";
	case SP_MESSAGE: return "message";
	case SP_READY: return READY_WORD;
	case SP_CLOSING: return CLOSING_WORD;
	}
	return "?";
}

void
sp_fmt_tls(struct buf *b, const void *der, size_t n)
{
	if (n == 0 || n > SESSION_TLS_MAX)
		panic("sessproto: a TLS session of %zu bytes", n);
	buf_add(b, TLS_WORD, sizeof TLS_WORD);	/* with its NUL */
	buf_add(b, der, n);
}

size_t
sp_message_len(const char *qid, unsigned grace, const char *sender, const char *const *rcpts,
    size_t n)
{
	char g[16];
	size_t i, len = strlen(qid) + 1 + (size_t)snprintf(g, sizeof g, "%u", grace) + 1 +
	    strlen(sender) + 1;

	for (i = 0; i < n; i++)
		len += strlen(rcpts[i]) + 1;
	return len;
}

void
sp_fmt_message(struct buf *b, const char *qid, unsigned grace, const char *sender,
    const char *const *rcpts, size_t n)
{
	size_t i;

	if (n == 0 || grace > SP_GRACE_MAX ||
	    sp_message_len(qid, grace, sender, rcpts, n) > SESSION_REQUEST_MAX)
		panic("sessproto: a message request of %zu recipients does not fit", n);
	buf_add(b, qid, strlen(qid) + 1);
	buf_printf(b, "%u", grace);
	buf_addc(b, '\0');
	buf_add(b, sender, strlen(sender) + 1);
	for (i = 0; i < n; i++)
		buf_add(b, rcpts[i], strlen(rcpts[i]) + 1);
}

void
sp_fmt_word(struct buf *b, enum sp_kind kind, const void *der, size_t n)
{
	if (kind == SP_CLOSING) {
		buf_adds(b, CLOSING_WORD);
		return;
	}
	if (kind != SP_READY || (der && (n == 0 || n > SESSION_TLS_MAX)))
		panic("sessproto: no word %d with %zu bytes", (int)kind, n);
	buf_adds(b, READY_WORD);
	if (der) {
		buf_addc(b, '\0');
		buf_add(b, der, n);
	}
}

static int
bad(const char **why, const char *what)
{
	*why = what;
	return -1;
}

/* The message request p[0..n) into r (its pointers into p). */
static int
parse_message(const char *p, size_t n, struct sp_request *r, const char **why)
{
	struct timespec t;
	unsigned long inode;
	uint64_t g;
	size_t i, k = 0, nfield = 0, len;
	const char *gs;

	if (n > SESSION_REQUEST_MAX)
		return bad(why, "a message request longer than SESSION_REQUEST_MAX");
	if (n == 0 || p[n - 1] != '\0')
		return bad(why, "a message request that does not end in NUL");
	for (i = 0; i < n; i++)
		nfield += p[i] == '\0';
	if (nfield < 4)
		return bad(why, "a message request without a recipient");
	r->qid = p;
	if (queue_parse_msgid(r->qid, &inode, &t) < 0)
		return bad(why, "a malformed message id");
	gs = r->qid + strlen(r->qid) + 1;
	if (dec_parse(gs, strlen(gs), SP_GRACE_MAX, &g) < 0)
		return bad(why, "a malformed grace");
	r->grace = (unsigned)g;
	r->sender = gs + strlen(gs) + 1;
	if (envelope_addr_problem(r->sender, strlen(r->sender)) != NULL)
		return bad(why, "a sender that cannot stand in an envelope");
	r->rcpts = xcalloc(nfield - 3, sizeof *r->rcpts);
	for (i = (size_t)(r->sender - p) + strlen(r->sender) + 1; i < n; i += len + 1) {
		len = strlen(p + i);
		if (len == 0 || envelope_addr_problem(p + i, len) != NULL) {
			sp_request_free(r);
			return bad(why, len == 0 ? "an empty recipient" :
			    "a recipient that cannot stand in an envelope");
		}
		r->rcpts[k++] = p + i;
	}
	r->nrcpt = k;
	return 0;
}

int
sp_parse_request(const char *p, size_t n, size_t nfd, struct sp_request *r, const char **why)
{
	memset(r, 0, sizeof *r);
	if (nfd == 0 && n >= sizeof TLS_WORD && memcmp(p, TLS_WORD, sizeof TLS_WORD) == 0) {
		r->kind = SP_TLS;
		r->der = p + sizeof TLS_WORD;
		r->derlen = n - sizeof TLS_WORD;
		if (r->derlen == 0 || r->derlen > SESSION_TLS_MAX)
			return bad(why, r->derlen ? "a TLS session longer than SESSION_TLS_MAX" :
			    "an empty TLS session");
		return 0;
	}
	if (nfd != SP_NFD)
		return bad(why, "a message request without its three descriptors");
	r->kind = SP_MESSAGE;
	return parse_message(p, n, r, why);
}

void
sp_request_free(struct sp_request *r)
{
	free(r->rcpts);
	r->rcpts = NULL;
	r->nrcpt = 0;
}

int
sp_parse_word(const char *p, size_t n, struct sp_word *w, const char **why)
{
	size_t rl = strlen(READY_WORD);

	memset(w, 0, sizeof *w);
	if (n == strlen(CLOSING_WORD) && memcmp(p, CLOSING_WORD, n) == 0) {
		w->kind = SP_CLOSING;
		return 0;
	}
	if (n < rl || memcmp(p, READY_WORD, rl) != 0)
		return bad(why, "an unknown word");
	w->kind = SP_READY;
	if (n == rl)
		return 0;
	if (p[rl] != '\0' || n == rl + 1)
		return bad(why, "\"ready\" with trailing bytes but no TLS session");
	if (n - rl - 1 > SESSION_TLS_MAX)
		return bad(why, "a TLS session longer than SESSION_TLS_MAX");
	w->der = p + rl + 1;
	w->derlen = n - rl - 1;
	return 0;
}

/* ---- the flight file ---- */

#define FL_MSG		"msg "
#define FL_TAKEN	"taken\n"
#define FL_DONE		"done "

void
sp_fmt_flight_msg(struct buf *b, const char *qid, const char *upstream, uint64_t grant,
    const char *boot, const size_t *offs, size_t n)
{
	size_t i;

	if (!policy_valid_name(upstream) || strchr(qid, ' ') || strchr(boot, ' ') || n == 0)
		panic("sessproto: invalid flight record fields");
	buf_printf(b, FL_MSG "%s %s %llu %s %zu", qid, upstream, (unsigned long long)grant, boot,
	    n);
	for (i = 0; i < n; i++)
		buf_printf(b, " %zu", offs[i]);
	buf_addc(b, '\n');
}

void
sp_fmt_flight_taken(struct buf *b)
{
	buf_adds(b, FL_TAKEN);
}

void
sp_fmt_flight_done(struct buf *b, const char *report, size_t reportlen, const char *outcome,
    size_t outcomelen)
{
	buf_printf(b, FL_DONE "%zu\n", reportlen);
	buf_add(b, report, reportlen);
	buf_add(b, outcome, outcomelen);
}

/* The next space-ended word of line[*at..end) into out (at most max bytes
 * with its NUL; the last word of the line ends at end). */
static int
word(const char *line, size_t *at, size_t end, char *out, size_t max)
{
	size_t s = *at, e = s;

	while (e < end && line[e] != ' ') {
		if (line[e] < 0x21 || line[e] > 0x7e)
			return -1;
		e++;
	}
	if (e == s || e - s >= max)
		return -1;
	memcpy(out, line + s, e - s);
	out[e - s] = '\0';
	*at = e < end ? e + 1 : e;
	return 0;
}

/* The "msg" line, p[0..n) without its LF. */
static int
flight_msg(const char *p, size_t n, struct sp_flight *f, const char **why)
{
	struct timespec t;
	unsigned long inode;
	uint64_t v;
	char w[32];
	size_t at = sizeof FL_MSG - 1, i;

	if (word(p, &at, n, f->qid, sizeof f->qid) < 0 ||
	    queue_parse_msgid(f->qid, &inode, &t) < 0)
		return bad(why, "a malformed message id");
	if (word(p, &at, n, f->upstream, sizeof f->upstream) < 0 ||
	    !policy_valid_name(f->upstream))
		return bad(why, "a malformed upstream");
	if (word(p, &at, n, w, sizeof w) < 0 || dec_parse(w, strlen(w), UINT64_MAX, &v) < 0 ||
	    v == 0)
		return bad(why, "a malformed grant id");
	f->grant = v;
	if (word(p, &at, n, f->boot, sizeof f->boot) < 0 || (strcmp(f->boot, "unknown") != 0 &&
	    strspn(f->boot, "0123456789abcdef-") != strlen(f->boot)))
		return bad(why, "a malformed boot id");
	if (word(p, &at, n, w, sizeof w) < 0 ||
	    dec_parse(w, strlen(w), SESSION_REQUEST_MAX, &v) < 0 || v == 0)
		return bad(why, "a malformed recipient count");
	f->n = (size_t)v;
	f->offs = xcalloc(f->n, sizeof *f->offs);
	for (i = 0; i < f->n; i++) {
		if (word(p, &at, n, w, sizeof w) < 0 || dec_parse(w, strlen(w), (1ULL << 40), &v) < 0)
			return bad(why, "a malformed recipient offset");
		f->offs[i] = (size_t)v;
	}
	if (at != n || p[n - 1] == ' ')
		return bad(why, "trailing bytes after the offsets");
	return 0;
}

int
sp_parse_flight(const char *p, size_t n, struct sp_flight *f, const char **why)
{
	const char *nl, *end = p + n;
	uint64_t len;
	size_t k;

	memset(f, 0, sizeof *f);
	if (n == 0) {
		f->empty = 1;
		return 0;
	}
	if (n > SP_FLIGHT_MAX)
		return bad(why, "longer than SP_FLIGHT_MAX");
	if (n < sizeof FL_MSG || memcmp(p, FL_MSG, sizeof FL_MSG - 1) != 0 ||
	    (nl = memchr(p, '\n', n)) == NULL)
		return bad(why, "no \"msg\" line first");
	if (flight_msg(p, (size_t)(nl - p), f, why) < 0)
		goto out;
	p = nl + 1;
	if (p == end)
		return 0;
	if ((size_t)(end - p) < sizeof FL_TAKEN - 1 || memcmp(p, FL_TAKEN, sizeof FL_TAKEN - 1)) {
		bad(why, "no \"taken\" line after \"msg\"");
		goto out;
	}
	f->taken = 1;
	p += sizeof FL_TAKEN - 1;
	if (p == end)
		return 0;
	k = sizeof FL_DONE - 1;
	if ((size_t)(end - p) <= k || memcmp(p, FL_DONE, k) != 0 ||
	    (nl = memchr(p, '\n', (size_t)(end - p))) == NULL ||
	    dec_parse(p + k, (size_t)(nl - p) - k, REPORT_MAX, &len) < 0) {
		bad(why, "a malformed \"done\" line");
		goto out;
	}
	p = nl + 1;
	if ((size_t)(end - p) <= len) {
		bad(why, "the reports or the outcome line cut short");
		goto out;
	}
	f->report = p;
	f->reportlen = (size_t)len;
	f->outcome = p + len;
	f->outcomelen = (size_t)(end - f->outcome);
	if (f->outcomelen > OUTCOME_MAX || f->outcome[f->outcomelen - 1] != '\n' ||
	    memchr(f->outcome, '\n', f->outcomelen) != f->outcome + f->outcomelen - 1) {
		bad(why, "the outcome is not one line at the end");
		goto out;
	}
	f->done = 1;
	return 0;
out:
	sp_flight_free(f);
	return -1;
}

void
sp_flight_free(struct sp_flight *f)
{
	free(f->offs);
	f->offs = NULL;
	f->n = 0;
}
