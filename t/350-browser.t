# A real browser in the waiting room: Debian's headless Chromium, driven by playwright-core
# (t/browser/waiting-room.mjs; scripts/test installs chromium and the npm package).
#
# The site is the drop-in setup of [S1]: `limit_req` at 1 request a minute for everyone,
# overflow sent to the room, whose one place is held by a scripted visitor. The browser opens
# the site, is shown the waiting page with its position, refreshes by itself, and when the
# scripted visitor logs out (the origin answers `X-Smart-Limit: revoke`) lands on the origin
# page with its style sheet, script and image loaded, every one of those requests over the
# rate limit. Screenshots of each state are kept in t/browser/out/ (git-ignored).
#
# Without chromium or node_modules the test fails (it does not skip): run scripts/test, or
# set SL_SKIP_BROWSER=1 to skip it on purpose.

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
plan skip_all => 'SL_SKIP_BROWSER is set' if $ENV{SL_SKIP_BROWSER};

my $here = Cwd::abs_path('t/browser');
my $chromium = $ENV{SL_CHROMIUM} // '/usr/bin/chromium';
my $out = "$here/out";
my $REFRESH = 2;

ok(-x $chromium, "chromium is installed at $chromium") or diag('run scripts/test (it installs chromium)');
ok(-d "$here/node_modules/playwright-core", 'playwright-core is installed in t/browser/node_modules')
    or diag('run scripts/test (it runs npm ci in t/browser)');
my ($node_ok) = `node --version 2>/dev/null` =~ /^v(\d+)/;
ok(($node_ok // 0) >= 18, 'node 18 or later is installed');
if (!-x $chromium || !-d "$here/node_modules/playwright-core" || ($node_ok // 0) < 18) {
    done_testing();
    exit;
}

my $root = Cwd::abs_path('t') . "/servroot/350-browser.$$/n1";
my $nginx = SmartLimit::Test::Server->new(
    index => 1, servroot => $root, binary => Cwd::abs_path($bin), module => Cwd::abs_path($mod),
    vars => {
        TEST_NGINX_PORT => SmartLimit::Test::Server::free_port(),
        TEST_NGINX_PORT2 => SmartLimit::Test::Server::free_port(),
        TEST_NGINX_SERVROOT => $root, TEST_NGINX_HTML_DIR => "$root/html",
    },
);
$nginx->prepare;
$nginx->write_user_files(<<'EOF');
>>> origin/index.html
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
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
document.getElementById('js').textContent = 'Script loaded: you are in.';
>>> origin/logo.svg
<svg xmlns="http://www.w3.org/2000/svg" width="120" height="120" viewBox="0 0 120 120"><circle cx="60" cy="60" r="54" fill="#0a6e3c"/><text x="60" y="74" font-size="40" text-anchor="middle" fill="#fff" font-family="sans-serif">A</text></svg>
EOF
$nginx->write_config({
    workers => 2, log_level => 'info', main_config => '',
    http_config => <<'EOF',
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=1;
    types { text/html html; text/css css; application/javascript js; image/svg+xml svg; }
    log_format room '$status $request $smart_limit_status $smart_limit_position';
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        root html/origin;
        access_log logs/origin.log;
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
EOF
    config => <<"EOF",
    access_log logs/room.log room;
    location / {
        limit_req zone=perip;
        limit_req_status 512;
        error_page 512 = \@smart_limit;
        proxy_pass http://127.0.0.1:\$TEST_NGINX_PORT2;
    }
    location \@smart_limit {
        smart_limit shop;
        smart_limit_refresh ${REFRESH}s;
        proxy_pass http://127.0.0.1:\$TEST_NGINX_PORT2;
    }
EOF
});
my ($up, $msg) = $nginx->start(2);
ok($up, 'nginx starts') or BAIL_OUT("nginx did not start: $msg");

File::Path::remove_tree($out);
my $base = 'http://127.0.0.1:' . $nginx->port;
my $json = `node '$here/waiting-room.mjs' --base '$base' --out '$out' --refresh $REFRESH --chromium '$chromium' 2>'$root/logs/node.stderr'`;
my $exit = $? >> 8;
is($exit, 0, 'the browser script ran') or diag(SmartLimit::Test::Server::slurp("$root/logs/node.stderr"));
my $result = eval { JSON::PP::decode_json($json) } || { checks => [], screenshots => [] };
ok(@{ $result->{checks} } >= 15, 'the browser script reported its checks')
    or diag("output: $json");
for my $c (@{ $result->{checks} }) {
    ok($c->{ok}, "browser: $c->{name}") or diag($c->{detail});
}
for my $s (qw(waiting.png waiting-refreshed.png waiting-ja-mobile.png admitted.png)) {
    ok(-s "$out/$s" && -s "$out/$s" > 1000, "screenshot kept: t/browser/out/$s");
}

$nginx->stop;
my $log = $nginx->error_log;
unlike($log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log')
    or diag($log);
my $room_log = SmartLimit::Test::Server::slurp("$root/logs/room.log");
like($room_log, qr/^503 GET \/ HTTP\/1\.1 WAITING 1$/m, 'access log: the browser waited, first in line');
like($room_log, qr/^200 GET \/app\.js HTTP\/1\.1 PASSED -$/m,
     'access log: an asset over the rate limit passed on the admitted ticket');
File::Path::remove_tree(Cwd::abs_path('t') . "/servroot/350-browser.$$") unless $ENV{TEST_NGINX_NO_CLEAN};
done_testing();
