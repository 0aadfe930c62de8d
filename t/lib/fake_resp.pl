#!/usr/bin/env perl
# A fault-injecting fake Redis for the store=redis failure tests.
#
#   perl t/lib/fake_resp.pl --port PORT --mode MODE [--delay SECONDS] [--log FILE]
#                           [--info VERSION|noperm|noversion|none] [--commands FILE]
#
# Listens on 127.0.0.1:PORT, reads RESP commands (arrays of bulk strings, pipelined or not)
# and answers each one according to MODE:
#
#   slow       "-ERR slow" after --delay seconds (default 2): a Redis that hangs
#   silent     never answers
#   garbage    bytes that are not RESP ("HTTP/1.0 200 OK")
#   int        ":1" (valid RESP, the wrong type for the room script)
#   array      "*22" of bulk strings (valid RESP, the visit reply's length, wrong element type)
#   error      "-WRONGTYPE Operation against a key holding the wrong kind of value"
#   truncated  the first half of a valid reply, then the connection is closed
#   close      closes the connection as soon as a command arrives
#
# The connection's setup is answered at once, whatever MODE, the way a healthy server does,
# so that MODE applies to the scripts (the module asks `INFO server` and waits for it before
# it sends any script): `INFO` gets a bulk string with `redis_version:VERSION` (--info, default
# 7.0.15, what Debian 12's Redis says), `AUTH` gets `+OK`. Other --info values:
#
#   noperm     INFO gets "-NOPERM ..." (an ACL user without +info)
#   noversion  INFO gets a bulk string without a redis_version line
#   none       INFO and AUTH are commands like any other: MODE answers them
#
# With --log, appends one line per accepted connection to FILE ("conn <unix time>"), so a
# test can count how often a client reconnects. With --commands, appends the name of every
# command received to FILE, one a line (upper case), so a test can tell what was sent.
#
# Prints "ready" on stdout once listening. Stops on SIGTERM, or when its parent dies
# (checked every second), so a crashed test leaves nothing behind.

use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Getopt::Long;
use Time::HiRes qw(time);

my ($port, $mode, $delay, $log, $info, $commands) = (0, 'slow', 2, undef, '7.0.15', undef);
GetOptions('port=i' => \$port, 'mode=s' => \$mode, 'delay=f' => \$delay, 'log=s' => \$log,
           'info=s' => \$info, 'commands=s' => \$commands)
    or die "usage: $0 --port PORT --mode MODE [--delay S] [--log FILE] [--info V] [--commands FILE]\n";
my %modes = map { $_ => 1 } qw(slow silent garbage int array error truncated close);
die "unknown mode $mode\n" unless $modes{$mode};
die "--info must be a version (7.0.15), noperm, noversion or none\n"
    unless $info =~ /^(?:\d+\.\d+\.\d+|noperm|noversion|none)$/;

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
my @due;       # [time, socket, bytes, 'setup' for the setup's replies]
$SIG{TERM} = sub { exit 0 };
$SIG{PIPE} = 'IGNORE';

# The complete commands at the start of $$b (their names, upper case); removes them.
sub take_commands {
    my ($b) = @_;
    my @names;
    while (1) {
        my $pos = 0;
        last unless $$b =~ /\G\*(\d+)\r\n/gc;
        my $args = $1;
        $pos = pos($$b);
        my $ok = 1;
        my $name;
        for (1 .. $args) {
            pos($$b) = $pos;
            unless ($$b =~ /\G\$(\d+)\r\n/gc) { $ok = 0; last }
            my $len = $1;
            my $start = pos($$b);
            $pos = $start + $len + 2;
            if ($pos > length $$b) { $ok = 0; last }
            $name //= uc substr($$b, $start, $len);
        }
        last unless $ok;
        substr($$b, 0, $pos) = '';
        push @names, $name // '';
    }
    return @names;
}

# The answer to a setup command (INFO, AUTH), or undef when MODE answers it.
sub setup_reply {
    my ($name) = @_;
    return undef if $info eq 'none';
    return "+OK\r\n" if $name eq 'AUTH';
    return undef unless $name eq 'INFO';
    return "-NOPERM this user has no permissions to run the 'info' command\r\n"
        if $info eq 'noperm';
    my $text = "# Server\r\n"
        . ($info eq 'noversion' ? '' : "redis_version:$info\r\n")
        . "redis_git_sha1:00000000\r\nredis_mode:standalone\r\nos:Linux x86_64\r\n";
    return '$' . length($text) . "\r\n$text\r\n";
}

sub reply_for {
    return "-ERR slow\r\n" if $mode eq 'slow';
    return "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>" if $mode eq 'garbage';
    return ":1\r\n" if $mode eq 'int';
    return "*22\r\n" . ("\$1\r\n1\r\n" x 22) if $mode eq 'array';
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
        my @names = take_commands(\$buf{ fileno $s });
        next unless @names;
        if (defined $commands && open(my $cf, '>>', $commands)) {
            print $cf map { "$_\n" } @names;
            close $cf;
        }
        # Setup commands at the head of the batch are answered at once; the rest by MODE.
        my $setup = '';
        while (@names && defined(my $r = setup_reply($names[0]))) {
            $setup .= $r;
            shift @names;
        }
        push @due, [time, $s, $setup, 'setup'] if length $setup;
        next unless @names;
        if ($mode eq 'close') { drop($s); next }
        next if $mode eq 'silent';
        my $at = $mode eq 'slow' ? time + $delay : time;
        push @due, [$at, $s, reply_for() x @names];
    }
    my $now = time;
    my @ready = grep { $_->[0] <= $now } @due;
    @due = grep { $_->[0] > $now } @due;
    for my $d (@ready) {
        my $s = $d->[1];
        next unless defined fileno($s) && $conn{ fileno $s };
        syswrite($s, $d->[2]);
        drop($s) if !$d->[3] && ($mode eq 'truncated' || $mode eq 'garbage');
    }
}
