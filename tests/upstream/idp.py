#!/usr/bin/python3
"""idp.py: a stand-in OAuth 2.0 identity provider for weir's tests.

HTTPS (Python's ssl, a certificate made at test time) on loopback, on a
port picked by the kernel (printed as "PORT <n>" on stdout once
listening), with the endpoints weir's oauth section names:

  POST /devicecode     RFC 8628 device authorization: device_code,
                       user_code, verification_uri, expires_in, interval
  POST /token          RFC 6749: grant_type refresh_token (rotating the
                       refresh token with --rotate), authorization_code
                       (PKCE S256 checked), and the device code grant
                       (authorization_pending until the user approved;
                       slow_down to a poll that comes early);
                       client_credentials (RFC 6749 4.4) with the client
                       secret, or with the client assertion of RFC 7523
                       2.2 as Entra ID checks it: RS256 signature by the
                       key of --client-cert, x5t and x5t#S256 its SHA-1
                       and SHA-256 thumbprints, aud this token endpoint,
                       iss and sub the client id, exp in the future and
                       at most 10 minutes away, nbf not ahead, jti never
                       seen before; the JWT bearer grant of RFC 7523 2.1
                       (a Google service account): RS256 by the key of
                       --sa-cert, kid --sa-kid, iss --sa-email, sub
                       --sa-sub, scope with https://mail.google.com/, aud
                       this token endpoint, exp after iat by at most an
                       hour and in the future.  Neither gives a refresh
                       token; a failed check is answered invalid_client
                       (invalid_grant for the bearer grant) naming it
  GET  /authorize      the code grant's sign-in page; with approve=1 (the
                       test playing the user who clicks "allow") a 302
                       to redirect_uri with code and state
  POST /approve        the test playing the user who enters user_code at
                       verification_uri (deny=1: who refuses)
  POST /control        the test changing how the provider behaves:
                       {"mode": "ok" | "500" | "drop" | "slow:SECONDS"}
                       for the token endpoint's refresh and app grants,
                       {"expires_in": "absent" | N | null} for every
                       token answer from then on (null: the lifetime), and
                       {"revoke": true}: every refresh token issued so far
                       is dead (invalid_grant), as after a password change

Rotation (--rotate): a refresh gives a new refresh token; the one used
stays valid until its successor is first used (then it is dead), as a
provider that rotates must allow for a client that never got the answer.

Access tokens live --lifetime seconds.  Each one issued goes, as its
SHA-256 and its expiry, to --issued FILE (a JSON line each), which
upstream.py reads to accept or refuse it; every secret made (tokens,
codes) goes in clear to --secrets FILE, for the test that greps all
other output for them.  Every request is an event in --record FILE (a
JSON line each: refresh tokens as the first 12 hex digits of their
SHA-256, never in clear).

  --client-id ID        the only client (default weir-test-client)
  --client-secret S     the client's secret, required on /token
  --interval SECONDS    the device grant's polling interval (default 1)
  --slow-down-first N   answer slow_down to the first N device polls
  --device-expiry SECS  the device code's life (default 600)
  --refresh-delay SECS  take so long over every refresh (a provider under
                        load: concurrent refreshes overlap)
  --client-cert PEM     the certificate whose key signs client assertions
  --sa-cert PEM, --sa-email ADDR, --sa-sub ADDR, --sa-kid ID
                        the service account: its key's certificate, its
                        address, the mailbox it may act for, its key's id

Every client assertion and bearer JWT received goes to --secrets too
(the test greps for them as for the tokens).

Trusts: nothing; it is a test peer.  Runs until killed.
"""
import argparse
import base64
import hashlib
import json
import os
import secrets
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--lifetime", type=float, default=3600)
    p.add_argument("--rotate", action="store_true")
    p.add_argument("--interval", type=int, default=1)
    p.add_argument("--slow-down-first", type=int, default=0)
    p.add_argument("--device-expiry", type=int, default=600)
    p.add_argument("--refresh-delay", type=float, default=0)
    p.add_argument("--client-id", default="weir-test-client")
    p.add_argument("--client-secret")
    p.add_argument("--client-cert")
    p.add_argument("--sa-cert")
    p.add_argument("--sa-email")
    p.add_argument("--sa-sub")
    p.add_argument("--sa-kid")
    p.add_argument("--record")
    p.add_argument("--issued", required=True)
    p.add_argument("--secrets", required=True)
    return p.parse_args()


ARGS = parse_args()
LOCK = threading.Lock()
STATE = {
    "mode": "ok",
    "refresh": {},      # refresh token -> {"valid": bool, "parent": token or None}
    "devices": {},      # device code -> {"user_code", "approved", "denied", "last", "interval", "expires"}
    "codes": {},        # authorization code -> {"challenge", "redirect", "used"}
    "polls": 0,
    "expires_in": None,  # None: the lifetime; "absent"; or a number
    "jti": set(),
}


def short(tok):
    return hashlib.sha256(tok.encode()).hexdigest()[:12]


def record(**event):
    if not ARGS.record:
        return
    event["time"] = round(time.time(), 6)
    with open(ARGS.record, "a") as f:
        f.write(json.dumps(event) + "\n")


def secret(prefix):
    s = prefix + secrets.token_hex(16)
    with open(ARGS.secrets, "a") as f:
        f.write(s + "\n")
    return s


def issue(refresh=True):
    """New tokens: the answer's JSON object (caller holds LOCK)."""
    at = secret("at-")
    exp = time.time() + ARGS.lifetime
    with open(ARGS.issued, "a") as f:
        f.write(json.dumps({"sha": hashlib.sha256(at.encode()).hexdigest(), "exp": exp}) + "\n")
    out = {"access_token": at, "token_type": "Bearer", "expires_in": int(ARGS.lifetime)}
    if STATE["expires_in"] == "absent":
        del out["expires_in"]
    elif STATE["expires_in"] is not None:
        out["expires_in"] = STATE["expires_in"]
    if refresh:
        rt = secret("rt-")
        STATE["refresh"][rt] = {"valid": True, "parent": None}
        out["refresh_token"] = rt
    return out


JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def b64url(b):
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, obj, headers=None):
        body = json.dumps(obj).encode() if obj is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def error(self, code, desc="", status=400):
        self.answer(status, {"error": code, "error_description": desc})

    def form(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n).decode()
        ctype = self.headers.get("Content-Type", "")
        if self.path in ("/control", "/approve"):     # the test's own: JSON
            return json.loads(raw)
        if not ctype.startswith("application/x-www-form-urlencoded"):
            return None
        return {k: v[0] for k, v in urllib.parse.parse_qs(raw, keep_blank_values=True).items()}

    def client_ok(self, f):
        if f.get("client_id") != ARGS.client_id:
            return False
        if ARGS.client_secret is not None and f.get("client_secret") != ARGS.client_secret:
            return False
        return True

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
        if u.path != "/authorize":
            return self.answer(404, None)
        ok = (q.get("response_type") == "code" and q.get("client_id") == ARGS.client_id and
              q.get("code_challenge_method") == "S256" and q.get("code_challenge") and
              q.get("state") and q.get("redirect_uri", "").startswith("http://127.0.0.1:"))
        record(event="authorize", ok=bool(ok), approve=q.get("approve") == "1",
               scope=q.get("scope"), login_hint=q.get("login_hint"),
               access_type=q.get("access_type"))
        if not ok:
            return self.answer(400, {"error": "invalid_request"})
        if q.get("approve") != "1":
            return self.answer(200, {"page": "sign in here"})
        code = secret("ac-")
        with LOCK:
            STATE["codes"][code] = {"challenge": q["code_challenge"],
                                    "redirect": q["redirect_uri"], "used": False}
        loc = q["redirect_uri"] + "?" + urllib.parse.urlencode({"state": q["state"], "code": code})
        self.answer(302, None, {"Location": loc})

    def do_POST(self):
        try:
            f = self.form()
        except ValueError:
            return self.error("invalid_request", "not a form")
        if f is None:
            return self.error("invalid_request", "not a form")
        if self.path == "/control":
            with LOCK:
                if "mode" in f:
                    STATE["mode"] = f["mode"]
                if "expires_in" in f:
                    STATE["expires_in"] = f["expires_in"]
                if f.get("revoke"):
                    for r in STATE["refresh"].values():
                        r["valid"] = False
            record(event="control", **f)
            return self.answer(200, {"ok": True})
        if self.path == "/approve":
            with LOCK:
                for dc, d in STATE["devices"].items():
                    if d["user_code"] == f.get("user_code"):
                        d["approved" if f.get("deny") != "1" else "denied"] = True
                        record(event="approve", deny=f.get("deny") == "1")
                        return self.answer(200, {"ok": True})
            return self.answer(404, {"error": "no such user_code"})
        if self.path == "/devicecode":
            return self.devicecode(f)
        if self.path == "/token":
            return self.token(f)
        return self.answer(404, None)

    def devicecode(self, f):
        if f.get("client_id") != ARGS.client_id or not f.get("scope"):
            record(event="devicecode", ok=False)
            return self.error("invalid_client" if f.get("client_id") != ARGS.client_id
                              else "invalid_scope")
        dc = secret("dc-")
        uc = "%04X-%04X" % (secrets.randbelow(65536), secrets.randbelow(65536))
        with LOCK:
            STATE["devices"][dc] = {"user_code": uc, "approved": False, "denied": False,
                                    "last": 0, "interval": ARGS.interval,
                                    "expires": time.time() + ARGS.device_expiry}
        record(event="devicecode", ok=True, scope=f.get("scope"))
        self.answer(200, {"device_code": dc, "user_code": uc,
                          "verification_uri": "https://127.0.0.1/devicelogin",
                          "expires_in": ARGS.device_expiry, "interval": ARGS.interval})

    def token(self, f):
        grant = f.get("grant_type")
        if grant in ("client_credentials", JWT_BEARER):
            return self.app(f, grant)
        if not self.client_ok(f):
            record(event="token", grant=grant, result="invalid_client")
            return self.error("invalid_client", "AADSTS7000215: Invalid client secret provided.",
                              401)
        if grant == "refresh_token":
            return self.refresh(f)
        if grant == "urn:ietf:params:oauth:grant-type:device_code":
            return self.device_poll(f)
        if grant == "authorization_code":
            return self.code(f)
        record(event="token", grant=grant, result="unsupported_grant_type")
        return self.error("unsupported_grant_type")

    def trouble(self, ev):
        """The mode's trouble: True if the request was answered so."""
        with LOCK:
            mode = STATE["mode"]
        ev["mode"] = mode
        if mode == "drop":
            record(result="dropped", **ev)
            self.close_connection = True
            self.connection.close()
            return True
        if mode == "500":
            record(result="503", **ev)
            self.answer(503, {"message": "service unavailable"})
            return True
        if mode.startswith("slow:"):
            record(result="slow", **ev)
            time.sleep(float(mode[5:]))
        return False

    def token_url(self):
        return "https://%s/token" % self.headers.get("Host", "")

    def app(self, f, grant):
        """client_credentials and the JWT bearer grant: no refresh token."""
        ev = {"event": "token", "grant": grant}
        if self.trouble(ev):
            return
        if grant == "client_credentials":
            if f.get("client_id") != ARGS.client_id:
                why = "client_id"
            elif "client_assertion" in f:
                ev["how"] = "assertion"
                why = self.assertion_check(f)
            else:
                ev["how"] = "secret"
                why = None if (ARGS.client_secret is not None and
                               f.get("client_secret") == ARGS.client_secret) else "client_secret"
            if why is None and f.get("scope") != "https://outlook.office365.com/.default":
                why = "scope " + str(f.get("scope"))
            err = "invalid_client"
        else:
            why = self.bearer_check(f)
            err = "invalid_grant"
        if why is not None:
            record(result=err, why=why, **ev)
            return self.error(err, "AADSTS700027: the client's credentials: " + why, 401
                              if err == "invalid_client" else 400)
        with LOCK:
            out = issue(refresh=False)
        record(result="ok", **ev)
        self.answer(200, out)

    def jwt(self, token, cert_file):
        """(header, claims, why): a JWS of ours checked with cert_file's key."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding
        with open(ARGS.secrets, "a") as sf:
            sf.write(token + "\n")
        parts = token.split(".")
        if len(parts) != 3:
            return None, None, "not a JWS"

        def unb64(x):
            return base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
        try:
            header, claims = json.loads(unb64(parts[0])), json.loads(unb64(parts[1]))
        except ValueError:
            return None, None, "not JSON"
        with open(cert_file, "rb") as cf:
            cert = x509.load_pem_x509_certificate(cf.read())
        if header.get("alg") != "RS256" or header.get("typ") != "JWT":
            return header, claims, "alg or typ"
        try:
            cert.public_key().verify(unb64(parts[2]), (parts[0] + "." + parts[1]).encode(),
                                     padding.PKCS1v15(), hashes.SHA256())
        except Exception:
            return header, claims, "signature"
        der = cert.public_bytes(serialization.Encoding.DER)
        header["_x5t"] = b64url(hashlib.sha1(der).digest())
        header["_x5t256"] = b64url(hashlib.sha256(der).digest())
        return header, claims, None

    def assertion_check(self, f):
        if f.get("client_assertion_type") != \
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" or not ARGS.client_cert:
            return "client_assertion_type"
        h, c, why = self.jwt(f.get("client_assertion", ""), ARGS.client_cert)
        if why:
            return why
        now = time.time()
        if h.get("x5t") != h["_x5t"] or h.get("x5t#S256") != h["_x5t256"]:
            return "thumbprint"
        if c.get("aud") != self.token_url():
            return "aud %s" % c.get("aud")
        if c.get("iss") != ARGS.client_id or c.get("sub") != ARGS.client_id:
            return "iss or sub"
        if not isinstance(c.get("exp"), int) or c["exp"] <= now or c["exp"] > now + 600:
            return "exp"
        if not isinstance(c.get("nbf"), int) or c["nbf"] > now + 5:
            return "nbf"
        with LOCK:
            if not c.get("jti") or c["jti"] in STATE["jti"]:
                return "jti replayed"
            STATE["jti"].add(c["jti"])
        return None

    def bearer_check(self, f):
        if not ARGS.sa_cert:
            return "no service account"
        h, c, why = self.jwt(f.get("assertion", ""), ARGS.sa_cert)
        if why:
            return why
        now = time.time()
        if ARGS.sa_kid and h.get("kid") != ARGS.sa_kid:
            return "kid"
        if c.get("iss") != ARGS.sa_email:
            return "iss"
        if c.get("sub") != ARGS.sa_sub:
            return "sub %s" % c.get("sub")
        if "https://mail.google.com/" not in str(c.get("scope", "")).split():
            return "scope"
        if c.get("aud") != self.token_url():
            return "aud"
        if not isinstance(c.get("exp"), int) or not isinstance(c.get("iat"), int) or \
                c["exp"] <= now or c["exp"] - c["iat"] > 3600:
            return "exp or iat"
        return None

    def refresh(self, f):
        rt = f.get("refresh_token", "")
        ev = {"event": "token", "grant": "refresh_token", "rt": short(rt)}
        if self.trouble(ev):
            return
        time.sleep(ARGS.refresh_delay)
        with LOCK:
            r = STATE["refresh"].get(rt)
            if r is None or not r["valid"]:
                record(result="invalid_grant", **ev)
                return self.error("invalid_grant", "AADSTS70008: The provided authorization "
                                  "code or refresh token has expired due to inactivity.\r\n"
                                  "Trace ID: 0000")
            # Its predecessor has served its turn: its successor (this one)
            # reached us, so the client has it.
            if r["parent"] is not None:
                STATE["refresh"][r["parent"]]["valid"] = False
                r["parent"] = None
            out = issue(refresh=False)
            if ARGS.rotate:
                nrt = secret("rt-")
                STATE["refresh"][nrt] = {"valid": True, "parent": rt}
                out["refresh_token"] = nrt
                ev["new_rt"] = short(nrt)
        record(result="ok", **ev)
        self.answer(200, out)

    def device_poll(self, f):
        dc = f.get("device_code", "")
        now = time.time()
        with LOCK:
            d = STATE["devices"].get(dc)
            STATE["polls"] += 1
            n = STATE["polls"]
            if d is None:
                result, body = "invalid_grant", None
            elif now > d["expires"]:
                result, body = "expired_token", None
            elif d["denied"]:
                result, body = "access_denied", None
            elif n <= ARGS.slow_down_first or now - d["last"] < d["interval"] - 0.05:
                d["interval"] += 5
                result, body = "slow_down", None
            elif not d["approved"]:
                result, body = "authorization_pending", None
            else:
                del STATE["devices"][dc]
                result, body = "ok", issue()
            if d is not None:
                d["last"] = now
        record(event="token", grant="device_code", result=result,
               since_last=None if d is None else round(now - d.get("prev", now), 3))
        if d is not None:
            d["prev"] = now
        if body is None:
            return self.error(result)
        self.answer(200, body)

    def code(self, f):
        c = f.get("code", "")
        with LOCK:
            x = STATE["codes"].get(c)
            ok = (x is not None and not x["used"] and f.get("redirect_uri") == x["redirect"] and
                  b64url(hashlib.sha256(f.get("code_verifier", "").encode()).digest()) ==
                  x["challenge"])
            if x is not None:
                x["used"] = True
            body = issue() if ok else None
        record(event="token", grant="authorization_code", result="ok" if ok else "invalid_grant")
        if not ok:
            return self.error("invalid_grant", "the code, its redirect_uri or its verifier")
        self.answer(200, body)


def main():
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    srv = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    srv.daemon_threads = True
    # The handshake in each request's thread, not in the accepting one.
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    sys.stdout.write("PORT %d\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


main()
