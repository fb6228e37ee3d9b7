/*
 * rundir.c: see rundir.h.
 */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "mail/rundir.h"

const struct rundir_spec rundir_table[RD_COUNT] = {
	[RD_SOCKET]  = { "gate_socket",  02750, 1 },
	/* 0711: weir-remote, weir-send and weir-metrics reach the OAuth
	 * token folder in it (/var/lib/weir/oauth), and list nothing. */
	[RD_JOURNAL] = { "gate_journal", 00711, 0 },
};

void
rundir_of(const char *file, char *out, size_t max)
{
	const char *slash = strrchr(file, '/');
	size_t n;

	if (slash == NULL) {
		snprintf(out, max, ".");
		return;
	}
	n = slash == file ? 1 : (size_t)(slash - file);
	snprintf(out, max, "%.*s", (int)n, file);
}

int
rundir_owner(enum rundir_id id, const struct weir_config *c, uid_t *uid, gid_t *gid,
    struct buf *why)
{
	const char *gname = rundir_table[id].send_group ? c->send_user : c->gate_user;
	struct passwd *pw;

	if (c->gate_user == NULL)
		return 1;
	if ((pw = getpwnam(c->gate_user)) == NULL) {
		buf_printf(why, "gate_user \"%s\": no such user", c->gate_user);
		return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	if (gname && rundir_table[id].send_group) {
		if ((pw = getpwnam(gname)) == NULL) {
			buf_printf(why, "send_user \"%s\": no such user", gname);
			return -1;
		}
		*gid = pw->pw_gid;
	}
	return 0;
}

/* Make dir (the folder of the file named by key) if it is missing, with
 * mode, and uid:gid when own.  0 there, 1 made, -1 (why appended). */
static int
make_folder(const char *dir, const char *key, mode_t mode, int own, uid_t uid, gid_t gid,
    struct buf *why)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		buf_printf(why, "make %s (the folder of %s): %s", dir, key, strerror(errno));
		return -1;
	}
	/* Owner first, then the mode: chown clears the set-group-id bit. */
	if ((own && chown(dir, uid, gid) < 0) || chmod(dir, mode) < 0) {
		buf_printf(why, "set the owner and mode of %s: %s", dir, strerror(errno));
		return -1;
	}
	return 1;
}

/* Does dir exist?  1 yes, 0 no, -1 cannot tell (why appended). */
static int
folder_there(const char *dir, const char *key, struct buf *why)
{
	struct stat st;

	if (stat(dir, &st) == 0)
		return 1;
	if (errno == ENOENT)
		return 0;
	buf_printf(why, "%s (the folder of %s): %s", dir, key, strerror(errno));
	return -1;
}

int
rundir_make(enum rundir_id id, const char *file, const struct weir_config *c,
    struct buf *why)
{
	char dir[PATH_MAX];
	uid_t uid = 0;
	gid_t gid = 0;
	int own = 0, r;

	rundir_of(file, dir, sizeof dir);
	if ((r = folder_there(dir, rundir_table[id].key, why)) != 0)
		return r < 0 ? -1 : 0;
	if (geteuid() == 0) {
		r = rundir_owner(id, c, &uid, &gid, why);
		if (r < 0)
			return -1;
		own = r == 0;
	}
	return make_folder(dir, rundir_table[id].key, rundir_table[id].mode, own, uid, gid, why);
}

int
rundir_make_status(const char *file, const struct weir_config *c, struct buf *why)
{
	char dir[PATH_MAX];
	struct passwd *pw;
	int r;

	rundir_of(file, dir, sizeof dir);
	if ((r = folder_there(dir, "gate_status_socket", why)) != 0)
		return r < 0 ? -1 : 0;
	pw = NULL;
	if (geteuid() == 0 && c->gate_user && (pw = getpwnam(c->gate_user)) == NULL) {
		buf_printf(why, "gate_user \"%s\": no such user", c->gate_user);
		return -1;
	}
	return make_folder(dir, "gate_status_socket", RUNDIR_STATUS_MODE, pw != NULL,
	    pw ? pw->pw_uid : 0, pw ? pw->pw_gid : 0, why);
}

int
rundir_make_all(const struct weir_config *c, const char *sock, const char *journal)
{
	const char *files[RD_COUNT] = { sock ? sock : c->gate_socket,
		journal ? journal : c->gate_journal };
	struct buf why = BUF_INIT;
	char dir[PATH_MAX];
	int i, rc = 0, r;

	for (i = 0; i < RD_COUNT; i++) {
		buf_reset(&why);
		rundir_of(files[i], dir, sizeof dir);
		r = rundir_make((enum rundir_id)i, files[i], c, &why);
		if (r < 0) {
			log_warnx("%s", buf_cstr(&why));
			rc = -1;
		} else if (r == 1) {
			log_info("made %s (the folder of %s), mode %04o", dir, rundir_table[i].key,
			    (unsigned)rundir_table[i].mode);
		}
	}
	if (c->gate_status_socket) {
		buf_reset(&why);
		rundir_of(c->gate_status_socket, dir, sizeof dir);
		r = rundir_make_status(c->gate_status_socket, c, &why);
		if (r < 0) {
			log_warnx("%s", buf_cstr(&why));
			rc = -1;
		} else if (r == 1) {
			log_info("made %s (the folder of gate_status_socket), mode %04o", dir,
			    (unsigned)RUNDIR_STATUS_MODE);
		}
	}
	buf_free(&why);
	return rc;
}
