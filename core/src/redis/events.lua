-- A room's events made at run time ([S18]), for the whole fleet: one hash under the room's
-- hash tag, with the table's text (field t, one event per line) and its version (field v).
-- A node changes the table it read: the write is refused when another node changed it
-- first (the version moved), and the reply then carries the table as it is now.
--
-- KEYS[1]: the room's events hash.
-- ARGV[1]: the version the node read; ARGV[2]: the new text.
-- Reply: {1, new version, text} written; {0, version, text} refused (stale read).
-- Constant work: two hash fields.
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0') or 0
if tonumber(ARGV[1]) ~= v then
  return {0, v, redis.call('HGET', KEYS[1], 't') or ''}
end
v = v + 1
redis.call('HSET', KEYS[1], 'v', v, 't', ARGV[2])
return {1, v, ARGV[2]}
