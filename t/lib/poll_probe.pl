#!/usr/bin/env perl
# A waiting client that polls a room (JSON) every --every seconds for --seconds, and says how
# its answers went: with a position (the room decided), without one (the store's on_error
# policy decided), or an HTTP error.
#
#   perl t/lib/poll_probe.pl --nginx PORT [--path /] [--seconds 5] [--every 0.02]
#        [--ready FILE] [--stop FILE [--after N]]
#
# Prints "polls N decided D policy P failed F" and the longest run of policy answers in ms (a
# run still going when the probe ends counts up to then).
#
# --ready FILE: created once the client has its place and has polled once (a test starts what
# it wants to watch then, not after a fixed sleep). --stop FILE: poll until FILE exists, then
# until --after (default 10) more polls were decided by the room, so the room's recovery is
# seen; --seconds is then only the limit (the probe fails when it is reached).

use strict;
use warnings;
use Getopt::Long;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);

my ($port, $path, $seconds, $every, $ready, $stop, $after) = (0, '/', 5, 0.02, '', '', 10);
GetOptions('nginx=i' => \$port, 'path=s' => \$path, 'seconds=f' => \$seconds,
           'every=f' => \$every, 'ready=s' => \$ready, 'stop=s' => \$stop, 'after=i' => \$after)
    or die "bad arguments\n";

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
my ($stopping, $decided_after, $timed_out) = (0, 0, 0);
my $t0 = time;
while (1) {
    if (time - $t0 >= $seconds) {
        $timed_out = 1 if $stop;
        last;
    }
    if ($stop) {
        $stopping ||= -e $stop;
        last if $stopping && $decided_after >= $after;
    }
    my $res = $http->get($url, { headers => \%h });
    keep_cookie($res);
    $polls++;
    my $body = $res->{content} // '';
    if ($res->{status} != 503 && $res->{status} != 200) {
        $failed++;
    } elsif ($body =~ /"position":\d+/) {
        $decided++;
        $decided_after++ if $stopping;
        if (defined $run_start) {
            my $ms = 1000 * (time - $run_start);
            $longest = $ms if $ms > $longest;
            undef $run_start;
        }
    } else {
        $policy++;
        $run_start //= time;
    }
    if ($ready && $polls == 1) {
        open my $fh, '>', $ready or die "$ready: $!\n";
        close $fh;
    }
    sleep $every;
}
if (defined $run_start) {
    my $ms = 1000 * (time - $run_start);
    $longest = $ms if $ms > $longest;
}
printf "polls %d decided %d policy %d failed %d\n", $polls, $decided, $policy, $failed;
printf "longest policy run %d ms\n", $longest;
print "no $after decided polls after $stop within $seconds s\n" if $timed_out;
exit($failed || $timed_out ? 1 : 0);
