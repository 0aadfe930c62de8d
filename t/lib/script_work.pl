#!/usr/bin/env perl
# The work of a Redis script's calls, watched from MONITOR while a test runs (t/lib/RedisWork.pm):
# what each call's commands touched, not how long the call took.
#
#   perl t/lib/script_work.pl --redis PORT --call-key KEY --ready FILE --stop FILE
#        [--keys K1,K2,...] [--entries-cap N] [--remove-key K --removed-cap N]
#        [--group I,J [--group-cap N]] [--timeout 120]
#
# Start it with `bg-sh`, wait for FILE of --ready (it exists once MONITOR is on), run the steps
# to watch, then create the --stop file and `wait-bg`. A call is an EVAL/EVALSHA whose first key
# is --call-key. For every call:
#
#   - the entries of the sorted sets --keys its commands touched (members added, removed or
#     looked up, ranks read; RedisWork::entries), at most --entries-cap; a command on those
#     keys whose cost depends on how many they hold (an unbounded range, ZREMRANGEBYSCORE, DEL,
#     a command not known) is counted as unbounded;
#   - the members it removed from --remove-key, at most --removed-cap;
#   - with --group I,J: calls are grouped by their ARGV[I] and ARGV[J] (a node and its window),
#     at most --group-cap calls a group.
#
# Prints one line:
#
#   script calls N; monitor saw M; most entries a call E; most removed a call R; removed T in
#   C calls; groups G of K keys; most calls a group P; unbounded U; over bounds B
#
# (script calls: INFO commandstats between the markers, read in one transaction with them, so
# N == M says MONITOR showed every call; "K keys": the distinct ARGV[I] among the groups) and
# every broken bound on stderr. Exits 1 when the --stop file never comes within --timeout.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin";
use Getopt::Long;
use RedisWork;
use Time::HiRes qw(sleep time);

my %o = (keys => '', 'entries-cap' => 0, 'remove-key' => '', 'removed-cap' => 0, group => '',
    'group-cap' => 0, timeout => 120);
GetOptions(\%o, 'redis=i', 'call-key=s', 'ready=s', 'stop=s', 'keys=s', 'entries-cap=i',
    'remove-key=s', 'removed-cap=i', 'group=s', 'group-cap=i', 'timeout=f')
    or die "bad options\n";
die "need --redis, --call-key, --ready and --stop\n"
    unless $o{redis} && $o{'call-key'} && $o{ready} && $o{stop};
my %keys = map { $_ => 1 } grep { length } split /,/, $o{keys};
my @group = grep { length } split /,/, $o{group};

my $rw = RedisWork->new(port => $o{redis}, call_key => $o{'call-key'});
$rw->start_monitor;
my ($calls0) = $rw->mark('start');
open my $fh, '>', $o{ready} or die "$o{ready}: $!\n";
close $fh;

my $deadline = time + $o{timeout};
until (-e $o{stop}) {
    die "no $o{stop} within $o{timeout} s\n" if time > $deadline;
    $rw->drain(0.05);
}
my ($calls1) = $rw->mark('end');
$rw->drain_to_end;

my (@broken, %per_group, %group_keys);
my ($most_entries, $most_removed, $removed, $removing, $unbounded) = (0) x 5;
my $k = 0;
for my $c (@{ $rw->calls }) {
    my $arg = sub { RedisWork::argv($c->{args}, $_[0]) };    # ARGV[i]
    my ($entries, $gone, @wide) = (0, 0);
    for my $l (@{ $c->{lua} }) {
        my $e = RedisWork::entries(\%keys, $l);
        if (defined $e) { $entries += $e } else { push @wide, uc $l->[0] }
        if (length $o{'remove-key'}) {
            my $r = RedisWork::removed_from($o{'remove-key'}, $l);
            if (defined $r) { $gone += $r } else { push @wide, uc $l->[0] }
        }
    }
    if (@wide) {
        $unbounded++;
        push @broken, "call $k: command(s) whose work grows with the sets: @wide";
    }
    $most_entries = $entries if $entries > $most_entries;
    push @broken, "call $k: $entries entries touched > $o{'entries-cap'}"
        if $o{'entries-cap'} && $entries > $o{'entries-cap'};
    $most_removed = $gone if $gone > $most_removed;
    $removed += $gone;
    $removing++ if $gone;
    push @broken, "call $k: $gone removed from $o{'remove-key'} > $o{'removed-cap'}"
        if $o{'removed-cap'} && $gone > $o{'removed-cap'};
    if (@group) {
        my $g = join ' ', map { $arg->($_) // '?' } @group;
        $per_group{$g}++;
        $group_keys{ $arg->($group[0]) // '?' } = 1;
    }
    $k++;
}
my $most_group = 0;
for my $g (sort keys %per_group) {
    $most_group = $per_group{$g} if $per_group{$g} > $most_group;
    push @broken, "group $g: $per_group{$g} calls > $o{'group-cap'}"
        if $o{'group-cap'} && $per_group{$g} > $o{'group-cap'};
}
my $seen = @{ $rw->calls };
push @broken, "MONITOR saw $seen calls and " . $rw->other_calls . " of other scripts, commandstats "
    . ($calls1 - $calls0)
    if $seen + $rw->other_calls != $calls1 - $calls0;
push @broken, $rw->stray . " script commands in MONITOR before any call" if $rw->stray;
print STDERR "broken: $_\n" for @broken[0 .. ($#broken < 19 ? $#broken : 19)];
printf "script calls %d; monitor saw %d; most entries a call %d; most removed a call %d; "
    . "removed %d in %d calls; groups %d of %d keys; most calls a group %d; unbounded %d; "
    . "over bounds %d\n",
    $calls1 - $calls0, $seen, $most_entries, $most_removed, $removed, $removing,
    scalar(keys %per_group), scalar(keys %group_keys), $most_group, $unbounded, scalar(@broken);
