/*
 * weir: the operator command.  `weir [-c FILE] SUBCOMMAND [ARGS]`.
 * main parses the global option, loads the config and dispatches; the
 * subcommands live in the other files of this folder.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "weir/weir.h"

/* fn gets the loaded config; raw, for a command that loads (and judges)
 * the config itself, gets the -c argument. */
static const struct {
	const char *name;
	int (*fn)(int, char **, struct weir_config *);
	int (*raw)(int, char **, const char *);
	const char *help;
} cmds[] = {
	{ "queue-init",   cmd_queue_init,  NULL, "[--split N] [DIR]  create a queue (idempotent)" },
	{ "queue-check",  cmd_queue_check, NULL, "[DIR]              verify a queue, change nothing" },
	{ "run",          cmd_run,         NULL, "                   run weir-gate and weir-send in the foreground" },
	{ "flush",        cmd_flush,       NULL, "                   try every deferred message now (through the gate)" },
	{ "hold",         cmd_control,     NULL, "[-w S] ID...       keep messages: no attempt, no expiry" },
	{ "release",      cmd_control,     NULL, "[-w S] ID...       let held messages go (tried now)" },
	{ "delete",       cmd_control,     NULL, "[-w S] ID...|--all|--from PAT|--to PAT  remove messages, no bounce" },
	{ "requeue",      cmd_control,     NULL, "[-w S] [--via UP] ID... try now (through the gate; UP's)" },
	{ "resume",       cmd_resume,      NULL, "UPSTREAM           lift the upstream's suspension now (weir-gate)" },
	{ "queue",        cmd_queue,       NULL, "[--json]           list the queue, as mailq" },
	{ "status",       cmd_status,      NULL, "[--json|--watch]   the gate, the queue, the time to drain it" },
	{ "check-config", NULL, cmd_check_config, "                   check weir.conf and the policy, say every error" },
	{ "presets",      cmd_presets,     NULL, "[NAME...]          the provider presets: relay, limits, sources" },
	{ "test-relay",   cmd_test_relay,  NULL, "[-v] [UPSTREAM...] token, connect, TLS, AUTH to each upstream; send nothing" },
	{ "auth",         cmd_auth,        NULL, "login UPSTREAM     OAuth: sign in (device code or browser), save the tokens" },
	{ "auth",         cmd_auth,        NULL, "status [UPSTREAM...] OAuth: each token's expiry, age and last error" },
};

/* The usage: asked for (weir help, --help) on stdout, exit 0; after a
 * mistake on stderr, exit 2. */
static int
usage_to(FILE *f, int code)
{
	size_t i;

	fprintf(f, "usage: weir [-c FILE] COMMAND [ARGS]\n");
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		fprintf(f, "  weir %-13s%s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "  weir help               this text (also --help); weir --version\n");
	if (fflush(f) != 0)
		return code ? code : 1;
	return code;
}

static int
usage(void)
{
	return usage_to(stderr, 2);
}

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT;
	const char *cfile = NULL;
	sigset_t hup, old;
	size_t i;
	int ch;

	/* `weir run` may be told to reload (SIGHUP) at any instant, also
	 * before its event loop says what SIGHUP means: blocked from here,
	 * the signal waits instead of killing it.  Other commands get their
	 * mask back as soon as they are known. */
	log_init("weir");
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &hup, &old) < 0)
		fatal(111, "sigprocmask");
	if (argc > 1 && strcmp(argv[1], "--version") == 0)
		return usage_std(argc, argv, "weir", "");
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0))
		return usage_to(stdout, 0);
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
	if (cmds[i].fn != cmd_run && sigprocmask(SIG_SETMASK, &old, NULL) < 0)
		fatal(111, "sigprocmask");
	if (cmds[i].raw)
		return cmds[i].raw(argc, argv, cfile);
	if (config_load(&cfg, cfile, &err) < 0) {
		fputs(err.s, stderr);
		return 2;
	}
	return cmds[i].fn(argc, argv, &cfg);
}
