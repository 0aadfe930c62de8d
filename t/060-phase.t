# The room's handler runs in the PREACCESS phase (beside limit_req), so it gates every request
# of its location whatever the access phase decides: `satisfy any` with a passing `allow`, or
# an access module that says OK, cannot skip the room. Access rules still apply to admitted
# requests after the room.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: satisfy any with a passing allow: the room still gates, newcomers still wait
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    log_format room '$request $status [$smart_limit_status]';
    access_log logs/room.log room;
--- config
    location / {
        satisfy any;
        allow 127.0.0.1;
        deny all;
        auth_basic "members";
        auth_basic_user_file html/htpasswd;
        smart_limit shop;
        root html;
    }
--- user_files
>>> index.html
origin page
>>> htpasswd
nobody:$apr1$xxxxxxxx$yyyyyyyyyyyyyyyyyyyyyy
--- steps
A GET / => 200; body =~ /origin page/; cookie smart_limit_shop set
B GET / => 503; cookie smart_limit_shop set
B GET / Accept: application/json => 503; json.position == 1; json.status == "waiting"
C GET / Accept: application/json => 503; json.position == 2
A GET / => 200

=== TEST 2: satisfy all: an admitted ticket still meets deny; a waiting one waits first
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / {
        satisfy all;
        deny all;
        smart_limit shop;
        root html;
    }
--- user_files
>>> index.html
origin page
--- steps
# The room decides first (A is admitted), then the access phase denies.
A GET / => 403; cookie smart_limit_shop set
A GET / => 403
B GET / Accept: application/json => 503; json.position == 1

=== TEST 3: satisfy any with allow for everyone: without a room nothing would wait; with it, the line holds
--- http_config
    smart_limit_zone shop size=1m max_active=2 $TEST_NGINX_STORE;
--- config
    location / {
        satisfy any;
        allow all;
        smart_limit shop;
        root html;
    }
    location /open/ {
        satisfy any;
        allow all;
        alias html/;
    }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / => 200
parallel 5 p GET / Accept: application/json => 503; json.status == "waiting"
repeat 5: Z GET /open/ => 200; cookie smart_limit_shop absent

=== TEST 4: the room runs in PREACCESS before limit_req of the same location (not in ACCESS after it)
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / {
        limit_req zone=perip;
        smart_limit shop;
        root html;
    }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200; cookie smart_limit_shop set
# B is over the rate limit too, but the room answers first: its JSON, not limit_req's page.
B GET / Accept: application/json => 503; json.status == "waiting"; json.position == 1
# An admitted client then meets limit_req, which runs after the room.
A GET / => 503; body =~ /503 Service/
