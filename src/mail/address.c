/*
 * address.c: see address.h.  A tokenizer (comments dropped, quoted
 * strings and quoted-pairs resolved, folding removed) feeds a parser that
 * cuts the list at top-level ',' ':' ';' into segments and parses each
 * segment as a mailbox, a group name, or nothing.  Only one segment's
 * tokens are held at a time.  At the end, the checks and the writer of
 * RFC 5321 paths, shared by every program that reads or sends an address.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "lib/alloc.h"
#include "mail/address.h"
#include "mail/envelope.h"

void
addrlist_add(struct addrlist *l, const char *s, size_t len)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 8;
		l->v = xrealloc(l->v, l->cap * sizeof *l->v);
	}
	l->v[l->n++] = xstrndup(s, len);
}

void
addrlist_free(struct addrlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

/* ---- tokenizer ---- */

enum ttype { T_ATOM, T_QSTR, T_DLIT, T_SPEC, T_END };

struct tok {
	enum ttype type;
	char c;			/* T_SPEC: the special */
	size_t start, len;	/* value in the lexer's val buffer */
	size_t pos;		/* input offset, for messages */
};

struct lexer {
	const char *s;
	size_t len, i;
	struct buf val;		/* unquoted token values of the segment */
	struct buf *why;
};

static int
is_atext(unsigned char c)
{
	if (c >= 0x80)
		return 1;	/* RFC 6532 UTF-8 */
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-/=?^_`{|}~", c) != NULL;
}

static int
lex_error(struct lexer *lx, size_t pos, const char *what)
{
	buf_printf(lx->why, "%s at byte %zu", what, pos + 1);
	return -1;
}

/* At a CR or LF: skip a fold (CRLF or LF, then white space).  0 ok. */
static int
lex_fold(struct lexer *lx)
{
	size_t at = lx->i;

	if (lx->s[lx->i] == '\r') {
		lx->i++;
		if (lx->i >= lx->len || lx->s[lx->i] != '\n')
			return lex_error(lx, at, "bare CR");
	}
	lx->i++;
	if (lx->i >= lx->len || (lx->s[lx->i] != ' ' && lx->s[lx->i] != '\t'))
		return lex_error(lx, at, "line break not followed by white space");
	return 0;
}

#define LEX_FOLD	(-1)
#define LEX_ERR		(-2)
#define LEX_EOF		(-3)

/* The byte at lx->i inside a comment or a quoted string (where), whose
 * own delimiters the caller has handled: a quoted-pair (the byte after
 * the backslash, taken literally), a fold (LEX_FOLD: lx->i is left on the
 * line break's last byte, so the caller's loop steps onto the white
 * space, which stays), or a plain byte.  LEX_EOF: a backslash ends the
 * input. */
static int
lex_inner(struct lexer *lx, const char *where)
{
	unsigned char c = (unsigned char)lx->s[lx->i];

	if (c == '\\') {
		if (lx->i + 1 >= lx->len)
			return LEX_EOF;
		c = (unsigned char)lx->s[++lx->i];
		if (c == '\0' || c == '\r' || c == '\n') {
			buf_printf(lx->why, "bad quoted character in %s at byte %zu", where,
			    lx->i + 1);
			return LEX_ERR;
		}
		return c;
	}
	if (c == '\r' || c == '\n') {
		if (lex_fold(lx) < 0)
			return LEX_ERR;
		lx->i--;
		return LEX_FOLD;
	}
	if (c == '\0' || (c < 0x20 && c != '\t') || c == 0x7f) {
		buf_printf(lx->why, "control character in %s at byte %zu", where, lx->i + 1);
		return LEX_ERR;
	}
	return c;
}

static int
lex_comment(struct lexer *lx)
{
	size_t at = lx->i;
	int depth = 0, r;

	for (; lx->i < lx->len; lx->i++) {
		if (lx->s[lx->i] == '(') {
			if (++depth > ADDR_COMMENT_DEPTH)
				return lex_error(lx, lx->i, "comments nested too deeply");
		} else if (lx->s[lx->i] == ')') {
			if (--depth == 0) {
				lx->i++;
				return 0;
			}
		} else if ((r = lex_inner(lx, "comment")) == LEX_ERR) {
			return -1;
		} else if (r == LEX_EOF) {
			break;
		}
	}
	return lex_error(lx, at, "unclosed comment");
}

static int
lex_quoted(struct lexer *lx, struct tok *t)
{
	size_t at = lx->i;
	int r;

	for (lx->i++; lx->i < lx->len; lx->i++) {
		if (lx->s[lx->i] == '"') {
			lx->i++;
			t->len = lx->val.len - t->start;
			return 0;
		}
		r = lex_inner(lx, "quoted string");
		if (r == LEX_ERR)
			return -1;
		if (r == LEX_EOF)
			break;
		if (r != LEX_FOLD)
			buf_addc(&lx->val, (char)r);
	}
	return lex_error(lx, at, "unclosed quoted string");
}

static int
lex_dlit(struct lexer *lx, struct tok *t)
{
	size_t at = lx->i;
	unsigned char c;

	buf_addc(&lx->val, '[');
	for (lx->i++; lx->i < lx->len; lx->i++) {
		c = (unsigned char)lx->s[lx->i];
		if (c == ']') {
			lx->i++;
			buf_addc(&lx->val, ']');
			t->len = lx->val.len - t->start;
			return 0;
		}
		if (c == ' ' || c == '\t')
			continue;
		if (c < 33 || c > 126 || c == '[' || c == '\\')
			return lex_error(lx, lx->i, "bad character in domain literal");
		buf_addc(&lx->val, (char)c);
	}
	return lex_error(lx, at, "unclosed domain literal");
}

/* Next token into t (T_END at the end).  0 ok, -1 error. */
static int
lex_next(struct lexer *lx, struct tok *t)
{
	unsigned char c;

	for (;;) {
		if (lx->i >= lx->len) {
			t->type = T_END;
			t->pos = lx->len;
			t->start = t->len = 0;
			return 0;
		}
		c = (unsigned char)lx->s[lx->i];
		if (c == ' ' || c == '\t') {
			lx->i++;
		} else if (c == '\r' || c == '\n') {
			if (lex_fold(lx) < 0)
				return -1;
		} else if (c == '(') {
			if (lex_comment(lx) < 0)
				return -1;
		} else {
			break;
		}
	}
	t->pos = lx->i;
	t->start = lx->val.len;
	t->len = 0;
	t->c = (char)c;
	if (c == '"') {
		t->type = T_QSTR;
		return lex_quoted(lx, t);
	}
	if (c == '[') {
		t->type = T_DLIT;
		return lex_dlit(lx, t);
	}
	if (c != 0 && strchr("<>@,;:.", c)) {
		t->type = T_SPEC;
		lx->i++;
		return 0;
	}
	if (is_atext(c)) {
		t->type = T_ATOM;
		while (lx->i < lx->len && is_atext((unsigned char)lx->s[lx->i]))
			buf_addc(&lx->val, lx->s[lx->i++]);
		t->len = lx->val.len - t->start;
		return 0;
	}
	if (c == ')' || c == ']' || c == '\\')
		buf_printf(lx->why, "unexpected '%c' at byte %zu", c, lx->i + 1);
	else if (c < 0x20 || c == 0x7f)
		buf_printf(lx->why, "control character at byte %zu", lx->i + 1);
	else
		buf_printf(lx->why, "unexpected '%c' at byte %zu", c, lx->i + 1);
	return -1;
}

/* ---- parser ---- */

struct seg {
	struct tok *t;
	size_t n, cap;
};

struct parser {
	struct lexer lx;
	struct seg seg;
	const char *defdomain;
	struct buf addr;	/* the address being built */
	struct buf *why;
};

static int
is_spec(const struct tok *t, char c)
{
	return t->type == T_SPEC && t->c == c;
}

static const char *
tok_val(const struct parser *p, const struct tok *t)
{
	return p->lx.val.s ? p->lx.val.s + t->start : "";
}

static int
parse_error(struct parser *p, const struct tok *t, const char *what)
{
	if (t->type == T_END)
		buf_printf(p->why, "%s at the end", what);
	else
		buf_printf(p->why, "%s at byte %zu", what, t->pos + 1);
	return -1;
}

/* A phrase (display name or group name): words and dots only. */
static int
check_phrase(struct parser *p, size_t a, size_t b, const char *what)
{
	size_t i;

	for (i = a; i < b; i++) {
		const struct tok *t = &p->seg.t[i];

		if (t->type == T_ATOM || t->type == T_QSTR || is_spec(t, '.'))
			continue;
		buf_printf(p->why, "%s: unexpected ", what);
		if (t->type == T_SPEC)
			buf_printf(p->why, "'%c'", t->c);
		else
			buf_adds(p->why, "domain literal");
		buf_printf(p->why, " at byte %zu (quote the name)", t->pos + 1);
		return -1;
	}
	return 0;
}

static int
domain_atom_ok(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!(c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return 0;
	}
	return 1;
}

/* word *("." word) from t[*ip], appended to p->addr.  The local part
 * takes atoms and quoted strings; a domain takes atoms of domain_atom_ok()
 * characters.  0 ok, -1 error. */
static int
parse_dotted(struct parser *p, size_t *ip, size_t b, int domain)
{
	static const struct tok end = { T_END, 0, 0, 0, 0 };
	struct tok *t = p->seg.t;
	size_t i = *ip;

	for (;;) {
		if (i >= b || !(t[i].type == T_ATOM || (!domain && t[i].type == T_QSTR)))
			return parse_error(p, i < b ? &t[i] : &end, domain ?
			    "expected a domain name" : "expected a word of the local part");
		if (domain && !domain_atom_ok(tok_val(p, &t[i]), t[i].len))
			return parse_error(p, &t[i], "invalid character in domain");
		buf_add(&p->addr, tok_val(p, &t[i]), t[i].len);
		i++;
		if (i >= b || !is_spec(&t[i], '.'))
			break;
		buf_addc(&p->addr, '.');
		i++;
	}
	*ip = i;
	return 0;
}

/* addr-spec in tokens [a, b): local-part ["@" domain].  Appends the
 * internal form to out. */
static int
parse_addr_spec(struct parser *p, size_t a, size_t b, struct addrlist *out)
{
	struct tok *t = p->seg.t;
	size_t i = a;

	buf_reset(&p->addr);
	if (parse_dotted(p, &i, b, 0) < 0)
		return -1;
	if (p->addr.len == 0)
		return parse_error(p, &t[a], "empty local part");
	if (i < b && is_spec(&t[i], '@')) {
		size_t dom = p->addr.len + 1;
		const char *w;

		i++;
		buf_addc(&p->addr, '@');
		if (i < b && t[i].type == T_DLIT) {
			buf_add(&p->addr, tok_val(p, &t[i]), t[i].len);
			i++;
		} else if (parse_dotted(p, &i, b, 1) < 0) {
			return -1;
		}
		if ((w = addr_domain_problem(p->addr.s + dom, p->addr.len - dom)) != NULL) {
			buf_printf(p->why, "%s: \"%.*s\"", w, (int)(p->addr.len - dom),
			    p->addr.s + dom);
			return -1;
		}
	} else if (p->defdomain) {
		buf_printf(&p->addr, "@%s", p->defdomain);
	}
	if (i < b) {
		if (t[i].type == T_ATOM || t[i].type == T_QSTR)
			return parse_error(p, &t[i],
			    "expected an address, found a name (use Name <address>)");
		return parse_error(p, &t[i], "unexpected text after the address");
	}
	addrlist_add(out, p->addr.s, p->addr.len);
	return 0;
}

/* Skip an obsolete route "@a,@b:" in [i, b); returns the index after it. */
static int
skip_route(struct parser *p, size_t *ip, size_t b)
{
	struct tok *t = p->seg.t;
	size_t i = *ip;

	while (i < b && is_spec(&t[i], '@')) {
		i++;
		if (i < b && t[i].type == T_DLIT) {
			i++;
		} else {
			while (i < b && t[i].type == T_ATOM) {
				i++;
				if (i < b && is_spec(&t[i], '.'))
					i++;
				else
					break;
			}
		}
		if (i < b && is_spec(&t[i], ','))
			i++;
		else if (i < b && is_spec(&t[i], ':')) {
			*ip = i + 1;
			return 0;
		} else
			return parse_error(p, i < b ? &t[i] : &t[b - 1], "malformed route");
	}
	*ip = i;
	return 0;
}

/* One list element: empty, addr-spec, or [phrase] "<" [route] addr-spec ">". */
static int
parse_mailbox(struct parser *p, struct addrlist *out)
{
	struct tok *t = p->seg.t;
	size_t n = p->seg.n, lt, gt, i;

	if (n == 0)
		return 0;
	for (lt = 0; lt < n && !is_spec(&t[lt], '<'); lt++)
		;
	if (lt == n)
		return parse_addr_spec(p, 0, n, out);
	if (check_phrase(p, 0, lt, "display name") < 0)
		return -1;
	for (gt = lt + 1; gt < n && !is_spec(&t[gt], '>'); gt++)
		;
	if (gt == n)
		return parse_error(p, &t[lt], "unclosed '<'");
	if (gt + 1 != n)
		return parse_error(p, &t[gt + 1], "unexpected text after '>'");
	if (gt == lt + 1)
		return parse_error(p, &t[lt], "empty address <>");
	i = lt + 1;
	if (skip_route(p, &i, gt) < 0)
		return -1;
	return parse_addr_spec(p, i, gt, out);
}

static void
seg_push(struct seg *s, const struct tok *t)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->t = xrealloc(s->t, s->cap * sizeof *s->t);
	}
	s->t[s->n++] = *t;
}

/* The list grammar.  max_one: command-line mode, one mailbox only. */
static int
parse_list(struct parser *p, struct addrlist *out, int max_one)
{
	struct tok t;
	int angle = 0, in_group = 0, after_semi = 0;

	for (;;) {
		if (lex_next(&p->lx, &t) < 0)
			return -1;
		if (after_semi) {
			if (t.type != T_END && !is_spec(&t, ','))
				return parse_error(p, &t, "expected ',' after the group's ';'");
			after_semi = 0;
			if (t.type == T_END)
				return 0;
			continue;
		}
		if (is_spec(&t, '<')) {
			if (angle)
				return parse_error(p, &t, "'<' inside '<...>'");
			angle = 1;
		} else if (is_spec(&t, '>')) {
			if (!angle)
				return parse_error(p, &t, "'>' without '<'");
			angle = 0;
		} else if (!angle && t.type == T_SPEC && strchr(",;:", t.c)) {
			if (max_one && t.c == ',')
				return parse_error(p, &t, "one address only, found ','");
			if (max_one)
				return parse_error(p, &t, "one address only, found a group");
			if (t.c == ':') {
				if (in_group)
					return parse_error(p, &t, "':' inside a group (groups do not nest)");
				if (p->seg.n == 0)
					return parse_error(p, &t, "group without a name before ':'");
				if (check_phrase(p, 0, p->seg.n, "group name") < 0)
					return -1;
				in_group = 1;
			} else {
				if (t.c == ';' && !in_group)
					return parse_error(p, &t, "';' outside a group");
				if (parse_mailbox(p, out) < 0)
					return -1;
				if (t.c == ';') {
					in_group = 0;
					after_semi = 1;
				}
			}
			p->seg.n = 0;
			buf_reset(&p->lx.val);
			continue;
		} else if (t.type == T_END) {
			if (angle)
				return parse_error(p, &t, "unclosed '<'");
			if (in_group)
				return parse_error(p, &t, "group not closed with ';'");
			return parse_mailbox(p, out);
		}
		if (p->seg.n >= ADDR_LIST_MAX)
			return parse_error(p, &t, "address too long");
		seg_push(&p->seg, &t);
	}
}

static int
run_parser(const char *s, size_t len, const char *defdomain, struct addrlist *out,
    struct buf *why, int max_one)
{
	struct parser p;
	int rc;

	if (len > ADDR_LIST_MAX) {
		buf_printf(why, "address list longer than %d bytes", ADDR_LIST_MAX);
		return -1;
	}
	memset(&p, 0, sizeof p);
	p.lx.s = s;
	p.lx.len = len;
	p.lx.why = why;
	p.why = why;
	p.defdomain = defdomain;
	rc = parse_list(&p, out, max_one);
	buf_free(&p.lx.val);
	buf_free(&p.addr);
	free(p.seg.t);
	return rc;
}

int
addr_parse_list(const char *s, size_t len, const char *defdomain,
    struct addrlist *out, struct buf *why)
{
	struct addrlist got = ADDRLIST_INIT;
	size_t i;

	if (run_parser(s, len, defdomain, &got, why, 0) < 0) {
		addrlist_free(&got);
		return -1;
	}
	for (i = 0; i < got.n; i++) {
		if (out->n == out->cap) {
			out->cap = out->cap ? out->cap * 2 : 8;
			out->v = xrealloc(out->v, out->cap * sizeof *out->v);
		}
		out->v[out->n++] = got.v[i];
	}
	free(got.v);
	return 0;
}

int
addr_parse_one(const char *s, int allow_empty, const char *defdomain,
    struct buf *out, struct buf *why)
{
	struct addrlist got = ADDRLIST_INIT;
	size_t len = strlen(s);
	int rc = -1;

	buf_reset(out);
	if (allow_empty && (len == 0 || strcmp(s, "<>") == 0))
		return 0;
	if (run_parser(s, len, defdomain, &got, why, 1) < 0)
		goto out;
	if (got.n != 1) {
		buf_adds(why, allow_empty ? "empty address (use <> for the null sender)"
					  : "empty address");
		goto out;
	}
	buf_adds(out, got.v[0]);
	rc = 0;
out:
	addrlist_free(&got);
	return rc;
}

/* ---- RFC 5321 paths ---- */

#define DOMAIN_MAX	255

const char *
addr_domain_problem(const char *s, size_t n)
{
	char lit[64];
	size_t i, label = 0;

	if (n == 0)
		return "empty domain";
	if (n > DOMAIN_MAX)
		return "domain longer than 255 bytes";
	if (s[0] == '[') {
		if (n < 2 || s[n - 1] != ']' || n - 2 >= sizeof lit)
			return "invalid address literal";
		memcpy(lit, s + 1, n - 2);
		lit[n - 2] = '\0';
		if (strlen(lit) != n - 2)
			return "invalid address literal";
		if (strncasecmp(lit, "IPv6:", 5) == 0) {
			unsigned char a6[16];

			if (inet_pton(AF_INET6, lit + 5, a6) != 1)
				return "invalid IPv6 address literal";
		} else {
			unsigned char a4[4];

			if (inet_pton(AF_INET, lit, a4) != 1)
				return "invalid address literal";
		}
		return NULL;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '.') {
			if (label == 0)
				return "empty label in the domain";
			if (s[i - 1] == '-')
				return "a domain label ends with '-'";
			label = 0;
			continue;
		}
		if (c == '-' && label == 0)
			return "a domain label starts with '-'";
		if (c == '%' || c == '!' || c == '@')
			return "relay syntax in the domain is not accepted";
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-'))
			return "invalid character in the domain";
		if (++label > 63)
			return "domain label longer than 63 bytes";
	}
	if (label == 0)
		return "domain ends with a dot";
	if (s[n - 1] == '-')
		return "a domain label ends with '-'";
	return NULL;
}

/* Is s[0..n) a dot-string (RFC 5321: atoms of atext joined by single dots)? */
static int
is_dot_string(const char *s, size_t n)
{
	size_t i;
	int atom = 0;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '.') {
			if (!atom)
				return 0;
			atom = 0;
		} else if (c < 0x80 && is_atext(c)) {
			atom = 1;
		} else {
			return 0;
		}
	}
	return atom;
}

/* The local part's length: up to the last '@', or all of it. */
static size_t
local_len(const char *addr, size_t len)
{
	size_t i;

	for (i = len; i > 0; i--)
		if (addr[i - 1] == '@')
			return i - 1;
	return len;
}

/* qmail's sender of double bounces, passed on as it is (qmail-remote
 * does the same). */
#define DOUBLE_BOUNCE "#@[]"

const char *
addr_path_problem(const char *addr, size_t len)
{
	const char *why;
	size_t l;

	if (len == 0 || (len == 4 && memcmp(addr, DOUBLE_BOUNCE, 4) == 0))
		return NULL;
	if ((why = envelope_addr_problem(addr, len)) != NULL)
		return why;	/* a control byte, or over 1002 bytes */
	l = local_len(addr, len);
	if (l == 0)
		return "empty local part";
	if (l == len)
		return NULL;
	return addr_domain_problem(addr + l + 1, len - l - 1);
}

int
addr_write_path(struct buf *out, const char *addr, size_t len, const char **why)
{
	size_t i, l;

	if ((*why = addr_path_problem(addr, len)) != NULL)
		return -1;
	buf_addc(out, '<');
	l = local_len(addr, len);
	if (len == 4 && memcmp(addr, DOUBLE_BOUNCE, 4) == 0) {
		buf_add(out, addr, len);
		l = len;
	} else if (len == 0 || is_dot_string(addr, l)) {
		buf_add(out, addr, l);
	} else {
		buf_addc(out, '"');
		for (i = 0; i < l; i++) {
			if (addr[i] == '"' || addr[i] == '\\')
				buf_addc(out, '\\');
			buf_addc(out, addr[i]);
		}
		buf_addc(out, '"');
	}
	buf_add(out, addr + l, len - l);
	buf_addc(out, '>');
	return 0;
}
