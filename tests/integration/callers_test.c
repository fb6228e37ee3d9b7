/*
 * callers_test.c: the exact command lines with which Debian 12's programs
 * (and the common libraries of scripts) run /usr/sbin/sendmail, against
 * weir's sendmail on a scratch queue: each must exit 0 and leave the
 * message queued with the envelope the caller meant.  Where Debian ships
 * the program and it is installed here (bsd-mailx's mail, mutt), the real
 * program runs, told to use weir's sendmail by its own setting; the
 * machine's /usr/sbin/sendmail is never touched.  cron's own run is in
 * the package test (tests/package/run.sh), which has a Debian root.
 *
 * Each command line carries a comment naming where it comes from.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "sendmail_helpers.h"

static struct qt q;

static void setup(void) { smt_setup(&q); }
static void teardown(void) { qt_teardown(&q); }

TestSuite(callers, .init = setup, .fini = teardown, .timeout = 120);

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Run argv (argv[0] a path) with q's environment and HOME in q.tmp, in on
 * stdin: it must exit 0 and leave exactly one message from sender to
 * rcpts; what (if not NULL) must be in the queued message.  The queue
 * is emptied afterwards. */
static void
caller(const char *who, const char *const *argv, const char *in, const char *sender,
    const char *const *rcpts, const char *what)
{
	char *home = xasprintf("HOME=%s", q.tmp);
	const char *env[12];
	struct tl_run run = { .argv = argv, .env = env, .in = in, .inlen = strlen(in),
		.timeout_s = 60 };
	struct tl_result r;
	unsigned long *ids;
	struct qt_msg m;
	size_t i, n = 0;

	for (i = 0; i < 8 && q.envs[i]; i++)
		env[n++] = q.envs[i];
	env[n++] = home;
	env[n] = NULL;
	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "%s: exit %d\nstdout: %s\nstderr: %s", who, r.status,
	    buf_cstr(&r.out), buf_cstr(&r.err));
	cr_assert_eq(qt_list(&q, "todo", &ids), 1u, "%s: not one message queued", who);
	qt_load(&q, ids[0], 0, time(NULL) + 1, &m);
	smt_assert_env(&m, sender, rcpts);
	if (what)
		cr_assert(strstr(buf_cstr(&m.body), what), "%s: no \"%s\" in\n%s", who, what,
		    m.body.s);
	qt_msg_free(&m);
	free(ids);
	tl_result_free(&r);
	tl_rmtree(q.qdir);
	qt_init_queue(&q);
	free(home);
}

/* A command line as a program gives it to popen(3) or system(3):
 * "sendmail ARGS", run by /bin/sh with weir's sendmail in its place. */
static void
shell_line(const char *who, const char *args, const char *in, const char *sender,
    const char *const *rcpts, const char *what)
{
	char *bin = tl_bin("sendmail"), *line = xasprintf("%s %s", bin, args);

	caller(who, ARGS("/bin/sh", "-c", line), in, sender, rcpts, what);
	free(line);
	free(bin);
}

/* An exec-style argv: "sendmail" replaced by weir's. */
static void
exec_line(const char *who, const char *const *args, const char *in, const char *sender,
    const char *const *rcpts, const char *what)
{
	const char *argv[16];
	char *bin = tl_bin("sendmail");
	size_t i;

	argv[0] = bin;
	for (i = 0; args[i]; i++) {
		cr_assert(i < 14);
		argv[i + 1] = args[i];
	}
	argv[i + 1] = NULL;
	caller(who, argv, in, sender, rcpts, what);
	free(bin);
}

Test(callers, cron)
{
	char *login = smt_login_addr();
	const char *in = "From: root (Cron Daemon)\nTo: root\n"
	    "Subject: Cron <root@box> /usr/local/bin/job\nMIME-Version: 1.0\n"
	    "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n"
	    "X-Cron-Env: <SHELL=/bin/sh>\n\nthe job's output\n";

	/* Debian 12's cron 3.0pl1-162, do_command.c: popen() of
	 * "%s -FCronDaemon -i -B8BITMIME -oem  %s" (strings /usr/sbin/cron),
	 * MAILTO unset: the crontab's owner. */
	shell_line("cron", "-FCronDaemon -i -B8BITMIME -oem  root", in, login,
	    ARGS("root@" SMT_HOST), "the job's output");
	/* MAILTO with two addresses: the list is one shell word each. */
	shell_line("cron MAILTO list", "-FCronDaemon -i -B8BITMIME -oem  a@example.org b@example.net",
	    in, login, ARGS("a@example.org", "b@example.net"), NULL);
	/* cron before Debian added -B8BITMIME (Debian 11 and older). */
	shell_line("cron (old)", "-FCronDaemon -i -oem root", in, login,
	    ARGS("root@" SMT_HOST), NULL);
	free(login);
}

Test(callers, anacron)
{
	char *login = smt_login_addr();

	/* anacron 2.3 (Debian 12), runjob.c: execl(SENDMAIL, SENDMAIL,
	 * "-FAnacron", "-odi", mailto, NULL) (strings /usr/sbin/anacron). */
	exec_line("anacron", ARGS("-FAnacron", "-odi", "root"),
	    "To: root\nSubject: Anacron job 'cron.daily' on box\n\noutput\n", login,
	    ARGS("root@" SMT_HOST), "\n\noutput\n");
	free(login);
}

Test(callers, mdadm)
{
	char *login = smt_login_addr();

	/* mdadm 4.2 (Debian 12), Monitor.c: popen(Sendmail, "w") with
	 * Sendmail "/usr/sbin/sendmail -t"; recipients from its To: line. */
	shell_line("mdadm", "-t",
	    "From: mdadm monitoring <root>\nTo: root\nSubject: Fail event on /dev/md0:box\n\n"
	    "This is an automatically generated mail message from mdadm\n",
	    login, ARGS("root@" SMT_HOST), "From: mdadm monitoring <root>\n");
	free(login);
}

Test(callers, unattended_upgrades)
{
	char *login = smt_login_addr();

	/* unattended-upgrades 2.9 (Debian 12), _send_mail_using_sendmail():
	 * subprocess.Popen([SENDMAIL_BINARY, "-oi", "-t"], stdin=PIPE). */
	exec_line("unattended-upgrades", ARGS("-oi", "-t"),
	    "Subject: unattended-upgrades result for box: SUCCESS\nFrom: root\n"
	    "To: root\nAuto-Submitted: auto-generated\n\nUnattended upgrade result\n",
	    login, ARGS("root@" SMT_HOST), "Auto-Submitted: auto-generated\n");
	free(login);
}

Test(callers, apticron_and_logwatch)
{
	char *login = smt_login_addr();

	/* apticron 1.2.5 (Debian 12): the report, with its To: and
	 * Subject:, piped to "/usr/sbin/sendmail -t". */
	shell_line("apticron", "-t",
	    "To: admin@example.org\nSubject: 3 package update(s) for box\n\n"
	    "apticron report\n", login, ARGS("admin@example.org"), NULL);
	/* logwatch 7.7 (Debian 12), logwatch.conf: mailer =
	 * "/usr/sbin/sendmail -t", run through a pipe open. */
	shell_line("logwatch", "-t",
	    "To: root\nFrom: Logwatch <root>\nSubject: Logwatch for box (Linux)\n"
	    "MIME-Version: 1.0\nContent-Type: text/plain; charset=\"UTF-8\"\n\n report\n",
	    login, ARGS("root@" SMT_HOST), NULL);
	free(login);
}

Test(callers, git_send_email)
{
	const char *in = "From: Dev <dev@example.org>\nTo: list@example.net\n"
	    "Cc: maint@example.net\nSubject: [PATCH] fix\nDate: Mon, 23 Nov 2026 10:00:00 +0000\n"
	    "Message-Id: <20261123100000.1-1-dev@example.org>\nX-Mailer: git-send-email 2.39.2\n"
	    "\n---\n diff\n";

	/* git 2.39 (Debian 12), git-send-email.perl send_message():
	 * @sendmail_parameters = ('-i', @recipients), with '-f', $raw_from
	 * put first when an envelope sender is set; exec'd as
	 * sh -c '$sendmail_cmd "$@"'. */
	char *login = smt_login_addr();

	exec_line("git send-email", ARGS("-i", "list@example.net", "maint@example.net"), in,
	    login, ARGS("list@example.net", "maint@example.net"), NULL);
	exec_line("git send-email --envelope-sender",
	    ARGS("-f", "dev@example.org", "-i", "list@example.net", "maint@example.net"), in,
	    "dev@example.org", ARGS("list@example.net", "maint@example.net"),
	    "X-Mailer: git-send-email");
	free(login);
}

Test(callers, php_python_perl)
{
	char *login = smt_login_addr();
	const char *in = "To: user@example.net\nSubject: hello\nFrom: web@example.org\n\nbody\n";

	/* PHP 8.2 (Debian 12) mail(): sendmail_path default
	 * "/usr/sbin/sendmail -t -i", popen()ed; the fifth argument
	 * (additional_params) appended, often "-f address". */
	shell_line("PHP mail()", "-t -i", in, login, ARGS("user@example.net"), NULL);
	shell_line("PHP mail() -f", "-t -i -fweb@example.org", in, "web@example.org",
	    ARGS("user@example.net"), NULL);
	/* Python's email documentation and most scripts:
	 * Popen(["/usr/sbin/sendmail", "-t", "-oi"], stdin=PIPE). */
	exec_line("Python", ARGS("-t", "-oi"), in, login, ARGS("user@example.net"), NULL);
	/* Perl: MIME::Lite's default "/usr/lib/sendmail -t -oi -oem";
	 * Mail::Mailer's sendmail: exec of sendmail -t (plus -oi);
	 * Email::Sender::Transport::Sendmail: sendmail -i -f FROM RCPT... */
	shell_line("MIME::Lite", "-t -oi -oem", in, login, ARGS("user@example.net"), NULL);
	exec_line("Email::Sender", ARGS("-i", "-f", "web@example.org", "user@example.net"),
	    in, "web@example.org", ARGS("user@example.net"), NULL);
	free(login);
}

/* The real mail of bsd-mailx (Debian 12), as smartd's smartd_warning.sh
 * and many scripts run it: it runs its "sendmail" setting with -i -t,
 * set here in the file $MAILRC names. */
Test(callers, bsd_mailx)
{
	char *login = smt_login_addr(), *bin = tl_bin("sendmail");
	char *rc = xasprintf("%s/mailrc", q.tmp), *rctext = xasprintf("set sendmail=%s\n", bin);
	char *mailrc = xasprintf("MAILRC=%s", rc);

	if (access("/usr/bin/bsd-mailx", X_OK) != 0)
		cr_skip_test("bsd-mailx is not installed");
	tl_write(rc, rctext, strlen(rctext));
	qt_setenv(&q, mailrc);
	/* smartmontools 7.3 (Debian 12), smartd_warning.sh:
	 * mail -s "$SMARTD_SUBJECT" $SMARTD_ADDRESS, the message on stdin. */
	caller("bsd-mailx", ARGS("/usr/bin/bsd-mailx", "-s", "SMART error (ATA) on box", "root"),
	    "Device: /dev/sda, ATA error count increased\n", login, ARGS("root@" SMT_HOST),
	    "Subject: SMART error (ATA) on box\n");
	free(mailrc);
	free(rctext);
	free(rc);
	free(bin);
	free(login);
}

/* The real mutt (Debian 12), batch mode, with its default sendmail
 * setting ("/usr/sbin/sendmail -oem -oi") pointed at weir's: it runs it
 * with -oem -oi -- RECIPIENT. */
Test(callers, mutt)
{
	char *login = smt_login_addr(), *bin = tl_bin("sendmail");
	char *rc = xasprintf("%s/muttrc", q.tmp);
	char *rctext = xasprintf("set sendmail=\"%s -oem -oi\"\nset folder=%s\nset record=\"\"\n"
	    "set tmpdir=%s\nset hostname=%s\n", bin, q.tmp, q.tmp, SMT_HOST);

	if (access("/usr/bin/mutt", X_OK) != 0)
		cr_skip_test("mutt is not installed");
	tl_write(rc, rctext, strlen(rctext));
	caller("mutt", ARGS("/usr/bin/mutt", "-n", "-F", rc, "-s", "from mutt", "--",
	    "someone@example.net"), "typed in mutt\n", login, ARGS("someone@example.net"),
	    "Subject: from mutt\n");
	free(rctext);
	free(rc);
	free(bin);
	free(login);
}

/* ---- what a user types first: --help, --version, weir help ---- */

TestSuite(usage, .init = setup, .fini = teardown, .timeout = 60);

static void
answers(const char *prog, const char *arg, const char *want)
{
	char *bin = tl_bin(prog);
	const char *argv[] = { bin, arg, NULL };
	struct tl_run run = { .argv = argv, .env = (const char *const *)q.envs };
	struct tl_result r;

	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "%s %s: exit %d: %s", prog, arg, r.status, buf_cstr(&r.err));
	cr_assert_eq(r.err.len, 0, "%s %s: stderr: %s", prog, arg, buf_cstr(&r.err));
	cr_assert(strncmp(buf_cstr(&r.out), want, strlen(want)) == 0 &&
	    r.out.s[r.out.len - 1] == '\n', "%s %s: stdout: %s", prog, arg, buf_cstr(&r.out));
	tl_result_free(&r);
	free(bin);
}

/* debian/changelog's latest version: "weir (VERSION) ..." on line 1. */
static char *
changelog_version(void)
{
	char *path = tl_src_path("debian/changelog"), *open, *close, *v;
	struct buf b = BUF_INIT;

	tl_read(path, &b);
	open = strchr(buf_cstr(&b), '(');
	close = open ? strchr(open, ')') : NULL;
	cr_assert(strncmp(buf_cstr(&b), "weir (", 6) == 0 && close &&
	    memchr(b.s, '\n', (size_t)(close - b.s)) == NULL, "%s: line 1 is not weir (VERSION)",
	    path);
	v = xasprintf("%.*s", (int)(close - open - 1), open + 1);
	buf_free(&b);
	free(path);
	return v;
}

Test(usage, every_program_answers_help_and_version)
{
	static const char *const progs[] = {
		"weir", "weir-gate", "weir-send", "weir-remote", "weir-queue", "weir-smtpd",
		"sendmail",
	};
	char *version = changelog_version();
	size_t i;

	for (i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		char *v = xasprintf("%s (weir) %s\n", progs[i], version);

		answers(progs[i], "--help", "usage: ");
		answers(progs[i], "--version", v);
		free(v);
	}
	answers("weir", "help", "usage: weir [-c FILE] COMMAND");
	answers("mailq", "--help", "usage: sendmail");
	answers("mailq", "--version", "mailq (weir) ");
	free(version);
	qt_assert_clean(&q, "--help");
}
