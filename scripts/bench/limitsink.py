#!/usr/bin/python3
"""limitsink.py: the upstream of compare.sh's limit and throttle runs.

A python3-aiosmtpd server on 127.0.0.1 (port picked by the kernel, printed
as "PORT <n>" once listening) that keeps no mail and logs one JSON line per
accepted message to --record: {"time": <upstream's wall clock>, "sender":
..., "rcpts": [...]}; a message it refused is logged with "refused": the
reply.

  --cert FILE --key FILE   STARTTLS offered and required
  --auth USER:PASSWORD     AUTH PLAIN/LOGIN required (after STARTTLS)
  --throttle REPLY         the reply of the throttled state, given to MAIL
                           FROM ("421 4.7.0 Try again later"; a 421 also
                           closes the connection)

SIGUSR1 starts the throttled state, SIGUSR2 ends it; each switch is logged
as {"event": "throttle"|"recover"}.  Unlike tests/upstream/upstream.py
(whose replies are fixed for its whole life) the state changes while the
clients stay connected.  A benchmark peer: trusts nothing, runs until killed.
"""
import argparse
import asyncio
import json
import signal
import ssl
import sys
import time

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

p = argparse.ArgumentParser()
p.add_argument("--cert")
p.add_argument("--key")
p.add_argument("--auth")
p.add_argument("--throttle", default="421 4.7.0 Too many messages, slow down")
p.add_argument("--record", required=True)
ARGS = p.parse_args()
STATE = {"throttled": False}
LOG = open(ARGS.record, "a", buffering=1)


def record(**event):
    event["time"] = round(time.time(), 6)
    LOG.write(json.dumps(event) + "\n")


class Handler:
    async def handle_MAIL(self, server, session, envelope, address, options):
        if STATE["throttled"]:
            record(refused=ARGS.throttle, sender=address)
            if ARGS.throttle.startswith("421"):
                asyncio.get_running_loop().call_soon(server.transport.close)
            return ARGS.throttle
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 OK"

    async def handle_DATA(self, server, session, envelope):
        record(sender=envelope.mail_from, rcpts=envelope.rcpt_tos)
        return "250 2.0.0 OK"


def authenticator(server, session, envelope, mechanism, auth_data):
    user, _, password = (ARGS.auth or ":").partition(":")
    ok = (isinstance(auth_data, LoginPassword) and auth_data.login.decode() == user
          and auth_data.password.decode() == password)
    return AuthResult(success=ok, handled=False)


def switch(throttled):
    STATE["throttled"] = throttled
    record(event="throttle" if throttled else "recover")


async def main():
    ctx = None
    if ARGS.cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, switch, True)
    loop.add_signal_handler(signal.SIGUSR2, switch, False)
    handler = Handler()

    def factory():
        kw = dict(hostname="upstream.test", decode_data=False, data_size_limit=None,
                  auth_exclude_mechanism=["CRAM-MD5"])
        if ctx is not None:
            kw.update(tls_context=ctx, require_starttls=True)
        if ARGS.auth:
            kw.update(authenticator=authenticator, auth_required=True,
                      auth_require_tls=ctx is not None)
        return SMTP(handler, **kw)

    server = await loop.create_server(factory, host="127.0.0.1", port=0)
    sys.stdout.write("PORT %d\n" % server.sockets[0].getsockname()[1])
    sys.stdout.flush()
    await server.serve_forever()


asyncio.run(main())
