/*
 * rcptfile_test.c: the writes weir-send makes to a preprocessed message
 * (src/send/rcptfile.c): rcptfile_load() (offsets, addresses, done
 * flags; absent and corrupt files), rcptfile_load_part() (a window from
 * an offset to the want-th recipient not done), rcpt_mark_done() (T becomes D, one
 * byte each, nothing else changes, the length stays), and bounce_note()
 * in qmail's exact format ("<addr>:\n", the text, a blank line; blank
 * lines inside the text become "/", a newline in the address "_";
 * appending).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "send/rcptfile.h"
#include "send_helpers.h"

#define S(x) x, sizeof(x) - 1

static struct sht s;

static void setup(void) { sh_setup(&s, NULL); }
static void teardown(void) { sh_teardown(&s); }

TestSuite(rcptfile, .init = setup, .fini = teardown, .timeout = 30);

static const char three[] = "Ta@example.net\0Db@example.net\0Tccc@example.org\0";

/* ---- rcptfile_load ---- */

Test(rcptfile, load)
{
	struct rcptfile f;

	sh_write(&s, Q_REMOTE, 1000, S(three));
	cr_assert_eq(rcptfile_load(&s.q, 1000, &f), 0);
	cr_assert_eq(f.n, 3);
	cr_assert_eq(f.ndone, 1);
	cr_assert_eq(f.v[0].off, 0);
	cr_assert_eq(f.v[1].off, 15);
	cr_assert_eq(f.v[2].off, 30);
	cr_assert_eq(f.v[0].len, 13);
	cr_assert_eq(f.v[2].len, 15);
	cr_assert_str_eq(f.v[0].addr, "a@example.net");
	cr_assert_str_eq(f.v[1].addr, "b@example.net");
	cr_assert_str_eq(f.v[2].addr, "ccc@example.org");
	cr_assert_eq(f.v[0].done, 0);
	cr_assert_eq(f.v[1].done, 1);
	cr_assert_eq(f.v[2].done, 0);
	rcptfile_free(&f);
}

Test(rcptfile, load_absent)
{
	struct rcptfile f;

	cr_assert_eq(rcptfile_load(&s.q, 1001, &f), 1);
	rcptfile_free(&f);
}

Test(rcptfile, load_corrupt)
{
	struct rcptfile f;

	sh_write(&s, Q_REMOTE, 1002, S("Ta@b\0Xc@d\0"));
	cr_assert_eq(rcptfile_load(&s.q, 1002, &f), -1);
	sh_write(&s, Q_REMOTE, 1002, S("Ta@b\0Tc@"));
	cr_assert_eq(rcptfile_load(&s.q, 1002, &f), -1);
	/* Untouched by the failed loads. */
	sh_assert_file(&s, Q_REMOTE, 1002, S("Ta@b\0Tc@"));
}

/* ---- rcptfile_load_part ---- */

/* From a record's start, as far as the want-th not done: the records
 * read and their offsets in the file. */
Test(rcptfile, part_stops_at_want)
{
	static const char five[] = "Ta@x\0Db@x\0Tc@x\0Td@x\0Te@x\0";
	struct rcptfile f;

	sh_write(&s, Q_REMOTE, 1010, S(five));
	cr_assert_eq(rcptfile_load_part(&s.q, 1010, 5, 2, &f), 0);
	cr_assert_eq(f.n, 3, "%zu records", f.n);
	cr_assert_eq(f.ndone, 1);
	cr_assert_eq(f.v[0].off, 5);
	cr_assert_str_eq(f.v[0].addr, "b@x");
	cr_assert(f.v[0].done);
	cr_assert_eq(f.v[1].off, 10);
	cr_assert_str_eq(f.v[2].addr, "d@x");
	cr_assert_eq(f.v[2].off, 15);
	cr_assert(!f.v[2].done);
	rcptfile_free(&f);
	/* Fewer than wanted: to the end of the file. */
	cr_assert_eq(rcptfile_load_part(&s.q, 1010, 15, 9, &f), 0);
	cr_assert_eq(f.n, 2);
	cr_assert_str_eq(f.v[1].addr, "e@x");
	cr_assert_eq(f.v[1].off, 20);
	rcptfile_free(&f);
	/* At the end: nothing. */
	cr_assert_eq(rcptfile_load_part(&s.q, 1010, sizeof five - 1, 3, &f), 0);
	cr_assert_eq(f.n, 0);
	rcptfile_free(&f);
	cr_assert_eq(rcptfile_load_part(&s.q, 1011, 0, 3, &f), 1);
	rcptfile_free(&f);
}

/* A window larger than the first read (a long run of recipients done
 * before the ones wanted) is read on until it holds them whole. */
Test(rcptfile, part_reads_past_a_long_done_run)
{
	struct buf b = BUF_INIT;
	struct rcptfile f;
	size_t i;

	for (i = 0; i < 5000; i++)
		buf_printf(&b, "Ddone%05zu@example.net%c", i, '\0');
	buf_add(&b, S("Tlast1@example.net\0Tlast2@example.net\0Tlast3@example.net\0"));
	sh_write(&s, Q_REMOTE, 1012, b.s, b.len);
	cr_assert_eq(rcptfile_load_part(&s.q, 1012, 0, 2, &f), 0);
	cr_assert_eq(f.n, 5002, "%zu records", f.n);
	cr_assert_eq(f.ndone, 5000);
	cr_assert_str_eq(f.v[5001].addr, "last2@example.net");
	cr_assert_eq(f.v[5001].off, 5000 * 23 + 19);
	rcptfile_free(&f);
	buf_free(&b);
}

/* Corruption inside the part read is refused as rcptfile_load refuses
 * it, a record cut by the end of the file too; past the part it is not
 * read (the pass's next start reads the whole file). */
Test(rcptfile, part_corrupt)
{
	struct rcptfile f;

	sh_write(&s, Q_REMOTE, 1013, S("Ta@b\0Xc@d\0Te@f\0"));
	cr_assert_eq(rcptfile_load_part(&s.q, 1013, 5, 1, &f), -1);
	cr_assert_eq(rcptfile_load_part(&s.q, 1013, 0, 1, &f), 0);
	cr_assert_eq(f.n, 1);
	rcptfile_free(&f);
	sh_write(&s, Q_REMOTE, 1013, S("Ta@b\0Tc@"));
	cr_assert_eq(rcptfile_load_part(&s.q, 1013, 5, 1, &f), -1);
	cr_assert_eq(rcptfile_load_part(&s.q, 1013, 0, 1, &f), 0);
	rcptfile_free(&f);
	sh_assert_file(&s, Q_REMOTE, 1013, S("Ta@b\0Tc@"));
}

/* ---- rcpt_mark_done ---- */

Test(rcptfile, mark_one)
{
	size_t off = 30;

	sh_write(&s, Q_REMOTE, 1003, S(three));
	cr_assert_eq(rcpt_mark_done(&s.q, 1003, &off, 1), 0);
	sh_assert_file(&s, Q_REMOTE, 1003, S("Ta@example.net\0Db@example.net\0Dccc@example.org\0"));
}

Test(rcptfile, mark_several_from_load)
{
	struct rcptfile f;
	size_t offs[3], n = 0, i;

	sh_write(&s, Q_REMOTE, 1004, S("Tx@y\0Tlonger@example.com\0Tz@w\0"));
	cr_assert_eq(rcptfile_load(&s.q, 1004, &f), 0);
	for (i = 0; i < f.n; i++)
		if (i != 1)
			offs[n++] = f.v[i].off;
	rcptfile_free(&f);
	cr_assert_eq(rcpt_mark_done(&s.q, 1004, offs, n), 0);
	sh_assert_file(&s, Q_REMOTE, 1004, S("Dx@y\0Tlonger@example.com\0Dz@w\0"));
	/* Marking again is harmless: still one byte each. */
	cr_assert_eq(rcpt_mark_done(&s.q, 1004, offs, n), 0);
	sh_assert_file(&s, Q_REMOTE, 1004, S("Dx@y\0Tlonger@example.com\0Dz@w\0"));
	cr_assert_eq(rcptfile_load(&s.q, 1004, &f), 0);
	cr_assert_eq(f.ndone, 2);
	rcptfile_free(&f);
}

Test(rcptfile, mark_none_touches_nothing)
{
	char *p = sh_qpath(&s, Q_REMOTE, 1005);

	sh_write(&s, Q_REMOTE, 1005, S(three));
	sh_set_mtime(p, 1000000000);
	cr_assert_eq(rcpt_mark_done(&s.q, 1005, NULL, 0), 0);
	cr_assert_eq(sh_mtime(p), 1000000000);
	sh_assert_file(&s, Q_REMOTE, 1005, S(three));
	free(p);
}

Test(rcptfile, mark_missing_file_fails)
{
	size_t off = 0;

	cr_assert_eq(rcpt_mark_done(&s.q, 1006, &off, 1), -1);
	cr_assert(!sh_exists(&s, Q_REMOTE, 1006), "rcpt_mark_done created remote/");
}

/* The inode stays (one pwrite, not a rewrite of the file). */
Test(rcptfile, mark_in_place)
{
	char *p = sh_qpath(&s, Q_REMOTE, 1007);
	struct stat a, b;
	size_t off = 0;

	sh_write(&s, Q_REMOTE, 1007, S(three));
	cr_assert(stat(p, &a) == 0);
	cr_assert_eq(rcpt_mark_done(&s.q, 1007, &off, 1), 0);
	cr_assert(stat(p, &b) == 0);
	cr_assert_eq(a.st_ino, b.st_ino);
	cr_assert_eq(b.st_size, (off_t)sizeof three - 1);
	free(p);
}

/* ---- bounce_note ---- */

Test(rcptfile, note_simple)
{
	cr_assert_eq(bounce_note(&s.q, 1010, "bob@example.net", "550 5.1.1 no such user"), 0);
	sh_assert_file(&s, Q_BOUNCE, 1010, S("<bob@example.net>:\n550 5.1.1 no such user\n\n"));
}

Test(rcptfile, note_text_ending_in_newline)
{
	cr_assert_eq(bounce_note(&s.q, 1011, "bob@example.net", "550 no\n"), 0);
	sh_assert_file(&s, Q_BOUNCE, 1011, S("<bob@example.net>:\n550 no\n\n"));
}

Test(rcptfile, note_multiline)
{
	cr_assert_eq(bounce_note(&s.q, 1012, "b@x", "Remote host said:\n550-5.1.1 a\n550 5.1.1 b"), 0);
	sh_assert_file(&s, Q_BOUNCE, 1012, S("<b@x>:\nRemote host said:\n550-5.1.1 a\n550 5.1.1 b\n\n"));
}

Test(rcptfile, note_blank_lines_become_slash)
{
	cr_assert_eq(bounce_note(&s.q, 1013, "b@x", "one\n\ntwo\n\n\nthree"), 0);
	sh_assert_file(&s, Q_BOUNCE, 1013, S("<b@x>:\none\n/two\n/\nthree\n\n"));
}

/* The only blank line in bounce/N is the one ending its one entry. */
static void
assert_one_entry(unsigned long id)
{
	struct buf b = BUF_INIT;
	char *p = sh_qpath(&s, Q_BOUNCE, id);
	const char *blank;

	tl_read(p, &b);
	blank = memmem(b.s, b.len, "\n\n", 2);
	cr_assert(b.len >= 2 && blank == b.s + b.len - 2,
	    "not one entry ending in the only blank line: \"%s\"", sh_escape(b.s, b.len));
	buf_free(&b);
	free(p);
}

/* A text ending in a blank line must still end its entry with one. */
Test(rcptfile, note_trailing_blank_line)
{
	cr_assert_eq(bounce_note(&s.q, 1019, "b@x", "550 no\n\n"), 0);
	assert_one_entry(1019);
}

Test(rcptfile, note_trailing_blank_lines)
{
	cr_assert_eq(bounce_note(&s.q, 1020, "b@x", "550 no\n\n\n\n"), 0);
	assert_one_entry(1020);
}

Test(rcptfile, note_newline_in_address)
{
	cr_assert_eq(bounce_note(&s.q, 1014, "evil\n\n@x\n", "550 no"), 0);
	sh_assert_file(&s, Q_BOUNCE, 1014, S("<evil__@x_>:\n550 no\n\n"));
}

Test(rcptfile, note_appends)
{
	cr_assert_eq(bounce_note(&s.q, 1015, "a@x", "550 first"), 0);
	cr_assert_eq(bounce_note(&s.q, 1015, "b@y", "550 second\nline two"), 0);
	sh_assert_file(&s, Q_BOUNCE, 1015,
	    S("<a@x>:\n550 first\n\n<b@y>:\n550 second\nline two\n\n"));
}

Test(rcptfile, note_does_not_touch_remote)
{
	sh_write(&s, Q_REMOTE, 1016, S(three));
	cr_assert_eq(bounce_note(&s.q, 1016, "a@example.net", "550 x"), 0);
	sh_assert_file(&s, Q_REMOTE, 1016, S(three));
}

/* A blank line may never stand inside an entry: it ends the entry, so
 * a text starting with a newline, or an empty text, must not make one
 * right after "<addr>:". */
Test(rcptfile, note_text_starting_with_newline)
{
	cr_assert_eq(bounce_note(&s.q, 1017, "a@x", "\n550 after a newline"), 0);
	assert_one_entry(1017);
}

Test(rcptfile, note_empty_text)
{
	cr_assert_eq(bounce_note(&s.q, 1018, "a@x", ""), 0);
	assert_one_entry(1018);
}
