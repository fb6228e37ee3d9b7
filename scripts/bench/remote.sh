#!/bin/bash
# scripts/bench/remote.sh: weir-remote's throughput benchmark (a
# benchmark, not a test: it asserts no timing).  One weir-remote process
# per message, as weir-send or qmail-send runs it, 1 KB messages, one
# recipient, to a sink on loopback:
#
#   - Postfix's smtp-sink (plain only: it has no TLS), when installed
#     (package postfix; install it with the daemon kept off, e.g. with a
#     policy-rc.d that exits 101);
#   - tests/upstream/upstream.py (Debian's python3-aiosmtpd) over plain,
#     STARTTLS, STARTTLS + AUTH PLAIN, and implicit TLS (smtps) + AUTH,
#     with certificates made for the run by tests/upstream/mkcerts.sh.
#
# For each: messages per second with 1 and PAR (default 4) senders at
# once, and the client's CPU per message (user+sys of the weir-remote
# processes: bash `times`, children's figures, minus the same loop
# running /bin/true).  The handshake cost is the difference per message
# between each TLS mode and plain text to the same sink.  Every message's
# report is checked ("r", then "K"); a run with any other report fails.
#
# Peers measured side by side, for ratios: Postfix's smtp-source (one
# message per session, plain, to smtp-sink) and swaks (one process per
# message, STARTTLS + AUTH, to the aiosmtpd sink).
#
#   scripts/bench/remote.sh
#   BUILD=build-rem N=500 PAR=4 scripts/bench/remote.sh
#
# Environment: BUILD (default build), N (messages per run, default 300),
# PAR (parallel senders, default 4).  Loopback only.
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
N=${N:-300}
PAR=${PAR:-4}
PY=/usr/bin/python3

make --no-print-directory BUILD="$BUILD" "$BUILD/bin/weir-remote" >/dev/null
WR=$ROOT/$BUILD/bin/weir-remote

scratch=$(mktemp -d /tmp/weir-bench-remote.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$scratch"
}
trap cleanup EXIT

"$ROOT/tests/upstream/mkcerts.sh" "$scratch/certs" >/dev/null
printf 'pw' >"$scratch/secret"
chmod 600 "$scratch/secret"

# 1 KB: headers and 76-column lines.
{
	printf 'From: bench@example.org\nTo: rcpt@example.net\nSubject: bench\n\n'
	for i in $(seq 1 12); do
		printf '%075d\n' "$i"
	done
} | head -c 1024 >"$scratch/msg"

free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_upstream NAME FLAGS...: an aiosmtpd sink; sets PORT.
start_upstream() {
	local out=$scratch/port.$1
	shift
	$PY "$ROOT/tests/upstream/upstream.py" --no-store "$@" >"$out" 2>/dev/null &
	pids="$pids $!"
	for _ in $(seq 1 100); do
		grep -q PORT "$out" 2>/dev/null && break
		sleep 0.05
	done
	PORT=$(awk '{print $2}' "$out")
}

# conf NAME PORT TLS [AUTH]: a weir.conf for the run.
conf() {
	local c=$scratch/$1.conf
	{
		printf 'hostname = "bench.example"\ngate_socket = "%s/no-gate"\n' "$scratch"
		printf 'upstream "b" {\n  host = "127.0.0.1"\n  port = %s\n  tls = "%s"\n' "$2" "$3"
		printf '  ca_file = "%s/certs/ca.pem"\n' "$scratch"
		if [ -n "${4:-}" ]; then
			printf '  username = "me"\n  secret_file = "%s/secret"\n' "$scratch"
		fi
		printf '}\n'
	} >"$c"
	echo "$c"
}

# sender CMD COUNT ID: run CMD COUNT times, checking each report.
sender() {
	local i out bad=0
	for i in $(seq 1 "$2"); do
		if [ "$1" = true ]; then	# the loop's own cost, same pipeline
			out=$(/bin/true <"$scratch/msg" 2>/dev/null | tr '\0' '|')
			continue
		fi
		out=$("$WR" -n -c "$1" relay bench@example.org rcpt@example.net <"$scratch/msg" 2>/dev/null | tr '\0' '|')
		case $out in r\|K*) ;; *) bad=$((bad + 1)); echo "bad report: $out" >&2 ;; esac
	done
	[ "$bad" -eq 0 ]
}

# cpu_ms FILE: children's user+sys in ms from `times` output saved in
# FILE (`times` must run in the shell that waited for the children).
cpu_ms() {
	tail -n 1 "$1" | awk '{
		split($1, u, /[ms]/); split($2, s, /[ms]/);
		printf "%.0f\n", (u[1]*60 + u[2] + s[1]*60 + s[2]) * 1000 }'
}

# measure CONF PAR: prints "seconds msg/s cpu_ms_per_msg".
measure() {
	local c=$1 par=$2 each t0 t1 c0 c1 j
	each=$((N / par))
	times >"$scratch/times0"
	t0=$(date +%s.%N)
	for j in $(seq 1 "$par"); do
		sender "$c" "$each" "$j" &
	done
	for j in $(seq 1 "$par"); do
		wait -n || { echo "a sender failed" >&2; exit 1; }
	done
	t1=$(date +%s.%N)
	times >"$scratch/times1"
	c0=$(cpu_ms "$scratch/times0")
	c1=$(cpu_ms "$scratch/times1")
	echo "$t0 $t1 $c0 $c1 $((each * par))" | awk '{
		secs = $2 - $1; n = $5;
		printf "%8.2f %8.0f %10.2f\n", secs, n / secs, ($4 - $3) / n }'
}

base=$(measure true 1 | awk '{print $3}')

printf '%-14s %-22s %4s %6s %8s %8s %10s\n' sink mode par msgs seconds msg/s "cpu ms/msg"
row() { # sink mode conf
	local p r
	for p in 1 "$PAR"; do
		r=$(measure "$3" "$p")
		echo "$r" | awk -v s="$1" -v m="$2" -v p="$p" -v n="$(( (N / p) * p ))" -v b="$base" '{
			printf "%-14s %-22s %4d %6d %8.2f %8.0f %10.2f\n", s, m, p, n, $1, $2, $3 - b }'
	done
}

if command -v smtp-sink >/dev/null 2>&1; then
	sp=$(free_port)
	smtp-sink -u nobody "127.0.0.1:$sp" 256 &
	pids="$pids $!"
	sleep 0.3
	row smtp-sink plain "$(conf sinkplain "$sp" none)"
	if command -v smtp-source >/dev/null 2>&1; then
		t0=$(date +%s.%N)
		smtp-source -s 1 -m "$N" -l 1024 -f bench@example.org -t rcpt@example.net "127.0.0.1:$sp"
		t1=$(date +%s.%N)
		echo "$t0 $t1" | awk -v n="$N" '{ printf "%-14s %-22s %4d %6d %8.2f %8.0f %10s\n",
			"smtp-sink", "smtp-source (peer)", 1, n, $2 - $1, n / ($2 - $1), "-" }'
	fi
else
	echo "(smtp-sink not installed: Postfix rows skipped)"
fi

start_upstream plain
row aiosmtpd plain "$(conf plain "$PORT" none)"
start_upstream starttls --cert "$scratch/certs/good.pem" --key "$scratch/certs/good.key"
row aiosmtpd starttls "$(conf starttls "$PORT" starttls)"
start_upstream starttlsauth --cert "$scratch/certs/good.pem" --key "$scratch/certs/good.key" --auth me:pw
row aiosmtpd starttls+auth "$(conf starttlsauth "$PORT" starttls auth)"
sw_port=$PORT
start_upstream smtps --smtps --cert "$scratch/certs/good.pem" --key "$scratch/certs/good.key" --auth me:pw
row aiosmtpd smtps+auth "$(conf smtps "$PORT" smtps auth)"

if command -v swaks >/dev/null 2>&1; then
	n=$((N / 3))
	t0=$(date +%s.%N)
	for _ in $(seq 1 "$n"); do
		swaks -S -S --server 127.0.0.1 --port "$sw_port" --tls --tls-verify \
		    --tls-ca-path "$scratch/certs/ca.pem" --auth PLAIN --auth-user me \
		    --auth-password pw --from bench@example.org --to rcpt@example.net \
		    --data "$scratch/msg" >/dev/null 2>&1 || { echo "swaks failed" >&2; exit 1; }
	done
	t1=$(date +%s.%N)
	echo "$t0 $t1" | awk -v n="$n" '{ printf "%-14s %-22s %4d %6d %8.2f %8.0f %10s\n",
		"aiosmtpd", "swaks starttls+auth", 1, n, $2 - $1, n / ($2 - $1), "-" }'
fi
