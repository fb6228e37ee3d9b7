/*
 * sessproto_fuzz.c: libFuzzer harness for the kept-session datagrams
 * (src/mail/sessproto.c).  The first byte picks the direction (bit 0:
 * weir-send's request, else the deliverer's word) and, for a request,
 * how many descriptors came with it (bits 1-2); the rest is the
 * datagram.  Properties:
 *
 *   - a request that parses is a TLS session (no descriptor, 1 to
 *     SESSION_TLS_MAX bytes) or a message (SP_NFD descriptors, at most
 *     SESSION_REQUEST_MAX bytes, at least one recipient, none empty);
 *   - formatting what was parsed gives the same bytes back (one
 *     spelling per datagram), and that parses to the same fields;
 *   - likewise for the deliverer's words;
 *   - a flight file that parses formats back to the same bytes from its
 *     records (msg, then taken, then done), and parses to the same again.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/sessproto.
 */
#include <stdint.h>
#include <string.h>

#include "mail/sessproto.h"
#include "fuzz.h"

static void
request(const char *s, size_t n, size_t nfd)
{
	struct sp_request r, again;
	struct buf b = BUF_INIT;
	const char *why = NULL;
	size_t i;

	if (sp_parse_request(s, n, nfd, &r, &why) < 0) {
		check(why != NULL);
		return;
	}
	if (r.kind == SP_TLS) {
		check(nfd == 0 && r.derlen >= 1 && r.derlen <= SESSION_TLS_MAX);
		sp_fmt_tls(&b, r.der, r.derlen);
	} else {
		check(r.kind == SP_MESSAGE && nfd == SP_NFD && n <= SESSION_REQUEST_MAX);
		check(r.nrcpt >= 1);
		for (i = 0; i < r.nrcpt; i++)
			check(r.rcpts[i][0] != '\0');
		check(r.grace <= SP_GRACE_MAX);
		check(sp_message_len(r.qid, r.grace, r.sender, r.rcpts, r.nrcpt) == n);
		sp_fmt_message(&b, r.qid, r.grace, r.sender, r.rcpts, r.nrcpt);
	}
	check(b.len == n && memcmp(b.s, s, n) == 0);
	check(sp_parse_request(b.s, b.len, nfd, &again, &why) == 0);
	check(again.kind == r.kind && again.nrcpt == r.nrcpt && again.derlen == r.derlen &&
	    again.grace == r.grace);
	sp_request_free(&again);
	sp_request_free(&r);
	buf_free(&b);
}

static void
word(const char *s, size_t n)
{
	struct sp_word w, again;
	struct buf b = BUF_INIT;
	const char *why = NULL;

	if (sp_parse_word(s, n, &w, &why) < 0) {
		check(why != NULL);
		return;
	}
	check(w.kind == SP_READY || w.kind == SP_CLOSING);
	check(w.der == NULL || (w.kind == SP_READY && w.derlen >= 1 &&
	    w.derlen <= SESSION_TLS_MAX));
	sp_fmt_word(&b, w.kind, w.der, w.derlen);
	check(b.len == n && memcmp(b.s, s, n) == 0);
	check(sp_parse_word(b.s, b.len, &again, &why) == 0);
	check(again.kind == w.kind && again.derlen == w.derlen);
	buf_free(&b);
}

static void
flight(const char *s, size_t n)
{
	struct sp_flight f, again;
	struct buf b = BUF_INIT;
	const char *why = NULL;

	if (sp_parse_flight(s, n, &f, &why) < 0) {
		check(why != NULL);
		return;
	}
	if (f.empty) {
		check(n == 0);
		return;
	}
	check(f.n >= 1 && f.grant >= 1 && (!f.done || f.taken));
	sp_fmt_flight_msg(&b, f.qid, f.upstream, f.grant, f.boot, f.offs, f.n);
	if (f.taken)
		sp_fmt_flight_taken(&b);
	if (f.done)
		sp_fmt_flight_done(&b, f.report, f.reportlen, f.outcome, f.outcomelen);
	check(b.len == n && memcmp(b.s, s, n) == 0);
	check(sp_parse_flight(b.s, b.len, &again, &why) == 0);
	check(again.n == f.n && again.grant == f.grant && again.taken == f.taken &&
	    again.done == f.done && again.reportlen == f.reportlen);
	sp_flight_free(&again);
	sp_flight_free(&f);
	buf_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;

	if (size == 0)
		return 0;
	if (data[0] & 1)
		request(s, size - 1, (data[0] >> 1) & 3);
	else if (data[0] & 8)
		flight(s, size - 1);
	else
		word(s, size - 1);
	return 0;
}
