# Only worker processes lead a node's syncs and talk to Redis ([S20]). nginx runs every module's
# init_process in the cache manager and the cache loader too (they exist as soon as a
# proxy_cache_path is configured) and fires their timers: a helper that ran the module's
# tickers could win the node's leader election and hold the node's only Redis connection (the
# loader even exits after its run without resigning). With master_process off, the single
# process is the worker and must sync.
#
# t/lib/redis_owners.pl watches which nginx processes hold a connection to the test Redis (from
# /proc: socket inodes and the processes' fds) and fails on any that is not "nginx: worker
# process". To give a helper every chance, it also freezes the workers (SIGSTOP) for longer
# than the leader's staleness (3 intervals): a helper running the tickers takes the sync over
# then, and keeps it once the workers are back.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: with a cache manager and a cache loader running, only the worker syncs and connects, even while it is frozen
--- workers: 1
--- redis
--- http_config
    proxy_cache_path $TEST_NGINX_SERVROOT/tmp/cache keys_zone=pages:1m;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=2;
    smart_limit_rate_zone api rate=100r/s redis=127.0.0.1:$TEST_NGINX_REDIS_PORT interval=200ms;
--- config
    location / { smart_limit shop; smart_limit_rate api; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin
--- steps
# The helpers are there.
sh ps -o args= --ppid $(cat $TEST_NGINX_SERVROOT/logs/nginx.pid) => /cache manager process/
sh ps -o args= --ppid $(cat $TEST_NGINX_SERVROOT/logs/nginx.pid) => /cache loader process/
# Both kinds of sync happen (the room's and the rate zone's).
until 5: M GET /m => 200; body =~ /smart_limit_fleet_syncs_total\{room="shop"\} [1-9]/; body =~ /smart_limit_rate_syncs_total\{zone="api"\} [1-9]/
A GET / => 200; body =~ /origin/
sh 20: perl t/lib/redis_owners.pl --port $TEST_NGINX_REDIS_PORT --servroot $TEST_NGINX_SERVROOT --seconds 2 --require => /only workers held/
# Frozen for 2 s (10 intervals, the leadership goes stale after 3): nobody may take over but a
# worker, and once the worker is back it still holds the only connections.
sh 20: perl t/lib/redis_owners.pl --port $TEST_NGINX_REDIS_PORT --servroot $TEST_NGINX_SERVROOT --seconds 4.5 --pause 2 --require => /only workers held/
# Syncs go on after the freeze, in the worker (both counters grow: polled until they have,
# not checked after a fixed second).
sh curl -sf http://127.0.0.1:$TEST_NGINX_PORT/m => /smart_limit_fleet_syncs_total\{room="shop"\} (\d+)/ as $ROOM
sh curl -sf http://127.0.0.1:$TEST_NGINX_PORT/m => /smart_limit_rate_syncs_total\{zone="api"\} (\d+)/ as $RATE
sh 10: until curl -sf http://127.0.0.1:$TEST_NGINX_PORT/m | perl -ne '$r = $1 if /smart_limit_fleet_syncs_total\{room="shop"\} (\d+)/; $z = $1 if /smart_limit_rate_syncs_total\{zone="api"\} (\d+)/; END { print "room $r rate $z\n"; exit !($r > $ROOM && $z > $RATE) }'; do sleep 0.1; done => /room \d+ rate \d+/
--- no_error_log
[error]

=== TEST 2: master_process off: the one process syncs and holds the connection
--- master_process: off
--- redis
--- http_config
    proxy_cache_path $TEST_NGINX_SERVROOT/tmp/cache keys_zone=pages:1m;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=2;
    smart_limit_rate_zone api rate=100r/s redis=127.0.0.1:$TEST_NGINX_REDIS_PORT interval=200ms;
--- config
    location / { smart_limit shop; smart_limit_rate api; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin
--- steps
# One process: no worker, no helper.
sh ! ps -o pid= --ppid $(cat $TEST_NGINX_SERVROOT/logs/nginx.pid)
until 5: M GET /m => 200; body =~ /smart_limit_fleet_syncs_total\{room="shop"\} [1-9]/; body =~ /smart_limit_rate_syncs_total\{zone="api"\} [1-9]/
A GET / => 200; body =~ /origin/
sh 20: perl t/lib/redis_owners.pl --port $TEST_NGINX_REDIS_PORT --servroot $TEST_NGINX_SERVROOT --seconds 1 --expect single --require => /only the single nginx process held/
redis HLEN smart_limit:{shop}:fleet => /^[1-9]/
--- no_error_log
[error]
