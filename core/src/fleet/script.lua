-- smart_limit: the fleet's picture of one room decided locally ([S12], Cloudflare's design).
--
-- With `sync=`, every node decides on its own shared memory; once an interval its leader calls
-- this script ("sync") with what the node saw since its last call, and gets the fleet's picture
-- back. The only other call is "draw": a node whose share of this interval's admissions is used
-- up takes more places from what the fleet has left (the global pool), atomically.
--
-- KEYS (one {room} hash tag, one slot):
--   [1] PREFIX:{ROOM}:fleet     hash: "win" / "hz" / "free" / "polls" / "given" (this
--                               interval's allocation: its window, when the interval it
--                               shares ends, its base, the polls it is shared by, what was
--                               given out), "heard" / "hold" / "hold_until" / "hold_wait"
--                               (the last call; after a silence: when it began, until when
--                               expiry is held at that time, for which nodes), "pr_win" /
--                               "pr_in" / "pr_out" / "pr_r" / "pr_d" / "pr_ch" (the pressure),
--                               "spent_seq" and "s:<id>" (spent proofs: the last number, and
--                               the last each node was told), "starved" / "starved_win" (the
--                               starved mark, in "draw", and the window it was set in), and one
--                               field per node, "n:<id>":
--                               "seen grant draws alloc_win polls remainder gen seq", and
--                               "h:<id>": "held held_end held_from" (how many of its grant's
--                               places wait for sessions that end by held_end, an interval's
--                               end "hz", and where they begin, counted from the last to end)
--   [2] PREFIX:{ROOM}:active    sorted set: admitted sessions by last sight (ms)
--   [3] PREFIX:{ROOM}:present   sorted set: present waiting sessions by last sight (ms)
--   [4] PREFIX:{ROOM}:arrival   sorted set: waiting sessions by arrival (ms), present or
--                               kept ([S27]): the fleet's line, what positions count
--   [5] PREFIX:{ROOM}:flood_over  sorted set: client keys (16 hex digits) over their flood
--                               budget, by when they may take a place again (ms)
--   [6] PREFIX:{ROOM}:spent     sorted set: proofs of work spent on the nodes (challenge=pow,
--                               [S19]), "HEX:UNTIL:NODE:AT" (ms) by their number
--   [7] PREFIX:{ROOM}:here      sorted set: present waiting sessions by arrival (ms): whom
--                               the cursor counts (a kept place holds no free place)
--   [8] PREFIX:{ROOM}:away      sorted set: absent waiting sessions still kept, by last sight
--                               (ms): they leave the line after KEPT
--   [9..] sync with flood control: PREFIX:{ROOM}:flood:HASH, the buckets of the client keys
--                               the node reports (strings: the GCRA's theoretical arrival
--                               time, us; the central room's flood keys), one per place count
--                               in ARGV[A_FLOOD_PLACES]
-- ARGV, each at the place its name gives (A_*, from Rust's one table, core/src/fleet/wire.rs):
--   OP "sync" | "draw"  NODE id (digits)  WINDOW (ms, a multiple of the interval)  NOW in ms
--   ("0": this server's clock, what nginx sends; tests pass times)  MAX_ACTIVE
--   ACTIVE_WINDOW ms  PRESENCE ms  STALE ms (a node unheard of for this long is dropped, its
--   places released)  KEY_TTL ms  KEEP (ppm of the interval's free places shared out to
--   nodes; the rest stays in the pool)  INTERVAL ms  GENERATION of the node's configuration
--   SEQ: the node's sync number (a draw sends the number of the last sync it sent)
--   MAX_LINE (0: no cap)
--   sync only: POLLS, waiting polls this node answered since its last sync  ACTIVE sessions
--   seen, "sid:age_ms" (space-separated; the age of the sighting when sent, so a report that
--   waited, or a node whose clock differs, does not make a session look newer)  ADMITTED
--   since the last sync, "sid:age_ms"  WAITERS seen, "sid:arrival_ms:age_ms"
--   FLOOD_INTERVAL, flood control's budget interval in us (0: none)  FLOOD_BURST
--   FLOOD_PLACES each reported client key took on the node since it last reported it
--   ("n n ...", one per KEYS[9..])  ASKED: newcomers that took a place on the node since its
--   last sync  CHALLENGED: challenges it gave since (the fleet's pressure, below)  SPENT:
--   proofs of work spent on the node since its last sync, "HEX:TTL_MS ..." (below)  REVOKED:
--   sessions the origin revoked on the node since its last sync ("sid sid ...", at most
--   REVOKED_REPORT), taken off the active sessions after the report's own sightings
--   KEPT: how long an absent waiter's place is kept (ms, at least PRESENCE; equal:
--   `keep=off`, a waiter unseen for PRESENCE leaves the line)
--   draw only: WANT, places wanted  OLDEST arrival (ms) among the clients they are for (0: not
--   known; the starved mark, in "draw" below)
-- Fencing: a node's calls carry (node, generation, window, sequence). A sync whose (generation,
-- sequence) is not newer than the last one this node's entry saw is stale (a stalled ex-leader,
-- a retry answered late): it changes nothing and gets {-1}. A draw sent before the node's last
-- sync was run here is refused (that sync released the node's draws).
-- Replies, each field at the place its name gives (P_* and D_*, from core/src/fleet/wire.rs):
--   sync: {fleet_active, queue_len, cursor_ms (-1: everyone), quota, nodes, window, free,
--          expiring (active sessions whose window ends within the interval), leaving (... within
--          the horizon: the interval, or half the active window up to 10 s, whichever is
--          longer), full (1: the line holds max_line), pressure (the fleet's doublings, below),
--          rightful (the cursor without its band: the arrival of the last present waiter the
--          free places rightly take; -1: everyone, 0: nobody), reported (the nodes that
--          synced in this window, this one included: with all of them the picture holds
--          every place taken before the window's tick),
--          {spent: pairs (proof key in hex, ms it stays spent) spent on other nodes since this
--          node's last sync}, {flood: pairs (client key in hex,
--          retry_ms) of keys over their budget}, {held: how many of the quota's places are
--          expiring sessions', then ms from now until up to ENDS of those sessions' windows
--          end, ascending (below)}, the whole line while it is at most EXACT_LINE long
--          ("arrival_ms:sid ...", by rank; else ''), then, when it is longer, pairs (rank,
--          arrival_ms) sampled along the line, for positions}; {-1}: stale
--   draw: {places granted (0..wanted), fleet_active, the sequence of the node's last sync
--          run here (the node counts the places only if it has sent no sync since)}
-- The sync, step by step (each a local function below, called in this order at the end of
-- the file; the Rust twin FleetModel::sync, core/src/fleet/model.rs, calls methods of the same
-- names in the same order, in core/src/fleet/model/share.rs):
--    1 fence           a stale sync changes nothing; else the node's entry is fenced
--    2 take_sightings  admissions and active sessions reported, revoked sessions removed
--    3 take_waiters    waiters reported join the line (look_up_waiters), but no revoked one
--    4 expire          waiters unseen for presence go away, those away for KEPT leave the
--                      line, and sessions whose window ended leave
--    5 census          the other live nodes' places, polls and held places (`fleet`)
--    6 count_sessions  active, line, expiring, leaving (`counts`)
--    7 free_places     the interval's end ("hz"), the places free for it (`allocation`, `free`)
--    8 held_places     where this node's held places go, and the room (`places`)
--    9 share           the allocation and the node's share of it: its quota
--   10 held_ends       the quota's held places and their sessions' ends ("h:<id>")
--   11 pressure        the fleet's pressure
--   12 cursor          the cursor
--   13 flood           flood control's keys over their budget (charge_flood)
--   14 spent_proofs    spent proofs reported by other nodes (record_spent)
--   15 reply           the node's entry saved; the picture (whole_line, sample_line)
-- Work per call: O(nodes + what the node sends (capped by the node; REVOKED_REPORT * log a of
-- it revoked sessions, a the active sessions) + sessions whose window ended (one C call) +
-- EXPIRE_STEP + (SAMPLES * log n, or EXACT_LINE) + ENDS + FLOOD_KEYS + FLOOD_ANSWERS * log n +
-- (SPENT_REPORT + SPENT_ANSWERS + SPENT_EXPIRE) * log s, s the spent proofs kept);
-- the sightings go in variadic commands of at most CHUNK members.
-- Needs Redis 6.2 (ZADD GT, ZMSCORE).

if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local K_FLEET, K_ACTIVE, K_PRESENT, K_ARRIVAL, K_OVER = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_SPENT, K_HERE, K_AWAY = KEYS[6], KEYS[7], KEYS[8]
local op, id = ARGV[A_OP], ARGV[A_NODE] or ''
local window = tonumber(ARGV[A_WINDOW])
local now = tonumber(ARGV[A_NOW])
local max_active = tonumber(ARGV[A_MAX_ACTIVE])
local active_window = tonumber(ARGV[A_ACTIVE_WINDOW])
local presence = tonumber(ARGV[A_PRESENCE])
local stale = tonumber(ARGV[A_STALE])
local ttl = tonumber(ARGV[A_KEY_TTL])
local keep = tonumber(ARGV[A_KEEP])
local interval = tonumber(ARGV[A_INTERVAL])
local gen = tonumber(ARGV[A_GENERATION])
local seq = tonumber(ARGV[A_SEQ])
local max_line = tonumber(ARGV[A_MAX_LINE])
if not (string.match(id, '^%d+$') and window and now and max_active and active_window
        and presence and stale and ttl and keep and interval and gen and seq and max_line
        and K_AWAY) then
  return redis.error_reply('smart_limit: bad fleet arguments')
end
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- From Rust, in the preamble above this file's text (FLEET_SCRIPT in core/src/fleet/script.rs,
-- from the constants the model shares):
--   EXPIRE_STEP, EXPIRE_MIN: most waiters one call drops from the line, EXPIRE_STEP less one
--     for each waiter the call reports, at least EXPIRE_MIN (a call's work stays bounded: a full
--     report and a mass departure at once must not add up; the line still sheds at least
--     EXPIRE_MIN a call). Measured with 100,000 waiting (the scenario of
--     t/273-sync-bounded.t, timed by `scripts/bench --sync-calls`): a departed waiter costs the
--     script about 1.8 us, a reported one 3-6 us.
--   CHUNK: members per variadic command (Lua's unpack has a limit of a few thousand).
--   FIRST_RANKS, SAMPLES, EVEN_SAMPLES, GROWTH: samples of the line returned for positions: the
--     first ranks one by one, then spaced out (at most a GROWTH-th of their rank apart near the
--     head, EVEN_SAMPLES evenly over the rest).
--   BAND: the cursor's band, up to this many times the waiters the free places take.
--   FLOOD_KEYS, FLOOD_ANSWERS, FLOOD_EXPIRE: flood control's client keys charged per sync
--     (FLOOD_REPORT_CAP), keys over their budget answered per sync (FLOOD_ANSWER_CAP), lapsed
--     ones removed per sync at most.
--   SPENT_REPORT, SPENT_ANSWERS, SPENT_EXPIRE, SPENT_KEEP_MS: spent proofs reported per sync,
--     answered per sync, lapsed ones removed per sync at most, and how long one is kept.
--   ENDS: ends of the expiring sessions whose places a node's quota holds, a picture carries at
--     most (ENDS_CAP).
--   EXACT_LINE: a line of at most this many waiters comes whole in the picture.
--   SHARE_PER_POLL: a node's share is at most this many places per visit it answered since
--     its last sync, and one (so a node nobody visits holds none of the room it cannot use).
--   LOOK_MS: the fleet's pressure is looked at once a second at most (challenge::LOOK_MS).

local function number(x) return tonumber(x) or 0 end
local function digits(x) return string.format('%.0f', x) end

-- A node's entry: seen (its last sync, Redis's clock: a draw leaves it), grant, draws, alloc (the window whose allocation it took its share
-- of), polls, remainder (the fraction of a place its shares left over, in millionths: over a
-- few intervals every node gets its exact share), gen and seq (the last sync taken from it).
local function read_node(text)
  if not text then return nil end
  local e = {}
  for w in string.gmatch(text, '%S+') do e[#e + 1] = tonumber(w) end
  if #e ~= 8 then return nil end
  return {seen = e[1], grant = e[2], draws = e[3], alloc = e[4], polls = e[5], remainder = e[6],
          gen = e[7], seq = e[8]}
end
local function write_node(e)
  return digits(e.seen) .. ' ' .. digits(e.grant) .. ' ' .. digits(e.draws) .. ' '
    .. digits(e.alloc) .. ' ' .. digits(e.polls) .. ' ' .. digits(e.remainder) .. ' '
    .. digits(e.gen) .. ' ' .. digits(e.seq)
end
-- A node's held places ("h:NODE": "held held_end held_from"): `held` of its grant's places
-- wait for sessions that end by `held_end` (an interval's end), `held_from` places counted
-- from the last of them to end.
local function read_held(text)
  local h, e, f = string.match(text, '^(%d+) (%d+) (%d+)$')
  if not h then return nil end
  return {held = tonumber(h), held_end = tonumber(e), held_from = tonumber(f)}
end

local field = 'n:' .. id
local me = read_node(redis.call('HGET', K_FLEET, field))
  or {seen = now, grant = 0, draws = 0, alloc = 0, polls = 0, remainder = 0, gen = 0, seq = 0}

-- Runs `cmd key [flag] m1 m2 ...` over `list` in chunks of CHUNK (an even number: pairs of
-- score and member are never split); returns the replies' sum.
local function variadic(cmd, key, list, flag)
  local sum = 0
  for i = 1, #list, CHUNK do
    local args = {key}
    if flag then args[2] = flag end
    for j = i, math.min(i + CHUNK - 1, #list) do args[#args + 1] = list[j] end
    local r = redis.call(cmd, unpack(args))
    if type(r) == 'number' then sum = sum + r end
  end
  return sum
end
-- ZMSCORE over `sids` in chunks: a list of scores (false: not a member).
local function scores(key, sids)
  local out = {}
  for i = 1, #sids, CHUNK do
    local args = {}
    for j = i, math.min(i + CHUNK - 1, #sids) do args[#args + 1] = sids[j] end
    local r = redis.call('ZMSCORE', key, unpack(args))
    for _, s in ipairs(r) do out[#out + 1] = s end
  end
  return out
end

-- The census (sync step 5, and the draw's): the other live nodes' places (grants and draws
-- not yet reported: recomputed from the entries on every call, never kept as a running total
-- that could drift), their number and polls; silent nodes are dropped. Also the held places
-- of the live nodes' grants: `holds` (the other nodes') and `mine` (this node's). And how many
-- of them synced in this window, at or after its tick, before this call (`reported`: their
-- entry took this window's share, and their last sync was not before the tick): the reply
-- holds their places taken before the tick. (A sync a little before a tick, a node's first or
-- a reload's, is of the tick nearest it: it reports nothing after it.)
local function census()
  local fleet = {reserved = 0, nodes = 0, reported = 0, polls = 0, holds = {},
                 mine = {held = 0, held_end = 0, held_from = 0}}
  local live, holds = {}, {}
  local all = redis.call('HGETALL', K_FLEET)
  for i = 1, #all, 2 do
    local f = all[i]
    local kind, who = string.sub(f, 1, 2), string.sub(f, 3)
    if kind == 'h:' then
      holds[who] = read_held(all[i + 1])
    elseif kind == 'n:' and f ~= field then
      local e = read_node(all[i + 1])
      if not e or now - e.seen > stale then
        redis.call('HDEL', K_FLEET, f, 's:' .. who, 'h:' .. who)
      else
        live[who] = true
        fleet.nodes = fleet.nodes + 1
        if e.alloc == window and e.seen >= window then fleet.reported = fleet.reported + 1 end
        fleet.polls = fleet.polls + e.polls
        fleet.reserved = fleet.reserved + e.grant + e.draws
      end
    end
  end
  for who, h in pairs(holds) do
    if who == id then
      fleet.mine = h
    elseif live[who] then
      fleet.holds[#fleet.holds + 1] = h
    end
  end
  return fleet
end

-- Whether a grant's held places are of this interval's end.
local function holds_now(h, interval_end)
  return h.held > 0 and h.held_end == interval_end and interval_end > 0
end
-- The places of `holds` still held for a session's end, with `ending` sessions to end by
-- interval_end: each grant holds places counted from the last session to end by then, so
-- those below `ending` wait.
local function still_held(holds, interval_end, ending)
  local sum = 0
  for _, h in ipairs(holds) do
    if holds_now(h, interval_end) then
      sum = sum + math.min(math.max(ending - h.held_from, 0), h.held)
    end
  end
  return sum
end
-- Where a new grant's held places begin: past every other grant's.
local function held_span(holds, interval_end)
  local span = 0
  for _, h in ipairs(holds) do
    if holds_now(h, interval_end) then span = math.max(span, h.held_from + h.held) end
  end
  return span
end

-- A session (a waiter) last seen before cut(t, active_window) (cut(t, presence)) has left at t.
-- The fleet normally hears every node each interval. After a silence longer than a node's
-- staleness (Redis hung or unreachable), the nodes still hold what they saw meanwhile (a
-- failed sync's report is given back) and send it with their next syncs. Until every node
-- heard shortly before the silence has sent a sync built after it (or a node's staleness has
-- passed: one that does not come back is not waited for), time stands still for expiry where
-- the silence began: a session seen within its window before it is not taken for gone (its
-- place would be given while still in use, and the room would overfill), nor a waiter seen
-- within `presence` before it (it would lose its place in the line while it waits).
-- A sync built during the silence may still run when Redis comes back (sent on a connection
-- the node gave up on): it does not count. Built after the silence means: its window (the
-- node's clock) is later than the node's last one before it by the silence's length, less an
-- interval for the rounding to windows (no clock is compared with another's).
local hold, hold_until, hold_wait = 0, 0, ''
local function cut(t, window_ms)
  if t < hold_until then return math.min(t, hold) - window_ms end
  return t - window_ms
end
do
  local f = redis.call('HMGET', K_FLEET, 'heard', 'hold', 'hold_until', 'hold_wait')
  local heard = number(f[1])
  hold, hold_until, hold_wait = number(f[2]), number(f[3]), f[4] or ''
  if heard > 0 and now - heard > stale then
    local wait = {}
    local all = redis.call('HGETALL', K_FLEET)
    for i = 1, #all, 2 do
      local e = string.sub(all[i], 1, 2) == 'n:' and read_node(all[i + 1])
      if e and heard - e.seen <= stale then
        wait[#wait + 1] = string.sub(all[i], 3) .. ':' .. digits(math.max(e.alloc + now - e.seen - interval, 0))
      end
    end
    if #wait > 0 then
      local from = heard
      if now < hold_until then from = math.min(from, hold) end
      hold, hold_until, hold_wait = from, now + stale, table.concat(wait, ' ')
      redis.call('HSET', K_FLEET, 'hold', digits(hold), 'hold_until', digits(hold_until),
        'hold_wait', hold_wait)
    end
  end
  if now > heard then redis.call('HSET', K_FLEET, 'heard', digits(now)) end
end
-- This node's sync (its report is in): if it was built after the silence, the hold waits for
-- it no more.
local function synced_since_silence()
  if now >= hold_until or hold_wait == '' then return end
  local rest = {}
  for w, need in string.gmatch(hold_wait, '(%d+):(%d+)') do
    if w ~= id or window < tonumber(need) then rest[#rest + 1] = w .. ':' .. need end
  end
  hold_wait = table.concat(rest, ' ')
  if hold_wait == '' then hold_until = now end
  redis.call('HSET', K_FLEET, 'hold_until', digits(hold_until), 'hold_wait', hold_wait)
end

-- Sessions whose window ends by t (after the expired ones were removed).
local function ending_by(t)
  return redis.call('ZCOUNT', K_ACTIVE, '-inf', '(' .. digits(cut(t, active_window)))
end

-- The sessions that grants of an earlier interval end may still wait for: all that end by the
-- latest such end, as they could be any of them (0 when none waits).
local function awaited(holds, interval_end)
  local latest = 0
  for _, h in ipairs(holds) do
    if h.held > 0 and h.held_end ~= interval_end and h.held_end > now and h.held_end > latest then
      latest = h.held_end
    end
  end
  if latest == 0 then return 0 end
  return ending_by(latest)
end

local function save()
  redis.call('HSET', K_FLEET, field, write_node(me))
  for i = 1, 8 do redis.call('PEXPIRE', KEYS[i], ttl) end
end

-- A draw's reply, each value at its place (D_*, from Rust: core/src/fleet/wire.rs).
local function drawn(granted, active, last_seq)
  local r = {}
  r[D_GRANTED], r[D_ACTIVE], r[D_SEQ] = granted, active, last_seq
  return r
end

if op == 'draw' then
  local want = tonumber(ARGV[A_WANT])
  if not want or want < 0 then
    return redis.error_reply('smart_limit: bad fleet arguments')
  end
  -- Sessions whose window ended since the last sync free their places now.
  redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', cut(now, active_window))
  local active = redis.call('ZCARD', K_ACTIVE)
  if gen < me.gen or seq < me.seq then
    return drawn(0, active, me.seq)
  end
  local fleet = census()
  -- The starved mark: the oldest arrival a draw found the pool empty for, set in this interval
  -- or the last, while someone who arrived at or before it still waits. The pool keeps one
  -- place for a draw for a client at or before the mark (FleetNode::take_draw says why); the
  -- first such draw that gets a place clears the mark. At most two reads and one write (none
  -- when the mark stays as it was).
  local oldest = number(ARGV[A_OLDEST])
  local st = redis.call('HMGET', K_FLEET, 'starved', 'starved_win', 'hz')
  local mark, mark_win = number(st[1]), number(st[2])
  local was, was_win = mark, mark_win
  if mark ~= 0 then
    local head = tonumber(redis.call('ZRANGE', K_HERE, 0, 0, 'WITHSCORES')[2])
    if mark_win + interval < window or not head or head > mark then mark = 0 end
  end
  local ours = mark ~= 0 and oldest ~= 0 and oldest <= mark
  local kept = 0
  if mark ~= 0 and not ours then kept = 1 end
  -- The grants' places still held for sessions that have not ended are not free yet, but
  -- not taken either: the pool's are those that free before them (the sync's held places).
  -- As long as the sessions that end by the interval's end ("hz") are more than the grants
  -- hold, all of them are held; fewer, those.
  local interval_end = number(st[3])
  local still = 0
  if interval_end > 0 then
    fleet.holds[#fleet.holds + 1] = fleet.mine
    still = still_held(fleet.holds, interval_end, ending_by(interval_end))
  end
  local granted = math.max(math.min(want,
    max_active - active - fleet.reserved - me.grant - me.draws - kept + still), 0)
  me.draws = me.draws + granted
  if ours and granted > 0 then
    mark = 0
  elseif granted < want and oldest ~= 0 and (mark == 0 or oldest <= mark) then
    mark, mark_win = oldest, window
  end
  if mark ~= was or mark_win ~= was_win then
    redis.call('HSET', K_FLEET, 'starved', digits(mark), 'starved_win', digits(mark_win))
  end
  save()
  return drawn(granted, active, me.seq)
end

if op ~= 'sync' then
  return redis.error_reply('smart_limit: unknown fleet op')
end

-- 1. fence: a sync not newer than the last one taken from this node changes nothing (false);
-- else the node's entry is fenced at this sync.
local function fence(node)
  if gen < node.gen or (gen == node.gen and seq <= node.seq) or window < node.alloc then
    return false
  end
  node.gen, node.seq, node.seen = gen, seq, now
  synced_since_silence()
  return true
end

local function seen_at(age)
  return math.max(now - tonumber(age), 0)
end

-- 2. take_sightings: what the node reports. Admissions first: they leave the line for the
-- active set. Returns the admitted sessions, and the revoked ones (a set, for take_waiters).
local function take_sightings()
  local admitted, adm_args = {}, {}
  for sid, age in string.gmatch(ARGV[A_ADMITTED] or '', '(%d+):(%d+)') do
    admitted[#admitted + 1] = sid
    adm_args[#adm_args + 1] = seen_at(age)
    adm_args[#adm_args + 1] = sid
  end
  if #admitted > 0 then
    variadic('ZADD', K_ACTIVE, adm_args, 'GT')
    variadic('ZREM', K_PRESENT, admitted)
    variadic('ZREM', K_ARRIVAL, admitted)
    variadic('ZREM', K_HERE, admitted)
    variadic('ZREM', K_AWAY, admitted)
  end
  local act_args = {}
  for sid, age in string.gmatch(ARGV[A_ACTIVE] or '', '(%d+):(%d+)') do
    act_args[#act_args + 1] = seen_at(age)
    act_args[#act_args + 1] = sid
  end
  variadic('ZADD', K_ACTIVE, act_args, 'GT')
  -- Sessions the origin revoked on the node: off the active sessions, after this report's own
  -- sightings of them (a place the origin frees is free on every node from the next share-out).
  local revoked, was_revoked = {}, {}
  for sid in string.gmatch(ARGV[A_REVOKED] or '', '%d+') do
    if #revoked >= REVOKED_REPORT then break end
    revoked[#revoked + 1] = sid
    was_revoked[sid] = true
  end
  variadic('ZREM', K_ACTIVE, revoked)
  return admitted, was_revoked
end

-- Of the waiters `sids`: the arrival of those in the line (false: not in it) and, of those not
-- in it, whether they are active. Most waiters are in the line already: one lookup each. Only
-- those not in it are looked up among the active sessions.
local function look_up_waiters(sids)
  local in_line = scores(K_ARRIVAL, sids)
  local fresh, fresh_sid = {}, {}
  for i = 1, #sids do
    if not in_line[i] then
      fresh[#fresh + 1] = i
      fresh_sid[#fresh_sid + 1] = sids[i]
    end
  end
  local is_active = {}
  if #fresh > 0 then
    local a = scores(K_ACTIVE, fresh_sid)
    for k, i in ipairs(fresh) do is_active[i] = a[k] end
  end
  return in_line, is_active
end

-- 3. take_waiters: a session already active (admitted here or on another node since it was
-- seen waiting) never joins the line again, nor does one this report revoked (its sighting
-- waiting, from before its admission in the same interval, would bring it back as a waiter
-- ahead of everyone until presence). A waiter's arrival only moves later (rewritten
-- only if it moved): a client whose place had gone (unseen for KEPT) comes back with a new
-- one, at the tail; one back within KEPT is present again at its place ([S27]). Returns how
-- many waiters the node reported.
local function take_waiters(revoked)
  local w_sid, w_arrival, w_at = {}, {}, {}
  for sid, arrival, age in string.gmatch(ARGV[A_WAITERS] or '', '(%d+):(%d+):(%d+)') do
    w_sid[#w_sid + 1] = sid
    w_arrival[#w_arrival + 1] = arrival
    w_at[#w_at + 1] = seen_at(age)
  end
  if #w_sid == 0 then return 0 end
  local in_line, is_active = look_up_waiters(w_sid)
  local queue_len = redis.call('ZCARD', K_ARRIVAL)
  local pres_args, line_args, here_args, back = {}, {}, {}, {}
  for i = 1, #w_sid do
    local at
    if revoked[w_sid[i]] then
      at = false
    elseif in_line[i] then
      at = in_line[i]
      if tonumber(in_line[i]) < tonumber(w_arrival[i]) then
        at = w_arrival[i]
        line_args[#line_args + 1] = w_arrival[i]
        line_args[#line_args + 1] = w_sid[i]
      end
    elseif not is_active[i] and (max_line == 0 or queue_len < max_line) then
      at = w_arrival[i]
      queue_len = queue_len + 1
      line_args[#line_args + 1] = w_arrival[i]
      line_args[#line_args + 1] = w_sid[i]
    end
    if at then
      pres_args[#pres_args + 1] = w_at[i]
      pres_args[#pres_args + 1] = w_sid[i]
      here_args[#here_args + 1] = at
      here_args[#here_args + 1] = w_sid[i]
      back[#back + 1] = w_sid[i]
    end
  end
  variadic('ZADD', K_PRESENT, pres_args, 'GT')
  variadic('ZADD', K_ARRIVAL, line_args, 'GT')
  variadic('ZADD', K_HERE, here_args)
  variadic('ZREM', K_AWAY, back)
  return #w_sid
end

-- 4. expire: waiters unseen for presence are away: no longer counted by the cursor, their
-- places kept for KEPT (with `keep=off` they leave the line at once); those away for KEPT leave
-- the line. At most a step of each a call, fewer the more the node reported. Sessions whose
-- window ended free their places.
local function expire(reported)
  local kept = tonumber(ARGV[A_KEPT]) or presence
  local most = math.max(EXPIRE_STEP - reported, EXPIRE_MIN)
  local old = redis.call('ZRANGEBYSCORE', K_PRESENT, '-inf', cut(now, presence), 'WITHSCORES',
    'LIMIT', 0, most)
  local sids, away = {}, {}
  for i = 1, #old - 1, 2 do
    sids[#sids + 1] = old[i]
    away[#away + 1] = old[i + 1]
    away[#away + 1] = old[i]
  end
  if #sids > 0 then
    variadic('ZREM', K_PRESENT, sids)
    variadic('ZREM', K_HERE, sids)
    if kept > presence then
      variadic('ZADD', K_AWAY, away)
    else
      variadic('ZREM', K_ARRIVAL, sids)
    end
  end
  local gone = redis.call('ZRANGEBYSCORE', K_AWAY, '-inf', cut(now, kept), 'LIMIT', 0,
    math.max(most - #sids, EXPIRE_MIN))
  if #gone > 0 then
    variadic('ZREM', K_AWAY, gone)
    variadic('ZREM', K_ARRIVAL, gone)
  end
  -- A node of the build before K_HERE (a rolling upgrade) drops waiters from K_PRESENT only:
  -- those at the head of K_HERE would hold the cursor back. The first HERE_CHECK are looked up.
  local head = redis.call('ZRANGE', K_HERE, 0, HERE_CHECK - 1)
  if #head > 0 then
    local seen, ghosts = scores(K_PRESENT, head), {}
    for i = 1, #head do
      if not seen[i] then ghosts[#ghosts + 1] = head[i] end
    end
    variadic('ZREM', K_HERE, ghosts)
  end
  redis.call('ZREMRANGEBYSCORE', K_ACTIVE, '-inf', cut(now, active_window))
end

-- 5. census: above (the draw's too).

-- 6. count_sessions: the fleet's active sessions and line, and those whose active window ends
-- soon (they were last seen that long ago, from `since` on): within the interval (`expiring`:
-- their places free before the next picture) and within the horizon (`leaving`: how fast the
-- line will move; the head is called back in time).
local function count_sessions()
  local counts = {active = redis.call('ZCARD', K_ACTIVE),
                  queue_len = redis.call('ZCARD', K_ARRIVAL),
                  present = redis.call('ZCARD', K_HERE), full = 0}
  if max_line > 0 and counts.queue_len >= max_line then counts.full = 1 end
  local horizon = math.max(interval, math.min(HORIZON_MAX_MS, math.floor(active_window / 2)))
  counts.since = cut(now, active_window)
  counts.expiring = redis.call('ZCOUNT', K_ACTIVE, counts.since,
    '(' .. digits(cut(now + interval, active_window)))
  counts.leaving = redis.call('ZCOUNT', K_ACTIVE, counts.since,
    '(' .. digits(cut(now + horizon, active_window)))
  return counts
end

-- 7. free_places: this interval's allocation as stored ("win", "hz", "free", "polls",
-- "given": its window, the interval's end, the free places it shares, the polls it shares
-- them by, what was given out), and the places free for it (`now`): those free now and those
-- of the `ending` sessions, which end by the interval's end. The interval being shared out
-- ends at the first sync of the window's now + interval; a sync of another window (a late one,
-- a node whose clock disagrees) moves it only once the last is at most half an interval from
-- its end, so the nodes' held places are of one interval end.
local function free_places(fleet, counts)
  local a = redis.call('HMGET', K_FLEET, 'win', 'hz', 'free', 'polls', 'given')
  local allocation = {window = number(a[1]), interval_end = number(a[2]), free = number(a[3]),
                      polls = number(a[4]), given = number(a[5])}
  if allocation.window ~= window and allocation.interval_end <= now + math.floor(interval / 2) then
    allocation.interval_end = now + interval
  end
  local ending = ending_by(allocation.interval_end)
  local free = {ending = ending,
                now = math.max(max_active - counts.active - fleet.reserved + ending, 0)}
  return allocation, free
end

-- 8. held_places: where the node's held places may go (`from`, counted from the last session
-- to end by the interval's end): before the other nodes' (of this end), after the sessions
-- an earlier end's grants may still wait for; how many may (`held_room`), and those and what
-- else is free now (`room`). A second sync in the interval keeps where its grant held, or
-- what is left of it.
local function held_places(fleet, counts, interval_end, free)
  local waits = math.min(awaited(fleet.holds, interval_end), free.ending)
  local places = {}
  local mine = fleet.mine
  if holds_now(mine, interval_end) then
    places.from = mine.held_from
    places.held_room = math.max(math.min(places.from + mine.held, free.ending - waits)
      - places.from, 0)
  else
    places.from = held_span(fleet.holds, interval_end)
    places.held_room = math.max(free.ending - waits - places.from, 0)
  end
  places.room = places.held_room + math.max(max_active - counts.active - fleet.reserved
    + still_held(fleet.holds, interval_end, free.ending), 0)
  return places
end

-- 9. share: this interval's allocation and the node's share of it (its quota). The allocation:
-- the free places (with those that free within the interval: a place is shared out as its
-- session's window ends, not an interval later), shared out by each node's part of the waiting
-- polls (Cloudflare: its share of the traffic). The first node to call in the interval sets
-- it; nodes that call later in it raise it by what their reports freed (grants of the last
-- interval they did not use), so places held by a report not yet in are not lost for long.
-- The polls since the last sync weigh the node's share; a later sync in the same interval (a
-- capped report's rest, a reload) adds to them. The node's places: what it was given and drew
-- became admissions it reports now, or were not used. A new interval releases them all and
-- shares the free places out again; a second sync in the same interval (a reload's new leader,
-- a retry) keeps what is left of them, so the node never loses its share. A crowd's first
-- interval (no node polled in its last) is shared equally by the live nodes instead: its polls
-- would be those of whichever node synced first, which took half the room while a node
-- syncing later found none left, and its newcomers waited an interval in an empty room (the
-- rehearsal's first fill: 2.7 s against 0.27 s on one node). Allocation polls 0 mark it.
local function share(node, fleet, allocation, free, places, admitted)
  local before = node.polls
  if node.alloc == window then
    node.polls = node.polls + number(ARGV[A_POLLS])
  else
    node.polls = number(ARGV[A_POLLS])
  end
  local left = math.max(node.grant + node.draws - admitted, 0)
  node.draws = 0
  if allocation.window ~= window then
    allocation.window, allocation.free = window, free.now
    allocation.polls, allocation.given = fleet.polls + node.polls, 0
    if fleet.polls == 0 and before == 0 then allocation.polls = 0 end
  else
    allocation.free = math.max(allocation.free, free.now + allocation.given)
  end
  local quota
  if node.alloc ~= window then
    local part
    if allocation.polls > 0 then part = node.polls / allocation.polls else part = 1 / (fleet.nodes + 1) end
    local millionths = math.floor(allocation.free * math.min(part, 1) * keep) + node.remainder
    quota = math.floor(millionths / PPM)
    node.remainder = millionths - quota * PPM
    quota = math.max(math.min(quota, places.room, SHARE_PER_POLL * node.polls + 1), 0)
    allocation.given = allocation.given + quota
    node.alloc = window
  else
    quota = math.min(left, places.room)
  end
  node.grant = quota
  redis.call('HSET', K_FLEET, 'win', digits(window), 'hz', digits(allocation.interval_end),
    'free', digits(allocation.free), 'polls', digits(allocation.polls),
    'given', digits(allocation.given))
  return quota
end

-- 10. held_ends: which of the node's places free only later. The grants take the last places
-- of the interval to free (the ending sessions' by their ends: this node's past the other
-- grants' held ones, counted from the last to end; a node's second sync in the interval too,
-- as where it held before may be behind another's), so the pool keeps those free now and
-- first, and a draw early in the interval finds them (the ten-minute rehearsal: a head polling
-- 0.2 s after each tick found the pool empty while later polls took the places as they
-- freed). Those of its places that are held the node takes only as their sessions end (shared
-- out at the sync and taken at once, they held a session more than max_active until the old
-- one's window ended: a rehearsal saw 103 of 100 for 67 ms). Stores them ("h:NODE") and
-- returns {held, then the ends of n = min(held, ENDS) of them, evenly by rank (the i-th, 1..n,
-- is the end of the held place of rank floor(i * held / n) - 1), ms from now (0 when expiry
-- is held)}.
local function held_ends(quota, counts, interval_end, free, places)
  local held = math.min(quota, places.held_room)
  local ends = {held}
  if held > 0 then
    local before = redis.call('ZCOUNT', K_ACTIVE, '-inf', '(' .. digits(counts.since))
    local lo = free.ending - places.from - held
    local n = math.min(held, ENDS)
    for i = 1, n do
      local r = before + lo + math.floor(i * held / n) - 1
      local e = redis.call('ZRANGE', K_ACTIVE, r, r, 'WITHSCORES')
      ends[#ends + 1] = math.max((tonumber(e[2]) or now) + active_window - now, 0)
    end
  end
  local from = places.from
  if held == 0 then from = 0 end
  redis.call('HSET', K_FLEET, 'h:' .. id,
    digits(held) .. ' ' .. digits(interval_end) .. ' ' .. digits(from))
  return ends
end

-- 11. pressure: the fleet's pressure (challenge_bits=auto, [S19]; the central room's in
-- redis/room.lua):
-- the newcomers that took a place on every node (ARGV[A_ASKED]) and the challenges they gave
-- (ARGV[A_CHALLENGED]: the larger of the two sums is the clients that asked) against the admissions the
-- nodes report, summed from one look to the next: once a second (LOOK_MS, as on one node and in
-- the central room) or once an interval if longer, the first sync of a new interval looks at
-- the sums, a quarter of the ratio before carried over (challenge::Pressure's rule), and the
-- doublings it finds (0 while nobody waits) go in every picture until the next look: every
-- node asks the same difficulty. A node's counts reach the sums with its sync, so a look may
-- see some of them an interval late; over a few looks every one counts.
-- `admitted`: the admissions this sync reports. Returns the doublings.
local function pressure(queue_len, admitted)
  local pr = redis.call('HMGET', K_FLEET, 'pr_win', 'pr_in', 'pr_out', 'pr_r', 'pr_d', 'pr_ch')
  local pr_win, pr_in, pr_out = number(pr[1]), number(pr[2]), number(pr[3])
  local pr_r, pr_d, pr_ch = tonumber(pr[4]) or PPM, number(pr[5]), number(pr[6])
  if pr_win == 0 or window >= pr_win + math.max(interval, LOOK_MS) then
    if pr_win ~= 0 then
      local keep = PRESSURE_KEEP_PCT / 100
      pr_r = math.floor(keep * pr_r + (1 - keep) * (math.max(pr_in, pr_ch) + 1) / (pr_out + 1) * PPM)
      pr_d = 0
      if queue_len > 0 then
        local r = pr_r / PPM
        while r >= 2 and pr_d < MAX_DOUBLINGS do
          r = r / 2
          pr_d = pr_d + 1
        end
      end
    end
    pr_win, pr_in, pr_out, pr_ch = window, 0, 0, 0
  end
  pr_in = pr_in + number(ARGV[A_ASKED])
  pr_ch = pr_ch + number(ARGV[A_CHALLENGED])
  pr_out = pr_out + admitted
  redis.call('HSET', K_FLEET, 'pr_win', digits(pr_win), 'pr_in', digits(pr_in), 'pr_out',
    digits(pr_out), 'pr_r', digits(pr_r), 'pr_d', digits(pr_d), 'pr_ch', digits(pr_ch))
  return pr_d
end

-- 12. cursor: waiters who arrived no later than it may be admitted wherever they poll: the
-- oldest present ones (K_HERE: a kept place of someone away holds no free place; back, it is
-- let in if the cursor passed it) the free places (and those that free within the interval)
-- can take, and beyond them
-- up to BAND times as many, as long as those arrived within an interval of the last the places
-- rightly take. The places then fill as fast as that band polls, not as fast as its slowest
-- client (or one who left) does; the nodes let the band in only from half an interval after
-- their picture on, so those before it come first (FleetNode::band_waits).
local function present_at(rank)
  return tonumber(redis.call('ZRANGE', K_HERE, rank, rank, 'WITHSCORES')[2]) or 0
end
-- Returns the cursor and the rightful one's arrival (the nodes hold the band back by it).
local function cursor(counts)
  local places = max_active - counts.active + counts.expiring
  if places <= 0 then
    return 0, 0
  elseif places >= counts.present then
    return -1, -1
  end
  local rightful = present_at(places - 1)
  local band = present_at(math.min(places * BAND, counts.present) - 1)
  return math.max(rightful, math.min(band, rightful + interval)), rightful
end

-- 13. flood: flood control, the fleet's budget of each client key the node reports (it took
-- more than the node's allowance of places since its last report), the GCRA of
-- room::gcra::Rate (the central room's flood step) charged with the places the node let it
-- take: they are taken already, so the charge is never refused; it tells whether the key's next
-- place would be. Keys over their budget are kept in K_OVER until they may take one again, and
-- every sync answers them (the reported ones first, then those refused longest), so every node
-- learns of a key over its budget at its next sync, whichever node reported it.
-- The reported keys charged (at most FLOOD_KEYS): those over their budget as pairs (key in
-- hex, ms), and the set of them.
local function charge_flood(flood_interval, flood_burst)
  local now_us = now * 1000
  local over, charged, i = {}, {}, 0
  for n in string.gmatch(ARGV[A_FLOOD_PLACES] or '', '%d+') do
    i = i + 1
    local k = KEYS[8 + i]
    if not k or i > FLOOD_KEYS then break end
    local tat = tonumber(redis.call('GET', k)) or 0
    if tat < now_us then tat = now_us end
    tat = tat + tonumber(n) * flood_interval
    -- The bucket is full again at `tat`: it may go then.
    redis.call('SET', k, digits(tat), 'PX', digits(math.max(math.floor((tat - now_us + 999) / 1000), 1)))
    local wait_us = tat - flood_burst * flood_interval - now_us
    if wait_us > 0 then
      -- Rounded up to whole ms in integers (as u64::div_ceil).
      local ms = math.floor(wait_us / 1000)
      if ms * 1000 < wait_us then ms = ms + 1 end
      local hex = string.match(k, '(%x+)$')
      charged[hex] = true
      over[#over + 1] = hex
      over[#over + 1] = ms
      redis.call('ZADD', K_OVER, digits(now + ms), hex)
    end
  end
  return over, charged
end
-- The keys over their budget (pairs: key in hex, ms until it may take a place again): the
-- charged ones, then those refused longest; lapsed ones leave K_OVER.
local function flood()
  local flood_interval, flood_burst = number(ARGV[A_FLOOD_INTERVAL]), number(ARGV[A_FLOOD_BURST])
  if flood_interval <= 0 then return {} end
  local over, charged = charge_flood(flood_interval, flood_burst)
  local lapsed = redis.call('ZRANGEBYSCORE', K_OVER, '-inf', digits(now), 'LIMIT', 0, FLOOD_EXPIRE)
  if #lapsed > 0 then redis.call('ZREM', K_OVER, unpack(lapsed)) end
  local others = redis.call('ZREVRANGEBYSCORE', K_OVER, '+inf', '(' .. digits(now), 'WITHSCORES',
    'LIMIT', 0, FLOOD_ANSWERS)
  for j = 1, #others, 2 do
    if #over >= 2 * FLOOD_ANSWERS then break end
    if not charged[others[j]] then
      over[#over + 1] = others[j]
      over[#over + 1] = tonumber(others[j + 1]) - now
    end
  end
  return over
end

-- 14. spent_proofs: spent proofs (challenge=pow, [S19]). A node that took a place with a proof
-- reports it with its next sync, and every other node is told of it with its own next sync
-- after that, and refuses the proof from then on. A proof replayed on another node before that
-- node's next picture is taken there too (the window: up to two intervals). Each entry is
-- numbered ("spent_seq": syncs in the same millisecond are still ordered) and each node's
-- cursor ("s:NODE") is the last number it was told. Entries are kept a minute (or the nodes'
-- staleness if longer): a node back from a longer silence, or new, hears what was reported
-- since then.
-- The proofs this node reports go in the log, numbered; lapsed entries (the oldest numbers,
-- while reported before the keep) leave it.
local function record_spent()
  local reports = {}
  for hex, ms in string.gmatch(ARGV[A_SPENT] or '', '(%x+):(%d+)') do
    if #reports >= SPENT_REPORT then break end
    reports[#reports + 1] = hex .. ':' .. digits(now + tonumber(ms)) .. ':' .. id .. ':' .. digits(now)
  end
  if #reports > 0 then
    local last = redis.call('HINCRBY', K_FLEET, 'spent_seq', #reports)
    for j, m in ipairs(reports) do
      redis.call('ZADD', K_SPENT, last - #reports + j, m)
    end
  end
  local keep_from = now - math.max(stale, SPENT_KEEP_MS)
  local lapsed = {}
  for _, m in ipairs(redis.call('ZRANGE', K_SPENT, 0, SPENT_EXPIRE - 1)) do
    local at = tonumber(string.match(m, ':(%d+)$'))
    if at and at >= keep_from then break end
    lapsed[#lapsed + 1] = m
  end
  if #lapsed > 0 then redis.call('ZREM', K_SPENT, unpack(lapsed)) end
end
-- The entries after this node's cursor that other nodes reported, as pairs (proof key in hex,
-- ms it stays spent); the cursor moves past those looked at.
local function spent_proofs()
  local spent_cursor = 's:' .. id
  local told = number(redis.call('HGET', K_FLEET, spent_cursor))
  record_spent()
  local spent = {}
  local heard = redis.call('ZRANGEBYSCORE', K_SPENT, '(' .. digits(told), '+inf', 'WITHSCORES',
    'LIMIT', 0, SPENT_ANSWERS)
  for j = 1, #heard, 2 do
    local hex, till, node = string.match(heard[j], '^(%x+):(%d+):(%d+):%d+$')
    if hex and node ~= id and tonumber(till) > now then
      spent[#spent + 1] = hex
      spent[#spent + 1] = tonumber(till) - now
    end
    told = tonumber(heard[j + 1])
  end
  redis.call('HSET', K_FLEET, spent_cursor, digits(told))
  return spent
end

-- 15. reply: the picture. A line of at most EXACT_LINE comes whole, each waiter as
-- "arrival:sid" in the line's order (by arrival, then member): every waiter is told its own
-- position. A longer one is sampled (sample_line).
local function whole_line(queue_len)
  if queue_len == 0 or queue_len > EXACT_LINE then return '' end
  local line = redis.call('ZRANGE', K_ARRIVAL, 0, EXACT_LINE - 1, 'WITHSCORES')
  local words = {}
  for i = 1, #line - 1, 2 do
    words[#words + 1] = line[i + 1] .. ':' .. line[i]
  end
  return table.concat(words, ' ')
end
-- Samples of the line (rank, arrival): every rank at the head, then a quarter of their rank
-- apart (a waiter near the head is told its place closely: it is called back by it) while the
-- samples left can still reach the tail evenly spaced, then evenly.
-- Appended to `reply` as pairs (rank, arrival).
local function sample_line(reply, queue_len)
  local spread = math.max(1, math.ceil((queue_len - FIRST_RANKS) / EVEN_SAMPLES))
  local rank, step = 0, 1
  for i = 1, SAMPLES do
    if rank >= queue_len then break end
    local r = redis.call('ZRANGE', K_ARRIVAL, rank, rank, 'WITHSCORES')
    if #r < 2 then break end
    reply[#reply + 1] = rank
    reply[#reply + 1] = tonumber(r[2])
    if rank + 1 >= FIRST_RANKS then
      local rest = queue_len - 1 - rank
      if SAMPLES - i > math.ceil(rest / spread) then
        step = math.max(math.min(math.floor(rank / GROWTH), spread), 1)
      else
        step = math.max(spread, math.ceil(rest / math.max(SAMPLES - i, 1)))
      end
    end
    rank = rank + step
  end
  if queue_len > 0 then
    local r = redis.call('ZRANGE', K_ARRIVAL, -1, -1, 'WITHSCORES')
    if #r == 2 and queue_len - 1 > rank - step then
      reply[#reply + 1] = queue_len - 1
      reply[#reply + 1] = tonumber(r[2])
    end
  end
end
local function reply(counts, shared)
  local whole = whole_line(counts.queue_len)
  local picture = {}
  picture[P_FLEET_ACTIVE] = counts.active
  picture[P_QUEUE_LEN] = counts.queue_len
  picture[P_CURSOR] = shared.cursor
  picture[P_QUOTA] = shared.quota
  picture[P_NODES] = shared.nodes
  picture[P_WINDOW] = window
  picture[P_FREE] = shared.free
  picture[P_EXPIRING] = counts.expiring
  picture[P_LEAVING] = counts.leaving
  picture[P_FULL] = counts.full
  picture[P_PRESSURE] = shared.pressure
  picture[P_RIGHTFUL] = shared.rightful
  picture[P_REPORTED] = shared.reported
  picture[P_SPENT] = shared.spent
  picture[P_FLOOD] = shared.flood
  picture[P_ENDS] = shared.ends
  picture[P_LINE] = whole
  if whole == '' then sample_line(picture, counts.queue_len) end
  return picture
end

-- The sync, step by step (the table at the top of this file).
if not fence(me) then
  return {-1}
end
local admitted, revoked = take_sightings()
expire(take_waiters(revoked))
local fleet = census()
local counts = count_sessions()
local allocation, free = free_places(fleet, counts)
local places = held_places(fleet, counts, allocation.interval_end, free)
local quota = share(me, fleet, allocation, free, places, #admitted)
local ends = held_ends(quota, counts, allocation.interval_end, free, places)
local doublings = pressure(counts.queue_len, #admitted)
local cursor_ms, rightful_ms = cursor(counts)
local over = flood()
local spent = spent_proofs()
save()
return reply(counts, {cursor = cursor_ms, rightful = rightful_ms, quota = quota, nodes = fleet.nodes + 1,
  reported = fleet.reported + (now >= window and 1 or 0), free = allocation.free, pressure = doublings, spent = spent, flood = over, ends = ends})
