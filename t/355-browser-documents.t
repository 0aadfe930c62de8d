# Page views decided at their document, in a real browser (issue 47, [S29]): Debian's headless
# Chromium, driven by playwright-core (t/browser/documents.mjs; scripts/test installs chromium
# and the npm package). The HTTP-level tests of the same rules are t/025-documents.t.
#
# The front location is the drop-in setup of the README: `smart_limit_documents` next to a
# `limit_req` without burst (10 r/s), overflow sent to the room, in front of an origin (a
# server of the same nginx) whose page has a style sheet, a script and an image of its own.
# Six configurations: the key of the README's demo (per client, `$binary_remote_addr`) and the
# source article's site-wide key (`$server_name`), each on the shared-memory room, the central
# Redis room and a synced room (`sync=`). All browsers come from 127.0.0.1: nginx's realip
# takes each browser context's X-Forwarded-For (192.0.2.N, a documentation address: only a
# header value) as its address, so under the per-client key each person has a limit of its
# own.
#
# For each: scripted clients (HTTP::Tiny, an address each) fill the room's 5 places; three
# newcomers in Chromium each get the waiting page with a position (1, 2, 3), never the origin's
# HTML with failing assets; the line holds exactly those three (no place for their pages'
# parallel requests or their refreshes); their pages refresh themselves and stay waiting
# pages; as holders log out (the origin answers /logout with `X-Smart-Limit: revoke`) they are
# let in one by one, in order, each at a refresh, onto the complete page (every asset 200, the
# page's script ran), their positions falling meanwhile; admitted, they reload quickly over
# the limit and get the complete page each time; the places taken are one per person. Then
# two places are freed with nobody waiting: two new browsers load the page, reload it quickly
# and open it in two more tabs at once, complete each time, each browser taking at most one
# admitted place. Every load of every browser is
# recorded (page.on('response') and the page's state at its load event): complete or waiting,
# nothing else. The access log must show the room at work (WAITING, ADMITTED, PASSED on
# tickets, PAGE_PASS or a ticket for the visitors' overflowing requests) and no asset of a
# browser refused (ASSET_REFUSED).
#
# A synced room ends a revoked session on its node only, and in the fleet's count at the end of
# its active window (docs/fleet.md): there the zone has active_window=3s, the holders keep
# their sessions active until they log out, and two places freed within one sync are one band
# (the next in line may go first; nobody further back).
#
# The whole file takes about two minutes (132 s on 2 cores under a load of 9: six rooms, three
# newcomers each, 1 s refreshes); every wait is for a state, with a deadline. Screenshots are
# kept in t/browser/out/documents-*.png (git-ignored). SL_DOCUMENTS_ROOMS=REGEX runs only the
# rooms whose "store/key" it matches (shm/perclient, redis/sitewide, sync/...).
#
# Without chromium or node_modules the test fails (it does not skip): run scripts/test, or
# set SL_SKIP_BROWSER=1 to skip it on purpose.

use strict;
use warnings;
use lib 't/lib';
use Cwd ();
use File::Path ();
use HTTP::Tiny;
use JSON::PP ();
use Time::HiRes ();
use Test::More;
use SmartLimit::MiniJar;
use SmartLimit::Test::Browser ();
use SmartLimit::Test::Server ();

my $b = SmartLimit::Test::Browser::ready(node => 18);
my $REFRESH = 1;
my $NEWCOMERS = 3;
my $PLACES = $NEWCOMERS + 2;   # the holders: one per newcomer, and two freed for the visitors
my $slurp = \&SmartLimit::Test::Server::slurp;

my $redis_port = SmartLimit::Test::Server::free_port();
my $redis = SmartLimit::Test::Redis->new(port => $redis_port,
    dir => Cwd::abs_path('t') . "/servroot/355-browser-documents.$$/redis");
my ($redis_up, $redis_msg) = $redis->start;
ok($redis_up, "redis-server runs on 127.0.0.1:$redis_port") or BAIL_OUT("no redis: $redis_msg");
END { $redis->stop if $redis }

my %STORES = (
    shm   => '',
    redis => "store=redis redis=127.0.0.1:$redis_port timeout=2s",
    # (A revoked session ends on the node only, and in the fleet's count at the end of its
    # active window: a short one frees the place soon; documents.mjs --synced keeps the others
    # active.)
    sync  => "store=redis redis=127.0.0.1:$redis_port sync=1s timeout=900ms active_window=3s",
);
my %KEYS = (perclient => '$binary_remote_addr', sitewide => '$server_name');

my $ORIGIN_FILES = <<'EOF';
>>> origin/index.html
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Acme Tickets</title>
<link rel="stylesheet" href="/style.css">
<script src="/app.js" defer></script>
</head>
<body>
<main id="origin-page">
<h1>Acme Tickets: the sale is open</h1>
<img id="logo" src="/logo.svg" width="120" height="120" alt="Acme logo">
<p id="js">(script not run)</p>
</main>
</body>
</html>
>>> origin/style.css
body { font-family: sans-serif; background: #f3faf5; margin: 2rem; }
h1 { color: rgb(10, 110, 60); }
>>> origin/app.js
document.documentElement.dataset.js = 'ran';
document.getElementById('js').textContent = 'Script loaded: every asset came from the origin.';
>>> origin/logo.svg
<svg xmlns="http://www.w3.org/2000/svg" width="120" height="120" viewBox="0 0 120 120"><circle cx="60" cy="60" r="54" fill="#0a6e3c"/><text x="60" y="74" font-size="40" text-anchor="middle" fill="#fff" font-family="sans-serif">A</text></svg>
EOF

File::Path::remove_tree(glob("$b->{out}/documents-*.png"));
my $n = 0;
for my $store (qw(shm redis sync)) {
    for my $key (qw(perclient sitewide)) {
        next if $ENV{SL_DOCUMENTS_ROOMS} && "$store/$key" !~ /$ENV{SL_DOCUMENTS_ROOMS}/;
        run_room($store, $key, ++$n);
    }
}
$redis->stop;
SmartLimit::Test::Browser::clean($_) for '355-browser-documents', map { "355-browser-documents-$_" } 1 .. $n;
done_testing();

# One configuration: nginx, the room filled by scripted clients, the browsers.
sub run_room {
    my ($store, $key, $n) = @_;
    my $label = "$store/$key";
    $redis->cli('FLUSHALL') if $STORES{$store};
    my ($nginx, $root) = SmartLimit::Test::Browser::nginx($b, "355-browser-documents-$n", 'TEST_NGINX_PORT2');
    $nginx->write_user_files($ORIGIN_FILES);
    $nginx->write_config({
        workers => 2, log_level => 'info', main_config => '',
        http_config => <<"EOF",
    limit_req_zone $KEYS{$key} zone=front:1m rate=10r/s;
    smart_limit_zone shop size=1m max_active=$PLACES $STORES{$store};
    types { text/html html; text/css css; application/javascript js; image/svg+xml svg; }
    log_format room '\$http_x_forwarded_for \$status \$request \$smart_limit_status \$smart_limit_position \$msec';
    server {
        listen 127.0.0.1:\$TEST_NGINX_PORT2;
        root html/origin;
        access_log logs/origin.log;
        # Every load reaches the network: no 304 for a cached asset.
        etag off;
        if_modified_since off;
        add_header Cache-Control no-store always;
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\\n"; }
    }
EOF
        config => <<"EOF",
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Forwarded-For;
    access_log logs/room.log room;
    # The waiting page's refresh, for the room's answers in both locations: the front
    # location's (a document decided by smart_limit_documents) and the overflow's.
    smart_limit_refresh ${REFRESH}s;
    location / {
        smart_limit_documents shop;
        limit_req zone=front;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = \@smart_limit;
        proxy_pass http://127.0.0.1:\$TEST_NGINX_PORT2;
    }
    location \@smart_limit {
        smart_limit shop;
        proxy_pass http://127.0.0.1:\$TEST_NGINX_PORT2;
    }
    location = /control { smart_limit_control; }
EOF
    });
    my ($up, $msg) = $nginx->start(2);
    ok($up, "$label: nginx starts") or BAIL_OUT("nginx did not start: $msg");
    my $base = 'http://127.0.0.1:' . $nginx->port;

    # The holders: each from its own address, its first request under its limit, the next
    # over it (the room's cookie check, then let in), until it holds an admitted ticket. (A
    # synced room lets a newcomer in at a sync: it polls until then.)
    my @holders;
    for my $h (1 .. $PLACES) {
        my $xff = "198.51.100.$h";
        my $jar = SmartLimit::MiniJar->new;
        my $http = HTTP::Tiny->new(timeout => 10, agent => 'smart-limit-test', cookie_jar => $jar,
                                   default_headers => { 'X-Forwarded-For' => $xff });
        my $r;
        my $deadline = time + 15;
        while (1) {
            $r = $http->get("$base/");
            last if $r->{status} == 200 && $jar->{c}{smart_limit_shop} || time > $deadline;
            Time::HiRes::sleep(0.2) if $r->{status} == 503;
        }
        push @holders, { xff => $xff, cookie => $jar->cookie_header };
        ok($r->{status} == 200 && $jar->{c}{smart_limit_shop}, "$label: scripted holder $h ($xff) is let in")
            or diag("$r->{status} $r->{content}");
    }
    SmartLimit::Test::Server::spew("$root/holders.json", JSON::PP::encode_json(\@holders));

    my $first = 10 * $n;
    my $result = SmartLimit::Test::Browser::run($b, 'documents.mjs', $root, 30,
        '--base', $base, '--holders', "$root/holders.json", '--label', $label,
        '--newcomers', $NEWCOMERS, '--refresh', $REFRESH, '--net', '192.0.2', '--first', $first,
        '--synced', $store eq 'sync' ? 1 : 0);
    note("$label: $_ ($result->{loads}{$_}{xff}): $result->{loads}{$_}{kinds}")
        for sort keys %{ $result->{loads} || {} };

    $nginx->stop;
    my $log = $nginx->error_log;
    unlike($log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, "$label: no alert or crash in the error log")
        or diag($log);
    my $room_log = $slurp->("$root/logs/room.log");
    my @browsers = grep { /^192\.0\.2\.\d+ / } split /\n/, $room_log;   # the browsers' requests
    like($room_log, qr{^192\.0\.2\.\d+ 503 GET / HTTP/1\.1 WAITING [123] }m,
         "$label: access log: the newcomers' documents got the waiting page");
    like($room_log, qr{^192\.0\.2\.\d+ 200 GET /(?:style\.css|app\.js|logo\.svg) HTTP/1\.1 PASSED - }m,
         "$label: access log: an admitted browser's asset over the limit passed on its ticket");
    my @visitors = map { "192.0.2." . ($first + $NEWCOMERS + $_) } 1 .. $PLACES - $NEWCOMERS;
    my @overflowed = grep { my $ip = $_; grep { /^\Q$ip\E \d+ \S+ \S+ HTTP\/1\.1 (?:PAGE_PASS|NEW|ADMITTED|PASSED) / } @browsers } @visitors;
    is(scalar @overflowed, scalar @visitors,
       "$label: access log: each visitor's quick reloads went through the room (over the limit)")
        or diag(join "\n", grep { /^192\.0\.2\./ } @browsers);
    # (A browser asks for /favicon.ico by itself, for any page, the waiting page too: not an
    # asset of the site's page.)
    my @refused = grep { / ASSET_REFUSED / && !m{ GET /favicon\.ico } } @browsers;
    is(scalar @refused, 0, "$label: access log: no browser's asset was refused") or diag(join "\n", @refused);
}
