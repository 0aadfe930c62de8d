# challenge=pow in a real browser: Debian's headless Chromium, driven by playwright-core
# (t/browser/challenge.mjs; scripts/test installs chromium and the npm package).
#
# The room is full (one admitted client). The browser gets the challenge page, whose Web
# Worker solves the seed; the page keeps the proof and comes back by itself, first in line.
# The time the browser took is printed (the cost at this difficulty; docs/under-attack.md).
# Then a browser with JavaScript off gets the same page, whose <noscript> refresh brings it
# back after the no-script wait (30 s and more), and takes the next place without a proof.
# Last, a page of the operator's own with {{challenge_script}} (at /own/) is solved the same.
# Screenshots are kept in t/browser/out/ (git-ignored).
#
# Without chromium or node_modules the test fails (it does not skip): run scripts/test, or
# set SL_SKIP_BROWSER=1 to skip it on purpose (see SmartLimit::Test::Browser).

use strict;
use warnings;
use lib 't/lib';
use Test::More;
use SmartLimit::Test::Browser ();
use SmartLimit::Test::HTTP ();

my $b = SmartLimit::Test::Browser::ready();
my $bits = $ENV{SL_CHALLENGE_BITS} // 16;
my ($nginx, $root) = SmartLimit::Test::Browser::nginx($b, '611-challenge-browser');
$nginx->write_user_files(<<'EOF');
>>> index.html
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Acme</title></head>
<body><main id="origin-page"><h1>The shop</h1></main></body></html>
>>> own/index.html
own
>>> own.html
<!DOCTYPE html><html><head><meta charset="utf-8"><title>Our shop</title></head>
<body><h1>Our shop: {{status}}</h1><p>Place <span id="place">{{position}}</span></p>
{{challenge_script}}</body></html>
EOF
$nginx->write_config({
    workers => 1, log_level => 'info', main_config => '',
    http_config => <<"EOF",
    smart_limit_zone shop size=1m max_active=1 flood=off challenge=pow challenge_bits=$bits;
EOF
    config => <<'EOF',
    location / { smart_limit shop; root html; }
    location /own/ { smart_limit shop; smart_limit_page $TEST_NGINX_HTML_DIR/own.html; root html; }
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
my $result = SmartLimit::Test::Browser::run($b, 'challenge.mjs', $root, 11, '--base', $base, '--bits', $bits);
note("Chromium solved $bits bits in $result->{solve_ms} ms (page load to its place); "
    . "its solver tries $result->{hashes_per_sec} hashes a second (one worker); "
    . "without JavaScript it took its place after $result->{no_script_ms} ms") if $result->{solve_ms};
for my $s (qw(challenge-placed.png)) {
    ok(-s "$b->{out}/$s" && -s "$b->{out}/$s" > 1000, "screenshot kept: t/browser/out/$s");
}
$nginx->stop;
unlike($nginx->error_log, qr/\[(?:alert|emerg|crit)\]|exited on signal/, 'no alert or crash in the error log');
SmartLimit::Test::Browser::clean('611-challenge-browser');
done_testing();
