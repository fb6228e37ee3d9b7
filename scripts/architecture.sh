#!/bin/sh
# scripts/architecture.sh: keep ARCHITECTURE.md's claims true (run by
# make check).  Fails, naming what is wrong, when
#  - a program of the Makefile's ALL_PROGRAMS is missing from the
#    picture's source, scripts/architecture.dot;
#  - the committed picture, scripts/architecture.svg, does not show what
#    `make architecture` renders from that source (its nodes, edges and
#    words; not the layout, which depends on the fonts at hand);
#  - the dependency rule is broken: src/lib includes only src/lib,
#    src/mail only src/lib and src/mail, a program's folder only those
#    two and itself;
#  - ARCHITECTURE.md names a file that is not there (a path from the top
#    of the tree; a bare name in its weir-send section is in src/send/);
#  - weir-send's circle (its files that reach each other through their
#    calls) has another number of links than src/send/sendint.h says
#    (scripts/sendcircle.sh, on BUILD's objects: make check builds them
#    first).
set -eu
cd "$(dirname "$0")/.."
bad=0
progs=$(sed -n 's/^ALL_PROGRAMS := //p' Makefile)
[ -n "$progs" ] || { echo "architecture: no ALL_PROGRAMS in the Makefile" >&2; exit 1; }
for p in $progs; do
	name=${p%%:*}
	grep -q -- "$name" scripts/architecture.dot || {
		echo "architecture: $name is not in scripts/architecture.dot" >&2; bad=1; }
done
# What the picture says, without where it says it: its nodes, edges and
# words (a layout depends on the fonts of the machine that renders it).
said() { grep -o '<title>[^<]*</title>\|<text[^>]*>[^<]*</text>' | sed 's/<text[^>]*>/<text>/'; }
dot -Tsvg scripts/architecture.dot | said >"${TMPDIR:-/tmp}/weir-arch.$$"
if ! said <scripts/architecture.svg | cmp -s - "${TMPDIR:-/tmp}/weir-arch.$$"; then
	echo "architecture: scripts/architecture.svg is not scripts/architecture.dot's" \
		"picture: run make architecture and commit it" >&2
	bad=1
fi
for d in src/*/; do
	d=${d%/}; n=${d#src/}
	case $n in
	lib) ok="lib" ;;
	mail) ok="lib mail" ;;
	*) ok="lib mail $n" ;;
	esac
	for inc in $(sed -n 's/^#include "\([a-z]*\)\/.*/\1/p' "$d"/*.[ch] | sort -u); do
		case " $ok " in
		*" $inc "*) ;;
		*) echo "architecture: $d includes $inc/ headers (allowed: $ok)" >&2; bad=1 ;;
		esac
	done
done
awk '/^## / { sec = $2 }
{
	s = $0
	while (match(s, /`[^` ]+\.(c|h|md|sh|py|dot|lua)`/)) {
		f = substr(s, RSTART + 1, RLENGTH - 2)
		s = substr(s, RSTART + RLENGTH)
		if (f !~ /\//) {
			if (sec != "weir-send")
				continue
			f = "src/send/" f
		}
		print f
	}
}' ARCHITECTURE.md >"${TMPDIR:-/tmp}/weir-arch.$$"
while read -r f; do
	# shellcheck disable=SC2086 # a name may be a pattern (src/gate/*.lua)
	ls -d $f >/dev/null 2>&1 || { echo "architecture: ARCHITECTURE.md names $f," \
		"which is not in the tree" >&2; bad=1; }
done <"${TMPDIR:-/tmp}/weir-arch.$$"
rm -f "${TMPDIR:-/tmp}/weir-arch.$$"
scripts/sendcircle.sh "${BUILD:-build}/src/send" || bad=1
[ $bad -eq 0 ] && echo "architecture: picture current, dependency rule kept, every file named there"
exit $bad
