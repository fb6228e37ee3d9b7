/*
 * replyclass.c: the table of reply classes; see replyclass.h for what
 * each class means and how a reply is matched.  The rows come from the
 * providers' published reply lists and from the texts Postfix, Exim and
 * Sendmail send; tests/data/replies.txt holds the replies they were
 * written for, each with its source, and replyclass_test checks every
 * one against this table.
 *
 * Order matters, first match wins:
 *   1  the sender's or account's quota, in words no recipient's
 *      mailbox uses (a daily limit, a sending quota, Microsoft's
 *      submission quota);
 *   2  rate limits in unmistakable words (throttled, rate limit,
 *      Gmail's peak relay limit, whose code is a mailbox's 4.2.1);
 *   3  what the provider says of the sender or of us: relaying refused,
 *      the sender not verified, blocked or not ours, TLS required
 *      (Zoho's block for unusual activity comes as X.4.6, a loop's);
 *   4  the recipient's own trouble by enhanced code (X.1.1-X.1.6,
 *      X.1.10, X.2.1-X.2.3) or words (over quota, mailbox full; 552),
 *      and message loops; at RCPT and after the dot only;
 *   5  authentication;
 *   6  "too many" that is not a rate (a per-transaction cap, protocol
 *      errors; but Postfix's too many recipients "from" a client is
 *      its rate), then the rate words that remain ("too many", "per
 *      hour", "too much mail");
 *   7  any other word of quota (after the mailbox rows);
 *   8  the upstream unavailable, and the 421 that closes a session;
 *   9  greylisting, other temporary trouble.
 *
 * Trusts: nothing.  Config keys: none.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mail/policy.h"
#include "mail/replyclass.h"

/* Stages where a reply can be about one recipient or one message. */
#define RCPT_ON		(RS(STAGE_RCPT) | RS(STAGE_DATA_END))

/* A day's quota: two hours at first (longer than fallback_when's quota
 * threshold of 1h by default, so the mail spills at once), then
 * doubling, up to a day; a rate or a closed session: 5 minutes, then
 * doubling, up to 4 hours. */
#define QUOTA_SUSP	POLICY_QUOTA_SUSPEND_DEFAULT, POLICY_QUOTA_MAX_SUSPEND_DEFAULT
#define RATE_SUSP	POLICY_SUSPEND_DEFAULT, POLICY_MAX_SUSPEND_DEFAULT

#define Q(st, p)	{ st, p, RC_QUOTA, QUOTA_SUSP }
#define T(st, p)	{ st, p, RC_RATE, RATE_SUSP }
#define U(st, p)	{ st, p, RC_UNAVAILABLE, RATE_SUSP }
#define C(st, p, c)	{ st, p, c, 0, 0 }

static const struct reply_row rows[] = {
	/* 1  Quota: Microsoft 365's submission quota (a day's recipients)
	 *    and its sender's own mailbox full (Sent Items), which stops
	 *    every message until someone empties it; Gmail's and Google
	 *    Workspace relay's daily limits; Amazon SES's daily quota; the
	 *    ISP relays' "your quota". */
	Q(RS_ANY, "*SubmissionQuotaExceeded*"),
	Q(RS_ANY, "*STOREDRV.Submission*QuotaExceeded*"),
	Q(RS_ANY, "5?? 5.4.5 *"),
	Q(RS_ANY, "*sending quota*"),
	Q(RS_ANY, "*sending limit*"),
	Q(RS_ANY, "*daily*limit*"),
	Q(RS_ANY, "*daily*quota*"),
	Q(RS_ANY, "*message quota*"),
	Q(RS_ANY, "*email quota*"),
	Q(RS_ANY, "*exceeded your*quota*"),
	Q(RS_ANY, "??? ?.7.? *quota*"),
	/* 2  Rates, in words that say so whatever the code; but a
	 *    recipient's own rate (Yandex, Microsoft's thread limit) is
	 *    that recipient's. */
	C(RCPT_ON, "*the recipient*exceeded*", RC_RECIPIENT),
	C(RCPT_ON, "*recipient thread limit*", RC_RECIPIENT),
	T(RS_ANY, "*peak*relay limit*"),
	T(RS_ANY, "*throttl*"),
	T(RS_ANY, "*rate limit*"),
	T(RS_ANY, "*ratelimit*"),
	T(RS_ANY, "*rate-limit*"),
	T(RS_ANY, "*sending rate*"),
	T(RS_ANY, "*submission rate*"),
	T(RS_ANY, "*unusual rate*"),
	T(RS_ANY, "*slow down*"),
	/* 3  The relay or the sender refused: never the recipient's fault. */
	C(RS_ANY, "*relay*denied*", RC_RELAY),
	C(RS_ANY, "*relaying disallowed*", RC_RELAY),
	C(RS_ANY, "*not permitted to relay*", RC_RELAY),
	C(RS_ANY, "*relay not permitted*", RC_RELAY),
	C(RS_ANY, "*credentials for relay*", RC_RELAY),
	C(RS_ANY, "*sender*not*authori*", RC_RELAY),
	C(RS_ANY, "*not authorized to send*", RC_RELAY),
	C(RS_ANY, "*permission* to send as*", RC_RELAY),
	C(RS_ANY, "*send*as*denied*", RC_RELAY),
	C(RS_ANY, "*not verified*", RC_RELAY),
	C(RS_ANY, "*sender address rejected*", RC_RELAY),
	C(RS_ANY, "*sender address blocked*", RC_RELAY),
	C(RS_ANY, "*bad outbound sender*", RC_RELAY),
	C(RS_ANY, "*sending suspended*", RC_RELAY),
	C(RS_ANY, "*sending paused*", RC_RELAY),
	C(RS_ANY, "*sending denied*", RC_RELAY),
	C(RS_ANY, "*tenant has exceeded threshold*", RC_RELAY),
	C(RS_ANY, "*traffic not accepted*", RC_RELAY),
	C(RS_ANY, "*unusual sending activity*", RC_RELAY),
	C(RS_ANY, "*must match authenticated*", RC_RELAY),
	C(RS_ANY, "*not in whitelist*", RC_RELAY),
	C(RS_ANY, "*TLS required*", RC_RELAY),
	C(RS_ANY, "*issue a STARTTLS*", RC_RELAY),
	C(RS(STAGE_RCPT), "5?? 5.7.0 *", RC_RELAY),
	C(RS(STAGE_RCPT), "5?? 5.7.8 *", RC_RELAY),
	/* 4  The recipient's mailbox and address, the message's loop. */
	C(RCPT_ON, "??? ?.1.[1-6] *", RC_RECIPIENT),
	C(RCPT_ON, "??? ?.1.10 *", RC_RECIPIENT),
	C(RCPT_ON, "??? ?.2.[123] *", RC_RECIPIENT),
	C(RCPT_ON, "*over quota*", RC_RECIPIENT),
	C(RCPT_ON, "*mailbox*full*", RC_RECIPIENT),
	C(RCPT_ON, "552 *", RC_RECIPIENT),
	C(RCPT_ON, "??? ?.4.6 *", RC_RECIPIENT),
	C(RCPT_ON, "*too many hops*", RC_RECIPIENT),
	C(RCPT_ON, "*too many*received*", RC_RECIPIENT),
	/* 5  Authentication. */
	C(RS_ANY, "53[045] *", RC_AUTH),
	C(RS_ANY, "*authentication required*", RC_AUTH),
	C(RS_ANY, "*must authenticate*", RC_AUTH),
	C(RS_ANY, "*not authenticated*", RC_AUTH),
	C(RS_ANY, "*unauthenticated senders*", RC_AUTH),
	C(RS_ANY, "*authentication failed*", RC_AUTH),
	C(RS_ANY, "*authentication unsuccessful*", RC_AUTH),
	C(RS_ANY, "*cannot authenticate*", RC_AUTH),
	C(RS_ANY, "*password not accepted*", RC_AUTH),
	/* 6  "Too many" that is a cap or a complaint, not a rate; then the
	 *    rate words that remain. */
	T(RS_ANY, "*too many recipients from*"),
	C(RS_ANY, "*too many recipients*", RC_TEMPORARY),
	C(RS_ANY, "*per transaction*", RC_TEMPORARY),
	C(RS_ANY, "*too many errors*", RC_TEMPORARY),
	C(RS_ANY, "*too many bad *", RC_TEMPORARY),
	C(RS_ANY, "*too many unrecognized*", RC_TEMPORARY),
	C(RS_ANY, "*too many unauthenticated*", RC_TEMPORARY),
	C(RS_ANY, "*too many syntax*", RC_TEMPORARY),
	C(RS_ANY, "*too many parameters*", RC_TEMPORARY),
	T(RS_ANY, "*too many*"),
	T(RS_ANY, "*too much mail*"),
	T(RS_ANY, "*too frequent*"),
	T(RS_ANY, "*per hour*"),
	T(RS_ANY, "*per second*"),
	T(RS_ANY, "*per minute*"),
	T(RS_ANY, "*connections limit*"),
	T(RS_ANY, "*unexpected volume*"),
	/* 7  Any other quota, now that the mailbox rows are past. */
	Q(RS_ANY, "*quota*"),
	/* 8  The upstream not taking mail now. */
	U(RS_ANY, "421[ -]*"),
	U(RS_ANY, "*service not available*"),
	U(RS_ANY, "*service unavailable*"),
	U(RS_ANY, "*server busy*"),
	U(RS_ANY, "*too much load*"),
	U(RS_ANY, "*temporary system problem*"),
	U(RS_ANY, "*temporarily unavailable*"),
	/* 9  Greylisting: one message or recipient, never the relay. */
	C(RS_ANY, "*greylist*", RC_TEMPORARY),
};

void
reply_line(const struct smtp_reply *r, char *out, size_t max)
{
	size_t i, n;
	int k;

	if (max == 0)
		return;
	k = snprintf(out, max, "%03d ", r->code);
	if (k < 0 || (size_t)k >= max) {
		out[0] = '\0';
		return;
	}
	n = (size_t)k;
	for (i = 0; i < r->text.len && r->text.s[i] != '\n' && n + 1 < max; i++)
		out[n++] = r->text.s[i];
	out[n] = '\0';
}

int
reply_row_takes(const struct reply_row *row, int st, const char *line)
{
	if (row->stages != RS_ANY && (st < 0 || st >= STAGE_COUNT || !(row->stages & RS(st))))
		return 0;
	return fnmatch(row->pattern, line, FNM_CASEFOLD) == 0;
}

const struct reply_row *
reply_rows(size_t *n)
{
	*n = sizeof rows / sizeof rows[0];
	return rows;
}

int
reply_row_find(int st, const char *line)
{
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (reply_row_takes(&rows[i], st, line))
			return (int)i;
	return -1;
}

enum reply_class
reply_class_default(int st, int code)
{
	if (st == STAGE_BANNER)
		return RC_UNAVAILABLE;	/* no greeting: not reached */
	if (code / 100 != 5)
		return RC_TEMPORARY;
	switch (st) {
	case STAGE_AUTH:
		return RC_AUTH;
	case STAGE_RCPT:
	case STAGE_DATA:
	case STAGE_DATA_END:
		return RC_RECIPIENT;
	default:
		return RC_RELAY;	/* before the recipients: the relay refusing us */
	}
}

int
reply_rule_parse(const char *entry, enum reply_class *cls, const char **pattern,
    const char **why)
{
	const char *colon = strchr(entry, ':'), *p;
	int c;

	if (colon == NULL || (c = reply_class_from_name(entry, (size_t)(colon - entry))) < 0) {
		*why = "not \"CLASS: PATTERN\" with CLASS recipient, quota, rate, auth, relay, "
		    "unavailable or temporary";
		return -1;
	}
	if (colon[1] != ' ' || colon[2] == '\0' || colon[2] == ' ') {
		*why = "one blank after the class, then the pattern (\"quota: 554 5.2.0 *\")";
		return -1;
	}
	for (p = colon + 2; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			*why = "a control character in the pattern";
			return -1;
		}
	*cls = (enum reply_class)c;
	*pattern = colon + 2;
	return 0;
}

static const char *const class_names[RC_COUNT] = {
	"none", "recipient", "quota", "rate", "auth", "relay", "unavailable", "temporary",
};

const char *
reply_class_name(enum reply_class c)
{
	return (unsigned)c < RC_COUNT ? class_names[c] : "?";
}

int
reply_class_from_name(const char *s, size_t n)
{
	int c;

	for (c = RC_RECIPIENT; c < RC_COUNT; c++)
		if (strlen(class_names[c]) == n && strncmp(class_names[c], s, n) == 0)
			return c;
	return -1;
}

static const struct {
	const char *word;
	int st;
} stage_words[] = {
	{ "banner", STAGE_BANNER }, { "ehlo", STAGE_EHLO }, { "starttls", STAGE_STARTTLS },
	{ "auth", STAGE_AUTH }, { "mail", STAGE_MAIL }, { "rcpt", STAGE_RCPT },
	{ "data", STAGE_DATA }, { "dot", STAGE_DATA_END },
};

const char *
reply_stage_word(int st)
{
	size_t i;

	for (i = 0; i < sizeof stage_words / sizeof stage_words[0]; i++)
		if (stage_words[i].st == st)
			return stage_words[i].word;
	return "?";
}

int
reply_stage_from_word(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof stage_words / sizeof stage_words[0]; i++)
		if (strcasecmp(stage_words[i].word, s) == 0)
			return stage_words[i].st;
	return -1;
}
