# The arrival rule, on every store: a client's arrival is the moment it takes its place (its
# first return with the ticket after the cookie check), and a place not seen for `presence` is
# gone; coming back later means the tail. A ticket never carries a place it did not take: one
# taken before a launch and cashed in at the start joins behind the people already waiting.
#
# presence=4s, and B, C and D poll every 1.5 s: the sleeps only make E's ticket older than
# presence (4.5 s and more), and the others stay seen with 2.5 s of presence to spare. (With
# presence=2s and polls 0.9 s apart, until issue 30, a 1.1 s stall of the machine would have
# lost them their places.) On the fleet, the nodes' pictures are waited for by counting their
# syncs (t/lib/fleet_syncs.pl), not by a sleep.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: an early ticket cashed in after presence goes to the tail: the shared-memory room
--- follow_redirects: 0
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m max_active=1 presence=4s flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- steps
# E takes a ticket before the launch and does not follow the cookie check.
E GET / => 307
A GET / => 307
A GET / => 200
B GET / => 307
B GET / Accept: application/json => 503
C GET / => 307
C GET / Accept: application/json => 503
D GET / => 307
D GET / Accept: application/json => 503
# B, C and D wait and poll; E's ticket is older than presence when it comes back.
sleep 1.5
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 1.5
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 1.5
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
E GET / Accept: application/json => 503; json.position == 4; json.queue_length == 4
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 4
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 4
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 4
E GET / Accept: application/json => 503; json.position == 4; json.queue_length == 4
--- no_error_log
[error]

=== TEST 2: an early ticket cashed in after presence goes to the tail: the central Redis room
--- follow_redirects: 0
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m max_active=1 presence=4s flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- steps
# E takes a ticket before the launch and does not follow the cookie check.
E GET / => 307
A GET / => 307
A GET / => 200
B GET / => 307
B GET / Accept: application/json => 503
C GET / => 307
C GET / Accept: application/json => 503
D GET / => 307
D GET / Accept: application/json => 503
# B, C and D wait and poll; E's ticket is older than presence when it comes back.
sleep 1.5
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 1.5
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 1.5
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
E GET / Accept: application/json => 503; json.position == 4; json.queue_length == 4
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 4
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 4
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 4
E GET / Accept: application/json => 503; json.position == 4; json.queue_length == 4
--- no_error_log
[error]

=== TEST 3: an early ticket cashed in after presence goes to the tail: the synced fleet room (three nodes)
--- follow_redirects: 0
--- redis
--- instances: 3
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m max_active=1 presence=4s flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
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
# E takes a ticket before the launch and does not follow the cookie check.
E GET / @1 => 307
A GET / @1 => 307
A GET / @1 => 200
B GET / @1 => 307
B GET / @1 Accept: application/json => 503
C GET / @2 => 307
C GET / @2 Accept: application/json => 503
D GET / @3 => 307
D GET / @3 Accept: application/json => 503
# B, C and D wait and poll; E's ticket is older than presence when it comes back.
sleep 1.5
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / @2 Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / @3 Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 1.5
B GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / @3 Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / @1 Accept: application/json => 503; json.position == 3; json.queue_length == 3
sleep 1.5
B GET / @3 Accept: application/json => 503; json.position == 1; json.queue_length == 3
C GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 3
D GET / @2 Accept: application/json => 503; json.position == 3; json.queue_length == 3
E GET / @2 Accept: application/json => 503; json.position == 4; json.queue_length == 4
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @3 Accept: application/json => 503; json.position == 1; json.queue_length == 4
C GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 4
D GET / @2 Accept: application/json => 503; json.position == 3; json.queue_length == 4
E GET / @3 Accept: application/json => 503; json.position == 4; json.queue_length == 4
--- no_error_log
[error]
