# Scheduled events ([S18]) made at run time through `smart_limit_control`: created (POST with
# the parameters of smart_limit_event, checked as nginx -t checks them), listed (GET), and
# cancelled (DELETE, also a configured event); kept across a reload; on a fleet (central
# Redis, sync=) the same for every node. And `page=`: an event's own waiting page.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: create an event at run time: every worker gives the pre-queue answer; a reload keeps it; cancelling it gives the room back
--- workers: 2
--- http_config
    smart_limit_zone shop size=1m max_active=3 flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin
--- steps
op POST /control?room=shop&event=drop&prequeue=@1&start=2100-01-01T00%3A00%3A00Z&max_active=50 => 200; json.rooms.0.events.0.name == "drop"; json.rooms.0.events.0.source == "control"; json.rooms.0.events.0.phase == "prequeue"; json.rooms.0.events.0.start == 4102444800; json.rooms.0.events.0.max_active == 50
# Every worker reads the room's table again within 100 ms of a change.
sleep 0.2
repeat 4: A GET / Connection: close | Accept: application/json => 503; json.status == "prequeue"; json.starts_at == 4102444800
op GET /control?room=shop => 200; json.rooms.0.events.0.name == "drop"; json.rooms.0.events.1 absent
reload
op GET /control => 200; json.rooms.0.events.0.name == "drop"; json.rooms.0.events.0.source == "control"
B GET / Connection: close | Accept: application/json => 503; json.status == "prequeue"
op DELETE /control?room=shop&event=drop => 200; json.rooms.0.events.0 absent
sleep 0.2
# The pre-queue's places are in line still (A first): A is let in on either worker.
repeat 4: A GET / Connection: close | Accept: application/json => 200; body =~ /origin/
op DELETE /control?room=shop&event=drop => 404; json.error =~ /no event "drop"/
--- error_log
smart_limit zone "shop": event "drop" created by the control endpoint
smart_limit zone "shop": event "drop" cancelled by the control endpoint

=== TEST 2: a created event meets the checks of nginx -t, and bad requests are told why
--- http_config
    smart_limit_zone shop size=1m;
    smart_limit_event sale room=shop start=2100-01-01T10:00:00Z end=2100-01-01T12:00:00Z;
--- config
    location / { smart_limit shop; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin
--- steps
op POST /control?room=shop&event=drop&prequeue=2100-01-01T11:00:00Z&start=2100-01-01T13:00:00Z => 409; json.error =~ /events "sale" and "drop" of room "shop" overlap/
op POST /control?room=shop&event=sale&start=2100-02-01T10:00:00Z => 409; json.error =~ /"sale" is defined twice/
op POST /control?room=shop&event=drop&start=tomorrow => 400; json.error =~ /event "drop": invalid start "tomorrow"/
op POST /control?room=shop&event=drop&start=@4102444800&end=@4102444000 => 400; json.error =~ /end .* is not after start/
op POST /control?room=shop&event=drop&start=@4102444800&page=drop.html => 400; json.error =~ /page= must be an absolute path/
op POST /control?room=shop&event=drop&start=@4102444800&page=/nonexistent/drop.html => 400; json.error =~ /cannot read/
op POST /control?room=shop&event=drop&start=@4102444800&colour=red => 400; json.error =~ /unknown parameter "colour"/
op POST /control?room=shop&event=drop => 400; json.error =~ /start= is required/
op POST /control?room=nope&event=drop&start=@4102444800 => 404
op GET /control?room=shop&event=drop => 405
op PUT /control?room=shop&event=drop => 405; header Allow =~ /DELETE/
op GET /control => 200; json.rooms.0.events.0.name == "sale"; json.rooms.0.events.0.source == "config"; json.rooms.0.events.1 absent

=== TEST 3: a configured event cancelled at run time: the room's own settings at once, and after a reload
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off;
    smart_limit_event sale room=shop prequeue=@1 start=@4102444800;
--- config
    location / { smart_limit shop; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin
--- steps
A GET / Accept: application/json => 503; json.status == "prequeue"
op DELETE /control?room=shop&event=sale => 200; json.rooms.0.events.0 absent
A GET / => 200; body =~ /origin/
reload
B GET / Accept: application/json => 503; json.status == "waiting"; json.position == 1
# Its time is free again: a new event may take it.
op POST /control?room=shop&event=sale2&prequeue=@1&start=@4102444800 => 200; json.rooms.0.events.0.name == "sale2"
C GET / Accept: application/json => 503; json.status == "prequeue"

=== TEST 4: page=: the event's own waiting page while it is in force, from the configuration and from the control endpoint
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off;
    smart_limit_event drop room=shop prequeue=@1 start=@4102444800 page=$TEST_NGINX_HTML_DIR/drop.tmpl;
    smart_limit_zone other size=1m max_active=1 flood=off;
--- config
    location / { smart_limit shop; smart_limit_page $TEST_NGINX_HTML_DIR/room.tmpl; root html; }
    location /other/ { smart_limit other; smart_limit_page $TEST_NGINX_HTML_DIR/room.tmpl; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin
>>> other/index.html
other
>>> drop.tmpl
<html><body><h1>The drop opens at {{starts_at}}</h1></body></html>
>>> sale.tmpl
<html><body><h1>Sale line: you are number {{position}}</h1></body></html>
>>> room.tmpl
<html><body><h1>Room page {{position}}</h1></body></html>
--- steps
A GET / => 503; body =~ /The drop opens at 4102444800/
op POST /control?room=other&event=sale&start=@1&page=$TEST_NGINX_HTML_DIR/sale.tmpl => 200; json.rooms.0.events.0.name == "sale"
B GET /other/ => 200; body =~ /other/
C GET /other/ => 503; body =~ /Sale line: you are number 1/
op DELETE /control?room=other&event=sale => 200
C GET /other/ => 503; body =~ /Room page 1/

=== TEST 5: central Redis: an event created on one node is in force on the other; cancelled on the other, gone from the first
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=1m max_active=5 flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit shop; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- steps
op POST /control?room=shop&event=drop&prequeue=@1&start=@4102444800 @1 => 200; json.rooms.0.events.0.name == "drop"
# The other node copies the fleet's table within a second.
until 5: op GET /control @2 => 200; json.rooms.0.events.0.name == "drop"; json.rooms.0.events.0.source == "control"
A GET / @2 Accept: application/json => 503; json.status == "prequeue"
# The second node's table is the fleet's: an overlapping event is refused there too.
op POST /control?room=shop&event=sale&prequeue=@1&start=@4102444900 @2 => 409; json.error =~ /overlap/
op DELETE /control?room=shop&event=drop @2 => 200
until 5: op GET /control @1 => 200; json.rooms.0.events.0 absent
A GET / @1 => 200; body =~ /origin/
--- no_error_log
[error]

=== TEST 6: sync=: an event created on one node is in force on the other
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / { smart_limit shop; root html; }
    location = /control { smart_limit_control; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- steps
op POST /control?room=shop&event=drop&prequeue=@1&start=@4102444800 @1 => 200; json.rooms.0.events.0.name == "drop"
until 5: op GET /control @2 => 200; json.rooms.0.events.0.name == "drop"
A GET / @2 Accept: application/json => 503; json.status == "prequeue"
op DELETE /control?room=shop&event=drop @1 => 200
until 5: op GET /control @2 => 200; json.rooms.0.events.0 absent
until 5: A GET / @2 => 200; body =~ /origin/
--- no_error_log
[error]
