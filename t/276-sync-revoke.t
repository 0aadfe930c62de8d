# A place the origin frees is free on the fleet (issue 50, item 6): `X-Smart-Limit: revoke` on
# a synced room ends the session on the node at once, and the node's next sync takes it off the
# fleet's active sessions, so the next in line goes in after the next share-out, as on shared
# memory and central Redis (t/320 TEST 3), not when `active_window` ends. Before, a synced
# room counted the revoked session as active until its window ended: with `active_window=1h`
# the client at the head of the line waited for the hour.
#
# Waits are counted in syncs (t/lib/fleet_syncs.pl), not timed.

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: one synced node, a room of one held for the hour: the origin revokes the admitted session, the head of the line goes in after the node's next syncs
--- redis
--- http_config
    smart_limit_zone shop size=1m store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms max_active=1 grant=1h active_window=1h presence=60s flood=off;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $uri\n"; }
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
--- config
    location / {
        smart_limit shop;
        add_header X-SL-Status $smart_limit_status always;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /m { smart_limit_metrics; }
--- timeout: 60
--- steps
until 10: M GET /m => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 1\n/
A GET /shop => 200; body =~ /origin \/shop/; header X-SL-Status =~ /^ADMITTED$/; cookie smart_limit_shop set
B GET /shop Accept: application/json => 503; json.position == 1
# The fleet knows A's session (the node's report is in Redis).
sh 30: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORT --quiet && redis-cli -p $TEST_NGINX_REDIS_PORT ZCARD 'smart_limit:{shop}:active' => /^1$/
A GET /logout => 200; body =~ /bye/; cookie smart_limit_shop deleted; header X-SL-Status =~ /^REVOKED$/
# The next syncs take the session off the fleet's active sessions; the place is free.
sh 30: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORT --quiet && redis-cli -p $TEST_NGINX_REDIS_PORT ZCARD 'smart_limit:{shop}:active' => /^0$/
until 10: B GET /shop => 200; body =~ /origin \/shop/; header X-SL-Status =~ /^ADMITTED$/
# B's session counts on the fleet, once the node has reported it and met the fleet again.
sh 30: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORT --quiet && redis-cli -p $TEST_NGINX_REDIS_PORT ZCARD 'smart_limit:{shop}:active' => /^1$/
M GET /m => 200; body =~ /smart_limit_active_sessions\{room="shop"\} 1\n/; body =~ /smart_limit_revoked_total\{room="shop"\} 1\n/
--- error_log
smart_limit zone "shop": session revoked by the origin
--- no_error_log
[error]
