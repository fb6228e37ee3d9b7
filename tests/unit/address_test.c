/*
 * address_test.c: the RFC 5322 address-list parser and the command-line
 * address parser (src/mail/address.c): good lists in their many shapes,
 * malformed lists with the reason given, and hostile input (deep
 * nesting, huge lists, every byte value) that must end in bounded time
 * without a crash.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/address.h"

/* Parse s (defdomain "dflt.example"); expect the addresses joined by '|'. */
static void
ok(const char *s, const char *want)
{
	struct addrlist l = ADDRLIST_INIT;
	struct buf why = BUF_INIT, got = BUF_INIT;
	size_t i;

	cr_assert_eq(addr_parse_list(s, strlen(s), "dflt.example", &l, &why), 0,
	    "\"%s\": %s", s, buf_cstr(&why));
	for (i = 0; i < l.n; i++) {
		if (i)
			buf_addc(&got, '|');
		buf_adds(&got, l.v[i]);
	}
	cr_assert_str_eq(buf_cstr(&got), want, "\"%s\"", s);
	addrlist_free(&l);
	buf_free(&why);
	buf_free(&got);
}

/* Expect an error whose text contains what; the list stays unchanged. */
static void
bad(const char *s, size_t len, const char *what)
{
	struct addrlist l = ADDRLIST_INIT;
	struct buf why = BUF_INIT;

	addrlist_add(&l, "keep@me", 7);
	cr_assert_eq(addr_parse_list(s, len, "dflt.example", &l, &why), -1,
	    "\"%.*s\" accepted", (int)len, s);
	cr_assert(strstr(buf_cstr(&why), what), "\"%.*s\": error \"%s\" lacks \"%s\"",
	    (int)len, s, why.s, what);
	cr_assert_eq(l.n, 1u);
	cr_assert_str_eq(l.v[0], "keep@me");
	addrlist_free(&l);
	buf_free(&why);
}

#define BAD(s, what) bad(s, strlen(s), what)

Test(address, simple_forms)
{
	ok("a@b.example", "a@b.example");
	ok("  a@b.example  ", "a@b.example");
	ok("a@b.example, c@d.example", "a@b.example|c@d.example");
	ok("a@b.example,c@d.example,e@f.example", "a@b.example|c@d.example|e@f.example");
	ok("first.last+tag@sub.b.example", "first.last+tag@sub.b.example");
	ok("!#$%&'*+-/=?^_`{|}~@b.example", "!#$%&'*+-/=?^_`{|}~@b.example");
	ok("a@[192.0.2.1]", "a@[192.0.2.1]");
	ok("a@[IPv6:2001:db8::1]", "a@[IPv6:2001:db8::1]");
}

Test(address, names_and_angles)
{
	ok("Bob <bob@b.example>", "bob@b.example");
	ok("Bob Smith<bob@b.example>", "bob@b.example");
	ok("<bob@b.example>", "bob@b.example");
	ok("\"Smith, Bob\" <bob@b.example>", "bob@b.example");
	ok("\"Smith, Bob\" <bob@b.example>, \"a;b:c<d>\" <c@d.example>",
	    "bob@b.example|c@d.example");
	ok("John Q. Public <jqp@b.example>", "jqp@b.example");
	ok("\"quote \\\" inside\" <q@b.example>", "q@b.example");
	ok("=?UTF-8?Q?J=C3=B6rg?= <j@b.example>", "j@b.example");
	ok("J\xc3\xb6rg <j@b.example>", "j@b.example");
	ok("< bob @ b.example >", "bob@b.example");
}

Test(address, comments)
{
	ok("a@b.example (comment)", "a@b.example");
	ok("(lead) a@b.example", "a@b.example");
	ok("a(in)@(side)b.example", "a@b.example");
	ok("a@b.example (nested (deeper (deepest)) comment)", "a@b.example");
	ok("a@b.example (with \\) escaped paren)", "a@b.example");
	ok("a@b.example (comma, inside; colon: <angle>)", "a@b.example");
	ok("Bob (the builder) <bob@b.example> (work)", "bob@b.example");
	ok("(only a comment)", "");
}

Test(address, groups)
{
	ok("undisclosed-recipients:;", "");
	ok("undisclosed-recipients: ;", "");
	ok("team: a@b.example, c@d.example;", "a@b.example|c@d.example");
	ok("team: a@b.example, Cee <c@d.example>;, e@f.example",
	    "a@b.example|c@d.example|e@f.example");
	ok("x@y.example, team: a@b.example;", "x@y.example|a@b.example");
	ok("\"The Team\": a@b.example;", "a@b.example");
	ok("one:;, two: t@w.example;", "t@w.example");
	ok("team: a@b.example,;", "a@b.example");
}

Test(address, quoted_local_parts)
{
	ok("\"john doe\"@b.example", "john doe@b.example");
	ok("\"a,b\"@b.example", "a,b@b.example");
	ok("\"a\\\"b\"@b.example", "a\"b@b.example");
	ok("Name <\"x y\"@b.example>", "x y@b.example");
	ok("first.\"mid dle\".last@b.example", "first.mid dle.last@b.example");
}

Test(address, folding)
{
	ok("a@b.example,\n c@d.example", "a@b.example|c@d.example");
	ok("a@b.example,\r\n\tc@d.example", "a@b.example|c@d.example");
	ok("\"folded\n name\" <a@b.example>", "a@b.example");
	ok("Bob\n <bob@b.example>", "bob@b.example");
	ok("a@b.example (folded\n comment)", "a@b.example");
	ok("\"fold\r\n ed\"@b.example", "fold ed@b.example");
}

Test(address, empty_elements_and_bare_names)
{
	ok("", "");
	ok("   ", "");
	ok("a@b.example,,c@d.example", "a@b.example|c@d.example");
	ok(", a@b.example ,", "a@b.example");
	ok("root", "root@dflt.example");
	ok("root, Admin <admin>", "root@dflt.example|admin@dflt.example");
	ok("first.last", "first.last@dflt.example");
}

Test(address, obsolete_route)
{
	ok("<@relay.example:a@b.example>", "a@b.example");
	ok("Name <@r1.example,@r2.example:a@b.example>", "a@b.example");
}

Test(address, no_default_domain)
{
	struct addrlist l = ADDRLIST_INIT;
	struct buf why = BUF_INIT;

	cr_assert_eq(addr_parse_list("root, a@b", 9, NULL, &l, &why), 0);
	cr_assert_eq(l.n, 2u);
	cr_assert_str_eq(l.v[0], "root");
	cr_assert_str_eq(l.v[1], "a@b");
	addrlist_free(&l);
	buf_free(&why);
}

Test(address, malformed)
{
	BAD("a@", "expected a domain name");
	BAD("@b.example", "expected a word of the local part");
	BAD("a@@b.example", "expected a domain name");
	BAD("a@b@c.example", "unexpected text after the address");
	BAD("a.@b.example", "expected a word of the local part");
	BAD(".a@b.example", "expected a word of the local part");
	BAD("a..b@c.example", "expected a word of the local part");
	BAD("a@b..example", "expected a domain name");
	BAD("a@b.example.", "expected a domain name");
	BAD("John Smith", "found a name");
	BAD("John Smith a@b.example", "found a name");
	BAD("<a@b.example", "unclosed '<'");
	BAD("a@b.example>", "'>' without '<'");
	BAD("<<a@b.example>>", "'<' inside '<...>'");
	BAD("<>", "empty address <>");
	BAD("Bob <bob@b.example> trailing", "unexpected text after '>'");
	BAD("Bob <bob@b.example> <again@b.example>", "unexpected text after '>'");
	BAD("\"unclosed@b.example", "unclosed quoted string");
	BAD("a@b.example (unclosed", "unclosed comment");
	BAD("a@b.example (a (b)", "unclosed comment");
	BAD("a@b.example)", "unexpected ')'");
	BAD("a@[1.2.3.4", "unclosed domain literal");
	BAD("a@[1.2[3]", "bad character in domain literal");
	BAD("a]@b", "unexpected ']'");
	BAD("a\\b@c", "unexpected '\\'");
	BAD("team: a@b.example", "group not closed with ';'");
	BAD("a@b.example;", "';' outside a group");
	BAD("t1: t2: a@b;;", "groups do not nest");
	BAD(": a@b;", "group without a name");
	BAD("team: a@b; c@d", "expected ',' after the group's ';'");
	BAD("a@b.example: x;", "group name");
	BAD("bob@b.example <bob@b.example>", "display name");
	BAD("a@b!c.example", "invalid character in domain");
	BAD("\"\"@b.example", "empty local part");
	BAD("a@b.example,\nc@d.example", "line break not followed by white space");
	BAD("a@b.example\r c@d", "bare CR");
	BAD("a@b.example\n", "line break not followed by white space");
	BAD("a\x01@b.example", "control character");
	BAD("\"a\x01\"@b.example", "control character in quoted string");
	BAD("a@b.example (\x7f)", "control character in comment");
	bad("a\0b@c.example", 12, "control character");
	bad("\"a\0\"@c.example", 14, "control character in quoted string");
	BAD("\"a\\", "unclosed quoted string");
}

Test(address, error_says_where)
{
	struct addrlist l = ADDRLIST_INIT;
	struct buf why = BUF_INIT;

	cr_assert_eq(addr_parse_list("ok@b.example, x@@y", 18, NULL, &l, &why), -1);
	cr_assert_str_eq(buf_cstr(&why), "expected a domain name at byte 17");
	buf_free(&why);
	addrlist_free(&l);
}

Test(address, hostile_nesting_and_size)
{
	struct buf s = BUF_INIT;
	size_t i;

	/* Comments nested deeper than the limit: refused, not recursed. */
	buf_adds(&s, "a@b.example ");
	for (i = 0; i < 100000; i++)
		buf_addc(&s, '(');
	for (i = 0; i < 100000; i++)
		buf_addc(&s, ')');
	bad(s.s, s.len, "comments nested too deeply");
	/* At the limit: fine. */
	buf_reset(&s);
	buf_adds(&s, "a@b.example ");
	for (i = 0; i < ADDR_COMMENT_DEPTH; i++)
		buf_addc(&s, '(');
	for (i = 0; i < ADDR_COMMENT_DEPTH; i++)
		buf_addc(&s, ')');
	ok(s.s, "a@b.example");
	/* Over the size limit: refused at once. */
	buf_reset(&s);
	for (i = 0; i <= ADDR_LIST_MAX; i++)
		buf_addc(&s, ',');
	bad(s.s, s.len, "longer than");
	/* Just under it: a million empty elements, parsed in linear time. */
	buf_reset(&s);
	for (i = 0; i < ADDR_LIST_MAX; i++)
		buf_addc(&s, ',');
	ok(s.s, "");
	/* Many addresses. */
	buf_reset(&s);
	for (i = 0; i < 50000; i++)
		buf_printf(&s, "%sn%zu@b.example", i ? "," : "", i);
	{
		struct addrlist l = ADDRLIST_INIT;
		struct buf why = BUF_INIT;

		cr_assert_eq(addr_parse_list(s.s, s.len, NULL, &l, &why), 0, "%s", why.s);
		cr_assert_eq(l.n, 50000u);
		cr_assert_str_eq(l.v[49999], "n49999@b.example");
		addrlist_free(&l);
		buf_free(&why);
	}
	/* One huge unclosed angle and quote. */
	buf_reset(&s);
	buf_addc(&s, '<');
	for (i = 0; i < 500000; i++)
		buf_adds(&s, "a.");
	bad(s.s, s.len, "");
	buf_free(&s);
}

Test(address, every_byte_no_crash)
{
	char in[8];
	struct addrlist l = ADDRLIST_INIT;
	struct buf why = BUF_INIT;
	unsigned a, b;

	/* Every pair of bytes in a few positions: parse or refuse, never crash. */
	for (a = 0; a < 256; a++)
		for (b = 0; b < 256; b++) {
			in[0] = (char)a;
			in[1] = 'x';
			in[2] = (char)b;
			in[3] = '@';
			in[4] = (char)a;
			in[5] = 'y';
			in[6] = (char)b;
			buf_reset(&why);
			if (addr_parse_list(in, 7, "d", &l, &why) < 0)
				cr_assert(why.len > 0, "no reason for %02x %02x", a, b);
		}
	addrlist_free(&l);
	buf_free(&why);
}

/* ---- addr_parse_one ---- */

static void
one_ok(const char *s, int allow_empty, const char *want)
{
	struct buf out = BUF_INIT, why = BUF_INIT;

	cr_assert_eq(addr_parse_one(s, allow_empty, "dflt.example", &out, &why), 0,
	    "\"%s\": %s", s, buf_cstr(&why));
	cr_assert_str_eq(buf_cstr(&out), want, "\"%s\"", s);
	buf_free(&out);
	buf_free(&why);
}

static void
one_bad(const char *s, int allow_empty, const char *what)
{
	struct buf out = BUF_INIT, why = BUF_INIT;

	cr_assert_eq(addr_parse_one(s, allow_empty, "dflt.example", &out, &why), -1,
	    "\"%s\" accepted", s);
	cr_assert(strstr(buf_cstr(&why), what), "\"%s\": \"%s\" lacks \"%s\"", s, why.s, what);
	buf_free(&out);
	buf_free(&why);
}

Test(address, one)
{
	one_ok("a@b.example", 0, "a@b.example");
	one_ok("<a@b.example>", 0, "a@b.example");
	one_ok("Name <a@b.example>", 0, "a@b.example");
	one_ok("a@b.example (comment)", 0, "a@b.example");
	one_ok("root", 0, "root@dflt.example");
	one_ok("<root>", 0, "root@dflt.example");
	one_ok("\"x y\"@b.example", 0, "x y@b.example");
	one_ok("", 1, "");
	one_ok("<>", 1, "");
	one_ok("-odd@b.example", 0, "-odd@b.example");
}

Test(address, one_refusals)
{
	one_bad("", 0, "empty address");
	one_bad("<>", 0, "empty address <>");
	one_bad("(just a comment)", 1, "use <> for the null sender");
	one_bad("a@b.example, c@d.example", 0, "one address only, found ','");
	one_bad("team: a@b.example;", 0, "one address only, found a group");
	one_bad("undisclosed-recipients:;", 0, "found a group");
	one_bad("a@b@c", 0, "unexpected text");
	one_bad("a b", 1, "found a name");
	one_bad("a@b.example\n", 0, "line break");
}

/* Domains: one rule for every program (RFC 5321 LDH labels or a literal). */
Test(address, invalid_domains_refused)
{
	BAD("a@under_score.example", "invalid character in the domain");
	BAD("a@-lead.example", "label starts with '-'");
	BAD("a@trail-.example", "label ends with '-'");
	BAD("a@b.\xc3\xa9xample", "invalid character in the domain");
	BAD("a@[300.1.1.1]", "invalid address literal");
	BAD("a@[IPv6:zz]", "invalid IPv6 address literal");
	BAD("Name <a@x.example.>", "expected a domain name");
	BAD("a@b.example> NOTIFY=NEVER", "'>' without '<'");
	BAD("\"a@b.example> NOTIFY=NEVER", "unclosed quoted string");
}

static void
path_is(const char *addr, const char *want)
{
	struct buf out = BUF_INIT;
	const char *why = NULL;

	cr_assert_eq(addr_write_path(&out, addr, strlen(addr), &why), 0, "%s: %s", addr, why);
	cr_assert_str_eq(buf_cstr(&out), want, "%s", addr);
	cr_assert_null(addr_path_problem(addr, strlen(addr)));
	buf_free(&out);
}

static void
path_bad(const char *addr, const char *what)
{
	struct buf out = BUF_INIT;
	const char *why = NULL;

	buf_adds(&out, "x");
	cr_assert_eq(addr_write_path(&out, addr, strlen(addr), &why), -1, "%s written", addr);
	cr_assert(why && strstr(why, what), "%s: \"%s\" lacks \"%s\"", addr, why, what);
	cr_assert_str_eq(buf_cstr(&out), "x");
	cr_assert_not_null(addr_path_problem(addr, strlen(addr)));
	buf_free(&out);
}

/* The paths qmail-remote writes; nothing can escape "<...>". */
Test(address, write_path)
{
	path_is("", "<>");
	path_is("a@b.example", "<a@b.example>");
	path_is("first.last+tag@b.example", "<first.last+tag@b.example>");
	path_is("!#$%&'*+-/=?^_`{|}~@b.example", "<!#$%&'*+-/=?^_`{|}~@b.example>");
	path_is("root", "<root>");
	path_is("a b@x.example", "<\"a b\"@x.example>");
	path_is("john doe@remote.example", "<\"john doe\"@remote.example>");
	path_is("a\"b@x.example", "<\"a\\\"b\"@x.example>");
	path_is("x\\y@x.example", "<\"x\\\\y\"@x.example>");
	path_is("a@b@c.example", "<\"a@b\"@c.example>");
	path_is(".a@x.example", "<\".a\"@x.example>");
	path_is("a..b@x.example", "<\"a..b\"@x.example>");
	path_is("a.@x.example", "<\"a.\"@x.example>");
	path_is("\xc3\xa9@x.example", "<\"\xc3\xa9\"@x.example>");
	path_is("x> RET=HDRS@client.example", "<\"x> RET=HDRS\"@client.example>");
	path_is("evil> NOTIFY=NEVER@remote.example", "<\"evil> NOTIFY=NEVER\"@remote.example>");
	path_is("a@[192.0.2.1]", "<a@[192.0.2.1]>");
	path_is("a@[IPv6:2001:db8::1]", "<a@[IPv6:2001:db8::1]>");
	path_is("#@[]", "<#@[]>");	/* qmail's double-bounce sender, as it is */
	/* qmail-queue's envelope lets anything through: the domain decides. */
	path_bad("r@remote.example> NOTIFY=SUCCESS ORCPT=rfc822;x", "invalid character in the domain");
	path_bad("r@remote.example>", "invalid character in the domain");
	path_bad("r@", "empty domain");
	path_bad("@x.example", "empty local part");
	path_bad("r@x_y.example", "invalid character");
	path_bad("r@x.example.", "ends with a dot");
	path_bad("r@[1.2.3.4", "address literal");
	path_bad("r@[1.2.3.4] X", "address literal");
	path_bad("x#@[]", "address literal");
	path_bad("#@[] ", "address literal");
	path_bad("r\r\nRSET@x.example", "control character");
	path_bad("r@x.example\r\nRSET", "control character");
}
