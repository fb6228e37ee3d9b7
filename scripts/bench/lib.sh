# shellcheck shell=bash disable=SC2154,SC2034 # variables set by and for the caller
# scripts/bench/lib.sh: shell code shared by relay.sh and compare.sh
# (sourced, not run).  The caller sets ROOT (the tree), B ($BUILD/bin),
# scratch (its scratch folder), CONC (weir's concurrency and
# max_connections) and pids (a list it kills at exit), and calls
# lib_setup once.  Everything listens on loopback only.

PY=/usr/bin/python3
HZ=$(getconf CLK_TCK)
# free_port and the private Postfix instance (pf_ok, pf_conf, pf_start,
# pf_stop, pf_left) are the tests' (tests/integration/postfix_upstream.sh).
# shellcheck source=tests/lib/postfix.sh
. "$ROOT/tests/lib/postfix.sh"
wtime=""	# GNU time running `weir run`
wpid=""		# `weir run`
stamper=""	# its stderr's reader

# lib_setup: the test certificates, the AUTH secret, a 1 KB message and
# its envelope in $scratch.
lib_setup() {
	"$ROOT/tests/upstream/mkcerts.sh" "$scratch/certs" >/dev/null 2>&1
	printf 'pw' >"$scratch/secret"
	chmod 600 "$scratch/secret"
	# 1 KB: headers and 76-column lines (sendmail adds Date, Message-ID).
	{
		printf 'From: bench@relay.example.org\nTo: rcpt@example.net\nSubject: bench\n\n'
		for i in $(seq 1 12); do printf '%075d\n' "$i"; done
	} | head -c 1024 >"$scratch/msg"
	printf 'Fbench@relay.example.org\0Trcpt@example.net\0\0' >"$scratch/env"
}

# wait_all PID...: wait for each; 1 if any failed.
wait_all() {
	local p rc=0
	for p in "$@"; do wait "$p" || rc=1; done
	return $rc
}

# stand_in NAME FLAGS...: the aiosmtpd stand-in; sets PORT.
stand_in() {
	local out=$scratch/port.$1
	shift
	$PY "$ROOT/tests/upstream/upstream.py" "$@" >"$out" 2>"$out.err" &
	pids="$pids $!"
	for _ in $(seq 1 100); do
		grep -q '^PORT ' "$out" 2>/dev/null && break
		sleep 0.05
	done
	PORT=$(sed -n 's/^PORT //p' "$out")
	[ -n "$PORT" ] || { cat "$out.err" >&2; exit 1; }
}

# instance NAME PORT TLS(none|starttls) AUTH(0|1) "RATE" [POLICY_EXTRA]: a
# fresh queue, journal and config in $scratch/NAME; sets D and exports
# WEIR_CONFIG.  $WEIR_EXTRA, if set, is appended to weir.conf and
# POLICY_EXTRA to policy.conf; WEIR_SHOWQ=1 gives it a weir-showq.
instance() {
	D=$scratch/$1
	mkdir -p "$D"
	{
		printf 'queue_dir = "%s/queue"\nhostname = "relay.example.org"\n' "$D"
		printf 'admin = "postmaster@example.org"\npolicy_file = "%s/policy.conf"\n' "$D"
		printf 'gate_socket = "%s/gate.sock"\ngate_journal = "%s/gate.journal"\n' "$D" "$D"
		# weir-showq only when asked (WEIR_SHOWQ=1: for users who may
		# not read the queue): $D/showq.sock.
		if [ -n "${WEIR_SHOWQ:-}" ]; then printf 'showq_socket = "%s/showq.sock"\n' "$D"
		else printf 'showq_socket = ""\n'; fi
		printf 'concurrency = %s\n' "$CONC"
		printf 'upstream "up" {\n  host = "127.0.0.1"\n  port = %s\n  tls = "%s"\n' "$2" "$3"
		printf '  ca_file = "%s/certs/ca.pem"\n' "$scratch"
		[ "$4" = 1 ] && printf '  username = "me"\n  secret_file = "%s/secret"\n' "$scratch"
		printf '}\n%s\n' "${WEIR_EXTRA:-}"
	} >"$D/weir.conf"
	{
		printf 'upstream "up" {\n  rate = {"%s"}\n  max_connections = %s\n}\n' "$5" "$CONC"
		printf '%s\n' "${6:-}"
	} >"$D/policy.conf"
	export WEIR_CONFIG=$D/weir.conf
	"$B/weir" queue-init >/dev/null
}

# loop_inject N PAR CMD...: N messages, PAR shell loops at once, each
# running `CMD rcptI@example.net <msg` once per message.
loop_inject() {
	local n=$1 par=$2 j ps=""
	shift 2
	for ((j = 1; j <= par; j++)); do
		(
			for ((i = j; i <= n; i += par)); do
				"$@" "rcpt$i@example.net" <"$scratch/msg" || exit 1
			done
		) &
		ps="$ps $!"
	done
	# shellcheck disable=SC2086
	wait_all $ps
}

# inject_sendmail N: N messages through weir's sendmail, 4 injectors at once.
inject_sendmail() {
	loop_inject "$1" 4 "$B/sendmail" -i -f bench@relay.example.org ||
		{ echo "sendmail failed" >&2; exit 1; }
}

# inject_queue N: N messages straight into weir-queue, 8 injectors.
inject_queue() {
	local n=$1 j ps=""
	for j in $(seq 1 8); do
		(
			for ((i = j; i <= n; i += 8)); do
				"$B/weir-queue" <"$scratch/msg" 1<"$scratch/env" || exit 1
			done
		) &
		ps="$ps $!"
	done
	# shellcheck disable=SC2086
	wait_all $ps || { echo "weir-queue failed" >&2; exit 1; }
}

queued_files() { find "$D/queue/mess" -type f | wc -l; }

# start_weir: `weir run` (under GNU time, in a session of its own), its
# stderr stamped into $D/log; T0 is the release.  Sets wtime, wpid,
# SEND_PID, GATE_PID.
start_weir() {
	local i
	rm -f "$D/err"
	mkfifo "$D/err"
	$PY -u -c '
import sys, time
for l in sys.stdin:
    sys.stdout.write("%.6f %s" % (time.time(), l))
    sys.stdout.flush()' <"$D/err" >"$D/log" &
	stamper=$!
	T0=$(date +%s.%N)
	setsid /usr/bin/time -f '%U %S %M' -o "$D/time" "$B/weir" run 2>"$D/err" &
	wtime=$!
	for i in $(seq 1 250); do
		wpid=$(pgrep -P "$wtime" || true)
		[ -n "$wpid" ] && grep -q 'started weir-send' "$D/log" 2>/dev/null && break
		sleep 0.02
	done
	SEND_PID=$(sed -n 's/.*started weir-send, pid \([0-9]*\).*/\1/p' "$D/log" | head -1)
	GATE_PID=$(sed -n 's/.*started weir-gate, pid \([0-9]*\).*/\1/p' "$D/log" | head -1)
	[ -n "$wpid" ] && [ -n "$SEND_PID" ] && [ -n "$GATE_PID" ] || { echo "weir run did not start" >&2; exit 1; }
}
stop_weir() {
	kill "$wpid"
	wait "$wtime" || true
	wait "$stamper" || true
	wtime="" wpid="" stamper=""
}
# lib_cleanup: stop what the functions here started (the caller's trap).
lib_cleanup() {
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null
	[ -n "$wtime" ] && wait "$wtime" 2>/dev/null
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}

# wait_log PATTERN COUNT TIMEOUT_S: until COUNT lines of the log match.
wait_log() {
	local end=$(($(date +%s) + $3))
	while [ "$(grep -c -- "$1" "$D/log" 2>/dev/null || true)" -lt "$2" ]; do
		[ "$(date +%s)" -lt "$end" ] || { echo "timed out waiting for $2 x '$1'" >&2; return 1; }
		sleep 0.05
	done
}

# stamp_of PATTERN N: the stamp of the Nth log line matching PATTERN.
stamp_of() { grep -- "$1" "$D/log" | sed -n "${2}p" | awk '{ print $1 }'; }

# cpu_of PID: "own children" CPU seconds (utime+stime, cutime+cstime).
cpu_of() {
	awk -v hz="$HZ" '{ sub(/^.*\) /, ""); printf "%.2f %.2f\n", ($12 + $13) / hz, ($14 + $15) / hz }' \
		"/proc/$1/stat"
}
kb_of() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# sid_cpu SID: CPU seconds (utime+stime+cutime+cstime) of every process
# in session SID; a process that ended was reaped by one in the session,
# whose cutime+cstime now holds it.
sid_cpu() {
	for f in /proc/[0-9]*/stat; do cat "$f" 2>/dev/null; done |
		awk -v sid="$1" -v hz="$HZ" '{ sub(/^.*\) /, ""); if ($4 == sid) c += $12 + $13 + $14 + $15 }
		END { printf "%.2f", c / hz }'
}
# sid_pids SID: the live processes of session SID (not zombies), one pid a
# line.
sid_pids() {
	local f
	for f in /proc/[0-9]*/stat; do cat "$f" 2>/dev/null; done |
		awk -v sid="$1" '{ pid = $1; sub(/^.*\) /, ""); if ($4 == sid && $1 != "Z") print pid }'
}
# sid_procs SID: "COMM RSS HWM PSS" per process of session SID: its name,
# VmRSS, VmHWM (its peak RSS) and Pss (smaps_rollup), in kB.
sid_procs() {
	local p c
	for p in $(sid_pids "$1"); do
		c=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		awk -v c="${c// /_}" '$1 == "VmRSS:" { r = $2 } $1 == "VmHWM:" { h = $2 }
			END { printf "%s %d %d ", c, r, h }' "/proc/$p/status" 2>/dev/null || continue
		awk '$1 == "Pss:" { s = $2 } END { print s + 0 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0
	done
}
# sid_mem SID: "RSS PSS PROCS": summed VmRSS and Pss (kB) and the number of
# processes in session SID.
sid_mem() {
	sid_procs "$1" | awk '{ r += $2; s += $4; n++ } END { print r + 0, s + 0, n + 0 }'
}
# sid_kill9 SID: SIGKILL to every process of session SID, until none is
# left (a parent may fork while it is being killed).
sid_kill9() {
	local p i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		p=$(sid_pids "$1")
		[ -n "$p" ] || return 0
		# shellcheck disable=SC2086
		kill -9 $p 2>/dev/null || true
		sleep 0.1
	done
	echo "session $1 still has processes after SIGKILL: $(sid_pids "$1")" >&2
	return 1
}

# pf_inject DIR N: N messages through Postfix's sendmail -C (4 injectors).
pf_inject() {
	loop_inject "$2" 4 /usr/sbin/sendmail -C "$1/etc" -i -f bench@relay.example.org 2>/dev/null ||
		{ echo "postfix sendmail failed" >&2; exit 1; }
}

