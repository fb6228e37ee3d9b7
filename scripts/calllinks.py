#!/usr/bin/env python3
"""calllinks.py: which file of a program calls which, from the objects.

    scripts/calllinks.py [-v] build/src/send
    scripts/calllinks.py --check src/send/sendint.h build/src/send

A link is file A -> file B where A.o uses a name with external linkage
that B.o defines (nm); calls within a file, static functions and what
comes from libweir.a are not counted.  Prints each file's links, then
the totals: files, links, function names used across files, and the
largest cycle (strongly connected component: files that reach each
other through their calls) with the links inside it and how many pairs
of files call each other.  -v names the functions behind each link, and
those pairs.  A `static inline` in a header is not a
call and is not seen.  sendint.h's stage map lists weir-send's links
as this prints them.

--check HEADER compares the objects' links with the map in HEADER's
first comment (make check does, for sendint.h): the lines after "Who
calls whom", each "FILE.c  CALLEE CALLEE..." (continued on lines that
do not start with a file name) or "FILE.c, FILE.c: none", leaving out
the files the comment lists after "calling none of these:", which must
then call none but each other.  Each file whose links differ from the
map's is printed with both; exit 1 then.
"""
import collections
import glob
import os
import re
import subprocess
import sys


def symbols(obj):
    """(defined, used) external names of one object."""
    out = subprocess.run(['nm', obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == 'U':
            used.add(f[1])
        elif len(f) == 3 and f[1] in 'TDBR':
            defined.add(f[2])
    return defined, used


def largest_cycle(nodes, links):
    """The largest strongly connected component (Tarjan, iterative)."""
    succ = collections.defaultdict(list)
    for a, b in links:
        succ[a].append(b)
    index, low, on, stack, comps = {}, {}, set(), [], []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.add(x)
                        if x == v:
                            break
                    comps.append(comp)
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on.add(w)
                work.append((w, iter(succ[w])))
            elif w in on:
                low[v] = min(low[v], index[w])
    return max(comps, key=len) if comps else set()


def stage_map(header):
    """(file -> set of callees, files left out) from HEADER's first comment."""
    with open(header) as f:
        text = f.read()
    comment = text[:text.index('*/')]
    lines = [re.sub(r'^\s*\* ?', '', l) for l in comment.splitlines()]
    out = re.search(r'calling none of these:([^(]*)\(', ' '.join(lines))
    left = set(re.findall(r'(\w+)\.c', out.group(1))) if out else set()
    at = next((i for i, l in enumerate(lines) if 'Who calls whom' in l), None)
    if at is None:
        sys.exit(f'calllinks: {header}: no "Who calls whom" map in its first comment')
    table, last = {}, None
    for l in lines[at + 1:]:
        m = re.match(r'\s*((?:\w+\.c,\s*)*\w+\.c):\s*none\s*$', l)
        if m:
            for f in re.findall(r'(\w+)\.c', m.group(1)):
                table[f] = set()
            last = None
            continue
        m = re.match(r'\s*(\w+)\.c\s+(.*)$', l)
        if m:
            last = m.group(1)
            table[last] = set(m.group(2).split())
        elif last and l.strip() and not l.strip().endswith(':'):
            table[last] |= set(l.split())
    return table, left


def check(header, links, files):
    """Print where the objects' links and HEADER's map differ; 1 if they do."""
    table, left = stage_map(header)
    have = collections.defaultdict(set)
    for a, b in links:
        have[a[:-2]].add(b[:-2])
    bad = 0
    for f in sorted({f[:-2] for f in files} | set(table)):
        calls = have[f] - left
        if f in left:
            if calls:
                print(f'calllinks: {f}.c calls {" ".join(sorted(calls))}, but {header} says it'
                      ' calls none of these files', file=sys.stderr)
                bad = 1
        elif f not in table:
            print(f'calllinks: {f}.c ({" ".join(sorted(calls)) or "no calls"}) is not in'
                  f' {header}\'s map', file=sys.stderr)
            bad = 1
        elif calls != table[f]:
            print(f'calllinks: {f}.c calls {" ".join(sorted(calls)) or "none"}; {header}\'s'
                  f' map says {" ".join(sorted(table[f])) or "none"}', file=sys.stderr)
            bad = 1
    return bad


def main(argv):
    verbose = '-v' in argv
    header = None
    if '--check' in argv:
        i = argv.index('--check')
        header, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    dirs = [a for a in argv if a != '-v']
    if len(dirs) != 1 or not os.path.isdir(dirs[0]):
        sys.exit('usage: calllinks.py [-v] [--check HEADER] BUILD/src/PROGRAM')
    owner, uses = {}, {}
    for obj in sorted(glob.glob(os.path.join(dirs[0], '*.o'))):
        name = os.path.basename(obj)[:-2] + '.c'
        defined, uses[name] = symbols(obj)
        for d in defined:
            owner[d] = name
    links = collections.defaultdict(set)
    for a, used in uses.items():
        for n in used:
            b = owner.get(n)
            if b and b != a:
                links[(a, b)].add(n)
    if header:
        return check(header, links, uses)
    for a in sorted(uses):
        callees = sorted(b for (x, b) in links if x == a)
        if verbose:
            for b in callees:
                print(f'{a} -> {b}: {" ".join(sorted(links[(a, b)]))}')
        elif callees:
            print(f'{a}: {" ".join(c[:-2] for c in callees)}')
    cycle = largest_cycle(sorted(uses), links)
    inside = [k for k in links if k[0] in cycle and k[1] in cycle]
    mutual = sorted((a[:-2], b[:-2]) for a, b in links if a < b and (b, a) in links)
    print(f'{len(uses)} files, {len(links)} links, '
          f'{sum(len(v) for v in links.values())} functions used across files')
    if verbose:
        print(f'calling each other: {" ".join(f"{a}/{b}" for a, b in mutual) or "none"}')
    if len(cycle) < 2:
        print('largest cycle: none')
        return 0
    print(f'largest cycle: {len(cycle)} files ({" ".join(sorted(c[:-2] for c in cycle))}), '
          f'{len(inside)} links, {sum(len(links[k]) for k in inside)} functions used, '
          f'{len(mutual)} pair{"" if len(mutual) == 1 else "s"} calling each other')


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
