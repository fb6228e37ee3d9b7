#!/bin/bash
# scripts/bench/relay.sh: weir end to end (issue 5, "Figures").  A
# benchmark, not a test: it asserts no timing.  Everything on loopback,
# in a scratch folder under $BENCH_DIR (default /var/tmp: the disk a real
# spool would be on), removed at the end.  The real `weir run` (weir-gate,
# weir-send, weir-remote per transaction) of $BUILD/bin, each run with a
# fresh queue, gate journal, weir.conf and policy.conf.
#
#  1. Relay rate with no limit (policy "1000000 per 1s", max_connections
#     = 8, concurrency = 8): N1 messages of 1 KB (one recipient each) are
#     queued with weir's sendmail while weir is stopped; the clock starts
#     when `weir run` starts and stops when weir-send has logged "end" for
#     every one of them (the queue is empty: checked).  To Postfix's
#     smtp-sink over plain SMTP (tls = "none") and to the python3-aiosmtpd
#     stand-in (tests/upstream/upstream.py --no-store) over STARTTLS +
#     AUTH PLAIN.  CPU: user+sys of `weir run` and every descendant it
#     reaped (GNU time on `weir run`, stopped once the queue is empty),
#     with weir-send's and weir-gate's own shares from /proc/PID/stat just
#     before the stop.  The peer, same sinks, same messages, same run
#     (as root, package postfix): Postfix 3.7 as a relay, a private
#     instance under $scratch/postfix (no listener; relayhost the sink;
#     smtp_destination_concurrency_limit = CONC; for the stand-in
#     smtp_tls_security_level = secure and SASL), messages through its
#     sendmail while its master is stopped, then `master -d` timed until
#     its queue is empty.
#  2. Utilisation under a limit: policy RATE2 (default "20 per 5s"), N2
#     (default 200) messages queued beforehand, to the stand-in (STARTTLS
#     + AUTH) with --record: from the "time" of its "data" events, the
#     sends in each period from the first send, the long-run utilisation
#     K*P / (t[K*N+1] - t[1]) (N per period P; the first send of the K-th
#     later period should come exactly K periods after the first send),
#     and the highest count in any sliding window of P at the upstream.
#  3. Start-up with a big backlog: N3 (default 20000; N3=100000 for the
#     issue's figure) messages put in todo/ with weir-queue (8 injectors),
#     weir stopped; then the time from `weir run` to weir-send's "started"
#     line (every message loaded) and to the first "delivered to" line,
#     and weir-send's VmRSS / VmHWM then.  Policy "1 per 1h": one goes.
#  4. CPU while throttled: N4 (default 10000) messages queued, policy
#     RATE4 (default "1 per 1m"); once the first delivery is done and the
#     backlog is waiting, utime+stime of weir-gate and weir-send (and the
#     deliverers weir-send reaped) over IDLE4 (default 60) seconds, from
#     /proc/PID/stat (resolution: one clock tick).
#
# Log lines get a wall-clock stamp as they are read from `weir run`'s
# stderr (a python3 line reader), which is how "first delivery" and
# "queue empty" are timed.
#
#   make BUILD=build-bench all && BUILD=build-bench scripts/bench/relay.sh
#   N1=5000 N3=100000 BUILD=build-bench scripts/bench/relay.sh
#
# Environment: BUILD (default build), BENCH_DIR (default /var/tmp), N1
# (1000), N2 (200), RATE2 ("20 per 5s"), N3 (20000), N4 (10000), RATE4
# ("1 per 1m"), IDLE4 (60), CONC (8: concurrency and max_connections),
# PARTS (default "1 2 3 4").  Needs python3-aiosmtpd, openssl, GNU time;
# smtp-sink (package postfix, its daemon not running) for the plain rows.
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
BENCH_DIR=${BENCH_DIR:-/var/tmp}
N1=${N1:-1000}
N2=${N2:-200}
RATE2=${RATE2:-20 per 5s}
N3=${N3:-20000}
N4=${N4:-10000}
RATE4=${RATE4:-1 per 1m}
IDLE4=${IDLE4:-60}
CONC=${CONC:-8}
PARTS=${PARTS:-1 2 3 4}
B=$ROOT/$BUILD/bin
for p in weir weir-gate weir-send weir-remote weir-queue sendmail; do
	[ -x "$B/$p" ] || { echo "build first: make BUILD=$BUILD all ($B/$p missing)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "relay.sh needs GNU time (/usr/bin/time)" >&2; exit 1; }
export WEIR_LIBEXEC=$B
. "$ROOT/scripts/bench/lib.sh"

scratch=$(mktemp -d "$BENCH_DIR/weir-bench-relay.XXXXXX")
chmod 755 "$scratch"	# the Postfix peer's daemons run as user postfix
pids=""		# sinks, stand-ins
cleanup() {
	lib_cleanup
	if [ -n "${KEEP:-}" ]; then echo "kept: $scratch"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
lib_setup

# sum FIGURE VALUE: a row of the summary table printed at the end.
sum() { printf '%-62s %s\n' "$1" "$2" >>"$scratch/summary"; }

echo "weir end-to-end benchmark: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binaries: $B; scratch: $scratch ($(findmnt -n -o FSTYPE -T "$scratch") on $(findmnt -n -o SOURCE -T "$scratch"))"

# ---- 1: no limit ----
rate_row() {	# LABEL
	local n=$N1 t1 tf u s left send_own send_kids gate_own
	instance "$1" "$PORT" "$TLS" "$AUTH" "1000000 per 1s"
	inject_sendmail "$n"
	[ "$(queued_files)" -eq "$n" ] || { echo "expected $n queued" >&2; exit 1; }
	start_weir
	wait_log ': end$' "$n" 600
	t1=$(stamp_of ': end$' "$n")
	tf=$(stamp_of 'delivered to <' 1)
	read -r send_own send_kids <<<"$(cpu_of "$SEND_PID")"
	read -r gate_own _ <<<"$(cpu_of "$GATE_PID")"
	stop_weir
	left=$(queued_files)
	[ "$left" -eq 0 ] || { echo "$left messages left in the queue" >&2; exit 1; }
	[ "$(grep -c 'delivered to <' "$D/log")" -eq "$n" ] || { echo "not $n deliveries" >&2; exit 1; }
	read -r u s _ <"$D/time"
	sum "relay, no limit, $1 $2: msg/s release->empty (1st->last)" \
		"$(echo "$n / ($t1 - $T0)" | bc) ($(echo "($n - 1) / ($t1 - $tf)" | bc)); $(printf %.2f "$(echo "($u + $s) * 1000 / $n" | bc -l)") ms CPU/msg"
	printf '%-10s %-21s %5d %7.2f %6.0f %7.2f %6.0f %7.2f %7.2f %6.2f %6.2f %6.2f\n' "$1" "$2" "$n" \
		"$(echo "$t1 - $T0" | bc)" "$(echo "$n / ($t1 - $T0)" | bc -l)" \
		"$(echo "$tf - $T0" | bc)" "$(echo "($n - 1) / ($t1 - $tf)" | bc -l)" \
		"$(echo "$u + $s" | bc)" "$(echo "($u + $s) * 1000 / $n" | bc -l)" \
		"$send_own" "$send_kids" "$gate_own"
}
# postfix_row PORT: the peer, Postfix 3.7 as a relay to the same sink: a
# private instance (its own config, queue and data folders under
# $scratch/postfix; no listener: master.cf has no smtpd), relayhost the
# sink, smtp_destination_concurrency_limit = CONC.  N1 messages through
# Postfix's sendmail while its master is stopped (they wait in maildrop/),
# then `master -d` (under setsid) started: timed until maildrop/,
# incoming/, active/ and deferred/ are empty.  CPU: utime+stime+cutime+
# cstime of every process in the master's session just before the stop.
postfix_row() {	# PORT UPSTREAM MODE(plain|starttls+auth)
	local P=$scratch/postfix n=$N1 t1 left cpu mpid
	pf_conf "$P" "$1" "$3"
	pf_inject "$P" "$n"
	[ "$(pf_left "$P")" -eq "$n" ] || { echo "postfix: expected $n in maildrop/" >&2; exit 1; }
	T0=$(date +%s.%N)
	pf_start "$P"
	mpid=$PF_MASTER
	local end=$(($(date +%s) + 300))
	while [ "$(pf_left "$P")" -gt 0 ]; do
		[ "$(date +%s)" -lt "$end" ] || { kill "$mpid"; echo "postfix did not drain in 300 s: see $P/maillog" >&2; exit 1; }
		sleep 0.05
	done
	t1=$(date +%s.%N)
	cpu=$(sid_cpu "$mpid")
	pf_stop
	left=$(pf_left "$P")
	[ "$left" -eq 0 ] || { echo "postfix: $left messages left" >&2; exit 1; }
	[ "$(grep -c 'status=sent' "$P/maillog")" -eq "$n" ] || { echo "postfix: not $n sent" >&2; exit 1; }
	sum "relay, no limit, $2 $3: Postfix 3.7 (peer) msg/s release->empty" \
		"$(echo "$n / ($t1 - $T0)" | bc); $(printf %.2f "$(echo "$cpu * 1000 / $n" | bc -l)") ms CPU/msg"
	printf '%-10s %-21s %5d %7.2f %6.0f %7s %6s %7.2f %7.2f %6s %6s %6s\n' "$2" "postfix $3" "$n" \
		"$(echo "$t1 - $T0" | bc)" "$(echo "$n / ($t1 - $T0)" | bc -l)" - - \
		"$cpu" "$(echo "$cpu * 1000 / $n" | bc -l)" - - -
}

case " $PARTS " in *" 1 "*)
	echo
	echo "1. no limit (1000000 per 1s), concurrency = max_connections = $CONC, $N1 messages of 1 KB queued beforehand"
	printf '%-10s %-21s %5s %7s %6s %7s %6s %7s %7s %6s %6s %6s\n' upstream mode msgs "secs" "msg/s" \
		"1st at" "msg/s" "cpu s" "ms/msg" send remote gate
	printf '%-10s %-21s %5s %7s %6s %7s %6s %7s %7s %6s %6s %6s\n' "" "" "" "release" "" "" "1st.." \
		"all" "" "own" "(reap)" "own"
	if command -v smtp-sink >/dev/null 2>&1; then
		PORT=$(free_port)
		smtp-sink -u nobody "127.0.0.1:$PORT" 256 &
		pids="$pids $!"
		sleep 0.3
		TLS=none AUTH=0 rate_row smtp-sink plain
		if pf_ok; then
			postfix_row "$PORT" smtp-sink plain
		else
			echo "(the Postfix peer needs root, package postfix and its postfix user: skipped)"
		fi
	else
		echo "(smtp-sink not installed: the plain row is skipped)"
	fi
	stand_in rate --no-store --cert "$scratch/certs/good.pem" --key "$scratch/certs/good.key" --auth me:pw
	TLS=starttls AUTH=1 rate_row aiosmtpd starttls+auth
	if pf_ok; then postfix_row "$PORT" aiosmtpd starttls+auth; fi
	echo "secs release: weir run started -> last 'end' logged (queue empty); 1st at: -> first 'delivered to';"
	echo "msg/s 1st..: (msgs-1) / (last end - first delivery); cpu s all: user+sys of weir run and all it reaped"
	echo "(GNU time); send own / remote (reap) / gate own: weir-send's own, the weir-remotes weir-send reaped, weir-gate's own"
	;;
esac

# ---- 2: utilisation ----
case " $PARTS " in *" 2 "*)
	echo
	per=${RATE2##* per }
	lim=${RATE2%% per *}
	echo "2. utilisation: policy \"$RATE2\", $N2 messages queued beforehand, STARTTLS + AUTH stand-in with --record"
	stand_in util --record "$scratch/util.rec" --cert "$scratch/certs/good.pem" \
		--key "$scratch/certs/good.key" --auth me:pw
	TLS=starttls AUTH=1
	instance util "$PORT" starttls 1 "$RATE2"
	inject_sendmail "$N2"
	start_weir
	secs=$($PY -c "import re;m=re.fullmatch(r'(\d+)([smhd])','$per');print(int(m[1])*{'s':1,'m':60,'h':3600,'d':86400}[m[2]])")
	wait_log ': end$' "$N2" $((N2 / lim * secs + 120))
	stop_weir
	$PY - "$scratch/util.rec" "$lim" "$secs" "$N2" "$scratch/summary" <<'PY'
import json, sys
rec, n, p, total = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
t = sorted(e["time"] for e in map(json.loads, open(rec)) if e.get("event") == "data")
assert len(t) == total, (len(t), total)
t0 = t[0]
per = {}
for x in t:
    per[int((x - t0) // p)] = per.get(int((x - t0) // p), 0) + 1
full = [per.get(k, 0) for k in range(int((t[-1] - t0) // p))]  # periods before the last one
K = (total - 1) // n
util = K * p / (t[K * n] - t0)
worst, j = 0, 0
for i, x in enumerate(t):
    while t[j] <= x - p:
        j += 1
    worst = max(worst, i - j + 1)
print(f"   sends per period from the first send: {' '.join(str(c) for c in full)} | last {per[max(per)]}")
print(f"   periods before the last: mean {sum(full) / len(full) / n * 100:.2f} % of {n}, lowest {min(full)}")
print(f"   long-run: send #{K * n + 1} came {t[K * n] - t0:.3f} s after send #1 ({K} periods = {K * p:.0f} s):"
      f" utilisation {util * 100:.2f} %")
print(f"   highest count in any {p:.0f} s window at the upstream: {worst} (limit {n}); {total} sends in {t[-1] - t0:.1f} s")
with open(sys.argv[5], "a") as f:
    f.write("%-62s %s\n" % (f"utilisation, {n} per {p:.0f}s, {total} queued (long-run; per period)",
                            f"{util * 100:.2f} %; mean {sum(full) / len(full) / n * 100:.2f} %, lowest {min(full)}"))
    f.write("%-62s %s\n" % (f"highest count in any {p:.0f} s window at the upstream", f"{worst} (limit {n})"))
PY
	;;
esac

# ---- 3: start-up with a big backlog ----
case " $PARTS " in *" 3 "*)
	echo
	echo "3. start-up with $N3 messages queued (weir-queue, 8 injectors, weir stopped), policy \"1 per 1h\""
	stand_in big --no-store
	instance big "$PORT" none 0 "1 per 1h"
	start_weir	# on the empty queue: weir-send's RSS with nothing queued
	wait_log 'weir-send\[[0-9]*\]: info: started on' 1 60
	rss0=$(kb_of "$SEND_PID" VmRSS)
	stop_weir
	ti0=$(date +%s.%N)
	inject_queue "$N3"
	ti1=$(date +%s.%N)
	[ "$(queued_files)" -eq "$N3" ] || { echo "expected $N3 queued" >&2; exit 1; }
	start_weir
	wait_log 'delivered to <' 1 3600
	# weir-send preprocesses todo/ a slice per loop turn, delivering
	# meanwhile: wait until every message is in, then measure memory.
	wait_log ': queued, from' "$N3" 3600
	sleep 1
	ts=$(stamp_of 'weir-send\[[0-9]*\]: info: started on' 1)
	tf=$(stamp_of 'delivered to <' 1)
	tn=$(stamp_of ': queued, from' 1)
	tl=$(stamp_of ': queued, from' "$N3")
	rss=$(kb_of "$SEND_PID" VmRSS)
	hwm=$(kb_of "$SEND_PID" VmHWM)
	grss=$(kb_of "$GATE_PID" VmRSS)
	read -r send_own _ <<<"$(cpu_of "$SEND_PID")"
	stop_weir
	sum "start-up, $N3 queued: weir run -> first delivery" "$(printf %.2f "$(echo "$tf - $T0" | bc)") s"
	sum "start-up, $N3 queued: weir-send VmRSS (VmHWM)" "$rss kB ($hwm kB; $rss0 kB empty)"
	printf '   injected in %.1f s (%.0f msg/s)\n' "$(echo "$ti1 - $ti0" | bc)" "$(echo "$N3 / ($ti1 - $ti0)" | bc -l)"
	printf '   weir run -> first "new" (preprocessed) %.2f s, -> last "new" %.2f s (%.0f msg/s preprocessed)\n' \
		"$(echo "$tn - $T0" | bc)" "$(echo "$tl - $T0" | bc)" "$(echo "($N3 - 1) / ($tl - $tn)" | bc -l)"
	printf '   weir run -> weir-send "started" %.2f s, -> first delivery %.2f s\n' \
		"$(echo "$ts - $T0" | bc)" "$(echo "$tf - $T0" | bc)"
	printf '   weir-send: VmRSS %s kB, VmHWM %s kB (%s kB with the queue empty: %.0f bytes per queued message); own CPU %s s; weir-gate VmRSS %s kB\n' \
		"$rss" "$hwm" "$rss0" "$(echo "($rss - $rss0) * 1024 / $N3" | bc -l)" "$send_own" "$grss"
	;;
esac

# ---- 4: CPU while throttled ----
case " $PARTS " in *" 4 "*)
	echo
	echo "4. CPU while throttled: $N4 messages queued, policy \"$RATE4\", ${IDLE4} s of waiting"
	stand_in idle --no-store
	instance idle "$PORT" none 0 "$RATE4"
	inject_queue "$N4"
	start_weir
	wait_log 'delivered to <' 1 3600
	wait_log ': end$' 1 60
	sleep 2
	d0=$(grep -c 'delivered to <' "$D/log")
	read -r s0 k0 <<<"$(cpu_of "$SEND_PID")"
	read -r g0 _ <<<"$(cpu_of "$GATE_PID")"
	sleep "$IDLE4"
	read -r s1 k1 <<<"$(cpu_of "$SEND_PID")"
	read -r g1 _ <<<"$(cpu_of "$GATE_PID")"
	d1=$(grep -c 'delivered to <' "$D/log")
	stop_weir
	sum "throttled, $N4 queued, \"$RATE4\": CPU in $IDLE4 s send / gate / reaped" \
		"$(echo "($s1 - $s0) * 1000" | bc | cut -d. -f1) / $(echo "($g1 - $g0) * 1000" | bc | cut -d. -f1) / $(echo "($k1 - $k0) * 1000" | bc | cut -d. -f1) ms"
	printf '   over %s s: weir-send %.0f ms, weir-gate %.0f ms, deliverers weir-send reaped %.0f ms; deliveries in the interval: %d; %d messages still queued\n' \
		"$IDLE4" "$(echo "($s1 - $s0) * 1000" | bc)" "$(echo "($g1 - $g0) * 1000" | bc)" \
		"$(echo "($k1 - $k0) * 1000" | bc)" $((d1 - d0)) "$(queued_files)"
	;;
esac

echo
echo "summary"
cat "$scratch/summary" 2>/dev/null || true
