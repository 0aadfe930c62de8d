# max_active=auto ([S26]): the room's max_active moves between its bounds with what the origin
# does for the admitted requests that reach it (the log phase: upstream time and status). Up
# by half before the first cut, by a tenth or a quarter after it (at least one), after a
# window (1 s) of at least 10 responses, under
# origin_latency= and none failed, with the limit reached; down to 0.8 of the sessions active
# when more than 10 % were slow (or 1 % failed), then holding until departures bring the active
# count under the value (lowering evicts nobody). Those waiting within the next rises' places
# (two rises) are told to come back after 1 s. The origin here is a second server: /fast/
# answers at once, /slow/ goes through limit_req (20r/s, queued), so a burst of 20 takes up to
# a second and most of it is over origin_latency=200ms.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: bad bounds fail nginx -t, naming the parameter
--- http_config
    smart_limit_zone shop max_active=auto:50..20;
--- config
--- must_fail
--- error_log
"smart_limit_zone" invalid max_active "auto:50..20": auto:MIN..MAX needs 1 <= MIN <= MAX

=== TEST 2: origin_latency= without max_active=auto
--- http_config
    smart_limit_zone shop max_active=5 origin_latency=400ms;
--- config
--- must_fail
--- error_log
"smart_limit_zone" "origin_latency=400ms" requires max_active=auto

=== TEST 3: a bad origin_latency=
--- http_config
    smart_limit_zone shop max_active=auto:20..500 origin_latency=soon;
--- config
--- must_fail
--- error_log
"smart_limit_zone" invalid origin_latency "soon"

=== TEST 4: a fast origin raises the value to its upper bound, a reload keeps it, a slow one cuts it once per departure wave
--- http_config
    smart_limit_zone shop size=1m max_active=auto:2..4 origin_latency=200ms active_window=1m;
    limit_req_zone $server_port zone=origin:1m rate=20r/s;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location /fast/ { return 200 "fast $uri\n"; }
        location /slow/ {
            limit_req zone=origin burst=100;
            limit_req_log_level info;
            rewrite ^ /index.html break;
            root html;
        }
    }
--- config
    location / {
        smart_limit shop;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /static { smart_limit shop; rewrite ^ /index.html break; root html; }
    location = /control { smart_limit_control; }
    location = /metrics { smart_limit_metrics; }
--- user_files
>>> index.html
slow page
--- steps
A GET /fast/x => 200; body =~ /fast/
B GET /fast/x => 200
C GET /fast/x Accept: application/json => 503; json.position == 1
op GET /control => 200; json.rooms.0.max_active == 2; json.rooms.0.auto.min == 2; json.rooms.0.auto.max == 4; json.rooms.0.auto.origin_latency_ms == 200; json.rooms.0.auto.last_move == null
# Answers without an upstream are not measured, however many.
repeat 15: A GET /static => 200
sleep 1.1
repeat 12: A GET /fast/x => 200
sleep 1.1
A GET /fast/x => 200
op GET /control => 200; json.rooms.0.max_active == 3; json.rooms.0.auto.last_move == "up"; json.rooms.0.auto.origin_responses == 15
# The value is shared memory's: a reload keeps it. C, at the head, takes the new place.
reload
op GET /control => 200; json.rooms.0.max_active == 3
C GET /fast/x => 200
D GET /fast/x Accept: application/json => 503; json.position == 1
sleep 1.1
repeat 12: A GET /fast/x => 200
sleep 1.1
A GET /fast/x => 200
D GET /fast/x => 200
op GET /control => 200; json.rooms.0.max_active == 4; json.rooms.0.active_sessions == 4
# At the upper bound it stays there: the fifth waits.
sleep 1.1
repeat 12: A GET /fast/x => 200
sleep 1.1
A GET /fast/x => 200
op GET /control => 200; json.rooms.0.max_active == 4
E GET /fast/x Accept: application/json => 503; json.position == 1
op GET /metrics => 200; body =~ /smart_limit_max_active\{room="shop"\} 4\n/; body =~ /smart_limit_origin_responses_total\{room="shop"\} \d+/
# The origin slows: a burst of 20 queued at the origin, most over 200 ms. Down to 0.8 of the
# four active sessions.
sleep 1.1
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
wait-bg
sleep 1.1
A GET /fast/x => 200
op GET /control => 200; json.rooms.0.max_active == 3; json.rooms.0.auto.last_move == "down"; json.rooms.0.auto.last_move_reason =~ /latency/
# Still slow, but four are active over a value of three: the cut has not acted yet (nobody is
# let in meanwhile), so the value holds rather than falling to the floor.
sleep 1.1
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
wait-bg
sleep 1.1
A GET /fast/x => 200
op GET /control => 200; json.rooms.0.max_active == 3
E GET /fast/x Accept: application/json => 503; json.position == 1
# The operator pins it (the rule leaves it, whatever the origin does), then gives it back.
op POST /control?room=shop&max_active=5 => 200; json.rooms.0.max_active == 5; json.rooms.0.auto.pinned == true
E GET /fast/x => 200
sleep 1.1
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
bg A GET /slow/x => 200
wait-bg
sleep 1.1
A GET /fast/x => 200
op GET /control => 200; json.rooms.0.max_active == 5
op POST /control?room=shop&max_active=auto => 200; json.rooms.0.max_active == 3; json.rooms.0.auto.pinned == false
op POST /control?room=shop&max_active=0 => 400; json.error =~ /positive number, or auto/
op POST /control?room=shop&max_active=2&mode=reject => 400
--- error_log
max_active pinned to 5 by the control endpoint
max_active back to auto by the control endpoint
max_active=auto rises from 2 to 3 \(origin under origin_latency
max_active=auto falls from 4 to 3 \(origin latency p90 over origin_latency: \d+ of \d+ responses over 200 ms, 0 failed\)
--- no_error_log
rises from 3 to 4

=== TEST 5: those the next two rises let in are told to come back after 1 s; a pinned value or a fixed one opens no place
--- http_config
    smart_limit_zone shop size=1m max_active=auto:4..100;
    smart_limit_zone fixed size=1m max_active=4;
--- config
    location / { smart_limit shop; root html; }
    location /fixed/ { smart_limit fixed; rewrite ^ /index.html break; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200
B GET / => 200
C GET / => 200
D GET / => 200
# At 4, before any cut, the next two rises are by half: 4 to 6 to 9, five places, for
# positions 1 to 5.
E GET / Accept: application/json => 503; json.position == 1; json.refresh_seconds == 1; header Retry-After =~ /^1$/
F GET / => 503; header Retry-After =~ /^1$/; body =~ /content="1"/
G GET / => 503
H GET / => 503
I GET / Accept: application/json => 503; json.position == 5; json.refresh_seconds == 1
J GET / Accept: application/json => 503; json.position == 6; json.refresh_seconds == 10; header Retry-After =~ /^10$/
# Pinned, the value does not rise by itself: the configured refresh.
op POST /control?room=shop&max_active=4 => 200; json.rooms.0.auto.pinned == true
E GET / Accept: application/json => 503; json.position == 1; json.refresh_seconds == 10
op POST /control?room=shop&max_active=auto => 200; json.rooms.0.auto.pinned == false
E GET / Accept: application/json => 503; json.position == 1; json.refresh_seconds == 1
# A fixed max_active: the head is told the configured refresh (no pace yet to expect its turn by).
A GET /fixed/ => 200
B GET /fixed/ => 200
C GET /fixed/ => 200
D GET /fixed/ => 200
E GET /fixed/ Accept: application/json => 503; json.position == 1; json.refresh_seconds == 10
