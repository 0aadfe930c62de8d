# Scheduled events ([S18]) on a synced room (`sync=`): a place taken during the pre-queue dates
# from a moment drawn in it (fleet::lottery_arrival), and the fleet's line is by arrival, so
# three nodes show one order: 500 clients from 500 addresses spread over three nodes, an
# order unrelated to arrival, every client told a position of its own, the same on every node
# (within one, while their pictures differ by a sighting).

use lib 't/lib';
use SmartLimit::Test;

BEGIN {
    # Late enough for three nginx nodes to start and meet the fleet, and 500 clients to take
    # pre-queue places first.
    $ENV{TEST_NGINX_LOTTERY_START} = time() + 30;
}

run_tests();

__DATA__

=== TEST 1: the start's lottery on three synced nodes: one order for the fleet, unrelated to arrival; a later client is behind them all
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
    smart_limit_event drop room=shop prequeue=@1 start=@$TEST_NGINX_LOTTERY_START;
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
# |rho| < 0.25 in the pattern (over five standard deviations of chance for 500; 0.15 until
# issue 30 failed about one run in 1,200 by chance alone). A line of at most 2,048 comes whole
# in each picture (fleet::EXACT_LINE, issue 32), so the 500 are told 500 distinct positions,
# 1..500 counting the one let in, and no two nodes tell one client positions more than 1
# apart (their pictures may differ by a sighting). Until issue 32 the positions were estimates
# between 128 samples: 140 distinct numbers for 195 people, up to 5 apart between nodes. How
# many clients every node shows exactly the same number is printed, not held (measured: 499 of
# 499 in 3 runs of 3). The probe lets the nodes meet by counting their syncs (--metrics), not
# by a second's sleep, and has the head let in before the settled round.
sh 90: perl t/lib/event_probe.pl --nginx $TEST_NGINX_PORTS --start $TEST_NGINX_LOTTERY_START --clients 500 --metrics /m => /prequeued 500 admitted 1 distinct 500 min 1 max 500 rho -?0\.(?:[01]|2[0-4])\d* late 501 agree \d+ of 499 spread [01]\n/
--- no_error_log
[error]
