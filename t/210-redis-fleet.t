# store=redis as a fleet ([S11]): two nginx instances (separate shared memory, separate
# ports) on one Redis and one key file behave as one room: one FIFO line, one max_active,
# tickets valid on every node. Also: key layout (hash tag, TTLs, prefix=), one round trip per
# decision and none for admitted tickets (INFO commandstats).

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: clients alternating between two nodes see one FIFO order and one max_active
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=2 active_window=5s;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> fleet.keys
7f1c0e5a9b3d2f4e6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d0f
>>> index.html
node $TEST_NGINX_INSTANCE
--- steps
# max_active=2, counted across the fleet: one admitted on each node fills the room.
A GET / @1 => 200; body =~ /node 1/
B GET / @2 => 200; body =~ /node 2/
C GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 1
D GET / @2 Accept: application/json => 503; json.position == 2; json.queue_length == 2
E GET / @1 Accept: application/json => 503; json.position == 3; json.queue_length == 3
# Tickets are valid on the other node; each client keeps its one place.
C GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 3
D GET / @1 Accept: application/json => 503; json.position == 2
E GET / @2 Accept: application/json => 503; json.position == 3
A GET / @2 => 200; body =~ /node 2/
B GET / @1 => 200; body =~ /node 1/
redis ZCARD smart_limit:{shop}:line => /^3$/
redis ZCARD smart_limit:{shop}:active => /^2$/
# B goes quiet; A keeps coming (on both nodes). After the active window one place frees,
# and only the head (C) may take it, whichever node it asks. (active_window=5s: A comes back
# 2.5 s after its last request, half a window to spare; B's window is over when Redis's
# active set counts one session seen within it, asked of Redis rather than slept.)
sleep 2.5
A GET / @2 => 200
D GET / @2 Accept: application/json => 503; json.position == 2
E GET / @1 Accept: application/json => 503; json.position == 3
sh 10: until [ "$(redis-cli -p $TEST_NGINX_REDIS_PORT ZCOUNT 'smart_limit:{shop}:active' "($(redis-cli -p $TEST_NGINX_REDIS_PORT TIME | awk 'NR == 1 { s = $1 } NR == 2 { printf "%.0f", s * 1000 + int($1 / 1000) - 5000 }')" +inf)" -le 1 ]; do sleep 0.1; done
A GET / @1 => 200
E GET / @2 Accept: application/json => 503; json.position == 3
D GET / @1 Accept: application/json => 503; json.position == 2
C GET / @2 => 200; body =~ /node 2/
C GET / @1 => 200; body =~ /node 1/
D GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 2
E GET / @2 Accept: application/json => 503; json.position == 2
--- no_error_log
smart_limit_secret is not set
[error]

=== TEST 2: a fleet never admits past max_active, whichever node is asked, even in parallel
--- instances: 2
--- workers: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=3;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> fleet.keys
7f1c0e5a9b3d2f4e6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d0f
>>> index.html
origin
--- steps
parallel 10 p GET / => 200|503; count 200 == 3; count 503 == 7
parallel 10 q GET / @2 => 503
redis ZCARD smart_limit:{shop}:active => /^3$/
redis ZCARD smart_limit:{shop}:line => /^17$/

=== TEST 3: every key has a TTL, carries the {room} hash tag, and the prefix is configurable
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=1 prefix=eu-1:sl flood=1r/m;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200
B GET / => 503
# The room's five keys (its sixth, `away`, holds absent kept places: none here), and the flood
# budget of the address A and B came from (flood=1r/m: its TTL, two minutes after two places,
# outlives the test).
redis --scan => /\A(?:eu-1:sl:\{shop\}:(?:active|line|seen|here|state|flood:[0-9a-f]{16})\n){6}\z/
redis --scan --pattern eu-1:sl:{shop}:flood:* => /\Aeu-1:sl:\{shop\}:flood:[0-9a-f]{16}\n\z/
redis PTTL eu-1:sl:{shop}:state => /^[1-9]\d*$/
redis PTTL eu-1:sl:{shop}:line => /^[1-9]\d*$/
redis PTTL eu-1:sl:{shop}:seen => /^[1-9]\d*$/
redis PTTL eu-1:sl:{shop}:here => /^[1-9]\d*$/
redis PTTL eu-1:sl:{shop}:active => /^[1-9]\d*$/
sh redis-cli -p $TEST_NGINX_REDIS_PORT --scan --pattern 'eu-1:sl:{shop}:flood:*' | xargs redis-cli -p $TEST_NGINX_REDIS_PORT PTTL => /\A[1-9]\d{4,}\n\z/
--- error_log
smart_limit_zone "shop" has store=redis but smart_limit_secret is not set

=== TEST 4: one round trip per decision, none for admitted tickets (INFO commandstats)
--- workers: 1
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=1;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
redis CONFIG RESETSTAT => /OK/
# 1 decision (admitted), then 20 requests on the admitted ticket: no round trip.
A GET / => 200
repeat 20: A GET / => 200
# 1 + 9 decisions for a waiting client.
B GET / => 503
repeat 9: B GET / => 503
redis INFO commandstats => /cmdstat_evalsha:calls=11,/
redis INFO commandstats => /\A(?!(?s:.*)cmdstat_eval:)/
redis INFO commandstats => /cmdstat_script\|load:calls=1,/

=== TEST 4b: a client far back in line that polls again within half a second is answered without a round trip; near the head, always asked
--- workers: 1
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=1;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200
B GET / => 503
C GET / => 503
D GET / => 503
E GET / => 503
F GET / => 503
G GET / => 503
H GET / => 503
I GET / => 503
J GET / => 503
K GET / => 503
# Position 11: this poll asks Redis; the next ones within half a second reuse its answer.
Z GET / Accept: application/json => 503; json.position == 11
redis CONFIG RESETSTAT => /OK/
repeat 3: Z GET / Accept: application/json => 503; json.position == 11
redis INFO commandstats => /\A(?!(?s:.*)cmdstat_evalsha)/
# Position 1 (the head) always asks: its turn may come on any poll.
redis CONFIG RESETSTAT => /OK/
repeat 5: B GET / Accept: application/json => 503; json.position == 1
redis INFO commandstats => /cmdstat_evalsha:calls=5,/
# After half a second, Z asks again (and so refreshes its presence).
sleep 1.1
redis CONFIG RESETSTAT => /OK/
Z GET / Accept: application/json => 503; json.position == 11
redis INFO commandstats => /cmdstat_evalsha:calls=1,/

=== TEST 5: the script cache flushed under a running node: EVAL once, then EVALSHA again
--- workers: 1
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=1;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200
redis SCRIPT FLUSH => /OK/
B GET / Accept: application/json => 503; json.position == 1
B GET / Accept: application/json => 503; json.position == 1
redis INFO commandstats => /cmdstat_eval:calls=1,/
--- no_error_log
[error]

=== TEST 6: a room switched to a mode on one node is in that mode on the other
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=5;
--- config
    location / { smart_limit shop; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> fleet.keys
7f1c0e5a9b3d2f4e6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d0f
>>> index.html
origin
--- steps
A GET / @2 => 200
X POST /control?room=shop&mode=queue_all @1 => 200
redis HGET smart_limit:{shop}:state mode => /^5$/
# An operator's switch outlives a quiet room: a day, not minutes.
redis PTTL smart_limit:{shop}:state => /^\d{8}$/
B GET / @2 Accept: application/json => 503; json.status == "waiting"
X POST /control?room=shop&mode=default @1 => 200
redis HEXISTS smart_limit:{shop}:state mode => /^0$/
# Back to fifo: B is the head and there is room.
B GET / @1 => 200
C GET / @2 => 200

=== TEST 6b: session=: a ticket admits no longer than Redis counts its session
--- workers: 1
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=1 session=10s;
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
--- user_files
>>> fleet.keys
7f1c0e5a9b3d2f4e6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d0f
>>> index.html
origin
--- steps
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/
# Redis is told of an admitted session at most once per half window (5 s), the admission
# itself included. 2 s on, the ticket is due to be sealed again (a tenth of the session, at
# least a second), but Redis still has A's admission as its last sight of A: the ticket is not
# renewed past it. (Renewed to 2 s, as before this change, A's ticket outlived Redis's count
# by 2 s: the central room's rehearsal counted 103 of 100.)
sleep 2
A GET / => 200; header X-SL-Status =~ /^PASSED$/; cookie smart_limit_shop absent
# A stops. Redis frees its place 10 s after the admission, and B, at the head, takes it.
until 14: B GET / => 200; header X-SL-Status =~ /^ADMITTED$/
# A's ticket ended with Redis's count of it: A is a new user and waits behind nobody; the
# room holds one.
A GET / Accept: application/json => 503; json.position == 1; header X-SL-Status =~ /^WAITING$/
redis ZCARD smart_limit:{shop}:active => /^1$/
--- no_error_log
[error]

=== TEST 7: nginx -t refuses a Redis address it cannot resolve
--- http_config
    smart_limit_zone shop store=redis redis=no-such-host.invalid:6379;
--- config
    location / { smart_limit shop; root html; }
--- must_fail
--- error_log
"smart_limit_zone" redis=no-such-host.invalid:6379: host not found
