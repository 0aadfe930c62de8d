#!/usr/bin/env python3
"""What a named message format would cost a synced room's script call (issue 49, item 3).

A sync carries 24 positional arguments (200 waiter sightings packed as "sid:arrival:age"
strings, 400 session sightings as "sid:age") and gets back a positional array (11 integers,
three arrays, the line or samples). The named alternative: one JSON object each way, through
Redis's cjson. This runs both on a real redis-server, each call doing only the format's work
on a sync's largest payload at 100,000 waiting (the reply's 129 samples and 64 ends, the
sightings' caps), and reads each call's time inside Redis from SLOWLOG (as
`scripts/bench --sync-calls` does for the real script). The difference is what the named
format would add to a real call; compare it with that call's median.

    python3 scripts/lib/sync-format.py [--calls N] [--rounds K] [--port P]
                                       [--waiters W] [--sessions S]

Starts its own redis-server on a free loopback port unless --port is given; alternates the
two formats in rounds and prints each format's median and p95 (us) over the calls.
"""

import argparse
import json
import random
import socket
import subprocess
import sys
import tempfile
import time

POSITIONAL = r"""
local op, id = ARGV[1], ARGV[2]
local n = {}
for i = 3, 15 do n[#n + 1] = tonumber(ARGV[i]) end
local seen = 0
for sid, age in string.gmatch(ARGV[16], '(%d+):(%d+)') do seen = seen + tonumber(age) end
for sid, age in string.gmatch(ARGV[17], '(%d+):(%d+)') do seen = seen + tonumber(age) end
for sid, arrival, age in string.gmatch(ARGV[18], '(%d+):(%d+):(%d+)') do
  seen = seen + tonumber(arrival) + tonumber(age)
end
for i = 19, 23 do n[#n + 1] = tonumber(ARGV[i]) end
for hex, ms in string.gmatch(ARGV[24], '(%x+):(%d+)') do seen = seen + tonumber(ms) end
local ends = {3}
for i = 1, 64 do ends[#ends + 1] = 1000 + i end
local reply = {100000, 99999, 1764000000000, 3, 3, 1764000000000, 2, 5, 9, 0, 0, {}, {}, ends, ''}
for i = 0, 128 do
  reply[#reply + 1] = i * 777
  reply[#reply + 1] = 1764000000000 + i * 13
end
return reply
"""

NAMED = r"""
local m = cjson.decode(ARGV[1])
local n = {m.window, m.now, m.max_active, m.active_window, m.presence, m.stale, m.ttl,
  m.keep, m.interval, m.gen, m.seq, m.max_line, m.polls, m.flood_interval, m.flood_burst,
  m.asked, m.challenged}
local seen = 0
for _, s in ipairs(m.active) do seen = seen + s[2] end
for _, s in ipairs(m.admitted) do seen = seen + s[2] end
for _, w in ipairs(m.waiters) do seen = seen + w[2] + w[3] end
for _, p in ipairs(m.spent) do seen = seen + p[2] end
local ends = {}
for i = 1, 64 do ends[#ends + 1] = 1000 + i end
local samples = {}
for i = 0, 128 do samples[#samples + 1] = {i * 777, 1764000000000 + i * 13} end
return cjson.encode({fleet_active = 100000, queue_len = 99999, cursor = 1764000000000,
  quota = 3, nodes = 3, window = 1764000000000, free = 2, expiring = 5, leaving = 9,
  full = 0, pressure = 0, spent = {}, flood = {}, held = 3, ends = ends, line = '',
  samples = samples})
"""


def resp(*parts):
    out = [b"*%d\r\n" % len(parts)]
    for p in parts:
        p = p if isinstance(p, bytes) else str(p).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(p), p))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def call(self, *parts):
        self.s.sendall(resp(*parts))
        return self.read()

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError("bad reply %r" % line)


def payload(rng, waiting, sessions):
    sid = lambda: rng.randrange(1 << 63, 1 << 64)
    active = [(sid(), rng.randrange(0, 2000)) for _ in range(sessions - sessions // 2)]
    admitted = [(sid(), rng.randrange(0, 2000)) for _ in range(sessions // 2)]
    waiters = [(sid(), 1764000000000 + rng.randrange(0, 600000), rng.randrange(0, 2000))
               for _ in range(waiting)]
    spent = [("%016x" % sid(), 60000) for _ in range(8)]
    nums = dict(window=1764000000000, now=1764000000123, max_active=100, active_window=5000,
                presence=20000, stale=600, ttl=120000, keep=500000, interval=200, gen=1,
                seq=42, max_line=0, polls=150, flood_interval=0, flood_burst=0,
                asked=150, challenged=0)
    positional = (["sync", "7"] + [nums[k] for k in ("window", "now", "max_active",
                  "active_window", "presence", "stale", "ttl", "keep", "interval", "gen",
                  "seq", "max_line", "polls")]
                  + [" ".join("%d:%d" % a for a in active),
                     " ".join("%d:%d" % a for a in admitted),
                     " ".join("%d:%d:%d" % w for w in waiters),
                     nums["flood_interval"], nums["flood_burst"], "",
                     nums["asked"], nums["challenged"],
                     " ".join("%s:%d" % p for p in spent)])
    # Session ids are strings in JSON: a Lua number (a double) holds 53 bits, an id 64.
    named = dict(nums, op="sync", id="7",
                 active=[[str(s), a] for s, a in active],
                 admitted=[[str(s), a] for s, a in admitted],
                 waiters=[[str(s), t, a] for s, t, a in waiters],
                 flood=[], spent=[[h, ms] for h, ms in spent])
    return positional, json.dumps(named, separators=(",", ":"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def percentile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--port", type=int)
    ap.add_argument("--waiters", type=int, default=200,
                    help="waiter sightings a call carries (the cap: 200)")
    ap.add_argument("--sessions", type=int, default=200,
                    help="admitted and active sightings a call carries (the cap: 400, less"
                         " the waiters)")
    a = ap.parse_args()
    proc = None
    port = a.port
    if port is None:
        port = free_port()
        d = tempfile.mkdtemp(prefix="sl-sync-format.")
        proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port),
                                 "--save", "", "--appendonly", "no", "--dir", d],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
    try:
        c = Conn(port)
        version = c.call("INFO", "server").decode()
        version = next(l.split(":")[1] for l in version.splitlines()
                       if l.startswith("redis_version"))
        shas = {k: c.call("SCRIPT", "LOAD", s).decode()
                for k, s in (("positional", POSITIONAL), ("named", NAMED))}
        rng = random.Random(49)
        positional, named = payload(rng, a.waiters, a.sessions)
        args = {"positional": positional, "named": [named]}
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        c.call("CONFIG", "SET", "slowlog-max-len", str(a.calls + 10))
        times = {"positional": [], "named": []}
        per_round = max(1, a.calls // a.rounds)
        for r in range(a.rounds):
            for k in (("positional", "named") if r % 2 == 0 else ("named", "positional")):
                c.call("SLOWLOG", "RESET")
                for _ in range(per_round):
                    c.call("EVALSHA", shas[k], 0, *args[k])
                log = c.call("SLOWLOG", "GET", str(per_round + 10))
                times[k] += [int(e[2]) for e in log if e[3][0].upper() == b"EVALSHA"]
        sizes = {"positional": sum(len(str(x)) for x in positional), "named": len(named)}
        print("redis %s, %d waiter and %d session sightings a call, %d calls each, alternating"
              " in %d rounds; time inside Redis (SLOWLOG)"
              % (version, a.waiters, a.sessions, len(times["positional"]), a.rounds))
        print("%-11s %9s %9s %9s %12s" % ("format", "median", "p95", "max", "args bytes"))
        for k in ("positional", "named"):
            v = times[k]
            print("%-11s %7d us %7d us %7d us %12d" % (k, percentile(v, 0.5), percentile(v, 0.95),
                                                      max(v), sizes[k]))
        d = percentile(times["named"], 0.5) - percentile(times["positional"], 0.5)
        print("named - positional, medians: %+d us a call" % d)
    finally:
        if proc:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
