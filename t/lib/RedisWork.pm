package RedisWork;

# What a Redis script call did, read from Redis's MONITOR stream rather than timed: MONITOR
# shows every call with all its arguments, followed by every command the script ran (`[0 lua]`),
# so a probe can count a call's work (its arguments, the entries its commands touched) the same
# on a quiet machine and on a loaded one. Used by t/lib/sync_bounded.pl (the synced room's
# script) and t/lib/script_work.pl (any script: the central room's, the rate zone's).
#
#   my $rw = RedisWork->new(port => $port, call_key => 'smart_limit:{shop}:fleet');
#   $rw->start_monitor;                       # before what is to be watched
#   my ($calls0) = $rw->mark('start');        # INFO commandstats with a marker, atomically
#   ... $rw->drain(0) now and then ...
#   my ($calls1) = $rw->mark('end');
#   $rw->drain_to_end;                        # everything up to the end marker
#   for my $c (@{ $rw->calls }) { $c->{args}, $c->{lua} (arrays of commands), $c->{ts} }
#
# A call is an EVAL/EVALSHA whose first key is `call_key`. The commands counted between the
# markers are exactly those MONITOR showed between them (the marker and the count are read in
# one MULTI), so `calls1 - calls0 == @calls` tells that MONITOR showed every call. Core perl.

use strict;
use warnings;
use IO::Select ();
use IO::Socket::INET ();
use Time::HiRes qw(time);

sub new {
    my ($class, %o) = @_;
    my $self = bless {
        port => $o{port}, call_key => $o{call_key}, on_other => $o{on_other},
        buf => '', calls => [], cur => undef, stray => 0, started => 0, ended => 0,
        rbuf => '',
    }, $class;
    $self->{rs} = $self->_connect;
    return $self;
}

sub _connect {
    my ($self) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$self->{port}", Timeout => 5)
        or die "redis 127.0.0.1:$self->{port}: $!\n";
    return $s;
}

# ------------------------------------------------------------------ the command connection

sub send_cmd {
    my ($self, @a) = @_;
    my $rs = $self->{rs};
    print $rs '*' . @a . "\r\n" . join('', map { '$' . length($_) . "\r\n$_\r\n" } @a);
}

sub read_reply {
    my ($self) = @_;
    my $rs = $self->{rs};
    my $line = <$rs>;
    die "redis: connection lost\n" unless defined $line;
    $line =~ s/\r\n$//;
    my ($t, $rest) = (substr($line, 0, 1), substr($line, 1));
    return $rest if $t eq '+' || $t eq ':';
    die "redis: $rest\n" if $t eq '-';
    if ($t eq '$') {
        return undef if $rest < 0;
        my $buf = '';
        read($rs, $buf, $rest + 2) == $rest + 2 or die "redis: short read\n";
        return substr($buf, 0, $rest);
    }
    return [map { $self->read_reply } 1 .. $rest] if $t eq '*';
    die "redis: bad reply $line\n";
}

sub cmd { my ($self, @a) = @_; $self->send_cmd(@a); return $self->read_reply }

# INFO commandstats' script calls (EVALSHA and EVAL).
sub script_calls_in {
    my ($info) = @_;
    my $k = 0;
    $k += $1 while ($info // '') =~ /^cmdstat_(?:evalsha|eval):calls=(\d+)/mg;
    return $k;
}

# A marker in the MONITOR stream (`ECHO redis-work-NAME`), the script calls so far and the
# replies of @more (each an array ref: a command), in one transaction: no other client's
# command runs between them. Returns (calls, replies of @more...).
sub mark {
    my ($self, $name, @more) = @_;
    $self->cmd('MULTI');
    $self->send_cmd('ECHO', "redis-work-$name"); $self->read_reply;
    $self->send_cmd('INFO', 'commandstats'); $self->read_reply;
    for my $c (@more) { $self->send_cmd(@$c); $self->read_reply }
    my $r = $self->cmd('EXEC');
    $self->{end_marker} = "redis-work-$name";
    $self->{start_marker} //= "redis-work-$name";
    return (script_calls_in($r->[1]), @$r[2 .. $#$r]);
}

# ------------------------------------------------------------------ MONITOR

sub start_monitor {
    my ($self) = @_;
    my $ms = $self->_connect;
    syswrite($ms, "*1\r\n\$7\r\nMONITOR\r\n") or die "redis: MONITOR: $!\n";
    # Only sysread on this socket: a buffered read could keep lines from drain().
    while (index($self->{buf}, "\r\n") < 0) {
        sysread($ms, $self->{buf}, 4096, length $self->{buf})
            or die "redis: MONITOR: connection lost\n";
    }
    $self->{buf} =~ s/^\+OK\r\n// or die "redis: MONITOR: " . substr($self->{buf}, 0, 100) . "\n";
    $self->{ms} = $ms;
    $self->{sel} = IO::Select->new($ms);
}

sub _unquote {
    my ($s) = @_;
    $s =~ s/\\x([0-9a-fA-F]{2})|\\(.)/defined $1 ? chr(hex $1)
        : ($2 eq 'n' ? "\n" : $2 eq 'r' ? "\r" : $2 eq 't' ? "\t" : $2)/ge;
    return $s;
}

# One MONITOR line: `+1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" "..." ...`.
sub _line {
    my ($self, $l) = @_;
    my ($ts, $who, $rest) = $l =~ /^\+?(\d+\.\d+) \[\d+ ([^\]]*)\] (.*)$/ or return;
    my @a = map { _unquote($_) } $rest =~ /"((?:[^"\\]|\\.)*)"/g;
    return unless @a;
    my $echo = uc $a[0] eq 'ECHO' ? ($a[1] // '') : '';
    if (!$self->{started}) {
        $self->{started} = 1 if defined $self->{start_marker} && $echo eq $self->{start_marker};
        return;
    }
    if ($echo && defined $self->{end_marker} && $echo eq $self->{end_marker}
        && $self->{end_marker} ne $self->{start_marker}) {
        $self->{ended} = 1;
        return;
    }
    return if $self->{ended};
    if ($who eq 'lua') {
        if ($self->{cur}) { push @{ $self->{cur}{lua} }, \@a } else { $self->{stray}++ }
        return;
    }
    if ($a[0] =~ /^eval(?:sha)?$/i) {
        # A call of the script under study, or of another (a synced room's counts' script,
        # `tally:` keys): counted apart, its commands kept with it, not with the last call.
        $self->{cur} = { args => \@a, lua => [], ts => $ts };
        if (($a[3] // '') eq $self->{call_key}) {
            push @{ $self->{calls} }, $self->{cur};
        } else {
            $self->{other_calls}++;
        }
        return;
    }
    $self->{cur} = undef;
    $self->{on_other}->(\@a, $who) if $self->{on_other};
}

# Reads what MONITOR has sent so far, waiting up to $wait seconds for the first bytes.
sub drain {
    my ($self, $wait) = @_;
    return unless $self->{ms};
    while ($self->{sel}->can_read($wait)) {
        my $n = sysread($self->{ms}, $self->{buf}, 1 << 20, length $self->{buf});
        die "redis: MONITOR connection lost\n" unless $n;
        while ((my $i = index($self->{buf}, "\r\n")) >= 0) {
            $self->_line(substr($self->{buf}, 0, $i));
            substr($self->{buf}, 0, $i + 2) = '';
        }
        $wait = 0;
    }
}

# Reads up to the last marker (mark() sets it), 30 s at most.
sub drain_to_end {
    my ($self) = @_;
    my $give_up = time + 30;
    $self->drain(1) until $self->{ended} || time > $give_up;
    die "redis: the end marker never came through MONITOR\n" unless $self->{ended};
}

sub calls { $_[0]{calls} }
# Calls of other scripts (commandstats counts them too).
sub other_calls { $_[0]{other_calls} // 0 }
# `lua` lines seen before any call: MONITOR's order is not the one assumed (a call, then its
# commands).
sub stray { $_[0]{stray} }

# ARGV[i] of an EVAL/EVALSHA command's words (a call's {args}, or a SLOWLOG entry's: the
# command, the script, the key count, the keys, then ARGV): after however many keys it names.
sub argv {
    my ($a, $i) = @_;
    my $numkeys = ($a->[2] // '') =~ /^\d+$/ ? $a->[2] : 0;
    return $a->[2 + $numkeys + $i];
}

# ------------------------------------------------------------------ the work of a command

# How many entries of the sorted sets in %$keys one script command touches: undef when that
# depends on how many they hold (an unbounded range, ZREMRANGEBYSCORE, DEL, a command not
# known here).
sub entries {
    my ($keys, $a) = @_;
    my ($cmd, $key, @r) = @$a;
    $cmd = uc $cmd;
    return 0 unless defined $key && $keys->{$key};
    return 0 if $cmd =~ /^(?:ZCARD|PEXPIRE|EXPIRE|PEXPIREAT|EXPIREAT|TTL|PTTL|EXISTS|TYPE)$/;
    return 1 if $cmd =~ /^(?:ZCOUNT|ZLEXCOUNT|ZSCORE|ZRANK|ZREVRANK)$/;    # O(log n)
    return scalar @r if $cmd =~ /^(?:ZREM|ZMSCORE)$/;
    if ($cmd eq 'ZADD') {
        shift @r while @r && $r[0] =~ /^(?:NX|XX|GT|LT|CH|INCR)$/i;
        return @r / 2;
    }
    my ($off, $count) = join(' ', @r) =~ /\bLIMIT (-?\d+) (-?\d+)\b/i;
    my $limited = defined $count && $count >= 0 ? $off + $count : undef;
    return $limited if $cmd =~ /^Z(?:REV)?RANGEBY(?:SCORE|LEX)$/;
    if ($cmd =~ /^Z(?:REV)?RANGE$|^ZREMRANGEBYRANK$/) {
        return $limited if $cmd ne 'ZREMRANGEBYRANK' && grep { /^BY(?:SCORE|LEX)$/i } @r;
        my ($from, $to) = @r;
        return undef unless defined $to && $from =~ /^-?\d+$/ && $to =~ /^-?\d+$/;
        return undef if ($from < 0) != ($to < 0);    # (0, -1): all of it
        return $to >= $from ? $to - $from + 1 : 0;
    }
    return undef;
}

# The members one command removes from `$key` (ZREM members, a ZREMRANGEBYRANK's span):
# undef when unbounded (see entries).
sub removed_from {
    my ($key, $a) = @_;
    my ($cmd, $k, @r) = @$a;
    return 0 unless defined $k && $k eq $key;
    $cmd = uc $cmd;
    return scalar @r if $cmd eq 'ZREM';
    return entries({ $key => 1 }, $a) if $cmd eq 'ZREMRANGEBYRANK';
    return undef if $cmd =~ /^ZREMRANGEBY|^DEL$|^UNLINK$|^ZPOP/;
    return 0;
}

1;
