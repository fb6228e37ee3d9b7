/*
 * sessproto_test.c: the kept-session datagrams (mail/sessproto.c), as a
 * table: every well-formed datagram of each direction parses to its
 * fields and formats back to the same bytes; every malformed one is
 * refused with its reason.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/sessproto.h"

#define S(x) x, sizeof(x) - 1
#define QID "123.1700000000.000000005"

/* A request datagram and what it must come to. */
struct req_case {
	const char *bytes;
	size_t len;
	size_t nfd;
	int ok;			/* parses */
	enum sp_kind kind;
	size_t nrcpt;
	const char *why;	/* when refused */
};

static const struct req_case requests[] = {
	{ S(QID "\0" "600\0a@b.example\0c@d.example\0"), SP_NFD, 1, SP_MESSAGE, 1, NULL },
	{ S(QID "\0" "0\0\0c@d.example\0e@f.example\0"), SP_NFD, 1, SP_MESSAGE, 2, NULL },
	{ S(QID "\0" "31622400\0a@b\0c@d\0"), SP_NFD, 1, SP_MESSAGE, 1, NULL },
	{ S("tls\0\x30\x82"), 0, 1, SP_TLS, 0, NULL },
	{ S("tls\0"), 0, 0, 0, 0, "an empty TLS session" },
	{ S("tls\0\x30"), SP_NFD, 0, 0, 0, "a message request that does not end in NUL" },
	{ S("tls\0\x30\0"), SP_NFD, 0, 0, 0, "a message request without a recipient" },
	{ S(QID "\0" "600\0a@b.example\0c@d.example\0"), 2, 0, 0, 0,
	    "a message request without its three descriptors" },
	{ S(QID "\0" "600\0a@b.example\0c@d.example\0"), 0, 0, 0, 0,
	    "a message request without its three descriptors" },
	{ S(QID "\0" "600\0a@b.example\0c@d.example"), SP_NFD, 0, 0, 0,
	    "a message request that does not end in NUL" },
	{ S(""), SP_NFD, 0, 0, 0, "a message request that does not end in NUL" },
	{ S(QID "\0" "600\0a@b.example\0"), SP_NFD, 0, 0, 0,
	    "a message request without a recipient" },
	{ S("123\0" "600\0a@b.example\0c@d.example\0"), SP_NFD, 0, 0, 0,
	    "a malformed message id" },
	{ S(QID "\0" "0600\0a@b\0c@d\0"), SP_NFD, 0, 0, 0, "a malformed grace" },
	{ S(QID "\0" "31622401\0a@b\0c@d\0"), SP_NFD, 0, 0, 0, "a malformed grace" },
	{ S(QID "\0" "\0a@b\0c@d\0"), SP_NFD, 0, 0, 0, "a malformed grace" },
	{ S(QID "\0" "6 0\0a@b\0c@d\0"), SP_NFD, 0, 0, 0, "a malformed grace" },
	{ S(QID "\0" "600\0a@b.example\0\0c@d.example\0"), SP_NFD, 0, 0, 0,
	    "an empty recipient" },
	{ S(QID "\0" "600\0a\r@b.example\0c@d.example\0"), SP_NFD, 0, 0, 0,
	    "a sender that cannot stand in an envelope" },
	{ S(QID "\0" "600\0a@b.example\0c\n@d.example\0"), SP_NFD, 0, 0, 0,
	    "a recipient that cannot stand in an envelope" },
};

Test(sessproto, requests)
{
	size_t i;

	for (i = 0; i < sizeof requests / sizeof requests[0]; i++) {
		const struct req_case *c = &requests[i];
		struct sp_request r;
		const char *why = NULL;
		int rc = sp_parse_request(c->bytes, c->len, c->nfd, &r, &why);

		if (!c->ok) {
			cr_assert_eq(rc, -1, "case %zu accepted", i);
			cr_assert_str_eq(why, c->why, "case %zu", i);
			continue;
		}
		cr_assert_eq(rc, 0, "case %zu: %s", i, why);
		cr_assert_eq(r.kind, c->kind, "case %zu", i);
		if (r.kind == SP_MESSAGE) {
			struct buf b = BUF_INIT;

			cr_assert_eq(r.nrcpt, c->nrcpt, "case %zu", i);
			cr_assert_str_eq(r.qid, QID);
			cr_assert_eq(sp_message_len(r.qid, r.grace, r.sender, r.rcpts, r.nrcpt),
			    c->len);
			sp_fmt_message(&b, r.qid, r.grace, r.sender, r.rcpts, r.nrcpt);
			cr_assert(b.len == c->len && memcmp(b.s, c->bytes, c->len) == 0, "case %zu", i);
			buf_free(&b);
		} else {
			struct buf b = BUF_INIT;

			sp_fmt_tls(&b, r.der, r.derlen);
			cr_assert(b.len == c->len && memcmp(b.s, c->bytes, c->len) == 0, "case %zu", i);
			buf_free(&b);
		}
		sp_request_free(&r);
	}
}

Test(sessproto, request_bounds)
{
	size_t n = SESSION_REQUEST_MAX + 1, tl = 4 + SESSION_TLS_MAX;
	char *big = xcalloc(n + 1, 1), *tls = xcalloc(tl + 2, 1);
	struct sp_request r;
	const char *why = NULL;

	/* One recipient long enough to make the datagram one byte too big. */
	memcpy(big, QID "\0" "9\0a@b\0", sizeof QID + 6);
	memset(big + sizeof QID + 6, 'x', n - sizeof QID - 7);
	cr_assert_eq(sp_parse_request(big, n, SP_NFD, &r, &why), -1);
	cr_assert_str_eq(why, "a message request longer than SESSION_REQUEST_MAX");
	memcpy(tls, "tls", 4);
	cr_assert_eq(sp_parse_request(tls, tl, 0, &r, &why), 0, "%s", why);
	cr_assert_eq(r.derlen, SESSION_TLS_MAX);
	cr_assert_eq(sp_parse_request(tls, tl + 1, 0, &r, &why), -1);
	cr_assert_str_eq(why, "a TLS session longer than SESSION_TLS_MAX");
	free(big);
	free(tls);
}

struct word_case {
	const char *bytes;
	size_t len;
	int ok;
	enum sp_kind kind;
	size_t derlen;
	const char *why;
};

static const struct word_case words[] = {
	{ S("ready"), 1, SP_READY, 0, NULL },
	{ S("ready\0\x30\x82\x01"), 1, SP_READY, 3, NULL },
	{ S("closing"), 1, SP_CLOSING, 0, NULL },
	{ S("ready\0"), 0, 0, 0, "\"ready\" with trailing bytes but no TLS session" },
	{ S("readyX"), 0, 0, 0, "\"ready\" with trailing bytes but no TLS session" },
	{ S("closing\0"), 0, 0, 0, "an unknown word" },
	{ S("ready "), 0, 0, 0, "\"ready\" with trailing bytes but no TLS session" },
	{ S("READY"), 0, 0, 0, "an unknown word" },
	{ S("rea"), 0, 0, 0, "an unknown word" },
	{ S(""), 0, 0, 0, "an unknown word" },
};

Test(sessproto, words)
{
	size_t i;

	for (i = 0; i < sizeof words / sizeof words[0]; i++) {
		const struct word_case *c = &words[i];
		struct sp_word w;
		struct buf b = BUF_INIT;
		const char *why = NULL;
		int rc = sp_parse_word(c->bytes, c->len, &w, &why);

		if (!c->ok) {
			cr_assert_eq(rc, -1, "case %zu accepted", i);
			cr_assert_str_eq(why, c->why, "case %zu", i);
			continue;
		}
		cr_assert_eq(rc, 0, "case %zu: %s", i, why);
		cr_assert_eq(w.kind, c->kind, "case %zu", i);
		cr_assert_eq(w.derlen, c->derlen, "case %zu", i);
		sp_fmt_word(&b, w.kind, w.der, w.derlen);
		cr_assert(b.len == c->len && memcmp(b.s, c->bytes, c->len) == 0, "case %zu", i);
		buf_free(&b);
	}
}

Test(sessproto, word_bounds)
{
	char *w = xcalloc(SESSION_WORD_MAX + 2, 1);
	struct sp_word wd;
	const char *why = NULL;

	memcpy(w, "ready", 6);
	cr_assert_eq(sp_parse_word(w, SESSION_WORD_MAX, &wd, &why), 0, "%s", why);
	cr_assert_eq(wd.derlen, SESSION_TLS_MAX);
	cr_assert_eq(sp_parse_word(w, SESSION_WORD_MAX + 1, &wd, &why), -1);
	cr_assert_str_eq(why, "a TLS session longer than SESSION_TLS_MAX");
	free(w);
}

/* The flight file, as weir-send and the deliverer write it and weir-send
 * reads it back after a crash: each stage parses to what was written;
 * a torn or foreign file is refused with its reason. */
Test(sessproto, flight_file_stages)
{
	const size_t offs[] = { 0, 17, 40 };
	const char rep[] = "rok\0sno\0hbad\0Kdone\0";
	struct buf b = BUF_INIT;
	struct sp_flight f;
	const char *why = NULL;

	cr_assert_eq(sp_parse_flight("", 0, &f, &why), 0);
	cr_assert(f.empty);
	sp_fmt_flight_msg(&b, QID, "isp", 42, "0d3c-ab", offs, 3);
	cr_assert_str_eq(buf_cstr(&b), "msg " QID " isp 42 0d3c-ab 3 0 17 40\n");
	cr_assert_eq(sp_parse_flight(b.s, b.len, &f, &why), 0, "%s", why);
	cr_assert(!f.empty && !f.taken && !f.done && f.grant == 42 && f.n == 3 &&
	    f.offs[1] == 17);
	cr_assert_str_eq(f.qid, QID);
	cr_assert_str_eq(f.upstream, "isp");
	cr_assert_str_eq(f.boot, "0d3c-ab");
	sp_flight_free(&f);
	sp_fmt_flight_taken(&b);
	cr_assert_eq(sp_parse_flight(b.s, b.len, &f, &why), 0, "%s", why);
	cr_assert(f.taken && !f.done);
	sp_flight_free(&f);
	sp_fmt_flight_done(&b, rep, sizeof rep - 1, "sent 2 123 0\n", 13);
	cr_assert_eq(sp_parse_flight(b.s, b.len, &f, &why), 0, "%s", why);
	cr_assert(f.taken && f.done && f.reportlen == sizeof rep - 1 &&
	    memcmp(f.report, rep, f.reportlen) == 0 && f.outcomelen == 13 &&
	    memcmp(f.outcome, "sent 2 123 0\n", 13) == 0);
	sp_flight_free(&f);
	/* Torn: the outcome cut short, the reports cut short, the line. */
	cr_assert_eq(sp_parse_flight(b.s, b.len - 1, &f, &why), -1);
	cr_assert_str_eq(why, "the outcome is not one line at the end");
	cr_assert_eq(sp_parse_flight(b.s, b.len - 13, &f, &why), -1);
	cr_assert_str_eq(why, "the reports or the outcome line cut short");
	buf_free(&b);
}

static void
flight_refused(const char *s, size_t n, const char *want)
{
	struct sp_flight f;
	const char *why = NULL;

	cr_assert_eq(sp_parse_flight(s, n, &f, &why), -1, "accepted %.*s", (int)n, s);
	cr_assert_str_eq(why, want, "%.*s", (int)n, s);
}

Test(sessproto, flight_file_refused)
{
	flight_refused(S("junk\n"), "no \"msg\" line first");
	flight_refused(S("msg " QID " isp 42 b 1 0"), "no \"msg\" line first");
	flight_refused(S("msg 1.2 isp 42 b 1 0\n"), "a malformed message id");
	flight_refused(S("msg " QID " i/p 42 b 1 0\n"), "a malformed upstream");
	flight_refused(S("msg " QID " isp 0 b 1 0\n"), "a malformed grant id");
	flight_refused(S("msg " QID " isp 042 b 1 0\n"), "a malformed grant id");
	flight_refused(S("msg " QID " isp 42 b 0\n"), "a malformed recipient count");
	flight_refused(S("msg " QID " isp 42 B!t 1 0\n"), "a malformed boot id");
	flight_refused(S("msg " QID " isp 42 b\x01 1 0\n"), "a malformed boot id");
	flight_refused(S("msg " QID " isp 42 b 2 0\n"), "a malformed recipient offset");
	flight_refused(S("msg " QID " isp 42 b 1 0 5\n"), "trailing bytes after the offsets");
	flight_refused(S("msg " QID " isp 42 b 1 0 \n"), "trailing bytes after the offsets");
	flight_refused(S("msg " QID " isp 42 b 1 0\ntook\n"),
	    "no \"taken\" line after \"msg\"");
	flight_refused(S("msg " QID " isp 42 b 1 0\ntaken\ndone x\n"),
	    "a malformed \"done\" line");
	flight_refused(S("msg " QID " isp 42 b 1 0\ntaken\ndone 3\nab"),
	    "the reports or the outcome line cut short");
	flight_refused(S("msg " QID " isp 42 b 1 0\ntaken\ndone 1\nrsent 1 2 0\nx\n"),
	    "the outcome is not one line at the end");
}
