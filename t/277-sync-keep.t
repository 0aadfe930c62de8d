# Places kept while people are away ([S27]) in a synced room (`sync=`), three nodes, each
# client polling a different node each time (round robin): the rules t/010's TESTs 10-12 hold
# on shared memory and central Redis, with the fleet's line in Redis and every decision on the
# node the client asks. Times are scaled down (presence=1s, keep=3s-5s) so that an absence of
# "2 minutes with keep=5m" is one of 2.4 s with keep=5s: the same rule, past presence and
# within keep.
#
# Places are taken 0.3 s apart (a client's place dates from its first return with its ticket,
# after the cookie check), more than the interval (200 ms): the cursor's band takes waiters
# who arrived within an interval of the rightful one, so closer arrivals could be let in
# together, which these steps do not test.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: [S27] a waiter away past presence but within keep resumes its place on any node; nobody behind it is moved back
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 presence=1s keep=5s flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin page
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
until 3: A GET / @1 => 200; body =~ /origin page/
B GET / @2 Accept: application/json => 503
B GET / @3 Accept: application/json => 503; json.status == "waiting"
sleep 0.3
C GET / @3 Accept: application/json => 503
C GET / @1 Accept: application/json => 503; json.status == "waiting"
sleep 0.3
D GET / @1 Accept: application/json => 503
D GET / @2 Accept: application/json => 503; json.status == "waiting"
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @3 Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / @1 Accept: application/json => 503; json.position == 2
D GET / @2 Accept: application/json => 503; json.position == 3; json.queue_length == 3
# B steps away for 2.4 s (past presence, within keep); C and D poll as asked, a node after
# another, and are told the same positions throughout (B still counts ahead of them).
sleep 0.6
C GET / @2 Accept: application/json => 503; json.position == 2
D GET / @3 Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 0.6
C GET / @3 Accept: application/json => 503; json.position == 2
D GET / @1 Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 0.6
C GET / @1 Accept: application/json => 503; json.position == 2
D GET / @2 Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 0.6
C GET / @2 Accept: application/json => 503; json.position == 2
D GET / @3 Accept: application/json => 503; json.position == 3; json.queue_length == 3
# B is back, on a node it did not use before it left: its own place at the head, and its
# first answer says it resumed it; the next does not.
B GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 3; json.resumed == true
B GET / @2 Accept: application/json => 503; json.position == 1; body !~ /resumed/
C GET / @3 Accept: application/json => 503; json.position == 2
--- no_error_log
[error]

=== TEST 2: [S27] a waiter whose turn came while it was away goes in at the next free place when it is back, never above max_active
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 presence=1s keep=10s active_window=2s flood=off;
--- config
    # (A's session is kept active by its own requests until B has stepped away.)
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin page
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
until 3: A GET / @1 => 200; body =~ /origin page/
B GET / @2 Accept: application/json => 503
B GET / @3 Accept: application/json => 503; json.status == "waiting"
sleep 0.3
C GET / @3 Accept: application/json => 503
C GET / @1 Accept: application/json => 503; json.status == "waiting"
sleep 0.3
D GET / @1 Accept: application/json => 503
D GET / @2 Accept: application/json => 503; json.status == "waiting"
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @3 Accept: application/json => 503; json.position == 1
A GET / @2 => 200; body =~ /origin page/
# B steps away. A is not seen again: its place frees after active_window, and C, the first
# present client, takes it (nobody waits for an absent head).
C GET / @1 Accept: application/json => 503; json.position == 2
D GET / @2 Accept: application/json => 503; json.position == 3
until 12: C GET / @2 => 200; body =~ /origin page/
# D still counts B ahead of it: its position did not grow when B stepped away, only fell
# when C went in.
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
D GET / @3 Accept: application/json => 503; json.position == 2; json.queue_length == 2
# B is back within keep: first in line, but C holds the one place.
C GET / @3 => 200
B GET / @1 Accept: application/json => 503; json.position == 1; json.resumed == true
# C leaves: the next free place is B's, not D's, though D polls all along.
sleep 0.4
D GET / @2 Accept: application/json => 503; json.position == 2
B GET / @3 Accept: application/json => 503|200
sleep 0.4
D GET / @1 Accept: application/json => 503; json.position == 2
B GET / @2 Accept: application/json => 503|200
sleep 0.4
D GET / @3 Accept: application/json => 503
until 12: B GET / @1 => 200; body =~ /origin page/
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
D GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 1
--- no_error_log
[error]

=== TEST 3: [S27] a waiter away past keep has lost its place: back, on any node, it starts at the tail
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 presence=1s keep=3s flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin page
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
until 3: A GET / @1 => 200; body =~ /origin page/
B GET / @2 Accept: application/json => 503
B GET / @3 Accept: application/json => 503; json.status == "waiting"
sleep 0.3
C GET / @3 Accept: application/json => 503
C GET / @1 Accept: application/json => 503; json.status == "waiting"
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @3 Accept: application/json => 503; json.position == 1
C GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 2
# C polls; B is kept (C second) until keep ends, then C is first and the line is C alone.
sleep 0.6
C GET / @2 Accept: application/json => 503; json.position == 2; json.queue_length == 2
until 12: C GET / @3 Accept: application/json => 503; json.position == 1; json.queue_length == 1
# (A ticket is taken as holding its place a renewal, a quarter of presence, longer than the
# fleet keeps it: fleet::place_arrival. B comes back past that too.)
sleep 0.5
B GET / @1 Accept: application/json => 503; body !~ /resumed/; cookie smart_limit_shop set
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @2 Accept: application/json => 503; json.position == 2; json.queue_length == 2
C GET / @3 Accept: application/json => 503; json.position == 1
--- no_error_log
[error]
