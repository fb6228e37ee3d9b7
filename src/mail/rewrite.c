/*
 * rewrite.c: sender rewriting for one upstream; the rules are in
 * rewrite.h and nowhere else.  Patterns are matched case-insensitively
 * (ASCII), as Postfix's table lookups fold case.  A From: value is read
 * by mail/address.c's parser (the one sendmail -t uses), and its one
 * address is found in the raw text by a scan that skips quoted strings
 * and comments, so the replacement touches those bytes only.
 *
 * Trusts: nothing.  Config keys: none here (see rewrite.h).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "mail/address.h"
#include "mail/rewrite.h"

enum { RW_EXACT, RW_LOCAL, RW_DOMAIN, RW_KINDS };

#define DOUBLE_BOUNCE "#@[]"

static int
blank(char c)
{
	return c == ' ' || c == '\t';
}

/* A printable ASCII byte other than a blank. */
static int
graphic(char c)
{
	return c > ' ' && c < 0x7f;
}

/* RFC 5322 atext. */
static int
atext(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-/=?^_`{|}~", c) != NULL);
}

/* s[0..n) is a dot-atom: atext runs joined by single dots. */
static int
dot_atom(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || s[0] == '.' || s[n - 1] == '.')
		return 0;
	for (i = 0; i < n; i++)
		if (!(atext(s[i]) || (s[i] == '.' && s[i - 1] != '.')))
			return 0;
	return 1;
}

const char *
rewrite_address_problem(const char *addr, int domain_only)
{
	const char *at = strrchr(addr, '@');
	size_t n = strlen(addr);

	if (n > REWRITE_ADDR_MAX)
		return "an address is at most 1000 characters";
	if (at == NULL)
		return domain_only ? "not an address (local@domain) or a domain (@domain)" :
		    "not an address (local@domain)";
	if (at == addr && !domain_only)
		return "an address needs a local part (local@domain)";
	if (at != addr && !dot_atom(addr, (size_t)(at - addr)))
		return "the local part must be plain: letters, digits, dots and "
		    "!#$%&'*+-/=?^_`{|}~, no quotes";
	if (addr_domain_problem(at + 1, strlen(at + 1)) != NULL)
		return "the domain is not a valid domain name";
	return NULL;
}

/* The kind of a pattern, or -1 with the reason. */
static int
pattern_kind(const char *p, size_t n, const char **why)
{
	const char *at = memrchr(p, '@', n);
	size_t i;

	for (i = 0; i < n; i++)
		if (!graphic(p[i])) {
			*why = "a pattern holds printable characters only";
			return -1;
		}
	if (at == NULL)
		return RW_LOCAL;
	if (addr_domain_problem(at + 1, n - (size_t)(at + 1 - p)) != NULL) {
		*why = "the pattern's domain is not a valid domain name";
		return -1;
	}
	return at == p ? RW_DOMAIN : RW_EXACT;
}

/* Split "PATTERN ADDRESS" into its two words.  0 ok; -1 with why. */
static int
split_entry(const char *e, const char **p, size_t *pn, const char **a, size_t *an,
    const char **why)
{
	const char *s = e;

	while (blank(*s))
		s++;
	*p = s;
	while (*s && !blank(*s))
		s++;
	*pn = (size_t)(s - *p);
	while (blank(*s))
		s++;
	*a = s;
	while (*s && !blank(*s))
		s++;
	*an = (size_t)(s - *a);
	while (blank(*s))
		s++;
	if (*pn == 0 || *an == 0 || *s != '\0') {
		*why = "an entry is \"PATTERN ADDRESS\": two words (user@domain, user or "
		    "@domain, then local@domain or @domain)";
		return -1;
	}
	return 0;
}

const char *
rewrite_entry_problem(const char *entry)
{
	const char *p, *a, *why = NULL;
	size_t pn, an;
	char *addr;

	if (strlen(entry) > 2 * REWRITE_ADDR_MAX)
		return "an entry is at most 2000 characters";
	if (split_entry(entry, &p, &pn, &a, &an, &why) < 0 || pattern_kind(p, pn, &why) < 0)
		return why;
	addr = xstrndup(a, an);
	why = rewrite_address_problem(addr, 1);
	free(addr);
	return why;
}

/* The domain part of a result or the default ("" for none). */
static const char *
domain_of(const char *addr)
{
	const char *at = strrchr(addr, '@');

	return at ? at + 1 : "";
}

static void
add_domain(struct rewrite *rw, const char *d)
{
	size_t i;

	if (*d == '\0')
		return;
	for (i = 0; i < rw->ndomains; i++)
		if (strcasecmp(rw->domains[i], d) == 0)
			return;
	rw->domains = xrealloc(rw->domains, (rw->ndomains + 1) * sizeof *rw->domains);
	rw->domains[rw->ndomains++] = xstrdup(d);
}

int
rewrite_init(struct rewrite *rw, const char *const *map, size_t nmap, const char *def,
    const char *const *domains, size_t ndomains, const char *hostname, struct buf *why)
{
	const char *p, *a, *w;
	size_t i, j, pn, an;
	int kind;

	memset(rw, 0, sizeof *rw);
	rw->hostname = xstrdup(hostname ? hostname : "localhost");
	rw->r = xcalloc(nmap + 1, sizeof *rw->r);
	/* By kind, then in file order: the most specific pattern first. */
	for (kind = 0; kind < RW_KINDS; kind++)
		for (i = 0; i < nmap; i++) {
			if ((w = rewrite_entry_problem(map[i])) != NULL) {
				buf_printf(why, "rewrite_sender \"%s\": %s", map[i], w);
				goto fail;
			}
			(void)split_entry(map[i], &p, &pn, &a, &an, &w);
			if (pattern_kind(p, pn, &w) != kind)
				continue;
			if (kind == RW_DOMAIN)
				p++, pn--;
			for (j = 0; j < rw->n; j++)
				if (rw->r[j].kind == kind && strlen(rw->r[j].pattern) == pn &&
				    strncasecmp(rw->r[j].pattern, p, pn) == 0) {
					buf_printf(why, "rewrite_sender: the pattern \"%s%.*s\" is "
					    "given twice", kind == RW_DOMAIN ? "@" : "", (int)pn, p);
					goto fail;
				}
			rw->r[rw->n].kind = kind;
			rw->r[rw->n].pattern = xstrndup(p, pn);
			rw->r[rw->n++].result = xstrndup(a, an);
		}
	if (def) {
		if ((w = rewrite_address_problem(def, 0)) != NULL) {
			buf_printf(why, "rewrite_default \"%s\": %s", def, w);
			goto fail;
		}
		rw->def = xstrdup(def);
	}
	for (i = 0; i < ndomains; i++) {
		if (addr_domain_problem(domains[i], strlen(domains[i])) != NULL) {
			buf_printf(why, "rewrite_domains: \"%s\" is not a valid domain name",
			    domains[i]);
			goto fail;
		}
		add_domain(rw, domains[i]);
	}
	if (ndomains == 0) {
		if (rw->def)
			add_domain(rw, domain_of(rw->def));
		for (i = 0; i < rw->n; i++)
			add_domain(rw, domain_of(rw->r[i].result));
	}
	return 0;
fail:
	rewrite_free(rw);
	return -1;
}

void
rewrite_free(struct rewrite *rw)
{
	size_t i;

	for (i = 0; i < rw->n; i++) {
		free(rw->r[i].pattern);
		free(rw->r[i].result);
	}
	free(rw->r);
	for (i = 0; i < rw->ndomains; i++)
		free(rw->domains[i]);
	free(rw->domains);
	free(rw->def);
	free(rw->hostname);
	memset(rw, 0, sizeof *rw);
}

int
rewrite_active(const struct rewrite *rw)
{
	return rw->n > 0 || rw->def != NULL;
}

static int
accepted(const struct rewrite *rw, const char *domain)
{
	size_t i;

	for (i = 0; domain && i < rw->ndomains; i++)
		if (strcasecmp(rw->domains[i], domain) == 0)
			return 1;
	return 0;
}

/* The rule for addr (local part local[0..ln), domain or NULL), or NULL. */
static const struct rewrite_rule *
lookup(const struct rewrite *rw, const char *addr, const char *local, size_t ln,
    const char *domain)
{
	int is_local = domain == NULL || strcasecmp(domain, "localhost") == 0 ||
	    strcasecmp(domain, rw->hostname) == 0;
	size_t i;

	for (i = 0; i < rw->n; i++) {
		const struct rewrite_rule *r = &rw->r[i];

		switch (r->kind) {
		case RW_EXACT:
			if (domain && strcasecmp(r->pattern, addr) == 0)
				return r;
			break;
		case RW_LOCAL:
			if (is_local && strlen(r->pattern) == ln &&
			    strncasecmp(r->pattern, local, ln) == 0)
				return r;
			break;
		default:
			if (domain && strcasecmp(r->pattern, domain) == 0)
				return r;
			break;
		}
	}
	return NULL;
}

int
rewrite_address(const struct rewrite *rw, const char *addr, struct buf *out)
{
	const char *at = strrchr(addr, '@'), *domain = at ? at + 1 : NULL;
	size_t ln = at ? (size_t)(at - addr) : strlen(addr);
	const struct rewrite_rule *r;

	buf_reset(out);
	if (addr[0] == '\0' || strcmp(addr, DOUBLE_BOUNCE) == 0)
		return 0;
	if ((r = lookup(rw, addr, addr, ln, domain)) != NULL) {
		if (r->result[0] == '@')
			buf_add(out, addr, ln);
		buf_adds(out, r->result);
	} else if (rw->def && !accepted(rw, domain)) {
		buf_adds(out, rw->def);
	} else {
		return 0;
	}
	if (strcasecmp(buf_cstr(out), addr) == 0) {
		buf_reset(out);
		return 0;
	}
	return 1;
}

/* Where the one address of a From: value is written: inside the first
 * <...> outside quotes and comments, else the first word outside them.
 * 0 and its span; -1 none found. */
static int
address_span(const char *v, size_t len, size_t *off, size_t *alen)
{
	size_t i, lt = 0, depth = 0, start = len;
	int quoted = 0, have_lt = 0;

	for (i = 0; i < len; i++) {
		char c = v[i];

		if (quoted || depth) {
			if (c == '\\')
				i++;
			else if (quoted && c == '"')
				quoted = 0;
			else if (!quoted && c == '(')
				depth++;
			else if (!quoted && c == ')')
				depth--;
			continue;
		}
		if (c == '"')
			quoted = 1;
		else if (c == '(')
			depth++;
		else if (c == '<' && !have_lt)
			have_lt = 1, lt = i + 1;
		else if (c == '>' && have_lt) {
			*off = lt;
			*alen = i - lt;
			return 0;
		}
	}
	if (have_lt)
		return -1;
	/* No angle brackets: the first word outside comments. */
	for (i = 0, depth = 0; i < len; i++) {
		char c = v[i];

		if (depth) {
			if (c == '\\')
				i++;
			else if (c == '(')
				depth++;
			else if (c == ')')
				depth--;
			continue;
		}
		if (c == '(') {
			depth++;
			continue;
		}
		if (blank(c) || c == '\r' || c == '\n')
			continue;
		start = i;
		break;
	}
	if (start == len)
		return -1;
	for (i = start; i < len && !blank(v[i]) && v[i] != '\r' && v[i] != '\n' && v[i] != '(';
	    i++)
		;
	*off = start;
	*alen = i - start;
	return 0;
}

enum rewrite_from
rewrite_from(const struct rewrite *rw, const char *value, size_t len, size_t *off,
    size_t *alen, struct buf *old, struct buf *out, struct buf *why)
{
	struct addrlist l = ADDRLIST_INIT;
	enum rewrite_from rc;

	buf_reset(old);
	buf_reset(out);
	if (addr_parse_list(value, len, NULL, &l, why) < 0)
		return RWF_UNPARSABLE;
	if (l.n != 1) {
		buf_printf(why, "%zu addresses", l.n);
		rc = RWF_SEVERAL;
		goto out;
	}
	buf_adds(old, l.v[0]);
	if (address_span(value, len, off, alen) < 0 || *alen != old->len ||
	    memcmp(value + *off, old->s, old->len) != 0) {
		buf_adds(why, "the address is not written plainly (quoted, with a route, "
		    "or in a group)");
		rc = RWF_ODD_FORM;
		goto out;
	}
	rc = rewrite_address(rw, old->s, out) ? RWF_REWRITTEN : RWF_SAME;
out:
	addrlist_free(&l);
	return rc;
}
