# shellcheck shell=bash disable=SC2154 # variables set by the caller
# tests/lib/postfix.sh: a private Postfix instance, for the tests that
# need a real MTA as weir's upstream (tests/integration/postfix_upstream.sh)
# and for the benchmarks (scripts/bench/lib.sh sources this file; tests
# never source the benchmarks' code).  Sourced, not run.  The caller sets
# CONC (the instance's destination concurrency) and scratch (where the
# test certificates are, for pf_conf's starttls+auth mode).  Loopback
# only.

PY=${PY:-/usr/bin/python3}

# free_port: a free loopback TCP port, for a listener.
free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Postfix 3.7 (package postfix, as root) as a private instance: its own
# main.cf, master.cf, queue, data and log under a folder of the scratch
# folder; the system instance is never touched.
PF_DAEMONS=$(postconf -dh daemon_directory 2>/dev/null || true)
pf_ok() { [ "$(id -u)" = 0 ] && [ -x "$PF_DAEMONS/master" ] && getent passwd postfix >/dev/null; }

# pf_conf DIR RELAYPORT MODE(plain|starttls+auth): a fresh instance in DIR
# (etc/ spool/ data/ maillog), relayhost [127.0.0.1]:RELAYPORT, no
# listener; smtp_destination_concurrency_limit = CONC.  The caller may
# append to DIR/etc/main.cf and DIR/etc/master.cf before pf_start.
pf_conf() {
	local P=$1
	rm -rf "$P"
	mkdir -p "$P/etc" "$P/spool" "$P/data"
	chown postfix "$P/data"
	cat >"$P/etc/main.cf" <<-EOF
	compatibility_level = 3.6
	queue_directory = $P/spool
	data_directory = $P/data
	daemon_directory = $PF_DAEMONS
	command_directory = /usr/sbin
	mail_owner = postfix
	setgid_group = postdrop
	myhostname = relay.example.org
	myorigin = relay.example.org
	mydestination =
	inet_interfaces = loopback-only
	inet_protocols = ipv4
	mynetworks = 127.0.0.0/8
	relayhost = [127.0.0.1]:$2
	default_destination_concurrency_limit = $CONC
	smtp_destination_concurrency_limit = $CONC
	maillog_file = $P/maillog
	maillog_file_prefixes = $P
	alias_maps =
	alias_database =
	local_recipient_maps =
	biff = no
	EOF
	if [ "$3" = plain ]; then
		echo "smtp_tls_security_level = none" >>"$P/etc/main.cf"
	else
		echo "[127.0.0.1]:$2 me:pw" >"$P/etc/sasl_passwd"
		cat >>"$P/etc/main.cf" <<-EOF
		smtp_tls_security_level = secure
		smtp_tls_secure_cert_match = nexthop
		smtp_tls_CAfile = $scratch/certs/ca.pem
		smtp_sasl_auth_enable = yes
		smtp_sasl_password_maps = texthash:$P/etc/sasl_passwd
		smtp_sasl_security_options = noanonymous
		smtp_sasl_tls_security_options = noanonymous
		EOF
	fi
	cat >"$P/etc/master.cf" <<-'EOF'
	tlsmgr    unix  -       -       n       1000?   1       tlsmgr
	pickup    unix  n       -       n       60      1       pickup
	cleanup   unix  n       -       n       -       0       cleanup
	qmgr      unix  n       -       n       300     1       qmgr
	rewrite   unix  -       -       n       -       -       trivial-rewrite
	bounce    unix  -       -       n       -       0       bounce
	defer     unix  -       -       n       -       0       bounce
	trace     unix  -       -       n       -       0       bounce
	verify    unix  -       -       n       -       1       verify
	proxymap  unix  -       -       n       -       -       proxymap
	smtp      unix  -       -       n       -       -       smtp
	relay     unix  -       -       n       -       -       smtp
	showq     unix  n       -       n       -       -       showq
	error     unix  -       -       n       -       -       error
	retry     unix  -       -       n       -       -       error
	discard   unix  -       -       n       -       -       discard
	anvil     unix  -       -       n       -       1       anvil
	scache    unix  -       -       n       -       1       scache
	postlog   unix-dgram n  -       n       -       1       postlogd
	EOF
	# `postfix check` makes the queue folders (postdrop needs maildrop/).
	postfix -c "$P/etc" check >/dev/null 2>&1 || { echo "postfix check failed for $P" >&2; postfix -c "$P/etc" check >&2; exit 1; }
}

# pf_start DIR [WRAPPER...]: `master -d` of the instance in DIR, in a
# session of its own; sets PF_MASTER (its pid, also the session id).
pf_start() {
	local P=$1
	shift
	postfix -c "$P/etc" check >/dev/null 2>&1 || { echo "postfix check failed for $P" >&2; postfix -c "$P/etc" check >&2; exit 1; }
	MAIL_CONFIG=$P/etc setsid "$@" "$PF_DAEMONS/master" -c "$P/etc" -d 2>/dev/null &
	PF_MASTER=$!
}
pf_stop() {
	kill "$PF_MASTER" 2>/dev/null || true
	wait "$PF_MASTER" 2>/dev/null || true
}
# pf_left DIR: messages in the instance's maildrop/, incoming/, active/
# and deferred/.
pf_left() {
	find "$1/spool/maildrop" "$1/spool/incoming" "$1/spool/active" "$1/spool/deferred" \
		-type f 2>/dev/null | wc -l
}
