/* libexec.c: see libexec.h. */
#include <stdlib.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "mail/libexec.h"

char *
libexec_path(const char *name)
{
	const char *dir = config_untrusted_env() ? NULL : getenv("WEIR_LIBEXEC");

	return xasprintf("%s/%s", dir && *dir ? dir : LIBEXECDIR, name);
}
