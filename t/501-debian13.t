# Debian 13's own nginx (issue 48; docs/package.md, "Which nginx"): `scripts/package trixie`
# fetches trixie's nginx and nginx-dev with apt on a throw-away state (target/apt/trixie/, the
# machine's sources untouched), builds the module against nginx-dev's source configured with
# Debian's flags (CARGO_TARGET_DIR=target/nginx-1.26.3) and assembles the .deb. Then:
#
#   1. the package: Depends on nginx-abi-1.26.3-1, a copy named with the ABI in target/dist;
#   2. a module built for one nginx version loaded into another fails `nginx -t` with nginx's
#      own message ("module ... version 1028003 instead of 1026003"), in both directions, and
#      nginx exits with status 1, never on a signal;
#   3. the subset below runs with TEST_NGINX_BINARY = trixie's /usr/sbin/nginx (unpacked with
#      `dpkg -x`; it runs on Debian 12) and TEST_NGINX_MODULE = the module from the .deb.
#
# The subset, and what each covers (docs/package.md's table says the same):
my @SUBSET = (
    't/010-queue.t',        # queueing, admission in arrival order, positions
    't/020-limit-req.t',    # limit_req's overflow into the room
    't/030-tickets.t',      # sealed tickets, keys, a reload that keeps them
    't/050-zone.t',         # the zone, reloads (the line survives them)
    't/330-page-json.t',    # the waiting page and the JSON answer
    't/340-metrics.t',      # metrics (and a reload)
    't/210-redis-fleet.t',  # a central Redis room shared by nodes (a real redis-server)
    't/361-http3.t',        # the room over HTTP/3 (Debian 13's nginx has http_v3)
);

use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use Test::More;
use Time::HiRes qw(time);
use lib 't/lib';
use SmartLimit::Test::Server ();

my ($vbin, $vmod) = @ENV{qw(TEST_NGINX_BINARY TEST_NGINX_MODULE)};
plan skip_all => 'TEST_NGINX_BINARY and TEST_NGINX_MODULE are not set (scripts/test sets them)'
    unless $vbin && $vmod;

my $ROOT = abs_path(dirname(abs_path(__FILE__)) . '/..');
my $run = \&SmartLimit::Test::Server::run_capture;
sub tail_of { my ($text, $n) = @_; my @l = split /\n/, $text; join("\n", @l > $n ? @l[-$n .. -1] : @l) }

# ---- 1. the package ------------------------------------------------------------------------

my $t0 = time;
my ($rc, $out) = $run->("$ROOT/scripts/package", 'trixie');
my $took = time - $t0;
is($rc, 0, sprintf('scripts/package trixie exits 0 (%.0f s)', $took)) or do {
    diag(tail_of($out, 40));
    done_testing();
    exit 1;
};
my ($deb) = $out =~ /([^\n]+)\n*\z/;
my ($bin) = $out =~ /^nginx:  (\S+)$/m;
my ($version) = SmartLimit::Test::Server::slurp("$ROOT/Cargo.toml") =~ /^\[package\].*?^version\s*=\s*"([^"]+)"/ms;
like($deb, qr{/target/nginx-1\.26\.3/pkg/libnginx-mod-http-smart-limit_\Q$version\E_amd64\.deb$},
     'it prints the path of the .deb last, under target/nginx-1.26.3');
like($out, qr/^built for: nginx 1\.26\.3, version number 1026003, signature \d+,\d+,\d+,[01]+$/m,
     "it checked the module's version number and signature against trixie's nginx");
like($out, qr/^load check: \S+ -t loads the module$/m, "... and that trixie's nginx loads it");
my (undef, $control) = $run->('dpkg-deb', '-f', $deb);
like($control, qr/^Depends: nginx-abi-1\.26\.3-1, /m, 'the .deb Depends on nginx-abi-1.26.3-1');
like($control, qr/^Version: \Q$version\E$/m, "... Version $version");
ok(-s "$ROOT/target/dist/libnginx-mod-http-smart-limit_${version}_amd64_nginx-abi-1.26.3-1.deb",
   '... and a copy named with its ABI is in target/dist');

ok($bin && -x $bin, "trixie's nginx is unpacked ($bin)") or do { done_testing(); exit 1 };
my (undef, $V) = $run->($bin, '-V');
like($V, qr{^nginx version: nginx/1\.26\.3$}m, "trixie's nginx is 1.26.3 and runs here");
like($V, qr/--with-compat/, '... built --with-compat');
like($V, qr/--with-http_v3_module/, '... and --with-http_v3_module');

# The module as the package installs it.
my $x = tempdir(CLEANUP => 1);
$run->('dpkg-deb', '-x', $deb, $x);
my $mod = "$x/usr/lib/nginx/modules/ngx_http_smart_limit_module.so";
ok(-s $mod, 'the .deb carries the module') or do { done_testing(); exit 1 };

# ---- 2. a module for one version in another ----------------------------------------------------

# nginx -t with only load_module and a zone: (exit status, signal, output).
sub load_test {
    my ($nginx, $so) = @_;
    my $d = tempdir(CLEANUP => 1);
    mkdir "$d/logs";
    SmartLimit::Test::Server::spew("$d/nginx.conf", <<"EOF");
load_module $so;
pid $d/logs/nginx.pid;
events { }
http {
    access_log off;
    client_body_temp_path $d/b; proxy_temp_path $d/p; fastcgi_temp_path $d/f;
    uwsgi_temp_path $d/u; scgi_temp_path $d/s;
    smart_limit_zone shop size=1m max_active=1;
}
EOF
    my $o = `'$nginx' -p '$d/' -e '$d/logs/error.log' -c '$d/nginx.conf' -t 2>&1`;
    return ($? >> 8, $? & 127, $o);
}

my ($st, $sig, $o) = load_test($bin, abs_path($vmod));
ok($st == 1 && $sig == 0, "the vendored 1.28.3 module in trixie's nginx: nginx -t exits 1, no signal ($st, $sig)")
    or diag($o);
like($o, qr/\[emerg\] module "\Q${\ abs_path($vmod)}\E" version 1028003 instead of 1026003/,
     "... with nginx's own message: version 1028003 instead of 1026003") or diag($o);
($st, $sig, $o) = load_test(abs_path($vbin), $mod);
ok($st == 1 && $sig == 0, "trixie's module in the vendored nginx 1.28.3: nginx -t exits 1, no signal ($st, $sig)")
    or diag($o);
like($o, qr/\[emerg\] module "\Q$mod\E" version 1026003 instead of 1028003/,
     '... version 1026003 instead of 1028003') or diag($o);
($st, $sig, $o) = load_test($bin, $mod);
ok($st == 0 && $o =~ /test is successful/, "trixie's module in trixie's nginx: nginx -t is successful")
    or diag($o);

# ---- 3. the subset on Debian 13's nginx --------------------------------------------------------

$t0 = time;
($rc, $out) = do {
    local $ENV{TEST_NGINX_BINARY} = $bin;
    local $ENV{TEST_NGINX_MODULE} = $mod;
    $run->('prove', '-I', 't/lib', @SUBSET);
};
my ($files, $tests) = $out =~ /^Files=(\d+), Tests=(\d+)/m;
ok($rc == 0 && $out =~ /^Result: PASS$/m && ($files // 0) == @SUBSET,
   sprintf("the subset passes on Debian 13's nginx 1.26.3: %d files, %d tests (%.0f s)",
           $files // 0, $tests // 0, time - $t0))
    or diag(tail_of($out, 60));
note($out) if $ENV{TEST_NGINX_VERBOSE};

done_testing();
