/*
 * gatedisk_test.c: weir-gate on a really full disk.  Its journal lives on
 * a 64 KB tmpfs (root only: a private mount namespace; skipped, saying
 * so, as another user) that a filler file has filled to ENOSPC.  The gate
 * must fail closed: it never answers GRANT for a grant whose G record is
 * not in the journal (a grant it could not make durable is refused, or
 * the gate stops), and it refuses sooner or later (a full disk cannot
 * hold the records of endless grants).  Then, with space again, a gate
 * restarted on that journal serves and counts every grant it had given.
 * What the test does: ACQUIRE, wait for the reply, REPORT SENT, again,
 * until a reply that is not GRANT (ERR or the gate gone); then it reads
 * the journal.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "mail/gateclient.h"
#include "send_helpers.h"
#include "testlib.h"

static char *dir, *jdir;
static pid_t gate = -1;
static int mounted;

static void
stop(void)
{
	int st;

	if (gate > 0) {
		kill(-gate, SIGKILL);
		while (waitpid(gate, &st, 0) < 0 && errno == EINTR)
			;
	}
	gate = -1;
}

static void
teardown(void)
{
	stop();
	if (mounted)
		(void)umount2(jdir, MNT_DETACH);
	if (dir)
		tl_rmtree(dir);
}

/* Fill the file system holding path with a file there: until ENOSPC. */
static void
fill(const char *path)
{
	char block[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ssize_t r;

	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	memset(block, 'x', sizeof block);
	while ((r = write(fd, block, sizeof block)) > 0)
		;
	cr_assert(r < 0 && errno == ENOSPC, "filling %s: %s", path, strerror(errno));
	/* The last partial page too. */
	while (write(fd, block, 1) == 1)
		;
	close(fd);
}

/* Does a reply come within ms?  A gate that fails closed answers an
 * ACQUIRE with silence, as it does any request that must wait. */
static int
reply_within(struct gate_client *gc, int ms)
{
	struct pollfd p = { .fd = gc->fd, .events = POLLIN };
	int64_t end = (int64_t)clock_mono_ms() + ms, left;

	if (gc->in.len > gc->off)
		return 1;
	while ((left = end - (int64_t)clock_mono_ms()) > 0)
		if (poll(&p, 1, (int)left) != 0)
			return 1;	/* readable, or an error for the read to see */
	return 0;
}

Test(gatedisk, full_disk_never_grants_without_journal, .fini = teardown, .timeout = 60)
{
	char *conf, *sock, *log, *journal, *policy, *filler, *text, *rec;
	struct gate_client gc;
	struct gp_reply r;
	struct buf jb = BUF_INIT, lb = BUF_INIT;
	const char *why;
	uint64_t ids[4096];
	size_t n = 0, i;
	uint32_t tag;
	const char *refusal;

	if (!tl_is_root())
		cr_skip_test("needs root (a size-limited tmpfs in a private mount namespace)");
	signal(SIGPIPE, SIG_IGN);	/* the gate may be gone when we write */
	dir = tl_tmpdir();
	jdir = xasprintf("%s/j", dir);
	sock = xasprintf("%s/gate.sock", dir);
	log = xasprintf("%s/gate.log", dir);
	conf = xasprintf("%s/weir.conf", dir);
	policy = xasprintf("%s/policy.conf", dir);
	journal = xasprintf("%s/gate.journal", jdir);
	filler = xasprintf("%s/filler", jdir);
	cr_assert(mkdir(jdir, 0700) == 0);
	cr_assert(unshare(CLONE_NEWNS) == 0, "unshare: %s", strerror(errno));
	cr_assert(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "make-rprivate: %s",
	    strerror(errno));
	cr_assert(mount("tmpfs", jdir, "tmpfs", 0, "size=64k,mode=0700") == 0, "mount: %s",
	    strerror(errno));
	mounted = 1;
	text = xasprintf("gate_socket = \"%s\"\npolicy_file = \"%s\"\ngate_journal = \"%s\"\n", sock,
	    policy, journal);
	tl_write(conf, text, strlen(text));
	free(text);
	text = "upstream \"up\" { rate = \"100000 per 1h\" }\n";
	tl_write(policy, text, strlen(text));

	gate = sh_gate_spawn(conf, NULL, log, sock);
	fill(filler);
	cr_assert(gc_connect(&gc, sock) == 0, "connect: %s", strerror(errno));
	/* Until refused: no answer (the gate fails closed: the request
	 * waits), ERR, or the gate gone (a write or read fails). */
	for (tag = 1; n < sizeof ids / sizeof ids[0]; tag++) {
		refusal = "the gate gone";
		if (gc_acquire(&gc, tag, "up", NULL, NULL, 1, 1, 1) < 0)
			break;
		if (!reply_within(&gc, 3000)) {
			refusal = "no grant (the request waits)";
			break;
		}
		if (gc_wait_reply(&gc, &r, &why) != 1)
			break;
		if (r.verb != GP_R_GRANT) {
			cr_assert_eq(r.verb, GP_R_ERR, "ACQUIRE answered with verb %d", (int)r.verb);
			refusal = gp_code_name(r.code);
			break;
		}
		ids[n++] = r.id;
		if (gc_report_sent(&gc, tag, 1, -1) < 0 || gc_wait_reply(&gc, &r, &why) != 1)
			break;
	}
	gc_close(&gc);
	tl_read(log, &lb);
	cr_assert(n < sizeof ids / sizeof ids[0], "%zu grants on a full 64 KB disk: the journal "
	    "cannot hold them; gate log:\n%s", n, buf_cstr(&lb));
	cr_log_info("%zu grants on the full disk, then %s", n, refusal);
	stop();

	/* Every grant answered has its G record in the journal. */
	tl_read(journal, &jb);
	for (i = 0; i < n; i++) {
		rec = xasprintf("\nG %llu up ", (unsigned long long)ids[i]);
		cr_assert(strstr(buf_cstr(&jb), rec) != NULL, "grant %llu (%zu of %zu) was answered "
		    "but is not in the journal; gate log:\n%s", (unsigned long long)ids[i], i + 1, n,
		    buf_cstr(&lb));
		free(rec);
	}

	/* Space again: a gate restarted on that journal serves. */
	cr_assert(unlink(filler) == 0);
	gate = sh_gate_spawn(conf, NULL, log, sock);
	cr_assert(gc_connect(&gc, sock) == 0, "connect: %s", strerror(errno));
	cr_assert(gc_acquire(&gc, tag + 1, "up", NULL, NULL, 1, 1, 1) == 0);
	cr_assert_eq(gc_wait_reply(&gc, &r, &why), 1);
	cr_assert_eq(r.verb, GP_R_GRANT, "no grant after the disk has space again");
	gc_close(&gc);
	buf_free(&jb);
	buf_free(&lb);
	free(conf);
	free(sock);
	free(log);
	free(journal);
	free(policy);
	free(filler);
}
