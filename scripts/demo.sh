#!/bin/sh
# scripts/demo.sh: what `make demo` shows.  For now weir's first
# capability end to end: mail handed to `sendmail` (as cron and list
# managers do) lands durably in a scratch qmail-layout queue; `mailq`
# lists it and `weir queue-check` verifies every file.  Delivery to an
# upstream arrives with the scheduler (weir-send, weir-gate, weir-remote).
# Runs as any user; touches nothing outside a folder under /tmp.
set -eu
BIN=$(cd "${BUILD:-build}/bin" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

export WEIR_QUEUE="$work/queue" QMAILQUEUE="$BIN/weir-queue"
cat >"$work/weir.conf" <<CONF
hostname = "demo.example.org"
CONF
export WEIR_CONFIG="$work/weir.conf"

step() { printf '\n==> %s\n' "$*"; }

step "weir queue-init $WEIR_QUEUE"
"$BIN/weir" queue-init "$WEIR_QUEUE"

step "sendmail: a cron-style message to two recipients"
printf 'Subject: nightly backup\n\nbackup finished OK\n' |
	"$BIN/sendmail" -i admin@example.org ops@example.net

step "sendmail -t: recipients from the headers, Bcc removed"
"$BIN/sendmail" -t -i -f list-owner@demo.example.org <<MSG
From: Demo List <list@demo.example.org>
To: alice@example.com, "Bob B." <bob@example.net>
Cc: team: carol@example.org, dave@example.org;
Bcc: archive@demo.example.org
Subject: list post

Hello list.
MSG

step "sendmail: 20 more messages, as a burst from a script"
i=1
while [ $i -le 20 ]; do
	printf 'Subject: report %d\n\nline %d\n' $i $i | "$BIN/sendmail" -i "user$i@example.com"
	i=$((i + 1))
done

step "mailq (first messages; qmail-qread format)"
"$BIN/mailq" | head -n 12
echo "..."
"$BIN/mailq" | tail -n 2

step "one message as stored: todo/ envelope (NULs shown as |) and mess/ file"
id=$(ls "$WEIR_QUEUE/todo" | head -n 1)
tr '\0' '|' <"$WEIR_QUEUE/todo/$id"; echo
cat "$WEIR_QUEUE/mess/$((id % 23))/$id"

step "a bad envelope is refused with qmail-queue's exit code, nothing left behind"
set +e
printf 'Subject: x\n\n' | "$BIN/weir-queue" 1<<ENV
Xnot-an-envelope
ENV
echo "weir-queue exit code: $? (91 = envelope format error)"
set -e

step "weir queue-check: every file's format and every state sound"
"$BIN/weir" queue-check "$WEIR_QUEUE"
