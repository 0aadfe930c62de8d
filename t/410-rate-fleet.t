# A fleet-wide rate ([S13]): three nginx nodes on loopback and one redis-server, each node
# syncing its cumulative counters once a second. Whatever the balancer does (uneven load,
# load moving between nodes) the fleet passes the configured rate; a node whose syncs are
# slow never shows a negative or broken rate and recovers; with Redis gone the nodes keep
# their last probability and nobody waits for Redis.
#
# Loads are wrk at full speed (bounded in time), so the nodes' offered rate is far above the
# cap; the probe (t/lib/rate_probe.pl) reads every node's cumulative counters at the start and
# the end of a window and compares the fleet's passed rate with the cap. The accuracy claim
# (+-3 %) is checked over 24 s windows of steady load (the window's error is mostly how far the
# offer drifted between its ends, over its length: 14 s windows measured 1.5 % standard
# deviation here, with a -3.1 % and a +5.1 % in one CI run); the short windows around a slow sync
# or a Redis outage check behaviour, with room for a 2-core machine's swings: here three wrk
# and three nginx share 2 cores with Redis, the offer moves by up to a third from one second
# to the next, and one such second moves a 3 s window by a tenth (+11 % seen in CI), so those
# windows allow +-15 % (a broken sync passes the rate once per node, +200 %).

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

=== TEST 1: uneven load (8/3/1 connections), then moved (1/3/8): the fleet passes the cap (+-3 % over 24 s)
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
bg-sh 80: wrk -t1 -c8 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N1/ && wrk -t1 -c1 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N1/
bg-sh 80: wrk -t1 -c3 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N2/ && wrk -t1 -c3 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N2/
bg-sh 80: wrk -t1 -c1 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N3/ && wrk -t1 -c8 -d30s http://127.0.0.1:$TEST_NGINX_PORT_N3/
# A fleet starting cold needs about three intervals (see the README): measure after five.
sleep 5
redis CONFIG RESETSTAT => /OK/
sh 40: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 24 --cap 3000 --tolerance 0.03 => /within/
# One sync per node per interval: at most 3 script calls a second (24 s and a little).
sh redis-cli -p $TEST_NGINX_REDIS_PORT info commandstats | perl -ne 'if (/cmdstat_evalsha:calls=(\d+)/) { print "calls=$1\n"; exit($1 >= 66 && $1 <= 78 ? 0 : 1) }' => /calls=\d+/
# The load moves at 30 s; the probe starts once the fleet has seen three windows of it.
sleep 4.5
sh 40: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 24 --cap 3000 --tolerance 0.03 => /within/
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
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 3 --cap 3000 --tolerance 0.15 => /within/
# Node 3's syncs now take 2 s, over its 900 ms timeout: each is abandoned.
sh touch $TEST_NGINX_SLOW_SWITCH
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 6 --watch-p => /fleet: offered \d+ r\/s, passed \d/
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N3/m => /smart_limit_rate_sync_errors_total\{zone="api"\} [1-9]/
# Back to normal: node 3 syncs again, and the fleet passes the cap again.
sh rm $TEST_NGINX_SLOW_SWITCH
sleep 3.5
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 4 --cap 3000 --tolerance 0.15 --watch-p => /within/
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
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 3 --cap 3000 --tolerance 0.15 => /within/
redis-stop
# For two intervals the nodes keep the fleet's last p (unchanged), and the fleet passes about
# the cap (the offer itself grows a little: Redis no longer takes its share of the CPU).
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N1/m => /smart_limit_rate_probability\{zone="api"\} 0\.(\d+)\n/ as $P0
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 1 --cap 3000 --tolerance 0.3 => /within/
sh curl -s http://127.0.0.1:$TEST_NGINX_PORT_N1/m => /smart_limit_rate_probability\{zone="api"\} 0\.$P0\n/
# No request waits for Redis.
repeat 5: A GET / => 200|503; elapsed < 0.5
# Then p ages toward each node's local cap (3000/3 nodes: the same load on each, so about
# the same total).
sleep 9
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 2 --cap 3000 --tolerance 0.2 => /within/
redis-start
until 5: A GET /m @3 => 200; body =~ /smart_limit_rate_sync_age_seconds\{zone="api"\} 0\.\d+\n/
# Redis came back empty: the nodes return one by one; the first to report sees itself alone,
# and a smaller fleet is believed only after the longest reconnect delay: nobody passes the
# whole rate meanwhile.
sh 20: perl t/lib/rate_probe.pl --ports $TEST_NGINX_PORTS --zone api --seconds 3 --cap 3000 --tolerance 0.15 => /within/
wait-bg
--- error_log
smart_limit_rate_zone "api": redis 127.0.0.1:\d+: (?:cannot connect|connection closed|connection error)
smart_limit_rate_zone "api": redis 127.0.0.1:\d+: answers again after
