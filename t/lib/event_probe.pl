#!/usr/bin/env perl
# An event's pre-queue and the start's lottery, from the outside: --clients clients, each from
# its own address in 127.0.0.0/8, take pre-queue places one after another (cookie check, then
# the pre-queue answer) and keep polling until --start (unix seconds); after it each asks its
# position (JSON), twice (the second round is the settled order); then one more client comes.
#
#   perl t/lib/event_probe.pl --nginx PORT[,PORT...] --start EPOCH [--clients 500] [--ready FILE]
#        [--metrics /m]
#
# --metrics PATH: the nodes' metrics location. On a fleet, where the probe lets the nodes meet
# Redis (before the settled round, before the late client), it then also counts their syncs
# (t/lib/fleet_syncs.pl: every node twice, twice over) rather than trust a second's sleep to
# be enough.
# --ready FILE: the probe creates FILE once every client holds a pre-queue place (a test
# reloads nginx then, while the clients keep polling until the start).
#
# Prints "prequeued N admitted K distinct D min A max B rho R late L" (positions counting the
# K let in at the start first; rho: Spearman's, arrival against position) and exits 1 when a
# client got no pre-queue place or the pre-queue filled after the start.
#
# With several nodes (a fleet), client i takes its place on node i mod n; after the start the
# settled round asks every client's position on every node, and the line adds "agree A of N
# spread S": A clients were shown the same position by every node, S the largest difference
# between two nodes' positions of one client (the positions printed are the first node's).

use strict;
use warnings;
use Getopt::Long;
use FindBin;
use lib "$FindBin::Bin";
use SmartLimit::Test::HTTP;
use Time::HiRes qw(time sleep);

my ($ports, $start, $n, $ready, $metrics) = ('', 0, 500, '', '');
GetOptions('nginx=s' => \$ports, 'start=i' => \$start, 'clients=i' => \$n, 'ready=s' => \$ready,
           'metrics=s' => \$metrics)
    or die "bad arguments\n";
my @nodes = split /,/, $ports;
die "no --nginx port\n" unless @nodes;

# One request from `$from` (a loopback address) to client `$i`'s node (or node `$node`), with
# the harness's client; returns (status, the ticket cookie it set as NAME=VALUE, body).
sub get {
    my ($from, $cookie, $i, $node) = @_;
    my $port = $nodes[$node // $i % @nodes];
    my $res = SmartLimit::Test::HTTP::request(
        port => $port, path => '/', local_addr => $from, timeout => 5,
        headers => [['Accept', 'application/json'], ($cookie ? (['Cookie', $cookie]) : ())]);
    die "request from $from: $res->{error}\n" if $res->{error};
    my ($set) = SmartLimit::Test::HTTP::set_cookies($res);
    return ($res->{status}, $set ? "$set->{name}=$set->{value}" : undef, $res->{body});
}

sub addr { my $i = shift; sprintf '127.0.%d.%d', 1 + int($i / 250), 1 + $i % 250 }

# Between two rounds of polls: a second at least (each client's poll budget refills: a poll
# beyond it is answered with the client's last answer, an older position), and on a fleet
# until the nodes have met Redis (their syncs counted with --metrics: every node twice, twice
# over; without it the second is all).
sub meet {
    my $t = time;
    if ($metrics && @nodes > 1) {
        system("$^X $FindBin::Bin/fleet_syncs.pl --ports $ports --path $metrics --quiet 1>&2") == 0
            or die "the nodes did not sync\n";
    }
    my $left = 1 - (time - $t);
    sleep $left if $left > 0;
}

my (@cookie, $prequeued);
for my $i (0 .. $n - 1) {
    my ($st, $c) = get(addr($i), undef, $i);
    die "client $i: no ticket ($st)\n" unless $c;
    my ($st2, $c2, $body) = get(addr($i), $c, $i);
    $cookie[$i] = $c2 // $c;
    $prequeued++ if $st2 == 503 && $body =~ /"status":"prequeue"/ && $body =~ /"starts_at":$start\b/;
}
die "only $prequeued of $n got a pre-queue place\n" unless $prequeued == $n;
die "the pre-queue filled too late: the start has passed\n" if time >= $start;
if ($ready) {
    open my $fh, '>', $ready or die "$ready: $!\n";
    close $fh;
}
# Until the start, everyone keeps polling, as the page does (a place unseen for `presence`
# is gone).
while (time < $start - 2) {
    for my $i (0 .. $n - 1) {
        my ($st, $c) = get(addr($i), $cookie[$i], $i);
        $cookie[$i] = $c if $c;
        last if time >= $start - 1;
    }
}
sleep($start - time + 0.3) if time < $start + 0.3;

# The room lets in as many as it has room for (the drawn head first): they pass (200) and
# stand before everyone still waiting.
my (@pos, @in);
my ($agree, $spread) = (0, 0);
for my $round (1, 2) {
    # Before the settled round, a fleet's nodes meet Redis again (the admissions of the
    # first round leave the line).
    meet() if $round == 2;
    for my $i (0 .. $n - 1) {
        my @seen;
        for my $node ($round == 1 ? ($i % @nodes) : (0 .. $#nodes)) {
            my ($st, $c, $body) = get(addr($i), $cookie[$i], $i, $node);
            $cookie[$i] = $c if $c;
            if ($st == 200) {
                # (A fleet may let its first in on the second round: a node whose share is
                # used up tells the client to come back in a moment.)
                push @in, $i unless grep { $_ == $i } @in;
                last;
            }
            my ($p) = $body =~ /"position":(\d+)/;
            push @seen, $p // 0;
        }
        next unless @seen && !grep { $_ == $i } @in;
        $pos[$i] = $seen[0];
        next unless $round == 2;
        my @s = sort { $a <=> $b } @seen;
        $agree++ if $s[0] == $s[-1];
        # (Which clients the nodes disagree on, for the test's output when it fails.)
        print STDERR "client $i: positions @seen\n" if $s[0] != $s[-1];
        $spread = $s[-1] - $s[0] if $s[-1] - $s[0] > $spread;
    }
    # On a fleet the head may have been told to come back in a moment (its node's share used
    # up, a place drawn for it): it comes back, as its page would, until it is let in (5 s at
    # most), so that the line stands still through the settled round. (Let in during that
    # round instead, it moved the line under it: the same client was told two positions.)
    if ($round == 1 && !@in && @nodes > 1) {
        my @head = grep { defined $pos[$_] && $pos[$_] == 1 } 0 .. $n - 1;
        my $until = time + 5;
        HEAD: while (@head && time < $until) {
            for my $i (@head) {
                for my $node (0 .. $#nodes) {
                    my ($st, $c) = get(addr($i), $cookie[$i], $i, $node);
                    $cookie[$i] = $c if $c;
                    if ($st == 200) {
                        push @in, $i;
                        last HEAD;
                    }
                }
            }
            sleep 0.2;
        }
    }
}
$pos[$in[$_]] = $_ + 1 for 0 .. $#in;
$pos[$_] += @in for grep { my $i = $_; !grep { $_ == $i } @in } 0 .. $n - 1;
my %seen = map { $_ => 1 } @pos;
my @sorted = sort { $a <=> $b } @pos;
# Spearman's rho between arrival (0..n-1) and position.
my $d2 = 0;
$d2 += (($_ + 1) - $pos[$_])**2 for 0 .. $n - 1;
my $rho = 1 - 6 * $d2 / ($n * ($n * $n - 1));
# (A fleet's positions come from its picture, an interval old: a client let in at the end of
# the second round may still be in the line the nodes see. Let them meet first.)
meet() if @nodes > 1;
my ($lst, $lc) = get('127.0.3.1', undef, 0);
my (undef, undef, $lbody) = get('127.0.3.1', $lc, 0);
my ($late) = $lbody =~ /"position":(\d+)/;
$late += @in if defined $late;
printf "prequeued %d admitted %d distinct %d min %d max %d rho %.4f late %s%s\n",
    $prequeued, scalar(@in), scalar(keys %seen), $sorted[0], $sorted[-1], $rho, $late // 'none',
    @nodes > 1 ? sprintf(' agree %d of %d spread %d', $agree, $n - @in, $spread) : '';
