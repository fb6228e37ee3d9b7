/*
 * address.h: RFC 5322 address parsing for the injectors.
 *
 * addr_parse_list() reads an address-list header value (To, Cc, Bcc,
 * possibly folded) and returns the addr-specs it names, in order:
 *
 *   Name <a@b>, a@b (comment), "quoted, name" <a@b>, <@route:a@b>,
 *   undisclosed-recipients:;, team: a@b, c@d;, "quoted local"@b
 *
 * Addresses come back in qmail's internal (unquoted) form: quoted-pairs
 * resolved, quotes and comments removed, no whitespace.  A local part
 * without "@domain" is accepted (cron writes "To: root"); the caller
 * qualifies it.  Empty list elements ("a@b, , c@d") are allowed, as the
 * RFC's obsolete syntax does.
 *
 * The other direction, for the SMTP client: addr_write_path() writes an
 * address in qmail's internal form as an RFC 5321 path, the local part
 * (everything before the last '@') as a dot-string when it is one, else
 * as a quoted-string with '\' and '"' escaped, as qmail-remote does
 * ("a b"@x, "a\"b"@x, "x\\y"@x).  Nothing in an address can then add
 * text outside the path's "<...>".  The domain must be a valid domain
 * name (LDH labels) or address literal; addr_domain_problem() is the one
 * check of that, used by sendmail, weir-queue, weir-smtpd and
 * weir-remote alike.
 *
 * Trusts: nothing.  Input is bounded by the caller's size and parsed in
 * one pass with no recursion; comment nesting is limited to
 * ADDR_COMMENT_DEPTH.  Every error says what was wrong and where.
 * Config keys: none.
 */
#ifndef WEIR_ADDRESS_H
#define WEIR_ADDRESS_H

#include <stddef.h>

#include "lib/buf.h"

#define ADDR_COMMENT_DEPTH 32
/* The longest value addr_parse_list() accepts (the header block limit). */
#define ADDR_LIST_MAX (1024 * 1024)

struct addrlist {
	char **v;		/* NUL-terminated addresses, owned */
	size_t n;
	size_t cap;
};

#define ADDRLIST_INIT { NULL, 0, 0 }

void addrlist_add(struct addrlist *l, const char *s, size_t len);
void addrlist_free(struct addrlist *l);

/* Parse an address-list and append its addresses to out.  A local part
 * without a domain gets "@" defdomain appended, unless defdomain is NULL.
 * 0 ok (out may have gained nothing: "undisclosed-recipients:;"); -1
 * with the reason in why, and out unchanged. */
int addr_parse_list(const char *s, size_t len, const char *defdomain,
    struct addrlist *out, struct buf *why);

/* Parse one address given on a command line ("a@b", "<a@b>", "Name
 * <a@b>", "root"): exactly one mailbox, no group, no list.  allow_empty:
 * "" and "<>" give the empty address (the null envelope sender).
 * defdomain as above.  0 ok with the address in out (reset first); -1
 * with the reason in why. */
int addr_parse_one(const char *s, int allow_empty, const char *defdomain,
    struct buf *out, struct buf *why);

/* NULL if s[0..n) is a valid RFC 5321 domain (LDH labels of 1-63 bytes,
 * no trailing dot, at most 255 bytes) or address literal ([1.2.3.4],
 * [IPv6:...]), else the reason. */
const char *addr_domain_problem(const char *s, size_t n);

/* NULL if the internal-form address can be written as a path by
 * addr_write_path(), else the reason: what envelope_addr_problem()
 * refuses (a control byte, over 1002 bytes), no local part, or
 * a domain addr_domain_problem() refuses.  "" (the null sender), "#@[]"
 * (qmail's sender of double bounces, written as it is) and an address
 * without '@' (a local name, qualified later) are fine. */
const char *addr_path_problem(const char *addr, size_t len);

/* Append "<" path ">" for addr to out ("<>" for "").  0 ok; -1 with the
 * reason in *why (out unchanged). */
int addr_write_path(struct buf *out, const char *addr, size_t len, const char **why);

#endif
