#!/usr/bin/env perl
# Which nginx processes hold a TCP connection to a Redis port, watched for a while.
#
#   perl t/lib/redis_owners.pl --port PORT --servroot DIR --seconds S
#        [--expect worker|single] [--pause S2] [--require]
#
# Reads the nginx pid from DIR/logs/nginx.pid and samples, every 50 ms for S seconds, the
# connections of that process and of its children whose remote port is PORT (/proc/net/tcp
# and tcp6 give the socket inodes, /proc/PID/fd tells which process holds each). Every owner
# must be what --expect says:
#
#   worker   (default) a process titled "nginx: worker process" (never the master, the
#            "cache manager process" or the "cache loader process")
#   single   the pid file's process itself (master_process off: one process does everything)
#
# --pause S2 stops (SIGSTOP) every worker of the master once the first 0.5 s of sampling are
# over, for S2 seconds, then continues them (SIGCONT; also when this script is interrupted):
# while the workers are frozen, a helper that runs the module's timers takes the node's sync
# over and connects, which is what the test must catch. --require fails when no connection
# was seen at all (the check would prove nothing).
#
# Prints one line per owner seen ("owner PID 'TITLE': N samples, ok|NOT ALLOWED") and a
# verdict; exits 1 when an owner is not allowed or (with --require) nobody was seen, 2 on a
# usage or permission problem.

use strict;
use warnings;
use Getopt::Long;
use Time::HiRes qw(time sleep);

my ($port, $servroot, $seconds, $expect, $pause, $require) = (0, '', 3, 'worker', 0, 0);
GetOptions(
    'port=i' => \$port, 'servroot=s' => \$servroot, 'seconds=f' => \$seconds,
    'expect=s' => \$expect, 'pause=f' => \$pause, 'require' => \$require,
) or usage();
usage() unless $port && $servroot && $expect =~ /^(?:worker|single)$/;

sub usage {
    print "usage: $0 --port PORT --servroot DIR --seconds S [--expect worker|single]"
        . " [--pause S] [--require]\n";
    exit 2;
}

sub slurp {
    my ($f) = @_;
    open my $fh, '<', $f or return '';
    local $/;
    my $c = <$fh>;
    return $c // '';
}

my ($master) = slurp("$servroot/logs/nginx.pid") =~ /(\d+)/;
unless ($master && -d "/proc/$master") {
    print "no running nginx for $servroot\n";
    exit 2;
}

sub title {
    my ($pid) = @_;
    (my $t = slurp("/proc/$pid/cmdline")) =~ s/\0+/ /g;
    $t =~ s/\s+$//;
    return $t;
}

# The master and its live children.
sub family {
    my @pids = ($master);
    opendir my $d, '/proc' or return @pids;
    for my $pid (grep { /^\d+$/ } readdir $d) {
        my $stat = slurp("/proc/$pid/stat");
        next unless $stat =~ /\)\s+(\S+)\s+(\d+)/;
        push @pids, $pid if $2 == $master && $1 ne 'Z' && $1 ne 'X';
    }
    return @pids;
}

sub workers { grep { $_ != $master && title($_) =~ /worker process/ } family() }

# Inodes of the sockets connected (or connecting) to PORT, from both address families.
sub redis_inodes {
    my %inode;
    for my $table ('/proc/net/tcp', '/proc/net/tcp6') {
        for my $line (split /\n/, slurp($table)) {
            my @f = split ' ', $line;
            next unless @f > 9 && $f[2] =~ /:([0-9A-F]{4})$/;
            next unless hex($1) == $port;
            next if $f[3] eq '0A';    # LISTEN (cannot be: the remote side is PORT)
            $inode{ $f[9] } = 1 if $f[9];
        }
    }
    return \%inode;
}

my %seen;       # pid => { title, samples }
my $samples = 0;
my $paused = 0;
my @frozen;

sub thaw {
    kill 'CONT', @frozen if @frozen;
    @frozen = ();
}
$SIG{$_} = sub { thaw(); exit 3 } for qw(TERM INT HUP);
END { thaw() }

my $start = time;
while (time - $start < $seconds) {
    my $t = time - $start;
    if ($pause && !$paused && $t >= 0.5) {
        @frozen = workers();
        kill 'STOP', @frozen;
        $paused = 1;
        print "stopped workers @frozen at ", sprintf('%.2f', $t), " s\n";
    }
    if ($paused == 1 && $t >= 0.5 + $pause) {
        print "continued workers @frozen at ", sprintf('%.2f', $t), " s\n";
        thaw();
        $paused = 2;
    }
    my $inodes = redis_inodes();
    $samples++;
    for my $pid (family()) {
        opendir my $fd, "/proc/$pid/fd" or do {
            next unless -d "/proc/$pid";
            print "cannot read /proc/$pid/fd ($!): run as root or as nginx's user\n";
            exit 2;
        };
        for my $n (readdir $fd) {
            my $l = readlink("/proc/$pid/fd/$n") // next;
            next unless $l =~ /^socket:\[(\d+)\]$/ && $inodes->{$1};
            $seen{$pid} //= { title => title($pid), samples => 0 };
            $seen{$pid}{samples}++;
            last;
        }
    }
    sleep 0.05;
}
thaw();

my $bad = 0;
for my $pid (sort { $a <=> $b } keys %seen) {
    my $s = $seen{$pid};
    my $ok = $expect eq 'single' ? $pid == $master
           : $pid != $master && $s->{title} =~ /^nginx: worker process/;
    $bad++ unless $ok;
    printf "owner %d '%s': %d of %d samples, %s\n", $pid, $s->{title}, $s->{samples}, $samples,
        $ok ? 'ok' : 'NOT ALLOWED';
}
if ($bad) {
    print "FAIL: $bad process(es) other than ", ($expect eq 'single' ? 'the single nginx process'
        : 'workers'), " held a connection to port $port\n";
    exit 1;
}
if ($require && !%seen) {
    print "FAIL: no nginx process held a connection to port $port in $samples samples\n";
    exit 1;
}
print "only ", ($expect eq 'single' ? 'the single nginx process' : 'workers'),
    " held connections to port $port ($samples samples)\n";
exit 0;
