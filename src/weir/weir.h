/*
 * weir.h: the operator command's subcommands.  Each takes its own argv
 * (argv[0] is the subcommand name) and the loaded config, and returns the
 * exit status.
 */
#ifndef WEIR_WEIR_H
#define WEIR_WEIR_H

#include "mail/config.h"

int cmd_queue_init(int argc, char **argv, struct weir_config *cfg);
int cmd_queue_check(int argc, char **argv, struct weir_config *cfg);
int cmd_run(int argc, char **argv, struct weir_config *cfg);
int cmd_flush(int argc, char **argv, struct weir_config *cfg);

#endif
