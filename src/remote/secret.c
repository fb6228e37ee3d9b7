/*
 * secret.c: an upstream's secret; see secret.h (a secret_file is read by
 * mail/secretfile.c, an OAuth token comes from mail/oauth.c).  The bytes live in one
 * struct buf that is wiped before it is freed, and grown only by
 * reserving the maximum first, so no copy is left behind by realloc.
 * Trusts: the administrator's command.  Config keys: secret_file,
 * secret_command, oauth.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "lib/io.h"
#include "mail/config.h"
#include "mail/oauth.h"
#include "mail/secretfile.h"
#include "remote/secret.h"
#include "remote/wait.h"

/* In the child: its own process group, fds 0-2 only, then the command.
 * Never returns. */
static void
run_command(const char *command, int out)
{
	int devnull = open("/dev/null", O_RDONLY);

	if (setpgid(0, 0) < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 ||
	    close_range(3, ~0U, 0) < 0)
		_exit(127);
	/* Set-user-id weir-remote: the command runs wholly as the
	 * secret's owner (dash would otherwise fall back to the real
	 * uid, weir-send, which must not read the secret). */
	if (config_untrusted_env() && (setresgid(getegid(), getegid(), getegid()) < 0 ||
	    setresuid(geteuid(), geteuid(), geteuid()) < 0))
		_exit(127);
	execl("/bin/sh", "sh", "-c", command, (char *)NULL);
	_exit(127);
}

/* Read the command's output into out until the command has exited and
 * its output is read: to its end, or, when a child it left holds the
 * pipe, as far as it was written.  1 timed out, 0 otherwise (an error
 * is added to err). */
static int
read_output(int fd, int pidfd, uint64_t deadline_ms, struct buf *out, struct buf *err)
{
	struct pollfd pf[2] = { { pidfd, POLLIN, 0 }, { fd, POLLIN, 0 } };
	int exited = 0, eof = 0;
	enum wait_status w;
	ssize_t r;

	for (;;) {
		if (exited && eof)
			return 0;
		pf[0].revents = pf[1].revents = 0;
		if (exited) {
			/* What is left in the pipe, without waiting. */
			if (poll(&pf[1], 1, 0) < 0) {
				buf_printf(err, "secret_command: poll: %s", strerror(errno));
				return 0;
			}
			if (!pf[1].revents)
				return 0;
		} else {
			w = wait_fds(pf, eof ? 1 : 2, deadline_ms);
			if (w == WAIT_TIMEOUT)
				return 1;
			if (w == WAIT_ERROR) {
				buf_printf(err, "secret_command: poll: %s", strerror(errno));
				return 0;
			}
			if (pf[0].revents)
				exited = 1;
			if (eof || !pf[1].revents)
				continue;
		}
		r = read_retry(fd, out->s + out->len, SECRET_MAX + 1 - out->len);
		if (r < 0) {
			buf_printf(err, "secret_command: read: %s", strerror(errno));
			return 0;
		}
		if (r == 0) {
			eof = 1;
			continue;
		}
		out->len += (size_t)r;
		if (out->len > SECRET_MAX) {
			buf_printf(err, "secret_command: over %d bytes of output", SECRET_MAX);
			return 0;
		}
	}
}

int
secret_from_command(const char *command, uint64_t deadline_ms, struct buf *out,
    struct buf *err)
{
	int p[2], status = 0, timed_out = 0, pidfd;
	size_t e0 = err->len;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0) {
		buf_printf(err, "secret_command: pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		buf_printf(err, "secret_command: fork: %s", strerror(errno));
		(void)close(p[0]);
		(void)close(p[1]);
		return -1;
	}
	if (pid == 0)
		run_command(command, p[1]);
	/* Both sides set the group, so that it exists before any kill;
	 * EACCES: the child has run exec, having set it itself. */
	if (setpgid(pid, pid) < 0 && errno != EACCES)
		buf_printf(err, "secret_command: setpgid: %s", strerror(errno));
	(void)close(p[1]);
	pidfd = pidfd_open(pid, 0);
	if (pidfd < 0)
		buf_printf(err, "secret_command: pidfd_open: %s", strerror(errno));
	buf_reserve(out, SECRET_MAX + 1);
	if (err->len == e0)
		timed_out = read_output(p[0], pidfd, deadline_ms, out, err);
	(void)close(p[0]);
	if (pidfd >= 0)
		(void)close(pidfd);
	/* Whatever the command left behind goes with it: the whole group. */
	if (kill(-pid, SIGKILL) < 0 && errno != ESRCH)
		buf_printf(err, "secret_command: kill: %s", strerror(errno));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			buf_printf(err, "secret_command: waitpid: %s", strerror(errno));
			secret_wipe(out);
			return -1;
		}
	if (timed_out)
		buf_printf(err, "secret_command: timed out");
	else if (err->len == e0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
		buf_printf(err, "secret_command: exited with %s %d",
		    WIFEXITED(status) ? "status" : "signal",
		    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	if (err->len > e0) {
		secret_wipe(out);
		return -1;
	}
	out->s[out->len] = '\0';
	secret_chomp(out);
	if (out->len == 0) {
		buf_printf(err, "secret_command: no output");
		secret_wipe(out);
		return -1;
	}
	return 0;
}

int
secret_get(const struct weir_upstream *up, struct buf *out, struct buf *how, struct buf *err)
{
	if (up->oauth.present) {
		switch (oauth_access_token(up, out, how, err)) {
		case OAUTH_OK:
			return 0;
		case OAUTH_REFUSED:
			return -2;
		default:
			return -1;
		}
	}
	if (up->secret_file)
		return secretfile_read("secret_file", up->secret_file, out, err);
	return secret_from_command(up->secret_command,
	    clock_mono_ms() + (uint64_t)up->timeout_command * 1000, out, err);
}
