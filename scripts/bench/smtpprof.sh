#!/bin/bash
# scripts/bench/smtpprof.sh: where weir's CPU goes per message taken in
# over SMTP (issue 26).  A scratch queue, weir-queued (queue_socket) and
# `weir-smtpd -l`, each under `perf stat`, and Postfix's smtp-source
# sending N messages (default 500) of 1 KB over S sessions (default 1; a
# new connection per message, as smtp-source does without -d).  Prints
# the rate, the load, and per message: task-clock, context switches and
# page faults of weir-smtpd (the listener and its session processes) and
# of weir-queued, and weir-queued's fsync calls.  With TRACE=perf, a
# system-wide `perf record -g` during the run instead, its samples of
# weir-smtpd and weir-queued classified by the system call or kernel
# path in their call chains (scripts/bench/perfclass.py); with
# TRACE=strace, `strace -f -c` of both (counts; strace slows them).
# A benchmark, not a test: it asserts only that every message was queued.
#
#   make all && S=20 scripts/bench/smtpprof.sh
#   S=1 N=500 TRACE=perf scripts/bench/smtpprof.sh
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
B=$ROOT/$BUILD/bin
S=${S:-1}
N=${N:-500}
scratch=$(mktemp -d "${BENCH_DIR:-/var/tmp}/weir-smtpprof.XXXXXX")
QP="" SP="" RP=""
cleanup() {
	for p in $RP $SP $QP; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$scratch"
}
trap cleanup EXIT
export WEIR_CONFIG=$scratch/weir.conf WEIR_LIBEXEC=$B
cat >"$WEIR_CONFIG" <<CONF
queue_dir = "$scratch/queue"
hostname = "bench.test"
queue_socket = "$scratch/queued.sock"
listen {
  address = {"127.0.0.1:0"}
  max_connections = 100
  max_per_client = 100
}
CONF
"$B/weir" queue-init "$scratch/queue" >/dev/null
stat_q=() stat_s=()
case ${TRACE:-} in
perf) ;;
strace)
	stat_q=(strace -f -c -o "$scratch/queued.st")
	stat_s=(strace -f -c -o "$scratch/smtpd.st") ;;
*)
	stat_q=(perf stat -x, -o "$scratch/queued.stat" -e task-clock,context-switches,page-faults,syscalls:sys_enter_fsync)
	stat_s=(perf stat -x, -o "$scratch/smtpd.stat" -e task-clock,context-switches,page-faults) ;;
esac
"${stat_q[@]}" "$B/weir-queued" 2>"$scratch/queued.log" &
QP=$!
for _ in $(seq 100); do [ -S "$scratch/queued.sock" ] && break; sleep 0.05; done
"${stat_s[@]}" "$B/weir-smtpd" -l 2>"$scratch/smtpd.log" &
SP=$!
PORT=""
for _ in $(seq 100); do
	PORT=$(sed -n 's/.*listening on .* port \([0-9]*\).*/\1/p' "$scratch/smtpd.log")
	[ -n "$PORT" ] && break
	sleep 0.05
done
[ -n "$PORT" ] || { cat "$scratch/smtpd.log" >&2; exit 1; }
# One message first: the session and queue writer processes exist.
smtp-source -m 1 -l 100 -f probe@example.org -t probe@example.net "127.0.0.1:$PORT"
if [ "${TRACE:-}" = perf ]; then
	perf record -a -g -F 2000 -o "$scratch/perf.data" -- sleep 600 2>/dev/null &
	RP=$!
	sleep 0.5
fi
todo() { find "$scratch/queue/todo" -type f | wc -l; }
t0=$(date +%s.%N)
smtp-source -s "$S" -m "$N" -l 1024 -f bench@example.org -t rcpt@example.net "127.0.0.1:$PORT"
# Every message in todo/ (250 was said only once each was), 120 s at most.
i=0
while [ "$(todo)" -lt $((N + 1)) ]; do
	i=$((i + 1))
	[ "$i" -le 12000 ] || { echo "smtpprof: only $(todo) of $((N + 1)) messages in todo/ after 120 s" >&2; exit 1; }
	sleep 0.01
done
t1=$(date +%s.%N)
if [ -n "$RP" ]; then kill -INT "$RP"; wait "$RP" || true; RP=""; fi
# perf stat and strace print when their program ends: end the programs.
for p in $SP $QP; do
	if [ "${TRACE:-}" = perf ]; then kill "$p"; else pkill -TERM -P "$p"; fi
	wait "$p" 2>/dev/null || true
done
SP="" QP=""
printf 'smtp-source -s %s -m %s: %.0f msg/s; load %s\n' "$S" "$N" "$(echo "$N / ($t1 - $t0)" | bc -l)" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
case ${TRACE:-} in
perf)
	perf script -i "$scratch/perf.data" -F comm,ip,sym 2>/dev/null |
		python3 "$ROOT/scripts/bench/perfclass.py" weir-smtpd,weir-queued ;;
strace)
	for f in smtpd queued; do echo "== weir-$f"; head -25 "$scratch/$f.st"; done ;;
*)
	# per message, the probe included
	for f in smtpd queued; do
		awk -F, -v n=$((N + 1)) -v f="weir-$f" '
			$3 == "task-clock" { printf "%-12s %.3f ms task-clock", f, $1 / n }
			$3 == "context-switches" { printf ", %.1f context switches", $1 / n }
			$3 == "page-faults" { printf ", %.1f page faults", $1 / n }
			$3 ~ /sys_enter_fsync/ { printf ", %.2f fsync", $1 / n }
			END { print " per message" }' "$scratch/$f.stat"
	done ;;
esac
