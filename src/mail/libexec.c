/* libexec.c: see libexec.h. */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "mail/libexec.h"

char *
libexec_path(const char *name)
{
	const char *dir = config_untrusted_env() ? NULL : getenv("WEIR_LIBEXEC");

	return xasprintf("%s/%s", dir && *dir ? dir : LIBEXECDIR, name);
}

int
libexec_deliverer(const struct weir_config *c, uid_t *uid, gid_t *gid, char *name,
    size_t max)
{
	char *prog = libexec_path("weir-remote");
	const char *remote = config_untrusted_env() ? NULL : getenv("WEIR_REMOTE");
	struct passwd *pw = NULL;
	struct stat st;
	int known = 0;

	if (remote && *remote) {
		free(prog);
		prog = xstrdup(remote);
	}
	if (stat(prog, &st) == 0 && (st.st_mode & S_ISUID)) {
		known = 1;
		*uid = st.st_uid;
		*gid = st.st_gid;
		pw = getpwuid(st.st_uid);
	} else if (c->send_user && (pw = getpwnam(c->send_user)) != NULL) {
		known = 1;
		*uid = pw->pw_uid;
	}
	if (pw) {
		*gid = pw->pw_gid;
		snprintf(name, max, "%s", pw->pw_name);
	} else if (known) {
		snprintf(name, max, "%lu", (unsigned long)*uid);
	}
	free(prog);
	return known;
}
