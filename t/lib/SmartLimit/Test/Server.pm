package SmartLimit::Test::Server;

# nginx and redis-server processes for one test block: servroot layout,
# config assembly, start, reload, stop. Everything polls; nothing sleeps
# for a fixed time.

use strict;
use warnings;

use File::Path ();
use File::Copy ();
use File::Basename ();
use IO::Socket::INET ();
use IO::Select ();
use POSIX ();
use Time::HiRes ();

our $VERBOSE = $ENV{TEST_NGINX_VERBOSE};

sub note_v { print STDERR "# [harness] @_\n" if $VERBOSE }

# A free TCP port on 127.0.0.1, chosen by the kernel. Ports handed out in this
# process are remembered so two calls never return the same one.
my %given;
sub free_port {
    for (1 .. 50) {
        my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                      Proto => 'tcp', Listen => 1, ReuseAddr => 1)
            or die "cannot bind a free port: $!";
        my $p = $s->sockport;
        close $s;
        next if $given{$p}++;
        return $p;
    }
    die "no free port found";
}

sub port_open {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Proto => 'tcp', Timeout => 0.5);
    return 0 unless $s;
    close $s;
    return 1;
}

# Polls $cond every 10 ms until true or $timeout seconds pass.
sub wait_until {
    my ($timeout, $cond) = @_;
    my $deadline = Time::HiRes::time() + $timeout;
    while (1) {
        return 1 if $cond->();
        return 0 if Time::HiRes::time() > $deadline;
        Time::HiRes::sleep(0.01);
    }
}

sub pid_alive {
    my ($pid) = @_;
    return 0 unless $pid;
    # A zombie child of ours still answers kill 0: reap it first.
    waitpid($pid, POSIX::WNOHANG());
    return 0 unless kill(0, $pid);
    # A daemon's zombie waits for init to reap it, which can take seconds
    # here: a zombie has finished.
    my $stat = slurp("/proc/$pid/stat");
    return 0 if $stat =~ /\)\s+[ZX]\s/;
    return 1;
}

# Runs a command, returns (exit code, stdout+stderr).
sub run_capture {
    my (@cmd) = @_;
    my $pid = open(my $fh, '-|');
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        exec @cmd or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh>;
    close $fh;
    return ($? >> 8, $out // '');
}

sub slurp {
    my ($f) = @_;
    open my $fh, '<', $f or return '';
    binmode $fh;
    local $/;
    my $c = <$fh>;
    return $c // '';
}

sub spew {
    my ($f, $content) = @_;
    File::Path::make_path(File::Basename::dirname($f));
    open my $fh, '>', $f or die "cannot write $f: $!";
    binmode $fh;
    print $fh $content;
    close $fh or die "cannot write $f: $!";
}

# Worker processes of a master: list of [pid, cmdline].
sub workers_of {
    my ($master) = @_;
    my @w;
    opendir my $d, '/proc' or return ();
    for my $pid (grep { /^\d+$/ } readdir $d) {
        my $stat = slurp("/proc/$pid/stat");
        next unless $stat =~ /\)\s+(\S+)\s+(\d+)/;
        next unless $2 == $master && $1 ne 'Z' && $1 ne 'X';
        my $cmd = slurp("/proc/$pid/cmdline");
        $cmd =~ s/\0+/ /g;
        next unless $cmd =~ /worker process/;
        push @w, [$pid, $cmd];
    }
    return @w;
}

# ---------------------------------------------------------------- nginx

# new(servroot => ..., binary => ..., module => ..., index => N, vars => {...})
sub new {
    my ($class, %a) = @_;
    return bless { %a, pid => undef }, $class;
}

sub servroot { $_[0]{servroot} }
sub port     { $_[0]{vars}{TEST_NGINX_PORT} }
sub error_log_path { "$_[0]{servroot}/logs/error.log" }

sub subst {
    my ($self, $text) = @_;
    return '' unless defined $text;
    my $v = $self->{vars};
    $text =~ s/\$(?:\{(TEST_NGINX_\w+)\}|(TEST_NGINX_\w+))/
        my $n = $1 \/\/ $2;
        exists $v->{$n} ? $v->{$n} : exists $ENV{$n} ? $ENV{$n} : "\$$n"/ge;
    return $text;
}

# Creates the servroot: conf/, html/, logs/, modules/, tmp/.
sub prepare {
    my ($self) = @_;
    my $root = $self->{servroot};
    File::Path::remove_tree($root) if -e $root;
    File::Path::make_path(map { "$root/$_" } qw(conf html logs modules tmp));
    File::Copy::copy($self->{module}, "$root/modules/ngx_http_smart_limit_module.so")
        or die "cannot copy $self->{module}: $!";
}

# Writes html/ files from a `--- user_files` section.
sub write_user_files {
    my ($self, $spec) = @_;
    return unless defined $spec && length $spec;
    my ($file, @content, %files, @order);
    for my $line (split /^/, $self->subst($spec)) {
        if ($line =~ /^>>>\s+(\S+)\s*$/) {
            $file = $1;
            push @order, $file;
            $files{$file} = '';
            next;
        }
        die "--- user_files must start with '>>> path'\n" unless defined $file;
        $files{$file} .= $line;
    }
    for my $f (@order) {
        die "user file '$f' must not contain '..'\n" if $f =~ m{(^|/)\.\.(/|$)};
        my $path = $f =~ m{^/} ? $f : "$self->{servroot}/html/$f";
        die "user file '$f' is outside the servroot\n"
            unless index($path, $self->{servroot}) == 0;
        spew($path, $files{$f});
    }
}

# Assembles conf/nginx.conf from the block's sections.
# $s: { main_config, http_config, config, workers, master, log_level, user }
sub write_config {
    my ($self, $s) = @_;
    my $root = $self->{servroot};
    my $user = '';
    if ($> == 0 && ($s->{main_config} // '') !~ /^\s*user\s/m) {
        # Workers run as nobody by default; when the servroot is not reachable
        # for "others" (e.g. under /root), run them as root instead.
        my $dir = $root;
        while ($dir ne '/' && $dir ne '.') {
            my $mode = (stat $dir)[2] // 0;
            if (!($mode & 0001)) { $user = "user root;\n"; last }
            $dir = File::Basename::dirname($dir);
        }
    }
    my $master = $s->{master} // 'on';
    my $conf = <<"EOF";
load_module $root/modules/ngx_http_smart_limit_module.so;
${user}worker_processes $s->{workers};
daemon on;
master_process $master;
error_log logs/error.log $s->{log_level};
pid logs/nginx.pid;

@{[ $self->subst($s->{main_config}) ]}

events {
    worker_connections 1024;
}

http {
    access_log logs/access.log;
    client_body_temp_path $root/tmp/client_body;
    proxy_temp_path $root/tmp/proxy;
    fastcgi_temp_path $root/tmp/fastcgi;
    uwsgi_temp_path $root/tmp/uwsgi;
    scgi_temp_path $root/tmp/scgi;
    default_type text/plain;

@{[ $self->subst($s->{http_config}) ]}

    server {
        listen 127.0.0.1:@{[ $self->port ]};
        server_name localhost;

@{[ $self->subst($s->{config}) ]}
    }
}
EOF
    spew("$root/conf/nginx.conf", $conf);
}

sub cmd {
    my ($self, @extra) = @_;
    return ($self->{binary}, '-p', "$self->{servroot}/", '-c', 'conf/nginx.conf', @extra);
}

# nginx -t: (ok, output)
sub test_config {
    my ($self) = @_;
    my ($rc, $out) = run_capture($self->cmd('-e', 'stderr', '-t'));
    return ($rc == 0 && $out !~ /test failed/, $out);
}

# Starts the daemon, waits for the port, the pid file and the workers.
# Returns (ok, message).
sub start {
    my ($self, $workers) = @_;
    my $startup = "$self->{servroot}/logs/startup.log";
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $startup;
        open STDERR, '>&', \*STDOUT;
        exec($self->cmd('-e', $self->error_log_path)) or POSIX::_exit(127);
    }
    waitpid($pid, 0);
    my $rc = $? >> 8;
    if ($rc != 0) {
        return (0, "nginx exited with $rc at start:\n" . slurp($startup) . $self->log_tail(20));
    }
    my $pidfile = "$self->{servroot}/logs/nginx.pid";
    my $ok = wait_until(10, sub {
        my $p = slurp($pidfile);
        return 0 unless $p =~ /(\d+)/;
        $self->{pid} = $1;
        return port_open($self->port) && workers_of($1) >= $workers;
    });
    return (0, "nginx did not come up on port " . $self->port . " within 10s\n"
               . slurp($startup) . $self->log_tail(20)) unless $ok;
    note_v("nginx #$self->{index} up, pid $self->{pid}, port " . $self->port);
    return (1, '');
}

sub running { pid_alive($_[0]{pid}) }

# Reload: nginx -t first (fails fast with its message), then -s reload, then
# wait until the new generation of workers is up and the old one is closing.
sub reload {
    my ($self, $workers) = @_;
    my ($ok, $out) = $self->test_config;
    return (0, "nginx -t refused the new config:\n$out") unless $ok;
    return (0, "nginx is not running") unless $self->running;
    my %old = map { ($_->[0] => 1) } workers_of($self->{pid});
    my ($rc, $sig_out) = run_capture($self->cmd('-e', $self->error_log_path, '-s', 'reload'));
    return (0, "nginx -s reload failed ($rc): $sig_out") if $rc != 0;
    my $up = wait_until(10, sub {
        my @w = workers_of($self->{pid});
        my @new = grep { !$old{ $_->[0] } } @w;
        my @old_listening = grep { $old{ $_->[0] } && $_->[1] !~ /shutting down/ } @w;
        return @new >= $workers && !@old_listening;
    });
    return (0, "new workers did not come up within 10s after reload\n" . $self->log_tail(20))
        unless $up;
    note_v("nginx #$self->{index} reloaded");
    return (1, '');
}

# Sends HUP with a config that nginx -t refuses; the master must log the
# refusal and keep running. Returns (ok, message, [log_from, log_to]).
sub reload_refused {
    my ($self) = @_;
    my $log = $self->error_log_path;
    my $from = -s $log // 0;
    return (0, "nginx is not running") unless $self->running;
    kill 'HUP', $self->{pid};
    my $seen = wait_until(5, sub {
        my $c = slurp($log);
        return length($c) > $from && substr($c, $from) =~ /\[emerg\]/;
    });
    my $to = -s $log // 0;
    return (0, "no [emerg] logged after the refused reload", [$from, $to]) unless $seen;
    return (0, "the master died after a refused reload", [$from, $to]) unless $self->running;
    return (1, '', [$from, $to]);
}

sub kill_worker {
    my ($self, $signal, $workers) = @_;
    my @w = workers_of($self->{pid});
    return (0, "no worker to kill") unless @w;
    my $victim = $w[0][0];
    kill $signal, $victim;
    my $ok = wait_until(10, sub {
        my @now = workers_of($self->{pid});
        return !grep({ $_->[0] == $victim } @now) && @now >= $workers;
    });
    return ($ok, $ok ? '' : "worker $victim did not get replaced within 10s");
}

# Binary upgrade, the standard way (the same binary): USR2 starts a new master beside the old
# one (the old pid file becomes nginx.pid.oldbin), WINCH stops the old workers, QUIT the old
# master. The new master makes its shared memory zones anew. Returns (ok, message).
sub upgrade {
    my ($self, $workers) = @_;
    my $old = $self->{pid};
    return (0, "nginx is not running") unless $old && pid_alive($old);
    my $pidfile = "$self->{servroot}/logs/nginx.pid";
    kill 'USR2', $old;
    my $new;
    my $up = wait_until(10, sub {
        my $p = slurp($pidfile);
        return 0 unless $p =~ /(\d+)/ && $1 != $old;
        $new = $1;
        return workers_of($new) >= $workers;
    });
    return (0, "no new master with its workers within 10s of USR2\n" . $self->log_tail(20))
        unless $up;
    kill 'WINCH', $old;
    kill 'QUIT', $old;
    my $gone = wait_until(10, sub { !pid_alive($old) });
    $self->{pid} = $new;
    return (0, "the old master $old did not quit within 10s") unless $gone;
    note_v("nginx #$self->{index} upgraded: master $old -> $new");
    return (1, '');
}

# Graceful stop: QUIT (what `nginx -s quit` sends), wait for the master to go,
# SIGKILL the process group after a timeout.
sub stop {
    my ($self) = @_;
    my $pid = $self->{pid} or return;
    if (pid_alive($pid)) {
        kill 'QUIT', $pid;
        unless (wait_until(10, sub { !pid_alive($pid) })) {
            print STDERR "# [harness] nginx $pid did not quit in 10s, killing it\n";
            kill 'KILL', -$pid;
            kill 'KILL', $pid;
            wait_until(2, sub { !pid_alive($pid) });
        }
    }
    $self->{pid} = undef;
    note_v("nginx #$self->{index} stopped");
}

sub error_log { slurp($_[0]->error_log_path) }

sub log_tail {
    my ($self, $n) = @_;
    my @l = grep { !/\[(?:debug|notice)\]/ } split /\n/, $self->error_log;
    return '' unless @l;
    @l = @l[-$n .. -1] if @l > $n;
    return "error.log of nginx #$self->{index} (" . $self->error_log_path . ", last lines):\n" . join('', map { "  $_\n" } @l);
}

# ---------------------------------------------------------------- redis

package SmartLimit::Test::Redis;

sub new {
    my ($class, %a) = @_;    # port, dir, args => [...]
    return bless { %a, pid => undef }, $class;
}

sub ping {
    my ($self) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{port},
                                  Proto => 'tcp', Timeout => 0.5) or return 0;
    syswrite $s, "PING\r\n";
    my $sel = IO::Select->new($s);
    return 0 unless $sel->can_read(1);
    my $buf = '';
    sysread $s, $buf, 64;
    close $s;
    return $buf =~ /^\+PONG/ ? 1 : 0;
}

sub start {
    my ($self) = @_;
    File::Path::make_path($self->{dir});
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', "$self->{dir}/redis.log";
        open STDERR, '>&', \*STDOUT;
        exec('redis-server', '--port', $self->{port}, '--bind', '127.0.0.1',
             '--save', '', '--appendonly', 'no', '--daemonize', 'no',
             '--dir', $self->{dir}, @{ $self->{args} || [] })
            or POSIX::_exit(127);
    }
    $self->{pid} = $pid;
    my $ok = SmartLimit::Test::Server::wait_until(10, sub {
        return 1 if $self->ping;
        if (waitpid($pid, POSIX::WNOHANG()) == $pid) {
            $self->{dead} = 1;
            return 1;
        }
        return 0;
    });
    if (!$ok || $self->{dead}) {
        $self->{pid} = undef if $self->{dead};
        $self->stop;
        return (0, "redis-server did not start on port $self->{port}:\n"
                   . SmartLimit::Test::Server::slurp("$self->{dir}/redis.log"));
    }
    SmartLimit::Test::Server::note_v("redis up on port $self->{port}, pid $pid");
    return (1, '');
}

sub stop {
    my ($self) = @_;
    my $pid = $self->{pid} or return (1, '');
    kill 'TERM', $pid;
    my $gone = SmartLimit::Test::Server::wait_until(5, sub {
        waitpid($pid, POSIX::WNOHANG()) != 0;
    });
    unless ($gone) {
        kill 'KILL', $pid;
        waitpid($pid, 0);
    }
    $self->{pid} = undef;
    delete $self->{dead};
    SmartLimit::Test::Server::note_v("redis on port $self->{port} stopped");
    return (1, '');
}

sub cli {
    my ($self, @args) = @_;
    my ($rc, $out) = SmartLimit::Test::Server::run_capture('redis-cli', '-p', $self->{port}, @args);
    return ($rc, $out);
}

1;
