# Bypass rules and origin commands: `smart_limit_bypass VALUE` (non-empty and not "0": no
# ticket, not counted as admitted or active), and `X-Smart-Limit: revoke` from the origin,
# which ends the session at once, frees its place, deletes the ticket cookie and never reaches
# the client. Also the access-log variables.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: bypass from a map: staff pass a full room without a ticket and without counting
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    map $http_x_staff $sl_bypass {
        default  "";
        secret   1;
        zero     0;
    }
--- config
    location / {
        smart_limit shop;
        smart_limit_bypass $sl_bypass;
        add_header X-SL-Status $smart_limit_status always;
        add_header X-SL-Room $smart_limit_room always;
        root html;
    }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200; header X-SL-Status =~ /^ADMITTED$/
B GET / Accept: application/json => 503; json.position == 1
S GET / X-Staff: secret => 200; body =~ /origin page/; header X-SL-Status =~ /^BYPASS$/; header X-SL-Room =~ /^shop$/; header Set-Cookie absent
repeat 5: S GET / X-Staff: secret => 200; header X-SL-Status =~ /^BYPASS$/; header Set-Cookie absent
# "0" and "" do not bypass
Z GET / X-Staff: zero => 503; header X-SL-Status =~ /^WAITING$/
N GET / X-Staff: nobody => 503
op GET /control => 200; json.rooms.0.counters.bypassed == 6; json.rooms.0.counters.admitted == 1; json.rooms.0.active_sessions == 1; json.rooms.0.queue_length == 3
B GET / Accept: application/json => 503; json.position == 1

=== TEST 2: bypass from geo (by address), and a literal value
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    geo $sl_office {
        default      0;
        127.0.0.0/8  1;
    }
--- config
    location / {
        smart_limit shop;
        smart_limit_bypass $sl_office;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
    location /always/ {
        smart_limit shop;
        smart_limit_bypass yes;
        add_header X-SL-Status $smart_limit_status always;
        root html;
    }
    location /never/ {
        smart_limit shop;
        smart_limit_bypass 0;
        root html;
    }
--- user_files
>>> index.html
origin page
>>> always/index.html
always page
>>> never/index.html
never page
--- steps
repeat 3: A GET / => 200; header X-SL-Status =~ /^BYPASS$/; header Set-Cookie absent
B GET /always/ => 200; body =~ /always page/; header X-SL-Status =~ /^BYPASS$/
C GET /never/ => 200; cookie smart_limit_shop set
D GET /never/ => 503

=== TEST 3: the origin revokes a session: it ends at once, its place goes to the next in line
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $uri\n"; }
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
        location = /logout-loud { add_header X-Smart-Limit " REVOKE "; return 200 "bye\n"; }
        location = /hello { add_header X-Smart-Limit hello; return 200 "hello\n"; }
    }
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /control { smart_limit_control; }
--- steps
A GET /shop => 200; body =~ /origin \/shop/; header X-SL-Status =~ /^ADMITTED$/; cookie smart_limit_shop set
B GET /shop Accept: application/json => 503; json.position == 1
# an unknown command is dropped, nothing else happens
A GET /hello => 200; body =~ /hello/; header X-Smart-Limit absent; header X-SL-Status =~ /^PASSED$/; cookie smart_limit_shop absent
B GET /shop Accept: application/json => 503; json.position == 1
# the origin says revoke: the header is not passed on, the ticket is deleted
A GET /logout => 200; body =~ /bye/; header X-Smart-Limit absent; cookie smart_limit_shop deleted; header X-SL-Status =~ /^REVOKED$/
# the place is free at once: B, at the head, goes in
B GET /shop => 200; body =~ /origin \/shop/; header X-SL-Status =~ /^ADMITTED$/
A GET /shop Accept: application/json => 503; json.position == 1
op GET /control => 200; json.rooms.0.counters.revoked == 1; json.rooms.0.active_sessions == 1
# case and spaces do not matter
B GET /logout-loud => 200; header X-Smart-Limit absent; cookie smart_limit_shop deleted
A GET /shop => 200; header X-SL-Status =~ /^ADMITTED$/
op GET /control => 200; json.rooms.0.counters.revoked == 2
--- error_log
smart_limit zone "shop": session revoked by the origin

=== TEST 4: admitted and revoked by the same request: no ticket survives
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { add_header X-Smart-Limit revoke; return 200 "one-shot\n"; }
    }
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
--- follow_redirects: 0
--- steps
# The cookie check first (the ticket without a place), then the request the origin revokes.
A GET /once => 307; cookie smart_limit_shop set; header X-SL-Status =~ /^NEW$/
A GET /once => 200; body =~ /one-shot/; header X-Smart-Limit absent; cookie smart_limit_shop deleted; header Set-Cookie !~ /^smart_limit_shop=[^;]/; header X-SL-Status =~ /^REVOKED$/
# the room is empty again
B GET /once => 307
B GET /once => 200; header X-SL-Status =~ /^REVOKED$/

=== TEST 5: revoke for a request under the limit_req rate (not decided by the room): matched by its ticket
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    # only requests with X-Burst are rate limited (an empty key is never limited)
    limit_req_zone $http_x_burst zone=burst:1m rate=1r/m;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $uri\n"; }
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
--- config
    location / {
        limit_req zone=burst;
        limit_req_status 512;
        error_page 512 = @room;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location @room {
        smart_limit shop;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
--- steps
A GET /a X-Burst: 1 => 200; cookie smart_limit_shop absent
A GET /a X-Burst: 1 => 200; cookie smart_limit_shop set
B GET /a X-Burst: 1 | Accept: application/json => 503; json.position == 1
# under the rate: straight to the origin; the filter still ends A's session
A GET /logout => 200; body =~ /bye/; header X-Smart-Limit absent; cookie smart_limit_shop deleted
B GET /a X-Burst: 1 => 200; cookie smart_limit_shop set

=== TEST 6: a response the module had no part in keeps its header (e.g. an inner server)
--- http_config
    smart_limit_zone shop size=1m;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { add_header X-Smart-Limit revoke; return 200 "plain\n"; }
    }
--- config
    location / { proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
--- steps
C GET /plain => 200; header X-Smart-Limit =~ /^revoke$/; header Set-Cookie absent

=== TEST 7: the access-log variables: status, position, room
--- http_config
    smart_limit_zone shop size=1m max_active=1;
    log_format room '$smart_limit_status|$smart_limit_position|$smart_limit_room|$uri';
    access_log logs/room.log room;
--- config
    location / {
        smart_limit shop;
        add_header X-SL "$smart_limit_status|$smart_limit_position|$smart_limit_room" always;
        root html;
    }
    location /free/ {
        add_header X-SL "$smart_limit_status|$smart_limit_position|$smart_limit_room" always;
        root html;
    }
--- user_files
>>> index.html
origin page
>>> free/index.html
free page
--- steps
A GET / => 200; header X-SL =~ /^ADMITTED\|\|shop$/
B GET / => 503; header X-SL =~ /^WAITING\|1\|shop$/
C GET / => 503; header X-SL =~ /^WAITING\|2\|shop$/
A GET / => 200; header X-SL =~ /^PASSED\|\|shop$/
C GET /free/ => 200; header X-SL =~ /^\|\|$/

=== TEST 8: smart_limit_bypass twice is refused
--- config
    location / { smart_limit_bypass 1; smart_limit_bypass 0; }
--- must_fail
--- error_log
"smart_limit_bypass" is duplicate
