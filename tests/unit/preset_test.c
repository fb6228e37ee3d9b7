/* preset_test.c: the provider presets (etc/providers, installed in
 * /usr/share/weir/providers) and weir.conf's preset key: every shipped
 * preset parses with weir.conf's own tables, sets only the provider's
 * keys, has well-formed windows and names its source with a date; an
 * upstream's keys win over its preset's; the preset's limits reach the
 * policy unless policy.conf has the upstream's own section. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "mail/policy.h"
#include "testlib.h"

#define SHIPPED "etc/providers"	/* from the tree's top, where tests run */

static char *dir;

static void setup(void) { dir = tl_tmpdir(); unsetenv("WEIR_CONFIG"); unsetenv("WEIR_QUEUE"); }
static void teardown(void) { tl_rmtree(dir); free(dir); }

TestSuite(preset, .init = setup, .fini = teardown);

static char *
file(const char *name, const char *text)
{
	char *p = xasprintf("%s/%s", dir, name);

	tl_write(p, text, strlen(text));
	return p;
}

/* The bit of the upstream key name in from_preset, from_file, set. */
static unsigned long long
bit(const char *name)
{
	size_t i;

	for (i = 0; config_upstream_key(i); i++)
		if (strcmp(config_upstream_key(i), name) == 0)
			return 1ULL << i;
	cr_assert_fail("no upstream key %s", name);
	return 0;
}

/* "(read YYYY-MM-DD)" somewhere in s. */
static int
has_date(const char *s)
{
	const char *p = strstr(s, "(read ");

	return p && strlen(p) >= 16 && p[10] == '-' && p[13] == '-';
}

Test(preset, every_shipped_preset_is_sound)
{
	char **names;
	ssize_t n = config_preset_names(SHIPPED, &names), i;
	size_t j, windows = 0;

	cr_assert_geq(n, 10, "%zd presets in " SHIPPED, n);
	for (i = 0; i < n; i++) {
		struct weir_preset p;
		struct buf err = BUF_INIT;

		cr_assert_eq(config_preset_load(SHIPPED, names[i], &p, &err), 0, "%s: %s",
		    names[i], err.s);
		cr_assert_gt(strlen(p.title), 5, "%s: title", names[i]);
		cr_assert_gt(p.source.n, 0, "%s: no source", names[i]);
		for (j = 0; j < p.source.n; j++)
			cr_assert(has_date(p.source.v[j]), "%s: source without a date: %s",
			    names[i], p.source.v[j]);
		cr_assert(p.set & bit("host") || strcmp(names[i], "rcn") == 0,
		    "%s: no host", names[i]);	/* rcn: the region's host */
		for (j = 0; j < p.limits.nwin; j++) {
			cr_assert_gt(p.limits.win[j].limit, 0, "%s: window %zu", names[i], j);
			cr_assert_gt(p.limits.win[j].per, 0, "%s: window %zu", names[i], j);
		}
		windows += p.limits.nwin;
		config_preset_free(&p);
		buf_free(&err);
		free(names[i]);
	}
	free(names);
	cr_assert_geq(windows, 15, "the presets hold %zu windows in all", windows);
}

Test(preset, an_unknown_key_is_refused_with_its_line)
{
	struct weir_preset p;
	struct buf err = BUF_INIT;

	free(file("bad.conf", "title = \"x\"\nsource = {\"y (read 2026-01-01)\"}\n"
	    "host = \"h\"\nhostt = \"typo\"\n"));
	cr_assert_eq(config_preset_load(dir, "bad", &p, &err), -1);
	cr_assert(strstr(err.s, "bad.conf:4") && strstr(err.s, "hostt"), "%s", err.s);
	config_preset_free(&p);
	buf_free(&err);
}

Test(preset, a_bad_window_is_refused)
{
	struct weir_preset p;
	struct buf err = BUF_INIT;

	free(file("bad.conf", "title = \"x\"\nsource = {\"y (read 2026-01-01)\"}\n"
	    "rate = {\"10 per fortnight\"}\n"));
	cr_assert_eq(config_preset_load(dir, "bad", &p, &err), -1);
	cr_assert(strstr(err.s, "bad.conf:3") && strstr(err.s, "rate"), "%s", err.s);
	config_preset_free(&p);
	buf_free(&err);
}

Test(preset, the_accounts_keys_and_a_missing_source_are_refused)
{
	struct weir_preset p;
	struct buf err = BUF_INIT;

	free(file("bad.conf", "title = \"x\"\nusername = \"me\"\n"
	    "oauth { provider = \"microsoft\" client_id = \"abc\" }\n"));
	cr_assert_eq(config_preset_load(dir, "bad", &p, &err), -1);
	cr_assert(strstr(err.s, "username: the administrator's"), "%s", err.s);
	cr_assert(strstr(err.s, "oauth: client_id: the administrator's"), "%s", err.s);
	cr_assert(strstr(err.s, "no source"), "%s", err.s);
	config_preset_free(&p);
	buf_free(&err);
}

Test(preset, section_keys_win_and_origins_are_kept)
{
	struct weir_config c;
	struct buf err = BUF_INIT, v = BUF_INIT;
	const struct weir_upstream *u;
	char *conf = xasprintf("preset_dir = \"%s\"\n"
	    "upstream \"m365\" {\n  preset = \"microsoft365\"\n  port = 25\n"
	    "  username = \"relay@example.org\"\n"
	    "  oauth { client_id = \"00001111-aaaa\" tenant = \"example.org\" }\n}\n", SHIPPED);
	char *p = file("weir.conf", conf);

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	u = &c.upstreams[0];
	cr_assert_str_eq(u->host, "smtp.office365.com");
	cr_assert_eq(u->port, 25);
	cr_assert_eq(u->max_recipients, 500);
	cr_assert_eq(u->oauth.provider, OAUTH_MICROSOFT);	/* the preset's */
	cr_assert_str_eq(u->oauth.tenant, "example.org");	/* the section's */
	cr_assert_str_eq(u->mechanisms.v[0], "XOAUTH2");
	cr_assert_str_eq(u->preset_file, SHIPPED "/microsoft365.conf");
	cr_assert(u->from_preset & bit("host"));
	cr_assert_not(u->from_file & bit("host"));
	cr_assert(u->from_file & bit("port"));
	config_upstream_value(u, 1, &v);	/* host */
	cr_assert_str_eq(v.s, "\"smtp.office365.com\"");
	config_free(&c);
	buf_free(&v);
	free(conf);
	free(p);
}

Test(preset, a_missing_preset_names_the_upstream_and_the_file)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *conf = xasprintf("preset_dir = \"%s\"\nupstream \"x\" { preset = \"nosuch\" }\n",
	    SHIPPED);
	char *p = file("weir.conf", conf);

	cr_assert_eq(config_load(&c, p, &err), -1);
	cr_assert(strstr(err.s, "weir.conf:2: upstream \"x\": preset \"nosuch\": "
	    SHIPPED "/nosuch.conf"), "%s", err.s);
	buf_free(&err);
	free(conf);
	free(p);
}

/* policy.conf's "*" section and the preset's windows, merged. */
Test(preset, limits_reach_the_policy_unless_it_has_the_upstreams_own)
{
	struct weir_config c;
	struct policy pol;
	struct buf err = BUF_INIT;
	const struct policy_upstream *pu;
	char *conf = xasprintf("preset_dir = \"%s\"\n"
	    "upstream \"ses\" { preset = \"amazon-ses\" username = \"u\" secret_file = \"/s\" }\n"
	    "upstream \"zoho\" { preset = \"zoho\" username = \"u\" secret_file = \"/s\" "
	    "max_recipients = 20 }\n"
	    "upstream \"pobox\" { preset = \"pobox\" username = \"u\" secret_file = \"/s\" }\n",
	    SHIPPED);
	char *p = file("weir.conf", conf);
	char *pp = file("policy.conf", "upstream \"*\" { rate = {\"8 per 1m\"} "
	    "max_connections = 3 }\nupstream \"ses\" { rate = {\"13 recipients per 1s\"} }\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_eq(policy_load(&pol, pp, &err), 0, "%s", err.s);
	config_preset_limits(c.upstreams, c.nupstreams, &pol);
	/* ses: policy.conf's own section, not the preset's placeholder */
	pu = policy_upstream(&pol, "ses");
	cr_assert_eq(pu->nwin, 1);
	cr_assert_eq(pu->win[0].limit, 13);
	/* zoho: the preset's window, "*"'s max_connections, the section's cap */
	pu = policy_upstream(&pol, "zoho");
	cr_assert_str_eq(pu->name, "zoho");
	cr_assert_eq(pu->nwin, 1);
	cr_assert_eq(pu->win[0].limit, 47);
	cr_assert_eq(pu->win[0].per, 3600);
	cr_assert_eq(pu->max_connections, 3);
	cr_assert_eq(pu->max_recipients, 20);
	/* pobox: no published limits: the "*" section itself */
	pu = policy_upstream(&pol, "pobox");
	cr_assert_str_eq(pu->name, "*");
	policy_free(&pol);
	config_free(&c);
	buf_free(&err);
	free(conf);
	free(p);
	free(pp);
}
