"""An HTTP/3 client for the t/ suite (aioquic; Debian 12's curl has no HTTP/3).

    h3_client.py --port P --ca CERT --jar FILE [--accept TYPE] [--parallel] PATH...

Opens ONE QUIC connection to 127.0.0.1:P (server name "localhost", the certificate checked
against CERT), sends a GET for every PATH (one after the other, or all at once as concurrent
streams with --parallel) and prints one JSON line per response, in the order of the paths:
{"path", "status", "headers": {lower-case name: [values]}, "body", "alpn", "stream"}.
A request that gets no answer prints {"path", "status": 0, "error"}.

The cookie jar FILE is a JSON object name -> value, as a browser would keep it: each request
sends the jar's cookies, each response's Set-Cookie headers update it (Max-Age=0 deletes).
Exit status: 0 when every request got an answer, 1 otherwise, 2 when no connection was made.
"""

import argparse
import asyncio
import json
import os
import ssl
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration

TIMEOUT = 10.0


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.pending = {}   # stream id -> (future, response being read)

    def quic_event_received(self, event):
        for ev in self.h3.handle_event(event):
            if not isinstance(ev, (HeadersReceived, DataReceived)):
                continue
            entry = self.pending.get(ev.stream_id)
            if entry is None:
                continue
            fut, resp = entry
            if isinstance(ev, HeadersReceived):
                resp["headers"].extend(ev.headers)
            else:
                resp["body"] += ev.data
            if ev.stream_ended and not fut.done():
                fut.set_result(resp)

    async def get(self, path, headers):
        stream = self._quic.get_next_available_stream_id()
        fut = asyncio.get_running_loop().create_future()
        self.pending[stream] = (fut, {"headers": [], "body": b"", "stream": stream})
        self.h3.send_headers(
            stream,
            [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"localhost"),
             (b":path", path.encode())] + headers,
            end_stream=True)
        self.transmit()
        return await asyncio.wait_for(fut, TIMEOUT)


def load_jar(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def update_jar(jar, set_cookies):
    for line in set_cookies:
        parts = [p.strip() for p in line.split(";")]
        if "=" not in parts[0]:
            continue
        name, value = parts[0].split("=", 1)
        attrs = {p.split("=", 1)[0].lower(): (p.split("=", 1) + [""])[1] for p in parts[1:]}
        max_age = attrs.get("max-age")
        if max_age is not None and max_age.lstrip("-").isdigit() and int(max_age) <= 0:
            jar.pop(name, None)
        else:
            jar[name] = value


def decode(resp, path, alpn):
    headers = {}
    status = 0
    for name, value in resp["headers"]:
        name, value = name.decode(), value.decode("latin-1")
        if name == ":status":
            status = int(value)
        else:
            headers.setdefault(name, []).append(value)
    return {"path": path, "status": status, "headers": headers,
            "body": resp["body"].decode("utf-8", "replace"), "alpn": alpn,
            "stream": resp["stream"]}


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--jar", required=True)
    ap.add_argument("--accept", default="text/html")
    ap.add_argument("--parallel", action="store_true")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()

    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost",
                               verify_mode=ssl.CERT_REQUIRED)
    config.load_verify_locations(args.ca)
    jar = load_jar(args.jar)
    results = []
    try:
        async with connect("127.0.0.1", args.port, configuration=config,
                           create_protocol=Client, wait_connected=True) as client:
            alpn = client._quic.tls.alpn_negotiated

            def headers():
                h = [(b"accept", args.accept.encode()), (b"user-agent", b"smart-limit-test-h3")]
                if jar:
                    cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
                    h.append((b"cookie", cookie.encode()))
                return h

            async def one(path):
                try:
                    r = decode(await client.get(path, headers()), path, alpn)
                except Exception as e:   # a timeout or a reset stream: status 0
                    return {"path": path, "status": 0, "error": repr(e)}
                update_jar(jar, r["headers"].get("set-cookie", []))
                return r

            if args.parallel:
                results = await asyncio.gather(*(one(p) for p in args.paths))
            else:
                for p in args.paths:
                    results.append(await one(p))
    except Exception as e:
        print(json.dumps({"status": 0, "error": "no connection: " + repr(e)}))
        return 2
    tmp = args.jar + ".tmp"
    with open(tmp, "w") as f:
        json.dump(jar, f)
    os.replace(tmp, args.jar)
    for r in results:
        print(json.dumps(r))
    return 0 if all(r["status"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(asyncio.wait_for(main(), 30)))
