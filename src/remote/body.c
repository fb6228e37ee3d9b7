/*
 * body.c: CRLF normalisation and dot-stuffing; see body.h.  One pass,
 * byte by byte, with the length of the current line and whether the
 * header has ended as the only state.
 * Trusts: nothing.  Config keys: none.
 */
#include <string.h>

#include "remote/body.h"

int
body_encode(const char *msg, size_t n, struct buf *out, struct body_info *info)
{
	size_t i, j, linelen = 0, start;
	int header = 1;

	memset(info, 0, sizeof *info);
	buf_reserve(out, n + n / 32 + 8);
	for (i = 0; i < n; ) {
		/* One line: msg[start..i) up to its end marker.  In the header
		 * a bare CR is no end: only LF and CRLF are. */
		start = i;
		while (i < n && msg[i] != '\n' && !(msg[i] == '\r' &&
		    (!header || (i + 1 < n && msg[i + 1] == '\n')))) {
			if ((unsigned char)msg[i] > 127)
				info->eightbit = 1;
			i++;
		}
		linelen = i - start;
		info->lines++;
		if (linelen > BODY_LINE_MAX) {
			info->too_long_line = info->lines;
			info->too_long_len = linelen;
			return -1;
		}
		if (linelen > 0 && msg[start] == '.')
			buf_addc(out, '.');
		buf_add(out, msg + start, linelen);
		if (header) {
			for (j = out->len - linelen; j < out->len; j++)
				if (out->s[j] == '\r')
					out->s[j] = ' ';
			header = linelen > 0;
		}
		buf_add(out, "\r\n", 2);
		if (i < n && msg[i] == '\r' && i + 1 < n && msg[i + 1] == '\n')
			i += 2;
		else if (i < n)
			i++;
	}
	buf_add(out, ".\r\n", 3);
	return 0;
}
