/*
 * bootid.c: see bootid.h.
 */
#include <fcntl.h>
#include <stdio.h>

#include "lib/bootid.h"
#include "lib/buf.h"
#include "lib/io.h"

void
boot_id(char *out, size_t n)
{
	struct buf b = BUF_INIT;
	size_t i;

	snprintf(out, n, "unknown");
	if (read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", &b, 128) == 0) {
		for (i = 0; i < b.len && b.s[i] != '\n'; i++)
			if (!((b.s[i] >= '0' && b.s[i] <= '9') || (b.s[i] >= 'a' && b.s[i] <= 'f') ||
			    b.s[i] == '-'))
				break;
		if (i > 0 && i < n && (i == b.len || b.s[i] == '\n'))
			snprintf(out, n, "%.*s", (int)i, b.s);
	}
	buf_free(&b);
}
