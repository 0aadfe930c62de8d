-- smart_limit: one node's sync of a fleet-wide rate zone ([S13], the AJA design).
--
-- Once per interval every node sends its CUMULATIVE counters (requests offered to the zone and
-- requests passed, since the node's zone was created), read at a tick aligned on the wall
-- clock (a multiple of the interval: the same instant on every node), and gets back the
-- fleet's picture. The fleet's rate is the sum of each node's rate over the same window:
--   - a node's rate comes from two successive cumulative reports of that node (counts over the
--     node's own time between them), so a report lost or abandoned on the way loses no
--     requests: the next one covers the gap;
--   - a report not newer than the one stored (a sync its node abandoned, which Redis ran late,
--     or a replay) is ignored: a node's series never runs backwards and no rate is ever
--     negative (the bug AJA hit when two collections overlapped);
--   - the windows are summed by their end: when every live node has reported the newest
--     window, its rates; otherwise every node's rate for the window before. Nodes report at
--     about the same instant, in any order, so a sum of each node's latest rate would mix
--     windows and jitter; one window for all sums their (often opposite) swings away;
--   - nodes joining or leaving change the sum by their own rate only (a sum of cumulative
--     counters would drop when a node leaves); a node not heard from for `stale` ms (by this
--     server's clock) drops out of the sum, and its entry is deleted.
-- The script also keeps the fleet's own cumulative totals (increased by each accepted report's
-- difference), which only grow, for metrics.
--
-- KEYS[1] PREFIX:{NAME}:rate   hash: one field per node id (11 numbers, see `entry` below),
--                              and the field "~fleet": "offered passed" (fleet totals).
-- ARGV: [1] node id (decimal, random per node's zone)  [2] seq (grows with every sync of the
--       node)  [3] offered  [4] passed (cumulative)  [5] the node's own offered rate as it
--       measured it (milli r/s), its rate until a second report  [6] the window's end (ms, a
--       multiple of the interval)  [7] when the counters were read (ms, the node's clock)
--       [8] stale ms  [9] key TTL ms
-- Reply: {fleet_offered_rate, fleet_passed_rate, nodes, total_offered, total_passed,
--         window_end, accepted (1: this report was taken, 0: it was not newer than the stored
--         one), own_offered_rate (this node's, over the same window)}. Rates in
--         milli-requests a second. Work per call: O(nodes).

if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local key = KEYS[1]
local id = ARGV[1] or ''
local seq = tonumber(ARGV[2])
local offered = tonumber(ARGV[3])
local passed = tonumber(ARGV[4])
local own_rate = tonumber(ARGV[5])
local win = tonumber(ARGV[6])
local at = tonumber(ARGV[7])
local stale = tonumber(ARGV[8])
local ttl = tonumber(ARGV[9])
if not (string.match(id, '^%d+$') and seq and offered and passed and own_rate and win and at
        and stale and ttl) then
  return redis.error_reply('smart_limit: bad rate sync arguments')
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- An entry: seq offered passed at win r_off r_pass prev_win prev_r_off prev_r_pass seen, at
-- the places SEQ .. SEEN (1 .. 11) the preamble above this file's text defines (SYNC_SCRIPT's
-- Entry in core/src/rate/script.rs).

local function numbers(text)
  local out = {}
  for word in string.gmatch(text, '%S+') do
    out[#out + 1] = tonumber(word)
  end
  return out
end

-- Integers as plain digits (tostring would switch to exponent notation past 1e14).
local function encode(e)
  local words = {}
  for i = 1, SEEN do
    words[i] = string.format('%.0f', e[i])
  end
  return table.concat(words, ' ')
end

local all = redis.call('HGETALL', key)
local total_offered, total_passed = 0, 0
local entries = {}
local mine
for i = 1, #all, 2 do
  local field, value = all[i], all[i + 1]
  if field == '~fleet' then
    local x = numbers(value)
    total_offered, total_passed = x[1] or 0, x[2] or 0
  else
    local e = numbers(value)
    if #e ~= SEEN then
      redis.call('HDEL', key, field)
    elseif field == id then
      mine = e
    else
      entries[#entries + 1] = {field, e}
    end
  end
end

local accepted = 0
if mine then
  if seq > mine[SEQ] and win > mine[WIN] and offered >= mine[OFF] and passed >= mine[PASS] then
    accepted = 1
    local r_off, r_pass = mine[R_OFF], mine[R_PASS]
    local dt = at - mine[AT]
    if dt > 0 then
      r_off = math.floor((offered - mine[OFF]) * RATE_SCALE / dt)
      r_pass = math.floor((passed - mine[PASS]) * RATE_SCALE / dt)
    end
    total_offered = total_offered + (offered - mine[OFF])
    total_passed = total_passed + (passed - mine[PASS])
    mine = {seq, offered, passed, at, win, r_off, r_pass, mine[WIN], mine[R_OFF], mine[R_PASS],
            now}
  end
else
  -- A node's first report: its rate is what it measured itself until the next one.
  accepted = 1
  mine = {seq, offered, passed, at, win, own_rate, 0, 0, own_rate, 0, now}
end
if accepted == 1 then
  redis.call('HSET', key, id, encode(mine))
end
entries[#entries + 1] = {id, mine}

-- The live nodes, and the newest window any of them reported.
local live = {}
local newest = 0
for _, item in ipairs(entries) do
  local e = item[2]
  if now - e[SEEN] > stale then
    redis.call('HDEL', key, item[1])
  else
    live[#live + 1] = item
    if e[WIN] > newest then
      newest = e[WIN]
    end
  end
end
local complete = true
for _, item in ipairs(live) do
  if item[2][WIN] ~= newest then
    complete = false
  end
end
local fleet_offered, fleet_passed, window, own = 0, 0, newest, 0
for _, item in ipairs(live) do
  local e = item[2]
  local r_off, r_pass = e[R_OFF], e[R_PASS]
  if not complete and e[WIN] == newest then
    r_off, r_pass = e[P_R_OFF], e[P_R_PASS]
    window = e[P_WIN]
  end
  fleet_offered = fleet_offered + r_off
  fleet_passed = fleet_passed + r_pass
  if item[1] == id then
    own = r_off
  end
end

redis.call('HSET', key, '~fleet', string.format('%.0f %.0f', total_offered, total_passed))
redis.call('PEXPIRE', key, ttl)
return {fleet_offered, fleet_passed, #live, total_offered, total_passed, window, accepted, own}
