/* sendmail_helpers.c: see sendmail_helpers.h. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/queue.h"
#include "sendmail_helpers.h"

void
smt_setup(struct qt *q)
{
	char *qq = tl_bin("weir-queue");
	char *e = xasprintf("QMAILQUEUE=%s", qq);

	qt_setup(q, 23, "hostname = \"" SMT_HOST "\"\n");
	qt_setenv(q, e);
	free(e);
	free(qq);
}

void
smt_run(struct qt *q, const char *prog, const char *const *args, const char *in,
    size_t inlen, const char *const *extra, struct tl_result *r)
{
	const char *argv[64], *env[16];
	char *bin = tl_bin(prog);
	size_t i, n = 0, k = 0;

	argv[n++] = bin;
	for (i = 0; args && args[i]; i++) {
		cr_assert(n < 63);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	for (i = 0; i < 8 && q->envs[i]; i++)
		env[k++] = q->envs[i];
	for (i = 0; extra && extra[i]; i++) {
		cr_assert(k < 15);
		env[k++] = extra[i];
	}
	env[k] = NULL;
	{
		struct tl_run run = { .argv = argv, .env = env, .in = in, .inlen = inlen,
			.timeout_s = 60 };

		tl_run(&run, r);
	}
	free(bin);
}

void
smt_send(struct qt *q, const char *const *args, const char *in, size_t inlen,
    struct qt_msg *m)
{
	struct tl_result r;
	time_t t0 = time(NULL), t1;

	smt_run(q, "sendmail", args, in, inlen, NULL, &r);
	t1 = time(NULL);
	cr_assert_eq(r.status, 0, "sendmail exit %d; stderr: %s", r.status, buf_cstr(&r.err));
	cr_assert_eq(r.err.len, 0, "stderr on success: %s", buf_cstr(&r.err));
	qt_load_only(q, t0, t1, m);
	/* Nothing, or with -v the message's id (mail/queue.h). */
	if (r.out.len > 0) {
		const char *out = buf_cstr(&r.out);
		char id[QUEUE_ID_MAX];
		unsigned long ino = 0;
		struct timespec t;
		size_t n = strlen(out);

		cr_assert(strncmp(out, "queued as ", 10) == 0 && out[n - 1] == '\n' &&
		    n - 11 < sizeof id, "stdout on success: %s", out);
		snprintf(id, sizeof id, "%.*s", (int)(n - 11), out + 10);
		cr_assert(queue_parse_msgid(id, &ino, &t) == 0 && ino == m->id,
		    "stdout on success: %s (message %lu)", out, m->id);
	}
	tl_result_free(&r);
}

void
smt_assert_refused(struct qt *q, struct tl_result *r, int code, const char *what)
{
	const char *e = buf_cstr(&r->err);
	const char *nl = strchr(e, '\n');

	cr_assert_eq(r->status, code, "exit %d, expected %d; stderr: %s", r->status, code, e);
	cr_assert(strncmp(e, "sendmail: ", 10) == 0, "stderr: \"%s\"", e);
	cr_assert(nl && nl[1] == '\0', "not exactly one line: \"%s\"", e);
	cr_assert(strstr(e, what), "\"%s\" not in \"%s\"", what, e);
	qt_assert_clean(q, "refused message");
}

void
smt_assert_like(const struct buf *got, const char *want, const char *what)
{
	const char *g = got->s ? got->s : "", *gend = g + got->len, *w = want;
	size_t line = 1;

	while (*w) {
		const char *wnl = strchr(w, '\n');
		size_t wl = wnl ? (size_t)(wnl - w) : strlen(w);
		const char *gnl = memchr(g, '\n', (size_t)(gend - g));
		size_t gl = gnl ? (size_t)(gnl - g) : (size_t)(gend - g);

		cr_assert(g < gend, "%s: line %zu missing (want \"%.*s\")\n--- got:\n%s", what,
		    line, (int)wl, w, got->s ? got->s : "");
		if (wl > 0 && w[wl - 1] == '*') {
			cr_assert(gl >= wl - 1 && memcmp(g, w, wl - 1) == 0,
			    "%s: line %zu: got \"%.*s\", want \"%.*s\"", what, line, (int)gl, g,
			    (int)wl, w);
		} else {
			cr_assert(gl == wl && memcmp(g, w, wl) == 0,
			    "%s: line %zu: got \"%.*s\", want \"%.*s\"\n--- got:\n%s", what, line,
			    (int)gl, g, (int)wl, w, got->s);
		}
		cr_assert_eq(gnl != NULL, wnl != NULL, "%s: line %zu: newline mismatch", what,
		    line);
		g += gl + (gnl != NULL);
		w += wl + (wnl != NULL);
		line++;
	}
	cr_assert(g == gend, "%s: extra text after line %zu: \"%.*s\"", what, line,
	    (int)(gend - g), g);
}

void
smt_assert_env(const struct qt_msg *m, const char *sender, const char *const *rcpts)
{
	struct buf want = BUF_INIT;
	size_t i;

	qt_env_start(&want, sender);
	for (i = 0; rcpts[i]; i++)
		qt_env_rcpt(&want, rcpts[i]);
	/* todo files have no final NUL: the list ends with the file. */
	cr_assert_eq(m->env.len, want.len, "envelope length %zu, want %zu", m->env.len,
	    want.len);
	for (i = 0; i < want.len; i++)
		cr_assert_eq(m->env.s[i], want.s[i], "envelope byte %zu: got 0x%02x want 0x%02x",
		    i, (unsigned char)m->env.s[i], (unsigned char)want.s[i]);
	buf_free(&want);
}

char *
smt_login_addr(void)
{
	struct passwd *pw = getpwuid(getuid());

	cr_assert(pw != NULL, "no passwd entry for uid %u", (unsigned)getuid());
	return xasprintf("%s@%s", pw->pw_name, SMT_HOST);
}

char *
smt_gecos(void)
{
	struct passwd *pw = getpwuid(getuid());
	const char *g;

	cr_assert(pw != NULL);
	g = pw->pw_gecos ? pw->pw_gecos : "";
	cr_assert(strchr(g, '&') == NULL, "GECOS with '&': test not written for it");
	return xstrndup(g, strcspn(g, ","));
}

char *
smt_script(struct qt *q, const char *name, const char *body)
{
	char *path = xasprintf("%s/%s", q->tmp, name);
	char *text = xasprintf("#!/bin/sh\n%s\n", body);

	tl_write(path, text, strlen(text));
	cr_assert(chmod(path, 0755) == 0);
	free(text);
	return path;
}

void
smt_smtpd(struct qt *q, const char *const *extra, const char *in, struct tl_result *r)
{
	char *bin = tl_bin("weir-smtpd"), *errpath = xasprintf("%s/smtpd.err", q->tmp);
	char b[4096];
	int sv[2], status, greeted = 0;
	size_t i;
	ssize_t n;
	pid_t pid;

	memset(r, 0, sizeof *r);
	unlink(errpath);
	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (i = 0; i < 8 && q->envs[i]; i++)
			putenv(q->envs[i]);
		for (i = 0; extra && extra[i]; i++)
			putenv((char *)extra[i]);
		if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0 || e < 0 || dup2(e, 2) < 0)
			_exit(126);
		execl(bin, "weir-smtpd", (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	/* Its greeting first (it refuses a client that talks early), then
	 * everything, then read to the end. */
	for (;;) {
		struct pollfd p = { sv[0], POLLIN, 0 };

		if (poll(&p, 1, 30000) <= 0 || (n = read(sv[0], b, sizeof b)) <= 0)
			break;
		buf_add(&r->out, b, (size_t)n);
		if (!greeted && memchr(r->out.s, '\n', r->out.len)) {
			greeted = 1;
			cr_assert(write(sv[0], in, strlen(in)) == (ssize_t)strlen(in));
			shutdown(sv[0], SHUT_WR);
		}
	}
	close(sv[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	tl_read(errpath, &r->err);
	free(errpath);
	free(bin);
}
