/*
 * weir-queue: qmail-queue(8) compatible injector.  Message on fd 0,
 * envelope on fd 1, exit codes as qmail-queue's (mail/qqcode.h); errors
 * as one line on stderr.  Arguments are ignored, as by qmail-queue.
 *
 * Config: queue_dir (or $WEIR_QUEUE), queue_split, inject_timeout, from
 * $WEIR_CONFIG or SYSCONFDIR/weir.conf.  When installed set-id the
 * environment is ignored (mail/config.c).
 */
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/config.h"
#include "mail/qqcode.h"
#include "queue/inject.h"

static void
on_alarm(int sig)
{
	static const char msg[] = "weir-queue: fatal: inject_timeout expired; nothing queued\n";

	(void)sig;
	inject_abort();
	if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0)
		_exit(QQ_TIMEOUT);
	_exit(QQ_TIMEOUT);
}

static void
on_bug(int sig)
{
	static const char msg[] = "weir-queue: fatal: crashed (internal bug); nothing queued\n";

	(void)sig;
	inject_abort();
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

int
main(int argc, char **argv)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT;
	struct queue q;
	struct inject_params p;
	sigset_t none;

	/* Arguments are ignored, as qmail-queue ignores them. */
	(void)argc;
	(void)argv;
	log_init("weir-queue");
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

	if (config_load(&cfg, NULL, &err) < 0)
		fatalx(QQ_CONFIG, "%s", strtok(err.s, "\n"));
	alarm((unsigned)cfg.inject_timeout);
	if (queue_open(&q, cfg.queue_dir, cfg.queue_split) < 0)
		fatal(QQ_QUEUE_DIR, "open queue %s", cfg.queue_dir);

	p.q = &q;
	p.msgfd = STDIN_FILENO;
	p.envfd = STDOUT_FILENO;
	p.uid = getuid();
	p.pid = getpid();
	_exit(inject(&p));
}
