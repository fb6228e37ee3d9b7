#!/bin/bash
# scripts/bench/sendprof.sh: where weir-send's time goes in a relay with
# no limit.  N messages (default 500) of 1 KB queued with weir's sendmail
# while weir is stopped, then `weir run` until mess/ is empty, to
# Postfix's smtp-sink over plain SMTP (scripts/bench/lib.sh's instance).
# Prints the seconds from `weir run` to an empty queue; with
# TRACE=strace also `strace -c -w` of weir-send alone (its system calls:
# counts and shares; strace slows it), with TRACE=perf a `perf record -g`
# report of weir-send.  A benchmark, not a test: it asserts nothing.
#
#   make BUILD=build-bench all && BUILD=build-bench TRACE=strace scripts/bench/sendprof.sh
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
B=$ROOT/$BUILD/bin
CONC=8
N=${N:-500}
export WEIR_LIBEXEC=$B
scratch=$(mktemp -d "${BENCH_DIR:-/var/tmp}/weir-sendprof.XXXXXX")
pids=""
# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"
trap 'lib_cleanup; rm -rf "$scratch"' EXIT
lib_setup
SINKP=$(free_port)
smtp-sink -u nobody "127.0.0.1:$SINKP" 256 &
pids="$pids $!"
instance rel "$SINKP" none 0 "1000000 per 1s"
inject_sendmail "$N"
echo "queued $(queued_files)"
start_weir
st=""
case ${TRACE:-} in
strace) strace -c -w -p "$SEND_PID" -o "$scratch/strace.out" & st=$! ;;
perf) perf record -g -p "$SEND_PID" -o "$scratch/perf.data" 2>/dev/null & st=$! ;;
esac
while [ "$(queued_files)" -gt 0 ]; do sleep 0.02; done
T1=$(date +%s.%N)
echo "secs $(echo "$T1 - $T0" | bc -l) load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$st" ]; then
	kill -INT "$st"
	wait "$st" || true
fi
case ${TRACE:-} in
strace) head -30 "$scratch/strace.out" ;;
perf) perf report -i "$scratch/perf.data" --no-children --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -40 ;;
esac
stop_weir
