# The queue rules of ngx-smart-ratelimit on a room that gates a location by itself ([S2]),
# [S3]-[S6]. The zone's store is $TEST_NGINX_STORE: the shared-memory zone by default,
# Redis when TEST_NGINX_USE_REDIS=1 (scripts/test runs this file both ways).

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: a new client walks in when the room is empty and keeps passing on its ticket
--- http_config
    smart_limit_zone shop size=1m max_active=2 $TEST_NGINX_STORE;
    log_format room '$request $status $smart_limit_status $smart_limit_room';
    access_log logs/room.log room;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200; body =~ /origin page/; cookie smart_limit_shop set; header Set-Cookie =~ /HttpOnly/; header Set-Cookie =~ /SameSite=Lax/; header Set-Cookie =~ /Path=\//
A GET / => 200; body =~ /origin page/; cookie smart_limit_shop absent
repeat 5: A GET / => 200
B GET / => 200; cookie smart_limit_shop set

=== TEST 2: FIFO: when the room is full, clients wait in arrival order and the head goes first
--- http_config
    smart_limit_zone shop size=1m max_active=1 active_window=1s $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.status == "waiting"; json.position == 1; json.queue_length == 1
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
# A is not seen again: after active_window its place frees, and only the head may take it.
sleep 1.1
D GET / Accept: application/json => 503; json.position == 3
C GET / Accept: application/json => 503; json.position == 2
B GET / => 200; body =~ /origin page/; cookie smart_limit_shop set
C GET / Accept: application/json => 503; json.position == 1; json.queue_length == 2
D GET / Accept: application/json => 503; json.position == 2
B GET / => 200
sleep 1.1
D GET / Accept: application/json => 503; json.position == 2
C GET / => 200
D GET / Accept: application/json => 503; json.position == 1

=== TEST 3: a client keeps its single place however often it retries
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
repeat 20: B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1; cookie smart_limit_shop absent
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
repeat 5: B GET / Accept: application/json => 503; json.position == 1
repeat 5: C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2

=== TEST 4: keep=off: a waiting head that is not seen for `presence` loses its place; the queue moves on
--- http_config
    smart_limit_zone shop size=1m max_active=1 presence=2s keep=off $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
C GET / Accept: application/json => 503; json.position == 2
# C keeps polling (every 0.1 s: it never goes unseen); B is gone once unseen for presence (2 s).
# Until then C is second: B was seen a moment ago.
C GET / Accept: application/json => 503; json.position == 2
until 6: C GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
# B comes back too late: a new place, behind C.
B GET / Accept: application/json => 503; json.position == 2; cookie smart_limit_shop set

=== TEST 5: the waiting answer: 503, Retry-After, no-store, an HTML page with the position and a self-refresh
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / => 503; header Retry-After =~ /^10$/; header Cache-Control =~ /no-store/; header Content-Type =~ /^text\/html/; body =~ /<meta http-equiv="refresh" content="10"/; body =~ /\b1\b/; body !~ /origin page/
B GET / Accept: application/json => 503; header Content-Type =~ /^application\/json/; json.status == "waiting"; json.position == 1; json.refresh_seconds == 10; json.eta_known == false; json.queue_length == 1; json.updated_at > 1700000000
B HEAD / => 503; body !~ /./; header Retry-After =~ /^10$/

=== TEST 6: status code and refresh are configurable
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / {
        smart_limit shop;
        smart_limit_status 429;
        smart_limit_refresh 3s;
        root html;
    }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / => 429; header Retry-After =~ /^3$/; body =~ /content="3"/
B GET / Accept: application/json => 429; json.refresh_seconds == 3

=== TEST 7: an admitted ticket passes for `grant`, then its holder is a new user again
--- http_config
    smart_limit_zone shop size=1m max_active=1 grant=1s active_window=10m $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200; cookie smart_limit_shop set
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
sleep 1.1
# The grant is over. A is still counted active, so A queues behind B with a new ticket.
A GET / Accept: application/json => 503; json.position == 2; cookie smart_limit_shop set

=== TEST 8: `off` and other locations are not gated
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    smart_limit shop;
    root html;
    location / { }
    location /free/ { smart_limit off; }
--- user_files
>>> index.html
origin page
>>> free/index.html
free page
--- steps
A GET / => 200
B GET / => 503
B GET /free/ => 200; body =~ /free page/; cookie smart_limit_shop absent

=== TEST 9: with k places free, the first k present places go in as they poll, nobody passed over
--- http_config
    smart_limit_zone shop size=1m max_active=3 active_window=1s $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / => 200
C GET / => 200
D GET / Accept: application/json => 503; json.position == 1
E GET / Accept: application/json => 503; json.position == 2
F GET / Accept: application/json => 503; json.position == 3
G GET / Accept: application/json => 503; json.position == 4
# A, B and C are not seen again: after active_window three places free. D, E and F may each
# take one as they poll, in any order (the head alone would leave places empty while it is
# slow to poll); G, behind them, waits; those ahead of one that went in stay within the places.
sleep 1.1
F GET / => 200; body =~ /origin page/
G GET / Accept: application/json => 503; json.position == 3
E GET / => 200
G GET / Accept: application/json => 503; json.position == 2
D GET / => 200
G GET / Accept: application/json => 503; json.position == 1

=== TEST 10: [S27] a waiter away past `presence` but within `keep` resumes its place; nobody behind it is moved back
--- http_config
    smart_limit_zone shop size=1m max_active=1 presence=1s keep=5s $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
C GET / Accept: application/json => 503; json.position == 2
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
# B steps away for 2.4 s (a locked phone: past presence, within keep); C and D poll as asked
# and are told the same positions throughout (B still counts ahead of them).
sleep 0.6
C GET / Accept: application/json => 503; json.position == 2
D GET / Accept: application/json => 503; json.position == 3
sleep 0.6
C GET / Accept: application/json => 503; json.position == 2
D GET / Accept: application/json => 503; json.position == 3
sleep 0.6
C GET / Accept: application/json => 503; json.position == 2
D GET / Accept: application/json => 503; json.position == 3
sleep 0.6
C GET / Accept: application/json => 503; json.position == 2
D GET / Accept: application/json => 503; json.position == 3
# B is back: its own place at the head, and its first answer says it resumed it.
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 3; json.resumed == true
B GET / Accept: application/json => 503; json.position == 1; body !~ /resumed/
C GET / Accept: application/json => 503; json.position == 2

=== TEST 11: [S27] a waiter whose turn came while it was away goes in at the next free place when it is back, never above max_active
--- http_config
    smart_limit_zone shop size=1m max_active=1 presence=1s keep=5s active_window=1s $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
C GET / Accept: application/json => 503; json.position == 2
D GET / Accept: application/json => 503; json.position == 3
# B steps away. A is not seen again: its place frees after active_window, and C, the first
# present client, takes it (nobody waits for an absent head).
sleep 0.6
C GET / Accept: application/json => 503; json.position == 2
D GET / Accept: application/json => 503; json.position == 3
until 4: C GET / => 200; body =~ /origin page/
# D still counts B ahead of it: its position did not grow when B stepped away, only fell
# when C went in.
D GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
# B is back within keep: first in line, but C holds the one place.
C GET / => 200
B GET / Accept: application/json => 503; json.position == 1; json.resumed == true
# C leaves: the next free place is B's, not D's, though D polls all along.
sleep 0.4
D GET / Accept: application/json => 503; json.position == 2
B GET / Accept: application/json => 503|200
sleep 0.4
D GET / Accept: application/json => 503; json.position == 2
B GET / Accept: application/json => 503|200
sleep 0.4
D GET / Accept: application/json => 503
until 3: B GET / => 200; body =~ /origin page/
D GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1

=== TEST 12: [S27] a waiter away past `keep` has lost its place: back, it starts at the tail
--- http_config
    smart_limit_zone shop size=1m max_active=1 presence=1s keep=3s $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
C GET / Accept: application/json => 503; json.position == 2
# C polls; B is kept (C second) until keep ends, then C is first and the line is C alone.
sleep 0.6
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
until 6: C GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
B GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2; body !~ /resumed/; cookie smart_limit_shop set
