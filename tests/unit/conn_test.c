/* conn_test.c: reply line framing and the loopback check of remote/conn.c,
 * over a socketpair: lines split across reads, over-long lines, bare CR
 * and LF, NUL, timeouts, end of file. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "lib/io.h"
#include "remote/conn.h"

static struct conn c;
static int peer;

static void
setup(void)
{
	int sv[2];

	cr_assert(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	memset(&c, 0, sizeof c);
	c.fd = sv[0];
	cr_assert(fd_nonblock(c.fd, 1) == 0);
	peer = sv[1];
}

static void
teardown(void)
{
	conn_close(&c);
	if (peer >= 0)
		close(peer);
}

TestSuite(conn, .init = setup, .fini = teardown);

static void
say(const char *s, size_t n)
{
	cr_assert(full_write(peer, s, n) == 0);
}

static enum conn_status
line(char *out, size_t *len)
{
	struct buf err = BUF_INIT;
	enum conn_status st = conn_read_line(&c, out, len, clock_mono_ms() + 500, &err);

	buf_free(&err);
	return st;
}

Test(conn, lines_in_pieces_and_together)
{
	char l[SMTP_REPLY_LINE_MAX];
	size_t n;

	say("250-a\r\n250 b\r", 13);
	cr_assert_eq(line(l, &n), CONN_OK);
	cr_assert_eq(n, 5);
	cr_assert_str_eq(l, "250-a");
	say("\n220", 4);
	cr_assert_eq(line(l, &n), CONN_OK);
	cr_assert_str_eq(l, "250 b");
	say(" c\r\n", 4);
	cr_assert_eq(line(l, &n), CONN_OK);
	cr_assert_str_eq(l, "220 c");
	cr_assert_eq(conn_pending(&c), 0);
	close(peer);
	peer = -1;
	cr_assert_eq(line(l, &n), CONN_EOF);
}

Test(conn, bad_lines)
{
	static const char *const bad[] = { "250 a\n", "250 \ra\r\n", "25\0 a\r\n" };
	char l[SMTP_REPLY_LINE_MAX];
	size_t n, i;

	for (i = 0; i < 3; i++) {
		teardown();
		setup();
		say(bad[i], i == 2 ? 7 : strlen(bad[i]));
		cr_assert_eq(line(l, &n), CONN_BADLINE, "case %zu", i);
	}
}

Test(conn, line_length_limit)
{
	char big[600], l[SMTP_REPLY_LINE_MAX];
	size_t n;

	memset(big, 'x', sizeof big);
	memcpy(big + 510, "\r\n", 2);		/* 512 with CRLF: fits */
	say(big, 512);
	cr_assert_eq(line(l, &n), CONN_OK);
	cr_assert_eq(n, 510);
	memcpy(big + 510, "x\r\n", 3);		/* 513: too long */
	say(big, 513);
	cr_assert_eq(line(l, &n), CONN_BADLINE);
}

Test(conn, endless_line_without_crlf)
{
	char big[4096], l[SMTP_REPLY_LINE_MAX];
	size_t n;

	memset(big, 'x', sizeof big);
	say(big, sizeof big);
	cr_assert_eq(line(l, &n), CONN_BADLINE);
}

Test(conn, timeout)
{
	char l[SMTP_REPLY_LINE_MAX];
	size_t n;
	uint64_t t0 = clock_mono_ms();

	say("250 partial", 11);
	cr_assert_eq(line(l, &n), CONN_TIMEOUT);
	cr_assert(clock_mono_ms() - t0 >= 450);
}

Test(conn, loopback_addresses)
{
	struct sockaddr_in s4;
	struct sockaddr_in6 s6;
	static const char *const yes4[] = { "127.0.0.1", "127.1.2.3" };
	static const char *const no4[] = { "10.0.0.1", "192.168.1.1", "128.0.0.1" };
	size_t i;

	for (i = 0; i < 2; i++) {
		memset(&s4, 0, sizeof s4);
		s4.sin_family = AF_INET;
		inet_pton(AF_INET, yes4[i], &s4.sin_addr);
		memcpy(&c.addr, &s4, sizeof s4);
		cr_assert(conn_peer_is_loopback(&c), "%s", yes4[i]);
	}
	for (i = 0; i < 3; i++) {
		memset(&s4, 0, sizeof s4);
		s4.sin_family = AF_INET;
		inet_pton(AF_INET, no4[i], &s4.sin_addr);
		memcpy(&c.addr, &s4, sizeof s4);
		cr_assert(!conn_peer_is_loopback(&c), "%s", no4[i]);
	}
	memset(&s6, 0, sizeof s6);
	s6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "::1", &s6.sin6_addr);
	memcpy(&c.addr, &s6, sizeof s6);
	cr_assert(conn_peer_is_loopback(&c));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &s6.sin6_addr);
	memcpy(&c.addr, &s6, sizeof s6);
	cr_assert(conn_peer_is_loopback(&c));
	inet_pton(AF_INET6, "2001:db8::1", &s6.sin6_addr);
	memcpy(&c.addr, &s6, sizeof s6);
	cr_assert(!conn_peer_is_loopback(&c));
}

Test(conn, starttls_refused_with_bytes_pending)
{
	char l[SMTP_REPLY_LINE_MAX];
	size_t n;
	struct buf err = BUF_INIT;

	say("220 go\r\n250 injected\r\n", 22);
	cr_assert_eq(line(l, &n), CONN_OK);
	cr_assert_eq(conn_start_tls(&c, NULL, "x", clock_mono_ms() + 100, &err), CONN_BADLINE);
	cr_assert(strstr(err.s, "14 bytes arrived in the clear after the STARTTLS reply"), "%s",
	    err.s);
	buf_free(&err);
}
