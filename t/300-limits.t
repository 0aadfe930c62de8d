# Cloudflare's two limits and session duration: `max_active` (total active users),
# `new_per_minute` (new users per minute) and `session=` (renewed by every request) beside the
# source's fixed `grant=`. Admission never exceeds either limit, and never queues while both
# have room: each edge is tested on both sides.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: max_active: admitted up to the limit, the next one waits
--- http_config
    smart_limit_zone shop size=1m max_active=3;
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200; body =~ /origin page/; header X-SL-Status =~ /^ADMITTED$/
B GET / => 200; header X-SL-Status =~ /^ADMITTED$/
# one place left under max_active: the third walks in, it does not queue
C GET / => 200; header X-SL-Status =~ /^ADMITTED$/
D GET / Accept: application/json => 503; json.status == "waiting"; json.position == 1; header X-SL-Status =~ /^WAITING$/
# the admitted keep passing; they do not take more places
repeat 5: A GET / => 200; header X-SL-Status =~ /^PASSED$/
repeat 5: C GET / => 200; header X-SL-Status =~ /^PASSED$/
D GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
control GET /control?room=shop => 200; json.rooms.0.active_sessions == 3; json.rooms.0.counters.admitted == 3

=== TEST 2: new_per_minute: the inflow limit queues below max_active, and not before it is reached
--- http_config
    smart_limit_zone shop size=1m max_active=100 new_per_minute=3;
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
    location = /clock { return 200 "$time_iso8601\n"; }
--- user_files
>>> index.html
origin page
--- steps
# new_per_minute counts calendar minutes: start well inside one (seconds 00-49)
until 20: clock GET /clock => 200; body =~ /T\d\d:\d\d:[0-4]\d/
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/
B GET / => 200; header X-SL-Status =~ /^ADMITTED$/
C GET / => 200; header X-SL-Status =~ /^ADMITTED$/
D GET / Accept: application/json => 503; json.position == 1; header X-SL-Status =~ /^WAITING$/
E GET / Accept: application/json => 503; json.position == 2
# admitted sessions keep passing: the inflow limit counts admissions, not requests
repeat 3: B GET / => 200; header X-SL-Status =~ /^PASSED$/
D GET / Accept: application/json => 503; json.position == 1; json.queue_length == 2

=== TEST 3: both limits set: the tighter one decides (max_active below new_per_minute)
--- http_config
    smart_limit_zone shop size=1m max_active=2 new_per_minute=10;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / => 200
C GET / Accept: application/json => 503; json.position == 1

=== TEST 4: session=: every request renews the session; it ends `session` after the last one
--- http_config
    # session=4s and a request every second: 3 s to spare between two of A's requests (with
    # session=2s and 0.8 s, until issue 30, a 1.2 s stall would have ended A's session).
    smart_limit_zone shop size=1m max_active=1 session=4s;
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/; cookie smart_limit_shop set
B GET / Accept: application/json => 503; json.position == 1
# A keeps going for longer than the session: every request renews it (the cookie is
# re-sealed about once a second), so A stays admitted and B keeps waiting.
sleep 1
A GET / => 200; header X-SL-Status =~ /^PASSED$/
sleep 1
A GET / => 200; header X-SL-Status =~ /^PASSED$/
sleep 1
A GET / => 200; header X-SL-Status =~ /^PASSED$/
sleep 1
A GET / => 200; header X-SL-Status =~ /^PASSED$/
sleep 1
A GET / => 200; header X-SL-Status =~ /^PASSED$/
B GET / Accept: application/json => 503; json.position == 1
# A stops; `session` after its last request its place frees and B, at the head, goes in
# (B polls until then).
until 8: B GET / => 200; header X-SL-Status =~ /^ADMITTED$/
# A's ticket has ended: A is a new user, and the room is full again.
A GET / Accept: application/json => 503; json.position == 1; header X-SL-Status =~ /^WAITING$/

=== TEST 5: grant=: fixed from admission, however busy the user is
--- http_config
    # grant=6s: A's requests at 1 s and 2 s are 4 s inside it (with grant=3s, until issue 30,
    # the one at 2 s had 1 s to spare); then A polls until the grant is over.
    smart_limit_zone shop size=1m max_active=1 grant=6s active_window=6s;
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/
B GET / Accept: application/json => 503; json.position == 1
sleep 1
A GET / => 200; header X-SL-Status =~ /^PASSED$/; cookie smart_limit_shop absent
sleep 1
A GET / => 200; header X-SL-Status =~ /^PASSED$/; cookie smart_limit_shop absent
# 6 s after admission A's grant is over although A was active all along (it keeps asking): A
# is a new user, and a new user never walks past the line: A queues behind B.
until 10: A GET / Accept: application/json => 503; json.position == 2; header X-SL-Status =~ /^WAITING$/

=== TEST 6: session= is Cloudflare's session duration: the control endpoint shows it, with the room's times (what scripts/rehearse --control reads)
--- http_config
    smart_limit_zone shop size=1m max_active=7 new_per_minute=30 session=5m;
    smart_limit_zone old size=1m grant=10m presence=12s active_window=90s;
--- config
    location = /control { smart_limit_control; }
--- steps
A GET /control => 200; json.rooms.0.room == "shop"; json.rooms.0.admission == "session"; json.rooms.0.admission_seconds == 300; json.rooms.0.max_active == 7; json.rooms.0.new_per_minute == 30
A GET /control?room=old => 200; json.rooms.0.admission == "grant"; json.rooms.0.admission_seconds == 600; json.rooms.0.max_active == 100; json.rooms.0.new_per_minute == null; json.rooms.0.presence_ms == 12000; json.rooms.0.active_window_ms == 90000; json.rooms.0.sync_ms == null
A GET /control?room=shop => 200; json.rooms.0.presence_ms == 20000; json.rooms.0.timeout_ms == 200

=== TEST 7: bad limit values are refused by nginx -t, naming the directive
--- http_config
    smart_limit_zone shop max_active=0;
--- must_fail
--- error_log
smart_limit_zone.*max_active "0"

=== TEST 8: new_per_minute must be a positive integer
--- http_config
    smart_limit_zone shop new_per_minute=ten;
--- must_fail
--- error_log
smart_limit_zone.*new_per_minute "ten"

=== TEST 9: grant and session exclude each other
--- http_config
    smart_limit_zone shop grant=1m session=1m;
--- must_fail
--- error_log
smart_limit_zone.*"grant=1m" and "session=1m" cannot be used together
