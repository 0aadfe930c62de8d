#!/usr/bin/env perl
# A fault-injecting fake Redis for the store=redis failure tests.
#
#   perl t/lib/fake_resp.pl --port PORT --mode MODE [--delay SECONDS] [--log FILE]
#
# Listens on 127.0.0.1:PORT, reads RESP commands (arrays of bulk strings, pipelined or not)
# and answers each one according to MODE:
#
#   slow       "-ERR slow" after --delay seconds (default 2): a Redis that hangs
#   silent     never answers
#   garbage    bytes that are not RESP ("HTTP/1.0 200 OK")
#   int        ":1" (valid RESP, the wrong type for the room script)
#   array      "*10" of bulk strings (valid RESP, right length, wrong element type)
#   error      "-WRONGTYPE Operation against a key holding the wrong kind of value"
#   truncated  the first half of a valid reply, then the connection is closed
#   close      closes the connection as soon as a command arrives
#
# With --log, appends one line per accepted connection to FILE ("conn <unix time>"), so a
# test can count how often a client reconnects.
#
# Prints "ready" on stdout once listening. Stops on SIGTERM, or when its parent dies
# (checked every second), so a crashed test leaves nothing behind.

use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Getopt::Long;
use Time::HiRes qw(time);

my ($port, $mode, $delay, $log) = (0, 'slow', 2, undef);
GetOptions('port=i' => \$port, 'mode=s' => \$mode, 'delay=f' => \$delay, 'log=s' => \$log)
    or die "usage: $0 --port PORT --mode MODE [--delay S] [--log FILE]\n";
my %modes = map { $_ => 1 } qw(slow silent garbage int array error truncated close);
die "unknown mode $mode\n" unless $modes{$mode};

my $listen = IO::Socket::INET->new(
    LocalAddr => '127.0.0.1', LocalPort => $port, Proto => 'tcp',
    Listen => 128, ReuseAddr => 1, Blocking => 0,
) or die "cannot listen on 127.0.0.1:$port: $!\n";
$| = 1;
print "ready\n";

my $parent = getppid();
my $sel = IO::Select->new($listen);
my %buf;       # fileno => input bytes
my %conn;      # fileno => socket
my @due;       # [time, socket, bytes]
$SIG{TERM} = sub { exit 0 };
$SIG{PIPE} = 'IGNORE';

# Number of complete commands at the start of $$b; removes them.
sub take_commands {
    my ($b) = @_;
    my $n = 0;
    while (1) {
        my $pos = 0;
        last unless $$b =~ /\G\*(\d+)\r\n/gc;
        my $args = $1;
        $pos = pos($$b);
        my $ok = 1;
        for (1 .. $args) {
            pos($$b) = $pos;
            unless ($$b =~ /\G\$(\d+)\r\n/gc) { $ok = 0; last }
            my $len = $1;
            $pos = pos($$b) + $len + 2;
            if ($pos > length $$b) { $ok = 0; last }
        }
        last unless $ok;
        substr($$b, 0, $pos) = '';
        $n++;
    }
    return $n;
}

sub reply_for {
    return "-ERR slow\r\n" if $mode eq 'slow';
    return "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>" if $mode eq 'garbage';
    return ":1\r\n" if $mode eq 'int';
    return "*10\r\n" . ("\$1\r\n1\r\n" x 10) if $mode eq 'array';
    return "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        if $mode eq 'error';
    return "*10\r\n:2\r\n:17\r\n" if $mode eq 'truncated';
    return '';
}

sub drop {
    my ($s) = @_;
    my $fd = fileno $s;
    $sel->remove($s);
    if (defined $fd) {
        delete $buf{$fd};
        delete $conn{$fd};
    }
    @due = grep { $_->[1] != $s } @due;
    close $s;
}

while (1) {
    exit 0 if getppid() != $parent;
    my $wait = 1;
    if (@due) {
        my $next = (sort { $a <=> $b } map { $_->[0] } @due)[0] - time;
        $wait = $next < 0 ? 0 : ($next < 1 ? $next : 1);
    }
    for my $s ($sel->can_read($wait)) {
        if ($s == $listen) {
            my $c = $listen->accept or next;
            if (defined $log && open(my $lf, '>>', $log)) {
                printf $lf "conn %.3f\n", time;
                close $lf;
            }
            $c->blocking(0);
            $sel->add($c);
            $conn{ fileno $c } = $c;
            $buf{ fileno $c } = '';
            next;
        }
        my $got = sysread($s, my $chunk, 65536);
        if (!$got) { drop($s); next }
        $buf{ fileno $s } .= $chunk;
        my $n = take_commands(\$buf{ fileno $s });
        next unless $n;
        if ($mode eq 'close') { drop($s); next }
        next if $mode eq 'silent';
        my $at = $mode eq 'slow' ? time + $delay : time;
        push @due, [$at, $s, reply_for() x $n];
    }
    my $now = time;
    my @ready = grep { $_->[0] <= $now } @due;
    @due = grep { $_->[0] > $now } @due;
    for my $d (@ready) {
        my $s = $d->[1];
        next unless defined fileno($s) && $conn{ fileno $s };
        syswrite($s, $d->[2]);
        drop($s) if $mode eq 'truncated' || $mode eq 'garbage';
    }
}
