/*
 * report_test.c: report_parse() (src/send/report.c) on every shape of
 * qmail-remote(8) output: r/h/s per recipient then K/Z/D; fewer
 * recipient reports than recipients; only a message report; no message
 * report; two message reports; a recipient report after the message
 * report; too many recipient reports; an unknown letter; an empty
 * record; no final NUL; empty output; r with Z or D.  Each case checks
 * every recipient's status, text and own flag, and the message text.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "send/report.h"

#define S(x) x, sizeof(x) - 1
#define BAD "the deliverer's output could not be understood"

struct want {
	enum rstatus st;
	const char *text;
	int own;
};

static void
check(const char *out, size_t len, size_t n, const struct want *w, const char *wmsg)
{
	struct rresult res[8];
	const char *msgtext = (const char *)1;
	size_t i;

	cr_assert(n <= 8);
	memset(res, 0x5a, sizeof res);
	report_parse(out, len, n, res, &msgtext);
	cr_assert(msgtext != NULL && msgtext != (const char *)1, "message text not set");
	cr_assert_str_eq(msgtext, wmsg, "message text \"%s\", expected \"%s\"", msgtext, wmsg);
	for (i = 0; i < n; i++) {
		cr_assert_eq(res[i].st, w[i].st, "recipient %zu: status %d, expected %d", i,
		    res[i].st, w[i].st);
		cr_assert(res[i].text != NULL, "recipient %zu: no text", i);
		cr_assert_str_eq(res[i].text, w[i].text, "recipient %zu: text \"%s\", expected \"%s\"",
		    i, res[i].text, w[i].text);
		cr_assert_eq(res[i].own, w[i].own, "recipient %zu: own %d, expected %d", i,
		    res[i].own, w[i].own);
	}
	/* Nothing written past the n results. */
	for (i = 0; i < sizeof res[0]; i++)
		cr_assert_eq(((unsigned char *)&res[n])[i], 0x5a, "wrote past recipient %zu", n);
}

Test(report, all_accepted_K)
{
	static const char out[] = "r\0r\0K127.0.0.1 accepted message.\nRemote host said: 250 ok\0";
	const struct want w[] = {
		{ RS_DELIVERED, "127.0.0.1 accepted message.\nRemote host said: 250 ok", 0 },
		{ RS_DELIVERED, "127.0.0.1 accepted message.\nRemote host said: 250 ok", 0 },
	};

	check(S(out), 2, w, "127.0.0.1 accepted message.\nRemote host said: 250 ok");
}

Test(report, r_h_s_then_K)
{
	static const char out[] =
	    "r\0h550 5.1.1 no such user\0s451 4.2.1 mailbox busy\0K250 2.0.0 queued\0";
	const struct want w[] = {
		{ RS_DELIVERED, "250 2.0.0 queued", 0 },
		{ RS_PERM, "550 5.1.1 no such user", 1 },
		{ RS_TEMP, "451 4.2.1 mailbox busy", 1 },
	};

	check(S(out), 3, w, "250 2.0.0 queued");
}

/* qmail-remote gives up with D when no recipient was accepted: each
 * recipient keeps its own verdict. */
Test(report, h_s_then_D)
{
	static const char out[] = "h550 no\0s450 later\0DGiving up on 127.0.0.1\0";
	const struct want w[] = {
		{ RS_PERM, "550 no", 1 },
		{ RS_TEMP, "450 later", 1 },
	};

	check(S(out), 2, w, "Giving up on 127.0.0.1");
}

Test(report, r_with_Z)
{
	static const char out[] = "r\0r\0Z451 data refused for now\0";
	const struct want w[] = {
		{ RS_TEMP, "451 data refused for now", 0 },
		{ RS_TEMP, "451 data refused for now", 0 },
	};

	check(S(out), 2, w, "451 data refused for now");
}

Test(report, r_with_D)
{
	static const char out[] = "r\0h550 no\0D554 5.6.0 message refused\0";
	const struct want w[] = {
		{ RS_PERM, "554 5.6.0 message refused", 0 },
		{ RS_PERM, "550 no", 1 },
	};

	check(S(out), 2, w, "554 5.6.0 message refused");
}

/* The deliverer stopped after two RCPTs of four. */
Test(report, fewer_reports_than_recipients_K)
{
	static const char out[] = "r\0h550 no\0K250 ok\0";
	const struct want w[] = {
		{ RS_DELIVERED, "250 ok", 0 },
		{ RS_PERM, "550 no", 1 },
		{ RS_TEMP, "250 ok", 0 },	/* K is no verdict for the unreported */
		{ RS_TEMP, "250 ok", 0 },
	};

	check(S(out), 4, w, "250 ok");
}

Test(report, fewer_reports_than_recipients_Z)
{
	static const char out[] = "s451 x\0Zconnection lost\0";
	const struct want w[] = {
		{ RS_TEMP, "451 x", 1 },
		{ RS_TEMP, "connection lost", 0 },
	};

	check(S(out), 2, w, "connection lost");
}

Test(report, fewer_reports_than_recipients_D)
{
	static const char out[] = "r\0D554 go away\0";
	const struct want w[] = {
		{ RS_PERM, "554 go away", 0 },
		{ RS_PERM, "554 go away", 0 },
	};

	check(S(out), 2, w, "554 go away");
}

Test(report, only_Z)
{
	static const char out[] = "ZSorry, I wasn't able to establish an SMTP connection. (#4.4.1)\0";
	const char *t = "Sorry, I wasn't able to establish an SMTP connection. (#4.4.1)";
	const struct want w[] = { { RS_TEMP, t, 0 }, { RS_TEMP, t, 0 }, { RS_TEMP, t, 0 } };

	check(S(out), 3, w, t);
}

Test(report, only_D)
{
	static const char out[] = "DSorry, I couldn't find any host by that name. (#5.1.2)\0";
	const char *t = "Sorry, I couldn't find any host by that name. (#5.1.2)";
	const struct want w[] = { { RS_PERM, t, 0 }, { RS_PERM, t, 0 } };

	check(S(out), 2, w, t);
}

Test(report, only_K)
{
	static const char out[] = "Kaccepted\0";
	const struct want w[] = { { RS_TEMP, "accepted", 0 } };

	check(S(out), 1, w, "accepted");
}

Test(report, empty_texts)
{
	static const char out[] = "h\0s\0r\0K\0";
	const struct want w[] = { { RS_PERM, "", 1 }, { RS_TEMP, "", 1 }, { RS_DELIVERED, "", 0 } };

	check(S(out), 3, w, "");
}

/* ---- malformed: every recipient temporary, not own ---- */

static void
malformed(const char *out, size_t len, size_t n)
{
	const struct want w[] = {
		{ RS_TEMP, BAD, 0 }, { RS_TEMP, BAD, 0 }, { RS_TEMP, BAD, 0 },
	};

	cr_assert(n <= 3);
	check(out, len, n, w, BAD);
}

Test(report, missing_message_report) { malformed(S("r\0h550 no\0"), 2); }
Test(report, missing_message_report_all_h) { malformed(S("h550 no\0h550 no\0"), 2); }
Test(report, two_message_reports) { malformed(S("r\0K250 ok\0K250 ok\0"), 1); }
Test(report, two_message_reports_KD) { malformed(S("r\0r\0K250 ok\0D554 no\0"), 2); }
Test(report, recipient_after_message) { malformed(S("r\0K250 ok\0h550 no\0"), 2); }
Test(report, too_many_recipient_reports) { malformed(S("r\0r\0r\0K250 ok\0"), 2); }
Test(report, garbage_letter) { malformed(S("r\0x what\0K250 ok\0"), 2); }
Test(report, garbage_message_letter) { malformed(S("r\0r\0Q250 ok\0"), 2); }
Test(report, lowercase_message_letter) { malformed(S("r\0k250 ok\0"), 1); }
Test(report, uppercase_recipient_letter) { malformed(S("R\0K250 ok\0"), 1); }
Test(report, empty_record) { malformed(S("r\0\0K250 ok\0"), 1); }
Test(report, missing_final_nul) { malformed(S("r\0r\0K250 ok"), 2); }
Test(report, missing_final_nul_after_recipients) { malformed(S("r\0h550 no"), 2); }
Test(report, empty_output) { malformed("", 0, 3); }
Test(report, just_a_nul) { malformed(S("\0"), 1); }
Test(report, text_no_nul) { malformed(S("Hello, this is not qmail-remote\n"), 2); }

/* Bytes after len are not looked at. */
Test(report, length_is_respected)
{
	static const char out[] = "r\0K250 ok\0h550 no\0";
	const struct want w[] = { { RS_DELIVERED, "250 ok", 0 } };

	check(out, 10, 1, w, "250 ok");
	malformed(out, 9, 1);
}
