# Every bad value fails `nginx -t` with a message that names the directive and the value.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: max_active must be a positive integer
--- http_config
    smart_limit_zone shop max_active=abc;
--- config
--- must_fail
--- error_log
\[emerg\].*"smart_limit_zone" invalid max_active "abc"

=== TEST 2: unknown zone parameter
--- http_config
    smart_limit_zone shop colour=red;
--- config
--- must_fail
--- error_log
"smart_limit_zone" unknown parameter "colour=red"

=== TEST 3: grant and session together
--- http_config
    smart_limit_zone shop grant=10m session=5m;
--- config
--- must_fail
--- error_log
"smart_limit_zone".*grant.*session

=== TEST 4: a bad time
--- http_config
    smart_limit_zone shop presence=soon;
--- config
--- must_fail
--- error_log
"smart_limit_zone" invalid presence "soon"

=== TEST 5: a size below the minimum
--- http_config
    smart_limit_zone shop size=1k;
--- config
--- must_fail
--- error_log
"smart_limit_zone" invalid size "1k"

=== TEST 6: a zone declared twice
--- http_config
    smart_limit_zone shop;
    smart_limit_zone shop;
--- config
--- must_fail
--- error_log
"smart_limit_zone" zone "shop" is already declared

=== TEST 7: smart_limit names a zone nobody declared
--- http_config
    smart_limit_zone shop;
--- config
    location / { smart_limit shopp; }
--- must_fail
--- error_log
"smart_limit" names unknown zone "shopp"

=== TEST 8: the waiting status must be one of 200, 202, 429, 503
--- http_config
    smart_limit_zone shop;
--- config
    location / { smart_limit shop; smart_limit_status 404; }
--- must_fail
--- error_log
"smart_limit_status" invalid value "404"

=== TEST 9: a missing key file
--- http_config
    smart_limit_zone shop;
    smart_limit_secret /nonexistent/smart_limit.keys;
--- config
--- must_fail
--- error_log
"smart_limit_secret" cannot read "/nonexistent/smart_limit.keys"

=== TEST 10: a key file with a short key names the line
--- http_config
    smart_limit_zone shop;
    smart_limit_secret $TEST_NGINX_HTML_DIR/bad.keys;
--- user_files
>>> bad.keys
# comment
00010203
--- config
--- must_fail
--- error_log
"smart_limit_secret" ".*bad.keys": .*line 2

=== TEST 11: store=redis needs redis=
--- http_config
    smart_limit_zone shop store=redis;
--- config
--- must_fail
--- error_log
"smart_limit_zone".*redis=

=== TEST 12: smart_limit at the wrong level and with too many arguments
--- http_config
    smart_limit_zone shop;
--- config
    location / { smart_limit shop other; }
--- must_fail
--- error_log
invalid number of arguments in "smart_limit" directive

=== TEST 13: smart_limit_refresh out of range
--- http_config
    smart_limit_zone shop;
--- config
    location / { smart_limit shop; smart_limit_refresh 0s; }
--- must_fail
--- error_log
"smart_limit_refresh" invalid value "0s"

=== TEST 14: a zone named off is refused (smart_limit off; is the switch)
--- http_config
    smart_limit_zone off size=1m;
--- config
--- must_fail
--- error_log
"smart_limit_zone" zone name "off" is reserved: "smart_limit off;" switches the room off

=== TEST 15: a rate zone named off is refused the same way
--- http_config
    smart_limit_rate_zone off rate=10r/s;
--- config
--- must_fail
--- error_log
zone name "off" is reserved

=== TEST 16: a good configuration with every directive is accepted
--- http_config
    smart_limit_zone shop size=64k max_active=10 new_per_minute=30 session=5m presence=30s active_window=2m;
    smart_limit_zone other grant=1h;
--- config
    smart_limit_status 429;
    location / { smart_limit shop; smart_limit_refresh 20s; smart_limit_bypass $arg_pass; root html; }
    location /other/ { smart_limit other; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET /?pass=1 => 200
C GET / => 200
