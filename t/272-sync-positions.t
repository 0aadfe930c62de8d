# True positions in a synced room (`sync=`): only waiting clients ahead of you count, the head
# of the line is told 1, and the queue length counts waiting clients only, on every node.
#
# Where a step needs every node's picture to hold what the others saw, it waits for the nodes'
# syncs to be counted (t/lib/fleet_syncs.pl: every node twice, twice over), not for a sleep of
# an interval or two (until issue 30: 0.5 s for two 200 ms intervals and a round trip).

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: max_active=3 and eight clients on three nodes, round-robin: the five waiting are told 1..5 of 5
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=3 flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
until 3: A GET / @1 => 200; body =~ /origin/
until 3: B GET / @2 => 200; body =~ /origin/
until 3: C GET / @3 => 200; body =~ /origin/
D GET / @1 Accept: application/json => 503
sleep 0.05
E GET / @2 Accept: application/json => 503
sleep 0.05
F GET / @3 Accept: application/json => 503
sleep 0.05
G GET / @1 Accept: application/json => 503
sleep 0.05
H GET / @2 Accept: application/json => 503
sleep 0.05
# From the first seconds on, every node tells the truth.
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
D GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 5
E GET / @2 Accept: application/json => 503; json.position == 2; json.queue_length == 5
F GET / @3 Accept: application/json => 503; json.position == 3; json.queue_length == 5
G GET / @1 Accept: application/json => 503; json.position == 4; json.queue_length == 5
H GET / @2 Accept: application/json => 503; json.position == 5; json.queue_length == 5
sleep 0.6
D GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 5
E GET / @3 Accept: application/json => 503; json.position == 2; json.queue_length == 5
F GET / @1 Accept: application/json => 503; json.position == 3; json.queue_length == 5
G GET / @2 Accept: application/json => 503; json.position == 4; json.queue_length == 5
H GET / @3 Accept: application/json => 503; json.position == 5; json.queue_length == 5
sleep 0.6
D GET / @3 Accept: application/json => 503; json.position == 1; json.queue_length == 5
E GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 5
F GET / @2 Accept: application/json => 503; json.position == 3; json.queue_length == 5
G GET / @3 Accept: application/json => 503; json.position == 4; json.queue_length == 5
H GET / @1 Accept: application/json => 503; json.position == 5; json.queue_length == 5
sleep 0.6
D GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 5
E GET / @2 Accept: application/json => 503; json.position == 2; json.queue_length == 5
F GET / @3 Accept: application/json => 503; json.position == 3; json.queue_length == 5
G GET / @1 Accept: application/json => 503; json.position == 4; json.queue_length == 5
H GET / @2 Accept: application/json => 503; json.position == 5; json.queue_length == 5
sleep 0.6
--- no_error_log
[error]

=== TEST 2: the same room as sessions leave: the next ones go in, and the rest are told 1..n of n within an interval
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    # active_window=4s: D, E and F go 2 s at most between two requests below (the syncs waited
    # for take about 0.8 s), half a window to spare.
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=3 active_window=4s flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
until 3: A GET / @1 => 200; body =~ /origin/
until 3: B GET / @2 => 200; body =~ /origin/
until 3: C GET / @3 => 200; body =~ /origin/
D GET / @1 Accept: application/json => 503
sleep 0.05
E GET / @2 Accept: application/json => 503
sleep 0.05
F GET / @3 Accept: application/json => 503
sleep 0.05
G GET / @1 Accept: application/json => 503
sleep 0.05
H GET / @2 Accept: application/json => 503
sleep 0.05
# A, B and C go quiet: their places free when their window ends (4 s), and D, E, F take them.
until 20: D GET / @1 => 200; body =~ /origin/
until 20: E GET / @2 => 200; body =~ /origin/
until 20: F GET / @3 => 200; body =~ /origin/
# Once every node has the admissions: G and H are 1 and 2 of 2.
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
G GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 2
H GET / @2 Accept: application/json => 503; json.position == 2; json.queue_length == 2
D GET / @1 => 200
E GET / @2 => 200
F GET / @3 => 200
sleep 0.4
G GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 2
H GET / @3 Accept: application/json => 503; json.position == 2; json.queue_length == 2
D GET / @2 => 200
E GET / @3 => 200
F GET / @1 => 200
sleep 0.4
G GET / @3 Accept: application/json => 503; json.position == 1; json.queue_length == 2
H GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 2
D GET / @3 => 200
E GET / @1 => 200
F GET / @2 => 200
sleep 0.4
--- no_error_log
[error]

=== TEST 3: a line of 499 on three nodes comes whole in the picture: every client is told its own place, 1..499, by every node
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    # One admitted session holds the room for the hour; the 499 after it wait. A line of at
    # most 2,048 comes whole in each picture (fleet::EXACT_LINE), so no two of them are told
    # one number (with 128 samples, about 4 ranks apart at 500, many were).
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 grant=1h presence=60s flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- timeout: 90
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
# 500 newcomers one after another, round robin over the nodes; then three rounds, each once
# every node has met the fleet twice over, each client asking the next node each round.
sh 80: perl t/lib/line_probe.pl --ports $TEST_NGINX_PORTS --clients 500 --gap 0.001 --syncs $TEST_NGINX_PORTS --rounds 3 --rotate => /round 1: admitted 1 waiting 499 positions [\d,]+ distinct yes first 1 last 499\nround 2: admitted 1 waiting 499 positions [\d,]+ distinct yes first 1 last 499\nround 3: admitted 1 waiting 499 positions [\d,]+ distinct yes first 1 last 499\nerrors 0/
--- no_error_log
[error]
