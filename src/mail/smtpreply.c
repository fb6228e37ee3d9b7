/*
 * smtpreply.c: strict SMTP reply parser; see smtpreply.h for the grammar
 * it accepts.  Trusts nothing: every byte is checked, every limit is
 * enforced before memory grows.  Config keys: none.
 */
#include <stdio.h>
#include <string.h>

#include "mail/smtpreply.h"

void
smtp_reply_init(struct smtp_reply *r)
{
	memset(r, 0, sizeof *r);
	r->text = (struct buf)BUF_INIT;
}

void
smtp_reply_free(struct smtp_reply *r)
{
	buf_free(&r->text);
	memset(r, 0, sizeof *r);
}

void
smtp_reply_reset(struct smtp_reply *r)
{
	buf_reset(&r->text);
	r->code = 0;
	r->esc[0] = '\0';
	r->nlines = 0;
	r->done = 0;
}

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* "D.DDD.DDD" at the start of text, followed by SP or the end. */
static void
pick_esc(struct smtp_reply *r, const char *t, size_t n)
{
	size_t i = 0, part, digits;

	if (n < 5 || t[0] != (char)('0' + r->code / 100) || t[1] != '.')
		return;
	i = 2;
	for (part = 0; part < 2; part++) {
		for (digits = 0; i < n && is_digit(t[i]); i++)
			digits++;
		if (digits < 1 || digits > 3)
			return;
		if (part == 0) {
			if (i >= n || t[i] != '.')
				return;
			i++;
		}
	}
	if (i < n && t[i] != ' ')
		return;
	if (i >= sizeof r->esc)
		return;
	memcpy(r->esc, t, i);
	r->esc[i] = '\0';
}

enum reply_status
smtp_reply_feed(struct smtp_reply *r, const char *line, size_t len, const char **why)
{
	int code, last;
	size_t i;

	if (r->done) {
		*why = "line after the end of the reply";
		return REPLY_BAD;
	}
	if (len + 2 > SMTP_REPLY_LINE_MAX) {
		*why = "reply line over 512 bytes";
		return REPLY_BAD;
	}
	if (len < 3 || !is_digit(line[0]) || !is_digit(line[1]) || !is_digit(line[2])) {
		*why = "reply line does not start with a 3-digit code";
		return REPLY_BAD;
	}
	code = (line[0] - '0') * 100 + (line[1] - '0') * 10 + (line[2] - '0');
	if (line[0] < '2' || line[0] > '5' || line[1] > '5') {
		*why = "reply code out of range";
		return REPLY_BAD;
	}
	if (len > 3 && line[3] != '-' && line[3] != ' ') {
		*why = "reply code not followed by '-', space or the end of the line";
		return REPLY_BAD;
	}
	if (r->nlines > 0 && code != r->code) {
		*why = "reply lines carry different codes";
		return REPLY_BAD;
	}
	if (r->nlines + 1 > SMTP_REPLY_LINES_MAX) {
		*why = "reply over 100 lines";
		return REPLY_BAD;
	}
	for (i = 4; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if ((c < 32 && c != '\t') || c == 127) {
			*why = "control byte in reply text";
			return REPLY_BAD;
		}
	}
	last = len == 3 || line[3] == ' ';
	if (r->nlines == 0) {
		r->code = code;
		if (len > 4)
			pick_esc(r, line + 4, len - 4);
	} else {
		buf_addc(&r->text, '\n');
	}
	if (len > 4)
		buf_add(&r->text, line + 4, len - 4);
	else
		buf_reserve(&r->text, 0);
	r->nlines++;
	if (!last)
		return REPLY_MORE;
	r->done = 1;
	return REPLY_DONE;
}

enum reply_status
smtp_reply_parse(struct smtp_reply *r, const char *s, size_t len, const char **why)
{
	size_t start = 0, i;
	enum reply_status st = REPLY_MORE;

	for (i = 0; i < len; i++) {
		if (s[i] == '\n' || s[i] == '\0') {
			*why = s[i] ? "bare LF in reply" : "NUL in reply";
			return REPLY_BAD;
		}
		if (s[i] != '\r')
			continue;
		if (i + 1 >= len || s[i + 1] != '\n') {
			*why = "bare CR in reply";
			return REPLY_BAD;
		}
		st = smtp_reply_feed(r, s + start, i - start, why);
		if (st == REPLY_BAD)
			return st;
		i++;
		start = i + 1;
	}
	if (start != len) {
		*why = "reply line without CRLF";
		return REPLY_BAD;
	}
	if (st != REPLY_DONE)
		*why = "reply ends before its last line";
	return st == REPLY_DONE ? REPLY_DONE : REPLY_BAD;
}

void
smtp_reply_oneline(const struct smtp_reply *r, char *out, size_t max)
{
	size_t o, i;
	int n;

	if (max == 0)
		return;
	n = snprintf(out, max, "%03d", r->code);
	if (n < 0 || (size_t)n >= max)
		return;
	o = (size_t)n;
	if (r->text.len > 0 && o + 1 < max)
		out[o++] = ' ';
	for (i = 0; i < r->text.len && o + 1 < max; i++) {
		unsigned char c = (unsigned char)r->text.s[i];

		if (c == '\n') {
			if (o + 3 >= max)
				break;
			memcpy(out + o, " / ", 3);
			o += 3;
		} else {
			out[o++] = c == '\t' ? ' ' : (char)c;
		}
	}
	out[o] = '\0';
}
