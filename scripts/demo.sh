#!/bin/sh
# scripts/demo.sh: what `make demo` shows: weir's main job end to end.
#
# A stand-in upstream relay (tests/upstream/upstream.py, Debian's
# python3-aiosmtpd) listens on a free loopback port with STARTTLS and
# AUTH and a certificate made just now; weir runs (`weir run`: weir-gate
# and weir-send) with a policy of 10 messages per 10 seconds; 40
# messages go in through `sendmail` (one to 150 recipients, sent in
# batches); the demo shows them draining at the allowed pace, then the
# highest count the upstream saw in any 10-second window.
# Everything lives in a folder under /tmp and is stopped at the end.
set -eu
BIN=$(cd "${BUILD:-build}/bin" && pwd)
TOP=$(pwd)
PY=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-demo.XXXXXX")
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
step() { printf '\n==> %s\n' "$*"; }

step "a stand-in upstream: STARTTLS + AUTH on loopback, certificate from a test CA"
sh "$TOP/tests/upstream/mkcerts.sh" "$work/certs" >/dev/null 2>&1
printf 'demo-secret' >"$work/secret" && chmod 600 "$work/secret"
$PY "$TOP/tests/upstream/upstream.py" --cert "$work/certs/good.pem" \
	--key "$work/certs/good.key" --auth demo:demo-secret --record "$work/upstream.log" \
	>"$work/upstream.out" 2>"$work/upstream.err" &
pids="$pids $!"
i=0
until grep -q '^PORT ' "$work/upstream.out" 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 100 ] || { cat "$work/upstream.err"; exit 1; }
	sleep 0.1
done
port=$(sed -n 's/^PORT //p' "$work/upstream.out")
echo "upstream listening on 127.0.0.1:$port"

step "weir.conf and policy.conf: 10 messages per 10 s, at most 3 connections"
cat >"$work/weir.conf" <<CONF
queue_dir    = "$work/queue"
hostname     = "relay.example.org"
admin        = "postmaster@example.org"
policy_file  = "$work/policy.conf"
gate_socket  = "$work/gate.sock"
gate_journal = "$work/gate.journal"
showq_socket = "$work/showq.sock"
concurrency  = 3
upstream "isp" {
  host        = "127.0.0.1"
  port        = $port
  tls         = "starttls"
  ca_file     = "$work/certs/ca.pem"
  username    = "demo"
  secret_file = "$work/secret"
  max_recipients = 50
}
CONF
cat >"$work/policy.conf" <<CONF
upstream "isp" {
  rate = {"10 per 10s"}
  max_connections = 3
}
CONF
sed 's/^/    /' "$work/policy.conf"
export WEIR_CONFIG="$work/weir.conf" WEIR_LIBEXEC="$BIN"
"$BIN/weir" queue-init >/dev/null

step "weir run (weir-gate + weir-send), logging to $work/weir.log"
"$BIN/weir" run >"$work/weir.log" 2>&1 &
pids="$pids $!"

step "40 messages through sendmail: 39 to one recipient each, 1 to 150 recipients"
i=1
while [ $i -le 39 ]; do
	printf 'Subject: report %d\n\nline %d\n.a line that starts with a dot\n' $i $i |
		"$BIN/sendmail" -i -f cron@relay.example.org "user$i@example.com"
	i=$((i + 1))
done
rcpts=$(i=1; while [ $i -le 150 ]; do printf 'member%d@example.net ' $i; i=$((i + 1)); done)
printf 'Subject: newsletter\n\nTo all 150 of you.\n' |
	"$BIN/sendmail" -i -f list-owner@relay.example.org $rcpts
"$BIN/mailq" | tail -n 2

step "draining at the policy's pace (a line every 5 s)"
start=$(date +%s)
while :; do
	sent=$(grep -c '"event": "data"' "$work/upstream.log" 2>/dev/null || true)
	left=$("$BIN/mailq" | sed -n 's/^messages in queue: //p')
	printf '  %3ds  upstream accepted %2d transactions, %2d messages still queued\n' \
		$(( $(date +%s) - start )) "${sent:-0}" "${left:-?}"
	[ "${left:-1}" -eq 0 ] && break
	[ $(( $(date +%s) - start )) -lt 180 ] || { echo "  giving up after 180 s"; break; }
	sleep 5
done

step "weir-gate status"
# weir-send tells the gate its counts at most once a second after a change.
sleep 1.5
"$BIN/weir-gate" status | sed 's/^/    /'

step "summary"
$PY - "$work/upstream.log" "$work/weir.log" <<'PY'
import json, sys
times, rcpts = [], 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "data":
        times.append(e["time"])
        rcpts += len(e["rcpts"])
log = open(sys.argv[2]).read()
delivered = log.count(": delivered to <")
deferred = log.count(": deferred <")
bounced = log.count(": failed for <")
times.sort()
worst, j = 0, 0
for i, t in enumerate(times):
    while times[j] <= t - 10:
        j += 1
    worst = max(worst, i - j + 1)
span = times[-1] - times[0] if times else 0
print(f"  transactions at the upstream: {len(times)} ({rcpts} recipients) in {span:.1f} s")
print(f"  recipients delivered: {delivered}, deferrals: {deferred}, bounced: {bounced}")
print(f"  highest count in any 10 s window at the upstream: {worst} (limit 10)")
PY
