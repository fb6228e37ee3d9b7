/*
 * runstart_test.c: weir on a box without systemd-tmpfiles: `weir run`
 * and weir-gate alone make the run-time folders that are missing (the
 * folders of gate_socket and gate_journal) with the modes of the one
 * table (mail/rundir.c), and weir-gate answers on its socket; a folder
 * that exists is left as it is.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/rundir.h"
#include "send_helpers.h"

#define POLICY "upstream \"*\" { rate = \"100 per 1s\" }\n"

static struct sht s;
static pid_t pid = -1;
static char *sock, *journal, *rundir, *libdir, *logp;

static void
setup(void)
{
	struct buf c = BUF_INIT;
	char *pol;

	sh_setup(&s, NULL);
	rundir = xasprintf("%s/run-weir", s.qt.tmp);
	libdir = xasprintf("%s/lib-weir", s.qt.tmp);
	sock = xasprintf("%s/gate.sock", rundir);
	journal = xasprintf("%s/gate.journal", libdir);
	logp = xasprintf("%s/run.log", s.qt.tmp);
	pol = xasprintf("%s/policy.conf", s.qt.tmp);
	tl_write(pol, POLICY, strlen(POLICY));
	buf_printf(&c, "gate_socket = \"%s\"\ngate_journal = \"%s\"\npolicy_file = \"%s\"\n",
	    sock, journal, pol);
	sh_conf_append(&s, c.s);
	buf_free(&c);
	free(pol);
}

static void
teardown(void)
{
	if (pid > 0) {
		kill(-pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	pid = -1;
	sh_teardown(&s);
	free(sock); free(journal); free(rundir); free(libdir); free(logp);
}

TestSuite(runstart, .init = setup, .fini = teardown, .timeout = 60);

/* prog -c conf [arg] in its own process group, output to logp; wait
 * until weir-gate answers on sock. */
static void
spawn(const char *prog, const char *arg)
{
	char *bin = tl_bin(prog), *lib = tl_bin("");
	pid_t parent = getpid();
	int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644), i, st;

	cr_assert(fd >= 0);
	lib[strlen(lib) - 1] = '\0';	/* the folder: "bin/" less the slash */
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		setenv("WEIR_LIBEXEC", lib, 1);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, bin, "-c", s.qt.conf, arg, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	close(fd);
	for (i = 0; i < 1000 && !tl_sock_answers(sock); i++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			struct buf b = BUF_INIT;

			pid = -1;
			tl_read(logp, &b);
			cr_assert_fail("%s exited (status 0x%x):\n%s", prog, st, buf_cstr(&b));
		}
		usleep(10000);
	}
	if (!tl_sock_answers(sock)) {
		struct buf b = BUF_INIT;

		tl_read(logp, &b);
		cr_assert_fail("weir-gate does not answer on %s:\n%s", sock, buf_cstr(&b));
	}
	free(bin);
	free(lib);
}

static void
assert_dir(const char *path, mode_t mode)
{
	struct stat st;

	cr_assert(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, mode, "%s: mode %04o, expected %04o", path,
	    (unsigned)(st.st_mode & 07777), (unsigned)mode);
}

/* Before, weir-gate could not make its socket: "No such file or
 * directory", restarted by weir run forever. */
Test(runstart, weir_run_makes_the_folders)
{
	spawn("weir", "run");
	assert_dir(rundir, rundir_table[RD_SOCKET].mode);
	assert_dir(libdir, rundir_table[RD_JOURNAL].mode);
	cr_assert_eq(rundir_table[RD_SOCKET].mode, 02750);
	cr_assert_eq(rundir_table[RD_JOURNAL].mode, 0711);
}

Test(runstart, weir_gate_alone_makes_the_folders)
{
	spawn("weir-gate", NULL);
	assert_dir(rundir, 02750);
	assert_dir(libdir, 0711);
}

/* An existing folder is the admin's: its mode is kept. */
Test(runstart, existing_folder_kept)
{
	cr_assert(mkdir(rundir, 0700) == 0);
	cr_assert(chmod(rundir, 0711) == 0);
	spawn("weir", "run");
	assert_dir(rundir, 0711);
	assert_dir(libdir, 0711);
}
