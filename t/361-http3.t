# The room over HTTP/3 (QUIC): `listen ... quic` beside `listen ... ssl` on the same port
# number, a throw-away self-signed certificate made here with openssl.
#
# Client: aioquic (PyPI, pinned in scripts/lib/common.sh, installed by scripts/test into the
# venv target/py) through t/lib/h3_client.py: one QUIC connection per call, each client with
# its own cookie jar, the certificate checked. Debian 12's curl has no HTTP/3.
#
# That a request really was HTTP/3 is asserted twice: the client's negotiated ALPN ("h3") and
# nginx's word, `X-Proto: $server_protocol $http3 $remote_port` on every answer (also the
# module's 307 and waiting answers) and in the access log. ($connection numbers each QUIC
# stream on its own; the client's UDP port tells its connection.)
#
# Runs on whatever nginx TEST_NGINX_BINARY names: scripts/test runs it on the vendored nginx
# 1.28.3 (built --with-http_v3_module, .cargo/config.toml), t/501-debian13.t again on Debian
# 13's own nginx 1.26.3 with the module built for it.
#
# One nginx, one worker, a room of one place (store=shm):
#   first contact: 307 with the ticket cookie over HTTP/3; back with it: admitted, the origin's
#   page; several streams of the admitted client on one connection; a second client waits
#   (JSON position 1, the HTML page, a third at position 2); the holder logs out (the origin's
#   revoke) and the waiting client's next HTTP/3 request gets the origin's page. The TLS port
#   over TCP advertises h3 with Alt-Svc, as a browser needs to find it.

use strict;
use warnings;
use lib 't/lib';
use Cwd ();
use File::Path ();
use JSON::PP ();
use Test::More;
use SmartLimit::Test::Server ();

my ($bin, $mod) = @ENV{qw(TEST_NGINX_BINARY TEST_NGINX_MODULE)};
plan skip_all => 'TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)'
    unless $bin && $mod;

my $T = Cwd::abs_path('t');
my $ROOT = Cwd::abs_path("$T/..");
my $BASE = "$T/servroot/361-http3.$$";
my $PYTHON = $ENV{SL_PYTHON} // "$ROOT/target/py/bin/python";
my $CLIENT = "$T/lib/h3_client.py";
my $REFRESH = 2;
my $JSON = JSON::PP->new;

# ---------------------------------------------------------------- tools

my $V = `'$bin' -V 2>&1`;
my ($nginx_version) = $V =~ m{nginx/(\S+)};
ok($V =~ /--with-http_v3_module/, "nginx $nginx_version is built --with-http_v3_module")
    or diag($V);
my $aioquic = `'$PYTHON' -c 'import aioquic; print(aioquic.__version__)' 2>&1`;
ok($? == 0, "aioquic is installed in $PYTHON ($aioquic)" =~ s/\n//r)
    or diag("$aioquic\nrun scripts/test (it installs aioquic into target/py)");
BAIL_OUT('no HTTP/3 in nginx or no aioquic') unless $V =~ /http_v3/ && $aioquic =~ /^\d/;

File::Path::make_path("$BASE/cert", "$BASE/jars");
my $CERT = "$BASE/cert/cert.pem";
my $KEY = "$BASE/cert/cert.key";
my $ossl = `openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout $KEY -out $CERT -subj /CN=localhost -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' 2>&1`;
ok($? == 0 && -s $CERT, 'a throw-away self-signed certificate for localhost') or diag($ossl);

# ---------------------------------------------------------------- nginx

my $srv;
END {
    my $status = $?;
    $srv->stop if $srv;
    File::Path::remove_tree($BASE) if $BASE && !$ENV{TEST_NGINX_NO_CLEAN} && -d $BASE;
    $? = $status;
}

my $ORIGIN = <<'EOF';
>>> origin/index.html
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Acme Tickets</title>
<link rel="stylesheet" href="/style.css"></head>
<body><h1>Acme Tickets: the sale is open</h1><img src="/logo.svg" alt="logo"></body></html>
>>> origin/style.css
body { font-family: sans-serif; }
>>> origin/logo.svg
<svg xmlns="http://www.w3.org/2000/svg" width="12" height="12"><circle cx="6" cy="6" r="5"/></svg>
EOF

my $root = "$BASE/nginx";
$srv = SmartLimit::Test::Server->new(
    index => 1, servroot => $root, binary => Cwd::abs_path($bin), module => Cwd::abs_path($mod),
    vars => {
        TEST_NGINX_PORT => SmartLimit::Test::Server::free_port(),
        TEST_NGINX_PORT2 => SmartLimit::Test::Server::free_port(),
        TEST_NGINX_TLS_PORT => SmartLimit::Test::Server::free_port(),
        TEST_NGINX_SERVROOT => $root, TEST_NGINX_HTML_DIR => "$root/html",
    },
);
$srv->prepare;
$srv->write_user_files($ORIGIN);
$srv->write_config({
    workers => 1, log_level => 'info', main_config => '',
    http_config => <<"EOF",
    smart_limit_zone shop size=1m max_active=1;
    types { text/html html; text/css css; image/svg+xml svg; }
    log_format h3 '\$server_protocol \$http3 \$remote_port \$request_uri \$status \$smart_limit_status';
    server {
        listen 127.0.0.1:\$TEST_NGINX_PORT2;
        access_log off;
        root html/origin;
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\\n"; }
    }
EOF
    # The README's lines: QUIC (UDP) and TLS (TCP) on the same port number, Alt-Svc on every
    # answer so that browsers coming over TCP learn of HTTP/3.
    config => <<"EOF",
        listen 127.0.0.1:\$TEST_NGINX_TLS_PORT quic reuseport;
        listen 127.0.0.1:\$TEST_NGINX_TLS_PORT ssl;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        access_log logs/h3.log h3;
        add_header Alt-Svc 'h3=":\$TEST_NGINX_TLS_PORT"; ma=86400' always;
        add_header X-Proto "\$server_protocol \$http3 \$remote_port" always;
        location / {
            smart_limit shop;
            smart_limit_refresh ${REFRESH}s;
            proxy_pass http://127.0.0.1:\$TEST_NGINX_PORT2;
        }
EOF
});
my ($up, $msg) = $srv->start(1);
ok($up, "nginx $nginx_version starts with a quic listener") or do { diag($msg); BAIL_OUT('nginx did not start') };
my $PORT = $srv->{vars}{TEST_NGINX_TLS_PORT};

# ---------------------------------------------------------------- the client

# h3(client, [paths], json => 1, parallel => 1): one aioquic run, one QUIC connection. Returns
# (exit code, raw output, responses). A response: { status, headers, body, alpn, stream, json }.
sub h3 {
    my ($client, $paths, %o) = @_;
    my ($rc, $out) = SmartLimit::Test::Server::run_capture(
        $PYTHON, $CLIENT, '--port', $PORT, '--ca', $CERT, '--jar', "$BASE/jars/$client",
        '--accept', $o{json} ? 'application/json' : 'text/html',
        ($o{parallel} ? ('--parallel') : ()), @$paths);
    my @r = map { eval { $JSON->decode($_) } // () } grep { /^\{/ } split /\n/, $out;
    for my $r (@r) {
        $r->{json} = eval { $JSON->decode($r->{body}) }
            if (($r->{headers}{'content-type'} // [''])->[0] =~ /json/);
    }
    return ($rc, $out, @r);
}

sub h { my ($r, $name) = @_; return ($r->{headers}{$name} // [])->[0] }

sub jar_of { my $j = eval { $JSON->decode(SmartLimit::Test::Server::slurp("$BASE/jars/$_[0]")) }; $j // {} }

# One test per response: every expectation listed must hold (an HTTP/3 answer always).
#   status, body => qr//, json => { key => value }, header => { name => qr// },
#   cookie => 'set'|'deleted'
sub expect {
    my ($r, $name, $out, %w) = @_;
    my @bad;
    $r //= { status => 0, headers => {} };
    push @bad, "status $r->{status}, want $w{status}" if $r->{status} != $w{status};
    push @bad, "ALPN '" . ($r->{alpn} // '') . "', want h3" unless ($r->{alpn} // '') eq 'h3';
    my $proto = h($r, 'x-proto') // '';
    push @bad, "X-Proto '$proto', want 'HTTP/3.0 h3 N'" unless $proto =~ /^HTTP\/3\.0 h3 \d+$/;
    push @bad, "body does not match $w{body}" if $w{body} && ($r->{body} // '') !~ $w{body};
    for my $k (sort keys %{ $w{json} || {} }) {
        my $got = ($r->{json} || {})->{$k} // 'undef';
        push @bad, "json.$k = $got, want $w{json}{$k}" if $got ne $w{json}{$k};
    }
    for my $k (sort keys %{ $w{header} || {} }) {
        my $got = h($r, $k) // '';
        push @bad, "header $k '$got' does not match $w{header}{$k}" if $got !~ $w{header}{$k};
    }
    my $set = join "\n", @{ $r->{headers}{'set-cookie'} // [] };
    push @bad, "no smart_limit_shop cookie set" if ($w{cookie} // '') eq 'set' && $set !~ /^smart_limit_shop=[^;]+;/m;
    push @bad, "the ticket cookie is not deleted"
        if ($w{cookie} // '') eq 'deleted' && $set !~ /^smart_limit_shop=;.*Max-Age=0/mi;
    ok(!@bad, $name) or diag(join("\n", @bad) . "\nclient output:\n$out");
}

# ---------------------------------------------------------------- the room over HTTP/3

my ($rc, $out, @r);

($rc, $out, @r) = h3('A', ['/']);
expect($r[0], 'A, first contact over HTTP/3: the cookie check, 307 with the ticket', $out,
    status => 307, cookie => 'set', header => { location => qr{^https://localhost(?::\d+)?/$} });
ok(($r[0]{headers}{'set-cookie'}[0] // '') =~ /;\s*Secure/i, '... the ticket of an HTTP/3 answer is Secure')
    or diag($out);
ok(jar_of('A')->{smart_limit_shop}, "... and A's jar keeps it");

($rc, $out, @r) = h3('A', ['/']);
expect($r[0], 'A back with its ticket: admitted, the origin page over HTTP/3', $out,
    status => 200, body => qr/Acme Tickets/, cookie => 'set');

($rc, $out, @r) = h3('A', ['/', '/style.css', '/logo.svg', '/?x=1'], parallel => 1);
my %conn = map { ((h($_, 'x-proto') // '') =~ /(\d+)$/)[0] // 'none' => 1 } @r;
my %streams = map { ($_->{stream} // -1) => 1 } @r;
ok($rc == 0 && @r == 4 && !grep({ $_->{status} != 200 || ($_->{alpn} // '') ne 'h3' } @r)
   && keys %conn == 1 && !$conn{none} && keys %streams == 4,
   'A: four concurrent streams from one UDP port (one QUIC connection), all 200 from the origin')
    or diag($out);

($rc, $out, @r) = h3('B', ['/']);
expect($r[0], 'B, first contact: 307 with its ticket', $out, status => 307, cookie => 'set');
($rc, $out, @r) = h3('B', ['/'], json => 1);
expect($r[0], 'B waits (max_active=1 taken by A): 503, JSON position 1 over HTTP/3', $out,
    status => 503, json => { status => 'waiting', position => 1, queue_length => 1 },
    header => { 'retry-after' => qr/^$REFRESH$/ });
($rc, $out, @r) = h3('B', ['/']);
expect($r[0], 'B as a browser: the waiting page with position 1', $out,
    status => 503, body => qr{<div class="pos-num">1</div>},
    header => { 'content-type' => qr{^text/html} });
h3('C', ['/']);
($rc, $out, @r) = h3('C', ['/'], json => 1);
expect($r[0], 'C waits behind B: position 2 of 2', $out,
    status => 503, json => { status => 'waiting', position => 2, queue_length => 2 });

($rc, $out, @r) = h3('A', ['/logout']);
expect($r[0], "A logs out: the origin's revoke ends its session, the ticket deleted", $out,
    status => 200, body => qr/^bye$/, cookie => 'deleted');
($rc, $out, @r) = h3('B', ['/']);
expect($r[0], "B's next request over HTTP/3 is admitted: the origin's page", $out,
    status => 200, body => qr/Acme Tickets/);
($rc, $out, @r) = h3('C', ['/'], json => 1);
expect($r[0], 'C moves up: position 1', $out, status => 503, json => { position => 1 });

# Over TCP the same port advertises HTTP/3 (curl speaks HTTP/1.1 or 2 here).
my $tcp = `curl -sS --max-time 10 --cacert $CERT -o /dev/null -D - https://localhost:$PORT/ --resolve localhost:$PORT:127.0.0.1 2>&1`;
like($tcp, qr/^alt-svc: h3=":$PORT"; ma=86400\r?$/mi, 'the TLS port over TCP advertises h3 with Alt-Svc')
    or diag($tcp);

$srv->stop;
my @lines = grep { length } split /\n/, SmartLimit::Test::Server::slurp("$root/logs/h3.log");
my @tcp = grep { !/^HTTP\/3\.0 h3 / } @lines;
is(scalar(@tcp), 1, 'access log: every request but the Alt-Svc probe was HTTP/3.0 h3')
    or diag(join "\n", @lines);
ok(@lines >= 14, 'access log: all ' . scalar(@lines) . ' requests are there');
my $log = $srv->error_log;
unlike($log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log')
    or diag($log);
undef $srv;

done_testing();
