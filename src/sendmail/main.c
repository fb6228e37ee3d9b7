/*
 * main.c: sendmail, mailq and newaliases (one program; argv[0] "mailq"
 * lists the queue, "newaliases" has nothing to do).  Parses argv, loads
 * the config (-C FILE, else $WEIR_CONFIG, else the default file) the
 * injectors' lenient way (config.h: only where the queue is must be
 * readable; any other error is one warning and the mail is queued), and
 * runs the mode.  Runs with the invoking user's privilege, no more.
 * See sendmail.h.
 */
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "sendmail/sendmail.h"

static const char help[] =
    "usage: sendmail [-itv] [-f SENDER] [-F NAME] [-N never] [-o OPTION] [-C FILE]\n"
    "                [--] RECIPIENT...     queue the message on standard input\n"
    "       sendmail -t [-i] ...           recipients also from To:, Cc:, Bcc:\n"
    "       sendmail -bp | mailq           list the queue\n"
    "       sendmail -bs                   an SMTP session on standard input/output\n"
    "       sendmail -bv RECIPIENT...      say where each address would go\n"
    "       sendmail -q                    (root) try every deferred message now\n"
    "       sendmail -bi | newaliases      nothing to do\n"
    "Postfix's other sendmail options are accepted; see sendmail(8).\n";

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct sm_opts o;
	struct buf err = BUF_INIT, warn = BUF_INIT;
	int rc;

	log_init_tool(argc > 0 && argv[0] ? argv[0] : "sendmail");
	if ((rc = usage_std(argc, argv, log_progname(), help)) >= 0)
		return rc;
	alloc_set_exit_status(EX_TEMPFAIL);
	if (sm_stdfds() < 0)
		return EX_OSERR;
	rc = sm_parse_args(argc, argv, &o, &err);
	if (rc != 0) {
		sm_say("%s", buf_cstr(&err));
		buf_free(&err);
		return rc;
	}
	switch (o.mode) {
	case SM_NEWALIASES:
		return sm_newaliases_run();
	case SM_FLUSH: case SM_SMTP:
		/* weir and weir-smtpd load the config themselves. */
		if (o.config && setenv("WEIR_CONFIG", o.config, 1) < 0) {
			sm_say("setenv: out of memory");
			return EX_TEMPFAIL;
		}
		return o.mode == SM_FLUSH ? sm_flush_run(&o) : sm_smtp_run(&o);
	default:
		break;
	}
	rc = config_load_inject(&cfg, o.config, &warn, &err);
	if (rc < 0) {
		sm_say("configuration: %s", strtok(err.s, "\n"));
		buf_free(&err);
		buf_free(&warn);
		return EX_TEMPFAIL;
	}
	if (rc > 0) {
		config_inject_warning(&warn, &err);
		sm_say("warning: %s", buf_cstr(&err));
		/* weir-queue (below) need not say it again; nor fail on -C's file. */
		if (setenv("WEIR_CONFIG_WARNED", "1", 1) < 0) {
			sm_say("setenv: out of memory");
			return EX_TEMPFAIL;
		}
	}
	/* weir-queue reads the same file, unless it is set-id (then only its own). */
	if (o.config && setenv("WEIR_CONFIG", o.config, 1) < 0) {
		sm_say("setenv: out of memory");
		return EX_TEMPFAIL;
	}
	switch (o.mode) {
	case SM_LIST: rc = mailq_run(&cfg); break;
	case SM_VERIFY: rc = sm_verify_run(&o, &cfg); break;
	default: rc = sendmail_run(&o, &cfg); break;
	}
	config_free(&cfg);
	buf_free(&err);
	buf_free(&warn);
	return rc;
}
