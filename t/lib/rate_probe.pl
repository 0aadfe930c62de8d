#!/usr/bin/env perl
# Measures a fleet rate zone from its nodes' metrics (smart_limit_metrics at /m on each node).
#
#   perl t/lib/rate_probe.pl --ports P1,P2,... --zone NAME --seconds S
#        [--cap R --tolerance 0.03] [--path /m] [--watch-p]
#
# Scrapes every node, waits S seconds, scrapes again, and prints one line per node and one for
# the fleet: offered and passed requests a second over the window (from the cumulative
# counters smart_limit_rate_offered_total / _passed_total). With --cap, exits 1 when the
# fleet's passed rate is not within cap * (1 +- tolerance), and prints "within" otherwise.
# With --watch-p, also scrapes every 100 ms during the window and fails when a probability
# leaves [0, 1], a rate gauge is negative or not a number, or a cumulative counter (the node's
# or the fleet's) goes backwards.

use strict;
use warnings;
use Getopt::Long;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);

my ($ports, $zone, $seconds, $cap, $tol, $path, $watch) = ('', '', 5, undef, 0.03, '/m', 0);
GetOptions(
    'ports=s' => \$ports, 'zone=s' => \$zone, 'seconds=f' => \$seconds, 'cap=f' => \$cap,
    'tolerance=f' => \$tol, 'path=s' => \$path, 'watch-p' => \$watch,
) or die "usage: $0 --ports P1,P2 --zone NAME --seconds S [--cap R --tolerance T]\n";
my @ports = grep { length } split /,/, $ports;
die "no ports\n" unless @ports && length $zone;

my $http = HTTP::Tiny->new(timeout => 5);

# The zone's samples on one node: { name => value }.
sub scrape {
    my ($port) = @_;
    my $res = $http->get("http://127.0.0.1:$port$path");
    die "node $port: metrics answered $res->{status}\n" unless $res->{success};
    my %v;
    for my $line (split /\n/, $res->{content}) {
        next unless $line =~ /^smart_limit_rate_(\w+)\{zone="\Q$zone\E"\} (\S+)$/;
        $v{$1} = $2;
    }
    die "node $port: no zone $zone in the metrics\n" unless exists $v{offered_total};
    return \%v;
}

my %last;   # port => { counter => last value }
sub check_gauges {
    my ($port, $v) = @_;
    for my $c (grep { /_total$/ } keys %$v) {
        my $was = $last{$port}{$c};
        die "node $port: $c went backwards ($was -> $v->{$c})\n" if defined $was && $v->{$c} < $was;
        $last{$port}{$c} = $v->{$c};
    }
    for my $g (qw(probability fleet_qps node_qps fleet_passed_qps sync_age_seconds)) {
        next unless exists $v->{$g};
        die "node $port: $g = $v->{$g} is not a number\n" unless $v->{$g} =~ /^\d+(?:\.\d+)?$/;
    }
    die "node $port: probability $v->{probability} outside [0, 1]\n"
        if $v->{probability} > 1;
}

my (%t0, %t1, %a, %b);
for my $p (@ports) { $t0{$p} = time; $a{$p} = scrape($p); check_gauges($p, $a{$p}) }
my $end = time + $seconds;
while ($watch && time < $end - 0.1) {
    sleep 0.1;
    for my $p (@ports) { check_gauges($p, scrape($p)) }
}
sleep($end - time) if $end > time;
for my $p (@ports) { $t1{$p} = time; $b{$p} = scrape($p); check_gauges($p, $b{$p}) }

my ($fo, $fp) = (0, 0);
for my $p (@ports) {
    my $dt = $t1{$p} - $t0{$p};
    my $o = ($b{$p}{offered_total} - $a{$p}{offered_total}) / $dt;
    my $q = ($b{$p}{passed_total} - $a{$p}{passed_total}) / $dt;
    die "node $p: a cumulative counter went backwards\n" if $o < 0 || $q < 0;
    $fo += $o;
    $fp += $q;
    printf "node %s: offered %.0f r/s, passed %.1f r/s, p %s, fleet_qps %s, nodes %s\n",
        $p, $o, $q, $b{$p}{probability}, $b{$p}{fleet_qps}, $b{$p}{nodes};
}
printf "fleet: offered %.0f r/s, passed %.1f r/s", $fo, $fp;
if (defined $cap) {
    my $err = ($fp - $cap) / $cap;
    printf ", cap %.0f, error %+.2f%%\n", $cap, 100 * $err;
    if (abs($err) > $tol) {
        printf "outside +-%.1f%%\n", 100 * $tol;
        exit 1;
    }
    print "within\n";
} else {
    print "\n";
}
