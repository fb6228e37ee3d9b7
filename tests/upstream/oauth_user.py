#!/usr/bin/python3
"""oauth_user.py: the user at the browser, for `weir auth login` tests.

  oauth_user.py --idp https://127.0.0.1:PORT --ca CA.pem [--deny]
                [--paste TEXT] -- COMMAND...

Runs COMMAND (weir -c CONF auth login NAME), echoes what it prints, and
does what a person would: for the device grant, reads the user code
from the line "... enter the code XXXX-XXXX ..." and enters it at the
stand-in provider (idp.py's /approve; --deny refuses instead); for the
code grant, opens the address printed (idp.py's /authorize, with
approve=1: the user clicks "allow"), takes the address the browser is
sent to and pastes it into COMMAND's standard input (--paste TEXT pastes
TEXT instead).  Exits with COMMAND's status.

Trusts: nothing; test code.
"""
import argparse
import json
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--idp", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--deny", action="store_true")
    p.add_argument("--paste")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    ctx = ssl.create_default_context(cafile=a.ca)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kw):
            return None

    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx), NoRedirect)
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for line in child.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        m = re.search(r"enter the code ([0-9A-F]{4}-[0-9A-F]{4})", line)
        if m:
            body = json.dumps({"user_code": m.group(1), "deny": "1" if a.deny else "0"})
            req = urllib.request.Request(a.idp + "/approve", data=body.encode(), method="POST")
            opener.open(req).read()
            continue
        m = re.match(r"^  (https://\S+/authorize\?\S+)$", line)
        if m:
            try:
                opener.open(m.group(1) + "&approve=1").read()
                sys.exit("oauth_user.py: no redirect from the sign-in page")
            except urllib.error.HTTPError as e:
                if e.code != 302:
                    raise
                where = e.headers["Location"]
            child.stdin.write((a.paste if a.paste is not None else where) + "\n")
            child.stdin.flush()
    child.stdin.close()
    sys.exit(child.wait())


main()
