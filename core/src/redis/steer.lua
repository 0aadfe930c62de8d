-- smart_limit: max_active=auto for a fleet ([S26]), the part in Redis. Included before the
-- text of the room script (room.lua: a central room's visits carry it) and of the steering
-- script (steer_call.lua: a synced node's once an interval, beside its sync).
--
-- One value for the whole fleet, one window of measurements at a time. Every node measures
-- the origin for its own admitted requests and tells the counts it gathered since its last
-- call; they add up here, in the fields AU_FIELDS of one hash. The first call after the
-- window has lasted AU_STEP_MS closes it: its counts go back to that caller alone, which steps
-- the rule (core/src/capacity/control.rs, the rule's one source: it is not written here) and
-- brings the new value with its next call, naming the window it answers ("the window that
-- began at W"). A value for a window that is no longer the open one (another window closed
-- since: the node was slow to call again) is dropped; the next closed window is judged anew.
-- So the rule runs once a window for the fleet, on one node, and Redis only adds and stores.
--
-- The node's argument, decimal numbers separated by one space:
--   "MIN MAX N SLOW WARM ERRORS WINDOW TO MOVE PIN"
--   MIN MAX the node's bounds (the value in force is kept inside them), N SLOW WARM ERRORS
--   the counts it measured since its last call (capacity::control::Window), WINDOW TO MOVE
--   the value TO its rule gave for the window that began at WINDOW with the move MOVE
--   (Move::code; WINDOW 0: none), PIN 0 (nothing), 1 (back to auto) or 1 + the value an
--   operator pinned.
-- What a call gives back (au_reply), each at its place (S_*, from Rust's one table,
-- core/src/redis/steer.rs `reply`): the value in force, whether it is pinned, the window this
-- call closed (when it began; 0: none) and its counts, whether the value was ever cut (the
-- slow start is over), the last move (Move::code, 0: none) and when (ms).
-- Work: one HMGET of ten fields a call, and one HSET of those that changed.

local AU_FIELDS = {'au_v', 'au_pin', 'au_from', 'au_n', 'au_s', 'au_w', 'au_e', 'au_cut',
  'au_mv', 'au_at'}

-- The node's argument (nil: malformed).
local function au_args(text)
  local m = {string.match(text or '',
    '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')}
  if #m ~= 10 then
    return nil
  end
  local a = {}
  for i = 1, 10 do
    a[i] = tonumber(m[i])
  end
  if a[1] < 1 or a[2] < a[1] then
    return nil
  end
  return {min = a[1], max = a[2], n = a[3], slow = a[4], warm = a[5], errors = a[6],
    win = a[7], to = a[8], move = a[9], pin = a[10]}
end

-- The fields as read (`was`, to write back only what changed) and as they stand.
local function au_load(key)
  local f = redis.call('HMGET', key, unpack(AU_FIELDS))
  local s, was = {}, {}
  for i, name in ipairs(AU_FIELDS) do
    s[name] = tonumber(f[i]) or 0
    was[name] = s[name]
  end
  s.was = was
  return s
end

-- Writes the fields that changed (most calls: a count or two).
local function au_save(key, s)
  local changed = {}
  for _, name in ipairs(AU_FIELDS) do
    if s[name] ~= s.was[name] then
      changed[#changed + 1] = name
      changed[#changed + 1] = string.format('%.0f', s[name])
    end
  end
  if #changed > 0 then
    redis.call('HSET', key, unpack(changed))
  end
end

-- One call at `now` with the node's argument `a`: the pin, the value the node brings for the
-- open window, its counts, and the window closing. Returns the closed window's counts
-- ({n, slow, warm, errors}; nil while it is open).
local function au_step(s, now, a)
  if a.pin == 1 then
    s.au_pin = 0
  elseif a.pin > 1 then
    s.au_pin = a.pin - 1
  end
  if s.au_v == 0 then
    s.au_v = a.min
  end
  if a.win > 0 and a.win == s.au_from and s.au_pin == 0 and a.to > 0 then
    s.au_v = a.to
    if a.move ~= MOVE_UP then
      s.au_cut = 1
    end
    s.au_mv, s.au_at = a.move, now
  end
  s.au_n, s.au_s = s.au_n + a.n, s.au_s + a.slow
  s.au_w, s.au_e = s.au_w + a.warm, s.au_e + a.errors
  if a.pin ~= 0 then
    -- An operator's call: the window is left to the nodes' calls, which judge it.
    return nil
  end
  if s.au_from == 0 or now < s.au_from then
    -- The first window, or the clock went back: a window begins now.
    s.au_from = now
    return nil
  end
  if now - s.au_from < AU_STEP_MS then
    return nil
  end
  local closed = {s.au_n, s.au_s, s.au_w, s.au_e}
  s.au_n, s.au_s, s.au_w, s.au_e = 0, 0, 0, 0
  s.au_from = now
  return closed
end

-- The value in force, inside the node's bounds (a pin is the operator's, as written).
local function au_value(s, a)
  if s.au_pin > 0 then
    return s.au_pin
  end
  return math.min(math.max(s.au_v, a.min), a.max)
end

-- Writes the reply's values into `r` from place `base` + 1 on.
local function au_reply(r, base, s, a, closed)
  r[base + S_VALUE] = au_value(s, a)
  r[base + S_PINNED] = (s.au_pin > 0) and 1 or 0
  r[base + S_WINDOW] = closed and s.au_from or 0
  closed = closed or {0, 0, 0, 0}
  r[base + S_N], r[base + S_SLOW] = closed[1], closed[2]
  r[base + S_WARM], r[base + S_ERRORS] = closed[3], closed[4]
  r[base + S_CUT], r[base + S_MOVE], r[base + S_MOVED_AT] = s.au_cut, s.au_mv, s.au_at
end
