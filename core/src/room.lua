-- smart_limit: one waiting room in Redis, for a fleet of nginx nodes.
--
-- The twin of core/src/room.rs (Room::visit, tidy, pass, revoke): the same rules, with the
-- same observable behaviour, run atomically inside Redis so that any number of nodes share one
-- FIFO line and one active count. Every decision is ONE call of this script (EVALSHA).
-- core/tests/redis_script.rs runs both side by side and compares every verdict.
--
-- Keys (all three share the room's {hash tag}, so the script also runs on Redis Cluster):
--   KEYS[1] PREFIX:{ROOM}:state   hash: head, tail, minute, adm, last_admit, interval,
--                                 active (last count), ttl_at, mode (override code, if any)
--   KEYS[2] PREFIX:{ROOM}:line    hash: qnum -> "SID:LAST_SEEN_MS" (one field per place)
--   KEYS[3] PREFIX:{ROOM}:active  sorted set: admitted SID, scored by last sight (ms)
-- Every key has a TTL, set when the key is created and renewed at least every quarter of it,
-- so a room that calms down leaves nothing behind.
--
-- The line is a hash addressed by queue number, like the ring in shared memory: the ticket
-- carries its qnum, so finding a client's place is one HGET (O(1)) and its position is
-- qnum - head + 1. head advances over empty and absent places (each is passed once).
--
-- Cost: a waiting client's poll is 5 commands inside the script (HMGET, HLEN, HGET head,
-- HGET + HSET of its place); the active set is only tidied and counted when a decision needs
-- the room's capacity; the state is written only when it changed.
--
-- ARGV:
--   [1] op: "visit" | "touch" | "revoke" | "mode"
--   [2] now in unix ms; "0" = use the Redis server's clock (what nginx sends: one clock for
--       the whole fleet). Tests pass explicit times.
--   [3] max_active  [4] new_per_minute (0 = unset)  [5] presence ms  [6] active_window ms
--   [7] configured mode code
--   [8] sid (decimal string: session ids are 64-bit and Lua numbers are doubles, so they are
--       never converted to numbers)
--   [9] visit: the ticket's qnum (0 = none); mode: the new override code (0 = clear)
--   [10] visit: the lottery draw (0 .. 2^32-1)
--
-- Replies (arrays of integers; `version` is the script's clock in microseconds, which orders
-- the figures that several connections bring back):
--   visit:  {kind, qnum, position, queue_len, admit_interval_ms, active, joined, expired, mode,
--            version}   kind 1 = admit, 2 = wait, 3 = closed (mode reject); active: last count
--   touch:  {active, version}   revoke: {removed, active, version}   mode: {code}

-- Redis < 5 needs this before writing after TIME; Redis 7 and Valkey ignore it.
if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local K_STATE, K_LINE, K_ACTIVE = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]

local now = tonumber(ARGV[2]) or 0
-- The version of the figures this call reports: the clock in microseconds (scripts run one
-- at a time, so versions only grow).
local version = now * 1000
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  version = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local max_active = tonumber(ARGV[3]) or 0
local per_minute = tonumber(ARGV[4]) or 0
local presence = tonumber(ARGV[5]) or 20000
local window = tonumber(ARGV[6]) or 60000
local conf_mode = tonumber(ARGV[7]) or 1
local sid = ARGV[8] or ''
if not string.match(sid, '^%d+$') then
  return redis.error_reply('smart_limit: bad session id')
end

-- TTLs: the line and its state outlive every client's presence, the admitted window and the
-- calendar minute that new_per_minute counts. A mode override keeps the state for a day
-- after the room's last visit (it is an operator's switch, not traffic).
local ROOM_TTL = 2 * math.max(presence, window, 60000)
local ACTIVE_TTL = 2 * window
local MODE_TTL = math.max(86400000, ROOM_TTL)
-- Most places one call walks over at the head; the rest is walked by the next calls.
local MAX_STEPS = 10000

-- Modes, as rules::Mode::code.
local FIFO, RANDOM, PASSTHROUGH, REJECT, QUEUE_ALL = 1, 2, 3, 4, 5

local function ntos(n)
  return string.format('%.0f', n)
end
-- Numbers become strings once where possible (string.format is a large part of a call).
local now_s = ntos(now)

local function valid_mode(m)
  m = tonumber(m) or 0
  if m < FIFO or m > QUEUE_ALL then
    return 0
  end
  return m
end

-- Admitted sessions unseen for the active window stop counting (Room::tidy, first loop):
-- an entry goes when now - last_seen >= window.
local function count_active()
  redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', ntos(now - window))
  return redis.call('ZCARD', K_ACTIVE)
end

-- The exact count, also kept in the state for the figures that visits report.
local function note_active(n)
  if redis.call('EXISTS', K_STATE) == 1 then
    redis.call('HSET', K_STATE, 'active', ntos(n))
  end
  return n
end

if op == 'touch' then
  -- A valid admitted ticket was seen (Room::pass): it counts as active from now.
  redis.call('ZADD', K_ACTIVE, now_s, sid)
  redis.call('PEXPIRE', K_ACTIVE, ACTIVE_TTL)
  return {note_active(count_active()), version}
elseif op == 'revoke' then
  -- The origin ended the session (Room::revoke): its place frees at once.
  local n = count_active()
  local removed = redis.call('ZREM', K_ACTIVE, sid)
  return {removed, note_active(n - removed), version}
elseif op == 'mode' then
  local code = valid_mode(ARGV[9])
  if code == 0 then
    redis.call('HDEL', K_STATE, 'mode')
    if redis.call('PTTL', K_STATE) > ROOM_TTL then
      redis.call('PEXPIRE', K_STATE, ROOM_TTL)
    end
  else
    redis.call('HSET', K_STATE, 'mode', ntos(code))
    redis.call('PEXPIRE', K_STATE, MODE_TTL)
  end
  return {code}
elseif op ~= 'visit' then
  return redis.error_reply('smart_limit: unknown op')
end

-- ---------------------------------------------------------------- visit (Room::visit)
local qnum_s = ARGV[9] or '0'
local qnum = tonumber(qnum_s) or 0
if not string.match(qnum_s, '^[1-9]%d*$') then
  qnum = 0
end
local draw = tonumber(ARGV[10]) or 0

local st = redis.call('HMGET', K_STATE, 'head', 'tail', 'minute', 'adm', 'last_admit',
  'interval', 'active', 'ttl_at', 'mode')
local head, tail = tonumber(st[1]), tonumber(st[2])
local minute = tonumber(st[3]) or 0
local adm = tonumber(st[4]) or 0
local last_admit = tonumber(st[5]) or 0
local interval = tonumber(st[6]) or 0
local active = tonumber(st[7]) or 0
local ttl_at = tonumber(st[8]) or 0
local override = valid_mode(st[9])
-- The state needs writing (something changed) / its TTLs renewing.
local dirty = false
if not head or not tail or head > tail then
  -- A new room (or one that expired). Queue numbers start at the clock, so tickets from an
  -- earlier life of the room do not name places in this one; stray places are dropped.
  head, tail = now, now
  redis.call('DEL', K_LINE)
  dirty = true
  ttl_at = 0
end
local waiting = redis.call('HLEN', K_LINE)

-- Room::tidy: absent heads of the line (unseen for presence) lose their place, empty places
-- are passed; the minute counter turns over. (Admitted sessions unseen for the window are
-- dropped by count_active(), whenever a decision needs the count.)
local expired = 0
if waiting == 0 then
  if head ~= tail then
    head = tail
    dirty = true
  end
else
  local steps = 0
  -- The head's field name as stored (no formatting in the common case: it did not move).
  local head_s = st[1]
  while head < tail and steps < MAX_STEPS do
    if steps > 0 or tonumber(head_s) ~= head then
      head_s = ntos(head)
    end
    local v = redis.call('HGET', K_LINE, head_s)
    if v then
      local seen = tonumber(string.match(v, ':(%d+)$'))
      if seen and now - seen < presence then
        break
      end
      redis.call('HDEL', K_LINE, head_s)
      waiting = waiting - 1
      expired = expired + 1
    end
    head = head + 1
    steps = steps + 1
    dirty = true
    if waiting == 0 then
      head = tail
      break
    end
  end
end
local this_minute = math.floor(now / 60000)
if this_minute ~= minute then
  minute = this_minute
  adm = 0
  dirty = true
end

local mode = override
if mode == 0 then
  mode = conf_mode
end

-- The active count, tidied, at most once per call.
local counted = false
local function active_now()
  if not counted then
    local n = count_active()
    if n ~= active then
      active = n
      dirty = true
    end
    counted = true
  end
  return active
end

-- Room::holds_place: the ticket's qnum names a place in the line that is still this sid's;
-- being seen renews it.
local held = false
if qnum >= head and qnum < tail then
  local v = redis.call('HGET', K_LINE, qnum_s)
  if v and string.match(v, '^(%d+):') == sid then
    held = true
    redis.call('HSET', K_LINE, qnum_s, sid .. ':' .. now_s)
  end
end

local function save()
  local renew = now - ttl_at >= ROOM_TTL / 4
  if renew then
    ttl_at = now
    dirty = true
  end
  if dirty then
    redis.call('HSET', K_STATE, 'head', ntos(head), 'tail', ntos(tail), 'minute', ntos(minute),
      'adm', ntos(adm), 'last_admit', ntos(last_admit), 'interval', ntos(interval),
      'active', ntos(active), 'ttl_at', ntos(ttl_at))
  end
  if renew then
    -- Also gives a state this call created its first TTL.
    local ttl = ROOM_TTL
    if override ~= 0 then
      ttl = MODE_TTL
    end
    redis.call('PEXPIRE', K_STATE, ttl)
    redis.call('PEXPIRE', K_LINE, ROOM_TTL)
  end
end

-- Room::leave_line: the place empties; head moves over the empty places after it.
local function leave_line(q)
  redis.call('HDEL', K_LINE, ntos(q))
  waiting = waiting - 1
  if waiting <= 0 then
    head = tail
  else
    local n = 0
    while head < tail and n < MAX_STEPS and redis.call('HEXISTS', K_LINE, ntos(head)) == 0 do
      head = head + 1
      n = n + 1
    end
  end
  dirty = true
end

-- Room::admit: the session counts as active now and in this minute's inflow; admissions from
-- the line feed the smoothed interval the estimated wait is computed from (weight 1/4).
local function admit(from_line)
  active_now()
  redis.call('ZADD', K_ACTIVE, now_s, sid)
  redis.call('PEXPIRE', K_ACTIVE, ACTIVE_TTL)
  active = redis.call('ZCARD', K_ACTIVE)
  adm = adm + 1
  if from_line then
    if last_admit ~= 0 then
      local gap = math.max(now - last_admit, 1)
      if interval == 0 then
        interval = gap
      else
        interval = math.floor((interval * 3 + gap) / 4)
      end
    end
    last_admit = now
  end
  dirty = true
  save()
  return {1, 0, 0, waiting, interval, active, 0, expired, override, version}
end

-- Room::wait_answer
local function wait_answer(q, joined)
  save()
  local position = 0
  if mode == FIFO then
    position = q - head + 1
  end
  return {2, q, position, waiting, interval, active, joined, expired, override, version}
end

if mode == REJECT then
  save()
  return {3, 0, 0, waiting, interval, active, 0, expired, override, version}
end
if mode == PASSTHROUGH then
  if held then
    leave_line(qnum)
  end
  return admit(false)
end

-- rules::free_places and rules::capacity (Redis can always count one more).
local function free_places()
  local free = max_active - active_now()
  if per_minute > 0 then
    free = math.min(free, per_minute - adm)
  end
  return free
end

if not held then
  -- [S3]/[S4]: a newcomer walks straight in when nobody waits and there is room; otherwise
  -- it takes the tail (Room::join_line).
  if (mode == FIFO or mode == RANDOM) and waiting == 0 and free_places() > 0 then
    return admit(false)
  end
  local q = tail
  redis.call('HSET', K_LINE, ntos(q), sid .. ':' .. now_s)
  if waiting == 0 then
    -- The line's hash was just created: give it its TTL.
    redis.call('PEXPIRE', K_LINE, ROOM_TTL)
  end
  tail = tail + 1
  waiting = waiting + 1
  dirty = true
  return wait_answer(q, 1)
end

local turn = false
if mode == FIFO then
  turn = qnum == head and free_places() > 0
elseif mode == RANDOM then
  -- rules::lottery_wins: with `free` places and `waiting` clients present, each poll wins with
  -- chance free/waiting (exact in doubles: draw < 2^32, waiting < 2^21).
  local free = free_places()
  if free > 0 and waiting > 0 then
    turn = free >= waiting or draw * waiting < free * 4294967296
  end
end
if turn then
  leave_line(qnum)
  return admit(true)
end
return wait_answer(qnum, 0)
