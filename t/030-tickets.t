# [S8]: the ticket is unforgeable. Tampered, truncated, junk, expired and other-room tickets
# make a new user, never an admitted one; keys rotate without logging anyone out.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: a tampered ticket is a new user (behind the line), never admitted
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
jar A copy X
B GET / Accept: application/json => 503; json.position == 1
jar X tamper smart_limit_shop
X GET / Accept: application/json => 503; json.position == 2; cookie smart_limit_shop set
# The untouched copy of A's ticket still passes: the tampered one did not hurt it.
A GET / => 200

=== TEST 2: truncated, empty, junk and binary tickets never pass and never break the worker
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Cookie: smart_limit_shop= => 503; cookie smart_limit_shop set
C GET / Cookie: smart_limit_shop=%%%%; smart_limit_shop=AAAA => 503
D GET / Cookie: smart_limit_shop=eyJyb29tIjoic2hvcCIsInNpZCI6MSwicSI6MCwiaWF0IjoxLCJhY2MiOjEsInNlZW4iOjF9 => 503
E GET / Cookie: smart_limit_shop=ÿÿÿÿ€€€ => 503
F GET / Cookie: ;;;=;==;smart_limit_shop;;; => 503
jar A copy G
jar G set smart_limit_shop=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
G GET / => 503
A GET / => 200

=== TEST 3: a ticket of another room is a new user there
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    smart_limit_zone other size=1m max_active=5 $TEST_NGINX_STORE;
--- config
    location / { smart_limit shop; root html; }
    location /other/ { smart_limit other; root html; }
--- user_files
>>> index.html
origin page
>>> other/index.html
other page
--- steps
A GET / => 200
B GET /other/ => 200; cookie smart_limit_other set
# B's admitted ticket of room "other", shown to room "shop" as its own, admits nobody.
jar B rename smart_limit_other smart_limit_shop
B GET / Accept: application/json => 503; json.position == 1; cookie smart_limit_shop set

=== TEST 4: keys from smart_limit_secret; rotation (new key first, old key second) keeps everyone's ticket
--- http_config
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys/old.keys;
--- http_config2
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys/rotated.keys;
--- http_config3
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys/new-only.keys;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
>>> keys/old.keys
# the key in service
0001020304050607080910111213141516171819202122232425262728293031
>>> keys/rotated.keys
# a new key first (encrypts); the old one still opens tickets
f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff000102030405060708090a0b0c0d0e0f
0001020304050607080910111213141516171819202122232425262728293031
>>> keys/new-only.keys
f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff000102030405060708090a0b0c0d0e0f
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1
reload-with http_config2
A GET / => 200; cookie smart_limit_shop absent
B GET / Accept: application/json => 503; json.position == 1; cookie smart_limit_shop absent
# Once the old key is gone, old tickets are new users.
reload-with http_config3
A GET / Accept: application/json => 503; cookie smart_limit_shop set
