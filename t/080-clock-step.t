# A step of the wall clock (an NTP correction, `date -s`) changes no decision: durations run on
# nginx's monotonic clock. nginx runs under Debian's libfaketime, which moves the wall clock
# only (FAKETIME_DONT_FAKE_MONOTONIC=1) by the offset written in a file, read again on every
# call (FAKETIME_NO_CACHE=1); nginx's `env` directive keeps the variables in the workers.
# Before the module kept its own clock, a step back of an hour turned the admitted client
# away and threw the waiting ones out of the line, and a step forward ended every session.

use lib 't/lib';
use SmartLimit::Test;
use File::Temp ();

my $lib = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
if (!-f $lib) {
    print "1..0 # SKIP libfaketime is not installed (Debian package faketime; scripts/test installs it)\n";
    exit 0;
}
# (The workers may run as another user: they read the offset file.)
my $dir = File::Temp::tempdir(CLEANUP => 1);
chmod 0755, $dir;
$ENV{SL_FAKETIME_FILE} = "$dir/offset";
open my $fh, '>', $ENV{SL_FAKETIME_FILE} or die "$ENV{SL_FAKETIME_FILE}: $!";
print $fh "+0\n";
close $fh;
chmod 0644, $ENV{SL_FAKETIME_FILE};
# nginx, started with the library preloaded and told where the offset is.
my $real = $ENV{TEST_NGINX_BINARY} // '';
if (-x $real) {
    my $wrapper = "$dir/nginx";
    open my $w, '>', $wrapper or die "$wrapper: $!";
    print $w "#!/bin/sh\n",
        "LD_PRELOAD=$lib FAKETIME_TIMESTAMP_FILE=$dir/offset FAKETIME_NO_CACHE=1 ",
        "FAKETIME_DONT_FAKE_MONOTONIC=1 exec $real \"\$@\"\n";
    close $w;
    chmod 0755, $wrapper;
    $ENV{TEST_NGINX_BINARY} = $wrapper;
}

run_tests();

__DATA__

=== TEST 1: the shared-memory room: an hour back, then an hour forward; the admitted client stays in, the waiting keep their places
--- main_config
    env LD_PRELOAD;
    env FAKETIME_TIMESTAMP_FILE;
    env FAKETIME_NO_CACHE;
    env FAKETIME_DONT_FAKE_MONOTONIC;
--- http_config
    smart_limit_zone shop size=1m max_active=1 active_window=30s presence=20s;
--- config
    location / { smart_limit shop; root html; }
    location = /now { return 200 "$msec\n"; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200; body =~ /origin/
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
sh curl -sS http://127.0.0.1:$TEST_NGINX_PORT/now => /^(\d+)/ as $T0
sh echo -3600 > $SL_FAKETIME_FILE
# nginx's wall clock went back an hour (asked until it has, not after a fixed sleep).
sh 10: until [ $(( $T0 - $(curl -sS http://127.0.0.1:$TEST_NGINX_PORT/now | cut -d. -f1) )) -gt 3590 ]; do sleep 0.1; done
A GET / => 200; body =~ /origin/
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 1
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
sh echo +3600 > $SL_FAKETIME_FILE
sh 10: until [ $(( $(curl -sS http://127.0.0.1:$TEST_NGINX_PORT/now | cut -d. -f1) - $T0 )) -gt 3590 ]; do sleep 0.1; done
A GET / => 200; body =~ /origin/
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 2
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
sh echo +0 > $SL_FAKETIME_FILE
sh 10: until [ $(( $(curl -sS http://127.0.0.1:$TEST_NGINX_PORT/now | cut -d. -f1) - $T0 )) -lt 600 ]; do sleep 0.1; done
A GET / => 200; body =~ /origin/
B GET / Accept: application/json => 503; json.position == 1; json.queue_length == 2
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
--- no_error_log
[error]

=== TEST 2: a synced fleet room on two nodes: an hour back, then forward; nothing changes, and the step is logged
--- instances: 2
--- redis
--- main_config
    env LD_PRELOAD;
    env FAKETIME_TIMESTAMP_FILE;
    env FAKETIME_NO_CACHE;
    env FAKETIME_DONT_FAKE_MONOTONIC;
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/fleet.keys;
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 active_window=30s presence=20s flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> fleet.keys
5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f
>>> index.html
origin
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
until 3: A GET / @1 => 200; body =~ /origin/
B GET / @2 Accept: application/json => 503
# (Instead of sleeping an interval or two: until every node has synced twice, twice over,
# since, so every picture holds what any node saw; t/lib/fleet_syncs.pl.)
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 1
sh echo -3600 > $SL_FAKETIME_FILE
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
A GET / @2 => 200; body =~ /origin/
B GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 1
C GET / @2 Accept: application/json => 503
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
B GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 2
C GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 2
sh echo +3600 > $SL_FAKETIME_FILE
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
A GET / @1 => 200; body =~ /origin/
B GET / @1 Accept: application/json => 503; json.position == 1; json.queue_length == 2
C GET / @2 Accept: application/json => 503; json.position == 2; json.queue_length == 2
sh 20: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORTS => /syncs/
A GET / @2 => 200; body =~ /origin/
B GET / @2 Accept: application/json => 503; json.position == 1; json.queue_length == 2
C GET / @1 Accept: application/json => 503; json.position == 2; json.queue_length == 2
sh echo +0 > $SL_FAKETIME_FILE
--- error_log
the wall clock is -36000
--- no_error_log
[error]
