# The room over HTTP/2: TLS with ALPN (`listen ... ssl; http2 on;`, a throw-away self-signed
# certificate made here with openssl) and h2c with prior knowledge (`listen ...; http2 on;`).
#
# Clients: curl (Debian's, HTTP/2 through nghttp2) with its own cookie jar per client; nghttp
# and h2load (nghttp2-client) for several streams on one h2c connection, because curl 7.88.1
# cannot reuse an h2c prior-knowledge connection (a second request on it fails with "Error in
# the HTTP2 framing layer", curl/curl#10634, fixed in 8.0); and Debian's headless Chromium
# (playwright-core, t/browser/h2-waiting.mjs) for the waiting page over h2 with TLS.
#
# That a request really was HTTP/2 is asserted twice: curl's %{http_version} (or nghttp's and
# h2load's own report) and nginx's word, `X-Proto: $server_protocol $http2 $connection` added
# to every answer (also the module's 307 and waiting answers) and the access log.
#
# Scenarios, each on a fresh nginx (one worker):
#   1. TLS h2, store=shm: cookie check, admitted, a second client waiting (page, JSON, HEAD),
#      several streams on one connection (in a row, and concurrent), the holder logs out and
#      the waiting client is admitted; then Chromium waits over h2 and gets in by itself.
#   2. h2c, store=shm: the same answers with prior knowledge, streams by nghttp and h2load,
#      and the waiting client admitted when the holder's active_window runs out.
#   3. store=redis: one line whatever the transport (h2 and h2c), the holder logs out over h2
#      and the waiting client is admitted over h2c.

use strict;
use warnings;
use lib 't/lib';
use Cwd ();
use File::Path ();
use JSON::PP ();
use POSIX ();
use Test::More;
use Time::HiRes ();
use SmartLimit::Test::Server ();

my ($bin, $mod) = @ENV{qw(TEST_NGINX_BINARY TEST_NGINX_MODULE)};
plan skip_all => 'TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)'
    unless $bin && $mod;

my $T = Cwd::abs_path('t');
my $BASE = "$T/servroot/360-http2.$$";
my $BROWSER_DIR = "$T/browser";
my $CHROMIUM = $ENV{SL_CHROMIUM} // '/usr/bin/chromium';
my $REFRESH = 2;
my $JSON = JSON::PP->new;

# ---------------------------------------------------------------- tools

my $curl_v = `curl -V 2>&1`;
ok($curl_v =~ /^Features:.*\bHTTP2\b/m, 'curl has HTTP/2 (nghttp2)') or diag($curl_v);
my $have_nghttp = system('nghttp --version >/dev/null 2>&1') == 0
    && system('h2load --version >/dev/null 2>&1') == 0;
ok($have_nghttp, 'nghttp and h2load are installed (nghttp2-client)')
    or diag('run scripts/test (it installs nghttp2-client)');
my $have_redis = system('redis-server --version >/dev/null 2>&1') == 0;
ok($have_redis, 'redis-server is installed');
BAIL_OUT('missing tools') unless $curl_v =~ /HTTP2/ && $have_nghttp && $have_redis;

File::Path::make_path("$BASE/cert", "$BASE/jars");
my $CERT = "$BASE/cert/cert.pem";
my $KEY = "$BASE/cert/cert.key";
my $ossl = `openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout $KEY -out $CERT -subj /CN=localhost -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' 2>&1`;
ok($? == 0 && -s $CERT, 'a throw-away self-signed certificate for 127.0.0.1') or diag($ossl);

# ---------------------------------------------------------------- nginx

my @RUNNING;    # servers and redis started here, stopped at the end whatever happens
END {
    my $status = $?;
    $_->stop for grep { $_ } @RUNNING;
    File::Path::remove_tree($BASE) if $BASE && !$ENV{TEST_NGINX_NO_CLEAN} && -d $BASE;
    $? = $status;
}

my $ORIGIN = <<'EOF';
>>> origin/index.html
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Acme Tickets</title>
<link rel="stylesheet" href="/style.css">
</head>
<body>
<main id="origin-page">
<h1>Acme Tickets: the sale is open</h1>
<img id="logo" src="/logo.svg" width="120" height="120" alt="Acme logo">
</main>
</body>
</html>
>>> origin/style.css
body { font-family: sans-serif; margin: 2rem; }
h1 { color: rgb(10, 110, 60); }
>>> origin/logo.svg
<svg xmlns="http://www.w3.org/2000/svg" width="120" height="120" viewBox="0 0 120 120"><circle cx="60" cy="60" r="54" fill="#0a6e3c"/></svg>
>>> keys.txt
3b1f0c5e8a7d6c4b2a19f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3
EOF

# A fresh nginx: the room (one place) on the h2c port and on the TLS port, proxying to an
# origin server whose /logout revokes the session. $zone: the rest of smart_limit_zone.
sub start_nginx {
    my ($name, $zone, $http) = @_;
    $http //= '';
    my $root = "$BASE/$name";
    my $srv = SmartLimit::Test::Server->new(
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
    $http
    smart_limit_zone shop size=1m max_active=1 $zone;
    types { text/html html; text/css css; image/svg+xml svg; }
    log_format h2 '\$server_protocol \$http2 \$connection \$request_method \$request_uri \$status \$smart_limit_status "\$http_user_agent"';
    server {
        listen 127.0.0.1:\$TEST_NGINX_PORT2;
        access_log off;
        root html/origin;
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\\n"; }
    }
EOF
        config => <<"EOF",
        listen 127.0.0.1:\$TEST_NGINX_TLS_PORT ssl;
        http2 on;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        access_log logs/h2.log h2;
        add_header X-Proto "\$server_protocol \$http2 \$connection" always;
        location / {
            smart_limit shop;
            smart_limit_refresh ${REFRESH}s;
            proxy_pass http://127.0.0.1:\$TEST_NGINX_PORT2;
        }
EOF
    });
    my ($up, $msg) = $srv->start(1);
    ok($up, "$name: nginx starts") or do { diag($msg); BAIL_OUT("nginx did not start") };
    push @RUNNING, $srv;
    return $srv;
}

sub stop_nginx {
    my ($srv, $name) = @_;
    $srv->stop;
    @RUNNING = grep { $_ != $srv } @RUNNING;
    my $log = $srv->error_log;
    unlike($log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, "$name: no alert or crash in the error log")
        or diag($log);
}

# ---------------------------------------------------------------- curl

sub jar { "$BASE/jars/$_[0]" }

# The value of a client's ticket cookie from its curl jar (Netscape format; HttpOnly cookies
# are written with a "#HttpOnly_" prefix).
sub ticket_of {
    my ($client) = @_;
    for my $line (split /\n/, SmartLimit::Test::Server::slurp(jar($client))) {
        $line =~ s/^#HttpOnly_//;
        next if $line =~ /^#/ || $line !~ /\t/;
        my @f = split /\t/, $line;
        return $f[6] if @f >= 7 && $f[5] eq 'smart_limit_shop';
    }
    return undef;
}

my $NCURL = 0;

# Requests in one curl run: one connection for all of them when curl can reuse it (TLS).
# $how: 'tls' or 'h2c'; %o: parallel => 1 (concurrent streams). Each request:
# { client => NAME, path => '/x', head => 1, json => 1 }. Returns one result per request:
# { status, version, connects, port (curl's local port: the connection), method, size (body
# bytes received), headers => { lc name => [values] }, body, json, proto (the X-Proto header),
# cmd }.
sub curl {
    my ($srv, $how, $reqs, %o) = @_;
    my $n = ++$NCURL;
    my $dir = "$BASE/curl/$n";
    File::Path::make_path($dir);
    my $url = $how eq 'tls' ? 'https://127.0.0.1:' . $srv->{vars}{TEST_NGINX_TLS_PORT}
                            : 'http://127.0.0.1:' . $srv->port;
    my @cmd = ('curl', ($o{parallel} ? ('--parallel', '--parallel-max', '10') : ()));
    for my $i (0 .. $#$reqs) {
        my $r = $reqs->[$i];
        push @cmd, '--next' if $i;
        push @cmd, '-sS', '--max-time', '10',
            ($how eq 'tls' ? ('--http2', '--cacert', $CERT) : ('--http2-prior-knowledge')),
            ($r->{client} ? ('-b', jar($r->{client}), '-c', jar($r->{client})) : ()),
            ($r->{json} ? ('-H', 'Accept: application/json') : ('-H', 'Accept: text/html')),
            ($r->{head} ? ('-I') : ()),
            '-o', "$dir/body.$i",
            '-w', "<<W>>%{json}<<H>>%{header_json}<<E>>\n",
            $url . $r->{path};
    }
    my $pid = open(my $fh, '-|');
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDERR, '>', "$dir/stderr";
        exec(@cmd) or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    my $cmd = join(' ', map { /[\s'"*?&;<>]/ ? "'$_'" : $_ } @cmd);
    my @res = map { { status => 0, cmd => $cmd, error => SmartLimit::Test::Server::slurp("$dir/stderr") } } @$reqs;
    while ($out =~ /<<W>>(.*?)<<H>>(.*?)<<E>>/sg) {
        my ($w, $h) = (eval { $JSON->decode($1) }, eval { $JSON->decode($2) });
        next unless $w && ($w->{filename_effective} // '') =~ /body\.(\d+)$/;
        my $i = $1;
        my %headers = map { (lc $_ => $h->{$_}) } keys %{ $h || {} };
        my $body = SmartLimit::Test::Server::slurp("$dir/body.$i");
        my $json = ($headers{'content-type'}[0] // '') =~ /json/ ? eval { $JSON->decode($body) } : undef;
        $res[$i] = {
            %{ $res[$i] },
            status => $w->{response_code}, version => $w->{http_version},
            connects => $w->{num_connects}, port => $w->{local_port}, method => $w->{method},
            size => $w->{size_download}, headers => \%headers, json => $json,
            # with -I curl writes the headers where the body would go
            body => $w->{method} eq 'HEAD' ? '' : $body,
            proto => $headers{'x-proto'}[0] // '',
        };
    }
    return @res;
}

sub h { my ($r, $name) = @_; return $r->{headers}{lc $name}[0] }

sub dump_res {
    my ($r) = @_;
    my $s = "command: $r->{cmd}\nstatus $r->{status}, HTTP/" . ($r->{version} // '?')
        . ", connects " . ($r->{connects} // '?') . ", local port " . ($r->{port} // '?') . "\n";
    for my $k (sort keys %{ $r->{headers} || {} }) {
        $s .= "  $k: $_\n" for @{ $r->{headers}{$k} };
    }
    my $b = $r->{body} // '';
    $s .= 'body: ' . (length $b > 400 ? substr($b, 0, 400) . '...' : $b) . "\n";
    $s .= "curl stderr: $r->{error}\n" if $r->{error};
    return $s;
}

# One test per response: every expectation listed must hold.
#   status, h2 => 'h2'|'h2c' (curl saw HTTP/2 and nginx's $http2 says so), body => qr//,
#   nobody => 1, json => { key => value }, header => { name => qr// }, absent => [names],
#   cookie => 'set'|'deleted'|'absent', port => N (same connection as another answer)
sub expect {
    my ($r, $name, %w) = @_;
    my @bad;
    push @bad, "status $r->{status}, want $w{status}" if defined $w{status} && $r->{status} != $w{status};
    if ($w{h2}) {
        push @bad, "curl saw HTTP/" . ($r->{version} // '?') . ", not 2" unless ($r->{version} // '') eq '2';
        push @bad, "X-Proto '$r->{proto}', want 'HTTP/2.0 $w{h2} N'"
            unless $r->{proto} =~ /^HTTP\/2\.0 \Q$w{h2}\E \d+$/;
    }
    push @bad, "body does not match $w{body}" if $w{body} && ($r->{body} // '') !~ $w{body};
    push @bad, "body not empty ($r->{size} bytes)" if $w{nobody} && ($r->{size} // -1) != 0;
    for my $k (sort keys %{ $w{json} || {} }) {
        my $got = $r->{json} ? $r->{json}{$k} : undef;
        my $want = $w{json}{$k};
        push @bad, "json.$k = " . ($got // 'undef') . ", want $want"
            unless defined $got && "$got" eq "$want";
    }
    for my $k (sort keys %{ $w{header} || {} }) {
        my @v = @{ $r->{headers}{lc $k} || [] };
        push @bad, "no $k header matches $w{header}{$k}" unless grep { $_ =~ $w{header}{$k} } @v;
    }
    for my $k (@{ $w{absent} || [] }) {
        push @bad, "header $k present" if @{ $r->{headers}{lc $k} || [] };
    }
    if (my $c = $w{cookie}) {
        my @sc = grep { /^smart_limit_shop=/ } @{ $r->{headers}{'set-cookie'} || [] };
        my $deleted = grep { /Max-Age=0/i } @sc;
        push @bad, "no ticket cookie set" if $c eq 'set' && (!@sc || $deleted);
        push @bad, "ticket cookie not deleted" if $c eq 'deleted' && !$deleted;
        push @bad, "a ticket cookie was sent" if $c eq 'absent' && @sc;
    }
    push @bad, "local port $r->{port}, want $w{port} (another connection)"
        if defined $w{port} && ($r->{port} // -1) != $w{port};
    ok(!@bad, $name) or diag(join("\n", @bad) . "\n" . dump_res($r));
    return !@bad;
}

# Polls a client's JSON answer until it is admitted (200); returns (result, seconds waited).
sub until_admitted {
    my ($srv, $how, $client, $limit, $every) = @_;
    my $t0 = Time::HiRes::time();
    my $r;
    while (1) {
        ($r) = curl($srv, $how, [ { client => $client, path => '/', json => 1 } ]);
        last if $r->{status} == 200 || Time::HiRes::time() - $t0 > $limit;
        Time::HiRes::sleep($every);
    }
    return ($r, Time::HiRes::time() - $t0);
}

# nghttp: several streams on one h2c connection, with one client's ticket. Returns the
# streams in order: { id, status, headers => { name => value }, data (bytes of DATA) }.
sub nghttp {
    my ($srv, $client, $paths, %o) = @_;
    my $url = 'http://127.0.0.1:' . $srv->port;
    my @cmd = ('nghttp', '-n', '-v', '--timeout=10',
               '-H', 'cookie: smart_limit_shop=' . (ticket_of($client) // ''),
               ($o{head} ? ('-H', ':method: HEAD') : ()),
               map { $url . $_ } @$paths);
    my ($rc, $out) = SmartLimit::Test::Server::run_capture(@cmd);
    my %s;
    while ($out =~ /recv \(stream_id=(\d+)\) ([^:\s][^:]*|:status): (.*)$/mg) {
        $s{$1}{id} = $1;
        $s{$1}{headers}{$2} = $3;
    }
    while ($out =~ /recv DATA frame <length=(\d+), flags=0x0\d, stream_id=(\d+)>/g) {
        $s{$2}{data} += $1;
    }
    my @streams = map { $s{$_}{status} = $s{$_}{headers}{':status'}; $s{$_}{data} //= 0; $s{$_} }
                  sort { $a <=> $b } grep { $s{$_}{headers} } keys %s;
    return ($rc, $out, @streams);
}

sub access_log { SmartLimit::Test::Server::slurp($_[0]->servroot . '/logs/h2.log') }

# ================================================================ 1. TLS h2, store=shm
{
    my $name = 'h2 over TLS';
    my $srv = start_nginx('tls', '');
    my ($r, @r);

    ($r) = curl($srv, 'tls', [ { client => 'A', path => '/' } ]);
    expect($r, "$name: first contact is the cookie check: 307 with the ticket over h2",
        status => 307, h2 => 'h2', cookie => 'set', nobody => 1,
        header => { 'set-cookie' => qr/^smart_limit_shop=[^;]+;.*\bHttpOnly\b.*\bSecure\b/,
                    location => qr{^https://127\.0\.0\.1:\d+/$} });
    ($r) = curl($srv, 'tls', [ { client => 'A', path => '/' } ]);
    expect($r, "$name: back with the ticket, A is admitted: 200 from the origin",
        status => 200, h2 => 'h2', body => qr/Acme Tickets/, cookie => 'set');

    ($r) = curl($srv, 'tls', [ { client => 'B', path => '/' } ]);
    expect($r, "$name: B's first contact: 307", status => 307, h2 => 'h2', cookie => 'set');
    ($r) = curl($srv, 'tls', [ { client => 'B', path => '/' } ]);
    expect($r, "$name: B waits: the waiting page, 503, position 1",
        status => 503, h2 => 'h2', body => qr{<div class="pos-num">1</div>},
        header => { 'retry-after' => qr/^$REFRESH$/, 'cache-control' => qr/no-store/,
                    'content-type' => qr{^text/html} });
    ($r) = curl($srv, 'tls', [ { client => 'B', path => '/', json => 1 } ]);
    expect($r, "$name: B's JSON answer: waiting, position 1",
        status => 503, h2 => 'h2', header => { 'content-type' => qr{^application/json} },
        json => { status => 'waiting', position => 1, queue_length => 1, refresh_seconds => $REFRESH });

    # HEAD over h2: the same status and headers, no body.
    ($r) = curl($srv, 'tls', [ { client => 'B', path => '/', head => 1 } ]);
    expect($r, "$name: B's HEAD: 503 with Retry-After and no body",
        status => 503, h2 => 'h2', nobody => 1, header => { 'retry-after' => qr/^$REFRESH$/ });
    ($r) = curl($srv, 'tls', [ { client => 'A', path => '/', head => 1 } ]);
    expect($r, "$name: A's HEAD: 200 with the origin's length and no body",
        status => 200, h2 => 'h2', nobody => 1, header => { 'content-length' => qr/^[1-9]\d*$/ });

    # Streams one after another on one connection, each answered by its own ticket.
    @r = curl($srv, 'tls', [ { client => 'A', path => '/?s=1' }, { client => 'A', path => '/?s=2', head => 1 },
                             { client => 'B', path => '/?s=3', json => 1 }, { client => 'A', path => '/style.css' } ]);
    my $port = $r[0]{port};
    ok($r[0]{connects} == 1 && !grep({ $_->{connects} } @r[1 .. 3]), "$name: four streams in a row, one connection")
        or diag(join "\n", map { dump_res($_) } @r);
    my ($conn) = $r[0]{proto} =~ / (\d+)$/;
    expect($r[0], "$name: stream 1, A's GET: 200", status => 200, h2 => 'h2', body => qr/Acme/);
    expect($r[1], "$name: stream 2, A's HEAD: 200, no body", status => 200, h2 => 'h2', nobody => 1,
           port => $port, header => { 'x-proto' => qr/ \Q$conn\E$/ });
    expect($r[2], "$name: stream 3, B's JSON on A's connection: 503, position 1", status => 503, h2 => 'h2',
           port => $port, json => { position => 1 }, header => { 'x-proto' => qr/ \Q$conn\E$/ });
    expect($r[3], "$name: stream 4, A's style sheet: 200", status => 200, h2 => 'h2', body => qr/color/,
           port => $port, header => { 'x-proto' => qr/ \Q$conn\E$/ });

    # Concurrent streams (curl multiplexes them on one connection).
    @r = curl($srv, 'tls', [ map { { client => 'A', path => "/?p=$_" } } 1 .. 6 ], parallel => 1);
    my %ports = map { ($_->{port} // 0) => 1 } @r;
    my %conns = map { ($_->{proto} =~ / (\d+)$/)[0] // 'none' => 1 } @r;
    ok(!grep({ $_->{status} != 200 || $_->{version} ne '2' || $_->{body} !~ /Acme/ } @r)
       && keys %ports == 1 && keys %conns == 1,
       "$name: six concurrent streams of A on one connection: all 200 over h2")
        or diag(join "\n", map { dump_res($_) } @r);
    @r = curl($srv, 'tls', [ map { { client => 'B', path => "/?q=$_", json => 1 } } 1 .. 3 ], parallel => 1);
    %ports = map { ($_->{port} // 0) => 1 } @r;
    ok(!grep({ $_->{status} != 503 || !$_->{json} || ($_->{json}{position} // 0) != 1 } @r)
       && keys %ports == 1,
       "$name: three concurrent streams of B on one connection: all 503, position 1")
        or diag(join "\n", map { dump_res($_) } @r);

    # The holder leaves: its logout is answered with the revoke; B is let in on its next poll.
    ($r) = curl($srv, 'tls', [ { client => 'A', path => '/logout' } ]);
    expect($r, "$name: A logs out: the origin revokes the session (cookie deleted, header removed)",
        status => 200, h2 => 'h2', cookie => 'deleted', absent => ['x-smart-limit']);
    ($r) = curl($srv, 'tls', [ { client => 'B', path => '/' } ]);
    expect($r, "$name: B's next poll admits it: 200 from the origin with an admitted ticket",
        status => 200, h2 => 'h2', body => qr/Acme Tickets/, cookie => 'set');

    # Chromium over h2: B holds the place, the browser waits at position 1, B logs out, the
    # browser gets in by itself.
    my $node_ok = (`node --version 2>/dev/null` =~ /^v(\d+)/)[0] // 0;
    if ($ENV{SL_SKIP_BROWSER}) {
        pass("$name: browser skipped (SL_SKIP_BROWSER)");
    } elsif (!-x $CHROMIUM || !-d "$BROWSER_DIR/node_modules/playwright-core" || $node_ok < 18) {
        fail("$name: chromium, node 18+ and playwright-core (t/browser) are installed");
        diag('run scripts/test (it installs chromium and runs npm ci in t/browser), or set SL_SKIP_BROWSER=1');
    } else {
        my $out_dir = "$BROWSER_DIR/out";
        my $base = 'https://127.0.0.1:' . $srv->{vars}{TEST_NGINX_TLS_PORT};
        my $cookie = 'smart_limit_shop=' . (ticket_of('B') // '');
        my $t0 = Time::HiRes::time();
        my ($rc, $json) = SmartLimit::Test::Server::run_capture(
            'node', "$BROWSER_DIR/h2-waiting.mjs", '--base', $base, '--out', $out_dir,
            '--refresh', $REFRESH, '--position', 1, '--release-path', '/logout',
            '--release-cookie', $cookie, '--chromium', $CHROMIUM);
        my ($doc) = $json =~ /^(\{"checks".*)$/m;
        my $result = eval { $JSON->decode($doc // '') } || { checks => [] };
        ok($rc == 0 && @{ $result->{checks} } >= 12,
           sprintf("$name: the browser script ran (%.1fs)", Time::HiRes::time() - $t0))
            or diag("exit $rc\n$json");
        ok($_->{ok}, "$name: browser: $_->{name}") or diag($_->{detail}) for @{ $result->{checks} };
        my @chrome = grep { /HeadlessChrome/ } split /\n/, access_log($srv);
        ok(@chrome >= 5 && !grep({ !/^HTTP\/2\.0 h2 / } @chrome),
           "$name: access log: every request of the browser was HTTP/2.0 over TLS (" . scalar(@chrome) . ")")
            or diag(join "\n", @chrome);
    }

    # All but the browser script's logout, sent by Playwright's own client (HTTP/1.1 on the
    # same TLS port, by ALPN: one room whatever the protocol).
    my @lines = grep { !/"Playwright\// } split /\n/, access_log($srv);
    my @not_h2 = grep { !/^HTTP\/2\.0 h2 / } @lines;
    ok(@lines > 20 && !@not_h2, "$name: access log: all " . scalar(@lines) . " requests were HTTP/2.0 h2")
        or diag(join "\n", @not_h2);
    stop_nginx($srv, $name);
}

# ================================================================ 2. h2c, store=shm
{
    my $name = 'h2c';
    my $WINDOW = 3;
    my $srv = start_nginx('h2c', "active_window=${WINDOW}s");
    my ($r, @r, $rc, $out, @s);

    ($r) = curl($srv, 'h2c', [ { client => 'A', path => '/' } ]);
    expect($r, "$name: first contact is the cookie check: 307 with the ticket (not Secure) over h2c",
        status => 307, h2 => 'h2c', cookie => 'set', nobody => 1,
        header => { location => qr{^http://127\.0\.0\.1:\d+/$} });
    ok((h($r, 'set-cookie') // '') !~ /Secure/, "$name: the cookie of a cleartext answer is not Secure")
        or diag(dump_res($r));
    ($r) = curl($srv, 'h2c', [ { client => 'A', path => '/' } ]);
    expect($r, "$name: back with the ticket, A is admitted: 200 from the origin",
        status => 200, h2 => 'h2c', body => qr/Acme Tickets/);

    # A's streams on one connection: nghttp (GETs, then HEADs), h2load (10 at a time).
    ($rc, $out, @s) = nghttp($srv, 'A', [ '/', '/style.css', '/logo.svg', '/?x=1' ]);
    my %conn = map { (($_->{headers}{'x-proto'} // '') =~ /^HTTP\/2\.0 h2c (\d+)$/)[0] // 'none' => 1 } @s;
    ok($rc == 0 && @s == 4 && !grep({ $_->{status} != 200 || !$_->{data} } @s) && keys %conn == 1
       && !grep({ /none/ } keys %conn),
       "$name: nghttp: four streams of A on one h2c connection, all 200 with a body")
        or diag($out);
    ($rc, $out, @s) = nghttp($srv, 'A', [ '/', '/style.css' ], head => 1);
    ok($rc == 0 && @s == 2 && !grep({ $_->{status} != 200 || $_->{data} || !$_->{headers}{'content-length'} } @s),
       "$name: nghttp: two HEAD streams of A: 200 with a length, no DATA")
        or diag($out);
    ($rc, $out) = SmartLimit::Test::Server::run_capture(
        'h2load', '-n', '40', '-c', '1', '-m', '10', '-H', 'cookie: smart_limit_shop=' . (ticket_of('A') // ''),
        'http://127.0.0.1:' . $srv->port . '/');
    ok($rc == 0 && $out =~ /Application protocol: h2c/ && $out =~ /requests: 40 total, 40 started, 40 done, 40 succeeded/
       && $out =~ /status codes: 40 2xx, 0 3xx, 0 4xx, 0 5xx/,
       "$name: h2load: 40 requests of A, 10 concurrent streams on one connection, all 2xx")
        or diag($out);

    # A second client waits (right after A's last request: A is active).
    ($r) = curl($srv, 'h2c', [ { client => 'A', path => '/' } ]);
    my $a_last = Time::HiRes::time();
    expect($r, "$name: A still passes", status => 200, h2 => 'h2c');
    ($r) = curl($srv, 'h2c', [ { client => 'B', path => '/' } ]);
    expect($r, "$name: B's first contact: 307", status => 307, h2 => 'h2c', cookie => 'set');
    ($r) = curl($srv, 'h2c', [ { client => 'B', path => '/' } ]);
    expect($r, "$name: B waits: the waiting page, 503, position 1",
        status => 503, h2 => 'h2c', body => qr{<div class="pos-num">1</div>},
        header => { 'retry-after' => qr/^$REFRESH$/, 'content-type' => qr{^text/html} });
    ($r) = curl($srv, 'h2c', [ { client => 'C', path => '/' } ]);
    ($r) = curl($srv, 'h2c', [ { client => 'C', path => '/', json => 1 } ]);
    expect($r, "$name: C's JSON answer: waiting, position 2 of 2",
        status => 503, h2 => 'h2c', json => { status => 'waiting', position => 2, queue_length => 2 });
    ($r) = curl($srv, 'h2c', [ { client => 'B', path => '/', head => 1 } ]);
    expect($r, "$name: B's HEAD: 503, no body", status => 503, h2 => 'h2c', nobody => 1,
           header => { 'retry-after' => qr/^$REFRESH$/ });
    ($rc, $out, @s) = nghttp($srv, 'B', [ '/', '/?y=1', '/style.css' ]);
    ok($rc == 0 && @s == 3 && !grep({ $_->{status} != 503 || ($_->{headers}{'retry-after'} // '') ne $REFRESH } @s),
       "$name: nghttp: three streams of B on one connection, all the waiting answer")
        or diag($out);

    # A goes quiet: when its active_window ends, the place frees and B (the head) goes in.
    my $waited;
    ($r, $waited) = until_admitted($srv, 'h2c', 'B', 12, 0.5);
    my $since_a = Time::HiRes::time() - $a_last;
    expect($r, "$name: B is admitted once A's window has ended", status => 200, h2 => 'h2c',
        body => qr/Acme Tickets/);
    ok($since_a >= $WINDOW - 1 && $since_a <= $WINDOW + 8,
       sprintf("$name: ... %.1fs after A's last request (active_window=${WINDOW}s)", $since_a));
    ($r) = curl($srv, 'h2c', [ { client => 'C', path => '/', json => 1 } ]);
    expect($r, "$name: C moves up: position 1", status => 503, h2 => 'h2c', json => { position => 1 });

    my @lines = split /\n/, access_log($srv);
    my @not_h2 = grep { !/^HTTP\/2\.0 h2c / } @lines;
    ok(@lines > 20 && !@not_h2, "$name: access log: all " . scalar(@lines) . " requests were HTTP/2.0 h2c")
        or diag(join "\n", @not_h2);
    stop_nginx($srv, $name);
}

# ================================================================ 3. store=redis, h2 and h2c
{
    my $name = 'redis over h2 and h2c';
    my $redis = SmartLimit::Test::Redis->new(port => SmartLimit::Test::Server::free_port(), dir => "$BASE/redis");
    my ($rup, $rmsg) = $redis->start;
    ok($rup, "$name: redis-server starts") or BAIL_OUT($rmsg);
    push @RUNNING, $redis;
    # A fleet's room: tickets sealed with a key file (as every node of a fleet has).
    my $srv = start_nginx('redis', "store=redis redis=127.0.0.1:$redis->{port}",
                          'smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;');
    my ($r);

    ($r) = curl($srv, 'tls', [ { client => 'A', path => '/' } ]);
    expect($r, "$name: A's cookie check over h2 (TLS)", status => 307, h2 => 'h2', cookie => 'set');
    ($r) = curl($srv, 'tls', [ { client => 'A', path => '/' } ]);
    expect($r, "$name: A is admitted over h2", status => 200, h2 => 'h2', body => qr/Acme/);
    ($r) = curl($srv, 'h2c', [ { client => 'B', path => '/' } ]);
    expect($r, "$name: B's cookie check over h2c", status => 307, h2 => 'h2c', cookie => 'set');
    ($r) = curl($srv, 'h2c', [ { client => 'B', path => '/', json => 1 } ]);
    expect($r, "$name: B waits over h2c: position 1", status => 503, h2 => 'h2c',
           json => { status => 'waiting', position => 1, queue_length => 1 });
    ($r) = curl($srv, 'tls', [ { client => 'B', path => '/', json => 1 } ]);
    expect($r, "$name: the same place over h2 with TLS: position 1", status => 503, h2 => 'h2',
           json => { position => 1, queue_length => 1 });
    my ($zc, $zout) = $redis->cli('ZCARD', 'smart_limit:{shop}:line');
    ok($zc == 0 && $zout =~ /^1$/, "$name: the line is in Redis (ZCARD line = 1)") or diag($zout);
    ($zc, $zout) = $redis->cli('ZCARD', 'smart_limit:{shop}:active');
    ok($zc == 0 && $zout =~ /^1$/, "$name: A's session is in Redis (ZCARD active = 1)") or diag($zout);
    ($r) = curl($srv, 'tls', [ { client => 'B', path => '/', head => 1 } ]);
    expect($r, "$name: B's HEAD over h2: 503, no body", status => 503, h2 => 'h2', nobody => 1);

    ($r) = curl($srv, 'tls', [ { client => 'A', path => '/logout' } ]);
    expect($r, "$name: A logs out over h2: revoked", status => 200, h2 => 'h2', cookie => 'deleted',
           absent => ['x-smart-limit']);
    ($r) = curl($srv, 'h2c', [ { client => 'B', path => '/' } ]);
    expect($r, "$name: B is admitted over h2c", status => 200, h2 => 'h2c', body => qr/Acme Tickets/);
    stop_nginx($srv, $name);
    $redis->stop;
}

done_testing();
