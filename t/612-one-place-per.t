# one_place_per=VALUE ([S19]): clients with the same non-empty value (an account id from a
# cookie or from auth_request) share one session: one place in the line and one admission,
# whichever ticket or node they come with; a client without a value gets its own. On every
# store (the module derives the session id from the value and the ticket keys).

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: shared memory: a second ticket of the same account gets the first one's place
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off one_place_per=$http_x_account;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
H GET / => 200
A GET / Accept: application/json | X-Account: alice => 503; json.position == 1; json.queue_length == 1
B GET / Accept: application/json | X-Account: alice => 503; json.position == 1; json.queue_length == 1
C GET / Accept: application/json | X-Account: bob => 503; json.position == 2; json.queue_length == 2
D GET / Accept: application/json => 503; json.position == 3; json.queue_length == 3
D GET / Accept: application/json | X-Account: => 503; json.position == 3; json.queue_length == 3
# A's ticket with bob's account: bob's place, no new one.
A GET / Accept: application/json | X-Account: bob => 503; json.position == 2; json.queue_length == 3

=== TEST 2: the account's other device does not get a second admission: it takes the account's one place
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off session=5m one_place_per=$http_x_account;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin
--- steps
A GET / X-Account: alice => 200; body =~ /origin/
B GET / Accept: application/json | X-Account: alice => 503; json.position == 1; json.queue_length == 1
C GET / Accept: application/json | X-Account: alice => 503; json.position == 1; json.queue_length == 1
D GET / Accept: application/json | X-Account: bob => 503; json.position == 2; json.queue_length == 2
M GET /m => 200; body =~ /smart_limit_active_sessions\{room="shop"\} 1\n/; body =~ /smart_limit_admitted_total\{room="shop"\} 1\n/

=== TEST 3: a bad value is refused by nginx -t
--- http_config
    smart_limit_zone shop size=1m one_place_per=;
--- config
    location / { smart_limit shop; root html; }
--- must_fail
--- error_log
invalid one_place_per ""

=== TEST 4: central Redis, two nodes: the same account on both nodes has one place
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=1m max_active=1 flood=off one_place_per=$http_x_account store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- steps
H GET / @1 => 200
A GET / @1 Accept: application/json | X-Account: alice => 503; json.position == 1; json.queue_length == 1
B GET / @2 Accept: application/json | X-Account: alice => 503; json.position == 1; json.queue_length == 1
C GET / @2 Accept: application/json | X-Account: bob => 503; json.position == 2; json.queue_length == 2
--- no_error_log
[error]

=== TEST 5: sync=, two nodes: the same account on both nodes is one member of the fleet's line
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 flood=off one_place_per=$http_x_account store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
until 3: H GET / @1 => 200
A GET / @1 Accept: application/json | X-Account: alice => 503
B GET / @2 Accept: application/json | X-Account: alice => 503
C GET / @2 Accept: application/json | X-Account: bob => 503
# Once the nodes have met: two members in the fleet's line, alice first, on either node.
until 5: A GET / @2 Accept: application/json | X-Account: alice => 503; json.position == 1; json.queue_length == 2
until 5: B GET / @1 Accept: application/json | X-Account: alice => 503; json.position == 1; json.queue_length == 2
until 5: C GET / @1 Accept: application/json | X-Account: bob => 503; json.position == 2; json.queue_length == 2
--- no_error_log
[error]
