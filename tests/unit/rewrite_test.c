/*
 * rewrite_test.c: sender rewriting (mail/rewrite.c): the three pattern
 * kinds and their order, "@domain" results, the default and the accepted
 * domains, the null senders, entry checks, and the From: value: only
 * the address replaced, display name, comments and folding kept; several
 * addresses, groups, quoted or unparsable ones left alone.  Then the
 * keys as weir.conf gives them (errors with file:line), and the From:
 * field in weir-remote's wire form (remote/body.c): found in the header
 * pass, one replacement made on the wire whatever the chunk size, the
 * wire length (SIZE) following it, and the replacements refused.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "mail/rewrite.h"
#include "remote/body.h"
#include "testlib.h"

#define HOST "box.localdomain"

static struct rewrite rw;
static struct buf out, old, why;

static void
setup(void)
{
	memset(&rw, 0, sizeof rw);
}

static void
teardown(void)
{
	rewrite_free(&rw);
	buf_free(&out);
	buf_free(&old);
	buf_free(&why);
}

TestSuite(rewrite, .init = setup, .fini = teardown);

static void
init(const char *const *map, size_t n, const char *def, const char *const *dom, size_t nd)
{
	buf_reset(&why);
	cr_assert_eq(rewrite_init(&rw, map, n, def, dom, nd, HOST, &why), 0, "%s",
	    buf_cstr(&why));
}

/* What addr becomes ("=" when unchanged). */
static const char *
rw_of(const char *addr)
{
	static char res[1100];

	if (rewrite_address(&rw, addr, &out) == 0) {
		cr_assert_eq(out.len, 0);
		return "=";
	}
	snprintf(res, sizeof res, "%s", buf_cstr(&out));
	return res;
}

static const char *const map[] = {
	"@box.localdomain box@example.org",
	"cron   cron@example.org",
	"root@box.localdomain\tadmin@example.org",
	"www-data @example.org",
	"@old.example @example.org",
};

Test(rewrite, patterns_most_specific_first)
{
	init(map, 5, NULL, NULL, 0);
	cr_assert(rewrite_active(&rw));
	/* The exact address beats "@box.localdomain", listed before it. */
	cr_assert_str_eq(rw_of("root@box.localdomain"), "admin@example.org");
	cr_assert_str_eq(rw_of("ROOT@Box.LocalDomain"), "admin@example.org");
	/* A local part beats the domain, for local addresses only. */
	cr_assert_str_eq(rw_of("cron@box.localdomain"), "cron@example.org");
	cr_assert_str_eq(rw_of("cron"), "cron@example.org");
	cr_assert_str_eq(rw_of("cron@localhost"), "cron@example.org");
	cr_assert_str_eq(rw_of("cron@elsewhere.example"), "=");
	cr_assert_str_eq(rw_of("daemon@box.localdomain"), "box@example.org");
	/* "@domain" results keep the local part. */
	cr_assert_str_eq(rw_of("www-data@localhost"), "www-data@example.org");
	cr_assert_str_eq(rw_of("www-data"), "www-data@example.org");
	cr_assert_str_eq(rw_of("joe@old.example"), "joe@example.org");
	/* Not its subdomains; nothing else without a default. */
	cr_assert_str_eq(rw_of("joe@sub.old.example"), "=");
	cr_assert_str_eq(rw_of("root"), "=");
	cr_assert_str_eq(rw_of("me@example.org"), "=");
}

Test(rewrite, null_senders_never)
{
	init(map, 5, "any@example.org", NULL, 0);
	cr_assert_str_eq(rw_of(""), "=");
	cr_assert_str_eq(rw_of("#@[]"), "=");
}

Test(rewrite, default_for_other_domains)
{
	init(map, 5, "relay@example.org", NULL, 0);
	/* Accepted: the default's domain and the map's. */
	cr_assert_eq(rw.ndomains, 1);
	cr_assert_str_eq(rw_of("me@example.org"), "=");
	cr_assert_str_eq(rw_of("Me@EXAMPLE.org"), "=");
	cr_assert_str_eq(rw_of("root"), "relay@example.org");
	cr_assert_str_eq(rw_of("root@localhost"), "relay@example.org");
	cr_assert_str_eq(rw_of("nobody@elsewhere.example"), "relay@example.org");
	cr_assert_str_eq(rw_of("x@sub.example.org"), "relay@example.org");
	/* The map first. */
	cr_assert_str_eq(rw_of("root@box.localdomain"), "admin@example.org");
	/* The default itself is no rewrite. */
	cr_assert_str_eq(rw_of("relay@example.org"), "=");
}

Test(rewrite, default_with_rewrite_domains)
{
	static const char *const dom[] = { "lists.example.org", "example.net" };

	init(NULL, 0, "relay@example.org", dom, 2);
	/* Said: the default's own domain is not added. */
	cr_assert_str_eq(rw_of("a@lists.example.org"), "=");
	cr_assert_str_eq(rw_of("a@EXAMPLE.NET"), "=");
	cr_assert_str_eq(rw_of("a@example.org"), "relay@example.org");
	cr_assert_str_eq(rw_of("relay@example.org"), "=");
}

Test(rewrite, nothing_configured)
{
	init(NULL, 0, NULL, NULL, 0);
	cr_assert(!rewrite_active(&rw));
	cr_assert_str_eq(rw_of("root@box.localdomain"), "=");
}

Test(rewrite, entry_checks)
{
	static const char *const bad[] = {
		"", "root", "root a@b.example c@d.example", "root admin",
		"root \"a b\"@example.org", "root a..b@example.org", "root .a@example.org",
		"root a@", "root a@bad_domain", "@bad_domain a@example.org",
		"root@ a@example.org", "r\x01oot a@example.org", "root a@example.org\x7f",
	};
	static const char *const good[] = {
		"root a@example.org", "  root\ta@example.org  ", "@x.example @example.org",
		"a.b@x.example c+d@example.org", "r\xc3\xa9 a@example.org",
	};
	const char *const one[] = { "root a@" };
	const char *const twice[] = { "root a@example.org", "ROOT b@example.org" };
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_not_null(rewrite_entry_problem(bad[i]), "accepted \"%s\"", bad[i]);
	cr_assert_null(rewrite_entry_problem(good[0]));
	cr_assert_null(rewrite_entry_problem(good[1]));
	cr_assert_null(rewrite_entry_problem(good[2]));
	cr_assert_null(rewrite_entry_problem(good[3]));
	/* A pattern's local part is the queue's internal form: printable
	 * ASCII only, so 8-bit is refused too. */
	cr_assert_not_null(rewrite_entry_problem(good[4]));
	cr_assert_null(rewrite_address_problem("a@example.org", 0));
	cr_assert_not_null(rewrite_address_problem("@example.org", 0));
	cr_assert_null(rewrite_address_problem("@example.org", 1));
	cr_assert_not_null(rewrite_address_problem("example.org", 1));
	cr_assert_eq(rewrite_init(&rw, one, 1, NULL, NULL, 0, HOST, &why), -1);
	cr_assert(strstr(buf_cstr(&why), "root a@"), "%s", buf_cstr(&why));
	buf_reset(&why);
	cr_assert_eq(rewrite_init(&rw, twice, 2, NULL, NULL, 0, HOST, &why), -1);
	cr_assert(strstr(buf_cstr(&why), "given twice"), "%s", buf_cstr(&why));
	buf_reset(&why);
	cr_assert_eq(rewrite_init(&rw, NULL, 0, "@example.org", NULL, 0, HOST, &why), -1);
	buf_reset(&why);
	cr_assert_eq(rewrite_init(&rw, NULL, 0, NULL, (const char *const[]){ "a b" }, 1, HOST,
	    &why), -1);
}

/* rewrite_from on value; the value as it would go out, into res. */
static enum rewrite_from
from(const char *value, struct buf *res)
{
	size_t off = 0, alen = 0;
	enum rewrite_from r;

	buf_reset(&why);
	buf_reset(res);
	r = rewrite_from(&rw, value, strlen(value), &off, &alen, &old, &out, &why);
	if (r == RWF_REWRITTEN) {
		cr_assert(off + alen <= strlen(value));
		cr_assert_eq(memcmp(value + off, old.s, old.len), 0);
		buf_add(res, value, off);
		buf_add(res, out.s, out.len);
		buf_adds(res, value + off + alen);
	} else {
		buf_adds(res, value);
	}
	return r;
}

Test(rewrite, from_only_the_address)
{
	struct buf res = BUF_INIT;

	init(map, 5, "relay@example.org", NULL, 0);
	cr_assert_eq(from(" Cron Daemon <root@box.localdomain>", &res), RWF_REWRITTEN);
	cr_assert_str_eq(buf_cstr(&res), " Cron Daemon <admin@example.org>");
	cr_assert_str_eq(buf_cstr(&old), "root@box.localdomain");
	cr_assert_eq(from(" \"root@box.localdomain\" <root@box.localdomain>", &res),
	    RWF_REWRITTEN);
	cr_assert_str_eq(buf_cstr(&res), " \"root@box.localdomain\" <admin@example.org>");
	/* Debian's cron: an unqualified address with a comment. */
	cr_assert_eq(from(" root (Cron Daemon)", &res), RWF_REWRITTEN);
	cr_assert_str_eq(buf_cstr(&res), " relay@example.org (Cron Daemon)");
	cr_assert_eq(from(" (the <cron> job) cron (Cron <Daemon>)", &res), RWF_REWRITTEN);
	cr_assert_str_eq(buf_cstr(&res), " (the <cron> job) cron@example.org (Cron <Daemon>)");
	/* Folded: the fold stays where it was. */
	cr_assert_eq(from(" \"Web, server\"\n\t<www-data@localhost>", &res), RWF_REWRITTEN);
	cr_assert_str_eq(buf_cstr(&res), " \"Web, server\"\n\t<www-data@example.org>");
	cr_assert_eq(from(" Web\r\n <www-data>", &res), RWF_REWRITTEN);
	cr_assert_str_eq(buf_cstr(&res), " Web\r\n <www-data@example.org>");
	cr_assert_eq(from(" Me <me@example.org>", &res), RWF_SAME);
	cr_assert_str_eq(buf_cstr(&old), "me@example.org");
	buf_free(&res);
}

Test(rewrite, from_left_alone)
{
	struct buf res = BUF_INIT;

	init(map, 5, "relay@example.org", NULL, 0);
	cr_assert_eq(from(" root@box.localdomain, cron@box.localdomain", &res), RWF_SEVERAL);
	cr_assert_eq(from(" team: root@box.localdomain;", &res), RWF_ODD_FORM);
	cr_assert_eq(from(" undisclosed-recipients:;", &res), RWF_SEVERAL);
	cr_assert_eq(from(" <\"a b\"@box.localdomain>", &res), RWF_ODD_FORM);
	cr_assert_eq(from(" <@route.example:root@box.localdomain>", &res), RWF_ODD_FORM);
	cr_assert_eq(from(" Root <root@box.localdomain", &res), RWF_UNPARSABLE);
	cr_assert_gt(why.len, 0);
	cr_assert_eq(from(" <>", &res), RWF_UNPARSABLE);
	cr_assert_eq(from("", &res), RWF_SEVERAL);
	buf_free(&res);
}

/* ---- the keys in weir.conf (mail/config.c) ---- */

static char *cdir;

static void cfg_setup(void) { cdir = tl_tmpdir(); unsetenv("WEIR_CONFIG"); unsetenv("WEIR_QUEUE"); }
static void cfg_teardown(void) { tl_rmtree(cdir); free(cdir); }

TestSuite(rewrite_config, .init = cfg_setup, .fini = cfg_teardown);

/* Load weir.conf with one upstream section holding keys: 0 or -1, the
 * errors in err. */
static int
load_up(const char *keys, struct weir_config *c, struct buf *err)
{
	char *p = xasprintf("%s/weir.conf", cdir);
	char *text = xasprintf("hostname = \"box.localdomain\"\n"
	    "upstream \"isp\" {\n  host = \"127.0.0.1\"\n%s}\n", keys);
	int r;

	tl_write(p, text, strlen(text));
	buf_reset(err);
	r = config_load(c, p, err);
	free(p);
	free(text);
	return r;
}

Test(rewrite_config, keys_and_defaults)
{
	struct weir_config c;
	struct buf err = BUF_INIT;

	cr_assert_eq(load_up("", &c, &err), 0, "%s", buf_cstr(&err));
	cr_assert_eq(c.upstreams[0].rewrite_sender.n, 0);
	cr_assert_null(c.upstreams[0].rewrite_default);
	cr_assert_eq(c.upstreams[0].rewrite_domains.n, 0);
	cr_assert_eq(c.upstreams[0].rewrite_header_from, 0);
	config_free(&c);
	cr_assert_eq(load_up("  rewrite_sender = {\"root a@example.org\", \"@box.localdomain "
	    "@example.org\"}\n  rewrite_default = \"relay@example.org\"\n"
	    "  rewrite_domains = {\"example.org\"}\n  rewrite_header_from = true\n", &c, &err),
	    0, "%s", buf_cstr(&err));
	cr_assert_eq(c.upstreams[0].rewrite_sender.n, 2);
	cr_assert_str_eq(c.upstreams[0].rewrite_sender.v[1], "@box.localdomain @example.org");
	cr_assert_str_eq(c.upstreams[0].rewrite_default, "relay@example.org");
	cr_assert_str_eq(c.upstreams[0].rewrite_domains.v[0], "example.org");
	cr_assert_eq(c.upstreams[0].rewrite_header_from, 1);
	config_free(&c);
	buf_free(&err);
}

/* Each bad value is refused with the file's line and what is wrong. */
Test(rewrite_config, errors_name_the_line)
{
	static const char *const bad[][2] = {
		{ "  rewrite_sender = {\"root\"}\n", ":4: rewrite_sender: \"root\": an entry" },
		{ "  rewrite_sender = {\"root a@example.org\",\n   \"cron c..d@example.org\"}\n",
		  ":5: rewrite_sender: \"cron c..d@example.org\": the local part" },
		{ "  rewrite_default = \"@example.org\"\n", ":4: rewrite_default: \"@example.org\"" },
		{ "  rewrite_domains = {\"bad_domain\"}\n", ":4: rewrite_domains: \"bad_domain\"" },
		{ "  rewrite_sender = {\"root a@example.org\", \"Root b@example.org\"}\n",
		  "upstream \"isp\": rewrite_sender: the pattern \"Root\" is given twice" },
	};
	struct weir_config c;
	struct buf err = BUF_INIT;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(load_up(bad[i][0], &c, &err), -1, "accepted %s", bad[i][0]);
		cr_assert(strstr(buf_cstr(&err), bad[i][1]), "for %s: %s", bad[i][0],
		    buf_cstr(&err));
		config_free(&c);
	}
	buf_free(&err);
}

/* ---- the From: field in the wire form (remote/body.c) ---- */

/* The message in a file, opened: b ready, the file's fd kept in b->fd. */
static void
body_of(struct body *b, const char *msg)
{
	char *dir = tl_tmpdir(), *p = xasprintf("%s/mess", dir);
	struct buf err = BUF_INIT;
	int fd;

	tl_write(p, msg, strlen(msg));
	fd = open(p, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(body_open(b, fd, 1 << 20, &err), 0, "%s", buf_cstr(&err));
	unlink(p);
	rmdir(dir);
	free(p);
	free(dir);
	buf_free(&err);
}

/* Everything body_next gives, cap bytes at a time. */
static void
wire_of(struct body *b, size_t cap, struct buf *w)
{
	char chunk[BODY_CHUNK];
	struct buf err = BUF_INIT;
	ssize_t n;

	buf_reset(w);
	body_rewind(b);
	while ((n = body_next(b, chunk, cap, &err)) > 0)
		buf_add(w, chunk, (size_t)n);
	cr_assert_eq(n, 0, "%s", buf_cstr(&err));
	buf_free(&err);
}

Test(rewrite_body, from_found_and_replaced)
{
	static const char msg[] = "Received: x\nSubject: from: me\nfrom \t: Root\n"
	    "  <root@box.localdomain> (the\n admin)\nTo: y@example.org\n\n"
	    "From: not@header.example\n.dot\n";
	static const char want[] = "Received: x\r\nSubject: from: me\r\nfrom \t: Root\r\n"
	    "  <admin@example.org> (the\r\n admin)\r\nTo: y@example.org\r\n\r\n"
	    "From: not@header.example\r\n..dot\r\n.\r\n";
	struct body b;
	struct buf w = BUF_INIT, bwhy = BUF_INIT;
	const char *val, *at;
	size_t len, cap;

	body_of(&b, msg);
	cr_assert_eq(body_from(&b, &val, &len), 1);
	cr_assert_str_eq(val, " Root\n  <root@box.localdomain> (the\n admin)");
	cr_assert_eq(len, strlen(val));
	at = strstr(val, "root@");
	cr_assert_eq(body_from_replace(&b, (size_t)(at - val), 20, "admin@example.org", 17,
	    &bwhy), 0, "%s", buf_cstr(&bwhy));
	cr_assert_eq(b.wire_len, strlen(want));
	/* Any chunk size, the same bytes; again after a rewind. */
	for (cap = 16; cap <= 64; cap += 7) {
		wire_of(&b, cap, &w);
		cr_assert_eq(w.len, strlen(want));
		cr_assert_eq(memcmp(w.s, want, w.len), 0, "cap %zu:\n%s", cap, buf_cstr(&w));
	}
	/* One replacement only. */
	cr_assert_eq(body_from_replace(&b, 1, 4, "X", 1, &bwhy), -1);
	body_close(&b);
	close(b.fd);
	buf_free(&w);
	buf_free(&bwhy);
}

Test(rewrite_body, crlf_and_several_and_none)
{
	struct body b;
	struct buf w = BUF_INIT, bwhy = BUF_INIT;
	const char *val;
	size_t len;

	body_of(&b, "From: a@x.example\r\nSubject: s\r\n\r\nbody\r\n");
	cr_assert_eq(body_from(&b, &val, &len), 1);
	cr_assert_str_eq(val, " a@x.example");
	cr_assert_eq(body_from_replace(&b, 1, 11, "bb@y.example", 12, &bwhy), 0, "%s",
	    buf_cstr(&bwhy));
	wire_of(&b, 4096, &w);
	cr_assert_str_eq(buf_cstr(&w), "From: bb@y.example\r\nSubject: s\r\n\r\nbody\r\n.\r\n");
	cr_assert_eq(b.wire_len, w.len);
	body_close(&b);
	close(b.fd);

	body_of(&b, "From: a@x.example\nFrom: b@x.example\n\nbody\n");
	cr_assert_eq(body_from(&b, &val, &len), 2);
	cr_assert_str_eq(val, " a@x.example");
	body_close(&b);
	close(b.fd);

	body_of(&b, "Subject: s\n\nFrom: a@x.example\n");
	cr_assert_eq(body_from(&b, &val, &len), 0);
	cr_assert_null(val);
	cr_assert_eq(body_from_replace(&b, 0, 1, "x", 1, &bwhy), -1);
	body_close(&b);
	close(b.fd);

	/* The header's last field, at the end of the message, no newline. */
	body_of(&b, "From: a@x.example");
	cr_assert_eq(body_from(&b, &val, &len), 1);
	cr_assert_str_eq(val, " a@x.example");
	cr_assert_eq(body_from_replace(&b, 1, 11, "c@z.example", 11, &bwhy), 0);
	wire_of(&b, 16, &w);
	cr_assert_str_eq(buf_cstr(&w), "From: c@z.example\r\n.\r\n");
	body_close(&b);
	close(b.fd);
	buf_free(&w);
	buf_free(&bwhy);
}

Test(rewrite_body, replacement_checks)
{
	struct body b;
	struct buf bwhy = BUF_INIT, msg = BUF_INIT;
	size_t i;

	body_of(&b, "From: Name\n <a@x.example>\n\nbody\n");
	cr_assert_eq(body_from_replace(&b, 1, 5, "a b", 3, &bwhy), -1);	/* a blank */
	cr_assert_eq(body_from_replace(&b, 3, 6, "x", 1, &bwhy), -1);	/* over a line end */
	cr_assert_eq(body_from_replace(&b, 1, 40, "x", 1, &bwhy), -1);	/* past the value */
	cr_assert_eq(body_from_replace(&b, 1, 0, "x", 1, &bwhy), -1);	/* nothing replaced */
	body_close(&b);
	close(b.fd);

	/* A line that would grow past 998 bytes is left alone. */
	buf_adds(&msg, "From: ");
	for (i = 0; i < 970; i++)
		buf_addc(&msg, 'n');
	buf_adds(&msg, " <a@x.example>\n\nbody\n");
	body_of(&b, msg.s);
	buf_reset(&bwhy);
	cr_assert_eq(body_from_replace(&b, 973, 11, "abcdefghij@example.org", 22, &bwhy), -1);
	cr_assert(strstr(buf_cstr(&bwhy), "998"), "%s", buf_cstr(&bwhy));
	cr_assert_eq(body_from_replace(&b, 973, 11, "b@x.example", 11, &bwhy), 0,
	    "%s", buf_cstr(&bwhy));
	body_close(&b);
	close(b.fd);
	buf_free(&bwhy);
	buf_free(&msg);
}
