# The server's version, checked on every new data connection before any script goes out
# (issue 16): the synced room's script needs Redis 6.2 (ZADD ... GT), the central room's and
# the rate zone's 4.0, an ACL user 6.0. A server too old fails the connection with one line per
# burst naming both versions, and the zone's on_error policy applies; no script reaches it. A
# server whose version cannot be read (an ACL user without +info, a proxy) is one warning, and
# the module goes on.
#
# Fakes: t/lib/fake_resp.pl answering INFO like the Redis version given (--info), every other
# command with an error (--mode error), and writing down the commands it got (--commands).
# Real Redis (Debian 12's 7.0): `--- redis` blocks.

use lib 't/lib';
use SmartLimit::Test;
use SmartLimit::Test::Server ();
use Cwd ();
use File::Temp ();
use POSIX ();

my $dir = File::Temp::tempdir(CLEANUP => 1);
my @fakes;
for my $f (['OLD', '6.0.16'], ['OLD_ROOM', '6.0.16'], ['V5', '5.0.7'], ['NOPERM', 'noperm'],
           ['NOVERSION', 'noversion']) {
    my ($name, $info) = @$f;
    my $port = SmartLimit::Test::Server::free_port();
    my $cmds = "$dir/" . lc($name) . '.cmds';
    my $pid = open(my $out, '-|');
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        exec($^X, Cwd::abs_path('t/lib/fake_resp.pl'), '--port', $port, '--mode', 'error',
             '--info', $info, '--commands', $cmds)
            or POSIX::_exit(127);
    }
    my $ready = <$out>;
    die "fake_resp.pl ($name) did not start\n" unless defined $ready && $ready =~ /ready/;
    push @fakes, [$pid, $out];
    $ENV{"TEST_NGINX_FAKE_${name}_PORT"} = $port;
    $ENV{"TEST_NGINX_FAKE_${name}_CMDS"} = $cmds;
}
END { kill 'TERM', map { $_->[0] } @fakes; waitpid($_->[0], 0) for @fakes }

run_tests();

__DATA__

=== TEST 1: sync= on Redis 6.0.16: one clear line, on_error=closed applies, no script is sent
--- workers: 1
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_FAKE_OLD_PORT sync=200ms on_error=closed max_active=5 flood=off;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
    location = /errlog { alias $TEST_NGINX_SERVROOT/logs/error.log; }
--- user_files
>>> index.html
origin
--- steps
# The node never meets the fleet: the room follows on_error=closed (waiting, no position).
A GET / Accept: application/json => 503; json.position == null
# Syncs: the client tries again and again (backoff up to the interval); three tries counted in
# the fake's command log, not a fixed 2 s.
sh 10: until [ "$(grep -c '^INFO$' $TEST_NGINX_FAKE_OLD_CMDS)" -ge 3 ]; do sleep 0.1; done
B GET / Accept: application/json => 503; json.position == null
M GET /m => 200; body =~ /smart_limit_fleet_syncs_total\{room="shop"\} 0\n/
# One line for the burst (one worker), naming the server, both versions and why.
X GET /errlog => 200; body =~ /\[error\].*smart_limit zone "shop": redis 127\.0\.0\.1:\d+: Redis at 127\.0\.0\.1:\d+ is version 6\.0\.16; smart_limit needs Redis 6\.2 or later \(the sync= script uses ZADD \.\.\. GT\); decisions follow/; body !~ /is version 6\.0\.16(?s:.*)is version 6\.0\.16/
# The server was asked for its version on every try, and got nothing else: no SCRIPT LOAD,
# no EVALSHA.
sh grep -c '^INFO$' $TEST_NGINX_FAKE_OLD_CMDS => /^([3-9]|\d\d+)$/
sh ! grep -v '^INFO$' $TEST_NGINX_FAKE_OLD_CMDS
--- no_error_log
cannot tell the version
panicked

=== TEST 2: the same server with on_error=open: everyone is admitted
--- workers: 1
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_FAKE_OLD_PORT sync=200ms on_error=open max_active=1;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200; body =~ /origin/
B GET / => 200; body =~ /origin/
# The first sync (and its line): waited for in the error log, not for 0.6 s.
sh 10: until grep -q 'is version 6\.0\.16' $TEST_NGINX_SERVROOT/logs/error.log; do sleep 0.1; done
--- error_log
is version 6\.0\.16; smart_limit needs Redis 6\.2 or later

=== TEST 3: a central room and a rate zone need 4.0: Redis 6.0.16 passes the check, the scripts go out
--- workers: 1
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_FAKE_OLD_ROOM_PORT on_error=closed;
    smart_limit_rate_zone api rate=100r/s redis=127.0.0.1:$TEST_NGINX_FAKE_OLD_ROOM_PORT interval=200ms;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin
--- steps
# The fake answers every script with an error (WRONGTYPE): the room's error path, and the
# rate zone's syncs fail (they were sent).
A GET / Accept: application/json => 503; json.position == null
until 3: M GET /m => 200; body =~ /smart_limit_rate_sync_errors_total\{zone="api"\} [1-9]/
sh grep -c '^EVALSHA$' $TEST_NGINX_FAKE_OLD_ROOM_CMDS => /^[2-9]|^\d\d/
sh grep -c '^SCRIPT$' $TEST_NGINX_FAKE_OLD_ROOM_CMDS => /^[2-9]|^\d\d/
--- error_log
smart_limit zone "shop": redis answered an error: WRONGTYPE
smart_limit_rate_zone "api": sync failed: redis answered an error: WRONGTYPE
--- no_error_log
smart_limit needs Redis
cannot tell the version

=== TEST 4: an ACL user needs 6.0: on Redis 5.0.7 the line says why
--- workers: 1
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_FAKE_V5_PORT redis_user=smart redis_password_file=$TEST_NGINX_HTML_DIR/redis.pass on_error=closed;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
>>> redis.pass
Pa55-w0rd-for-tests
--- steps
A GET / Accept: application/json => 503; json.position == null
sh ! grep -v -e '^AUTH$' -e '^INFO$' $TEST_NGINX_FAKE_V5_CMDS
--- error_log
Redis at 127\.0\.0\.1:\d+ is version 5\.0\.7; smart_limit needs Redis 6\.0 or later \(redis_user= is an ACL user\)
--- no_error_log
Pa55

=== TEST 5: a version nobody can read (NOPERM, no redis_version): one warning per zone, and the module goes on
--- workers: 1
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_FAKE_NOPERM_PORT on_error=closed;
    smart_limit_zone news size=1m store=redis redis=127.0.0.1:$TEST_NGINX_FAKE_NOVERSION_PORT on_error=closed;
--- config
    location /shop { smart_limit shop; root html; }
    location /news { smart_limit news; root html; }
    location = /errlog { alias $TEST_NGINX_SERVROOT/logs/error.log; }
--- user_files
>>> shop/index.html
shop
>>> news/index.html
news
--- steps
# Every script call gets an error (the fake's mode), so the client reconnects, and asks INFO
# again each time; the warning is told once.
repeat 4: A GET /shop/ Accept: application/json => 503; json.position == null
repeat 4: B GET /news/ Accept: application/json => 503; json.position == null
sh grep -c '^INFO$' $TEST_NGINX_FAKE_NOPERM_CMDS => /^[1-9]/
sh grep -c '^EVALSHA$' $TEST_NGINX_FAKE_NOPERM_CMDS => /^[1-9]/
sh grep -c '^EVALSHA$' $TEST_NGINX_FAKE_NOVERSION_CMDS => /^[1-9]/
X GET /errlog => 200; body !~ /zone "shop".*cannot tell(?s:.*)zone "shop".*cannot tell/; body !~ /zone "news".*cannot tell(?s:.*)zone "news".*cannot tell/
--- error_log
\[warn\].*smart_limit zone "shop": redis 127\.0\.0\.1:\d+: cannot tell the version of Redis at 127\.0\.0\.1:\d+ \(INFO answered an error: NOPERM this user has no permissions to run the 'info' command\); going on unchecked \(smart_limit needs Redis 4\.0 or later: its scripts set several hash fields in one HSET\)
\[warn\].*smart_limit zone "news": .*cannot tell the version of Redis at 127\.0\.0\.1:\d+ \(INFO has no readable redis_version\)
--- no_error_log
smart_limit needs Redis 4\.0 or later \(

=== TEST 6: Redis 7.0 (the version tested): the check passes on every connection, a synced room syncs
--- workers: 2
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=2;
    smart_limit_zone news size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT max_active=2;
--- config
    location / { smart_limit shop; root html; }
    location /news { smart_limit news; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin
>>> news/index.html
news
--- steps
until 5: M GET /m => 200; body =~ /smart_limit_fleet_syncs_total\{room="shop"\} [1-9]/
A GET / => 200; body =~ /origin/
B GET /news/ => 200; body =~ /news/
redis INFO commandstats => /cmdstat_info:calls=[1-9]/
--- no_error_log
smart_limit needs Redis
cannot tell the version
[error]
