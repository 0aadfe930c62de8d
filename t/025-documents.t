# [S29]: a page view is decided once, at its document. With `limit_req` in front of the room
# (the source article's setting: a per-client key, no burst), a browser's document passes under
# the limit and its assets, asked for in parallel right after it, overflow. With
# `smart_limit_documents` in the front location the room decides documents first:
# - while the room is engaged (a line, no free place) a newcomer's document meets the room, so
#   it gets the waiting page, never the origin's HTML with failing assets;
# - a ticket holding a place is decided by the room on every document and poll, under the rate
#   limit too: a waiting page's reload never reaches the origin;
# - while the room is idle a document passes untouched and carries a page pass: its assets
#   pass the room for page_pass= even when they overflow the limit;
# - a page's sub-resource never takes a place nor a ticket: without a pass it gets a bare
#   waiting status.
# The requests carry the Fetch Metadata headers a browser sends (Sec-Fetch-Dest/Mode); the
# real browser runs are in t/355-browser-documents.t. Runs on shared memory here and on the
# central Redis room through t/200-redis-rules.t ($TEST_NGINX_STORE).

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: a full room: a newcomer's document meets the room, its assets take no place
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / {
        smart_limit_documents shop;
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin page
>>> style.css
body{}
>>> app.js
1;
--- steps
# A fills the room: its first document is under the limit (the room is idle: untouched), its
# second overflows and A is let in (one place).
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; body =~ /origin page/; cookie smart_limit_shop absent
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; body =~ /origin page/; cookie smart_limit_shop set
C GET /control?room=shop => 200; json.rooms.0.active_sessions == 1; json.rooms.0.queue_length == 0
# B, from its own address and under its own limit, gets the waiting page at its document.
B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 503; body !~ /origin page/; redirects == 1; cookie smart_limit_shop set; header Retry-After =~ /^\d+$/
B GET / from 127.0.0.2 Accept: application/json => 503; json.position == 1; json.queue_length == 1
# Its reload is decided by the room again, never the origin's page (under the limit too).
repeat 3: B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 503; body !~ /origin page/
# D's page assets, without a document first: under its limit the origin answers; over it the
# room gives a bare waiting status, no ticket, no place.
D GET /style.css from 127.0.0.4 Sec-Fetch-Dest: style | Sec-Fetch-Mode: no-cors => 200; body =~ /body/
D GET /app.js from 127.0.0.4 Sec-Fetch-Dest: script | Sec-Fetch-Mode: no-cors => 503; body !~ /\S/; header Retry-After =~ /^\d+$/; header Cache-Control =~ /no-store/; cookie smart_limit_shop absent; redirects == 0
D GET /style.css from 127.0.0.4 Accept: text/css,*/*;q=0.1 => 503; cookie smart_limit_shop absent; redirects == 0
# Nobody took a place on D's behalf: the line holds B alone.
C GET /control?room=shop => 200; json.rooms.0.queue_length == 1; json.rooms.0.active_sessions == 1
# A, admitted, loads everything.
A GET /style.css Sec-Fetch-Dest: style | Sec-Fetch-Mode: no-cors => 200
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; body =~ /origin page/

=== TEST 2: an idle room: the document passes untouched with a page pass; its assets take one place
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=5 $TEST_NGINX_STORE;
    log_format room '$uri $status [$smart_limit_status]';
--- config
    access_log logs/room.log room;
    location / {
        smart_limit_documents shop;
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
    location = /control { smart_limit_control; }
    location = /room.log { alias logs/room.log; }
--- user_files
>>> index.html
origin page
>>> style.css
body{}
>>> app.js
1;
>>> logo.svg
<svg xmlns="http://www.w3.org/2000/svg"/>
--- steps
B GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; body =~ /origin page/; cookie smart_limit_shop_page set; header Set-Cookie =~ /^smart_limit_shop_page=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=10$/; cookie smart_limit_shop absent
# The document took nothing: the room was only looked at.
C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 0; json.rooms.0.queue_length == 0
# Its assets, three at once as a browser asks for them (three connections with B's cookies):
# each overflows the limit and goes on; the person the pass names takes one free place.
jar B copy p1
jar B copy p2
jar B copy p3
parallel 3 p GET /style.css Sec-Fetch-Dest: style | Sec-Fetch-Mode: no-cors => 200; count 200 == 3; cookie smart_limit_shop set; redirects == 0
C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1; json.rooms.0.queue_length == 0; json.rooms.0.counters.admitted == 1
# B's own later assets on the same pass: the same person, no second place.
B GET /app.js Sec-Fetch-Dest: script | Sec-Fetch-Mode: no-cors => 200; cookie smart_limit_shop set
B GET /logo.svg Sec-Fetch-Dest: image | Sec-Fetch-Mode: no-cors => 200
B GET /app.js Sec-Fetch-Dest: empty | Sec-Fetch-Mode: cors => 200
C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1; json.rooms.0.counters.admitted == 1
# B's next document overflows: B is admitted already and passes.
B GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; body =~ /origin page/; redirects == 0
C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1
until 3: C GET /room.log from 127.0.0.3 => 200; body =~ /^\/style.css 200 \[ADMITTED\]$/m; body =~ /^\/index.html 200 \[-\]$/m; body =~ /^\/index.html 200 \[PASSED\]$/m

=== TEST 3: a page pass is bound to its room, its time and its use
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=5 page_pass=2s $TEST_NGINX_STORE;
    smart_limit_zone other size=1m max_active=5 $TEST_NGINX_STORE;
--- config
    location / {
        smart_limit_documents shop;
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
    location /other/ {
        smart_limit other;
        alias html/;
    }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin page
>>> style.css
body{}
--- steps
B GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; header Set-Cookie =~ /Max-Age=2$/
# Another room does not take it.
jar B copy G
jar G rename smart_limit_shop_page smart_limit_other_page
G GET /other/style.css Sec-Fetch-Dest: style => 503; cookie smart_limit_other absent
# Shown as a ticket, it is a stranger: a new user (the cookie check), never an admitted one.
jar B rename smart_limit_shop_page smart_limit_shop
B GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; redirects == 1; cookie smart_limit_shop set
C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1
# A tampered or made-up pass lets nothing through.
E GET /style.css from 127.0.0.5 Sec-Fetch-Dest: style | Cookie: smart_limit_shop_page=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA => 200
E GET /style.css from 127.0.0.5 Sec-Fetch-Dest: style | Cookie: smart_limit_shop_page=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA => 503; cookie smart_limit_shop absent
# Its time runs out: after page_pass=2s the page's late assets meet the room again.
# (F's document is its one request under the limit: its asset overflows.)
F GET / from 127.0.0.6 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; cookie smart_limit_shop_page set
sleep 2.2
F GET /style.css from 127.0.0.6 Sec-Fetch-Dest: style => 503; cookie smart_limit_shop absent

=== TEST 3b: the room fills between a page's document and its assets: the page finishes
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
    log_format room '$uri $status [$smart_limit_status]';
--- config
    access_log logs/room.log room;
    location / {
        smart_limit_documents shop;
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
    location = /control { smart_limit_control; }
    location = /room.log { alias logs/room.log; }
--- user_files
>>> index.html
origin page
>>> style.css
body{}
--- steps
# B's document is served while the room is idle.
B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; cookie smart_limit_shop_page set
# A takes the room's only place before B's assets come.
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; redirects == 1
C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1
# B's assets overflow into a full room: B's page finishes on its pass, and takes no place.
B GET /style.css from 127.0.0.2 Sec-Fetch-Dest: style => 200
B GET /style.css from 127.0.0.2 Sec-Fetch-Dest: style => 200; cookie smart_limit_shop absent
C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1; json.rooms.0.queue_length == 0
until 3: C GET /room.log from 127.0.0.3 => 200; body =~ /^\/style.css 200 \[PAGE_PASS\]$/m
# B's next document meets the room: the waiting page.
B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 503; body !~ /origin page/

=== TEST 4: a waiting client's document under the rate limit stays in the room
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=1 $TEST_NGINX_STORE;
--- config
    location / {
        smart_limit_documents shop;
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
--- user_files
>>> index.html
origin page
--- steps
# A's second document overflows and A is let in; the room is full.
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; body =~ /origin page/; redirects == 1
# B waits. limit_req has not counted B yet (the room answered B before it): every reload of
# B is under B's limit, and each is the waiting page.
B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 503
B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 503; body !~ /origin page/
# An older browser without Fetch Metadata: its Accept says it is a document.
B GET / from 127.0.0.2 Accept: text/html,application/xhtml+xml;q=0.9,*/*;q=0.8 => 503; body !~ /origin page/
# A program without a ticket (curl's Accept) is untouched under the limit, as before.
P GET / from 127.0.0.7 Accept: */* => 200; body =~ /origin page/

=== TEST 5: bad values fail nginx -t with the directive's name
--- http_config
    smart_limit_zone shop size=1m page_pass=0;
--- config
    location / { smart_limit_documents shop; }
--- must_fail
--- error_log
page_pass.*must be greater than 0

=== TEST 6: page_pass= is bounded
--- http_config
    smart_limit_zone shop size=1m page_pass=2m;
--- config
    location / { smart_limit_documents shop; }
--- must_fail
--- error_log
page_pass.*between 1s and 1m

=== TEST 7: smart_limit_documents names a declared zone
--- http_config
    smart_limit_zone shop size=1m;
--- config
    location / { smart_limit_documents nosuch; }
--- must_fail
--- error_log
"smart_limit_documents" names unknown zone "nosuch"

=== TEST 8: smart_limit_documents off, and a duplicate
--- http_config
    smart_limit_zone shop size=1m;
--- config
    smart_limit_documents shop;
    location / { smart_limit_documents off; smart_limit_documents shop; }
--- must_fail
--- error_log
"smart_limit_documents" is duplicate

=== TEST 9: a synced room (sync=): a newcomer meets the room at its document, assets take no place
--- redis
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=1 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / {
        smart_limit_documents shop;
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
    location = /control { smart_limit_control; }
    location = /metrics { smart_limit_metrics; }
--- user_files
>>> index.html
origin page
>>> style.css
body{}
>>> app.js
1;
--- steps
# The node meets the fleet first (its first sync): until then it counts its room as engaged.
until 5: C GET /metrics from 127.0.0.3 => 200; body =~ /^smart_limit_fleet_syncs_total\{[^}]*\} [1-9]/m
# A fills the room: its first document is under the limit (the room is idle), its second
# overflows and A is let in.
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; body =~ /origin page/; cookie smart_limit_shop absent
A GET / Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; body =~ /origin page/; cookie smart_limit_shop set
until 5: C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1
B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 503; body !~ /origin page/; cookie smart_limit_shop set
repeat 3: B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 503; body !~ /origin page/
D GET /style.css from 127.0.0.4 Sec-Fetch-Dest: style | Sec-Fetch-Mode: no-cors => 200
D GET /app.js from 127.0.0.4 Sec-Fetch-Dest: script | Sec-Fetch-Mode: no-cors => 503; body !~ /\S/; cookie smart_limit_shop absent
until 5: C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.queue_length == 1; json.rooms.0.active_sessions == 1
A GET /style.css Sec-Fetch-Dest: style | Sec-Fetch-Mode: no-cors => 200

=== TEST 10: a synced room (sync=): one page on its pass, one place
--- redis
--- http_config
    limit_req_zone $binary_remote_addr zone=perip:1m rate=1r/m;
    smart_limit_zone shop size=1m max_active=5 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / {
        smart_limit_documents shop;
        limit_req zone=perip;
        limit_req_status 512;
        limit_req_log_level info;
        error_page 512 = @smart_limit;
        root html;
    }
    location @smart_limit {
        smart_limit shop;
        root html;
    }
    location = /control { smart_limit_control; }
    location = /metrics { smart_limit_metrics; }
--- user_files
>>> index.html
origin page
>>> style.css
body{}
--- steps
until 5: C GET /metrics from 127.0.0.3 => 200; body =~ /^smart_limit_fleet_syncs_total\{[^}]*\} [1-9]/m
# B's document, the room idle: a page pass; its three assets at once: one place for B.
B GET / from 127.0.0.2 Sec-Fetch-Mode: navigate | Sec-Fetch-Dest: document => 200; cookie smart_limit_shop_page set; cookie smart_limit_shop absent
jar B copy p1
jar B copy p2
jar B copy p3
parallel 3 p GET /style.css from 127.0.0.2 Sec-Fetch-Dest: style | Sec-Fetch-Mode: no-cors => 200; count 200 == 3; cookie smart_limit_shop set
until 5: C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1
sleep 0.5
C GET /control?room=shop from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1; json.rooms.0.queue_length == 0

=== TEST 11: two tabs on one waiting ticket: the first let in takes the place, the second is the same person (no second admission, no new place)
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off $TEST_NGINX_STORE;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $uri\n"; }
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
--- config
    location / {
        smart_limit shop;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /control { smart_limit_control; }
--- steps
A GET / => 200; body =~ /origin/
B GET / from 127.0.0.2 Accept: application/json => 503; json.position == 1
# B's second tab holds the same waiting ticket.
jar B copy T
A GET /logout => 200; body =~ /bye/
B GET / from 127.0.0.2 => 200; body =~ /origin/
# The room is full again (B): the second tab is B, let in as it is.
T GET / from 127.0.0.2 => 200; body =~ /origin/
C GET /control from 127.0.0.3 => 200; json.rooms.0.counters.admitted == 2; json.rooms.0.active_sessions == 1; json.rooms.0.queue_length == 0

=== TEST 12: a synced room (sync=): two tabs on one waiting ticket take one place
--- redis
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
    server {
        listen 127.0.0.1:$TEST_NGINX_PORT2;
        location / { return 200 "origin $uri\n"; }
        location = /logout { add_header X-Smart-Limit revoke; return 200 "bye\n"; }
    }
--- config
    location / {
        smart_limit shop;
        proxy_pass http://127.0.0.1:$TEST_NGINX_PORT2;
    }
    location = /control { smart_limit_control; }
    location = /m { smart_limit_metrics; }
--- timeout: 60
--- steps
until 10: C GET /m from 127.0.0.3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 1\n/
A GET / => 200; body =~ /origin/
B GET / from 127.0.0.2 Accept: application/json => 503; json.position == 1
jar B copy T
sh 30: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORT --quiet && redis-cli -p $TEST_NGINX_REDIS_PORT ZCARD 'smart_limit:{shop}:active' => /^1$/
A GET /logout => 200; body =~ /bye/
sh 30: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORT --quiet && redis-cli -p $TEST_NGINX_REDIS_PORT ZCARD 'smart_limit:{shop}:active' => /^0$/
until 10: B GET / from 127.0.0.2 => 200; body =~ /origin/
# The node's share of the interval is used (B): the second tab is B, let in as it is.
T GET / from 127.0.0.2 => 200; body =~ /origin/
C GET /control from 127.0.0.3 => 200; json.rooms.0.counters.admitted == 2
# Once the fleet has the node's report: one session, nobody in line.
sh 30: perl t/lib/fleet_syncs.pl --ports $TEST_NGINX_PORT --quiet && redis-cli -p $TEST_NGINX_REDIS_PORT ZCARD 'smart_limit:{shop}:active' => /^1$/
until 5: C GET /control from 127.0.0.3 => 200; json.rooms.0.active_sessions == 1; json.rooms.0.queue_length == 0; json.rooms.0.counters.admitted == 2
