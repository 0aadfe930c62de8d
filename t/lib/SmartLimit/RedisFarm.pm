package SmartLimit::RedisFarm;

# Real Redis topologies for the suites of [S17], started on free loopback ports by a test
# file before its blocks run, and stopped when it ends (END, also when it dies):
#
#   tls_material($dir)        a throw-away CA (openssl), a server certificate for localhost and
#                             127.0.0.1, a client certificate, and a second, unrelated CA
#   sentinel_trio()           a master, two replicas and three redis-sentinel (quorum 2, a
#                             master down after 1 s): returns { master_port, replica_ports,
#                             sentinels => "127.0.0.1:p,...", ... }
#   cluster(3)                three masters joined by `redis-cli --cluster create`: returns
#                             { ports => [...], seeds => "127.0.0.1:p,..." }
#   move_slot($from, $to, $slot)   migrates one slot, keys included, as `redis-cli --cluster
#                             reshard` does (SETSLOT IMPORTING / MIGRATING, MIGRATE, SETSLOT
#                             NODE on every master)
#
# Everything runs under one temporary directory; every process started here is killed at the
# end. Nothing listens beyond 127.0.0.1.

use strict;
use warnings;
use File::Temp ();
use POSIX ();
use Time::HiRes qw(time sleep);
use SmartLimit::Test::Server ();

my @PIDS;
my $OWNER = $$;   # the test's own process: forked helpers of the harness must not stop us
my $DIR = File::Temp::tempdir('sl-farm.XXXXXX', TMPDIR => 1, CLEANUP => 1);

END {
    if ($$ == $OWNER) {
        my $status = $?;
        kill 'KILL', @PIDS if @PIDS;
        waitpid($_, 0) for @PIDS;
        $? = $status;
    }
}

sub dir { $DIR }

# Kills one process started here (a master, for a failover).
sub kill_pid {
    my ($pid) = @_;
    kill 'KILL', $pid;
    waitpid($pid, 0);
    @PIDS = grep { $_ != $pid } @PIDS;
}

sub run {
    my ($cmd) = @_;
    my $out = `$cmd 2>&1`;
    die "failed ($?): $cmd\n$out" if $?;
    return $out;
}

sub cli {
    my ($port, @args) = @_;
    my $q = join ' ', map { "'$_'" } @args;
    my $out = `redis-cli -p $port $q 2>&1`;
    chomp $out;
    return $out;
}

sub spawn {
    my (@cmd) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        POSIX::setsid();
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', "$DIR/farm.log";
        open STDERR, '>&', \*STDOUT;
        exec(@cmd) or POSIX::_exit(127);
    }
    push @PIDS, $pid;
    return $pid;
}

sub wait_ping {
    my ($port) = @_;
    my $t = time;
    while (time - $t < 15) {
        return 1 if cli($port, 'PING') =~ /PONG/;
        sleep 0.1;
    }
    die "redis on port $port did not answer\n" . `tail -20 $DIR/farm.log`;
}

sub redis_server {
    my ($port, @args) = @_;
    my $d = "$DIR/redis-$port";
    mkdir $d;
    my $pid = spawn('redis-server', '--port', $port, '--bind', '127.0.0.1', '--save', '',
                    '--appendonly', 'no', '--dir', $d, @args);
    wait_ping($port);
    return $pid;
}

# ---------------------------------------------------------------- TLS

sub tls_material {
    my $d = "$DIR/tls";
    mkdir $d;
    my $ossl = "openssl";
    my $subj = sub { "-subj '/CN=$_[0]'" };
    for my $ca (qw(ca other-ca)) {
        run("$ossl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout $d/$ca.key -out $d/$ca.pem "
            . $subj->("smart_limit test $ca"));
    }
    open my $ext, '>', "$d/server.ext" or die $!;
    print $ext "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
    close $ext;
    for my $who (qw(server client)) {
        run("$ossl req -newkey rsa:2048 -nodes -keyout $d/$who.key -out $d/$who.csr "
            . $subj->($who eq 'server' ? 'localhost' : 'smart_limit client'));
        run("$ossl x509 -req -in $d/$who.csr -CA $d/ca.pem -CAkey $d/ca.key -CAcreateserial "
            . "-days 2 -out $d/$who.pem" . ($who eq 'server' ? " -extfile $d/server.ext" : ''));
    }
    chmod 0644, glob("$d/*");
    return $d;
}

# ---------------------------------------------------------------- Sentinel

sub sentinel_trio {
    my $free = \&SmartLimit::Test::Server::free_port;
    my %f = (master_port => $free->());
    $f{replica_ports} = [ $free->(), $free->() ];
    $f{sentinel_ports} = [ $free->(), $free->(), $free->() ];
    # No delay before the replicas' first sync (Redis waits 5 s by default for more replicas).
    $f{pids}{ $f{master_port} } = redis_server($f{master_port}, '--repl-diskless-sync-delay', 0);
    for my $p (@{ $f{replica_ports} }) {
        $f{pids}{$p} = redis_server($p, '--replicaof', '127.0.0.1', $f{master_port});
    }
    my $synced = time;
    while (time - $synced < 20) {
        my $up = grep { cli($_, 'INFO', 'replication') =~ /master_link_status:up/ }
                 @{ $f{replica_ports} };
        last if $up == @{ $f{replica_ports} };
        sleep 0.1;
    }
    for my $p (@{ $f{sentinel_ports} }) {
        my $conf = "$DIR/sentinel-$p.conf";
        open my $fh, '>', $conf or die $!;
        print $fh "port $p\nbind 127.0.0.1\ndir $DIR\n",
            "sentinel monitor mymaster 127.0.0.1 $f{master_port} 2\n",
            "sentinel down-after-milliseconds mymaster 1000\n",
            "sentinel failover-timeout mymaster 10000\n",
            "sentinel parallel-syncs mymaster 1\n";
        close $fh;
        $f{pids}{$p} = spawn('redis-sentinel', $conf);
        wait_ping($p);
    }
    # Wait until every Sentinel knows the master and its replicas.
    my $t = time;
    while (time - $t < 20) {
        my $ok = grep { cli($_, 'SENTINEL', 'replicas', 'mymaster') =~ /slave|replica/ }
                 @{ $f{sentinel_ports} };
        last if $ok == @{ $f{sentinel_ports} };
        sleep 0.2;
    }
    $f{sentinels} = join ',', map { "127.0.0.1:$_" } @{ $f{sentinel_ports} };
    return \%f;
}

# ---------------------------------------------------------------- Cluster

sub cluster {
    my ($n) = @_;
    my @ports = map { SmartLimit::Test::Server::free_port() } 1 .. $n;
    for my $p (@ports) {
        redis_server($p, '--cluster-enabled', 'yes', '--cluster-config-file', "nodes-$p.conf",
                     '--cluster-node-timeout', '2000');
    }
    run('redis-cli --cluster create ' . join(' ', map { "127.0.0.1:$_" } @ports)
        . ' --cluster-replicas 0 --cluster-yes');
    my $t = time;
    while (time - $t < 20) {
        my $ok = grep { cli($_, 'CLUSTER', 'INFO') =~ /cluster_state:ok/ } @ports;
        last if $ok == @ports;
        sleep 0.2;
    }
    return { ports => \@ports, seeds => join(',', map { "127.0.0.1:$_" } @ports) };
}

sub node_id { (split /\n/, cli($_[0], 'CLUSTER', 'MYID'))[0] }

# The port of the master that serves $slot.
sub slot_owner {
    my ($ports, $slot) = @_;
    for my $p (@$ports) {
        my $out = cli($p, 'CLUSTER', 'NODES');
        for my $line (split /\n/, $out) {
            my @f = split ' ', $line;
            next unless $f[2] =~ /myself/;
            for my $range (@f[8 .. $#f]) {
                my ($lo, $hi) = split /-/, $range;
                $hi //= $lo;
                return $p if $lo =~ /^\d+$/ && $slot >= $lo && $slot <= $hi;
            }
        }
    }
    return undef;
}

sub move_slot {
    my ($from, $to, $slot, $all) = @_;
    my ($fid, $tid) = (node_id($from), node_id($to));
    cli($to, 'CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $fid);
    cli($from, 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $tid);
    while (1) {
        my @keys = grep { length } split /\n/, cli($from, 'CLUSTER', 'GETKEYSINSLOT', $slot, 100);
        last unless @keys;
        for my $k (@keys) {
            my $r = cli($from, 'MIGRATE', '127.0.0.1', $to, $k, 0, 5000);
            die "MIGRATE $k: $r\n" unless $r =~ /OK|NOKEY/;
            sleep 0.05;   # one key at a time, so clients see the slot half-moved
        }
    }
    cli($_, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $tid) for @$all;
    return 1;
}

1;
