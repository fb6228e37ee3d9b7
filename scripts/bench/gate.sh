#!/bin/sh
# scripts/bench/gate.sh: weir-gate figures (a benchmark, not a test).
#   - grants per second with no limit (every grant fsynced in the journal
#     before it is answered; batched when several arrive together), with
#     1 and 16 connections in flight
#   - latency of an immediate grant (acquire -> grant, one connection)
#   - memory per 10,000 logged entries (RSS growth while 100,000 sends are
#     kept inside a 1-day window)
#   - CPU while throttled: 200 requests waiting 10 s
#   - DESIGN.md's exactness row: 4 per 5 s, 10 concurrent deliveries
#     taking 0-99 ms each, 30 s: the worst count in any 5 s window from
#     the clients' own grant..report times, and how many sends got through
#     (a fully used window gives 4 per 5 s: 24 in 30 s, plus the 4 of the
#     first instant)
# Usage: BUILD=build scripts/bench/gate.sh   (after `make BUILD=... all`)
# The journal lives in $TMPDIR (default /tmp): its fsync speed is part of
# the grant rate.
set -eu
BUILD=${BUILD:-build}
BIN=$BUILD/bin/weir-gate
[ -x "$BIN" ] || { echo "build first: make BUILD=$BUILD all" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-gatebench.XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM

${CC:-cc} -O2 -D_GNU_SOURCE -Isrc -o "$dir/gatebench" scripts/bench/gatebench.c "$BUILD/libweir.a" -lconfuse
: >"$dir/weir.conf"

start() {	# policy text
	printf '%s\n' "$1" >"$dir/policy.conf"
	rm -f "$dir/journal" "$dir/sock"
	"$BIN" -c "$dir/weir.conf" -p "$dir/policy.conf" -s "$dir/sock" -j "$dir/journal" \
		2>>"$dir/gate.log" &
	pid=$!
	i=0
	while [ ! -S "$dir/sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
}
stop() { kill "$pid"; wait "$pid" || true; pid=; }
cpu_ms() {	# utime + stime of $pid in ms
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13) * 1000 / hz }' "/proc/$pid/stat"
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }

echo "machine: $(nproc) cores, $(awk '/^model name/ { $1=$2=$3=""; print; exit }' /proc/cpuinfo | sed 's/^ *//'), $(uname -r)"
echo "journal on: $(df -P "$dir" | awk 'NR==2 { print $1 }') ($(stat -f -c %T "$dir"))"

start 'upstream "up" { rate = "1000000000 per 1s" }'
"$dir/gatebench" "$dir/sock" rate 5000 1
"$dir/gatebench" "$dir/sock" rate 20000 16
"$dir/gatebench" "$dir/sock" latency 5000
stop

start 'upstream "up" { rate = "1000000000 per 1d" }'
before=$(rss_kb)
"$dir/gatebench" "$dir/sock" rate 100000 16 >/dev/null
after=$(rss_kb)
echo "memory: RSS $before kB -> $after kB after 100000 logged sends:" \
	"$(( (after - before) * 10000 / 100000 )) kB per 10,000 entries"
stop

start 'upstream "up" { rate = "1 per 1h" }'
"$dir/gatebench" "$dir/sock" latency 1 >/dev/null	# fill the window
"$dir/gatebench" "$dir/sock" hold 200 12 &
hp=$!
sleep 1
c0=$(cpu_ms)
sleep 10
c1=$(cpu_ms)
wait "$hp"
echo "CPU while throttled: $(echo "$c1 $c0" | awk "{ print \$1 - \$2 }") ms in 10 s with 200 requests waiting"
stop

start 'upstream "up" { rate = "4 per 5s" }'
"$dir/gatebench" "$dir/sock" window 10 30 5000
stop
