# store=redis stays bounded under abuse ([S15]): the line has a cap (max_line), abandoned places
# leave it within `presence` wherever they stand, and every script call does bounded work (at
# most 64 removals), so the SLOWLOG (2 ms) stays empty and no decision falls to on_error.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: a full line is refused at max_line, drains within presence, and no call is slow
--- timeout: 20
--- redis
--slowlog-log-slower-than 2000
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1h presence=2s flood=off
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
# (The SLOWLOG counts wall time: 150 test clients forked at once on a small machine can stall
# Redis itself; from here on only Redis's own work shows.)
redis SLOWLOG RESET
Z GET / Accept: application/json => 503; json.position == null; json.queue_length == 100
# A flood without cookies changes nothing in Redis.
sh 20: wrk -t1 -c32 -d2s http://127.0.0.1:$TEST_NGINX_PORT/ => /Requests\/sec/
redis ZCARD smart_limit:{shop}:line => /^100$/
# Nobody polled: after presence (2 s) the line drains, 64 places per call at most.
sleep 2.2
until 3: B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
redis ZCARD smart_limit:{shop}:line => /^1$/
redis ZCARD smart_limit:{shop}:seen => /^1$/
redis SLOWLOG LEN => /^0$/
sh n=$(redis-cli -p $TEST_NGINX_REDIS_PORT INFO memory | awk -F: '/^used_memory:/ {print $2+0}'); echo "used_memory $n"; test "$n" -lt 8000000
M GET /metrics => 200; body =~ /smart_limit_store_errors_total\{room="shop"\} 0\n/; body =~ /smart_limit_expired_total\{room="shop"\} [1-9]/
--- error_log
is full: no place left in the line
