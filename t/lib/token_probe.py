"""Admission tokens from the outside ([S28], t/380-tokens.t): an app's flow and every forgery.

    token_probe.py flow  PORT KEY_PEM       one node: JSON wait, admission, token, API calls
                                            with the bearer token and no cookie; the token
                                            verifies with PyJWT and with jose (node) against
                                            the JWKS the node serves; forgeries make new users
    token_probe.py fleet PORT1 PORT2        two nodes of one fleet: a token from node 1
                                            admits on node 2; both serve the same key set
    token_probe.py named PORT ISSUER HEADER `issuer=` and `bearer=`: the token names ISSUER
                                            and passes in HEADER, not in Authorization
    token_probe.py revoke PORT PREFIX       under PREFIX (/poll, /api, /logout), the origin revokes a session: its ticket cookie and
                                            its token, replayed, make new users on this node;
                                            the client waiting is let in and passes
    token_probe.py es256 PORT AUDIENCE      a P-256 key and `audience=`: an ES256 token with
                                            `aud` that PyJWT and jose verify (what an API
                                            gateway without EdDSA needs)

The front under test (see t/380-tokens.t): `/poll` is a smart_limit_poll location, `/` goes to
an origin that echoes the `X-Token-Seen` header the front sets from `$smart_limit_token`, and
`/logout` is answered by the origin with `X-Smart-Limit: revoke`. The front adds
`X-SL-Status: $smart_limit_status` to every answer. Prints one line per check; exits 1 on the
first failure.
"""

import base64
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOM = "shop"
ISSUER = "smart_limit"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg)


class Client:
    """An HTTP client with its own cookie jar (names and values only), no redirects followed
    unless asked."""

    def __init__(self, port):
        self.port = port
        self.jar = {}

    def get(self, path, headers=None, follow=True, cookies=True):
        for _ in range(5):
            h = {"Host": "localhost", "Connection": "close"}
            h.update(headers or {})
            if cookies and self.jar:
                h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.jar.items())
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            c.request("GET", path, headers=h)
            r = c.getresponse()
            body = r.read()
            c.close()
            for k, v in r.getheaders():
                if k.lower() == "set-cookie":
                    name, _, rest = v.partition("=")
                    value = rest.split(";", 1)[0]
                    if "Max-Age=0" in v:
                        self.jar.pop(name, None)
                    else:
                        self.jar[name] = value
            if follow and r.status == 307:
                path = r.getheader("Location") or path
                continue
            return r.status, {k.lower(): v for k, v in r.getheaders()}, body
        fail("too many redirects")


def poll_json(client, path="/poll"):
    status, headers, body = client.get(path, {"Accept": "application/json"})
    try:
        return status, headers, json.loads(body)
    except ValueError:
        fail(f"{path}: not JSON ({status}): {body[:200]!r}")


def jwks_of(port):
    status, headers, body = Client(port).get("/.well-known/jwks.json")
    if status != 200:
        fail(f"JWKS: status {status}")
    if headers.get("content-type") != "application/jwk-set+json":
        fail(f"JWKS: content type {headers.get('content-type')}")
    if "max-age" not in headers.get("cache-control", ""):
        fail(f"JWKS: not cacheable: {headers.get('cache-control')}")
    return json.loads(body)


def pyjwt_verify(token, jwks, audience=None):
    """Verifies with PyJWT, the key chosen by the token's kid from the served set."""
    kid = jwt.get_unverified_header(token).get("kid")
    keys = {k["kid"]: jwt.PyJWK(k) for k in jwks["keys"]}
    if kid not in keys:
        fail(f"PyJWT: kid {kid} not in the JWKS")
    return jwt.decode(
        token,
        keys[kid].key,
        algorithms=["EdDSA", "ES256"],
        issuer=ISSUER,
        audience=audience,
        options={"require": ["exp", "iat", "iss", "sub", "jti"]},
    )


def jose_verify(token, port, audience=None):
    """Verifies with jose (npm) against the JWKS URL: a second, independent library."""
    script = os.path.join(ROOT, "t", "browser", "verify-token.mjs")
    url = f"http://127.0.0.1:{port}/.well-known/jwks.json"
    args = ["node", script, url, token, ISSUER] + ([audience] if audience else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        fail(f"jose refused the token: {p.stdout}{p.stderr}")
    return json.loads(p.stdout)


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def check_new_user(port, token, what):
    """A request with `token` as its bearer and no cookie is a new user: the cookie check."""
    status, headers, body = Client(port).get(
        "/", {"Authorization": "Bearer " + token}, follow=False
    )
    sl = headers.get("x-sl-status")
    if status != 307 or sl != "NEW":
        fail(f"{what}: expected a new user (307, NEW), got {status} {sl}: {body[:120]!r}")
    ok(f"{what}: a new user (307, NEW)")


def flow(port, key_pem):
    jwks = jwks_of(port)
    if len(jwks["keys"]) != 2 or any(k["kty"] != "OKP" or k["alg"] != "EdDSA" for k in jwks["keys"]):
        fail(f"JWKS: expected two Ed25519 keys: {jwks}")
    ok("JWKS served: two Ed25519 keys, application/jwk-set+json, cacheable")

    # B takes the room's one place; the app waits behind it (JSON), then B leaves (revoke).
    b = Client(port)
    status, _, doc = poll_json(b)
    if status != 200 or doc.get("status") != "admitted" or "token" not in doc:
        fail(f"B: expected admitted with a token, got {status} {doc}")
    app = Client(port)
    status, _, doc = poll_json(app)
    if status != 503 or doc.get("status") != "waiting" or doc.get("position") != 1:
        fail(f"app: expected to wait at 1, got {status} {doc}")
    if "token" in doc:
        fail("app: a waiting answer carries a token")
    ok("app waits at position 1 (JSON), no token")
    status, _, _ = b.get("/logout")
    if status != 200:
        fail(f"B's logout: {status}")
    status, _, doc = poll_json(app)
    if status != 200 or doc.get("status") != "admitted":
        fail(f"app: expected admitted after B's logout, got {status} {doc}")
    token = doc.get("token")
    if not token:
        fail(f"app: admitted without a token: {doc}")
    ok(f"app admitted, JSON carries a token ({len(token)} bytes)")

    claims = pyjwt_verify(token, jwks)
    now = time.time()
    if claims["room"] != ROOM or not (now < claims["exp"] <= now + 600 + 5):
        fail(f"PyJWT: claims {claims}")
    if jwt.get_unverified_header(token)["kid"] != jwks["keys"][0]["kid"]:
        fail("the first key of smart_limit_token_key did not sign")
    ok(f"PyJWT verifies it with the served JWKS (sub {claims['sub']}, exp in {claims['exp'] - int(now)} s)")
    jclaims = jose_verify(token, port)
    if jclaims.get("sub") != claims["sub"]:
        fail(f"jose: claims {jclaims}")
    ok("jose verifies it with the served JWKS URL")

    # The token alone, no cookie, passes as the admitted session while the room is full.
    for scheme in ("Bearer ", "bearer "):
        status, headers, body = Client(port).get("/api", {"Authorization": scheme + token}, follow=False)
        if status != 200 or headers.get("x-sl-status") != "PASSED":
            fail(f"API call with {scheme!r}: {status} {headers.get('x-sl-status')} {body[:120]!r}")
        seen = body.decode().split()[-1]
        seen_claims = pyjwt_verify(seen, jwks)
        if seen_claims["sub"] != claims["sub"]:
            fail("the origin's $smart_limit_token is another session's")
    ok("API calls with the bearer token and no cookie pass (PASSED); the origin gets the session's token in $smart_limit_token")
    status, headers, _ = Client(port).get("/api")
    if status == 200:
        fail("a client without the token was let in: the room is not full?")
    ok(f"without it, a new client is not let in ({status} {headers.get('x-sl-status')})")

    # Forgeries: each one a new user, never an admitted one.
    ours = serialization.load_pem_private_key(open(key_pem, "rb").read(), None)
    kid = jwks["keys"][0]["kid"]
    good = dict(claims)

    def signed(payload, key=ours, headers=None):
        return jwt.encode(payload, key, algorithm="EdDSA", headers=headers or {"kid": kid})

    # The forge itself makes a token the node accepts: the refusals are the changes' doing.
    status, headers, _ = Client(port).get("/api", {"Authorization": "Bearer " + signed(good)}, follow=False)
    if status != 200:
        fail(f"a re-signed genuine token was refused ({status}): the forgeries prove nothing")
    other = Ed25519PrivateKey.generate()
    check_new_user(port, signed(good, other), "signed with another key under our kid")
    check_new_user(port, signed(good, other, {"kid": "someone-else"}), "signed with another key and kid")
    h, p = b64(b'{"alg":"none","typ":"JWT"}'), b64(json.dumps(good).encode())
    check_new_user(port, f"{h}.{p}.", "alg none")
    pub = ours.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    raw = ours.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    for secret, what in ((pub, "PEM"), (raw, "raw bytes")):
        h = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
        sig = hmac.new(secret, f"{h}.{p}".encode(), hashlib.sha256).digest()
        check_new_user(port, f"{h}.{p}.{b64(sig)}", f"HS256 keyed with the public key ({what})")
    check_new_user(port, signed(dict(good, exp=int(now) - 1)), "expired")
    check_new_user(port, signed(dict(good, room="hall")), "another room's")
    check_new_user(port, signed(dict(good, iss="elsewhere")), "another issuer's")
    parts = token.split(".")
    tampered = dict(claims, sub="0000000000000001")
    check_new_user(port, f"{parts[0]}.{b64(json.dumps(tampered).encode())}.{parts[2]}", "a tampered claim")
    check_new_user(port, signed(dict(good, pad="x" * 2100)), "over the size bound")
    for g in ("garbage", "a.b.c", "...", "eyJhbGciOiJFZERTQSJ9." + "A" * 50 + ".!!"):
        check_new_user(port, g, f"garbage {g[:20]!r}")
    print("flow: all checks passed")


def fleet(port1, port2):
    jwks1, jwks2 = jwks_of(port1), jwks_of(port2)
    if jwks1 != jwks2:
        fail("the nodes serve different key sets")
    b = Client(port1)
    status, _, doc = poll_json(b)
    if status != 200 or "token" not in doc:
        fail(f"node 1: expected admitted with a token, got {status} {doc}")
    token = doc["token"]
    pyjwt_verify(token, jwks2)
    ok("node 1's token verifies with node 2's key set")
    status, headers, body = Client(port2).get("/api", {"Authorization": "Bearer " + token}, follow=False)
    if status != 200 or headers.get("x-sl-status") != "PASSED":
        fail(f"node 2: the token did not pass: {status} {headers.get('x-sl-status')} {body[:120]!r}")
    ok("node 1's token passes node 2 with no cookie (PASSED)")
    status, _, doc = poll_json(Client(port2))
    if status == 200:
        fail(f"node 2 let a new client in: the fleet's one place is taken ({doc})")
    ok(f"a new client on node 2 is not let in ({status})")
    print("fleet: all checks passed")


def revoke(port, prefix):
    a = Client(port)
    status, _, doc = poll_json(a, prefix + "/poll")
    if status != 200 or "token" not in doc:
        fail(f"expected admitted with a token, got {status} {doc}")
    token, cookie = doc["token"], dict(a.jar)
    api, logout = prefix + "/api", prefix + "/logout"
    status, headers, _ = Client(port).get(api, {"Authorization": "Bearer " + token}, follow=False)
    if status != 200:
        fail(f"the token did not pass before the revoke ({status} {headers.get('x-sl-status')})")
    # The next client waits for the one place (it is taken).
    b = Client(port)
    status, _, doc = poll_json(b, prefix + "/poll")
    if status != 503 or doc.get("status") != "waiting":
        fail(f"the next client did not wait: {status} {doc}")
    ok(f"the next client waits: {doc}")
    # (At once: on a synced node the admission, the waiting sighting before it and the revoke
    # then go in one report, which once brought the session back into the fleet's line.)
    status, headers, _ = a.get(logout)
    if status != 200 or headers.get("x-sl-status") != "REVOKED":
        fail(f"logout: {status} {headers.get('x-sl-status')}")
    if a.jar:
        fail(f"the ticket cookie was not deleted: {a.jar}")
    ok("the origin revoked the session (REVOKED, cookie deleted)")
    replay = Client(port)
    replay.jar = cookie
    status, headers, _ = replay.get(api, follow=False)
    if status != 307 or headers.get("x-sl-status") != "NEW":
        fail(f"the old ticket, replayed: {status} {headers.get('x-sl-status')}")
    ok("the old ticket cookie, replayed, makes a new user (307, NEW)")
    status, headers, _ = Client(port).get(api, {"Authorization": "Bearer " + token}, follow=False)
    if status != 307 or headers.get("x-sl-status") != "NEW":
        fail(f"the old token, replayed: {status} {headers.get('x-sl-status')}")
    ok("the old token, replayed, makes a new user (307, NEW)")
    # The place is free on this node at once; on a synced fleet, from the next share-out:
    # the waiting client polls as told until it is let in (bounded).
    for _ in range(20):
        status, _, doc = poll_json(b, prefix + "/poll")
        if status == 200 or doc.get("status") != "waiting":
            break
        time.sleep(min(doc.get("refresh_seconds", 1), 1))
    if status != 200 or "token" not in doc:
        fail(f"the waiting client was not let in: {status} {doc}")
    status, headers, _ = b.get(api, follow=False)
    if status != 200 or headers.get("x-sl-status") != "PASSED":
        fail(f"the next admission does not pass: {status} {headers.get('x-sl-status')}")
    ok("the next admission passes")
    print("revoke: all checks passed")


def es256(port, audience):
    jwks = jwks_of(port)
    if [(k["kty"], k["crv"], k["alg"]) for k in jwks["keys"]] != [("EC", "P-256", "ES256")]:
        fail(f"JWKS: expected one P-256 key: {jwks}")
    status, _, doc = poll_json(Client(port))
    if status != 200 or "token" not in doc:
        fail(f"expected admitted with a token, got {status} {doc}")
    token = doc["token"]
    if jwt.get_unverified_header(token)["alg"] != "ES256":
        fail(f"not ES256: {jwt.get_unverified_header(token)}")
    claims = pyjwt_verify(token, jwks, audience)
    if claims.get("aud") != audience:
        fail(f"aud is {claims.get('aud')}")
    ok(f"PyJWT verifies the ES256 token with aud {audience}")
    if jose_verify(token, port, audience).get("sub") != claims["sub"]:
        fail("jose: another sub")
    ok("jose verifies it too")
    status, headers, _ = Client(port).get("/", {"Authorization": "Bearer " + token}, follow=False)
    if status != 200 or headers.get("x-sl-status") != "PASSED":
        fail(f"the ES256 token did not pass ({status} {headers.get('x-sl-status')})")
    ok("it passes as a bearer token")
    print("es256: all checks passed")


def named(port, issuer, header):
    status, _, doc = poll_json(Client(port))
    if status != 200 or "token" not in doc:
        fail(f"expected admitted with a token, got {status} {doc}")
    token = doc["token"]
    claims = jwt.decode(token, options={"verify_signature": False})
    if claims["iss"] != issuer:
        fail(f"iss is {claims['iss']}, not {issuer}")
    ok(f"the token names the configured issuer {issuer}")
    status, headers, _ = Client(port).get("/", {header: "Bearer " + token}, follow=False)
    if status != 200 or headers.get("x-sl-status") != "PASSED":
        fail(f"{header}: the token did not pass ({status} {headers.get('x-sl-status')})")
    ok(f"the token passes in {header}")
    status, headers, _ = Client(port).get("/", {"Authorization": "Bearer " + token}, follow=False)
    if status == 200:
        fail("the token passed in Authorization, which bearer= replaced")
    ok(f"in Authorization it does not ({status} {headers.get('x-sl-status')})")
    print("named: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "flow":
        flow(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "fleet":
        fleet(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "revoke":
        revoke(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "es256":
        es256(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "named":
        named(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        print(__doc__)
        sys.exit(2)
