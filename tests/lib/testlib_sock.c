/*
 * testlib_sock.c: tl_sock_answers() and tl_upstream_spawn() (testlib.h),
 * apart from testlib.c because they use no Criterion: the crash-replay
 * harness (tests/durability/, a plain program) links them too.
 *
 * Trusts: nothing; a socket that cannot be made or reached just does not
 * answer.  Test code only.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

int
tl_port_answers(unsigned port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return 0;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return ok;
}

int
tl_sock_answers(const char *path)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return 0;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return ok;
}

pid_t
tl_upstream_spawn(const char *const *argv, const char *log, unsigned *port, char *said,
    size_t saidsz)
{
	pid_t parent = getpid(), pid;
	size_t got = 0;
	time_t until = time(NULL) + 15;
	int p[2];

	*port = 0;
	said[0] = '\0';
	if (saidsz < 2 || pipe(p) < 0)
		return -1;
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		int lfd;

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (lfd >= 0)
			dup2(lfd, 2);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	setpgid(pid, pid);
	close(p[1]);
	while (got < saidsz - 1 && time(NULL) < until) {
		struct pollfd pf = { p[0], POLLIN, 0 };
		ssize_t r;

		if (poll(&pf, 1, 1000) <= 0)
			continue;
		r = read(p[0], said + got, saidsz - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		said[got] = '\0';
		if (strchr(said, '\n'))
			break;
	}
	close(p[0]);
	said[got] = '\0';
	if (sscanf(said, "PORT %u", port) != 1)
		*port = 0;
	return pid;
}
