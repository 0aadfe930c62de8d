# Admission that travels ([S28]): signed admission tokens (EdDSA, a JWKS to verify them,
# `Authorization: Bearer` admits like a ticket) and invite-only lines (`invite=`: a signed
# enqueue token takes a place, one place per token id), on every store.
#
# t/lib/token_probe.py plays an app against the front and verifies its tokens with PyJWT and
# with jose (npm, t/browser/verify-token.mjs), two JWT libraries independent of the module,
# then sends every forgery the issue names. The enqueue tokens below were made once with PyJWT
# (HS256 under html/presale.secret, EdDSA under the private half of html/backend.pub), expiring
# in 2100: member-1..3, an expired one, one for another room, one under another secret, fan-1..2.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: shared memory: an app waits in JSON, is admitted with a token, calls the API with it and no cookie; every forgery makes a new user
--- http_config
    smart_limit_token_key $TEST_NGINX_HTML_DIR/token.pem $TEST_NGINX_HTML_DIR/token2.pem;
    smart_limit_zone shop size=1m max_active=1 flood=off grant=10m;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $http_x_token_seen\n"; }
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
--- config
    add_header X-SL-Status $smart_limit_status always;
    location = /.well-known/jwks.json { smart_limit_jwks; }
    location = /poll { smart_limit shop; smart_limit_poll; }
    location / {
        smart_limit shop;
        proxy_set_header X-Token-Seen $smart_limit_token;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
--- user_files
>>> token.pem
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIGGhmN6fylv95lS/cTIKP+rTji3b8+xHn0RH0PoCkz8k
-----END PRIVATE KEY-----
>>> token2.pem
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIHWFlD9N/IFVy9QEGSAQkoUxC/ccjIphz973p1DxiZcL
-----END PRIVATE KEY-----
--- steps
sh 90: target/py/bin/python t/lib/token_probe.py flow $TEST_NGINX_PORT $TEST_NGINX_HTML_DIR/token.pem => /flow: all checks passed/
--- no_error_log
[error]

=== TEST 2: central Redis, two nodes: a token node 1 issued admits on node 2, with the same key set on both
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_token_key $TEST_NGINX_HTML_DIR/token.pem;
    smart_limit_zone shop size=1m max_active=1 flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $http_x_token_seen\n"; }
    }
--- config
    add_header X-SL-Status $smart_limit_status always;
    location = /.well-known/jwks.json { smart_limit_jwks; }
    location = /poll { smart_limit shop; smart_limit_poll; }
    location / {
        smart_limit shop;
        proxy_set_header X-Token-Seen $smart_limit_token;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> token.pem
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIGGhmN6fylv95lS/cTIKP+rTji3b8+xHn0RH0PoCkz8k
-----END PRIVATE KEY-----
--- steps
sh 60: target/py/bin/python t/lib/token_probe.py fleet $TEST_NGINX_PORT_N1 $TEST_NGINX_PORT_N2 => /fleet: all checks passed/
--- no_error_log
[error]

=== TEST 3: sync=, two nodes: a token node 1 issued admits on node 2
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_token_key $TEST_NGINX_HTML_DIR/token.pem;
    smart_limit_zone shop size=4m max_active=1 flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $http_x_token_seen\n"; }
    }
--- config
    add_header X-SL-Status $smart_limit_status always;
    location = /.well-known/jwks.json { smart_limit_jwks; }
    location = /poll { smart_limit shop; smart_limit_poll; }
    location = /m { smart_limit_metrics; }
    location / {
        smart_limit shop;
        proxy_set_header X-Token-Seen $smart_limit_token;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> token.pem
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIGGhmN6fylv95lS/cTIKP+rTji3b8+xHn0RH0PoCkz8k
-----END PRIVATE KEY-----
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
until 3: M GET /m @1 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
sh 60: target/py/bin/python t/lib/token_probe.py fleet $TEST_NGINX_PORT_N1 $TEST_NGINX_PORT_N2 => /fleet: all checks passed/
--- no_error_log
[error]

=== TEST 4: a P-256 key and audience=: an ES256 token with aud, verified by PyJWT and jose, passes as a bearer
--- http_config
    smart_limit_token_key $TEST_NGINX_HTML_DIR/ec.pem audience=checkout-api;
    smart_limit_zone shop size=1m max_active=5 flood=off;
--- config
    add_header X-SL-Status $smart_limit_status always;
    location = /.well-known/jwks.json { smart_limit_jwks; }
    location = /poll { smart_limit shop; smart_limit_poll; }
    location / { smart_limit shop; root html; }
--- user_files
>>> ec.pem
-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIJX3g/pbNUYS/NG9+T8wp1ucQ1OtUaP8LhTWLAA+1xhjoAoGCCqGSM49
AwEHoUQDQgAEQZoArqi6lZmF7Acceyccy6n7LgP2KMF8mhOw2FEk0s47g8QsMeFC
Ioa0trNxPlX7nFWrecRtJkN2L2xwwsu7gg==
-----END EC PRIVATE KEY-----
>>> index.html
origin
--- steps
sh 30: target/py/bin/python t/lib/token_probe.py es256 $TEST_NGINX_PORT checkout-api => /es256: all checks passed/

=== TEST 5: the origin revokes a session: its ticket and its token, replayed, make new users on shared memory, central Redis and sync=
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_token_key $TEST_NGINX_HTML_DIR/token.pem;
    smart_limit_zone shm size=1m max_active=1 flood=off;
    smart_limit_zone central size=1m max_active=1 flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT prefix=c;
    smart_limit_zone synced size=4m max_active=1 flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT prefix=s sync=200ms;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin\n"; }
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
--- config
    add_header X-SL-Status $smart_limit_status always;
    location = /shm/poll { smart_limit shm; smart_limit_poll; }
    location /shm/ { smart_limit shm; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2/; }
    location = /central/poll { smart_limit central; smart_limit_poll; }
    location /central/ { smart_limit central; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2/; }
    location = /synced/poll { smart_limit synced; smart_limit_poll; }
    location /synced/ { smart_limit synced; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2/; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> token.pem
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIGGhmN6fylv95lS/cTIKP+rTji3b8+xHn0RH0PoCkz8k
-----END PRIVATE KEY-----
--- steps
# The synced node meets the fleet first (a place taken before that is the node's own).
until 3: M GET /m => 200; body =~ /smart_limit_fleet_nodes\{room="synced"\} 1\n/
sh 60: target/py/bin/python t/lib/token_probe.py revoke $TEST_NGINX_PORT /shm => /revoke: all checks passed/
sh 60: target/py/bin/python t/lib/token_probe.py revoke $TEST_NGINX_PORT /central => /revoke: all checks passed/
sh 60: target/py/bin/python t/lib/token_probe.py revoke $TEST_NGINX_PORT /synced => /revoke: all checks passed/
--- no_error_log
[error]

=== TEST 6: shared memory, invite-only (HS256): no token, no place; one place per token id, a replay gets the same place
--- http_config
    smart_limit_zone presale size=1m max_active=1 flood=off invite=$TEST_NGINX_HTML_DIR/presale.secret;
--- config
    location / { smart_limit presale; root html; }
--- user_files
>>> presale.secret
presale-secret-0123456789abcdef-0123456789
>>> index.html
origin
--- steps
N GET / Accept: application/json => 403; json.status == "invite_only"; json.room == "presale"; header Cache-Control =~ /^no-store$/
N GET / Accept-Language: ja => 403; body =~ /招待制/
N GET / => 403; body =~ /by invitation/; header Set-Cookie !~ /smart_limit/
# Refused tokens: another secret, expired, another room's, alg none, garbage.
X GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItNyIsImV4cCI6NDEwMjQ0NDgwMH0.DAFd1F5xDbNjzxBSBRc61gz3PKqUz79y-T1JO3ebGCA => 403
X GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItOSIsImV4cCI6MTYwMDAwMDAwMH0.7BFirix80Rt_ONURUDlicPhmrzFUxmWOqmX54ZLta2s => 403
X GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItOCIsImV4cCI6NDEwMjQ0NDgwMCwicm9vbSI6Im90aGVyIn0.CoIhbAT_zbHOyaGWrOpuf8RvHfh3BfOZGHduP1-1arE => 403
X GET /?invite=eyJhbGciOiJub25lIn0.eyJqdGkiOiJtZW1iZXItMSIsImV4cCI6NDEwMjQ0NDgwMH0. => 403
X GET /?invite=garbage => 403
X GET / Authorization: Bearer garbage => 403
# member-1 takes the one admission; member-2 waits at 1.
A GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMSIsImV4cCI6NDEwMjQ0NDgwMH0.bzyOGGM8nDi7jwndEQVv8Hj9oSkIkeOtmQ0ar-F9qgI => 200; body =~ /origin/
B GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMiIsImV4cCI6NDEwMjQ0NDgwMH0.ruQZIiLVEgwClgd7EmFsh_XivQ7F4Cvsb7kUD2eD1Do Accept: application/json => 503; json.position == 1; json.queue_length == 1
# The ticket remembers the invitation: B's later polls need no token.
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
# member-2's token replayed by another client (an app: as a bearer): the same place, no second one.
C GET / Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMiIsImV4cCI6NDEwMjQ0NDgwMH0.ruQZIiLVEgwClgd7EmFsh_XivQ7F4Cvsb7kUD2eD1Do | Accept: application/json => 503; json.position == 1; json.queue_length == 1
D GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMyIsImV4cCI6NDEwMjQ0NDgwMH0.XISghqIPj4LbNRsMwGO9uXZPD59z7eCx6oqi8xTjljI Accept: application/json => 503; json.position == 2; json.queue_length == 2

=== TEST 7: invite-only with the backend's Ed25519 public key (EdDSA), and a status of the operator's choosing
--- http_config
    smart_limit_zone presale size=1m max_active=1 flood=off invite=$TEST_NGINX_HTML_DIR/backend.pub invite_status=401;
--- config
    location / { smart_limit presale; root html; }
--- user_files
>>> backend.pub
-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEA/uZvMK5nnrm7qx3seHM+r4TFYHr/8UfwFVTjT+Wb5FE=
-----END PUBLIC KEY-----
>>> index.html
origin
--- steps
N GET / Accept: application/json => 401; json.status == "invite_only"
# An HS256 token (the presale secret's) is refused: the key decides the algorithm.
X GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMSIsImV4cCI6NDEwMjQ0NDgwMH0.bzyOGGM8nDi7jwndEQVv8Hj9oSkIkeOtmQ0ar-F9qgI => 401
A GET /?invite=eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJmYW4tMSIsImV4cCI6NDEwMjQ0NDgwMH0.So6zgUtttKqso4m0UYsOu-Uit2ATnAb1Pe_B5hqLDAFtGjBIW2OC35uM114X4wCE8Z_Z2nr7xEy0vUhyt_GcBg => 200; body =~ /origin/
B GET /?invite=eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJmYW4tMiIsImV4cCI6NDEwMjQ0NDgwMH0.SYFMytLtR7vNgJt0pAbp2kV8xHQqBmXj4qvzyiFgX3DMcIvyCZKVaVRodwTsF90CnNgHA9EmciGDiUj8YvdjBA Accept: application/json => 503; json.position == 1

=== TEST 8: central Redis, two nodes: one place per token id across the fleet
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone presale size=1m max_active=1 flood=off invite=$TEST_NGINX_HTML_DIR/presale.secret store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit presale; root html; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> presale.secret
presale-secret-0123456789abcdef-0123456789
>>> index.html
origin
--- steps
N GET / @2 Accept: application/json => 403; json.status == "invite_only"
A GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMSIsImV4cCI6NDEwMjQ0NDgwMH0.bzyOGGM8nDi7jwndEQVv8Hj9oSkIkeOtmQ0ar-F9qgI @1 => 200; body =~ /origin/
B GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMiIsImV4cCI6NDEwMjQ0NDgwMH0.ruQZIiLVEgwClgd7EmFsh_XivQ7F4Cvsb7kUD2eD1Do @1 Accept: application/json => 503; json.position == 1; json.queue_length == 1
C GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMiIsImV4cCI6NDEwMjQ0NDgwMH0.ruQZIiLVEgwClgd7EmFsh_XivQ7F4Cvsb7kUD2eD1Do @2 Accept: application/json => 503; json.position == 1; json.queue_length == 1
D GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMyIsImV4cCI6NDEwMjQ0NDgwMH0.XISghqIPj4LbNRsMwGO9uXZPD59z7eCx6oqi8xTjljI @2 Accept: application/json => 503; json.position == 2; json.queue_length == 2
--- no_error_log
[error]

=== TEST 9: sync=, two nodes: one place per token id across the fleet
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone presale size=4m max_active=1 flood=off invite=$TEST_NGINX_HTML_DIR/presale.secret store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / { smart_limit presale; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> presale.secret
presale-secret-0123456789abcdef-0123456789
>>> index.html
origin
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="presale"\} 2\n/
until 3: M GET /m @1 => 200; body =~ /smart_limit_fleet_nodes\{room="presale"\} 2\n/
N GET / @2 Accept: application/json => 403; json.status == "invite_only"
until 3: A GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMSIsImV4cCI6NDEwMjQ0NDgwMH0.bzyOGGM8nDi7jwndEQVv8Hj9oSkIkeOtmQ0ar-F9qgI @1 => 200; body =~ /origin/
B GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMiIsImV4cCI6NDEwMjQ0NDgwMH0.ruQZIiLVEgwClgd7EmFsh_XivQ7F4Cvsb7kUD2eD1Do @1 Accept: application/json => 503
C GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMiIsImV4cCI6NDEwMjQ0NDgwMH0.ruQZIiLVEgwClgd7EmFsh_XivQ7F4Cvsb7kUD2eD1Do @2 Accept: application/json => 503
D GET /?invite=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJqdGkiOiJtZW1iZXItMyIsImV4cCI6NDEwMjQ0NDgwMH0.XISghqIPj4LbNRsMwGO9uXZPD59z7eCx6oqi8xTjljI @2 Accept: application/json => 503
# Once the nodes have met: two members in the fleet's line (member-2 once, on either node).
until 5: B GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 2
until 5: C GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 2
until 5: D GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 2
--- no_error_log
[error]

=== TEST 10: a private key as invite= is refused by nginx -t
--- http_config
    smart_limit_zone presale size=1m invite=$TEST_NGINX_HTML_DIR/token.pem;
--- config
    location / { smart_limit presale; root html; }
--- user_files
>>> token.pem
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIGGhmN6fylv95lS/cTIKP+rTji3b8+xHn0RH0PoCkz8k
-----END PRIVATE KEY-----
--- must_fail
--- error_log
"smart_limit_zone" invite=".*token.pem": holds a private key

=== TEST 11: a secret shorter than 32 bytes is refused by nginx -t
--- http_config
    smart_limit_zone presale size=1m invite=$TEST_NGINX_HTML_DIR/short.secret;
--- config
    location / { smart_limit presale; root html; }
--- user_files
>>> short.secret
too-short
--- must_fail
--- error_log
"smart_limit_zone" invite=".*short.secret": neither an Ed25519 or P-256 public key

=== TEST 12: a missing invite file is refused by nginx -t
--- http_config
    smart_limit_zone presale size=1m invite=$TEST_NGINX_HTML_DIR/none.secret;
--- config
    location / { smart_limit presale; root html; }
--- must_fail
--- error_log
"smart_limit_zone" invite=: cannot read ".*none.secret"

=== TEST 13: invite_status= without invite= is refused by nginx -t
--- http_config
    smart_limit_zone presale size=1m invite_status=403;
--- config
    location / { smart_limit presale; root html; }
--- must_fail
--- error_log
invite_status=403.*invite=FILE

=== TEST 14: smart_limit_token_key with a public key, or with none, is refused by nginx -t
--- http_config
    smart_limit_token_key $TEST_NGINX_HTML_DIR/backend.pub;
--- config
    location / { root html; }
--- user_files
>>> backend.pub
-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEA/uZvMK5nnrm7qx3seHM+r4TFYHr/8UfwFVTjT+Wb5FE=
-----END PUBLIC KEY-----
--- must_fail
--- error_log
"smart_limit_token_key" ".*backend.pub": not an Ed25519 or P-256 private key

=== TEST 15: smart_limit_token_key with only parameters is refused by nginx -t
--- http_config
    smart_limit_token_key issuer=https://shop.example;
--- config
    location / { root html; }
--- must_fail
--- error_log
"smart_limit_token_key" needs a key file

=== TEST 16: smart_limit_jwks without smart_limit_token_key is refused by nginx -t
--- config
    location = /jwks { smart_limit_jwks; }
--- must_fail
--- error_log
"smart_limit_jwks" needs smart_limit_token_key

=== TEST 17: issuer= and bearer= are used: another issuer's tokens, and the header the operator names
--- http_config
    smart_limit_token_key $TEST_NGINX_HTML_DIR/token.pem issuer=https://shop.example bearer=X-Admission;
    smart_limit_zone shop size=1m max_active=5 flood=off;
--- config
    add_header X-SL-Status $smart_limit_status always;
    location = /poll { smart_limit shop; smart_limit_poll; }
    location / { smart_limit shop; root html; }
--- user_files
>>> token.pem
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIGGhmN6fylv95lS/cTIKP+rTji3b8+xHn0RH0PoCkz8k
-----END PRIVATE KEY-----
>>> index.html
origin
--- steps
A GET /poll Accept: application/json => 200; json.status == "admitted"; json.token =~ /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/
sh 30: target/py/bin/python t/lib/token_probe.py named $TEST_NGINX_PORT https://shop.example X-Admission => /named: all checks passed/
