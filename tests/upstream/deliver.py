#!/usr/bin/python3
"""deliver.py: a qmail-remote(8) stand-in for weir-send's tests
(tests/integration/send_*_test.c, tests/lib/send_fixture.c).

weir-send runs it as $WEIR_REMOTE with a deliverer's command line (options,
then host, sender, recipients) and the message on stdin.  It works in the
test's folder, D below: that of weir.conf ($WEIR_CONFIG, which weir-send
sets for its deliverers from its -c):

  D/calls.log   one line per run: "CONF\\tUPSTREAM\\tHOST\\tSENDER\\tRCPT,RCPT";
                CONF is $WEIR_CONFIG when -c's file holds its bytes, else
                "snapshot " and -c's name
  D/conf.N      -c's bytes, D/msg.N the message, of run N (from 0)
  D/conc.log    "B PID TIME" when a run begins, "E PID TIME" after the hang

It answers per recipient, by the address: "bad" h (550), "slow" s (451)
unless D/slow-ok exists (then r), "crash" SIGSEGV, "garbage" an unparsable
report, "nomsg" no message report, "throttle" a 421 4.7.0 and a
"throttled" outcome; else r.  Then K (D when nothing was accepted).  The
outcome line goes to the -r fd, if given.  D/hang makes it sleep that many
seconds (1 if empty) between its B and E lines.
"""
import fcntl
import os
import signal
import sys
import time

D = os.path.dirname(os.environ['WEIR_CONFIG'])

a = sys.argv[1:]
opts = {}
while a and len(a[0]) == 2 and a[0][0] == '-':
    o = a.pop(0)
    opts[o] = True if o == '-n' else a.pop(0)
ocfd = int(opts['-r']) if '-r' in opts else -1


def outcome(line):
    if ocfd >= 0:
        os.write(ocfd, line.encode())


def conc(what):
    fd = os.open(D + '/conc.log', os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, ('%s %d %.3f\n' % (what, os.getpid(), time.time())).encode())
    os.close(fd)


msg = sys.stdin.buffer.read()
conc('B')
if os.path.exists(D + '/hang'):
    time.sleep(float(open(D + '/hang').read() or '1'))
conc('E')
if len(a) < 3 or '-c' not in opts or '-u' not in opts:
    sys.stderr.write('deliverer: bad arguments %r %r\n' % (opts, a))
    sys.exit(100)
up, host, sender, rcpts = opts['-u'], a[0], a[1], a[2:]
# Deliverers run side by side: N, its files and its line in one go.
lk = os.open(D + '/calls.lock', os.O_WRONLY | os.O_CREAT, 0o644)
fcntl.flock(lk, fcntl.LOCK_EX)
n = len(open(D + '/calls.log', 'rb').read().splitlines()) if os.path.exists(D + '/calls.log') else 0
# -c: weir-send's snapshot of its config; logged as the file's name
# when it holds the file's bytes, and kept as conf.N.
cbytes = open(opts['-c'], 'rb').read()
real = os.environ.get('WEIR_CONFIG', '')
same = real and os.path.exists(real) and open(real, 'rb').read() == cbytes
conf = real if same else 'snapshot ' + opts['-c']
with open(D + '/conf.%d' % n, 'wb') as f:
    f.write(cbytes)
with open(D + '/msg.%d' % n, 'wb') as f:
    f.write(msg)
line = '\t'.join([conf, up, host, sender, ','.join(rcpts)]) + '\n'
fd = os.open(D + '/calls.log', os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, line.encode())
os.close(fd)
os.close(lk)
out = sys.stdout.buffer
ok = False
for r in rcpts:
    if 'crash' in r:
        out.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(5)  # not reached: the signal kills it first
    if 'garbage' in r:
        out.write(b'250 OK, but I am not qmail-remote\n')
        out.flush()
        outcome('sent 0 -1 0\n')
        sys.exit(0)
    if 'throttle' in r:
        out.write(b's127.0.0.1 said: 421 4.7.0 rate limit exceeded, slow down\0'
                  b'ZConnected to 127.0.0.1 but the upstream is throttling us.\0')
        out.flush()
        outcome('throttled 421 4.7.0 rate limit exceeded, slow down\n')
        sys.exit(0)
    if 'bad' in r:
        out.write(b'h127.0.0.1 does not like recipient.\nRemote host said: 550 5.1.1 <' + r.encode() + b'>: no such user\0')
    elif 'slow' in r and not os.path.exists(D + '/slow-ok'):
        out.write(b's127.0.0.1 does not like recipient.\nRemote host said: 451 4.2.1 try later\0')
    else:
        out.write(b'r\0')
        ok = True
    out.flush()
naccepted = sum(1 for r in rcpts if 'bad' not in r and ('slow' not in r or os.path.exists(D + '/slow-ok')))
if any('nomsg' in r for r in rcpts):
    outcome('sent %d -1 0\n' % naccepted)
    sys.exit(0)
out.write(b'K127.0.0.1 accepted message.\nRemote host said: 250 ok\0' if ok else b'DGiving up on 127.0.0.1\0')
out.flush()
outcome('sent %d -1 0\n' % (naccepted if ok else 0))
