#!/usr/bin/env perl
# Bounded script work in a synced room (`sync=`), from the outside: a line of --waiting
# waiters is put straight into the room's sorted sets in Redis (as if the fleet had seen them),
# SLOWLOG is set to record every call over --slow-us, then --clients new clients take places
# on the nodes (a first contact and a return each: a sighting to report, and the line grows by
# them) and poll once more. After --settle seconds it prints one line:
#
#   script calls N; line L; slow script calls S; slowest call U us
#
# "slow script calls" counts EVAL/EVALSHA entries in SLOWLOG (every entry over --slow-us).
#
# --seen-ago S: the line was last seen S seconds before the start, so that it leaves (unseen
# for `presence`) while the clients poll and the calls carry the line's expiry too.
# --pin: redis-server gets the last CPU to itself, this client the others (the nginx under
# test pins its workers with worker_cpu_affinity). SLOWLOG counts wall time: on a 2-core
# machine, with nginx and this client busy beside it, a call of 0.6 ms measured 1.2-1.4 ms.
# Pinned, it measures the script's work, as on a Redis host of its own.
# Usage: sync_bounded.pl --ports P1,P2 --redis PORT --zone NAME [--waiting 100000]
#        [--clients 1500] [--slow-us 2000] [--settle 2] [--seen-ago S] [--pin]
use strict;
use warnings;
use Getopt::Long;
use HTTP::Tiny;
use IO::Socket::INET;
use Time::HiRes qw(sleep);

my %o = (waiting => 100000, clients => 1500, 'slow-us' => 2000, settle => 2, 'seen-ago' => 0);
GetOptions(\%o, 'ports=s', 'redis=i', 'zone=s', 'waiting=i', 'clients=i', 'slow-us=i',
    'settle=f', 'seen-ago=f', 'pin') or die "bad options\n";
my @ports = split /,/, $o{ports};

my $rs = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$o{redis}", Timeout => 5)
    or die "redis: $!\n";
sub send_cmd {
    my @a = @_;
    print $rs '*' . @a . "\r\n" . join('', map { '$' . length($_) . "\r\n$_\r\n" } @a);
}
sub read_reply {
    my $line = <$rs>;
    die "redis: connection lost\n" unless defined $line;
    $line =~ s/\r\n$//;
    my ($t, $rest) = (substr($line, 0, 1), substr($line, 1));
    return $rest if $t eq '+' || $t eq ':';
    die "redis: $rest\n" if $t eq '-';
    if ($t eq '$') {
        return undef if $rest < 0;
        my $buf = '';
        read($rs, $buf, $rest + 2) == $rest + 2 or die "redis: short read\n";
        return substr($buf, 0, $rest);
    }
    return [map { read_reply() } 1 .. $rest] if $t eq '*';
    die "redis: bad reply $line\n";
}
sub redis_cmd { send_cmd(@_); return read_reply() }

if ($o{pin}) {
    my ($pid) = redis_cmd('INFO', 'server') =~ /^process_id:(\d+)/m or die "redis: no pid\n";
    my $last = `nproc` - 1;
    die "--pin needs two CPUs\n" if $last < 1;
    system("taskset -pc $last $pid >/dev/null") == 0 or die "taskset redis: $?\n";
    system("taskset -pc 0-" . ($last - 1) . " $$ >/dev/null") == 0 or die "taskset self: $?\n";
}

my $base = "smart_limit:{$o{zone}}";
my $t = redis_cmd('TIME');
my $now = $t->[0] * 1000 + int($t->[1] / 1000);
# The line: arrived over the last 100 s, seen just now (present for `presence`).
for (my $i = 0; $i < $o{waiting}; $i += 1000) {
    my (@line, @present);
    for my $j ($i .. ($i + 999 < $o{waiting} ? $i + 999 : $o{waiting} - 1)) {
        my $sid = 7_000_000_000 + $j;
        push @line, $now - 100_000 + int($j * 100_000 / $o{waiting}), $sid;
        push @present, $now - int($o{'seen-ago'} * 1000), $sid;
    }
    send_cmd('ZADD', "$base:arrival", @line);
    send_cmd('ZADD', "$base:present", @present);
}
read_reply() for 1 .. 2 * int(($o{waiting} + 999) / 1000);
redis_cmd('CONFIG', 'SET', 'slowlog-log-slower-than', $o{'slow-us'});
redis_cmd('CONFIG', 'SET', 'slowlog-max-len', 1024);
redis_cmd('SLOWLOG', 'RESET');
my $calls0 = script_calls();

# New clients take places on the nodes, round-robin, and poll once more.
my $http = HTTP::Tiny->new(timeout => 5, keep_alive => 1, max_redirect => 0);
my @jar;
for my $c (0 .. $o{clients} - 1) {
    my $port = $ports[$c % @ports];
    my $res = $http->get("http://127.0.0.1:$port/");
    sleep 0.001;    # paced: the measure is Redis's, not a saturated machine's
    my ($cookie) = ($res->{headers}{'set-cookie'} // '') =~ /^([^;]+)/;
    die "client $c: no ticket (status $res->{status})\n" unless $cookie;
    push @jar, $cookie;
}
for my $round (1 .. 2) {
    for my $c (0 .. $#jar) {
        my $port = $ports[($c + $round) % @ports];
        my $res = $http->get("http://127.0.0.1:$port/",
            { headers => { Cookie => $jar[$c], Accept => 'application/json' } });
        my ($cookie) = ($res->{headers}{'set-cookie'} // '') =~ /^([^;]+)/;
        $jar[$c] = $cookie if $cookie;
        sleep 0.001;
    }
}
sleep $o{settle};

my $slow = redis_cmd('SLOWLOG', 'GET', 1024);
my ($n, $worst) = (0, 0);
for my $e (@$slow) {
    next unless ref $e eq 'ARRAY' && ref $e->[3] eq 'ARRAY';
    next unless ($e->[3][0] // '') =~ /^eval/i;
    $n++;
    $worst = $e->[2] if $e->[2] > $worst;
    # What was slow: the op (the first argument after the keys), and the sizes of the
    # sync's own arguments (polls, the report's lists, flood control's).
    my @a = @{ $e->[3] };
    my $op = 3 + (($a[2] // '') =~ /^\d+$/ ? $a[2] : 4);
    print STDERR "slow: $e->[2] us: $a[0] op=", ($a[$op] // '?'), " args=", scalar(@a),
        " sizes=", join(',', map { length($_ // '') } @a[$op + 14 .. $#a]), "\n";
}
my $line = redis_cmd('ZCARD', "$base:arrival");
my $calls = script_calls() - $calls0;
print "script calls $calls; line $line; slow script calls $n; slowest call $worst us\n";

sub script_calls {
    my $info = redis_cmd('INFO', 'commandstats');
    my $k = 0;
    $k += $1 while $info =~ /^cmdstat_(?:evalsha|eval):calls=(\d+)/mg;
    return $k;
}
