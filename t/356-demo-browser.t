# The README's demo, its steps run literally, with a real browser at the end (issue 47, item 4):
#
#   1. `scripts/demo --no-build` (the nginx and module of this test run: SL_NGINX, SL_MODULE;
#      on free ports: SL_DEMO_PORT, SL_DEMO_ORIGIN_PORT);
#   2. the fill loop exactly as scripts/demo prints it (30 clients of curl with cookie jars, 4
#      requests each), run by bash as printed;
#   3. Debian's headless Chromium opens the demo's page (t/browser/demo.mjs): the waiting page
#      with its position, reloading every 5 s (the demo's smart_limit_refresh, as the README
#      says); left alone, the position counts down as the loop's clients, who stopped polling,
#      lose their places (presence=20s, keep=30s), and never grows; every load is the waiting page or
#      the complete page; and once the loop's admitted clients stop counting as active
#      (active_window=1m after the loop) the page loads whole ("All assets loaded.", every
#      asset 200);
#   4. `scripts/demo stop`.
#
# The demo runs from a copy of the working tree (tracked and untracked, not ignored, files:
# uncommitted changes included, as t/502-demo-clone.t does), so that it never stops or
# replaces a demo of yours in tmp/demo. The loop's cookie jars go to a temporary directory
# (TMPDIR). About 80 s: most of it is the demo's own minute of activity. Screenshots:
# t/browser/out/demo-waiting.png, demo-waiting-later.png, demo-admitted.png (git-ignored).
#
# Without chromium or node_modules the test fails (it does not skip): run scripts/test, or
# set SL_SKIP_BROWSER=1 to skip it on purpose.

use strict;
use warnings;
use lib 't/lib';
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use Test::More;
use SmartLimit::Test::Browser ();
use SmartLimit::Test::Server ();

my $b = SmartLimit::Test::Browser::ready(node => 18);
my $ROOT = abs_path(dirname(abs_path(__FILE__)) . '/..');
my $slurp = \&SmartLimit::Test::Server::slurp;

my $tmp = tempdir('smart-limit-demo-browser-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $clone = "$tmp/clone";
mkdir $clone or die "$clone: $!";
my $copy = system('sh', '-c', 'cd "$1" && git ls-files -z --cached --others --exclude-standard'
                  . ' | tar --null -T - -cf - | tar -C "$2" -xf -', '_', $ROOT, $clone);
ok($copy == 0 && -x "$clone/scripts/demo", 'the working tree is copied as a clone has it');
mkdir "$tmp/jars";

my ($port, $origin) = (SmartLimit::Test::Server::free_port(), SmartLimit::Test::Server::free_port());
my %env = (SL_NGINX => $b->{bin}, SL_MODULE => $b->{mod}, SL_DEMO_PORT => $port,
           SL_DEMO_ORIGIN_PORT => $origin, TMPDIR => "$tmp/jars");
sub demo {
    local @ENV{keys %env} = values %env;
    return SmartLimit::Test::Server::run_capture("$clone/scripts/demo", @_);
}
my $pid_file = "$clone/tmp/demo/logs/nginx.pid";
END { local $?; demo('stop') if $clone && -s $pid_file }

# 1. The demo.
my ($rc, $out) = demo('--no-build');
is($rc, 0, 'scripts/demo --no-build exits 0') or diag($out);
like($out, qr{smart_limit demo is up: http://127\.0\.0\.1:$port/}, '... and says the demo is up') or diag($out);

# 2. The fill loop, as printed (between "Fill the room ..." and "then open ...").
my ($loop) = $out =~ /^Fill the room[^\n]*\n(.*?)^then open/ms;
ok($loop && $loop =~ /for i in \$\(seq 30\)/ && $loop =~ /127\.0\.0\.1:$port\//,
   'scripts/demo prints the fill loop for its port') or diag($out);
$loop //= 'false';
note("the fill loop, as printed:\n$loop");
my $fill = do {
    local @ENV{keys %env} = values %env;
    open(my $fh, '-|', 'bash', '-c', "$loop 2>&1") or die "bash: $!";
    local $/;
    <$fh>;
};
my @lines = grep { /\S/ } split /\n/, $fill // '';
my @codes = map { /(\d{3})/g } @lines;
ok(@codes == 120, 'the loop ran: 30 clients, 4 answers each (120 status codes)') or diag($fill);
my $metrics = `curl -s http://127.0.0.1:$port/smart_limit/metrics`;
my ($queue) = $metrics =~ /^smart_limit_queue_length\{room="demo"\} (\d+)/m;
my ($active) = $metrics =~ /^smart_limit_active_sessions\{room="demo"\} (\d+)/m;
ok(($active // 0) == 5 && ($queue // 0) >= 1, "the room is full and has a line (active $active, waiting $queue)")
    or diag($metrics);
my %n;
$n{$_}++ for @codes;
note("the loop's answers: " . join(', ', map { "$n{$_} x $_" } sort keys %n));

# 3. The browser.
my $result = SmartLimit::Test::Browser::run($b, 'demo.mjs', "$clone/tmp/demo", 7,
    '--base', "http://127.0.0.1:$port", '--refresh', 5, '--countdown', 45, '--admit', 110);
note("the browser's loads: $result->{loads}") if $result->{loads};
ok(-s "$b->{out}/demo-waiting.png" && -s "$b->{out}/demo-waiting.png" > 1000,
   'screenshot kept: t/browser/out/demo-waiting.png');

# 4. Stop.
my $errors = $slurp->("$clone/tmp/demo/logs/error.log");
my $access = $slurp->("$clone/tmp/demo/logs/access.log");
($rc, $out) = demo('stop');
is($rc, 0, 'scripts/demo stop exits 0') or diag($out);
unlike($errors, qr/\[(?:alert|emerg|crit)\]|exited on signal/, "the demo's error log has no alert or crash")
    or diag($errors);
unlike($access, qr/ASSET_REFUSED/, "the demo's access log: no asset of a page was refused") or diag($access);
done_testing();
