#!/usr/bin/env perl
# Waits for a synced room's nodes to meet the fleet, counting syncs instead of sleeping: the
# tests' "sleep 0.5" after a sighting (two intervals of 200 ms, give or take a loaded machine)
# becomes "until every node has synced enough times since".
#
#   perl t/lib/fleet_syncs.pl --ports P1,P2,... [--room shop] [--path /m] [--more N]
#        [--rounds R] [--timeout S] [--rate] [--quiet]
#
# Reads `smart_limit_fleet_syncs_total{room="ROOM"}` (syncs answered) from every node's
# metrics location (--path), then polls every 20 ms until each node's count has grown by
# --more (default 2), --rounds times over (default 2), and prints "syncs A,B -> C,D". Exits 1
# after --timeout seconds (default 20) without it.
#
# Why two and two: a node's sync that was in flight when the wait began may have been built
# before it, so the second one answered after the wait began is the first surely built after
# (it carries every sighting the node made before the wait: the node's report is in Redis).
# Another node may run its own such sync before that, so one more round of two gives every
# node a picture taken after every node's report: every node then shows what any node saw
# before the wait. --rounds 1 is enough when only the node's own report must be in Redis.
#
# --rate: a rate zone instead (`smart_limit_rate_syncs_total{zone="ROOM"}`). --quiet: print
# only a failure (for probes whose own output a test matches).

use strict;
use warnings;
use Getopt::Long;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);

my ($ports, $room, $path, $more, $rounds, $timeout, $rate, $quiet) =
    ('', 'shop', '/m', 2, 2, 20, 0, 0);
GetOptions('ports=s' => \$ports, 'room=s' => \$room, 'path=s' => \$path, 'more=i' => \$more,
           'rounds=i' => \$rounds, 'timeout=f' => \$timeout, 'rate' => \$rate, 'quiet' => \$quiet)
    or die "usage: $0 --ports P1,P2 [--room NAME] [--path /m] [--more N] [--rounds R] [--timeout S] [--rate]\n";
my @ports = grep { length } split /,/, $ports;
die "no --ports\n" unless @ports;
my $metric = $rate ? qr/^smart_limit_rate_syncs_total\{zone="\Q$room\E"\} (\d+)$/m
                   : qr/^smart_limit_fleet_syncs_total\{room="\Q$room\E"\} (\d+)$/m;

my $http = HTTP::Tiny->new(timeout => 5);
sub syncs {
    my ($port) = @_;
    my $res = $http->get("http://127.0.0.1:$port$path");
    return undef unless $res->{success} && $res->{content} =~ $metric;
    return $1;
}

my $deadline = time + $timeout;
my @first = map { syncs($_) } @ports;
my @from = @first;
for my $round (1 .. $rounds) {
    my @now;
    while (1) {
        @now = map { syncs($_) } @ports;
        my $done = !grep { !defined $now[$_] || !defined $from[$_] || $now[$_] < $from[$_] + $more }
            0 .. $#ports;
        last if $done;
        if (time > $deadline) {
            printf "timed out in round %d: syncs %s -> %s (wanted %d more each)\n", $round,
                join(',', map { $_ // 'none' } @from), join(',', map { $_ // 'none' } @now), $more;
            exit 1;
        }
        # (A node without the metric yet has not synced once: count from its first.)
        $from[$_] //= $now[$_] for 0 .. $#ports;
        sleep 0.02;
    }
    @from = @now;
}
printf "syncs %s -> %s\n", join(',', map { $_ // 'none' } @first), join(',', @from) unless $quiet;
