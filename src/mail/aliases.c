/*
 * aliases.c: see aliases.h.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/log.h"
#include "mail/aliases.h"

#define ALIASES_MAX (16 << 20)	/* bytes of one file */

void
aliases_init(struct aliases *al, const char *path)
{
	memset(al, 0, sizeof *al);
	al->path = path && *path ? xstrdup(path) : NULL;
}

static void
table_free(struct aliases *al)
{
	size_t i, k;

	for (i = 0; i < al->n; i++) {
		for (k = 0; k < al->a[i].n; k++)
			free(al->a[i].v[k]);
		free(al->a[i].v);
		free(al->a[i].name);
	}
	free(al->a);
	al->a = NULL;
	al->n = 0;
}

void
aliases_free(struct aliases *al)
{
	table_free(al);
	free(al->path);
	memset(al, 0, sizeof *al);
}

void
aliases_split(const char *text, size_t len, char ***v, size_t *n)
{
	size_t i = 0, start, end;
	int quoted = 0;

	while (i <= len) {
		start = i;
		for (; i < len && (quoted || text[i] != ','); i++)
			if (text[i] == '"')
				quoted = !quoted;
		end = i++;
		while (start < end && isspace((unsigned char)text[start]))
			start++;
		while (end > start && isspace((unsigned char)text[end - 1]))
			end--;
		if (end - start >= 2 && text[start] == '"' && text[end - 1] == '"') {
			start++;
			end--;
		}
		if (end == start)
			continue;
		*v = xrealloc(*v, (*n + 1) * sizeof **v);
		(*v)[(*n)++] = xstrndup(text + start, end - start);
	}
}

/* One entry from its logical line (continuations joined). */
static void
add_entry(struct aliases *al, const char *line, size_t len)
{
	const char *colon = memchr(line, ':', len);
	size_t nlen;
	struct alias *e;

	if (colon == NULL) {
		log_warnx("%s: \"%.*s\": no colon; ignored", al->path, (int)(len > 60 ? 60 : len),
		    line);
		return;
	}
	nlen = (size_t)(colon - line);
	while (nlen > 0 && isspace((unsigned char)line[nlen - 1]))
		nlen--;
	if (nlen >= 2 && line[0] == '"' && line[nlen - 1] == '"') {
		line++;
		nlen -= 2;
	}
	if (nlen == 0)
		return;
	al->a = xrealloc(al->a, (al->n + 1) * sizeof *al->a);
	e = &al->a[al->n++];
	memset(e, 0, sizeof *e);
	e->name = xstrndup(line, nlen);
	aliases_split(colon + 1, len - (size_t)(colon + 1 - line), &e->v, &e->n);
}

static void
parse(struct aliases *al, const char *s, size_t len)
{
	struct buf cur = BUF_INIT;
	size_t i = 0, end;
	int have = 0;

	while (i < len) {
		const char *nl = memchr(s + i, '\n', len - i);

		size_t k = i;

		end = nl ? (size_t)(nl - s) : len;
		while (k < end && (s[k] == ' ' || s[k] == '\t'))
			k++;
		if (k == end || s[k] == '#') {
			/* A comment or a blank line (as Postfix: also when
			 * indented): neither ends nor continues an entry. */
		} else if ((s[i] == ' ' || s[i] == '\t') && have) {
			buf_addc(&cur, ' ');
			buf_add(&cur, s + i, end - i);
		} else {
			if (have)
				add_entry(al, cur.s, cur.len);
			buf_reset(&cur);
			buf_add(&cur, s + i, end - i);
			have = 1;
		}
		i = end + 1;
	}
	if (have)
		add_entry(al, cur.s, cur.len);
	buf_free(&cur);
}

void
aliases_refresh(struct aliases *al)
{
	struct buf b = BUF_INIT;
	struct stat st;

	if (al->path == NULL)
		return;
	if (stat(al->path, &st) < 0) {
		if (errno == ENOENT) {
			if (al->st.st_ino != 0)
				log_info("%s is gone: no aliases", al->path);
			table_free(al);
			memset(&al->st, 0, sizeof al->st);
		} else if (!al->warned) {
			log_warn("%s (the last one read stays in force)", al->path);
			al->warned = 1;
		}
		return;
	}
	if (al->st.st_ino == st.st_ino && al->st.st_dev == st.st_dev &&
	    al->st.st_size == st.st_size && al->st.st_mtim.tv_sec == st.st_mtim.tv_sec &&
	    al->st.st_mtim.tv_nsec == st.st_mtim.tv_nsec)
		return;
	if (read_file_at(AT_FDCWD, al->path, &b, ALIASES_MAX) != 0) {
		if (!al->warned)
			log_warn("read %s (the last one read stays in force)", al->path);
		al->warned = 1;
		buf_free(&b);
		return;
	}
	table_free(al);
	parse(al, b.s ? b.s : "", b.len);
	al->st = st;
	al->warned = 0;
	log_info("%s read: %zu aliases", al->path, al->n);
	buf_free(&b);
}

const struct alias *
aliases_find(const struct aliases *al, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < al->n; i++)
		if (strlen(al->a[i].name) == len && strncasecmp(al->a[i].name, name, len) == 0)
			return &al->a[i];
	return NULL;
}

int
aliases_include(const char *path, char ***v, size_t *n, struct buf *why)
{
	struct buf b = BUF_INIT;
	size_t i = 0, end;

	if (read_file_at(AT_FDCWD, path, &b, ALIASES_MAX) != 0) {
		buf_printf(why, "%s: %s", path, strerror(errno));
		buf_free(&b);
		return -1;
	}
	while (i < b.len) {
		const char *nl = memchr(b.s + i, '\n', b.len - i);

		end = nl ? (size_t)(nl - b.s) : b.len;
		if (b.s[i] != '#')
			aliases_split(b.s + i, end - i, v, n);
		i = end + 1;
	}
	buf_free(&b);
	return 0;
}
