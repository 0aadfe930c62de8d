-- The fleet's arrival-bucket counts ([S22]): what `Ledger` in tally.rs keeps, in Redis. Not
-- called by the module yet: the picture still comes from the line's samples (script.lua). It
-- is here, with its twin test against a real redis-server (core/tests/fleet_tally_script.rs),
-- so that the module's counts start from a script already checked against the Rust rules.
--
-- A node sends what it counted since its last sync (Tally::take): per (epoch, bucket) how
-- many waiting tickets it stamped there, less those it moved out; per bucket the places taken
-- and the waiters let in. The script adds them, first taking off the epochs that left the
-- window (at most ARGV[4] entries a call: the rest go at the next call), and answers the
-- counts per bucket.
--
-- Work per call: the entries the report carries, the entries rolled (capped), and the buckets
-- of the reply (one per second of arrivals the line spans). None grows with how many wait.
--
-- KEYS: [1] by epoch: hash "epoch:bucket" -> sessions last stamped there
--       [2] index: sorted set of the by-epoch fields, scored by epoch (what to roll)
--       [3] n: hash bucket -> the sum over the live epochs
--       [4] placed: hash bucket -> places taken   [5] let in: hash bucket -> waiters let in
-- ARGV: [1] now (ms)  [2] epoch (ms)  [3] window (epochs a stamp stays counted after its own)
--       [4] roll cap  [5] key TTL (ms)
--       then the report: count, (bucket, k) x count placed; count, (bucket, k) x count let
--       in; count, (epoch, bucket, delta) x count
-- Reply: {1 if every dead epoch was rolled else 0, "bucket waiting placed let_in ..." for each
--        bucket whose count is above 0, by bucket, as one string (an array of integers would
--        be capped at 1,024 elements by the module's reply parser; a bulk string at 1 MiB,
--        about 35,000 buckets: ten hours of arrivals)}

local K_BY, K_IDX, K_N, K_PL, K_LI = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = tonumber(ARGV[1])
local epoch_ms = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])
if not (now and epoch_ms and window and cap and ttl) or epoch_ms < 1 then
  return redis.error_reply('ERR smart_limit tally: bad arguments')
end

local function digits(x)
  return string.format('%.0f', x)
end

-- Adds d to a hash field and drops the field at 0 (a count that went up and down again is not
-- kept); returns the new value.
local function bump(key, field, d)
  local v = redis.call('HINCRBY', key, field, d)
  if v == 0 then
    redis.call('HDEL', key, field)
  end
  return v
end

local current = math.floor(now / epoch_ms)
-- A stamp of epoch x counts while x + window >= the current epoch.
local function live(x)
  return x + window >= current
end

-- The epochs that left the window, off the counts (their sessions were not seen for a window).
local dead = redis.call('ZRANGEBYSCORE', K_IDX, '-inf', '(' .. digits(current - window),
  'LIMIT', 0, cap)
for _, field in ipairs(dead) do
  local c = tonumber(redis.call('HGET', K_BY, field)) or 0
  redis.call('HDEL', K_BY, field)
  redis.call('ZREM', K_IDX, field)
  local b = string.match(field, ':(%d+)$')
  if b and c ~= 0 then
    bump(K_N, b, -c)
  end
end
local rolled_all = 1
if #dead >= cap then
  local more = redis.call('ZRANGEBYSCORE', K_IDX, '-inf', '(' .. digits(current - window),
    'LIMIT', 0, 1)
  if #more > 0 then
    rolled_all = 0
  end
end

-- The report.
local i = 6
local function take()
  local v = tonumber(ARGV[i])
  i = i + 1
  return v
end
for _, key in ipairs({K_PL, K_LI}) do
  local count = take() or 0
  for _ = 1, count do
    local b, k = take(), take()
    if b and k then
      redis.call('HINCRBY', key, digits(b), k)
    end
  end
end
local deltas = take() or 0
for _ = 1, deltas do
  local x, b, d = take(), take(), take()
  -- A delta to an epoch out of the window is dropped: its sessions have left the counts.
  if x and b and d and d ~= 0 and live(x) then
    local field = digits(x) .. ':' .. digits(b)
    if bump(K_BY, field, d) == 0 then
      redis.call('ZREM', K_IDX, field)
    else
      redis.call('ZADD', K_IDX, x, field)
    end
    bump(K_N, digits(b), d)
  end
end

for _, key in ipairs({K_BY, K_IDX, K_N, K_PL, K_LI}) do
  redis.call('PEXPIRE', key, ttl)
end

-- The counts, by bucket.
local flat = redis.call('HGETALL', K_N)
local rows = {}
for j = 1, #flat, 2 do
  local b, c = tonumber(flat[j]), tonumber(flat[j + 1])
  if b and c and c > 0 then
    rows[#rows + 1] = {b, c}
  end
end
table.sort(rows, function(a, b) return a[1] < b[1] end)
local parts = {}
for _, r in ipairs(rows) do
  local b = digits(r[1])
  parts[#parts + 1] = b .. ' ' .. digits(r[2]) .. ' '
    .. digits(tonumber(redis.call('HGET', K_PL, b)) or 0) .. ' '
    .. digits(tonumber(redis.call('HGET', K_LI, b)) or 0)
end
return {rolled_all, table.concat(parts, ' ')}
