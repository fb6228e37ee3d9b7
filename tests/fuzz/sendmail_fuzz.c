/*
 * sendmail_fuzz.c: libFuzzer harness for what sendmail makes of the
 * message and arguments a local user (or a web application) hands it:
 * the stdin reader and header parser (src/sendmail/input.c) and the
 * address parser (src/mail/address.c).  The first byte picks:
 *
 *   0, 1  the message on stdin (a memfd), with "." ending it or not (-i):
 *         the header block parses into fields that tile it exactly, each
 *         starting with a field name and ':', each line at most
 *         HDR_LINE_MAX bytes, no NUL; the addresses of To, Cc and Bcc then
 *         go through addr_parse_list; the body reads to its end;
 *   2     addr_parse_list on the input: on failure the list is unchanged
 *         and there is a reason; on success every address is a C string
 *         without NUL inside;
 *   3     addr_parse_one (sendmail -f and arguments).
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/sendmail.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mail/address.h"
#include "sendmail/input.h"
#include "fuzz.h"

static void
list(const char *s, size_t n, const char *defdomain)
{
	struct addrlist l = ADDRLIST_INIT;
	struct buf why = BUF_INIT;
	size_t before, i;

	addrlist_add(&l, "x@y", 3);
	before = l.n;
	if (addr_parse_list(s, n, defdomain, &l, &why) < 0) {
		check(l.n == before && why.len > 0);
	} else {
		for (i = 0; i < l.n; i++)
			check(l.v[i] != NULL && strlen(l.v[i]) <= n + (defdomain ? strlen(defdomain) + 1 : 0) + 3);
	}
	addrlist_free(&l);
	buf_free(&why);
}

static void
message(const char *s, size_t n, int dot_ends)
{
	static struct sm_reader rd;
	struct sm_header h;
	struct buf why = BUF_INIT;
	const char *v;
	size_t i, vl, next = 0, nl;
	int fd = memfd_create("msg", 0), c;

	if (fd < 0)
		abort();
	check(write(fd, s, n) == (ssize_t)n && lseek(fd, 0, SEEK_SET) == 0);
	memset(&h, 0, sizeof h);
	rd_init(&rd, fd, dot_ends);
	if (sm_read_header(&rd, &h, &why) == 0) {
		check(h.text.len == 0 || memchr(h.text.s, '\0', h.text.len) == NULL);
		for (i = 0; i < h.n; i++) {
			const char *f = h.text.s + h.f[i].off;

			check(h.f[i].off == next && h.f[i].len > h.f[i].namelen);
			check(h.f[i].namelen > 0 && f[h.f[i].namelen] == ':' && f[h.f[i].len - 1] == '\n');
			next = h.f[i].off + h.f[i].len;
			if (sm_field_is(&h, i, "to") || sm_field_is(&h, i, "cc") ||
			    sm_field_is(&h, i, "bcc")) {
				sm_field_value(&h, i, &v, &vl);
				list(v, vl, "example.org");
			}
		}
		check(next == h.text.len);
		for (i = 0; i < h.text.len; i = nl + 1) {
			nl = (size_t)((const char *)memchr(h.text.s + i, '\n', h.text.len - i) - h.text.s);
			check(nl - i <= HDR_LINE_MAX);
		}
		for (i = 0; i <= n + 2 && (c = rd_get(&rd)) != RD_END; i++)
			check(c >= 0 ? c <= 255 : c == RD_NL);
		check(i <= n + 2);
	} else {
		check(why.len > 0);
	}
	sm_header_free(&h);
	buf_free(&why);
	close(fd);
}

static void
one(const char *s, size_t n, int allow_empty)
{
	struct buf out = BUF_INIT, why = BUF_INIT;
	char *z = fz_cstr(s, n);

	if (z == NULL)
		return;
	if (addr_parse_one(z, allow_empty, NULL, &out, &why) == 0)
		check(out.len == 0 ? allow_empty : strlen(out.s) == out.len);
	else
		check(why.len > 0);
	buf_free(&out);
	buf_free(&why);
	free(z);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;

	if (size == 0)
		return 0;
	switch (data[0] % 4) {
	case 0:
	case 1: message(s, size - 1, data[0] % 4); break;
	case 2: list(s, size - 1, data[0] & 4 ? NULL : "example.org"); break;
	case 3: one(s, size - 1, data[0] & 4); break;
	}
	return 0;
}
