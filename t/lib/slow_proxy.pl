#!/usr/bin/env perl
# A TCP proxy in front of a real redis-server that can hold commands back: a Redis that
# answers, but late (what a slow network or an overloaded server looks like to the module:
# the command runs late, and its reply comes late).
#
#   perl t/lib/slow_proxy.pl --port PORT --to REDIS_PORT --switch FILE [--delay SECONDS]
#                            [--for SECONDS]
#
# Listens on 127.0.0.1:PORT and forwards every connection to 127.0.0.1:REDIS_PORT. Replies go
# through at once; commands are forwarded --delay seconds (default 2) after they arrive while
# FILE exists, at once otherwise, always in order. Prints "ready" once listening. Stops after
# --for seconds (default 60), on SIGTERM, or when its parent dies (checked every second).

use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Getopt::Long;
use Time::HiRes qw(time);

my ($port, $to, $switch, $delay, $for) = (0, 0, '', 2, 60);
GetOptions('port=i' => \$port, 'to=i' => \$to, 'switch=s' => \$switch, 'delay=f' => \$delay,
           'for=f' => \$for)
    or die "usage: $0 --port PORT --to REDIS_PORT --switch FILE [--delay S]\n";
die "--port, --to and --switch are required\n" unless $port && $to && length $switch;

my $listen = IO::Socket::INET->new(
    LocalAddr => '127.0.0.1', LocalPort => $port, Proto => 'tcp',
    Listen => 128, ReuseAddr => 1, Blocking => 0,
) or die "cannot listen on 127.0.0.1:$port: $!\n";
$| = 1;
print "ready\n";
$SIG{TERM} = sub { exit 0 };
$SIG{PIPE} = 'IGNORE';

my $parent = getppid();
my $sel = IO::Select->new($listen);
my %peer;    # fileno => the other side's socket
my %client;  # fileno of an upstream socket => 1
my @held;    # [release time, upstream socket, bytes], in arrival order

sub drop {
    my ($s) = @_;
    my $o = delete $peer{ fileno $s };
    for my $x (grep { defined } $s, $o) {
        $sel->remove($x);
        delete $peer{ fileno $x };
        delete $client{ fileno $x };
        close $x;
    }
    @held = grep { defined fileno $_->[1] } @held;
}

my $last_check = time;
my $stop_at = time + $for;
while (time < $stop_at) {
    if (time - $last_check >= 1) {
        exit 0 if getppid() != $parent;
        $last_check = time;
    }
    # Release held commands that are due (in order: a later one waits for an earlier one).
    while (@held && $held[0][0] <= time) {
        my ($t, $c, $bytes) = @{ shift @held };
        next unless defined fileno $c;
        syswrite $c, $bytes;
    }
    for my $s ($sel->can_read(0.01)) {
        if ($s == $listen) {
            my $c = $listen->accept or next;
            my $u = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $to, Proto => 'tcp');
            unless ($u) { close $c; next }
            $peer{ fileno $c } = $u;
            $peer{ fileno $u } = $c;
            $client{ fileno $u } = 1;
            $sel->add($c, $u);
            next;
        }
        my $n = sysread $s, my $buf, 65536;
        unless ($n) { drop($s); next }
        my $o = $peer{ fileno $s } or next;
        if ($client{ fileno $s }) {
            syswrite $o, $buf;
        } else {
            # A command for Redis: held while the switch file exists (and behind held ones).
            my $at = -e $switch ? time + $delay : time;
            $at = $held[-1][0] if @held && $held[-1][0] > $at;
            push @held, [ $at, $o, $buf ];
        }
    }
}
