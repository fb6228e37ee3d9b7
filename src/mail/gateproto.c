/*
 * gateproto.c: see gateproto.h.  Parsing is in two steps: the line is
 * checked byte by byte (NUL, control, non-ASCII), then split on single
 * spaces into at most a fixed number of fields, each checked for its
 * kind; any field left over is an error.
 *
 * Trusts: nothing it parses.
 */
#include <string.h>

#include "lib/decimal.h"
#include "lib/log.h"
#include "mail/gateproto.h"

static const char *const code_names[GP_NCODES] = {
	"OK", "SYNTAX", "VERB", "TOOLONG", "NUL", "BYTE", "TAG", "DUPTAG",
	"NOPOLICY", "NOCLASS", "TOOBIG", "BADWEIGHT", "STATE", "LIMIT", "INTERNAL",
	"READONLY",
};

const char *
gp_code_name(enum gp_code c)
{
	return (unsigned)c < GP_NCODES ? code_names[c] : "INTERNAL";
}

int
gp_frame(const char *buf, size_t len, size_t *linelen)
{
	size_t max = len < GP_LINE_MAX ? len : GP_LINE_MAX;
	const char *nl = memchr(buf, '\n', max);

	if (nl) {
		*linelen = (size_t)(nl - buf) + 1;
		return 1;
	}
	return len >= GP_LINE_MAX ? -1 : 0;
}

int
gp_valid_name(const char *s)
{
	return policy_valid_name(s);
}

int
gp_valid_word(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e)
			return 0;
	return 1;
}

int
gp_valid_text(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

/* Check every byte of the line. */
static enum gp_code
check_bytes(const char *line, size_t len, const char **why)
{
	size_t i;

	if (len + 1 > GP_LINE_MAX) {
		*why = "line too long";
		return GP_TOOLONG;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if (c == 0) {
			*why = "NUL byte in line";
			return GP_NUL;
		}
		if (c < 0x20 || c > 0x7e) {
			*why = "control or non-ASCII byte in line";
			return GP_BYTE;
		}
	}
	return GP_OK;
}

#define MAXF (2 + GP_NCOUNTS)	/* COUNTS's */

struct fields {
	char buf[GP_LINE_MAX];
	char *f[MAXF];
	size_t n;
	const char *rest[MAXF];	/* where field i starts in the original line */
};

/* Split on single spaces into at most max fields; the last field takes the
 * rest of the line when rest_last.  -1 on an empty field or too many. */
static int
split(const char *line, size_t len, struct fields *fs, size_t max)
{
	size_t i, start = 0;

	memcpy(fs->buf, line, len);
	fs->buf[len] = '\0';
	fs->n = 0;
	for (i = 0; i <= len; i++) {
		if (i < len && fs->buf[i] != ' ')
			continue;
		if (i == start)
			return -1;	/* empty field: double, leading or trailing space */
		if (fs->n == max)
			return -1;
		fs->rest[fs->n] = line + start;
		fs->f[fs->n++] = fs->buf + start;
		fs->buf[i] = '\0';
		start = i + 1;
	}
	return 0;
}

/* "<f1> ... <fn> <text>": the first n fields, then the rest of the line
 * as a text that may hold spaces but must not be empty or longer than
 * GP_TEXT_MAX.  -1 if the line has no such shape. */
static int
split_head(const char *line, size_t len, size_t n, struct fields *fs, char *text)
{
	const char *p = line, *end = line + len;
	size_t i, tl;

	for (i = 0; i < n; i++) {
		p = memchr(p, ' ', (size_t)(end - p));
		if (p == NULL)
			return -1;
		p++;
	}
	tl = (size_t)(end - p);
	if (tl == 0 || tl > GP_TEXT_MAX)
		return -1;
	if (split(line, (size_t)(p - 1 - line), fs, n) < 0 || fs->n != n)
		return -1;
	memcpy(text, p, tl);
	text[tl] = '\0';
	return 0;
}

/* The field s, a number (lib/decimal.h) at most max. */
static int
num(const char *s, uint64_t max, uint64_t *out)
{
	return dec_parse(s, strlen(s), max, out);
}

static int
tag(const char *s, uint32_t *out)
{
	uint64_t v;

	if (num(s, UINT32_MAX, &v) < 0 || v == 0)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

#define REPORT_USAGE "REPORT <tag> SENT <accepted> <at|-> | REFUND | UNKNOWN | NOMAIL | " \
	"THROTTLED <text> | QUOTA <text> | AUTHFAIL <text> | UNREACHED <text> | NOGREETING <text>"
#define SETTLE_USAGE "SETTLE <upstream> <grant id> SENT <accepted> <at|-> | REFUND | " \
	"NOMAIL | THROTTLED <text> | QUOTA <text> | AUTHFAIL <text> | UNREACHED <text> | " \
	"NOGREETING <text>"

/* The outcomes followed by a text (which may hold spaces). */
static const struct {
	const char *word;
	enum gp_outcome o;
} text_outcomes[] = {
	{ "THROTTLED", GP_THROTTLED }, { "AUTHFAIL", GP_AUTHFAIL },
	{ "UNREACHED", GP_UNREACHED }, { "NOGREETING", GP_NOGREETING },
	{ "QUOTA", GP_QUOTA },
};
#define NTEXT_OUTCOMES (sizeof text_outcomes / sizeof text_outcomes[0])

static int
text_outcome(const char *w)
{
	size_t i;

	for (i = 0; i < NTEXT_OUTCOMES; i++)
		if (strcmp(text_outcomes[i].word, w) == 0)
			return (int)text_outcomes[i].o;
	return 0;
}

static enum gp_code
bad(const char **why, const char *what)
{
	*why = what;
	return GP_SYNTAX;
}

/* REPORT's and SETTLE's fields before the outcome, how many (the verb
 * included); 0 for another verb. */
static size_t
outcome_at(const char *line, size_t len)
{
	int sp = len == 6 || (len > 6 && line[6] == ' ');

	if (sp && memcmp(line, "REPORT", 6) == 0)
		return 2;
	if (sp && memcmp(line, "SETTLE", 6) == 0)
		return 3;
	return 0;
}

/* The fields before the outcome: REPORT <tag>, SETTLE <upstream> <grant id>. */
static int
outcome_head(struct fields *fs, struct gp_req *r)
{
	if (strcmp(fs->f[0], "REPORT") == 0) {
		r->verb = GP_REPORT;
		return tag(fs->f[1], &r->tag);
	}
	r->verb = GP_SETTLE;
	if (!gp_valid_name(fs->f[1]) || num(fs->f[2], UINT64_MAX, &r->grant) < 0 ||
	    r->grant == 0)
		return -1;
	strcpy(r->upstream, fs->f[1]);
	return 0;
}

/* The outcome in fields k on, but for THROTTLED and AUTHFAIL (whose text
 * is taken apart): SENT <accepted> <at|->, REFUND, UNKNOWN, NOMAIL. */
static int
outcome_words(struct fields *fs, size_t k, struct gp_req *r)
{
	uint64_t v;

	r->at = -1;
	if (fs->n == k + 3 && strcmp(fs->f[k], "SENT") == 0 &&
	    num(fs->f[k + 1], GP_WEIGHT_MAX, &v) == 0) {
		r->outcome = GP_SENT;
		r->accepted = (uint32_t)v;
		if (strcmp(fs->f[k + 2], "-") == 0)
			return 0;
		if (num(fs->f[k + 2], GP_AT_MAX, &v) < 0)
			return -1;
		r->at = (int64_t)v;
		return 0;
	}
	if (fs->n != k + 1)
		return -1;
	if (strcmp(fs->f[k], "REFUND") == 0)
		r->outcome = GP_REFUND;
	else if (strcmp(fs->f[k], "UNKNOWN") == 0)
		r->outcome = GP_UNKNOWN;
	else if (strcmp(fs->f[k], "NOMAIL") == 0)
		r->outcome = GP_NOMAIL;
	else
		return -1;
	return 0;
}

/* ACQUIRE's <unless>: "KIND=SECONDS" items joined by commas, the kinds
 * in route.h's order, each once, at least one.  0, or -1. */
static int
unless_parse(char *s, struct route_when *w)
{
	char *item, *eq, *next;
	int k, last = -1;
	uint64_t v;

	route_when_none(w);
	for (item = s; item; item = next) {
		next = strchr(item, ',');
		if (next)
			*next++ = '\0';
		if ((eq = strchr(item, '=')) == NULL)
			return -1;
		*eq = '\0';
		if ((k = route_kind_from_word(item)) < 0 || k <= last ||
		    num(eq + 1, RK_MAX_S, &v) < 0)
			return -1;
		w->s[k] = (long long)v;
		last = k;
	}
	return last < 0 ? -1 : 0;
}

enum gp_code
gp_parse_request(const char *line, size_t len, struct gp_req *r, const char **why)
{
	struct fields fs;
	enum gp_code c;
	uint64_t v;
	size_t i, k;

	memset(r, 0, sizeof *r);
	if ((c = check_bytes(line, len, why)) != GP_OK)
		return c;
	/* REPORT <tag> or SETTLE <upstream> <grant id>, then THROTTLED or
	 * AUTHFAIL <reply text, which may hold spaces> */
	k = outcome_at(line, len);
	route_when_none(&r->unless);
	if (k && split_head(line, len, k + 1, &fs, r->text) == 0 && text_outcome(fs.f[k])) {
		if (outcome_head(&fs, r) < 0)
			return bad(why, k == 2 ? REPORT_USAGE : SETTLE_USAGE);
		r->outcome = (enum gp_outcome)text_outcome(fs.f[k]);
		r->at = -1;
		return GP_OK;
	}
	/* REFUSED <upstream> <reply text, which may hold spaces> */
	if (len >= 7 && memcmp(line, "REFUSED", 7) == 0 && (len == 7 || line[7] == ' ')) {
		if (split_head(line, len, 2, &fs, r->text) < 0 || !gp_valid_name(fs.f[1]))
			return bad(why, "REFUSED <upstream> <reply text>");
		strcpy(r->upstream, fs.f[1]);
		r->verb = GP_REFUSED;
		return GP_OK;
	}
	r->text[0] = '\0';
	if (split(line, len, &fs, MAXF) < 0)
		return bad(why, "empty field or too many fields");
	if (k) {
		/* SETTLE UNKNOWN would settle nothing: not a settlement. */
		if (fs.n <= k || outcome_head(&fs, r) < 0 || outcome_words(&fs, k, r) < 0 ||
		    (r->verb == GP_SETTLE && r->outcome == GP_UNKNOWN))
			return bad(why, k == 2 ? REPORT_USAGE : SETTLE_USAGE);
		return GP_OK;
	}
	if (strcmp(fs.f[0], "ACQUIRE") == 0) {
		if (fs.n != 8 && fs.n != 9)
			return bad(why, "ACQUIRE <tag> <upstream> <class|-> <sender|-> "
			    "<messages> <recipients> <connections> [<unless>]");
		if (fs.n == 9 && unless_parse(fs.f[8], &r->unless) < 0)
			return bad(why, "ACQUIRE's <unless>: KIND=SECONDS,... (unreachable, auth, "
			    "quota, throttled, in that order, each once)");
		if (tag(fs.f[1], &r->tag) < 0)
			return bad(why, "bad tag");
		if (!gp_valid_name(fs.f[2]))
			return bad(why, "bad upstream name");
		strcpy(r->upstream, fs.f[2]);
		if (strcmp(fs.f[3], "-") != 0) {
			if (!gp_valid_name(fs.f[3]))
				return bad(why, "bad class name");
			strcpy(r->cls, fs.f[3]);
		}
		if (strcmp(fs.f[4], "-") != 0) {
			if (!gp_valid_word(fs.f[4], GP_SENDER_MAX))
				return bad(why, "bad sender");
			strcpy(r->sender, fs.f[4]);
		}
		for (i = 0; i < UNIT_COUNT; i++) {
			if (num(fs.f[5 + i], GP_WEIGHT_MAX, &v) < 0)
				return bad(why, "bad weight");
			r->w[i] = (uint32_t)v;
		}
		r->verb = GP_ACQUIRE;
		return GP_OK;
	}
	if (strcmp(fs.f[0], "RESUME") == 0) {
		if (fs.n != 2 || !gp_valid_name(fs.f[1]))
			return bad(why, "RESUME <upstream>");
		strcpy(r->upstream, fs.f[1]);
		r->verb = GP_RESUME;
		return GP_OK;
	}
	if (strcmp(fs.f[0], "COUNTS") == 0) {
		if (fs.n != 2 + GP_NCOUNTS || !gp_valid_name(fs.f[1]))
			return bad(why, "COUNTS <upstream> <queued_msgs> <queued_rcpts> "
			    "<delivered_msgs> <delivered_rcpts> <deferred_msgs> <deferred_rcpts> "
			    "<bounced_msgs> <bounced_rcpts> <sessions> <switches> <returns>");
		strcpy(r->upstream, fs.f[1]);
		for (i = 0; i < GP_NCOUNTS; i++)
			if (num(fs.f[2 + i], GP_COUNT_MAX, &r->counts[i]) < 0)
				return bad(why, "COUNTS: a count is not a number up to 2^53");
		r->verb = GP_COUNTS;
		return GP_OK;
	}
	if (strcmp(fs.f[0], "CANCEL") == 0 || strcmp(fs.f[0], "START") == 0) {
		r->verb = fs.f[0][0] == 'C' ? GP_CANCEL : GP_START;
		if (fs.n != 2 || tag(fs.f[1], &r->tag) < 0)
			return bad(why, r->verb == GP_CANCEL ? "CANCEL <tag>" : "START <tag>");
		return GP_OK;
	}
	if (strcmp(fs.f[0], "STARTS") == 0) {
		if (fs.n != 1)
			return bad(why, "STARTS");
		r->verb = GP_STARTS;
		return GP_OK;
	}
	if (strcmp(fs.f[0], "STATUS") == 0) {
		if (fs.n == 3 && strcmp(fs.f[1], "JSON") == 0) {
			if (num(fs.f[2], GP_HISTORY_MAX_S, &v) < 0 || v == 0)
				return bad(why, "STATUS JSON <seconds>: 1 to 3600");
			r->history_s = (unsigned)v;
		} else if (fs.n != 2 || (strcmp(fs.f[1], "TEXT") != 0 &&
		    strcmp(fs.f[1], "JSON") != 0))
			return bad(why, "STATUS TEXT|JSON [<seconds>]");
		r->verb = GP_STATUS;
		r->json = strcmp(fs.f[1], "JSON") == 0;
		return GP_OK;
	}
	*why = "unknown verb";
	return GP_VERB;
}

enum gp_code
gp_parse_reply(const char *line, size_t len, struct gp_reply *r, const char **why)
{
	struct fields fs;
	enum gp_code c;
	uint64_t v;
	size_t i;

	memset(r, 0, sizeof *r);
	if ((c = check_bytes(line, len, why)) != GP_OK)
		return c;
	if (len > 4 && memcmp(line, "ERR ", 4) == 0) {
		/* ERR <tag|-> <CODE> <text, which may hold spaces> */
		if (split_head(line, len, 3, &fs, r->text) < 0)
			return bad(why, "ERR <tag|-> <CODE> <text>");
		if (strcmp(fs.f[1], "-") != 0 && tag(fs.f[1], &r->tag) < 0)
			return bad(why, "bad tag");
		for (i = 1; i < GP_NCODES; i++)
			if (strcmp(fs.f[2], code_names[i]) == 0)
				break;
		if (i == GP_NCODES)
			return bad(why, "unknown error code");
		r->code = (enum gp_code)i;
		r->verb = GP_R_ERR;
		return GP_OK;
	}
	if (split(line, len, &fs, MAXF) < 0)
		return bad(why, "empty field or too many fields");
	if (strcmp(fs.f[0], "GRANT") == 0 && fs.n == 6 && tag(fs.f[1], &r->tag) == 0 &&
	    num(fs.f[2], UINT64_MAX, &r->id) == 0 && num(fs.f[3], UINT32_MAX, &v) == 0) {
		r->max_rcpt = (uint32_t)v;
		if (num(fs.f[4], UINT32_MAX, &v) < 0)
			return bad(why, "GRANT <tag> <id> <max_recipients> <messages_per_connection> "
			    "<grace>");
		r->msgs_per_conn = (uint32_t)v;
		if (num(fs.f[5], GP_GRACE_MAX, &v) < 0)
			return bad(why, "GRANT <tag> <id> <max_recipients> <messages_per_connection> "
			    "<grace>");
		r->grace = (uint32_t)v;
		r->verb = GP_R_GRANT;
		return GP_OK;
	}
	if (strcmp(fs.f[0], "OK") == 0 && fs.n == 2 &&
	    (strcmp(fs.f[1], "-") == 0 || tag(fs.f[1], &r->tag) == 0)) {
		r->verb = GP_R_OK;
		return GP_OK;
	}
	if (strcmp(fs.f[0], "SUSPENDED") == 0 && fs.n == 3 && tag(fs.f[1], &r->tag) == 0 &&
	    num(fs.f[2], UINT32_MAX, &r->secs) == 0) {
		r->verb = GP_R_SUSPENDED;
		return GP_OK;
	}
	if (strcmp(fs.f[0], "LATER") == 0 && fs.n == 4 && tag(fs.f[1], &r->tag) == 0 &&
	    route_kind_from_word(fs.f[2]) >= 0 && num(fs.f[3], GP_LATER_MAX, &r->secs) == 0 &&
	    r->secs > 0) {
		r->why = (enum route_kind)route_kind_from_word(fs.f[2]);
		r->verb = GP_R_LATER;
		return GP_OK;
	}
	if (strcmp(fs.f[0], "STATUS") == 0 && fs.n == 2 && num(fs.f[1], GP_STATUS_MAX, &v) == 0) {
		r->length = (size_t)v;
		r->verb = GP_R_STATUS;
		return GP_OK;
	}
	*why = "unknown or malformed reply";
	return GP_SYNTAX;
}

static const char *
dash(const char *s)
{
	return *s ? s : "-";
}

/* A REPORT's or SETTLE's outcome and the line's end. */
static void
fmt_outcome(struct buf *b, const struct gp_req *r)
{
	switch (r->outcome) {
	case GP_SENT:
		if (r->at < -1 || r->at > (int64_t)GP_AT_MAX)
			panic("gateproto: invalid SENT time %lld", (long long)r->at);
		if (r->at < 0)
			buf_printf(b, "SENT %u -\n", r->accepted);
		else
			buf_printf(b, "SENT %u %lld\n", r->accepted, (long long)r->at);
		break;
	case GP_REFUND:
		buf_adds(b, "REFUND\n");
		break;
	case GP_UNKNOWN:
		buf_adds(b, "UNKNOWN\n");
		break;
	case GP_NOMAIL:
		buf_adds(b, "NOMAIL\n");
		break;
	default: {
		size_t i;

		for (i = 0; i < NTEXT_OUTCOMES && text_outcomes[i].o != r->outcome; i++)
			;
		if (i == NTEXT_OUTCOMES)
			panic("gateproto: invalid outcome %d", (int)r->outcome);
		if (!gp_valid_text(r->text, GP_TEXT_MAX))
			panic("gateproto: invalid reply text");
		buf_printf(b, "%s %s\n", text_outcomes[i].word, r->text);
		break;
	}
	}
}

/* ACQUIRE's <unless>, with its space before; nothing when none. */
static void
fmt_unless(struct buf *b, const struct route_when *w)
{
	int k, n = 0;

	for (k = 0; k < RK_COUNT; k++) {
		if (w->s[k] == RK_OFF)
			continue;
		if (w->s[k] < 0 || w->s[k] > RK_MAX_S)
			panic("gateproto: threshold %lld", w->s[k]);
		buf_printf(b, "%c%s=%lld", n++ ? ',' : ' ', route_kind_word((enum route_kind)k),
		    w->s[k]);
	}
}

void
gp_fmt_request(struct buf *b, const struct gp_req *r)
{
	size_t start = b->len;

	switch (r->verb) {
	case GP_ACQUIRE:
		if (!gp_valid_name(r->upstream) || (*r->cls && !gp_valid_name(r->cls)) ||
		    (*r->sender && !gp_valid_word(r->sender, GP_SENDER_MAX)))
			panic("gateproto: invalid ACQUIRE fields");
		buf_printf(b, "ACQUIRE %u %s %s %s %u %u %u", r->tag, r->upstream,
		    dash(r->cls), dash(r->sender), r->w[UNIT_MESSAGES], r->w[UNIT_RECIPIENTS],
		    r->w[UNIT_CONNECTIONS]);
		fmt_unless(b, &r->unless);
		buf_addc(b, '\n');
		break;
	case GP_REPORT:
		buf_printf(b, "REPORT %u ", r->tag);
		fmt_outcome(b, r);
		break;
	case GP_SETTLE:
		if (!gp_valid_name(r->upstream) || r->grant == 0 || r->outcome == GP_UNKNOWN)
			panic("gateproto: invalid SETTLE fields");
		buf_printf(b, "SETTLE %s %llu ", r->upstream, (unsigned long long)r->grant);
		fmt_outcome(b, r);
		break;
	case GP_RESUME:
		if (!gp_valid_name(r->upstream))
			panic("gateproto: invalid RESUME upstream");
		buf_printf(b, "RESUME %s\n", r->upstream);
		break;
	case GP_REFUSED:
		if (!gp_valid_name(r->upstream) || !gp_valid_text(r->text, GP_TEXT_MAX))
			panic("gateproto: invalid REFUSED fields");
		buf_printf(b, "REFUSED %s %s\n", r->upstream, r->text);
		break;
	case GP_COUNTS: {
		size_t i;

		if (!gp_valid_name(r->upstream))
			panic("gateproto: invalid COUNTS upstream");
		buf_printf(b, "COUNTS %s", r->upstream);
		for (i = 0; i < GP_NCOUNTS; i++) {
			if (r->counts[i] > GP_COUNT_MAX)
				panic("gateproto: COUNTS number out of range");
			buf_printf(b, " %llu", (unsigned long long)r->counts[i]);
		}
		buf_addc(b, '\n');
		break;
	}
	case GP_CANCEL:
		buf_printf(b, "CANCEL %u\n", r->tag);
		break;
	case GP_START:
		buf_printf(b, "START %u\n", r->tag);
		break;
	case GP_STARTS:
		buf_adds(b, "STARTS\n");
		break;
	case GP_STATUS:
		if (r->history_s > GP_HISTORY_MAX_S || (r->history_s && !r->json))
			panic("gateproto: STATUS history of %u s", r->history_s);
		if (r->history_s)
			buf_printf(b, "STATUS JSON %u\n", r->history_s);
		else
			buf_printf(b, "STATUS %s\n", r->json ? "JSON" : "TEXT");
		break;
	default:
		panic("gateproto: unknown verb %d", (int)r->verb);
	}
	if (r->tag == 0 && r->verb != GP_STATUS && r->verb != GP_RESUME && r->verb != GP_COUNTS &&
	    r->verb != GP_SETTLE && r->verb != GP_STARTS && r->verb != GP_REFUSED)
		panic("gateproto: tag 0");
	if (b->len - start > GP_LINE_MAX)
		panic("gateproto: request line too long");
}

void
gp_fmt_reply(struct buf *b, const struct gp_reply *r)
{
	switch (r->verb) {
	case GP_R_GRANT:
		buf_printf(b, "GRANT %u %llu %u %u %u\n", r->tag, (unsigned long long)r->id,
		    r->max_rcpt, r->msgs_per_conn, r->grace);
		break;
	case GP_R_OK:
		if (r->tag)
			buf_printf(b, "OK %u\n", r->tag);
		else
			buf_adds(b, "OK -\n");
		break;
	case GP_R_SUSPENDED:
		buf_printf(b, "SUSPENDED %u %llu\n", r->tag, (unsigned long long)r->secs);
		break;
	case GP_R_LATER:
		if (r->secs == 0 || r->secs > GP_LATER_MAX || (unsigned)r->why >= RK_COUNT)
			panic("gateproto: invalid LATER");
		buf_printf(b, "LATER %u %s %llu\n", r->tag, route_kind_word(r->why),
		    (unsigned long long)r->secs);
		break;
	case GP_R_ERR:
		if (!gp_valid_text(r->text, GP_TEXT_MAX))
			panic("gateproto: invalid error text");
		if (r->tag)
			buf_printf(b, "ERR %u %s %s\n", r->tag, gp_code_name(r->code), r->text);
		else
			buf_printf(b, "ERR - %s %s\n", gp_code_name(r->code), r->text);
		break;
	case GP_R_STATUS:
		buf_printf(b, "STATUS %zu\n", r->length);
		break;
	}
}
