/*
 * netaddr.h: IP addresses in configuration and from clients.
 *
 * IPv4 and IPv6 networks in CIDR notation ("192.168.1.0/24",
 * "::1/128", "10.0.0.1" = /32), parsed strictly (inet_pton, a decimal
 * prefix without sign or leading zeros, in range, no host bits set), and
 * matched against client addresses.  An IPv4-mapped IPv6 client
 * (::ffff:a.b.c.d) matches as the IPv4 address it is.
 *
 * Socket addresses "IPv4:port" or "[IPv6]:port" (port 0 to 65535 in
 * plain decimal), for listen.address.
 *
 * Trusts: nothing.  Config keys: none (config.c checks listen.allow and
 * listen.address with these; weir-smtpd uses them).
 */
#ifndef WEIR_NETADDR_H
#define WEIR_NETADDR_H

#include <stdint.h>
#include <sys/socket.h>

#include "lib/buf.h"

struct cidr {
	int family;		/* AF_INET or AF_INET6 */
	uint8_t addr[16];	/* 4 or 16 bytes used */
	unsigned prefix;	/* 0..32 or 0..128 */
};

/* 0 ok; -1 with the reason in why. */
int cidr_parse(const char *s, struct cidr *c, struct buf *why);

/* A client address in text ("127.0.0.1", "::1"), parsed strictly.
 * 0 ok (family and 4 or 16 bytes in c, prefix full); -1 not an address. */
int cidr_addr(const char *s, struct cidr *c);

/* Does network net contain address a (from cidr_addr)? */
int cidr_match(const struct cidr *net, const struct cidr *a);

/* Parse "IPv4:port" or "[IPv6]:port".  0 ok; -1 with the reason in why. */
int hostport_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    struct buf *why);

#endif
