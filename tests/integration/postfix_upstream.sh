#!/bin/bash
# tests/integration/postfix_upstream.sh: a real Postfix as weir-remote's
# upstream, for the tests that must see what a real MTA makes of weir's
# commands.  A private instance (tests/lib/postfix.sh's pf_conf: its own
# main.cf, queue and log under DIR; the system's Postfix is never
# touched; DIR must be under /var, where Postfix's maillog_file may
# be) with an SMTP listener on a free loopback port, relaying
# everything to [127.0.0.1]:RELAYPORT (the stand-in upstream).
#
#   start DIR RELAYPORT   prints "PORT n" once the listener answers, or
#                         "SKIP why" (not root, Postfix not installed)
#   idle DIR              exits 0 once the instance's queue is empty
#                         (every message delivered, DSNs included), 1
#                         after 30 s
#   stop DIR              stops the instance (its master's session)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CONC=1
scratch=$2
# shellcheck source=tests/lib/postfix.sh
. "$ROOT/tests/lib/postfix.sh"
P=$2

case $1 in
start)
	pf_ok || { echo "SKIP Postfix needs root and the postfix package"; exit 0; }
	pf_conf "$P" "$3" plain >/dev/null
	port=$(free_port)
	echo "127.0.0.1:$port inet n - n - - smtpd" >>"$P/etc/master.cf"
	pf_start "$P" </dev/null >/dev/null
	echo "$PF_MASTER" >"$P/master.pid"
	$PY - "$port" <<-'EOF'
	import socket, sys, time
	end = time.time() + 30
	while True:
	    try:
	        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
	        break
	    except OSError:
	        if time.time() > end:
	            sys.exit("Postfix did not start listening")
	        time.sleep(0.05)
	EOF
	echo "PORT $port"
	;;
idle)
	for _ in $(seq 1 600); do
		[ "$(pf_left "$P")" = 0 ] && exit 0
		sleep 0.05
	done
	exit 1
	;;
stop)
	[ -f "$P/master.pid" ] || exit 0
	kill -TERM -- "-$(cat "$P/master.pid")" 2>/dev/null || true
	;;
esac
