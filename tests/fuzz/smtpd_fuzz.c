/*
 * smtpd_fuzz.c: libFuzzer harness for weir-smtpd's parsers of client
 * input.  The first byte picks the target:
 *
 *   0  dataend.c, the end-of-data detector: the input, fed whole and fed
 *      in pieces cut where the fuzzer says, must give the same status,
 *      bytes used, output and flags; DE_END never follows a bare CR or LF
 *      in what was consumed; the output holds no CR.
 *   1  path.c, MAIL FROM / RCPT TO paths: an accepted path ends at a '>'
 *      inside the input; the address has no relay syntax ('%', '!', a
 *      second '@'), no space or control byte, no 8-bit byte.
 *   2  auth.c's base64: what it accepts encodes back to the same text.
 *   3  lib/netaddr.c: CIDR networks and host:port; a network contains
 *      its own address.
 *
 * Build and run: make fuzz (FUZZ_TIME seconds, default 60); make check
 * runs the seed corpus in tests/fuzz/corpus/smtpd once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/buf.h"
#include "lib/netaddr.h"
#include "smtpd/auth.h"
#include "smtpd/dataend.h"
#include "smtpd/path.h"
#include "fuzz.h"

static enum de_status
feed_all(const char *s, size_t n, const uint8_t *cuts, size_t ncuts, struct buf *out,
    size_t *used, int *flags)
{
	struct dataend d;
	enum de_status st = DE_MORE;
	size_t off = 0, u, i = 0;

	dataend_init(&d, 4096);
	while (off < n && st == DE_MORE) {
		size_t k = ncuts ? (size_t)cuts[i++ % ncuts] % 17 + 1 : n - off;

		if (k > n - off)
			k = n - off;
		st = dataend_feed(&d, s + off, k, &u, out);
		check(u <= k);
		off += u;
	}
	*used = off;
	*flags = d.flags;
	return st;
}

static void
fuzz_dataend(const char *s, size_t n)
{
	struct buf a = BUF_INIT, b = BUF_INIT;
	size_t ua, ub, i, ncuts = n > 8 ? 8 : n;
	int fa, fb;
	enum de_status sa = feed_all(s, n, NULL, 0, &a, &ua, &fa);
	enum de_status sb = feed_all(s, n, (const uint8_t *)s, ncuts, &b, &ub, &fb);

	check(sa == sb && ua == ub && fa == fb && a.len == b.len);
	check(a.len == 0 || memcmp(a.s, b.s, a.len) == 0);
	check(memchr(a.s ? a.s : "", '\r', a.len) == NULL);
	if (sa == DE_END) {
		check(ua >= 3 && memcmp(s + ua - 3, ".\r\n", 3) == 0);
		check(ua == 3 || (ua >= 5 && memcmp(s + ua - 5, "\r\n.\r\n", 5) == 0));
		for (i = 0; i < ua; i++) {
			if (s[i] == '\r')
				check(i + 1 < ua && s[i + 1] == '\n');
			if (s[i] == '\n')
				check(i > 0 && s[i - 1] == '\r');
		}
	}
	buf_free(&a);
	buf_free(&b);
}

static void
fuzz_path(const char *s, size_t n, int flags)
{
	char *z = fz_cstr(s, n);
	struct buf out = BUF_INIT;
	const char *why;
	size_t used, i, ats = 0;

	if (z == NULL)
		return;
	if (smtp_path_parse(z, flags & 3, &out, &used, &why) == 0) {
		check(used >= 2 && used <= strlen(z) && z[used - 1] == '>');
		for (i = 0; i < out.len; i++) {
			unsigned char c = (unsigned char)out.s[i];

			check(c > ' ' && c < 0x7f && c != '%' && c != '!');
			ats += c == '@';
		}
		check(ats == 1 || (ats == 0 && (out.len == 0 || strcasecmp(out.s, "postmaster") == 0)));
	}
	buf_free(&out);
	free(z);
}

static void
b64_encode(const unsigned char *p, size_t n, struct buf *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		buf_addc(out, a[p[i] >> 2]);
		buf_addc(out, a[((p[i] & 3) << 4) | (p[i + 1] >> 4)]);
		buf_addc(out, a[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)]);
		buf_addc(out, a[p[i + 2] & 63]);
	}
	if (n - i == 1) {
		buf_addc(out, a[p[i] >> 2]);
		buf_addc(out, a[(p[i] & 3) << 4]);
		buf_adds(out, "==");
	} else if (n - i == 2) {
		buf_addc(out, a[p[i] >> 2]);
		buf_addc(out, a[((p[i] & 3) << 4) | (p[i + 1] >> 4)]);
		buf_addc(out, a[(p[i + 1] & 15) << 2]);
		buf_addc(out, '=');
	}
}

static void
fuzz_b64(const char *s, size_t n)
{
	struct buf out = BUF_INIT, back = BUF_INIT;

	if (b64_decode(s, n, &out) == 0) {
		b64_encode((const unsigned char *)(out.s ? out.s : ""), out.len, &back);
		check(back.len == n && (n == 0 || memcmp(back.s, s, n) == 0));
	}
	buf_free(&out);
	buf_free(&back);
}

static void
fuzz_netaddr(const char *s, size_t n)
{
	char *z = fz_cstr(s, n);
	struct buf why = BUF_INIT;
	struct cidr net;
	struct sockaddr_storage ss;
	socklen_t len;

	if (z == NULL)
		return;
	if (cidr_parse(z, &net, &why) == 0) {
		struct cidr self = net;

		self.prefix = net.family == AF_INET ? 32 : 128;
		check(cidr_match(&net, &self));
	}
	(void)hostport_parse(z, &ss, &len, &why);
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
	case 0: fuzz_dataend(s, size - 1); break;
	case 1: fuzz_path(s, size - 1, data[0] >> 2); break;
	case 2: fuzz_b64(s, size - 1); break;
	case 3: fuzz_netaddr(s, size - 1); break;
	}
	return 0;
}
