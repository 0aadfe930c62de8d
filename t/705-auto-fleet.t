# max_active=auto on a fleet ([S26]): one value for every node, kept in Redis. Each node
# measures the origin for its own admitted requests and tells Redis the counts with a call it
# makes anyway (a central room's visits, one in 100 ms per worker; a synced node's call beside
# its sync, once an interval); Redis adds them up a window (1 s) at a time, and the node whose call closes a
# window judges it (the rule t/700 shows on one node) and brings the value with its next call.
# Each node's origin is a second server of its own: /fast/ answers at once.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: central Redis: two nodes' counts make one window, and the value it gives is every node's
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=auto:2..4 origin_latency=200ms active_window=1m flood=off;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location /fast/ { return 200 "fast $uri\n"; }
    }
--- config
    location / {
        smart_limit shop;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /control { smart_limit_control; }
    location = /metrics { smart_limit_metrics; }
--- user_files
>>> fleet.keys
3a5c7e9b1d2f4a6c8e0b2d4f6a8c0e1b3d5f7a9c1e3b5d7f9a0c2e4b6d8f0a1c
--- steps
A GET /fast/x @1 => 200; body =~ /fast/
B GET /fast/x @2 => 200
C GET /fast/x @1 Accept: application/json => 503; json.position == 1
op GET /control @1 => 200; json.rooms.0.max_active == 2; json.rooms.0.auto.min == 2; json.rooms.0.auto.max == 4
# Six responses on each node: neither alone has the 10 a window needs, the fleet has.
repeat 6: A GET /fast/x @1 => 200
repeat 6: B GET /fast/x @2 => 200
# (A worker tells the fleet with one visit in 100 ms at most: C's next visits do.)
sleep 0.2
C GET /fast/x @2 Accept: application/json => 503; json.position == 1
C GET /fast/x @1 Accept: application/json => 503; json.position == 1
# A visit after the window's second closes it; node 1 judges it (the limit binds: up by half
# before any cut) and brings 3 with its next visit, which lets C in.
sleep 1.1
C GET /fast/x @1 Accept: application/json => 503; json.position == 1
C GET /fast/x @1 => 200
redis HGET smart_limit:{shop}:state au_v => /^3$/
# Node 2 learns the fleet's value with its next call to Redis: a newcomer's visit.
D GET /fast/x @2 Accept: application/json => 503; json.position == 1
op GET /control @2 => 200; json.rooms.0.max_active == 3; json.rooms.0.auto.last_move == "up"
# An operator pins it on one node: the fleet's, and the other node's with its next visit that
# tells the fleet (a worker tells it at most every 100 ms; the visits between carry the value
# it last heard).
op POST /control?room=shop&max_active=4 @2 => 200; json.rooms.0.max_active == 4; json.rooms.0.auto.pinned == true
redis HGET smart_limit:{shop}:state au_pin => /^4$/
until 2: D GET /fast/x @1 => 200
op GET /control @1 => 200; json.rooms.0.max_active == 4; json.rooms.0.auto.pinned == true
op POST /control?room=shop&max_active=auto @1 => 200; json.rooms.0.max_active == 3; json.rooms.0.auto.pinned == false
op GET /metrics @2 => 200; body =~ /smart_limit_origin_responses_total\{room="shop"\} \d+/
--- error_log
max_active=auto rises from 2 to 3
--- no_error_log
[error]

=== TEST 2: sync=: three nodes steer one value, each told it within an interval
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=auto:3..4 origin_latency=200ms active_window=1m flood=off;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location /fast/ { return 200 "fast $uri\n"; }
    }
--- config
    location / {
        smart_limit shop;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /control { smart_limit_control; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
3a5c7e9b1d2f4a6c8e0b2d4f6a8c0e1b3d5f7a9c1e3b5d7f9a0c2e4b6d8f0a1c
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
until 3: A GET /fast/x @1 => 200; body =~ /fast/
until 3: B GET /fast/x @2 => 200
until 3: C GET /fast/x @3 => 200
D GET /fast/x @1 Accept: application/json => 503
op GET /control @1 => 200; json.rooms.0.max_active == 3
op GET /control @2 => 200; json.rooms.0.max_active == 3
op GET /control @3 => 200; json.rooms.0.max_active == 3
# The origin answers fast, on every node, and the room is full: up by half, to the bound.
repeat 20: A GET /fast/x @1 => 200
repeat 20: B GET /fast/x @2 => 200
repeat 20: C GET /fast/x @3 => 200
until 5: op GET /control @1 => 200; json.rooms.0.max_active == 4
until 1: op GET /control @2 => 200; json.rooms.0.max_active == 4
until 1: op GET /control @3 => 200; json.rooms.0.max_active == 4
redis HGET smart_limit:{shop}:auto au_v => /^4$/
redis PTTL smart_limit:{shop}:auto => /^[1-9]\d*$/
# The fleet's places follow: the fourth place is D's, whichever node it asks.
until 3: D GET /fast/x @2 => 200
--- error_log
max_active=auto rises from 3 to 4
--- no_error_log
[error]
