#!/usr/bin/env perl
# Newcomers take places in a room and say what they were told: how many were let in, and the
# positions of those who wait (are they distinct, and 1..n or behind a line of --behind?).
#
#   perl t/lib/line_probe.pl --ports P1[,P2...] --clients N [--gap S] [--rounds K]
#        [--syncs Q1[,Q2...]] [--again S] [--rotate]
#
# Each client takes its ticket (the cookie check's answer) and comes back with it (its arrival),
# on the ports in turn (round robin); with --gap 0 they all come at once (one process each),
# else one after another, S seconds apart. Then, --rounds times, each waiting client polls
# again: once the nodes of --syncs (every node of the fleet that runs) have met the fleet twice
# over since (t/lib/fleet_syncs.pl: every picture then holds what any node saw before), counted
# rather than timed; or, without --syncs, after --again seconds. With --rotate, each round a
# client polls the node after the one it polled before (every node tells every client its
# place over the rounds). Prints, per round:
#   round R: admitted A waiting W positions p1,p2,... distinct yes|no first F last L
# (with --off instead of the positions: "off max M within P", M the most a client's position
# was off its true place, its rank by arrival among those waiting, and P the percentile of
# the line's length that 99 % of the clients were within; with --gap, then "model off max M
# within P", the same for the positions the fleet's counts give these clients by their arrival
# times, and "told off model max M within P", how far the nodes told them from those), and at
# the end "errors E" (an answer that is neither 200 nor a waiting 503 with a position).

use strict;
use warnings;
use Getopt::Long;
use HTTP::Tiny;
use Time::HiRes qw(sleep time);

my ($ports, $clients, $gap, $again, $rounds, $syncs, $rotate, $off) = ('', 1, 0, 1, 1, '', 0, 0);
GetOptions('ports=s' => \$ports, 'clients=i' => \$clients, 'gap=f' => \$gap,
           'again=f' => \$again, 'rounds=i' => \$rounds, 'syncs=s' => \$syncs,
           'rotate' => \$rotate, 'off' => \$off)
    or die "bad arguments\n";
my @ports = split /,/, $ports;
die "--ports needed\n" unless @ports;

my $http = HTTP::Tiny->new(timeout => 10, max_redirect => 0);
my $errors = 0;

# One request of a client: its cookie updated from the answer; returns (status, position).
sub ask {
    my ($c) = @_;
    my %h = (Accept => 'application/json');
    $h{Cookie} = $c->{cookie} if $c->{cookie};
    my $r = $http->get("http://127.0.0.1:$c->{port}/", { headers => \%h });
    my $sc = $r->{headers}{'set-cookie'};
    for my $v (ref $sc ? @$sc : defined $sc ? ($sc) : ()) {
        my ($pair) = $v =~ /^([^;]+)/;
        $c->{cookie} = $pair if defined $pair && $v !~ /Max-Age=0/i;
    }
    my ($pos) = ($r->{content} // '') =~ /"position":(\d+)/;
    return ($r->{status}, $pos);
}

# A newcomer: the ticket, then the return with it (which takes the place).
sub arrive {
    my ($c) = @_;
    my ($status) = ask($c);
    return ($status, undef) unless $status == 307;
    # Its arrival (ms) by this machine's wall clock, the clock the nodes stamp places by: the
    # middle of the request that takes the place.
    my $t0 = time;
    my @told = ask($c);
    $c->{at} = 500 * ($t0 + time);
    return @told;
}

my @c = map { { id => $_, port => $ports[ ($_ - 1) % @ports ] } } 1 .. $clients;
if ($gap > 0) {
    for my $c (@c) {
        @$c{qw(status pos)} = arrive($c);
        sleep $gap;
    }
} else {
    # All at once: one process each, released together; each writes back what it was told.
    my %kid;
    pipe(my $go_r, my $go_w) or die "pipe: $!";
    for my $c (@c) {
        pipe(my $r, my $w) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            close $go_w;
            sysread($go_r, my $x, 1);
            my ($status, $pos) = arrive($c);
            print {$w} join("\t", $status, $pos // '', $c->{cookie} // ''), "\n";
            close $w;
            POSIX::_exit(0);
        }
        close $w;
        $kid{$pid} = [ $c, $r ];
    }
    close $go_r;
    close $go_w;    # EOF releases them all
    for my $pid (keys %kid) {
        my ($c, $r) = @{ $kid{$pid} };
        my $line = <$r> // '';
        chomp $line;
        my ($status, $pos, $cookie) = split /\t/, $line, 3;
        @$c{qw(status pos cookie)} = ($status // 599, length($pos // '') ? $pos : undef, $cookie);
        waitpid($pid, 0);
    }
}

# The positions the fleet's arrival-bucket counts give clients who wait, in arrival order, by
# their arrival times (core/src/fleet/tally/counts.rs, `CountsView::position`): everyone in
# the older one-second buckets, and a share of their own bucket as if its clients came evenly
# between its first (or the head's) and its last arrival, + 1.
sub counted {
    my @w = @_;
    return () unless @w;
    my $front = $w[0]{at};
    my (%n, %first, %last);
    for my $c (@w) {
        my $b = int($c->{at} / 1000);
        $n{$b}++;
        $first{$b} = $c->{at} if !defined $first{$b} || $c->{at} < $first{$b};
        $last{$b} = $c->{at} if !defined $last{$b} || $c->{at} > $last{$b};
    }
    my ($before, %before) = (0);
    for my $b (sort { $a <=> $b } keys %n) {
        $before{$b} = $before;
        $before += $n{$b};
    }
    return map {
        my $b = int($_->{at} / 1000);
        my $from = $first{$b} > $front ? $first{$b} : $front;
        my $span = $last{$b} + 1 - $from;
        $before{$b} + int($n{$b} * ($_->{at} - $from) / ($span > 1 ? $span : 1)) + 1;
    } @w;
}

sub report {
    my ($round) = @_;
    my @waiting = grep { $_->{status} == 503 && defined $_->{pos} } @c;
    my $admitted = grep { $_->{status} == 200 } @c;
    $errors += @c - $admitted - @waiting;
    my @p = sort { $a <=> $b } map { $_->{pos} } @waiting;
    my %n;
    $n{$_}++ for @p;
    my $distinct = (grep { $_ > 1 } values %n) ? 'no' : 'yes';
    if ($off) {
        # Clients arrived one after another by id: the true place is the rank among those
        # waiting.
        my @by_id = sort { $a->{id} <=> $b->{id} } @waiting;
        my @d = sort { $a <=> $b } map { abs($by_id[$_]{pos} - ($_ + 1)) } 0 .. $#by_id;
        my $p99 = @d ? $d[ int(0.99 * $#d) ] : 0;
        printf "round %d: admitted %d waiting %d off max %d within %.1f%% distinct %s first %s last %s",
            $round, $admitted, scalar(@waiting), $d[-1] // 0, 100 * $p99 / (@waiting || 1),
            $distinct, $p[0] // '-', $p[-1] // '-';
        if ($gap > 0) {
            # What the counts tell from these very arrivals (model), and how far each client
            # was told from it (told): the model's own error is how unevenly they came.
            my @model = counted(@by_id);
            my @m = sort { $a <=> $b } map { abs($model[$_] - ($_ + 1)) } 0 .. $#by_id;
            my @t = sort { $a <=> $b } map { abs($by_id[$_]{pos} - $model[$_]) } 0 .. $#by_id;
            printf " model off max %d within %.1f%% told off model max %d within %.1f%%",
                $m[-1] // 0, 100 * ($m[ int(0.99 * $#m) ] // 0) / (@waiting || 1),
                $t[-1] // 0, 100 * ($t[ int(0.99 * $#t) ] // 0) / (@waiting || 1);
        }
        print "\n";
        return;
    }
    printf "round %d: admitted %d waiting %d positions %s distinct %s first %s last %s\n",
        $round, $admitted, scalar(@waiting), join(',', @p), $distinct, $p[0] // '-', $p[-1] // '-';
}

report(0);
for my $round (1 .. $rounds) {
    if (length $syncs) {
        system($^X, 't/lib/fleet_syncs.pl', '--ports', $syncs, '--quiet', '--timeout', 30) == 0
            or die "the nodes $syncs did not meet the fleet\n";
    } else {
        sleep $again;
    }
    for my $c (grep { $_->{status} == 503 } @c) {
        $c->{port} = $ports[ ($c->{id} - 1 + $round) % @ports ] if $rotate;
        @$c{qw(status pos)} = ask($c);
    }
    report($round);
}
print "errors $errors\n";
use POSIX ();
exit 0;
