#!/usr/bin/env python3
"""procedges.py: which weir program talks to which, from the objects.

    scripts/procedges.py OBJDIR NAME:FOLDER...             print the edges
    scripts/procedges.py --dot FILE OBJDIR NAME:FOLDER...  compare them

OBJDIR holds every source of src/ compiled with -ffunction-sections and
-fdata-sections (`make architecture-check` makes BUILD/arch): each
function and each datum is then a section of its own, and the object's
relocations say, function by function, what it calls, points to or
names (a string literal is a reference into .rodata).  NAME:FOLDER is
one program of the Makefile's ALL_PROGRAMS.

A program is its folder's objects and those of src/lib and src/mail (what
it links), and its code is what can be reached from its main(), as the
linker's --gc-sections reaches it: through calls, taken addresses and
the data that holds them.  Within that code, two kinds of edge:

  exec    a function that calls libexec_path() or an exec(3) function
          and names a program by a string literal, the whole name or
          ".../NAME", itself or through a table it points to:
          weir run's daemons, sendmail's weir-queue and weir-smtpd,
          weir-send's weir-remote.  Names matched whole: "weir-queue"
          is not weir-queued.
  socket  a function that calls connect(2): SOCKETS below says, for the
          file it is in, whose socket that is (a connect(2) in a file
          not listed there is an error: say where it goes).  The server
          named must itself reach unix_listen().

What it cannot see, and so does not claim: a program name that reaches
libexec_path() through a variable set elsewhere (none today: each
caller names its program where it calls), and which socket a connect(2)
reaches, which is the table's word, kept honest only in that every
connect(2) must be in it.  A function that names a program to find it
and not to run it (libexec_deliverer() stats weir-remote) counts as a
run: weir, the one program that reaches it, runs weir-remote anyway
(test-relay).  Several drawn ways between the same two programs (weir-send
runs weir-remote -S for a session, alone for one message, and -K) are one
edge here: the check fails when the last of them is gone, not the first.

A program talking to another instance of itself (`weir-gate status`) is
not an edge.  Files shared through the queue (the queue, the trigger
FIFO, the gate's journal) are not edges either: a file names no peer in
the code.

With --dot, FILE's program-to-program edges are compared with these,
and each one that is in one but not the other is printed; exit 1 then.
FILE's nodes: a program is a node whose id is its name ("weir-send"); a
socket, a node whose id is its configuration key (gate_socket); any
other ellipse is the descriptors a parent hands to its child (pipes, a
socketpair).  An edge P -> Q between programs is an exec; P -> C -> Q
through such descriptors is too; P -> S -> Q through a socket is a
socket edge (in either direction: the picture's arrows follow the bytes,
not who connects).  A box that is not a program of ALL_PROGRAMS is an
error, and so is a program without a node.
"""
import collections
import glob
import json
import os
import struct
import subprocess
import sys

# connect(2), by the file that calls it: whose socket it reaches (a
# program), or None for a peer that is not a weir program.
SOCKETS = {
    'src/mail/gateclient.c': 'weir-gate',    # gate_socket, gate_status_socket
    'src/mail/showq.c': 'weir-showq',        # showq_socket
    'src/mail/qqclient.c': 'weir-queued',    # queue_socket
    'src/weir/run.c': 'weir-showq',          # is showq_socket served already?
    'src/lib/unixlisten.c': None,            # a server's probe of its own socket
    'src/remote/conn.c': None,               # the upstream, over TCP
}
EXEC = {'libexec_path', 'execv', 'execve', 'execvp', 'execvpe', 'execl', 'execle',
        'execlp', 'fexecve', 'posix_spawn', 'posix_spawnp'}

SHT_SYMTAB, SHT_RELA = 2, 4
SHF_ALLOC, SHF_EXECINSTR = 2, 4
STT_SECTION = 3
STB_LOCAL = 0
# x86-64's PC-relative relocations: the addend is the target less 4.
PCREL = {2, 4, 9, 41, 42}


class Obj:
    """One object: its sections, symbols and relocations."""

    def __init__(self, path, src):
        self.path, self.src = path, src
        with open(path, 'rb') as f:
            self.data = d = f.read()
        if d[:4] != b'\x7fELF' or d[4] != 2 or d[5] != 1:
            sys.exit(f'procedges: {path}: not a 64-bit little-endian ELF object')
        shoff, = struct.unpack_from('<Q', d, 0x28)
        shnum, shstrndx = struct.unpack_from('<HH', d, 0x3c)
        self.sec = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + 64 * i) for i in range(shnum)]
        names = self.sec[shstrndx]
        self.name = [self._str(names[4], s[0]) for s in self.sec]
        self.syms = []
        for s in self.sec:
            if s[1] == SHT_SYMTAB:
                strtab = self.sec[s[6]][4]
                for off in range(s[4], s[4] + s[5], 24):
                    nm, info, _, shndx, value, _ = struct.unpack_from('<IBBHQQ', d, off)
                    self.syms.append((self._str(strtab, nm), info >> 4, info & 15, shndx, value))
        # out[section] = [(symbol index, type, addend)]
        self.out = collections.defaultdict(list)
        for s in self.sec:
            if s[1] != SHT_RELA or not (self.sec[s[7]][2] & SHF_ALLOC):
                continue        # debugging information points to everything
            if self.name[s[7]] == '.eh_frame':
                continue        # so do the unwinding tables
            for off in range(s[4], s[4] + s[5], 24):
                _, info, addend = struct.unpack_from('<QQq', d, off)
                self.out[s[7]].append((info >> 32, info & 0xffffffff, addend))

    def _str(self, sec_off, off):
        o = sec_off + off
        return self.data[o:self.data.index(b'\0', o)].decode('latin-1')

    def cstring(self, shndx, off):
        """The NUL-terminated bytes at off in section shndx, or None."""
        s = self.sec[shndx]
        if s[1] == 8 or off < 0 or off >= s[5]:       # SHT_NOBITS
            return None
        o = s[4] + off
        end = self.data.find(b'\0', o, s[4] + s[5])
        return self.data[o:end].decode('latin-1') if end >= 0 else None

    def code(self, shndx):
        return bool(self.sec[shndx][2] & SHF_EXECINSTR)


_objs = {}


def load(objdir, sub):
    """The objects of src/SUB, each read once."""
    out = []
    for p in sorted(glob.glob(os.path.join(objdir, 'src', sub, '*.o'))):
        if p not in _objs:
            _objs[p] = Obj(p, os.path.relpath(p, objdir)[:-2] + '.c')
        out.append(_objs[p])
    return out


def program(objdir, folder, progs):
    """(exec targets, socket servers, listens?, errors) of one program."""
    objs = load(objdir, folder) + load(objdir, 'lib') + load(objdir, 'mail')
    if not any(o.src == f'src/{folder}/main.c' for o in objs):
        sys.exit(f'procedges: no {objdir}/src/{folder}/main.o (make architecture-check)')
    defined = {}                    # global name -> (object, section)
    for o in objs:                  # the program's own first, as it links
        for name, bind, _, shndx, _ in o.syms:
            if bind != STB_LOCAL and 0 < shndx < 0xff00 and name not in defined:
                defined[name] = (o, shndx)
    # A node is a section: (object, index).  From main() and the
    # constructors, every section a relocation of a reached one points to.
    work = [defined['main']] if 'main' in defined else []
    for o in objs:
        work += [(o, i) for i, n in enumerate(o.name)
                 if n.startswith(('.init_array', '.ctors', '.preinit_array'))]
    seen = set()
    refs = collections.defaultdict(set)        # node -> names it refers to
    strings = collections.defaultdict(set)     # node -> literals it names
    succ = collections.defaultdict(set)
    while work:
        node = work.pop()
        if node in seen:
            continue
        seen.add(node)
        o, shndx = node
        for sym, rtype, addend in o.out.get(shndx, ()):
            name, _, stype, tshndx, value = o.syms[sym]
            if stype == STT_SECTION:
                target = (o, tshndx)
                if not o.code(tshndx):
                    s = o.cstring(tshndx, value + addend + (4 if rtype in PCREL else 0))
                    if s:
                        strings[node].add(s)
            else:
                refs[node].add(name)
                if tshndx == 0:                 # another object's, or a library's
                    target = defined.get(name)
                else:                           # this object's (none if absolute)
                    target = (o, tshndx) if tshndx < 0xff00 else None
            if target:
                succ[node].add(target)
                work.append(target)

    def data_strings(node):
        """Literals a function names, itself or through data it points to."""
        out, stack, been = set(), [node], set()
        while stack:
            n = stack.pop()
            if n in been:
                continue
            been.add(n)
            out |= strings.get(n, set())
            stack += [m for m in succ.get(n, ()) if not m[0].code(m[1])]
        return out

    execs, servers, listens, errors = {}, {}, False, []
    for n in seen:
        o, shndx = n
        if not o.code(shndx):
            continue
        r = refs.get(n, set())
        if 'unix_listen' in r:
            listens = True
        if r & EXEC:
            for s in data_strings(n):
                for p in progs:
                    if s == p or s.endswith('/' + p):
                        execs.setdefault(p, set()).add(o.src)
        if 'connect' in r:
            if o.src not in SOCKETS:
                errors.append(f'{o.src} ({o.name[shndx]}) calls connect(2): say in'
                              f' scripts/procedges.py (SOCKETS) whose socket it reaches')
            elif SOCKETS[o.src]:
                servers.setdefault(SOCKETS[o.src], set()).add(o.src)
    return execs, servers, listens, errors


def derive(objdir, pairs):
    progs = [p.split(':')[0] for p in pairs]
    edges, errors, listeners = {}, [], set()
    for pair in pairs:
        name, folder = pair.split(':')
        execs, servers, listens, errs = program(objdir, folder, progs)
        errors += sorted(f'{name}: {e}' for e in errs)
        if listens:
            listeners.add(name)
        for p, src in execs.items():
            if p != name:
                edges[(name, p, 'exec')] = ' '.join(sorted(src))
        for p, src in servers.items():
            if p != name:
                edges[(name, p, 'socket')] = ' '.join(sorted(src))
    for (a, b, kind), src in edges.items():
        if kind == 'socket' and b not in listeners:
            errors.append(f'{a} connects to {b}\'s socket ({src}), but {b} listens on none')
    return edges, errors


def from_dot(path, progs):
    """The picture's program-to-program edges, and what is wrong with it."""
    out = subprocess.run(['dot', '-Tjson0', path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f'procedges: dot {path}: {out.stderr.strip()}')
    g = json.loads(out.stdout)
    objs = g.get('objects', [])
    name = {o['_gvid']: o['name'] for o in objs}
    shape = {o['name']: o.get('shape', 'ellipse') for o in objs}
    errors = []
    for n, s in shape.items():
        if s == 'box' and n not in progs:
            errors.append(f'{path}: the box {n} is not a program of the Makefile\'s'
                          ' ALL_PROGRAMS (a program\'s node is named as the program)')
    for p in progs:
        if p not in shape:
            errors.append(f'{path}: no node for {p} (a program\'s node is named as the program)')
    succ = collections.defaultdict(set)
    for e in g.get('edges', []):
        succ[name[e['tail']]].add(name[e['head']])
    edges = set()
    for a in progs:
        for c in succ.get(a, ()):
            if c in progs:
                edges.add((a, c, 'exec'))
            elif shape.get(c) == 'ellipse':
                kind = 'socket' if c.endswith('_socket') else 'exec'
                edges |= {(a, b, kind) for b in succ.get(c, ()) if b in progs and b != a}
    return edges, errors


def main(argv):
    dot = None
    if argv[:1] == ['--dot']:
        dot, argv = argv[1], argv[2:]
    if len(argv) < 2 or not os.path.isdir(argv[0]):
        sys.exit('usage: procedges.py [--dot FILE] OBJDIR NAME:FOLDER...')
    edges, errors = derive(argv[0], argv[1:])
    if dot is None:
        for (a, b, kind), src in sorted(edges.items()):
            print(f'{a} -> {b} {kind} ({src})')
        for e in errors:
            print(f'procedges: {e}', file=sys.stderr)
        return 1 if errors else 0
    progs = [p.split(':')[0] for p in argv[1:]]
    drawn, derrors = from_dot(dot, progs)
    errors += derrors

    def key(e):     # a socket edge either way round
        return (e[2],) + (tuple(sorted(e[:2])) if e[2] == 'socket' else e[:2])
    have = {key(e): e for e in drawn}
    want = {key(e): e for e in edges}
    for k in sorted(set(want) - set(have)):
        a, b, kind = want[k]
        how = 'runs' if kind == 'exec' else 'connects to the socket of'
        errors.append(f'{a} {how} {b} ({edges[want[k]]}), but {dot} has no such edge')
    for k in sorted(set(have) - set(want)):
        a, b, kind = have[k]
        errors.append(f'{dot} has an edge {a} -> {b} ({kind}) that the code does not make')
    for e in errors:
        print(f'architecture: {e}', file=sys.stderr)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
