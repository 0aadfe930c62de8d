-- smart_limit: max_active=auto's call of its own (steer.lua, above this text, says what it
-- does): a synced node's once an interval, sent beside its sync on the same connection, and an
-- operator's pin through the control endpoint (either store).
--
-- KEYS[1] the hash that holds the fleet's value (a synced room's PREFIX:{ROOM}:auto; a
--         central room's state hash, PREFIX:{ROOM}:state)
-- ARGV[1] the node's argument (steer.lua)  [2] now in unix ms ("0": the Redis server's clock,
--         what nginx sends)  [3] how long the hash outlives this call at least (ms)
-- Reply: the values of steer.lua's au_reply, from place 1.

if redis.replicate_commands then
  pcall(redis.replicate_commands)
end

local a = au_args(ARGV[1])
local now = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
if not (a and now and ttl) then
  return redis.error_reply('smart_limit: bad steering arguments')
end
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local s = au_load(KEYS[1])
local closed = au_step(s, now, a)
au_save(KEYS[1], s)
-- Never shortens a longer TTL (a central room's state keeps a mode override for a day).
local left = redis.call('PTTL', KEYS[1])
if left < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
local r = {}
au_reply(r, 0, s, a, closed)
return r
