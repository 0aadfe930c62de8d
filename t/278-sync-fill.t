# A synced room fills as fast as one node does (issue 50, item 6): arrivals into a room with
# free places are let in while the fleet's pool holds places, not only the node's share of the
# interval. On the node, the share's places go first; a newcomer whose turn it is and finds the
# share used draws from the pool (one atomic call, the request waiting for it). Before, the
# first newcomer turned away held the cursor at its arrival until the next picture, even once
# it was let in by its draw: one synced node, five arrivals into an empty room of five, got
# three admissions and two waiting answers.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: one synced node that met the fleet: five arrivals, one after another, into an empty room of five all go in; the sixth waits
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=1s max_active=5 active_window=1m flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin page
--- steps
until 10: M GET /m => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 1\n/
sh 30: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORT --quiet => //
A GET / => 200; body =~ /origin page/
B GET / => 200
C GET / => 200
D GET / => 200
E GET / => 200
F GET / Accept: application/json => 503; json.position == 1
M GET /m => 200; body =~ /smart_limit_fleet_draws_total\{room="shop"\} [1-9]/
--- no_error_log
[error]

=== TEST 2: one synced node that met the fleet: eight arrivals at once into an empty room of five: five go in, three wait
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=1s max_active=5 active_window=1m flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin page
--- steps
until 10: M GET /m => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 1\n/
sh 30: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORT --quiet => //
# Nobody visited the node in its last interval, so its share is one place (SHARE_PER_POLL);
# the first client turned away draws from the pool for every client turned away while its
# draw is out, and those wait for its answer and claim the places it brought. Told to come
# back instead, they held the node's cursor and nobody else went in for a second.
parallel 8 p GET / => 200|503; count 200 == 5; count 503 == 3
M GET /m => 200; body =~ /smart_limit_fleet_draws_total\{room="shop"\} [1-9]/; body =~ /smart_limit_admitted_total\{room="shop"\} 5\n/
--- no_error_log
[error]
