#!/usr/bin/python3
"""gatedrop.py: a stand-in weir-gate that goes away just after a grant.

  gatedrop.py SOCKET

Listens on the Unix stream socket SOCKET (printing "READY" on stdout
once it does), takes one connection and speaks the gate's protocol
(mail/gateproto.h) as far as weir-send needs: "OK -" to STARTS and
COUNTS.  At the first ACQUIRE it stops reading (shutdown SHUT_RD: the
client's next write fails with EPIPE, as when the gate has closed the
connection before reading it), answers GRANT for that request's tag,
closes, removes SOCKET and exits, printing "GRANTED <tag>".  So the
client holds a grant whose START cannot reach the gate: the instant a
real gate dies between its GRANT and the client's START.

Trusts: nothing; test code.
"""
import os
import socket
import sys


def main():
    path = sys.argv[1]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    print("READY", flush=True)
    conn, _ = srv.accept()
    buf = b""
    while True:
        data = conn.recv(4096)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            words = line.decode("ascii", "replace").split(" ")
            if words[0] in ("STARTS", "COUNTS"):
                conn.sendall(b"OK -\n")
            elif words[0] == "ACQUIRE" and len(words) > 1:
                conn.shutdown(socket.SHUT_RD)
                conn.sendall(("GRANT %s 1 0 0 600\n" % words[1]).encode())
                conn.close()
                srv.close()
                os.unlink(path)
                print("GRANTED %s" % words[1], flush=True)
                return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
