/*
 * weir.h: the operator command's subcommands.  Each takes its own argv
 * (argv[0] is the subcommand name) and the loaded config, and returns the
 * exit status; check-config instead loads the config itself, as its
 * errors are what it reports.
 */
#ifndef WEIR_WEIR_H
#define WEIR_WEIR_H

#include <time.h>

#include "lib/buf.h"
#include "mail/config.h"

int cmd_queue_init(int argc, char **argv, struct weir_config *cfg);
int cmd_queue_check(int argc, char **argv, struct weir_config *cfg);
int cmd_run(int argc, char **argv, struct weir_config *cfg);
int cmd_flush(int argc, char **argv, struct weir_config *cfg);
int cmd_queue(int argc, char **argv, struct weir_config *cfg);
int cmd_status(int argc, char **argv, struct weir_config *cfg);
/* hold, release, delete, requeue: argv[0] says which (control.c). */
int cmd_control(int argc, char **argv, struct weir_config *cfg);
int cmd_resume(int argc, char **argv, struct weir_config *cfg);
int cmd_test_relay(int argc, char **argv, struct weir_config *cfg);
/* presets [NAME...]: the provider presets and their limits (presets.c). */
int cmd_presets(int argc, char **argv, struct weir_config *cfg);
/* auth login UPSTREAM, auth status [UPSTREAM...] (auth.c). */
int cmd_auth(int argc, char **argv, struct weir_config *cfg);
/* For weir status: each oauth upstream's token state, as lines (under a
 * heading) or as JSON objects separated by commas (auth.c). */
void auth_status_out(struct buf *o, const struct weir_config *cfg, int json, time_t now);
/* Loads the config itself (its errors are findings): gets -c's argument. */
int cmd_check_config(int argc, char **argv, const char *cfile);
/* The errors weir run refuses to start with, as check-config says them,
 * a line each in out ("FILE:LINE: what"): the policy file does not
 * load, or it and weir.conf disagree (an upstream without a policy
 * section, a fallback without one of its own).  How many. */
int check_config_refusals(const struct weir_config *c, struct buf *out);
/* check-config --reply: what reply means at each step for each upstream
 * of c, with pol (NULL: none read) and weir.conf's text for lines
 * (replycheck.c); the exit status. */
struct policy;
int check_reply(const struct weir_config *c, const struct policy *pol, const char *text,
    const char *reply);

#endif
