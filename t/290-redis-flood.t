# Flood control across a fleet ([S15]): one client address gets its flood budget (1 place plus
# flood_burst at once, then flood='s rate) on the whole fleet, not once per node, in both Redis
# modes: the central room (store=redis: the budget is paid inside the room script's call) and
# the synced room (store=redis sync=: each node pays from its own budget and counts the places
# per address; the syncs charge the fleet's budget and tell every node the addresses over it,
# which are refused from that node's next sync on; no request waits for Redis). Three nginx
# nodes, one redis-server, one key file (the flood keys meet in Redis only when every node
# hashes an address the same way: the hash's seed comes from smart_limit_secret).
#
# Every test client comes from 127.0.0.1 unless it says `from`: the m* clients are one address
# minting tickets (each keeps its cookies, so it passes the cookie check and takes a place on
# its first return), round-robin over the nodes. flood=1r/m: no refill during a block.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: central room: one address gets 1 + flood_burst places on the fleet, then is throttled on every node
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=1 grant=1h active_window=1h flood=1r/m flood_burst=4;
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
3a7c9e1b5d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5d7f9a2c4e6b8d0f1a3c
>>> index.html
node $TEST_NGINX_INSTANCE
--- steps
# Another address fills the room.
A GET / @1 from 127.0.0.11 => 200; body =~ /node 1/
# One address, new clients round-robin: five places (1 + burst 4) on the fleet...
m1 GET / @1 Accept: application/json => 503; redirects == 1; json.status == "waiting"; json.position == 1
m2 GET / @2 Accept: application/json => 503; json.status == "waiting"; json.position == 2
m3 GET / @3 Accept: application/json => 503; json.status == "waiting"; json.position == 3
m4 GET / @1 Accept: application/json => 503; json.status == "waiting"; json.position == 4
m5 GET / @2 Accept: application/json => 503; json.status == "waiting"; json.position == 5
# ... and then none, on any node: the throttled answer (no place, Retry-After).
m6 GET / @3 Accept: application/json => 503; json.status == "throttled"; header Retry-After =~ /^[1-9]\d*$/; header X-SL-Status =~ /^THROTTLED$/
m7 GET / @1 Accept: application/json => 503; json.status == "throttled"
m8 GET / @2 Accept: application/json => 503; json.status == "throttled"
# A throttled client keeps its ticket and is throttled again, on whichever node it asks.
m6 GET / @1 Accept: application/json => 503; json.status == "throttled"
# Another address is not slowed: it takes the sixth place.
H GET / @3 from 127.0.0.31 Accept: application/json => 503; json.status == "waiting"; json.position == 6; json.queue_length == 6
# The budget lives in Redis, one key per address under the room's hash tag.
# One key per address that took a place (A's, the m clients', H's), each with a TTL.
redis --scan --pattern smart_limit:{shop}:flood:* => /\A(smart_limit:\{shop\}:flood:[0-9a-f]{16}\n){3}\z/
sh redis-cli -p $TEST_NGINX_REDIS_PORT --scan --pattern 'smart_limit:{shop}:flood:*' | while read k; do redis-cli -p $TEST_NGINX_REDIS_PORT PTTL "$k"; done => /\A(?:[1-9]\d*\n){3}\z/
M GET /m @3 => 200; body =~ /smart_limit_throttled_total\{room="shop"\} 1\n/
--- no_error_log
[error]

=== TEST 2: synced room (sync=): one address gets its budget once on the fleet; from the next syncs on it is throttled on every node
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 grant=1h active_window=1h flood=1r/m flood_burst=4;
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
3a7c9e1b5d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5d7f9a2c4e6b8d0f1a3c
>>> index.html
node $TEST_NGINX_INSTANCE
--- steps
until 3: M GET /m @1 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
A GET / @1 from 127.0.0.11 => 200; body =~ /node 1/
# One address, new clients round-robin: each node decides alone, from its own budget (five
# places each), and counts the address's places. Two places a node are reported (one is the
# allowance a node keeps to itself): the fleet's budget of five is charged six, and spent.
m1 GET / @1 Accept: application/json => 503; redirects == 1; json.status == "waiting"
m2 GET / @2 Accept: application/json => 503; json.status == "waiting"
m3 GET / @3 Accept: application/json => 503; json.status == "waiting"
m4 GET / @1 Accept: application/json => 503; json.status == "waiting"
m5 GET / @2 Accept: application/json => 503; json.status == "waiting"
m6 GET / @3 Accept: application/json => 503; json.status == "waiting"
# The syncs settle it (each node reports at its next sync and hears the answer at the one
# after: within two intervals of 200 ms, and a margin for a busy machine).
sleep 1
# From then on the address is throttled on every node (no place, Retry-After).
m7 GET / @1 Accept: application/json => 503; json.status == "throttled"; header Retry-After =~ /^[1-9]\d*$/; header X-SL-Status =~ /^THROTTLED$/
m8 GET / @2 Accept: application/json => 503; json.status == "throttled"
m9 GET / @3 Accept: application/json => 503; json.status == "throttled"
# A throttled client keeps its ticket and is throttled again, on whichever node it asks.
m7 GET / @3 Accept: application/json => 503; json.status == "throttled"
# Another address is not slowed.
H GET / @3 from 127.0.0.31 Accept: application/json => 503; json.status == "waiting"
# The six places and H's are the fleet's line, in arrival order, at the next picture.
until 3: m5 GET / @3 Accept: application/json => 503; json.position == 5; json.queue_length == 7
until 3: H GET / @1 from 127.0.0.31 Accept: application/json => 503; json.position == 7
# The fleet's budget: one key for the address that took more than one place on a node (A's
# and H's one place each were never reported), with a TTL; the address over its budget in the
# room's flood_over set, until it may take a place again.
redis --scan --pattern smart_limit:{shop}:flood:* => /\A(smart_limit:\{shop\}:flood:[0-9a-f]{16}\n){1}\z/
sh redis-cli -p $TEST_NGINX_REDIS_PORT --scan --pattern 'smart_limit:{shop}:flood:*' | while read k; do redis-cli -p $TEST_NGINX_REDIS_PORT PTTL "$k"; done => /\A(?:[1-9]\d*\n){1}\z/
redis ZCARD smart_limit:{shop}:flood_over => /^1$/
M GET /m @1 => 200; body =~ /smart_limit_throttled_total\{room="shop"\} 1\n/
M GET /m @3 => 200; body =~ /smart_limit_throttled_total\{room="shop"\} 2\n/
--- no_error_log
[error]

=== TEST 3: flood=off: nobody is throttled, on either Redis mode
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone central size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=1 grant=1h active_window=1h flood=off;
    smart_limit_zone synced size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 grant=1h active_window=1h flood=off;
--- config
    location / { smart_limit central; root html; }
    location /s/ { smart_limit synced; alias html/; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
3a7c9e1b5d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5d7f9a2c4e6b8d0f1a3c
>>> index.html
node $TEST_NGINX_INSTANCE
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="synced"\} 3\n/
A GET / @1 from 127.0.0.11 => 200
m1 GET / @1 Accept: application/json => 503; json.status == "waiting"
m2 GET / @2 Accept: application/json => 503; json.status == "waiting"
m3 GET / @3 Accept: application/json => 503; json.status == "waiting"
m4 GET / @1 Accept: application/json => 503; json.status == "waiting"
m5 GET / @2 Accept: application/json => 503; json.status == "waiting"
m6 GET / @3 Accept: application/json => 503; json.status == "waiting"
m7 GET / @1 Accept: application/json => 503; json.status == "waiting"
m8 GET / @2 Accept: application/json => 503; json.status == "waiting"; json.position == 8
until 3: S GET /s/ @1 from 127.0.0.11 => 200
s1 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
s2 GET /s/ @2 Accept: application/json => 503; json.status == "waiting"
s3 GET /s/ @3 Accept: application/json => 503; json.status == "waiting"
s4 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
s5 GET /s/ @2 Accept: application/json => 503; json.status == "waiting"
s6 GET /s/ @3 Accept: application/json => 503; json.status == "waiting"
s7 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
s8 GET /s/ @2 Accept: application/json => 503; json.status == "waiting"
redis --scan --pattern *:flood:* => /\A\z/
M GET /m @1 => 200; body =~ /smart_limit_throttled_total\{room="central"\} 0\n/; body =~ /smart_limit_throttled_total\{room="synced"\} 0\n/
M GET /m @2 => 200; body =~ /smart_limit_throttled_total\{room="central"\} 0\n/; body =~ /smart_limit_throttled_total\{room="synced"\} 0\n/
M GET /m @3 => 200; body =~ /smart_limit_throttled_total\{room="central"\} 0\n/; body =~ /smart_limit_throttled_total\{room="synced"\} 0\n/
--- no_error_log
[error]

=== TEST 4: Redis away: each node falls back to its own budget (central room, on_error=local; synced room)
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone central size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=1 grant=1h active_window=1h flood=1r/m flood_burst=2 on_error=local timeout=100ms;
    smart_limit_zone synced size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 grant=1h active_window=1h flood=1r/m flood_burst=2 timeout=100ms;
--- config
    location / { smart_limit central; root html; }
    location /s/ { smart_limit synced; alias html/; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
3a7c9e1b5d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5d7f9a2c4e6b8d0f1a3c
>>> index.html
node $TEST_NGINX_INSTANCE
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="synced"\} 2\n/
A GET / @1 from 127.0.0.11 => 200
until 3: S GET /s/ @1 from 127.0.0.11 => 200
# With Redis: three places on the fleet in each room (1 + burst 2), then throttled.
m1 GET / @1 Accept: application/json => 503; json.status == "waiting"
m2 GET / @2 Accept: application/json => 503; json.status == "waiting"
m3 GET / @1 Accept: application/json => 503; json.status == "waiting"
m4 GET / @2 Accept: application/json => 503; json.status == "throttled"
# The synced room: two places on each node (its own budget), four on the fleet; from the
# next syncs on, throttled on both.
s1 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
s2 GET /s/ @2 Accept: application/json => 503; json.status == "waiting"
s3 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
s4 GET /s/ @2 Accept: application/json => 503; json.status == "waiting"
sleep 1
s5 GET /s/ @1 Accept: application/json => 503; json.status == "throttled"
s6 GET /s/ @2 Accept: application/json => 503; json.status == "throttled"
redis-stop
# Without Redis, node 1's own budget (untouched so far: the fleet's paid for the places
# above) gives three places, then throttles; the decisions follow each room's failure rules.
n1 GET / @1 Accept: application/json => 503; json.status == "waiting"
n2 GET / @1 Accept: application/json => 503; json.status == "waiting"
n3 GET / @1 Accept: application/json => 503; json.status == "waiting"
n4 GET / @1 Accept: application/json => 503; json.status == "throttled"
# The synced room: what the fleet said holds until its time (a minute and more), Redis or
# not; another address meets node 1's own budget (three places, then throttled).
t1 GET /s/ @1 Accept: application/json => 503; json.status == "throttled"
u1 GET /s/ @1 from 127.0.0.41 Accept: application/json => 503; json.status == "waiting"
u2 GET /s/ @1 from 127.0.0.41 Accept: application/json => 503; json.status == "waiting"
u3 GET /s/ @1 from 127.0.0.41 Accept: application/json => 503; json.status == "waiting"
u4 GET /s/ @1 from 127.0.0.41 Accept: application/json => 503; json.status == "throttled"

=== TEST 5: synced room: a client taking its place waits for no Redis call; the syncs carry the charge
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 grant=1h active_window=1h;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
3a7c9e1b5d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5d7f9a2c4e6b8d0f1a3c
>>> index.html
origin
--- steps
until 3: M GET /m => 200; body =~ /smart_limit_fleet_syncs_total\{room="shop"\} [1-9]/
A GET / from 127.0.0.11 => 200
# From here Redis logs every command it runs (SLOWLOG, threshold 0 us; the commands the
# scripts run too).
redis CONFIG SET slowlog-max-len 100000 => /OK/
redis CONFIG SET slowlog-log-slower-than 0 => /OK/
redis SLOWLOG RESET => /OK/
# Twenty clients of one address take their places (the default budget: 61 at once), and one
# more comes a while later.
parallel 20 p GET / Accept: application/json => 503; json.status == "waiting"
sleep 0.5
q GET / Accept: application/json => 503; json.status == "waiting"
sleep 0.5
redis CONFIG SET slowlog-log-slower-than 10000 => /OK/
# Every script call Redis ran meanwhile was a sync (the node's one call an interval, "sync"
# its operation) or the line's counts beside it (the counts' script, by its first key), none a call
# of its own for a place; the address's places were charged in a sync (its flood bucket is
# one of the sync's keys). Pool draws ("draw") are no more than the pictures, and one: A's draw
# took the pool's last place without finding it empty, so the first newcomer whose turn it is
# after that draws and finds it empty (t/278: a room fills by such draws); after that no draw
# until the next picture, which may be worth one for the head of the line (a picture that
# came during the burst, its sync sent before the newcomers came, shows nobody waiting; the
# node keeps the cursor at the first of them, so the others, but any of the same millisecond,
# wait behind it). A draw for every newcomer turned away would be some twenty.
sh log=$(redis-cli -p $TEST_NGINX_REDIS_PORT SLOWLOG GET 1000); n() { printf '%s\n' "$log" | grep -c "$@"; }; counts=$(printf '%s\n' "$log" | grep -ix evalsha -A3 | grep -cx 'smart_limit:{shop}:tally:e0'); echo "evalsha $(n -ix evalsha) sync, counts and draws $(( $(n -x sync) + counts + $(n -x draw) )) sync $(n -x sync) draws $(n -x draw) within $(( $(n -x sync) + 1 - $(n -x draw) >= 0 )) flood $(n ':{shop}:flood:')" => /evalsha ([1-9]\d*) sync, counts and draws \1 sync [1-9]\d* draws \d+ within 1 flood [1-9]/
redis --scan --pattern smart_limit:{shop}:flood:* => /\A(smart_limit:\{shop\}:flood:[0-9a-f]{16}\n){1}\z/
--- no_error_log
[error]
