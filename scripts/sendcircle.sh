#!/bin/sh
# scripts/sendcircle.sh OBJDIR: weir-send's circle must not grow.  The
# circle is the largest set of weir-send's files that reach each other
# through their calls: scripts/calllinks.py's "largest cycle", read from
# the objects of src/send in OBJDIR (make architecture-check's
# BUILD/arch/src/send).  src/send/sendint.h says how many links it has
# ("... have N links among them").  Fails, naming both figures, when the
# objects' circle has more links than that (a new call between two of
# its files, or a file drawn into it), and when it has fewer (then the
# header's figure is lowered, so that what was won stays won).  Run by
# scripts/architecture.sh (make check, through make architecture-check).
set -eu
cd "$(dirname "$0")/.."
objdir=${1:-}
header=src/send/sendint.h
if [ -z "$objdir" ] || ! ls "$objdir"/*.o >/dev/null 2>&1; then
	echo "sendcircle: no objects in ${objdir:-(none given)}; usage: $0 OBJDIR (BUILD/arch/src/send)" >&2
	exit 2
fi
said=$(tr -d '\n*' <"$header" | tr -s ' \t' '  ' |
    sed -n 's/.*have \([0-9][0-9]*\) links among them.*/\1/p')
[ -n "$said" ] || { echo "sendcircle: $header does not say how many links the circle has" \
	"(\"have N links among them\")" >&2; exit 2; }
line=$(scripts/calllinks.py "$objdir" | sed -n 's/^largest cycle: //p')
links=$(echo "$line" | sed -n 's/.*), \([0-9][0-9]*\) links,.*/\1/p')
[ -n "$links" ] || { echo "sendcircle: calllinks.py printed no cycle for $objdir" >&2; exit 2; }
if [ "$links" -gt "$said" ]; then
	echo "sendcircle: weir-send's circle grew: $line; $header says $said links." \
		"A call that closes a loop between stages goes through a callback (as gatelink.c's" \
		"answers do) or down to a file outside the circle" >&2
	exit 1
fi
if [ "$links" -lt "$said" ]; then
	echo "sendcircle: weir-send's circle has $links links now, fewer than the $said" \
		"$header says: lower its figure, so that the circle does not grow back ($line)" >&2
	exit 1
fi
echo "sendcircle: weir-send's circle as $header says: $line"
