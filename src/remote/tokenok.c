/*
 * tokenok.c: see tokenok.h.
 *
 * Trusts: its parent.  Config keys: the upstream's oauth section.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/io.h"
#include "lib/log.h"
#include "mail/oauth.h"
#include "remote/tokenok.h"

/* In the helper: wait for the word on fd 3, act, exit. */
static void
helper(const struct weir_upstream *up, const struct buf *tok)
{
	struct buf err = BUF_INIT;
	char c = 0;
	ssize_t n;

	while ((n = read(3, &c, 1)) < 0 && errno == EINTR)
		;
	if (n == 1 && c == 'A' && oauth_token_worked(up, tok, &err) < 0)
		log_warnx("upstream %s: OAuth: the alarm could not be ended: %s", up->name, err.s);
	_exit(0);
}

void
tokenok_arm(struct tokenok *k, const struct weir_upstream *up, const struct buf *tok)
{
	struct oauth_status st;
	struct buf why = BUF_INIT;
	int p[2], devnull;

	k->pid = 0;
	k->fd = -1;
	if (!up->oauth.present || oauth_status_load(&up->oauth, &st, &why) != 1 ||
	    (!st.login_needed && !st.error_at)) {
		buf_free(&why);
		return;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		log_warn("upstream %s: OAuth: pipe", up->name);
		return;
	}
	k->pid = fork();
	if (k->pid < 0) {
		log_warn("upstream %s: OAuth: fork", up->name);
		k->pid = 0;
		(void)close(p[0]);
		(void)close(p[1]);
		return;
	}
	if (k->pid == 0) {
		/* Nothing of the parent's held open: its report pipes, the
		 * session's socket end when they close. */
		devnull = open("/dev/null", O_RDWR);
		if (devnull < 0 || dup2(p[0], 3) < 0 || dup2(devnull, 0) < 0 ||
		    dup2(devnull, 1) < 0 || close_range(4, ~0U, 0) < 0)
			_exit(1);
		helper(up, tok);
	}
	(void)close(p[0]);
	k->fd = p[1];
}

void
tokenok_done(struct tokenok *k, int accepted)
{
	int status;

	if (k->pid <= 0)
		return;
	if (accepted && full_write(k->fd, "A", 1) < 0)
		log_warn("OAuth: telling the helper");
	(void)close(k->fd);
	k->fd = -1;
	while (waitpid(k->pid, &status, 0) < 0 && errno == EINTR)
		;
	k->pid = 0;
}
