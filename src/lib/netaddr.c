/*
 * netaddr.c: see netaddr.h.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/decimal.h"
#include "lib/netaddr.h"

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

int
cidr_addr(const char *s, struct cidr *c)
{
	memset(c, 0, sizeof *c);
	if (strchr(s, ':') == NULL) {
		if (inet_pton(AF_INET, s, c->addr) != 1)
			return -1;
		c->family = AF_INET;
		c->prefix = 32;
		return 0;
	}
	if (inet_pton(AF_INET6, s, c->addr) != 1)
		return -1;
	if (memcmp(c->addr, v4mapped, sizeof v4mapped) == 0) {
		memmove(c->addr, c->addr + 12, 4);
		memset(c->addr + 4, 0, 12);
		c->family = AF_INET;
		c->prefix = 32;
		return 0;
	}
	c->family = AF_INET6;
	c->prefix = 128;
	return 0;
}

int
cidr_parse(const char *s, struct cidr *c, struct buf *why)
{
	const char *slash = strchr(s, '/');
	char host[INET6_ADDRSTRLEN + 1];
	size_t hlen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned max, prefix, i, bits;
	const char *p;
	uint64_t v;

	memset(c, 0, sizeof *c);
	if (hlen == 0 || hlen >= sizeof host) {
		buf_printf(why, "\"%s\" is not a network (address/prefix)", s);
		return -1;
	}
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	if (strchr(host, ':')) {
		c->family = AF_INET6;
		max = 128;
	} else {
		c->family = AF_INET;
		max = 32;
	}
	if (inet_pton(c->family, host, c->addr) != 1) {
		buf_printf(why, "\"%s\" is not an IPv%c address", host,
		    c->family == AF_INET ? '4' : '6');
		return -1;
	}
	if (slash == NULL) {
		c->prefix = max;
		return 0;
	}
	p = slash + 1;
	if (*p == '\0' || (p[0] == '0' && p[1] != '\0')) {
		buf_printf(why, "\"%s\": the prefix length must be a plain number", s);
		return -1;
	}
	if (dec_parse(p, strlen(p), max, &v) < 0) {
		buf_printf(why, "\"%s\": the prefix length must be 0 to %u", s, max);
		return -1;
	}
	prefix = (unsigned)v;
	c->prefix = prefix;
	/* No host bits: "192.168.1.5/24" is a mistake, not a network. */
	for (i = 0; i < max / 8; i++) {
		bits = i * 8 >= prefix ? 0 : (prefix - i * 8 >= 8 ? 8 : prefix - i * 8);
		if (c->addr[i] & (uint8_t)(0xff >> bits)) {
			buf_printf(why, "\"%s\": address bits set past the prefix length", s);
			return -1;
		}
	}
	return 0;
}

int
cidr_match(const struct cidr *net, const struct cidr *a)
{
	unsigned full = net->prefix / 8, rest = net->prefix % 8;
	uint8_t mask;

	if (net->family != a->family)
		return 0;
	if (memcmp(net->addr, a->addr, full) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (uint8_t)(0xff << (8 - rest));
	return (net->addr[full] & mask) == (a->addr[full] & mask);
}

int
hostport_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    struct buf *why)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon, *h;
	size_t hlen;
	uint64_t port;

	memset(ss, 0, sizeof *ss);
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || close[1] != ':') {
			buf_printf(why, "\"%s\": an IPv6 address is written [address]:port", s);
			return -1;
		}
		h = s + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL) {
			buf_printf(why, "\"%s\": the port is missing (address:port)", s);
			return -1;
		}
		h = s;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= sizeof host) {
		buf_printf(why, "\"%s\": bad address", s);
		return -1;
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (dec_parse(colon + 1, strlen(colon + 1), 65535, &port) < 0) {
		buf_printf(why, "\"%s\": bad port", s);
		return -1;
	}
	if (s[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
			buf_printf(why, "\"%s\": bad IPv6 address", s);
			return -1;
		}
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*len = sizeof *a;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
			buf_printf(why, "\"%s\": bad IPv4 address", s);
			return -1;
		}
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		*len = sizeof *a;
	}
	return 0;
}
