#!/usr/bin/python3
"""upstream.py: a test upstream relay for weir-remote's integration tests.

Debian's python3-aiosmtpd with STARTTLS (or implicit TLS) and AUTH PLAIN /
LOGIN, listening on loopback only, on a port picked by the kernel (printed
as "PORT <n>" on stdout once listening).

  --cert FILE --key FILE TLS certificate: STARTTLS is offered (and
                         required) with it
  --smtps                implicit TLS instead of STARTTLS
  --auth USER:PASSWORD   AUTH PLAIN and LOGIN, required before MAIL
  --no-store             keep no messages and record only connections and
                         AUTHs (benchmarks: per session, not per message)

Other flags make it misbehave in the ways a real provider can:

  --reply STAGE=REPLY    answer STAGE with REPLY ("550 5.1.1 no"); STAGE is
                         banner, ehlo, mail, mail:SENDER, rcpt, rcpt:ADDR,
                         data, dataend, dataend:ADDR (ADDR the message's
                         first recipient) (a 421 reply also closes the
                         connection)
  --reply-file FILE      more --reply values, one STAGE=REPLY a line (for
                         lists too long for a command line)
  --hang STAGE           never answer STAGE: banner, ehlo, starttls, tls
                         (answer STARTTLS, then never do the handshake),
                         auth, mail, rcpt, data (the DATA command), dataend
                         (the end of the data); the session just waits
  --drop-in-data         close the connection in the middle of the data
  --no-starttls          do not offer STARTTLS
  --inject               send a plaintext line right after "220 Ready to
                         start TLS" (the STARTTLS injection attack)
  --ehlo-extra LINE      one more EHLO keyword line (e.g. "LIMITS RCPTMAX=2")
  --cram                 offer AUTH CRAM-MD5 too (a challenge-response
                         mechanism, for the Cyrus client end to end)
  --scram-lie            offer AUTH SCRAM-SHA-256 as a server that does not
                         know the password: it answers the client's proof
                         with 235 and never sends its own signature (v=)
  --dataend-delay ADDR=SECONDS
                         take SECONDS to answer the final dot of the first
                         message to ADDR (a "delaying" event first); it is
                         accepted (its "data" event) even if the client has
                         gone meanwhile, as a real server commits it

  --idle-close SECONDS   after a message, close a session that sends
                         nothing for SECONDS, with "421 4.4.2 idle timeout"

  --oauth-issued FILE    offer AUTH XOAUTH2 and OAUTHBEARER (and require
                         AUTH), accepting only the access tokens the
                         stand-in provider (idp.py) wrote to FILE, and of
                         those only one with more than --oauth-margin left
                         before its expiry, as Exchange Online refuses a
                         token in its last 10 minutes; a refusal is a 334
                         with the JSON error (as Gmail and Exchange send
                         it), then, after the client's empty answer, 535
  --oauth-margin SECONDS the margin (default 600)
  --reply auth=REPLY     with --oauth-issued: a good token is refused with
                         REPLY all the same (Exchange's 535 5.7.139: SMTP
                         AUTH turned off for the tenant)

aiosmtpd does not offer PIPELINING: --ehlo-extra PIPELINING does.

Every event goes as one JSON line to --record FILE: each connection
("connect", numbered from 1 in "conn"), EHLO, STARTTLS, AUTH (user only),
MAIL, RCPT, RSET, DATA, an idle close; those of a session carry its
"conn".  The content of the Nth message (N from 1), as received after
aiosmtpd undid the dot-stuffing, goes to FILE.N.

Trusts: nothing; it is a test peer.  Runs until killed.
"""
import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import json
import ssl
import sys
import time

from aiosmtpd.smtp import MISSING, SMTP, AuthResult, LoginPassword, syntax


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--smtps", action="store_true")
    p.add_argument("--no-starttls", action="store_true")
    p.add_argument("--auth", help="USER:PASSWORD; AUTH is then required")
    p.add_argument("--reply", action="append", default=[])
    p.add_argument("--reply-file")
    p.add_argument("--hang", action="append", default=[])
    p.add_argument("--drop-in-data", action="store_true")
    p.add_argument("--inject", action="store_true")
    p.add_argument("--cram", action="store_true")
    p.add_argument("--scram-lie", action="store_true")
    p.add_argument("--no-store", action="store_true",
                   help="keep no messages; record only connections and AUTHs")
    p.add_argument("--ehlo-extra", action="append", default=[])
    p.add_argument("--dataend-delay", action="append", default=[])
    p.add_argument("--idle-close", type=float, default=0)
    p.add_argument("--record", help="event log; without it nothing is recorded")
    p.add_argument("--oauth-issued")
    p.add_argument("--oauth-margin", type=float, default=600)
    return p.parse_args()


ARGS = parse_args()
DELAYS = {}
for r in ARGS.dataend_delay:
    addr, _, secs = r.partition("=")
    DELAYS[addr] = float(secs)
REPLIES = {}
for r in ARGS.reply:
    stage, _, text = r.partition("=")
    REPLIES[stage] = text
if ARGS.reply_file:
    with open(ARGS.reply_file) as f:
        for r in f.read().splitlines():
            stage, _, text = r.partition("=")
            if stage:
                REPLIES[stage] = text


def record(**event):
    if not ARGS.record or (ARGS.no_store and event["event"] not in ("connect", "auth")):
        return
    event["time"] = round(time.time(), 6)   # when the upstream saw it
    with open(ARGS.record, "a") as f:
        f.write(json.dumps(event) + "\n")


def conn(server):
    return getattr(server, "conn_id", 0)


def tls_on(server):
    return server.transport.get_extra_info("ssl_object") is not None


async def hang_forever():
    await asyncio.sleep(3600)


class Handler:
    def __init__(self):
        self.server = None

    def closing(self, server, reply):
        # A 421 means the server closes the channel after saying so.
        if reply.startswith("421"):
            asyncio.get_running_loop().call_soon(server.transport.close)
        return reply

    async def auth_CRAM__MD5(self, server, args):
        # RFC 2195: the challenge is a unique string; the answer is the
        # user, a space, and HMAC-MD5(password, challenge) in hex.
        user, _, password = (ARGS.auth or ":").partition(":")
        challenge = "<%s.%d@upstream.test>" % (os.urandom(8).hex(), os.getpid())
        resp = await server.challenge_auth(challenge)
        if resp is MISSING:
            return AuthResult(success=False, handled=False)
        login, _, digest = resp.decode(errors="replace").rpartition(" ")
        want = hmac.new(password.encode(), challenge.encode(), "md5").hexdigest()
        ok = bool(ARGS.auth) and login == user and hmac.compare_digest(digest, want)
        record(event="auth", mechanism="CRAM-MD5", user=login, ok=ok)
        return AuthResult(success=ok, handled=False,
                          auth_data=LoginPassword(login.encode(), b""))

    async def auth_SCRAM__SHA__256(self, server, args):
        # --scram-lie: RFC 5802's server-first message, then 235 for any
        # client proof, with no server-final message (no proof of ours).
        if len(args) > 1:
            first = base64.b64decode(args[1])
        else:
            first = await server.challenge_auth("")
            if first is MISSING:
                return AuthResult(success=False, handled=False)
        fields = dict(f.split("=", 1) for f in first.decode().split(",")[2:])
        server_first = "r=%s%s,s=%s,i=4096" % (fields["r"], os.urandom(9).hex(),
                                                base64.b64encode(os.urandom(12)).decode())
        final = await server.challenge_auth(server_first)
        if final is MISSING:
            return AuthResult(success=False, handled=False)
        record(event="auth", mechanism="SCRAM-SHA-256", user=fields["n"], ok=True)
        return AuthResult(success=True, handled=False,
                          auth_data=LoginPassword(fields["n"].encode(), b""))

    async def oauth(self, server, args, mech):
        # XOAUTH2: "user=U^Aauth=Bearer T^A^A"; OAUTHBEARER (RFC 7628):
        # "n,a=U,^Ahost=..^Aport=..^Aauth=Bearer T^A^A".
        if len(args) > 1:
            raw = base64.b64decode(args[1]) if args[1] != "=" else b""
        else:
            raw = await server.challenge_auth("")
            if raw is MISSING:
                return AuthResult(success=False, handled=True)
        fields = raw.decode(errors="replace").split("\x01")
        user, token = "", ""
        for fld in fields:
            if fld.startswith("user="):
                user = fld[5:]
            elif fld.startswith("n,a="):
                user = fld[4:].rstrip(",").replace("=2C", ",").replace("=3D", "=")
            elif fld.startswith("auth=Bearer "):
                token = fld[12:]
        ok, why = token_check(token)
        if ok and "auth" in REPLIES:    # the token is good, the account may not use it
            record(event="auth", mechanism=mech, user=user, ok=False, why="reply",
                   conn=conn(server))
            return AuthResult(success=False, handled=False, message=REPLIES["auth"])
        record(event="auth", mechanism=mech, user=user, ok=ok, why=why, conn=conn(server))
        if ok:
            return AuthResult(success=True, handled=False,
                              auth_data=LoginPassword(user.encode(), b""))
        err = json.dumps({"status": "401", "schemes": "bearer", "scope": "SMTP.Send"})
        # The client answers with an empty line; "*" has been answered.
        if await server.challenge_auth(err) is MISSING:
            return AuthResult(success=False, handled=True)
        return AuthResult(success=False, handled=False,
                          message="535 5.7.3 Authentication unsuccessful")

    async def auth_XOAUTH2(self, server, args):
        return await self.oauth(server, args, "XOAUTH2")

    async def auth_OAUTHBEARER(self, server, args):
        return await self.oauth(server, args, "OAUTHBEARER")

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname
        if "ehlo" in ARGS.hang:
            record(event="hang", stage="ehlo")
            await hang_forever()
        if "ehlo" in REPLIES:
            return [self.closing(server, REPLIES["ehlo"])]
        last = responses[-1]
        out = responses[:-1] + ["250-" + x for x in ARGS.ehlo_extra]
        out.append(last)
        record(event="ehlo", tls=tls_on(server), lines=out)
        return out

    async def handle_MAIL(self, server, session, envelope, address, options):
        if "mail" in ARGS.hang:
            record(event="hang", stage="mail")
            await hang_forever()
        server.idle_stop()
        record(event="mail", sender=address, options=options, tls=tls_on(server),
               auth=session.authenticated, conn=conn(server))
        reply = REPLIES.get("mail:" + address, REPLIES.get("mail"))
        if reply:
            return self.closing(server, reply)
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 OK"

    async def handle_RCPT(self, server, session, envelope, address, options):
        if "rcpt" in ARGS.hang:
            record(event="hang", stage="rcpt")
            await hang_forever()
        record(event="rcpt", rcpt=address)
        reply = REPLIES.get("rcpt:" + address, REPLIES.get("rcpt"))
        if reply:
            return self.closing(server, reply)
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server, session, envelope):
        if "dataend" in ARGS.hang:
            record(event="hang", stage="dataend")
            await hang_forever()
        self.messages = getattr(self, "messages", 0) + 1
        n = self.messages
        delay = max([DELAYS.pop(a, 0) for a in envelope.rcpt_tos] + [0])

        async def accept():
            if delay:
                record(event="delaying", n=n, seconds=delay)
                await asyncio.sleep(delay)
            if not ARGS.no_store and ARGS.record:
                with open("%s.%d" % (ARGS.record, n), "wb") as f:
                    f.write(envelope.original_content)
            record(event="data", sender=envelope.mail_from, rcpts=envelope.rcpt_tos, n=n,
                   conn=conn(server))

        # aiosmtpd cancels the handler when the client goes: the commit
        # itself is shielded from that.
        await asyncio.shield(asyncio.ensure_future(accept()))
        server.idle_start()
        first = envelope.rcpt_tos[0] if envelope.rcpt_tos else ""
        reply = REPLIES.get("dataend:" + first, REPLIES.get("dataend"))
        if reply:
            return self.closing(server, reply)
        return "250 2.0.0 OK queued as TEST1"

    async def handle_RSET(self, server, session, envelope):
        server.idle_stop()
        record(event="rset", conn=conn(server))
        return "250 OK"


CONNECTIONS = 0


class Upstream(SMTP):
    def connection_made(self, transport):
        global CONNECTIONS
        if not hasattr(self, "conn_id"):    # again after STARTTLS
            CONNECTIONS += 1
            self.conn_id = CONNECTIONS
            self._idle = None
            record(event="connect", conn=self.conn_id)
        super().connection_made(transport)

    def idle_start(self):
        # --idle-close: the next command must come within the time.
        self.idle_stop()
        if ARGS.idle_close:
            self._idle = asyncio.get_running_loop().call_later(ARGS.idle_close,
                                                               self.idle_close)

    def idle_stop(self):
        if getattr(self, "_idle", None) is not None:
            self._idle.cancel()
            self._idle = None

    def idle_close(self):
        self._idle = None
        record(event="idle-close", conn=self.conn_id)
        self._writer.write(b"421 4.4.2 upstream.test idle timeout\r\n")
        self.transport.close()

    async def push(self, status):
        if isinstance(status, str) and status.startswith("220 ") and not getattr(self, "_greeted", False):
            self._greeted = True
            if "banner" in ARGS.hang:
                record(event="hang", stage="banner")
                await hang_forever()
            if "banner" in REPLIES:
                status = REPLIES["banner"]
        await super().push(status)
        if ARGS.inject and status == "220 Ready to start TLS":
            self._writer.write(b"250-injected\r\n250 PIPELINING\r\n")
            record(event="injected")

    async def smtp_STARTTLS(self, arg):
        record(event="starttls", conn=self.conn_id)
        if "starttls" in ARGS.hang:
            record(event="hang", stage="starttls")
            await hang_forever()
        if "tls" in ARGS.hang:
            # Say yes, then leave the client's ClientHello unanswered.
            await self.push("220 Ready to start TLS")
            record(event="hang", stage="tls")
            await hang_forever()
        await super().smtp_STARTTLS(arg)

    @syntax("AUTH <mechanism>")
    async def smtp_AUTH(self, arg):
        if "auth" in ARGS.hang:
            record(event="hang", stage="auth")
            await hang_forever()
        await super().smtp_AUTH(arg)

    async def smtp_DATA(self, arg):
        if "data" in ARGS.hang and self.envelope.rcpt_tos:
            record(event="hang", stage="data")
            await hang_forever()
        if "data" in REPLIES and self.envelope.rcpt_tos:
            await self.push(REPLIES["data"])
            if REPLIES["data"].startswith("421"):
                self.transport.close()
            return
        if ARGS.drop_in_data and self.envelope.rcpt_tos:
            await self.push("354 End data with <CR><LF>.<CR><LF>")
            await self._reader.read(10)
            record(event="dropped")
            self.transport.close()
            return
        await super().smtp_DATA(arg)


def token_check(token):
    """(ok, why): is token one the stand-in provider issued, with more
    than --oauth-margin seconds left?"""
    if not ARGS.oauth_issued or not token:
        return False, "no token"
    sha = hashlib.sha256(token.encode()).hexdigest()
    try:
        with open(ARGS.oauth_issued) as f:
            for line in f:
                t = json.loads(line)
                if t["sha"] == sha:
                    left = t["exp"] - time.time()
                    if left <= 0:
                        return False, "expired %.1f s ago" % -left
                    if left <= ARGS.oauth_margin:
                        return False, "%.1f s left, within the margin" % left
                    return True, "%.1f s left" % left
    except FileNotFoundError:
        pass
    return False, "not issued by the provider"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = False
    if isinstance(auth_data, LoginPassword) and ARGS.auth:
        user, _, password = ARGS.auth.partition(":")
        ok = auth_data.login.decode() == user and auth_data.password.decode() == password
        record(event="auth", mechanism=mechanism, user=auth_data.login.decode(), ok=ok,
               conn=conn(server))
    return AuthResult(success=ok, handled=False)


async def main():
    ctx = None
    if ARGS.cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
    loop = asyncio.get_running_loop()
    handler = Handler()

    def factory():
        kw = dict(hostname="upstream.test", decode_data=False, data_size_limit=None)
        if ctx is not None and not ARGS.smtps and not ARGS.no_starttls:
            kw["tls_context"] = ctx
            kw["require_starttls"] = True
        kw["auth_exclude_mechanism"] = ([] if ARGS.cram else ["CRAM-MD5"]) + \
            ([] if ARGS.scram_lie else ["SCRAM-SHA-256"]) + \
            ([] if ARGS.oauth_issued else ["XOAUTH2", "OAUTHBEARER"])
        if ARGS.auth or ARGS.oauth_issued:
            kw["authenticator"] = authenticator
            kw["auth_required"] = True
            # aiosmtpd only counts STARTTLS as TLS; with --smtps every
            # byte is protected already.
            kw["auth_require_tls"] = ctx is not None and not ARGS.smtps
        return Upstream(handler, **kw)

    server = await loop.create_server(factory, host=ARGS.host, port=ARGS.port,
                                      ssl=ctx if ARGS.smtps else None)
    port = server.sockets[0].getsockname()[1]
    record(event="listening", port=port)
    sys.stdout.write("PORT %d\n" % port)
    sys.stdout.flush()
    await server.serve_forever()


asyncio.run(main())
