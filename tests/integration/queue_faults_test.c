/*
 * queue_faults_test.c: weir-queue when the system fails under it.  With
 * the fault-injection shim ($WEIR_FAULTINJ, tests/fault/faultinj.c) every
 * call of write, fsync, link, read, open(O_CREAT), ... that one injection
 * makes is failed in turn (n = 1, 2, ... until the injection no longer
 * reaches an n-th call); each time weir-queue must either queue the
 * message exactly and exit 0, or exit non-zero and leave nothing that
 * looks queued.  The shim's call log proves the durability order
 * (fsyncs before the link to todo/, the todo/ fsync after it).  As root,
 * a real full disk and a real read-only queue (tmpfs in a private mount
 * namespace).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "queue_helpers.h"

static struct qt q;
static struct buf msg, env;

static void
setup(void)
{
	const char *rcpts[] = { "bob@example.net", "carol@example.com", "dave@example.org",
		NULL };
	size_t i;

	qt_setup(&q, 23, NULL);
	buf_reset(&msg);
	/* 100 KB: several reads and writes. */
	buf_adds(&msg, "Subject: faults\n\n");
	for (i = 0; msg.len < 100 * 1024; i++)
		buf_printf(&msg, "line %zu of a message that must arrive whole or not at all\n", i);
	qt_envelope(&env, "alice@example.org", rcpts);
}

static void
teardown(void)
{
	qt_teardown(&q);
	buf_free(&msg);
	buf_free(&env);
}

TestSuite(faults, .init = setup, .fini = teardown, .timeout = 300);

/* ---- the shim's log ---- */

struct call {
	char fn[16];
	long ret;
	int injected;
	unsigned long ino;	/* fd calls; 0 if none */
	char path[512];		/* fd calls and path calls */
	char newp[512];		/* link, rename */
};

/* The value of " key=" in line, up to the next field. */
static int
field(const char *line, const char *key, char *out, size_t outlen)
{
	static const char *const keys[] = { " fd=", " ino=", " path=", " n=", " off=",
		" flags=", " mode=", " old=", " new=", " -> " };
	char pat[16];
	const char *v, *end = NULL;
	size_t i, n;

	snprintf(pat, sizeof pat, " %s=", key);
	v = strstr(line, pat);
	if (v == NULL)
		return -1;
	v += strlen(pat);
	for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		const char *e = strstr(v, keys[i]);

		if (e && (end == NULL || e < end))
			end = e;
	}
	if (end == NULL)
		end = v + strlen(v);
	n = (size_t)(end - v);
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

/* Parse the log into *calls; returns how many. */
static size_t
read_log(const char *path, struct call **calls)
{
	struct buf b = BUF_INIT;
	size_t n = 0, cap = 64;
	char *line, *save = NULL;

	*calls = xcalloc(cap, sizeof **calls);
	if (access(path, F_OK) != 0)
		return 0;
	tl_read(path, &b);
	for (line = strtok_r(b.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct call *c;
		const char *sp = strchr(line, ' '), *arrow = strstr(line, " -> ");
		char tmp[32];

		cr_assert(sp && arrow, "bad log line: %s", line);
		if (n == cap) {
			cap *= 2;
			*calls = xrealloc(*calls, cap * sizeof **calls);
		}
		c = &(*calls)[n++];
		memset(c, 0, sizeof *c);
		sscanf(sp + 1, "%15s", c->fn);
		c->ret = strtol(arrow + 4, NULL, 10);
		c->injected = strstr(arrow, " injected") != NULL;
		if (field(line, "ino", tmp, sizeof tmp) == 0)
			c->ino = strtoul(tmp, NULL, 10);
		field(line, "path", c->path, sizeof c->path);
		if (field(line, "new", c->newp, sizeof c->newp) == 0)
			field(line, "old", c->path, sizeof c->path);
	}
	buf_free(&b);
	return n;
}

static int
ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ---- one injection under the shim ---- */

/* Run weir-queue with WEIR_FAULT=fault (NULL: none), logging to a fresh
 * log; a reader holds lock/trigger open so the trigger write happens. */
static void
run_faulty(const char *fault, struct tl_result *r, struct call **calls, size_t *ncalls)
{
	const char *shim = qt_faultinj();
	char *pre, *f, *logp, *logv, *fifo;
	int rfd;

	if (shim == NULL)
		cr_skip_test("no $WEIR_FAULTINJ (run through tests/run.sh)");
	pre = xasprintf("LD_PRELOAD=%s", shim);
	f = xasprintf("WEIR_FAULT=%s", fault ? fault : "");
	logp = xasprintf("%s/fault.log", q.tmp);
	logv = xasprintf("WEIR_FAULT_LOG=%s", logp);
	unlink(logp);
	fifo = qt_path(&q, "lock/trigger");
	rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	cr_assert(rfd >= 0, "open %s: %s", fifo, strerror(errno));
	{
		const char *extra[] = { pre, f, logv, "WEIR_FAULT_PROG=weir-queue", NULL };

		qt_inject(&q, msg.s, msg.len, env.s, env.len, extra, r);
	}
	close(rfd);
	*ncalls = read_log(logp, calls);
	free(pre);
	free(f);
	free(logp);
	free(logv);
	free(fifo);
}

/* Assert the message is queued exactly (and alone); returns its id. */
static unsigned long
assert_queued(time_t t0, const char *what)
{
	struct qt_msg m;
	unsigned long id;

	qt_load_only(&q, t0, time(NULL), &m);
	cr_assert(m.body.len == msg.len && memcmp(m.body.s, msg.s, msg.len) == 0,
	    "%s: body differs", what);
	cr_assert(m.env.len == env.len - 1 && memcmp(m.env.s, env.s, env.len - 1) == 0,
	    "%s: envelope differs", what);
	id = m.id;
	qt_msg_free(&m);
	return id;
}

/* Start again from an empty queue. */
static void
fresh_queue(void)
{
	tl_rmtree(q.qdir);
	qt_init_queue(&q);
}

/* The exit code the contract wants for an injected failure of c, or -1
 * for "any non-zero", 0 for "must not matter". */
static int
wanted_code(const struct call *c, int err)
{
	const char *fn = c->fn;
	const char *p = c->newp[0] ? c->newp : c->path;

	if (strstr(c->path, "lock/trigger"))
		return 0;
	if (strcmp(fn, "fsync") == 0 || strcmp(fn, "fdatasync") == 0)
		return 53;
	if (strcmp(fn, "write") == 0 || strcmp(fn, "pwrite") == 0)
		return err == EINTR ? 0 : 53;
	if (strcmp(fn, "read") == 0 && strstr(c->path, ".conf"))
		return err == EINTR ? 0 : 55;	/* the configuration file */
	if (strcmp(fn, "read") == 0)
		return err == EINTR ? 0 : 54;
	if (strncmp(fn, "link", 4) == 0 || strncmp(fn, "rename", 6) == 0 ||
	    strncmp(fn, "open", 4) == 0) {
		if (strstr(p, "/todo/"))
			return 66;
		if (strstr(p, "/intd/"))
			return 65;
		if (strstr(p, "/mess/"))
			return 64;
		if (strstr(p, "/pid/"))
			return 63;
	}
	return -1;
}

/* Fail the n-th call of fn with err for n = 1, 2, ...; check each run.
 * Returns how many calls were failed (0 if weir-queue never calls fn). */
static int
fail_each(const char *fn, int err, const char *errname)
{
	int n, hits = 0;

	for (n = 1; n < 10000; n++) {
		struct tl_result r;
		struct call *calls, *hit = NULL;
		size_t ncalls, i;
		char fault[64], what[700];
		time_t t0 = time(NULL);
		int want;

		fresh_queue();
		snprintf(fault, sizeof fault, "%s=%d:%s", fn, n, errname);
		run_faulty(fault, &r, &calls, &ncalls);
		for (i = 0; i < ncalls; i++)
			if (calls[i].injected)
				hit = &calls[i];
		if (hit == NULL) {
			/* past the last call: the injection must simply work */
			cr_assert_eq(r.status, 0, "%s (no call hit): exit %d: %s", fault, r.status,
			    buf_cstr(&r.err));
			assert_queued(t0, fault);
			tl_result_free(&r);
			free(calls);
			break;
		}
		hits++;
		snprintf(what, sizeof what, "%s hit %s %s (exit %d)", fault, hit->fn,
		    hit->newp[0] ? hit->newp : hit->path, r.status);
		want = wanted_code(hit, err);
		if (strncmp(hit->fn, "fsync", 5) == 0) {
			/* never retried: no later fsync of the same file */
			for (i = (size_t)(hit - calls) + 1; i < ncalls; i++)
				cr_assert(!(strcmp(calls[i].fn, "fsync") == 0 &&
				    calls[i].ino == hit->ino), "%s: fsync retried", what);
		}
		if (strcmp(hit->fn, "fsync") == 0 && ends_with(hit->path, "/todo")) {
			/* the one exception: the message may be queued */
			cr_assert_eq(r.status, 53, "%s: exit %d, expected 53: %s", what, r.status,
			    buf_cstr(&r.err));
			cr_assert(strstr(r.err.s ? r.err.s : "", "todo") != NULL,
			    "%s: stderr does not say todo: %s", what, buf_cstr(&r.err));
			assert_queued(t0, what);
		} else if (want == 0) {
			cr_assert_eq(r.status, 0, "%s: exit %d: %s", what, r.status, buf_cstr(&r.err));
			assert_queued(t0, what);
		} else if (r.status == 0 && want == -1) {
			/* a failure that need not matter (close, unlink...) */
			assert_queued(t0, what);
		} else if (want == -1) {
			if (strncmp(hit->fn, "unlink", 6) == 0) {
				/* a pid/ name that could not be removed may stay */
				unsigned long *ids;
				size_t np = qt_list(&q, "pid", &ids);

				free(ids);
				cr_assert_eq(qt_leftovers(&q), (int)np, "%s: exit %d, more than pid/ left "
				    "(%d files, %zu in pid/); stderr: %s", what, r.status, qt_leftovers(&q),
				    np, buf_cstr(&r.err));
				cr_assert_neq(r.status, 0);
			} else {
				qt_assert_fails(&q, &r, r.status, what);
			}
		} else {
			qt_assert_fails(&q, &r, want, what);
		}
		tl_result_free(&r);
		free(calls);
	}
	cr_assert(n < 10000, "%s: never stopped failing", fn);
	/* Every function in the list is called at least once... except the
	 * ones weir-queue does not use: then hits is 0, which is fine. */
	cr_log_info("%s:%s: %d calls failed in turn", fn, errname, hits);
	return hits;
}

/* The shim itself: the n-th counted call fails, the others do not, and
 * the log says which.  (If this fails, every other test here is moot.) */
Test(faults, shim_fails_the_nth_call)
{
	const char *shim = qt_faultinj();
	char *pre, *logv, *logp, *script;
	struct tl_result r;
	struct buf log = BUF_INIT;

	if (shim == NULL)
		cr_skip_test("no $WEIR_FAULTINJ (run through tests/run.sh)");
	pre = xasprintf("LD_PRELOAD=%s", shim);
	logp = xasprintf("%s/shim.log", q.tmp);
	logv = xasprintf("WEIR_FAULT_LOG=%s", logp);
	script = xasprintf("cd %s && echo 1 >fi-one && echo 2 >fi-two && echo 3 >fi-three", q.tmp);
	{
		const char *argv[] = { "/bin/sh", "-c", script, NULL };
		const char *envv[] = { pre, logv, "WEIR_FAULT=open@/fi-two=1:EROFS,openat@/fi-two=1:EROFS",
			NULL };
		struct tl_run run = { .argv = argv, .env = envv };

		tl_run(&run, &r);
	}
	cr_assert_neq(r.status, 0, "the shell did not see the injected failure");
	cr_assert(strstr(buf_cstr(&r.err), "Read-only") != NULL, "stderr: %s", buf_cstr(&r.err));
	tl_read(logp, &log);
	cr_assert(strstr(log.s, "/fi-two flags=") && strstr(log.s, "-> -1 EROFS injected"),
	    "log: %s", log.s);
	{
		char *a = xasprintf("%s/fi-one", q.tmp), *c = xasprintf("%s/fi-three", q.tmp);

		cr_assert(access(a, F_OK) == 0, "the first redirection failed too");
		cr_assert(access(c, F_OK) != 0, "the shell went on after the failure");
		free(a);
		free(c);
	}
	tl_result_free(&r);
	buf_free(&log);
	free(pre);
	free(logp);
	free(logv);
	free(script);
}

Test(faults, clean_run_and_durability_order)
{
	struct tl_result r;
	struct call *c;
	size_t n, i;
	long mess_fsync = -1, intd_fsync = -1, dir_fsync = -1, link_i = -1, todo_fsync = -1;
	long last_mess_write = -1, last_intd_write = -1, trigger_write = -1;
	unsigned long id, intd_ino = 0;
	char suffix[64], dsuffix[64];
	time_t t0 = time(NULL);
	struct stat st;
	char *todo;

	run_faulty(NULL, &r, &c, &n);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, buf_cstr(&r.err));
	id = assert_queued(t0, "clean run");
	snprintf(suffix, sizeof suffix, "/todo/%lu", id);
	todo = qt_path(&q, suffix + 1);
	cr_assert(stat(todo, &st) == 0);
	intd_ino = st.st_ino;
	snprintf(dsuffix, sizeof dsuffix, "/mess/%lu", id % 23);
	for (i = 0; i < n; i++) {
		long k = (long)i;

		if (strcmp(c[i].fn, "fsync") == 0 || strcmp(c[i].fn, "fdatasync") == 0) {
			cr_assert_eq(c[i].ret, 0);
			if (c[i].ino == id)
				mess_fsync = k;
			else if (c[i].ino == intd_ino)
				intd_fsync = k;
			else if (ends_with(c[i].path, dsuffix))
				dir_fsync = k;
			else if (ends_with(c[i].path, "/todo"))
				todo_fsync = k;
		} else if (strncmp(c[i].fn, "link", 4) == 0 && ends_with(c[i].newp, suffix)) {
			cr_assert_eq(link_i, -1, "todo/%lu linked twice", id);
			link_i = k;
		} else if (strcmp(c[i].fn, "write") == 0 || strcmp(c[i].fn, "pwrite") == 0) {
			if (c[i].ino == id)
				last_mess_write = k;
			else if (c[i].ino == intd_ino)
				last_intd_write = k;
			else if (strstr(c[i].path, "lock/trigger"))
				trigger_write = k;
		}
	}
	cr_assert(link_i >= 0, "no link to todo/%lu in the log", id);
	cr_assert(mess_fsync >= 0 && mess_fsync < link_i, "mess file not fsynced before the link");
	cr_assert(intd_fsync >= 0 && intd_fsync < link_i, "intd file not fsynced before the link");
	cr_assert(dir_fsync >= 0 && dir_fsync < link_i, "mess/%lu not fsynced before the link",
	    id % 23);
	cr_assert(todo_fsync > link_i, "todo/ not fsynced after the link");
	cr_assert(last_mess_write >= 0 && last_mess_write < mess_fsync,
	    "mess written after its fsync");
	cr_assert(last_intd_write >= 0 && last_intd_write < intd_fsync,
	    "intd written after its fsync");
	cr_assert(trigger_write > todo_fsync, "no trigger write after the todo/ fsync");
	free(todo);
	free(c);
	tl_result_free(&r);
}

/* At least: mess, intd, mess/<k> and todo/ fsynced. */
Test(faults, every_fsync_eio)
{
	int hits = fail_each("fsync", EIO, "EIO") + fail_each("fdatasync", EIO, "EIO");

	cr_assert(hits >= 4, "only %d fsyncs in one injection", hits);
}

/* At least the mess and the intd file written. */
Test(faults, every_write_enospc)
{
	cr_assert(fail_each("write", ENOSPC, "ENOSPC") + fail_each("pwrite", ENOSPC, "ENOSPC") >= 2);
}

Test(faults, every_write_eio)
{
	cr_assert(fail_each("write", EIO, "EIO") + fail_each("pwrite", EIO, "EIO") >= 2);
}

/* At least the link to todo/. */
Test(faults, every_link_emlink)
{
	int hits = fail_each("link", EMLINK, "EMLINK") + fail_each("linkat", EMLINK, "EMLINK") +
	    fail_each("rename", EMLINK, "EMLINK") + fail_each("renameat", EMLINK, "EMLINK");

	cr_assert(hits >= 1, "no link or rename seen");
}

/* At least one read of the message and one of the envelope. */
Test(faults, every_read_eio) { cr_assert(fail_each("read", EIO, "EIO") >= 2); }

/* At least pid/ and intd/ files created. */
Test(faults, every_create_eacces)
{
	cr_assert(fail_each("open", EACCES, "EACCES") + fail_each("openat", EACCES, "EACCES") >= 2);
}

Test(faults, every_create_enospc)
{
	cr_assert(fail_each("open", ENOSPC, "ENOSPC") + fail_each("openat", ENOSPC, "ENOSPC") >= 2);
}

Test(faults, every_close_eio) { fail_each("close", EIO, "EIO"); }
Test(faults, every_unlink_eio) { fail_each("unlink", EIO, "EIO"); fail_each("unlinkat", EIO, "EIO"); }
Test(faults, every_mkdir_eio) { fail_each("mkdir", EIO, "EIO"); fail_each("mkdirat", EIO, "EIO"); }

/* EINTR must be retried, not turned into a failure or a short message. */
Test(faults, every_read_eintr) { fail_each("read", EINTR, "EINTR"); }
Test(faults, every_write_eintr) { fail_each("write", EINTR, "EINTR"); }

/* ---- real failures, as root, on a tmpfs in a private mount namespace ---- */

static void
tmpfs_queue(const char *size)
{
	char opts[32];

	if (!tl_is_root())
		cr_skip_test("needs root (mount namespace and tmpfs)");
	cr_assert(unshare(CLONE_NEWNS) == 0, "unshare: %s", strerror(errno));
	cr_assert(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "make-rprivate: %s",
	    strerror(errno));
	tl_rmtree(q.qdir);
	cr_assert(mkdir(q.qdir, 0750) == 0);
	snprintf(opts, sizeof opts, "size=%s,mode=0750", size);
	cr_assert(mount("tmpfs", q.qdir, "tmpfs", 0, opts) == 0, "mount tmpfs: %s",
	    strerror(errno));
	qt_init_queue(&q);
}

static void
tmpfs_done(void)
{
	cr_assert(umount2(q.qdir, MNT_DETACH) == 0, "umount: %s", strerror(errno));
}

Test(faults, disk_full_for_real)
{
	struct tl_result r;
	struct buf big = BUF_INIT;
	size_t i;

	tmpfs_queue("64k");
	buf_adds(&big, "Subject: too big\n\n");
	for (i = 0; big.len < 1024 * 1024; i++)
		buf_printf(&big, "%08zu a line to fill a disk that is far too small\n", i);
	qt_inject(&q, big.s, big.len, env.s, env.len, NULL, &r);
	qt_assert_fails(&q, &r, 53, "1 MB into a 64 KB tmpfs");
	/* ...and the queue still works for a small message afterwards */
	tl_result_free(&r);
	{
		time_t t0 = time(NULL);
		struct qt_msg m;

		qt_inject(&q, "small\n", 6, env.s, env.len, NULL, &r);
		cr_assert_eq(r.status, 0, "small message after disk full: exit %d: %s", r.status,
		    buf_cstr(&r.err));
		qt_load_only(&q, t0, time(NULL), &m);
		qt_msg_free(&m);
		tl_result_free(&r);
	}
	buf_free(&big);
	tmpfs_done();
}

Test(faults, read_only_queue_for_real)
{
	struct tl_result r;

	tmpfs_queue("1m");
	cr_assert(mount("tmpfs", q.qdir, "tmpfs", MS_REMOUNT | MS_RDONLY, "size=1m") == 0,
	    "remount ro: %s", strerror(errno));
	qt_inject(&q, msg.s, msg.len, env.s, env.len, NULL, &r);
	cr_assert(r.status >= 62 && r.status <= 66, "read-only queue: exit %d, expected 6x: %s",
	    r.status, buf_cstr(&r.err));
	qt_assert_fails(&q, &r, r.status, "read-only queue");
	tl_result_free(&r);
	tmpfs_done();
}
