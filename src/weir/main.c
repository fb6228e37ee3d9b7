/*
 * weir: the operator command.  `weir [-c FILE] SUBCOMMAND [ARGS]`.
 * main parses the global option, loads the config and dispatches; the
 * subcommands live in the other files of this folder.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "mail/config.h"
#include "weir/weir.h"

static const struct {
	const char *name;
	int (*fn)(int, char **, struct weir_config *);
	const char *help;
} cmds[] = {
	{ "queue-init",  cmd_queue_init,  "[--split N] [DIR]  create a queue (idempotent)" },
	{ "queue-check", cmd_queue_check, "[DIR]              verify a queue, change nothing" },
	{ "run",         cmd_run,         "                   run weir-gate and weir-send in the foreground" },
	{ "flush",       cmd_flush,       "                   try every deferred message now (through the gate)" },
};

static int
usage(void)
{
	size_t i;

	fprintf(stderr, "usage: weir [-c FILE] COMMAND [ARGS]\n");
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		fprintf(stderr, "  weir %-12s %s\n", cmds[i].name, cmds[i].help);
	return 2;
}

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT;
	const char *cfile = NULL;
	size_t i;
	int ch;

	log_init("weir");
	while ((ch = getopt(argc, argv, "+c:h")) != -1) {
		switch (ch) {
		case 'c':
			cfile = optarg;
			break;
		default:
			return usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		return usage();
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (strcmp(argv[0], cmds[i].name) == 0)
			break;
	if (i == sizeof cmds / sizeof cmds[0]) {
		log_warnx("unknown command \"%s\"", argv[0]);
		return usage();
	}
	if (config_load(&cfg, cfile, &err) < 0) {
		fputs(err.s, stderr);
		return 2;
	}
	return cmds[i].fn(argc, argv, &cfg);
}
