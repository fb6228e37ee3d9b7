/* decimal.c: see decimal.h. */
#include "lib/decimal.h"

size_t
dec_prefix(const char *s, size_t n, uint64_t max, uint64_t *v)
{
	uint64_t x = 0, d;
	size_t i;

	for (i = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		if (i == 1 && s[0] == '0')
			return 0;
		d = (uint64_t)(s[i] - '0');
		if (d > max || x > (max - d) / 10)
			return 0;
		x = x * 10 + d;
	}
	if (i > 0)
		*v = x;
	return i;
}

int
dec_parse(const char *s, size_t n, uint64_t max, uint64_t *v)
{
	uint64_t x;

	if (n == 0 || dec_prefix(s, n, max, &x) != n)
		return -1;
	*v = x;
	return 0;
}
