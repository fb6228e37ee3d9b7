/*
 * unixlisten.c: a daemon's listening Unix socket (see unixlisten.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/unixlisten.h"

int
unix_listen(const char *path, mode_t mode, int backlog, int flags, const char *who)
{
	struct sockaddr_un sa;
	int fd, probe;

	if (strlen(path) >= sizeof sa.sun_path)
		fatalx(111, "socket path too long: %s", path);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	if ((probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		fatal(111, "socket");
	if (connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0)
		fatalx(111, "another %s is serving %s", who, path);
	if (close(probe) < 0)
		fatal(111, "close");
	if (unlink(path) < 0 && errno != ENOENT)
		fatal(111, "unlink %s", path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0)) < 0)
		fatal(111, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		fatal(111, "bind %s", path);
	if (chmod(path, mode) < 0)
		fatal(111, "chmod %s", path);
	if (listen(fd, backlog) < 0)
		fatal(111, "listen %s", path);
	return fd;
}
