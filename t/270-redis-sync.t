# A fleet that decides locally ([S12], Cloudflare's design): `store=redis sync=TIME`. Every
# request is decided on the node's shared memory; once an interval each node sends what it saw
# in one script call and gets the fleet's picture back (its share of the free places, the
# cursor of the line by arrival, samples of the line for positions). Three nginx nodes on
# loopback and one redis-server.
#
# The crowd blocks play a few hundred clients against the three nodes with t/lib/room_probe.pl
# (uneven traffic 60/30/10 %, sticky or round-robin clients) and check, from the fleet's own
# count (Redis) and from the clients' side: active sessions never above max_active (2 % for
# the sampling) and at least 96 % of it while people wait (measured 98-99 % alone), no client
# let in more than an interval before someone who came more than an interval earlier,
# positions right to within what moved in two intervals, at most 16 syncs a node a tick
# (counted on Redis's MONITOR, not over wall time), and with Redis stopped (SIGSTOP) no
# request waiting on it. The probe is one process playing every client: on a loaded machine
# it falls behind their schedule, and what its lateness did (a place left empty because its
# client did not come in time) is not held against the room; see the probe's header for the
# bounds and their measured tolerances.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: sync= needs the Redis store
--- http_config
    smart_limit_zone shop sync=1s;
--- config
--- must_fail
--- error_log
"smart_limit_zone" "sync=1s" requires store=redis

=== TEST 2: sync= is an interval between 100ms and 60s
--- http_config
    smart_limit_zone shop store=redis redis=127.0.0.1:6379 sync=50ms;
--- config
--- must_fail
--- error_log
"smart_limit_zone" invalid sync "50ms": must be between 100ms and 60s

=== TEST 3: a sync is abandoned at timeout=, which must be shorter than the interval
--- http_config
    smart_limit_zone shop store=redis redis=127.0.0.1:6379 sync=1s timeout=1s;
--- config
--- must_fail
--- error_log
"smart_limit_zone" invalid timeout "1s": must be shorter than sync= \(1000 ms\)

=== TEST 4: one node: decided on shared memory, met in Redis once an interval, positions from the fleet's line
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=2 flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin
--- steps
# The node meets the fleet on its own, with no traffic.
until 3: M GET /m => 200; body =~ /smart_limit_fleet_syncs_total\{room="shop"\} [1-9]/
A GET / => 200; body =~ /origin/
# The node's share of an interval is 80 % of the free places (1 or 2 of 2, fractions carried
# over); the rest is the fleet's pool. B's turn has come: if the share is used up, B's request
# draws a place from the pool (one atomic call) and takes it.
B GET / => 200; body =~ /origin/
# Full: C and D wait, C first.
C GET / Accept: application/json => 503; json.position == 1
D GET / Accept: application/json => 503; json.position >= 1
# The next picture has both in the fleet's line, in arrival order (waited for by counting the
# node's syncs, not slept: t/lib/fleet_syncs.pl).
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
D GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
C GET / Accept: application/json => 503; json.position == 1; json.queue_length == 2
# One sorted set per role, each key with the room's hash tag and a TTL.
redis ZCARD smart_limit:{shop}:active => /^2$/
redis ZCARD smart_limit:{shop}:arrival => /^2$/
redis PTTL smart_limit:{shop}:fleet => /^\d{4,}$/
redis PTTL smart_limit:{shop}:active => /^\d{4,}$/
M GET /m => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 1\n/; body =~ /smart_limit_active_sessions\{room="shop"\} 2\n/; body =~ /smart_limit_queue_length\{room="shop"\} 2\n/
--- no_error_log
[error]

=== TEST 5: three nodes: a ticket is good on every node, a session is counted once, the line is by arrival
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 active_window=2s flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
node $TEST_NGINX_INSTANCE
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
# One free place shared by three nodes: no node's share is a whole place yet, so A's request
# draws it from the fleet's pool.
A GET / @1 => 200; body =~ /node 1/
# A's ticket is good everywhere; it is one active session however many nodes see it.
A GET / @2 => 200; body =~ /node 2/
A GET / @3 => 200; body =~ /node 3/
# B comes first (node 2), then C (node 3) more than an interval later.
B GET / @2 Accept: application/json => 503
sleep 0.6
C GET / @3 Accept: application/json => 503
# Every node's picture has both (syncs counted, not slept).
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
redis ZCARD smart_limit:{shop}:active => /^1$/
B GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 2
C GET / @1 Accept: application/json => 503; json.position == 2
# A goes quiet: its place frees after the active window, and B (first in line) takes it on
# whichever node it asks, here one it never asked before; C, who came later, waits.
sleep 2.2
until 3: B GET / @3 => 200; body =~ /node 3/
C GET / @2 Accept: application/json => 503
until 3: C GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 1
redis ZCARD smart_limit:{shop}:active => /^1$/
--- no_error_log
[error]

=== TEST 6: a crowd on three nodes, sticky clients, traffic 60/30/10: the fleet holds max_active (never above, at least 96 % while people wait), in arrival order
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=4m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=1s max_active=300 active_window=12s flood=off;
--- config
    access_log off;
    location / { smart_limit shop; smart_limit_refresh 2s; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
ok
--- log_level: notice
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
sh 90: perl t/lib/room_probe.pl --ports $TEST_NGINX_PORTS --redis $TEST_NGINX_REDIS_PORT --zone shop --max 300 --active-window 12 --interval-ms 1000 --clients 500 --arrive-over 3 --seconds 35 --weights 60,30,10 --routing sticky --session 1-300 --every 4 --check => /within bounds/
--- no_error_log
[error]

=== TEST 7: the same crowd behind a round-robin balancer (every request to any node)
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=4m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=1s max_active=300 active_window=12s flood=off;
--- config
    access_log off;
    location / { smart_limit shop; smart_limit_refresh 2s; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
ok
--- log_level: notice
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
sh 90: perl t/lib/room_probe.pl --ports $TEST_NGINX_PORTS --redis $TEST_NGINX_REDIS_PORT --zone shop --max 300 --active-window 12 --interval-ms 1000 --clients 500 --arrive-over 3 --seconds 35 --weights 60,30,10 --routing rr --session 1-300 --every 4 --check => /within bounds/
--- no_error_log
[error]

=== TEST 8: Redis hung (SIGSTOP) for 10 s under the crowd: no request waits for it, the fleet is back an interval after
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    # timeout=900ms: a request that waited on the stopped Redis would take 0.9 s, far from the
    # probe's bound (0.45 s) and from a request that does not wait (~1 ms, 50 ms at most for a
    # pool draw), so a loaded machine's own slowness does not decide it.
    smart_limit_zone shop size=4m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=1s timeout=900ms max_active=300 active_window=12s flood=off;
--- config
    access_log off;
    location / { smart_limit shop; smart_limit_refresh 2s; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
ok
--- log_level: notice
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
sh 90: perl t/lib/room_probe.pl --ports $TEST_NGINX_PORTS --redis $TEST_NGINX_REDIS_PORT --zone shop --max 300 --active-window 12 --interval-ms 1000 --clients 500 --arrive-over 3 --seconds 32 --weights 60,30,10 --routing rr --session 1-300 --every 4 --stop-redis-at 12 --stop-for 10 --check => /within bounds/
M GET /m @1 => 200; body =~ /smart_limit_fleet_sync_errors_total\{room="shop"\} [1-9]/
--- error_log
no reply within
answers again after
