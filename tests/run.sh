#!/bin/sh
# tests/run.sh: run every Criterion test binary given, print each one's
# summary and a closing "N passed, N failed" line; exit non-zero if any
# test failed, crashed or a binary could not run.
set -u
BUILD=${BUILD:-build}
WEIR_BIN=$(cd "$BUILD/bin" && pwd)
WEIR_FAULTINJ=$(cd "$BUILD/tests" && pwd)/faultinj.so
export WEIR_BIN WEIR_FAULTINJ
passed=0 failed=0 bad=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "$@"; do
	echo "== $t"
	start=$(date +%s)
	"$t" --jobs "${TEST_JOBS:-2}" >"$log" 2>&1
	rc=$?
	echo "   $(( $(date +%s) - start )) s"
	# Failures and crashes in full; the synthesis line always.
	grep -v '^\[----\] Criterion\|^\[====\] Running' "$log" | grep -E '\[FAIL\]|\[----\]|Synthesis|Warning|CRASH|crash' 
	line=$(grep 'Synthesis:' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		echo "$t: no Criterion summary (exit $rc)"; cat "$log"; bad=$((bad + 1)); continue
	fi
	p=$(echo "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
	f=$(echo "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
	c=$(echo "$line" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
	passed=$((passed + p)); failed=$((failed + f + c))
	[ "$rc" -eq 0 ] || [ $((f + c)) -gt 0 ] || { echo "$t: exit $rc"; bad=$((bad + 1)); }
done
echo "check: $passed passed, $((failed + bad)) failed"
[ "$failed" -eq 0 ] && [ "$bad" -eq 0 ]
