/*
 * config.h: weir.conf, loaded once at start-up into a typed struct.  Each
 * key is declared once, with its default, in the table in config.c; no
 * other file calls libconfuse.
 *
 * Which file: -c FILE, else $WEIR_CONFIG, else SYSCONFDIR/weir.conf (which
 * may be absent: then every key has its default).  $WEIR_QUEUE overrides
 * queue_dir.  In a set-id process (AT_SECURE) the environment is ignored.
 */
#ifndef WEIR_CONFIG_H
#define WEIR_CONFIG_H

#include "lib/buf.h"

struct weir_config {
	char *file;		/* the file read, or NULL: defaults only */
	char *queue_dir;	/* queue_dir */
	unsigned queue_split;	/* queue_split: qmail's conf-split */
	char *hostname;		/* hostname: default host for bare names */
	char *admin;		/* admin: local recipients, double bounces */
	char *policy_file;	/* policy_file: weir-gate's windows and caps */
	char *gate_socket;	/* gate_socket: weir-gate's local socket */
	long long inject_timeout; /* inject_timeout, seconds */
};

/* Is this a set-id process whose environment must not be trusted? */
int config_untrusted_env(void);

/* Load the config.  cfile is -c's argument or NULL.  0 ok; -1 with every
 * error, "file:line: what", in err. */
int config_load(struct weir_config *c, const char *cfile, struct buf *err);
void config_free(struct weir_config *c);

#endif
