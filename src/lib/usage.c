/* usage.c: see usage.h. */
#include <stdio.h>
#include <string.h>

#include "lib/usage.h"
#include "version.h"		/* generated: WEIR_VERSION */

int
usage_std(int argc, char *const *argv, const char *name, const char *text)
{
	if (argc < 2 || argv[1] == NULL)
		return -1;
	if (strcmp(argv[1], "--help") == 0)
		fputs(text, stdout);
	else if (strcmp(argv[1], "--version") == 0)
		printf("%s (weir) %s\n", name, WEIR_VERSION);
	else
		return -1;
	return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
