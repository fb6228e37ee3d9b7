#!/bin/bash
# scripts/bench/compare.sh: weir against the systems users would pick
# instead (issue 8): Postfix 3.7 as a relayhost client (SASL, TLS) and
# nullmailer 2.2, measured in one run on the same machine, on loopback
# only.  A benchmark, not a test: it asserts no timing.  Run as root
# (Postfix's private instance and nullmailer's mount namespace need it).
#
#   make BUILD=build-bench bench-compare           (or:)
#   make BUILD=build-bench all && BUILD=build-bench scripts/bench/compare.sh
#   QUICK=1 BUILD=build-bench scripts/bench/compare.sh      (about 10 minutes)
#
# Parts (PARTS, default "inject relay limit throttle backlog"):
#   inject    injection rate: each one's sendmail command (1 and 4
#             injectors at once, N_INJ messages), and SMTP with
#             smtp-source (1 and 20 sessions) to weir-smtpd, Postfix's
#             smtpd and nullmailer-smtpd (inetd-style, through
#             systemd-socket-activate); fsyncs per message with strace
#             -f -c over 100 injections (server side included).
#   relay     relay rate with no limit, N_REL messages queued beforehand,
#             release to empty queue: to smtp-sink (plain) and to the
#             aiosmtpd stand-in tests/upstream/upstream.py (STARTTLS +
#             AUTH PLAIN, certificate verified).
#   limit     a burst of BURST messages under a limit of LIMIT per PER
#             seconds, each system configured as an administrator would
#             to stay under it, each to its own scripts/bench/limitsink.py
#             (STARTTLS + AUTH), the three at once: the highest count in
#             any sliding PER-second window at the upstream (from its own
#             timestamps), utilisation, and the plot plots/window.svg.
#   throttle  the same with BURST_T messages, but after the upstream has
#             taken TH_AFTER of them it answers MAIL FROM with a 421 (then
#             with a 550 5.4.5 daily-limit reply, second round) for TH_FOR
#             seconds, then recovers: messages bounced, lost, duplicated,
#             and the time from recovery to the last message delivered.
#   backlog   BACKLOG messages queued in each, then released under the
#             limit; CPU (utime+stime+cutime+cstime of the session) over
#             IDLE seconds and memory (VmRSS, VmHWM and Pss per process)
#             of each; then, one system at a time, still sending: the
#             time of its listing commands (weir: mailq, weir queue, weir
#             status; Postfix: postqueue -p, qshape), and the time from a
#             start after SIGKILL of every process to the first message
#             at the upstream (issue 36).
#   bigrcpt   the same for one message to RCPTS recipients (not in the
#             default PARTS).
#
# The inject part runs weir with weir-queued (queue_socket set: weir-smtpd
# and sendmail hand it their messages); WEIR_WRITER=0 runs the old way,
# weir-queue once per message.  NOTQMAIL=DIR adds notqmail's sendmail
# (qmail-inject, qmail-queue) to the inject part: DIR is the home of a
# notqmail built and installed by hand beforehand (BENCHMARKS.md says
# how; this script builds nothing), with an empty queue and qmail-send
# not running.  Unset: notqmail is left out, with a line saying so.
#
# Environment: BUILD (build), BENCH_DIR (/var/tmp), PARTS, QUICK=1, N_INJ
# (1000), N_REL (1000), LIMIT (20), PER (10), BURST (200), BURST_T (100),
# TH_AFTER (20), TH_FOR (30), DRAIN_MAX (240), BACKLOG (10000), RCPTS
# (100000), IDLE (60),
# CONC (8), NULLMAILER_DEB (a nullmailer .deb; default: apt-get download
# nullmailer), ROUNDS (1: the inject part's runs, the systems taking
# turns; the median is shown), KEEP=1 (keep the scratch folder), PLOT (default
# scripts/bench/plots/window.svg), SYSTEMS (default "weir postfix
# nullmailer": a subset for a quicker run).  Needs postfix (its system daemon is
# never touched: private instances only), python3-aiosmtpd, strace,
# gnuplot-nox, util-linux (unshare), systemd (systemd-socket-activate).
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
BENCH_DIR=${BENCH_DIR:-/var/tmp}
PARTS=${PARTS:-inject relay limit throttle backlog}
if [ -n "${QUICK:-}" ]; then
	: "${N_INJ:=300}" "${N_REL:=300}" "${BURST:=60}" "${BURST_T:=50}" "${TH_FOR:=15}"
	: "${DRAIN_MAX:=150}" "${BACKLOG:=2000}" "${RCPTS:=10000}" "${IDLE:=20}"
fi
N_INJ=${N_INJ:-1000}
N_REL=${N_REL:-1000}
LIMIT=${LIMIT:-20}
PER=${PER:-10}
BURST=${BURST:-200}
BURST_T=${BURST_T:-100}
TH_AFTER=${TH_AFTER:-20}
TH_FOR=${TH_FOR:-30}
DRAIN_MAX=${DRAIN_MAX:-240}
BACKLOG=${BACKLOG:-10000}
RCPTS=${RCPTS:-100000}
IDLE=${IDLE:-60}
CONC=${CONC:-8}
PLOT=${PLOT:-$ROOT/scripts/bench/plots/window.svg}
B=$ROOT/$BUILD/bin
SYSTEMS=${SYSTEMS:-"weir postfix nullmailer"}
WEIR_WRITER=${WEIR_WRITER:-1}
ROUNDS=${ROUNDS:-1}

[ "$(id -u)" = 0 ] || { echo "compare.sh: run as root (private Postfix instance, mount namespace)" >&2; exit 2; }
for p in weir weir-gate weir-send weir-remote weir-queue weir-smtpd sendmail; do
	[ -x "$B/$p" ] || { echo "build first: make BUILD=$BUILD all ($B/$p missing)" >&2; exit 1; }
done
for p in smtp-sink smtp-source strace unshare gnuplot systemd-socket-activate /usr/bin/time; do
	command -v "$p" >/dev/null || { echo "compare.sh: $p missing (scripts/deps.sh bench)" >&2; exit 1; }
done
export WEIR_LIBEXEC=$B
. "$ROOT/scripts/bench/lib.sh"
pf_ok || { echo "compare.sh: needs package postfix and its postfix user" >&2; exit 1; }

scratch=$(mktemp -d "$BENCH_DIR/weir-bench-compare.XXXXXX")
chmod 755 "$scratch"	# Postfix's daemons run as user postfix, nullmailer-queue as mail
pids=""		# sinks, stand-ins, servers
bgjobs=""	# the per-system subshells of the parallel parts
cleanup() {
	for p in $bgjobs; do kill "$p" 2>/dev/null || true; done
	lib_cleanup
	if [ -n "${KEEP:-}" ]; then echo "kept: $scratch"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
lib_setup

load() { cut -d' ' -f1-3 /proc/loadavg; }
sum() { printf '%-58s %s\n' "$1" "$2" | tee -a "$scratch/summary"; }
now() { date +%s.%N; }
calc() { echo "$1" | bc -l; }
# wait_until SECONDS 'COMMAND': until COMMAND (evaluated each time, in the
# caller's variables) succeeds; 1 if it never did.
wait_until() {
	local end_=$(($(date +%s) + $1))
	shift
	until eval "$1"; do
		[ "$(date +%s)" -lt "$end_" ] || return 1
		sleep 0.1
	done
}

# ---- nullmailer: the Debian 12 package, unpacked, never installed ----
# Its paths are compiled in (/etc/nullmailer, /var/spool/nullmailer,
# /usr/lib/nullmailer, /usr/sbin/nullmailer-queue ...), and the package
# conflicts with postfix, so every nullmailer program runs in a private
# mount namespace (unshare --mount --propagation private) where /usr is
# an overlay of the unpacked package over the real /usr, /etc an overlay
# of the instance's etc/ (nullmailer/ and mailname) over the real /etc,
# and /var/spool/nullmailer a bind mount of the instance's spool (on
# $BENCH_DIR's disk).  Nothing outside the namespace sees any of it.
NMX=$scratch/nullmailer-pkg
nm_unpack() {
	local deb=${NULLMAILER_DEB:-}
	if [ -z "$deb" ]; then
		(cd "$scratch" && { apt-get download nullmailer >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null && apt-get download nullmailer >/dev/null; }; })
		deb=$(ls "$scratch"/nullmailer_*.deb)
	fi
	dpkg-deb -x "$deb" "$NMX"
	NM_VERSION=$(dpkg-deb -f "$deb" Version)
	cat >"$scratch/nm-ns.sh" <<-'EOF'
	X=$1 I=$2
	shift 2
	mount -t overlay overlay -o "lowerdir=$X/usr:/usr" /usr
	mount -t overlay overlay -o "lowerdir=$I/etc:/etc" /etc
	mount -t tmpfs tmpfs /var/spool
	mkdir /var/spool/nullmailer
	mount --bind "$I/spool" /var/spool/nullmailer
	exec "$@"
	EOF
}
# nm_conf NAME PORT MODE(plain|starttls+auth): an instance in $scratch/nm-NAME.
nm_conf() {
	local I=$scratch/nm-$1 r
	rm -rf "$I"
	mkdir -p "$I/etc/nullmailer" "$I/spool/queue" "$I/spool/tmp" "$I/spool/failed"
	mkfifo "$I/spool/trigger"
	chown -R mail:mail "$I/spool"
	chmod 700 "$I/spool/queue" "$I/spool/tmp" "$I/spool/failed"
	chmod 622 "$I/spool/trigger"
	echo relay.example.org >"$I/etc/mailname"
	echo relay.example.org >"$I/etc/nullmailer/defaultdomain"
	echo postmaster@example.org >"$I/etc/nullmailer/adminaddr"
	r="127.0.0.1 smtp port=$2"
	[ "$3" = plain ] || r="$r starttls user=me pass=pw x509cafile=$scratch/certs/ca.pem"
	echo "$r" >"$I/etc/nullmailer/remotes"
	NM=$I
}
# nm NAME CMD...: CMD in instance NAME's namespace.
nm() {
	local I=$scratch/nm-$1
	shift
	unshare --mount --propagation private sh "$scratch/nm-ns.sh" "$NMX" "$I" "$@"
}
nm_queued() { find "$scratch/nm-$1/spool/queue" -type f | wc -l; }

# ---- the three systems behind one interface: sys_conf, sys_inject,
# sys_start (sets SID: the session of its process tree), sys_left,
# sys_stop, sys_failed (the recipients it gave up on) ----
# sys_conf SYS NAME PORT MODE "LIMIT-CONFIG": LIMIT-CONFIG is "none" or
# "limit" (LIMIT per PER, with a 1 minute retry after a throttle reply).
sys_conf() {
	local sys=$1 name=$2 port=$3 mode=$4 lim=$5 tls=starttls auth=1
	[ "$mode" = plain ] && tls=none auth=0
	case $sys in
	weir)
		if [ "$lim" = limit ]; then
			# Suspend 1 minute on a throttle reply (the defaults are
			# 5 minutes for 421, 1 hour for 550 5.4.5).
			instance "$name" "$port" "$tls" "$auth" "$LIMIT per ${PER}s" \
				"$(printf 'throttle_reply { pattern = "421 *" suspend = "1m" }\nthrottle_reply { pattern = "550 5.4.5 *" suspend = "1m" }')"
		else
			instance "$name" "$port" "$tls" "$auth" "1000000 per 1s"
		fi
		W_D=$D W_CONF=$WEIR_CONFIG
		;;
	postfix)
		pf_conf "$scratch/pf-$name" "$port" "$mode"
		PF=$scratch/pf-$name
		# Retry after 1 minute, like the other two.
		printf 'minimal_backoff_time = 60s\nqueue_run_delay = 60s\nmaximal_backoff_time = 600s\n' \
			>>"$PF/etc/main.cf"
		if [ "$lim" = limit ]; then
			# One delivery at a time, one per rate delay: whole
			# seconds only, so the closest to LIMIT per PER from
			# below.
			RD=$(( (PER + LIMIT - 1) / LIMIT ))
			printf 'smtp_destination_concurrency_limit = 1\nsmtp_destination_rate_delay = %ds\n' "$RD" \
				>>"$PF/etc/main.cf"
		fi
		;;
	nullmailer)
		# No rate limit to configure; pausetime (the wait after a
		# failed queue run) 60 s: its default.
		nm_conf "$name" "$port" "$mode"
		;;
	esac
}
sys_inject() {	# SYS N: N messages through SYS's sendmail, 4 at once
	case $1 in
	weir) WEIR_CONFIG=$W_CONF inject_sendmail "$2" ;;
	postfix) pf_inject "$PF" "$2" ;;
	nullmailer)
		# shellcheck disable=SC2016
		nm "$(basename "$NM" | sed 's/^nm-//')" bash -c '
			for ((j = 1; j <= 4; j++)); do
				( for ((i = j; i <= $1; i += 4)); do
					/usr/sbin/sendmail -f bench@relay.example.org "rcpt$i@example.net" <"$2" || exit 1
				done ) &
				ps="$ps $!"
			done
			for p in $ps; do wait $p || exit 1; done' sh "$2" "$scratch/msg" ||
			{ echo "nullmailer sendmail failed" >&2; exit 1; }
		;;
	esac
	[ "$(sys_left "$1")" -eq "$2" ] || { echo "$1: $(sys_left "$1") queued, not $2" >&2; exit 1; }
}
sys_start() {
	case $1 in
	weir) D=$W_D; export WEIR_CONFIG=$W_CONF; start_weir; SID=$wtime ;;
	postfix) pf_start "$PF"; SID=$PF_MASTER ;;
	nullmailer)
		setsid unshare --mount --propagation private sh "$scratch/nm-ns.sh" "$NMX" "$NM" \
			/usr/sbin/nullmailer-send >"$NM/log" 2>&1 &
		SID=$!
		pids="$pids $SID"
		;;
	esac
}
sys_left() {
	case $1 in
	weir) find "$W_D/queue/mess" -type f | wc -l ;;
	postfix) pf_left "$PF" ;;
	nullmailer) find "$NM/spool/queue" -type f | wc -l ;;
	esac
}
sys_stop() {
	case $1 in
	weir) stop_weir ;;
	postfix) pf_stop ;;
	nullmailer) kill "$SID" 2>/dev/null || true; wait "$SID" 2>/dev/null || true ;;
	esac
}
# sys_failed SYS: the original recipients (rcptN@example.net) SYS gave up
# on (bounced or failed), one a line; bounces of bounces are not counted.
sys_failed() {
	case $1 in
	weir) grep -o ': failed for <rcpt[0-9]*@example.net>' "$W_D/log" | sed 's/.*<\(.*\)>/\1/' ;;
	postfix) grep 'status=bounced' "$PF/maillog" | grep -o 'to=<rcpt[0-9]*@example.net>' | sed 's/to=<\(.*\)>/\1/' ;;
	nullmailer) find "$NM/spool/failed" -type f -exec grep -h '^rcpt[0-9]*@example.net$' {} + ;;
	esac | sort -u
}
empty() { [ "$(sys_left "$1")" -eq 0 ]; }

echo "weir compared: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), kernel $(uname -r), load $(load)"
echo "scratch: $scratch ($(findmnt -n -o FSTYPE -T "$scratch") on $(findmnt -n -o SOURCE -T "$scratch")); build $B"
nm_unpack
echo "peers: Postfix $(dpkg-query -W -f='${Version}' postfix), nullmailer $NM_VERSION (unpacked, not installed), python3-aiosmtpd $(dpkg-query -W -f='${Version}' python3-aiosmtpd)"
echo "each figure is followed by the load average (1, 5, 15 min) when it was taken: other jobs share the machine"

# strace_fsyncs FILE: fsync+fdatasync calls in an strace -c summary.
strace_fsyncs() {
	awk '$NF == "fsync" || $NF == "fdatasync" { c += $(NF - 1) } END { print c + 0 }' "$1"
}
# stop_traced PID: end the program strace PID runs (so that strace writes
# its summary), then strace.
stop_traced() {
	local c
	for c in $(pgrep -P "$1"); do kill "$c" 2>/dev/null || true; done
	wait "$1" 2>/dev/null || true
}

# ---- inject ----
# inject_conf SYS NAME: a system ready to take mail, delivering nothing:
# weir not running (weir-smtpd alone for SMTP), Postfix with every
# message put on hold by cleanup (a header_checks HOLD for every message:
# it goes through incoming/ to hold/, so nothing is delivered), nullmailer
# without nullmailer-send.
inject_conf() {
	if [ "$1" = notqmail ]; then
		nq_conf
		return
	fi
	sys_conf "$1" "$2" 9 plain none
	if [ "$1" = weir ] && [ "$WEIR_WRITER" = 1 ]; then
		printf 'queue_socket = "%s/queued.sock"\n' "$W_D" >>"$W_CONF"
	fi
	if [ "$1" = postfix ]; then
		echo '/^[A-Za-z-]+:/ HOLD' >"$PF/etc/hold"
		echo "header_checks = regexp:$PF/etc/hold" >>"$PF/etc/main.cf"
		printf '127.0.0.1:%s inet n - n - - smtpd\n' "$(free_port)" >>"$PF/etc/master.cf"
	fi
}
# queued_start [STRACE_OUT]: weir-queued for $W_CONF (when WEIR_WRITER=1),
# in a session of its own (QD); queued_stop ends it.
QD=""
queued_start() {
	local tr=()
	[ "$WEIR_WRITER" = 1 ] || return 0
	# shellcheck disable=SC2054 # the commas are strace's
	[ -n "${1:-}" ] && tr=(strace -f -c -o "$1" -e trace=fsync,fdatasync)
	rm -f "$W_D/queued.sock"
	WEIR_CONFIG=$W_CONF setsid "${tr[@]}" "$B/weir-queued" 2>>"$W_D/queued.log" &
	QD=$!
	pids="$pids $QD"
	wait_until 10 'test -S "$W_D/queued.sock"' || { cat "$W_D/queued.log" >&2; exit 1; }
}
queued_stop() {
	[ -n "$QD" ] || return 0
	if [ -n "${1:-}" ]; then stop_traced "$QD"; else kill "$QD" 2>/dev/null || true; wait "$QD" 2>/dev/null || true; fi
	QD=""
}

# ---- notqmail (NOTQMAIL=its home, built and installed by hand beforehand:
# BENCHMARKS.md says how; nothing here builds it): sendmail injection only.
# Its queue must be empty and qmail-send not running: each run counts its
# todo/ and clears it afterwards. ----
nq_conf() {
	local d
	for d in "$NOTQMAIL"/queue/todo "$NOTQMAIL"/queue/intd "$NOTQMAIL"/queue/mess/*; do
		find "$d" -type f -delete
	done
}
nq_sendmail() { "$NOTQMAIL/bin/sendmail" -f bench@relay.example.org "$@"; }

# in_queue SYS: messages fully in the queue (Postfix: past pickup and
# cleanup, in hold/).
in_queue() {
	case $1 in
	postfix) find "$PF/spool/hold" -type f 2>/dev/null | wc -l ;;
	notqmail) find "$NOTQMAIL/queue/todo" -type f | wc -l ;;
	*) sys_left "$1" ;;
	esac
}
# inject_run SYS N PAR [ROUND]: N messages through SYS's sendmail, PAR at once;
# prints "SECONDS_RETURNED SECONDS_IN_QUEUE".
inject_run() {
	local sys=$1 n=$2 par=$3 t0 t1 t2 name
	name=inj-$sys-$par-r${4:-1}
	inject_conf "$sys" "$name"
	[ "$sys" = postfix ] && pf_start "$PF"
	[ "$sys" = weir ] && queued_start
	sleep 0.5
	t0=$(now)
	case $sys in
	weir|postfix|notqmail)
		local ps=""
		for ((j = 1; j <= par; j++)); do
			(
				for ((i = j; i <= n; i += par)); do
					if [ "$sys" = weir ]; then
						WEIR_CONFIG=$W_CONF "$B/sendmail" -i -f bench@relay.example.org \
							"rcpt$i@example.net" <"$scratch/msg" || exit 1
					elif [ "$sys" = notqmail ]; then
						nq_sendmail "rcpt$i@example.net" <"$scratch/msg" || exit 1
					else
						/usr/sbin/sendmail -C "$PF/etc" -i -f bench@relay.example.org \
							"rcpt$i@example.net" <"$scratch/msg" || exit 1
					fi
				done
			) &
			ps="$ps $!"
		done
		# shellcheck disable=SC2086
		wait_all $ps || { echo "$sys sendmail failed" >&2; exit 1; }
		;;
	nullmailer)
		# shellcheck disable=SC2016
		nm "$name" bash -c '
			for ((j = 1; j <= $2; j++)); do
				( for ((i = j; i <= $1; i += $2)); do
					/usr/sbin/sendmail -f bench@relay.example.org "rcpt$i@example.net" <"$3" || exit 1
				done ) &
				ps="$ps $!"
			done
			for p in $ps; do wait $p || exit 1; done' sh "$n" "$par" "$scratch/msg" ||
			{ echo "nullmailer sendmail failed" >&2; exit 1; }
		;;
	esac
	t1=$(now)
	wait_until 300 'test "$(in_queue "$sys")" -ge "$n"' || { echo "$sys: only $(in_queue "$sys") of $n queued" >&2; exit 1; }
	t2=$(now)
	[ "$sys" = postfix ] && pf_stop
	[ "$sys" = weir ] && queued_stop
	echo "$(calc "$t1 - $t0") $(calc "$t2 - $t0")"
}
# fsync_sendmail SYS: fsyncs per message over 100 injections (1 at a
# time), the queueing daemons included (Postfix's master run under strace).
fsync_sendmail() {
	local sys=$1 n=100 name=fs-$1 st c=0
	inject_conf "$sys" "$name"
	case $sys in
	weir)
		queued_start "$scratch/$name.queued.st"
		# shellcheck disable=SC2016
		WEIR_CONFIG=$W_CONF strace -f -c -o "$scratch/$name.st" -e trace=fsync,fdatasync bash -c \
			'for ((i = 0; i < $1; i++)); do "$2" -i -f bench@relay.example.org r@example.net <"$3" || exit 1; done' \
			sh "$n" "$B/sendmail" "$scratch/msg"
		queued_stop traced
		c=$(strace_fsyncs "$scratch/$name.st")
		[ "$WEIR_WRITER" = 1 ] && c=$((c + $(strace_fsyncs "$scratch/$name.queued.st")))
		;;
	notqmail)
		# shellcheck disable=SC2016
		strace -f -c -o "$scratch/$name.st" -e trace=fsync,fdatasync bash -c \
			'for ((i = 0; i < $1; i++)); do "$2/bin/sendmail" -f bench@relay.example.org r@example.net <"$3" || exit 1; done' \
			sh "$n" "$NOTQMAIL" "$scratch/msg"
		c=$(strace_fsyncs "$scratch/$name.st")
		;;
	postfix)
		pf_start "$PF" strace -f -c -o "$scratch/$name.daemons.st" -e trace=fsync,fdatasync
		st=$PF_MASTER
		sleep 1
		# shellcheck disable=SC2016
		strace -f -c -o "$scratch/$name.st" -e trace=fsync,fdatasync bash -c \
			'for ((i = 0; i < $1; i++)); do /usr/sbin/sendmail -C "$2" -i -f bench@relay.example.org r@example.net <"$3" || exit 1; done' \
			sh "$n" "$PF/etc" "$scratch/msg"
		wait_until 60 'test "$(in_queue postfix)" -ge "$n"' || true
		stop_traced "$st"
		c=$(($(strace_fsyncs "$scratch/$name.st") + $(strace_fsyncs "$scratch/$name.daemons.st")))
		;;
	nullmailer)
		# shellcheck disable=SC2016
		nm "$name" strace -f -c -o "$scratch/$name.st" -e trace=fsync,fdatasync bash -c \
			'for ((i = 0; i < $1; i++)); do /usr/sbin/sendmail -f bench@relay.example.org r@example.net <"$2" || exit 1; done' \
			sh "$n" "$scratch/msg"
		c=$(strace_fsyncs "$scratch/$name.st")
		;;
	esac
	[ "$(in_queue "$sys")" -eq "$n" ] || { echo "$sys: fsync run queued $(in_queue "$sys"), not $n" >&2; exit 1; }
	calc "scale=2; $c / $n"
}
# smtp_server SYS NAME [STRACE_OUT]: an SMTP listener putting mail into
# SYS's queue; sets SPORT and SRV (a pid to stop with stop_server).
smtp_server() {
	local sys=$1 name=$2 tr=()
	# shellcheck disable=SC2054 # the commas are strace's
	[ -n "${3:-}" ] && tr=(strace -f -c -o "$3" -e trace=fsync,fdatasync)
	inject_conf "$sys" "$name"
	case $sys in
	weir)
		printf 'listen {\n  address = {"127.0.0.1:0"}\n  max_connections = 100\n  max_per_client = 100\n}\n' \
			>>"$W_CONF"
		: >"$W_D/smtpd.log"
		queued_start "${3:+$3.queued}"
		WEIR_CONFIG=$W_CONF setsid "${tr[@]}" "$B/weir-smtpd" -l 2>"$W_D/smtpd.log" &
		SRV=$!
		wait_until 10 'grep -q "listening on" "$W_D/smtpd.log"' || { cat "$W_D/smtpd.log" >&2; exit 1; }
		SPORT=$(sed -n 's/.*listening on .* port \([0-9]*\).*/\1/p' "$W_D/smtpd.log" | head -1)
		;;
	postfix)
		SPORT=$(sed -n 's/^127\.0\.0\.1:\([0-9]*\) inet.*/\1/p' "$PF/etc/master.cf")
		pf_start "$PF" "${tr[@]}"
		SRV=$PF_MASTER
		;;
	nullmailer)
		SPORT=$(free_port)
		setsid unshare --mount --propagation private sh "$scratch/nm-ns.sh" "$NMX" "$NM" \
			"${tr[@]}" systemd-socket-activate --inetd -a -l "127.0.0.1:$SPORT" \
			/usr/bin/nullmailer-smtpd 2>"$NM/smtpd.log" &
		SRV=$!
		;;
	esac
	pids="$pids $SRV"
	wait_until 10 'smtp-source -m 1 -l 100 -f probe@example.org -t probe@example.net "127.0.0.1:$SPORT" 2>/dev/null' ||
		{ echo "$sys: no SMTP listener on $SPORT" >&2; exit 1; }
	wait_until 20 'test "$(in_queue "$sys")" -ge 1' || true
}
stop_server() {	# SYS [TRACED]
	[ "$1" = weir ] && queued_stop "${2:-}"
	if [ -n "${2:-}" ]; then
		stop_traced "$SRV"	# strace: its child first, then it
	elif [ "$1" = postfix ]; then
		pf_stop
	else
		kill "$SRV" 2>/dev/null || true
		wait "$SRV" 2>/dev/null || true
	fi
}
# server_cpu SYS: CPU seconds so far of the processes that take SYS's
# mail in over SMTP (weir: weir-smtpd -l, the sessions it reaped, and
# weir-queued; Postfix: every daemon of its master's session).
server_cpu() {
	if [ "$1" = weir ] && [ -n "$QD" ]; then
		calc "$(sid_cpu "$SRV") + $(sid_cpu "$QD")"
	else
		sid_cpu "$SRV"
	fi
}
# smtp_run SYS SESSIONS N [ROUND]: prints "SECONDS_RETURNED SECONDS_QUEUED CPU_SECONDS".
smtp_run() {
	local t0 t1 base want sys=$1 c0 c1
	smtp_server "$1" "smtp-$1-$2-r${4:-1}"
	base=$(in_queue "$1")
	c0=$(server_cpu "$1")
	t0=$(now)
	smtp-source -s "$2" -m "$3" -l 1024 -f bench@relay.example.org -t rcpt@example.net "127.0.0.1:$SPORT" ||
		{ echo "$1: smtp-source failed" >&2; exit 1; }
	t1=$(now)
	# shellcheck disable=SC2034 # read by wait_until's eval
	want=$((base + $3))
	wait_until 120 'test "$(in_queue "$sys")" -ge "$want"' || { echo "$1: only $(in_queue "$1") queued" >&2; exit 1; }
	local t2
	t2=$(now)
	c1=$(server_cpu "$1")
	stop_server "$1"
	echo "$(calc "$t1 - $t0") $(calc "$t2 - $t0") $(calc "$c1 - $c0")"
}
fsync_smtp() {
	local n=100 st=$scratch/fsmtp-$1.st base want sys=$1
	smtp_server "$1" "fsmtp-$1" "$st"
	base=$(in_queue "$1")
	smtp-source -s 1 -m "$n" -l 1024 -f bench@relay.example.org -t rcpt@example.net "127.0.0.1:$SPORT"
	# shellcheck disable=SC2034 # read by wait_until's eval
	want=$((base + n))
	wait_until 60 'test "$(in_queue "$sys")" -ge "$want"' ||
		{ echo "$1: fsync run queued $(in_queue "$1"), not $((base + n))" >&2; exit 1; }
	stop_server "$1" traced
	local c
	c=$(strace_fsyncs "$st")
	[ -f "$st.queued" ] && c=$((c + $(strace_fsyncs "$st.queued")))
	# the probe message is in the count: per message of n + base
	calc "scale=2; $c / ($n + $base)"
}

# inj_row SYS PATH PAR LABEL: the row of the median round (by time to
# queued) of the "SECONDS_RETURNED SECONDS_QUEUED CPU_SECONDS LOAD" lines
# in $scratch/inj-SYS-PATH-PAR, with the range of the queued rates when
# ROUNDS > 1 (uses fs).
inj_row() {
	local a b c l cpu=- range="" f=$scratch/inj-$1-$2-$3
	read -r a b c l < <(sort -g -k2 "$f" | sed -n "$(( ($(wc -l <"$f") + 1) / 2 ))p")
	[ "$c" != - ] && cpu=$(printf '%.2f' "$(calc "$c * 1000 / $N_INJ")")
	[ "$ROUNDS" -gt 1 ] && range=$(sort -g -k2 "$f" | awk -v n="$N_INJ" \
		'NR == 1 { hi = n / $2 } { lo = n / $2 } END { printf " (%.0f-%.0f)", lo, hi }')
	printf '%-11s %-26s %9.0f %15s %9s %7s  %s\n' "$1" "$4" "$(calc "$N_INJ / $a")" \
		"$(printf '%.0f' "$(calc "$N_INJ / $b")")$range" "${fs[$1-$2]}" "$cpu" "${l//,/ }"
	echo "inj $1 $2 $3 $(calc "$N_INJ / $b") ${fs[$1-$2]} $cpu" >>"$scratch/figures"
}
# inj_round R: each system's rows once, round R, appended to $scratch/inj-*.
inj_round() {
	local sys par s
	for sys in $INJ_SYSTEMS; do
		for par in 1 4; do
			echo "$(inject_run "$sys" "$N_INJ" "$par" "$1") - $(load | tr ' ' ,)" >>"$scratch/inj-$sys-sendmail-$par"
		done
		[ "$sys" = notqmail ] && continue	# its SMTP server needs tcpserver: not measured
		for s in 1 20; do
			echo "$(smtp_run "$sys" "$s" "$N_INJ" "$1") $(load | tr ' ' ,)" >>"$scratch/inj-$sys-smtp-$s"
		done
	done
}
case " $PARTS " in *" inject "*)
	[ -n "${NOTQMAIL:-}" ] || echo "notqmail: left out (NOTQMAIL is not set; see BENCHMARKS.md)"
	[ -z "${NOTQMAIL:-}" ] || [ -x "$NOTQMAIL/bin/qmail-queue" ] ||
		{ echo "compare.sh: NOTQMAIL=$NOTQMAIL has no bin/qmail-queue" >&2; exit 1; }
	INJ_SYSTEMS="$SYSTEMS $([ -n "${NOTQMAIL:-}" ] && echo notqmail)"
	declare -A fs
	for sys in $INJ_SYSTEMS; do
		fs[$sys-sendmail]=$(fsync_sendmail "$sys")
		[ "$sys" = notqmail ] || fs[$sys-smtp]=$(fsync_smtp "$sys")
	done
	# The systems take turns, round after round: a slow minute of the
	# machine falls on all of them, and the median round is shown.
	for ((r = 1; r <= ROUNDS; r++)); do inj_round "$r"; done
	echo
	echo "== injection: $N_INJ messages of 1 KB; rates in msg/s (returned: the last sendmail returned;"
	echo "   queued: every message in the queue proper, for Postfix past pickup and cleanup, in hold/)"
	[ "$ROUNDS" -gt 1 ] && echo "   each row the median of $ROUNDS rounds (by queued), the range of queued in brackets"
	printf '%-11s %-26s %9s %15s %9s %7s  %s\n' system path returned queued fsync/msg "ms CPU" load
	for sys in $INJ_SYSTEMS; do
		for par in 1 4; do inj_row "$sys" sendmail "$par" "sendmail, $par at once"; done
		[ "$sys" = notqmail ] && continue
		for s in 1 20; do inj_row "$sys" smtp "$s" "SMTP (smtp-source -s $s)"; done
	done
	echo "   SMTP: weir-smtpd -l; Postfix's smtpd in its master.cf; nullmailer-smtpd, one process per"
	echo "   connection (inetd style) under systemd-socket-activate --inetd -a."
	echo "   fsync/msg: strace -f -c -e trace=fsync,fdatasync over 100 messages one at a time, the"
	echo "   daemons that queue them included (Postfix: pickup, cleanup, smtpd; weir: weir-smtpd, weir-queued"
	echo "   or weir-queue).  ms CPU (SMTP rows): user+sys of the server side per message (weir: weir-smtpd -l,"
	echo "   its sessions, weir-queued; Postfix: every process of its master's session), smtp-source excluded."
	echo "   weir: $([ "$WEIR_WRITER" = 1 ] && echo "with weir-queued (queue_socket)" || echo "weir-queue per message (WEIR_WRITER=0)")"
	;;
esac

# ---- relay ----
# relay_run SYS NAME PORT MODE N: N queued while stopped, then released;
# prints "SECONDS CPU_SECONDS".
relay_run() {
	local sys=$1 t0 t1 cpu
	sys_conf "$sys" "$2" "$3" "$4" none
	sys_inject "$sys" "$5"
	t0=$(now)
	sys_start "$sys"
	wait_until 600 'empty "$sys"' || { echo "$sys: $(sys_left "$sys") left after 600 s" >&2; exit 1; }
	t1=$(now)
	cpu=$(sid_cpu "$SID")
	sys_stop "$sys"
	echo "$(calc "$t1 - $t0") $cpu"
}
case " $PARTS " in *" relay "*)
	echo
	echo "== relay with no limit: $N_REL messages of 1 KB queued while stopped, then released until"
	echo "   the queue is empty; CPU: the whole process tree (session) per message"
	printf '%-11s %-38s %7s %7s %8s %6s  %s\n' system upstream secs msg/s "ms CPU" AUTHs load
	SINKP=$(free_port)
	smtp-sink -u nobody "127.0.0.1:$SINKP" 256 &
	pids="$pids $!"
	# The stand-in records its connections and AUTHs (not the messages).
	stand_in tls --no-store --record "$scratch/tls.rec" --cert "$scratch/certs/good.pem" \
		--key "$scratch/certs/good.key" --auth me:pw
	TLSP=$PORT
	sleep 0.3
	for up in "smtp-sink plain:$SINKP:plain" "upstream.py STARTTLS+AUTH:$TLSP:starttls+auth"; do
		label=${up%%:*}
		rest=${up#*:}
		for sys in $SYSTEMS; do
			a0=$(grep -c '"event": "auth"' "$scratch/tls.rec" 2>/dev/null || true)
			read -r secs cpu <<<"$(relay_run "$sys" "rel-$sys-${rest##*:}" "${rest%%:*}" "${rest##*:}" "$N_REL")"
			a1=$(grep -c '"event": "auth"' "$scratch/tls.rec" 2>/dev/null || true)
			auths=-
			[ "${rest##*:}" = plain ] || auths=$((${a1:-0} - ${a0:-0}))
			printf '%-11s %-38s %7.2f %7.0f %8.2f %6s  %s\n' "$sys" "$label" "$secs" \
				"$(calc "$N_REL / $secs")" "$(calc "$cpu * 1000 / $N_REL")" "$auths" "$(load)"
			echo "rel $sys ${rest##*:} $(calc "$N_REL / $secs") $(calc "$cpu * 1000 / $N_REL")" >>"$scratch/figures"
		done
	done
	echo "   weir: concurrency = max_connections = $CONC; Postfix: smtp_destination_concurrency_limit = $CONC,"
	echo "   session reuse its default; nullmailer: one message at a time, one connection per message"
	;;
esac

# ---- limit and throttle: the three at once, each to its own limitsink ----
# sink SYS TAG [THROTTLE_REPLY]: a limitsink for SYS; sets SINK_PORT,
# SINK_PID; its record is $scratch/TAG-SYS.rec.
sink() {
	local out=$scratch/$2-$1.port
	$PY "$ROOT/scripts/bench/limitsink.py" --cert "$scratch/certs/good.pem" --key "$scratch/certs/good.key" \
		--auth me:pw --record "$scratch/$2-$1.rec" ${3:+--throttle "$3"} >"$out" 2>"$out.err" &
	SINK_PID=$!
	pids="$pids $SINK_PID"
	wait_until 10 'grep -qs "^PORT " "$out"' || { cat "$out.err" >&2; exit 1; }
	SINK_PORT=$(sed -n 's/^PORT //p' "$out")
}
accepted() { grep -c '"sender"' "$1" 2>/dev/null | head -1 || true; }
# scenario SYS TAG N [THROTTLE_REPLY]: in a subshell of its own (the three
# run at once).  Queues N, releases, and for a throttle run switches the
# sink to throttling after TH_AFTER accepted messages, back after TH_FOR
# seconds.  Writes $scratch/TAG-SYS.out: "key value" lines.
scenario() {
	local sys=$1 tag=$2 n=$3 thr=${4:-} rec t0 trec tend left
	pids="" wtime="" wpid="" stamper=""
	trap 'lib_cleanup' EXIT
	trap 'exit 1' TERM
	rec=$scratch/$tag-$sys.rec
	sink "$sys" "$tag" "$thr"
	sys_conf "$sys" "$tag-$sys" "$SINK_PORT" starttls+auth limit
	sys_inject "$sys" "$n"
	t0=$(now)
	sys_start "$sys"
	echo "start $t0" >"$scratch/$tag-$sys.out"
	if [ -n "$thr" ]; then
		wait_until 600 'test "$(accepted "$rec")" -ge "$TH_AFTER"' || true
		kill -USR1 "$SINK_PID"
		sleep "$TH_FOR"
		kill -USR2 "$SINK_PID"
		trec=$(now)
		echo "recover $trec" >>"$scratch/$tag-$sys.out"
		tend=$(($(date +%s) + DRAIN_MAX))
	else
		tend=$(($(date +%s) + 3 * n * PER / LIMIT + 120))
	fi
	while ! empty "$sys" && [ "$(date +%s)" -lt "$tend" ]; do sleep 0.2; done
	sleep 2	# bounces the systems make as they give up
	left=$(sys_left "$sys")
	{
		echo "left $left"
		echo "load $(load)"
	} >>"$scratch/$tag-$sys.out"
	sys_failed "$sys" >"$scratch/$tag-$sys.failed" || true
	sys_stop "$sys"
}
# analyse TAG SYS N: figures of a record (python3): prints "key value" lines.
analyse() {
	$PY - "$scratch/$1-$2.rec" "$scratch/$1-$2.out" "$LIMIT" "$PER" "$3" "$scratch/$1-$2.win" <<'PY'
import json, sys
rec, outf, lim, per, n, winf = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
out = dict(l.rstrip("\n").split(" ", 1) for l in open(outf))
ev = [json.loads(l) for l in open(rec)]
ok = [e for e in ev if "sender" in e and "refused" not in e]
orig = [e for e in ok if e["sender"] not in ("", "<>")]
bounces = [e for e in ok if e["sender"] in ("", "<>")]
refused = [e for e in ev if "refused" in e]
t = sorted(e["time"] for e in ok)
rcpts = [r for e in orig for r in e["rcpts"]]
uniq = set(rcpts)
res = {"accepted": len(t), "delivered": len(uniq), "duplicates": len(rcpts) - len(uniq),
       "bounces_sent": len(bounces), "refused": len(refused)}
worst, j = 0, 0
for i, x in enumerate(t):
    while t[j] <= x - per:
        j += 1
    worst = max(worst, i - j + 1)
res["worst"] = worst
if t:
    t0 = t[0]
    span = t[-1] - t0
    need = (-(-len(t) // lim) - 1) * per     # the least span the limit allows
    res["span"] = round(span, 2)
    res["util"] = round(100 * need / span, 1) if span > 0 else 0
    start = float(out["start"])
    res["first_after_start"] = round(t0 - start, 2)
    with open(winf, "w") as f:            # sends in the last `per` s, every 0.1 s
        k, j = 0, 0
        x = 0.0
        while x <= span + per:
            while k < len(t) and t[k] - t0 <= x:
                k += 1
            while j < k and t[j] - t0 <= x - per:
                j += 1
            f.write("%.1f %d\n" % (x, k - j))
            x += 0.1
    if "recover" in out:
        rec_t = float(out["recover"])
        after = [e["time"] for e in orig if e["time"] >= rec_t]
        if int(out["left"]) > 0:
            res["drain"] = -1                # not drained
        elif after:
            res["drain"] = round(max(after) - rec_t, 1)
        else:
            res["drain"] = "none"            # nothing was left to deliver
failed = set(l.strip() for l in open(outf[:-4] + ".failed") if l.strip())
res["left"] = int(out["left"])
res["failed"] = len(failed)
res["failed_and_delivered"] = len(failed & uniq)
res["lost"] = n - len(uniq | failed) - res["left"]
res["load"] = out["load"].replace(" ", ",")
for k, v in res.items():
    print(k, v)
PY
}
val() { sed -n "s/^$1 //p" "$2"; }
run_parallel() {	# TAG N [THROTTLE_REPLY]
	local sys
	bgjobs=""
	for sys in $SYSTEMS; do
		scenario "$sys" "$@" &
		bgjobs="$bgjobs $!"
	done
	for p in $bgjobs; do wait "$p" || { echo "a $1 scenario failed" >&2; exit 1; }; done
	bgjobs=""
	for sys in $SYSTEMS; do analyse "$1" "$sys" "$2" >"$scratch/$1-$sys.res"; done
}

case " $PARTS " in *" limit "*)
	echo
	echo "== limit $LIMIT per $PER s, a burst of $BURST queued, STARTTLS + AUTH, the three at once"
	echo "   weir: rate = {\"$LIMIT per ${PER}s\"}, max_connections = $CONC; Postfix: smtp_destination_concurrency_limit = 1,"
	echo "   smtp_destination_rate_delay = $(( (PER + LIMIT - 1) / LIMIT ))s (whole seconds only); nullmailer: nothing to set"
	run_parallel limit "$BURST"
	printf '%-11s %9s %13s %8s %9s %9s  %s\n' system delivered "worst window" "util %" "span s" "1st at s" load
	for sys in $SYSTEMS; do
		r=$scratch/limit-$sys.res
		printf '%-11s %9s %13s %8s %9s %9s  %s\n' "$sys" "$(val delivered "$r")" "$(val worst "$r") / $LIMIT" \
			"$(val util "$r")" "$(val span "$r")" "$(val first_after_start "$r")" "$(val load "$r" | tr , ' ')"
		echo "lim $sys $(val worst "$r") $(val util "$r")" >>"$scratch/figures"
	done
	echo "   worst window: the most messages the upstream accepted in any ${PER} s (sliding, its own clock);"
	echo "   util: the least first-to-last span the limit allows for that many, over the span seen (>100: over the limit)"
	mkdir -p "$(dirname "$PLOT")"
	cp "$scratch"/limit-*.win "$(dirname "$PLOT")/"
	gnuplot -e "dir='$(dirname "$PLOT")'; out='$PLOT'; limit=$LIMIT; per=$PER; burst=$BURST; npeak=$(val worst "$scratch/limit-nullmailer.res")" \
		"$ROOT/scripts/bench/plots/window.gp"
	echo "   plot: $PLOT"
	;;
esac

case " $PARTS " in *" throttle "*)
	for thr in "421 4.7.0 Too many messages, slow down" "550 5.4.5 Daily user sending quota exceeded"; do
		tag=thr${thr%% *}
		echo
		echo "== throttle: $BURST_T queued, limit as above; after $TH_AFTER accepted the upstream answers MAIL FROM"
		echo "   with \"$thr\" for $TH_FOR s, then recovers (retry after 1 minute in all three:"
		echo "   weir throttle_reply suspend = \"1m\"; Postfix minimal_backoff_time = queue_run_delay = 60s;"
		echo "   nullmailer pausetime 60, its default)"
		run_parallel "$tag" "$BURST_T" "$thr"
		printf '%-11s %9s %8s %8s %6s %6s %6s %8s %9s  %s\n' system delivered refused bounced bnc-up lost dup \
			"drain s" "worst win" load
		for sys in $SYSTEMS; do
			r=$scratch/$tag-$sys.res
			d=$(val drain "$r")
			[ "$d" = -1 ] && d=">$DRAIN_MAX ($(val left "$r") left)"
			printf '%-11s %9s %8s %8s %6s %6s %6s %8s %9s  %s\n' "$sys" "$(val delivered "$r")" "$(val refused "$r")" \
				"$(val failed "$r")" "$(val bounces_sent "$r")" "$(val lost "$r")" "$(val duplicates "$r")" "$d" \
				"$(val worst "$r")" "$(val load "$r" | tr , ' ')"
			echo "thr $tag $sys $(val delivered "$r") $(val failed "$r") $(val lost "$r") $(val drain "$r") $(val left "$r")" \
				>>"$scratch/figures"
		done
		echo "   refused: throttle replies the upstream gave; bounced: messages the system gave up on"
		echo "   (weir 'failed for', Postfix status=bounced, nullmailer failed/; bounces of bounces not"
		echo "   counted); bnc-up: bounce messages (null sender) the upstream accepted; lost: queued -"
		echo "   (delivered or bounced) - still queued; dup: messages the upstream accepted twice;"
		echo "   drain: from recovery to the last original message accepted"
	done
	;;
esac

# ---- backlog and bigrcpt (issue 36) ----
# Each system in a subshell of its own, the systems side by side: its
# load queued while it is stopped, a start, the load in the queue proper,
# CPU over IDLE s and memory per process.  Then one system at a time (a
# turn: neither's scan slows the other's), the system still sending: the
# listing commands, timed; SIGKILL to every process of its session, PER +
# 1 s for the window to empty, a start, and the time to the first message
# at the upstream.
#
# settled SYS: the load is in the queue proper (weir: todo/ empty, every
# message preprocessed; Postfix: maildrop/ and incoming/ empty, or the
# active queue at qmgr_message_active_limit: then qmgr takes no more, no
# longer hands out the tokens of its flow control, and pickup's cleanup
# waits in_flow_delay (1 s) before each message, so the rest of a deep
# backlog stays in maildrop/ and comes in at about the rate it is sent).
settled() {
	case $1 in
	weir) [ -z "$(find "$W_D/queue/todo" -maxdepth 1 -type f -print -quit)" ] ;;
	postfix)
		[ "$(find "$PF/spool/active" -type f | wc -l)" -ge "$PF_ACTIVE" ] ||
			[ -z "$(find "$PF/spool/maildrop" "$PF/spool/incoming" -type f -print -quit)" ]
		;;
	esac
}
# inject_rcpts SYS N: one message to rcpt1..rcptN@example.net through
# SYS's sendmail, the recipients on its command line.
inject_rcpts() {
	local r=() i
	for ((i = 1; i <= $2; i++)); do r+=("rcpt$i@example.net"); done
	(
		# The kernel allows arguments of a quarter of the stack limit
		# (at most 6 MB): 100,000 addresses take about 3 MB.
		ulimit -s 65536
		case $1 in
		weir) WEIR_CONFIG=$W_CONF "$B/sendmail" -i -f bench@relay.example.org "${r[@]}" <"$scratch/msg" ;;
		postfix) /usr/sbin/sendmail -C "$PF/etc" -i -f bench@relay.example.org "${r[@]}" <"$scratch/msg" ;;
		*) echo "$1: no bigrcpt part" >&2; exit 1 ;;
		esac
	) || { echo "$1: sendmail to $2 recipients failed" >&2; exit 1; }
}
# rec_sent REC: "MESSAGES RECIPIENTS" the upstream accepted so far.
rec_sent() {
	$PY -c '
import json, sys
m = r = 0
for l in open(sys.argv[1]):
    e = json.loads(l)
    if "sender" in e and "refused" not in e:
        m += 1
        r += len(e["rcpts"])
print(m, r)' "$1"
}
# rec_time_of REC K: the upstream's time of the Kth message it accepted.
rec_time_of() {
	$PY -c '
import json, sys
k = int(sys.argv[2])
for l in open(sys.argv[1]):
    e = json.loads(l)
    if "sender" in e and "refused" not in e:
        k -= 1
        if k == 0:
            print(e["time"])
            break' "$1" "$2"
}
# listing NAME CMD...: CMD timed (GNU time: wall, user, sys, max RSS),
# and the CPU the system's session spent meanwhile (the daemon that lists
# for a user: Postfix's showq, weir-showq; and the sending that goes on);
# appends "list NAME WALL USER SYS MAXRSS SESSION_CPU LISTED" to $out,
# LISTED the count the listing itself gives.
listing() {
	local name=$1 n c0 c1
	shift
	c0=$(sid_cpu "$SID")
	/usr/bin/time -f '%e %U %S %M' -o "$scratch/time.$name" "$@" >"$scratch/list.$name" 2>&1 || true
	c1=$(sid_cpu "$SID")
	case $name in
	mailq*|weir-queue*) n=$(sed -n 's/^messages in queue: //p' "$scratch/list.$name") ;;
	weir-status*) n=$(sed -n 's/^  messages: \([0-9]*\).*/\1/p' "$scratch/list.$name") ;;
	postqueue*) n=$(sed -n 's/^-- .* in \([0-9]*\) Requests\?\.$/\1/p' "$scratch/list.$name") ;;
	qshape*) n=$(awk '$1 == "TOTAL" { print $2 }' "$scratch/list.$name") ;;
	esac
	echo "list $name $(tail -1 "$scratch/time.$name") $(calc "$c1 - $c0") ${n:--}" >>"$out"
}
# A command line's start that runs it as nobody (who may not read the queue).
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
# sys_reap SYS: what sys_stop does after the system is gone (SIGKILL).
sys_reap() {
	case $1 in
	weir)
		wait "$wtime" 2>/dev/null || true
		wait "$stamper" 2>/dev/null || true
		wtime="" wpid="" stamper=""
		;;
	postfix) wait "$PF_MASTER" 2>/dev/null || true ;;
	esac
}
# wait_file FILE PID: until FILE exists; 1 if PID ended first.
wait_file() {
	until [ -e "$1" ]; do
		kill -0 "$2" 2>/dev/null || [ -e "$1" ] || return 1
		sleep 0.2
	done
}
# load_one SYS KIND: KIND "backlog" (BACKLOG messages) or "bigrcpt" (one
# message to RCPTS recipients); in a subshell, writes
# $scratch/KIND-SYS.out ("key value..." lines) and the memory tables
# $scratch/KIND-SYS.mem1 (after the CPU window) and .mem2 (after the
# start that follows SIGKILL).
load_one() {
	local sys=$1 kind=$2 rec c0 c1 s0 s1 t0 t1 tf k0 out big
	pids="" wtime="" wpid="" stamper="" SID=""
	export WEIR_SHOWQ=1
	# The system's session as it is at exit (a restart makes another).
	trap '[ -z "$SID" ] || sid_kill9 "$SID" || true; lib_cleanup' EXIT
	trap 'exit 1' TERM
	out=$scratch/$kind-$sys.out
	rec=$scratch/$kind-$sys.rec
	big=$((BACKLOG > RCPTS ? BACKLOG : RCPTS))
	sink "$sys" "$kind"
	sys_conf "$sys" "$kind-$sys" "$SINK_PORT" starttls+auth limit
	[ "$sys" = postfix ] && PF_ACTIVE=$(postconf -c "$PF/etc" -h qmgr_message_active_limit 2>/dev/null)
	if [ "$kind" = backlog ]; then sys_inject "$sys" "$BACKLOG"; else inject_rcpts "$sys" "$RCPTS"; fi
	touch "$scratch/$kind-$sys.injected"
	# All start together, once each system has its load.
	wait_until $((900 + big / 20)) 'test "$(ls "$scratch"/$kind-*.injected | wc -l)" -eq "$(echo $SYSTEMS | wc -w)"' || true
	t0=$(now)
	sys_start "$sys"
	wait_until $((900 + big / 20)) 'settled "$sys"' || echo "$sys: not settled" >&2
	t1=$(now)
	echo "settle $(calc "$t1 - $t0") $(sid_cpu "$SID")" >"$out"
	sleep 2
	c0=$(sid_cpu "$SID")
	s0=$(rec_sent "$rec")
	sleep "$IDLE"
	c1=$(sid_cpu "$SID")
	s1=$(rec_sent "$rec")
	echo "cpu $(calc "($c1 - $c0) * 1000") ${s1% *} $((${s1% *} - ${s0% *})) $((${s1#* } - ${s0#* }))" \
		"mem $(sid_mem "$SID") load $(load)" >>"$out"
	sid_procs "$SID" >"$scratch/$kind-$sys.mem1"
	touch "$scratch/$kind-$sys.ready"
	until [ -e "$scratch/$kind-$sys.turn" ]; do sleep 0.2; done
	echo "turnload $(load)" >>"$out"
	case $sys in
	weir)
		listing mailq env WEIR_CONFIG="$W_CONF" "$B/mailq"
		listing weir-queue env WEIR_CONFIG="$W_CONF" "$B/weir" queue
		listing weir-status env WEIR_CONFIG="$W_CONF" "$B/weir" status
		# As a user, through weir-showq (postqueue always asks showq).
		listing mailq-user "${NOBODY[@]}" env WEIR_CONFIG="$W_CONF" "$B/mailq"
		listing weir-status-user "${NOBODY[@]}" env WEIR_CONFIG="$W_CONF" "$B/weir" status
		;;
	postfix)
		listing postqueue postqueue -c "$PF/etc" -p
		listing qshape qshape -c "$PF/etc"
		;;
	esac
	# The start after SIGKILL.
	sid_kill9 "$SID"
	sys_reap "$sys"
	sleep $((PER + 1))
	k0=$(rec_sent "$rec")
	k0=${k0% *}
	t0=$(now)
	sys_start "$sys"
	if [ "$(sys_left "$sys")" -gt 0 ] && wait_until 600 'test "$(accepted "$rec")" -gt "$k0"'; then
		c1=$(sid_cpu "$SID")
		tf=$(rec_time_of "$rec" $((k0 + 1)))
		echo "restart $(printf '%.2f' "$(calc "$tf - $t0")") $c1 load $(load)" >>"$out"
	else
		echo "$sys: nothing sent after the restart ($(sys_left "$sys") left)" >&2
		echo "restart - - load $(load)" >>"$out"
	fi
	# weir-send's "started on": every message loaded (the first are sent
	# meanwhile).
	[ "$sys" = weir ] && wait_log 'weir-send.*: started on' 1 600 &&
		echo "weirsend $(printf '%.2f' "$(calc "$(stamp_of 'weir-send.*: started on' 1) - $t0")")" >>"$out"
	sleep 5
	sid_procs "$SID" >"$scratch/$kind-$sys.mem2"
	echo "left $(sys_left "$sys")" >>"$out"
	sys_stop "$sys"
	touch "$scratch/$kind-$sys.done"
}
# load_part KIND: the systems side by side, then their turns, then the
# tables.
load_part() {
	local kind=$1 sys p i unit ws
	bgjobs=""
	for sys in $SYSTEMS; do
		load_one "$sys" "$kind" &
		bgjobs="$bgjobs $!"
		eval "job_$sys=$!"
	done
	for sys in $SYSTEMS; do
		eval "p=\$job_$sys"
		wait_file "$scratch/$kind-$sys.ready" "$p" || { echo "the $kind run of $sys failed" >&2; exit 1; }
	done
	for sys in $SYSTEMS; do
		eval "p=\$job_$sys"
		touch "$scratch/$kind-$sys.turn"
		wait_file "$scratch/$kind-$sys.done" "$p" || { echo "the $kind run of $sys failed" >&2; exit 1; }
	done
	for p in $bgjobs; do wait "$p" || { echo "a $kind run failed" >&2; exit 1; }; done
	bgjobs=""
	unit=message
	[ "$kind" = bigrcpt ] && unit=recipient
	echo "   settle: from the start to the load in the queue proper, seconds and CPU seconds (session)"
	printf '%-9s %9s %8s %8s %6s %7s %11s %9s %9s %5s  %s\n' system "settle s" "CPU s" "CPU ms" sent \
		"rcpts" "ms per $unit" "RSS kB" "PSS kB" procs load
	for sys in $SYSTEMS; do
		read -r st sc <<<"$(val settle "$scratch/$kind-$sys.out")"
		read -r cpu _ sent rc _ rss pss np _ l1 l2 l3 <<<"$(val cpu "$scratch/$kind-$sys.out")"
		i=$sent
		[ "$kind" = bigrcpt ] && i=$rc
		printf '%-9s %9.1f %8.2f %8.0f %6s %7s %11.2f %9s %9s %5s  %s %s %s\n' "$sys" "$st" "$sc" "$cpu" "$sent" \
			"$rc" "$(calc "$cpu / ($i + (0 == $i))")" "$rss" "$pss" "$np" "$l1" "$l2" "$l3"
		echo "$kind $sys $cpu $rss $pss $i" >>"$scratch/figures"
	done
	echo "   CPU ms: utime+stime+cutime+cstime of the session over $IDLE s, 2 s after it settled; sent:"
	echo "   messages (rcpts: recipients) the upstream accepted in those $IDLE s"
	echo
	echo "   memory by process (kB), at the end of those $IDLE s / 5 s after the start that followed SIGKILL:"
	printf '   %-9s %-16s %3s %17s %17s %17s\n' system process n "RSS" "peak RSS" "PSS"
	for sys in $SYSTEMS; do
		$PY - "$scratch/$kind-$sys.mem1" "$scratch/$kind-$sys.mem2" "$sys" <<-'PY'
		import sys
		def table(f):
		    t = {}
		    for l in open(f):
		        c, r, h, p = l.split()
		        n, r0, h0, p0 = t.get(c, (0, 0, 0, 0))
		        t[c] = (n + 1, r0 + int(r), max(h0, int(h)), p0 + int(p))
		    return t
		a, b = table(sys.argv[1]), table(sys.argv[2])
		for c in sorted(set(a) | set(b), key=lambda c: -a.get(c, b.get(c))[1]):
		    x, y = a.get(c, (0, 0, 0, 0)), b.get(c, (0, 0, 0, 0))
		    print("   %-9s %-16s %3d %8d /%7d %8d /%7d %8d /%7d" % (sys.argv[3], c, max(x[0], y[0]),
		        x[1], y[1], x[2], y[2], x[3], y[3]))
		PY
	done
	echo "   n: processes of that name; peak RSS: the largest VmHWM among them (since each started)"
	echo
	echo "   listing the queue while it sends (one system at a time; GNU time; -user: as nobody):"
	printf '   %-9s %-17s %7s %7s %7s %10s %9s %8s  %s\n' system command "wall s" "user s" "sys s" \
		"max RSS kB" "session s" listed load
	for sys in $SYSTEMS; do
		l=$(val turnload "$scratch/$kind-$sys.out")
		grep '^list ' "$scratch/$kind-$sys.out" | while read -r _ name w u s m c n; do
			printf '   %-9s %-17s %7s %7s %7s %10s %9s %8s  %s\n' "$sys" "$name" "$w" "$u" "$s" "$m" \
				"$c" "$n" "$l"
			echo "list $kind $sys $name $w $(calc "$u + $s + $c")" >>"$scratch/figures"
		done
	done
	echo "   session s: CPU of the system's own processes meanwhile (the daemon that lists for a"
	echo "   user, and the sending that goes on); the ratios below count it with the command's"
	echo
	echo "   SIGKILL to every process, $((PER + 1)) s, a start: the first message at the upstream;"
	echo "   all loaded: weir-send's \"started on\" line (every message of info/ taken in)"
	printf '   %-9s %18s %14s %22s  %s\n' system "first send after s" "CPU s to it" "all loaded at s" load
	for sys in $SYSTEMS; do
		read -r fs fc _ l1 l2 l3 <<<"$(val restart "$scratch/$kind-$sys.out")"
		ws=$(val weirsend "$scratch/$kind-$sys.out")
		printf '   %-9s %18s %14s %22s  %s %s %s\n' "$sys" "$fs" "$fc" "${ws:--}" "$l1" "$l2" "$l3"
		echo "restart $kind $sys $fs $fc" >>"$scratch/figures"
	done
}
case " $PARTS " in *" backlog "*)
	echo
	echo "== backlog: $BACKLOG queued in each (their sendmail, 4 at once), then released under the limit above"
	echo "   (STARTTLS + AUTH)"
	load_part backlog
	;;
esac
case " $PARTS " in *" bigrcpt "*)
	echo
	echo "== bigrcpt: one message to $RCPTS recipients in each (their sendmail, the recipients as"
	echo "   arguments), released under the limit above (STARTTLS + AUTH); a transaction carries at"
	echo "   most 100 recipients in weir (max_recipients' default), 50 in Postfix"
	echo "   (smtp_destination_recipient_limit's default)"
	load_part bigrcpt
	;;
esac

# ---- ratios ----
echo
echo "== ratios, weir over each (same run)"
$PY - "$scratch/figures" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
def find(pred):
    return [r for r in rows if pred(r)]
def ratio(a, b):
    a, b = float(a), float(b)
    return "%.2f" % (a / b) if b else "-"
for alt in ("postfix", "nullmailer", "notqmail"):
    for r in find(lambda r: r[0] == "inj" and r[1] == "weir"):
        o = find(lambda x: x[0] == "inj" and x[1] == alt and x[2:4] == r[2:4])
        if o:
            cpu = ""
            if r[6] != "-" and o[0][6] != "-":
                cpu = ", CPU per message %s (%s vs %s ms)" % (ratio(r[6], o[0][6]), r[6], o[0][6])
            print("inject %-9s %-3s: weir/%s rate %s, fsyncs %s vs %s%s" % (r[2], r[3], alt, ratio(r[4], o[0][4]), r[5], o[0][5], cpu))
    for r in find(lambda r: r[0] == "rel" and r[1] == "weir"):
        o = find(lambda x: x[0] == "rel" and x[1] == alt and x[2] == r[2])
        if o:
            print("relay  %-13s: weir/%s rate %s, CPU per message %s" % (r[2], alt, ratio(r[3], o[0][3]), ratio(r[4], o[0][4])))
    for kind in ("backlog", "bigrcpt"):
        for r in find(lambda r: r[0] == kind and r[1] == "weir"):
            o = find(lambda x: x[0] == kind and x[1] == alt)
            if o:
                per = [float(x[2]) / float(x[5]) if float(x[5]) else 0 for x in (r, o[0])]
                print("%-13s: weir/%s CPU per %s sent %s, RSS %s, PSS %s" % (kind, alt,
                    "message" if kind == "backlog" else "recipient", ratio(per[0], per[1]),
                    ratio(r[3], o[0][3]), ratio(r[4], o[0][4])))
        for r in find(lambda r: r[0] == "restart" and r[1] == kind and r[2] == "weir"):
            o = find(lambda x: x[0] == "restart" and x[1] == kind and x[2] == alt)
            if o:
                print("%-13s: weir/%s first send after SIGKILL and start %s (%s vs %s s)" % (kind, alt,
                    ratio(r[3], o[0][3]), r[3], o[0][3]))
        ws = find(lambda r: r[0] == "list" and r[1] == kind and r[2] == "weir")
        os_ = find(lambda r: r[0] == "list" and r[1] == kind and r[2] == alt)
        if ws and os_:
            print("%-13s: listing, wall s (CPU s): weir %s; %s %s" % (kind,
                ", ".join("%s %s (%s)" % (w[3], w[4], w[5]) for w in ws), alt,
                ", ".join("%s %s (%s)" % (w[3], w[4], w[5]) for w in os_)))
for r in find(lambda r: r[0] == "thr"):
    d = {"-1": "not drained (%s left)" % r[7], "none": "nothing left to send"}.get(r[6], r[6] + " s")
    print("throttle %-6s: %-10s delivered %s, bounced %s, lost %s, drain after recovery %s" % (r[1][3:], r[2], r[3], r[4], r[5], d))
for r in find(lambda r: r[0] == "lim"):
    print("limit        : %-10s worst window %s, utilisation %s %%" % (r[1], r[2], r[3]))
PY
