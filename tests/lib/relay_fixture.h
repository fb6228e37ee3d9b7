/*
 * relay_fixture.h: the fixture of the whole-relay suites (relay_test.c,
 * faultmatrix_test.c and others): `t`, a fresh relay for each test
 * (rt_setup(&t, 2): its folder, queue, certificates, secret file and
 * weir.conf with concurrency 2; nothing started yet), and after the
 * test, pass or fail, every process it started killed and its folder
 * removed (rt_teardown).  A test file includes it once (it defines them)
 * and names the pair in its suite:
 *
 *   TestSuite(relay, .init = rt_fixture_setup, .fini = rt_fixture_teardown);
 *
 * Suites that need another concurrency or more than one relay keep a
 * fixture of their own.  Test code only (Criterion).
 */
#ifndef WEIR_RELAY_FIXTURE_H
#define WEIR_RELAY_FIXTURE_H

#include "relay_helpers.h"

static struct rt t;

static void
rt_fixture_setup(void)
{
	rt_setup(&t, 2);
}

static void
rt_fixture_teardown(void)
{
	rt_teardown(&t);
}

#endif
