#!/usr/bin/env perl
# A waiting client that polls a room (JSON) every --every seconds for --seconds, and says how
# its answers went: with a position (the room decided), without one (the store's on_error
# policy decided), or an HTTP error.
#
#   perl t/lib/poll_probe.pl --nginx PORT [--path /] [--seconds 5] [--every 0.02]
#
# Prints "polls N decided D policy P failed F" and the longest run of policy answers in ms.

use strict;
use warnings;
use Getopt::Long;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);

my ($port, $path, $seconds, $every) = (0, '/', 5, 0.02);
GetOptions('nginx=i' => \$port, 'path=s' => \$path, 'seconds=f' => \$seconds,
           'every=f' => \$every) or die "bad arguments\n";

my $http = HTTP::Tiny->new(timeout => 5, max_redirect => 0);
my $url = "http://127.0.0.1:$port$path";
my %h = (Accept => 'application/json');
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

my ($polls, $decided, $policy, $failed, $run_start, $longest) = (0, 0, 0, 0, undef, 0);
my $t0 = time;
while (time - $t0 < $seconds) {
    my $res = $http->get($url, { headers => \%h });
    keep_cookie($res);
    $polls++;
    my $body = $res->{content} // '';
    if ($res->{status} != 503 && $res->{status} != 200) {
        $failed++;
    } elsif ($body =~ /"position":\d+/) {
        $decided++;
        if (defined $run_start) {
            my $ms = 1000 * (time - $run_start);
            $longest = $ms if $ms > $longest;
            undef $run_start;
        }
    } else {
        $policy++;
        $run_start //= time;
    }
    sleep $every;
}
printf "polls %d decided %d policy %d failed %d\n", $polls, $decided, $policy, $failed;
printf "longest policy run %d ms\n", $longest;
exit($failed ? 1 : 0);
