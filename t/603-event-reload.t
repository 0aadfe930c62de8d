# Scheduled events ([S18]) across a reload: nginx reloads while 200 clients hold pre-queue
# places; after the start every one of them has a place drawn by the lottery (every position
# once, an order unrelated to arrival) and a later client is behind them all, on each store.
# 200 clients: |rho| < 0.3 is over four standard deviations of chance (1/sqrt(199) = 0.071),
# while a pre-queue lost to the reload (arrival order) gives rho near 1.

use lib 't/lib';
use SmartLimit::Test;

BEGIN {
    # One start per block, each late enough for its nodes to start, 200 clients to take
    # pre-queue places and the reload to finish (the blocks run one after another).
    my $t = time();
    $ENV{TEST_NGINX_START_SHM}  = $t + 20;
    $ENV{TEST_NGINX_START_CENTRAL} = $t + 45;
    $ENV{TEST_NGINX_START_SYNC} = $t + 75;
}

run_tests();

__DATA__

=== TEST 1: shared memory: a reload during the pre-queue keeps its places and the start's draw
--- http_config
    smart_limit_zone shop size=4m max_active=1;
    smart_limit_event drop room=shop prequeue=@1 start=@$TEST_NGINX_START_SHM;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- timeout: 60
--- steps
bg-sh 60: perl t/lib/event_probe.pl --nginx $TEST_NGINX_PORT --start $TEST_NGINX_START_SHM --clients 200 --ready $TEST_NGINX_HTML_DIR/ready => /prequeued 200 admitted 1 distinct 200 min 1 max 200 rho -?0\.[0-2]\d* late 201\n/
sh 30: while [ ! -e $TEST_NGINX_HTML_DIR/ready ]; do sleep 0.1; done
reload
wait-bg
--- no_error_log
[error]

=== TEST 2: central Redis: a reload during the pre-queue keeps its places and the start's draw
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
    smart_limit_event drop room=shop prequeue=@1 start=@$TEST_NGINX_START_CENTRAL;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- timeout: 60
--- steps
bg-sh 60: perl t/lib/event_probe.pl --nginx $TEST_NGINX_PORT --start $TEST_NGINX_START_CENTRAL --clients 200 --ready $TEST_NGINX_HTML_DIR/ready => /prequeued 200 admitted 1 distinct 200 min 1 max 200 rho -?0\.[0-2]\d* late 201\n/
sh 30: while [ ! -e $TEST_NGINX_HTML_DIR/ready ]; do sleep 0.1; done
reload
wait-bg
--- no_error_log
[error]

=== TEST 3: sync=, three nodes: a reload of every node during the pre-queue keeps the fleet's order
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
    smart_limit_event drop room=shop prequeue=@1 start=@$TEST_NGINX_START_SYNC;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- timeout: 60
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
# One order on every node: no client shown positions more than 5 apart (as in t/602).
bg-sh 60: perl t/lib/event_probe.pl --nginx $TEST_NGINX_PORTS --start $TEST_NGINX_START_SYNC --clients 200 --ready $TEST_NGINX_HTML_DIR/ready --metrics /m => /prequeued 200 admitted 1 distinct \d+ min 1 max 20[01] rho -?0\.[0-2]\d* late 201 agree \d+ of 199 spread [0-5]\n/
sh 30: while [ ! -e $TEST_NGINX_HTML_DIR/ready ]; do sleep 0.1; done
reload
wait-bg
--- no_error_log
[error]
