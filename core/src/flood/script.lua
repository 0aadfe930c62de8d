-- smart_limit: flood control for a synced room (store=redis sync=): one client key's budget of
-- places, shared by every node of the fleet ([S15]).
--
-- A synced room decides on each node's shared memory and meets Redis once an interval, so a
-- budget kept on the node gives one address N budgets on N nodes. Taking a place (a client's
-- first return with its ticket) happens once per client: the node calls this script then, and
-- only then, and the address pays from one bucket for the whole fleet. The arithmetic is
-- room::gcra::Rate::take's (core/tests/flood_script.rs compares them), the same as the flood
-- step of the central room script (room.lua), which pays inside its own call.
--
-- KEYS[1] PREFIX:{ROOM}:flood:HASH   string: the bucket's theoretical arrival time (us). HASH
--         is the client key hashed with a seed every node derives from the ticket keys; the
--         room's hash tag keeps it in the room's Redis Cluster slot. The key expires when the
--         bucket is full again (a missing bucket is a full one): at most (1 + burst) intervals
--         after its address last took a place.
-- ARGV[1] now in unix ms; "0" = the Redis server's clock in us (what nginx sends: one clock
--         for the whole fleet). Tests pass explicit times.
-- ARGV[2] the rate's interval in us (1 / rate), at least 1
-- ARGV[3] burst: places at once above the rate (1 + burst in all from a full bucket)
--
-- Reply: {1, 0} paid: the client may take its place;
--        {0, retry_ms} refused: the bucket allows the next place in retry_ms (at least 1).
-- Work per call: one GET and at most one SET (O(1)).

-- Redis < 5 needs this before writing after TIME; Redis 7 and Valkey ignore it.
if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local key = KEYS[1]
local now_us = (tonumber(ARGV[1]) or 0) * 1000
if now_us == 0 then
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local interval = tonumber(ARGV[2]) or 0
local burst = tonumber(ARGV[3]) or -1
if not key or interval < 1 or burst < 0 then
  return redis.error_reply('smart_limit: bad flood arguments')
end

local function ntos(n)
  return string.format('%.0f', n)
end

local tat = tonumber(redis.call('GET', key)) or 0
if tat < now_us then
  tat = now_us
end
local allowed_from = tat - burst * interval
if allowed_from > now_us then
  -- Rounded up to whole ms in integers (as u64::div_ceil), not by float division.
  local wait_us = allowed_from - now_us
  local ms = math.floor(wait_us / 1000)
  if ms * 1000 < wait_us then
    ms = ms + 1
  end
  return {0, math.max(ms, 1)}
end
tat = tat + interval
-- The bucket is full again at `tat`: it may go then.
local ttl = math.floor((tat - now_us + 999) / 1000)
redis.call('SET', key, ntos(tat), 'PX', ntos(math.max(ttl, 1)))
return {1, 0}
