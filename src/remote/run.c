/*
 * run.c: weir-remote's arguments (remote.h), read and checked, and the
 * mode they ask for run: one message (single.c), the probe (probe.c),
 * the kept session (session.c) or the OAuth keep-alive (keepalive.c).
 * Bad usage of the one-message form is a "Z" report, qmail-remote's way
 * (the probe and the session exit 2, the keep-alive OAUTH_KA_USAGE).
 *
 * Trusts: its caller (weir-send or qmail-rspawn) for the arguments, each
 * checked: a descriptor must be open and above 2, an id well formed.
 * Config keys: none (each mode reads its own).
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/decimal.h"
#include "lib/log.h"
#include "mail/config.h"
#include "mail/oauth.h"
#include "mail/queue.h"
#include "remote/remote.h"
#include "remote/remoteint.h"

/* An open descriptor above 2 named by s: it, or -1. */
static int
open_fd(const char *s)
{
	uint64_t fd;

	return dec_parse(s, strlen(s), 1024, &fd) == 0 && fd >= 3 && fcntl((int)fd, F_GETFD) >= 0 ?
	    (int)fd : -1;
}

int
remote_run(int argc, char **argv, pid_t parent)
{
	const char *cfile = NULL, *upname = NULL, *qid = NULL;
	int opt, use_gate = 1, outfd = -1, test = 0, keep = 0, flight = -1, alive = 0;
	struct timespec qtime;
	unsigned long inode;

	opterr = 0;
	while ((opt = getopt(argc, argv, "+c:f:Knq:r:STu:")) != -1) {
		switch (opt) {
		case 'c': cfile = optarg; break;
		case 'K': alive = 1; break;
		case 'f':
			if ((flight = open_fd(optarg)) < 0)
				return remote_whole(STDOUT_FILENO, 0, "weir-remote was invoked improperly: "
				    "-f needs an open descriptor above 2. (#4.3.5)\n");
			break;
		case 'n': use_gate = 0; break;
		case 'q':
			if (queue_parse_msgid(optarg, &inode, &qtime) < 0)
				return remote_whole(STDOUT_FILENO, 0, "weir-remote was invoked improperly: "
				    "-q needs a queue id INODE.SEC.NSEC. (#4.3.5)\n");
			qid = optarg;
			break;
		case 'S': keep = 1; break;
		case 'T': test = 1; break;
		case 'r':
			if ((outfd = open_fd(optarg)) < 0)
				return remote_whole(STDOUT_FILENO, 0, "weir-remote was invoked improperly: "
				    "-r needs an open descriptor above 2. (#4.3.5)\n");
			break;
		case 'u': upname = optarg; break;
		default:
			return remote_whole(STDOUT_FILENO, 0, "weir-remote was invoked improperly: "
			    "unknown option -%c. (#4.3.5)\n", optopt);
		}
	}
	if (alive) {
		if (upname == NULL || optind != argc || !use_gate || outfd >= 0 || keep || test ||
		    flight >= 0) {
			log_warnx("usage: weir-remote [-c FILE] -K -u UPSTREAM");
			return OAUTH_KA_USAGE;
		}
		return remote_keepalive(cfile, upname);
	}
	if (!use_gate && config_untrusted_env())
		remote_die_with_parent(parent, SIGKILL);
	if (flight >= 0 && !keep) {
		log_warnx("usage: -f goes with -S");
		return 2;
	}
	if (test) {
		if (upname == NULL || optind != argc || use_gate == 0 || outfd >= 0 || keep) {
			log_warnx("usage: weir-remote [-c FILE] -T -u UPSTREAM");
			return 2;
		}
		return remote_probe(cfile, upname);
	}
	if (keep) {
		/* The caller holds a grant for each message it hands over. */
		if (upname == NULL || argc - optind != 1 || outfd >= 0) {
			log_warnx("usage: weir-remote [-c FILE] -S [-f FD] -u UPSTREAM host");
			return 2;
		}
		return remote_session(cfile, upname, argv[optind], parent, flight);
	}
	if (argc - optind < 3)
		return remote_whole(STDOUT_FILENO, 0, "weir-remote was invoked improperly: usage: "
		    "weir-remote [-c FILE] [-u UPSTREAM] [-n [-r FD]] [-q ID] host sender recip... "
		    "(#4.3.5)\n");
	return remote_single(cfile, upname, qid, use_gate, outfd, parent, argv[optind], argv[optind + 1],
	    (const char *const *)argv + optind + 2, (size_t)(argc - optind - 2));
}
