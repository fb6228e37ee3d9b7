/*
 * credfp.c: see credfp.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "mail/authreply.h"
#include "mail/credfp.h"

#define FNV_BASIS	14695981039346656037ULL
#define FNV_PRIME	1099511628211ULL

static void
mix(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		*h ^= b[i];
		*h *= FNV_PRIME;
	}
}

/* A string and its end (NULL: none at all, not ""). */
static void
mix_str(uint64_t *h, const char *s)
{
	mix(h, s ? "s" : "-", 1);
	if (s)
		mix(h, s, strlen(s) + 1);
}

/* The file at path, as stat sees it; the first failure in *why, *err
 * (absent_ok: not its absence, which a change ends visibly). */
static void
mix_file(uint64_t *h, const char *path, const char *what, int absent_ok, const char **why,
    int *err)
{
	struct stat st;
	char b[160];
	int n;

	mix_str(h, path);
	if (path == NULL)
		return;
	if (stat(path, &st) < 0) {
		if (*why == NULL && !(absent_ok && errno == ENOENT)) {
			*why = what;
			*err = errno;
		}
		n = snprintf(b, sizeof b, "error %d", errno);
	} else
		n = snprintf(b, sizeof b, "%llx %llx %lld %lld.%ld %lld.%ld",
		    (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
		    (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
		    (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
	mix(h, b, (size_t)n + 1);
}

uint64_t
credfp(const struct weir_upstream *u, const char **why, int *err)
{
	uint64_t h = FNV_BASIS;
	char b[64];
	int n;

	*why = NULL;
	*err = 0;
	mix_str(&h, u->host);
	n = snprintf(b, sizeof b, "%u %d %d", u->port, u->tls, u->verify);
	mix(&h, b, (size_t)n + 1);
	mix_str(&h, u->fingerprint);
	mix_file(&h, u->ca_file, "ca_file", 0, why, err);
	mix_str(&h, u->username);
	mix_str(&h, u->secret_command);
	if (u->secret_command == NULL)
		mix_file(&h, u->secret_file, "secret_file", 0, why, err);
	if (u->oauth.present) {
		mix_str(&h, u->oauth.client_id);
		mix_file(&h, u->oauth.client_secret_file, "client_secret_file", 0, why, err);
		mix_file(&h, u->oauth.certificate_file, "certificate_file", 0, why, err);
		mix_file(&h, u->oauth.private_key_file, "private_key_file", 0, why, err);
		mix_file(&h, u->oauth.key_file, "key_file", 0, why, err);
		mix_str(&h, u->oauth.scope);
		mix_str(&h, u->oauth.token_endpoint);
		mix_file(&h, u->oauth.token_file, "token_file", 1, why, err);
	}
	return h;
}

uint64_t
credfp_none(void)
{
	return FNV_BASIS;
}

void
cred_fix(struct buf *b, const char *name, int oauth, const char *reply)
{
	const struct authreply *a = authreply_find(reply);

	if (a)
		buf_printf(b, "%s says %s: %s", a->provider, a->means, a->fix);
	else if (oauth)
		buf_printf(b, "run weir auth login %s (the login lifts the suspension; if AUTH is "
		    "still refused after it, check username: the mailbox the token is for)", name);
	else
		buf_printf(b, "fix username, secret_file or secret_command of upstream %s in "
		    "weir.conf (or the secret file itself), then reload or restart weir (a restart "
		    "with the same credentials keeps the suspension)", name);
}
