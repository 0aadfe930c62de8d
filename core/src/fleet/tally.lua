-- The fleet's arrival-bucket counts ([S22]): what `Ledger` in tally.rs keeps, in Redis. A
-- synced node calls it once an interval, beside its sync (src/store/fleet/tally.rs), and tells
-- a line too long for the picture to carry whole its positions from the reply. Its twin test
-- runs it against a real redis-server (core/tests/fleet_tally_script.rs); its bench is
-- scripts/bench --tally.
--
-- A node sends what it counted since its last call (FleetNode::take_tally): per (epoch, bucket)
-- how many waiting tickets it stamped there, less those it moved out; per bucket the places
-- taken (and their first and last arrival) and the waiters let in. Each live epoch has a hash
-- of its own, bucket -> count, in one of SLOTS keys (the epoch modulo SLOTS: more slots than
-- live epochs, so a slot is always free for the next epoch). An epoch that leaves the window is dropped whole (one UNLINK): no
-- per-entry work. The counts are the sums over the live epochs' hashes, made in the reply.
--
-- Work per call: the live epochs' hashes, and the places and let-in hashes, read once each (one
-- field per second of arrivals the line spans); the report's entries added in Lua and written
-- back a thousand fields a call. None of it grows with how many wait.
--
-- KEYS: [1..6] the epoch slots (hash bucket -> sessions last stamped there in that epoch)
--       [7] which epoch each slot holds (hash slot -> epoch)
--       [8] places taken (hash bucket -> count)   [9] waiters let in (hash bucket -> count)
--       [10] the arrivals the places came at (hash bucket -> "first last", ms)
--       [11] each node's last call (hash node -> "at let_ins span": when, on the fleet's clock
--            (ms), the waiters it let in that it reported, over how long since its call before)
-- ARGV: [1] now (ms)  [2] epoch (ms)  [3] window (epochs a stamp stays counted after its own)
--       [4] key TTL (ms)
--       then the report: count, (bucket, k) x count placed; count, (bucket, k) x count let
--       in; count, (epoch, bucket, delta) x count; count, (bucket, first, last) x count
--       spans; then the caller: node id, interval (ms), the fleet's clock (ms; 0: the server's)
-- Reply: "nodes let_ins" (what the counts lack: the nodes calling, and the other nodes' let-ins
--        since their last calls, each at the pace of its last report, for at most an interval),
--        then "bucket waiting placed let_in first last ..." for each bucket whose count is
--        above 0, by bucket, as one string (an array of integers would be capped at 1,024
--        elements by the module's reply parser; a bulk string at 1 MiB, about 35,000 buckets:
--        ten hours of arrivals)
--
-- From Rust, in the preamble above this file's text (TALLY_SCRIPT in core/src/fleet/tally.rs):
-- SLOTS (EPOCH_SLOTS), BATCH, STALE (sync::STALE_INTERVALS).

local K_META, K_PL, K_LI, K_SP, K_NODES = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local now = tonumber(ARGV[1])
local epoch_ms = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
if not (now and epoch_ms and window and ttl) or epoch_ms < 1 or window + 2 > SLOTS then
  return redis.error_reply('ERR smart_limit tally: bad arguments')
end

local function digits(x)
  return string.format('%.0f', x)
end

local current = math.floor(now / epoch_ms)
-- A stamp of epoch x counts while x + window >= the current epoch; one an epoch ahead (a
-- node whose clock runs a little ahead) counts too, one further ahead does not (window + 2
-- epochs at most are live: no more than SLOTS, so no two live epochs share a slot).
local function live(x)
  return x + window >= current and x <= current + 1
end

-- Which epoch each slot holds; a slot whose epoch left the window is dropped whole.
local held = {}
local meta = redis.call('HGETALL', K_META)
for j = 1, #meta, 2 do
  local s, x = tonumber(meta[j]), tonumber(meta[j + 1])
  if s and x and s >= 0 and s < SLOTS then
    if live(x) then
      held[s] = x
    else
      redis.call('UNLINK', KEYS[s + 1])
      redis.call('HDEL', K_META, meta[j])
    end
  end
end

-- Each live epoch's hash, read once: the report's deltas are added here and written back in
-- batches, and the counts are summed from these tables. (A HINCRBY per entry instead cost
-- about as much on the 2-core machine: scripts/bench --tally; most of the time is Lua's.)
local slot = {}
for s, _ in pairs(held) do
  local t = {}
  local flat = redis.call('HGETALL', KEYS[s + 1])
  for j = 1, #flat, 2 do
    t[flat[j]] = tonumber(flat[j + 1]) or 0
  end
  slot[s] = t
end

-- The report.
local i = 5
local function take()
  local v = tonumber(ARGV[i])
  i = i + 1
  return v
end
-- A bucket as the report spells it, the hash field as is: its decimal digits without a
-- leading zero (one field per bucket, and the sort below relies on it). Formatting each one
-- instead (string.format) was 1.4 ms of a 600-bucket call's 2.6 ms of parsing.
local function take_field()
  local v = ARGV[i]
  i = i + 1
  if v and (v == '0' or string.find(v, '^[1-9]%d*$')) then
    return v
  end
  return nil
end
local reported = 0
for _, key in ipairs({K_PL, K_LI}) do
  local count = take() or 0
  for _ = 1, count do
    local b, k = take_field(), take()
    if b and k then
      redis.call('HINCRBY', key, b, k)
      if key == K_LI then
        reported = reported + k
      end
    end
  end
end
local changed = {}
local deltas = take() or 0
for _ = 1, deltas do
  local x, field, d = take(), take_field(), take()
  -- A delta to an epoch out of the window is dropped: its sessions have left the counts.
  if x and field and d and d ~= 0 and live(x) then
    local s = x % SLOTS
    if held[s] ~= x then
      -- (A live epoch's slot holds no other live epoch: it was free, or dropped above.)
      redis.call('UNLINK', KEYS[s + 1])
      redis.call('HSET', K_META, digits(s), digits(x))
      held[s] = x
      slot[s] = {}
    end
    slot[s][field] = (slot[s][field] or 0) + d
    changed[s] = changed[s] or {}
    changed[s][field] = true
  end
end

-- The spans: each bucket's first and last arrival, widened.
local function map(key)
  local m = {}
  local flat = redis.call('HGETALL', key)
  for j = 1, #flat, 2 do
    m[flat[j]] = flat[j + 1]
  end
  return m
end
local spans = map(K_SP)
local spans_set = {}
for _ = 1, (take() or 0) do
  local field, lo, hi = take_field(), take(), take()
  if field and lo and hi and lo <= hi then
    local old = spans[field]
    if old then
      local a, z = string.match(old, '^(%d+) (%d+)$')
      a, z = tonumber(a), tonumber(z)
      if a and z then
        lo, hi = math.min(lo, a), math.max(hi, z)
      end
    end
    local v = digits(lo) .. ' ' .. digits(hi)
    if v ~= old then
      spans[field] = v
      spans_set[#spans_set + 1] = field
      spans_set[#spans_set + 1] = v
    end
  end
end
for j = 1, #spans_set, 2 * BATCH do
  redis.call('HSET', K_SP, unpack(spans_set, j, math.min(j + 2 * BATCH - 1, #spans_set)))
end

-- The changes written back, BATCH fields a command (a count back at 0 is deleted).
for s, fields in pairs(changed) do
  local set, del = {}, {}
  local function flush(force)
    if #set >= 2 * BATCH or (force and #set > 0) then
      redis.call('HSET', KEYS[s + 1], unpack(set))
      set = {}
    end
    if #del >= BATCH or (force and #del > 0) then
      redis.call('HDEL', KEYS[s + 1], unpack(del))
      del = {}
    end
  end
  for field, _ in pairs(fields) do
    local v = slot[s][field]
    if v == 0 then
      del[#del + 1] = field
    else
      set[#set + 1] = field
      set[#set + 1] = tostring(v)
    end
    flush(false)
  end
  flush(true)
end

-- What the counts lack: every other node's let-ins since its last call, which it reports at its
-- next; estimated at the pace of its last report (its let-ins over the time since its call
-- before), for the time since, at most an interval. A node that has not called for STALE
-- intervals is gone (dropped: the hash holds the nodes that call, no more).
local me, interval, fleet_now = take_field(), take(), take()
local nodes, unreported = 0, 0
if me and interval and interval >= 1 and fleet_now then
  if fleet_now == 0 then
    local t = redis.call('TIME')
    fleet_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local function call_of(v)
    local at, n, span = string.match(v or '', '^(%d+) (%d+) (%d+)$')
    return tonumber(at), tonumber(n), tonumber(span)
  end
  local last = call_of(redis.call('HGET', K_NODES, me))
  local span = interval
  if last then
    span = math.max(fleet_now - last, 1)
  end
  local call = digits(fleet_now) .. ' ' .. digits(reported) .. ' ' .. digits(span)
  redis.call('HSET', K_NODES, me, call)
  local flat = redis.call('HGETALL', K_NODES)
  for j = 1, #flat, 2 do
    local at, n, s = call_of(flat[j + 1])
    if not at or fleet_now - at > STALE * interval then
      redis.call('HDEL', K_NODES, flat[j])
    else
      nodes = nodes + 1
      if flat[j] ~= me then
        local gone = math.min(math.max(fleet_now - at, 0), interval)
        unreported = unreported + math.floor(n * gone / math.max(s, 1))
      end
    end
  end
end

for k = 1, 11 do
  redis.call('PEXPIRE', KEYS[k], ttl)
end

-- The counts: per bucket, the sum over the live epochs.
local sums = {}
for _, t in pairs(slot) do
  for b, c in pairs(t) do
    sums[b] = (sums[b] or 0) + c
  end
end
local placed, let_in = map(K_PL), map(K_LI)
local rows = {}
for b, c in pairs(sums) do
  if c > 0 then
    rows[#rows + 1] = b
  end
end
-- Buckets are digits without leading zeros: shorter is smaller, then as strings.
table.sort(rows, function(x, y)
  if #x ~= #y then
    return #x < #y
  end
  return x < y
end)
local parts = {}
for _, b in ipairs(rows) do
  parts[#parts + 1] = b .. ' ' .. tostring(sums[b]) .. ' ' .. (placed[b] or '0') .. ' '
    .. (let_in[b] or '0') .. ' ' .. (spans[b] or '0 0')
end
return digits(nodes) .. ' ' .. digits(unreported) .. (#parts > 0 and ' ' or '')
  .. table.concat(parts, ' ')
