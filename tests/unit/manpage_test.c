/*
 * manpage_test.c: every configuration key has a line in its man page:
 * weir.conf's keys in etc/weir.conf.5, policy.conf's in etc/policy.conf.5
 * (as ".It Cm key" or, for keys inside other text, "Cm key").  A key
 * added to a table without documentation fails here.
 */
#include <criterion/criterion.h>
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
