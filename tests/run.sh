#!/bin/sh
# tests/run.sh: run every Criterion test binary given, print each one's
# summary, wall time (and CPU time where /usr/bin/time exists) and a
# closing "N passed, N failed, N skipped: NAMES" line; exit non-zero if
# any test failed, crashed or a binary could not run.  The failures are
# printed again just before that line, and the skipped tests with their
# reasons, so the end of a long log (all a CI report may show) names
# them.  A test that needs root says so when it skips ("needs root" in
# its reason): run as root, such a skip fails the run (the test should
# have run: its skip hides a broken condition).
#
# Most binaries run one after another, TEST_JOBS (2) tests at a time.
# Some mostly wait (rate windows, timeouts, a kill's aftermath) rather
# than compute, as /usr/bin/time shows at --jobs 2 (user+sys CPU against
# wall time; a binary joins a list only on such a measurement):
#   WAIT_JOBS  well under one core: run TEST_WAIT_JOBS (4) tests at a
#              time;
#   LANE2      under a tenth of a core: run one after another in a second
#              lane beside all the rest, TEST_WAIT_JOBS tests at a time;
#              their results are printed at the end.
# Tests pick free ports and scratch folders of their own at run time, so
# binaries may run side by side.  TEST_LANE2=0 runs every binary in turn.
set -u
BUILD=${BUILD:-build}
WEIR_BIN=$(cd "$BUILD/bin" && pwd)
WEIR_FAULTINJ=$(cd "$BUILD/tests" && pwd)/faultinj.so
export WEIR_BIN WEIR_FAULTINJ
WAIT_JOBS="faultmatrix_test relay_test shared_relay_test sentinel_test send_test send_gate_test send_reload_test fallback_test"
LANE2="redis_test gate_test promise_test send_faults_test send_notes_test supervise_test"
[ "${TEST_LANE2:-1}" = 0 ] && { WAIT_JOBS="$WAIT_JOBS $LANE2"; LANE2=; }
# Criterion's own .timeout did not stop a test blocked in a read (seen:
# 8 minutes); a binary that runs past this bound (s) is stopped, its
# process group with it, and counted failed.
BIN_TIMEOUT=${TEST_BIN_TIMEOUT:-600}
passed=0 failed=0 bad=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The names of the tests log $1 shows begun ([RUN ]) and not ended.
unended() {
	sed -n 's/^\[RUN \] \(.*\)/\1/p' "$1" | while read -r t; do
		grep -q "^\[\(PASS\|FAIL\|SKIP\)\] $t:" "$1" || printf ' %s' "$t"
	done
}

listed() { case " $1 " in *" $(basename "$2") "*) return 0 ;; esac; return 1; }

# Run binary $1; its output to $dir/<n>.log, "rc wall [cpu]" to $dir/<n>.st.
run_one() {
	n=$(echo "$1" | tr / _) jobs=${TEST_JOBS:-2}
	listed "$WAIT_JOBS $LANE2" "$1" && jobs=${TEST_WAIT_JOBS:-4}
	start=$(date +%s)
	# --verbose: a [RUN ] line per test, so that a binary stopped by the
	# time bound names the tests it was in.
	set -- timeout -k 10 "$BIN_TIMEOUT" "$1" --verbose --jobs "$jobs"
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -o "$dir/$n.cpu" -f '%U %S' "$@" >"$dir/$n.log" 2>&1
	else
		"$@" >"$dir/$n.log" 2>&1
	fi
	rc=$?
	cpu=$(tail -n 1 "$dir/$n.cpu" 2>/dev/null | awk '{ printf ", %.0f s CPU", $1 + $2 }')
	echo "$rc $(( $(date +%s) - start )) s$cpu (--jobs $jobs)" >"$dir/$n.st"
}

# Print binary $1's results and add them up.
report() {
	n=$(echo "$1" | tr / _)
	read -r rc wall <"$dir/$n.st" || { rc=1 wall="(did not finish)"; }
	echo "== $1"
	echo "   $wall"
	# Failures and crashes in full; the synthesis line always.
	grep -v '^\[----\] Criterion\|^\[====\] Running\|^\[RUN \]\|^\[PASS\]\|^\[SKIP\]' "$dir/$n.log" |
	    grep -E '\[FAIL\]|\[----\]|Synthesis|Warning|CRASH|crash' >"$dir/$n.out"
	cat "$dir/$n.out"
	line=$(grep 'Synthesis:' "$dir/$n.log" | tail -n 1)
	if [ -z "$line" ]; then
		[ "$rc" -eq 124 ] && rc="$rc: stopped after $BIN_TIMEOUT s; tests begun, not ended:$(unended "$dir/$n.log")"
		echo "$1: no Criterion summary (exit $rc)"; cat "$dir/$n.log"; bad=$((bad + 1))
		{ echo "== $1: no Criterion summary (exit $rc)"; grep -v '^\[RUN \]\|^\[PASS\]\|^\[SKIP\]' "$dir/$n.log" | tail -n 40; } >>"$dir/failures"
		return
	fi
	# "[SKIP] suite::test: reason" (Criterion counts a skip nowhere).
	sed -n 's/^\[SKIP\] //p' "$dir/$n.log" >>"$dir/skips"
	p=$(echo "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
	f=$(echo "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
	c=$(echo "$line" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
	passed=$((passed + p)); failed=$((failed + f + c))
	[ "$rc" -eq 0 ] || [ $((f + c)) -gt 0 ] || { echo "$1: exit $rc"; bad=$((bad + 1)); }
	[ "$rc" -eq 0 ] && [ $((f + c)) -eq 0 ] && return
	# The failed tests alone: their assertions (an "Assertion Failed" line
	# and its indented message) and results, not the others' info lines.
	{ echo "== $1 (exit $rc)"; grep -E 'Assertion|^\[----\]   |\[FAIL\]|CRASH|crash|Warning' "$dir/$n.out"; } >>"$dir/failures"
}

lane2=
for t in "$@"; do
	listed "$LANE2" "$t" && lane2="$lane2 $t"
done
if [ -n "$lane2" ]; then
	( for t in $lane2; do run_one "$t"; done ) &
	lane=$!
fi
for t in "$@"; do
	listed "$LANE2" "$t" && continue
	run_one "$t"
	report "$t"
done
if [ -n "$lane2" ]; then
	wait "$lane"
	for t in $lane2; do
		report "$t"
	done
fi
touch "$dir/skips"
if [ "$(id -u)" -eq 0 ] && grep -q ': .*needs root' "$dir/skips"; then
	{ echo "== skipped in a run as root, though root is what they need:"
	  grep ': .*needs root' "$dir/skips" | sed 's/^/   /'; } >>"$dir/failures"
	bad=$((bad + $(grep -c ': .*needs root' "$dir/skips")))
fi
if [ -s "$dir/skips" ]; then
	echo "---- skipped:"
	sed 's/^/   /' "$dir/skips"
fi
if [ -s "$dir/failures" ]; then
	echo "---- what failed, again:"
	cat "$dir/failures"
	echo "----"
fi
names=$(sed 's/: .*//' "$dir/skips" | tr '\n' ' ' | sed 's/ $//')
echo "check: $passed passed, $((failed + bad)) failed, $(wc -l <"$dir/skips") skipped${names:+: $names}"
[ "$failed" -eq 0 ] && [ "$bad" -eq 0 ]
