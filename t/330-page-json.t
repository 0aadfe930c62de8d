# The waiting answer for people and programs: the default page (responsive, accessible,
# English or Japanese by Accept-Language), a branded template (`smart_limit_page`) with
# placeholders, JSON for `Accept: application/json`, the status code (`smart_limit_status`:
# 200, 202, 429 or 503), `Retry-After` on every waiting answer, and `smart_limit_poll`, a status
# endpoint that also answers "admitted".

use lib 't/lib';
use SmartLimit::Test;

run_tests();

__DATA__

=== TEST 1: the default page: English, self-refreshing, position, wait, line length
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / => 503
C GET / Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8 | Accept-Language: en-US,en;q=0.9 => 503; header Content-Type =~ /^text\/html; charset=utf-8$/; header Retry-After =~ /^10$/; header Cache-Control =~ /no-store/; body =~ /<html lang="en">/; body =~ /<meta http-equiv="refresh" content="10">/; body =~ /<meta name="viewport" content="width=device-width, initial-scale=1">/; body =~ /The site is busy right now/; body =~ /<div class="pos-num">2<\/div>/; body =~ /<dt>People in line<\/dt><dd>2<\/dd>/; body =~ /calculating/; body =~ /role="status" aria-live="polite"/; body !~ /<script[^>]*src=/; body =~ /<script>\(function\(R,T\)/; body !~ /origin page/
# no Accept-Language, or a language the page does not speak: English
C GET / Accept-Language: fr-FR => 503; body =~ /<html lang="en">/
C GET / => 503; body =~ /<html lang="en">/

=== TEST 2: the default page in Japanese, chosen by Accept-Language
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept-Language: ja-JP,ja;q=0.9,en-US;q=0.8 => 503; body =~ /<html lang="ja">/; body =~ /ただいま混雑しています/; body =~ /1<span class="pos-unit">番目<\/span>/; body =~ /10秒ごとに自動で更新/; header Retry-After =~ /^10$/
B GET / Accept-Language: en;q=0.5, ja => 503; body =~ /<html lang="ja">/
B GET / Accept-Language: ja;q=0.5, en => 503; body =~ /<html lang="en">/

=== TEST 3: JSON for programs: every field, and the same Retry-After
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; header Content-Type =~ /^application\/json/; header Retry-After =~ /^10$/; header Cache-Control =~ /no-store/; json.status == "waiting"; json.room == "shop"; json.position == 1; json.eta_seconds == null; json.eta_known == false; json.refresh_seconds == 10; json.queue_length == 1; json.updated_at > 1600000000
C GET / Accept: application/json => 503; json.position == 2; json.queue_length == 2
B GET / Accept: application/json;q=0.9, text/html;q=0.5 => 503; json.position == 1
# a browser's Accept gets the page, not JSON
B GET / Accept: text/html, application/json => 503; header Content-Type =~ /text\/html/

=== TEST 4: JSON once the line moves: the estimated wait becomes known
--- http_config
    smart_limit_zone shop size=1m max_active=1 active_window=1s;
--- config
    location / { smart_limit shop; root html; }
--- user_files
>>> index.html
origin page
--- steps
A GET / => 200
B GET / Accept: application/json => 503; json.position == 1; json.eta_known == false
C GET / Accept: application/json => 503; json.position == 2
D GET / Accept: application/json => 503; json.position == 3
sleep 1.1
B GET / => 200
C GET / Accept: application/json => 503; json.position == 1
D GET / Accept: application/json => 503; json.position == 2
sleep 1.1
C GET / => 200
# The estimate is the time between admissions (1.1 s of sleep and the requests between), so
# it is at least 1; at most 6 leaves a loaded machine 4 s and more of its own.
D GET / Accept: application/json => 503; json.position == 1; json.eta_known == true; json.eta_seconds >= 1; json.eta_seconds <= 6

=== TEST 5: a branded template: every placeholder filled in, values escaped, refresh configured
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location / {
        smart_limit shop;
        smart_limit_page $TEST_NGINX_HTML_DIR/waiting.tmpl;
        smart_limit_refresh 7s;
        root html;
    }
--- user_files
>>> index.html
origin page
>>> waiting.tmpl
<!DOCTYPE html><html><head><meta http-equiv="refresh" content="{{refresh_seconds}}"><title>{{room}} queue</title></head>
<body class="brand"><h1>Acme tickets ({{room}})</h1>
<p id="pos">{{position}}</p><p id="len">{{ queue_length }}</p><p id="eta">[{{eta_seconds}}] {{eta_text}}</p>
<p id="st">{{status}}</p><p id="at">{{updated_at}}</p><style>a{{color:red}}</style></body></html>
--- steps
A GET / => 200
B GET / => 503; header Retry-After =~ /^7$/; header Content-Type =~ /text\/html/; body =~ /<title>shop queue<\/title>/; body =~ /<h1>Acme tickets \(shop\)<\/h1>/; body =~ /content="7"/; body =~ /<p id="pos">1<\/p>/; body =~ /<p id="len">1<\/p>/; body =~ /<p id="eta">\[\] calculating/; body =~ /<p id="st">waiting<\/p>/; body =~ /<p id="at">\d{10}<\/p>/; body =~ /a\{\{color:red\}\}/; body !~ /The site is busy/
C GET / Accept-Language: ja => 503; body =~ /<p id="pos">2<\/p>/; body =~ /計算中/
# JSON is not templated
C GET / Accept: application/json => 503; json.position == 2; json.refresh_seconds == 7

=== TEST 6: the template serves the closed answer too ({{status}} is "closed")
--- http_config
    smart_limit_zone shop size=1m;
--- config
    location / {
        smart_limit shop;
        smart_limit_page $TEST_NGINX_HTML_DIR/waiting.tmpl;
        root html;
    }
    location = /control { smart_limit_control; }
--- user_files
>>> index.html
origin page
>>> waiting.tmpl
<p>{{status}}|{{position}}|{{room}}</p>
--- steps
op POST /control?room=shop&mode=reject => 200
A GET / => 503; body =~ /^<p>closed\|\|shop<\/p>$/

=== TEST 7: a template with an unknown placeholder is refused by nginx -t
--- http_config
    smart_limit_zone shop size=1m;
--- config
    location / { smart_limit shop; smart_limit_page $TEST_NGINX_HTML_DIR/bad.tmpl; }
--- user_files
>>> bad.tmpl
<p>{{position}} {{colour}}</p>
--- must_fail
--- error_log
"smart_limit_page" ".*bad.tmpl": unknown placeholder \{\{colour\}\}

=== TEST 8: a missing template is refused by nginx -t
--- config
    location / { smart_limit_page $TEST_NGINX_HTML_DIR/nope.tmpl; }
--- must_fail
--- error_log
"smart_limit_page" cannot read ".*nope.tmpl"

=== TEST 9: the status code of the waiting answer: 200, 202, 429 or 503, always with Retry-After
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location / { smart_limit shop; root html; }
    location /ok/ { smart_limit shop; smart_limit_status 200; root html; }
    location /accepted/ { smart_limit shop; smart_limit_status 202; root html; }
    location /busy/ { smart_limit shop; smart_limit_status 429; smart_limit_refresh 3s; root html; }
--- user_files
>>> index.html
origin page
>>> ok/index.html
ok
>>> accepted/index.html
accepted
>>> busy/index.html
busy
--- steps
A GET / => 200
B GET / => 503; header Retry-After =~ /^10$/
B GET /ok/ => 200; body =~ /The site is busy/; header Retry-After =~ /^10$/
B GET /accepted/ Accept: application/json => 202; json.status == "waiting"; header Retry-After =~ /^10$/
B GET /busy/ => 429; header Retry-After =~ /^3$/; body =~ /content="3"/
B GET /busy/ Accept: application/json => 429; json.refresh_seconds == 3

=== TEST 10: any other status code is refused
--- config
    location / { smart_limit_status 404; }
--- must_fail
--- error_log
"smart_limit_status".*expected one of 200, 202, 429, 503

=== TEST 11: a refresh out of range is refused
--- config
    location / { smart_limit_refresh 0s; }
--- must_fail
--- error_log
"smart_limit_refresh" invalid value "0s": must be between 1s and 1h

=== TEST 12: smart_limit_poll: a status endpoint for apps, which also answers "admitted"
--- http_config
    smart_limit_zone shop size=1m max_active=1;
--- config
    location / { smart_limit shop; root html; }
    location = /queue { smart_limit shop; smart_limit_poll; smart_limit_status 202; }
--- user_files
>>> index.html
origin page
--- steps
app1 GET /queue Accept: application/json => 200; json.status == "admitted"; json.position == null; json.queue_length == 0; cookie smart_limit_shop set; header Retry-After absent
# the app now calls the site with its ticket
app1 GET / => 200; body =~ /origin page/
app1 GET /queue Accept: application/json => 200; json.status == "admitted"
app2 GET /queue Accept: application/json => 202; json.status == "waiting"; json.position == 1; header Retry-After =~ /^10$/; cookie smart_limit_shop set
app2 GET / => 503
app2 GET /queue => 202; body =~ /The site is busy/
app1 GET /queue => 200; header Content-Type =~ /text\/html/; body =~ /It&#39;s your turn|It's your turn/
