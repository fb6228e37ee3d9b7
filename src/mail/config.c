/*
 * config.c: weir.conf.  Every key is declared once, in keys[] below, with
 * its type, default and range; the libconfuse option list is built from
 * that table, and after parsing the values are copied into struct
 * weir_config.  No other file calls cfg_get*().
 *
 * Errors name the file and line: libconfuse's own (syntax, unknown key,
 * bad integer) through errfunc(), ours (ranges, durations) through the
 * validate callbacks, which run while the parser still knows the line.
 *
 * Trusts: the file's owner (root, or the user running a test queue).
 */
#include <confuse.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/timefmt.h"
#include "mail/config.h"
#include "mail/queue.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc/weir"
#endif

enum ktype { K_STR, K_INT, K_DURATION };

struct key {
	const char *name;
	enum ktype type;
	const char *def;	/* K_STR, K_DURATION; NULL: computed */
	long long idef, min, max; /* K_INT; ranges for K_INT and K_DURATION */
	size_t off;		/* where the value goes in struct weir_config */
};

#define OFF(f) offsetof(struct weir_config, f)
static const struct key keys[] = {
	{ "queue_dir",      K_STR,      "/var/spool/weir", 0, 0, 0, OFF(queue_dir) },
	{ "queue_split",    K_INT,      NULL, QUEUE_SPLIT_DEFAULT, 1, QUEUE_SPLIT_MAX, OFF(queue_split) },
	{ "hostname",       K_STR,      NULL, 0, 0, 0, OFF(hostname) },	/* gethostname() */
	{ "admin",          K_STR,      "postmaster", 0, 0, 0, OFF(admin) },
	{ "policy_file",    K_STR,      SYSCONFDIR "/policy.conf", 0, 0, 0, OFF(policy_file) },
	{ "gate_socket",    K_STR,      "/run/weir/gate.sock", 0, 0, 0, OFF(gate_socket) },
	/* Below the 36 hours after which weir-send removes S2/S3 leftovers
	 * (QUEUE.md), so an injector still running never loses its files. */
	{ "inject_timeout", K_DURATION, "24h", 0, 1, 35 * 3600, OFF(inject_timeout) },
};
#define NKEYS (sizeof keys / sizeof keys[0])

int
config_untrusted_env(void)
{
	return getauxval(AT_SECURE) != 0;
}

static struct buf *errbuf;

static void
errfunc(cfg_t *cfg, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof msg, fmt, ap);
	if (cfg && cfg->filename)
		buf_printf(errbuf, "%s:%d: %s\n", cfg->filename, cfg->line, msg);
	else
		buf_printf(errbuf, "%s\n", msg);
}

static const struct key *
find_key(const char *name)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static int
validate(cfg_t *cfg, cfg_opt_t *opt)
{
	const struct key *k = find_key(opt->name);
	const char *why;
	long long v;

	if (k == NULL)
		return 0;
	switch (k->type) {
	case K_STR:
		if (*cfg_opt_getnstr(opt, 0) == '\0') {
			cfg_error(cfg, "%s must not be empty", k->name);
			return -1;
		}
		return 0;
	case K_INT:
		v = cfg_opt_getnint(opt, 0);
		break;
	case K_DURATION:
		if (duration_parse(cfg_opt_getnstr(opt, 0), &v, &why) < 0) {
			cfg_error(cfg, "%s: \"%s\": %s", k->name, cfg_opt_getnstr(opt, 0), why);
			return -1;
		}
		break;
	default:
		return 0;
	}
	if (v < k->min || v > k->max) {
		cfg_error(cfg, "%s = %lld is out of range %lld..%lld%s", k->name, v, k->min,
		    k->max, k->type == K_DURATION ? " seconds" : "");
		return -1;
	}
	return 0;
}

static void
set_defaults(struct weir_config *c)
{
	char host[256];
	size_t i;
	long long v;
	const char *why;

	memset(c, 0, sizeof *c);
	for (i = 0; i < NKEYS; i++) {
		char *field = (char *)c + keys[i].off;

		switch (keys[i].type) {
		case K_STR:
			if (keys[i].def)
				*(char **)field = xstrdup(keys[i].def);
			break;
		case K_INT:
			*(unsigned *)field = (unsigned)keys[i].idef;
			break;
		case K_DURATION:
			if (duration_parse(keys[i].def, &v, &why) < 0)
				panic("config: bad default for %s", keys[i].name);
			*(long long *)field = v;
			break;
		}
	}
	if (gethostname(host, sizeof host) < 0 || host[0] == '\0')
		strcpy(host, "localhost");
	host[sizeof host - 1] = '\0';
	c->hostname = xstrdup(host);
}

static void
copy_values(struct weir_config *c, cfg_t *cfg)
{
	size_t i;
	const char *why;
	long long v;

	for (i = 0; i < NKEYS; i++) {
		char *field = (char *)c + keys[i].off;

		if (cfg_size(cfg, keys[i].name) == 0)
			continue;
		switch (keys[i].type) {
		case K_STR:
			if (cfg_getstr(cfg, keys[i].name) == NULL)
				break;
			free(*(char **)field);
			*(char **)field = xstrdup(cfg_getstr(cfg, keys[i].name));
			break;
		case K_INT:
			*(unsigned *)field = (unsigned)cfg_getint(cfg, keys[i].name);
			break;
		case K_DURATION:
			if (cfg_getstr(cfg, keys[i].name) &&
			    duration_parse(cfg_getstr(cfg, keys[i].name), &v, &why) == 0)
				*(long long *)field = v;
			break;
		}
	}
}

int
config_load(struct weir_config *c, const char *cfile, struct buf *err)
{
	cfg_opt_t opts[NKEYS + 1];
	const char *path = cfile, *env;
	int explicit = 1, rc = -1;
	size_t i;
	cfg_t *cfg = NULL;
	struct stat st;

	set_defaults(c);
	if (path == NULL && !config_untrusted_env() && (env = getenv("WEIR_CONFIG")) && *env)
		path = env;
	if (path == NULL) {
		path = SYSCONFDIR "/weir.conf";
		explicit = 0;
	}
	for (i = 0; i < NKEYS; i++) {
		cfg_opt_t o;

		if (keys[i].type == K_INT)
			o = (cfg_opt_t)CFG_INT((char *)keys[i].name, keys[i].idef, CFGF_NODEFAULT);
		else
			o = (cfg_opt_t)CFG_STR((char *)keys[i].name, NULL, CFGF_NODEFAULT);
		opts[i] = o;
	}
	opts[NKEYS] = (cfg_opt_t)CFG_END();

	if (stat(path, &st) < 0) {
		if (errno == ENOENT && !explicit)
			goto env_override;	/* no file: every default */
		buf_printf(err, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	/* libconfuse's scanner exits the process on a read error, such as
	 * reading a folder: refuse anything but a regular file first. */
	if (!S_ISREG(st.st_mode)) {
		buf_printf(err, "%s: not a regular file\n", path);
		return -1;
	}
	cfg = cfg_init(opts, CFGF_NONE);
	if (cfg == NULL) {
		buf_printf(err, "%s: cannot initialise the config parser\n", path);
		return -1;
	}
	errbuf = err;
	cfg_set_error_function(cfg, errfunc);
	for (i = 0; i < NKEYS; i++)
		cfg_set_validate_func(cfg, keys[i].name, validate);
	switch (cfg_parse(cfg, path)) {
	case CFG_SUCCESS:
		break;
	case CFG_FILE_ERROR:
		buf_printf(err, "%s: %s\n", path, strerror(errno));
		goto out;
	default:
		if (err->len == 0)
			buf_printf(err, "%s: parse error\n", path);
		goto out;
	}
	copy_values(c, cfg);
	c->file = xstrdup(path);
env_override:
	if (!config_untrusted_env() && (env = getenv("WEIR_QUEUE")) && *env) {
		free(c->queue_dir);
		c->queue_dir = xstrdup(env);
	}
	rc = 0;
out:
	if (cfg)
		cfg_free(cfg);
	errbuf = NULL;
	return rc;
}

void
config_free(struct weir_config *c)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (keys[i].type == K_STR) {
			char **f = (char **)((char *)c + keys[i].off);
			free(*f);
			*f = NULL;
		}
	free(c->file);
	c->file = NULL;
}
