# A fleet-wide rate ([S13]): three nginx nodes on loopback and one redis-server, each node
# syncing its cumulative counters once a second. Whatever the balancer does (uneven load,
# load moving between nodes) the fleet passes the configured rate; a node whose syncs are
# slow never shows a negative or broken rate and recovers; with Redis gone the nodes keep
# their last probability and nobody waits for Redis.
#
# TEST 1's loads are paced wrk connections (t/lib/paced.lua: each waits 1 ms after every
# answer, about 900 requests a second each, 12 of them), so the nodes are offered about three
# times the cap whatever else the machine runs; the probe (t/lib/rate_probe.pl) reads every
# node's cumulative counters at the start and the end of a window and compares the fleet's
# passed rate with the cap. They were wrk at full speed until a clean-clone CI run measured
# +9.0 % on the first 24 s window (bound 6 %): three wrk at full speed saturate the 2 cores,
# and the offer then swings with the scheduler from one interval to the next (one node was
# offered 20,000 r/s on 8 connections while another got 55,000 on 1). `p` is the cap over the
# last interval's offer, so a swinging offer passes more than the cap on average (the mean of
# offer(t)/offer(t-1) is above 1: an offer swinging at random within +-30 % gives +3 %); the
# error measured the machine, not the zone. Paced, with two busy loops hogging both cores
# beside the test: +0.6 % and +0.03 %. So +-6 % over 24 s stays, with room: a sum of the wrong
# windows or a lost node is off by a third.
#
# TESTs 2 and 3 keep wrk at full speed (a slow sync and an outage need the offer far above
# the cap) and short windows: +-30 % around a slow sync or a Redis outage (+11 % was seen in
# CI on a 3 s window; a broken sync passes the rate once per node, +200 %), +-50 % for the one
# 1 s window. The accuracy itself (+-3 %) is a figure of the benchmark, `scripts/bench --rate`
# (docs/benchmarks.md), with its conditions.
#
# One sync per node per interval is asserted on the syncs themselves, not on a count over a
# window: every call of the rate script seen on MONITOR (t/lib/script_work.pl) during TEST 1's
# first window is grouped by its node and the window it reports (ARGV[1], ARGV[6]); no group
# may hold two.

use lib 't/lib';
use SmartLimit::Test;
use SmartLimit::Test::Server ();
use File::Temp ();

# The slow node's way to Redis: a proxy (t/lib/slow_proxy.pl) on a port known to the config,
# holding commands back while a switch file exists.
$ENV{TEST_NGINX_SLOW_PORT} = SmartLimit::Test::Server::free_port();
my $dir = File::Temp::tempdir(CLEANUP => 1);
$ENV{TEST_NGINX_SLOW_SWITCH} = "$dir/slow";

run_tests();

__DATA__

=== TEST 1: uneven load (8/3/1 connections), then moved (1/3/8): the fleet passes the cap (+-6 % over 24 s), one sync per node and window
--- instances: 3
--- redis
--- http_config
    smart_limit_rate_zone api rate=3000r/s redis=127.0.0.1:$TEST_NGINX_REDIS_PORT interval=1s timeout=900ms;
--- config
    location / { smart_limit_rate api; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
ok
--- steps
# Two phases of 32 and 34 s: the first window (5 s to 29 s and the probes' own time) ends
# before the load moves with 3 s to spare, the second (from 36 s, three intervals after the
# move, to 60 s) 6 s before the load ends; the steps between them take a fraction of a second.
bg-sh 90: wrk -t1 -s t/lib/paced.lua -c8 -d32s http://127.0.0.1:$TEST_NGINX_PORT_N1/ && wrk -t1 -s t/lib/paced.lua -c1 -d34s http://127.0.0.1:$TEST_NGINX_PORT_N1/
bg-sh 90: wrk -t1 -s t/lib/paced.lua -c3 -d32s http://127.0.0.1:$TEST_NGINX_PORT_N2/ && wrk -t1 -s t/lib/paced.lua -c3 -d34s http://127.0.0.1:$TEST_NGINX_PORT_N2/
bg-sh 90: wrk -t1 -s t/lib/paced.lua -c1 -d32s http://127.0.0.1:$TEST_NGINX_PORT_N3/ && wrk -t1 -s t/lib/paced.lua -c8 -d34s http://127.0.0.1:$TEST_NGINX_PORT_N3/
# A fleet starting cold needs about three intervals (see the README): measure after five.
sleep 5
bg-sh 90: perl t/lib/script_work.pl --redis $TEST_NGINX_REDIS_PORT --call-key smart_limit:{api}:rate --group 1,6 --group-cap 1 --ready $TEST_NGINX_SERVROOT/work.ready --stop $TEST_NGINX_SERVROOT/work.stop => /script calls (\d+); monitor saw \1; .*; groups \d+ of 3 keys; most calls a group 1; unbounded 0; over bounds 0\n/
sh 10: until [ -e $TEST_NGINX_SERVROOT/work.ready ]; do sleep 0.05; done
sh 40: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 24 --cap 3000 --tolerance 0.06 => /within/
# (The MONITOR watch ends here; it is reported with the loads at the end.)
sh touch $TEST_NGINX_SERVROOT/work.stop
# The load moves at 32 s; the probe starts once the fleet has seen three windows of it.
sleep 7
sh 40: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 24 --cap 3000 --tolerance 0.06 => /within/
wait-bg
A GET /m @2 => 200; body =~ /smart_limit_rate_nodes\{zone="api"\} 3\n/
--- no_error_log
[error]

=== TEST 2: a node whose syncs answer after the timeout: never a broken rate, and it recovers
--- instances: 3
--- redis
--- http_config
    include $TEST_NGINX_HTML_DIR/zone-$TEST_NGINX_INSTANCE.conf;
--- config
    location / { smart_limit_rate api; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
ok
>>> zone-1.conf
smart_limit_rate_zone api rate=3000r/s redis=127.0.0.1:$TEST_NGINX_REDIS_PORT timeout=900ms;
>>> zone-2.conf
smart_limit_rate_zone api rate=3000r/s redis=127.0.0.1:$TEST_NGINX_REDIS_PORT timeout=900ms;
>>> zone-3.conf
smart_limit_rate_zone api rate=3000r/s redis=127.0.0.1:$TEST_NGINX_SLOW_PORT timeout=900ms;
--- steps
sh rm -f $TEST_NGINX_SLOW_SWITCH
bg-sh 40: perl t/lib/slow_proxy.pl --port $TEST_NGINX_SLOW_PORT --to $TEST_NGINX_REDIS_PORT --switch $TEST_NGINX_SLOW_SWITCH --delay 2 --for 25
bg-sh 40: wrk -t1 -c4 -d24s http://127.0.0.1:$TEST_NGINX_PORT_N1/
bg-sh 40: wrk -t1 -c4 -d24s http://127.0.0.1:$TEST_NGINX_PORT_N2/
bg-sh 40: wrk -t1 -c4 -d24s http://127.0.0.1:$TEST_NGINX_PORT_N3/
sleep 5
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 3 --cap 3000 --tolerance 0.3 => /within/
# Node 3's syncs now take 2 s, over its 900 ms timeout: each is abandoned.
sh touch $TEST_NGINX_SLOW_SWITCH
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 6 --watch-p => /fleet: offered \d+ r\/s, passed \d/
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N3/m => /smart_limit_rate_sync_errors_total\{zone="api"\} [1-9]/
# Back to normal: node 3 syncs again, and the fleet passes the cap again.
sh rm $TEST_NGINX_SLOW_SWITCH
sleep 3.5
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 4 --cap 3000 --tolerance 0.3 --watch-p => /within/
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N3/m => /smart_limit_rate_sync_age_seconds\{zone="api"\} [01]\.\d+\n/
wait-bg
--- error_log
smart_limit_rate_zone "api": redis 127.0.0.1:\d+: no reply within 900 ms; decisions follow the node's last fleet picture
smart_limit_rate_zone "api": redis 127.0.0.1:\d+: answers again after

=== TEST 3: Redis killed: the nodes keep their last probability, nobody waits, they sync again after
--- instances: 3
--- redis
--- http_config
    smart_limit_rate_zone api rate=3000r/s redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit_rate api; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
ok
--- steps
bg-sh 40: wrk -t1 -c4 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N1/
bg-sh 40: wrk -t1 -c4 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N2/
bg-sh 40: wrk -t1 -c4 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N3/
sleep 5
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 3 --cap 3000 --tolerance 0.3 => /within/
redis-stop
# For two intervals the nodes keep the fleet's last p (unchanged), and the fleet passes about
# the cap (the offer itself grows a little: Redis no longer takes its share of the CPU).
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N1/m => /smart_limit_rate_probability\{zone="api"\} 0\.(\d+)\n/ as $P0
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 1 --cap 3000 --tolerance 0.5 => /within/
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N1/m => /smart_limit_rate_probability\{zone="api"\} 0\.$P0\n/
# No request waits for Redis.
repeat 5: A GET / => 200|503; elapsed < 0.5
# Then p ages toward each node's local cap (3000/3 nodes: the same load on each, so about
# the same total).
sleep 9
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 2 --cap 3000 --tolerance 0.3 => /within/
redis-start
until 5: A GET /m @3 => 200; body =~ /smart_limit_rate_sync_age_seconds\{zone="api"\} 0\.\d+\n/
# Redis came back empty: the nodes return one by one; the first to report sees itself alone,
# and a smaller fleet is believed only after the longest reconnect delay: nobody passes the
# whole rate meanwhile.
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 3 --cap 3000 --tolerance 0.3 => /within/
wait-bg
--- error_log
smart_limit_rate_zone "api": redis 127.0.0.1:\d+: (?:cannot connect|connection closed|connection error)
smart_limit_rate_zone "api": redis 127.0.0.1:\d+: answers again after
