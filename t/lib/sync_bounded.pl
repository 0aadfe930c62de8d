#!/usr/bin/env perl
# Bounded script work in a synced room (`sync=`), from the outside: a line of --waiting
# waiters is put straight into the room's sorted sets in Redis (as if the fleet had seen them),
# then --clients new clients take places on the nodes (a first contact and a return each: a
# sighting to report, and the line grows by them) and poll twice more.
#
# What each script call did is read from Redis's MONITOR stream, not timed: MONITOR shows every
# call with all its arguments, followed by every command the script ran (`[0 lua]`), so for each
# fleet sync the probe knows the sightings it carried (ARGV[16..18], space-separated tokens
# "sid:age", "sid:age", "sid:arrival:age": one token a sighting, see core/src/fleet/script.rs),
# the departed waiters it dropped, and how many entries of the line's four sorted sets
# (`present`, `arrival`, `here`: the present ones by arrival, `away`: the absent ones kept,
# [S27]) its commands touched. It checks, for every call:
#
#   - sightings <= --cap and waiter sightings <= --waiters-cap (REPORT_CAP, REPORT_WAITERS_CAP);
#   - a node's syncs: at most --syncs-cap (MAX_SYNCS_PER_INTERVAL) a tick. A tick's syncs
#     are not marked as such, but each sync carries its fence's window (the interval its
#     `now` rounds to), and a tick's first sync has a window of its own (the next tick is set
#     for the boundary after it, src/sync/ticker.rs): so a node's syncs <= --syncs-cap x
#     (windows seen + 1, for a tick begun before the probe). Per window at most 2 x
#     --syncs-cap: a tick whose syncs go on past half an interval (a late tick on a loaded
#     machine) stamps its later syncs with the next window, where the next tick may send its
#     own. Counting per window alone (<= --syncs-cap) would be a bound on time again;
#   - the departed-waiter drop asks for at most max(--expire-step - waiters, --expire-min)
#     waiters (script.lua's EXPIRE_STEP, EXPIRE_MIN) each time it reads `present` (those gone
#     away) or `away` (those whose keep ended), and removes no more than it asked for;
#   - the line entries its commands touched <= --entries-cap, and no command on the line's sets
#     whose work depends on the line's length (an unbounded range, a ZREMRANGEBY*, a command
#     this probe does not know the cost of);
#
# and, to know that MONITOR showed everything: the fleet calls it saw equal INFO
# commandstats' count of the same span (read with the markers in one MULTI), and the line
# replayed from the start (the seeded members, plus every ZADD, less every ZREM on `arrival`)
# has the size Redis gives at the end. It waits (polling, --settle-max seconds at most) until
# every client is in the line and --min-drop-calls calls dropped departed waiters, then prints:
#
#   script calls N; monitor saw N; syncs S; joined J; line L0 -> L; most sightings a call M;
#   most waiters a call W; capped calls C; most syncs a node a window K; calls dropping D;
#   dropped X; most dropped a call Y; most line entries a call E; stale syncs T; over bounds B
#
# (stale syncs: calls the script found not newer than the node's last and returned before
# any work) and each broken bound on stderr. No assertion here counts time. MONITOR is read
# with t/lib/RedisWork.pm.
#
# --seen-ago S: the seeded line was last seen S seconds before the start (19 with presence=20s:
# it leaves while the clients poll, and the calls carry the line's expiry too); a negative S
# puts the sighting in the future (nobody of the seeded line leaves, however long the run).
#
# --times (scripts/bench --sync-calls): also SLOWLOG at 0 us (every call recorded with its
# duration), joined to the MONITOR record of each call by its fence (node, generation, window,
# sequence); prints markdown table rows of call durations by sightings a call. --no-monitor:
# times only (what MONITOR costs the calls), no bounds checked. --pin: redis-server gets the
# last CPU to itself, this client the others (the nginx nodes pin their workers with
# worker_cpu_affinity): SLOWLOG counts wall time. --rt (with --pin): Redis also runs at a
# real-time priority, so that other processes on its CPU do not preempt it mid-call.
#
# Usage: sync_bounded.pl --ports P1,P2 --redis PORT --zone NAME [--waiting 100000]
#        [--clients 1500] [--seen-ago S] [--min-drop-calls N] [--settle-max 60]
#        [--cap 400 --waiters-cap 200 --syncs-cap 16 --expire-step 200 --expire-min 50
#         --entries-cap 1923] [--times [--no-monitor] [--label TEXT]] [--pin [--rt]]
#        [--pace-ms 1] [--dump FILE]
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin";
use Getopt::Long;
use HTTP::Tiny;
use RedisWork;
use Time::HiRes qw(sleep time);

my %o = (waiting => 100000, clients => 1500, 'seen-ago' => 0, 'min-drop-calls' => 0,
    'settle-max' => 60, cap => 400, 'waiters-cap' => 200, 'syncs-cap' => 16,
    'expire-step' => 200, 'expire-min' => 50, 'entries-cap' => 1923, label => '',
    'pace-ms' => 1);
GetOptions(\%o, 'ports=s', 'redis=i', 'zone=s', 'waiting=i', 'clients=i', 'seen-ago=f',
    'min-drop-calls=i', 'settle-max=f', 'cap=i', 'waiters-cap=i', 'syncs-cap=i',
    'expire-step=i', 'expire-min=i', 'entries-cap=i', 'times', 'no-monitor', 'label=s', 'pin',
    'dump=s', 'pace-ms=f', 'rt')
    or die "bad options\n";
my @ports = split /,/, $o{ports};
my $monitor = !$o{'no-monitor'};
die "--no-monitor goes with --times\n" if !$monitor && !$o{times};

# ------------------------------------------------------------------------------ Redis

my $base = "smart_limit:{$o{zone}}";
my ($K_FLEET, $K_PRESENT, $K_ARRIVAL) = ("$base:fleet", "$base:present", "$base:arrival");
my ($K_HERE, $K_AWAY) = ("$base:here", "$base:away");
my %line;       # the arrival set, replayed from MONITOR
my $rw = RedisWork->new(port => $o{redis}, call_key => $K_FLEET, on_other => sub {
    my ($a) = @_;
    return unless uc $a->[0] eq 'ZADD' && ($a->[1] // '') eq $K_ARRIVAL;
    # The seeding (this probe's own connection): the line's first members.
    for (my $i = 3; $i < @$a; $i += 2) { $line{ $a->[$i] } = 1 }
});
sub redis_cmd { return $rw->cmd(@_) }
sub drain { $rw->drain(@_) if $monitor }

if ($o{pin}) {
    my ($pid) = redis_cmd('INFO', 'server') =~ /^process_id:(\d+)/m or die "redis: no pid\n";
    my $last = `nproc` - 1;
    die "--pin needs two CPUs\n" if $last < 1;
    system("taskset -pc $last $pid >/dev/null") == 0 or die "taskset redis: $?\n";
    system("taskset -pc 0-" . ($last - 1) . " $$ >/dev/null") == 0 or die "taskset self: $?\n";
    # --rt: Redis at a real-time priority (SCHED_FIFO 10) on its CPU, so that the other
    # processes of a shared machine do not preempt it mid-call (needs root; said on stderr).
    if ($o{rt}) {
        system("chrt -f -p 10 $pid >/dev/null 2>&1") == 0
            ? print STDERR "redis-server: SCHED_FIFO 10\n"
            : print STDERR "redis-server: chrt refused (not root?): normal priority\n";
    }
}

# ------------------------------------------------------------------------------ MONITOR

# MONITOR starts before the line is seeded: the seeding's ZADDs are the first entries of the
# line replayed from it, so no change to the line before the clients goes unseen either.
$rw->start_monitor if $monitor;
my ($calls0) = $rw->mark('start');

# ------------------------------------------------------------------------------ the line

my $t = redis_cmd('TIME');
my $now = $t->[0] * 1000 + int($t->[1] / 1000);
# The line: arrived over the last 100 s, seen --seen-ago seconds ago (present for `presence`
# from then).
my %seeded;
for (my $i = 0; $i < $o{waiting}; $i += 1000) {
    my (@line, @present);
    for my $j ($i .. ($i + 999 < $o{waiting} ? $i + 999 : $o{waiting} - 1)) {
        my $sid = 7_000_000_000 + $j;
        push @line, $now - 100_000 + int($j * 100_000 / $o{waiting}), $sid;
        push @present, $now - int($o{'seen-ago'} * 1000), $sid;
        $seeded{$sid} = 1;
    }
    $rw->send_cmd('ZADD', $K_ARRIVAL, @line);
    $rw->send_cmd('ZADD', $K_PRESENT, @present);
    $rw->send_cmd('ZADD', $K_HERE, @line);
}
$rw->read_reply for 1 .. 3 * int(($o{waiting} + 999) / 1000);
my $line0 = redis_cmd('ZCARD', $K_ARRIVAL);

if ($o{times}) {
    redis_cmd('CONFIG', 'SET', 'slowlog-log-slower-than', 0);
    redis_cmd('CONFIG', 'SET', 'slowlog-max-len', 1000000);
    redis_cmd('SLOWLOG', 'RESET');
}

# ------------------------------------------------------------------------------ the clients

# New clients take places on the nodes, round-robin, and poll twice more.
my $http = HTTP::Tiny->new(timeout => 5, keep_alive => 1, max_redirect => 0);
my @jar;
for my $c (0 .. $o{clients} - 1) {
    my $port = $ports[$c % @ports];
    my $res = $http->get("http://127.0.0.1:$port/");
    # Paced (--pace-ms, default 1 ms between requests) for --times: unpaced, the two debug
    # nodes and this client saturate the 2 cores, and SLOWLOG (wall time) records preempted
    # calls. The bounds hold either way.
    sleep $o{'pace-ms'} / 1000 if $o{'pace-ms'} > 0;
    my ($cookie) = ($res->{headers}{'set-cookie'} // '') =~ /^([^;]+)/;
    die "client $c: no ticket (status $res->{status})\n" unless $cookie;
    push @jar, $cookie;
    drain(0) if $c % 100 == 0;
}
for my $round (1 .. 2) {
    for my $c (0 .. $#jar) {
        my $port = $ports[($c + $round) % @ports];
        my $res = $http->get("http://127.0.0.1:$port/",
            { headers => { Cookie => $jar[$c], Accept => 'application/json' } });
        my ($cookie) = ($res->{headers}{'set-cookie'} // '') =~ /^([^;]+)/;
        $jar[$c] = $cookie if $cookie;
        sleep $o{'pace-ms'} / 1000 if $o{'pace-ms'} > 0;
        drain(0) if $c % 100 == 0;
    }
}

# ------------------------------------------------------------------------------ the calls' work

my %lineset = map { $_ => 1 } ($K_PRESENT, $K_ARRIVAL, $K_HERE, $K_AWAY);

sub tokens { my ($s) = @_; return scalar(() = ($s // '') =~ /\S+/g) }

my ($joined, $drop_calls, $stale_syncs, %joined) = (0, 0, 0);
my $done = 0;          # calls accounted so far
my (@broken, %per_window, %per_node);
my ($syncs, $most_sight, $most_w, $capped, $dropped, $most_drop, $most_entries) = (0) x 7;
sub check {
    my ($what) = @_;
    push @broken, $what;
}
# Accounts for the calls MONITOR has shown so far (those whose commands are complete: every
# call but the last, unless the stream has ended).
sub account {
    my $calls = $rw->calls;
    my $upto = $rw->{ended} ? @$calls : @$calls - 1;
    for my $k ($done .. $upto - 1) {
        my $c = $calls->[$k];
        my $arg = sub { RedisWork::argv($c->{args}, $_[0]) };
        my $op = $arg->(1) // '';
        my $fence = join ' ', map { $arg->($_) // '?' } 2, 12, 3, 13;    # node gen window seq
        my ($entries, @unbounded) = (0);
        for my $l (@{ $c->{lua} }) {
            my $e = RedisWork::entries(\%lineset, $l);
            if (defined $e) { $entries += $e } else { push @unbounded, uc $l->[0] }
        }
        $most_entries = $entries if $entries > $most_entries;
        check("call $k ($op, node gen window seq $fence): line entries touched $entries > $o{'entries-cap'}")
            if $entries > $o{'entries-cap'};
        check("call $k ($op, $fence): command(s) whose work grows with the line: @unbounded")
            if @unbounded;
        # The line replayed: ZADD adds members, ZREM removes them.
        my ($drop_limit, $drop_asked, $in_drop, $removed) = (undef, undef, 0, 0);
        for my $l (@{ $c->{lua} }) {
            my ($cmd, $key, @r) = @$l;
            $cmd = uc $cmd;
            if ($cmd eq 'ZRANGEBYSCORE' && ($key // '') =~ /^\Q$K_PRESENT\E$|^\Q$K_AWAY\E$/) {
                # The departed waiters' drop: ZRANGEBYSCORE present (or away) -inf cut LIMIT
                # 0 N; the larger ask is the call's.
                my ($n) = join(' ', @r) =~ /\bLIMIT 0 (\d+)\b/i;
                $drop_asked = $n if defined $n && (!defined $drop_asked || $n > $drop_asked);
                $in_drop = 1;
            }
            next unless ($key // '') eq $K_ARRIVAL;
            if ($cmd eq 'ZADD') {
                shift @r while @r && $r[0] =~ /^(?:NX|XX|GT|LT|CH|INCR)$/i;
                for (my $i = 1; $i < @r; $i += 2) {
                    $line{ $r[$i] } = 1;
                    $joined++ unless $seeded{ $r[$i] } || $joined{ $r[$i] }++;
                }
            } elsif ($cmd eq 'ZREM') {
                for my $m (@r) {
                    next unless delete $line{$m};
                    $removed++ if $in_drop;
                }
            }
        }
        if ($op eq 'sync') {
            $syncs++;
            my ($act, $adm, $w) = map { tokens($arg->($_)) } 16, 17, 18;
            my $sight = $act + $adm + $w;
            $c->{sightings} = $sight;
            $c->{dropped} = $removed;
            $most_sight = $sight if $sight > $most_sight;
            $most_w = $w if $w > $most_w;
            $capped++ if $sight >= $o{cap} || $w >= $o{'waiters-cap'};
            check("call $k (sync $fence): $sight sightings > $o{cap}") if $sight > $o{cap};
            check("call $k (sync $fence): $w waiter sightings > $o{'waiters-cap'}")
                if $w > $o{'waiters-cap'};
            my $bound = $o{'expire-step'} - $w;
            $bound = $o{'expire-min'} if $bound < $o{'expire-min'};
            # A sync the script found stale (not newer than the node's last) returns before
            # the drop; any other drop is a bounded range read or, caught above, unbounded.
            if (!defined $drop_asked) {
                $stale_syncs++;
            } elsif ($drop_asked > $bound) {
                check("call $k (sync $fence, $w waiters): drop asks for $drop_asked > $bound");
            }
            check("call $k (sync $fence): removed $removed departed waiters, asked for "
                . ($drop_asked // 'none')) if $removed > ($drop_asked // 0);
            $dropped += $removed;
            $most_drop = $removed if $removed > $most_drop;
            $drop_calls++ if $removed > 0;
            my $win = ($arg->(2) // '?') . ' ' . ($arg->(3) // '?');
            $per_window{$win}++;
            $per_node{ $arg->(2) // '?' }++;
        }
        $done = $k + 1;
    }
}

# Waits until every client is in the line and enough calls dropped departed waiters (what the
# run is about has happened), at most --settle-max seconds; the calls' work is the same however
# long it takes.
my $deadline = time + $o{'settle-max'};
if ($monitor) {
    while (time < $deadline) {
        drain(0.1);
        account();
        last if $joined >= $o{clients} && $drop_calls >= $o{'min-drop-calls'};
    }
} else {
    sleep 2;
}
my ($calls1, $line1) = $rw->mark('end', ['ZCARD', $K_ARRIVAL]);
if ($monitor) {
    $rw->drain_to_end;
    account();
}
my @calls = @{ $rw->calls };

my $calls = $calls1 - $calls0;
my $most_per_window = 0;
my %windows;
for my $w (sort keys %per_window) {
    $most_per_window = $per_window{$w} if $per_window{$w} > $most_per_window;
    $windows{ (split / /, $w)[0] }++;
    check("node window $w: $per_window{$w} syncs > 2 x $o{'syncs-cap'}")
        if $per_window{$w} > 2 * $o{'syncs-cap'};
}
for my $n (sort keys %per_node) {
    check("node $n: $per_node{$n} syncs in $windows{$n} windows > $o{'syncs-cap'} x ($windows{$n} + 1)")
        if $per_node{$n} > $o{'syncs-cap'} * ($windows{$n} + 1);
}
if ($monitor) {
    check("MONITOR saw " . scalar(@calls) . " fleet script calls and " . $rw->other_calls
        . " of other scripts, commandstats $calls")
        if @calls + $rw->other_calls != $calls;
    check($rw->stray . " script commands in MONITOR before any call (order not as assumed)")
        if $rw->stray;
    # The line replayed from MONITOR (seeded, + ZADD, - ZREM) is the line Redis holds at the
    # end marker: no change to it went unseen, so the drops counted are all there were.
    check("the line replayed from MONITOR holds " . scalar(keys %line) . ", Redis $line1")
        if keys %line != $line1;
}
if ($o{dump}) {
    # One line a call, for a look at a run: MONITOR's time, op, node gen window seq,
    # sightings, departed waiters dropped, commands the script ran.
    open my $d, '>', $o{dump} or die "$o{dump}: $!\n";
    for my $c (@calls) {
        my @a = @{ $c->{args} };
        print $d join(' ', $c->{ts}, map({ RedisWork::argv(\@a, $_) // '?' } 1, 2, 12, 3, 13),
            $c->{sightings} // '-', $c->{dropped} // '-', scalar @{ $c->{lua} }), "\n";
    }
    close $d;
}
print STDERR "broken: $_\n" for @broken[0 .. ($#broken < 19 ? $#broken : 19)];
print STDERR "... and " . (@broken - 20) . " more\n" if @broken > 20;

if ($monitor) {
    printf "script calls %d; monitor saw %d; syncs %d; joined %d; line %d -> %d; "
        . "most sightings a call %d; most waiters a call %d; capped calls %d; "
        . "most syncs a node a window %d; calls dropping %d; dropped %d; "
        . "most dropped a call %d; most line entries a call %d; stale syncs %d; "
        . "other script calls %d; over bounds %d\n",
        # (Script calls: commandstats' count, less the other scripts' calls MONITOR saw: the
        # counts' calls beside the syncs.)
        $calls - $rw->other_calls, scalar(@calls), $syncs, $joined, $line0, $line1, $most_sight,
        $most_w, $capped, $most_per_window, $drop_calls, $dropped, $most_drop, $most_entries,
        $stale_syncs, $rw->other_calls, scalar(@broken);
}
times_report() if $o{times};

# ------------------------------------------------------------------------------ --times

# SLOWLOG (every call, threshold 0): each fleet call's duration, joined to its MONITOR record
# by the fence (op node gen window seq: a node's syncs never repeat one).
sub times_report {
    my $slow = redis_cmd('SLOWLOG', 'GET', -1);
    my %by_fence;
    for my $c (@calls) {
        my @a = @{ $c->{args} };
        push @{ $by_fence{ join ' ', map { RedisWork::argv(\@a, $_) // '' } 1, 2, 12, 3, 13 } }, $c;
    }
    my @rows;    # [us, sightings|undef, dropped|undef]
    for my $e (reverse @$slow) {    # oldest first
        next unless ref $e eq 'ARRAY' && ref $e->[3] eq 'ARRAY';
        my @a = @{ $e->[3] };
        next unless ($a[0] // '') =~ /^eval(?:sha)?$/i && ($a[3] // '') eq $K_FLEET;
        next unless (RedisWork::argv(\@a, 1) // '') eq 'sync';
        my $key = join ' ', map { RedisWork::argv(\@a, $_) // '' } 1, 2, 12, 3, 13;
        my $c = $monitor ? shift @{ $by_fence{$key} // [] } : undef;
        push @rows, [$e->[2], $c ? $c->{sightings} : undef, $c ? $c->{dropped} : undef];
    }
    my $row = sub {
        my ($name, @r) = @_;
        return unless @r;
        my @us = sort { $a <=> $b } map { $_->[0] } @r;
        my $pick = sub { $us[int($_[0] * $#us + 0.5)] };
        my @s = sort { $a <=> $b } map { $_->[1] // () } @r;
        my @d = sort { $a <=> $b } map { $_->[2] // () } @r;
        my $med = sub { @_ ? $_[int($#_ / 2)] : '-' };
        printf "| %s | %s | %d | %s | %s | %s | %d | %d | %d |\n", $o{label}, $name, scalar @r,
            @s ? $med->(@s) . ' (' . $s[-1] . ')' : '-',
            @d ? $med->(@d) . ' (' . $d[-1] . ')' : '-',
            "$line0 -> $line1", $pick->(0.5), $pick->(0.95), $us[-1];
    };
    $row->('every sync', @rows);
    return unless $monitor;
    $row->('0-49 sightings', grep { defined $_->[1] && $_->[1] < 50 } @rows);
    $row->('50-199 sightings', grep { defined $_->[1] && $_->[1] >= 50 && $_->[1] < 200 } @rows);
    $row->('200-400 sightings', grep { defined $_->[1] && $_->[1] >= 200 } @rows);
    $row->('dropping departed waiters', grep { ($_->[2] // 0) > 0 } @rows);
    my $unmatched = grep { !defined $_->[1] } @rows;
    print STDERR "sync calls in SLOWLOG not found in MONITOR: $unmatched\n" if $unmatched;
}
