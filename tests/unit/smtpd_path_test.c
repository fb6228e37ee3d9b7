/*
 * smtpd_path_test.c: RFC 5321 paths (smtpd/path.c), the relay tricks,
 * networks (smtpd/cidr.c) and listen addresses (smtpd/listener.c).
 */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/netaddr.h"
#include "smtpd/listener.h"
#include "smtpd/path.h"

static void
ok(const char *in, int flags, const char *want, size_t wantused)
{
	struct buf out = BUF_INIT;
	const char *why = NULL;
	size_t used = 0;

	cr_assert_eq(smtp_path_parse(in, flags, &out, &used, &why), 0, "%s: %s", in, why);
	cr_assert_str_eq(buf_cstr(&out), want, "%s", in);
	cr_assert_eq(used, wantused, "%s: used %zu", in, used);
	buf_free(&out);
}

static void
bad(const char *in, int flags)
{
	struct buf out = BUF_INIT;
	const char *why = NULL;
	size_t used = 0;

	cr_assert_eq(smtp_path_parse(in, flags, &out, &used, &why), -1, "%s accepted", in);
	cr_assert(why && *why);
	buf_free(&out);
}

Test(path, good)
{
	ok("<a@b.example>", 0, "a@b.example", 13);
	ok("<a@b.example> SIZE=1", 0, "a@b.example", 13);
	ok("<first.last+tag@sub-domain.example.org>", 0, "first.last+tag@sub-domain.example.org", 39);
	ok("<>", PATH_NULL_OK, "", 2);
	ok("<Postmaster>", PATH_POSTMASTER, "Postmaster", 12);
	ok("<\"x.y\"@b.example>", 0, "x.y@b.example", 17);
	ok("<a@[192.0.2.1]>", 0, "a@[192.0.2.1]", 15);
	ok("<a@[IPv6:2001:db8::1]>", 0, "a@[IPv6:2001:db8::1]", 22);
}

Test(path, relay_tricks)
{
	bad("<user%c.example@a.example>", 0);
	bad("<@a.example:user@c.example>", 0);
	bad("<@a.example,@b.example:user@c.example>", 0);
	bad("<c.example!user@a.example>", 0);
	bad("<\"user@c.example\"@a.example>", 0);
	bad("<\"user%c.example\"@a.example>", 0);
	bad("<\"a b\"@a.example>", 0);
	bad("<user@c.example@a.example>", 0);
}

Test(path, syntax)
{
	bad("a@b.example", 0);
	bad("<a@b.example", 0);
	bad("<>", 0);
	bad("<postmaster>", 0);
	bad("<a>", 0);
	bad("<a@>", 0);
	bad("<@>", 0);
	bad("<.a@b.example>", 0);
	bad("<a..b@b.example>", 0);
	bad("<a.@b.example>", 0);
	bad("<a@b..example>", 0);
	bad("<a@b.example.>", 0);
	bad("<a@-b.example>", 0);
	bad("<a@b-.example>", 0);
	bad("<a@b_c.example>", 0);
	bad("<a b@b.example>", 0);
	bad("<a@[300.1.1.1]>", 0);
	bad("<a@[IPv6:zz]>", 0);
	bad("<\xc3\xa9@b.example>", 0);
	bad("<aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa@b.example>", 0);
}

Test(cidr, parse_and_match)
{
	struct cidr n, a;
	struct buf why = BUF_INIT;

	cr_assert_eq(cidr_parse("127.0.0.0/8", &n, &why), 0);
	cr_assert_eq(cidr_addr("127.1.2.3", &a), 0);
	cr_assert(cidr_match(&n, &a));
	cr_assert_eq(cidr_addr("128.0.0.1", &a), 0);
	cr_assert(!cidr_match(&n, &a));
	cr_assert_eq(cidr_addr("::ffff:127.0.0.9", &a), 0);
	cr_assert(cidr_match(&n, &a), "v4-mapped matches as IPv4");
	cr_assert_eq(cidr_parse("127.0.0.1/32", &n, &why), 0);
	cr_assert_eq(cidr_addr("127.0.0.2", &a), 0);
	cr_assert(!cidr_match(&n, &a));
	cr_assert_eq(cidr_parse("192.168.1.0/23", &n, &why), -1, "host bits set");
	cr_assert_eq(cidr_parse("192.168.0.0/23", &n, &why), 0);
	cr_assert_eq(cidr_addr("192.168.1.200", &a), 0);
	cr_assert(cidr_match(&n, &a));
	cr_assert_eq(cidr_parse("2001:db8::/32", &n, &why), 0);
	cr_assert_eq(cidr_addr("2001:db8:1::5", &a), 0);
	cr_assert(cidr_match(&n, &a));
	cr_assert_eq(cidr_addr("2001:db9::5", &a), 0);
	cr_assert(!cidr_match(&n, &a));
	cr_assert_eq(cidr_parse("0.0.0.0/0", &n, &why), 0);
	cr_assert_eq(cidr_parse("::1", &n, &why), 0);
	cr_assert_eq(n.prefix, 128);
	cr_assert_eq(cidr_parse("10.0.0.0/33", &n, &why), -1);
	cr_assert_eq(cidr_parse("10.0.0.0/08", &n, &why), -1);
	cr_assert_eq(cidr_parse("10.0.0.0/", &n, &why), -1);
	cr_assert_eq(cidr_parse("10.0.0/8", &n, &why), -1);
	cr_assert_eq(cidr_parse("10.0.0.0/8x", &n, &why), -1);
	cr_assert_eq(cidr_parse("::/129", &n, &why), -1);
	cr_assert_eq(cidr_parse("localhost", &n, &why), -1);
	cr_assert_eq(cidr_addr("unknown", &a), -1);
	buf_free(&why);
}

Test(listen, addresses)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct buf why = BUF_INIT;

	cr_assert_eq(hostport_parse("127.0.0.1:25", &ss, &len, &why), 0);
	cr_assert_eq(ss.ss_family, AF_INET);
	cr_assert_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 25);
	cr_assert_eq(hostport_parse("[::1]:2525", &ss, &len, &why), 0);
	cr_assert_eq(ss.ss_family, AF_INET6);
	cr_assert_eq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 2525);
	cr_assert_eq(hostport_parse("127.0.0.1:0", &ss, &len, &why), 0);
	cr_assert_eq(hostport_parse("::1:25", &ss, &len, &why), -1);
	cr_assert_eq(hostport_parse("127.0.0.1", &ss, &len, &why), -1);
	cr_assert_eq(hostport_parse("127.0.0.1:65536", &ss, &len, &why), -1);
	cr_assert_eq(hostport_parse("127.0.0.1:025", &ss, &len, &why), -1);
	cr_assert_eq(hostport_parse("[::1]25", &ss, &len, &why), -1);
	cr_assert_eq(hostport_parse("localhost:25", &ss, &len, &why), -1);
	buf_free(&why);
}
