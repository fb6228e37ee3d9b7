/*
 * privdrop.c: see privdrop.h.  The steps, each fatal:
 *
 *   1. getpwnam(user): the uid and primary gid (0 for either is refused)
 *   2. initgroups(user, gid): supplementary groups = the account's
 *   3. setresgid(gid, gid, gid)
 *   4. setresuid(uid, uid, uid)
 *   5. getresuid/getresgid show uid and gid three times, and setuid(0)
 *      and setgid(0) fail: nothing is left to climb back with
 *
 * Groups before gid before uid: once the uid is gone, the process may no
 * longer change its groups.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/privdrop.h"

void
privdrop(const char *user, int status)
{
	struct passwd *pw;
	uid_t uid, ru, eu, su;
	gid_t gid, rg, eg, sg;

	errno = 0;
	pw = getpwnam(user);
	if (pw == NULL) {
		if (errno == 0 || errno == ENOENT || errno == ESRCH)
			fatalx(status, "drop privileges: no user \"%s\" on this system", user);
		fatal(status, "drop privileges: look up user \"%s\"", user);
	}
	uid = pw->pw_uid;
	gid = pw->pw_gid;
	if (uid == 0 || gid == 0)
		fatalx(status, "drop privileges: user \"%s\" has uid or primary gid 0; "
		    "name an unprivileged account", user);
	if (initgroups(user, gid) < 0)
		fatal(status, "drop privileges: initgroups for user \"%s\"", user);
	if (setresgid(gid, gid, gid) < 0)
		fatal(status, "drop privileges: setresgid %lu for user \"%s\"",
		    (unsigned long)gid, user);
	if (setresuid(uid, uid, uid) < 0)
		fatal(status, "drop privileges: setresuid %lu for user \"%s\"",
		    (unsigned long)uid, user);
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		fatal(status, "drop privileges: getresuid/getresgid after becoming \"%s\"", user);
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
		fatalx(status, "drop privileges: after becoming \"%s\" the ids are "
		    "uid %lu/%lu/%lu gid %lu/%lu/%lu", user, (unsigned long)ru,
		    (unsigned long)eu, (unsigned long)su, (unsigned long)rg,
		    (unsigned long)eg, (unsigned long)sg);
	if (setgid(0) != -1)
		fatalx(status, "drop privileges: user \"%s\" could still become gid 0", user);
	if (setuid(0) != -1)
		fatalx(status, "drop privileges: user \"%s\" could still become uid 0", user);
}

int
privdrop_daemon(const char *key, const char *user, int status)
{
	if (geteuid() != 0)
		return 0;
	if (user == NULL || *user == '\0') {
		log_warnx("running as root: %s is not set in weir.conf", key);
		return 0;
	}
	privdrop(user, status);
	log_info("running as user %s (%s)", user, key);
	return 1;
}

void
privdrop_setid(int status)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		fatal(status, "drop the set-id identity: getresuid/getresgid");
	if (ru == eu && ru == su && rg == eg && rg == sg)
		return;
	if (setresgid(rg, rg, rg) < 0)
		fatal(status, "drop the set-id identity: setresgid %lu", (unsigned long)rg);
	if (setresuid(ru, ru, ru) < 0)
		fatal(status, "drop the set-id identity: setresuid %lu", (unsigned long)ru);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fatal(status, "drop the set-id identity: prctl PR_SET_DUMPABLE");
	if (eg != rg && setegid(eg) != -1)
		fatalx(status, "drop the set-id identity: gid %lu could come back",
		    (unsigned long)eg);
	if (eu != ru && seteuid(eu) != -1)
		fatalx(status, "drop the set-id identity: uid %lu could come back",
		    (unsigned long)eu);
}
