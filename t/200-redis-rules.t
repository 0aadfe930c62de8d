# The rule suites of the foundation, against store=redis.
#
# Every t/0*.t file whose zones name their store as $TEST_NGINX_STORE runs with the shared-
# memory store when prove runs it directly, and here once more with TEST_NGINX_USE_REDIS=1:
# the harness then starts a redis-server on a free loopback port for each block and sets
# $TEST_NGINX_STORE to "store=redis redis=127.0.0.1:PORT". Same steps, same expectations:
# the room script follows the same rules as the shared-memory room.
#
# One test per suite file; a failing file prints its failed tests and their diagnostics.

use strict;
use warnings;
use Test::More;

my @suites = grep {
    open my $fh, '<', $_ or die "$_: $!";
    local $/;
    my $text = <$fh>;
    $text =~ /\$\{?TEST_NGINX_STORE\b/;
} sort glob('t/0*.t');

if (!$ENV{TEST_NGINX_BINARY} || !$ENV{TEST_NGINX_MODULE}) {
    plan skip_all => 'TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)';
}
if (system('redis-server --version >/dev/null 2>&1') != 0) {
    plan skip_all => 'redis-server is not installed';
}
plan tests => scalar @suites;

for my $suite (@suites) {
    local $ENV{TEST_NGINX_USE_REDIS} = 1;
    local $ENV{HARNESS_ACTIVE};
    delete $ENV{HARNESS_ACTIVE};
    my $out = `$^X -I t/lib $suite 2>&1`;
    my $exit = $? >> 8;
    my ($planned) = $out =~ /^1\.\.(\d+)/m;
    my @not_ok = $out =~ /^(not ok \d+ .*)$/mg;
    my $ok = $exit == 0 && !@not_ok && defined $planned && $planned > 0;
    ok($ok, "$suite with store=redis (" . ($planned // 0) . " tests)")
        or diag(join "\n", @not_ok ? @not_ok : (), "exit $exit", grep { /^#/ } split /\n/, $out);
}
