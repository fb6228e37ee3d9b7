/*
 * preproc_test.c: weir-send's preprocessing, S4 to S5 (src/send/preproc.c,
 * src/mail/QUEUE.md): a todo/ file as weir-queue writes it and as a stock
 * qmail-queue writes it becomes info/S/N (F<sender>\0, mtime = todo's)
 * and remote/S/N (T<rcpt>\0 ...), byte for byte; todo/N and intd/N are
 * gone; local recipients (no @, @localhost, @hostname, any case) become
 * the admin address and nothing else is touched; a corrupt todo is left
 * alone with nothing created; a rerun after a crash halfway gives the
 * same result; a message without recipients; a recipient with a control
 * byte kept for the bounce (the sender's is corrupt); recipients a stock
 * qmail-send left pending in local/ taken over into remote/ through the
 * local rule (local_takeover); a preprocessing stopped by a full disk
 * says "try again soon" (-2); addr_is_local() itself.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send/preproc.h"
#include "send_helpers.h"

#define S(x) x, sizeof(x) - 1

static struct sht s;
static const struct preproc_opts opts = { SH_HOST, SH_ADMIN, NULL };

static void setup(void) { sh_setup(&s, NULL); }
static void teardown(void) { sh_teardown(&s); }

TestSuite(preproc, .init = setup, .fini = teardown, .timeout = 60);

/* Set todo/N's mtime to a fixed instant with nanoseconds; return it. */
static struct timespec
fix_todo_time(unsigned long id)
{
	struct timespec ts[2] = { { 1700000000, 123456789 }, { 1700000000, 123456789 } };
	char *p = sh_qpath(&s, Q_TODO, id);

	cr_assert(utimensat(AT_FDCWD, p, ts, 0) == 0);
	free(p);
	return ts[0];
}

/* Assert S5 exactly: info and remote bytes, info mtime, no todo, intd,
 * local or bounce, mess unchanged. */
static void
assert_s5(unsigned long id, const char *info, size_t ilen, const char *remote, size_t rlen,
    struct timespec when, const char *mess, size_t mlen)
{
	char *ip = sh_qpath(&s, Q_INFO, id);
	struct stat st;

	sh_assert_file(&s, Q_INFO, id, info, ilen);
	if (remote)
		sh_assert_file(&s, Q_REMOTE, id, remote, rlen);
	else
		cr_assert(!sh_exists(&s, Q_REMOTE, id), "remote/ written for no recipients");
	cr_assert(stat(ip, &st) == 0);
	cr_assert(st.st_mtim.tv_sec == when.tv_sec && st.st_mtim.tv_nsec == when.tv_nsec,
	    "info mtime %lld.%09ld, todo's was %lld.%09ld", (long long)st.st_mtim.tv_sec,
	    st.st_mtim.tv_nsec, (long long)when.tv_sec, when.tv_nsec);
	cr_assert(!sh_exists(&s, Q_TODO, id), "todo/%lu still there", id);
	cr_assert(!sh_exists(&s, Q_INTD, id), "intd/%lu still there", id);
	cr_assert(!sh_exists(&s, Q_LOCAL, id), "local/ written");
	cr_assert(!sh_exists(&s, Q_BOUNCE, id), "bounce/ written");
	if (mess)
		sh_assert_file(&s, Q_MESS, id, mess, mlen);
	free(ip);
}

/* ---- as weir-queue writes it ---- */

Test(preproc, from_weir_queue)
{
	static const char msg[] = "Subject: hi\n\nbody\n";
	const char *rcpts[] = {
		"bob@example.net",		/* remote */
		"carol",			/* no domain: local */
		"dave@localhost",		/* local */
		"Eve@TEST.EXAMPLE",		/* the hostname, other case: local */
		"frank@LocalHost",		/* local */
		"gina@test.example.org",	/* longer: remote */
		"hal@sub.test.example",		/* subdomain: remote */
		"ivy@localhost.example",	/* remote */
		"Jo.Smith@Example.COM",		/* remote, case kept */
		NULL,
	};
	static const char want_remote[] =
	    "Tbob@example.net\0"
	    "T" SH_ADMIN "\0"
	    "T" SH_ADMIN "\0"
	    "T" SH_ADMIN "\0"
	    "T" SH_ADMIN "\0"
	    "Tgina@test.example.org\0"
	    "Thal@sub.test.example\0"
	    "Tivy@localhost.example\0"
	    "TJo.Smith@Example.COM\0";
	struct buf env = BUF_INIT, mess = BUF_INIT;
	struct tl_result r;
	struct qt_msg m;
	struct timespec when;
	size_t n = 99;
	char *mp;

	qt_envelope(&env, "alice@example.org", rcpts);
	qt_inject(&s.qt, msg, sizeof msg - 1, env.s, env.len, NULL, &r);
	cr_assert_eq(r.status, 0, "weir-queue exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
	qt_load_only(&s.qt, 0, time(NULL) + 1, &m);
	cr_assert(m.has_intd, "weir-queue left no intd/ (the test wants one)");
	mp = sh_qpath(&s, Q_MESS, m.id);
	tl_read(mp, &mess);
	when = fix_todo_time(m.id);

	cr_assert_eq(preprocess(&s.q, m.id, &opts, &n), 0);
	cr_assert_eq(n, 9);
	assert_s5(m.id, S("Falice@example.org\0"), S(want_remote), when, mess.s, mess.len);
	free(mp);
	buf_free(&mess);
	buf_free(&env);
	qt_msg_free(&m);
}

/* ---- as a stock qmail-queue writes it ---- */

static const char qmail_mess[] =
    "Received: (qmail 4242 invoked by uid 1000); 21 Nov 2026 10:00:00 -0000\n"
    "From: someone@example.org\nSubject: old queue\n\nhello\n";
static const char qmail_todo[] =
    "u1000\0p4242\0Fsomeone@example.org\0"
    "Tx@remote.example\0Troot\0Tpostmaster@test.example\0Ty@remote.example\0";
static const char qmail_remote[] =
    "Tx@remote.example\0T" SH_ADMIN "\0T" SH_ADMIN "\0Ty@remote.example\0";

Test(preproc, from_stock_qmail_queue)
{
	unsigned long id = sh_put_s4(&s, S(qmail_mess), S(qmail_todo), 1);
	struct timespec when = fix_todo_time(id);
	size_t n;

	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	cr_assert_eq(n, 4);
	assert_s5(id, S("Fsomeone@example.org\0"), S(qmail_remote), when, S(qmail_mess));
}

/* S4 allows intd/N to be gone already (?intd). */
Test(preproc, todo_without_intd)
{
	unsigned long id = sh_put_s4(&s, S(qmail_mess), S(qmail_todo), 0);
	struct timespec when = fix_todo_time(id);
	size_t n;

	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	assert_s5(id, S("Fsomeone@example.org\0"), S(qmail_remote), when, S(qmail_mess));
}

Test(preproc, empty_sender_kept)
{
	static const char todo[] = "u0\0p1\0F\0Tbob@example.net\0";
	unsigned long id = sh_put_s4(&s, S("x\n"), S(todo), 1);
	struct timespec when = fix_todo_time(id);
	size_t n;

	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	cr_assert_eq(n, 1);
	assert_s5(id, S("F\0"), S("Tbob@example.net\0"), when, S("x\n"));
}

/* The sender is never rewritten, even when local. */
Test(preproc, local_sender_not_rewritten)
{
	static const char todo[] = "u0\0p1\0Froot\0Tbob@example.net\0";
	unsigned long id = sh_put_s4(&s, S("x\n"), S(todo), 1);
	struct timespec when = fix_todo_time(id);
	size_t n;

	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	assert_s5(id, S("Froot\0"), S("Tbob@example.net\0"), when, S("x\n"));
}

Test(preproc, zero_recipients)
{
	static const char todo[] = "u1000\0p7\0Fa@example.org\0";
	unsigned long id = sh_put_s4(&s, S("x\n"), S(todo), 1);
	struct timespec when = fix_todo_time(id);
	size_t n = 99;

	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	cr_assert_eq(n, 0);
	assert_s5(id, S("Fa@example.org\0"), NULL, 0, when, S("x\n"));
}

/* ---- corrupt todo files: left alone, nothing created ---- */

static void
corrupt_case(const char *todo, size_t len)
{
	unsigned long id = sh_put_s4(&s, S("x\n"), todo, len, 1);
	size_t n;

	cr_assert_eq(preprocess(&s.q, id, &opts, &n), -1, "corrupt todo accepted: %s",
	    sh_escape(todo, len));
	sh_assert_file(&s, Q_TODO, id, todo, len);
	sh_assert_file(&s, Q_INTD, id, todo, len);
	sh_assert_file(&s, Q_MESS, id, S("x\n"));
	cr_assert(!sh_exists(&s, Q_INFO, id), "info/ created for a corrupt todo");
	cr_assert(!sh_exists(&s, Q_REMOTE, id), "remote/ created for a corrupt todo");
	cr_assert(!sh_exists(&s, Q_LOCAL, id), "local/ created for a corrupt todo");
	/* And a second try does the same. */
	cr_assert_eq(preprocess(&s.q, id, &opts, &n), -1);
	sh_assert_file(&s, Q_TODO, id, todo, len);
	cr_assert(!sh_exists(&s, Q_INFO, id));
}

Test(preproc, corrupt_truncated_record) { corrupt_case(S("u1\0p2\0Fa@b.c\0Tbob@exam")); }
Test(preproc, corrupt_no_uid) { corrupt_case(S("p2\0Fa@b.c\0Tbob@example.net\0")); }
Test(preproc, corrupt_bad_uid) { corrupt_case(S("u1x\0p2\0Fa@b.c\0Tbob@example.net\0")); }
Test(preproc, corrupt_no_sender) { corrupt_case(S("u1\0p2\0Tbob@example.net\0")); }
Test(preproc, corrupt_wrong_type) { corrupt_case(S("u1\0p2\0Fa@b.c\0Xbob@example.net\0")); }
/* qmail-queue's fd 1 input (with its final extra NUL) is not a todo file. */
Test(preproc, corrupt_extra_nul) { corrupt_case(S("u1\0p2\0Fa@b.c\0Tbob@example.net\0\0")); }
Test(preproc, corrupt_empty) { corrupt_case("", 0); }
/* A stock qmail-queue lets control bytes through; weir never sends them. */
Test(preproc, corrupt_control_byte_sender) { corrupt_case(S("u1\0p2\0Fa\n@b.c\0Tbob@example.net\0")); }

/* A recipient with a control byte (even one without a domain) is kept as
 * it is, for deliver.c to bounce; the others go on.  Before, the whole
 * todo/ file stayed in todo/ forever and nobody was told. */
Test(preproc, control_byte_rcpt_kept_for_the_bounce)
{
	static const char todo[] = "u1\0p2\0Fa@b.c\0Tok@example.net\0Tbob@example.net\r\nDATA\0"
	    "Troot\x01\0Troot\0";
	static const char want[] = "Tok@example.net\0Tbob@example.net\r\nDATA\0Troot\x01\0"
	    "T" SH_ADMIN "\0";
	unsigned long id = sh_put_s4(&s, S("x\n"), S(todo), 1);
	struct timespec when = fix_todo_time(id);
	size_t n;

	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	cr_assert_eq(n, 4);
	assert_s5(id, S("Fa@b.c\0"), S(want), when, S("x\n"));
}

Test(preproc, corrupt_address_too_long)
{
	struct buf t = BUF_INIT;
	char addr[1100];

	memset(addr, 'a', sizeof addr - 1);
	addr[sizeof addr - 1] = '\0';
	memcpy(addr + 1000, "@x.y", 4);
	buf_add(&t, S("u1\0p2\0Fa@b.c\0T"));
	buf_add(&t, addr, strlen(addr) + 1);
	corrupt_case(t.s, t.len);
	buf_free(&t);
}

/* mess/S/N missing: nothing done, todo stays for the admin. */
Test(preproc, no_mess_file)
{
	unsigned long id = sh_put_s4(&s, S("x\n"), S(qmail_todo), 1);
	char *mp = sh_qpath(&s, Q_MESS, id);
	size_t n;

	cr_assert(unlink(mp) == 0);
	cr_assert_eq(preprocess(&s.q, id, &opts, &n), -1);
	sh_assert_file(&s, Q_TODO, id, S(qmail_todo));
	cr_assert(!sh_exists(&s, Q_INFO, id));
	cr_assert(!sh_exists(&s, Q_REMOTE, id));
	free(mp);
}

/* ---- a crash halfway, then the rerun ---- */

/* What a crash can leave: info, remote and local in any state
 * (partly written, stale), todo still there, intd there or not. */
static void
crash_case(const char *info, size_t ilen, const char *remote, size_t rlen, int local,
    int with_intd)
{
	unsigned long id = sh_put_s4(&s, S(qmail_mess), S(qmail_todo), with_intd);
	struct timespec when;
	size_t n;

	if (info)
		sh_write(&s, Q_INFO, id, info, ilen);
	if (remote)
		sh_write(&s, Q_REMOTE, id, remote, rlen);
	if (local)
		sh_write(&s, Q_LOCAL, id, S("Tstale\0"));
	when = fix_todo_time(id);
	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	cr_assert_eq(n, 4);
	assert_s5(id, S("Fsomeone@example.org\0"), S(qmail_remote), when, S(qmail_mess));
	/* Preprocessing again is impossible now (no todo), and harmless. */
	cr_assert_eq(preprocess(&s.q, id, &opts, &n), -1);
	sh_assert_file(&s, Q_REMOTE, id, S(qmail_remote));
}

Test(preproc, rerun_info_partial) { crash_case(S("Fsome"), NULL, 0, 0, 1); }
Test(preproc, rerun_info_empty) { crash_case("", 0, NULL, 0, 0, 1); }
Test(preproc, rerun_info_done_remote_partial)
{
	crash_case(S("Fsomeone@example.org\0"), S("Tx@remote.example\0T"), 0, 1);
}
Test(preproc, rerun_remote_complete_with_marks)
{
	/* Full files, even with D marks (impossible, but must not survive). */
	crash_case(S("Fsomeone@example.org\0"),
	    S("Dx@remote.example\0T" SH_ADMIN "\0T" SH_ADMIN "\0Dy@remote.example\0"), 1, 0);
}
Test(preproc, rerun_intd_already_gone)
{
	crash_case(S("Fsomeone@example.org\0"), S(qmail_remote), 0, 0);
}

/* The same todo preprocessed twice from scratch gives the same bytes. */
Test(preproc, rerun_same_bytes_as_first_run)
{
	unsigned long id = sh_put_s4(&s, S(qmail_mess), S(qmail_todo), 1);
	struct buf info1 = BUF_INIT, rem1 = BUF_INIT;
	char *ip = sh_qpath(&s, Q_INFO, id), *rp = sh_qpath(&s, Q_REMOTE, id);
	char *tp = sh_qpath(&s, Q_TODO, id);
	struct timespec when = fix_todo_time(id);
	size_t n;

	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	tl_read(ip, &info1);
	tl_read(rp, &rem1);
	/* Put todo back as if its unlink never reached the disk. */
	tl_write(tp, S(qmail_todo));
	fix_todo_time(id);
	cr_assert_eq(preprocess(&s.q, id, &opts, &n), 0);
	assert_s5(id, info1.s, info1.len, rem1.s, rem1.len, when, S(qmail_mess));
	buf_free(&info1);
	buf_free(&rem1);
	free(ip);
	free(rp);
	free(tp);
}

/* Two messages: preprocessing one leaves the other alone. */
Test(preproc, other_message_untouched)
{
	unsigned long a = sh_put_s4(&s, S(qmail_mess), S(qmail_todo), 1);
	unsigned long b = sh_put_s4(&s, S("y\n"), S("u1\0p2\0Fz@z.z\0Tq@q.q\0"), 1);
	size_t n;

	cr_assert_eq(preprocess(&s.q, a, &opts, &n), 0);
	sh_assert_file(&s, Q_TODO, b, S("u1\0p2\0Fz@z.z\0Tq@q.q\0"));
	sh_assert_file(&s, Q_INTD, b, S("u1\0p2\0Fz@z.z\0Tq@q.q\0"));
	cr_assert(!sh_exists(&s, Q_INFO, b));
}

/* ---- local/ as a stock qmail-send leaves it ---- */

/* One remote recipient done, two local ones: one done, one pending.  The
 * pending one joins remote/ through the local rule, local/ goes. */
Test(preproc, takeover_local_pending)
{
	unsigned long id = sh_put_mess(&s, S(qmail_mess));

	sh_write(&s, Q_INFO, id, S("Fsomeone@example.org\0"));
	sh_write(&s, Q_REMOTE, id, S("Dx@remote.example\0"));
	sh_write(&s, Q_LOCAL, id, S("Dalias-root@test.example\0Tjoe@test.example\0"));
	cr_assert_eq(local_takeover(&s.q, id, &opts), 1);
	sh_assert_file(&s, Q_REMOTE, id, S("Dx@remote.example\0T" SH_ADMIN "\0"));
	cr_assert(!sh_exists(&s, Q_LOCAL, id), "local/ still there");
	/* Done: a second call has nothing to do. */
	cr_assert_eq(local_takeover(&s.q, id, &opts), 0);
	sh_assert_file(&s, Q_REMOTE, id, S("Dx@remote.example\0T" SH_ADMIN "\0"));
}

/* Only local recipients: remote/ is made. A control byte is kept for the
 * bounce. */
Test(preproc, takeover_local_only)
{
	unsigned long id = sh_put_mess(&s, S(qmail_mess));

	sh_write(&s, Q_INFO, id, S("Fsomeone@example.org\0"));
	sh_write(&s, Q_LOCAL, id, S("Tjoe@test.example\0Tbad\n@test.example\0"));
	cr_assert_eq(local_takeover(&s.q, id, &opts), 1);
	sh_assert_file(&s, Q_REMOTE, id, S("T" SH_ADMIN "\0Tbad\n@test.example\0"));
	cr_assert(!sh_exists(&s, Q_LOCAL, id));
}

/* All done in local/: it goes, remote/ is untouched; no local/: 0. */
Test(preproc, takeover_nothing_pending)
{
	unsigned long id = sh_put_mess(&s, S(qmail_mess));

	sh_write(&s, Q_INFO, id, S("Fsomeone@example.org\0"));
	sh_write(&s, Q_REMOTE, id, S("Tx@remote.example\0"));
	cr_assert_eq(local_takeover(&s.q, id, &opts), 0);
	sh_write(&s, Q_LOCAL, id, S("Djoe@test.example\0"));
	cr_assert_eq(local_takeover(&s.q, id, &opts), 0);
	cr_assert(!sh_exists(&s, Q_LOCAL, id));
	sh_assert_file(&s, Q_REMOTE, id, S("Tx@remote.example\0"));
}

/* A corrupt local/ is left alone, and the message must not end. */
Test(preproc, takeover_corrupt_local)
{
	unsigned long id = sh_put_mess(&s, S(qmail_mess));

	sh_write(&s, Q_INFO, id, S("Fsomeone@example.org\0"));
	sh_write(&s, Q_LOCAL, id, S("Tjoe@test.exa"));
	cr_assert_eq(local_takeover(&s.q, id, &opts), -1);
	sh_assert_file(&s, Q_LOCAL, id, S("Tjoe@test.exa"));
	cr_assert(!sh_exists(&s, Q_REMOTE, id));
}

/* ---- the local rule with an aliases file ---- */

/* root: a list with a remote address, a local name that is an alias, a
 * local name that is not (admin), a pipe and a file (refused), an
 * :include: file; a loop goes to the admin; a name whose values are all
 * refused goes to the admin; a name not in the file goes to the admin. */
Test(preproc, aliases_expanded)
{
	static const char todo[] = "u0\0p1\0Fcron@test.example\0Troot\0TLoop@localhost\0"
	    "Tpipe@test.example\0Tnobody\0Tbob@example.net\0";
	struct aliases al;
	struct preproc_opts o = { SH_HOST, SH_ADMIN, &al };
	char *ap = xasprintf("%s/aliases", s.qt.tmp), *inc = xasprintf("%s/ops", s.qt.tmp);
	char *text = xasprintf("root: ann@example.org, ops, joe, |/bin/true, /var/mail/root\n"
	    "ops: :include:%s\nloop: loop2\nloop2: loop\npipe: \"|cat, x\"\n", inc);
	static const char want[] = "Tann@example.org\0Tops1@example.org\0"
	    "Tops2@example.org\0T" SH_ADMIN "\0T" SH_ADMIN "\0T" SH_ADMIN "\0T" SH_ADMIN "\0"
	    "Tbob@example.net\0";
	unsigned long id = sh_put_s4(&s, S("x\n"), S(todo), 1);
	struct timespec when = fix_todo_time(id);
	size_t n;

	tl_write(ap, text, strlen(text));
	tl_write(inc, "ops1@example.org\nops2@example.org, ann@example.org\n", 51);
	aliases_init(&al, ap);
	cr_assert_eq(preprocess(&s.q, id, &o, &n), 0);
	/* root: ann, ops1, ops2, admin (joe; ann once); loop: admin;
	 * pipe: admin; nobody: admin; bob. */
	cr_assert_eq(n, 8);
	assert_s5(id, S("Fcron@test.example\0"), S(want), when, S("x\n"));
	aliases_free(&al);
	free(ap);
	free(inc);
	free(text);
}

/* The file changes: the next message sees the new entry. */
Test(preproc, aliases_reread)
{
	static const char todo[] = "u0\0p1\0Fa@b.example\0Troot\0";
	struct aliases al;
	struct preproc_opts o = { SH_HOST, SH_ADMIN, &al };
	char *ap = xasprintf("%s/aliases", s.qt.tmp);
	struct timespec ts[2] = { { 1700000000, 0 }, { 1700000000, 0 } };
	unsigned long a = sh_put_s4(&s, S("x\n"), S(todo), 1), b;
	size_t n;

	tl_write(ap, "root: one@example.org\n", 22);
	cr_assert(utimensat(AT_FDCWD, ap, ts, 0) == 0);
	aliases_init(&al, ap);
	cr_assert_eq(preprocess(&s.q, a, &o, &n), 0);
	sh_assert_file(&s, Q_REMOTE, a, S("Tone@example.org\0"));
	b = sh_put_s4(&s, S("y\n"), S(todo), 1);
	tl_write(ap, "root: two@example.org\n", 22);
	ts[0].tv_sec = ts[1].tv_sec = 1700000001;
	cr_assert(utimensat(AT_FDCWD, ap, ts, 0) == 0);
	cr_assert_eq(preprocess(&s.q, b, &o, &n), 0);
	sh_assert_file(&s, Q_REMOTE, b, S("Ttwo@example.org\0"));
	aliases_free(&al);
	free(ap);
}

/* qmail-send's pending local/ recipients go through the aliases too. */
Test(preproc, takeover_through_aliases)
{
	struct aliases al;
	struct preproc_opts o = { SH_HOST, SH_ADMIN, &al };
	char *ap = xasprintf("%s/aliases", s.qt.tmp);
	unsigned long id = sh_put_mess(&s, S(qmail_mess));

	tl_write(ap, "joe: joe@example.org\n", 21);
	aliases_init(&al, ap);
	sh_write(&s, Q_INFO, id, S("Fsomeone@example.org\0"));
	sh_write(&s, Q_LOCAL, id, S("Tjoe@box.example\0"));
	cr_assert_eq(local_takeover(&s.q, id, &o), 1);
	sh_assert_file(&s, Q_REMOTE, id, S("Tjoe@example.org\0"));
	aliases_free(&al);
	free(ap);
}

/* ---- addr_is_local ---- */

static int
local(const char *a)
{
	return addr_is_local(a, strlen(a), SH_HOST);
}

Test(preproc, addr_is_local_cases)
{
	cr_assert_eq(local("root"), 1);
	cr_assert_eq(local(""), 1);
	cr_assert_eq(local("a@localhost"), 1);
	cr_assert_eq(local("a@LOCALHOST"), 1);
	cr_assert_eq(local("a@test.example"), 1);
	cr_assert_eq(local("a@Test.Example"), 1);
	cr_assert_eq(local("a@b@test.example"), 1);	/* the last @ counts */
	cr_assert_eq(local("a@example.net"), 0);
	cr_assert_eq(local("a@localhost.example"), 0);
	cr_assert_eq(local("a@xlocalhost"), 0);
	cr_assert_eq(local("a@test.example.org"), 0);
	cr_assert_eq(local("a@sub.test.example"), 0);
	cr_assert_eq(local("a@xtest.example"), 0);
	cr_assert_eq(local("a@test.exampl"), 0);
	cr_assert_eq(local("test.example@example.net"), 0);
	/* The length given is what counts, not a NUL. */
	cr_assert_eq(addr_is_local("a@localhostXX", 11, SH_HOST), 1);
	cr_assert_eq(addr_is_local("a@example.net", 1, SH_HOST), 1);
}

/* ---- a batch (preprocess_batch: one slice of todo/) ---- */

/* Each message of a batch comes out as it would alone: the good ones in
 * S5, the corrupt one left alone (-1), the one whose mess/ is gone -1,
 * whatever their order and their folders. */
Test(preproc, batch_each_as_alone)
{
	static const char good1[] = "u1\0p2\0Fa@example.org\0Tbob@example.net\0";
	static const char good2[] = "u1\0p2\0Fc@example.org\0Tdan@example.net\0Terin@" SH_HOST "\0";
	static const char bad[] = "u1\0p2\0Tbob@example.net\0";
	struct preproc_msg v[4];
	struct timespec t1, t2;
	char *mp;

	memset(v, 0, sizeof v);
	v[0].id = sh_put_s4(&s, S("one\n"), S(good1), 1);
	v[1].id = sh_put_s4(&s, S("bad\n"), S(bad), 1);
	v[2].id = sh_put_s4(&s, S("two\n"), S(good2), 1);
	v[3].id = sh_put_s4(&s, S("gone\n"), S(good1), 1);
	t1 = fix_todo_time(v[0].id);
	t2 = fix_todo_time(v[2].id);
	mp = sh_qpath(&s, Q_MESS, v[3].id);
	cr_assert(unlink(mp) == 0);
	free(mp);

	preprocess_batch(&s.q, &opts, v, 4);
	cr_assert(v[0].rc == 0 && v[0].nrcpt == 1, "rc %d, %zu recipients", v[0].rc, v[0].nrcpt);
	assert_s5(v[0].id, S("Fa@example.org\0"), S("Tbob@example.net\0"), t1, S("one\n"));
	cr_assert(v[2].rc == 0 && v[2].nrcpt == 2, "rc %d, %zu recipients", v[2].rc, v[2].nrcpt);
	assert_s5(v[2].id, S("Fc@example.org\0"), S("Tdan@example.net\0T" SH_ADMIN "\0"), t2,
	    S("two\n"));
	cr_assert_eq(v[1].rc, -1);
	sh_assert_file(&s, Q_TODO, v[1].id, S(bad));
	cr_assert(!sh_exists(&s, Q_INFO, v[1].id), "info/ created for a corrupt todo");
	cr_assert_eq(v[3].rc, -1);
	cr_assert(!sh_exists(&s, Q_INFO, v[3].id), "info/ created without mess/");
}
