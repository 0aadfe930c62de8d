# [S1]: drop-in behind stock limit_req. Overflow (status 512) goes to the room; traffic under
# the rate limit never touches it; an admitted client gets every request answered, also the
# ones that overflow the rate limit ([S5]).

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: under the rate limit the room is never consulted; overflow goes to the room
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    log_format room '$request $status [$smart_limit_status]';
    access_log logs/room.log room;
--- config
    location / {
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
--- user_files
>>> index.html
origin page
>>> app.css
body{}
>>> app.js
1;
--- steps
# First request is under the limit: plain origin answer, no ticket.
A GET / => 200; body =~ /origin page/; cookie smart_limit_shop absent
# Everything after overflows (1 r/m): A is the first in the room, admitted at once.
A GET /app.css => 200; body =~ /body/; cookie smart_limit_shop set
# Every asset of A's page loads although each request overflows the rate limit.
repeat 10: A GET /app.js => 200
repeat 5: A GET / => 200; body =~ /origin page/
# B overflows too and waits; A keeps going.
B GET / => 503; cookie smart_limit_shop set
B GET / Accept: application/json => 503; json.position == 1
A GET /app.css => 200

=== TEST 2: the access log sees no decision for traffic under the limit
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    log_format room '$uri $status [$smart_limit_status]';
--- config
    access_log logs/room.log room;
    location / {
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
    location = /room.log { alias logs/room.log; }
--- user_files
>>> index.html
origin page
--- steps
A GET /index.html => 200
A GET /index.html => 200
B GET /index.html => 503
# nginx writes a request's access log line after its response has gone: poll for the lines
# rather than sleep.
until 3: C GET /room.log => 200; body =~ /^\/index.html 200 \[-\]$/m; body =~ /^\/index.html 200 \[ADMITTED\]$/m; body =~ /^\/index.html 503 \[WAITING\]$/m
