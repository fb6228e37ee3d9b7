/*
 * waitbench.c: what WAIT for one replica would add to each grant, for
 * scripts/bench/shared_window.sh (not a test).  On a master with
 * replicas, N times each: a script that writes what a grant writes
 * (a held grant: ZADD, HSET, PEXPIRE; then dropped again, as its report
 * does), alone, then followed by WAIT 1 1000 (the grant counted only
 * once a replica has it).  Prints the median and p99 latency of each, in
 * microseconds.
 *
 *   waitbench HOST PORT N
 *
 * Trusts: the Redis it is pointed at.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char script[] =
    "redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])\n"
    "redis.call('HSET', KEYS[2], ARGV[2], ARGV[1] .. ' 1 1 0')\n"
    "redis.call('PEXPIRE', KEYS[1], 600000)\n"
    "redis.call('PEXPIRE', KEYS[2], 600000)\n"
    "redis.call('ZREM', KEYS[1], ARGV[3])\n"
    "redis.call('HDEL', KEYS[2], ARGV[3])\n"
    "return 1\n";

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static redisReply *
must(redisContext *c, redisReply *r)
{
	if (r == NULL || r->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "waitbench: %s\n", r ? r->str : c->errstr);
		exit(1);
	}
	return r;
}

int
main(int argc, char **argv)
{
	redisContext *c;
	redisReply *r;
	double *lat, t;
	char sha[41], id[32], old[32];
	long n, i;
	int wait;

	if (argc != 4 || (n = atol(argv[3])) < 100) {
		fprintf(stderr, "usage: waitbench HOST PORT N (N >= 100)\n");
		return 2;
	}
	c = redisConnect(argv[1], atoi(argv[2]));
	if (c == NULL || c->err) {
		fprintf(stderr, "waitbench: connect: %s\n", c ? c->errstr : "out of memory");
		return 1;
	}
	r = must(c, redisCommand(c, "SCRIPT LOAD %s", script));
	snprintf(sha, sizeof sha, "%s", r->str);
	freeReplyObject(r);
	lat = calloc((size_t)n, sizeof *lat);
	for (wait = 0; wait < 2; wait++) {
		for (i = 0; i < n; i++) {
			snprintf(id, sizeof id, "h.r.%ld", i);
			snprintf(old, sizeof old, "h.r.%ld", i - 1);
			t = now_us();
			freeReplyObject(must(c, redisCommand(c, "EVALSHA %s 2 bench:{w}:held "
			    "bench:{w}:heldw %ld %s %s", sha, i, id, old)));
			if (wait) {
				r = must(c, redisCommand(c, "WAIT 1 1000"));
				if (r->type != REDIS_REPLY_INTEGER || r->integer < 1) {
					fprintf(stderr, "waitbench: no replica acknowledged\n");
					return 1;
				}
				freeReplyObject(r);
			}
			lat[i] = now_us() - t;
		}
		qsort(lat, (size_t)n, sizeof *lat, cmp);
		printf("%s: median %.0f us, p99 %.0f us (%ld)\n", wait ? "write + WAIT 1" : "write",
		    lat[n / 2], lat[n * 99 / 100], n);
	}
	free(lat);
	redisFree(c);
	return 0;
}
