# The Debian package (issue 19, part 1; docs/package.md): scripts/package builds
# libnginx-mod-http-smart-limit_<version>_<arch>.deb against Debian's nginx; this suite installs
# it with `apt-get install ./...deb` (which pulls Debian's nginx), runs a room on Debian's
# /usr/sbin/nginx loaded through the package's modules-enabled link, then removes, reinstalls
# and purges it, and checks that the machine is left as it was found.
#
# Needs root (apt-get, dpkg); skipped otherwise. Service starts are forbidden during the suite
# with /usr/sbin/policy-rc.d (as Debian build chroots do), so installing nginx starts nothing;
# the room runs on its own loopback ports with its own config, pid file and logs.
# Packages the suite installed (nginx, nginx-common, ...) are purged at the end, also when it
# dies half-way.

use strict;
use warnings;
use Test::More;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use HTTP::Tiny;
use IO::Socket::INET;
use JSON::PP qw(decode_json);
use Time::HiRes qw(time sleep);

plan skip_all => 'needs root: installs, removes and purges a Debian package with apt-get and dpkg'
    if $> != 0;

my $ROOT = abs_path(dirname(abs_path(__FILE__)) . '/..');
my $PKG = 'libnginx-mod-http-smart-limit';
my $MODULE = '/usr/lib/nginx/modules/ngx_http_smart_limit_module.so';
my $AVAILABLE = '/usr/share/nginx/modules-available/mod-http-smart-limit.conf';
my $ENABLED = '/etc/nginx/modules-enabled/50-mod-http-smart-limit.conf';
my $DOC = "/usr/share/doc/$PKG";
my $NGINX = '/usr/sbin/nginx';
my $POLICY = '/usr/sbin/policy-rc.d';
my @APT = ('env', 'DEBIAN_FRONTEND=noninteractive', 'apt-get', '-y', '-o', 'DPkg::Lock::Timeout=300',
           '-o', 'Dpkg::Options::=--force-confdef', '-o', 'Dpkg::Options::=--force-confold');
my $t0 = time;

# ---- helpers ----------------------------------------------------------------------------------

sub q_sh { my $s = shift; $s =~ s/'/'\\''/g; "'$s'" }

# A signal (INT, TERM, HUP) while a command runs waits for it to end (an apt-get killed
# half-way would leave packages behind that cleanup does not know about yet); cleanup() runs at
# the next checkpoint(). A signal between commands runs it at once.
our $running = 0;
my ($stopping, $cleaned, $armed) = (0, 0, 0);   # $armed: the state before is recorded
my $procs_before = {};          # Debian nginx processes before the suite: pid => cmdline

sub checkpoint {
    return if $cleaned || !$stopping || !$armed;
    cleanup();
    exit 130;
}

# Runs a command (list) with stdin from /dev/null; returns (exit code, stdout+stderr). Stops
# the suite afterwards when a signal came, unless `local $hold = 1` (the caller checkpoints).
our $hold = 0;
sub run {
    my $cmd = join ' ', map { q_sh($_) } @_;
    my $out = do { local $running = 1; `$cmd </dev/null 2>&1` };
    my $rc = $? == -1 ? 127 : $? >> 8;
    checkpoint() unless $hold;
    return ($rc, $out // '');
}

sub tail_of { my ($text, $n) = @_; my @l = split /\n/, $text; join("\n", @l > $n ? @l[-$n .. -1] : @l) }

# dpkg's view of a package: "installed", "config-files", "not-installed", ...
sub pkg_state {
    my ($rc, $out) = run('dpkg-query', '-W', '-f=${db:Status-Status}', $_[0]);
    return $rc == 0 && $out ne '' ? $out : 'not-installed';
}

sub installed_packages {
    my ($rc, $out) = run('dpkg-query', '-W', '-f=${Package}\t${db:Status-Status}\n');
    return { map { my ($p, $s) = split /\t/; $s eq 'installed' ? ($p => 1) : () } split /\n/, $out };
}

# Processes running Debian's nginx binary (also after it was deleted by a purge): pid => cmdline.
sub debian_nginx_processes {
    my %p;
    for my $dir (glob '/proc/[0-9]*') {
        my $exe = readlink("$dir/exe") // next;
        next unless $exe =~ m{^/usr/sbin/nginx(?: \(deleted\))?$};
        open my $fh, '<', "$dir/cmdline" or next;
        local $/;
        my $cmd = <$fh> // '';
        $cmd =~ s/\0+$//;
        $cmd =~ s/\0/ /g;
        (my $pid = $dir) =~ s{.*/}{};
        $p{$pid} = $cmd;
    }
    return \%p;
}

# Debian nginx processes this suite may have caused, which were not running before: a
# service-style master (no -c: what `invoke-rc.d nginx start` runs) or one of the room's (its
# config in $dir), and their workers. Other Debian nginx processes (another suite's, with its
# own -c) are none of its business.
sub strays {
    my ($dir) = @_;
    my $now = debian_nginx_processes();
    my %s;
    for my $pid (grep { !$procs_before->{$_} } keys %$now) {
        my $cmd = $now->{$pid};
        next unless ($cmd =~ /^nginx: master process/ && $cmd !~ / -c /)
                 || (defined $dir && index($cmd, "$dir/") >= 0);
        $s{$pid} = $cmd;
        $s{$_} = $now->{$_} for grep { $now->{$_} } children_of($pid);
    }
    return \%s;
}

sub children_of {
    my ($parent) = @_;
    my @kids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        my ($pid, $ppid) = slurp($stat) =~ /^(\d+) \(.*\) \S (\d+)/s or next;
        push @kids, $pid if $ppid == $parent;
    }
    return @kids;
}

sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
                                  Listen => 1, ReuseAddr => 1) or die "free_port: $!";
    return $s->sockport;
}

sub slurp { open my $fh, '<', $_[0] or return ''; local $/; <$fh> // '' }

# ---- the machine before -----------------------------------------------------------------------

my $before_pkgs = installed_packages();
my $nginx_before = $before_pkgs->{nginx} ? 1 : 0;
# Paths Debian's nginx packages (or running it) create: each must exist afterwards exactly when
# it existed before.
my @NGINX_PATHS = qw(/etc/nginx /usr/share/nginx /usr/lib/nginx /var/lib/nginx /var/log/nginx
                     /run/nginx.pid);
my %paths_before = map { $_ => (-e $_ || -l $_) ? 1 : 0 } @NGINX_PATHS;
$procs_before = debian_nginx_processes();
my $policy_before = -e $POLICY ? slurp($POLICY) : undef;
my $policy_mode = -e $POLICY ? (stat $POLICY)[2] & 07777 : undef;
my (%suite_installed, $nginx_pid_file, $room_dir);

if (pkg_state($PKG) ne 'not-installed') {
    fail("$PKG is not on the machine before the suite");
    diag("dpkg says $PKG is '" . pkg_state($PKG) . "': purge it first (apt-get purge $PKG)");
    done_testing();
    $cleaned = 1;       # nothing was touched: leave the package as it is
    exit 1;
}

# Service starts are forbidden while the suite installs nginx: a policy-rc.d that says 101.
$armed = 1;
{
    my ($rc) = defined $policy_before ? run($POLICY, 'nginx', 'start') : (0);
    if (!defined $policy_before || $rc != 101) {
        rename $POLICY, "$POLICY.smart-limit-test" or die "cannot move $POLICY aside: $!"
            if defined $policy_before;
        open my $fh, '>', $POLICY or die "cannot write $POLICY: $!";
        print $fh "#!/bin/sh\n# t/500-package.t: no service starts while it installs nginx\nexit 101\n";
        close $fh;
        chmod 0755, $POLICY;
    }
}

# Stops the room's nginx: QUIT (as nginx -s quit), KILL after 10 s. Returns its master's pid
# when it ended on QUIT, 0 otherwise.
sub stop_room {
    return 0 unless $nginx_pid_file && -s $nginx_pid_file;
    my ($pid) = slurp($nginx_pid_file) =~ /(\d+)/ or return 0;
    my @workers = children_of($pid);
    kill 'QUIT', $pid;
    my $end = time + 10;
    sleep 0.05 while kill(0, $pid) && time < $end;
    my $quit = kill(0, $pid) ? 0 : $pid;
    kill 'KILL', $pid unless $quit;
    my $left = debian_nginx_processes();
    kill 'KILL', grep { $left->{$_} } @workers, children_of($pid);   # gone with it, or now
    unlink $nginx_pid_file;
    return $quit;
}

# Puts the machine back: our nginx stopped, our package purged, what the suite installed
# purged, the policy restored, no nginx left that the install started. Runs once (end or death).
sub cleanup {
    return if !$armed || $cleaned++;
    local @SIG{qw(INT TERM HUP)} = ('IGNORE') x 3;   # a signal now would leave it half done
    stop_room();
    run(@APT, 'purge', $PKG) if pkg_state($PKG) ne 'not-installed';
    my @ours = grep { pkg_state($_) ne 'not-installed' } sort keys %suite_installed;
    run(@APT, 'purge', @ours) if @ours;
    # a service-style nginx the install may have started despite the policy, a room left over
    kill 'KILL', keys %{ strays($room_dir) };
    # `nginx -t` of the stock config leaves an empty /run/nginx.pid behind (nginx creates the
    # pid file in test mode too)
    unlink '/run/nginx.pid' if !$paths_before{'/run/nginx.pid'} && -f '/run/nginx.pid' && !-s _;
    if (defined $policy_before) {
        if (-e "$POLICY.smart-limit-test") {
            rename "$POLICY.smart-limit-test", $POLICY;
        }
    } else {
        unlink $POLICY;
    }
}
END { local $?; cleanup() }     # keep the exit status Test::More sets
$SIG{$_} = sub { $stopping = 1; checkpoint() unless $running } for qw(INT TERM HUP);

# ---- 1. build ---------------------------------------------------------------------------------

my ($version) = slurp("$ROOT/Cargo.toml") =~ /^\[package\].*?^version\s*=\s*"([^"]+)"/ms;
my ($arch) = (run('dpkg', '--print-architecture'))[1] =~ /(\S+)/;
my $deb;

subtest 'scripts/package builds the .deb against Debian nginx' => sub {
    ok(defined $version, "Cargo.toml has a version ($version)") or return;
    like(slurp("$ROOT/CHANGELOG.md"), qr/^## \[\Q$version\E\] - \d{4}-\d\d-\d\d$/m,
         "CHANGELOG.md has an entry for $version");
    my $start = time;
    my ($rc, $out) = run("$ROOT/scripts/package");
    my $took = time - $start;
    is($rc, 0, sprintf('scripts/package exits 0 (%.0f s)', $took))
        or return diag(tail_of($out, 40));
    ($deb) = $out =~ /([^\n]+)\n*\z/;
    is($deb, "$ROOT/target/deb/pkg/${PKG}_${version}_${arch}.deb", 'it prints the path of the .deb last');
    ok(-s $deb, 'the .deb exists') or return;
    note(sprintf('package: %d bytes, built in %.0f s', -s $deb, $took));

    my (undef, $control) = run('dpkg-deb', '-f', $deb);
    like($control, qr/^Package: \Q$PKG\E$/m, 'Package');
    like($control, qr/^Version: \Q$version\E$/m, 'Version: the one of Cargo.toml');
    like($control, qr/^Architecture: \Q$arch\E$/m, 'Architecture');
    # The ABI Debian's nginx provides, asked of apt independently of the script.
    my (undef, $show) = run('apt-cache', 'show', 'nginx');
    my ($abi) = $show =~ /^Provides:.*?\b(nginx-abi-[\w.+~-]+)/m;
    ok($abi, "apt's nginx provides an ABI ($abi)") or return;
    like($control, qr/^Depends: (?:.*, )?\Q$abi\E(?:,|$)/m, "Depends on $abi");
    like($control, qr/^Depends: .*\blibc6 \(>= [\d.]+\)/m, 'Depends on libc6 (dpkg-shlibdeps)');

    my (undef, $list) = run('dpkg-deb', '-c', $deb);
    my %files = map { (split /\s+/, $_, 6)[5] =~ s{^\.}{}r => $_ } split /\n/, $list;
    for my $f ($MODULE, $AVAILABLE, "$DOC/copyright", "$DOC/changelog.gz",
               "$DOC/examples/smart-limit.conf") {
        ok($files{$f}, "ships $f");
    }
    ok((grep { m{^\Q$DOC\E/README\.md(?:\.gz)?$} } keys %files), 'ships README.md');
    ok((grep { m{^\Q$DOC\E/CHANGELOG\.md(?:\.gz)?$} } keys %files), 'ships CHANGELOG.md');
    like($files{$MODULE} // '', qr{^-rw-r--r-- root/root }, 'the module is 0644 root:root');
    ok(!(grep { m{^/etc/} } keys %files), 'ships nothing under /etc (the link is made by postinst)');

    my $ctl = tempdir(CLEANUP => 1);
    run('dpkg-deb', '-e', $deb, $ctl);
    like(slurp("$ctl/postinst"), qr{ln -sf /usr/share/nginx/modules-available/\$from\s*\\\s*/etc/nginx/modules-enabled/\$to}s,
         'postinst links modules-enabled as dh_nginx does');
    like(slurp("$ctl/postinst"), qr/\bmod-http-smart-limit\.conf:50-mod-http-smart-limit\.conf\b/,
         'for mod-http-smart-limit.conf at priority 50');
    like(slurp("$ctl/prerm"), qr/mv .*\$to\.removed/, 'prerm sets the link aside');
    like(slurp("$ctl/postrm"), qr/"purge".*rm \/etc\/nginx\/modules-enabled\/\$to\.removed/s,
         'postrm removes it on purge');
};
unless ($deb && -s $deb) {   # nothing to install: the rest cannot run
    done_testing();
    exit 1;
}

# ---- 2. install --------------------------------------------------------------------------------

subtest 'apt-get install ./...deb pulls Debian nginx and enables the module' => sub {
    my $start = time;
    my ($rc, $out);
    {
        local $hold = 1;        # record what the install added before a signal ends the suite
        ($rc, $out) = run(@APT, 'install', $deb);
        if ($rc != 0 && $out =~ /Unable to fetch|Failed to fetch|Unable to locate|404\s+Not Found/i) {
            run(@APT, 'update');
            ($rc, $out) = run(@APT, 'install', $deb) unless $stopping;
        }
        # What this install added (apt's list, and only what was not there before).
        my $after = installed_packages();
        if ($out =~ /^The following NEW packages will be installed:\n((?:  .*\n)+)/m) {
            $suite_installed{$_} = 1
                for grep { $_ ne $PKG && $after->{$_} && !$before_pkgs->{$_} } split ' ', $1;
        }
    }
    checkpoint();
    is($rc, 0, sprintf('apt-get install exits 0 (%.0f s)', time - $start)) or return diag(tail_of($out, 30));
    note('installed by the suite besides the package: ' . (join(' ', sort keys %suite_installed) || 'nothing'));
    is(pkg_state($PKG), 'installed', "dpkg: $PKG installed");
    is(pkg_state('nginx'), 'installed', "dpkg: Debian's nginx installed");
    ok(!$before_pkgs->{nginx} == !!$suite_installed{nginx}, 'nginx counted as installed by the suite exactly when it was absent before');
    ok(-f $MODULE, "$MODULE is there");
    is(slurp($AVAILABLE), "load_module modules/ngx_http_smart_limit_module.so;\n", "$AVAILABLE loads the module");
    ok(-l $ENABLED, "$ENABLED is a link");
    is(readlink($ENABLED), $AVAILABLE, "... to $AVAILABLE");
    ok(-f "$DOC/examples/smart-limit.conf", 'the example is installed');
    my ($vrc, $v) = run($NGINX, '-v');
    like($v, qr{nginx/1\.22\.1\b}, "Debian's nginx is 1.22.1 ($v)" =~ s/\n//r);
    is_deeply(strays(), {}, 'the install started no nginx (policy-rc.d)');
};

# ---- 3. nginx -t and a room on Debian's nginx ---------------------------------------------------

my $dir = $room_dir = tempdir('smart-limit-pkg-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $dir;
mkdir "$dir/tmp";
my ($port, $origin) = (free_port(), free_port());
$nginx_pid_file = "$dir/nginx.pid";
my $temp_paths = join "\n", map { "    ${_}_temp_path $dir/tmp/$_;" } qw(client_body proxy fastcgi uwsgi scgi);

sub write_file { my ($path, $text) = @_; open my $fh, '>', $path or die "$path: $!"; print $fh $text; close $fh }

write_file("$dir/room.conf", <<EOF);
# As in Debian's /etc/nginx/nginx.conf: the enabled modules come in through modules-enabled.
include /etc/nginx/modules-enabled/*.conf;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log info;
events { worker_connections 64; }
http {
    default_type text/plain;
$temp_paths
    log_format room '\$request \$status \$smart_limit_status \$smart_limit_room';
    access_log $dir/access.log room;
    smart_limit_zone shop size=1m max_active=1;
    server {
        listen 127.0.0.1:$origin;
        location / { return 200 "origin\\n"; }
    }
    server {
        listen 127.0.0.1:$port;
        location / { smart_limit shop; proxy_pass http://127.0.0.1:$origin; }
        location = /metrics { smart_limit_metrics; }
    }
}
EOF
write_file("$dir/example.conf", <<EOF);
include /etc/nginx/modules-enabled/*.conf;
pid $dir/example.pid;
error_log $dir/example-error.log;
events { }
http {
$temp_paths
    include $DOC/examples/smart-limit.conf;
}
EOF

my @room = ($NGINX, '-c', "$dir/room.conf", '-e', "$dir/error.log");

subtest "nginx -t on Debian's nginx" => sub {
    my ($rc, $out) = run(@room, '-t');
    is($rc, 0, 'a room config through modules-enabled passes nginx -t') or diag($out);
    like($out, qr/test is successful/, '... test is successful');
    ($rc, $out) = run($NGINX, '-c', "$dir/example.conf", '-e', "$dir/example-error.log", '-t');
    is($rc, 0, 'the packaged example configuration passes nginx -t') or diag($out);
    SKIP: {
        skip "nginx was installed before the suite: its /etc/nginx is the admin's, not Debian's stock config", 2
            if $nginx_before;
        ($rc, $out) = run($NGINX, '-T');
        is($rc, 0, "Debian's stock /etc/nginx/nginx.conf passes nginx -T with the module enabled") or diag(tail_of($out, 10));
        like($out, qr{^load_module modules/ngx_http_smart_limit_module\.so;$}m,
             '... and loads the module through the modules-enabled link');
    }
};

my $http = HTTP::Tiny->new(max_redirect => 0, timeout => 5, agent => 'smart-limit-pkg-test');
my $base = "http://127.0.0.1:$port";

sub get {
    my ($jar, $path, %h) = @_;
    $h{Cookie} = join '; ', map { "$_=$jar->{$_}" } sort keys %$jar if %$jar;
    my $r = $http->get("$base$path", { headers => \%h });
    my $sc = $r->{headers}{'set-cookie'} // [];
    for my $c (ref $sc ? @$sc : ($sc)) {
        $jar->{$1} = $2 if $c =~ /^([^=;\s]+)=([^;]*)/ && $2 ne '';
    }
    $r->{cookies} = ref $sc ? $sc : [$sc];
    return $r;
}

subtest "a room on Debian's nginx answers" => sub {
    my ($rc, $out) = run(@room);
    is($rc, 0, 'nginx starts') or return diag($out . tail_of(slurp("$dir/error.log"), 20));
    my $end = time + 5;
    sleep 0.05 until (IO::Socket::INET->new("127.0.0.1:$port") || time > $end);

    my (%a, %b);
    my $r = get(\%a, '/');
    is($r->{status}, 307, 'A, first contact: 307 (the cookie check)');
    like($r->{headers}{location} // '', qr{/$}, '... back to the same URL');
    ok((grep { /^smart_limit_shop=[^;]+;/ } @{ $r->{cookies} }), '... with a smart_limit_shop ticket');
    $r = get(\%a, '/');
    is($r->{status}, 200, 'A comes back with its ticket: admitted (the room is empty)');
    is($r->{content}, "origin\n", '... and gets the origin');
    ok((grep { /^smart_limit_shop=[^;]+;.*HttpOnly/i } @{ $r->{cookies} }), '... with its admitted ticket');
    is(get(\%a, '/')->{status}, 200, 'A passes again on its ticket');

    $r = get(\%b, '/');
    is($r->{status}, 307, 'B, first contact: 307');
    $r = get(\%b, '/', Accept => 'application/json');
    is($r->{status}, 503, 'B with its ticket, max_active=1 taken by A: 503, waiting');
    like($r->{headers}{'retry-after'} // '', qr/^\d+$/, '... with Retry-After');
    my $json = eval { decode_json($r->{content}) } // {};
    is($json->{status}, 'waiting', '... JSON status "waiting"');
    is($json->{position}, 1, '... at position 1');
    is($json->{room}, 'shop', '... in room shop');
    $r = get(\%b, '/', Accept => 'text/html');
    is($r->{status}, 503, 'B as a browser: 503');
    like($r->{headers}{'content-type'} // '', qr{^text/html}, '... the waiting page');
    like($r->{content}, qr/<meta http-equiv="refresh"/, '... which refreshes itself');
    is(get(\%a, '/')->{status}, 200, 'A still passes');

    $r = get({}, '/metrics');
    is($r->{status}, 200, 'metrics answer');
    like($r->{content}, qr/^smart_limit_admitted_total\{room="shop"\} 1$/m, '... one admission');
    like($r->{content}, qr/^smart_limit_queue_length\{room="shop"\} 1$/m, '... one waiting');
    like($r->{content}, qr/^smart_limit_build_info\{version="\Q$version\E",nginx="1\.22\.1"\} 1$/m,
         "... smart_limit_build_info names the package's version and Debian's nginx");

    my ($pid) = slurp($nginx_pid_file) =~ /(\d+)/;
    my $procs = debian_nginx_processes();
    like($procs->{$pid // 0} // '', qr{^nginx: master process \Q$NGINX -c $dir/room.conf\E},
         "the master is Debian's nginx with the room's config");
    my @ours = ($pid // (), children_of($pid // 0));
    is(scalar(grep { ($procs->{$_} // '') =~ /^nginx: worker process/ } @ours), 1, '... with one worker');
    is(stop_room(), $pid, 'nginx stops on QUIT within 10 s');
    my $left = debian_nginx_processes();
    is_deeply([grep { $left->{$_} } @ours], [], '... master and worker are gone');
    my $log = slurp("$dir/access.log");
    like($log, qr{^GET / HTTP/1\.1 307 NEW shop$}m, 'access log: $smart_limit_status NEW');
    like($log, qr{^GET / HTTP/1\.1 200 ADMITTED shop$}m, '... ADMITTED');
    like($log, qr{^GET / HTTP/1\.1 200 PASSED shop$}m, '... PASSED');
    like($log, qr{^GET / HTTP/1\.1 503 WAITING shop$}m, '... WAITING');
    my @bad = grep { /\[(?:alert|emerg|crit)\]|exited on signal/ } split /\n/, slurp("$dir/error.log");
    is_deeply(\@bad, [], 'error log: no [alert], [emerg], [crit] or crash');
    like(slurp("$dir/error.log"), qr{\[notice\] \d+#\d+: smart_limit/\Q$version\E \(built for nginx/1\.22\.1\)},
         "error log: one [notice] names the package's version at start-up");
};

# ---- 4. remove, reinstall, purge ----------------------------------------------------------------

subtest 'apt-get remove, then install again, then purge' => sub {
    my ($rc, $out) = run(@APT, 'remove', $PKG);
    is($rc, 0, 'apt-get remove exits 0') or diag(tail_of($out, 20));
    ok(!-e $MODULE, 'remove: the module is gone');
    ok(!-e $AVAILABLE, '... the modules-available file is gone');
    ok(!-e $ENABLED && !-l $ENABLED, '... the modules-enabled link is gone');
    ok(-l "$ENABLED.removed", '... set aside as .removed until purge (as Debian module packages do)');
    is(pkg_state($PKG), 'config-files', '... dpkg: config-files (removed, not purged)');
    ($rc, $out) = run(@room, '-t');
    isnt($rc, 0, '... a room config no longer passes nginx -t');
    like($out, qr/unknown directive "smart_limit_zone"/, '... the module is not loaded');

    ($rc, $out) = run(@APT, 'install', $deb);
    is($rc, 0, 'apt-get install again exits 0') or diag(tail_of($out, 20));
    is(readlink($ENABLED) // '', $AVAILABLE, '... the link is back');
    ok(!-l "$ENABLED.removed", '... and the .removed one gone');
    ($rc, $out) = run(@room, '-t');
    is($rc, 0, '... the room config passes nginx -t again') or diag($out);

    ($rc, $out) = run(@APT, 'purge', $PKG);
    is($rc, 0, 'apt-get purge exits 0') or diag(tail_of($out, 20));
    ok(!-e $MODULE, 'purge: the module is gone');
    ok(!-e $AVAILABLE, '... the modules-available file is gone');
    ok(!-e $ENABLED && !-l $ENABLED, '... the modules-enabled link is gone');
    ok(!-l "$ENABLED.removed", '... and no .removed link is left');
    ok(!-e $DOC, "... $DOC is gone");
    ($rc, $out) = run('dpkg', '-s', $PKG);
    isnt($rc, 0, 'dpkg -s fails for the package');
    like($out, qr/is not installed/, '... it is not installed');
};

# ---- 5. the machine as it was -------------------------------------------------------------------

subtest 'the machine is left as it was found' => sub {
    cleanup();
    for my $p (sort keys %suite_installed) {
        is(pkg_state($p), 'not-installed', "$p (installed by the suite) purged");
    }
    is(pkg_state('nginx'), $nginx_before ? 'installed' : 'not-installed',
       'nginx is ' . ($nginx_before ? 'still installed' : 'not installed') . ', as before');
    for my $path (@NGINX_PATHS) {
        is((-e $path || -l $path) ? 1 : 0, $paths_before{$path},
           "$path " . ($paths_before{$path} ? 'exists' : 'does not exist') . ', as before');
    }
    is_deeply(strays($dir), {}, 'no nginx process started by the suite is running');
    if (defined $policy_before) {
        is(slurp($POLICY), $policy_before, "$POLICY as before");
        is((stat $POLICY)[2] & 07777, $policy_mode, '... with its mode');
    } else {
        ok(!-e $POLICY, "$POLICY removed again");
    }
};

note(sprintf('t/500-package.t took %.0f s', time - $t0));
done_testing();
