#!/bin/sh
# scripts/samenames.sh [BUILD]: function names defined in more than one
# folder of src/ (a program's, lib's or mail's) where at least one of
# the definitions has external linkage: two programs' functions by one
# name mislead a reader, a tags file and a test that links both
# (libprogs.a).  Static functions of the same name in two folders (each
# program's on_hup, usage) are left alone.  Each line: NAME: the places,
# folder/file:line, * on those with external linkage (nm on BUILD's
# objects; `make all` first; make check runs it on BUILD/arch through
# scripts/architecture.sh).  Prints nothing when there is none.
# Needs ctags (universal or exuberant) and nm.
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
ext=$(mktemp) || exit 1
trap 'rm -f "$ext"' EXIT
# Each file's names with external linkage, from its object: "FILE NAME".
for f in src/*/*.c; do
	nm -g --defined-only "$BUILD/${f%.c}.o" 2>/dev/null | awk -v f="$f" 'NF == 3 { print f, $3 }'
done >"$ext"
ctags -x --c-kinds=f --language-force=C src/*/*.c | awk '
NR == FNR { ext[$1, $2] = 1; next }
$1 != "main" { print $1, substr($4, 5) ":" $3 ((($4, $1) in ext) ? "*" : "") }' "$ext" - | awk '
{ split($2, p, "/"); at[$1] = at[$1] " " $2; if ($2 ~ /\*$/) ext[$1] = 1
  if (!(($1, p[1]) in seen)) { seen[$1, p[1]] = 1; folders[$1]++ } }
END { for (n in folders) if (folders[n] > 1 && ext[n]) print n ":" at[n] }' | sort
