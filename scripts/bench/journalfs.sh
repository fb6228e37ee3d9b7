#!/bin/bash
# scripts/bench/journalfs.sh CMD [ARG...]: run a benchmark on the file
# system a Debian install has, ext4 with a journal (mkfs.ext4's and
# mount's defaults: data=ordered), whatever the machine's own disk is.
# The file system is made in a sparse file (SIZE, default 4G) under
# IMG_DIR (default /var/tmp), mounted on a loop device, given to CMD as
# BENCH_DIR, then unmounted and removed, even when CMD fails.  Run as
# root.  A benchmark helper, not a test.
#
#   scripts/bench/journalfs.sh scripts/bench/compare.sh
set -eu
[ $# -ge 1 ] || { echo "usage: journalfs.sh CMD [ARG...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "journalfs.sh: run as root (mount)" >&2; exit 2; }
img=$(mktemp "${IMG_DIR:-/var/tmp}/weir-bench-fs.XXXXXX")
mnt=$(mktemp -d /tmp/weir-bench-mnt.XXXXXX)
mounted=""
cleanup() {
	[ -z "$mounted" ] || umount "$mnt" || umount -l "$mnt"
	rmdir "$mnt"
	rm -f "$img"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
truncate -s "${SIZE:-4G}" "$img"
mkfs.ext4 -q -F "$img"
mount -o loop "$img" "$mnt"
mounted=1
echo "journalfs: ext4 with a journal on $(findmnt -n -o SOURCE "$mnt"), $(findmnt -n -o OPTIONS "$mnt")"
BENCH_DIR=$mnt "$@"
