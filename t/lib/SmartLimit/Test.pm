package SmartLimit::Test;

# A small Test::Nginx-style harness for smart_limit, on Test::Base and core
# perl. Test files:
#
#     use lib 't/lib';
#     use SmartLimit::Test;
#     run_tests();            # plans by itself: see t/README.md
#     __DATA__
#     === TEST 1: ...
#
# The syntax of the blocks and of `--- steps` is documented in t/README.md.
#
# NOTE: `-Base` makes Spiffy insert `my $self = shift;` into every
# `sub name {`; every sub here has a prototype so it is left alone. The real
# work lives in SmartLimit::Test::Runner (plain perl).

use Test::Base -Base;

use Cwd ();
use File::Basename ();
use File::Temp ();
use POSIX ();
use SmartLimit::Test::Runner ();

our @EXPORT = qw(run_tests test_count run_spec_in_child);

my $LIB_DIR = Cwd::abs_path(File::Basename::dirname(Cwd::abs_path(__FILE__)) . '/..');

# Number of tests the blocks of this file will emit (for files that add their
# own tests after run_tests: `plan tests => test_count() + 2;`).
sub test_count () {
    return SmartLimit::Test::Runner::count_tests([ Test::Base::blocks() ]);
}

sub run_tests () {
    my $tb = Test::More->builder;
    my @blocks = Test::Base::blocks();
    my $count = SmartLimit::Test::Runner::count_tests(\@blocks);
    my ($bin, $mod) = @ENV{qw(TEST_NGINX_BINARY TEST_NGINX_MODULE)};
    if (!$bin || !$mod) {
        my $why = "TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)";
        if ($tb->has_plan) {
            $tb->skip($why) for 1 .. $count;
            return;
        }
        Test::More::plan(skip_all => $why);
    }
    die "TEST_NGINX_BINARY=$bin is not an executable file\n" unless -f $bin && -x $bin;
    die "TEST_NGINX_MODULE=$mod does not exist\n" unless -f $mod;
    Test::More::plan(tests => $count) unless $tb->has_plan;
    my $env = { binary => Cwd::abs_path($bin), module => Cwd::abs_path($mod) };
    SmartLimit::Test::Runner::run_block($_, $env) for @blocks;
}

# Runs the blocks of $spec (text that would follow __DATA__) in a separate
# perl process with this harness. Returns { exit => CODE, tap => STDOUT,
# stderr => STDERR }. Used to prove that wrong expectations do fail.
sub run_spec_in_child ($) {
    my ($spec) = @_;
    my $dir = File::Temp::tempdir('sl-selfcheck-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $script = "$dir/selfcheck_$$.t";
    open my $fh, '>', $script or die "cannot write $script: $!";
    print $fh "use lib '$LIB_DIR';\nuse SmartLimit::Test;\nrun_tests();\n__DATA__\n$spec";
    close $fh;
    my $errfile = "$dir/stderr";
    my $pid = open(my $out, '-|');
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDERR, '>', $errfile;
        delete $ENV{HARNESS_ACTIVE};
        exec($^X, $script) or POSIX::_exit(127);
    }
    local $/;
    my $tap = <$out> // '';
    close $out;
    my $exit = $? >> 8;
    open my $e, '<', $errfile;
    my $stderr = $e ? (<$e> // '') : '';
    return { exit => $exit, tap => $tap, stderr => $stderr };
}

1;
