/* confparse.c: see confparse.h.  Trusts: the file's owner. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "mail/confparse.h"

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

int
confparse(cfg_t *cfg, const char *path, struct buf *err)
{
	struct stat st;
	size_t len0 = err->len;
	int r;

	if (stat(path, &st) < 0) {
		buf_printf(err, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		buf_printf(err, "%s: not a regular file\n", path);
		return -1;
	}
	errbuf = err;
	cfg_set_error_function(cfg, errfunc);
	r = cfg_parse(cfg, path);
	errbuf = NULL;
	switch (r) {
	case CFG_SUCCESS:
		return 0;
	case CFG_FILE_ERROR:
		buf_printf(err, "%s: %s\n", path, strerror(errno));
		return -1;
	default:
		if (err->len == len0)
			buf_printf(err, "%s: parse error\n", path);
		return -1;
	}
}
