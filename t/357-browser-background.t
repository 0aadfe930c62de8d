# The built-in waiting page in a background tab (issue 51): Debian's headless Chromium, driven
# by playwright-core (t/browser/background.mjs), its tabs hidden, frozen and resumed from the
# outside through the DevTools protocol (a tab switch, Page.setWebLifecycleState, Page.bringToFront),
# never by calling the page's functions.
#
# Three rooms of one place each, each place held by a scripted visitor who logs out (the origin
# answers `X-Smart-Limit: revoke`) when the browser's turn is to come:
#   /a/  refresh 60 s: back in front, the page refreshes at once; frozen in the background while
#        the place frees, then resumed (still in the background) it asks at once and its title
#        says the turn has come; brought to front, it reaches the site (style sheet, script and
#        image) within 10 s of resuming, where its refresh would have taken up to 60 s;
#   /b/  refresh 3 s: the person asks for notifications with the page's button; in the
#        background the page polls JSON at its refresh (counted in the access log: no faster, no
#        reloads), the turn comes, the tab's title and a notification say so, and brought to
#        front the page goes on to the site at once;
#   /c/  refresh 3 s, in Japanese: the turn comes in the background, the title says so in
#        Japanese (no notification: nobody asked), and left there the page goes on by itself
#        after its hold (15 s), well within the admission's active window.
#
# Without chromium or node_modules the test fails (it does not skip): run scripts/test, or
# set SL_SKIP_BROWSER=1 to skip it on purpose. It runs in about 45 s.

use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SmartLimit::Test::Browser ();
use SmartLimit::Test::Server ();

# (The checks' details hold the Japanese page's title.)
binmode(Test::More->builder->$_, ':encoding(UTF-8)') for qw(output failure_output todo_output);
my $b = SmartLimit::Test::Browser::ready(node => 18);

my ($nginx, $root) = SmartLimit::Test::Browser::nginx($b, '357-browser-background', 'TEST_NGINX_PORT2');
# The origin's page, the same in each room's folder: relative assets, so that each page's
# requests go through its own room.
my $files = '';
for my $room (qw(a b c)) {
    $files .= <<"EOF";
>>> origin/$room/index.html
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Acme Tickets</title>
<link rel="stylesheet" href="style.css">
<script src="app.js" defer></script>
</head>
<body>
<main id="origin-page">
<h1>Acme Tickets: the sale is open</h1>
<img id="logo" src="logo.svg" width="120" height="120" alt="Acme logo">
</main>
</body>
</html>
>>> origin/$room/style.css
h1 { color: rgb(10, 110, 60); }
>>> origin/$room/app.js
document.documentElement.dataset.js = 'ran';
>>> origin/$room/logo.svg
<svg xmlns="http://www.w3.org/2000/svg" width="120" height="120" viewBox="0 0 120 120"><circle cx="60" cy="60" r="54" fill="#0a6e3c"/></svg>
EOF
}
$nginx->write_user_files($files);
$nginx->write_config({
    workers => 2, log_level => 'info', main_config => '',
    http_config => <<'EOF',
    smart_limit_zone a size=1m max_active=1;
    smart_limit_zone b size=1m max_active=1;
    smart_limit_zone c size=1m max_active=1;
    types { text/html html; text/css css; application/javascript js; image/svg+xml svg; }
    log_format room '$msec $status $request_method $request_uri "$http_accept" $smart_limit_status';
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        root html/origin;
        access_log logs/origin.log;
        location ~ ^/[abc]/logout$ { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
EOF
    config => <<'EOF',
    access_log logs/room.log room;
    location /a/ { smart_limit a; smart_limit_refresh 60s; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
    location /b/ { smart_limit b; smart_limit_refresh 3s; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
    location /c/ { smart_limit c; smart_limit_refresh 3s; proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2; }
EOF
});
my ($up, $msg) = $nginx->start(2);
ok($up, 'nginx starts') or BAIL_OUT("nginx did not start: $msg");

my $base = 'http://127.0.0.1:' . $nginx->port;
my $result = SmartLimit::Test::Browser::run($b, 'background.mjs', $root, 38, '--base', $base,
    '--log', "$root/logs/room.log");
# The measured times and counts, for `prove -v`.
note("$_->{name}: $_->{detail}") for grep { length $_->{detail} } @{ $result->{checks} };

$nginx->stop;
my $log = $nginx->error_log;
unlike($log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log')
    or diag($log);
SmartLimit::Test::Browser::clean('357-browser-background');
done_testing();
