#!/usr/bin/env perl
# challenge=pow from the outside (t/610-challenge.t): clients take their places with proofs
# of work solved here (Digest::SHA), on one node or spread over a fleet's nodes.
#
#   perl t/lib/pow_probe.pl --nginx PORT[,PORT...] [--auto] [--settle MS] [--metrics /m]
#
# --gone MS (a fleet of three): then B stops polling for MS (past presence) and its first
# ticket comes back with its proof on the node that gave the seed: prints " gone A".
#
# --settle MS: wait that long after the places are taken before reading positions (a synced
# fleet's positions come from its picture, an interval old). With --metrics PATH (the nodes'
# metrics location), count the nodes' syncs instead (t/lib/fleet_syncs.pl: every node twice,
# twice over), not a fixed time.
#
# Default: a holder takes the room's only admission (without a proof where the node knows
# nobody waits; see Zone::admits_at_once); B and C are
# challenged; C's try with B's proof is refused (a foreign seed); B places with its proof
# (header); B polls again without one and keeps its place; C places with its own proof
# (cookie); B's first ticket replayed with its proof where it was taken is challenged (the
# proof is spent); on a fleet, replayed on another node it gets B's place, not a second.
# Client i's requests go to node i mod n, so on a fleet a seed from one node is solved for
# another. Prints "challenged B C foreign F placed B kept K second C replay R queue Q" and on a
# fleet " elsewhere E queue Q".
#
# --auto (challenge_bits=auto): a client waits (the line is not empty); then 300 new clients
# ask for places at once, none solving; the bits given rise; then the probe asks once a
# second until they are back down. Prints "calm N flood M after A in S s".
#
# --auto --quiet-node (a fleet of two): the same flood, all on node 0; the waiting client
# polls node 0 a second later (a central room hears of node 0's challenges with that node's
# next visit) and node 1 a second after that (it reads the fleet's pressure from its own
# call); then a newcomer on node 1, which saw no flood itself, is challenged. Prints "calm N
# flood M quiet Q". With --look KEY --redis PORT (a synced room: its fleet hash), the probe
# waits for the work instead: until the fleet script's look in KEY counts at least 4
# doublings, then until both nodes have synced twice since (--metrics), so node 1's picture
# carries that look. (The synced look decays once a second whatever the clients do, so a
# fixed sleep read a later, lower look on a stalled machine.)

use strict;
use warnings;
use Getopt::Long;
use FindBin;
use lib "$FindBin::Bin";
use SmartLimit::Test::HTTP;
use Digest::SHA qw(sha256);
use MIME::Base64 qw(decode_base64);
use Time::HiRes qw(time sleep);

my ($ports, $auto, $settle, $metrics, $gone, $quiet_node, $look, $redis) =
    ('', 0, 0, '', 0, 0, '', 0);
GetOptions('nginx=s' => \$ports, 'auto' => \$auto, 'settle=i' => \$settle,
           'metrics=s' => \$metrics, 'gone=i' => \$gone, 'quiet-node' => \$quiet_node,
           'look=s' => \$look, 'redis=i' => \$redis)
    or die "bad arguments\n";
my @nodes = split /,/, $ports;
die "no --nginx port\n" unless @nodes;

# A fleet's nodes meet Redis before positions are read: their syncs counted (--metrics), or
# --settle ms of sleep.
sub settle {
    if ($metrics && @nodes > 1) {
        system("$^X $FindBin::Bin/fleet_syncs.pl --ports $ports --path $metrics --quiet 1>&2") == 0
            or die "the nodes did not sync\n";
    } else {
        sleep $settle / 1000;
    }
}

# A client: its ticket cookie and the node it talks to.
sub client { my ($node) = @_; return { node => $node % @nodes, cookie => undef } }

# One request; keeps the ticket the answer sets. Returns (status, body, response).
sub get {
    my ($c, %o) = @_;
    my @h = (['Accept', 'application/json']);
    my @cookies = grep { defined } ($c->{cookie}, $o{cookie});
    push @h, ['Cookie', join('; ', @cookies)] if @cookies;
    push @h, ['Smart-Limit-Proof', $o{proof}] if $o{proof};
    my $res = SmartLimit::Test::HTTP::request(port => $nodes[$c->{node}], path => '/',
        headers => \@h, timeout => 5);
    die "request: $res->{error}\n" if $res->{error};
    print STDERR "node $c->{node}: $res->{status} $res->{body}\n" if $ENV{POW_PROBE_DEBUG};
    for my $set (SmartLimit::Test::HTTP::set_cookies($res)) {
        $c->{cookie} = "$set->{name}=$set->{value}" if $set->{name} =~ /^smart_limit_\w+$/ && $set->{name} !~ /_proof$/;
    }
    return ($res->{status}, $res->{body}, $res);
}

# A new client with its ticket (the cookie check answered).
sub arrive {
    my ($node) = @_;
    my $c = client($node);
    my ($st) = get($c);
    die "no cookie check ($st)\n" unless $st == 307 && $c->{cookie};
    return $c;
}

sub field { my ($body, $name) = @_; $body =~ /"$name":"?([^",}]*)/ ? $1 : '' }

sub challenge_of {
    my ($body) = @_;
    return unless $body =~ /"status":"challenge"/;
    my ($seed) = $body =~ /"seed":"([A-Za-z0-9_-]+)"/;
    my ($bits) = $body =~ /"challenge":\{[^}]*"bits":(\d+)/;
    return ($seed, $bits);
}

sub solve {
    my ($seed, $bits) = @_;
    (my $b64 = $seed) =~ tr/-_/+\//;
    my $bytes = decode_base64($b64);
    for (my $n = 0; ; $n++) {
        my $h = unpack('B*', substr(sha256($bytes . $n), 0, 8));
        return "$seed.$n" if substr($h, 0, $bits) !~ /1/;
    }
}

# The holder takes the room's only place. A synced node asks even the first for a proof (its
# picture is an interval old), and its share of this interval's places may be none: the one
# free place went to the other node, whose share it is until the next sync (see the fleet
# script's allocation). The holder then waits with its turn held and comes back, as the page
# would, until it is let in (a few intervals at most).
sub let_in {
    my ($holder) = @_;
    my ($st, $body) = get($holder);
    if (my ($s, $bits) = challenge_of($body)) {
        ($st, $body) = get($holder, proof => solve($s, $bits));
    }
    for (1 .. 50) {
        last if $st == 200 || field($body, 'status') ne 'waiting';
        sleep 0.1;
        ($st, $body) = get($holder);
    }
    return $st;
}

if ($auto) {
    my $holder = arrive(0);
    my $st = let_in($holder);
    die "holder not admitted ($st)\n" unless $st == 200;
    my $w = arrive(1);
    my (undef, $body) = get($w);
    my ($seed, $calm) = challenge_of($body);
    die "no challenge: $body\n" unless $seed;
    my (undef, $placed) = get($w, proof => solve($seed, $calm));
    die "not placed: $placed\n" unless field($placed, 'status') eq 'waiting';
    if ($quiet_node) {
        # Node 0, which takes the flood, learns of the line (its own view needs someone
        # waiting: a central node knows the line from its last reply).
        $w->{node} = 0;
        my (undef, $b) = get($w);
        die "the waiter on node 0: $b\n" unless field($b, 'status') eq 'waiting';
    }
    # 300 newcomers at once, none solving: each is challenged, nobody is let in.
    my $flood = 0;
    for my $round (1 .. 3) {
        for my $i (1 .. 100) {
            my $c = arrive($quiet_node ? 0 : $i);
            my (undef, $b) = get($c);
            my (undef, $bits) = challenge_of($b);
            $flood = $bits if ($bits // 0) > $flood;
        }
        sleep 0.5;
    }
    if ($quiet_node) {
        die "--quiet-node needs two nodes\n" unless @nodes == 2;
        if ($look) {
            die "--look needs --redis and --metrics\n" unless $redis && $metrics;
            my ($t, $d) = (time, 0);
            while (time - $t < 20) {
                ($d) = `redis-cli -p $redis HGET '$look' pr_d` =~ /^(\d+)/;
                last if ($d // 0) >= 4;
                sleep 0.05;
            }
            die "the fleet's look never counted the flood (pr_d " . ($d // 'none') . ")\n"
                unless ($d // 0) >= 4;
            settle();
        } else {
            for my $node (0, 1) {
                sleep 1.1;
                $w->{node} = $node;
                my ($st, $b) = get($w);
                die "the waiter's poll on node $node: $st $b\n" unless field($b, 'status') eq 'waiting';
            }
        }
        my (undef, $b) = get(arrive(1));
        my (undef, $quiet) = challenge_of($b);
        die "no challenge on node 1: $b\n" unless $quiet;
        printf "calm %d flood %d quiet %d\n", $calm, $flood, $quiet;
        exit 0;
    }
    my $t0 = time;
    my $after = $flood;
    while (time - $t0 < 15) {
        sleep 1;
        my $c = arrive(0);
        my (undef, $b) = get($c);
        (undef, $after) = challenge_of($b);
        last if $after <= $calm + 1;
    }
    printf "calm %d flood %d after %d in %.0f s\n", $calm, $flood, $after, time - $t0;
    exit 0;
}

# The holder: let in at once where the node knows the room is empty (shared memory, fresh
# central figures); a synced node (or one without fresh figures) asks it for a proof first.
my $holder = arrive(0);
my $hst = let_in($holder);
die "the holder was not let in ($hst)\n" unless $hst == 200;
# A synced fleet: the nodes meet before B and C come, so that every picture knows the holder
# is in. (A synced node may first have told the holder to come back and drawn it a place: it
# waited in the fleet's line until its node's next sync reported it admitted, and a node
# whose picture was older told B, the first in line, position 2: a clean-clone run, 2026-11-29.)
settle() if $settle && $metrics && @nodes > 1;
my ($b, $c) = (arrive(1), arrive(2));
my $b_first = $b->{cookie};
my (undef, $bb) = get($b);
my (undef, $cb) = get($c);
my ($bseed, $bbits) = challenge_of($bb);
my ($cseed, $cbits) = challenge_of($cb);
my $challenged = ($bseed ? 1 : 0) + ($cseed ? 1 : 0);
die "not challenged: $bb / $cb\n" unless $challenged == 2;
my $bproof = solve($bseed, $bbits);
# C with B's proof: another ticket's seed.
my (undef, $cf) = get($c, proof => $bproof);
my $foreign = challenge_of($cf) ? 1 : 0;
# A malformed proof: a client without one.
my (undef, $cm) = get($c, proof => 'garbage.1');
$foreign++ if challenge_of($cm);
# B with its proof, from the node after the one that gave the seed.
$b->{node} = ($b->{node} + 1) % @nodes;
my (undef, $bp) = get($b, proof => $bproof);
my $placed = field($bp, 'status') eq 'waiting' ? field($bp, 'position') : 'none';
# C with its own proof, as the page sends it: the proof cookie.
my $room_cookie = ($c->{cookie} =~ /^(smart_limit_\w+)=/)[0];
my (undef, $cp) = get($c, cookie => "${room_cookie}_proof=" . solve($cseed, $cbits));
die "C not placed: $cp\n" unless field($cp, 'status') eq 'waiting';
# (A fleet's positions come from its picture: let the nodes meet first.)
settle() if $settle;
my (undef, $bk) = get($b);
my $kept = field($bk, 'status') eq 'waiting' ? field($bk, 'position') : 'none';
my (undef, $ck) = get($c);
my $second = field($ck, 'status') eq 'waiting' ? field($ck, 'position') : 'none';
# What a client was answered: its position, "challenge", or "none".
sub answer_of {
    my ($body) = @_;
    return field($body, 'position') if field($body, 'status') eq 'waiting';
    return challenge_of($body) ? 'challenge' : 'none';
}

# B's first ticket (before its place) with the same proof again, on the node that took it:
# the proof is spent there, so this is a client without one.
my $replay = { node => $b->{node}, cookie => $b_first };
my (undef, $br) = get($replay, proof => $bproof);
my $line = sprintf "challenged %s foreign %s placed %s kept %s second %s replay %s queue %s",
    $challenged, $foreign, $placed, $kept, $second, answer_of($br), field($br, 'queue_length');
if (@nodes > 1) {
    # On another node, which has no record of it: the ticket's own place (the room keeps one
    # place per session), not a second.
    my $other = { node => ($b->{node} + 1) % @nodes, cookie => $b_first };
    my (undef, $bo) = get($other, proof => $bproof);
    if ($settle && field($bo, 'status') eq 'waiting') {
        # (A synced node's queue length counts the places taken there since its picture: ask
        # again once the fleet has met, when it is the fleet's line's own.)
        settle();
        (undef, $bo) = get($other);
    }
    $line .= sprintf " elsewhere %s queue %s", answer_of($bo), field($bo, 'queue_length');
    if ($gone) {
        # B stops polling until its place is gone (past presence), then its first ticket comes
        # back with the same proof on the node that gave the seed, which never saw the proof:
        # only the fleet's record of spent proofs can refuse it.
        sleep $gone / 1000;
        my $seedless = { node => 1 % @nodes, cookie => $b_first };
        my (undef, $bg) = get($seedless, proof => $bproof);
        $line .= sprintf " gone %s", answer_of($bg);
    }
}
print "$line\n";
