# challenge=pow ([S19]): a ticket without a place brings a proof of work bound to it before it
# takes one. The same on every store (the check is the module's, before the room is asked):
# no place without a proof, a solved proof gives one place, another ticket's proof and a
# malformed one are refused, a proof is taken once (replayed on the node that took it, it is
# refused; on another node the ticket gets its own place again, not a second);
# challenge_bits=auto rises under a flood of newcomers and falls after. The solver is
# t/lib/pow_probe.pl (Digest::SHA); the page's own solver runs in Chromium (t/611).

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: nginx -t refuses challenge_bits= without challenge=pow, and bad values, naming them
--- http_config
    smart_limit_zone shop size=1m challenge_bits=20;
--- config
    location / { smart_limit shop; root html; }
--- must_fail
--- error_log
"challenge_bits=20" requires challenge=pow

=== TEST 2: a difficulty outside 1..32 is refused
--- http_config
    smart_limit_zone shop size=1m challenge=pow challenge_bits=33;
--- config
    location / { smart_limit shop; root html; }
--- must_fail
--- error_log
invalid challenge_bits "33": expected auto or a number of bits from 1 to 32

=== TEST 3: the challenge answer: no place, a seed for the ticket; a newcomer let in at once needs none
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off challenge=pow challenge_bits=8;
--- config
    location / {
        smart_limit shop;
        add_header X-Status $smart_limit_status always;
        root html;
    }
    location = /m { smart_limit_metrics; }
--- user_files
>>> index.html
origin
--- steps
A GET / => 200; body =~ /origin/
B GET / Accept: application/json => 503; json.status == "challenge"; json.challenge.alg == "sha256"; json.challenge.bits == 8; json.challenge.seed =~ /^[A-Za-z0-9_-]{12}$/; json.position == null; json.queue_length == 0; header X-Status =~ /^CHALLENGED$/; header Retry-After =~ /^\d+$/
B GET / Accept: text/html => 503; body =~ /Checking your browser/; body =~ /new Worker/; body =~ /smart_limit_shop_proof/; body =~ /<noscript><meta http-equiv="refresh" content="3\d">/
B GET / Accept: application/json | Smart-Limit-Proof: AAAAAAAAAAAA.1 => 503; json.status == "challenge"
M GET /m => 200; body =~ /smart_limit_challenged_total\{room="shop"\} 3\n/; body =~ /smart_limit_proofs_refused_total\{room="shop"\} 1\n/

=== TEST 4: shared memory: proofs give places, one each
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off challenge=pow challenge_bits=12;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- steps
sh 30: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORT => /^challenged 2 foreign 2 placed 1 kept 1 second 2 replay challenge queue 2$/

=== TEST 5: central Redis, two nodes: a seed from one node is solved for the other
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=1m max_active=1 flood=off challenge=pow challenge_bits=12 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- steps
sh 30: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORTS => /^challenged 2 foreign 2 placed 1 kept 1 second 2 replay challenge queue 2 elsewhere 1 queue 2$/
--- no_error_log
[error]

=== TEST 6: sync=, two nodes: the same (every newcomer solves: a node cannot know the fleet is empty this instant)
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 flood=off challenge=pow challenge_bits=12 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
# Positions here are the fleet picture's estimates: asserted is that each client waits (a
# number, not "none"). B's first ticket replayed on the node that took its proof is
# challenged; on the other node too, once the nodes have met (the proof is spent on the
# fleet, TEST 15), and the line stays 2 long.
sh 30: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORTS --settle 1000 --metrics /m => /^challenged 2 foreign 2 placed 1 kept \d+ second \d+ replay challenge queue \d+ elsewhere challenge queue 2$/
--- no_error_log
[error]

=== TEST 7: challenge_bits=auto: 16 bits while calm, more under a flood of newcomers, back down after
--- http_config
    smart_limit_zone shop size=4m max_active=1 flood=off challenge=pow;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin
--- timeout: 60
--- steps
sh 60: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORT --auto => /^calm 16 flood (?:19|2[0-2]) after 1[67] in \d+ s$/

=== TEST 8: challenge_bits=auto on central Redis, two nodes: each node raises its bits under the flood it sees, and lowers them after
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 flood=off challenge=pow store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- timeout: 60
--- steps
sh 60: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORTS --auto => /^calm 16 flood (?:19|2[0-2]) after 1[67] in \d+ s$/
--- no_error_log
[error]

=== TEST 9: challenge_bits=auto on sync=, two nodes: the same
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 flood=off challenge=pow store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- timeout: 60
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
sh 60: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORTS --auto => /^calm 16 flood (?:19|2[0-2]) after 1[67] in \d+ s$/
--- no_error_log
[error]

=== TEST 10: a custom page with {{challenge_script}} hosts the challenge; one without leaves it to the built-in page, and nginx -t says so
--- http_config
    smart_limit_zone shop size=1m max_active=1 flood=off challenge=pow challenge_bits=8;
--- config
    location / {
        smart_limit shop;
        smart_limit_page $TEST_NGINX_HTML_DIR/hosts.html;
        root html;
    }
    location /plain {
        smart_limit shop;
        smart_limit_page $TEST_NGINX_HTML_DIR/plain.html;
        root html;
    }
--- user_files
>>> index.html
origin
>>> plain/index.html
origin
>>> hosts.html
<h1>mine {{room}} {{status}} {{challenge_bits}}</h1><p id="progress"></p>{{challenge_script}}
>>> plain.html
<h1>plain {{status}} {{position}}</h1>
--- steps
A GET / => 200; body =~ /origin/
B GET / Accept: text/html => 503; body =~ /\A<h1>mine shop challenge 8<\/h1><p id="progress"><\/p><script>window.SL=\{seed:'[A-Za-z0-9_-]{12}',bits:8,cookie:'smart_limit_shop_proof'\};<\/script>\n<script id="sl-pow"/; body =~ /new Worker/; body !~ /Checking your browser/
C GET /plain/ Accept: text/html => 503; body =~ /Checking your browser/; body =~ /new Worker/; body !~ /<h1>plain/
C GET /plain/ Accept: application/json => 503; json.status == "challenge"
--- error_log
smart_limit_page has no \{\{challenge_script\}\} but zone "shop" has challenge=pow

=== TEST 11: the no-script wait counts from the ticket's first challenge, not its issue (a ticket minted ahead is challenged); challenge_noscript=off closes that path
--- http_config
    smart_limit_zone shop size=1m max_active=1 active_window=10m flood=off challenge=pow challenge_bits=1;
    smart_limit_zone strict size=1m max_active=1 active_window=10m flood=off challenge=pow challenge_bits=1 challenge_noscript=off;
--- config
    location / { smart_limit shop; root html; }
    location /strict/ { smart_limit strict; root html; }
--- user_files
>>> index.html
origin
>>> strict/index.html
origin
--- follow_redirects: 0
--- timeout: 100
--- steps
# (The holders stay active for the whole test: active_window=10m.)
A GET / => 307
A GET / => 200; body =~ /origin/
S GET /strict/ => 307
S GET /strict/ => 200; body =~ /origin/
# B and C take their tickets (the cookie check) and first use them after more than the
# no-script wait (30 s at 1 bit), as a script that mints tickets ahead of a launch: until
# issue 33 such a ticket took its place without a proof.
B GET / => 307
C GET /strict/ => 307
sleep 31
B GET / Accept: application/json => 503; json.status == "challenge"
C GET /strict/ Accept: application/json => 503; json.status == "challenge"
sleep 31
# B's wait counted from its first challenge, which its ticket now carries: over, a place
# without a proof. The strict room never gives one without a proof.
B GET / Accept: application/json => 503; json.status == "waiting"; json.position == 1
C GET /strict/ Accept: application/json => 503; json.status == "challenge"; json.position == null
--- no_error_log
[error]

=== TEST 12: central Redis, three nodes: a proof is spent once on the fleet (the room's own call records it), so once its place is gone it takes no other, even on a node that never saw it
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=1m max_active=1 presence=10s keep=off flood=off challenge=pow challenge_bits=12 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- steps
# (presence=10s: every place but the one let go must outlive the probe's steps on a loaded
# machine; the wait past it, 11 s, is a lower bound, so the place is certainly gone: with
# keep=off a place goes with its presence, where the default keep would hold it for B.)
sh 40: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORTS --gone 11000 => /^challenged 2 foreign 2 placed 1 kept 1 second 2 replay challenge queue 2 elsewhere 1 queue 2 gone challenge$/
# The holder's, B's and C's proofs, each recorded once for the fleet, with a TTL.
sh redis-cli -p $TEST_NGINX_REDIS_PORT --scan --pattern 'smart_limit:{shop}:spent:*' | wc -l => /^3$/
sh for k in $(redis-cli -p $TEST_NGINX_REDIS_PORT --scan --pattern 'smart_limit:{shop}:spent:*'); do redis-cli -p $TEST_NGINX_REDIS_PORT PTTL "$k"; done => /\A(?:[1-9]\d{3,4}\n){3}\z/
--- no_error_log
[error]

=== TEST 13: challenge_bits=auto on central Redis is the fleet's: a flood on one node raises the bits of the other, which saw none (the room script counts every node's challenges and looks once a second)
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 flood=off challenge=pow store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- timeout: 60
--- steps
# 300 challenges on node 0 and no admission: up to (300 + 1) / (0 + 1) clients asking per
# client let in, 7 doublings, the most auto gives (22 bits); a look that saw only some of them
# fewer. Node 1 alone would stay at 16.
sh 60: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORTS --auto --quiet-node => /^calm 16 flood (?:19|2[0-2]) quiet (?:1[7-9]|2[0-2])$/
sh redis-cli -p $TEST_NGINX_REDIS_PORT HGET 'smart_limit:{shop}:state' pr_d => /\A[3-9]\n\z/
--- no_error_log
[error]

=== TEST 14: challenge_bits=auto on sync= is the fleet's: the same, from the picture (the nodes report their challenges with their syncs)
--- instances: 2
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=4m max_active=1 flood=off challenge=pow store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- timeout: 60
--- steps
until 3: M GET /m @2 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 2\n/
sh 60: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORTS --auto --quiet-node --metrics /m --redis $TEST_NGINX_REDIS_PORT --look 'smart_limit:{shop}:fleet' => /^calm 16 flood (?:19|2[0-2]) quiet (?:1[7-9]|2[0-2])$/
--- no_error_log
[error]

=== TEST 15: sync=, three nodes: a proof is spent once on the fleet: reported with the node's sync, it is refused on the other nodes from their next picture on, even once its place is gone
--- instances: 3
--- redis
--- http_config
    smart_limit_secret $TEST_NGINX_HTML_DIR/keys.txt;
    smart_limit_zone shop size=1m max_active=1 presence=10s flood=off challenge=pow challenge_bits=12 store=redis redis=127.0.0.1:$TEST_NGINX_REDIS_PORT sync=200ms;
--- config
    location / { smart_limit shop; root html; }
    location = /m { smart_limit_metrics; }
--- user_files
>>> keys.txt
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
>>> index.html
origin
--- steps
until 3: M GET /m @3 => 200; body =~ /smart_limit_fleet_nodes\{room="shop"\} 3\n/
# (Positions are the picture's estimates: a number each. After the nodes meet, B's first ticket
# with its proof is challenged on a node that never saw the proof, and again once B's place is
# gone: before, that node took it as a new proof.)
sh 40: perl t/lib/pow_probe.pl --nginx $TEST_NGINX_PORTS --settle 1000 --metrics /m --gone 11000 => /^challenged 2 foreign 2 placed \d+ kept \d+ second \d+ replay challenge queue \d+ elsewhere challenge queue \d* gone challenge$/
sh redis-cli -p $TEST_NGINX_REDIS_PORT ZCARD 'smart_limit:{shop}:spent' => /^[1-9]\d*$/
--- no_error_log
[error]
