# A synced room's line too long for the picture to carry whole (more than fleet::EXACT_LINE,
# 2,048) is told its positions from the fleet's arrival-bucket counts ([S22], issue 32): each
# node counts the waiting tickets it writes (once an epoch each, by the ticket's stamp, so a
# client that asks every node is counted once), sends its counts beside its sync, and answers
# from the fleet's sums. Within a second's bucket, positions are spread by arrival time as if
# the clients came evenly between its first and last arrival.
#
# So how far a client is told from its true place is the sum of two things: how unevenly the
# clients came within their second (the counts' own model, here computed by the probe from its
# clients' arrival times), and how far the nodes are from what the counts say (the work this
# test checks). The first is the probe's pace, not the module: alone on this machine 99 % of
# the clients were within 0.5 % of their place; in a clean-clone CI run (2026-12-01) a stall
# of the probe made a second's arrivals uneven and 99 % were within 2.1 %, failing a 2 % bound
# on the truth. Every run so far had the nodes within 2 places of the model (loaded by two
# busy loops beside it too). So the nodes are held to the model (99 % within 1 % and none 3 %
# off: a client's own request slowed by the machine moves its measured arrival), the head to
# 1 and the last to 2,999 within 1 %, and the truth only to 10 % as a sanity bound
# (core/src/fleet/tally/counts.rs's unit tests hold the model itself on even arrivals).
#
# Where a step needs every node's counts to hold what the others counted, it waits for the
# nodes' syncs to be counted (t/lib/fleet_syncs.pl), as t/272 does.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: a line of 2,999 on three nodes: positions from the counts, the head 1 and the last 2,999 (within 1 %), every node within 1 % of what the counts say for 99 % of them and none 3 % off
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    # One admitted session holds the room for the hour; the 2,999 after it wait, one after
    # another, round robin over the nodes.
    smart_limit_zone shop size=4m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 grant=1h presence=60s flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- timeout: 150
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
# Then two rounds, each once every node has met the fleet twice over, each client asking the
# next node each round. (Positions between two clients who arrived within a millisecond of
# each other may be alike: within a bucket, the counts place waiters by arrival time.)
sh 140: perl t/lib/line_probe.pl --ports $TEST_NGINX_PORTS --clients 3000 --gap 0.0005 --syncs $TEST_NGINX_PORTS --rounds 2 --rotate --off => /round 1: admitted 1 waiting 2999 off max \d+ within \d\.\d% distinct (?:yes|no) first 1 last (?:29[7-9]\d|30[0-2]\d) model off max \d+ within \d+\.\d% told off model max (?:\d|[1-8]\d) within 0\.\d%\nround 2: admitted 1 waiting 2999 off max \d+ within \d\.\d% distinct (?:yes|no) first 1 last (?:29[7-9]\d|30[0-2]\d) model off max \d+ within \d+\.\d% told off model max (?:\d|[1-8]\d) within 0\.\d%\nerrors 0/
# Each node's counts' call is kept (when, and its pace of let-ins), so each node can reckon the
# others' let-ins not reported yet: three nodes call. (A node silent for three intervals drops
# out of the hash, so a moment's delay under load is looked past: up to ten looks.)
sh 10: for i in 1 2 3 4 5 6 7 8 9 10; do n=$(redis-cli -p $TEST_NGINX_REDIS_PORT HLEN 'smart_limit:{shop}:tally:nodes'); [ "$n" = 3 ] && break; sleep 0.2; done; echo "$n" => /^3$/
--- no_error_log
[error]
