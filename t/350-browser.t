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
use File::Path ();
use Test::More;
use SmartLimit::Test::Browser ();
use SmartLimit::Test::Server ();

my $b = SmartLimit::Test::Browser::ready(node => 18);
my $out = $b->{out};
my $REFRESH = 2;

my ($nginx, $root) = SmartLimit::Test::Browser::nginx($b, '350-browser', 'TEST_NGINX_PORT2');
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
SmartLimit::Test::Browser::run($b, 'waiting-room.mjs', $root, 15, '--base', $base, '--refresh', $REFRESH);
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
SmartLimit::Test::Browser::clean('350-browser');
done_testing();
