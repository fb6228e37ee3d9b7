#!/bin/sh
# scripts/bench/redis_grants.sh: weir-gate figures with an upstream shared
# through Redis (a benchmark, not a test).
#   - grants per second with 1 and 16 connections in flight (each grant is
#     one Lua script in Redis and the journal's fsync; each report one more
#     script), no limit reached ("1000000000 per 1s": the script still
#     reads every send of the last second)
#   - latency of an immediate grant (acquire -> grant, one connection)
#   - Redis's CPU per grant (INFO cpu before and after, over the grants
#     and their reports)
# Usage: BUILD=build scripts/bench/redis_grants.sh   (after `make all`)
# Redis runs here on a Unix socket without persistence; over TCP or with
# AOF each call costs more.
set -eu
BUILD=${BUILD:-build}
BIN=$BUILD/bin/weir-gate
[ -x "$BIN" ] || { echo "build first: make BUILD=$BUILD all" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "needs redis-server" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-redisbench.XXXXXX")
pid= rpid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

${CC:-cc} -O2 -D_GNU_SOURCE -Isrc -o "$dir/gatebench" scripts/bench/gatebench.c "$BUILD/libweir.a" -lconfuse
: >"$dir/weir.conf"
redis-server --port 0 --unixsocket "$dir/r.sock" --save '' --appendonly no --dir "$dir" \
	>"$dir/redis.log" 2>&1 &
rpid=$!
i=0
while [ ! -S "$dir/r.sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
printf 'upstream "up" { rate = "1000000000 per 1s" shared = "unix:%s" }\n' "$dir/r.sock" \
	>"$dir/policy.conf"
"$BIN" -c "$dir/weir.conf" -p "$dir/policy.conf" -s "$dir/sock" -j "$dir/journal" \
	2>>"$dir/gate.log" &
pid=$!
i=0
while [ ! -S "$dir/sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done

rcpu() {	# Redis's used CPU, user + sys, in ms
	redis-cli -s "$dir/r.sock" INFO cpu |
		awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%d\n", s * 1000 }'
}

echo "machine: $(nproc) cores, $(awk '/^model name/ { $1=$2=$3=""; print; exit }' /proc/cpuinfo | sed 's/^ *//'), $(uname -r); $(redis-server --version | cut -d' ' -f1-3)"
# The first grant waits out the 3 s hold of an empty store.
"$dir/gatebench" "$dir/sock" latency 1 >/dev/null
before=$(rcpu)
"$dir/gatebench" "$dir/sock" rate 2000 1
"$dir/gatebench" "$dir/sock" rate 5000 16
after=$(rcpu)
echo "redis cpu: $(( (after - before) * 1000 / 7000 )) us per grant (grant + report scripts)"
"$dir/gatebench" "$dir/sock" latency 2000
