/*
 * flush.c: `weir flush`: ask weir-send to try every deferred message now.
 * It leaves lock/flush in the queue and pulls lock/trigger; weir-send
 * removes the file and reschedules.  Deliveries still go through
 * weir-gate, so a flush never sends faster than the policy allows.
 *
 * Config keys: queue_dir.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "lib/log.h"
#include "weir/weir.h"

int
cmd_flush(int argc, char **argv, struct weir_config *cfg)
{
	char path[4096];
	int fd;

	(void)argv;
	if (argc != 1) {
		log_warnx("usage: weir flush");
		return 2;
	}
	snprintf(path, sizeof path, "%s/lock/flush", cfg->queue_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_warn("create %s", path);
		return 1;
	}
	close(fd);
	snprintf(path, sizeof path, "%s/lock/trigger", cfg->queue_dir);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENXIO) {
			printf("weir-send is not running; it will flush when it starts\n");
			return 0;
		}
		log_warn("open %s", path);
		return 1;
	}
	if (write(fd, "", 1) < 0 && errno != EAGAIN)
		log_warn("write %s", path);
	close(fd);
	printf("flush requested\n");
	return 0;
}
