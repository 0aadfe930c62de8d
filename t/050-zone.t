# The zone: shared by all workers, survives `nginx -s reload`, refuses cleanly when full.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: two workers share one queue (new connection per request spreads them)
--- workers: 2
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    log_format w '$pid $smart_limit_status $smart_limit_position';
--- config
    access_log logs/w.log w;
    location / { smart_limit shop; root html; }
    location = /w.log { alias logs/w.log; }
--- user_files
>>> index.html
origin page
--- steps
A GET / Connection: close => 200
B GET / Connection: close | Accept: application/json => 503; json.position == 1
C GET / Connection: close | Accept: application/json => 503; json.position == 2
D GET / Connection: close | Accept: application/json => 503; json.position == 3
E GET / Connection: close | Accept: application/json => 503; json.position == 4
repeat 6: C GET / Connection: close | Accept: application/json => 503; json.position == 2; json.queue_length == 4
repeat 6: E GET / Connection: close | Accept: application/json => 503; json.position == 4
repeat 6: A GET / Connection: close => 200

=== TEST 2: the room survives a reload: places and admitted sessions are intact
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- http_config2
    smart_limit_zone shop size=1m max_active=1 presence=30s $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
C GET / Accept: application/json => 503; json.position == 2
reload
A GET / => 200; cookie smart_limit_shop absent
B GET / Accept: application/json => 503; json.position == 1; cookie smart_limit_shop absent
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
# A changed limit (same size) keeps the room too.
reload-with http_config2
C GET / Accept: application/json => 503; json.position == 2
B GET / Accept: application/json => 503; json.position == 1
A GET / => 200

=== TEST 3: a reload that breaks the config is refused; the running room carries on
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- http_config2
    smart_limit_zone shop size=1m max_active=0 $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
reload-expect-fail http_config2 => /max_active/
B GET / Accept: application/json => 503; json.position == 1
A GET / => 200

=== TEST 4: a full zone refuses new clients with a clear log line; those in line keep their places
--- http_config
    # Flood control off: every client here comes from 127.0.0.1, and this block is about memory.
    smart_limit_zone shop size=32k max_active=1 flood=off;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
parallel 450 p GET / => 503
Z GET / Accept: application/json => 503; json.position == null; json.queue_length > 100
B GET / Accept: application/json => 503; json.position == 1
A GET / => 200
--- error_log
smart_limit zone "shop" is full: no place left in the line
