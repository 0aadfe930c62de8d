-- smart_limit: the fleet's picture of one room decided locally ([S12], Cloudflare's design).
--
-- With `sync=`, every node decides on its own shared memory; once an interval its leader calls
-- this script ("sync") with what the node saw since its last call, and gets the fleet's picture
-- back. The only other call is "draw": a node whose share of this interval's admissions is used
-- up takes more places from what the fleet has left (the global pool), atomically.
--
-- KEYS (one {room} hash tag, one slot):
--   [1] PREFIX:{ROOM}:fleet     hash: "reserved" (admissions granted but not yet reported),
--                               "win" / "free" / "polls" / "given" (this interval's
--                               allocation: its base, the polls it is shared by, what was
--                               given out), and one
--                               field per node, "n:<id>": "seen grant draws alloc_win polls
--                               carry"
--   [2] PREFIX:{ROOM}:active    sorted set: admitted sessions by last sight (ms)
--   [3] PREFIX:{ROOM}:present   sorted set: waiting sessions by last sight (ms)
--   [4] PREFIX:{ROOM}:arrival   sorted set: waiting sessions by arrival (ms): the fleet's line
-- ARGV: [1] op "sync" | "draw"  [2] node id (digits)  [3] window (ms, a multiple of the
--   interval)  [4] now in ms ("0": this server's clock, what nginx sends; tests pass times)
--   [5] max_active  [6] active window ms  [7] presence ms  [8] stale ms (a node unheard of for
--   this long is dropped, its grant released)  [9] key TTL ms  [10] keep (ppm of the
--   interval's free places shared out to nodes; the rest stays in the pool)  [11] interval ms
--   sync only: [12] waiting polls this node answered since its last sync  [13] active sessions
--   seen, "sid:age_ms" (space-separated; the age of the sighting when sent, so a report that
--   waited, or a node whose clock differs, does not make a session look newer)  [14] sessions
--   admitted since the last sync, "sid:age_ms"  [15] waiting sessions seen,
--   "sid:arrival_ms:age_ms"
--   draw only: [12] places wanted
-- Replies:
--   sync: {fleet_active, queue_len, cursor_ms (-1: everyone), quota, nodes, window, free,
--          expiring (active sessions whose window ends within the interval), leaving (... within
--          the horizon: the interval, or half the active window up to 10 s, whichever is
--          longer), then pairs (rank, arrival_ms) sampled along the line, for positions}
--   draw: {places granted (0..wanted), fleet_active}
-- Work per call: O(nodes + what the node sends + sessions whose window ended (one C call) +
-- EXPIRE_STEP * log n + SAMPLES * log n).

if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local K_FLEET, K_ACTIVE, K_PRESENT, K_ARRIVAL = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, id = ARGV[1], ARGV[2] or ''
local window = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local max_active = tonumber(ARGV[5])
local active_window = tonumber(ARGV[6])
local presence = tonumber(ARGV[7])
local stale = tonumber(ARGV[8])
local ttl = tonumber(ARGV[9])
local keep = tonumber(ARGV[10])
local interval = tonumber(ARGV[11])
if not (string.match(id, '^%d+$') and window and now and max_active and active_window
        and presence and stale and ttl and keep and interval) then
  return redis.error_reply('smart_limit: bad fleet arguments')
end
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Most waiters one call drops from the line (each costs three commands here; the active set
-- is trimmed in one command, whatever the number).
local EXPIRE_STEP = 256
-- Samples of the line returned for positions: the first ranks one by one, then spaced out.
local FIRST_RANKS, SAMPLES = 32, 96

local function number(x) return tonumber(x) or 0 end
local function digits(x) return string.format('%.0f', x) end

-- A node's entry: seen, grant, draws, alloc_win, polls, carry (the fraction of a place its
-- shares left over, in millionths: over a few intervals every node gets its exact share).
local function read_node(text)
  if not text then return nil end
  local e = {}
  for w in string.gmatch(text, '%S+') do e[#e + 1] = tonumber(w) end
  if #e ~= 6 then return nil end
  return {seen = e[1], grant = e[2], draws = e[3], alloc = e[4], polls = e[5], carry = e[6]}
end
local function write_node(e)
  return digits(e.seen) .. ' ' .. digits(e.grant) .. ' ' .. digits(e.draws) .. ' '
    .. digits(e.alloc) .. ' ' .. digits(e.polls) .. ' ' .. digits(e.carry)
end

local reserved = number(redis.call('HGET', K_FLEET, 'reserved'))
local field = 'n:' .. id
local me = read_node(redis.call('HGET', K_FLEET, field))
  or {seen = now, grant = 0, draws = 0, alloc = 0, polls = 0, carry = 0}

local function expire(key, older_than)
  local old = redis.call('ZRANGEBYSCORE', key, '-inf', older_than, 'LIMIT', 0, EXPIRE_STEP)
  for _, sid in ipairs(old) do
    redis.call('ZREM', key, sid)
    if key == K_PRESENT then redis.call('ZREM', K_ARRIVAL, sid) end
  end
end

local function save()
  redis.call('HSET', K_FLEET, 'reserved', digits(math.max(reserved, 0)), field, write_node(me))
  for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl) end
end

if op == 'draw' then
  local want = tonumber(ARGV[12])
  if not want or want < 0 then
    return redis.error_reply('smart_limit: bad fleet arguments')
  end
  -- Sessions whose window ended since the last sync free their places now.
  redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', now - active_window)
  local active = redis.call('ZCARD', K_ACTIVE)
  me.seen = now
  local granted = math.max(math.min(want, max_active - active - reserved), 0)
  reserved = reserved + granted
  me.draws = me.draws + granted
  save()
  return {granted, active}
end
if op ~= 'sync' then
  return redis.error_reply('smart_limit: unknown fleet op')
end

-- What the node reports: its previous grant and draws became admissions it now reports (or
-- were not used): either way they are no longer reserved.
reserved = reserved - me.grant - me.draws
me.grant, me.draws, me.seen = 0, 0, now
me.polls = number(ARGV[12])
local function seen_at(age)
  return math.max(now - tonumber(age), 0)
end
-- Waiters first: a session admitted since it was seen waiting (here or on another node) is
-- active, and never joins the line again. One command for a waiter already present (the
-- common case: every poll of every waiter is a sighting); three for a new one.
for sid, arrival, age in string.gmatch(ARGV[15] or '', '(%d+):(%d+):(%d+)') do
  if redis.call('ZADD', K_PRESENT, 'GT', seen_at(age), sid) == 1 then
    if redis.call('ZSCORE', K_ACTIVE, sid) then
      redis.call('ZREM', K_PRESENT, sid)
    else
      redis.call('ZADD', K_ARRIVAL, 'NX', arrival, sid)
    end
  end
end
for sid, age in string.gmatch(ARGV[13] or '', '(%d+):(%d+)') do
  redis.call('ZADD', K_ACTIVE, 'GT', seen_at(age), sid)
end
for sid, age in string.gmatch(ARGV[14] or '', '(%d+):(%d+)') do
  redis.call('ZADD', K_ACTIVE, 'GT', seen_at(age), sid)
  redis.call('ZREM', K_PRESENT, sid)
  redis.call('ZREM', K_ARRIVAL, sid)
end
expire(K_PRESENT, now - presence)
redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', now - active_window)

-- The live nodes; a silent one is dropped and its reservations released.
local nodes, polls = 0, 0
local all = redis.call('HGETALL', K_FLEET)
for i = 1, #all, 2 do
  local f = all[i]
  if string.sub(f, 1, 2) == 'n:' and f ~= field then
    local e = read_node(all[i + 1])
    if not e or now - e.seen > stale then
      if e then reserved = reserved - e.grant - e.draws end
      redis.call('HDEL', K_FLEET, f)
    else
      nodes = nodes + 1
      polls = polls + e.polls
    end
  end
end
nodes = nodes + 1
polls = polls + me.polls
reserved = math.max(reserved, 0)

local active = redis.call('ZCARD', K_ACTIVE)
local queue_len = redis.call('ZCARD', K_ARRIVAL)

-- Sessions whose active window ends soon (they were last seen that long ago): within the
-- interval (their places free before the next picture) and within the horizon (how fast the
-- line will move: the head is called back in time).
local horizon = math.max(interval, math.min(10000, math.floor(active_window / 2)))
local since = now - active_window
local expiring = redis.call('ZCOUNT', K_ACTIVE, since, '(' .. digits(since + interval))
local leaving = redis.call('ZCOUNT', K_ACTIVE, since, '(' .. digits(since + horizon))

-- This interval's allocation: the free places (with those that free within the interval: a
-- place is shared out as its session's window ends, not an interval later), shared out by each
-- node's part of the waiting polls (Cloudflare: its share of the traffic). The first node to
-- call in the interval sets it; nodes that call later in it raise it by what their reports
-- freed (grants of the last interval they did not use), so places held by a report not yet in
-- are not lost for long.
local win = number(redis.call('HGET', K_FLEET, 'win'))
local free_now = math.max(max_active - active - reserved + expiring, 0)
local free_w, polls_w, given_w
if win ~= window then
  free_w, polls_w, given_w = free_now, polls, 0
else
  free_w = number(redis.call('HGET', K_FLEET, 'free'))
  polls_w = number(redis.call('HGET', K_FLEET, 'polls'))
  given_w = number(redis.call('HGET', K_FLEET, 'given'))
  free_w = math.max(free_w, free_now + given_w)
end
local quota = 0
if me.alloc ~= window then
  local share
  if polls_w > 0 then share = me.polls / polls_w else share = 1 / nodes end
  local millionths = math.floor(free_w * math.min(share, 1) * keep) + me.carry
  quota = math.floor(millionths / 1000000)
  me.carry = millionths - quota * 1000000
  quota = math.max(math.min(quota, free_now), 0)
  reserved = reserved + quota
  given_w = given_w + quota
  me.grant = quota
  me.alloc = window
end
redis.call('HSET', K_FLEET, 'win', digits(window), 'free', digits(free_w), 'polls',
  digits(polls_w), 'given', digits(given_w))

-- The cursor: waiters who arrived no later than it are among the oldest the free places (and
-- those that free within the interval) can take, so they may be admitted wherever they poll.
local places = max_active - active + expiring
local cursor
if places <= 0 then
  cursor = 0
elseif places >= queue_len then
  cursor = -1
else
  cursor = tonumber(redis.call('ZRANGE', K_ARRIVAL, places - 1, places - 1, 'WITHSCORES')[2])
end

save()
local reply = {active, queue_len, cursor, quota, nodes, window, free_w, expiring, leaving}
-- Samples of the line (rank, arrival): every rank at the head, then spaced evenly so that
-- the rest reach the tail.
local spread = math.max(1, math.ceil((queue_len - FIRST_RANKS) / (SAMPLES - FIRST_RANKS)))
local rank, step = 0, 1
for _ = 1, SAMPLES do
  if rank >= queue_len then break end
  local r = redis.call('ZRANGE', K_ARRIVAL, rank, rank, 'WITHSCORES')
  if #r < 2 then break end
  reply[#reply + 1] = rank
  reply[#reply + 1] = tonumber(r[2])
  if rank + 1 >= FIRST_RANKS then step = spread end
  rank = rank + step
end
if queue_len > 0 then
  local r = redis.call('ZRANGE', K_ARRIVAL, -1, -1, 'WITHSCORES')
  if #r == 2 and queue_len - 1 > rank - step then
    reply[#reply + 1] = queue_len - 1
    reply[#reply + 1] = tonumber(r[2])
  end
end
return reply
