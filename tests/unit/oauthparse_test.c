/*
 * oauthparse_test.c: what weir takes from an OAuth provider and from
 * its own token status file, strictly (mail/oauth.h, lib/jsonparse.h):
 * a token answer needs its access token, Bearer and expires_in, printable
 * tokens, one JSON object and nothing after it; an error answer is read
 * only from a 400 or 401; anything else is no answer (a temporary
 * failure for the caller); expires_in absent or absurd taken with a
 * warning.  And the form encoding of what weir sends, the refresh
 * margin, the status file's strict reading (versions 1 and 2), and the
 * table of the providers' authentication replies (mail/authreply.h).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/authreply.h"
#include "mail/credfp.h"
#include "mail/https.h"
#include "mail/oauth.h"
#include "mail/smtpreply.h"
#include "testlib.h"

static enum oauth_answer
answer(long status, const char *body, struct oauth_grant *g, struct buf *why)
{
	buf_reset(why);
	return oauth_answer_read("https://idp/token", status, body, strlen(body), g, NULL, why);
}

Test(oauthparse, token_answers)
{
	struct oauth_grant g;
	struct buf why = BUF_INIT;

	cr_assert_eq(answer(200, "{\"access_token\":\"at-1\",\"token_type\":\"Bearer\","
	    "\"expires_in\":3599,\"refresh_token\":\"rt-1\",\"scope\":\"x\",\"id_token\":\"e.y.z\","
	    "\"ext_expires_in\":3599}\n", &g, &why), OAUTH_A_TOKENS, "%s", buf_cstr(&why));
	cr_assert_str_eq(buf_cstr(&g.access), "at-1");
	cr_assert_str_eq(buf_cstr(&g.refresh), "rt-1");
	cr_assert_eq(g.expires_in, 3599);
	oauth_grant_wipe(&g);
	/* Microsoft's v1 endpoint sends expires_in as a string; no rotation. */
	cr_assert_eq(answer(200, "{\"access_token\":\"a.b-c_d~e+f/g=\",\"token_type\":\"bearer\","
	    "\"expires_in\":\"3600\"}", &g, &why), OAUTH_A_TOKENS, "%s", buf_cstr(&why));
	cr_assert_eq(g.expires_in, 3600);
	cr_assert_eq(g.refresh.len, 0);
	oauth_grant_wipe(&g);
}

Test(oauthparse, malformed_token_answers_are_none)
{
	static const char *const bad[] = {
		"",
		"not json",
		"[]",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":1} x",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":1,}",
		"{\"access_token\":\"at\",\"token_type\":\"MAC\",\"expires_in\":1}",
		"{\"access_token\":\"at\",\"expires_in\":1}",
		"{\"access_token\":\"a t\",\"token_type\":\"Bearer\",\"expires_in\":1}",
		"{\"access_token\":\"at\\u0001\",\"token_type\":\"Bearer\",\"expires_in\":1}",
		"{\"access_token\":\"\",\"token_type\":\"Bearer\",\"expires_in\":1}",
		"{\"access_token\":7,\"token_type\":\"Bearer\",\"expires_in\":1}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":0}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":-5}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":\"1h\"}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":1.5}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":1,"
		    "\"refresh_token\":\"r\\nt\"}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":1,"
		    "\"refresh_token\":5}",
		"{'access_token':'at'}",
		"/* c */ {\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":1}",
	};
	struct oauth_grant g;
	struct buf why = BUF_INIT;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(answer(200, bad[i], &g, &why), OAUTH_A_NONE, "accepted: %s", bad[i]);
		cr_assert(strstr(buf_cstr(&why), "https://idp/token answered HTTP 200"), "%s",
		    buf_cstr(&why));
		oauth_grant_wipe(&g);
	}
	/* A NUL inside. */
	buf_reset(&why);
	cr_assert_eq(oauth_answer_read("u", 200, "{\"access_token\":\"a\0b\"}", 22, &g, NULL, &why),
	    OAUTH_A_NONE);
	/* A token over OAUTH_TOKEN_MAX. */
	{
		struct buf big = BUF_INIT;
		size_t k;

		buf_adds(&big, "{\"token_type\":\"Bearer\",\"expires_in\":1,\"access_token\":\"");
		for (k = 0; k <= OAUTH_TOKEN_MAX; k++)
			buf_addc(&big, 'a');
		buf_adds(&big, "\"}");
		cr_assert_eq(answer(200, big.s, &g, &why), OAUTH_A_NONE);
		buf_free(&big);
	}
	buf_free(&why);
}

/* RFC 6749 5.1 only recommends expires_in: without it an hour, with a
 * warning; an absurd one (a provider's bug) is capped at a day. */
Test(oauthparse, expires_in_absent_or_absurd)
{
	struct oauth_grant g;
	struct buf why = BUF_INIT;

	cr_assert_eq(answer(200, "{\"access_token\":\"at\",\"token_type\":\"Bearer\"}", &g,
	    &why), OAUTH_A_TOKENS, "%s", buf_cstr(&why));
	cr_assert_eq(g.expires_in, OAUTH_LIFETIME_DEFAULT);
	cr_assert_eq(OAUTH_LIFETIME_DEFAULT, 3600);
	cr_assert(strstr(g.note, "no expires_in: taken as 3600 s"), "[%s]", g.note);
	oauth_grant_wipe(&g);
	cr_assert_eq(answer(200, "{\"access_token\":\"at\",\"token_type\":\"Bearer\","
	    "\"expires_in\":1000000000000}", &g, &why), OAUTH_A_TOKENS, "%s", buf_cstr(&why));
	cr_assert_eq(g.expires_in, 86400);
	cr_assert(strstr(g.note, "expires_in 1000000000000 is absurd: taken as 86400 s"), "[%s]",
	    g.note);
	oauth_grant_wipe(&g);
	cr_assert_eq(answer(200, "{\"access_token\":\"at\",\"token_type\":\"Bearer\","
	    "\"expires_in\":\"86400\"}", &g, &why), OAUTH_A_TOKENS);
	cr_assert_eq(g.expires_in, 86400);
	cr_assert_str_eq(g.note, "", "a day is not absurd");
	oauth_grant_wipe(&g);
	buf_free(&why);
}

Test(oauthparse, errors_only_from_400_and_401)
{
	struct oauth_grant g;
	struct buf why = BUF_INIT;

	cr_assert_eq(answer(400, "{\"error\":\"invalid_grant\",\"error_description\":"
	    "\"AADSTS70008: expired.\\r\\nTrace ID: 1\",\"error_codes\":[70008]}", &g, &why),
	    OAUTH_A_ERROR, "%s", buf_cstr(&why));
	cr_assert_str_eq(g.error, "invalid_grant");
	cr_assert_str_eq(g.desc, "AADSTS70008: expired.", "the first line only: [%s]", g.desc);
	cr_assert_eq(answer(401, "{\"error\":\"invalid_client\"}", &g, &why), OAUTH_A_ERROR);
	cr_assert_eq(answer(400, "{\"error\":\"authorization_pending\"}", &g, &why),
	    OAUTH_A_ERROR);
	cr_assert_eq(answer(400, "{\"message\":\"bad\"}", &g, &why), OAUTH_A_NONE);
	cr_assert(strstr(buf_cstr(&why), "answered HTTP 400 without an OAuth error"));
	cr_assert_eq(answer(400, "<html>", &g, &why), OAUTH_A_NONE);
	cr_assert_eq(answer(503, "{\"error\":\"invalid_grant\"}", &g, &why), OAUTH_A_NONE,
	    "a 503 is never a refusal");
	cr_assert(strstr(buf_cstr(&why), "answered HTTP 503"), "%s", buf_cstr(&why));
	cr_assert_eq(answer(302, "", &g, &why), OAUTH_A_NONE);
	cr_assert_eq(answer(500, "{\"error\":\"invalid_grant\"}", &g, &why), OAUTH_A_NONE);
	buf_free(&why);
}

Test(oauthparse, form_encoding)
{
	struct buf b = BUF_INIT;

	https_form_add(&b, "scope", "https://outlook.office.com/SMTP.Send offline_access", 51);
	https_form_add(&b, "t", "a+b=c&d~e.f_g-h\001", 16);
	cr_assert_str_eq(buf_cstr(&b), "scope=https%3A%2F%2Foutlook.office.com%2FSMTP.Send%20"
	    "offline_access&t=a%2Bb%3Dc%26d~e.f_g-h%01");
	buf_free(&b);
}

Test(oauthparse, margin_is_the_larger_of_the_setting_and_a_tenth)
{
	struct weir_oauth o;

	memset(&o, 0, sizeof o);
	o.refresh_margin = 600;
	cr_assert_eq(oauth_margin(&o, 3600), 600);
	cr_assert_eq(oauth_margin(&o, 5399), 600);
	cr_assert_eq(oauth_margin(&o, 86400), 8640);
	cr_assert_eq(oauth_margin(&o, 20), 600);
	o.refresh_margin = 10;
	cr_assert_eq(oauth_margin(&o, 20), 10);
}

Test(oauthparse, status_file_read_strictly)
{
	char *dir = tl_tmpdir(), *file = xasprintf("%s/isp", dir), *st = xasprintf("%s.status", file);
	static const char good[] = "{\"version\":1,\"login_at\":10,\"refresh_since\":20,"
	    "\"refreshed_at\":30,\"expires_at\":40,\"lifetime\":50,\"error_at\":60,"
	    "\"error\":\"invalid_grant: x\",\"login_needed\":true}\n";
	static const char *const bad[] = {
		"{\"version\":2,\"login_at\":10,\"refresh_since\":20,\"refreshed_at\":30,"
		    "\"expires_at\":40,\"lifetime\":50,\"error_at\":60,\"error\":\"\","
		    "\"login_needed\":true}",
		"{\"version\":1,\"login_at\":10,\"refresh_since\":20,\"refreshed_at\":30,"
		    "\"expires_at\":40,\"lifetime\":50,\"error_at\":60,\"error\":\"\"}",
		"{\"version\":1,\"login_at\":10,\"refresh_since\":20,\"refreshed_at\":30,"
		    "\"expires_at\":40,\"lifetime\":50,\"error_at\":60,\"error\":\"\","
		    "\"login_needed\":true,\"refresh_token\":\"rt\"}",
		"{\"version\":1,\"login_at\":\"10\",\"refresh_since\":20,\"refreshed_at\":30,"
		    "\"expires_at\":40,\"lifetime\":50,\"error_at\":60,\"error\":\"\","
		    "\"login_needed\":1}",
	};
	struct weir_oauth o;
	struct oauth_status s;
	struct buf why = BUF_INIT;
	size_t i;

	memset(&o, 0, sizeof o);
	o.token_file = file;
	cr_assert_eq(oauth_status_load(&o, &s, &why), 0, "none yet");
	tl_write(st, good, sizeof good - 1);
	cr_assert_eq(oauth_status_load(&o, &s, &why), 1, "%s", buf_cstr(&why));
	cr_assert(s.login_needed && s.login_at == 10 && s.expires_at == 40 && s.lifetime == 50);
	cr_assert_str_eq(s.error, "invalid_grant: x");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		tl_write(st, bad[i], strlen(bad[i]));
		buf_reset(&why);
		cr_assert_eq(oauth_status_load(&o, &s, &why), -1, "accepted: %s", bad[i]);
	}
	/* Version 2: the back-off and the refused token. */
	{
		static const char v2[] = "{\"version\":2,\"login_at\":10,\"refresh_since\":20,"
		    "\"refreshed_at\":30,\"expires_at\":40,\"lifetime\":50,\"error_at\":60,"
		    "\"error\":\"x\",\"login_needed\":false,\"failures\":3,\"next_try\":99,"
		    "\"refused\":20}\n";

		tl_write(st, v2, sizeof v2 - 1);
		buf_reset(&why);
		cr_assert_eq(oauth_status_load(&o, &s, &why), 1, "%s", buf_cstr(&why));
		cr_assert(s.failures == 3 && s.next_try == 99 && s.refused == 20 && !s.login_needed);
		tl_write(st, good, sizeof good - 1);
		cr_assert_eq(oauth_status_load(&o, &s, &why), 1);
		cr_assert(s.failures == 0 && s.next_try == 0 && s.refused == 0, "version 1: none");
	}
	tl_rmtree(dir);
	free(dir);
	free(file);
	free(st);
	buf_free(&why);
}

/* reply as a server sends it (lines ending in CRLF), read and put on one
 * line into line[1024] as the deliverer reports it; its row, or NULL. */
static const struct authreply *
find_as_sent(const char *reply, char *line)
{
	struct smtp_reply r;
	const char *why;

	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_parse(&r, reply, strlen(reply), &why), REPLY_DONE, "%s: %s",
	    reply, why);
	smtp_reply_oneline(&r, line, 1024);
	smtp_reply_free(&r);
	return authreply_find(line);
}

/* The authentication replies of Exchange Online and Gmail, as servers
 * send them (each reply's source: a provider's document, or the public
 * bug report quoting a real server's reply), read from the wire as the
 * deliverer reads it and put on one line as it reports it; each found
 * with its own advice, and the advice replacing "run weir auth login"
 * where a login cannot fix it. */
Test(oauthparse, auth_replies_of_the_providers)
{
	static const struct {
		const char *reply, *provider, *fix;
	} v[] = {
		/* nodemailer/nodemailer#1484 (2022), simonrob/email-oauth2-proxy#193. */
		{ "535 5.7.139 Authentication unsuccessful, SmtpClientAuthentication is disabled "
		    "for the Tenant. Visit https://aka.ms/smtp_auth_disabled for more information. "
		    "[TY1PR01CA0183.jpnprd01.prod.outlook.com]\r\n", "Exchange Online",
		    "tick Authenticated SMTP" },
		/* Only in set-up guides, not in a bug report or a Microsoft page. */
		{ "535 5.7.139 Authentication unsuccessful, SmtpClientAuthentication is disabled "
		    "for the Mailbox. Visit https://aka.ms/smtp_auth_disabled for more "
		    "information.\r\n", "Exchange Online", "-SmtpClientAuthenticationDisabled $false" },
		/* A third party's troubleshooting page (bookyourpto.com). */
		{ "535 5.7.139 Authentication unsuccessful, user is locked by your organization's "
		    "security defaults policy. Contact your administrator.\r\n", "Exchange Online",
		    "security defaults off" },
		/* rpremraj/mailR#107 (2022), nodemailer/nodemailer#1714 (2025). */
		{ "535 5.7.139 Authentication unsuccessful, basic authentication is disabled. "
		    "[BM1P287CA0015.INDP287.PROD.OUTLOOK.COM]\r\n", "Exchange Online",
		    "an app password does not help" },
		/* codassassin/email-bomber-v2.0#1 (2022). */
		{ "535 5.7.139 Authentication unsuccessful, the user credentials were incorrect. "
		    "[PH0PR07CA0004.namprd07.prod.outlook.com]\r\n", "Exchange Online",
		    "whole mailbox address" },
		/* nodemailer/nodemailer#1617 (2024). */
		{ "535 5.7.139 Authentication unsuccessful, the request did not meet the criteria "
		    "to be authenticated successfully. Contact your administrator.\r\n",
		    "Exchange Online", "sign-in logs" },
		/* Microsoft Learn, "Authenticate an IMAP, POP or SMTP connection using OAuth". */
		{ "535 5.7.3 Authentication unsuccessful [SN2PR00CA0018.namprd00.prod.outlook.com]"
		    "\r\n", "Exchange Online", "Add-MailboxPermission" },
		/* Exchange Team Blog, Basic auth retired for Client Submission (2024-04-15). */
		{ "550 5.7.30 Basic authentication is not supported for Client Submission.\r\n",
		    "Exchange Online", "oauth section" },
		/* kmhmubin/Face-Recognition-Attendance-System#46 (2022). */
		{ "534-5.7.9 Application-specific password required. Learn more at\r\n"
		    "534 5.7.9  https://support.google.com/mail/?p=InvalidSecondFactor "
		    "d9-20020a170902cec900b0016a6caacaefsm1234567plg.42 - gsmtp\r\n", "Gmail",
		    "app password" },
		/* firebase/functions-samples#39 (2017). */
		{ "534-5.7.14 <https://accounts.google.com/signin/continue?sarp=1&scc=1&plt=AKgnsbu>\r\n"
		    "534-5.7.14 Please log in via your web browser and\r\n"
		    "534-5.7.14 then try again.\r\n"
		    "534-5.7.14  Learn more at\r\n"
		    "534 5.7.14  https://support.google.com/mail/answer/78754 v3sm1234567qkb.4 - gsmtp"
		    "\r\n", "Gmail", "in a browser" },
		/* vatesfr/xen-orchestra#5496 (2021), jstedfast/MailKit#1329 (2022). */
		{ "535-5.7.8 Username and Password not accepted. Learn more at\r\n"
		    "535 5.7.8  https://support.google.com/mail/?p=BadCredentials "
		    "o12sm1234567wrx.49 - gsmtp\r\n", "Gmail", "Domain-wide delegation" },
	};
	/* The same checks under Gmail's other codes: nodemailer/nodemailer#653
	 * (2016) and kootenpv/yagmail#111 (2018), and an older 535 5.7.1. */
	static const struct {
		const char *reply, *fix;
	} gmail_other[] = {
		{ "534-5.7.9 Please log in with your web browser and then try again. Learn more\r\n"
		    "534 5.7.9  https://support.google.com/mail/?p=WebLoginRequired "
		    "a1sm1234567wjz.30 - gsmtp\r\n", "in a browser" },
		{ "535-5.7.1 Username and Password not accepted. Learn more at\r\n"
		    "535 5.7.1 http://mail.google.com/support/bin/answer.py?answer=14257 "
		    "x1sm1234567eeb.12\r\n", "Domain-wide delegation" },
	};
	char line[1024];
	const struct authreply *a;
	struct buf b = BUF_INIT;
	size_t i, n = 0;

	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		a = find_as_sent(v[i].reply, line);
		cr_assert(a, "not found: %s", line);
		cr_assert_str_eq(a->provider, v[i].provider);
		cr_assert(strstr(a->fix, v[i].fix), "%s: %s", line, a->fix);
		cr_assert(a->source && a->source[0]);
	}
	for (i = 0; i < sizeof gmail_other / sizeof gmail_other[0]; i++) {
		a = find_as_sent(gmail_other[i].reply, line);
		cr_assert(a && strstr(a->fix, gmail_other[i].fix), "%s: %s", line,
		    a ? a->fix : "no row");
	}
	for (a = authreply_table; a->pattern; a++)
		n++;
	cr_assert_eq(n, sizeof v / sizeof v[0], "a row without its example reply above");
	cr_assert_null(authreply_find("535 5.7.0 Authentication failed"));
	/* RFC 4954's generic reply is not Gmail's. */
	cr_assert_null(authreply_find("535 5.7.8 Authentication credentials invalid"));
	cr_assert_null(authreply_find(NULL));
	/* The advice where weir-gate, weir status and the status page give it. */
	cred_fix(&b, "m365", 1, "535 5.7.139 Authentication unsuccessful, SmtpClientAuthentication "
	    "is disabled for the Tenant.");
	cr_assert(strstr(b.s, "Exchange Online says SMTP AUTH is turned off for the whole "
	    "organisation") && strstr(b.s, "weir auth login") == NULL, "%s", b.s);
	buf_reset(&b);
	cred_fix(&b, "m365", 1, "535 5.7.0 something else");
	cr_assert(strstr(b.s, "run weir auth login m365"), "%s", b.s);
	buf_free(&b);
}
