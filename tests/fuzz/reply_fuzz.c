/*
 * reply_fuzz.c: libFuzzer harness for what weir-remote makes of an
 * upstream's replies: the reply reader (src/mail/smtpreply.c) and the
 * classifier (src/mail/trouble.c).  The first byte picks the stage the
 * reply answers; the rest is the reply's bytes.  Properties:
 *
 *   - parsing the whole reply and feeding it line by line agree;
 *   - a complete reply has a code 200..559 with a second digit 0..5, at
 *     most SMTP_REPLY_LINES_MAX lines, an enhanced code of its own class
 *     or none, and a one-line form without control bytes that fits;
 *   - the classifier: 2xx at a stage expecting it is ACCEPT; a 4xx is
 *     never ACCEPT nor BOUNCE; nothing before RCPT is ever BOUNCE.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/reply.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mail/smtpreply.h"
#include "mail/trouble.h"
#include "fuzz.h"

static struct trouble_rules *rules;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smtp_reply whole, lines;
	enum reply_status sw, sl = REPLY_MORE;
	enum smtp_stage st;
	enum trouble_action act;
	const char *s = (const char *)data + 1, *why, *p, *end, *nl;
	char one[200];
	size_t n, i;

	if (size == 0)
		return 0;
	if (rules == NULL) {
		rules = trouble_new();
		trouble_add_throttle(rules, "4?? *rate*");
	}
	st = (enum smtp_stage)(data[0] % STAGE_COUNT);
	n = size - 1;
	smtp_reply_init(&whole);
	smtp_reply_init(&lines);
	sw = smtp_reply_parse(&whole, s, n, &why);

	/* Line by line, as weir-remote reads: split at CRLF. */
	for (p = s, end = s + n; p < end && sl == REPLY_MORE; p = nl + 2) {
		nl = memmem(p, (size_t)(end - p), "\r\n", 2);
		if (nl == NULL)
			break;
		sl = smtp_reply_feed(&lines, p, (size_t)(nl - p), &why);
	}
	if (sw == REPLY_DONE) {
		check(sl == REPLY_DONE && p == end);
		check(whole.code == lines.code && whole.nlines == lines.nlines);
		check(strcmp(whole.esc, lines.esc) == 0);
		check(whole.text.len == lines.text.len &&
		    (whole.text.len == 0 || memcmp(whole.text.s, lines.text.s, whole.text.len) == 0));
		check(whole.code >= 200 && whole.code <= 559 && whole.code / 10 % 10 <= 5);
		check(whole.nlines >= 1 && whole.nlines <= SMTP_REPLY_LINES_MAX);
		check(whole.esc[0] == '\0' || whole.esc[0] - '0' == whole.code / 100);
		smtp_reply_oneline(&whole, one, sizeof one);
		check(strlen(one) < sizeof one);
		for (i = 0; one[i]; i++)
			check((unsigned char)one[i] >= 0x20 && one[i] != 0x7f);

		act = trouble_reply(rules, st, &whole);
		if (whole.code / 100 == 2 && st != STAGE_DATA)
			check(act == T_ACCEPT);
		if (whole.code / 100 == 4)
			check(act != T_ACCEPT && act != T_BOUNCE);
		if (st < STAGE_RCPT)
			check(act != T_BOUNCE);
		(void)trouble_action_name(act);
	}
	smtp_reply_free(&whole);
	smtp_reply_free(&lines);
	return 0;
}
