/*
 * main.c: sendmail and mailq (the same program; argv[0] "mailq" lists
 * the queue).  Parses argv, loads the config ($WEIR_CONFIG, else the
 * default file; sendmail has no -c), and calls sendmail_run() or
 * mailq_run().  Runs with the invoking user's privilege, no more.
 * See sendmail.h.
 */
#include <sysexits.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/config.h"
#include "sendmail/sendmail.h"

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct sm_opts o;
	struct buf err = BUF_INIT;
	int rc;

	log_init(argc > 0 && argv[0] ? argv[0] : "sendmail");
	alloc_set_exit_status(EX_TEMPFAIL);
	if (sm_stdfds() < 0)
		return EX_OSERR;
	rc = sm_parse_args(argc, argv, &o, &err);
	if (rc != 0) {
		sm_say("%s", buf_cstr(&err));
		buf_free(&err);
		return rc;
	}
	if (config_load(&cfg, NULL, &err) < 0) {
		sm_say("configuration: %s", buf_cstr(&err));
		buf_free(&err);
		return EX_TEMPFAIL;
	}
	rc = o.mode == SM_LIST ? mailq_run(&cfg) : sendmail_run(&o, &cfg);
	config_free(&cfg);
	buf_free(&err);
	return rc;
}
