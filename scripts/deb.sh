#!/bin/sh
# scripts/deb.sh OUTDIR: build weir's Debian package from a copy of this
# tree (the files git knows plus new ones it does not ignore), so neither
# the tree nor any other build folder is touched, then run lintian on it.
# Leaves OUTDIR/weir_<version>_<arch>.deb (and the .buildinfo, .changes,
# -dbgsym and lintian.txt); prints the .deb's path last.
# Fails on a lintian error; warnings must be fixed or overridden with a
# reason in debian/weir.lintian-overrides.
set -eu
out=${1:?usage: scripts/deb.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(mktemp -d "${TMPDIR:-/tmp}/weir-deb.XXXXXX")
trap 'rm -rf "$src"' EXIT
trap 'exit 130' INT TERM

# dpkg-buildpackage puts its results in the parent of the source folder.
mkdir "$src/weir"
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 -r sh -c 'for f; do [ -e "$f" ] || [ -L "$f" ] && printf "%s\0" "$f"; done' sh |
	tar --null -T - -cf -) | tar -C "$src/weir" -xf -
# The Makefile's variables must not come from the caller's environment
# (BUILD=... make package-test would otherwise name a folder that
# debian/rules' make clean removes).
unset BUILD PREFIX DESTDIR LIBEXECDIR SYSCONFDIR BINDIR SBINDIR MANDIR CC CFLAGS CPPFLAGS LDFLAGS
(cd "$src/weir" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log" >&2
	echo "deb: dpkg-buildpackage failed; the whole log is $out/build.log" >&2
	exit 1
}
for f in "$src"/*.deb "$src"/*.ddeb "$src"/*.buildinfo "$src"/*.changes; do
	[ -e "$f" ] && mv -f "$f" "$out/"
done
changes=$(ls "$out"/weir_*.changes | tail -n 1)
deb=$(ls "$out"/weir_*_*.deb | grep -v dbgsym | tail -n 1)
# --fail-on error: warnings are listed but do not fail the build.
asroot=""
[ "$(id -u)" -ne 0 ] || asroot=--allow-root
lintian $asroot --fail-on error --info --display-info "$changes" >"$out/lintian.txt" 2>&1 || {
	cat "$out/lintian.txt" >&2
	echo "deb: lintian found errors" >&2
	exit 1
}
sed 's/^/lintian: /' "$out/lintian.txt" | grep -v '^lintian: N: ' || true
echo "$deb"
