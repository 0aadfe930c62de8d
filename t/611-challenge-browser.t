# challenge=pow in a real browser: Debian's headless Chromium, driven by playwright-core
# (t/browser/challenge.mjs; scripts/test installs chromium and the npm package).
#
# The room is full (one admitted client). The browser gets the challenge page, whose Web
# Worker solves the seed; the page keeps the proof and comes back by itself, first in line.
# The time the browser took is printed (the cost at this difficulty; docs/under-attack.md).
# Then a browser with JavaScript off gets the same page, whose <noscript> refresh brings it
# back after the no-script wait (30 s and more), and takes the next place without a proof.
# Screenshots are kept in t/browser/out/ (git-ignored).
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
use SmartLimit::Test::HTTP ();

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

my $bits = $ENV{SL_CHALLENGE_BITS} // 16;
my $root = Cwd::abs_path('t') . "/servroot/611-challenge-browser.$$/n1";
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
<html lang="en"><head><meta charset="utf-8"><title>Acme</title></head>
<body><main id="origin-page"><h1>The shop</h1></main></body></html>
EOF
$nginx->write_config({
    workers => 1, log_level => 'info', main_config => '',
    http_config => <<"EOF",
    smart_limit_zone shop size=1m max_active=1 flood=off challenge=pow challenge_bits=$bits;
EOF
    config => <<'EOF',
    location / { smart_limit shop; root html; }
EOF
});
my ($up, $msg) = $nginx->start(1);
ok($up, 'nginx starts') or BAIL_OUT("nginx did not start: $msg");

my $base = 'http://127.0.0.1:' . $nginx->port;
# The room's one admission, taken at once (nobody waits): no proof asked.
my $holder = SmartLimit::Test::HTTP::request(port => $nginx->port, path => '/');
my ($set) = SmartLimit::Test::HTTP::set_cookies($holder);
my $held = SmartLimit::Test::HTTP::request(port => $nginx->port, path => '/',
    headers => [['Cookie', "$set->{name}=$set->{value}"]]);
is($held->{status}, 200, 'a scripted client holds the only admission (let in at once, no proof)');
my $json = `node '$here/challenge.mjs' --base '$base' --out '$out' --bits $bits --chromium '$chromium' 2>'$root/logs/node.stderr'`;
is($? >> 8, 0, 'the browser script ran') or diag(SmartLimit::Test::Server::slurp("$root/logs/node.stderr"));
my $result = eval { JSON::PP::decode_json($json) } || { checks => [], screenshots => [] };
ok(@{ $result->{checks} } >= 9, 'the browser script reported its checks') or diag("output: $json");
note("Chromium solved $bits bits in $result->{solve_ms} ms (page load to its place); "
    . "its solver tries $result->{hashes_per_sec} hashes a second (one worker); "
    . "without JavaScript it took its place after $result->{no_script_ms} ms") if $result->{solve_ms};
for my $c (@{ $result->{checks} }) {
    ok($c->{ok}, "browser: $c->{name}") or diag($c->{detail});
}
for my $s (qw(challenge-placed.png)) {
    ok(-s "$out/$s" && -s "$out/$s" > 1000, "screenshot kept: t/browser/out/$s");
}
$nginx->stop;
unlike($nginx->error_log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log');
File::Path::remove_tree(Cwd::abs_path('t') . "/servroot/611-challenge-browser.$$") unless $ENV{TEST_NGINX_NO_CLEAN};
done_testing();
