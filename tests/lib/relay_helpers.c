/* relay_helpers.c: see relay_helpers.h. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_helpers.h"


void
rt_setup(struct rt *t, unsigned concurrency)
{
	struct buf conf = BUF_INIT;
	char *bin = tl_bin("weir-queue"), *dir;

	memset(t, 0, sizeof *t);
	/* Deliverers orphaned by a kill -9 of weir-send come back to us. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	sh_setup(&t->s, NULL);
	dir = t->s.qt.tmp;
	t->certs = xasprintf("%s/certs", dir);
	t->record = xasprintf("%s/record.jsonl", dir);
	t->sock = xasprintf("%s/gate.sock", dir);
	t->journal = xasprintf("%s/gate.journal", dir);
	t->policy = xasprintf("%s/policy.conf", dir);
	t->secret = xasprintf("%s/secret", dir);
	t->gate_log = xasprintf("%s/gate.log", dir);
	cr_assert(tl_make_certs(t->certs) == 0, "making certificates in %s failed", t->certs);
	tl_write(t->secret, RT_SECRET, strlen(RT_SECRET));
	cr_assert(chmod(t->secret, 0600) == 0);
	buf_printf(&conf, "policy_file = \"%s\"\ngate_socket = \"%s\"\ngate_journal = \"%s\"\n"
	    "concurrency = %u\n", t->policy, t->sock, t->journal, concurrency);
	sh_conf_append(&t->s, conf.s);
	{
		const char *b = getenv("WEIR_BIN");
		char *abs = realpath(b && *b ? b : "build/bin", NULL);

		cr_assert(abs, "no $WEIR_BIN");
		t->env_libexec = xasprintf("WEIR_LIBEXEC=%s", abs);
		free(abs);
	}
	t->env_qq = xasprintf("QMAILQUEUE=%s", bin);
	qt_setenv(&t->s.qt, t->env_qq);	/* for sendmail */
	buf_free(&conf);
	free(bin);
}

static void
reap(pid_t *p)
{
	if (*p > 0) {
		kill(-*p, SIGKILL);
		kill(*p, SIGKILL);
		while (waitpid(*p, NULL, 0) < 0 && errno == EINTR)
			;
		*p = 0;
	}
}

/* A process, as /proc/PID/stat has it. */
struct proc_ent {
	pid_t pid;
	char state;
	char comm[32];
};

/* The children of parent (up to max of them) into v; how many. */
static size_t
proc_children(pid_t parent, struct proc_ent *v, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL && n < max) {
		char path[64], buf[512], *p, *q;
		long ppid;
		pid_t pid = (pid_t)strtol(e->d_name, &p, 10);
		FILE *f;

		if (*p || pid <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		/* "pid (comm) state ppid ...": comm may hold anything. */
		if (fgets(buf, sizeof buf, f) && (p = strchr(buf, '(')) != NULL &&
		    (q = strrchr(buf, ')')) != NULL && q > p &&
		    sscanf(q + 2, "%c %ld", &v[n].state, &ppid) == 2 && ppid == (long)parent) {
			v[n].pid = pid;
			snprintf(v[n].comm, sizeof v[n].comm, "%.*s", (int)(q - p - 1), p + 1);
			n++;
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

/* Our children that nobody waits for: deliverers orphaned by a kill -9
 * of weir-send (we are a subreaper).  Kill them and their groups, and
 * reap them; the processes t knows of (NULL: none) are left alone. */
static int
kill_orphans(const struct rt *t)
{
	struct proc_ent v[256];
	size_t n = proc_children(getpid(), v, 256), i;
	pid_t got[256];
	int k = 0;

	for (i = 0; i < n; i++) {
		pid_t pid = v[i].pid;

		if (t != NULL && (pid == t->up || pid == t->gate || pid == t->send.pid ||
		    pid == t->run))
			continue;
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		got[k++] = pid;
	}
	for (i = 0; i < (size_t)k; i++)
		while (waitpid(got[i], NULL, 0) < 0 && errno == EINTR)
			;
	return k;
}

void
rt_teardown(struct rt *t)
{
	int i;

	shd_kill9(&t->send);
	free(t->send.log);
	reap(&t->run);
	reap(&t->gate);
	reap(&t->queued);
	reap(&t->up);
	for (i = 0; i < 20 && kill_orphans(NULL) > 0; i++)
		usleep(20000);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	if (getenv("WEIR_TEST_KEEP")) {
		/* For a post-mortem: leave the folder, say where it is. */
		fprintf(stderr, "relay test folder kept: %s\n", t->s.qt.tmp);
		free(t->s.qt.tmp);
		t->s.qt.tmp = NULL;
	}
	sh_teardown(&t->s);
	free(t->certs);
	free(t->record);
	free(t->sock);
	free(t->journal);
	free(t->policy);
	free(t->secret);
	free(t->gate_log);
	free(t->env_libexec);
	free(t->env_qq);
	memset(t, 0, sizeof *t);
}

/* ---- the upstream ---- */

/* The stand-in upstream (tests/upstream/upstream.py) on port (0: any),
 * recording to record, with cert's certificate and the test's
 * credentials, plus flags; its pid, *got its port. */
static pid_t
upstream_run(struct rt *t, const char *cert, const char *record, const char *const *flags,
    unsigned port, const char *log, unsigned *got)
{
	const char *args[64];
	char *certp = xasprintf("%s/%s.pem", t->certs, cert);
	char *keyp = xasprintf("%s/%s.key", t->certs, cert);
	char *auth = xasprintf("%s:%s", RT_USER, RT_SECRET), portarg[16];
	int n = 0, i;
	pid_t pid;

	snprintf(portarg, sizeof portarg, "%u", port);
	args[n++] = "--port";
	args[n++] = portarg;
	args[n++] = "--record";
	args[n++] = record;
	args[n++] = "--cert";
	args[n++] = certp;
	args[n++] = "--key";
	args[n++] = keyp;
	args[n++] = "--auth";
	args[n++] = auth;
	for (i = 0; flags && flags[i]; i++) {
		cr_assert(n < 62);
		args[n++] = flags[i];
	}
	args[n] = NULL;
	pid = tl_upstream_start(args, log, got);
	free(certp);
	free(keyp);
	free(auth);
	return pid;
}

void
rt_upstream_start(struct rt *t, const char *cert, const char *const *flags, unsigned port)
{
	char *log = xasprintf("%s/upstream.%u.log", t->s.qt.tmp, ++t->up_runs);
	unsigned got_port = 0;

	cr_assert(t->up == 0, "an upstream runs already");
	t->up = upstream_run(t, cert, t->record, flags, port, log, &got_port);
	cr_assert(port == 0 || got_port == port, "upstream on %u, asked for %u", got_port, port);
	t->port = got_port;
	free(log);
}

void
rt_upstream_stop(struct rt *t)
{
	reap(&t->up);
}

void
rt_conf_upstream(struct rt *t, const char *extra)
{
	rt_conf_upstream_at(t, "isp", t->port, extra);
}

void
rt_conf_upstream_at(struct rt *t, const char *name, unsigned port, const char *extra)
{
	/* Short timeouts, each unless extra sets it. */
	static const char *const timeouts[][2] = {
		{ "timeout_connect", "5s" }, { "timeout_banner", "10s" },
		{ "timeout_command", "10s" }, { "timeout_mail", "10s" },
		{ "timeout_rcpt", "10s" }, { "timeout_data_init", "10s" },
		{ "timeout_data_block", "10s" }, { "timeout_data_end", "10s" },
	};
	struct buf b = BUF_INIT;
	size_t i;

	buf_printf(&b, "upstream \"%s\" {\n  host = \"127.0.0.1\"\n  port = %u\n"
	    "  tls = \"starttls\"\n  ca_file = \"%s/ca.pem\"\n  username = \"%s\"\n"
	    "  secret_file = \"%s\"\n", name, port, t->certs, RT_USER, t->secret);
	for (i = 0; i < sizeof timeouts / sizeof timeouts[0]; i++) {
		char *key = xasprintf("%s =", timeouts[i][0]);

		if (extra == NULL || strstr(extra, key) == NULL)
			buf_printf(&b, "  %s = \"%s\"\n", timeouts[i][0], timeouts[i][1]);
		free(key);
	}
	if (extra)
		buf_adds(&b, extra);
	buf_adds(&b, "}\n");
	sh_conf_append(&t->s, b.s);
	buf_free(&b);
}

void
rt_policy(struct rt *t, const char *text)
{
	tl_write(t->policy, text, strlen(text));
}

/* ---- weir-gate ---- */

void
rt_gate_start(struct rt *t, const char *grace)
{
	cr_assert(t->gate == 0, "a gate runs already");
	t->gate = sh_gate_spawn(t->s.qt.conf, grace, t->gate_log, t->sock);
}

void
rt_gate_kill9(struct rt *t)
{
	reap(&t->gate);
}

char *
rt_gate_status(struct rt *t)
{
	char *bin = tl_bin("weir-gate");
	const char *argv[] = { bin, "-c", t->s.qt.conf, "status", NULL };
	struct tl_run run = { .argv = argv };
	struct tl_result r;
	char *out;

	tl_run(&run, &r);
	cr_assert_eq(r.status, 0, "weir-gate status: exit %d: %s", r.status, buf_cstr(&r.err));
	out = xstrdup(buf_cstr(&r.out));
	tl_result_free(&r);
	free(bin);
	return out;
}

int
rt_gate_status_has(struct rt *t, void *arg)
{
	char *st = rt_gate_status(t);
	int yes = strstr(st, arg) != NULL;

	free(st);
	return yes;
}

/* ---- weir-send ---- */

static int
send_started(struct rt *t, void *arg)
{
	struct buf b = BUF_INIT;
	int r;

	(void)arg;
	if (t->send.log == NULL || access(t->send.log, F_OK) != 0)
		return 0;
	tl_read(t->send.log, &b);
	r = strstr(buf_cstr(&b), ": info: started on") != NULL;
	buf_free(&b);
	return r;
}

void
rt_send_start(struct rt *t)
{
	rt_send_start_env(t, NULL);
}

void
rt_send_start_env(struct rt *t, const char *const *extra)
{
	const char *env[16] = { t->env_libexec, t->env_qq };
	size_t n = 2, i;

	for (i = 0; extra && extra[i]; i++) {
		cr_assert(n < 15, "too many environment entries");
		env[n++] = extra[i];
	}
	env[n] = NULL;
	cr_assert(t->send.pid == 0, "weir-send runs already");
	shd_start(&t->send, &t->s, env);
	cr_assert(rt_wait(send_started, t, NULL, 10000), "weir-send did not start:\n%s",
	    rt_send_logs(t));
}

void
rt_send_kill9(struct rt *t)
{
	shd_kill9(&t->send);
}

char *
rt_send_logs(struct rt *t)
{
	static const char *const names[] = { "weir-send", "weir-run" };
	struct buf b = BUF_INIT, one = BUF_INIT;
	unsigned k, i;

	for (i = 0; i < 2; i++)
		for (k = 1; k < 1000; k++) {
			char *p = xasprintf("%s/%s.%u.log", t->s.qt.tmp, names[i], k);

			if (access(p, F_OK) == 0) {
				tl_read(p, &one);
				buf_add(&b, one.s, one.len);
				buf_free(&one);
			}
			free(p);
		}
	buf_addc(&b, '\0');
	return b.s;
}

/* ---- weir run ---- */

pid_t
rt_run_spawn_conf(struct rt *t, const char *conf, const char *log)
{
	char *bin = tl_bin("weir");
	pid_t parent = getpid(), pid;
	int fd;

	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "open %s: %s", log, strerror(errno));
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		unsetenv("WEIR_QUEUE");
		unsetenv("WEIR_CONFIG");
		unsetenv("WEIR_REMOTE");
		putenv(t->env_libexec);
		putenv(t->env_qq);
		dup2(fd, 1);
		dup2(fd, 2);
		fd = open("/dev/null", O_RDONLY);
		dup2(fd, 0);
		if (t->run_wrap) {
			size_t n = 0, i;
			const char **argv;

			while (t->run_wrap[n])
				n++;
			argv = xcalloc(n + 5, sizeof *argv);
			for (i = 0; i < n; i++)
				argv[i] = t->run_wrap[i];
			argv[n] = bin;
			argv[n + 1] = "-c";
			argv[n + 2] = conf;
			argv[n + 3] = "run";
			execvp(argv[0], (char *const *)argv);
		} else
			execl(bin, bin, "-c", conf, "run", (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	close(fd);
	free(bin);
	return pid;
}

void
rt_run_spawn(struct rt *t)
{
	char *log;

	cr_assert(t->run == 0, "a weir run runs already");
	log = xasprintf("%s/weir-run.%u.log", t->s.qt.tmp, ++t->run_starts);
	t->run = rt_run_spawn_conf(t, t->s.qt.conf, log);
	free(log);
}

int
rt_run_log_has(struct rt *t, void *arg)
{
	char *log = rt_run_log(t);
	int yes = strstr(log, arg) != NULL;

	free(log);
	return yes;
}

static int
run_started(struct rt *t, void *arg)
{
	char *log = rt_run_log(t);
	int r;

	(void)arg;
	r = strstr(log, ": info: started on") != NULL && tl_sock_answers(t->sock);
	free(log);
	return r;
}

void
rt_run_start(struct rt *t)
{
	rt_run_spawn(t);
	cr_assert(rt_wait(run_started, t, NULL, 20000), "weir run did not start:\n%s",
	    rt_run_log(t));
}

void
rt_run_kill9(struct rt *t)
{
	cr_assert(t->run > 0, "no weir run");
	cr_assert_eq(kill(t->run, SIGKILL), 0);
	while (waitpid(t->run, NULL, 0) < 0 && errno == EINTR)
		;
	t->run = 0;
}

int
rt_run_stop(struct rt *t, int ms)
{
	int st, i;

	cr_assert(t->run > 0, "no weir run");
	cr_assert_eq(kill(t->run, SIGTERM), 0);
	for (i = 0; i < ms / 10; i++) {
		if (waitpid(t->run, &st, WNOHANG) == t->run) {
			t->run = 0;
			return st;
		}
		usleep(10000);
	}
	return -1;
}

char *
rt_run_log(struct rt *t)
{
	char *p = xasprintf("%s/weir-run.%u.log", t->s.qt.tmp, t->run_starts);
	struct buf b = BUF_INIT;

	if (access(p, F_OK) == 0)
		tl_read(p, &b);
	buf_addc(&b, '\0');
	free(p);
	return b.s;
}

/* ---- mail in, queue ---- */

struct tl_result
rt_run(struct rt *t, const char *prog, const char *const *args, size_t nargs, const char *in)
{
	return rt_run_env(t, prog, args, nargs, in, NULL);
}

struct tl_result
rt_run_env(struct rt *t, const char *prog, const char *const *args, size_t nargs,
    const char *in, const char *const *extra)
{
	const char **argv = xcalloc(nargs + 2, sizeof *argv);
	const char *env[20];
	char *bin = tl_bin(prog);
	struct tl_result r;
	size_t i, k = 0;

	argv[0] = bin;
	for (i = 0; i < nargs; i++)
		argv[i + 1] = args[i];
	for (i = 0; i < 8 && t->s.qt.envs[i]; i++)
		env[k++] = t->s.qt.envs[i];
	for (i = 0; extra && extra[i]; i++) {
		cr_assert(k < 19, "too many environment entries");
		env[k++] = extra[i];
	}
	env[k] = NULL;
	{
		struct tl_run run = { .argv = argv, .env = env, .in = in,
			.inlen = in ? strlen(in) : 0, .timeout_s = 60 };

		tl_run(&run, &r);
	}
	free(argv);
	free(bin);
	return r;
}

void
rt_sendmail(struct rt *t, const char *sender, const char *const *rcpts, size_t n,
    const char *msg)
{
	const char **args = xcalloc(n + 3, sizeof *args);
	struct tl_result r;
	size_t i;

	args[0] = "-f";
	args[1] = sender;
	for (i = 0; i < n; i++)
		args[i + 2] = rcpts[i];
	r = rt_run(t, "sendmail", args, n + 2, msg);
	cr_assert_eq(r.status, 0, "sendmail exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
	free(args);
}

static int
todo_empty(struct rt *t, void *arg)
{
	char *p = xasprintf("%s/todo", t->s.qt.qdir);
	int n = tl_count_files(p);

	(void)arg;
	free(p);
	return n == 0;
}

char *
rt_mailq(struct rt *t)
{
	const char *args[] = { "-bp" };
	struct tl_result r;
	char *out;

	/* Everything preprocessed first: mailq may see a half-written info/
	 * file of a message in S4 and report trouble (a known bug). */
	cr_assert(rt_wait(todo_empty, t, NULL, 10000), "todo/ not empty after 10 s");
	r = rt_run(t, "sendmail", args, 1, NULL);

	cr_assert_eq(r.status, 0, "sendmail -bp exit %d: %s", r.status, buf_cstr(&r.err));
	out = xstrdup(buf_cstr(&r.out));
	tl_result_free(&r);
	return out;
}

void
rt_flush(struct rt *t)
{
	const char *args[] = { "-c", t->s.qt.conf, "flush" };
	struct tl_result r = rt_run(t, "weir", args, 3, NULL);

	cr_assert_eq(r.status, 0, "weir flush exit %d: %s%s", r.status, buf_cstr(&r.out),
	    buf_cstr(&r.err));
	tl_result_free(&r);
}

void
rt_assert_queue_sound(struct rt *t)
{
	struct buf out = BUF_INIT;
	int code = sh_queue_check(&t->s, &out);

	cr_assert_eq(code, 0, "queue-check exit %d:\n%s", code, buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), " 0 problems"), "queue-check:\n%s", buf_cstr(&out));
	buf_free(&out);
}

void
rt_assert_queue_empty(struct rt *t)
{
	cr_assert_eq(qt_leftovers(&t->s.qt), 0, "the queue is not empty:\n%s", sh_listing(&t->s));
}

static int
queue_empty(struct rt *t, void *arg)
{
	(void)arg;
	return qt_leftovers(&t->s.qt) == 0;
}

void
rt_wait_empty(struct rt *t, int ms)
{
	if (!rt_wait(queue_empty, t, NULL, ms)) {
		char *logs = rt_send_logs(t), *tail = logs;
		size_t len = strlen(logs);

		if (len > 6000)
			tail = logs + len - 6000;
		cr_assert_fail("the queue is not empty after %d ms:\n%s\nweir-send said (end):\n%s",
		    ms, sh_listing(&t->s), tail);
	}
}

void
rt_flush_until_empty(struct rt *t, int ms)
{
	int waited;

	for (waited = 0; waited < ms; waited += 3000) {
		rt_flush(t);
		if (rt_wait(queue_empty, t, NULL, 3000))
			return;
	}
	rt_wait_empty(t, 0);
}

int
rt_wait(int (*cond)(struct rt *, void *), struct rt *t, void *arg, int ms)
{
	struct timespec t0, now;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (cond(t, arg))
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return cond(t, arg);
		usleep(20000);
	}
}

int
rt_drained(struct rt *t, void *arg)
{
	/* intd/ is left out: a writer killed before its todo/ link leaves
	 * intd/ and mess/ of a message never queued (removed after 36
	 * hours, as qmail-send does); one being preprocessed still has its
	 * todo/ entry. */
	static const char *const dirs[] = { "todo", "info", "remote", "bounce" };
	size_t i;

	(void)arg;
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		char *p = xasprintf("%s/%s", t->s.qt.qdir, dirs[i]);
		int n = tl_count_files(p);

		free(p);
		if (n != 0)
			return 0;
	}
	return 1;
}

/* ---- the record ---- */

/* The string value of "key": "..." in a JSON line (no escapes expected
 * in our addresses; \" and \\ are undone anyway), malloc'ed, or NULL. */
static char *
json_str_at(const char *p, const char **end)
{
	struct buf b = BUF_INIT;

	if (*p != '"')
		return NULL;
	for (p++; *p && *p != '"'; p++) {
		if (*p == '\\' && p[1])
			p++;
		buf_addc(&b, *p);
	}
	if (end)
		*end = *p ? p + 1 : p;
	buf_addc(&b, '\0');
	return b.s;
}

static const char *
json_key(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof pat, "\"%s\": ", key);
	p = strstr(line, pat);
	return p ? p + strlen(pat) : NULL;
}

void
rt_rec_load(struct rt *t, struct rt_rec *r)
{
	rt_rec_load_file(t->record, r);
}

void
rt_rec_load_file(const char *record, struct rt_rec *r)
{
	FILE *f = fopen(record, "r");
	char *line = NULL;
	size_t cap = 0;

	memset(r, 0, sizeof *r);
	if (f == NULL)
		return;
	while (getline(&line, &cap, f) > 0) {
		const char *ev = json_key(line, "event"), *tm = json_key(line, "time"), *p;
		char *name;

		if (ev == NULL || tm == NULL)
			continue;
		name = json_str_at(ev, NULL);
		if (name && strcmp(name, "mail") == 0) {
			r->mail_times = xrealloc(r->mail_times, (r->nmail + 1) * sizeof(double));
			r->mail_times[r->nmail++] = strtod(tm, NULL);
			if (!strstr(line, "\"tls\": true") || !strstr(line, "\"auth\": true"))
				r->nmail_unsafe++;
		} else if (name && strcmp(name, "starttls") == 0) {
			r->nstarttls++;
		} else if (name && strcmp(name, "auth") == 0) {
			r->nauth++;
			if (strstr(line, "\"ok\": false"))
				r->nauth_fail++;
		} else if (name && strcmp(name, "dropped") == 0) {
			r->ndropped++;
		} else if (name && strcmp(name, "connect") == 0) {
			r->nconnect++;
		} else if (name && strcmp(name, "rset") == 0) {
			r->nrset++;
		} else if (name && strcmp(name, "idle-close") == 0) {
			r->nidle_close++;
		} else if (name && strcmp(name, "data") == 0) {
			struct rt_data d;

			memset(&d, 0, sizeof d);
			d.time = strtod(tm, NULL);
			p = json_key(line, "sender");
			d.sender = p ? json_str_at(p, NULL) : xstrdup("?");
			p = json_key(line, "n");
			d.n = p ? (unsigned)strtoul(p, NULL, 10) : 0;
			p = json_key(line, "conn");
			d.conn = p ? (unsigned)strtoul(p, NULL, 10) : 0;
			p = json_key(line, "rcpts");
			if (p && *p == '[') {
				p++;
				while (*p == ' ' || *p == ',')
					p++;
				while (*p == '"') {
					d.rcpts = xrealloc(d.rcpts, (d.nrcpt + 1) * sizeof *d.rcpts);
					d.rcpts[d.nrcpt++] = json_str_at(p, &p);
					while (*p == ' ' || *p == ',')
						p++;
				}
			}
			r->v = xrealloc(r->v, (r->n + 1) * sizeof *r->v);
			r->v[r->n++] = d;
		}
		free(name);
	}
	free(line);
	fclose(f);
}

void
rt_rec_free(struct rt_rec *r)
{
	size_t i, j;

	for (i = 0; i < r->n; i++) {
		for (j = 0; j < r->v[i].nrcpt; j++)
			free(r->v[i].rcpts[j]);
		free(r->v[i].rcpts);
		free(r->v[i].sender);
	}
	free(r->v);
	free(r->mail_times);
	memset(r, 0, sizeof *r);
}

size_t
rt_rec_ndata(struct rt *t)
{
	return rt_rec_ndata_file(t->record);
}

size_t
rt_rec_ndata_file(const char *record)
{
	FILE *f = fopen(record, "r");
	char *line = NULL;
	size_t cap = 0, n = 0;

	if (f == NULL)
		return 0;
	while (getline(&line, &cap, f) > 0)
		n += strstr(line, "\"event\": \"data\"") != NULL;
	free(line);
	fclose(f);
	return n;
}

int
rt_ndata_at_least(struct rt *t, void *arg)
{
	return rt_rec_ndata(t) >= *(size_t *)arg;
}

int
rt_delivered_to(struct rt *t, void *arg)
{
	struct rt_rec r;
	size_t n;

	rt_rec_load(t, &r);
	n = rt_rec_count(&r, NULL, arg);
	rt_rec_free(&r);
	return n > 0;
}

size_t
rt_rec_count(const struct rt_rec *r, const char *sender, const char *rcpt)
{
	size_t i, j, n = 0;

	for (i = 0; i < r->n; i++)
		if (sender == NULL || strcmp(r->v[i].sender, sender) == 0)
			for (j = 0; j < r->v[i].nrcpt; j++)
				n += strcmp(r->v[i].rcpts[j], rcpt) == 0;
	return n;
}

ssize_t
rt_rec_earlier(const struct rt_rec *r, size_t i, const char *addr)
{
	size_t j, m;

	for (j = 0; j < i; j++)
		for (m = 0; m < r->v[j].nrcpt; m++)
			if (strcmp(r->v[j].rcpts[m], addr) == 0)
				return (ssize_t)j;
	return -1;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
rt_record_has(struct rt *t, void *arg)
{
	FILE *f = fopen(t->record, "r");
	char line[8192];
	int seen = 0;

	while (f && !seen && fgets(line, sizeof line, f))
		seen = strstr(line, arg) != NULL;
	if (f)
		fclose(f);
	return seen;
}

size_t
rt_assert_window(const struct rt_rec *r, size_t limit, double per)
{
	/* The record's times are the upstream's wall clock rounded to a
	 * microsecond; the gate measures on the monotonic clock.  A
	 * millisecond of slack covers the rounding and the two clocks'
	 * drift over a test's few seconds, and nothing more. */
	const double slack = 0.001;
	double *tv = xcalloc(r->n + 1, sizeof *tv);
	size_t i, j = 0, worst = 0, worst_at = 0;

	for (i = 0; i < r->n; i++)
		tv[i] = r->v[i].time;
	qsort(tv, r->n, sizeof *tv, cmp_double);
	/* For each start s = tv[j]: the events in [s, s + per). */
	for (i = 0; i < r->n; i++) {
		while (tv[i] - tv[j] >= per - slack)
			j++;
		if (i - j + 1 > worst) {
			worst = i - j + 1;
			worst_at = j;
		}
	}
	if (worst > limit) {
		struct buf b = BUF_INIT;

		for (i = worst_at; i < worst_at + worst; i++)
			buf_printf(&b, " %.6f", tv[i]);
		cr_assert_fail("window invariant broken: %zu transactions within %.3f s (limit %zu):"
		    "%s", worst, per, limit, buf_cstr(&b));
	}
	free(tv);
	return worst;
}

void
rt_rec_message(struct rt *t, const struct rt_data *d, struct buf *b)
{
	char *p = xasprintf("%s.%u", t->record, d->n);

	buf_reset(b);
	tl_read(p, b);
	free(p);
}

/* ---- shared by relay_test, the fault matrix and the soak ---- */

double
rt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

char **
rt_addrs(const char *prefix, const char *domain, size_t from, size_t n)
{
	char **v = xcalloc(n + 1, sizeof *v);
	size_t i;

	for (i = 0; i < n; i++)
		v[i] = xasprintf("%s%zu@%s", prefix, from + i, domain);
	return v;
}

void
rt_addrs_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void
rt_assert_no_bounce(struct rt *t, const struct rt_rec *r)
{
	char *logs = rt_send_logs(t), *bdir = xasprintf("%s/bounce", t->s.qt.qdir);
	size_t i;

	for (i = 0; i < r->n; i++)
		cr_assert(strcmp(r->v[i].sender, "<>") != 0, "a bounce went out (data event %zu)", i);
	cr_assert(strstr(logs, ": bounced <") == NULL, "a recipient failed: ...%.300s",
	    strstr(logs, ": bounced <"));
	cr_assert(strstr(logs, "bounce to <") == NULL, "a bounce was queued: ...%.300s",
	    strstr(logs, "bounce to <"));
	cr_assert_eq(tl_count_files(bdir), 0, "files in bounce/");
	free(logs);
	free(bdir);
}

size_t
rt_log_count(struct rt *t, const char *what)
{
	char *logs = rt_send_logs(t), *p = logs;
	size_t n = 0;

	while ((p = strstr(p, what)) != NULL) {
		n++;
		p++;
	}
	free(logs);
	return n;
}

struct log_want {
	const char *what;
	size_t n;
};

static int
log_has_n(struct rt *t, void *arg)
{
	const struct log_want *w = arg;

	return rt_log_count(t, w->what) >= w->n;
}

char *
rt_send_logs_tail(struct rt *t, size_t max)
{
	char *l = rt_send_logs(t), *r;
	size_t n = strlen(l);

	r = xstrdup(n > max ? l + n - max : l);
	free(l);
	return r;
}

int
rt_logged(struct rt *t, const char *what, size_t n, int ms)
{
	struct log_want w = { what, n };

	return rt_wait(log_has_n, t, &w, ms);
}

void
rt_wait_log(struct rt *t, const char *what, size_t n, int ms)
{
	cr_assert(rt_logged(t, what, n, ms), "\"%s\" not logged %zu times in %d ms:\n...%s",
	    what, n, ms, rt_send_logs_tail(t, 4000));
}

struct idle_want {
	const char *after, *state;
	size_t n;
};

static int
idle_after(struct rt *t, void *arg)
{
	const struct idle_want *w = arg;
	char *logs = rt_send_logs(t);
	int r = tl_idle_after(logs, w->after, w->n, w->state);

	free(logs);
	return r;
}

void
rt_wait_idle(struct rt *t, const char *after, size_t n, const char *state, int ms)
{
	struct idle_want w = { after, state, n };

	cr_assert(rt_wait(idle_after, t, &w, ms), "no \"idle: %s\" after \"%s\" (%zu) in %d ms:"
	    "\n...%s", state, after, n, ms, rt_send_logs_tail(t, 6000));
}

size_t
rt_done_marks(struct rt *t)
{
	char *cmd = xasprintf("cat '%s'/remote/*/* 2>/dev/null | tr '\\0' '\\n' | grep -c '^D'",
	    t->s.qt.qdir);
	FILE *f = popen(cmd, "r");
	unsigned long n = 0;

	cr_assert(f, "popen: %s", strerror(errno));
	if (fscanf(f, "%lu", &n) != 1)
		n = 0;
	pclose(f);
	free(cmd);
	return n;
}

long
rt_mailq_count(const char *mq)
{
	const char *p = strstr(mq, "messages in queue: ");

	cr_assert(p, "mailq said:\n%s", mq);
	return strtol(p + 19, NULL, 10);
}

/* The number after "key:" in /proc/pid/file, or -1. */
static long long
proc_field(pid_t pid, const char *file, const char *key)
{
	char path[64], line[256];
	size_t n = strlen(key);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/%s", (long)pid, file);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, n) == 0 && line[n] == ':' &&
		    sscanf(line + n + 1, " %lld", &v) == 1)
			break;
	fclose(f);
	return v;
}

long
rt_status_kb(pid_t pid, const char *key)
{
	return (long)proc_field(pid, "status", key);
}

long long
rt_proc_io(pid_t pid, const char *key)
{
	return proc_field(pid, "io", key);
}

long
rt_vmrss_kb(pid_t pid)
{
	return rt_status_kb(pid, "VmRSS");
}

long
rt_send_peak_rss(struct rt *t, int ms, size_t *samples)
{
	long rss, max = 0;
	int i;

	*samples = 0;
	for (i = 0; i < ms / 10 && qt_leftovers(&t->s.qt) != 0; i++) {
		if ((rss = rt_vmrss_kb(t->send.pid)) > 0) {
			(*samples)++;
			if (rss > max)
				max = rss;
		}
		usleep(10000);
	}
	return max;
}

/* ---- deliverers, and the kill -9 soak ---- */

void
rt_say(const char *fmt, ...)
{
	va_list ap;

	/* As Criterion's own lines, which tests/run.sh shows. */
	fputs("[----] ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

pid_t
rt_run_child(struct rt *t, const char *prog)
{
	struct proc_ent c[32];
	size_t nc, i;

	if (t->run <= 0)
		return 0;
	nc = proc_children(t->run, c, 32);
	for (i = 0; i < nc; i++)
		if (strcmp(c[i].comm, prog) == 0 && c[i].state != 'Z')
			return c[i].pid;
	return 0;
}

size_t
rt_deliverers(struct rt *t, int sig, pid_t *v, size_t max)
{
	struct proc_ent c[256];
	size_t nc, i, n = 0;
	pid_t send = t->send.pid > 0 ? t->send.pid : rt_run_child(t, "weir-send");

	if (send <= 0)
		return 0;
	nc = proc_children(send, c, 256);
	for (i = 0; i < nc; i++) {
		if (strcmp(c[i].comm, "weir-remote") != 0 || c[i].state == 'Z' ||
		    (v != NULL && n >= max) || (sig != 0 && kill(c[i].pid, sig) != 0))
			continue;
		if (v)
			v[n] = c[i].pid;
		n++;
	}
	return n;
}

/* xorshift64*: the same seed, the same victims and pauses. */
static uint64_t
soak_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* Message i's recipients: every 10th has 1 + i % 5 (batched by the
 * cap), the others one. */
static size_t
soak_nrcpt(size_t i)
{
	return i % 10 == 9 ? 1 + i % 5 : 1;
}

static char *
soak_rcpt(unsigned round, size_t i, size_t j)
{
	return xasprintf("r%um%zuk%zu@dest.example", round, i, j);
}

/* weir-queued on t's queue_socket (the folder's queued.sock). */
static void
rt_queued_start(struct rt *t)
{
	char *bin = tl_bin("weir-queued"), *log = xasprintf("%s/queued.log", t->s.qt.tmp);
	char *sock = xasprintf("%s/queued.sock", t->s.qt.tmp);
	pid_t parent = getpid();
	int fd, i;

	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "open %s: %s", log, strerror(errno));
	t->queued = fork();
	cr_assert(t->queued >= 0, "fork: %s", strerror(errno));
	if (t->queued == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, bin, "-c", t->s.qt.conf, (char *)NULL);
		_exit(127);
	}
	setpgid(t->queued, t->queued);
	close(fd);
	for (i = 0; i < 1000 && !tl_sock_answers(sock); i++)
		usleep(10000);	/* its socket is the event: polled, 10 s at most */
	cr_assert(i < 1000, "weir-queued does not answer on %s (see %s)", sock, log);
	free(bin);
	free(log);
	free(sock);
}

/* The injector: a child that queues every message with sendmail, one
 * after the other, while the kills go on.  A sendmail that failed for
 * the time being (EX_TEMPFAIL: its weir-queued was killed) is run again,
 * and the message's number written to retried. */
static pid_t
soak_inject(struct rt *t, const struct rt_soak *o, const char *retried)
{
	pid_t pid = fork();
	size_t i, j;
	int tries;

	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid > 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (i = 0; i < o->messages; i++) {
		const char *args[2 + 5];
		char *rc[5], msg[128];
		struct tl_result r;
		size_t n = soak_nrcpt(i);

		args[0] = "-f";
		args[1] = RT_SOAK_SENDER;
		for (j = 0; j < n; j++)
			args[2 + j] = rc[j] = soak_rcpt(o->round, i, j);
		snprintf(msg, sizeof msg, "Subject: soak %u/%zu\n\nbody of %zu\n", o->round, i, i);
		for (tries = 0; tries < 10; tries++) {
			r = rt_run(t, "sendmail", args, 2 + n, msg);
			if (r.status != 75)
				break;
			fprintf(stderr, "soak: sendmail exit 75 (%s): again\n", buf_cstr(&r.err));
			tl_result_free(&r);
			{
				FILE *f = fopen(retried, "a");

				if (f == NULL || fprintf(f, "%zu\n", i) < 0 || fclose(f) != 0)
					_exit(1);
			}
		}
		if (r.status != 0) {
			fprintf(stderr, "soak: sendmail exit %d: %s\n", r.status, buf_cstr(&r.err));
			_exit(1);
		}
		tl_result_free(&r);
		for (j = 0; j < n; j++)
			free(rc[j]);
	}
	_exit(0);
}

/* kill -9 of `weir run`, a new one at once: it waits for the old
 * generation (which the kernel's SIGTERM stops) and starts.  None of the
 * old generation's processes (counted just before the kill: weir run's
 * descendants) may be alive once it has. */
static void
soak_kill_run(struct rt *t)
{
	struct proc_ent gen[256];
	size_t n, i, j;
	pid_t was = t->run;

	/* Breadth first: weir run's children, theirs... */
	n = proc_children(was, gen, 256);
	for (i = 0; i < n && n < 256; i++)
		n += proc_children(gen[i].pid, gen + n, 256 - n);
	rt_run_kill9(t);
	rt_run_start(t);
	for (j = 0; j < n; j++) {
		char path[64], b[512], *p;
		FILE *f;
		int alive = 0;

		snprintf(path, sizeof path, "/proc/%ld/stat", (long)gen[j].pid);
		if ((f = fopen(path, "r")) != NULL) {
			/* Alive (not a zombie) and the same program: a pid
			 * reused this soon by the same name would be a fluke. */
			alive = fgets(b, sizeof b, f) && (p = strrchr(b, ')')) != NULL &&
			    p[1] == ' ' && p[2] != 'Z' && strstr(b, gen[j].comm) != NULL;
			fclose(f);
		}
		cr_assert(!alive, "%s (pid %ld) of the weir run killed (pid %ld) outlived it",
		    gen[j].comm, (long)gen[j].pid, (long)was);
	}
}

void
rt_soak_round(struct rt *t, const struct rt_soak *o, struct rt_soak_result *res)
{
	char upconf[64], policy[160];
	double *kill_at = xcalloc(o->kills + 1, sizeof *kill_at);
	unsigned long *isretried = NULL;
	size_t nretried = 0;
	char *retried;
	uint64_t rs = o->seed * 2654435761ULL + o->round + 1;
	size_t i, j, k, nkt = 0, s2;
	struct rt_rec r;
	struct timespec t0, t1;
	pid_t inj;
	int st;

	memset(res, 0, sizeof *res);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rt_upstream_start(t, "good", NULL, 0);
	snprintf(upconf, sizeof upconf, "  max_recipients = %u\n", o->cap);
	rt_conf_upstream(t, upconf);
	snprintf(policy, sizeof policy, "upstream \"isp\" { rate = {\"%u per %us\"} "
	    "max_recipients = %u }\n", o->limit, o->per, o->cap);
	rt_policy(t, policy);
	/* sendmail through weir-queued: no QMAILQUEUE (which would bypass
	 * it), and weir-queue found in WEIR_LIBEXEC while it is down. */
	{
		char *qs = xasprintf("queue_socket = \"%s/queued.sock\"\n", t->s.qt.tmp);

		sh_conf_append(&t->s, qs);
		free(qs);
		for (i = 0; t->s.qt.envs[i]; i++)
			if (strncmp(t->s.qt.envs[i], "QMAILQUEUE=", 11) == 0) {
				free(t->s.qt.envs[i]);
				t->s.qt.envs[i] = xstrdup(t->env_libexec);
			}
	}
	if (o->supervised)
		rt_run_start(t);	/* weir-queued too: queue_socket is set */
	else {
		rt_gate_start(t, "2s");
		rt_send_start(t);
		rt_queued_start(t);
	}
	retried = xasprintf("%s/retried.%u", t->s.qt.tmp, o->round);
	inj = soak_inject(t, o, retried);
	for (k = 0; k < o->kills; k++) {
		/* A pause of up to 2 * mean_gap_ms, then a victim: weir-send
		 * 2 in 6, a running weir-remote 2 in 6, weir-gate 1 in 6,
		 * weir-queued 1 in 6; or (supervised) weir run. */
		unsigned pause = (unsigned)(soak_rand(&rs) % (2 * o->mean_gap_ms + 1));
		unsigned who = (unsigned)(soak_rand(&rs) % 6);

		usleep(pause * 1000);
		if (o->supervised) {
			size_t fl = rt_deliverers(t, 0, NULL, 0);

			kill_at[nkt++] = rt_now();
			soak_kill_run(t);
			res->run_kills++;
			res->in_flight += fl;
			res->dup_bound += o->concurrency;
		} else if (who < 2) {
			size_t fl = rt_deliverers(t, 0, NULL, 0);

			kill_at[nkt++] = rt_now();
			rt_send_kill9(t);
			res->send_kills++;
			res->in_flight += fl;
			res->dup_bound += o->concurrency;
			rt_send_start(t);
		} else if (who < 4) {
			size_t n = 0, tries;

			/* Deliveries are short: look for one for up to 0.5 s. */
			for (tries = 0; tries < 250 && n == 0; tries++)
				if ((n = rt_deliverers(t, SIGKILL, NULL, 0)) == 0)
					usleep(2000);
			if (n > 0)
				kill_at[nkt++] = rt_now();
			res->remote_kills += n;
			res->in_flight += n;
			res->dup_bound += n;
			if (n == 0)
				res->remote_misses++;
			/* A crashed deliverer is retried on qmail's schedule. */
			rt_flush(t);
		} else if (who < 5) {
			rt_gate_kill9(t);
			res->gate_kills++;
			rt_gate_start(t, "2s");
		} else {
			reap(&t->queued);
			res->queued_kills++;
			rt_queued_start(t);
		}
	}
	while (waitpid(inj, &st, 0) < 0 && errno == EINTR)
		;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "soak: the injection failed (0x%x)", st);
	reap(&t->queued);
	{
		/* The messages run again: each may come twice, whenever. */
		struct buf rb = BUF_INIT;
		const char *p;

		if (read_file_at(AT_FDCWD, retried, &rb, 1 << 20) == 0)
			for (p = buf_cstr(&rb); *p; p = strchr(p, '\n') + 1) {
				isretried = xrealloc(isretried, (nretried + 1) * sizeof *isretried);
				isretried[nretried++] = strtoul(p, NULL, 10);
				res->reinjected++;
			}
		buf_free(&rb);
	}
	/* Drained, with a flush now and then for the crashed deliveries. */
	for (i = 0; i < 60 && !rt_wait(rt_drained, t, NULL, 3000); i++)
		rt_flush(t);
	cr_assert(rt_drained(t, NULL), "soak round %u (seed %llu): not drained after 3 min:\n...%s",
	    o->round, (unsigned long long)o->seed, rt_send_logs_tail(t, 4000));
	/* A kill during a message's elimination may leave mess/ alone (S2,
	 * removed after 36 hours): at most one per kill of weir-send; a
	 * kill of weir-queued, the mess/ and intd/ files of the one message
	 * the injector had in its hands (never queued: sendmail ran again);
	 * a kill of weir run, both (its weir-send and weir-queued stop at
	 * once). */
	s2 = (size_t)qt_leftovers(&t->s.qt);
	cr_assert(s2 <= res->send_kills + 2 * res->queued_kills + 3 * res->run_kills,
	    "%zu files left in the queue after %zu kills of weir-send, %zu of weir-queued and "
	    "%zu of weir run", s2, res->send_kills, res->queued_kills, res->run_kills);
	rt_assert_queue_sound(t);
	rt_rec_load(t, &r);
	/* Every recipient at least once. */
	for (i = 0; i < o->messages; i++)
		for (j = 0; j < soak_nrcpt(i); j++) {
			char *a = soak_rcpt(o->round, i, j);
			size_t c = rt_rec_count(&r, RT_SOAK_SENDER, a);

			cr_assert(c >= 1, "soak round %u (seed %llu): <%s> never delivered", o->round,
			    (unsigned long long)o->seed, a);
			res->recipients++;
			res->extra_copies += c - 1;
			free(a);
		}
	/* A transaction that repeats a recipient is a duplicate: its first
	 * copy was in flight at a kill of weir-send or weir-remote (accepted
	 * at most 5 s before one, a generous margin for a loaded machine, or
	 * 1 s after, for the clocks), and there are at most as many as the
	 * transactions that could be in flight at those kills. */
	for (i = 0; i < r.n; i++) {
		const struct rt_data *d = &r.v[i];
		double first = -1;
		size_t m;

		cr_assert(d->nrcpt <= o->cap, "a transaction with %zu recipients", d->nrcpt);
		for (m = 0; m < d->nrcpt; m++) {
			ssize_t e = rt_rec_earlier(&r, i, d->rcpts[m]);

			if (e >= 0 && (first < 0 || r.v[e].time < first))
				first = r.v[e].time;
		}
		if (first < 0)
			continue;
		{
			/* r<round>m<i>k<j>@: a message sendmail ran twice. */
			unsigned long mi = strtoul(strchr(d->rcpts[0], 'm') + 1, NULL, 10);

			for (m = 0; m < nretried && isretried[m] != mi; m++)
				;
			if (m < nretried) {
				res->reinjected_dups++;
				continue;
			}
		}
		res->duplicates++;
		for (k = 0; k < nkt; k++)
			if (first > kill_at[k] - 5.0 && first < kill_at[k] + 1.0)
				break;
		cr_assert(k < nkt, "soak round %u (seed %llu): transaction %zu (to <%s>) repeats one "
		    "accepted at %.3f, not near a kill", o->round, (unsigned long long)o->seed, i,
		    d->rcpts[0], first);
	}
	cr_assert(res->duplicates <= res->dup_bound, "soak round %u (seed %llu): %zu duplicate "
	    "transactions, at most %zu could be in flight at the kills", o->round,
	    (unsigned long long)o->seed, res->duplicates, res->dup_bound);
	rt_assert_no_bounce(t, &r);
	res->worst = rt_assert_window(&r, o->limit, (double)o->per);
	res->transactions = r.n;
	res->s2 = s2;
	cr_assert(res->reinjected_dups <= res->reinjected, "soak round %u: %zu repeated "
	    "transactions of messages sendmail ran again, only %zu ran again", o->round,
	    res->reinjected_dups, res->reinjected);
	rt_rec_free(&r);
	free(kill_at);
	free(isretried);
	free(retried);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

/* ---- a second upstream (a backup relay) ---- */

void
rt_peer_start(struct rt *t, struct rt_peer *p, const char *name, const char *const *flags,
    unsigned port)
{
	char *log;
	unsigned got = 0;

	cr_assert(p->pid == 0, "upstream %s runs already", name);
	if (p->record == NULL) {
		snprintf(p->name, sizeof p->name, "%s", name);
		p->record = xasprintf("%s/record.%s.jsonl", t->s.qt.tmp, name);
	}
	log = xasprintf("%s/upstream.%s.%u.log", t->s.qt.tmp, name, ++p->runs);
	p->pid = upstream_run(t, "good", p->record, flags, port, log, &got);
	cr_assert(port == 0 || got == port, "upstream %s on %u, asked for %u", name, got, port);
	p->port = got;
	free(log);
}

void
rt_peer_stop(struct rt_peer *p)
{
	reap(&p->pid);
}

void
rt_peer_free(struct rt_peer *p)
{
	reap(&p->pid);
	free(p->record);
	memset(p, 0, sizeof *p);
}

int
rt_peer_ndata_at_least(struct rt *t, void *arg)
{
	const struct rt_peer_count *c = arg;

	(void)t;
	return rt_rec_ndata_file(c->p->record) >= c->n;
}
