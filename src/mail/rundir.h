/*
 * rundir.h: the folders weir's daemons need at run time outside the
 * queue, with their owners and modes, in one table: the folder of
 * gate_socket (weir-gate makes its socket there; set-group-id to
 * send_user's group so that the socket is weir-send's and weir-remote's
 * to connect to) and the folder of gate_journal (weir-gate's alone).
 * Beside the table, the folder of gate_status_socket when it is set:
 * gate_user's, 0755, so that anyone reaches the read-only status socket
 * in it (an admin who wants fewer makes the folder with a group).
 *
 * `weir run`, weir-gate and `weir queue-init`, started as root, make a
 * missing one with its owner and mode (a box without systemd-tmpfiles:
 * sysvinit, a container, a chroot); `weir check-config` reports one that
 * is missing or differs.  The package's debian/weir.tmpfiles says the
 * same for /run/weir (a test holds them together).  An existing folder
 * is never changed: it may be the admin's choice.
 *
 * Trusts: the config (its owner is root's).  Config keys: gate_socket,
 * gate_journal, gate_status_socket, gate_user, send_user (through struct
 * weir_config).
 */
#ifndef WEIR_RUNDIR_H
#define WEIR_RUNDIR_H

#include <sys/types.h>

#include "lib/buf.h"
#include "mail/config.h"

enum rundir_id { RD_SOCKET, RD_JOURNAL, RD_COUNT };

struct rundir_spec {
	const char *key;	/* the weir.conf key of the file in it */
	mode_t mode;
	int send_group;		/* group: send_user's primary group, else gate_user's */
};

extern const struct rundir_spec rundir_table[RD_COUNT];

/* The folder of file (a path named by the key) into out. */
void rundir_of(const char *file, char *out, size_t max);

/* The owner and group the table gives folder id under c: 0 and *uid,
 * *gid set; 1: gate_user is not set (no owner to give); -1: an account
 * does not exist (why appended). */
int rundir_owner(enum rundir_id id, const struct weir_config *c, uid_t *uid, gid_t *gid,
    struct buf *why);

/* Make the folder of file (for id) if it is missing: mode from the table,
 * and as root the owner too (when gate_user is set).  0: there, or made;
 * -1: the reason appended to why. */
int rundir_make(enum rundir_id id, const char *file, const struct weir_config *c,
    struct buf *why);

/* The folder of gate_status_socket: made 0755, and as root gate_user's
 * (when set), if it is missing.  As rundir_make(). */
#define RUNDIR_STATUS_MODE	0755
int rundir_make_status(const char *file, const struct weir_config *c, struct buf *why);

/* Make both folders, of sock and journal (NULL: c's gate_socket and
 * gate_journal), and that of c's gate_status_socket when set; log each
 * one made, and each failure as a warning.  -1 if one failed. */
int rundir_make_all(const struct weir_config *c, const char *sock, const char *journal);

#endif
