#!/bin/sh
# scripts/bench/shared_window.sh: the shared window's figures (a benchmark,
# not a test), on loopback, Redis 7 over TCP without persistence:
#   gates  grants per second (each gate: 4 connections in flight, each
#          grant reported at once) and latency of an immediate grant (one
#          connection per gate, all gates at once), with 1, 3 and 10
#          gates sharing one upstream through one Redis, against one gate
#          alone (no Redis).  "1000000000 per 1s": nothing waits, but the
#          grant script still reads every send of the last second.
#   wait   what WAIT for one replica would add to each grant (waitbench.c:
#          a grant's writes, alone and followed by WAIT 1 1000), on a
#          master with one replica
#   stall  Redis Sentinel (three Redis, three sentinels, down after 1 s):
#          one gate granting one request after another while the master
#          is killed (SIGKILL); the longest acquire -> grant is the stall
#          from the master's death to the next grant.  ROUNDS rounds.
# Usage: BUILD=build scripts/bench/shared_window.sh [gates] [wait] [stall]
#        (after `make all`; every part without arguments).  N (grants per
#        connection, 2000), ROUNDS (3).
set -eu
BUILD=${BUILD:-build}
BIN=$BUILD/bin/weir-gate
N=${N:-2000}
ROUNDS=${ROUNDS:-3}
[ -x "$BIN" ] || { echo "build first: make BUILD=$BUILD all" >&2; exit 1; }
for p in redis-server redis-sentinel redis-cli; do
	command -v $p >/dev/null || { echo "needs $p (scripts/deps.sh check)" >&2; exit 1; }
done
parts=${*:-gates wait stall}
dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-sharedbench.XXXXXX")
pids=
cleanup() {
	for p in $pids; do
		kill -CONT "$p" 2>/dev/null || true
		kill -9 "$p" 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

${CC:-cc} -O2 -D_GNU_SOURCE -Isrc -o "$dir/gatebench" scripts/bench/gatebench.c \
	"$BUILD/libweir.a" -lconfuse
${CC:-cc} -O2 -o "$dir/waitbench" scripts/bench/waitbench.c -lhiredis
: >"$dir/weir.conf"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# until_up PORT: wait (5 s at most) for a listener on 127.0.0.1:PORT.
until_up() {
	w=0
	until redis-cli -p "$1" PING >/dev/null 2>&1; do
		w=$((w + 1)); [ $w -lt 200 ] || { echo "nothing answers on $1" >&2; exit 1; }
		sleep 0.05
	done
}
# redis PORT [ARGS...]: a redis-server on PORT; its pid in $last.
redis() {
	port=$1; shift
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
		--dbfilename "d$port.rdb" "$@" >>"$dir/redis-$port.log" 2>&1 &
	last=$!; pids="$pids $last"
	until_up "$port"
}
# gate I STORE: weir-gate number I, its upstream "up" shared through STORE
# (none: alone); its socket is $dir/g$I.sock.
gate() {
	if [ -n "$2" ]; then
		printf 'upstream "up" { rate = "1000000000 per 1s" shared = "%s" }\n' "$2"
	else
		printf 'upstream "up" { rate = "1000000000 per 1s" }\n'
	fi >"$dir/p$1.conf"
	rm -f "$dir/j$1" "$dir/g$1.sock"
	"$BIN" -c "$dir/weir.conf" -p "$dir/p$1.conf" -s "$dir/g$1.sock" -j "$dir/j$1" \
		2>>"$dir/gate$1.log" &
	pids="$pids $!"
	w=0
	while [ ! -S "$dir/g$1.sock" ] && [ $w -lt 200 ]; do sleep 0.05; w=$((w + 1)); done
}
stop_all() {
	for p in $pids; do
		kill -CONT "$p" 2>/dev/null || true
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pids=
}
# each K MODE ARGS...: gatebench MODE ARGS on gates 0..K-1 at once; their
# lines in $dir/out.
each() {
	k=$1; shift
	e=0 ps=
	while [ $e -lt "$k" ]; do
		"$dir/gatebench" "$dir/g$e.sock" "$@" >"$dir/out.$e" &
		ps="$ps $!"; e=$((e + 1))
	done
	for p in $ps; do wait "$p"; done
	cat "$dir"/out.* >"$dir/out"; rm -f "$dir"/out.*
}

echo "machine: $(nproc) cores, $(awk '/^model name/ { $1=$2=$3=""; print; exit }' /proc/cpuinfo | sed 's/^ *//'), $(uname -r); $(redis-server --version | cut -d' ' -f1-3)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

for part in $parts; do
case $part in
gates)
	for k in 0 1 3 10; do
		if [ "$k" = 0 ]; then
			gate 0 ""
			label="1 gate alone" k=1
		else
			port=$(free_port)
			redis "$port"
			g=0
			while [ $g -lt "$k" ]; do gate $g "redis://127.0.0.1:$port"; g=$((g + 1)); done
			label="$k gate(s), one Redis"
		fi
		# The first grant of a new store waits out its 3 s rebuild.
		each "$k" latency 1
		each "$k" rate "$N" 4
		rate=$(awk '{ s += $1 } END { printf "%d", s }' "$dir/out")
		each "$k" latency "$N"
		lat=$(awk '{ m += $5; p += $8; if ($11 > x) x = $11 } END {
			printf "median %d us, p99 %d us (means over the gates), max %d us", m / NR, p / NR, x }' "$dir/out")
		echo "$label: $rate grants/s in all; immediate grant $lat"
		stop_all
	done ;;
wait)
	m=$(free_port) r=$(free_port)
	redis "$m"
	redis "$r" --replicaof 127.0.0.1 "$m"
	until [ "$(redis-cli -p "$r" INFO replication | tr -d '\r' | sed -n 's/^master_link_status://p')" = up ]; do sleep 0.1; done
	"$dir/waitbench" 127.0.0.1 "$m" "$N"
	stop_all ;;
stall)
	round=1
	while [ $round -le "$ROUNDS" ]; do
		r0=$(free_port) r1=$(free_port) r2=$(free_port)
		redis "$r0"; m=$last
		redis "$r1" --replicaof 127.0.0.1 "$r0"
		redis "$r2" --replicaof 127.0.0.1 "$r0"
		sps=
		for s in 1 2 3; do
			sp=$(free_port)
			printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor wm 127.0.0.1 %s 2\nsentinel down-after-milliseconds wm 1000\nsentinel failover-timeout wm 4000\n' \
				"$sp" "$dir" "$r0" >"$dir/s$sp.conf"
			redis-sentinel "$dir/s$sp.conf" >>"$dir/s$sp.log" 2>&1 &
			pids="$pids $!"
			until_up "$sp"
			sps="$sps $sp"
		done
		# Every sentinel sees the two others and both replicas.
		for sp in $sps; do
			until redis-cli -p "$sp" SENTINEL MASTER wm | tr -d '\r' |
			    awk 'p == "num-other-sentinels" { o = $0 } p == "num-slaves" { n = $0 } { p = $0 }
				END { exit !(o == 2 && n == 2) }'; do sleep 0.2; done
		done
		gate 0 "redis-sentinel://$(echo $sps | sed 's/\([0-9]*\)/127.0.0.1:\1/g; s/ /,/g')/wm"
		"$dir/gatebench" "$dir/g0.sock" latency 1 >/dev/null
		"$dir/gatebench" "$dir/g0.sock" gap 20 >"$dir/stall" &
		b=$!
		sleep 3
		kill -9 "$m"
		echo "stall round $round: master killed at $(date +%T.%N | cut -c1-12)"
		wait "$b"
		sed 's/^/  /' "$dir/stall"
		sed -n 's/^[0-9-]*T\([0-9:.]*\)+[0-9]* weir-gate\[[0-9]*\]: [a-z]*: upstream up: shared store [^ ]*/  \1/p' \
			"$dir/gate0.log" | grep -v "this gate's start" | cut -c1-160
		stop_all
		rm -f "$dir"/s*.log "$dir"/s*.conf "$dir"/gate0.log
		round=$((round + 1))
	done ;;
*)
	echo "unknown part $part (gates, wait, stall)" >&2; exit 2 ;;
esac
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
