/*
 * rundir_test.c: the run-time folders' table (mail/rundir.c): the folder
 * of a path; a missing folder made with the table's mode, an existing
 * one left alone; and the package's debian/weir.tmpfiles says for
 * /run/weir what the table says for the package's weir.conf (one table:
 * this test fails when the two part).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "mail/rundir.h"
#include "testlib.h"

Test(rundir, folder_of)
{
	char d[64];

	rundir_of("/run/weir/gate.sock", d, sizeof d);
	cr_assert_str_eq(d, "/run/weir");
	rundir_of("/gate.sock", d, sizeof d);
	cr_assert_str_eq(d, "/");
	rundir_of("gate.sock", d, sizeof d);
	cr_assert_str_eq(d, ".");
}

Test(rundir, made_with_the_mode_existing_kept)
{
	char *top = tl_tmpdir(), *f = xasprintf("%s/a/gate.sock", top);
	char *dir = xasprintf("%s/a", top);
	struct weir_config c;
	struct buf why = BUF_INIT;
	struct stat st;

	memset(&c, 0, sizeof c);
	cr_assert_eq(rundir_make(RD_SOCKET, f, &c, &why), 1, "%s", buf_cstr(&why));
	cr_assert(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 02750, "mode %04o", (unsigned)(st.st_mode & 07777));
	cr_assert(chmod(dir, 0700) == 0);
	cr_assert_eq(rundir_make(RD_SOCKET, f, &c, &why), 0);
	cr_assert(stat(dir, &st) == 0);
	cr_assert_eq(st.st_mode & 07777, 0700);
	tl_rmtree(top);
	free(top); free(f); free(dir);
	buf_free(&why);
}

Test(rundir, tmpfiles_agrees_with_the_table)
{
	struct weir_config c;
	struct buf err = BUF_INIT, t = BUF_INIT;
	char dir[256], want[512];
	char *tf = tl_src_path("debian/weir.tmpfiles"), *cf = tl_src_path("debian/weir.conf");
	const char *p, *e;
	int found = 0;

	cr_assert_eq(config_load(&c, cf, &err), 0, "%s", buf_cstr(&err));
	rundir_of(c.gate_socket, dir, sizeof dir);
	snprintf(want, sizeof want, "d %s %o %s %s -", dir, (unsigned)rundir_table[RD_SOCKET].mode,
	    c.gate_user, rundir_table[RD_SOCKET].send_group ? c.send_user : c.gate_user);
	tl_read(tf, &t);
	for (p = buf_cstr(&t); *p; p = *e ? e + 1 : e) {
		e = strchr(p, '\n');
		if (e == NULL)
			e = p + strlen(p);
		if (*p == 'd' && strlen(want) == (size_t)(e - p) && memcmp(p, want, strlen(want)) == 0)
			found = 1;
	}
	cr_assert(found, "debian/weir.tmpfiles has no line \"%s\":\n%s", want, buf_cstr(&t));
	buf_free(&err);
	buf_free(&t);
	free(tf);
	free(cf);
}
