# scripts/demo from a clone in a directory only its owner may enter (issue 48, part 5).
#
# As root, nginx's workers run as nobody: with the clone under root's home or in a `mktemp -d`
# (mode 700) they could not read tmp/demo/html, and every origin page of the demo answered 403
# while scripts/demo said the demo was up. This copies the working tree as a clone has it
# (tracked and untracked, not ignored, files: uncommitted changes included) into such a
# directory, starts the demo there (`--no-build`: the module and nginx of this test run, on free
# ports beside any demo of yours), and checks through the demo's front door that the origin's
# page and its assets answer 200; then `scripts/demo stop`.
#
# Not root: the workers run as the user who owns the clone; the demo must serve all the same.

use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use HTTP::Tiny;
use Test::More;
use lib 't/lib';
use SmartLimit::MiniJar;
use SmartLimit::Test::Server ();

my ($bin, $mod) = @ENV{qw(TEST_NGINX_BINARY TEST_NGINX_MODULE)};
plan skip_all => 'TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)'
    unless $bin && $mod;

my $ROOT = abs_path(dirname(abs_path(__FILE__)) . '/..');
my $slurp = \&SmartLimit::Test::Server::slurp;

# A directory only its owner may enter, as `mktemp -d` makes (and root's home is).
my $private = tempdir('smart-limit-demo-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0700, $private;
is((stat $private)[2] & 07777, 0700, "the clone's parent directory is mode 700");
my $clone = "$private/clone";
mkdir $clone or die "$clone: $!";
my $copy = system('sh', '-c', 'cd "$1" && git ls-files -z --cached --others --exclude-standard'
                  . ' | tar --null -T - -cf - | tar -C "$2" -xf -', '_', $ROOT, $clone);
ok($copy == 0 && -x "$clone/scripts/demo" && -f "$clone/nginx-conf/demo.conf",
   'the working tree is copied as a clone has it');

my ($port, $origin) = (SmartLimit::Test::Server::free_port(), SmartLimit::Test::Server::free_port());
my %env = (SL_NGINX => abs_path($bin), SL_MODULE => abs_path($mod),
           SL_DEMO_PORT => $port, SL_DEMO_ORIGIN_PORT => $origin);
sub demo {
    local @ENV{keys %env} = values %env;
    return SmartLimit::Test::Server::run_capture("$clone/scripts/demo", @_);
}
my $pid_file = "$clone/tmp/demo/logs/nginx.pid";
END { local $?; demo('stop') if $clone && -s $pid_file }

my ($rc, $out) = demo('--no-build');
is($rc, 0, 'scripts/demo --no-build exits 0') or diag($out);
like($out, qr{smart_limit demo is up: http://127\.0\.0\.1:$port/}, '... and says the demo is up on the port given')
    or diag($out);
my ($master) = $slurp->($pid_file) =~ /(\d+)/;
ok($master && kill(0, $master), "the demo's nginx runs (master $master)");

# The workers: as root, nobody (never root); otherwise the user running the test.
my @workers = SmartLimit::Test::Server::workers_of($master // 0);
my %uids = map { my ($uid) = $slurp->("/proc/$_->[0]/status") =~ /^Uid:\s+(\d+)/m; (($uid // -1) => 1) } @workers;
my $want_uid = $> == 0 ? (getpwnam('nobody'))[2] : $>;
ok(@workers >= 1 && join(',', sort keys %uids) eq "$want_uid",
   "its workers run as uid $want_uid (" . ($> == 0 ? 'nobody' : 'the owner') . ')')
    or diag('worker uids: ' . join(',', sort keys %uids));

# A browser: it keeps its cookies, so it comes back from the room's cookie check (a 307, when
# limit_req sends it to the room) with its ticket.
my $http = HTTP::Tiny->new(timeout => 10, agent => 'smart-limit-test', cookie_jar => SmartLimit::MiniJar->new);
my $r = $http->get("http://127.0.0.1:$port/");
is($r->{status}, 200, "the demo's front door answers the origin page: 200")
    or diag("$r->{status} $r->{content}\n" . $slurp->("$clone/tmp/demo/logs/error.log"));
like($r->{content}, qr{<title>Launch day shop</title>}, "... the demo shop's page");
for my $asset ('/style.css', '/logo.svg', '/app.js') {
    is($http->get("http://127.0.0.1:$port$asset")->{status}, 200, "... its asset $asset: 200");
}
my $errors = $slurp->("$clone/tmp/demo/logs/error.log");
unlike($errors, qr/Permission denied|forbidden/, "the demo's error log has no permission error")
    or diag($errors);

my $html = -f "$clone/tmp/demo/html.path" ? $slurp->("$clone/tmp/demo/html.path") =~ s/\s+$//r : '';
($rc, $out) = demo('stop');
is($rc, 0, 'scripts/demo stop exits 0') or diag($out);
like($out, qr/demo stopped/, '... and says so');
ok(!kill(0, $master // 0), '... the master is gone');
ok(!SmartLimit::Test::Server::port_open($port), "... nothing listens on $port any more");
ok(!$html || !-e $html, "... the origin files' copy is removed" . ($html ? " ($html)" : ' (none was made)'));

done_testing();
