/*
 * weir-queue: qmail-queue(8) compatible injector.  Message on fd 0,
 * envelope on fd 1, exit codes as qmail-queue's (mail/qqcode.h); errors
 * as one line on stderr.  Arguments are ignored, as by qmail-queue.
 *
 * Config: queue_dir (or $WEIR_QUEUE), queue_split, inject_timeout, from
 * $WEIR_CONFIG or SYSCONFDIR/weir.conf, loaded the injectors' lenient
 * way (config.h): a file with errors elsewhere is one warning on stderr
 * (none if $WEIR_CONFIG_WARNED says the caller said it) and the message
 * is queued; only a file that leaves the queue's place unknown is
 * refused (exit 81).  When installed set-id the environment is ignored
 * (mail/config.c), but for the warning's switch, which can only keep a
 * warning quiet.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/decimal.h"
#include "lib/log.h"
#include "lib/usage.h"
#include "mail/config.h"
#include "mail/qqcode.h"
#include "mail/inject.h"

static void
on_alarm(int sig)
{
	static const char msg[] = "weir-queue: fatal: inject_timeout expired; nothing queued\n";

	(void)sig;
	qinject_abort();
	if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0)
		_exit(QQ_TIMEOUT);
	_exit(QQ_TIMEOUT);
}

static void
on_bug(int sig)
{
	static const char msg[] = "weir-queue: fatal: crashed (internal bug); nothing queued\n";

	(void)sig;
	qinject_abort();
	if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0)
		_exit(QQ_BUG);
	_exit(QQ_BUG);
}

static void
catch(int sig, void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) < 0)
		fatal(QQ_BUG, "sigaction");
}

/*
 * $WEIR_QUEUE_IDFD: a descriptor the caller (mail/qqclient.c) gave us
 * for the new message's id, weir's extension of qmail-queue's interface.
 * Only a descriptor already open at start and above 2, so that it can
 * never be one of the queue's files; anything else is ignored, with a
 * line.
 */
static int
id_fd(void)
{
	const char *v = getenv("WEIR_QUEUE_IDFD");
	uint64_t fd;

	if (v == NULL || *v == '\0')
		return -1;
	if (dec_parse(v, strlen(v), 1024, &fd) < 0 || fd < 3 || fcntl((int)fd, F_GETFD) < 0) {
		log_warnx("$WEIR_QUEUE_IDFD = \"%.20s\" is not an open descriptor above 2; "
		    "the id is not told", v);
		return -1;
	}
	return (int)fd;
}

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT, warn = BUF_INIT;
	struct queue q;
	const char *warned;
	int rc;
	struct qinject_who who;
	sigset_t none;
	int idfd;

	/* Arguments are ignored, as qmail-queue ignores them, but for the
	 * first alone being --help or --version. */
	log_init_tool("weir-queue");
	if ((rc = usage_std(argc, argv, "weir-queue", "usage: weir-queue   (message on "
	    "fd 0, envelope on fd 1, as qmail-queue; see weir-queue(8))\n")) >= 0)
		return rc;
	alloc_set_exit_status(QQ_NOMEM);
	umask(033);
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		fatal(QQ_BUG, "sigprocmask");
	signal(SIGPIPE, SIG_IGN);
	catch(SIGALRM, on_alarm);
	catch(SIGSEGV, on_bug);
	catch(SIGBUS, on_bug);
	catch(SIGILL, on_bug);
	catch(SIGFPE, on_bug);
	/* Before we open anything: the descriptor must be the caller's. */
	idfd = id_fd();

	rc = config_load_inject(&cfg, NULL, &warn, &err);
	if (rc < 0)
		fatalx(QQ_CONFIG, "%s", strtok(err.s, "\n"));
	warned = getenv("WEIR_CONFIG_WARNED");
	if (rc > 0 && (warned == NULL || strcmp(warned, "1") != 0)) {
		config_inject_warning(&warn, &err);
		log_warnx("%s", buf_cstr(&err));
	}
	alarm((unsigned)cfg.inject_timeout);
	if (queue_open(&q, cfg.queue_dir, cfg.queue_split) < 0)
		fatal(QQ_QUEUE_DIR, "open queue %s", cfg.queue_dir);

	who.uid = getuid();
	who.pid = getpid();
	_exit(qinject_fds(&q, &who, STDIN_FILENO, STDOUT_FILENO, idfd));
}
