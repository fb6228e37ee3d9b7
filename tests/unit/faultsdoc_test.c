/*
 * faultsdoc_test.c: tests/FAULTS.md cannot rot.  Every row of its
 * matrix names at least one test in each of its two result columns, and
 * every test it names (`suite/name` in backquotes) exists as
 * Test(suite, name ...) in a test source under tests/.
 */
#include <criterion/criterion.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "testlib.h"

/* Every test source, concatenated. */
static void
all_sources(const char *root, struct buf *all)
{
	static const char *const pats[] = { "tests/unit/*.c", "tests/integration/*.c",
		"tests/soak/*.c" };
	size_t i, k;

	for (i = 0; i < 3; i++) {
		char *pat = xasprintf("%s%s", root, pats[i]);
		glob_t g;

		cr_assert_eq(glob(pat, 0, NULL, &g), 0, "no files match %s", pat);
		for (k = 0; k < g.gl_pathc; k++) {
			struct buf one = BUF_INIT;

			tl_read(g.gl_pathv[k], &one);
			buf_add(all, one.s, one.len);
			buf_free(&one);
		}
		globfree(&g);
		free(pat);
	}
	buf_addc(all, '\0');
}

/* Does `suite/name` (len bytes at p) exist as a Criterion test? */
static int
exists(const char *src, const char *p, size_t len)
{
	const char *slash = memchr(p, '/', len);
	char *a, *b;
	int found;

	if (slash == NULL)
		return 0;
	a = xasprintf("Test(%.*s, %.*s)", (int)(slash - p), p, (int)(len - (size_t)(slash - p) - 1),
	    slash + 1);
	b = xasprintf("Test(%.*s, %.*s,", (int)(slash - p), p, (int)(len - (size_t)(slash - p) - 1),
	    slash + 1);
	found = strstr(src, a) != NULL || strstr(src, b) != NULL;
	free(a);
	free(b);
	return found;
}

/* Is `...` at p a test name: [a-z0-9_]+/[a-z0-9_]+? */
static int
test_name(const char *p, size_t len)
{
	size_t i, slashes = 0;

	for (i = 0; i < len; i++) {
		if (p[i] == '/')
			slashes++;
		else if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '_'))
			return 0;
	}
	return slashes == 1 && p[0] != '/' && p[len - 1] != '/';
}

/* Count the test names in text[0..n), asserting each exists. */
static size_t
names_in(const char *src, const char *text, size_t n, const char *where)
{
	const char *p = text, *end = text + n, *q;
	size_t found = 0;

	while (p < end && (p = memchr(p, '`', (size_t)(end - p))) != NULL) {
		q = memchr(p + 1, '`', (size_t)(end - p - 1));
		if (q == NULL)
			break;
		if (test_name(p + 1, (size_t)(q - p - 1))) {
			cr_assert(exists(src, p + 1, (size_t)(q - p - 1)),
			    "tests/FAULTS.md names `%.*s` (%s), which is no test", (int)(q - p - 1), p + 1,
			    where);
			found++;
		}
		p = q + 1;
	}
	return found;
}

Test(faultsdoc, every_named_test_exists)
{
	char *path = tl_src_path("tests/FAULTS.md"), *root;
	struct buf doc = BUF_INIT, src = BUF_INIT;
	const char *line, *sect;
	size_t rows = 0, total;

	tl_read(path, &doc);
	buf_addc(&doc, '\0');
	root = xstrndup(path, strlen(path) - strlen("tests/FAULTS.md"));
	all_sources(root, &src);
	/* Every name anywhere in the file. */
	total = names_in(src.s, doc.s, strlen(doc.s), "in the text");
	/* Each row of the matrix: Fault | user sees | the mail. */
	sect = strstr(doc.s, "\n## The matrix\n");
	cr_assert(sect, "tests/FAULTS.md has no \"## The matrix\" section");
	for (line = sect + 1; (line = strchr(line, '\n')) != NULL; ) {
		const char *eol, *c1, *c2, *c3;

		line++;
		if (strncmp(line, "## ", 3) == 0)
			break;
		if (strncmp(line, "| ", 2) != 0 || strncmp(line, "| Fault |", 9) == 0)
			continue;
		eol = strchr(line, '\n');
		if (eol == NULL)
			eol = line + strlen(line);
		c1 = memchr(line + 1, '|', (size_t)(eol - line - 1));
		c2 = c1 ? memchr(c1 + 1, '|', (size_t)(eol - c1 - 1)) : NULL;
		c3 = c2 ? memchr(c2 + 1, '|', (size_t)(eol - c2 - 1)) : NULL;
		cr_assert(c3, "a row of the matrix without three columns: %.*s", (int)(eol - line),
		    line);
		cr_assert(names_in(src.s, c1 + 1, (size_t)(c2 - c1 - 1), "user column") >= 1,
		    "no test proves what the user sees: %.60s", line);
		cr_assert(names_in(src.s, c2 + 1, (size_t)(c3 - c2 - 1), "mail column") >= 1,
		    "no test proves what happens to the mail: %.60s", line);
		rows++;
	}
	cr_assert(rows >= 20, "only %zu rows in the matrix", rows);
	cr_assert(total >= 2 * rows, "%zu test names for %zu rows", total, rows);
	cr_log_info("FAULTS.md: %zu rows, %zu test names, all found", rows, total);
	buf_free(&doc);
	buf_free(&src);
	free(path);
	free(root);
}
