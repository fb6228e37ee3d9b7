/* queue_helpers.c: see queue_helpers.h. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/queue.h"
#include "queue_helpers.h"

static const char *const msg_folders[] = {
	"mess", "info", "local", "remote", "pid", "intd", "todo", "bounce",
};

static void
set_env_slot(struct qt *q, int i, char *v)
{
	free(q->envs[i]);
	q->envs[i] = v;
}

void
qt_setenv(struct qt *q, const char *assignment)
{
	int i;

	for (i = 2; i < 7; i++)
		if (q->envs[i] == NULL) {
			q->envs[i] = xstrdup(assignment);
			return;
		}
	cr_assert_fail("qt_setenv: too many variables");
}

void
qt_config(struct qt *q, const char *text)
{
	tl_write(q->conf, text, strlen(text));
}

void
qt_init_queue(struct qt *q)
{
	struct buf why = BUF_INIT;
	char *weir = tl_bin("weir");

	if (access(weir, X_OK) == 0) {
		char splitarg[16];
		const char *argv[] = { weir, "queue-init", "--split", splitarg, q->qdir, NULL };
		const char *env[] = { q->envs[1], NULL };
		struct tl_run run = { .argv = argv, .env = env };
		struct tl_result r;

		snprintf(splitarg, sizeof splitarg, "%u", q->split);
		tl_run(&run, &r);
		cr_assert_eq(r.status, 0, "weir queue-init %s: exit %d: %s", q->qdir, r.status,
		    buf_cstr(&r.err));
		tl_result_free(&r);
	} else {
		cr_assert(queue_init(q->qdir, q->split, &why) == 0, "queue_init: %s",
		    buf_cstr(&why));
	}
	free(weir);
	buf_free(&why);
}

void
qt_setup(struct qt *q, unsigned split, const char *extra_conf)
{
	struct buf conf = BUF_INIT;

	memset(q, 0, sizeof *q);
	/* The outer environment must not choose the queue for us. */
	unsetenv("WEIR_QUEUE");
	unsetenv("WEIR_CONFIG");
	q->tmp = tl_tmpdir();
	q->qdir = xasprintf("%s/queue", q->tmp);
	q->conf = xasprintf("%s/weir.conf", q->tmp);
	q->split = split;
	q->uid = (unsigned long)getuid();
	/* showq_socket "": a `weir run` of a test starts no weir-showq on
	 * the default socket (showq_test.c names its own). */
	buf_printf(&conf, "# written by queue_helpers.c\nqueue_dir = \"%s\"\nqueue_split = %u\n"
	    "showq_socket = \"\"\n", q->qdir, split);
	if (extra_conf)
		buf_adds(&conf, extra_conf);
	qt_config(q, conf.s);
	set_env_slot(q, 0, xasprintf("WEIR_QUEUE=%s", q->qdir));
	set_env_slot(q, 1, xasprintf("WEIR_CONFIG=%s", q->conf));
	qt_init_queue(q);
	buf_free(&conf);
}

void
qt_teardown(struct qt *q)
{
	int i;

	tl_rmtree(q->tmp);
	free(q->tmp);
	free(q->qdir);
	free(q->conf);
	for (i = 0; i < 8; i++)
		free(q->envs[i]);
	memset(q, 0, sizeof *q);
}

void
qt_env_start(struct buf *e, const char *sender)
{
	buf_reset(e);
	buf_addc(e, 'F');
	buf_adds(e, sender);
	buf_addc(e, '\0');
}

void
qt_env_rcpt(struct buf *e, const char *rcpt)
{
	buf_addc(e, 'T');
	buf_adds(e, rcpt);
	buf_addc(e, '\0');
}

void
qt_env_end(struct buf *e)
{
	buf_addc(e, '\0');
}

void
qt_envelope(struct buf *e, const char *sender, const char *const *rcpts)
{
	qt_env_start(e, sender);
	for (; *rcpts; rcpts++)
		qt_env_rcpt(e, *rcpts);
	qt_env_end(e);
}

void
qt_inject(struct qt *q, const char *msg, size_t msglen, const char *env, size_t envlen,
    const char *const *extra, struct tl_result *r)
{
	qt_inject_ex(q, msg, msglen, env, envlen, extra, 0, r);
}

void
qt_inject_ex(struct qt *q, const char *msg, size_t msglen, const char *env, size_t envlen,
    const char *const *extra, int keep_fd0_open, struct tl_result *r)
{
	char *bin = tl_bin("weir-queue");
	const char *argv[] = { bin, NULL };
	const char *envv[24];
	struct tl_run run;
	int n = 0, i;

	for (i = 0; i < 8; i++)
		if (q->envs[i])
			envv[n++] = q->envs[i];
	for (i = 0; extra && extra[i]; i++) {
		cr_assert(n < 23);
		envv[n++] = extra[i];
	}
	envv[n] = NULL;
	memset(&run, 0, sizeof run);
	run.argv = argv;
	run.env = envv;
	run.in = msg;
	run.inlen = msglen;
	/* tl_run treats a NULL fd1in as "fd 1 is stdout": an empty envelope
	 * needs a non-NULL pointer. */
	run.fd1in = env ? env : "";
	run.fd1len = envlen;
	run.close_in_early = keep_fd0_open;
	run.timeout_s = 60;
	tl_run(&run, r);
	free(bin);
}

char *
qt_path(struct qt *q, const char *rel)
{
	return xasprintf("%s/%s", q->qdir, rel);
}

void
qt_put(struct qt *q, const char *rel, const char *data, size_t len, time_t t)
{
	char *p = qt_path(q, rel);

	tl_write(p, data, len);
	if (t) {
		struct timespec ts[2] = { { t, 0 }, { t, 0 } };

		cr_assert(utimensat(AT_FDCWD, p, ts, 0) == 0);
	}
	free(p);
}

static int
cmp_ul(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

size_t
qt_list(struct qt *q, const char *folder, unsigned long **ids)
{
	char *p = qt_path(q, folder);
	DIR *d = opendir(p);
	struct dirent *de;
	size_t n = 0, cap = 16;

	*ids = xcalloc(cap, sizeof **ids);
	if (d == NULL) {
		cr_assert(errno == ENOTDIR || errno == ENOENT, "opendir %s: %s", p, strerror(errno));
		free(p);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		unsigned long id;

		if (de->d_name[0] == '.')
			continue;
		cr_assert(queue_parse_id(de->d_name, &id) == 0, "%s/%s is not a message number", p,
		    de->d_name);
		if (n == cap) {
			cap *= 2;
			*ids = xrealloc(*ids, cap * sizeof **ids);
		}
		(*ids)[n++] = id;
	}
	closedir(d);
	free(p);
	qsort(*ids, n, sizeof **ids, cmp_ul);
	return n;
}

/* Entries of one folder (if it is one) into list, counting them. */
static int
list_folder(const char *path, const char *rel, struct buf *list)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int n = 0;

	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	d = opendir(path);
	cr_assert(d != NULL, "opendir %s: %s", path, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		char *sub;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		sub = xasprintf("%s/%s", path, de->d_name);
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
			/* a split subfolder (or a stray folder: its files count) */
			char *subrel = xasprintf("%s/%s", rel, de->d_name);

			n += list_folder(sub, subrel, list);
			free(subrel);
		} else {
			buf_printf(list, " %s/%s", rel, de->d_name);
			n++;
		}
		free(sub);
	}
	closedir(d);
	return n;
}

static int
leftovers(struct qt *q, struct buf *list)
{
	size_t i;
	int n = 0;

	for (i = 0; i < sizeof msg_folders / sizeof msg_folders[0]; i++) {
		char *p = qt_path(q, msg_folders[i]);

		n += list_folder(p, msg_folders[i], list);
		free(p);
	}
	return n;
}

int
qt_leftovers(struct qt *q)
{
	struct buf list = BUF_INIT;
	int n = leftovers(q, &list);

	buf_free(&list);
	return n;
}

void
qt_assert_only_s2(struct qt *q, const char *what)
{
	struct buf list = BUF_INIT;
	const char *p;
	int n = leftovers(q, &list);

	/* Each entry is " folder/..."; mess/ alone is S2. */
	for (p = buf_cstr(&list); (p = strchr(p, ' ')) != NULL; p++)
		cr_assert(strncmp(p + 1, "mess/", 5) == 0, "%s: %d file(s) left, not only "
		    "mess/ files (S2):%s", what, n, buf_cstr(&list));
	buf_free(&list);
}

void
qt_assert_clean(struct qt *q, const char *what)
{
	struct buf list = BUF_INIT;
	int n = leftovers(q, &list);

	cr_assert_eq(n, 0, "%s: %d file(s) left in the queue:%s", what, n, buf_cstr(&list));
	buf_free(&list);
}

void
qt_replace_with_file(struct qt *q, const char *rel)
{
	char *p = qt_path(q, rel);

	tl_rmtree(p);
	tl_write(p, "not a folder\n", 13);
	free(p);
}

const char *
qt_faultinj(void)
{
	const char *s = getenv("WEIR_FAULTINJ");

	return s && *s && access(s, R_OK) == 0 ? s : NULL;
}

/* Parse a decimal field of s at *i up to stop; cr_assert on trouble. */
static unsigned long
num_field(const char *s, size_t n, size_t *i, char stop, const char *what)
{
	unsigned long v = 0;
	size_t start = *i;

	while (*i < n && s[*i] >= '0' && s[*i] <= '9')
		v = v * 10 + (unsigned long)(s[(*i)++] - '0');
	cr_assert(*i > start && *i < n && s[*i] == stop, "%s: bad number", what);
	cr_assert(!(s[start] == '0' && *i - start > 1), "%s: leading zero", what);
	(*i)++;
	return v;
}

static const char *const months[12] = {
	"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};

/* Check "Received: (weir P invoked by uid U); D Mon YYYY HH:MM:SS -0000\n"
 * at the start of mess; returns its length, P in *pid. */
static size_t
check_received(const char *s, size_t n, time_t t0, time_t t1, unsigned long want_uid,
    unsigned long *pid)
{
	static const char pre[] = "Received: (weir ";
	size_t i = sizeof pre - 1;
	unsigned long uid, day, year, hh, mm, ss;
	struct tm tm;
	time_t t;
	int mon = -1, k;

	cr_assert(n > i && memcmp(s, pre, i) == 0, "mess does not start with \"%s\"", pre);
	*pid = num_field(s, n, &i, ' ', "Received pid");
	cr_assert(n - i > 15 && memcmp(s + i, "invoked by uid ", 15) == 0,
	    "Received: no \"invoked by uid \"");
	i += 15;
	uid = num_field(s, n, &i, ')', "Received uid");
	cr_assert_eq(uid, want_uid, "Received: uid %lu, expected %lu", uid, want_uid);
	cr_assert(n - i > 2 && s[i] == ';' && s[i + 1] == ' ', "Received: no \"; \"");
	i += 2;
	day = num_field(s, n, &i, ' ', "Received day");
	cr_assert(n - i > 4, "Received: short");
	for (k = 0; k < 12; k++)
		if (memcmp(s + i, months[k], 3) == 0 && s[i + 3] == ' ')
			mon = k;
	cr_assert(mon >= 0, "Received: bad month");
	i += 4;
	year = num_field(s, n, &i, ' ', "Received year");
	/* HH:MM:SS, two digits each (qmail's date822fmt pads these). */
	cr_assert(n - i >= 15, "Received: short time");
	for (k = 0; k < 8; k++)
		cr_assert((k % 3 == 2) ? s[i + k] == ':' : (s[i + k] >= '0' && s[i + k] <= '9'),
		    "Received: bad time \"%.8s\"", s + i);
	hh = (unsigned long)((s[i] - '0') * 10 + s[i + 1] - '0');
	mm = (unsigned long)((s[i + 3] - '0') * 10 + s[i + 4] - '0');
	ss = (unsigned long)((s[i + 6] - '0') * 10 + s[i + 7] - '0');
	i += 8;
	cr_assert(memcmp(s + i, " -0000\n", 7) == 0, "Received: does not end \" -0000\\n\"");
	i += 7;
	memset(&tm, 0, sizeof tm);
	tm.tm_year = (int)year - 1900;
	tm.tm_mon = mon;
	tm.tm_mday = (int)day;
	tm.tm_hour = (int)hh;
	tm.tm_min = (int)mm;
	tm.tm_sec = (int)ss;
	t = timegm(&tm);
	cr_assert(t >= t0 && t <= t1, "Received: date %ld not in [%ld, %ld] (UTC?)", (long)t,
	    (long)t0, (long)t1);
	/* timegm normalises: a day 31 of a 30-day month would move. */
	cr_assert(tm.tm_mday == (int)day && tm.tm_mon == mon, "Received: impossible date");
	return i;
}

void
qt_load(struct qt *q, unsigned long id, time_t t0, time_t t1, struct qt_msg *m)
{
	char rel[QPATH_MAX + 16];
	char *mp, *tp, *ip;
	struct stat ms, ts, is;
	struct buf raw = BUF_INIT;
	size_t hl, i;
	unsigned long uid, pid;

	memset(m, 0, sizeof *m);
	m->id = id;
	snprintf(rel, sizeof rel, "mess/%lu/%lu", id % q->split, id);
	mp = qt_path(q, rel);
	snprintf(rel, sizeof rel, "todo/%lu", id);
	tp = qt_path(q, rel);
	snprintf(rel, sizeof rel, "intd/%lu", id);
	ip = qt_path(q, rel);

	cr_assert(lstat(mp, &ms) == 0, "%s: %s", mp, strerror(errno));
	cr_assert(S_ISREG(ms.st_mode), "%s is not a regular file", mp);
	cr_assert_eq((unsigned long)ms.st_ino, id, "mess inode %lu is not its id %lu",
	    (unsigned long)ms.st_ino, id);
	cr_assert_eq(ms.st_mode & 07777, 0644, "%s mode %o, expected 0644", mp,
	    (unsigned)(ms.st_mode & 07777));
	cr_assert_eq(ms.st_nlink, 1, "%s has %lu links", mp, (unsigned long)ms.st_nlink);

	cr_assert(lstat(tp, &ts) == 0, "%s: %s", tp, strerror(errno));
	cr_assert(S_ISREG(ts.st_mode), "%s is not a regular file", tp);
	cr_assert_eq(ts.st_mode & 07777, 0644, "%s mode %o, expected 0644", tp,
	    (unsigned)(ts.st_mode & 07777));
	if (lstat(ip, &is) == 0) {
		m->has_intd = 1;
		cr_assert_eq(is.st_ino, ts.st_ino, "intd/%lu is not a link of todo/%lu", id, id);
		cr_assert_eq(ts.st_nlink, 2, "todo/%lu has %lu links", id,
		    (unsigned long)ts.st_nlink);
	} else {
		cr_assert_eq(errno, ENOENT, "%s: %s", ip, strerror(errno));
		cr_assert_eq(ts.st_nlink, 1, "todo/%lu has %lu links", id,
		    (unsigned long)ts.st_nlink);
	}

	tl_read(mp, &raw);
	hl = check_received(raw.s, raw.len, t0, t1, q->uid, &m->pid);
	buf_add(&m->body, raw.s + hl, raw.len - hl);
	buf_reset(&raw);

	tl_read(tp, &raw);
	i = 0;
	cr_assert(raw.len > 0 && raw.s[0] == 'u', "todo/%lu does not start with u", id);
	i = 1;
	uid = num_field(raw.s, raw.len, &i, '\0', "todo u record");
	cr_assert_eq(uid, q->uid, "todo: u%lu, expected u%lu", uid, q->uid);
	cr_assert(i < raw.len && raw.s[i] == 'p', "todo/%lu: no p record after u", id);
	i++;
	pid = num_field(raw.s, raw.len, &i, '\0', "todo p record");
	cr_assert_eq(pid, m->pid, "todo p%lu but Received names pid %lu", pid, m->pid);
	buf_add(&m->env, raw.s + i, raw.len - i);
	buf_free(&raw);
	free(mp);
	free(tp);
	free(ip);
}

void
qt_msg_free(struct qt_msg *m)
{
	buf_free(&m->body);
	buf_free(&m->env);
}

void
qt_load_only(struct qt *q, time_t t0, time_t t1, struct qt_msg *m)
{
	unsigned long *ids;
	size_t n = qt_list(q, "todo", &ids);
	struct buf list = BUF_INIT;

	cr_assert_eq(n, 1, "%zu messages in todo/, expected 1", n);
	qt_load(q, ids[0], t0, t1, m);
	free(ids);
	/* Nothing else anywhere: mess holds this one, intd at most this one. */
	n = (size_t)leftovers(q, &list);
	cr_assert_eq(n, 2u + (unsigned)m->has_intd, "unexpected files in the queue:%s",
	    buf_cstr(&list));
	buf_free(&list);
}

void
qt_assert_fails(struct qt *q, struct tl_result *r, int code, const char *what)
{
	const char *e = buf_cstr(&r->err);
	const char *nl = strchr(e, '\n');

	cr_assert_eq(r->status, code, "%s: exit %d, expected %d; stderr: %s", what, r->status,
	    code, e);
	cr_assert(strncmp(e, "weir-queue: fatal: ", 19) == 0 && strlen(e) > 20,
	    "%s: stderr is not \"weir-queue: fatal: ...\": \"%s\"", what, e);
	cr_assert(nl != NULL && nl[1] == '\0', "%s: stderr is not one line: \"%s\"", what, e);
	qt_assert_clean(q, what);
}
