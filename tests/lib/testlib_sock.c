/*
 * testlib_sock.c: tl_sock_answers() (testlib.h), apart from testlib.c
 * because it uses no Criterion: the crash-replay harness
 * (tests/durability/, a plain program) links it too.
 *
 * Trusts: nothing; a socket that cannot be made or reached just does not
 * answer.  Test code only.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "testlib.h"

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
