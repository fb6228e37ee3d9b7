/*
 * manpage_test.c: every configuration key has a line in its man page:
 * weir.conf's keys in etc/weir.conf.5, policy.conf's in etc/policy.conf.5
 * (as ".It Cm key" or, for keys inside other text, "Cm key").  A key
 * added to a table without documentation fails here.  And every page
 * (every section 8 page under src, the section 5 ones in etc) renders under Debian's groff and man without a
 * warning (groff -ww -mandoc, man --warnings), and no source line has
 * one of mdoc's quoting macros Qq, Dq, Sq before another enclosing
 * macro: it encloses the rest of its line, so the second nests in the
 * first (`"starttls, "smtps""`); write Qo ... Qc instead.
 */
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "mail/policy.h"
#include "testlib.h"

/* Is name documented in page as an mdoc "Cm name" token? */
static int
documented(const struct buf *page, const char *name)
{
	char *needle = xasprintf("Cm %s", name);
	const char *p = page->s;
	size_t n = strlen(needle);
	int found = 0;

	while ((p = strstr(p, needle)) != NULL) {
		char after = p[n];

		if (after == '\n' || after == ' ' || after == '\0') {
			found = 1;
			break;
		}
		p += n;
	}
	free(needle);
	return found;
}

static void
check(const char *page_path, const char *(*name)(size_t))
{
	struct buf page = BUF_INIT, missing = BUF_INIT;
	const char *k;
	size_t i;

	tl_read(page_path, &page);
	for (i = 0; (k = name(i)) != NULL; i++)
		if (!documented(&page, k))
			buf_printf(&missing, " %s", k);
	cr_assert_eq(missing.len, 0, "%s does not document:%s", page_path, buf_cstr(&missing));
	cr_assert_gt(i, 5, "too few keys enumerated");
	buf_free(&page);
	buf_free(&missing);
}

Test(manpage, every_weir_conf_key_documented)
{
	check("etc/weir.conf.5", config_key_name);
}

Test(manpage, every_policy_key_documented)
{
	check("etc/policy.conf.5", policy_key_name);
}

/* Run cmd (its stderr to its stdout); what it printed into out. */
static void
run_capture(const char *cmd, struct buf *out)
{
	char chunk[512];
	size_t n;
	FILE *f = popen(cmd, "r");

	cr_assert_not_null(f, "popen %s", cmd);
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		buf_add(out, chunk, n);
	cr_assert_eq(pclose(f), 0, "%s failed:\n%s", cmd, buf_cstr(out));
}

/* Does this source line hold one of Qq, Dq, Sq followed by another
 * enclosing macro (Qq Dq Sq Ql Pq Brq Bq Aq), which it would swallow? */
static int
nested_quote(const char *line, size_t len)
{
	static const char *const m[] = { "Qq", "Dq", "Sq", "Ql", "Pq", "Brq", "Bq", "Aq" };
	size_t i, k, l;
	int seen = 0;

	if (len == 0 || line[0] != '.')
		return 0;
	for (i = 1; i < len; i++) {
		if (line[i - 1] != ' ' && line[i - 1] != '.')
			continue;
		for (k = 0; k < 8; k++) {
			l = strlen(m[k]);
			if (i + l <= len && memcmp(line + i, m[k], l) == 0 &&
			    (i + l == len || line[i + l] == ' ')) {
				if (seen)
					return 1;
				seen = k < 3;
			}
		}
	}
	return 0;
}

Test(manpage, every_page_renders_without_a_warning)
{
	struct buf bad = BUF_INIT;
	glob_t g;
	size_t i, npages = 0;

	cr_assert_eq(glob("src/*/*.8", 0, NULL, &g), 0);
	cr_assert_eq(glob("etc/*.5", GLOB_APPEND, NULL, &g), 0);
	for (i = 0; i < g.gl_pathc; i++) {
		const char *page = g.gl_pathv[i];
		struct buf out = BUF_INIT, src = BUF_INIT;
		char *cmd;
		const char *p, *e;
		unsigned line = 1;

		npages++;
		cmd = xasprintf("LC_ALL=C.UTF-8 groff -ww -mandoc -Tutf8 -z '%s' 2>&1 && "
		    "LC_ALL=C.UTF-8 MANPAGER=cat man --warnings -l '%s' 2>&1 >/dev/null", page, page);
		run_capture(cmd, &out);
		if (out.len > 0)
			buf_printf(&bad, "%s: %s\n", page, buf_cstr(&out));
		tl_read(page, &src);
		for (p = buf_cstr(&src); *p; p = *e ? e + 1 : e, line++) {
			e = strchr(p, '\n');
			if (e == NULL)
				e = p + strlen(p);
			if (nested_quote(p, (size_t)(e - p)))
				buf_printf(&bad, "%s:%u: Qq, Dq or Sq would enclose the next "
				    "macro of the line (write Qo ... Qc): %.*s\n", page, line,
				    (int)(e - p), p);
		}
		free(cmd);
		buf_free(&out);
		buf_free(&src);
	}
	globfree(&g);
	cr_assert_geq(npages, 9, "only %zu man pages found", npages);
	cr_assert_eq(bad.len, 0, "%s", buf_cstr(&bad));
	buf_free(&bad);
}
