/*
 * checkrun_test.c: `weir check-config` on what the programs need at run
 * time (as root: real owners on real files; the accounts nobody and
 * nogroup stand in for the package's users): the secret file must be
 * the deliverer's (send_user here: no set-user-id weir-remote in the
 * build) with a chown hint; the folders of gate_socket and gate_journal
 * must have the owners and modes of mail/rundir.c, or be missing under a
 * parent that exists (weir run makes them), as must those of
 * showq_socket and gate_status_socket; the queue's folders must
 * have the owners of the layout table when send_user and queue_group are
 * set; metrics.auth_file must be a password file of mode 0600 that
 * metrics.user owns.
 */
#include <criterion/criterion.h>
#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send_helpers.h"

static struct sht s;
static char *secret, *sockdir, *libdir;
static uid_t nobody;
static gid_t nogroup;

static void
setup(void)
{
	struct buf c = BUF_INIT;
	char *pol;
	struct passwd *pw = getpwnam("nobody");

	sh_setup(&s, NULL);
	if (geteuid() != 0 || pw == NULL || getgrnam("nogroup") == NULL)
		return;
	nobody = pw->pw_uid;
	nogroup = pw->pw_gid;
	secret = xasprintf("%s/secret", s.qt.tmp);
	sockdir = xasprintf("%s/run", s.qt.tmp);
	libdir = xasprintf("%s/lib", s.qt.tmp);
	pol = xasprintf("%s/policy.conf", s.qt.tmp);
	tl_write(pol, "upstream \"*\" { rate = \"1 per 1s\" }\n", 35);
	tl_write(secret, "pw\n", 3);
	cr_assert(chmod(secret, 0600) == 0);
	buf_printf(&c, "policy_file = \"%s\"\ngate_socket = \"%s/gate.sock\"\n"
	    "gate_journal = \"%s/gate.journal\"\ngate_user = \"nobody\"\n"
	    "upstream \"isp\" {\n  host = \"127.0.0.1\"\n  username = \"u\"\n"
	    "  secret_file = \"%s\"\n}\n", pol, sockdir, libdir, secret);
	sh_conf_append(&s, c.s);
	buf_free(&c);
	free(pol);
}

static void
teardown(void)
{
	sh_teardown(&s);
	free(secret); free(sockdir); free(libdir);
	secret = sockdir = libdir = NULL;
}

TestSuite(checkrun, .init = setup, .fini = teardown, .timeout = 30);

static void
need_root(void)
{
	if (secret == NULL) {
		teardown();
		cr_skip_test("needs root and the accounts nobody and nogroup");
	}
}

/* weir check-config's output (stdout and stderr); its exit code. */
static int
check_config(struct buf *out)
{
	return sh_weir(&s, "check-config", out);
}

static void
mkdir_owned(const char *dir, uid_t u, gid_t g, mode_t mode)
{
	cr_assert(mkdir(dir, 0700) == 0);
	cr_assert(chown(dir, u, g) == 0);
	cr_assert(chmod(dir, mode) == 0);
}

/* The secret is root's: weir-remote (as send_user) could not read it. */
Test(checkrun, secret_not_the_deliverers)
{
	struct buf out = BUF_INIT;
	char *hint;

	need_root();
	sh_conf_append(&s, "send_user = \"nobody\"\n");
	hint = xasprintf("cannot read it (chown nobody %s)", secret);
	cr_assert_eq(check_config(&out), 1, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), hint), "%s", buf_cstr(&out));
	cr_assert(chown(secret, nobody, 0) == 0);
	check_config(&out);
	cr_assert(strstr(buf_cstr(&out), "cannot read it") == NULL, "%s", buf_cstr(&out));
	free(hint);
	buf_free(&out);
}

/* The folders of the socket and the journal, root's and 0755: errors
 * with a chown hint, warnings with a chmod hint; right: nothing said. */
Test(checkrun, gate_folders_owners_and_modes)
{
	struct buf out = BUF_INIT;
	char *a, *b;

	need_root();
	sh_conf_append(&s, "send_user = \"nobody\"\n");
	mkdir_owned(sockdir, 0, 0, 0755);
	mkdir_owned(libdir, 0, 0, 0755);
	check_config(&out);
	a = xasprintf("%s: the folder of gate_socket belongs to 0:0, not nobody:nogroup: "
	    "weir-gate could not use it (chown nobody:nogroup %s)", sockdir, sockdir);
	b = xasprintf("%s: the folder of gate_journal has mode 0755, not 0711 (chmod 0711 %s)",
	    libdir, libdir);
	cr_assert(strstr(buf_cstr(&out), a), "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), b), "%s", buf_cstr(&out));
	cr_assert(chown(sockdir, nobody, nogroup) == 0 && chmod(sockdir, 02750) == 0);
	cr_assert(chown(libdir, nobody, nogroup) == 0 && chmod(libdir, 0711) == 0);
	check_config(&out);
	cr_assert(strstr(buf_cstr(&out), "the folder of") == NULL, "%s", buf_cstr(&out));
	free(a);
	free(b);
	buf_free(&out);
}

/* Missing: fine when weir run can make it, an error when its parent is
 * missing too. */
Test(checkrun, gate_folder_missing)
{
	struct buf out = BUF_INIT;
	char *line;

	need_root();
	check_config(&out);
	cr_assert(strstr(buf_cstr(&out), "the folder of") == NULL, "%s", buf_cstr(&out));
	line = xasprintf("gate_journal = \"%s/x/y/gate.journal\"\n", s.qt.tmp);
	sh_conf_append(&s, line);
	check_config(&out);
	cr_assert(strstr(buf_cstr(&out), "/x/y: the folder of gate_journal: No such file"),
	    "%s", buf_cstr(&out));
	free(line);
	buf_free(&out);
}

/* The folders of the sockets anyone may ask: missing under a missing
 * parent, an error each; a showq folder others cannot search, a warning;
 * a status folder of the admin's own mode, nothing. */
Test(checkrun, public_socket_folders)
{
	struct buf out = BUF_INIT;
	char *line, *a, *b, *c, *pub = xasprintf("%s/pub", s.qt.tmp);

	need_root();
	line = xasprintf("showq_socket = \"%s/x/y/showq.sock\"\n"
	    "gate_status_socket = \"%s/z/y/gate.sock\"\n", s.qt.tmp, s.qt.tmp);
	sh_conf_append(&s, line);
	cr_assert_eq(check_config(&out), 1, "%s", buf_cstr(&out));
	a = xasprintf("%s/x/y: the folder of showq_socket: No such file", s.qt.tmp);
	b = xasprintf("%s/z/y: the folder of gate_status_socket: No such file", s.qt.tmp);
	cr_assert(strstr(buf_cstr(&out), a) && strstr(buf_cstr(&out), b), "%s", buf_cstr(&out));
	free(line);
	mkdir_owned(pub, 0, nogroup, 0750);
	line = xasprintf("showq_socket = \"%s/showq.sock\"\n"
	    "gate_status_socket = \"%s/gate.sock\"\n", pub, pub);
	sh_conf_append(&s, line);
	check_config(&out);
	c = xasprintf("warning: %s: the folder of showq_socket has mode 0750: users outside "
	    "its group cannot reach weir-showq (chmod o+x %s)", pub, pub);
	cr_assert(strstr(buf_cstr(&out), c), "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), "gate_status_socket") == NULL, "%s", buf_cstr(&out));
	cr_assert(chmod(pub, 0751) == 0);
	check_config(&out);
	cr_assert(strstr(buf_cstr(&out), "the folder of") == NULL, "%s", buf_cstr(&out));
	free(line); free(a); free(b); free(c); free(pub);
	buf_free(&out);
}

/* send_user and queue_group set, but the queue is root's (made without
 * them): each folder an error naming the owner it must have. */
Test(checkrun, queue_owners)
{
	struct buf out = BUF_INIT;

	need_root();
	sh_conf_append(&s, "send_user = \"nobody\"\nqueue_group = \"nogroup\"\n");
	cr_assert_eq(check_config(&out), 1, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), ": queue ") && strstr(buf_cstr(&out),
	    "weir queue-init as root sets it"), "%s", buf_cstr(&out));
	buf_free(&out);
}

/* openssl passwd -6 -salt abc secret */
#define HASHED "admin:$6$abc$IdWKNKTJEb8LxY7CGg8YBXlvtfZzFw7Mp/r6niK9YB2mdvgY..TKjv1T.." \
    "8RadRt2qvUHYRLr/TsVArtr91iR1\n"

/* metrics.auth_file: mode 0644, then another user's, then a clear
 * password in it: one error each, with its hint; 0600, metrics.user's,
 * hashed: nothing said. */
Test(checkrun, metrics_auth_file)
{
	struct buf out = BUF_INIT;
	char *users = xasprintf("%s/metrics.users", s.qt.tmp), *line;

	need_root();
	line = xasprintf("metrics {\n  address = \"127.0.0.1:0\"\n  user = \"nobody\"\n"
	    "  auth_file = \"%s\"\n}\n", users);
	sh_conf_append(&s, line);
	tl_write(users, HASHED, strlen(HASHED));
	cr_assert(chmod(users, 0644) == 0);
	cr_assert_eq(check_config(&out), 1, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), "group or others may read or write it"), "%s",
	    buf_cstr(&out));
	cr_assert(chmod(users, 0600) == 0);
	check_config(&out);
	cr_assert(strstr(buf_cstr(&out), "belongs to uid 0; weir-metrics reads it as nobody "
	    "(chown nobody"), "%s", buf_cstr(&out));
	cr_assert(chown(users, nobody, nogroup) == 0);
	check_config(&out);
	cr_assert(strstr(buf_cstr(&out), "auth_file") == NULL, "%s", buf_cstr(&out));
	tl_write(users, "admin:secret\n", 13);
	check_config(&out);
	cr_assert(strstr(buf_cstr(&out), "metrics.users:1: not \"user:$id$salt$hash\""), "%s",
	    buf_cstr(&out));
	free(line);
	free(users);
	buf_free(&out);
}
