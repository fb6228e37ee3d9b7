#!/bin/bash
# scripts/bench/inject.sh: the injection benchmark (a benchmark, not a
# test: it asserts no timing).  Builds weir-queue and weir, makes a scratch queue under
# /var/tmp (the disk a real spool would be on), and measures weir-queue:
#
#   - messages per second for 1 KB and 100 KB messages, with 1 and 8
#     injectors running at once (each injector a shell loop that runs
#     weir-queue once per message, as qmail-inject or sendmail would);
#   - CPU per message: user+sys of the run (bash `times`, children's
#     figures) minus the same loop running /bin/true with the same
#     redirections, divided by the messages: what weir-queue itself costs;
#   - fsyncs per message: strace -f -c -e trace=fsync,fdatasync over a
#     run of 100 injections.
#
# Every run checks that exactly the injected number of messages landed
# in todo/.  Prints a table.  Usage:
#
#   scripts/bench/inject.sh            (or: make bench-inject)
#   BUILD=build-qt N1K=2000 N100K=500 scripts/bench/inject.sh
#
# Environment: BUILD (build folder, default build), N1K and N100K
# (messages per run, default 4000 and 800), BENCH_DIR (scratch parent,
# default /var/tmp).  Needs bash, strace (optional: the fsync column is
# "-" without it), findmnt.
set -eu

cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
N1K=${N1K:-4000}
N100K=${N100K:-800}
BENCH_DIR=${BENCH_DIR:-/var/tmp}

# Only the two programs it runs, so that another program's broken build
# does not stop the benchmark.
make --no-print-directory BUILD="$BUILD" "$BUILD/bin/weir-queue" "$BUILD/bin/weir" >/dev/null
WQ=$(pwd)/$BUILD/bin/weir-queue
WEIR=$(pwd)/$BUILD/bin/weir

scratch=$(mktemp -d "$BENCH_DIR/weir-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
: >"$scratch/weir.conf"
export WEIR_CONFIG=$scratch/weir.conf
export WEIR_QUEUE=$scratch/queue

# Envelope: one sender, one recipient.  On fd 1 from a file: weir-queue
# reads fd 1 the same way whether it is a pipe or a file, and a file
# keeps a process substitution's extra fork out of the figures.
printf 'Fbench@example.org\0Trcpt@example.net\0\0' >"$scratch/env"

# A message of about $1 bytes: headers and 76-column lines.
make_msg() {
	local size=$1 out=$2
	{
		printf 'From: bench@example.org\nTo: rcpt@example.net\nSubject: bench %s\n\n' "$size"
		head -c $((size * 3 / 4)) /dev/urandom | base64 -w 76
	} | head -c "$size" >"$out"
}
make_msg 1024 "$scratch/msg1k"
make_msg 102400 "$scratch/msg100k"

fresh_queue() {
	rm -rf "$WEIR_QUEUE"
	"$WEIR" queue-init "$WEIR_QUEUE" >/dev/null
}

# Children's user+sys CPU so far, in milliseconds, into CPU_MS.  `times`
# must run in the shell that waited for the children (not in a $(...)
# subshell, whose children's counters start at zero), so its output goes
# through a file.
child_cpu() {
	local u s
	times >"$scratch/times"
	read -r u s <<<"$(tail -n 1 "$scratch/times")"	# "0m0.164s 0m0.035s"
	CPU_MS=$(echo "$(to_ms "$u") + $(to_ms "$s")" | bc)
}
to_ms() {	# 1m2.345s -> 62345.000
	local t=$1 m sec
	m=${t%%m*}
	sec=${t#*m}
	sec=${sec%s}
	echo "($m * 60 + $sec) * 1000" | bc
}

now() { date +%s.%N; }

# run PROG MSG TOTAL PAR: PAR loops injecting TOTAL/PAR messages each.
# Sets RUN_SECS and RUN_CPU_MS.
run() {
	local prog=$1 msg=$2 total=$3 par=$4 per j t0 t1 c0 rc=0 p
	per=$((total / par))
	child_cpu
	c0=$CPU_MS
	t0=$(now)
	for ((j = 0; j < par; j++)); do
		(
			for ((i = 0; i < per; i++)); do
				"$prog" <"$msg" 1<"$scratch/env" || { echo "injection failed: $?" >&2; exit 1; }
			done
		) &
	done
	for p in $(jobs -p); do
		wait "$p" || rc=1
	done
	[ "$rc" -eq 0 ] || { echo "inject.sh: an injector failed" >&2; exit 1; }
	t1=$(now)
	child_cpu
	RUN_SECS=$(echo "$t1 - $t0" | bc)
	RUN_CPU_MS=$(echo "$CPU_MS - $c0" | bc)
}

count_todo() { find "$WEIR_QUEUE/todo" -type f | wc -l; }

fsyncs_per_msg() {
	local msg=$1 n=100 out calls
	command -v strace >/dev/null || { echo "-"; return; }
	fresh_queue
	out=$scratch/strace.out
	# shellcheck disable=SC2016 # the inner bash expands $0..$3
	strace -f -c -o "$out" -e trace=fsync,fdatasync \
		bash -c 'for ((i = 0; i < $3; i++)); do "$0" <"$1" 1<"$2" || exit 1; done' \
		"$WQ" "$msg" "$scratch/env" "$n"
	calls=$(awk '$NF == "fsync" || $NF == "fdatasync" { c += $(NF - 1) } END { print c + 0 }' "$out")
	echo "scale=2; $calls / $n" | bc
}

fs=$(findmnt -n -o FSTYPE -T "$scratch")
dev=$(findmnt -n -o SOURCE -T "$scratch")
echo "weir-queue injection benchmark: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r)"
echo "scratch queue: $scratch ($fs on $dev)"
echo
printf '%-6s %9s %8s %8s %8s %11s %11s %10s\n' size injectors messages seconds msg/s \
	"cpu ms/msg" "raw ms/msg" fsyncs/msg
for spec in "1k:$N1K" "100k:$N100K"; do
	size=${spec%%:*}
	total=${spec#*:}
	msg=$scratch/msg$size
	fsy=$(fsyncs_per_msg "$msg")
	for par in 1 8; do
		total=$((total / par * par))
		fresh_queue
		run "$WQ" "$msg" "$total" "$par"
		secs=$RUN_SECS cpu=$RUN_CPU_MS
		got=$(count_todo)
		[ "$got" -eq "$total" ] || { echo "inject.sh: $got messages queued, expected $total" >&2; exit 1; }
		fresh_queue
		run /bin/true "$msg" "$total" "$par"
		bcpu=$RUN_CPU_MS
		rate=$(echo "scale=0; $total / $secs" | bc)
		raw=$(echo "scale=3; $cpu / $total" | bc)
		net=$(echo "scale=3; ($cpu - $bcpu) / $total" | bc)
		printf '%-6s %9s %8s %8.2f %8s %11.3f %11.3f %10s\n' "$size" "$par" "$total" "$secs" \
			"$rate" "$net" "$raw" "$fsy"
	done
done
echo
echo "cpu ms/msg: children's user+sys (bash times) of the run minus the same loop running"
echo "/bin/true (fork, exec, redirections); raw ms/msg: without that subtraction."
echo "fsyncs/msg: fsync+fdatasync calls counted by strace -f -c over 100 injections of that size."
