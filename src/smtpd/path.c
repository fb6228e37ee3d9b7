/*
 * path.c: see path.h.  The domain check is the shared one in
 * mail/address.c.
 */
#include <string.h>
#include <strings.h>

#include "mail/address.h"
#include "smtpd/path.h"

#define LOCAL_MAX	64
#define PATH_MAX_LEN	256

/* RFC 5322 atext without '%' and '!' (relay tricks, checked apart). */
static int
is_atext(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("#$&'*+-/=?^_`{|}~", c) != NULL;
}

/* Is s[0..n) a dot-string of is_atext atoms?  NULL yes, else why. */
static const char *
dot_string_problem(const char *s, size_t n)
{
	size_t i;
	int atom = 0;

	if (n == 0)
		return "empty local part";
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%')
			return "'%' in a local part (the % relay hack) is not accepted";
		if (c == '!')
			return "'!' in a local part (bang path) is not accepted";
		if (c == '@')
			return "'@' inside a local part is not accepted";
		if (c == '.') {
			if (!atom)
				return "empty part between dots in the local part";
			atom = 0;
			continue;
		}
		if (c >= 0x80)
			return "8-bit local parts (SMTPUTF8) are not supported";
		if (!is_atext(c))
			return "invalid character in the local part";
		atom = 1;
	}
	if (!atom)
		return "local part ends with a dot";
	return NULL;
}

int
smtp_path_parse(const char *s, int flags, struct buf *out, size_t *used,
    const char **why)
{
	const char *p, *at;
	size_t n;

	buf_reset(out);
	if (s[0] != '<') {
		*why = "the address must be in <>";
		return -1;
	}
	if (s[1] == '>') {
		if (!(flags & PATH_NULL_OK)) {
			*why = "the null address is not allowed here";
			return -1;
		}
		*used = 2;
		return 0;
	}
	if (s[1] == '@') {
		*why = "source routes are not accepted";
		return -1;
	}
	p = s + 1;
	if (*p == '"') {
		/* Quoted: unquote, then it must be what a dot-string says. */
		for (p++; *p != '"'; p++) {
			if (*p == '\\') {
				p++;
				if ((unsigned char)*p < 32 || (unsigned char)*p > 126) {
					*why = "invalid quoted pair in the local part";
					return -1;
				}
			} else if ((unsigned char)*p < 32 || (unsigned char)*p > 126) {
				*why = "invalid character in the quoted local part";
				return -1;
			}
			buf_addc(out, *p);
			if (out->len > LOCAL_MAX) {
				*why = "local part longer than 64 bytes";
				return -1;
			}
		}
		p++;
		if ((*why = dot_string_problem(out->s ? out->s : "", out->len)) != NULL)
			return -1;
		if (*p != '@') {
			*why = (flags & PATH_POSTMASTER) ? "a quoted postmaster needs a domain"
			    : "the address needs a domain";
			return -1;
		}
		at = p;
	} else {
		at = p + strcspn(p, "@>");
		if (*at == '\0') {
			*why = "missing '>'";
			return -1;
		}
		n = (size_t)(at - p);
		if (n > LOCAL_MAX) {
			*why = "local part longer than 64 bytes";
			return -1;
		}
		if ((*why = dot_string_problem(p, n)) != NULL)
			return -1;
		buf_add(out, p, n);
		if (*at == '>') {
			if ((flags & PATH_POSTMASTER) && strcasecmp(out->s, "postmaster") == 0) {
				*used = (size_t)(at + 1 - s);
				return 0;
			}
			*why = "the address needs a domain";
			return -1;
		}
	}
	/* at points at '@'. */
	p = at + 1;
	n = strcspn(p, ">");
	if (p[n] != '>') {
		*why = "missing '>'";
		return -1;
	}
	if ((*why = addr_domain_problem(p, n)) != NULL)
		return -1;
	buf_addc(out, '@');
	buf_add(out, p, n);
	if (out->len + 2 > PATH_MAX_LEN) {
		*why = "address longer than 256 bytes";
		return -1;
	}
	*used = (size_t)(p + n + 1 - s);
	return 0;
}
