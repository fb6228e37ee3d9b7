/*
 * gateproto_test.c: the weir-gate wire format (src/mail/gateproto.c):
 * round trips of every request and reply, and malformed, oversized,
 * truncated input rejected with the right error code; the client stubs
 * (src/mail/gateclient.c) write exactly the documented lines.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <sys/socket.h>
#include <unistd.h>

#include "lib/buf.h"
#include "mail/gateclient.h"
#include "mail/gateproto.h"

static enum gp_code
req(const char *line, struct gp_req *r)
{
	const char *why = NULL;
	enum gp_code c = gp_parse_request(line, strlen(line), r, &why);

	if (c != GP_OK)
		cr_assert_not_null(why);
	return c;
}

Test(gateproto, acquire_round_trip)
{
	struct gp_req r, r2;
	struct buf b = BUF_INIT;
	const char *why;

	cr_assert_eq(req("ACQUIRE 7 pobox bulk list-owner@example.org 1 250 1", &r), GP_OK);
	cr_assert_eq(r.verb, GP_ACQUIRE);
	cr_assert_eq(r.tag, 7);
	cr_assert_str_eq(r.upstream, "pobox");
	cr_assert_str_eq(r.cls, "bulk");
	cr_assert_str_eq(r.sender, "list-owner@example.org");
	cr_assert(r.w[UNIT_MESSAGES] == 1 && r.w[UNIT_RECIPIENTS] == 250 &&
	    r.w[UNIT_CONNECTIONS] == 1);
	gp_fmt_request(&b, &r);
	cr_assert_str_eq(b.s, "ACQUIRE 7 pobox bulk list-owner@example.org 1 250 1\n");
	cr_assert_eq(gp_parse_request(b.s, b.len - 1, &r2, &why), GP_OK);
	cr_assert_eq(memcmp(&r, &r2, sizeof r), 0);
	cr_assert_eq(req("ACQUIRE 4294967295 a - - 0 0 1", &r), GP_OK);
	cr_assert_str_eq(r.cls, "");
	cr_assert_str_eq(r.sender, "");
	cr_assert_eq(r.tag, 4294967295u);
	buf_free(&b);
}

Test(gateproto, report_cancel_status)
{
	struct gp_req r;
	struct buf b = BUF_INIT;

	cr_assert_eq(req("REPORT 3 SENT 12 -", &r), GP_OK);
	cr_assert(r.verb == GP_REPORT && r.outcome == GP_SENT && r.accepted == 12 && r.at == -1);
	cr_assert_eq(req("REPORT 3 REFUND", &r), GP_OK);
	cr_assert_eq(r.outcome, GP_REFUND);
	cr_assert_eq(req("REPORT 3 THROTTLED 421 4.7.0 Try  again later ", &r), GP_OK);
	cr_assert_eq(r.outcome, GP_THROTTLED);
	cr_assert_str_eq(r.text, "421 4.7.0 Try  again later ");
	gp_fmt_request(&b, &r);
	cr_assert_str_eq(b.s, "REPORT 3 THROTTLED 421 4.7.0 Try  again later \n");
	/* A quota reply (issue 31): its own word, its text kept whole. */
	cr_assert_eq(req("REPORT 4 QUOTA 554 5.2.0 SubmissionQuotaExceededException; x", &r), GP_OK);
	cr_assert_eq(r.outcome, GP_QUOTA);
	cr_assert_str_eq(r.text, "554 5.2.0 SubmissionQuotaExceededException; x");
	buf_reset(&b);
	gp_fmt_request(&b, &r);
	cr_assert_str_eq(b.s, "REPORT 4 QUOTA 554 5.2.0 SubmissionQuotaExceededException; x\n");
	cr_assert_eq(req("SETTLE a 2 QUOTA 452 4.5.3 Daily sending quota exceeded", &r), GP_OK);
	cr_assert(r.verb == GP_SETTLE && r.outcome == GP_QUOTA);
	cr_assert_eq(req("REPORT 4 QUOTA", &r), GP_SYNTAX);
	cr_assert_eq(req("CANCEL 9", &r), GP_OK);
	cr_assert(r.verb == GP_CANCEL && r.tag == 9);
	cr_assert_eq(req("STATUS JSON", &r), GP_OK);
	cr_assert(r.verb == GP_STATUS && r.json);
	cr_assert_eq(req("STATUS TEXT", &r), GP_OK);
	cr_assert(!r.json);
	cr_assert_eq(r.history_s, 0);
	buf_free(&b);
}

/* STATUS JSON <seconds>: 1 to 3600 in plain decimal, JSON only; it
 * formats back to the same line, and gc_status_history refuses what the
 * gate would. */
Test(gateproto, status_history)
{
	static const char *const bad[] = {
		"STATUS JSON 0", "STATUS JSON 3601", "STATUS JSON 060", "STATUS JSON -1",
		"STATUS JSON +60", "STATUS JSON 60s", "STATUS JSON 60 1", "STATUS TEXT 60",
		"STATUS JSON  60", "STATUS JSON 60 ", "STATUS JSON 99999999999999999999",
	};
	struct buf b = BUF_INIT;
	struct gp_req r;
	size_t i;

	cr_assert_eq(req("STATUS JSON 3600", &r), GP_OK);
	cr_assert(r.verb == GP_STATUS && r.json && r.history_s == 3600);
	gp_fmt_request(&b, &r);
	cr_assert_str_eq(b.s, "STATUS JSON 3600\n");
	cr_assert_eq(req("STATUS JSON 1", &r), GP_OK);
	cr_assert_eq(r.history_s, 1);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(req(bad[i], &r), GP_SYNTAX, "\"%s\"", bad[i]);
	buf_free(&b);
}

/* The reports of issue 12 and RESUME: each parses, formats back to the
 * same line, and the client stubs write exactly these lines. */
Test(gateproto, new_reports_and_resume)
{
	static const char *const good[] = {
		"REPORT 3 SENT 12 1234567", "REPORT 3 SENT 0 0", "REPORT 3 SENT 1 -",
		"REPORT 4 UNKNOWN", "REPORT 5 NOMAIL",
		"REPORT 6 AUTHFAIL 535 5.7.8 Authentication credentials invalid",
		"REPORT 6 AUTHFAIL TLS: certificate verify failed", "RESUME pobox",
		"REPORT 7 SENT 1 9007199254740992",
		"COUNTS pobox 4 7 3 4 2 2 1 1 1 0 0", "COUNTS a 0 0 0 0 0 0 0 0 0 0 0",
		"COUNTS a 9007199254740992 1 2 3 4 5 6 7 8 9 10",
		"SETTLE pobox 17 SENT 1 1234567", "SETTLE pobox 17 SENT 0 -",
		"SETTLE pobox 18446744073709551615 REFUND", "SETTLE a.b 1 NOMAIL",
		"SETTLE a 2 THROTTLED 421 4.7.0 try  later", "SETTLE a 3 AUTHFAIL 535 no",
		"START 1", "START 4294967295", "STARTS",
		"REFUSED isp keep-alive: OAuth: invalid_grant: AADSTS70008 expired",
		"REFUSED a x",
	};
	struct gp_req r, r2;
	struct buf b = BUF_INIT;
	const char *why;
	size_t i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		cr_assert_eq(req(good[i], &r), GP_OK, "\"%s\"", good[i]);
		buf_reset(&b);
		gp_fmt_request(&b, &r);
		cr_assert_eq(b.len, strlen(good[i]) + 1, "%s -> %s", good[i], b.s);
		cr_assert_eq(memcmp(b.s, good[i], b.len - 1), 0, "%s -> %s", good[i], b.s);
		cr_assert_eq(gp_parse_request(b.s, b.len - 1, &r2, &why), GP_OK);
		cr_assert_eq(memcmp(&r, &r2, sizeof r), 0);
	}
	cr_assert_eq(req("REPORT 3 SENT 12 1234567", &r), GP_OK);
	cr_assert(r.outcome == GP_SENT && r.accepted == 12 && r.at == 1234567);
	cr_assert_eq(req("REPORT 4 UNKNOWN", &r), GP_OK);
	cr_assert(r.verb == GP_REPORT && r.outcome == GP_UNKNOWN && r.tag == 4);
	cr_assert_eq(req("REPORT 5 NOMAIL", &r), GP_OK);
	cr_assert_eq(r.outcome, GP_NOMAIL);
	cr_assert_eq(req("REPORT 6 AUTHFAIL 535 5.7.8 bad  creds", &r), GP_OK);
	cr_assert_eq(r.outcome, GP_AUTHFAIL);
	cr_assert_str_eq(r.text, "535 5.7.8 bad  creds");
	cr_assert_eq(req("SETTLE pobox 17 SENT 2 1234567", &r), GP_OK);
	cr_assert(r.verb == GP_SETTLE && r.tag == 0 && r.grant == 17 && r.outcome == GP_SENT &&
	    r.accepted == 2 && r.at == 1234567);
	cr_assert_str_eq(r.upstream, "pobox");
	cr_assert_eq(req("SETTLE a 2 THROTTLED 421 busy", &r), GP_OK);
	cr_assert(r.verb == GP_SETTLE && r.grant == 2 && r.outcome == GP_THROTTLED);
	cr_assert_str_eq(r.text, "421 busy");
	cr_assert_eq(req("RESUME pobox", &r), GP_OK);
	cr_assert(r.verb == GP_RESUME && r.tag == 0);
	cr_assert_str_eq(r.upstream, "pobox");
	cr_assert_eq(req("REFUSED isp invalid_grant:  it  expired ", &r), GP_OK);
	cr_assert(r.verb == GP_REFUSED && r.tag == 0);
	cr_assert_str_eq(r.upstream, "isp");
	cr_assert_str_eq(r.text, "invalid_grant:  it  expired ");
	cr_assert_eq(req("COUNTS pobox 4 7 3 4 2 2 1 1 9 3 2", &r), GP_OK);
	cr_assert(r.verb == GP_COUNTS && r.tag == 0);
	cr_assert_str_eq(r.upstream, "pobox");
	cr_assert(r.counts[GP_C_QUEUED_MSGS] == 4 && r.counts[GP_C_QUEUED_RCPTS] == 7 &&
	    r.counts[GP_C_DELIVERED_MSGS] == 3 && r.counts[GP_C_DELIVERED_RCPTS] == 4 &&
	    r.counts[GP_C_DEFERRED_MSGS] == 2 && r.counts[GP_C_DEFERRED_RCPTS] == 2 &&
	    r.counts[GP_C_BOUNCED_MSGS] == 1 && r.counts[GP_C_BOUNCED_RCPTS] == 1 &&
	    r.counts[GP_C_SESSIONS] == 9 && r.counts[GP_C_SWITCHES] == 3 &&
	    r.counts[GP_C_RETURNS] == 2);
	buf_free(&b);
}

/* Fallbacks (mail/route.h): ACQUIRE's conditions, the reports of an
 * unreachable upstream, LATER; each one spelling. */
Test(gateproto, fallback_conditions_reports_and_later)
{
	static const char *const good[] = {
		"ACQUIRE 1 isp - a@b.example 1 3 0 unreachable=600,auth=0,quota=3600",
		"ACQUIRE 2 isp - - 1 1 1 throttled=31622400", "ACQUIRE 3 a b - 1 1 0 quota=0",
		"ACQUIRE 4 a - - 1 1 0 unreachable=0,auth=1,quota=2,throttled=3",
		"REPORT 5 UNREACHED connect to 127.0.0.1:25: Connection refused",
		"REPORT 6 NOGREETING 554 5.3.2  no service",
		"SETTLE isp 9 UNREACHED x", "SETTLE isp 9 NOGREETING TLS: handshake failed",
	};
	struct gp_req r, r2;
	struct gp_reply rp;
	struct gate_client gc;
	struct route_when w;
	struct buf b = BUF_INIT;
	const char *why;
	char got[512];
	int sv[2];
	ssize_t n;
	size_t i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		cr_assert_eq(req(good[i], &r), GP_OK, "\"%s\"", good[i]);
		buf_reset(&b);
		gp_fmt_request(&b, &r);
		cr_assert_eq(b.len, strlen(good[i]) + 1, "%s -> %s", good[i], b.s);
		cr_assert_eq(memcmp(b.s, good[i], b.len - 1), 0, "%s -> %s", good[i], b.s);
		cr_assert_eq(gp_parse_request(b.s, b.len - 1, &r2, &why), GP_OK);
		cr_assert_eq(memcmp(&r, &r2, sizeof r), 0);
	}
	cr_assert_eq(req(good[0], &r), GP_OK);
	cr_assert(r.unless.s[RK_UNREACHABLE] == 600 && r.unless.s[RK_AUTH] == 0 &&
	    r.unless.s[RK_QUOTA] == 3600 && r.unless.s[RK_THROTTLED] == RK_OFF);
	cr_assert_eq(req("ACQUIRE 1 isp - - 1 1 0", &r), GP_OK);
	cr_assert_eq(route_when_any(&r.unless), 0, "none without the field");
	cr_assert_eq(req("REPORT 6 NOGREETING 554 5.3.2  no service", &r), GP_OK);
	cr_assert(r.outcome == GP_NOGREETING && strcmp(r.text, "554 5.3.2  no service") == 0);
	cr_assert_eq(gp_parse_reply("LATER 7 quota 3599", 18, &rp, &why), GP_OK);
	cr_assert(rp.verb == GP_R_LATER && rp.tag == 7 && rp.why == RK_QUOTA && rp.secs == 3599);
	buf_reset(&b);
	gp_fmt_reply(&b, &rp);
	cr_assert_str_eq(b.s, "LATER 7 quota 3599\n");
	cr_assert_eq(gp_parse_reply("LATER 7 quota 0", 15, &rp, &why), GP_SYNTAX);
	cr_assert_eq(gp_parse_reply("LATER 7 quota 31622401", 22, &rp, &why), GP_SYNTAX);
	cr_assert_eq(gp_parse_reply("LATER 7 soon 1", 14, &rp, &why), GP_SYNTAX);
	cr_assert_eq(gp_parse_reply("LATER - auth 1", 14, &rp, &why), GP_SYNTAX);
	/* The client stubs: none by default, the given ones in order. */
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(&gc, 0, sizeof gc);
	gc.fd = sv[0];
	route_when_none(&w);
	w.s[RK_QUOTA] = 60;
	w.s[RK_AUTH] = 0;
	cr_assert_eq(gc_acquire(&gc, 1, "isp", NULL, NULL, 1, 2, 0), 0);
	cr_assert_eq(gc_acquire_unless(&gc, 2, "isp", NULL, "a@b", 1, 2, 0, &w), 0);
	cr_assert_eq(gc_report(&gc, 3, GP_UNREACHED, 0, -1, "connect: refused\n"), 0);
	w.s[RK_QUOTA] = RK_MAX_S + 1;
	cr_assert_eq(gc_acquire_unless(&gc, 4, "isp", NULL, NULL, 1, 2, 0, &w), -1);
	gc_close(&gc);
	n = read(sv[1], got, sizeof got - 1);
	cr_assert_gt(n, 0);
	got[n] = '\0';
	cr_assert_str_eq(got, "ACQUIRE 1 isp - - 1 2 0\nACQUIRE 2 isp - a@b 1 2 0 auth=0,quota=60\n"
	    "REPORT 3 UNREACHED connect: refused?\n");
	close(sv[1]);
	buf_free(&b);
}

/* The client stubs, through a socket pair: the exact bytes. */
Test(gateproto, client_stubs_write_the_contract)
{
	struct gate_client gc;
	int sv[2];
	char got[512];
	ssize_t n;
	const char *want = "REPORT 1 SENT 2 5000\nREPORT 2 SENT 3 -\nREPORT 3 UNKNOWN\n"
	    "REPORT 4 NOMAIL\nREPORT 5 AUTHFAIL 535 bad?pass\nRESUME isp\n"
	    "COUNTS isp 1 2 3 4 5 6 7 8 0 1 1\nSETTLE isp 77 SENT 1 4000\nSETTLE isp 78 REFUND\n"
	    "STARTS\nSTART 9\nREFUSED isp invalid_grant: ?expired?\nREFUSED isp ?\n";
	const uint64_t counts[GP_NCOUNTS] = { 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 1 };
	uint64_t toobig[GP_NCOUNTS] = { 0 };

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(&gc, 0, sizeof gc);
	gc.fd = sv[0];
	cr_assert_eq(gc_report_sent(&gc, 1, 2, 5000), 0);
	cr_assert_eq(gc_report_sent(&gc, 2, 3, -1), 0);
	cr_assert_eq(gc_report_unknown(&gc, 3), 0);
	cr_assert_eq(gc_report_nomail(&gc, 4), 0);
	cr_assert_eq(gc_report_authfail(&gc, 5, "535 bad\tpass"), 0);
	cr_assert_eq(gc_resume(&gc, "isp"), 0);
	cr_assert_eq(gc_counts(&gc, "isp", counts), 0);
	cr_assert_eq(gc_settle(&gc, "isp", 77, GP_SENT, 1, 4000, NULL), 0);
	cr_assert_eq(gc_settle(&gc, "isp", 78, GP_REFUND, 0, -1, NULL), 0);
	cr_assert_eq(gc_settle(&gc, "isp", 79, GP_UNKNOWN, 0, -1, NULL), -1);
	cr_assert_eq(gc_settle(&gc, "isp", 0, GP_REFUND, 0, -1, NULL), -1);
	cr_assert_eq(gc_settle(&gc, "bad/name", 80, GP_REFUND, 0, -1, NULL), -1);
	cr_assert_eq(gc_starts(&gc), 0);
	cr_assert_eq(gc_start(&gc, 9), 0);
	cr_assert_eq(gc_start(&gc, 0), -1);
	cr_assert_eq(gc_refused(&gc, "isp", "invalid_grant: \xe2" "expired\n"), 0);
	cr_assert_eq(gc_refused(&gc, "isp", ""), 0);
	cr_assert_eq(gc_refused(&gc, "bad/name", "x"), -1);
	toobig[GP_C_SESSIONS] = GP_COUNT_MAX + 1;
	cr_assert_eq(gc_counts(&gc, "isp", toobig), -1);
	cr_assert_eq(gc_counts(&gc, "bad/name", counts), -1);
	cr_assert_eq(gc_report_sent(&gc, 6, 1, -2), -1);
	cr_assert_eq(gc_resume(&gc, "bad/name"), -1);
	cr_assert_eq(gc_report_unknown(&gc, 0), -1);
	gc_close(&gc);
	n = read(sv[1], got, sizeof got - 1);
	cr_assert_gt(n, 0);
	got[n] = '\0';
	cr_assert_str_eq(got, want);
	close(sv[1]);
}

Test(gateproto, malformed_requests)
{
	static const char *const syntax[] = {
		"ACQUIRE", "ACQUIRE 1 a - - 1 1", "ACQUIRE 1 a - - 1 1 1 1",
		"ACQUIRE 0 a - - 1 1 1", "ACQUIRE 01 a - - 1 1 1", "ACQUIRE -1 a - - 1 1 1",
		"ACQUIRE 4294967296 a - - 1 1 1", "ACQUIRE 1 a b c d - - 1 1 1",
		"ACQUIRE 1 a - - 1 1 1 ", " ACQUIRE 1 a - - 1 1 1", "ACQUIRE  1 a - - 1 1 1",
		"ACQUIRE 1 a/b - - 1 1 1", "ACQUIRE 1 a - - 1 +1 1", "ACQUIRE 1 a - - 1 1000001 1",
		"ACQUIRE 1 a - - x 1 1", "ACQUIRE 1 a cl@ss - 1 1 1",
		"ACQUIRE 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa - - 1 1 1",
		"REPORT", "REPORT 1", "REPORT 1 SENT", "REPORT 1 SENT 1", "REPORT 1 SENT -1 -",
		"REPORT 1 SENT 1 -1", "REPORT 1 SENT 1 01", "REPORT 1 SENT 1 --", "REPORT 1 SENT 1 2 3",
		"REPORT 1 SENT 1 9007199254740993", "REPORT 1 SENT 1 x", "REPORT 1 SENT 1 - ",
		"REPORT 1 UNKNOWN 1", "REPORT 1 NOMAIL x", "REPORT 1 AUTHFAIL", "REPORT 1 AUTHFAIL ",
		"REPORT 0 UNKNOWN", "REPORT 1 unknown", "RESUME", "RESUME a b", "RESUME a/b",
		"RESUME ", "REPORT x AUTHFAIL 535 no",
		"REFUSED", "REFUSED isp", "REFUSED isp ", "REFUSED a/b no", "REFUSED  isp no",
		"REFUSED 1/ isp",
		"REPORT 1 REFUND now", "REPORT 1 THROTTLED", "REPORT 1 THROTTLED ", "REPORT 1 DONE",
		"REPORT x THROTTLED 421 busy", "REPORT 1 2 THROTTLED 421",
		"CANCEL", "CANCEL 1 2", "CANCEL 0", "STATUS", "STATUS XML", "STATUS TEXT JSON", "",
		"COUNTS", "COUNTS isp", "COUNTS isp 1 2 3 4 5 6 7 8 9",
		"COUNTS isp 1 2 3 4 5 6 7 8 9 10", "COUNTS isp 1 2 3 4 5 6 7 8 9 10 11 12",
		"COUNTS isp 01 2 3 4 5 6 7 8 9 0 0", "COUNTS isp 1 2 3 4 5 6 7 8 -9 0 0",
		"COUNTS isp 1 2 3 4 5 6 7 8 +9 0 0", "COUNTS isp 1 2 3 4 5 6 7 8 9007199254740993 0 0",
		"COUNTS isp 1 2 3 4 5 6 7 8 x 0 0", "COUNTS isp 1 2 3 4 5 6 7 8 9 0 0 ",
		"COUNTS isp 1 2 3 4 5 6 7  8 9 0 0", "COUNTS a/b 1 2 3 4 5 6 7 8 9 0 0",
		"COUNTS 1 2 3 4 5 6 7 8 9 0 0",
		"COUNTS isp 1 2 3 4 5 6 7 8 99999999999999999999999 0 0",
		"ACQUIRE 1 a - - 1 1 0 quota", "ACQUIRE 1 a - - 1 1 0 quota=", "ACQUIRE 1 a - - 1 1 0 =1",
		"ACQUIRE 1 a - - 1 1 0 quota=01", "ACQUIRE 1 a - - 1 1 0 quota=31622401",
		"ACQUIRE 1 a - - 1 1 0 auth=0,unreachable=600", "ACQUIRE 1 a - - 1 1 0 auth=0,auth=0",
		"ACQUIRE 1 a - - 1 1 0 auth=0,", "ACQUIRE 1 a - - 1 1 0 ,auth=0",
		"ACQUIRE 1 a - - 1 1 0 authentication=0", "ACQUIRE 1 a - - 1 1 0 quota=-1",
		"ACQUIRE 1 a - - 1 1 0 auth=0 quota=1", "ACQUIRE 1 a - - 1 1 0 -",
		"REPORT 1 UNREACHED", "REPORT 1 UNREACHED ", "REPORT 1 NOGREETING",
		"SETTLE isp 1 UNREACHED", "REPORT 1 unreached connect failed",
		"SETTLE", "SETTLE isp", "SETTLE isp 1", "SETTLE isp 0 REFUND", "SETTLE isp 01 REFUND",
		"SETTLE isp 1 UNKNOWN", "SETTLE a/b 1 REFUND", "SETTLE isp x REFUND",
		"SETTLE isp 18446744073709551616 REFUND", "SETTLE isp 1 SENT 1", "SETTLE isp 1 REFUND x",
		"SETTLE isp 1 THROTTLED", "SETTLE isp 0 THROTTLED 421", "SETTLE a/b 1 AUTHFAIL 535",
		"SETTLE 1 REFUND", "SETTLE isp 1 refund",
		"START", "START 0", "START 1 2", "START x", "STARTS 1", "STARTS -",
	};
	static const char *const verbs[] = { "GRANT 1 2 3 4", "acquire 1 a - - 1 1 1", "HELO x",
		"REFUSEDisp no" };
	struct gp_req r;
	size_t i;

	for (i = 0; i < sizeof syntax / sizeof syntax[0]; i++)
		cr_assert_eq(req(syntax[i], &r), GP_SYNTAX, "\"%s\"", syntax[i]);
	for (i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
		cr_assert_eq(req(verbs[i], &r), GP_VERB, "\"%s\"", verbs[i]);
}

Test(gateproto, bad_bytes)
{
	struct gp_req r;
	const char *why;
	static const char nul[] = "CANCEL 1\0junk";

	cr_assert_eq(gp_parse_request(nul, sizeof nul - 1, &r, &why), GP_NUL);
	cr_assert_eq(req("CANCEL 1\r", &r), GP_BYTE);
	cr_assert_eq(req("REPORT 1 THROTTLED 421 \tbusy", &r), GP_BYTE);
	cr_assert_eq(req("REPORT 1 THROTTLED 421 caf\xc3\xa9", &r), GP_BYTE);
	cr_assert_eq(req("CANCEL\x7f 1", &r), GP_BYTE);
}

Test(gateproto, framing_and_length)
{
	char big[GP_LINE_MAX + 10];
	size_t ll;
	struct gp_req r;
	const char *why;

	cr_assert_eq(gp_frame("CANCEL 1", 8, &ll), 0);		/* truncated: wait */
	cr_assert_eq(gp_frame("CANCEL 1\nCANC", 13, &ll), 1);
	cr_assert_eq(ll, 9);
	memset(big, 'A', sizeof big);
	cr_assert_eq(gp_frame(big, GP_LINE_MAX - 1, &ll), 0);
	cr_assert_eq(gp_frame(big, GP_LINE_MAX, &ll), -1);	/* no "\n" in 1024 bytes */
	big[GP_LINE_MAX - 1] = '\n';
	cr_assert_eq(gp_frame(big, sizeof big, &ll), 1);	/* exactly 1024 with "\n" */
	cr_assert_eq(ll, GP_LINE_MAX);
	big[GP_LINE_MAX - 1] = 'A';
	big[GP_LINE_MAX] = '\n';
	cr_assert_eq(gp_frame(big, sizeof big, &ll), -1);	/* 1025 */
	cr_assert_eq(gp_parse_request(big, GP_LINE_MAX, &r, &why), GP_TOOLONG);
	/* A throttle text longer than GP_TEXT_MAX in a line that fits. */
	memcpy(big, "REPORT 1 THROTTLED ", 19);
	memset(big + 19, 'x', GP_TEXT_MAX + 1);
	cr_assert_eq(gp_parse_request(big, 19 + GP_TEXT_MAX + 1, &r, &why), GP_SYNTAX);
	cr_assert_eq(gp_parse_request(big, 19 + GP_TEXT_MAX, &r, &why), GP_OK);
}

Test(gateproto, replies_round_trip_and_malformed)
{
	struct gp_reply r, r2;
	struct buf b = BUF_INIT;
	const char *why;
	size_t i;
	static const char *const badr[] = {
		"GRANT 1 2 3", "GRANT 0 2 3 4 5", "GRANT 1 2 3 4", "GRANT 1 2 3 4 5 6",
		"GRANT 1 2 3 4 31622401", "GRANT 1 2 3 4 -", "OK", "OK 1 2", "SUSPENDED 1",
		"ERR 1 NOSUCH text", "ERR 1 TOOBIG", "ERR 1 TOOBIG ", "ERR x TOOBIG t", "OK 0", "OK --",
		"STATUS 16777217", "STATUS -1", "HELLO", "ERR  TOOBIG x",
	};

	memset(&r, 0, sizeof r);
	r.verb = GP_R_GRANT; r.tag = 5; r.id = 123456789012ULL; r.max_rcpt = 100; r.msgs_per_conn = 1;
	r.grace = 600;
	gp_fmt_reply(&b, &r);
	cr_assert_str_eq(b.s, "GRANT 5 123456789012 100 1 600\n");
	cr_assert_eq(gp_parse_reply(b.s, b.len - 1, &r2, &why), GP_OK);
	cr_assert_eq(memcmp(&r, &r2, sizeof r), 0);
	buf_reset(&b);
	memset(&r, 0, sizeof r);
	r.verb = GP_R_ERR; r.code = GP_TOOBIG;
	strcpy(r.text, "250 recipients: window 100 per 1d can never hold it");
	gp_fmt_reply(&b, &r);
	cr_assert_str_eq(b.s, "ERR - TOOBIG 250 recipients: window 100 per 1d can never hold it\n");
	cr_assert_eq(gp_parse_reply(b.s, b.len - 1, &r2, &why), GP_OK);
	cr_assert_eq(memcmp(&r, &r2, sizeof r), 0);
	cr_assert_eq(gp_parse_reply("OK -", 4, &r2, &why), GP_OK);
	cr_assert(r2.verb == GP_R_OK && r2.tag == 0);
	buf_reset(&b);
	gp_fmt_reply(&b, &r2);
	cr_assert_str_eq(b.s, "OK -\n");
	cr_assert_eq(gp_parse_reply("SUSPENDED 3 300", 15, &r2, &why), GP_OK);
	cr_assert_eq(r2.secs, 300);
	cr_assert_eq(gp_parse_reply("STATUS 12", 9, &r2, &why), GP_OK);
	cr_assert_eq(r2.length, 12);
	for (i = 0; i < sizeof badr / sizeof badr[0]; i++)
		cr_assert_neq(gp_parse_reply(badr[i], strlen(badr[i]), &r2, &why), GP_OK, "%s",
		    badr[i]);
	buf_free(&b);
}

/* Random lines from protocol-shaped pieces (fixed seed): the parser never
 * crashes, never accepts a line with a byte outside 0x20-0x7e, and what it
 * accepts formats back to the very same line. */
Test(gateproto, random_lines_round_trip_or_fail_cleanly)
{
	static const char *const piece[] = {
		"ACQUIRE", "REPORT", "CANCEL", "STATUS", "SENT", "REFUND", "THROTTLED",
		"UNKNOWN", "NOMAIL", "AUTHFAIL", "RESUME", "SETTLE", "REFUSED",
		"TEXT", "JSON", "GRANT", "OK", "SUSPENDED", "ERR", "TOOBIG", "-", "0", "1",
		"01", "42", "4294967295", "4294967296", "1000000", "1000001", "up", "a.b-c_d",
		"x@y", "421", "4.7.0", " ", " ", " ", "  ", "\t", "\r", "\x7f", "\xc3\xa9",
		"", "a b", "-1", "+1",
	};
	const size_t np = sizeof piece / sizeof piece[0];
	uint64_t rng = 88172645463325252ULL;
	struct buf b = BUF_INIT, out = BUF_INIT;
	struct gp_req r, r2;
	struct gp_reply y, y2;
	const char *why;
	size_t i, k, n, accepted = 0, accepted_r = 0;

	for (i = 0; i < 200000; i++) {
		buf_reset(&b);
		rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
		n = 1 + rng % 9;
		for (k = 0; k < n; k++) {
			rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
			if (k)
				buf_addc(&b, ' ');
			buf_adds(&b, piece[rng % np]);
		}
		if (gp_parse_request(b.s, b.len, &r, &why) == GP_OK) {
			accepted++;
			for (k = 0; k < b.len; k++)
				cr_assert(b.s[k] >= 0x20 && b.s[k] <= 0x7e, "\"%s\"", b.s);
			buf_reset(&out);
			gp_fmt_request(&out, &r);
			cr_assert_eq(out.len, b.len + 1, "\"%s\" -> \"%s\"", b.s, out.s);
			cr_assert_eq(memcmp(out.s, b.s, b.len), 0, "\"%s\" -> \"%s\"", b.s, out.s);
			cr_assert_eq(gp_parse_request(out.s, out.len - 1, &r2, &why), GP_OK);
			cr_assert_eq(memcmp(&r, &r2, sizeof r), 0);
		}
		if (gp_parse_reply(b.s, b.len, &y, &why) == GP_OK) {
			accepted_r++;
			buf_reset(&out);
			gp_fmt_reply(&out, &y);
			cr_assert_eq(out.len, b.len + 1, "\"%s\" -> \"%s\"", b.s, out.s);
			cr_assert_eq(memcmp(out.s, b.s, b.len), 0, "\"%s\" -> \"%s\"", b.s, out.s);
			cr_assert_eq(gp_parse_reply(out.s, out.len - 1, &y2, &why), GP_OK);
			cr_assert_eq(memcmp(&y, &y2, sizeof y), 0);
		}
	}
	cr_log_info("%zu requests and %zu replies of 200000 lines parsed", accepted, accepted_r);
	/* Both parsers saw a fair share of valid lines. */
	cr_assert_gt(accepted, 100, "%zu", accepted);
	cr_assert_gt(accepted_r, 100, "%zu", accepted_r);
	buf_free(&b);
	buf_free(&out);
}
