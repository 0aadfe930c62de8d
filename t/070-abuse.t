# The line under abuse ([S15], [S16]), with nothing configured but what each block says.
# The zones name their store as $TEST_NGINX_STORE: t/200-redis-rules.t runs this file again on
# Redis. Honest clients come from their own 127.0.0.x addresses (`from`); floods come from
# 127.0.0.1 (wrk), bounded in time.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: one address floods without cookies: it takes no place, honest clients keep theirs and newcomers go right behind them
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1h $TEST_NGINX_STORE;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / { smart_limit shop; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
    location = /metrics { smart_limit_metrics; }
--- steps
A GET / from 127.0.0.11 => 200; redirects == 1
B GET / from 127.0.0.12 Accept: application/json => 503; json.position == 1
C GET / from 127.0.0.13 Accept: application/json => 503; json.position == 2
bg-sh 20: wrk -t1 -c32 -d3s http://127.0.0.1:$TEST_NGINX_PORT/ => /Requests\/sec/
# The flood is under way once the room has counted a hundred of its first contacts (polled, not
# slept).
until 3: M GET /metrics => 200; body =~ /smart_limit_arrivals_total\{room="shop"\} [1-9]\d{2,}\n/
# During the flood: a newcomer from another address is third, and the line is three long.
D GET / from 127.0.0.14 Accept: application/json => 503; json.position == 3; json.queue_length == 3
B GET / from 127.0.0.12 Accept: application/json => 503; json.position == 1; json.queue_length == 3
wait-bg
# The flood was thousands of first contacts (307; how many depends on the machine's speed:
# at least the hundred waited for above), none of which took anything.
M GET /metrics => 200; body =~ /smart_limit_queue_length\{room="shop"\} 3\n/; body =~ /smart_limit_arrivals_total\{room="shop"\} [1-9]\d{2,}\n/; body =~ /smart_limit_queued_total\{room="shop"\} 3\n/
E GET / from 127.0.0.15 Accept: application/json => 503; json.position == 4; json.queue_length == 4
C GET / from 127.0.0.13 Accept: application/json => 503; json.position == 2

=== TEST 2: a crowd behind one address (a carrier NAT): 40 cookie-keeping browsers arriving over 10 s all get places
--- timeout: 20
--- http_config
    # presence=60s: the browsers do not poll again; the first must still be in line when the
    # last come (10 s of sleeps here, more on a slow machine: the sleeps only space them out).
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1h presence=60s $TEST_NGINX_STORE;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / { smart_limit shop; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
    location = /metrics { smart_limit_metrics; }
--- steps
A GET / from 127.0.0.11 => 200
parallel 4 a GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"; json.position present
sleep 1
parallel 4 b GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"
sleep 1
parallel 4 c GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"
sleep 1
parallel 4 d GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"
sleep 1
parallel 4 e GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"
sleep 1
parallel 4 f GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"
sleep 1
parallel 4 g GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"
sleep 1
parallel 4 h GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"
sleep 1
parallel 4 i GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"
sleep 1
parallel 4 j GET / from 127.0.0.50 Accept: application/json => 503; json.status == "waiting"; json.position > 36; json.position <= 40
Z GET / from 127.0.0.60 Accept: application/json => 503; json.position == 41; json.queue_length == 41
M GET /metrics => 200; body =~ /smart_limit_throttled_total\{room="shop"\} 0\n/

=== TEST 3: tickets minted from one address and replayed take places at the address's rate only; others are not slowed
--- follow_redirects: 0
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1h flood=1r/m flood_burst=4 $TEST_NGINX_STORE;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /metrics { smart_limit_metrics; }
--- steps
A GET / from 127.0.0.11 => 307
A GET / from 127.0.0.11 => 200
# Twenty tickets minted: first contacts, each kept in its own jar.
parallel 20 m GET / from 127.0.0.30 => 307; cookie smart_limit_shop set; header X-SL-Status =~ /^NEW$/
# Replayed: one place, plus a burst of four, then the address waits its turn for more.
parallel 20 m GET / from 127.0.0.30 Accept: application/json => 503; json.status =~ /^(waiting|throttled)$/
M GET /metrics => 200; body =~ /smart_limit_queue_length\{room="shop"\} 5\n/; body =~ /smart_limit_throttled_total\{room="shop"\} 15\n/
m1 GET / from 127.0.0.30 Accept: application/json => 503; header Retry-After =~ /^[1-9]\d*$/
# A throttled client is told so and keeps its ticket (no place, no new cookie).
m20 GET / from 127.0.0.30 Accept: application/json => 503; json.status =~ /^(waiting|throttled)$/
H GET / from 127.0.0.31 => 307
H GET / from 127.0.0.31 Accept: application/json => 503; json.status == "waiting"; json.position == 6; header X-SL-Status =~ /^WAITING$/
--- error_log
flood control: a client address takes places faster than flood= allows

=== TEST 4: keep=off: abandoned places stop counting at once and free the line, wherever they stand; a client polling keeps its place
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1h presence=4s keep=off flood=off $TEST_NGINX_STORE;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / { smart_limit shop; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
parallel 30 p GET / Accept: application/json => 503; json.status == "waiting"
C GET / Accept: application/json => 503; json.position == 32; json.queue_length == 32
# B and C poll halfway through presence (4 s); the thirty do not come back.
sleep 2
B GET / Accept: application/json => 503; json.position == 1
C GET / Accept: application/json => 503; json.position == 32
# The thirty stood between B and C: gone once unseen for presence. C polls until then (every
# 0.1 s), B was seen 2 s before (margin: 2 s of presence left for B when the thirty go).
until 6: C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 2

=== TEST 5: a waiting ticket replayed far faster than a browser polls is answered without the store
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1h poll=1r/m poll_burst=3 $TEST_NGINX_STORE;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / { smart_limit shop; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
    location = /metrics { smart_limit_metrics; }
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
# One poll plus a burst of three reach the store; the next six get the last answer.
repeat 10: B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
M GET /metrics => 200; body =~ /smart_limit_fast_polls_total\{room="shop"\} 6\n/
C GET / Accept: application/json => 503; json.position == 2

=== TEST 6: an admitted ticket used far faster than one person browses is limited (429), then passes again
--- http_config
    # 60r/m: one request a second beyond the burst, so the eleven requests below need not come
    # within 0.1 s (as with 600r/m) but within a second to meet the limit (they take ~20 ms).
    smart_limit_zone shop size=1m max_active=2 grant=1h active_window=1h session_rate=60r/m session_burst=9 $TEST_NGINX_STORE;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /metrics { smart_limit_metrics; }
--- steps
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/
repeat 10: A GET / => 200; header X-SL-Status =~ /^PASSED$/
A GET / => 429; header Retry-After =~ /^1$/; header X-SL-Status =~ /^LIMITED$/
# Another session has its own budget.
B GET / => 200
until 3: A GET / => 200; header X-SL-Status =~ /^PASSED$/
M GET /metrics => 200; body =~ /smart_limit_session_limited_total\{room="shop"\} [1-9]\d*\n/

=== TEST 7: a junk cookie of the same name before the real ticket does not hide it
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1h $TEST_NGINX_STORE;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
jar A prepend smart_limit_shop=junk
A GET / => 200; header X-SL-Status =~ /^PASSED$/; cookie smart_limit_shop absent; redirects == 0
jar B prepend smart_limit_shop=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
B GET / Accept: application/json => 503; json.position == 1; cookie smart_limit_shop absent; redirects == 0
C GET / Accept: application/json => 503; json.position == 2

=== TEST 8: [S27] places kept for clients who never come back hold no free place: the next present client goes in
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1h active_window=1s presence=1s keep=1h flood=off $TEST_NGINX_STORE;
    server { listen 127.0.0.1:$TEST_NGINX_PORT2; location / { return 200 "origin\n"; } }
--- config
    location / { smart_limit shop; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
parallel 30 p GET / Accept: application/json => 503; json.status == "waiting"
C GET / Accept: application/json => 503; json.position == 32; json.queue_length == 32
# The thirty never come back: kept for an hour, they still count in C's position (an upper
# bound), but A's place goes to B, and B's, once B leaves, to C: nobody waits for them.
sleep 0.6
C GET / Accept: application/json => 503; json.position == 32
until 4: B GET / => 200
until 4: C GET / => 200
