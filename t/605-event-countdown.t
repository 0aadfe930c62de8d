# An event's pre-queue in a real browser: Debian's headless Chromium, driven by playwright-core
# (t/browser/countdown.mjs; scripts/test installs chromium and the npm package).
#
# The room has an event whose start is a few seconds after the browser arrives. The browser
# gets the pre-queue page, whose inline script counts down to the start; left alone, the page
# reloads itself at the start (within the spread of a few seconds) and lands on the origin
# page. Screenshots are kept in t/browser/out/ (git-ignored).
#
# Without chromium or node_modules the test fails (it does not skip): run scripts/test, or
# set SL_SKIP_BROWSER=1 to skip it on purpose.

use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SmartLimit::Test::Browser ();

my $b = SmartLimit::Test::Browser::ready();

# The start: far enough for nginx and the browser to start and see the countdown move.
my $start = time() + 12;
my ($nginx, $root) = SmartLimit::Test::Browser::nginx($b, '605-event-countdown');
$nginx->write_user_files(<<'EOF');
>>> index.html
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Acme Drop</title></head>
<body><main id="origin-page"><h1>The drop is open</h1></main></body></html>
EOF
$nginx->write_config({
    workers => 1, log_level => 'info', main_config => '',
    http_config => <<"EOF",
    smart_limit_zone shop size=1m max_active=1;
    smart_limit_event drop room=shop prequeue=\@1 start=\@$start;
EOF
    config => <<'EOF',
    # (The page's usual refresh, 10 s, is shorter than the 12 s lead to the start: the page
    # would come back at 10 s, before the start, when nginx and the browser start fast.)
    location / { smart_limit shop; smart_limit_refresh 20s; root html; }
EOF
});
my ($up, $msg) = $nginx->start(1);
ok($up, 'nginx starts') or BAIL_OUT("nginx did not start: $msg");

my $base = 'http://127.0.0.1:' . $nginx->port;
SmartLimit::Test::Browser::run($b, 'countdown.mjs', $root, 9, '--base', $base, '--start', $start);
for my $s (qw(prequeue.png prequeue-admitted.png)) {
    ok(-s "$b->{out}/$s" && -s "$b->{out}/$s" > 1000, "screenshot kept: t/browser/out/$s");
}
$nginx->stop;
unlike($nginx->error_log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log');
SmartLimit::Test::Browser::clean('605-event-countdown');
done_testing();
