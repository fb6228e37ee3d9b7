/* confparse.c: see confparse.h.  Trusts: the file's owner; in a set-id
 * process only root (see config_untrusted_env()). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/io.h"
#include "mail/config.h"
#include "mail/confparse.h"

/* Does line p (up to its newline) set key: "key =" after blanks? */
static int
sets_key(const char *p, const char *key)
{
	size_t n = strlen(key);

	while (*p == ' ' || *p == '\t')
		p++;
	if (strncmp(p, key, n) != 0)
		return 0;
	p += n;
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '=';
}

/* Does line p open the section: upstream "name" (the title quoted)? */
static int
opens_section(const char *p, const char *name)
{
	size_t n = strlen(name);

	while (*p == ' ' || *p == '\t')
		p++;
	if (strncmp(p, "upstream", 8) != 0 || (p[8] != ' ' && p[8] != '\t'))
		return 0;
	p += 8;
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '"' && strncmp(p + 1, name, n) == 0 && p[1 + n] == '"';
}

/* Does line p (up to its newline) hold "quoted", quotes included? */
static int
holds_quoted(const char *p, const char *quoted)
{
	const char *nl = strchr(p, '\n'), *q;
	size_t n = strlen(quoted);

	for (q = p; (q = strchr(q, '"')) != NULL && (nl == NULL || q < nl); q++)
		if (strncmp(q + 1, quoted, n) == 0 && q[1 + n] == '"')
			return 1;
	return 0;
}

int
confparse_key_line(const char *text, const char *section, const char *key, const char *quoted,
    int last)
{
	const char *p = text;
	int line = 1, in = section == NULL;

	for (; p && *p; line++) {
		if (section && !in && opens_section(p, section)) {
			in = 1;
			if (key == NULL && quoted == NULL)
				return line;
		}
		if (in && key && sets_key(p, key))
			return line;
		if (in && quoted && holds_quoted(p, quoted))
			return line;
		if (section && in && last > 0 && line >= last)
			return 0;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return 0;
}

/* Where errfunc writes while confparse runs: libconfuse's error callback
 * has no argument of ours. */
static struct buf *errbuf;

static void
errfunc(cfg_t *cfg, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof msg, fmt, ap);
	if (errbuf == NULL)
		return;
	if (cfg && cfg->filename)
		buf_printf(errbuf, "%s:%d: %s\n", cfg->filename, cfg->line, msg);
	else
		buf_printf(errbuf, "%s\n", msg);
}

/*
 * libconfuse 3.3 counts lines wrongly after comments (a "#" or "//" line
 * adds three to the count, a block comment two), so every error line
 * after a comment would be wrong.  We give it the file with its comments
 * turned into spaces, newlines kept: the same tokens, right line numbers.
 * Comments as libconfuse knows them: "#" anywhere outside quotes, "//"
 * and "slash-star ... star-slash" where a token would start.
 */
static void
blank_comments(char *s, size_t n)
{
	enum { CODE, DQ, SQ, LINE, BLOCK } st = CODE;
	int start = 1;	/* a token may start here */
	size_t i;

	for (i = 0; i < n; i++) {
		char c = s[i];

		switch (st) {
		case CODE:
			if (c == '"' || c == '\'') {
				st = c == '"' ? DQ : SQ;
			} else if (c == '#' || (start && c == '/' && i + 1 < n && s[i + 1] == '/')) {
				st = LINE;
				s[i] = ' ';
			} else if (start && c == '/' && i + 1 < n && s[i + 1] == '*') {
				st = BLOCK;
				s[i] = s[i + 1] = ' ';
				i++;
			} else {
				start = strchr(" \t\r\n={}(),", c) != NULL;
			}
			break;
		case DQ:
		case SQ:
			if (c == '\\' && i + 1 < n)
				i++;
			else if (c == (st == DQ ? '"' : '\'')) {
				st = CODE;
				start = 1;
			}
			break;
		case LINE:
			if (c == '\n') {
				st = CODE;
				start = 1;
			} else {
				s[i] = ' ';
			}
			break;
		case BLOCK:
			if (c == '*' && i + 1 < n && s[i + 1] == '/') {
				s[i] = s[i + 1] = ' ';
				i++;
				st = CODE;
				start = 1;
			} else if (c != '\n') {
				s[i] = ' ';
			}
			break;
		}
	}
}

#define CONF_MAX (1 << 20)

int
confparse_read(const char *path, struct buf *text, struct buf *err)
{
	struct stat st;
	int fd, r, saved;

	/* One open, then fstat and read the same file: what is checked is
	 * what is parsed. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0) {
		buf_printf(err, "%s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		buf_printf(err, "%s: not a regular file\n", path);
		close(fd);
		return -1;
	}
	/* A set-id program (weir-remote, weir-queue) reads what root wrote,
	 * never a file its caller could have written or chosen to leak. */
	if (config_untrusted_env() && (st.st_uid != 0 || (st.st_mode & 022))) {
		buf_printf(err, "%s: a set-id program reads only a file owned by root "
		    "and writable by no one else (owner uid %lu, mode %04o)\n", path,
		    (unsigned long)st.st_uid, (unsigned)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	r = read_fd_all(fd, text, CONF_MAX);
	saved = errno;
	close(fd);
	if (r != 0) {
		buf_printf(err, "%s: %s\n", path, r == -2 ? "larger than 1 MB" : strerror(saved));
		buf_free(text);
		return -1;
	}
	if (memchr(text->s ? text->s : "", '\0', text->len) != NULL) {
		buf_printf(err, "%s: a NUL byte in the file\n", path);
		buf_free(text);
		return -1;
	}
	blank_comments(text->s, text->len);
	return 0;
}

int
confparse(cfg_t *cfg, const char *path, struct buf *err)
{
	struct buf text = BUF_INIT;
	int r;

	if (confparse_read(path, &text, err) < 0)
		return -1;
	r = confparse_text(cfg, path, &text, err);
	buf_free(&text);
	return r;
}

int
confparse_text(cfg_t *cfg, const char *path, const struct buf *text, struct buf *err)
{
	size_t len0 = err->len;
	FILE *fp;
	int r;

	fp = fmemopen(text->s ? text->s : (char *)"", text->len, "r");
	if (fp == NULL) {
		buf_printf(err, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	free(cfg->filename);
	cfg->filename = strdup(path);	/* for the errors: cfg_parse_fp keeps it */
	errbuf = err;
	cfg_set_error_function(cfg, errfunc);
	r = cfg->filename ? cfg_parse_fp(cfg, fp) : CFG_PARSE_ERROR;
	errbuf = NULL;
	fclose(fp);
	if (r == CFG_SUCCESS)
		return 0;
	if (err->len == len0)
		buf_printf(err, "%s: parse error\n", path);
	return -1;
}
