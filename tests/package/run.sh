#!/bin/sh
# tests/package/run.sh: the Debian package, installed and used the way an
# administrator would, in a throwaway Debian 12 root (not on this machine:
# the package conflicts with every other MTA).
#
#  1. scripts/deb.sh builds the .deb from a copy of the tree; lintian.
#  2. mmdebstrap makes a minimal bookworm root from this machine's apt
#     sources, with the package's dependencies and without systemd (a
#     sysvinit box, a container); its file list and account files are kept.
#  3. dpkg -i: postinst makes the users, the statoverrides, the queue,
#     /var/lib/weir and /run/weir (weir queue-init: no systemd-tmpfiles).
#  4. weir.conf gets an upstream (tests/upstream/upstream.py with STARTTLS
#     and AUTH, running on this host: the root shares the host's network,
#     and only loopback is used) and a listen section on a free port;
#     `weir check-config` must pass.
#  5. Without systemd: /run/weir removed (as a reboot empties /run), then
#     `weir run` started by hand in the root (chroot) makes it again; one
#     message through /usr/sbin/sendmail as user nobody (the set-group-id
#     weir-queue), one over SMTP to weir-smtpd; both must reach the
#     upstream with the password only weir-remote can read.  Each daemon
#     must run as its designed user (/proc/PID/status).  mailq as nobody
#     (who may not read the queue) gets the listing from weir-showq.
#  6. Upgrade (dpkg -i again) with a message queued while weir is stopped:
#     the queue and the gate's journal are kept; nobody's mailq says weir
#     is not running (exit 75); the message is held (weir hold), listed
#     as held to nobody by weir-showq once /etc/init.d/weir started weir,
#     released, and goes out (init.d start, status, reload, stop; a
#     broken weir.conf refused by start).
#  6b. (issue 33) With an OAuth upstream that needs a login (no token
#     yet) and weir-metrics as the package runs it (its own account, the
#     gate's status socket): check-config warns and exits 0, /etc/init.d/weir
#     starts weir, the other upstream's mail flows, /metrics has the
#     queue's families and weir-send's sessions, the page names the login.
#  7. dpkg --purge: users, groups, statoverrides, spool, journal and
#     /etc/weir are gone, and the root's file list is the one of step 2
#     but for what dpkg and adduser keep by design.
#  7b. debconf: preseeded installs, one per preset family, each purged
#     after: Gmail (a password: the block, the secret file's owner and
#     mode, no secret left in debconf, test-relay and a message through
#     a stand-in, dpkg-reconfigure keeping hand edits), Microsoft 365
#     (OAuth: check-config names the sign-in; weir auth login's device
#     grant at a stand-in identity provider, then test-relay and a
#     message by XOAUTH2, and none of its tokens in any output) and
#     another relay (host, port and TLS from the answers).
#  8. With systemd: a second root with systemd, install, boot it with
#     systemd-nspawn (host network, so loopback again); weir.service must
#     be active with its hardening, the daemons run as their users, mail
#     sent in the container arrives, nobody's mailq works, `systemctl reload weir` reloads the
#     policy without a restart, the journal has a line per delivery; a
#     broken weir.conf makes `systemctl restart weir` fail once, with the
#     error's file:line in the journal, and no restart follows.
#
# Needs root (chroot, mount, nspawn) and the packages of
# `scripts/deps.sh package`.  Every process it starts is stopped and
# every mount undone on exit.  Usage: BUILD=build tests/package/run.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$top/$build ;; esac
if [ "$(id -u)" -ne 0 ]; then
	echo "package-test: needs root (chroot, mount, systemd-nspawn); not run" >&2
	exit 1
fi

t0=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-pkgtest.XXXXXX")
root=$work/root
pids=""
mounts=""
nspawn=""
passed=0
failed=0

alive() {	# PID: a running process (not gone, not a zombie)
	[ -e "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
chroot_pids() {	# every process whose root is the throwaway root
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && echo "${p#/proc/}"
	done
	return 0
}
cleanup() {
	set +e
	# The container: SIGTERM asks systemd-nspawn to shut it down; if it
	# does not, SIGKILL ends its PID namespace with it.
	if [ -n "$nspawn" ] && kill -TERM "$nspawn" 2>/dev/null; then
		i=0
		while alive "$nspawn" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$nspawn" 2>/dev/null
	fi
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $(chroot_pids); do kill "$p" 2>/dev/null; done
	i=0
	while [ -n "$(chroot_pids)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	for p in $(chroot_pids); do kill -KILL "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	for m in $mounts; do umount "$m" || umount -l "$m"; done
	# Nothing may be mounted below the root before it is removed.
	if grep -q " $root/" /proc/mounts; then
		echo "package-test: still mounted below $root; left in place" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

step() { printf '==> %s (%ds)\n' "$*" $(( $(date +%s) - t0 )); }
ok() { passed=$((passed + 1)); echo "  ok: $*"; }
no() { failed=$((failed + 1)); echo "  FAILED: $*"; }
check() {	# DESCRIPTION COMMAND...: one assertion
	d=$1; shift
	if "$@"; then ok "$d"; else no "$d"; fi
}
in_root() { chroot "$root" "$@"; }
wait_for() {	# SECONDS COMMAND...: until COMMAND succeeds
	n=$(($1 * 10)); shift
	while ! "$@" 2>/dev/null; do
		n=$((n - 1)); [ $n -gt 0 ] || return 1
		sleep 0.1
	done
}
# Every path in the root but the kernel's file systems.
file_list() {
	(cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev \) -prune \
		-o -printf '%p\n') | sort
}
mode() { chroot "$root" stat -c '%a %U:%G' "$1"; }
expect_mode() {	# PATH "MODE OWNER:GROUP"
	check "$1 is $2" test "$(mode "$1")" = "$2"
}
free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
listening() {	# PORT
	/usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1).close()"
}
arrived() {	# N: the upstream accepted N messages in all
	[ "$(grep -c '"event": "data"' "$work/upstream.log" 2>/dev/null)" -ge "$1" ]
}
smtp_send() {	# PORT RCPT TEXT: one message to weir-smtpd
	/usr/bin/python3 - "$@" <<'PY'
import smtplib, sys
with smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=20) as s:
    s.sendmail("lan@relay.example.org", [sys.argv[2]],
               "Subject: from the LAN\r\n\r\n" + sys.argv[3] + "\r\n")
PY
}
uid_of() { chroot "$root" id -u "$1"; }
gid_of() { chroot "$root" getent group "$1" | cut -d: -f3; }
# The daemon named NAME, among the processes $lister prints, runs with
# real, effective and saved uid of USER, and (unless root) without group 0.
runs_as() {
	for p in $($lister); do
		[ "$(sed -n 's/^Name:[[:space:]]*//p' "/proc/$p/status")" = "$1" ] || continue
		want=$(uid_of "$2")
		got=$(sed -n 's/^Uid:[[:space:]]*//p' "/proc/$p/status" | awk '{print $1, $2, $3}')
		g=$(sed -n 's/^Groups:[[:space:]]*//p' "/proc/$p/status")
		echo "    $1 pid $p: Uid $got, Groups $g (want uid $want, $2)"
		[ "$got" = "$want $want $want" ] || return 1
		if [ "$2" != root ]; then
			case " $g " in *" 0 "*) return 1 ;; esac
		fi
		return 0
	done
	echo "    no process $1"
	return 1
}
has_group() {	# NAME GROUP: the daemon NAME has GROUP among its groups
	for p in $($lister); do
		grep -q "^Name:[[:space:]]*$1\$" "/proc/$p/status" || continue
		case " $(sed -n 's/^Groups:[[:space:]]*//p' "/proc/$p/status") " in
		*" $(gid_of "$2") "*) return 0 ;;
		esac
	done
	return 1
}
check_users() {
	check "weir run runs as root (it only supervises)" runs_as weir root
	check "weir-gate runs as weir-gate" runs_as weir-gate weir-gate
	check "weir-send runs as weir-send" runs_as weir-send weir-send
	check "weir-smtpd runs as weir-smtpd" runs_as weir-smtpd weir-smtpd
	check "weir-showq runs as weir-send" runs_as weir-showq weir-send
	check "weir-queued runs as weir-queued" runs_as weir-queued weir-queued
	check "weir-queued has group weir-queue" has_group weir-queued weir-queue
	check "weir-send has group weir-queue" has_group weir-send weir-queue
}
install_deb() {	# LOG
	DEBIAN_FRONTEND=noninteractive in_root dpkg -i /tmp/weir.deb >"$work/$1" 2>&1 ||
		{ cat "$work/$1"; exit 1; }
}
# As an administrator would: edit the packaged files, and put the
# password into the packaged secret file (its owner and mode stay).
configure() {	# SMTPPORT UPSTREAM-HOST
	cp "$work/certs/ca.pem" "$root/etc/weir/test-ca.pem"
	cat >>"$root/etc/weir/weir.conf" <<CONF

hostname = "relay.example.org"
admin    = "postmaster@example.org"
upstream "isp" {
  host        = "$2"
  port        = $port
  tls         = "starttls"
  ca_file     = "/etc/weir/test-ca.pem"
  username    = "pkgtest"
  secret_file = "/etc/weir/secret"
}
listen {
  address = {"127.0.0.1:$1"}
  allow   = {"127.0.0.0/8"}
}
CONF
	cat >>"$root/etc/weir/policy.conf" <<'CONF'

upstream "isp" {
  rate = {"100 per 1m"}
}
CONF
	printf 'pkg-secret-42\n' >"$root/etc/weir/secret"
}

step "building the package"
"$top/scripts/deb.sh" "$build/package" >"$work/deb.out"
deb=$(tail -n 1 "$work/deb.out")
grep -v '^N:' "$build/package/lintian.txt" | sed 's/^/  lintian: /'
check "lintian reports no error" sh -c "! grep -q '^E:' '$build/package/lintian.txt'"
check "lintian: every warning fixed or overridden" sh -c "! grep -q '^W:' '$build/package/lintian.txt'"
echo "  $deb"

step "a Debian 12 root without systemd (mmdebstrap, minbase, this machine's apt sources)"
# The .deb's dependencies (first alternative, no versions) go in now, so
# installing it later needs no network.
deps=$({ dpkg-deb -f "$deb" Depends; dpkg-deb -f "$deb" Pre-Depends; } | tr ',' '\n' |
	sed 's/|.*//; s/(.*)//; s/[[:space:]]//g' | grep . | tr '\n' ',')
make_root() {	# EXTRA-PACKAGES: a fresh minbase root at $root
	mmdebstrap --quiet --mode=root --variant=minbase --include="${deps}$1" \
		bookworm "$root" - </etc/apt/sources.list.d/debian.sources >"$work/mmdebstrap.log" 2>&1 || {
		tail -n 30 "$work/mmdebstrap.log"
		exit 1
	}
	# A minbase root may have no /etc/hosts (then "localhost" does not
	# resolve); the installer writes one like this.
	if [ ! -e "$root/etc/hosts" ]; then
		printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
	fi
}
make_root ""
check "no systemd in the root" sh -c "! test -e '$root/bin/systemctl' && ! test -e '$root/usr/bin/systemctl' && ! test -e '$root/bin/systemd-tmpfiles'"
file_list >"$work/files.before"
cp "$root/etc/passwd" "$work/passwd.before"
chroot "$root" dpkg-statoverride --list >"$work/statoverride.before" || true	# none yet: exit 1
cp "$root/etc/group" "$work/group.before"
mount -t proc proc "$root/proc" && mounts="$root/proc $mounts"
mount --bind /dev "$root/dev" && mounts="$root/dev $mounts"

step "dpkg -i $(basename "$deb")"
cp "$deb" "$root/tmp/weir.deb"
install_deb install.log
ok "installed"
for u in weir-send weir-gate weir-remote weir-smtpd weir-metrics; do
	check "user $u exists, no login shell" \
		sh -c "chroot '$root' getent passwd $u | grep -q ':/nonexistent:/usr/sbin/nologin\$'"
done
check "group weir-queue exists" sh -c "chroot '$root' getent group weir-queue >/dev/null"
check "weir-send is in group weir-queue" sh -c "chroot '$root' id -nG weir-send | grep -qw weir-queue"
check "weir-metrics is in no group of weir's but its own" \
	sh -c "[ \"\$(chroot '$root' id -nG weir-metrics)\" = weir-metrics ]"
expect_mode /usr/libexec/weir/weir-queue "2755 root:weir-queue"
expect_mode /usr/libexec/weir/weir-remote "4750 weir-remote:weir-send"
expect_mode /etc/weir/secret "600 weir-remote:root"
expect_mode /var/lib/weir "711 weir-gate:weir-gate"
expect_mode /var/lib/weir/oauth "755 weir-remote:weir-remote"
expect_mode /run/weir "2750 weir-gate:weir-send"
check "/usr/sbin/sendmail, /usr/lib/sendmail and /usr/bin/mailq" \
	sh -c "test -x '$root/usr/sbin/sendmail' && test -x '$root/usr/lib/sendmail' && test -x '$root/usr/bin/mailq'"
for m in man8/weir.8 man8/weir-queue.8 man8/weir-send.8 man8/weir-gate.8 man8/weir-remote.8 \
    man8/weir-smtpd.8 man8/weir-showq.8 man8/weir-queued.8 man8/sendmail.8 man1/mailq.1 man5/weir.conf.5 man5/weir-policy.conf.5; do
	check "man page $m" test -s "$root/usr/share/man/$m.gz"
done
check "weir queue-check: the queue is sound" sh -c "chroot '$root' weir queue-check >'$work/qcheck.log' 2>&1"
# Installed without answers (noninteractive): a valid configuration that
# queues mail, sends nothing, and says so.
check "without answers: weir check-config passes" sh -c "chroot '$root' weir check-config >'$work/cc0.log' 2>&1"
check "without answers: weir status says no upstream is configured" sh -c \
	"chroot '$root' weir status 2>&1 | grep -q 'no upstream is configured in /etc/weir/weir.conf: mail is queued and nothing is sent'"

step "a stand-in upstream on this host (STARTTLS, AUTH), weir.conf pointing at it"
sh "$top/tests/upstream/mkcerts.sh" "$work/certs" >/dev/null 2>&1
/usr/bin/python3 "$top/tests/upstream/upstream.py" --cert "$work/certs/good.pem" \
	--key "$work/certs/good.key" --auth pkgtest:pkg-secret-42 --record "$work/upstream.log" \
	>"$work/upstream.out" 2>"$work/upstream.err" &
pids="$pids $!"
wait_for 20 grep -q '^PORT ' "$work/upstream.out" || { cat "$work/upstream.err"; exit 1; }
port=$(sed -n 's/^PORT //p' "$work/upstream.out")
smtpport=$(free_port)
configure "$smtpport" localhost
expect_mode /etc/weir/secret "600 weir-remote:root"
check "weir-send cannot read the secret" sh -c \
	"! chroot --userspec=weir-send:weir-send '$root' cat /etc/weir/secret 2>/dev/null"
# 126: the exec itself was refused (mode 4750, group weir-send).
check "nobody cannot run weir-remote" sh -c \
	"chroot --userspec=nobody:nogroup '$root' /usr/libexec/weir/weir-remote 2>/dev/null; test \$? -eq 126"
check "weir check-config" sh -c "chroot '$root' weir check-config >'$work/check-config.log' 2>&1"
sed 's/^/    /' "$work/check-config.log"

step "weir run started by hand in the root (no systemd), a message through sendmail as nobody, one over SMTP"
# As after a reboot: /run is empty.  weir run makes /run/weir again.
rm -rf "$root/run/weir"
start_weir() {
	chroot "$root" /usr/sbin/weir run >>"$work/weir.log" 2>&1 &
	weirpid=$!
	pids="$pids $weirpid"
}
stop_weir() {
	kill -TERM "$weirpid" 2>/dev/null || true
	wait "$weirpid" 2>/dev/null || true
}
start_weir
check "weir-gate's socket appears" wait_for 20 test -S "$root/run/weir/gate.sock"
expect_mode /run/weir "2750 weir-gate:weir-send"
check "weir-smtpd listens" wait_for 20 listening "$smtpport"
check "sendmail as nobody (set-group-id weir-queue)" sh -c \
	"printf 'Subject: from cron\n\nhello from the package test\n' |
	chroot --userspec=nobody:nogroup '$root' /usr/sbin/sendmail -f cron@relay.example.org someone@example.com"
check "SMTP to weir-smtpd" smtp_send "$smtpport" other@example.net "hello over SMTP"
check "both messages reached the upstream (AUTH with the secret)" wait_for 60 arrived 2
check "the upstream saw AUTH by pkgtest" grep -q '"user": "pkgtest", "ok": true' "$work/upstream.log"
check "the sendmail message is intact" grep -rqs 'hello from the package test' "$work"/upstream.log.*
check "weir-showq's socket appears" wait_for 20 test -S "$root/run/weir-showq/showq.sock"
check "mailq as nobody lists the empty queue (through weir-showq)" wait_for 20 sh -c \
	"chroot --userspec=nobody:nogroup '$root' mailq | grep -q '^messages in queue: 0\$'"
lister=chroot_pids
check_users

step "upgrade (dpkg -i again) with a message queued and weir stopped"
stop_weir
check "weir run stopped its daemons" wait_for 10 sh -c "[ -z \"\$(for p in /proc/[0-9]*; do [ \"\$(readlink \$p/root)\" = '$root' ] && echo x; done)\" ]"
check "sendmail as nobody with weir stopped" sh -c \
	"printf 'Subject: waits\n\nqueued across an upgrade\n' |
	chroot --userspec=nobody:nogroup '$root' /usr/sbin/sendmail -f cron@relay.example.org late@example.com"
check "mailq as nobody with weir stopped: not running, exit 75" sh -c \
	"out=\$(chroot --userspec=nobody:nogroup '$root' mailq 2>&1); rc=\$?; echo \"    \$out\";
	test \$rc -eq 75 && echo \"\$out\" | grep -q 'mailq: the queue listing is unavailable: weir is not running'"
journal_before=$(md5sum <"$root/var/lib/weir/gate.journal" 2>/dev/null || echo none)
install_deb upgrade.log
ok "upgraded"
check "the queued message is still there" sh -c "chroot '$root' mailq | grep -q '^messages in queue: 1\$'"
check "the gate's journal is unchanged" test "$(md5sum <"$root/var/lib/weir/gate.journal" 2>/dev/null || echo gone)" = "$journal_before"
check "the queue is sound after the upgrade" sh -c "chroot '$root' weir queue-check >'$work/qcheck2.log' 2>&1"
check "the password survived the upgrade" grep -qx pkg-secret-42 "$root/etc/weir/secret"
init_d() { chroot "$root" /etc/init.d/weir "$@" >>"$work/init.log" 2>&1; }
held=$(chroot "$root" mailq | sed -n 's/^.* GMT  #\([0-9]*\)  .*$/\1/p' | head -n 1)
check "weir hold $held (weir stopped)" sh -c "chroot '$root' weir hold '$held' >>'$work/init.log' 2>&1"
rm -rf "$root/run/weir" "$root/run/weir-showq"
check "/etc/init.d/weir start" init_d start
check "weir-showq's socket appears (init.d)" wait_for 20 test -S "$root/run/weir-showq/showq.sock"
check "mailq as nobody lists the held message (weir-showq)" wait_for 20 sh -c \
	"chroot --userspec=nobody:nogroup '$root' mailq | grep -q '#$held  .*>  held\$'"
check "weir release $held (weir running)" sh -c "chroot '$root' weir release '$held' >>'$work/init.log' 2>&1"
check "the queued message is delivered after the upgrade (init.d)" wait_for 60 arrived 3
check "/etc/init.d/weir status" init_d status
check "/etc/init.d/weir reload" init_d reload
check "weir-gate re-read the policy (SIGHUP through init.d)" wait_for 10 \
	grep -q 'weir-gate\[[0-9]*\]: info: policy /etc/weir/policy.conf loaded (SIGHUP)' "$root/var/log/weir.log"
check "/etc/init.d/weir stop" init_d stop
check "init.d stop stopped every daemon" wait_for 10 sh -c "[ -z \"\$(for p in /proc/[0-9]*; do [ \"\$(readlink \$p/root)\" = '$root' ] && echo x; done)\" ]"
check "/etc/init.d/weir status says stopped" sh -c "! chroot '$root' /etc/init.d/weir status >/dev/null 2>&1"
cp "$root/etc/weir/weir.conf" "$work/weir.conf.good"
echo 'this line is not weir.conf' >>"$root/etc/weir/weir.conf"
check "/etc/init.d/weir start refuses a broken weir.conf" sh -c "! chroot '$root' /etc/init.d/weir start >'$work/init-broken.log' 2>&1"
check "... and names file:line" grep -q '/etc/weir/weir.conf:[0-9]' "$work/init-broken.log"
cp "$work/weir.conf.good" "$root/etc/weir/weir.conf"

# ---- issue 33: start-up apart from attention; weir-metrics as the package runs it ----
step "sysvinit: an upstream that needs a login, and weir-metrics under its own account"
# weir is stopped.  An OAuth upstream with no token yet (it needs weir
# auth login) beside isp, and the metrics section weir.conf's comment
# shows (user weir-metrics, in none of weir's groups; the gate's status
# socket).  /etc/init.d/weir start must start weir all the same, isp's
# mail flow, and the page and /metrics say what is so.
cp "$root/etc/weir/policy.conf" "$work/policy.conf.good"
mport=$(free_port)
cat >>"$root/etc/weir/weir.conf" <<CONF

upstream "mso" {
  host     = "127.0.0.1"
  port     = 9
  username = "me@mso.example"
  senders  = {"*@mso.example"}
  oauth {
    provider        = generic
    client_id       = "c"
    scope           = "smtp"
    device_endpoint = "https://idp.example/devicecode"
    token_endpoint  = "https://idp.example/token"
    token_file      = "/var/lib/weir/oauth/mso"
  }
}
gate_status_socket = "/run/weir-status/gate.sock"
metrics {
  address = "127.0.0.1:$mport"
  user    = "weir-metrics"
}
CONF
printf '\nupstream "mso" {\n  rate = {"10 per 1m"}\n}\n' >>"$root/etc/weir/policy.conf"
check "weir check-config: mso needs a login, a warning, exit 0" sh -c \
	"chroot '$root' weir check-config >'$work/cc-login.log' 2>&1 &&
	grep -q 'warning: upstream \"mso\": .*no token yet' '$work/cc-login.log'"
sed 's/^/    /' "$work/cc-login.log"
: >"$work/init.log"
check "/etc/init.d/weir start with an upstream that needs a login" init_d start
check "... and it said so" grep -q 'warning: upstream "mso"' "$work/init.log"
check "weir-metrics listens" wait_for 20 listening "$mport"
check "weir-metrics runs as weir-metrics" runs_as weir-metrics weir-metrics
check "sendmail as nobody, for isp" sh -c \
	"printf 'Subject: the other upstream\n\nflows\n' |
	chroot --userspec=nobody:nogroup '$root' /usr/sbin/sendmail -f cron@relay.example.org other@example.com"
check "isp's mail flows meanwhile" wait_for 60 arrived 4
scrape() { /usr/bin/curl -sf "http://127.0.0.1:$mport$1" >"$work/scrape.out"; }
has() {	# PATH TEXT: the answer to PATH holds TEXT
	scrape "$1" && grep -qF -- "$2" "$work/scrape.out"
}
check "/metrics: weir_gate_up 1" wait_for 10 has /metrics "weir_gate_up 1"
check "/metrics: the queue's families, through weir-showq" has /metrics "weir_queue_up 1"
check "/metrics: weir_queue_messages" has /metrics "weir_queue_messages "
check "/metrics: weir-send's kept sessions" wait_for 10 has /metrics 'weir_sessions_open{upstream="isp"}'
check "the page: the login first, with its command" has / "weir auth login mso"
check "the page: weir-send's sessions known" sh -c \
	"/usr/bin/curl -sf http://127.0.0.1:$mport/ >'$work/page.html' &&
	grep -q '<h2>Sessions</h2>' '$work/page.html' && ! grep -q 'weir-send has not run' '$work/page.html'"
check "weir-metrics logged no Permission denied" sh -c "! grep 'weir-metrics.*Permission denied' '$root/var/log/weir.log'"
check "/etc/init.d/weir stop" init_d stop
check "init.d stop stopped every daemon (weir-metrics too)" wait_for 10 sh -c "[ -z \"\$(for p in /proc/[0-9]*; do [ \"\$(readlink \$p/root)\" = '$root' ] && echo x; done)\" ]"
cp "$work/weir.conf.good" "$root/etc/weir/weir.conf"
cp "$work/policy.conf.good" "$root/etc/weir/policy.conf"
# ---- end of issue 33's step ----

step "dpkg --purge weir"
in_root dpkg --purge weir >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; exit 1; }
ok "purged"
for u in weir-send weir-gate weir-remote weir-smtpd weir-metrics; do
	check "user $u removed" sh -c "! chroot '$root' getent passwd $u >/dev/null"
done
for g in weir-queue weir-send weir-gate weir-remote weir-smtpd weir-metrics; do
	check "group $g removed" sh -c "! chroot '$root' getent group $g >/dev/null"
done
check "no statoverride of weir's left" sh -c \
	"chroot '$root' dpkg-statoverride --list | cmp -s - '$work/statoverride.before'"
check "/etc/passwd as before" cmp -s "$work/passwd.before" "$root/etc/passwd"
check "/etc/group as before" cmp -s "$work/group.before" "$root/etc/group"
for m in $mounts; do umount "$m"; done
mounts=""
file_list | grep -vx './tmp/weir.deb' >"$work/files.after"
# What Debian keeps by design: dpkg's own records, the logs, the backups
# adduser/deluser leave of the account files and adduser's lock file.
kept='^\./(var/lib/dpkg/|var/log/|var/cache/debconf/|etc/(passwd|group|shadow|gshadow)-$|run/adduser$)'
diff "$work/files.before" "$work/files.after" | sed -n 's/^[<>] //p' | grep -Ev "$kept" >"$work/files.diff" || true
if [ -s "$work/files.diff" ]; then
	no "the root's files are as before the install"
	sed 's/^/    /' "$work/files.diff"
else
	ok "the root's files are as before the install (but dpkg's records, logs, account backups)"
fi

step "debconf: preseeded installs, one per preset family (password, OAuth, another relay)"
# A stand-in for the providers' relays: a certificate of the test CA for
# smtp.gmail.com, smtp.office365.com and login.microsoftonline.com
# (which the root's /etc/hosts sends to loopback) and localhost, AUTH
# pkguser@example.org:pkg-pass-1.
(cd "$work/certs" && openssl req -new -newkey rsa:2048 -nodes -keyout relay.key -out relay.csr \
	-subj /CN=relay -addext "subjectAltName=DNS:smtp.gmail.com,DNS:smtp.office365.com,DNS:login.microsoftonline.com,DNS:localhost,IP:127.0.0.1" \
	>/dev/null 2>&1 && openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in relay.csr \
	-days 30 -out relay.pem >/dev/null 2>&1) || { echo "package-test: cannot sign relay.pem" >&2; exit 1; }
/usr/bin/python3 "$top/tests/upstream/upstream.py" --cert "$work/certs/relay.pem" \
	--key "$work/certs/relay.key" --auth pkguser@example.org:pkg-pass-1 --record "$work/relay.log" \
	>"$work/relay.out" 2>"$work/relay.err" &
pids="$pids $!"
wait_for 20 grep -q '^PORT ' "$work/relay.out" || { cat "$work/relay.err"; exit 1; }
rport=$(sed -n 's/^PORT //p' "$work/relay.out")
printf '127.0.0.1\tsmtp.gmail.com smtp.office365.com login.microsoftonline.com\n' >>"$root/etc/hosts"
mount -t proc proc "$root/proc" && mounts="$root/proc $mounts"
mount --bind /dev "$root/dev" && mounts="$root/dev $mounts"
relayed() {	# N [RECORD]: the stand-in relay accepted N messages in all
	[ "$(grep -c '"event": "data"' "$work/${2:-relay.log}" 2>/dev/null)" -ge "$1" ]
}
preseed() {	# "QUESTION TYPE VALUE" lines on stdin
	sed 's/^/weir /' | chroot "$root" debconf-set-selections
}
not() { ! "$@"; }
in_block() {	# PATTERN: a line of weir.conf's debconf block matches it
	sed -n '/^# BEGIN debconf/,/^# END debconf/p' "$root/etc/weir/weir.conf" | grep -q "$1"
}
no_secret_in_debconf() {	# TEXT
	! grep -rqs -- "$1" "$root/var/cache/debconf"
}
# As an administrator would after the answers: the test CA and the
# stand-in's port, by hand, inside the upstream section debconf wrote;
# the LAN's listener on a free loopback port, not on every address's 25.
hand_edit() {	# UPSTREAM [PORT]
	cp "$work/certs/ca.pem" "$root/etc/weir/test-ca.pem"
	sed -i "/^upstream \"$1\" {/a\\  ca_file = \"/etc/weir/test-ca.pem\"\\n  port = ${2:-$rport}" \
		"$root/etc/weir/weir.conf"
	lport=$(free_port)
	sed -i "s/^  address = {\"0.0.0.0:25\", \"\[::\]:25\"}\$/  address = {\"127.0.0.1:$lport\"}/" \
		"$root/etc/weir/weir.conf"
	echo 'concurrency = 2' >>"$root/etc/weir/weir.conf"	# and outside the block
}
# test-relay through UPSTREAM, then a message from sendmail as nobody
# through weir run: the stand-in (its record RECORD, relay.log unless
# given) must have N messages in all.
relay_through() {	# FAMILY UPSTREAM N [RECORD]
	check "$1: weir test-relay $2 against the stand-in" sh -c \
		"chroot '$root' weir test-relay -v '$2' >'$work/tr-$1.log' 2>&1"
	grep -q "^$2: passed" "$work/tr-$1.log" || sed 's/^/    /' "$work/tr-$1.log"
	rm -rf "$root/run/weir"
	start_weir
	check "$1: weir-gate's socket appears" wait_for 20 test -S "$root/run/weir/gate.sock"
	check "$1: sendmail as nobody" sh -c \
		"printf 'Subject: $1\n\nthrough upstream $2\n' |
		chroot --userspec=nobody:nogroup '$root' /usr/sbin/sendmail -f cron@relay.example.org someone@example.com"
	check "$1: the message reached the stand-in" wait_for 60 relayed "$3" "${4:-relay.log}"
}
purge_weir() {
	in_root dpkg --purge weir >"$work/purge-$1.log" 2>&1 || { cat "$work/purge-$1.log"; exit 1; }
	check "$1: purge removes /etc/weir" test ! -e "$root/etc/weir"
	check "$1: purge leaves no weir question in debconf's database" \
		sh -c "! grep -qs '^Name: weir/' '$root/var/cache/debconf/config.dat' '$root/var/cache/debconf/passwords.dat'"
}

# 1. A password provider (Gmail: smtp.gmail.com, an app password).
preseed <<'ANS'
weir/mailname string relay.example.org
weir/provider select gmail
weir/username string pkguser@example.org
weir/password password pkg-pass-1
weir/admin string postmaster@example.org
weir/lan boolean true
weir/lan_networks string 192.0.2.0/24
ANS
install_deb install-gmail.log
ok "installed with preseeded answers (gmail)"
check "gmail: the block names the preset" in_block '^  preset = "gmail"$'
check "gmail: the block has the account" in_block '^  username = "pkguser@example.org"$'
check "gmail: local senders become the account's" in_block '^  rewrite_default = "pkguser@example.org"$'
check "gmail: hostname from the mail name" in_block '^hostname = "relay.example.org"$'
check "gmail: the LAN may send" in_block '"127.0.0.0/8", "::1/128", "192.0.2.0/24"'
check "gmail: on port 25 of every address" in_block '^  address = {"0.0.0.0:25", "\[::\]:25"}$'
expect_mode /etc/weir/weir.conf "644 root:root"
expect_mode /etc/weir/secret "600 weir-remote:root"
check "gmail: the password is in the secret file" grep -qx pkg-pass-1 "$root/etc/weir/secret"
check "gmail: no password left in debconf's database" no_secret_in_debconf pkg-pass-1
hand_edit gmail
check "gmail: weir check-config with the preset" sh -c "chroot '$root' weir check-config >'$work/cc-gmail.log' 2>&1"
check "gmail: check-config shows the preset's host and the hand-edited port" sh -c \
	"grep -q '^  host  *= \"smtp.gmail.com\"  *preset gmail' '$work/cc-gmail.log' &&
	grep -q '^  port  *= $rport  *[^ ]*weir.conf:' '$work/cc-gmail.log'"
check "gmail: weir presets lists the installed presets" sh -c \
	"chroot '$root' weir presets | grep -q '^microsoft365: Microsoft 365'"
relay_through gmail gmail 1
check "gmail: weir-smtpd listens where the hand edit put it" listening "$lport"
check "gmail: the stand-in saw AUTH by the account" grep -q '"user": "pkguser@example.org", "ok": true' "$work/relay.log"
check "gmail: weir status names the preset" sh -c \
	"chroot '$root' weir status 2>&1 | grep -q 'upstream gmail (preset gmail):'"
stop_weir
# dpkg-reconfigure with new answers: the hand edit stays, the new
# answers are written, the new password replaces the old.
preseed <<'ANS'
weir/mailname string mx.example.net
weir/password password pkg-pass-2
ANS
DEBIAN_FRONTEND=noninteractive in_root dpkg-reconfigure weir >"$work/reconf.log" 2>&1 ||
	{ cat "$work/reconf.log"; exit 1; }
ok "dpkg-reconfigure weir with new answers"
check "reconfigure: the new mail name" in_block '^hostname = "mx.example.net"$'
check "reconfigure: the hand-edited port is kept" in_block "^  port = $rport\$"
check "reconfigure: the hand-edited ca_file is kept" in_block '^  ca_file = "/etc/weir/test-ca.pem"$'
check "reconfigure: the line added outside the block is kept" grep -qx 'concurrency = 2' "$root/etc/weir/weir.conf"
check "reconfigure: the new password in the secret file" grep -qx pkg-pass-2 "$root/etc/weir/secret"
expect_mode /etc/weir/secret "600 weir-remote:root"
check "reconfigure: no password left in debconf's database" no_secret_in_debconf pkg-pass-2
check "reconfigure: weir check-config" sh -c "chroot '$root' weir check-config >'$work/cc-reconf.log' 2>&1"
purge_weir gmail

# 2. An OAuth provider (Microsoft 365): the client's id and tenant; the
# sign-in is left to the administrator, so mail waits until it is done.
preseed <<'ANS'
weir/mailname string relay.example.org
weir/provider select microsoft365
weir/username string relay@contoso.example
weir/oauth_client_id string 00001111-aaaa-2222-bbbb-3333cccc4444
weir/oauth_tenant string contoso.example
ANS
install_deb install-m365.log
ok "installed with preseeded answers (microsoft365)"
check "m365: the block names the preset" in_block '^  preset = "microsoft365"$'
check "m365: the oauth section has the client id" in_block '^    client_id = "00001111-aaaa-2222-bbbb-3333cccc4444"$'
check "m365: and the tenant" in_block '^    tenant = "contoso.example"$'
check "m365: no secret_file (OAuth)" not in_block '^  secret_file'
check "m365: postinst says the command to run" grep -q 'weir auth login microsoft365' "$work/install-m365.log"
check "m365: check-config names the sign-in still to do" sh -c \
	"chroot '$root' weir check-config 2>&1 | grep -q 'weir auth login microsoft365'"
expect_mode /etc/weir/secret "600 weir-remote:root"
# The sign-in as the administrator does it, at stand-ins for Entra ID
# (tests/upstream/idp.py: the device grant, for this client id only) and
# for Exchange Online's SMTP AUTH (upstream.py taking only idp.py's
# access tokens, by XOAUTH2 or OAUTHBEARER), both under the names the
# preset uses; the endpoints' port set by hand in the oauth section.
/usr/bin/python3 "$top/tests/upstream/idp.py" --cert "$work/certs/relay.pem" \
	--key "$work/certs/relay.key" --client-id 00001111-aaaa-2222-bbbb-3333cccc4444 \
	--record "$work/idp.log" --issued "$work/idp.issued" --secrets "$work/idp.secrets" \
	>"$work/idp.out" 2>"$work/idp.err" &
pids="$pids $!"
wait_for 20 grep -q '^PORT ' "$work/idp.out" || { cat "$work/idp.err"; exit 1; }
iport=$(sed -n 's/^PORT //p' "$work/idp.out")
/usr/bin/python3 "$top/tests/upstream/upstream.py" --cert "$work/certs/relay.pem" \
	--key "$work/certs/relay.key" --oauth-issued "$work/idp.issued" --record "$work/exo.log" \
	>"$work/exo.out" 2>"$work/exo.err" &
pids="$pids $!"
wait_for 20 grep -q '^PORT ' "$work/exo.out" || { cat "$work/exo.err"; exit 1; }
hand_edit microsoft365 "$(sed -n 's/^PORT //p' "$work/exo.out")"
idp="https://login.microsoftonline.com:$iport"
sed -i "/^    tenant = /a\\    device_endpoint = \"$idp/devicecode\"\\n    token_endpoint = \"$idp/token\"\\n    ca_file = \"/etc/weir/test-ca.pem\"" \
	"$root/etc/weir/weir.conf"
check "m365: weir auth login microsoft365 (the device grant; the user enters the code)" sh -c \
	"/usr/bin/python3 '$top/tests/upstream/oauth_user.py' --idp 'https://127.0.0.1:$iport' \
	--ca '$work/certs/ca.pem' -- chroot '$root' weir auth login microsoft365 >'$work/login-m365.log' 2>&1" ||
	sed 's/^/    /' "$work/login-m365.log"
expect_mode /var/lib/weir/oauth/microsoft365 "600 weir-remote:weir-remote"
check "m365: weir auth status" sh -c "chroot '$root' weir auth status >'$work/as-m365.log' 2>&1" ||
	sed 's/^/    /' "$work/as-m365.log"
check "m365: check-config no longer asks for the sign-in" sh -c \
	"chroot '$root' weir check-config >'$work/cc-m365.log' 2>&1 && ! grep -q 'weir auth login' '$work/cc-m365.log'"
relay_through m365 microsoft365 1 exo.log
check "m365: the stand-in saw AUTH by an access token of the provider's" \
	grep -Eq '"mechanism": "(XOAUTH2|OAUTHBEARER)".*"ok": true' "$work/exo.log"
stop_weir
# No token the provider made (idp.py's --secrets) in weir's output.
check "m365: no token in weir's log, its outputs or debconf's database" sh -c \
	"[ -s '$work/idp.secrets' ] && ! grep -rqsF -f '$work/idp.secrets' '$work/weir.log' '$work/login-m365.log' '$work/tr-m365.log' \
	'$work/as-m365.log' '$work/cc-m365.log' '$root/var/cache/debconf'"
purge_weir m365

# 3. Another relay (an ISP's, here the stand-in on localhost): host,
# port and TLS from the answers; the sample limits of policy.conf.
preseed <<ANS
weir/mailname string relay.example.org
weir/provider select other
weir/relay_host string localhost
weir/relay_port string $rport
weir/relay_tls select starttls
weir/username string pkguser@example.org
weir/password password pkg-pass-1
weir/lan boolean false
ANS
install_deb install-isp.log
ok "installed with preseeded answers (another relay)"
check "isp: the block has the relay" sh -c "grep -q '^  host = \"localhost\"\$' '$root/etc/weir/weir.conf' && grep -q '^  port = $rport\$' '$root/etc/weir/weir.conf'"
check "isp: no listen section (no LAN)" sh -c "! grep -q '^listen {' '$root/etc/weir/weir.conf'"
cp "$work/certs/ca.pem" "$root/etc/weir/test-ca.pem"
sed -i '/^upstream "relay" {/a\  ca_file = "/etc/weir/test-ca.pem"' "$root/etc/weir/weir.conf"
check "isp: no password left in debconf's database" no_secret_in_debconf pkg-pass-1
relay_through isp relay 2
stop_weir
purge_weir isp
for m in $mounts; do umount "$m"; done
mounts=""

step "weir.service: a root with systemd, install, boot it (systemd-nspawn)"
rm -rf "$root"
make_root systemd,cron
mount -t proc proc "$root/proc" && mounts="$root/proc $mounts"
mount --bind /dev "$root/dev" && mounts="$root/dev $mounts"
cp "$deb" "$root/tmp/weir.deb"
install_deb reinstall.log
for m in $mounts; do umount "$m"; done
mounts=""
smtpport=$(free_port)
# A name this time: weir-remote resolves it (getaddrinfo, AI_ADDRCONFIG)
# under the unit's RestrictAddressFamilies=.
configure "$smtpport" localhost
# No own network (loopback is the host's), no registration with
# machined (there may be no system bus here), no console.
systemd-nspawn --quiet --register=no --keep-unit --console=passive \
	--machine="weirpkg$$" --directory="$root" --boot >"$work/nspawn.log" 2>&1 &
nspawn=$!
ct_init() {	# the container's PID 1, as the host sees it
	for c in $(cat /proc/"$nspawn"/task/*/children 2>/dev/null); do
		[ "$(cat /proc/"$c"/comm 2>/dev/null)" = systemd ] && echo "$c" && return 0
	done
	return 1
}
ct_pids() {	# every process in the container's PID namespace
	ns=$(readlink "/proc/$init/ns/pid")
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}"
	done
	return 0
}
in_ct() { nsenter --target "$init" --mount --uts --ipc --net --pid --root --wd -- "$@"; }
booted() {
	case $(in_ct systemctl is-system-running 2>/dev/null) in
	running|degraded) return 0 ;;
	*) return 1 ;;
	esac
}
if ! wait_for 30 ct_init >/dev/null || ! init=$(ct_init) || ! wait_for 90 booted; then
	no "the root boots with systemd"
	tail -n 30 "$work/nspawn.log"
else
	ok "the root boots with systemd ($(in_ct systemctl is-system-running 2>/dev/null))"
	check "weir.service is active" wait_for 30 sh -c "[ \"\$(nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- systemctl is-active weir)\" = active ]"
	check "weir-smtpd listens" wait_for 30 listening "$smtpport"
	lister=ct_pids
	check_users
	check "mailq as nobody under weir.service (weir-showq, /run/weir-showq)" sh -c \
		"nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- \
		runuser -u nobody -- mailq | grep -q '^messages in queue: '"
	check "sendmail as nobody in the container" sh -c \
		"printf 'Subject: under systemd\n\nhello from weir.service\n' |
		nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- \
		runuser -u nobody -- /usr/sbin/sendmail -f cron@relay.example.org unit@example.com"
	check "SMTP to weir-smtpd under systemd" smtp_send "$smtpport" lan@example.net "over SMTP under systemd"
	check "both reached the upstream (weir-queue and weir-remote set-id under the unit's hardening)" \
		wait_for 60 arrived 5
	# Debian 12's cron runs "sendmail -FCronDaemon -i -B8BITMIME -oem root"
	# (issue 13: every cron mail was lost).  It rescans /etc/cron.d each
	# minute: the job runs within two; it removes itself, so it runs once.
	printf '* * * * * root rm -f /etc/cron.d/weir-pkgtest; echo "output of a cron job %s"\n' \
		"$$" >"$root/etc/cron.d/weir-pkgtest"
	check "a cron job's output reached the upstream (cron's own sendmail line)" \
		wait_for 150 sh -c "grep -qs 'output of a cron job $$' '$work'/upstream.log.*"
	check "the journal has a line per delivery with the queue id" \
		sh -c "nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- journalctl -u weir --no-pager |
		grep -Eq 'weir-send\\[[0-9]+\\]: info: msg [0-9]+\\.[0-9]+\\.[0-9]{9}: delivered to <unit@example.com>'"
	gatepid=$(for p in $(ct_pids); do
		grep -q '^Name:[[:space:]]*weir-gate$' "/proc/$p/status" && echo "$p"
	done; true)
	check "systemctl reload weir" in_ct systemctl reload weir
	check "weir-gate re-read the policy (SIGHUP)" wait_for 10 sh -c \
		"nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- journalctl -u weir --no-pager |
		grep -q 'weir-gate\[[0-9]*\]: info: policy /etc/weir/policy.conf loaded (SIGHUP)'"
	check "reload restarted nothing" sh -c "[ -n '$gatepid' ] && grep -q '^Name:[[:space:]]*weir-gate$' /proc/$gatepid/status"
	# A broken weir.conf: the restart fails once, no restart loop.
	cp "$root/etc/weir/weir.conf" "$work/weir.conf.good"
	echo 'this line is not weir.conf' >>"$root/etc/weir/weir.conf"
	# Type=simple: systemctl returns once weir run is started; weir run
	# then exits 2 on the file it cannot load and the unit fails.
	in_ct systemctl restart weir >/dev/null 2>&1 || true
	check "weir.service failed on a broken weir.conf" wait_for 10 sh -c "[ \"\$(nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- systemctl is-active weir)\" = failed ]"
	sleep 12	# more than RestartSec=5s twice: a restart loop would show
	check "no restart followed (NRestarts=0, still failed)" sh -c \
		"[ \"\$(nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- systemctl show -p NRestarts --value weir)\" = 0 ] &&
		[ \"\$(nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- systemctl is-active weir)\" = failed ]"
	check "the journal names the broken line (file:line)" sh -c \
		"nsenter --target $init --mount --uts --ipc --net --pid --root --wd -- journalctl -u weir --no-pager |
		grep -q '/etc/weir/weir.conf:[0-9]'"
	cp "$work/weir.conf.good" "$root/etc/weir/weir.conf"
	check "systemctl start weir with the file repaired" in_ct systemctl start weir
	in_ct systemd-analyze security weir.service >"$work/security.txt" 2>&1 || true
	echo "    systemd-analyze security (in the container): $(tail -n 1 "$work/security.txt")"
	if [ "$failed" -gt 0 ]; then
		in_ct journalctl -u weir --no-pager | tail -n 30 | sed 's/^/    journal: /'
	fi
	check "systemctl stop weir" in_ct systemctl stop weir
	in_ct systemctl poweroff >/dev/null 2>&1 || true
	if wait_for 30 sh -c "! { [ -e /proc/$nspawn/status ] && ! grep -q '^State:[[:space:]]*Z' /proc/$nspawn/status; }"; then
		ok "the container shut down"
	else
		no "the container shut down"
	fi
	wait "$nspawn" 2>/dev/null || true
	nspawn=""
fi

echo "package-test: $(( $(date +%s) - t0 ))s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
