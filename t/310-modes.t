# Room modes, switched at run time through the control endpoint (`smart_limit_control`):
# fifo (default), random (a lottery among the clients present), passthrough (admit all, still
# count), reject (maintenance page, nobody let in), queue_all (everyone waits, new arrivals
# included); and `smart_limit_dry_run` (decides, logs, always passes), on/off or by variable.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: the control endpoint shows the rooms and switches a mode; mode=default goes back
--- http_config
    smart_limit_zone shop size=1m max_active=5;
    smart_limit_zone other size=1m;
--- config
    location = /control { smart_limit_control; }
--- steps
op GET /control => 200; header Content-Type =~ /^application\/json/; header Cache-Control =~ /no-store/; json.rooms.0.room == "shop"; json.rooms.0.mode == "fifo"; json.rooms.0.configured_mode == "fifo"; json.rooms.0.mode_overridden == false; json.rooms.0.up == true; json.rooms.0.store == "shm"; json.rooms.1.room == "other"; json.updated_at > 1600000000
op POST /control?room=shop&mode=reject => 200; json.rooms.0.room == "shop"; json.rooms.0.mode == "reject"; json.rooms.0.mode_overridden == true; json.rooms.1 absent
op GET /control => 200; json.rooms.0.mode == "reject"; json.rooms.1.mode == "fifo"
op GET /control?room=other => 200; json.rooms.0.room == "other"; json.rooms.0.mode == "fifo"
op POST /control?mode=queue_all&room=shop => 200; json.rooms.0.mode == "queue_all"
op POST /control?room=shop&mode=default => 200; json.rooms.0.mode == "fifo"; json.rooms.0.mode_overridden == false
--- error_log
smart_limit zone "shop": mode switched to reject by the control endpoint
smart_limit zone "shop": mode switched to default by the control endpoint

=== TEST 2: the control endpoint refuses what it does not understand
--- http_config
    smart_limit_zone shop size=1m;
--- config
    location = /control { smart_limit_control; }
--- steps
op POST /control => 400; json.error =~ /room=NAME and mode=MODE/
op POST /control?room=shop => 400
op POST /control?room=nope&mode=fifo => 404; json.error =~ /no room "nope"/
op POST /control?room=shop&mode=lottery => 400; json.error =~ /unknown mode "lottery": expected one of fifo, random, passthrough, reject, queue_all, or default/
op POST /control?room=shop&mode=fifo&colour=red => 400; json.error =~ /unknown parameter "colour"/
op PUT /control?room=shop&mode=fifo => 405; header Allow =~ /GET, HEAD, POST/
op DELETE /control => 400; json.error =~ /DELETE needs room=NAME and event=NAME/
op GET /control?room=shop&mode=reject => 405; json.error =~ /needs POST/
op GET /control?room=nope => 404
op GET /control => 200; json.rooms.0.mode == "fifo"

=== TEST 3: passthrough admits everyone, and still counts them
--- http_config
    smart_limit_zone shop size=1m max_active=1;
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
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/
B GET / Accept: application/json => 503; json.position == 1
op POST /control?room=shop&mode=passthrough => 200
B GET / => 200; body =~ /origin page/; header X-SL-Status =~ /^ADMITTED$/; cookie smart_limit_shop set
C GET / => 200; header X-SL-Status =~ /^ADMITTED$/; cookie smart_limit_shop set
D GET / => 200; header X-SL-Status =~ /^ADMITTED$/
op GET /control => 200; json.rooms.0.counters.admitted == 4; json.rooms.0.active_sessions == 4; json.rooms.0.queue_length == 0
# back to fifo: the room is over its limit, newcomers wait; the admitted keep passing
op POST /control?room=shop&mode=fifo => 200
E GET / Accept: application/json => 503; json.position == 1
C GET / => 200; header X-SL-Status =~ /^PASSED$/

=== TEST 4: reject closes the room for everyone: the maintenance answer, nobody let in
--- http_config
    smart_limit_zone shop size=1m max_active=1;
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
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
op POST /control?room=shop&mode=reject => 200
C GET / => 503; header Retry-After =~ /^\d+$/; header Content-Type =~ /text\/html/; body =~ /Temporarily closed/; body !~ /origin page/; header X-SL-Status =~ /^REJECTED$/; cookie smart_limit_shop absent
C GET / Accept: application/json => 503; json.status == "closed"; json.position == null; header Retry-After =~ /^\d+$/
C GET / Accept-Language: ja => 503; body =~ /受付を一時停止/
# admitted sessions are turned away too (their ticket is kept), and so is the line
A GET / => 503; body =~ /Temporarily closed/; header X-SL-Status =~ /^REJECTED$/; cookie smart_limit_shop absent
B GET / Accept: application/json => 503; json.status == "closed"
op GET /control => 200; json.rooms.0.counters.rejected == 5; json.rooms.0.counters.admitted == 1
# reopened: the ticket admits again, the line is as it was
op POST /control?room=shop&mode=default => 200
A GET / => 200; body =~ /origin page/; header X-SL-Status =~ /^PASSED$/
B GET / Accept: application/json => 503; json.status == "waiting"; json.position == 1

=== TEST 5: queue_all: everyone waits, new arrivals included; admitted sessions carry on
--- http_config
    smart_limit_zone shop size=1m max_active=5;
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
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/
op POST /control?room=shop&mode=queue_all => 200
B GET / Accept: application/json => 503; json.status == "waiting"; json.queue_length == 1; json.eta_known == false; header X-SL-Status =~ /^WAITING$/
C GET / Accept: application/json => 503; json.queue_length == 2
repeat 3: B GET / Accept: application/json => 503; json.status == "waiting"
B GET / => 503; body =~ /The site is busy right now/
A GET / => 200; header X-SL-Status =~ /^PASSED$/
# let the line go in: with four places free, both may take one as they poll
op POST /control?room=shop&mode=fifo => 200
C GET / => 200; header X-SL-Status =~ /^ADMITTED$/
B GET / => 200; header X-SL-Status =~ /^ADMITTED$/

=== TEST 6: random: a lottery among the clients present, not arrival order
--- http_config
    smart_limit_zone shop size=1m max_active=1 active_window=1s;
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
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
C GET / Accept: application/json => 503; json.position == 2
# A leaves: one place frees after active_window. In fifo only B, the head, may take it.
sleep 1.2
repeat 10: C GET / Accept: application/json => 503; json.position == 2
op POST /control?room=shop&mode=random => 200; json.rooms.0.mode == "random"
# In a lottery every poll of a client present has an equal chance (1 place, 2 present:
# one in two), so C, second in line, soon wins the place before B.
until 10: C GET / => 200; header X-SL-Status =~ /^ADMITTED$/
B GET / Accept: application/json => 503; json.status == "waiting"; json.position == null; json.queue_length == 1

=== TEST 7: dry run: the room decides and counts, the decision is logged, the request passes
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location / {
        smart_limit shop;
        smart_limit_dry_run on;
        add_header X-SL-Status $smart_limit_status always;
        add_header X-SL-Position $smart_limit_position always;
        root html;
    }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/; cookie smart_limit_shop set
B GET / => 200; body =~ /origin page/; header X-SL-Status =~ /^WAITING_DRY_RUN$/; header X-SL-Position =~ /^1$/; cookie smart_limit_shop set
# B keeps its single place, as it would in the real room
repeat 3: B GET / => 200; header X-SL-Status =~ /^WAITING_DRY_RUN$/; header X-SL-Position =~ /^1$/
C GET / => 200; header X-SL-Status =~ /^WAITING_DRY_RUN$/; header X-SL-Position =~ /^2$/
A GET / => 200; header X-SL-Status =~ /^PASSED$/
op GET /control => 200; json.rooms.0.queue_length == 2; json.rooms.0.counters.waiting_answers == 5; json.rooms.0.counters.admitted == 1
op POST /control?room=shop&mode=reject => 200
D GET / => 200; body =~ /origin page/; header X-SL-Status =~ /^REJECTED_DRY_RUN$/
A GET / => 200; header X-SL-Status =~ /^REJECTED_DRY_RUN$/
--- error_log
\[warn\].*smart_limit zone "shop": dry run, would wait \(position 1, 1 in line\)
\[warn\].*smart_limit zone "shop": dry run, would wait \(position 2, 2 in line\)
\[error\].*smart_limit zone "shop": dry run, would refuse \(room closed\)

=== TEST 8: dry run by variable (map): on for some requests, off for the others
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    map $http_x_rehearsal $sl_dry {
        default off;
        yes     on;
    }
--- config
    location / {
        smart_limit shop;
        smart_limit_dry_run $sl_dry;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / X-Rehearsal: yes => 200; header X-SL-Status =~ /^WAITING_DRY_RUN$/
B GET / => 503; header X-SL-Status =~ /^WAITING$/
B GET / X-Rehearsal: no => 503
C GET / X-Rehearsal: yes => 200; header X-SL-Status =~ /^WAITING_DRY_RUN$/

=== TEST 9: dry run inherits from server level, a location can turn it off
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    smart_limit shop;
    smart_limit_dry_run on;
    location / { root html; }
    location /strict/ { smart_limit_dry_run off; root html; }
--- user_files
>>> index.html
origin page
>>> strict/index.html
strict page
--- steps
A GET / => 200
B GET / => 200; body =~ /origin page/
B GET /strict/ => 503

=== TEST 10: a switched mode is kept in the zone: every worker sees it, and it survives a reload
--- workers: 2
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location / { smart_limit shop; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin page
--- steps
op POST /control?room=shop&mode=reject => 200
parallel 6 p GET / Accept: application/json => 503; json.status == "closed"
reload
op GET /control => 200; json.rooms.0.mode == "reject"
X GET / => 503; body =~ /Temporarily closed/
op POST /control?room=shop&mode=default => 200
X GET / => 200

=== TEST 11: access to the control endpoint is the operator's: allow/deny apply
--- http_config
    smart_limit_zone shop size=1m;
--- config
    location = /control { allow 10.0.0.1; deny all; smart_limit_control; }
--- steps
op POST /control?room=shop&mode=reject => 403
op GET /control => 403

=== TEST 12: smart_limit_control takes no argument
--- config
    location = /control { smart_limit_control on; }
--- must_fail
--- error_log
invalid number of arguments in "smart_limit_control" directive

=== TEST 13: smart_limit_control and smart_limit_metrics cannot share a location
--- config
    location = /x { smart_limit_metrics; smart_limit_control; }
--- must_fail
--- error_log
"smart_limit_control" is duplicate or combined with smart_limit_metrics

=== TEST 14: smart_limit_dry_run refuses a bad value
--- config
    location / { smart_limit_dry_run maybe; }
--- must_fail
--- error_log
"smart_limit_dry_run" invalid value "maybe": expected on, off, or a value with variables

=== TEST 15: smart_limit_dry_run twice is refused
--- config
    location / { smart_limit_dry_run on; smart_limit_dry_run off; }
--- must_fail
--- error_log
"smart_limit_dry_run" is duplicate

=== TEST 16: a Redis room: the switch goes to Redis (the request waits for it), every node follows
--- instances: 2
--- redis
--- http_config
    smart_limit_zone shop size=1m max_active=1 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit shop; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin page
--- steps
op POST /control?room=shop&mode=reject @1 => 200; json.rooms.0.mode == "reject"; json.rooms.0.store == "redis"
A GET / @2 Accept: application/json => 503; json.status == "closed"
A GET / @1 Accept: application/json => 503; json.status == "closed"
op GET /control @2 => 200; json.rooms.0.mode == "reject"
op POST /control?room=shop&mode=default @2 => 200; json.rooms.0.mode == "fifo"
A GET / @1 => 200; body =~ /origin page/
B GET / @2 Accept: application/json => 503; json.status == "waiting"; json.position == 1
--- error_log
smart_limit zone "shop": mode switched to reject by the control endpoint

=== TEST 17: a Redis room whose Redis is down: the switch fails with 503, the worker carries on
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT timeout=200ms;
--- config
    location = /control { smart_limit_control; }
--- steps
redis-stop
op POST /control?room=shop&mode=reject => 503; json.error =~ /store/
op GET /control => 200; json.rooms.0.mode == "fifo"
redis-start
until 5: op POST /control?room=shop&mode=reject => 200; json.rooms.0.mode == "reject"
--- error_log
smart_limit zone "shop": cannot switch the mode to reject
