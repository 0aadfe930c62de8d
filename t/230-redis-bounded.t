# store=redis stays bounded under abuse ([S15]): the line has a cap (max_line), abandoned places
# step away after `presence` and leave it after `keep` ([S27]) wherever they stand, every script
# call does bounded work (at most 64 removals, EXPIRE_STEP in core/src/redis/room.lua), and no
# decision falls to on_error.
#
# The work is read from Redis's MONITOR stream (t/lib/script_work.pl: every call of the room's
# script with the commands it ran), not timed: until issue 30 this test held every call under
# 2 ms by SLOWLOG, which counts wall time and so depends on what else the 2-core machine runs
# (t/273-sync-bounded.t failed in the full suite that way). Asserted per call: at most 64
# places removed from the line, no command on the line's sets whose cost is their size (an
# unbounded range, ZREMRANGEBYSCORE, DEL), at most 600 entries of them touched (4 x 64 to move
# absent places away, 3 x 64 to drop the gone ones, 64 for the stale sessions' trim, and a few
# single lookups; the line here is 100 long, so this bound is the removal bound's companion, not
# a proof on its own); and, with 100 gone at once, the drain took at least two calls.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: a full line is refused at max_line, drains after keep, at most 64 removals a call (MONITOR)
--- timeout: 20
--- redis
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1h presence=1s keep=3s flood=off
                     max_line=100 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / { smart_limit shop; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
    location = /metrics { smart_limit_metrics; }
--- steps
A GET / => 200
# 150 cookie-keeping newcomers (flood control off): 100 places, then the line is full.
parallel 150 p GET / Accept: application/json => 503; count 503 == 150
redis ZCARD smart_limit:{shop}:line => /^100$/
# From here on every call of the room's script is watched.
bg-sh 60: perl t/lib/script_work.pl --redis $TEST_NGINX_REDIS_PORT --call-key smart_limit:{shop}:state --keys smart_limit:{shop}:line,smart_limit:{shop}:seen,smart_limit:{shop}:active,smart_limit:{shop}:here,smart_limit:{shop}:away --entries-cap 600 --remove-key smart_limit:{shop}:line --removed-cap 64 --ready $TEST_NGINX_SERVROOT/work.ready --stop $TEST_NGINX_SERVROOT/work.stop => /script calls (\d+); monitor saw \1; most entries a call \d+; most removed a call (?:6[0-4]|[1-5]\d|\d); removed (?:99|100) in (?:[2-9]|\d\d+) calls; .*; unbounded 0; over bounds 0\n/
sh 10: until [ -e $TEST_NGINX_SERVROOT/work.ready ]; do sleep 0.05; done
Z GET / Accept: application/json => 503; json.position == null; json.queue_length == 100
# A flood without cookies changes nothing in Redis.
sh 20: wrk -t1 -c32 -d2s http://127.0.0.1:$TEST_NGINX_PORT/ => /Requests\/sec/
redis ZCARD smart_limit:{shop}:line => /^100$/
# Nobody polled: after presence (1 s) the places step away, after keep (3 s) the line drains,
# 64 places per call at most (B polls until it is alone in the line, rather than a fixed sleep).
until 8: B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
redis ZCARD smart_limit:{shop}:line => /^1$/
redis ZCARD smart_limit:{shop}:seen => /^1$/
redis ZCARD smart_limit:{shop}:here => /^1$/
redis ZCARD smart_limit:{shop}:away => /^0$/
sh touch $TEST_NGINX_SERVROOT/work.stop
wait-bg
sh n=$(redis-cli -p $TEST_NGINX_REDIS_PORT INFO memory | awk -F: '/^used_memory:/ {print $2+0}'); echo "used_memory $n"; test "$n" -lt 8000000
M GET /metrics => 200; body =~ /smart_limit_store_errors_total\{room="shop"\} 0\n/; body =~ /smart_limit_expired_total\{room="shop"\} [1-9]/
--- error_log
is full: no place left in the line
