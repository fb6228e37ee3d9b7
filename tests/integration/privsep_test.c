/*
 * privsep_test.c: privilege separation as the package installs it, with
 * the real binaries, as root (skipped otherwise): weir-gate, weir-smtpd -l
 * and weir-send drop to the configured account (checked in
 * /proc/PID/status); an account that does not exist is a fatal error
 * that names it; weir queue-init gives the queue to send_user and
 * queue_group; a set-group-id copy of weir-queue run by uid 65534 queues
 * into the compiled-in queue only, with files weir-send (another user)
 * then preprocesses; a set-user-id copy of weir-remote run by another
 * uid reads a secret its caller cannot, gives up the owner's rights
 * before it connects, can still be killed by its caller (and by no one
 * else), and dies with its caller in -n mode.
 *
 * Only existing accounts are used: nobody (65534), daemon (1), bin (2)
 * and the groups nogroup and mail.  No account is created.  The
 * compiled-in SYSCONFDIR is reached through a private mount namespace
 * in which an overlay adds the test's weir.conf; the host's /etc is not
 * touched.  Every process started here is killed in teardown.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "lib/alloc.h"
#include "mail/queue.h"
#include "relay_helpers.h"
#include "testlib.h"

#define SETPRIV "/usr/bin/setpriv"

static char *top;
static pid_t kids[8];
static size_t nkids;

static void
setup(void)
{
	if (!tl_is_root())
		cr_skip_test("needs root: the privilege drops are the point");
	signal(SIGPIPE, SIG_IGN);
	top = tl_tmpdir();
	cr_assert(chmod(top, 0755) == 0);
	unsetenv("WEIR_CONFIG");
	unsetenv("WEIR_QUEUE");
}

static void
teardown(void)
{
	size_t i;

	for (i = 0; i < nkids; i++) {
		kill(-kids[i], SIGKILL);
		kill(kids[i], SIGKILL);
		while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
			;
	}
	nkids = 0;
	if (top) {
		tl_rmtree(top);
		free(top);
		top = NULL;
	}
}

TestSuite(privsep, .init = setup, .fini = teardown, .timeout = 60);

static char *
path(const char *rel)
{
	return xasprintf("%s/%s", top, rel);
}

static void
put(const char *rel, const char *text)
{
	char *p = path(rel);

	tl_write(p, text, strlen(text));
	free(p);
}

/* argv in the background, in its own process group, dying with us;
 * stdout and stderr to top/log; extra environment entries. */
static pid_t
spawn(const char *const *argv, const char *const *env, const char *log)
{
	char *lp = path(log);
	pid_t pid = fork();
	int fd, i;

	cr_assert(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fd = open(lp, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		fd = open("/dev/null", O_RDONLY);
		if (fd < 0 || dup2(fd, 0) < 0)
			_exit(126);
		for (i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	cr_assert(nkids < sizeof kids / sizeof kids[0]);
	kids[nkids++] = pid;
	free(lp);
	return pid;
}

/* Wait up to ms for the file top/rel to hold needle (or, needle NULL,
 * to exist).  1 found. */
static int
wait_for(const char *rel, const char *needle, int ms)
{
	char *p = path(rel);
	struct buf b = BUF_INIT;
	struct stat st;
	int i, found = 0;

	for (i = 0; i < ms / 50 && !found; i++) {
		if (stat(p, &st) == 0) {
			if (needle == NULL)
				found = 1;
			else {
				tl_read(p, &b);
				found = strstr(buf_cstr(&b), needle) != NULL;
			}
		}
		if (!found)
			usleep(50000);
	}
	buf_free(&b);
	free(p);
	return found;
}

/* The line "Key:\t..." of /proc/PID/status, malloc'ed ("" if none). */
static char *
status_line(pid_t pid, const char *key)
{
	char *p = xasprintf("/proc/%ld/status", (long)pid), *line, *end, *res;
	struct buf b = BUF_INIT;

	tl_read(p, &b);
	line = strstr(buf_cstr(&b), key);
	if (line == NULL)
		res = xstrdup("");
	else {
		line += strlen(key);
		while (*line == '\t' || *line == ' ')
			line++;
		end = strchr(line, '\n');
		res = end ? xasprintf("%.*s", (int)(end - line), line) : xstrdup(line);
	}
	buf_free(&b);
	free(p);
	return res;
}

/* Assert pid's real, effective, saved and fs uid and gid are all uid and
 * gid, and its supplementary groups are exactly groups (" "-separated). */
static void
assert_ids(pid_t pid, unsigned uid, unsigned gid, const char *groups)
{
	char *u = status_line(pid, "Uid:"), *g = status_line(pid, "Gid:");
	char *gr = status_line(pid, "Groups:");
	char *wu = xasprintf("%u\t%u\t%u\t%u", uid, uid, uid, uid);
	char *wg = xasprintf("%u\t%u\t%u\t%u", gid, gid, gid, gid);
	size_t n = strlen(gr);

	while (n > 0 && gr[n - 1] == ' ')
		gr[--n] = '\0';
	cr_assert_str_eq(u, wu, "pid %ld Uid: %s", (long)pid, u);
	cr_assert_str_eq(g, wg, "pid %ld Gid: %s", (long)pid, g);
	if (groups)
		cr_assert_str_eq(gr, groups, "pid %ld Groups: [%s]", (long)pid, gr);
	free(u); free(g); free(gr); free(wu); free(wg);
}

static void
run(const char *const *argv, const char *in, struct tl_result *r)
{
	struct tl_run rr = { 0 };

	rr.argv = argv;
	rr.in = in;
	rr.inlen = in ? strlen(in) : 0;
	tl_run(&rr, r);
}

static void
chown_path(const char *rel, uid_t u, gid_t g)
{
	char *p = path(rel);

	cr_assert(chown(p, u, g) == 0, "chown %s: %s", p, strerror(errno));
	free(p);
}

static const char policy[] =
	"upstream \"isp\" {\n  window { limit = 5 per = \"1m\" unit = \"messages\" }\n}\n";

Test(privsep, gate_runs_as_gate_user)
{
	char *conf = path("weir.conf"), *sock = path("run/gate.sock");
	char *bin = tl_bin("weir-gate"), *text;
	const char *argv[] = { bin, "-c", conf, NULL };
	const char *st[] = { bin, "-c", conf, "status", NULL };
	struct tl_result r;
	struct stat s;
	pid_t pid;

	put("policy.conf", policy);
	free(sock);
	sock = path("run");
	cr_assert(mkdir(sock, 0750) == 0);
	free(sock);
	sock = path("lib");
	cr_assert(mkdir(sock, 0750) == 0);
	free(sock);
	chown_path("run", 65534, 65534);
	chown_path("lib", 65534, 65534);
	text = xasprintf("gate_user = \"nobody\"\npolicy_file = \"%s/policy.conf\"\n"
	    "gate_socket = \"%s/run/gate.sock\"\ngate_journal = \"%s/lib/gate.journal\"\n",
	    top, top, top);
	put("weir.conf", text);
	free(text);
	pid = spawn(argv, NULL, "gate.log");
	cr_assert(wait_for("gate.log", "serving", 15000), "weir-gate did not start");
	assert_ids(pid, 65534, 65534, "65534");
	sock = path("run/gate.sock");
	cr_assert(stat(sock, &s) == 0);
	cr_assert_eq(s.st_uid, 65534, "the socket was made before the drop");
	run(st, NULL, &r);
	cr_assert_eq(r.status, 0, "status: %s", r.err.s);
	tl_result_free(&r);
	free(sock); free(conf); free(bin);
}

Test(privsep, root_without_a_user_warns_once)
{
	char *conf = path("weir.conf"), *bin = tl_bin("weir-gate"), *text, *log;
	const char *argv[] = { bin, "-c", conf, NULL };
	struct buf b = BUF_INIT;
	const char *p;
	int warnings = 0;
	pid_t pid;

	put("policy.conf", policy);
	text = xasprintf("policy_file = \"%s/policy.conf\"\ngate_socket = \"%s/gate.sock\"\n"
	    "gate_journal = \"%s/gate.journal\"\n", top, top, top);
	put("weir.conf", text);
	free(text);
	pid = spawn(argv, NULL, "gate.log");
	cr_assert(wait_for("gate.log", "serving", 15000), "weir-gate did not start");
	assert_ids(pid, 0, 0, NULL);
	log = path("gate.log");
	tl_read(log, &b);
	for (p = buf_cstr(&b); (p = strstr(p, "warning:")) != NULL; p++)
		warnings++;
	cr_assert_eq(warnings, 1, "%s", b.s);
	cr_assert(strstr(b.s, "running as root: gate_user is not set") != NULL, "%s", b.s);
	buf_free(&b);
	free(log); free(conf); free(bin);
}

/* Each daemon, told to become an account that does not exist, stops at
 * once with its configuration status and a message naming it. */
Test(privsep, missing_account_is_fatal)
{
	static const struct {
		const char *prog, *key, *arg;
		int status;
	} cases[] = {
		{ "weir-gate", "gate_user", NULL, 2 },
		{ "weir-send", "send_user", NULL, 111 },
		{ "weir-smtpd", "smtpd_user", "-l", 2 },
		{ "weir-smtpd", "smtpd_user", NULL, 2 },
	};
	char *conf = path("weir.conf");
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *bin = tl_bin(cases[i].prog);
		char *text = xasprintf("%s = \"weir-no-such-user\"\nqueue_group = \"mail\"\n"
		    "%s\nqueue_dir = \"%s/noqueue\"\nlisten {\n  address = {\"127.0.0.1:0\"}\n}\n",
		    cases[i].key, strcmp(cases[i].key, "send_user") ? "send_user = \"nobody\"" : "",
		    top);
		const char *argv[] = { bin, "-c", conf, cases[i].arg, NULL };
		struct tl_result r;

		put("weir.conf", text);
		run(argv, "", &r);
		cr_assert_eq(r.status, cases[i].status, "%s %s: exit %d: %s", cases[i].prog,
		    cases[i].arg ? cases[i].arg : "", r.status, r.err.s);
		cr_assert(strstr(r.err.s, "drop privileges: no user \"weir-no-such-user\"") != NULL,
		    "%s: %s", cases[i].prog, r.err.s);
		tl_result_free(&r);
		free(text); free(bin);
	}
	free(conf);
}

/* The first free loopback port below 1024: only root can bind it, so a
 * listener that binds it and then runs as nobody dropped after binding. */
static unsigned
privileged_port(void)
{
	unsigned p;

	for (p = 1023; p > 600; p--) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1, ok;

		cr_assert(fd >= 0);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
		ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
		close(fd);
		if (ok)
			return p;
	}
	cr_assert_fail("no free port below 1024 on 127.0.0.1");
	return 0;
}

static void
queue_init_as_root(const char *conf)
{
	char *weir = tl_bin("weir");
	const char *argv[] = { weir, "-c", conf, "queue-init", NULL };
	struct tl_result r;

	run(argv, NULL, &r);
	cr_assert_eq(r.status, 0, "queue-init: %s", r.err.s);
	tl_result_free(&r);
	free(weir);
}

/* A file under top/queue/dir (its split subfolders too), its path
 * (malloc'ed), or NULL. */
static char *
only_file(const char *dir)
{
	char *cmd = xasprintf("find %s/queue/%s -type f", top, dir), name[512], *res = NULL;
	FILE *ls = popen(cmd, "r");

	cr_assert(ls != NULL);
	if (fgets(name, sizeof name, ls) != NULL) {
		name[strcspn(name, "\n")] = '\0';
		res = xstrdup(name);
	}
	pclose(ls);
	free(cmd);
	return res;
}

Test(privsep, smtpd_listener_binds_as_root_then_runs_as_smtpd_user)
{
	char *conf = path("weir.conf"), *bin = tl_bin("weir-smtpd"), *wq = tl_bin("weir-queue");
	char *envq = xasprintf("QMAILQUEUE=%s", wq), *envc = xasprintf("WEIR_CONFIG=%s", conf);
	char *text, *srv, *todo;
	const char *argv[] = { bin, "-c", conf, "-l", NULL };
	const char *env[] = { envq, envc, NULL };
	struct tl_result r;
	struct buf b = BUF_INIT;
	struct stat st;
	unsigned port = privileged_port();
	pid_t pid;

	if (access("/usr/bin/swaks", X_OK) != 0)
		cr_skip_test("swaks is not installed");
	/* The queue belongs to nobody: the sessions' weir-queue, run as
	 * nobody, may write it without being set-group-id. */
	text = xasprintf("queue_dir = \"%s/queue\"\nhostname = \"test.example\"\n"
	    "send_user = \"nobody\"\nqueue_group = \"nogroup\"\nsmtpd_user = \"nobody\"\n"
	    "listen {\n  address = {\"127.0.0.1:%u\"}\n  allow = {\"127.0.0.0/8\"}\n}\n",
	    top, port);
	put("weir.conf", text);
	queue_init_as_root(conf);
	pid = spawn(argv, env, "smtpd.log");
	/* Its "listening on" lines come as root, as it binds; this one
	 * after the drop (under load the ids were still root's at those). */
	cr_assert(wait_for("smtpd.log", "running as user nobody", 15000),
	    "weir-smtpd -l did not start or did not drop");
	assert_ids(pid, 65534, 65534, "65534");

	srv = xasprintf("127.0.0.1:%u", port);
	{
		const char *sw[] = { "/usr/bin/swaks", "--server", srv, "--from", "me@x.example",
			"--to", "you@y.example", "--body", "via a session run as nobody", NULL };

		run(sw, NULL, &r);
	}
	cr_assert_eq(r.status, 0, "swaks: %s %s", r.out.s, r.err.s);
	tl_result_free(&r);
	/* weir-queue records its invoker's uid: the session's. */
	todo = only_file("todo");
	cr_assert(todo != NULL, "nothing queued");
	tl_read(todo, &b);
	cr_assert(memcmp(b.s, "u65534\0p", 8) == 0, "todo starts %.8s", b.s);
	cr_assert(stat(todo, &st) == 0);
	cr_assert_eq(st.st_uid, 65534);
	buf_free(&b);
	free(todo); free(srv); free(text); free(envq); free(envc); free(wq); free(bin); free(conf);
}

Test(privsep, queue_init_gives_the_queue_to_its_accounts)
{
	char *conf = path("weir.conf"), *weir = tl_bin("weir"), *p;
	const char *check[] = { weir, "-c", conf, "queue-check", NULL };
	struct tl_result r;
	struct stat st;
	size_t i;
	struct {
		const char *rel;
		mode_t mode;
		uid_t uid;
		gid_t gid;
	} want[] = {
		/* daemon is 1:1, mail is group 8 (Debian's base-passwd) */
		{ "queue", 0750, 1, 8 },
		{ "queue/pid", 01770, 1, 8 },
		{ "queue/todo", 01770, 1, 8 },
		{ "queue/mess", 0750, 1, 8 },
		{ "queue/mess/22", 01770, 1, 8 },
		{ "queue/info/0", 0700, 1, 1 },
		{ "queue/bounce", 0700, 1, 1 },
		{ "queue/lock/trigger", 0620, 1, 8 },
		{ "queue/lock/sendmutex", 0600, 1, 1 },
	};

	p = xasprintf("send_user = \"daemon\"\nqueue_group = \"mail\"\nqueue_dir = \"%s/queue\"\n", top);
	put("weir.conf", p);
	free(p);
	cr_assert_eq(getpwnam("daemon")->pw_uid, 1);
	cr_assert_eq(getgrnam("mail")->gr_gid, 8);
	queue_init_as_root(conf);
	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		p = path(want[i].rel);
		cr_assert(lstat(p, &st) == 0, "%s", p);
		cr_assert_eq(st.st_mode & 07777, want[i].mode, "%s: %o", want[i].rel,
		    (unsigned)(st.st_mode & 07777));
		cr_assert_eq(st.st_uid, want[i].uid, "%s uid %u", want[i].rel, (unsigned)st.st_uid);
		cr_assert_eq(st.st_gid, want[i].gid, "%s gid %u", want[i].rel, (unsigned)st.st_gid);
		free(p);
	}
	run(check, NULL, &r);
	cr_assert_eq(r.status, 0, "%s", r.out.s);
	cr_assert(strstr(r.out.s, " 0 problems, 0 notes") != NULL, "%s", r.out.s);
	tl_result_free(&r);

	/* A wrong mode and a wrong owner are problems; queue-init repairs. */
	p = path("queue/pid");
	cr_assert(chmod(p, 0755) == 0);
	free(p);
	chown_path("queue/info/3", 0, 0);
	run(check, NULL, &r);
	cr_assert_eq(r.status, 1, "%s", r.out.s);
	cr_assert(strstr(r.out.s, "problem: pid: mode 0755, expected 1770") != NULL, "%s", r.out.s);
	cr_assert(strstr(r.out.s, "problem: info/3: owner 0:0, expected 1:1") != NULL, "%s", r.out.s);
	tl_result_free(&r);
	queue_init_as_root(conf);
	queue_init_as_root(conf);
	run(check, NULL, &r);
	cr_assert_eq(r.status, 0, "%s", r.out.s);
	tl_result_free(&r);

	/* A planted symbolic link is refused, not followed. */
	p = path("queue/bounce");
	cr_assert(rmdir(p) == 0);
	cr_assert(symlink(top, p) == 0);
	{
		const char *init[] = { weir, "-c", conf, "queue-init", NULL };

		run(init, NULL, &r);
	}
	cr_assert_eq(r.status, 1, "%s", r.err.s);
	cr_assert(lstat(top, &st) == 0 && st.st_uid == 0, "followed the link");
	tl_result_free(&r);
	free(p); free(conf); free(weir);
}

Test(privsep, queue_init_refuses_missing_accounts)
{
	static const struct {
		const char *keys, *want;
	} cases[] = {
		{ "send_user = \"weir-no-such-user\"\nqueue_group = \"mail\"\n",
		  "send_user \"weir-no-such-user\": no such user" },
		{ "send_user = \"daemon\"\nqueue_group = \"weir-no-such-group\"\n",
		  "queue_group \"weir-no-such-group\": no such group" },
	};
	char *conf = path("weir.conf"), *weir = tl_bin("weir"), *q = path("queue"), *text;
	const char *init[] = { weir, "-c", conf, "queue-init", NULL };
	struct tl_result r;
	struct stat st;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		text = xasprintf("%squeue_dir = \"%s\"\n", cases[i].keys, q);
		put("weir.conf", text);
		run(init, NULL, &r);
		cr_assert_eq(r.status, 1, "%s", r.err.s);
		cr_assert(strstr(r.err.s, cases[i].want) != NULL, "%s", r.err.s);
		cr_assert(stat(q, &st) < 0 && errno == ENOENT, "a queue was made for no one");
		tl_result_free(&r);
		free(text);
	}
	free(q); free(conf); free(weir);
}

/*
 * Run argv as uid/gid 65534 inside a private mount namespace where an
 * overlay on SYSCONFDIR's parent adds SYSCONFDIR/weir.conf = conftext
 * (the set-id program's only config).  stdin from top/in, fd 1 from
 * top/env (weir-queue's envelope), stderr to top/err.  Returns the exit
 * status.
 */
static int
as_nobody_with_etc(const char *conftext, const char *const *argv, const char *const *env)
{
	char *sysconf = xstrdup(SYSCONFDIR), *parent = xstrdup(SYSCONFDIR), *ns = path("ns");
	char *in = path("in"), *envl = path("env"), *err = path("err");
	const char *full[16] = { SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--" };
	int status, i;
	pid_t pid;

	parent = dirname(parent);
	cr_assert(mkdir(ns, 0700) == 0);
	for (i = 0; argv[i]; i++)
		full[5 + i] = argv[i];
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		char *u = xasprintf("%s/u", ns), *w = xasprintf("%s/w", ns);
		char *opts = xasprintf("lowerdir=%s,upperdir=%s,workdir=%s", parent, u, w);
		char *cf = xasprintf("%s/weir.conf", sysconf);
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("none", ns, "tmpfs", 0, "mode=0700") < 0 ||
		    mkdir(u, 0755) < 0 || mkdir(w, 0700) < 0 ||
		    mount("overlay", parent, "overlay", 0, opts) < 0) {
			perror("private mount namespace");
			_exit(120);
		}
		if ((mkdir(sysconf, 0755) < 0 && errno != EEXIST) ||
		    (fd = open(cf, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0 ||
		    write(fd, conftext, strlen(conftext)) != (ssize_t)strlen(conftext) ||
		    close(fd) < 0) {
			perror(cf);
			_exit(121);
		}
		if ((fd = open(in, O_RDONLY)) < 0 || dup2(fd, 0) < 0 ||
		    (fd = open(envl, O_RDONLY)) < 0 || dup2(fd, 1) < 0 ||
		    (fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0 || dup2(fd, 2) < 0)
			_exit(122);
		for (i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(full[0], (char *const *)full);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		cr_assert(errno == EINTR);
	free(sysconf); free(parent); free(ns); free(in); free(envl); free(err);
	/* A container without CAP_SYS_ADMIN cannot make the namespace. */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 120)
		cr_skip_test("no private mount namespace with an overlay here");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * The package's weir-queue: set-group-id to queue_group.  nobody, in no
 * group at all, queues into the queue the compiled-in config names (not
 * the one its environment names, which nobody could write), files
 * weir-send can read; weir-send, dropping to send_user, preprocesses
 * them.
 */
Test(privsep, setgid_queue_writer_and_send_user)
{
	static const char envl[] = "Fme@x.example\0Tyou@y.example\0";
	char *conf = path("weir.conf"), *copy = path("weir-queue-sgid"), *wq = tl_bin("weir-queue");
	char *send = tl_bin("weir-send"), *text, *mess, *todo, *other = path("other");
	char *envq = xasprintf("WEIR_QUEUE=%s", other), *envc = path("other.conf");
	char *envc2 = xasprintf("WEIR_CONFIG=%s", envc), *cmd, *info;
	const char *argv[] = { copy, NULL }, *env[] = { envq, envc2, NULL };
	const char *sargv[] = { send, "-c", conf, NULL };
	const char *senv[] = { "WEIR_REMOTE=/bin/false", NULL };
	const char *oinit[] = { SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		NULL, "queue-init", NULL, NULL };
	struct tl_result r;
	struct stat st;
	pid_t pid;
	int rc;

	text = xasprintf("queue_dir = \"%s/queue\"\nhostname = \"test.example\"\n"
	    "send_user = \"daemon\"\nqueue_group = \"mail\"\n", top);
	put("weir.conf", text);
	queue_init_as_root(conf);
	/* The queue the environment names is nobody's own: were the
	 * environment trusted, the message would land there. */
	oinit[5] = tl_bin("weir");
	oinit[7] = other;
	cr_assert(mkdir(other, 0700) == 0);
	cr_assert(chown(other, 65534, 65534) == 0);
	run(oinit, NULL, &r);
	cr_assert_eq(r.status, 0, "queue-init as nobody: %s", r.err.s);
	tl_result_free(&r);
	put("other.conf", "hostname = \"other.example\"\n");

	cmd = xasprintf("cp %s %s", wq, copy);
	cr_assert(system(cmd) == 0);
	cr_assert(chown(copy, 0, 8) == 0);
	cr_assert(chmod(copy, 02755) == 0);
	put("in", "Subject: set-group-id\n\nqueued by nobody\n");
	{
		char *ep = path("env");

		tl_write(ep, envl, sizeof envl);
		free(ep);
	}

	rc = as_nobody_with_etc(text, argv, env);
	{
		struct buf e = BUF_INIT;
		char *ep = path("err");

		tl_read(ep, &e);
		cr_assert_eq(rc, 0, "set-group-id weir-queue: exit %d: %s", rc, buf_cstr(&e));
		buf_free(&e);
		free(ep);
	}
	cr_assert_eq(tl_count_files(other), 1, "the environment chose the queue");	/* sendmutex */
	mess = only_file("mess");
	todo = only_file("todo");
	cr_assert(todo != NULL, "nothing queued");
	cr_assert(stat(todo, &st) == 0);
	cr_assert_eq(st.st_uid, 65534);
	cr_assert_eq(st.st_gid, 8, "todo gid %u", (unsigned)st.st_gid);
	cr_assert_eq(st.st_mode & 07777, 0644);

	/* weir-send as daemon (not nobody, not in group mail) takes it over:
	 * todo/ and intd/ emptied, info/ written, as daemon. */
	pid = spawn(sargv, senv, "send.log");
	cr_assert(wait_for("send.log", "running as user daemon", 15000), "weir-send did not drop");
	assert_ids(pid, 1, 1, "1");
	free(todo);
	todo = NULL;
	{
		int i;

		for (i = 0; i < 300 && (todo = only_file("todo")) != NULL; i++) {
			free(todo);
			todo = NULL;
			usleep(50000);
		}
	}
	cr_assert(todo == NULL, "weir-send did not preprocess the message");
	info = only_file("info");
	cr_assert(info != NULL);
	cr_assert(stat(info, &st) == 0);
	cr_assert_eq(st.st_uid, 1);
	cr_assert(only_file("intd") == NULL);
	free(info); free(mess); free(cmd); free(text); free(conf); free(copy); free(wq);
	free(send); free(other); free(envq); free(envc); free(envc2);
}

/* ---- weir-remote set-user-id ---- */

/* A loopback socket that accepts connections and never says a word. */
static int
silent_listener(unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0);
	cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
	cr_assert(listen(fd, 4) == 0);
	cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int
accept_within(int lfd, int ms)
{
	struct pollfd p = { lfd, POLLIN, 0 };

	if (poll(&p, 1, ms) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* The set-user-id copy: owner nobody, group daemon, 4750 (the package:
 * weir-remote:weir-send 4750). */
static char *
suid_remote(const char *dir, mode_t mode)
{
	char *bin = tl_bin("weir-remote"), *copy = xasprintf("%s/weir-remote-suid", dir);
	char *cmd = xasprintf("cp %s %s", bin, copy);

	cr_assert(system(cmd) == 0);
	cr_assert(chown(copy, 65534, 1) == 0);
	cr_assert(chmod(copy, mode) == 0);
	free(cmd);
	free(bin);
	return copy;
}

Test(privsep, setuid_remote_reads_the_secret_its_caller_cannot)
{
	struct rt t;
	char *copy, *conf;
	const char *msg = "From: me@x.example\nSubject: suid\n\nbody\n";
	struct tl_result r;
	struct rt_rec rec;

	rt_setup(&t, 1);
	cr_assert(chmod(t.s.qt.tmp, 0755) == 0);
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	conf = t.s.qt.conf;
	cr_assert(chown(t.secret, 65534, 65534) == 0);
	cr_assert(chmod(t.secret, 0600) == 0);
	{
		const char *cat[] = { SETPRIV, "--reuid=1", "--regid=1", "--clear-groups", "--",
			"/bin/cat", t.secret, NULL };

		run(cat, NULL, &r);
		cr_assert_neq(r.status, 0, "the caller can read the secret itself");
		tl_result_free(&r);
	}
	/* Without the set-user-id bit, the caller's own rights: no secret. */
	copy = suid_remote(t.s.qt.tmp, 0750);
	{
		const char *argv[] = { SETPRIV, "--reuid=1", "--regid=1", "--clear-groups", "--",
			copy, "-n", "-c", conf, "-u", "isp", "127.0.0.1", "me@x.example",
			"you@y.example", NULL };

		run(argv, msg, &r);
		cr_assert_eq(r.status, 0, "%s", r.err.s);
		cr_assert(r.out.len > 0 && r.out.s[0] == 's', "no secret, yet: %s", r.out.s);
		tl_result_free(&r);
		cr_assert(chmod(copy, 04750) == 0);
		run(argv, msg, &r);
	}
	cr_assert_eq(r.status, 0, "%s", r.err.s);
	cr_assert(r.out.len > 0 && r.out.s[0] == 'r', "set-user-id: %s / %s", r.out.s, r.err.s);
	cr_assert(memchr(r.out.s, 'K', r.out.len) != NULL, "%s", r.out.s);
	tl_result_free(&r);
	rt_rec_load(&t, &rec);
	cr_assert_eq(rec.n, 1, "the upstream got %zu messages", rec.n);
	cr_assert(rec.nauth >= 1);
	rt_rec_free(&rec);
	free(copy);
	rt_teardown(&t);
}

/* Set-user-id, the caller's environment stays outside, and
 * secret_command runs wholly as the secret's owner. */
Test(privsep, setuid_remote_environment_and_secret_command)
{
	struct rt t;
	char *copy, *dump, *text;
	struct buf b = BUF_INIT;
	struct tl_result r;

	rt_setup(&t, 1);
	cr_assert(chmod(t.s.qt.tmp, 0755) == 0);
	rt_upstream_start(&t, "good", NULL, 0);
	dump = xasprintf("%s/dump", t.s.qt.tmp);
	cr_assert(mkdir(dump, 0700) == 0 && chown(dump, 65534, 65534) == 0);
	text = xasprintf("upstream \"isp\" {\n  host = \"127.0.0.1\"\n  port = %u\n"
	    "  ca_file = \"%s/ca.pem\"\n  username = \"%s\"\n"
	    "  secret_command = \"env >%s/env; id -ru >%s/ruid; echo %s\"\n}\n",
	    t.port, t.certs, RT_USER, dump, dump, RT_SECRET);
	sh_conf_append(&t.s, text);
	copy = suid_remote(t.s.qt.tmp, 04750);
	{
		const char *argv[] = { SETPRIV, "--reuid=1", "--regid=1", "--clear-groups", "--",
			"/usr/bin/env", "FOO_FROM_CALLER=1", "TZ=UTC",
			copy, "-n", "-c", t.s.qt.conf, "-u", "isp", "127.0.0.1", "me@x.example",
			"you@y.example", NULL };

		run(argv, "Subject: env\n\nbody\n", &r);
	}
	cr_assert(r.out.len > 0 && r.out.s[0] == 'r', "%s / %s", r.out.s, r.err.s);
	tl_result_free(&r);
	free(text);
	text = xasprintf("%s/env", dump);
	tl_read(text, &b);
	cr_assert(strstr(b.s, "FOO_FROM_CALLER") == NULL, "the caller's variable got in:\n%s", b.s);
	cr_assert(strstr(b.s, "PATH=/usr/local/bin:/usr/bin:/bin\n") != NULL, "%s", b.s);
	cr_assert(strstr(b.s, "TZ=UTC\n") != NULL, "%s", b.s);
	free(text);
	text = xasprintf("%s/ruid", dump);
	tl_read(text, &b);
	cr_assert_str_eq(buf_cstr(&b), "65534\n");
	buf_free(&b);
	free(text); free(dump); free(copy);
	rt_teardown(&t);
}

Test(privsep, setuid_remote_is_killable_by_its_caller_only_and_dies_with_it)
{
	char *copy = suid_remote(top, 04750), *conf = path("weir.conf"), *text;
	char *script, *u;
	unsigned port;
	int lfd = silent_listener(&port), cfd, in[2], out[2], status;
	pid_t sh, remote;
	char buf[64];
	ssize_t n;
	struct tl_result r;

	text = xasprintf("upstream \"hang\" {\n  host = \"127.0.0.1\"\n  port = %u\n"
	    "  tls = \"none\"\n}\n", port);
	put("weir.conf", text);
	put("msg", "Subject: hang\n\nbody\n");

	/* 1. A delivery started by uid 1 (the caller: weir-send's role). */
	script = xasprintf("%s -n -c %s -u hang 127.0.0.1 a@x.example b@y.example <%s/msg "
	    ">/dev/null 2>&1 & echo $!; read x", copy, conf, top);
	cr_assert(pipe(in) == 0 && pipe(out) == 0);
	sh = fork();
	cr_assert(sh >= 0);
	if (sh == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0);
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(SETPRIV, SETPRIV, "--reuid=1", "--regid=1", "--clear-groups", "--",
		    "/bin/sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	kids[nkids++] = sh;
	close(in[0]);
	close(out[1]);
	n = read(out[0], buf, sizeof buf - 1);
	cr_assert(n > 0);
	buf[n] = '\0';
	remote = (pid_t)atol(buf);
	cr_assert(remote > 0, "%s", buf);
	cfd = accept_within(lfd, 15000);
	cr_assert(cfd >= 0, "weir-remote did not connect");
	/* Connected, it has given up the owner's rights (read the secret,
	 * then became its caller for good).  Failed before: "1 65534 65534
	 * 65534", the network code ran able to read every secret file. */
	u = status_line(remote, "Uid:");
	cr_assert_str_eq(u, "1\t1\t1\t1", "Uid: %s", u);
	free(u);

	/* 2. Its parent goes: it goes too (the PR_SET_PDEATHSIG weir-remote
	 * asks again after the set-id exec cleared it). */
	close(in[1]);
	while (waitpid(sh, &status, 0) < 0)
		cr_assert(errno == EINTR);
	nkids--;
	{
		struct pollfd p = { cfd, POLLIN, 0 };

		cr_assert(poll(&p, 1, 15000) == 1, "weir-remote outlived its parent");
		cr_assert(read(cfd, buf, sizeof buf) <= 0);
	}
	close(cfd);

	/* 3. Killable by its caller's uid, not by another's. */
	{
		const char *argv[] = { copy, "-n", "-c", conf, "-u", "hang", "127.0.0.1",
			"a@x.example", "b@y.example", NULL };
		const char *full[] = { SETPRIV, "--reuid=1", "--regid=1", "--clear-groups", "--",
			argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], argv[6], argv[7],
			argv[8], NULL };
		char *ps, *msgp = path("msg");

		remote = fork();
		cr_assert(remote >= 0);
		if (remote == 0) {
			int fd = open(msgp, O_RDONLY), null = open("/dev/null", O_WRONLY);

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			setpgid(0, 0);
			if (fd < 0 || dup2(fd, 0) < 0 || null < 0 || dup2(null, 2) < 0)
				_exit(126);
			execv(SETPRIV, (char *const *)full);
			_exit(127);
		}
		kids[nkids++] = remote;
		cfd = accept_within(lfd, 15000);
		cr_assert(cfd >= 0, "weir-remote did not connect");
		ps = xasprintf("%ld", (long)remote);
		{
			const char *other[] = { SETPRIV, "--reuid=2", "--regid=2", "--clear-groups",
				"--", "/bin/kill", "-TERM", ps, NULL };
			const char *caller[] = { SETPRIV, "--reuid=1", "--regid=1", "--clear-groups",
				"--", "/bin/kill", "-TERM", ps, NULL };

			run(other, NULL, &r);
			cr_assert_neq(r.status, 0, "uid 2 could signal it");
			tl_result_free(&r);
			cr_assert(kill(remote, 0) == 0);
			run(caller, NULL, &r);
			cr_assert_eq(r.status, 0, "its caller could not signal it: %s", r.err.s);
			tl_result_free(&r);
		}
		while (waitpid(remote, &status, 0) < 0)
			cr_assert(errno == EINTR);
		nkids--;
		cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %#x", status);
		close(cfd);
		free(ps);
		free(msgp);
	}
	close(lfd);
	close(out[0]);
	free(script); free(text); free(conf); free(copy);
}
