#!/usr/bin/env perl
# Kills a Redis master under a Sentinel trio and measures, while a waiting client polls a room
# (JSON), how long the Sentinels took to name a new master and how long until the room decided
# again (a position, not the on_error answer).
#
#   perl t/lib/failover_probe.pl --nginx PORT --path /room/ --sentinel PORT --master-pid PID
#        [--max 30]
#
# Prints "failover N ms" (kill -> the Sentinel names another master), "resumed N ms" (kill ->
# the room answers with a position again) and "lag N ms" (resumed - failover). Exits 1 when
# either does not happen within --max seconds. It polls 20 times a second: give the room
# `poll=off`, or polls beyond its poll budget get the last answer replayed (a position from
# before the kill) and "resumed" is measured from a replay, not from the room deciding again.

use strict;
use warnings;
use Getopt::Long;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);

my ($port, $path, $sentinel, $pid, $max) = (0, '/', 0, 0, 30);
GetOptions('nginx=i' => \$port, 'path=s' => \$path, 'sentinel=i' => \$sentinel,
           'master-pid=i' => \$pid, 'max=f' => \$max) or die "bad arguments\n";

my $http = HTTP::Tiny->new(timeout => 5, max_redirect => 0);
my $url = "http://127.0.0.1:$port$path";
my %h = (Accept => 'application/json');

# A client with a place: the cookie check, then its place.
my $r = $http->get($url, { headers => \%h });
my ($cookie) = ($r->{headers}{'set-cookie'} // '') =~ /^([^;]+)/;
die "no ticket from $url ($r->{status})\n" unless $cookie;
$h{Cookie} = $cookie;
# Like a browser: the ticket a response sets replaces the one sent (it carries the place).
sub keep_cookie {
    my ($res) = @_;
    my $sc = $res->{headers}{'set-cookie'} // return;
    for my $c (ref $sc ? @$sc : ($sc)) {
        my ($pair) = $c =~ /^([^;]+)/;
        $h{Cookie} = $pair if defined $pair && $c !~ /Max-Age=0/i;
    }
}
sub position {
    my $r = $http->get($url, { headers => \%h });
    keep_cookie($r);
    return ($r->{content} // '') =~ /"position":(\d+)/ ? $1 : undef;
}
my $p0 = position();
die "the client has no place before the failover\n" unless defined $p0;
sleep 1;   # the replicas have the place too

sub master { my $m = `redis-cli -p $sentinel SENTINEL get-master-addr-by-name mymaster 2>&1`; $m =~ s/\s+/:/g; $m }
my $before = master();
my $t0 = time;
kill 'KILL', $pid or die "cannot kill $pid\n";
my ($failover, $resumed, $lost);
while (time - $t0 < $max) {
    $failover //= (time - $t0) if master() ne $before;
    my $p = position();
    if (!defined $p) { $lost = 1 }
    elsif ($lost && defined $failover) { $resumed = time - $t0 }
    last if defined $resumed;
    sleep 0.05;
}
printf "failover %d ms\n", 1000 * ($failover // -1);
printf "resumed %d ms\n", 1000 * ($resumed // -1);
exit 1 unless defined $failover && defined $resumed;
printf "lag %d ms\n", 1000 * ($resumed - $failover);
printf "new master %s\n", master();
