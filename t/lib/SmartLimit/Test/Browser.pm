package SmartLimit::Test::Browser;
# What the Chromium tests (t/350, t/605, t/611) share: the checks that Chromium and
# playwright-core are installed, one nginx on free loopback ports under t/servroot, and a run
# of a t/browser/*.mjs script whose JSON checks become this test's.
#
# Without chromium or node_modules a test fails (it does not skip): run scripts/test, or set
# SL_SKIP_BROWSER=1 to skip on purpose.

use strict;
use warnings;
use Cwd ();
use File::Path ();
use JSON::PP ();
use Test::More;
use SmartLimit::Test::Server ();

# The set-up, or the end of the test: plans skip_all without a build to test (or with
# SL_SKIP_BROWSER); checks Chromium and playwright-core (and node, with node => MAJOR) and ends
# the test when one is missing. Returns {here, chromium, out, bin, mod}.
sub ready {
    my (%o) = @_;
    my ($bin, $mod) = @ENV{qw(TEST_NGINX_BINARY TEST_NGINX_MODULE)};
    plan skip_all => 'TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)'
        unless $bin && $mod;
    plan skip_all => 'SL_SKIP_BROWSER is set' if $ENV{SL_SKIP_BROWSER};
    my $here = Cwd::abs_path('t/browser');
    my $chromium = $ENV{SL_CHROMIUM} // '/usr/bin/chromium';
    my $ok = ok(-x $chromium, "chromium is installed at $chromium")
        || (diag('run scripts/test (it installs chromium)'), 0);
    ok(-d "$here/node_modules/playwright-core", 'playwright-core is installed in t/browser/node_modules')
        or do { diag('run scripts/test (it runs npm ci in t/browser)'); $ok = 0 };
    if ($o{node}) {
        my ($major) = `node --version 2>/dev/null` =~ /^v(\d+)/;
        ok(($major // 0) >= $o{node}, "node $o{node} or later is installed") or $ok = 0;
    }
    if (!$ok) {
        done_testing();
        exit;
    }
    return { here => $here, chromium => $chromium, out => "$here/out",
             bin => Cwd::abs_path($bin), mod => Cwd::abs_path($mod) };
}

# An nginx for test `name` (t/servroot/NAME.PID/n1), prepared: TEST_NGINX_PORT and the other
# port variables named in `ports` on free loopback ports. Returns (server, its root).
sub nginx {
    my ($b, $name, @ports) = @_;
    my $root = Cwd::abs_path('t') . "/servroot/$name.$$/n1";
    my %vars = map { $_ => SmartLimit::Test::Server::free_port() } ('TEST_NGINX_PORT', @ports);
    my $nginx = SmartLimit::Test::Server->new(
        index => 1, servroot => $root, binary => $b->{bin}, module => $b->{mod},
        vars => { %vars, TEST_NGINX_SERVROOT => $root, TEST_NGINX_HTML_DIR => "$root/html" },
    );
    $nginx->prepare;
    return ($nginx, $root);
}

# Runs t/browser/SCRIPT with `args` (and --out, --chromium), its stderr kept in the server's
# logs; the script's checks become this test's, after at least `min_checks` of them were
# reported. Returns the script's JSON document.
sub run {
    my ($b, $script, $root, $min_checks, @args) = @_;
    my $quoted = join ' ', map { "'$_'" } @args, '--out', $b->{out}, '--chromium', $b->{chromium};
    my $json = `node '$b->{here}/$script' $quoted 2>'$root/logs/node.stderr'`;
    is($? >> 8, 0, 'the browser script ran') or diag(SmartLimit::Test::Server::slurp("$root/logs/node.stderr"));
    my $result = eval { JSON::PP::decode_json($json) } || { checks => [], screenshots => [] };
    ok(@{ $result->{checks} } >= $min_checks, 'the browser script reported its checks')
        or diag("output: $json");
    for my $c (@{ $result->{checks} }) {
        ok($c->{ok}, "browser: $c->{name}") or diag($c->{detail});
    }
    return $result;
}

# Removes test `name`'s server root (unless TEST_NGINX_NO_CLEAN).
sub clean {
    my ($name) = @_;
    File::Path::remove_tree(Cwd::abs_path('t') . "/servroot/$name.$$") unless $ENV{TEST_NGINX_NO_CLEAN};
}

1;
