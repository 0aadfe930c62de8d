# Scheduled events ([S18]): `smart_limit_event` on a shared-memory room: nginx -t's checks, the
# pre-queue answer (JSON and page), the start's lottery over 500 clients from 500 addresses,
# the event's overrides while it runs, and the room's own settings after its end.

use lib 't/lib';
use SmartLimit::Test;

BEGIN {
    # The lottery block's start: late enough for nginx to start and 500 clients to take
    # pre-queue places (about 1,000 requests) first.
    $ENV{TEST_NGINX_LOTTERY_START} = time() + 25;
}

run_tests();

__DATA__

=== TEST 1: nginx -t refuses overlapping events of one room, naming both
--- http_config
    smart_limit_zone shop size=1m;
    smart_limit_event drop room=shop start=2030-01-01T10:00:00Z end=2030-01-01T12:00:00Z;
    smart_limit_event sale room=shop prequeue=2030-01-01T11:30:00Z start=2030-01-01T13:00:00Z;
--- config
    location / { smart_limit shop; return 200; }
--- must_fail
--- error_log
"smart_limit_event" events "drop" and "sale" of room "shop" overlap

=== TEST 2: nginx -t refuses an event of an unknown room, and an end before the start
--- http_config
    smart_limit_zone shop size=1m;
    smart_limit_event drop room=shoe start=@1900000000;
--- config
    location / { smart_limit shop; return 200; }
--- must_fail
--- error_log
event "drop": unknown room "shoe"

=== TEST 3: nginx -t refuses an end before the start, naming the event
--- http_config
    smart_limit_zone shop size=1m;
    smart_limit_event drop room=shop start=2030-01-01T10:00:00Z end=2030-01-01T09:00:00Z;
--- config
    location / { smart_limit shop; return 200; }
--- must_fail
--- error_log
"smart_limit_event" event "drop": end \(2030-01-01T09:00:00Z\) is not after start \(2030-01-01T10:00:00Z\)

=== TEST 4: page= names a template nginx -t reads and checks: a file it cannot read is refused, naming the event
--- http_config
    smart_limit_zone shop size=1m;
    smart_limit_event drop room=shop start=@1900000000 page=/nonexistent/drop.html;
--- config
    location / { smart_limit shop; return 200; }
--- must_fail
--- error_log
"smart_limit_event" event "drop": page= cannot read "/nonexistent/drop.html"

=== TEST 5: the pre-queue: everyone takes a place and gets the pre-queue answer, nobody is let in
--- http_config
    smart_limit_zone shop size=1m max_active=5;
    smart_limit_event drop room=shop prequeue=@1 start=@4102444800;
--- config
    location / {
        smart_limit shop;
        add_header X-Event $smart_limit_event always;
        add_header X-Status $smart_limit_status always;
        root html;
    }
--- user_files
>>> index.html
origin
--- steps
A GET / Accept: application/json => 503; redirects == 1; json.status == "prequeue"; json.starts_at == 4102444800; json.position == null; json.queue_length == 1; header X-Event =~ /^drop$/; header X-Status =~ /^WAITING$/; header Retry-After =~ /^\d+$/
B GET / Accept: application/json => 503; json.status == "prequeue"; json.queue_length == 2
A GET / Accept: application/json => 503; json.status == "prequeue"; json.queue_length == 2
A GET / Accept: text/html => 503; header Content-Type =~ /text\/html/; body =~ /Opening soon/; body =~ /datetime="2100-01-01T00:00:00Z"/; body =~ /id="countdown"/
A GET / Accept: text/html | Accept-Language: ja => 503; body =~ /まもなく受付を開始します/

=== TEST 6: while the event runs its limits apply; after its end, the room's own
--- http_config
    smart_limit_zone shop size=1m max_active=5;
    smart_limit_event drop room=shop prequeue=@1 start=@2 end=@4102444800 max_active=1;
    smart_limit_zone later size=1m max_active=1;
    smart_limit_event over room=later prequeue=@1 start=@2 end=@3;
--- config
    location / {
        smart_limit shop;
        add_header X-Event $smart_limit_event always;
        root html;
    }
    location /later/ {
        smart_limit later;
        add_header X-Event $smart_limit_event always;
        root html;
    }
--- user_files
>>> index.html
origin
>>> later/index.html
later
--- steps
A GET / => 200; body =~ /origin/; header X-Event =~ /^drop$/
B GET / Accept: application/json => 503; json.status == "waiting"; json.position == 1; header X-Event =~ /^drop$/
C GET /later/ => 200; header X-Event absent
D GET /later/ Accept: application/json => 503; json.status == "waiting"

=== TEST 7: the start's lottery: 500 pre-queued clients from 500 addresses get every position once, in an order unrelated to arrival; a later client is behind them all
--- http_config
    smart_limit_zone shop size=4m max_active=1;
    smart_limit_event drop room=shop prequeue=@1 start=@$TEST_NGINX_LOTTERY_START;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- timeout: 60
--- steps
sh 90: perl t/lib/event_probe.pl --nginx $TEST_NGINX_PORT --start $TEST_NGINX_LOTTERY_START --clients 500 => /prequeued 500 admitted 1 distinct 500 min 1 max 500 rho (-?0\.\d+) late 501/ as $RHO
# |rho| < 0.25: over five standard deviations of chance for 500 (1/sqrt(499) = 0.045); a
# pre-queue in arrival order gives rho near 1. (0.15 until issue 30: 3.3 standard deviations,
# about one run in 1,200 failing by chance alone.)
sh perl -e 'exit(abs($ARGV[0]) < 0.25 ? 0 : 1)' -- $RHO

=== TEST 8: the event in the metrics and in the control endpoint: its phase, times and limits
--- http_config
    smart_limit_zone shop size=1m max_active=5;
    smart_limit_event drop room=shop prequeue=@1 start=@1900000000 max_active=50;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin
--- steps
M GET /m => 200; body =~ /smart_limit_event_phase\{room="shop",event="drop",phase="prequeue"\} 1\n/; body =~ /smart_limit_event_phase\{room="shop",event="drop",phase="running"\} 0\n/; body =~ /smart_limit_event_start_seconds\{room="shop",event="drop"\} 1900000000\n/; body =~ /smart_limit_event_max_active\{room="shop",event="drop"\} 50\n/; body !~ /smart_limit_event_end_seconds\{/
M GET /control => 200; json.rooms.0.events.0.name == "drop"; json.rooms.0.events.0.phase == "prequeue"; json.rooms.0.events.0.start == 1900000000; json.rooms.0.events.0.max_active == 50; json.rooms.0.events.0.end == null
--- no_error_log
[error]
