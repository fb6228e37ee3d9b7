/*
 * pwfile.c: see pwfile.h.
 * Trusts: the password file (its owner).  Config keys: none.
 */
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/pwfile.h"

#define PWFILE_MAX (1024 * 1024)

/* A hash to spend time on when the user is unknown and the file has no
 * hash to spend it on (no line). */
static const char dummy_hash[] =
    "$6$weirdummysalt$gWIBSFHsXG/6Nk3PZEIPalYbSa1AVxUZJyNGTYUMoLz/jmcCP/lsoJqMLNvdFxkpERvxRqn3H3Ri6mKWi7zVQ0";

/* Equal, in time that does not depend on where they differ. */
static int
same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i;
	unsigned char d = la != lb;

	for (i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

static int
hash_matches(const char *pass, const char *hash)
{
	struct crypt_data *cd = xcalloc(1, sizeof *cd);
	const char *h = crypt_r(pass, hash, cd);
	int ok = h != NULL && h[0] == '$' && same(h, hash);

	free(cd);
	return ok;
}

enum pw_result
pw_check(const char *path, const char *user, const char *pass, struct buf *why)
{
	struct buf file = BUF_INIT;
	enum pw_result res = PW_TROUBLE;
	const char *line, *hash = NULL, *first = NULL;
	struct stat st;
	size_t ulen = strlen(user);
	unsigned lineno = 0;
	char *nl, *found = NULL;
	int fd;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		buf_printf(why, "%s: %s", path, strerror(errno));
		return PW_TROUBLE;
	}
	if (fstat(fd, &st) < 0) {
		buf_printf(why, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		buf_printf(why, "%s: not a regular file", path);
		goto out;
	}
	if (st.st_mode & 077) {
		buf_printf(why, "%s: mode %03o: group or others may read it; chmod 600",
		    path, (unsigned)(st.st_mode & 0777));
		goto out;
	}
	for (;;) {
		char chunk[8192];
		ssize_t r = read_retry(fd, chunk, sizeof chunk);

		if (r < 0) {
			buf_printf(why, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		if (file.len + (size_t)r > PWFILE_MAX) {
			buf_printf(why, "%s: larger than %d bytes", path, PWFILE_MAX);
			goto out;
		}
		buf_add(&file, chunk, (size_t)r);
	}
	if (memchr(file.s ? file.s : "", '\0', file.len) != NULL) {
		buf_printf(why, "%s: NUL byte in the file", path);
		goto out;
	}
	for (line = file.s ? file.s : ""; *line; line = nl ? nl + 1 : line + strlen(line)) {
		const char *colon;

		lineno++;
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (*line == '\0' || *line == '#')
			continue;
		colon = strchr(line, ':');
		if (colon == NULL || colon == line || colon[1] != '$' ||
		    strchr(colon + 1, ':') != NULL || strpbrk(line, " \t\r") != NULL) {
			buf_printf(why, "%s:%u: not \"user:$id$salt$hash\"", path, lineno);
			goto out;
		}
		if (first == NULL)
			first = colon + 1;
		if (found == NULL && (size_t)(colon - line) == ulen && memcmp(line, user, ulen) == 0) {
			found = (char *)line;
			hash = colon + 1;
		}
		if (nl == NULL)
			break;
	}
	/* An unknown user costs what a known one does: the file's first
	 * hash, of the scheme and cost its users have (a yescrypt file's
	 * unknown user must not answer in a fiftieth of the time). */
	res = hash_matches(pass, hash ? hash : first ? first : dummy_hash) && hash ? PW_OK : PW_BAD;
out:
	close(fd);
	buf_free(&file);
	return res;
}
