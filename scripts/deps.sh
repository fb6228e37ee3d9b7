#!/bin/sh
# scripts/deps.sh build|demo|check|bench|package: make sure the Debian
# packages weir needs are installed.  As root, installs what is missing
# with apt-get; otherwise prints the exact apt-get command to run and fails.
set -eu
what=${1:-build}

# libcurl and json-c: OAuth's HTTPS calls and JSON (src/mail/oauth.c);
# json-c also for weir-metrics and weir status, libmicrohttpd for
# weir-metrics' HTTP server.
build="gcc make libc6-dev pkg-config libssl-dev libsasl2-dev libconfuse-dev libhiredis-dev libcurl4-openssl-dev libjson-c-dev libmicrohttpd-dev"
peers="openssl python3-aiosmtpd libsasl2-modules libsasl2-modules-db"
demo="$build $peers"
# check: postfix is also a private upstream in wire_test; bsd-mailx and mutt
# are real sendmail callers in callers_test; promtool (prometheus) checks
# weir-metrics' output; redis-server is the shared store of redis_test,
# redis-sentinel its failover in sentinel_test (and shared_window.sh);
# chromium (headless) loads weir-metrics' status page in statuspage_test;
# strace holds `weir run` in its first system calls in supervise_test;
# valgrind runs weir-gate while redis_test kills its Redis (memory errors
# on that path); oauth_test: tinyproxy is the HTTP proxy to the stand-in
# identity provider, iptables closes the direct way in the test's own
# network namespace, python3-cryptography checks the signed JWTs in idp.py;
# universal-ctags lists the functions for scripts/samenames.sh (run by
# scripts/architecture.sh).
check="$build $peers redis-server redis-sentinel libcriterion-dev util-linux swaks libnet-ssleay-perl clang libclang-rt-14-dev groff-base man-db curl prometheus postfix bsd-mailx mutt chromium graphviz strace valgrind tinyproxy iptables python3-cryptography universal-ctags"
# postfix for smtp-sink, smtp-source and the private Postfix peers of the
# benchmarks (installed unconfigured: it must not become an MTA here)
bench="$build $peers strace gnuplot-nox postfix"
# the Debian package: its build, lintian, and the throwaway Debian 12 root
# of the package test (mmdebstrap, booted with systemd-nspawn; the
# stand-in upstream runs on the host); po-debconf builds the translatable
# debconf templates (po2debconf, debconf-updatepo) and debconf-utils has
# debconf-get-selections, with which the test looks for a password left
# in debconf's database
package="$build debhelper dpkg-dev fakeroot lintian mmdebstrap systemd-container python3-aiosmtpd po-debconf debconf-utils"

case $what in
build) pkgs=$build ;;
demo) pkgs=$demo ;;
check) pkgs=$check ;;
bench) pkgs=$bench ;;
package) pkgs=$package ;;
*) echo "usage: $0 build|demo|check|bench|package" >&2; exit 2 ;;
esac

missing=""
for p in $pkgs; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case $st in
	*" installed") ;;
	*) missing="$missing $p" ;;
	esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "weir: missing Debian packages:$missing" >&2
	echo "weir: install them with:  sudo apt-get install$missing" >&2
	exit 1
fi
echo "weir: installing$missing"
export DEBIAN_FRONTEND=noninteractive
case " $missing " in
*" postfix "*)
	echo "postfix postfix/main_mailer_type select No configuration" |
		debconf-set-selections ;;
esac
# A fresh machine has no package lists; refresh them once if needed.
if ! apt-get install -y -q --no-install-recommends $missing; then
	apt-get update -q
	apt-get install -y -q --no-install-recommends $missing
fi
