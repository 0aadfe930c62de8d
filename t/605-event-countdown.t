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

ok(-x $chromium, "chromium is installed at $chromium") or diag('run scripts/test (it installs chromium)');
ok(-d "$here/node_modules/playwright-core", 'playwright-core is installed in t/browser/node_modules')
    or diag('run scripts/test (it runs npm ci in t/browser)');
if (!-x $chromium || !-d "$here/node_modules/playwright-core") {
    done_testing();
    exit;
}

# The start: far enough for nginx and the browser to start and see the countdown move.
my $start = time() + 12;
my $root = Cwd::abs_path('t') . "/servroot/605-event-countdown.$$/n1";
my $nginx = SmartLimit::Test::Server->new(
    index => 1, servroot => $root, binary => Cwd::abs_path($bin), module => Cwd::abs_path($mod),
    vars => {
        TEST_NGINX_PORT => SmartLimit::Test::Server::free_port(),
        TEST_NGINX_SERVROOT => $root, TEST_NGINX_HTML_DIR => "$root/html",
    },
);
$nginx->prepare;
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
my $json = `node '$here/countdown.mjs' --base '$base' --out '$out' --start $start --chromium '$chromium' 2>'$root/logs/node.stderr'`;
is($? >> 8, 0, 'the browser script ran') or diag(SmartLimit::Test::Server::slurp("$root/logs/node.stderr"));
my $result = eval { JSON::PP::decode_json($json) } || { checks => [], screenshots => [] };
ok(@{ $result->{checks} } >= 9, 'the browser script reported its checks') or diag("output: $json");
for my $c (@{ $result->{checks} }) {
    ok($c->{ok}, "browser: $c->{name}") or diag($c->{detail});
}
for my $s (qw(prequeue.png prequeue-admitted.png)) {
    ok(-s "$out/$s" && -s "$out/$s" > 1000, "screenshot kept: t/browser/out/$s");
}
$nginx->stop;
unlike($nginx->error_log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log');
File::Path::remove_tree(Cwd::abs_path('t') . "/servroot/605-event-countdown.$$") unless $ENV{TEST_NGINX_NO_CLEAN};
done_testing();
