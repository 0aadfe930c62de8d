# Redis as operators run it ([S17]), part 1: AUTH with an ACL user and a password read from a
# file (never written to a log, the metrics or the control endpoint), and TLS with nginx's own
# SSL against Debian's redis-server built with TLS: a throw-away CA made here, verification
# on whenever a CA is given (chain and name), SNI, a client certificate. Every failure
# (wrong password, wrong CA, wrong name, a plain server, no client certificate) is a store
# error that follows on_error, logged once per burst, never a hang.

use lib 't/lib';
use SmartLimit::Test;
use SmartLimit::Test::Server ();
use SmartLimit::RedisFarm ();

$ENV{TEST_NGINX_TLS_DIR} = SmartLimit::RedisFarm::tls_material();
$ENV{TEST_NGINX_TLS_PORT} = SmartLimit::Test::Server::free_port();

run_tests();

__DATA__

=== TEST 1: an ACL user with its password from a file: the room works, the secret is nowhere
--- redis
--user smart on >Pa55-w0rd-for-tests ~* &* +@all
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT redis_user=smart redis_password_file=$TEST_NGINX_HTML_DIR/redis.pass max_active=1;
--- config
    location / { smart_limit shop; root html; }
    location = /metrics { smart_limit_metrics; }
    location = /control { smart_limit_control; }
--- user_files
>>> redis.pass
Pa55-w0rd-for-tests
>>> index.html
origin
--- steps
A GET / => 200; body =~ /origin/
B GET / Accept: application/json => 503; json.position == 1
C GET /metrics => 200; body !~ /Pa55/
C GET /control => 200; body !~ /Pa55/
redis ACL LOG => /^\s*$/
redis CLIENT LIST => /user=smart/
sh ! grep -rq Pa55 $TEST_NGINX_SERVROOT/logs/
--- no_error_log
[error]
Pa55

=== TEST 2: a wrong password fails loudly once per burst and follows on_error; the secret is nowhere
--- redis
--user smart on >Pa55-w0rd-for-tests ~* &* +@all
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT redis_user=smart redis_password_file=$TEST_NGINX_HTML_DIR/redis.pass on_error=closed;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> redis.pass
not-the-Pa55-w0rd
>>> index.html
origin
--- steps
# (elapsed: a refusal is answered at once, a hang would be the 10 s client timeout; 1 s is five
# times the 200 ms timeout, room for a loaded machine, where 0.5 s was before issue 30.)
repeat 5: A GET / Accept: application/json => 503; json.status == "waiting"; json.position == null; elapsed < 1
sh grep -c 'authentication refused: WRONGPASS' $TEST_NGINX_SERVROOT/logs/error.log => /^1$/
sh ! grep -rq 'not-the-Pa55' $TEST_NGINX_SERVROOT/logs/
--- error_log
smart_limit zone "shop": redis 127.0.0.1:\d+: authentication refused: WRONGPASS
--- no_error_log
not-the-Pa55

=== TEST 3: TLS with a CA, the server's name and a client certificate: the room works
--- redis
--tls-port $TEST_NGINX_TLS_PORT --tls-cert-file $TEST_NGINX_TLS_DIR/server.pem --tls-key-file $TEST_NGINX_TLS_DIR/server.key --tls-ca-cert-file $TEST_NGINX_TLS_DIR/ca.pem --tls-auth-clients yes
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_TLS_PORT redis_tls=on redis_tls_ca=$TEST_NGINX_TLS_DIR/ca.pem redis_tls_name=localhost redis_tls_cert=$TEST_NGINX_TLS_DIR/client.pem redis_tls_key=$TEST_NGINX_TLS_DIR/client.key max_active=1;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200; body =~ /origin/
B GET / Accept: application/json => 503; json.position == 1
C GET / Accept: application/json => 503; json.position == 2
B GET / Accept: application/json => 503; json.position == 1
redis ZCARD smart_limit:{shop}:line => /^2$/
--- no_error_log
[error]

=== TEST 4: TLS verifies the IP address when no name is given (the certificate has 127.0.0.1)
--- redis
--tls-port $TEST_NGINX_TLS_PORT --tls-cert-file $TEST_NGINX_TLS_DIR/server.pem --tls-key-file $TEST_NGINX_TLS_DIR/server.key --tls-ca-cert-file $TEST_NGINX_TLS_DIR/ca.pem --tls-auth-clients no
--- http_config
    smart_limit_rate_zone api rate=100r/s redis=127.0.0.1:$TEST_NGINX_TLS_PORT redis_tls=on redis_tls_ca=$TEST_NGINX_TLS_DIR/ca.pem interval=200ms;
--- config
    location / { smart_limit_rate api; root html; }
    location = /metrics { smart_limit_metrics; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200
until 3: A GET /metrics => 200; body =~ /smart_limit_rate_syncs_total\{zone="api"\} [1-9]/
redis EXISTS smart_limit:{api}:rate => /^1$/
--- no_error_log
[error]

=== TEST 5: a certificate from another CA: a store error (on_error), no hang, logged once
--- redis
--tls-port $TEST_NGINX_TLS_PORT --tls-cert-file $TEST_NGINX_TLS_DIR/server.pem --tls-key-file $TEST_NGINX_TLS_DIR/server.key --tls-ca-cert-file $TEST_NGINX_TLS_DIR/ca.pem --tls-auth-clients no
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_TLS_PORT redis_tls=on redis_tls_ca=$TEST_NGINX_TLS_DIR/other-ca.pem on_error=closed;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
repeat 4: A GET / Accept: application/json => 503; json.position == null; elapsed < 1
sh grep -c 'certificate verify failed' $TEST_NGINX_SERVROOT/logs/error.log => /^1$/
--- error_log
smart_limit zone "shop": redis 127.0.0.1:\d+: TLS: certificate verify failed: (?:self-signed certificate in certificate chain|unable to get local issuer certificate)

=== TEST 6: the right CA but another name: refused (hostname mismatch)
--- redis
--tls-port $TEST_NGINX_TLS_PORT --tls-cert-file $TEST_NGINX_TLS_DIR/server.pem --tls-key-file $TEST_NGINX_TLS_DIR/server.key --tls-ca-cert-file $TEST_NGINX_TLS_DIR/ca.pem --tls-auth-clients no
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_TLS_PORT redis_tls=on redis_tls_ca=$TEST_NGINX_TLS_DIR/ca.pem redis_tls_name=redis.example.com on_error=open;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
repeat 3: A GET / => 200; elapsed < 1
--- error_log
TLS: certificate verify failed: [Hh]ostname mismatch

=== TEST 7: TLS to a plain-text port, and to a server that wants a client certificate: errors, no hang
--- redis
--tls-port $TEST_NGINX_TLS_PORT --tls-cert-file $TEST_NGINX_TLS_DIR/server.pem --tls-key-file $TEST_NGINX_TLS_DIR/server.key --tls-ca-cert-file $TEST_NGINX_TLS_DIR/ca.pem --tls-auth-clients yes
--- http_config
    smart_limit_zone plain size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT redis_tls=on timeout=300ms on_error=closed;
    smart_limit_zone nocert size=1m store=redis redis=127.0.0.1:$TEST_NGINX_TLS_PORT redis_tls=on redis_tls_ca=$TEST_NGINX_TLS_DIR/ca.pem timeout=300ms on_error=closed;
--- config
    location /p { smart_limit plain; alias html/; }
    location /n { smart_limit nocert; alias html/; }
--- user_files
>>> index.html
origin
--- steps
repeat 3: A GET /p/ Accept: application/json => 503; json.position == null; elapsed < 1
repeat 3: B GET /n/ Accept: application/json => 503; json.position == null; elapsed < 1
--- error_log
smart_limit zone "plain": redis 127.0.0.1:\d+: (?:TLS|connection closed|connection error|no reply)
smart_limit zone "nocert": redis 127.0.0.1:\d+: (?:TLS|connection closed|connection error)

=== TEST 8: bad Redis connection settings fail nginx -t with the parameter
--- http_config
    smart_limit_zone shop store=redis redis=127.0.0.1:6379 redis_tls_ca=/tmp/ca.pem;
--- config
--- must_fail
--- error_log
"smart_limit_zone" "redis_tls_ca=/tmp/ca.pem" requires redis_tls=on

=== TEST 9: a user needs a password file
--- http_config
    smart_limit_zone shop store=redis redis=127.0.0.1:6379 redis_user=smart;
--- config
--- must_fail
--- error_log
"smart_limit_zone" "redis_user=smart" requires redis_password_file=FILE

=== TEST 10: a password file that cannot be read
--- http_config
    smart_limit_zone shop store=redis redis=127.0.0.1:6379 redis_password_file=/nonexistent/redis.pass;
--- config
--- must_fail
--- error_log
"smart_limit_zone" redis_password_file="/nonexistent/redis.pass": cannot read it

=== TEST 11: a CA file that nginx cannot load
--- http_config
    smart_limit_zone shop store=redis redis=127.0.0.1:6379 redis_tls=on redis_tls_ca=/nonexistent/ca.pem;
--- config
--- must_fail
--- error_log
cannot load redis_tls_ca "/nonexistent/ca.pem"

=== TEST 12: sentinel= and master= go together, and exclude redis=
--- http_config
    smart_limit_zone shop store=redis sentinel=127.0.0.1:26379;
--- config
--- must_fail
--- error_log
"smart_limit_zone" "sentinel=127.0.0.1:26379" requires master=NAME

=== TEST 13: redis= and sentinel= together
--- http_config
    smart_limit_zone shop store=redis redis=127.0.0.1:6379 sentinel=127.0.0.1:26379 master=m;
--- config
--- must_fail
--- error_log
"redis=127.0.0.1:6379" and "sentinel=127.0.0.1:26379" cannot be used together
