# Self-test of the test harness (t/lib/SmartLimit/Test.pm). Uses only stock
# nginx directives, but loads the module like every other test: it must load
# cleanly. The last tests run deliberately wrong expectations in a child
# process and check that the harness reports them as failures.

use lib 't/lib';
use SmartLimit::Test;

plan skip_all => 'TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)'
    unless $ENV{TEST_NGINX_BINARY} && $ENV{TEST_NGINX_MODULE};
plan tests => test_count() + 18;

run_tests();

my $wrong = <<'SPEC';
=== TEST 1: wrong expectations
--- config
    location / { return 200 "hello\n"; }
--- steps
A GET / => 404
A GET / => 200; body =~ /goodbye/
A GET / => 200; header X-Nope present
A GET / => 200; elapsed > 5
parallel 2 p GET / => 503
A GET / => 200
--- error_log
this line is never logged

=== TEST 2: a valid config under must_fail
--- config
    location / { return 200; }
--- must_fail

=== TEST 3: a crashed worker is caught
--- config
    location / { return 200 "ok\n"; }
--- steps
kill-worker SEGV
A GET / => 200

=== TEST 4: wrong redirect expectations
--- config
    location = /r { add_header Set-Cookie "c=1"; return 307 /t; }
    location = /t { return 200 "t\n"; }
    location = /loop { return 302 /loop; }
--- steps
A GET /r => 200; redirects == 0
A GET /r => 307
A GET /loop => 200; redirects < 5
parallel 2 p GET /r => 200; redirects != 1
A GET /r => 200; redirects == 1; cookie c set
SPEC

my $r = run_spec_in_child($wrong);
my @not_ok = $r->{tap} =~ /^not ok \d+ - (.*)$/mg;
my @ok = $r->{tap} =~ /^ok \d+ - (.*)$/mg;
isnt($r->{exit}, 0, 'the harness exits non-zero on wrong expectations')
    or diag("child TAP:\n$r->{tap}\nchild stderr:\n$r->{stderr}");
like($r->{tap}, qr/^1\.\.17$/m, 'the child planned the tests of its steps');
is(scalar(@not_ok), 12, 'every wrong expectation is reported as a failure')
    or diag("child TAP:\n$r->{tap}\nchild stderr:\n$r->{stderr}");
is_deeply(\@ok, [
    'TEST 1: wrong expectations :: A GET / => 200',
    'TEST 1: wrong expectations :: error.log has no [alert], [emerg], [crit] or crashed worker',
    'TEST 3: a crashed worker is caught :: A GET / => 200',
    'TEST 4: wrong redirect expectations :: A GET /r => 200; redirects == 1; cookie c set',
    'TEST 4: wrong redirect expectations :: error.log has no [alert], [emerg], [crit] or crashed worker',
], 'sound expectations still pass') or diag("child TAP:\n$r->{tap}");
like($r->{tap}, qr/^not ok \d+ - TEST 3: a crashed worker is caught :: error\.log has no/m,
     'a worker that died on a signal fails the block')
    or diag("child TAP:\n$r->{tap}");
like($r->{stderr}, qr{check 'redirects == 0' failed: followed 1 redirect\n#\s+followed 1 redirect \(below: [^\n]*\):\n#\s+1\. GET /r => 307, Location: http://localhost:\d+/t\n}s,
     'a failure shows the redirect chain')
    or diag("child stderr:\n$r->{stderr}");
like($r->{stderr}, qr{check 'redirects < 5' failed: followed 5 redirects\n(?:#.*\n){6}#\s+stopped after 5 redirects: 302 to http://localhost:\d+/loop not followed\n},
     'a redirect loop stops after 5 hops and says so')
    or diag("child stderr:\n$r->{stderr}");

my $bad = run_spec_in_child(<<'SPEC');
=== TEST 1: a bad follow_redirects value
--- follow_redirects: yes
--- config
    location / { return 200; }
--- steps
A GET / => 200
SPEC
ok($bad->{exit} != 0 && $bad->{stderr} =~ /a bad follow_redirects value': --- follow_redirects must be 0 or 1, not 'yes'/,
   'follow_redirects only takes 0 or 1')
    or diag("child exit $bad->{exit}, TAP:\n$bad->{tap}\nstderr:\n$bad->{stderr}");

# Shell steps, source addresses and prepends that must fail. The commands
# write their pids to $TEST_NGINX_SELFCHECK_DIR: nothing may survive the child.
my $piddir = File::Temp::tempdir('sl-selfcheck-pids-XXXXXX', TMPDIR => 1, CLEANUP => 1);
local $ENV{TEST_NGINX_SELFCHECK_DIR} = $piddir;
my $sh = run_spec_in_child(<<'SPEC');
=== TEST 1: wrong shell expectations
--- config
    location = /ip { return 200 "$remote_addr\n"; }
    location = /echo { return 200 "cookie=[$http_cookie]\n"; }
--- steps
sh false
sh echo hello; exit 3
sh echo hello => /goodbye/
sh 1: sleep 5
sh echo none => /(\d+)/ as $N
sh test $N -eq 1
sh echo 300 => /(\d+)/ as $M
A GET /ip from 127.0.0.$M => 200
bg-sh exit 2
bg-sh echo bye => /hello/
wait-bg
A GET /ip from 127.0.0.3 => 200; body =~ /^127\.0\.0\.4$/
jar A set t=real
jar A prepend t=junk
A GET /echo => 200; body =~ /^cookie=\[t=real/
sh echo fine => /fine/
bg-sh sleep 30 & echo $! > $TEST_NGINX_SELFCHECK_DIR/grandchild.pid; echo $$ > $TEST_NGINX_SELFCHECK_DIR/sh.pid; wait
sh 5: until [ -s $TEST_NGINX_SELFCHECK_DIR/sh.pid ]; do sleep 0.05; done

=== TEST 2: a block that dies stops its background commands
--- config
    location / { return 200; }
--- steps
bg-sh echo $$ > $TEST_NGINX_SELFCHECK_DIR/abort.pid; exec sleep 30
sh 5: until [ -s $TEST_NGINX_SELFCHECK_DIR/abort.pid ]; do sleep 0.05; done
jar A rename missing other
SPEC
my @sh_not_ok = $sh->{tap} =~ /^not ok \d+ - (.*)$/mg;
my @sh_ok = $sh->{tap} =~ /^ok \d+ - (.*)$/mg;
like($sh->{tap}, qr/^1\.\.19$/m, 'sh, bg-sh and from steps count one test each')
    or diag("child TAP:\n$sh->{tap}\nchild stderr:\n$sh->{stderr}");
is(scalar(@sh_not_ok), 13, 'every wrong shell, source address or prepend expectation fails')
    or diag("child TAP:\n$sh->{tap}\nchild stderr:\n$sh->{stderr}");
is_deeply(\@sh_ok, [
    'TEST 1: wrong shell expectations :: sh echo 300 => /(\d+)/ as $M',
    'TEST 1: wrong shell expectations :: sh echo fine => /fine/',
    'TEST 1: wrong shell expectations :: sh 5: until [ -s $TEST_NGINX_SELFCHECK_DIR/sh.pid ]; do sleep 0.05; done',
    'TEST 1: wrong shell expectations :: error.log has no [alert], [emerg], [crit] or crashed worker',
    'TEST 2: a block that dies stops its background commands :: sh 5: until [ -s $TEST_NGINX_SELFCHECK_DIR/abort.pid ]; do sleep 0.05; done',
], 'sound shell expectations still pass') or diag("child TAP:\n$sh->{tap}");
my @missing = grep { $sh->{stderr} !~ $_ } (
    qr{:: sh false'\n.*\n#\s+exit 1\n#\s+command: false\n}m,
    qr{:: sh echo hello; exit 3'\n.*\n#\s+exit 3\n.*\n#\s+ran [\d.]+s; output: 6 bytes\n#\s+\| hello\n}m,
    qr{output does not match /goodbye/\n.*\n.*\n#\s+\| hello\n}m,
    qr{timed out after 1s \(process group killed\)},
    qr{:: sh test \$N -eq 1'\n.*\n#\s+\$N is not set \(the step that captures it failed}m,
    qr{with the values of its variables: A GET /ip from 127\.0\.0\.300 => 200\n#\s+bad source address 'from 127\.0\.0\.300'},
    qr{:: bg-sh exit 2'\n.*\n#\s+exit 2\n}m,
    qr{:: bg-sh echo bye => /hello/'\n.*\n#\s+output does not match /hello/\n.*\n.*\n#\s+\| bye\n}m,
    qr{body does not match\n(?:#.*\n)*#\s+body: cookie=\[t=junk; t=real\]}m,
    qr{bg-sh sleep 30 .*'\n.*\n#\s+still running at the end of the block \(wait for it with wait-bg\) \(process group killed\)\n}m,
    qr{TEST 2: .* :: block did not complete'\n.*\n#\s+block aborted: jar A has no cookie 'missing'}m,
);
ok(!@missing, 'failed commands show why, what ran and their output')
    or diag("not found in the child's stderr:\n" . join("\n", @missing) . "\nchild stderr:\n$sh->{stderr}");
my @left;
for my $f (qw(sh grandchild abort)) {
    open my $p, '<', "$piddir/$f.pid" or do { push @left, "$f.pid was not written"; next };
    my $pid = <$p> // '';
    chomp $pid;
    open my $stat, '<', "/proc/$pid/status" or next;    # gone
    local $/;
    my $status = <$stat> // '';
    push @left, "$f (pid $pid) still runs" if $status =~ /^State:\s*[RSDT]/m;
}
ok(!@left, 'background commands (and their children) are killed at the end of the block and when it dies')
    or diag(join("\n", @left));

# Mistakes in these steps stop the file before anything runs.
for my $case (
    [ 'A GET / from 10.0.0.1 => 200', qr/steps line 1: source address 'from 10\.0\.0\.1' is outside 127\.0\.0\.0\/8/ ],
    [ 'A GET / from 127.0.0.256 => 200', qr/steps line 1: bad source address 'from 127\.0\.0\.256'/ ],
    [ 'A GET / Accept: text/html from 127.0.0.2 => 200', qr/steps line 1: 'from ADDR' goes right after the path/ ],
    [ 'sh echo 5 => /\d/ as $N', qr/steps line 1: sh: 'as \$N' needs a capture group/ ],
    [ 'sh echo 5 => 200', qr/steps line 1: sh: after ' => ' comes \/regex\// ],
) {
    my ($step, $re) = @$case;
    my $c = run_spec_in_child("=== TEST 1: refused\n--- config\n    location / { return 200; }\n--- steps\n$step\n");
    ok($c->{exit} != 0 && $c->{tap} !~ /^(?:not )?ok /m && $c->{stderr} =~ /TEST 1: refused': $re/,
       "refused before anything runs: $step")
        or diag("child exit $c->{exit}, TAP:\n$c->{tap}\nstderr:\n$c->{stderr}");
}

__DATA__

=== TEST 1: static responses, methods, request headers, JSON checks
--- config
    location = / { return 200 "hello\n"; }
    location = /404 { return 404; }
    location = /echo { return 200 "accept=$http_accept|lang=$http_accept_language|host=$host\n"; }
    location = /json {
        default_type application/json;
        return 200 '{"status":"waiting","position":3,"eta_known":true,"none":null,"nested":{"list":[10,20]}}';
    }
    location = /headers {
        add_header X-One "1";
        add_header X-Two "two";
        return 204;
    }
--- steps
# a comment, then a blank line

A GET / => 200; body =~ /^hello$/; header Content-Type =~ /^text\/plain/
A HEAD / => 200; body !~ /./; header Content-Length =~ /^6$/
A GET /404 => 404
A GET /404 => 4xx
A GET /404 => 200|404
A GET /echo Accept: application/json | Accept-Language: ja => 200; body =~ /^accept=application\/json\|lang=ja\|/
A GET /echo Host: example.test => 200; body =~ /host=example\.test/
A GET /json => 200; json.status == "waiting"; json.position == 3; json.position >= 2; json.position != 4; json.eta_known == true; json.none == null; json.nested.list.1 == 20; json.status =~ /^wait/; json.missing absent; json.nested present
A GET /headers => 204; header X-One =~ /^1$/; header x-two !~ /1/; header X-Three absent; header X-One present
repeat 5: A GET / => 200; body =~ /hello/
until 2: A GET / => 200
A GET / => 200; elapsed < 2
--- no_error_log
[error]

=== TEST 2: limit_req overflow goes to a named location through error_page 512
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    limit_req_zone $uri zone=byuri:1m rate=1r/m;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $TEST_NGINX_INSTANCE\n"; }
    }
--- config
    location / {
        limit_req zone=perip;
        limit_req_status 512;
        error_page 512 = @overflow;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location /burst {
        limit_req zone=byuri;
        limit_req_status 512;
        error_page 512 = @busy;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    # `return` runs in the rewrite phase, before limit_req (preaccess): never limited
    location /ret {
        limit_req zone=byuri;
        limit_req_status 512;
        error_page 512 = @busy;
        return 200 "ret\n";
    }
    location @overflow { return 200 "overflow\n"; }
    location @busy { return 503 "busy\n"; }
--- steps
A GET / => 200; body =~ /^origin 1$/
A GET / => 200; body =~ /^overflow$/
B GET / => 200; body =~ /overflow/
parallel 5 p GET /burst => 200|503; count 200 == 1; count 503 == 4; elapsed < 2
parallel 5 q GET /ret => 200; count 200 == 5; body =~ /^ret$/
--- error_log
limiting requests, excess: .* by zone "perip"
--- no_error_log
by zone "nothing"

=== TEST 3: cookie jars
--- config
    location = /set { add_header Set-Cookie "sid=abc123; Path=/; HttpOnly; SameSite=Lax"; return 200 "set\n"; }
    location = /set2 { add_header Set-Cookie "two=2; Max-Age=60"; add_header Set-Cookie "three=3"; return 200 "set2\n"; }
    location = /del { add_header Set-Cookie "sid=; Max-Age=0; Path=/"; return 200 "del\n"; }
    location = /expire { add_header Set-Cookie "two=x; Expires=Thu, 01 Jan 1970 00:00:01 GMT"; return 200 "expire\n"; }
    location = /echo { return 200 "cookie=[$http_cookie]\n"; }
--- steps
A GET /echo => 200; body =~ /^cookie=\[\]$/; cookie sid absent
A GET /set => 200; cookie sid set; cookie sid =~ /^abc123$/; header Set-Cookie =~ /HttpOnly/; header Set-Cookie =~ /SameSite=Lax/
A GET /echo => 200; body =~ /^cookie=\[sid=abc123\]$/
B GET /echo => 200; body =~ /^cookie=\[\]$/
jar A copy B
B GET /echo => 200; body =~ /sid=abc123/
jar B tamper sid
B GET /echo => 200; body !~ /sid=abc123/; body =~ /sid=\w{6}\]/
A GET /set2 => 200; cookie two set; cookie three =~ /^3$/
A GET /echo => 200; body =~ /^cookie=\[sid=abc123; two=2; three=3\]$/
A GET /expire => 200; cookie two deleted
A GET /del => 200; cookie sid deleted
A GET /echo => 200; body =~ /^cookie=\[three=3\]$/
jar A set forged=v1
jar A delete three
A GET /echo => 200; body =~ /^cookie=\[forged=v1\]$/
A GET /echo Cookie: explicit=1 => 200; body =~ /^cookie=\[explicit=1\]$/
jar A clear
A GET /echo => 200; body =~ /^cookie=\[\]$/

=== TEST 4: an unknown directive is refused by nginx -t
--- config
    location / { no_such_directive on; }
--- must_fail
--- error_log
unknown directive "no_such_directive"
/in \S+nginx\.conf:\d+/

=== TEST 5: a redis-server per block
--- redis
--- config
    location / { return 200 "redis port $TEST_NGINX_REDIS_PORT\n"; }
--- steps
redis PING => /PONG/
redis SET k "some value" => /OK/
redis GET k => /^some value$/
A GET / => 200; body =~ /^redis port \d+$/
redis-stop
redis-start
redis PING => /PONG/
redis EXISTS k => /^0$/

=== TEST 6: a slow request does not block others (limit_req delay, bg, elapsed)
--- http_config
    # 1r/s: the second request waits about a second in limit_req. The bounds below compare
    # with that injected delay, a factor of two either way, not with how fast this machine
    # is (a request here takes ~1 ms, more in a loaded suite): at 4r/s (0.25 s) a bg request
    # starting 0.1 s late would have waited under its 0.15 s bound.
    limit_req_zone $server_name zone=slow:1m rate=1r/s;
--- config
    location /slow/ { limit_req zone=slow burst=5; }
    location = /fast { return 200 "fast\n"; }
--- user_files
>>> slow/a.txt
slow file
>>> index.html
<p>index</p>
--- steps
A GET /slow/a.txt => 200; body =~ /^slow file$/; elapsed < 0.5
bg A GET /slow/a.txt => 200; elapsed > 0.5; elapsed < 3
# (The bg request is in nginx before B's: it started 0.2 s before, and waits ~0.8 s more.)
sleep 0.2
B GET /fast => 200; elapsed < 0.4
parallel 3 p GET /fast => 200; body =~ /fast/; elapsed < 0.4
wait-bg
C GET / => 200; body =~ /index/

=== TEST 7: two instances, two workers, reloads
--- instances: 2
--- workers: 2
--- log_level: info
--- config
    location / { return 200 "v1 node $TEST_NGINX_INSTANCE\n"; }
--- config2
    location / { return 200 "v2 node $TEST_NGINX_INSTANCE\n"; }
--- config_bad
    location / { return 200 "v3"; no_such_directive; }
--- steps
A GET / => 200; body =~ /^v1 node 1$/
A GET / @2 => 200; body =~ /^v1 node 2$/
A GET /anything @2 Accept: text/html => 200; body =~ /node 2/
reload
A GET / => 200; body =~ /^v1 node 1$/
reload-with config2 @2
A GET / => 200; body =~ /^v1 node 1$/
A GET / @2 => 200; body =~ /^v2 node 2$/
reload-with config2
A GET / => 200; body =~ /^v2 node 1$/
reload-expect-fail config_bad => /unknown directive "no_such_directive"/
A GET / => 200; body =~ /^v2 node 1$/
A GET / @2 => 200; body =~ /^v2 node 2$/
reload
A GET / => 200; body =~ /^v2 node 1$/
--- error_log
reconfiguring

=== TEST 8: reload with another http_config; a killed worker is replaced
--- http_config
    map $uri $flavour { default "plain"; }
--- http_config2
    map $uri $flavour { default "spicy"; }
--- config
    location / { return 200 "$flavour\n"; }
--- config2
    location / { return 200 "v2 $flavour\n"; }
--- steps
A GET / => 200; body =~ /^plain$/
reload-with http_config2
A GET / => 200; body =~ /^spicy$/
reload-with config2
A GET / => 200; body =~ /^v2 spicy$/
kill-worker
A GET / => 200; body =~ /^v2 spicy$/
--- no_check_error_log
--- error_log
exited on signal 9

=== TEST 9: redirects are followed like a browser, with the cookies it received
--- config
    location = /r { add_header Set-Cookie "c=1; Path=/" always; return 307 /t; }
    location = /t { if ($http_cookie ~ "c=1") { return 200 "has cookie\n"; } return 200 "no cookie\n"; }
    location = /echo { return 200 "method=$request_method cookie=[$http_cookie] accept=$http_accept args=$args\n"; }
    location = /r-echo { add_header Set-Cookie "c=1; Path=/"; return 307 /echo; }
    # a chain of two: v changes on the way, a is set then deleted, w is set by the final hop
    location = /two { add_header Set-Cookie "v=1"; add_header Set-Cookie "a=1"; return 302 /two-b; }
    location = /two-b { add_header Set-Cookie "v=2"; add_header Set-Cookie "a=; Max-Age=0"; return 301 /two-c; }
    location = /two-c { add_header Set-Cookie "v=3"; add_header Set-Cookie "w=9"; return 200 "cookie=[$http_cookie]\n"; }
    # absolute URLs name any host: the path and query go to the same instance
    location = /abs { return 307 "http://localhost:$TEST_NGINX_PORT/t"; }
    location = /abs-other { return 302 "http://other.example:1/echo?x=1"; }
    location = /rel { absolute_redirect off; return 302 /echo?rel=1; }
    location = /weird { return 302 "not/a/path"; }
    # the step's other headers are sent on every hop
    location = /needs-accept { if ($http_accept != "text/x-test") { return 403; } return 303 /echo; }
    # 303 (and 301/302) turn a POST into a GET; 307/308 keep it
    location = /see { return 303 /echo; }
    location = /moved { return 301 /echo; }
    location = /keep { return 307 /echo; }
    location = /keep-perm { return 308 /echo; }
    # /hop/ -> /hop/x -> /hop/xx ...: never ends; /five/ ends after exactly 5
    location ~ ^/hop/(x*)$ { return 302 /hop/$1x; }
    location ~ "^/five/(x{0,4})$" { return 302 /five/$1x; }
    location = /five/xxxxx { return 200 "five hops\n"; }
--- steps
A GET /t => 200; body =~ /^no cookie$/; redirects == 0
A GET /r => 200; body =~ /^has cookie$/; redirects == 1; redirects > 0; cookie c =~ /^1$/; header Set-Cookie =~ /^c=1; Path=\//
A GET /t => 200; body =~ /^has cookie$/; redirects == 0
B GET /two => 200; redirects == 2; body =~ /^cookie=\[v=2\]$/; cookie v =~ /^3$/; cookie a deleted; cookie w set; header Set-Cookie =~ /^v=1$/; header Set-Cookie =~ /^a=1$/
B GET /echo => 200; body =~ /cookie=\[v=3; w=9\]/
C GET /abs => 200; redirects == 1; body =~ /^no cookie$/
C GET /abs-other => 200; redirects == 1; body =~ /^method=GET cookie=\[\] .*args=x=1$/
C GET /rel => 200; redirects == 1; body =~ /args=rel=1$/
C GET /weird => 302; redirects == 0; header Location =~ /^not\/a\/path$/
C GET /needs-accept Accept: text/x-test => 200; redirects == 1; body =~ /^method=GET .*accept=text\/x-test /
C GET /needs-accept => 403; redirects == 0
C POST /see => 200; redirects == 1; body =~ /^method=GET /
C PUT /moved => 200; redirects == 1; body =~ /^method=GET /
C POST /keep => 200; redirects == 1; body =~ /^method=POST /
C POST /keep-perm => 200; redirects == 1; body =~ /^method=POST /
C HEAD /see => 200; redirects == 1; body !~ /./
C GET /five/ => 200; redirects == 5; body =~ /^five hops$/
C GET /hop/ => 302; redirects == 5; redirects <= 5; header Location =~ /\/hop\/x{6}$/
repeat 2: D GET /r => 200; redirects == 1; body =~ /has cookie/
until 2: E GET /r => 200; redirects == 1
# an explicit Cookie header is what the first hop sends; the redirect's Set-Cookie updates it
F GET /r-echo Cookie: keep=1 => 200; redirects == 1; body =~ /cookie=\[keep=1; c=1\] /
F GET /r-echo Cookie: c=0; keep=1 | Accept: text/x-test => 200; body =~ /^method=GET cookie=\[c=1; keep=1\] accept=text\/x-test /
H GET /two Cookie: a=0; keep=1 | Accept: text/x-test => 200; redirects == 2; body =~ /^cookie=\[keep=1; v=2\]$/
H GET /echo => 200; body =~ /cookie=\[v=3; w=9\]/
parallel 3 p GET /r => 200; count 200 == 3; body =~ /^has cookie$/; redirects == 1; cookie c set
p2 GET /t => 200; body =~ /^has cookie$/
bg q GET /two => 200; redirects == 2; cookie v =~ /^3$/
wait-bg
q GET /echo => 200; body =~ /cookie=\[v=3; w=9\]/
--- no_error_log
[error]

=== TEST 10: elapsed covers the whole redirect chain
--- http_config
    limit_req_zone $server_name zone=chain:1m rate=4r/s;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        absolute_redirect off;
        location = /p/1 { return 302 /p/2; }
        location = /p/2 { return 302 /p/3; }
        location = /p/3 { return 200 "end\n"; }
    }
--- config
    # every hop goes through limit_req: 4r/s spaces the three hops 0.25 s apart
    location /p/ { limit_req zone=chain burst=5; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
--- steps
A GET /p/1 => 200; body =~ /^end$/; redirects == 2; elapsed > 0.4

=== TEST 11: follow_redirects: 0 shows the 30x itself
--- follow_redirects: 0
--- config
    location = /r { add_header Set-Cookie "c=1; Path=/" always; return 307 /t; }
    location = /t { if ($http_cookie ~ "c=1") { return 200 "has cookie\n"; } return 200 "no cookie\n"; }
--- steps
A GET /r => 307; redirects == 0; header Location =~ /\/t$/; cookie c set
A GET /t => 200; body =~ /^has cookie$/; redirects == 0
parallel 2 p GET /r => 307; redirects == 0
bg B GET /r => 307; redirects == 0

=== TEST 12: a request names its source address (from ADDR); every hop uses it
--- instances: 2
--- config
    location = /ip { return 200 "$remote_addr\n"; }
    location = /note { return 200 "$remote_addr note=$http_x_note\n"; }
    # only 127.0.0.9 is redirected: the final body shows the last hop's address
    location = /r { if ($remote_addr != "127.0.0.9") { return 403; } return 302 /ip; }
--- steps
A GET /ip => 200; body =~ /^127\.0\.0\.1$/
A GET /ip from 127.0.0.7 => 200; body =~ /^127\.0\.0\.7$/
A GET /ip from 127.1.2.3 @2 => 200; body =~ /^127\.1\.2\.3$/
A GET /ip @2 from 127.255.0.1 => 200; body =~ /^127\.255\.0\.1$/
A GET /note from 127.0.0.8 X-Note: sent from the test | Accept: text/plain => 200; body =~ /^127\.0\.0\.8 note=sent from the test$/
A GET /note X-Note: from 127.0.0.5 or so => 200; body =~ /^127\.0\.0\.1 note=from 127\.0\.0\.5 or so$/
A GET /r => 403
A GET /r from 127.0.0.9 => 200; redirects == 1; body =~ /^127\.0\.0\.9$/
repeat 2: A GET /r from 127.0.0.9 => 200; body =~ /^127\.0\.0\.9$/
until 2: A GET /ip from 127.0.0.10 => 200; body =~ /^127\.0\.0\.10$/
parallel 3 p GET /r from 127.0.0.9 => 200; count 200 == 3; redirects == 1; body =~ /^127\.0\.0\.9$/
bg B GET /r from 127.0.0.9 => 200; body =~ /^127\.0\.0\.9$/
wait-bg
--- no_error_log
[error]

=== TEST 13: shell steps: sh, bg-sh, their output, captured numbers
--- config
    location = /ip { return 200 "$remote_addr\n"; }
    location = /flag.txt { log_not_found off; }
    location / { return 200 "path=$uri x=$http_x_n\n"; }
--- steps
sh true
sh ! false
sh echo hello => /^hello$/
sh echo out; echo err >&2; echo "port $TEST_NGINX_PORT" => /^out\nerr\nport \d+$/
sh printenv TEST_NGINX_PORT TEST_NGINX_HTML_DIR => /^\d+\n\/\S+\/html$/
sh 5: sleep 0.1
sh curl -sS http://127.0.0.1:$TEST_NGINX_PORT/ip => /^127\.0\.0\.1$/
# what a command leaves running in its process group is killed when it ends
sh sleep 30 & echo $! > $TEST_NGINX_SERVROOT/left.pid
sh ! grep -qs '^State:[[:space:]]*[RSD]' /proc/$(cat $TEST_NGINX_SERVROOT/left.pid)/status
sh echo "Requests/sec:   1234.56" => /Requests\/sec:\s+(\d+)/ as $RPS
sh test $RPS -eq 1234
A GET /n/$RPS X-N: ${RPS}0 => 200; body =~ /^path=\/n\/1234 x=12340$/; body =~ /$RPS/
sh echo 3 => /(\d)/ as $N
parallel $N p GET /ip from 127.0.$N.1 => 200; count 200 == $N; body =~ /^127\.0\.$N\.1$/
sh echo "n 7" => /n (\d+)/ as $N
sh test $N = 7
# bg-sh goes on at once; wait-bg reports it. (The background command waits for a file the
# next steps create, not a fixed time: the step after it runs while it is still waiting.)
bg-sh until [ -e $TEST_NGINX_SERVROOT/go ]; do sleep 0.05; done; echo late > $TEST_NGINX_HTML_DIR/flag.txt; echo written => /^written$/
A GET /flag.txt => 404
sh touch $TEST_NGINX_SERVROOT/go
bg-sh echo "bg 5" => /bg (\d+)/ as $BG
wait-bg
A GET /flag.txt => 200; body =~ /^late$/
sh test $BG -eq 5
--- no_error_log
[error]

=== TEST 14: jar prepend: a forged cookie in front of the real one
--- config
    location = /echo { return 200 "cookie=[$http_cookie]\n"; }
    location = /set { add_header Set-Cookie "t=real2"; return 200 "set\n"; }
    location = /r { add_header Set-Cookie "t=real3"; add_header Set-Cookie "u=1"; return 302 /echo; }
--- steps
jar A prepend t=junk
A GET /echo => 200; body =~ /^cookie=\[t=junk\]$/
jar A set t=real
A GET /echo => 200; body =~ /^cookie=\[t=junk; t=real\]$/
A GET /set => 200; cookie t =~ /^real2$/
A GET /echo => 200; body =~ /^cookie=\[t=junk; t=real2\]$/
A GET /r => 200; redirects == 1; body =~ /^cookie=\[t=junk; t=real3; u=1\]$/
A GET /echo Cookie: mine=1 => 200; body =~ /^cookie=\[mine=1\]$/
jar A copy B
B GET /echo => 200; body =~ /^cookie=\[t=real3; u=1\]$/
jar A prepend other=$TEST_NGINX_PORT
A GET /echo => 200; body =~ /^cookie=\[other=\d+; t=real3; u=1\]$/
bg A GET /r => 200; body =~ /^cookie=\[other=\d+; t=real3; u=1\]$/
wait-bg
jar p1 prepend t=junk
parallel 2 p GET /echo => 200; body =~ /^cookie=\[(?:t=junk)?\]$/
p1 GET /echo => 200; body =~ /^cookie=\[t=junk\]$/
p2 GET /echo => 200; body =~ /^cookie=\[\]$/
jar A clear
A GET /echo => 200; body =~ /^cookie=\[\]$/

=== TEST 15: every instance's port, for tools that talk to all nodes
--- instances: 3
--- config
    location = /who { return 200 "node $TEST_NGINX_INSTANCE of $TEST_NGINX_PORTS\n"; }
--- steps
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N3/who => /^node 3 of \d+,\d+,\d+$/
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N2/who => /^node 2 of /
sh test "$TEST_NGINX_PORTS" = "$TEST_NGINX_PORT_N1,$TEST_NGINX_PORT_N2,$TEST_NGINX_PORT_N3"
A GET /who @2 => 200; body =~ /^node 2 of \d+,\d+,\d+$/
--- no_error_log
[error]
