/*
 * testrelay.c: `weir [-c FILE] test-relay [-v] [UPSTREAM...]`: for each
 * upstream named (default: every upstream section of weir.conf, in file
 * order) run weir-remote's probe, `weir-remote [-c FILE] -T -u NAME`,
 * which goes through its own state machine (connect, banner, EHLO,
 * STARTTLS, EHLO, AUTH, QUIT) and sends no mail and asks weir-gate for
 * nothing; there is no second SMTP client here.  Each of its lines is
 * printed prefixed with the upstream's name, then "NAME: passed" or
 * "NAME: FAILED (STEP)".  -v passes weir-remote's log (every state
 * transition) through to standard error.
 *
 * Exit 0 when every upstream passed, 1 when one failed, 2 for bad usage
 * or when weir-remote cannot be run.
 *
 * Trusts: weir-remote's output only to be one line per step (it is
 * printed, not interpreted, apart from the step name of a failure).
 * Config keys: the upstream sections (their names); weir-remote reads
 * the rest.  weir-remote is found with libexec_path().
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/privdrop.h"
#include "mail/libexec.h"
#include "weir/weir.h"

#define PROBE_OUT_MAX (1 << 20)

/* Run the probe for one upstream; its stdout into out.  The exit status
 * of weir-remote, or -1 if it could not be run (reason logged). */
static int
run_probe(const char *bin, const char *cfile, const char *name, int verbose, const char *as,
    struct buf *out)
{
	const char *argv[8];
	int p[2], status, devnull = -1, k = 0;
	pid_t pid;
	ssize_t r;

	argv[k++] = bin;
	if (cfile) {
		argv[k++] = "-c";
		argv[k++] = cfile;
	}
	argv[k++] = "-T";
	argv[k++] = "-u";
	argv[k++] = name;
	argv[k] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0) {
		log_warn("pipe");
		return -1;
	}
	if (!verbose && (devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
		log_warn("open /dev/null");
		close(p[0]);
		close(p[1]);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		log_warn("fork");
		close(p[0]);
		close(p[1]);
		if (devnull >= 0)
			close(devnull);
		return -1;
	}
	if (pid == 0) {
		if (dup2(p[1], 1) < 0 || (devnull >= 0 && dup2(devnull, 2) < 0))
			_exit(127);
		if (as)		/* root: as the deliverer, as weir auth login does */
			privdrop(as, 127);
		execv(bin, (char *const *)argv);
		log_warn("exec %s", bin);
		_exit(127);
	}
	close(p[1]);
	if (devnull >= 0)
		close(devnull);
	for (;;) {
		buf_reserve(out, 4096);
		out->s[out->len] = '\0';	/* nothing read is an empty text */
		r = read_retry(p[0], out->s + out->len, 4096);
		if (r <= 0)
			break;
		out->len += (size_t)r;
		out->s[out->len] = '\0';
		if (out->len > PROBE_OUT_MAX) {
			kill(pid, SIGKILL);
			break;
		}
	}
	if (r < 0)
		log_warn("reading from weir-remote");
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			log_warn("waitpid");
			return -1;
		}
	if (WIFSIGNALED(status)) {
		log_warnx("weir-remote -T -u %s: killed by signal %d", name, WTERMSIG(status));
		return 128 + WTERMSIG(status);
	}
	return WEXITSTATUS(status);
}

/* Print out's lines prefixed by name; the first failed step's name into
 * step. */
static void
show(const char *name, const struct buf *out, char *step, size_t max)
{
	const char *p = out->s, *nl, *f;

	step[0] = '\0';
	while (p && *p) {
		nl = strchr(p, '\n');
		printf("%s: %.*s\n", name, (int)(nl ? nl - p : (long)strlen(p)), p);
		f = strstr(p, " failed: ");
		if (step[0] == '\0' && f && (nl == NULL || f < nl) &&
		    (size_t)(f - p) < max && strcspn(p, " ") == (size_t)(f - p))
			snprintf(step, max, "%.*s", (int)(f - p), p);
		p = nl ? nl + 1 : NULL;
	}
}

int
cmd_test_relay(int argc, char **argv, struct weir_config *cfg)
{
	const char **names, *as = NULL;
	char *bin, step[64], who[64];
	uid_t uid;
	gid_t gid;
	struct buf out = BUF_INIT;
	size_t n = 0, i;
	int verbose = 0, failed = 0, a = 1, rc;

	if (a < argc && strcmp(argv[a], "-v") == 0) {
		verbose = 1;
		a++;
	}
	for (i = (size_t)a; i < (size_t)argc; i++)
		if (argv[i][0] == '-') {
			log_warnx("usage: weir [-c FILE] test-relay [-v] [UPSTREAM...]");
			return 2;
		}
	names = xcalloc((size_t)argc + cfg->nupstreams + 1, sizeof *names);
	if (a < argc)
		for (i = (size_t)a; i < (size_t)argc; i++)
			names[n++] = argv[i];
	else
		for (i = 0; i < cfg->nupstreams; i++)
			names[n++] = cfg->upstreams[i].name;
	if (n == 0) {
		printf("no upstream sections in %s: nothing to test\n",
		    cfg->file ? cfg->file : "the configuration (there is no weir.conf)");
		free(names);
		return 1;
	}
	bin = libexec_path("weir-remote");
	if (access(bin, X_OK) < 0) {
		log_warn("cannot run %s", bin);
		free(bin);
		free(names);
		return 2;
	}
	/* Root running a set-user-id weir-remote could not drop back to
	 * root's own identity (weir-remote refuses: the set-id one "could
	 * come back"): the probe runs as the deliverer. */
	if (geteuid() == 0 && libexec_deliverer(cfg, &uid, &gid, who, sizeof who) && uid != 0)
		as = who;
	for (i = 0; i < n; i++) {
		buf_reset(&out);
		if (fflush(stdout) != 0)
			break;
		rc = run_probe(bin, cfg->file, names[i], verbose, as, &out);
		show(names[i], &out, step, sizeof step);
		if (rc == 0 && step[0] == '\0') {
			printf("%s: passed\n", names[i]);
			continue;
		}
		failed++;
		if (step[0])
			printf("%s: FAILED (%s)\n", names[i], step);
		else
			printf("%s: FAILED (weir-remote exited with %d)\n", names[i], rc);
	}
	printf("%zu upstream%s tested, %d failed\n", n, n == 1 ? "" : "s", failed);
	buf_free(&out);
	free(bin);
	free(names);
	if (fflush(stdout) != 0)
		return 2;
	return failed ? 1 : 0;
}
