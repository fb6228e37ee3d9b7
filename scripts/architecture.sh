#!/bin/sh
# scripts/architecture.sh OBJDIR: keep ARCHITECTURE.md's claims true,
# against the code.  make check runs it through `make architecture-check`,
# which first compiles every source into OBJDIR (BUILD/arch: unoptimized,
# a section per function and datum; see the Makefile).  Fails, naming
# what is wrong, when
#  - the picture's edges between programs (scripts/architecture.dot) are
#    not those the code makes: scripts/procedges.py derives from OBJDIR
#    who runs whom and who connects to whose socket, and a missing or an
#    extra edge fails; so does a program of the Makefile's ALL_PROGRAMS
#    without its node (named as the program, whole) or a box that is no
#    program;
#  - the committed picture, scripts/architecture.svg, does not show what
#    `make architecture` renders from that source (its nodes, edges and
#    words; not the layout, which depends on the fonts at hand);
#  - ARCHITECTURE.md's table of programs lacks a program of ALL_PROGRAMS
#    or names one that is not (names in backquotes, matched whole);
#  - the dependency rule is broken: src/lib includes only src/lib,
#    src/mail only src/lib and src/mail, a program's folder only those
#    two and itself;
#  - ARCHITECTURE.md names a file that is not there (a path from the top
#    of the tree; a bare name in its weir-send section is in src/send/);
#  - an interface of ARCHITECTURE.md's table lacks, in its "tested by"
#    cell, a unit test (tests/unit/) that includes one of the headers of
#    its "defined in" cell, and either a fuzz target (tests/fuzz/) with a
#    seed corpus or the words "not fuzzed:" and why (bytes only from a
#    side as trusted as the reader);
#  - weir-send's stage map (src/send/sendint.h, "Who calls whom") is not
#    what scripts/calllinks.py reads from its objects;
#  - weir-send's circle (its files that reach each other through their
#    calls) has another number of links than src/send/sendint.h says
#    (scripts/sendcircle.sh);
#  - scripts/samenames.sh finds a function name defined in two folders;
#  - src/mail/README.md does not list every module of src/mail (a .c or
#    .h without its suffix), or lists one that is not there.
set -eu
cd "$(dirname "$0")/.."
objdir=${1:-}
if [ -z "$objdir" ] || [ ! -d "$objdir/src" ]; then
	echo "usage: $0 BUILD/arch (make architecture-check compiles it)" >&2
	exit 2
fi
tmp=${TMPDIR:-/tmp}/weir-arch.$$
trap 'rm -f "$tmp"' EXIT
bad=0
progs=$(sed -n 's/^ALL_PROGRAMS := //p' Makefile)
[ -n "$progs" ] || { echo "architecture: no ALL_PROGRAMS in the Makefile" >&2; exit 1; }
names=$(for p in $progs; do echo "${p%%:*}"; done)

# The picture against the code (procedges.py says what is wrong).
# shellcheck disable=SC2086 # one argument per program
scripts/procedges.py --dot scripts/architecture.dot "$objdir" $progs || bad=1

# What the picture says, without where it says it: its nodes, edges and
# words (a layout depends on the fonts of the machine that renders it).
said() { grep -o '<title>[^<]*</title>\|<text[^>]*>[^<]*</text>' | sed 's/<text[^>]*>/<text>/'; }
dot -Tsvg scripts/architecture.dot | said >"$tmp"
if ! said <scripts/architecture.svg | cmp -s - "$tmp"; then
	echo "architecture: scripts/architecture.svg is not scripts/architecture.dot's" \
		"picture: run make architecture and commit it" >&2
	bad=1
fi

# The table of programs: the first cell's names in backquotes.
sed -n '/^## The programs/,/^## /s/^| \([^|]*\)|.*/\1/p' ARCHITECTURE.md |
    grep -o '`[^`]*`' | tr -d '`' | sort -u >"$tmp"
for n in $names; do
	grep -qxF -- "$n" "$tmp" || {
		echo "architecture: ARCHITECTURE.md's table of programs has no row for $n" >&2; bad=1; }
done
while read -r n; do
	[ "$n" = mailq ] && continue	# sendmail's other name
	echo "$names" | grep -qxF -- "$n" || {
		echo "architecture: ARCHITECTURE.md's table of programs names $n," \
			"which is not in the Makefile's ALL_PROGRAMS" >&2; bad=1; }
done <"$tmp"

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
}' ARCHITECTURE.md | sort -u >"$tmp"
while read -r f; do
	# shellcheck disable=SC2086 # a name may be a pattern (src/gate/*.lua)
	ls -d $f >/dev/null 2>&1 || { echo "architecture: ARCHITECTURE.md names $f," \
		"which is not in the tree" >&2; bad=1; }
done <"$tmp"

# The interfaces: each row's "defined in" (third) and "tested by"
# (fourth) cells, tab-separated, with its first cell to name it.
sed -n '/^## The interfaces/,/^## /p' ARCHITECTURE.md | awk -F'|' '
/^\|/ && $2 !~ /^ *(interface|-+) *$/ { gsub(/\t/, " "); print $2 "\t" $4 "\t" (NF >= 6 ? $5 : "") }' >"$tmp"
[ -s "$tmp" ] || { echo "architecture: ARCHITECTURE.md has no table of interfaces" \
	"with a \"tested by\" column" >&2; bad=1; }
while IFS="$(printf '\t')" read -r what defined tested; do
	what=$(echo "$what" | sed 's/^ *//; s/ *$//')
	hdrs=$(echo "$defined" | grep -o 'src/[a-z]*/[a-z]*\.h' | sed 's|^src/||' | tr '\n' ' ') || true
	units=$(echo "$tested" | grep -o 'tests/unit/[a-z_]*_test\.c') || true
	fuzzes=$(echo "$tested" | grep -o 'tests/fuzz/[a-z_]*_fuzz\.c') || true
	[ -n "$units" ] || { echo "architecture: the interface \"$what\" names no unit test" \
		"(tests/unit/) in ARCHITECTURE.md" >&2; bad=1; }
	for t in $units $fuzzes; do
		[ -f "$t" ] || continue		# said above: not in the tree
		found=0
		for h in $hdrs; do
			grep -q "^#include \"$h\"" "$t" && found=1
		done
		[ $found -eq 1 ] || { echo "architecture: $t, a test of the interface \"$what\"," \
			"includes none of its headers (${hdrs% })" >&2; bad=1; }
	done
	for t in $fuzzes; do
		c=tests/fuzz/corpus/$(basename "$t" _fuzz.c)
		[ -n "$(ls -A "$c" 2>/dev/null)" ] || { echo "architecture: $t has no seed corpus" \
			"($c)" >&2; bad=1; }
	done
	[ -n "$fuzzes" ] || echo "$tested" | grep -q 'not fuzzed: [a-z]' || {
		echo "architecture: the interface \"$what\" names no fuzz target (tests/fuzz/)" \
			"and does not say why (\"not fuzzed: ...\") in ARCHITECTURE.md" >&2; bad=1; }
done <"$tmp"

scripts/calllinks.py --check src/send/sendint.h "$objdir/src/send" || {
	echo "architecture: src/send/sendint.h's map is not what scripts/calllinks.py reads" \
		"from the objects" >&2; bad=1; }
scripts/sendcircle.sh "$objdir/src/send" || bad=1

scripts/samenames.sh "$objdir" >"$tmp"
[ ! -s "$tmp" ] || { sed 's/^/architecture: a function name in two folders: /' "$tmp" >&2; bad=1; }

# src/mail's modules: each .c and .h without its suffix; src/mail/README.md
# lists them in the first cell of its tables, in backquotes.
sed -n 's/^| \([^|]*\)|.*/\1/p' src/mail/README.md | grep -o '`[^`]*`' | tr -d '`' |
    sort -u >"$tmp"
for m in $(for f in src/mail/*.[ch]; do f=${f##*/}; echo "${f%.?}"; done | sort -u); do
	grep -qxF -- "$m" "$tmp" || {
		echo "architecture: src/mail/README.md does not list src/mail's $m" >&2; bad=1; }
done
while read -r m; do
	[ -f "src/mail/$m.c" ] || [ -f "src/mail/$m.h" ] || {
		echo "architecture: src/mail/README.md lists $m, which is not in src/mail" >&2; bad=1; }
done <"$tmp"

[ $bad -eq 0 ] && echo "architecture: picture drawn from the code and current, programs," \
	"interfaces with their tests, dependency rule, weir-send's map and circle, names and" \
	"src/mail's modules as the code has them"
exit $bad
