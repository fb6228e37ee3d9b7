/*
 * rewrite.h: sender rewriting for one upstream, as Postfix's
 * smtp_generic_maps, nullmailer's allmailfrom and msmtp's from /
 * set_from_header do: what the provider sees as the envelope sender
 * (MAIL FROM) and, optionally, as the address in the From: header, for
 * mail from local users and daemons (root@box.localdomain, a bare
 * "cron", www-data@localhost).  Pure: no I/O, no logging; weir-remote
 * applies it at delivery (the queue file is never changed), config.c
 * checks the keys with it.
 *
 * The map (rewrite_sender): entries "PATTERN ADDRESS", blanks between.
 *   user@domain   that address exactly
 *   user          that local part when the address is local: no domain,
 *                 "localhost", or the host name (weir.conf's hostname)
 *   @domain       every address at that domain (not its subdomains)
 * ADDRESS is "local@domain" (the local part a dot-atom) or "@domain": the
 * same local part at that domain.  Case does not matter in patterns.
 * The most specific pattern wins whatever the order: an exact address,
 * then a local part, then a domain; one pattern may appear only once.
 *
 * The default (rewrite_default, an address): for a sender no pattern
 * matched whose domain is not one the upstream accepts.  The accepted
 * domains are rewrite_domains, or, when that is empty, the domains of
 * the default and of the map's addresses.  An address without a domain
 * is never in an accepted domain.
 *
 * Never rewritten: the null sender "" (bounces) and qmail's "#@[]".  A
 * result equal to the address (case aside) is no rewrite.
 *
 * The From: header: its value must name exactly one mailbox, written
 * "addr" or "Name <addr>" (comments allowed around), whose address as
 * written is its parsed form (no quoting, no route); then that address,
 * and only it, is looked up as above and replaced, the display name,
 * comments and folding kept.  Anything else is left as it is, with the
 * reason.
 *
 * Trusts: nothing; entries come checked (rewrite_entry_problem) from the
 * administrator's weir.conf, header values from any sender.
 * Config keys (struct weir_upstream): rewrite_sender, rewrite_default,
 * rewrite_domains; rewrite_header_from is the caller's.
 */
#ifndef WEIR_REWRITE_H
#define WEIR_REWRITE_H

#include <stddef.h>

#include "lib/buf.h"

/* The longest map entry, default or address this module handles. */
#define REWRITE_ADDR_MAX 1000

struct rewrite_rule {
	int kind;		/* RW_EXACT, RW_LOCAL, RW_DOMAIN (rewrite.c) */
	char *pattern;		/* without the '@' of "@domain" */
	char *result;		/* "local@domain" or "@domain" */
};

struct rewrite {
	struct rewrite_rule *r;	/* exact ones, then local parts, then domains */
	size_t n;
	char *def;		/* NULL: no default */
	char **domains;		/* accepted domains */
	size_t ndomains;
	char *hostname;
};

/* NULL if entry is a good map entry "PATTERN ADDRESS", else the reason. */
const char *rewrite_entry_problem(const char *entry);
/* NULL if addr can be the result of a rewrite: "local@domain", or with
 * domain_only also "@domain"; else the reason. */
const char *rewrite_address_problem(const char *addr, int domain_only);

/* Build the rules.  0 ok; -1 with the reason in why (a bad entry, a
 * pattern twice) and rw empty (rewrite_free is still safe). */
int rewrite_init(struct rewrite *rw, const char *const *map, size_t nmap, const char *def,
    const char *const *domains, size_t ndomains, const char *hostname, struct buf *why);
void rewrite_free(struct rewrite *rw);
/* Does any rule exist (a map entry or a default)? */
int rewrite_active(const struct rewrite *rw);

/* What addr becomes.  1 rewritten, the new address in out (reset
 * first); 0 unchanged. */
int rewrite_address(const struct rewrite *rw, const char *addr, struct buf *out);

enum rewrite_from {
	RWF_SAME,		/* one address, not rewritten */
	RWF_REWRITTEN,		/* value[*off, *off + *len) becomes out */
	RWF_SEVERAL,		/* not one mailbox: several, a group, none */
	RWF_UNPARSABLE,		/* not an address list; why says where */
	RWF_ODD_FORM,		/* one address, written quoted or with a route */
};

/* The From: field's value (after the colon, raw, folded) value[0..len):
 * what to do with it.  old gets the address found (RWF_SAME and
 * RWF_REWRITTEN), out the new one, why the reason for the last three. */
enum rewrite_from rewrite_from(const struct rewrite *rw, const char *value, size_t len,
    size_t *off, size_t *alen, struct buf *old, struct buf *out, struct buf *why);

#endif
