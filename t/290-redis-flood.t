# Flood control across a fleet ([S15]): one client address gets its flood budget (1 place plus
# flood_burst at once, then flood='s rate) on the whole fleet, not once per node, in both Redis
# modes: the central room (store=redis: the budget is paid inside the room script's call) and
# the synced room (store=redis sync=: one small script call when a client takes its place).
# Three nginx nodes, one redis-server, one key file (the flood keys meet in Redis only when
# every node hashes an address the same way: the hash's seed comes from smart_limit_secret).
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

=== TEST 2: synced room (sync=): one address gets 1 + flood_burst places on the fleet, then is throttled on every node
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
m1 GET / @1 Accept: application/json => 503; redirects == 1; json.status == "waiting"
m2 GET / @2 Accept: application/json => 503; json.status == "waiting"
m3 GET / @3 Accept: application/json => 503; json.status == "waiting"
m4 GET / @1 Accept: application/json => 503; json.status == "waiting"
m5 GET / @2 Accept: application/json => 503; json.status == "waiting"
m6 GET / @3 Accept: application/json => 503; json.status == "throttled"; header Retry-After =~ /^[1-9]\d*$/; header X-SL-Status =~ /^THROTTLED$/
m7 GET / @1 Accept: application/json => 503; json.status == "throttled"
m8 GET / @2 Accept: application/json => 503; json.status == "throttled"
m6 GET / @1 Accept: application/json => 503; json.status == "throttled"
H GET / @3 from 127.0.0.31 Accept: application/json => 503; json.status == "waiting"
# The five places and H's are the fleet's line, in arrival order, at the next picture.
until 3: m5 GET / @3 Accept: application/json => 503; json.position == 5; json.queue_length == 6
until 3: H GET / @1 from 127.0.0.31 Accept: application/json => 503; json.position == 6
# One key per address that took a place (A's, the m clients', H's), each with a TTL.
redis --scan --pattern smart_limit:{shop}:flood:* => /\A(smart_limit:\{shop\}:flood:[0-9a-f]{16}\n){3}\z/
sh redis-cli -p $TEST_NGINX_REDIS_PORT --scan --pattern 'smart_limit:{shop}:flood:*' | while read k; do redis-cli -p $TEST_NGINX_REDIS_PORT PTTL "$k"; done => /\A(?:[1-9]\d*\n){3}\z/
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
s1 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
s2 GET /s/ @2 Accept: application/json => 503; json.status == "waiting"
s3 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
s4 GET /s/ @2 Accept: application/json => 503; json.status == "throttled"
redis-stop
# Without Redis, node 1's own budget (untouched so far: the fleet's paid for the places
# above) gives three places, then throttles; the decisions follow each room's failure rules.
n1 GET / @1 Accept: application/json => 503; json.status == "waiting"
n2 GET / @1 Accept: application/json => 503; json.status == "waiting"
n3 GET / @1 Accept: application/json => 503; json.status == "waiting"
n4 GET / @1 Accept: application/json => 503; json.status == "throttled"
t1 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
t2 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
t3 GET /s/ @1 Accept: application/json => 503; json.status == "waiting"
t4 GET /s/ @1 Accept: application/json => 503; json.status == "throttled"
