# Bounded work in a synced room (`sync=`): no script call's work grows with the line or with
# what a node kept, and the line stops at max_line.
#
# TEST 1 puts a line of 100,000 waiters straight into the room's sorted sets, then 1,500 new
# clients take places on two nodes and poll. TEST 2 does the same while the 100,000 leave (last
# seen 19 s before, presence=20s), so that the calls also drop departed waiters. The probe
# (t/lib/sync_bounded.pl) reads every script call from Redis's MONITOR stream, with its
# arguments and every command the script ran, and checks the work of each call, not its time:
#
#   - sightings a sync carries (tokens of ARGV[16..18], core/src/fleet/script.rs): at most
#     REPORT_CAP = 400, of them at most REPORT_WAITERS_CAP = 200 waiters (core/src/fleet/mod.rs);
#     the rest follow in the next syncs;
#   - syncs of a node: at most MAX_SYNCS_PER_INTERVAL = 16 a tick, counted without a clock
#     (a tick's first sync has a window of its own: syncs <= 16 x (windows + 1); at most 32
#     stamped with one window, see the probe); a run has 5-14 a node a window;
#   - the departed waiters' drop asks for at most max(EXPIRE_STEP - waiters, EXPIRE_MIN) =
#     max(200 - waiters, 50) (script.lua) and removes no more; the line replayed from MONITOR
#     (seeded, + every ZADD, - every ZREM) is the line Redis holds at the end, so no drop went
#     unseen;
#   - entries of the line's four sorted sets (present, arrival, here, away) the call's commands
#     touch: at most 3,137 = 5 a sighting (a waiter: its lookup, presence, arrival, here, away)
#     x 400 + 950 for the departed ones (two range reads of at most 200 each, and at most 200
#     moved away or dropped, 3 entries each, and 50 more whose keep ended, 2 each: 4 x 200
#     + 150) + 64 for the head of `here` checked against `present` (HERE_CHECK = 32, a read and
#     a lookup each) + 123 single-rank reads (120 samples, the tail, the cursor's two); with
#     100,000 in line, a call that walked the line would touch 100,000. No command on the
#     line's sets whose cost is the line's (an unbounded range, ZREMRANGEBY*, one the probe
#     does not know);
#   - the script calls MONITOR showed are all there were (INFO commandstats, read in one
#     transaction with the markers).
#
# Why not time: until issue 30 this test held every call under 2 ms by Redis's SLOWLOG. SLOWLOG
# counts wall time, and in the full suite on the 2-core CI machine calls of ordinary work took
# 2,033 to 3,616 us (the same calls: 1.0-1.4 ms alone), so it failed now and then with nothing
# wrong. The durations are a benchmark now: `scripts/bench --sync-calls` runs this scenario and
# prints them with their conditions (docs/benchmarks.md).
#
# The clients are not paced (--pace-ms 0, the benchmark paces them at 1 ms): a node then sees
# more than 200 waiters an interval and the caps bind (10-12 syncs a run carried 200 waiters
# and left the rest to the next, locally). That is not asserted: how many sightings an interval
# brings depends on how fast the machine serves the clients; the bounds hold at any speed.
#
# TEST 1 seeds the line as seen 600 s ahead (--seen-ago -600): nobody of it leaves, however
# long the run takes. The probe waits (polling, 60 s at most) until every client is in the line
# and, in TEST 2 and 3, until 10 calls have dropped departed waiters, rather than a fixed time.
# TEST 2 drops them as they go (keep=off); TEST 3 keeps their places (keep=30s, presence 20 s,
# last seen 29 s before): each call moves them from `present` to `away`, and drops those whose
# keep ended, both within the same bounds.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: 100,000 waiting and 1,500 new places on two nodes: every script call's sightings, syncs and line entries within the caps (MONITOR)
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=16m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=500ms max_active=5 flood=off;
--- config
    access_log off;
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- log_level: notice
--- timeout: 120
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
sh 120: perl t/lib/sync_bounded.pl --ports $TEST_NGINX_PORTS --redis $TEST_NGINX_REDIS_PORT --zone shop --waiting 100000 --clients 1500 --seen-ago -600 --cap 400 --waiters-cap 200 --syncs-cap 16 --expire-step 200 --expire-min 50 --entries-cap 3137 --pace-ms 0 => /script calls (\d{2,}); monitor saw \1; syncs \d+; joined 1500; line 100000 -> 10[01]\d{3}; .*; over bounds 0\n/
M GET /m @1 => 200; body =~ /smart_limit_queue_length\{room="shop"\} 10[01]\d{3}\n/
--- no_error_log
[error]

=== TEST 2: 100,000 waiting leave (unseen for presence, keep=off) while 1,500 take places: each call drops at most max(200 - waiters, 50), within the caps (MONITOR)
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=16m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=500ms max_active=5 flood=off keep=off;
--- config
    access_log off;
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- log_level: notice
--- timeout: 120
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
# How far the line has shed by the end depends on how many calls the run took (alone: 58
# calls, 8,500 dropped; paced, 150 calls and 27,000), and it may have begun before the probe
# reads its length after seeding (the line is 1 s from leaving when seeded; a busy machine
# read 99,200): the lengths are not asserted, the drops' bounds are, and node 1's picture is
# only asked to have a queue length no longer than the line was.
sh 120: perl t/lib/sync_bounded.pl --ports $TEST_NGINX_PORTS --redis $TEST_NGINX_REDIS_PORT --zone shop --waiting 100000 --clients 1500 --seen-ago 19 --min-drop-calls 10 --cap 400 --waiters-cap 200 --syncs-cap 16 --expire-step 200 --expire-min 50 --entries-cap 3137 --pace-ms 0 => /script calls (\d{2,}); monitor saw \1; syncs \d+; joined 1500; line \d+ -> \d+; .*; calls dropping [1-9]\d+; dropped [1-9]\d+; .*; over bounds 0\n/
M GET /m @1 => 200; body =~ /smart_limit_queue_length\{room="shop"\} (?:\d{1,5}|10[01]\d{3})\n/
--- no_error_log
[error]

=== TEST 3: 100,000 waiting go away and their keep ends (keep=30s) while 1,500 take places: each call moves or drops at most max(200 - waiters, 50) each way, within the caps (MONITOR)
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=16m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=500ms max_active=5 flood=off keep=30s;
--- config
    access_log off;
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- log_level: notice
--- timeout: 120
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
# How far the line has shed by the end depends on how many calls the run took (alone: 58
# calls, 8,500 dropped; paced, 150 calls and 27,000), and it may have begun before the probe
# reads its length after seeding (the line is 1 s from leaving when seeded; a busy machine
# read 99,200): the lengths are not asserted, the drops' bounds are, and node 1's picture is
# only asked to have a queue length no longer than the line was.
sh 120: perl t/lib/sync_bounded.pl --ports $TEST_NGINX_PORTS --redis $TEST_NGINX_REDIS_PORT --zone shop --waiting 100000 --clients 1500 --seen-ago 29 --min-drop-calls 10 --cap 400 --waiters-cap 200 --syncs-cap 16 --expire-step 200 --expire-min 50 --entries-cap 3137 --pace-ms 0 => /script calls (\d{2,}); monitor saw \1; syncs \d+; joined 1500; line \d+ -> \d+; .*; calls dropping [1-9]\d+; dropped [1-9]\d+; .*; over bounds 0\n/
M GET /m @1 => 200; body =~ /smart_limit_queue_length\{room="shop"\} (?:\d{1,5}|10[01]\d{3})\n/
--- no_error_log
[error]

=== TEST 4: max_line holds with sync=: a client taking a place when the fleet's line is full is refused a place
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 max_line=2 flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
until 3: A GET / @1 => 200
B GET / @1 Accept: application/json => 503; json.status == "waiting"
C GET / @2 Accept: application/json => 503; json.status == "waiting"
# Both nodes' pictures hold B and C (every node synced twice, twice over, since: counted on
# their metrics, not slept; see t/lib/fleet_syncs.pl), so both know the line is full.
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 2
# The line holds max_line: D gets no place, on either node, and Redis took nobody past it
# (asked once both nodes have sent a sync built after D's requests).
D GET / @1 Accept: application/json => 503; json.status == "waiting"; json.position == null; json.queue_length == 2
D GET / @2 Accept: application/json => 503; json.position == null
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS --rounds 1 => /syncs/
redis ZCARD smart_limit:{shop}:arrival => /^2$/
C GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 2
--- error_log
smart_limit zone "shop" is full: no place left in the line for a new client \(max_line=\)
