-- smart_limit: one waiting room in Redis, for a fleet of nginx nodes.
--
-- The twin of the shared-memory room, core/src/room/ (Room::visit, tidy, pass, revoke): the
-- same rules, with the same observable behaviour, run atomically inside Redis so that any
-- number of nodes share one FIFO line and one active count. Every decision is ONE call of
-- this script (EVALSHA). core/tests/redis_script.rs runs both side by side and compares
-- every verdict.
--
-- Keys (all share the room's {hash tag}, so the script also runs on Redis Cluster):
--   KEYS[1] PREFIX:{ROOM}:state   hash: tail (next queue number), minute, adm, last_admit,
--                                 interval, active (last count), ttl_at, mode (override code)
--   KEYS[2] PREFIX:{ROOM}:line    sorted set: kept waiting SID (present, or absent within
--                                 keep) scored by its queue number
--   KEYS[3] PREFIX:{ROOM}:seen    sorted set: present waiting SID scored by its last sight (ms)
--   KEYS[4] PREFIX:{ROOM}:active  sorted set: admitted SID scored by its last sight (ms)
--   KEYS[5] PREFIX:{ROOM}:here    sorted set: present waiting SID scored by its queue number
--                                 (the head is its first)
--   KEYS[6] PREFIX:{ROOM}:away    sorted set: absent kept waiting SID scored by its last sight
--                                 (ms); empty with keep=off
--   KEYS[#KEYS] PREFIX:{ROOM}:spent:HASH  visit only, with ARGV[18] (challenge=pow, [S19]): the
--                                 proof the client spends to take a new place, recorded here
--                                 (SET NX, PX ARGV[18]) in the same call, so a proof takes one
--                                 place on the whole fleet; a proof found spent gets no place.
--   KEYS[7] PREFIX:{ROOM}:flood:HASH  visit only, when the client pays for its place from its
--                                 address's budget (flood control, [S15]): a string holding
--                                 the GCRA bucket's theoretical arrival time (us). HASH is the
--                                 client key hashed with a seed every node derives from the
--                                 ticket keys, so one address meets one budget on the fleet.
-- Every key has a TTL, set when the key is created and renewed at least every quarter of it,
-- so a room that calms down leaves nothing behind. A flood bucket expires when it is full
-- again (a missing bucket is a full one): at most (1 + burst) intervals after its address
-- last took a place.
--
-- True positions ([S16], [S27]): a place unseen for `presence` steps away (from `seen` and
-- `here` to `away`, the oldest by last sight first, wherever it stands in the line), and one
-- unseen for `keep` leaves `line` (with keep=off, the same call: at once). A position is
-- ZRANK(line) + 1 over kept places, in O(log n): a place ahead that steps away or comes back
-- moves nobody back. Turns count from the head (the first of `here`): nobody waits for an
-- absent place, and a kept one back in time is the head again. Bounded work ([S15]): one call
-- moves at most EXPIRE_STEP places away, removes at most EXPIRE_STEP gone places and
-- EXPIRE_STEP stale sessions (a backlog goes over the next calls, each of which adds at most
-- one place), and the line holds at most `max_line` places.
-- Flood control costs one GET and at most one SET of KEYS[5].
--
-- ARGV:
--   [1] op: "visit" | "page" (Visit::follows_admission: a page's sub-resource on its page
--       pass, or a visit on a waiting ticket) | "touch" |
--       "revoke" | "mode"
--   [2] now in unix ms; "0" = use the Redis server's clock (what nginx sends: one clock for
--       the whole fleet). Tests pass explicit times.
--   [3] max_active  [4] new_per_minute (0 = unset)  [5] presence ms  [6] keep ms (never
--       below presence; equal: keep=off)  [7] active_window ms  [8] configured mode code
--   [9] sid (decimal string: session ids are 64-bit and Lua numbers are doubles, so they are
--       never converted to numbers)
--   [10] visit: the ticket's qnum (0 = none; informational: a place is found by its sid);
--       mode: the new override code (0 = clear)
--   [11] visit: the lottery draw (0 .. 2^32-1)
--   [12] max_line: most places in the line (0 = no cap)
--   [13] visit with KEYS[7]: the flood rate's interval in us (1 / rate)  [14] its burst
--       (the arithmetic of room::gcra::Rate::take: 1 + burst places at once, then one per
--       interval)
--   [15] visit: the scheduled event in force (its id, decimal; "0" = none)
--   [16] its phase: 0 none, 1 pre-queue open, 2 running  [17] pre-queue: this client's
--       lottery key (1 .. LOTTERY_SPAN - 1, drawn by the node from the operating system's
--       randomness; 0 = arrival order, shuffle=off)
--   [18] visit with a spent proof: its TTL in ms (the last key is then the proof's; ARGV 15
--       to 17 are sent, "0" 0 0 without an event); "0" when only ARGV[19] follows
--   [19] visit: when the zone's challenge_bits is auto (the node asks for the fleet's
--       pressure, below), 1 + the challenges the node's worker gave since its last visit
--   [20] visit: when the zone's max_active is auto ([S26]), the node's steering argument
--       (steer.lua, included above this text: the fleet's one value, kept in the state hash,
--       is the visit's max_active); ARGV 15 to 19 are then sent ("0" 0 0 "0" 0 when unused)
--
-- Events ([S18]): the first visit of an event's pre-queue notes where the pre-queue begins
-- (`ev_base`, the tail then) and moves the tail LOTTERY_SPAN on. A client joining during the
-- pre-queue takes the place ev_base + its lottery key: so the pre-queue's places are ordered
-- by independent uniform keys, which is a uniformly random order of its members, drawn once
-- for the whole fleet (the line is this one sorted set); those in line before the pre-queue
-- opened stay ahead, those who join after it follow by arrival (from the moved tail). Keys
-- are 40 bits: two members of a pre-queue of 100,000 share one with odds of about 1 in 200,
-- and then ZSET orders the two by session id (random too). Queue numbers start at the clock
-- (2^41 ms): they stay exact in Lua's doubles (2^53) for thousands of events.
--
-- Replies (arrays of integers, each value at the place its name gives: V_*, T_*, R_*, and a
-- visit's kinds K_*, from Rust's one table, `reply` in core/src/redis/room.rs; `version` is the
-- script's clock in microseconds, which orders the figures that several connections bring
-- back):
--   visit:  {kind, qnum, position, queue_len, admit_interval_ms, active, joined, expired, mode,
--            version, pressure}   kind 1 = admit, 2 = wait, 3 = closed (mode reject), 4 = line full,
--            5 = throttled (flood control: no place; the second element is then the ms until
--            the address may take one), 6 = the proof brought was spent already (no place);
--            pressure: 0 without ARGV[19], else 1 + the fleet's doublings (below), resumed,
--            then the steering's values (steer.lua's au_reply; all 0 without ARGV[20])
--
-- The fleet's pressure (challenge_bits=auto, [S19]): visits with ARGV[19] count, in the state,
-- the newcomers that took a place or walked in (pr_in), the challenges the nodes gave (pr_ch)
-- and the admissions (pr_out). Once a second (LOOK_MS), the first such visit looks: the ratio
-- (asked + 1) / (pr_out + 1), asked the larger of pr_in and pr_ch (a newcomer is challenged
-- once and takes its place once; a script that does not solve is only challenged), a quarter
-- of the last look's carried over (pr_r, in millionths), gives the doublings pr_d (how many
-- times the fleet's arrivals doubled its admissions; 0 while nobody waits), and the counters
-- start again. Every node reads the same pr_d, so every node asks the same difficulty
-- (challenge::Pressure::doublings is the rule, AUTO_MIN_BITS + doublings the bits).
--   touch:  {active, version}   revoke: {removed, active, version}   mode: {code}

-- Redis < 5 needs this before writing after TIME; Redis 7 and Valkey ignore it.
if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local K_STATE, K_LINE, K_SEEN, K_ACTIVE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_HERE, K_AWAY = KEYS[5], KEYS[6]
local op = ARGV[1]
-- [S29] "page": a visit let in as it is if its session is admitted and active and it holds
-- no place (Visit::follows_admission).
local page = op == 'page'
if page then
  op = 'visit'
end

local now = tonumber(ARGV[2]) or 0
-- The version of the figures this call reports: the clock in microseconds (scripts run one
-- at a time, so versions only grow).
local version = now * 1000
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  version = tonumber(t[1]) * 1000000 + tonumber(t[2])  -- (unit) microseconds in a second
end
local max_active = tonumber(ARGV[3]) or 0
local per_minute = tonumber(ARGV[4]) or 0
local presence = tonumber(ARGV[5]) or 0
local keep = math.max(tonumber(ARGV[6]) or 0, presence)
local window = tonumber(ARGV[7]) or 0
local conf_mode = tonumber(ARGV[8]) or 1
local sid = ARGV[9] or ''
if not string.match(sid, '^%d+$') then
  return redis.error_reply('smart_limit: bad session id')
end
local max_line = tonumber(ARGV[12]) or 0

-- TTLs: the line and its state outlive every client's presence, the admitted window and the
-- calendar minute that new_per_minute counts. A mode override keeps the state for a day
-- after the room's last visit (it is an operator's switch, not traffic).
local ROOM_TTL = 2 * math.max(keep, window, KEY_TTL_FLOOR_MS)
local ACTIVE_TTL = 2 * window
local MODE_TTL = math.max(MODE_KEEP_MS, ROOM_TTL)
-- From Rust, in the preamble above this file's text (ROOM_SCRIPT in core/src/redis/room.rs):
-- EXPIRE_STEP, the most absent places (and stale sessions) one call removes; LOTTERY_SPAN, the
-- queue numbers an event's pre-queue reserves for its lottery keys (2^40); LOOK_MS, the
-- pressure's look; the modes FIFO, RANDOM, PASSTHROUGH, REJECT, QUEUE_ALL (rules::Mode::code).

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

-- Admitted sessions unseen for the active window stop counting (Room::tidy, first loop): an
-- entry counts while now - last_seen < window. The count is exact (ZCOUNT); the stale ones
-- are removed EXPIRE_STEP at a time (the lowest scores are the stale ones).
local function count_active()
  local stale = redis.call('ZCOUNT', K_ACTIVE, '-inf', ntos(now - window))
  if stale > 0 then
    redis.call('ZREMRANGEBYRANK', K_ACTIVE, 0, math.min(stale, EXPIRE_STEP) - 1)
  end
  return redis.call('ZCARD', K_ACTIVE) - math.max(stale - EXPIRE_STEP, 0)
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
  local r = {}
  r[T_ACTIVE], r[T_VERSION] = note_active(count_active()), version
  return r
elseif op == 'revoke' then
  -- The origin ended the session (Room::revoke): its place frees at once.
  local removed = redis.call('ZREM', K_ACTIVE, sid)
  local r = {}
  r[R_REMOVED], r[R_ACTIVE], r[R_VERSION] = removed, note_active(count_active()), version
  return r
elseif op == 'mode' then
  local code = valid_mode(ARGV[10])
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
local qnum_s = ARGV[10] or '0'
local qnum = tonumber(qnum_s) or 0
if not string.match(qnum_s, '^[1-9]%d*$') then
  qnum = 0
end
local draw = tonumber(ARGV[11]) or 0
local flood_key = KEYS[7]
local flood_interval = tonumber(ARGV[13]) or 0
local flood_burst = tonumber(ARGV[14]) or 0
local spent_ttl = tonumber(ARGV[18]) or 0
local spent_key = nil
if spent_ttl > 0 and #KEYS > 6 then
  spent_key = KEYS[#KEYS]
end

local st = redis.call('HMGET', K_STATE, 'tail', 'minute', 'adm', 'last_admit', 'interval',
  'active', 'ttl_at', 'mode', 'ev', 'ev_base', 'pr_at', 'pr_in', 'pr_out', 'pr_r', 'pr_d', 'pr_ch')
local tail = tonumber(st[1])
local minute = tonumber(st[2]) or 0
local adm = tonumber(st[3]) or 0
local last_admit = tonumber(st[4]) or 0
local interval = tonumber(st[5]) or 0
local active = tonumber(st[6]) or 0
local ttl_at = tonumber(st[7]) or 0
local override = valid_mode(st[8])
-- The state needs writing (something changed) / its TTLs renewing.
local dirty = false
if not tail then
  -- A new room (or one that expired). Queue numbers start at the clock, so tickets from an
  -- earlier life of the room do not name places in this one; stray places are dropped.
  tail = now
  redis.call('DEL', K_LINE, K_SEEN, K_HERE, K_AWAY)
  dirty = true
  ttl_at = 0
end

-- Room::tidy: places unseen for presence step away, those unseen for keep leave the line,
-- wherever they stand (at most EXPIRE_STEP of each per call); the minute counter turns over.
local expired = 0
-- The visiting client came back to its kept place (below, Room::place_of).
local resumed = 0
local absent = redis.call('ZRANGEBYSCORE', K_SEEN, '-inf', ntos(now - presence), 'WITHSCORES',
  'LIMIT', 0, EXPIRE_STEP)
if #absent > 0 then
  local ids, away = {}, {}
  for i = 1, #absent, 2 do
    ids[#ids + 1] = absent[i]
    away[#away + 1] = absent[i + 1]
    away[#away + 1] = absent[i]
  end
  redis.call('ZREM', K_SEEN, unpack(ids))
  redis.call('ZREM', K_HERE, unpack(ids))
  if keep > presence then
    redis.call('ZADD', K_AWAY, unpack(away))
    redis.call('PEXPIRE', K_AWAY, ROOM_TTL)
  else
    redis.call('ZREM', K_LINE, unpack(ids))
    expired = #ids
  end
end
if keep > presence then
  local gone = redis.call('ZRANGEBYSCORE', K_AWAY, '-inf', ntos(now - keep), 'LIMIT', 0,
    EXPIRE_STEP)
  if #gone > 0 then
    redis.call('ZREM', K_LINE, unpack(gone))
    redis.call('ZREM', K_AWAY, unpack(gone))
    expired = expired + #gone
  end
end
-- A scheduled event's first visit here (see the header): its pre-queue's places.
local ev_id = ARGV[15] or '0'
local ev_phase = tonumber(ARGV[16]) or 0
local ev_key = tonumber(ARGV[17]) or 0
local ev_base = tonumber(st[10]) or 0
if ev_phase ~= 0 and string.match(ev_id, '^[1-9]%d*$') and st[9] ~= ev_id then
  ev_base = 0
  if ev_phase == 1 then
    ev_base = tail
    tail = tail + LOTTERY_SPAN
  end
  redis.call('HSET', K_STATE, 'ev', ev_id, 'ev_base', ntos(ev_base))
  dirty = true
end
local lottery = ev_phase == 1 and ev_base > 0 and ev_key >= 1 and ev_key < LOTTERY_SPAN

-- The fleet's pressure (see the header): a look at most once a LOOK_MS.
local asking = tonumber(ARGV[19]) or 0
local pressure = asking >= 1
local pr_at, pr_in, pr_out = tonumber(st[11]) or 0, tonumber(st[12]) or 0, tonumber(st[13]) or 0
local pr_r, pr_d = tonumber(st[14]) or PPM, tonumber(st[15]) or 0
local pr_ch = tonumber(st[16]) or 0
if pressure and (pr_at == 0 or now < pr_at or now - pr_at >= LOOK_MS) then
  if pr_at ~= 0 and now >= pr_at then
    local keep = PRESSURE_KEEP_PCT / 100
    pr_r = math.floor(keep * pr_r + (1 - keep) * (math.max(pr_in, pr_ch) + 1) / (pr_out + 1) * PPM)
    pr_d = 0
    if redis.call('EXISTS', K_LINE) == 1 then
      local r = pr_r / PPM
      while r >= 2 and pr_d < MAX_DOUBLINGS do
        r = r / 2
        pr_d = pr_d + 1
      end
    end
  end
  pr_at, pr_in, pr_out, pr_ch = now, 0, 0, 0
  dirty = true
end
if asking > 1 then
  pr_ch = pr_ch + asking - 1
  dirty = true
end
-- max_active=auto ([S26], steer.lua): the fleet's value is this visit's max_active.
local au_a, au_s, au_closed = nil, nil, nil
if ARGV[20] then
  au_a = au_args(ARGV[20])
  if not au_a then
    return redis.error_reply('smart_limit: bad steering argument')
  end
  au_s = au_load(K_STATE)
  au_closed = au_step(au_s, now, au_a)
  max_active = au_value(au_s, au_a)
end

local function pressure_figure()
  if pressure then
    return pr_d + 1
  end
  return 0
end

-- A visit's reply, each value at its place (V_*), its kind one of K_* (from Rust's one table,
-- core/src/redis/room.rs `reply`). `second`: the queue number, or a throttle's wait (ms).
local function visit_reply(kind, second, position, queue_len, active_count, joined_flag)
  local r = {}
  r[V_KIND], r[V_QNUM], r[V_POSITION], r[V_QUEUE_LEN] = kind, second, position, queue_len
  r[V_INTERVAL], r[V_ACTIVE], r[V_JOINED], r[V_EXPIRED] = interval, active_count, joined_flag,
    expired
  r[V_MODE], r[V_VERSION], r[V_PRESSURE] = override, version, pressure_figure()
  r[V_RESUMED] = resumed
  if au_s then
    au_reply(r, V_STEER, au_s, au_a, au_closed)
  else
    for i = V_STEER + 1, V_LEN do
      r[i] = 0
    end
  end
  return r
end

local this_minute = math.floor(now / MINUTE_MS)
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

-- Room::place_of: this session's place, whatever queue number its ticket shows (one place
-- per session, however often it comes back); being seen renews it. Back from an absence
-- within keep ([S27]): the place is present again, at its arrival (resumed); back after keep
-- (gone, not yet removed): the client starts again as a newcomer. A place unseen for
-- presence that the tidy has not moved away yet is absent all the same.
local held = false
local place_q = redis.call('ZSCORE', K_LINE, sid)
if place_q then
  local away_at = tonumber(redis.call('ZSCORE', K_AWAY, sid))
  local seen_at = tonumber(redis.call('ZSCORE', K_SEEN, sid))
  local last = away_at or seen_at or 0
  if last <= now - keep then
    redis.call('ZREM', K_LINE, sid)
    redis.call('ZREM', K_AWAY, sid)
    redis.call('ZREM', K_SEEN, sid)
    redis.call('ZREM', K_HERE, sid)
    expired = expired + 1
  else
    held = true
    qnum = tonumber(place_q)
    if last <= now - presence then
      resumed = 1
    end
    if away_at then
      redis.call('ZREM', K_AWAY, sid)
    end
    -- Present again, or still (also a place taken by a build before `here` existed: after a
    -- binary upgrade, its first visit puts it there). Only a member new to `here` may have
    -- made the key: the TTL is set then, not on every poll (save() renews it).
    if redis.call('ZADD', K_HERE, place_q, sid) == 1 then
      redis.call('PEXPIRE', K_HERE, ROOM_TTL)
    end
    redis.call('ZADD', K_SEEN, now_s, sid)
  end
end

local function save()
  local renew = now - ttl_at >= ROOM_TTL / 4
  if renew then
    ttl_at = now
    dirty = true
  end
  if dirty then
    redis.call('HSET', K_STATE, 'tail', ntos(tail), 'minute', ntos(minute), 'adm', ntos(adm),
      'last_admit', ntos(last_admit), 'interval', ntos(interval), 'active', ntos(active),
      'ttl_at', ntos(ttl_at))
    if pressure then
      redis.call('HSET', K_STATE, 'pr_at', ntos(pr_at), 'pr_in', ntos(pr_in), 'pr_out',
        ntos(pr_out), 'pr_r', ntos(pr_r), 'pr_d', ntos(pr_d), 'pr_ch', ntos(pr_ch))
    end
  end
  if au_s then
    -- (Before the TTL below: this may be the state's first write.)
    au_save(K_STATE, au_s)
  end
  if renew then
    -- Also gives a state this call created its first TTL.
    local ttl = ROOM_TTL
    if override ~= 0 then
      ttl = MODE_TTL
    end
    redis.call('PEXPIRE', K_STATE, ttl)
    redis.call('PEXPIRE', K_LINE, ROOM_TTL)
    redis.call('PEXPIRE', K_SEEN, ROOM_TTL)
    redis.call('PEXPIRE', K_HERE, ROOM_TTL)
    redis.call('PEXPIRE', K_AWAY, ROOM_TTL)
  end
end

-- Room::leave_line: the place empties.
local function leave_line()
  redis.call('ZREM', K_LINE, sid)
  redis.call('ZREM', K_SEEN, sid)
  redis.call('ZREM', K_HERE, sid)
end

-- Room::admit: the session counts as active now and in this minute's inflow; admissions from
-- the line feed the smoothed interval the estimated wait is computed from (weight 1/4).
local function admit(from_line)
  active_now()
  if redis.call('ZADD', K_ACTIVE, now_s, sid) == 1 then
    active = active + 1
  end
  redis.call('PEXPIRE', K_ACTIVE, ACTIVE_TTL)
  adm = adm + 1
  if pressure then
    pr_out = pr_out + 1
  end
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
  return visit_reply(K_ADMIT, 0, 0, redis.call('ZCARD', K_LINE), active, 0)
end

-- Room::wait_answer: the position counts the kept places ahead (ZRANK), in O(log n).
local function wait_answer(q, joined)
  save()
  local position = 0
  if mode == FIFO then
    position = (redis.call('ZRANK', K_LINE, sid) or 0) + 1
  end
  return visit_reply(K_WAIT, q, position, redis.call('ZCARD', K_LINE), active, joined)
end

if mode == REJECT then
  save()
  return visit_reply(K_CLOSED, 0, 0, redis.call('ZCARD', K_LINE), active, 0)
end
if mode == PASSTHROUGH then
  if held then
    leave_line()
  end
  return admit(false)
end

-- [S29] A page's sub-resource on its page pass, or a waiting ticket whose place its own
-- admission ended (Room::visit): a session admitted and still active is let in as it is,
-- never admitted a second time nor given a place in the line.
if page and not held then
  local seen = tonumber(redis.call('ZSCORE', K_ACTIVE, sid))
  if seen and seen > now - window then
    redis.call('ZADD', K_ACTIVE, now_s, sid)
    save()
    return visit_reply(K_ADMIT, 0, 0, redis.call('ZCARD', K_LINE), active_now(), 0)
  end
end

-- rules::free_places and rules::capacity (Redis can always count one more).
local function free_places()
  local free = max_active - active_now()
  if per_minute > 0 then
    free = math.min(free, per_minute - adm)
  end
  return free
end

-- Flood control (Room::flood_take): a place, walked into or taken at the tail, is paid from
-- the client key's bucket. Returns 0 when paid, else the ms until the bucket allows one.
-- Microseconds, as the shm room counts them: `version` is the clock in us.
local function pay_flood()
  if not flood_key or flood_interval <= 0 then
    return 0
  end
  local now_us = version
  local tat = tonumber(redis.call('GET', flood_key)) or 0
  if tat < now_us then
    tat = now_us
  end
  local allowed_from = tat - flood_burst * flood_interval
  if allowed_from > now_us then
    -- Rounded up to whole ms in integers (as u64::div_ceil), not by float division.
    local wait_us = allowed_from - now_us
    local ms = math.floor(wait_us / 1000)
    if ms * 1000 < wait_us then
      ms = ms + 1
    end
    return math.max(ms, 1)
  end
  tat = tat + flood_interval
  -- The bucket is full again at `tat`: it may go then.
  local ttl = math.floor((tat - now_us + 999) / 1000)
  redis.call('SET', flood_key, ntos(tat), 'PX', ntos(math.max(ttl, 1)))
  return 0
end

-- Room::throttled: no place this time, the line as it is.
local function throttled(wait_ms, waiting)
  save()
  return visit_reply(K_THROTTLED, wait_ms, 0, waiting, active, 0)
end

-- challenge=pow: the visit's proof is spent here, once for the fleet, as the place is taken
-- (after flood control and the line's cap, so a visit given no place keeps its proof).
-- False: spent already, by this ticket on another node or at an earlier place since gone.
local function spend_proof()
  if not spent_key then
    return true
  end
  return redis.call('SET', spent_key, '1', 'NX', 'PX', ntos(spent_ttl)) ~= false
end

local function proof_spent(waiting)
  save()
  return visit_reply(K_PROOF_SPENT, 0, 0, waiting, active, 0)
end

local waiting = redis.call('ZCARD', K_LINE)
if not held then
  -- [S3]/[S4]: a client without a place walks straight in when nobody present waits (absent
  -- ones are not waited for, [S27]) and there is room; otherwise it takes the tail
  -- (Room::join_line), if the line has room. Either way it pays from its flood budget first.
  local nobody_here = redis.call('ZCARD', K_HERE) == 0
  if (mode == FIFO or mode == RANDOM) and nobody_here and free_places() > 0 then
    local wait_ms = pay_flood()
    if wait_ms > 0 then
      return throttled(wait_ms, waiting)
    end
    if not spend_proof() then
      return proof_spent(waiting)
    end
    if pressure then
      pr_in = pr_in + 1
    end
    return admit(false)
  end
  local wait_ms = pay_flood()
  if wait_ms > 0 then
    return throttled(wait_ms, waiting)
  end
  if max_line > 0 and waiting >= max_line then
    save()
    return visit_reply(K_LINE_FULL, 0, 0, waiting, active, 0)
  end
  if not spend_proof() then
    return proof_spent(waiting)
  end
  if pressure then
    pr_in = pr_in + 1
  end
  local q = tail
  if lottery then
    q = ev_base + ev_key
  else
    tail = tail + 1
  end
  redis.call('ZADD', K_LINE, ntos(q), sid)
  redis.call('ZADD', K_HERE, ntos(q), sid)
  redis.call('ZADD', K_SEEN, now_s, sid)
  if waiting == 0 or nobody_here then
    -- The sets were just created: give them their TTL.
    redis.call('PEXPIRE', K_LINE, ROOM_TTL)
    redis.call('PEXPIRE', K_SEEN, ROOM_TTL)
    redis.call('PEXPIRE', K_HERE, ROOM_TTL)
  end
  dirty = true
  return wait_answer(q, 1)
end

-- Room::head: the first present place's rank in the line (nil: nobody present waits). A
-- member of `here` no longer in the line (left by a node of an earlier build, which does not
-- know `here`) is dropped on the way, at most EXPIRE_STEP of them per call.
local function head_rank()
  for _ = 1, EXPIRE_STEP do
    local first = redis.call('ZRANGE', K_HERE, 0, 0)
    if #first == 0 then
      return nil
    end
    local rank = redis.call('ZRANK', K_LINE, first[1])
    if rank then
      return rank
    end
    redis.call('ZREM', K_HERE, first[1])
  end
  return nil
end

local turn = false
if mode == FIFO then
  -- Room's rule ([S4]): with k places free, the first k places from the head may each take
  -- one as they poll (those ahead of one that goes in stay within the places left). Counted
  -- from the head ([S27]): nobody waits for an absent place ahead of it.
  local free = free_places()
  if free > 0 then
    local h, r = head_rank(), redis.call('ZRANK', K_LINE, sid)
    turn = h ~= nil and r ~= nil and r - h < free
  end
elseif mode == RANDOM then
  -- rules::lottery_wins: with `free` places and `n` clients from the head on, each poll wins
  -- with chance free/n (exact in doubles: draw < 2^32, n < 2^21).
  local free = free_places()
  local h = head_rank()
  local n = 0
  if h ~= nil then
    n = waiting - h
  end
  if free > 0 and n > 0 then
    turn = free >= n or draw * n < free * DRAW_SCALE
  end
end
if turn then
  leave_line()
  return admit(true)
end
return wait_answer(qnum, 0)
