/*
 * fuzz.h: what every libFuzzer harness in tests/fuzz/ shares: the entry
 * point's prototype, check() (a broken property aborts, which libFuzzer
 * reports with the input), and a NUL-terminated copy of the input for
 * parsers of C strings.  Test code only.
 */
#ifndef WEIR_FUZZ_H
#define WEIR_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline void
check(int ok)
{
	if (!ok)
		abort();
}

/* s[0..n) as a C string (cut at a NUL inside), malloc'ed; NULL if out of memory. */
static inline char *
fz_cstr(const char *s, size_t n)
{
	char *z = malloc(n + 1);

	if (z != NULL) {
		memcpy(z, s, n);
		z[n] = '\0';
	}
	return z;
}

#endif
