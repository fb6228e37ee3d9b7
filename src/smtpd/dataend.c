/*
 * dataend.c: see dataend.h.  The states:
 *
 *   BOL   at the start of a line (the first line, or after CRLF)
 *   DOT   a line that began with '.'; the dot is dropped
 *   DOTCR "." CR at the start of a line: LF ends the message
 *   TEXT  inside a line
 *   CR    CR inside a line: only LF may follow
 */
#include <string.h>

#include "smtpd/dataend.h"

enum { BOL, DOT, DOTCR, TEXT, CR };

void
dataend_init(struct dataend *d, size_t limit)
{
	memset(d, 0, sizeof *d);
	d->state = BOL;
	d->limit = limit;
}

static void
emit(struct dataend *d, struct buf *out, char c)
{
	if (c == '\0')
		d->flags |= DE_NUL;
	if (d->size >= d->limit) {
		d->flags |= DE_OVERSIZE;
		return;
	}
	d->size++;
	buf_addc(out, c);
}

enum de_status
dataend_feed(struct dataend *d, const char *in, size_t n, size_t *used, struct buf *out)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char c = in[i];

		if (c != '\r' && c != '\n' && ++d->linelen > DE_LINE_MAX - 2)
			d->flags |= DE_TOOLONG;
		switch (d->state) {
		case BOL:
			if (c == '.') {
				d->state = DOT;
				break;
			}
			/* FALLTHROUGH */
		case TEXT:
		case DOT:
			if (c == '\r') {
				d->state = d->state == DOT ? DOTCR : CR;
				break;
			}
			if (c == '\n') {
				*used = i + 1;
				return DE_BARE_LF;
			}
			emit(d, out, c);
			d->state = TEXT;
			break;
		case DOTCR:
			if (c == '\n') {
				*used = i + 1;
				return DE_END;
			}
			*used = i + 1;
			return DE_BARE_CR;
		case CR:
			if (c != '\n') {
				*used = i + 1;
				return DE_BARE_CR;
			}
			emit(d, out, '\n');
			d->linelen = 0;
			d->state = BOL;
			break;
		}
	}
	*used = n;
	return DE_MORE;
}
