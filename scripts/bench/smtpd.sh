#!/bin/bash
# scripts/bench/smtpd.sh: weir-smtpd's acceptance rate (a benchmark, not a
# test: it asserts no timing).  Postfix's smtp-source sends 1 KB messages
# to `weir-smtpd -l` on a loopback port the kernel picks, with 1 and 20
# sessions at once, queueing for real through weir-queue into a scratch
# queue under /var/tmp; the same runs against Postfix's smtp-sink (which
# queues nothing) give the ceiling of the client and the loopback, and the
# table shows weir's rate as a ratio of it.  Then the latency of one
# message, end to end into the queue (a fresh connection each time).
#
# Every weir run checks that exactly the messages sent landed in todo/.
#
#   scripts/bench/smtpd.sh
#   BUILD=build-sd N=2000 scripts/bench/smtpd.sh
#
# Environment: BUILD (default build), N (messages per run, default 2000),
# BENCH_DIR (default /var/tmp).  Needs smtp-source and smtp-sink (Debian's
# postfix package).
set -eu

cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
N=${N:-2000}
BENCH_DIR=${BENCH_DIR:-/var/tmp}
SOURCE=$(command -v smtp-source || echo /usr/sbin/smtp-source)
SINK=$(command -v smtp-sink || echo /usr/sbin/smtp-sink)
[ -x "$SOURCE" ] && [ -x "$SINK" ] || {
	echo "smtpd.sh: needs smtp-source and smtp-sink: apt-get install postfix" >&2; exit 2; }

make --no-print-directory BUILD="$BUILD" "$BUILD/bin/weir-smtpd" "$BUILD/bin/weir-queue" \
    "$BUILD/bin/weir" >/dev/null
BIN=$(pwd)/$BUILD/bin

scratch=$(mktemp -d "$BENCH_DIR/weir-bench-smtpd.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$scratch"
}
trap cleanup EXIT

cat >"$scratch/weir.conf" <<CONF
queue_dir = "$scratch/queue"
hostname = "bench.test"
listen {
  address = {"127.0.0.1:0"}
  max_connections = 100
  max_per_client = 100
}
CONF
export WEIR_CONFIG=$scratch/weir.conf WEIR_LIBEXEC=$BIN

fresh_queue() {
	rm -rf "$scratch/queue"
	"$BIN/weir" queue-init "$scratch/queue" >/dev/null
}

# Start weir-smtpd -l; its port into PORT.
start_weir() {
	: >"$scratch/smtpd.log"
	"$BIN/weir-smtpd" -l 2>"$scratch/smtpd.log" &
	pids+=($!)
	for _ in $(seq 100); do
		PORT=$(sed -n 's/.*listening on .* port \([0-9]*\).*/\1/p' "$scratch/smtpd.log")
		[ -n "$PORT" ] && return 0
		sleep 0.05
	done
	echo "weir-smtpd did not start:" >&2; cat "$scratch/smtpd.log" >&2; exit 1
}

# A free port for smtp-sink: bind port 0 and read what the kernel gave.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Seconds (with fractions) to send $2 messages over $1 sessions to $3.
run_source() {
	local s=$1 m=$2 target=$3 t0 t1
	t0=$(date +%s.%N)
	"$SOURCE" -s "$s" -m "$m" -l 1024 -f bench@example.org -t rcpt@example.net "$target" || {
		echo "smtp-source to $target failed" >&2; exit 1; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

todo_count() { find "$scratch/queue/todo" -type f | wc -l; }

printf '%-28s %12s %12s %8s\n' "run ($N x 1 KB)" "weir msg/s" "sink msg/s" "ratio"
sport=$(free_port)
sinkuser=()
[ "$(id -u)" -eq 0 ] && sinkuser=(-u nobody)	# smtp-sink refuses to run as root
"$SINK" "${sinkuser[@]}" -c "127.0.0.1:$sport" 256 >/dev/null &
pids+=($!)
sleep 0.3
start_weir
for s in 1 20; do
	fresh_queue
	tw=$(run_source "$s" "$N" "127.0.0.1:$PORT")
	got=$(todo_count)
	[ "$got" -eq "$N" ] || { echo "expected $N messages in todo/, found $got" >&2; exit 1; }
	ts=$(run_source "$s" "$N" "127.0.0.1:$sport")
	rw=$(echo "$N / $tw" | bc -l)
	rs=$(echo "$N / $ts" | bc -l)
	printf '%-28s %12.0f %12.0f %8.2f\n' "$s session(s)" "$rw" "$rs" "$(echo "$rw / $rs" | bc -l)"
done

# Latency: one message per connection, one after the other.
fresh_queue
L=50
tl=$(run_source 1 1 "127.0.0.1:$PORT" >/dev/null; \
    t0=$(date +%s.%N); for _ in $(seq $L); do "$SOURCE" -m 1 -l 1024 -f bench@example.org \
    -t rcpt@example.net "127.0.0.1:$PORT"; done; t1=$(date +%s.%N); echo "($t1 - $t0) / $L" | bc -l)
printf 'latency, connect to queued (mean of %d): %.1f ms\n' "$L" "$(echo "$tl * 1000" | bc -l)"
