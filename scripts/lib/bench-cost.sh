# shellcheck shell=bash
# scripts/bench --cost: what one request costs on each hot path, as a ratio against a baseline
# measured in the same run (sourced by scripts/bench; run `scripts/bench --cost --help`).
#
# One nginx (release build), ONE worker pinned to CPU 0, wrk -t1 pinned to CPU 1; neither side
# writes a log line per request (access_log off, error_log notice, limit_req_log_level info);
# the limit_req key ("$binary_remote_addr$uri") is never empty. Variants, each on its own URL:
#
#   limit_req_503   limit_req alone rejects (rate=1r/m, so every request but the first is a 503)
#   page_floor      the same overflow answered by nginx itself (`return 503 "..."`, from memory)
#                   with the very bytes of the waiting page: what the page's size alone costs,
#                   the most wait_html could reach (a second reference for it)
#   wait_html       the same limit_req overflows (status 512) into `error_page 512 = @room`; the
#                   request carries the ticket of a client waiting in line (position 1, the room
#                   full): the waiting page, HTML
#   wait_json       the same with `Accept: application/json`
#   new_arrival     the same overflow without a cookie: every request is a new client (a first
#                   contact: a ticket sealed, and the cookie check, 307 back to the same URL)
#   plain_proxy     proxy_pass to an origin server block in the same nginx (`return 200`)
#   admitted_pass   the same location gated by `smart_limit`, with an admitted ticket
#   plain_bearer    plain_proxy again, each request with an `Authorization: Bearer` admission
#                   token (the token variants' baseline: the same headers)
#   token_pass      the room's location with that token and no ticket ([S28]): the bearer path,
#                   the token verified once by the worker and then matched in its cache
#   token_var       admitted_pass with `proxy_set_header Smart-Limit-Token $smart_limit_token`:
#                   the admission token of every request (signed once per admission, cached)
#   wait_json_redis, new_arrival_redis
#                   wait_json and new_arrival on a room in Redis (store=redis: every decision
#                   is one script call to a redis-server the bench starts on loopback)
#   wait_json_sync, new_arrival_sync
#                   the same on a synced room (store=redis sync=1s: decided on the node's
#                   shared memory, one sync a second)
#   place_503       limit_req's 503 again, but each request sent by a wrk script that gives it
#                   its own ticket and its own X-Client header (the place variants' baseline:
#                   the script's work on wrk's side is the same on both)
#   place_floor     the place variants' second reference: the same overflow answered by nginx
#                   itself with the very bytes a place taken gets (the waiting page of a new
#                   place, and a Set-Cookie of its ticket's length), sent by the same wrk script:
#                   what the answer's size alone costs, the most place_taken* could reach
#   under_limit     limit_req with room to spare (rate=1000000r/s with burst=1000000 nodelay:
#                   every request passes; without a burst two requests of one key in the same
#                   millisecond are one too many, whatever the rate) and
#                   proxy_pass: a page's document under the rate limit, the way [S1] and [S29]
#                   want it to cost nothing (the baseline of documents_idle)
#   documents_idle  the same location with `smart_limit_documents` of an idle room (nobody
#                   waits, places free): every request a new person's navigation (Sec-Fetch-*
#                   headers, no ticket), so the room's look at its shared memory and a page
#                   pass sealed into a Set-Cookie on every response
#   place_taken, place_taken_redis, place_taken_sync
#                   the same overflow into a room (shared memory, central Redis, sync=1s), each
#                   request a client's first return after the cookie check: a fresh ticket
#                   (minted with the rooms' smart_limit_secret by `smart-limit-bench mint`) and
#                   a new X-Client (the rooms' flood_key, flood control on): a place taken and
#                   the waiting page sent; the room's queued_total must grow by 90 % of the
#                   requests or the run fails
# For the Redis variants the table also gives the script calls Redis counted (INFO
# commandstats) per request answered.
#
# Every request of a variant carries the same headers as its baseline's (a browser's Accept and
# Accept-Language, and a Cookie of the same length): a ratio compares handling, not request
# size. Every variant runs once per round, rounds alternate (R rounds of V variants, in order), and
# the figure per variant is the median of its rounds. Ratios: wait_html, wait_json and
# new_arrival against limit_req_503; admitted_pass and token_var against plain_proxy;
# token_pass against plain_bearer; place_taken* against place_503, and again against
# place_floor. The http block has smart_limit_token_key (an Ed25519 key made for the run), so
# every room issues and accepts tokens.

cost_usage() {
    cat <<EOF
usage: scripts/bench --cost [--seconds N] [--rounds N] [--connections N] [--only V,...]
                            [--no-build] [--keep]

  --seconds N       duration of one wrk run (default 5)
  --rounds N        alternating rounds (default 3); the figure is the median
  --connections N   wrk connections (default 32)
  --only V,...      only these variants (baselines are always kept)
  --no-build        use SL_NGINX and SL_MODULE from the environment
  --keep            keep the nginx prefix (config, logs)
EOF
}

cost_main() {
    local seconds=5 rounds=3 conns=32 build=1 keep=0 only=""
    while [ "$#" -gt 0 ]; do
        case "$1" in
            --seconds) seconds="$2"; shift 2 ;;
            --rounds) rounds="$2"; shift 2 ;;
            --connections) conns="$2"; shift 2 ;;
            --only) only="$2"; shift 2 ;;
            --no-build) build=0; shift ;;
            --keep) keep=1; shift ;;
            -h|--help) cost_usage; return 0 ;;
            *) echo "scripts/bench --cost: unknown option '$1'" >&2; cost_usage >&2; return 2 ;;
        esac
    done
    for n in "$seconds" "$rounds" "$conns"; do
        [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/bench --cost: '$n' is not a positive number" >&2; return 2; }
    done
    sl_bench_setup "$build" || return 1
    local root gen="$SL_BENCH_GEN"
    root="$(sl_root)"

    local variants=(limit_req_503 page_floor wait_html wait_json new_arrival plain_proxy admitted_pass
                    plain_bearer token_pass token_var
                    wait_json_redis new_arrival_redis wait_json_sync new_arrival_sync
                    place_503 place_floor place_taken place_taken_redis place_taken_sync
                    under_limit documents_idle)
    if [ -n "$only" ]; then
        local keep_v=() v
        for v in "${variants[@]}"; do
            case ",$only,limit_req_503,page_floor,plain_proxy,plain_bearer,place_503,place_floor,under_limit," in *",$v,"*) keep_v+=("$v") ;; esac
        done
        variants=("${keep_v[@]}")
    fi

    local prefix port origin
    prefix="$(mktemp -d "${TMPDIR:-/tmp}/sl-cost.XXXXXX")"
    chmod 755 "$prefix"
    mkdir -p "$prefix/conf" "$prefix/logs" "$prefix/modules"
    cp "$SL_MODULE" "$prefix/modules/ngx_http_smart_limit_module.so"
    port="$(sl_free_port)"
    origin="$(sl_free_port)"
    while [ "$origin" = "$port" ]; do origin="$(sl_free_port)"; done
    # CPU 0 for the nginx worker, CPU 1 for wrk (when there are two).
    local ncpu worker_cpu=0 wrk_cpu=1
    ncpu="$(nproc)"
    [ "$ncpu" -ge 2 ] || wrk_cpu=0
    # The Redis stores' server, on loopback, beside wrk (it answers the central store's calls
    # during its runs: it gets wrk's CPU, not nginx's).
    local rport rpid
    rport="$(sl_free_port)"
    while [ "$rport" = "$port" ] || [ "$rport" = "$origin" ]; do rport="$(sl_free_port)"; done
    taskset -c "$wrk_cpu" redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no \
        >"$prefix/logs/redis.log" 2>&1 &
    rpid=$!
    for i in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
    # /ROOM: limit_req's overflow into room ROOM (error_page to a named location).
    overflow_into() {
        local z
        for z in "$@"; do
            printf '        location = /%s {\n' "$z"
            printf '            limit_req zone=lr; limit_req_status 512; error_page 512 = @%s;\n' "$z"
            printf '            proxy_pass http://origin;\n        }\n'
            printf '        location @%s { smart_limit %s; proxy_pass http://origin; }\n' "$z" "$z"
        done
    }
    # The rooms' ticket key, so that the bench can mint first-return tickets (place_taken*).
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$prefix/conf/keys"
    echo >>"$prefix/conf/keys"
    # The admission tokens' key (token_pass, token_var).
    openssl genpkey -algorithm ed25519 -out "$prefix/conf/token.pem" 2>/dev/null || return 1
    cat >"$prefix/conf/nginx.conf" <<EOF
load_module $prefix/modules/ngx_http_smart_limit_module.so;
worker_processes 1;
worker_cpu_affinity $(printf '%0*d' "$ncpu" 1);
daemon off;
pid $prefix/logs/nginx.pid;
error_log $prefix/logs/error.log notice;
events { worker_connections 4096; }
http {
    access_log off;
    limit_req_log_level info;
    limit_req_status 503;
    default_type text/plain;
    # Never empty, and one key per URL: each variant has its own limit_req state.
    limit_req_zone "\$binary_remote_addr\$uri" zone=lr:1m rate=1r/m;
    limit_req_zone "\$binary_remote_addr\$uri" zone=roomy:1m rate=1000000r/s;
    geo \$sl_dollar { default "\$"; }
    smart_limit_secret $prefix/conf/keys;
    smart_limit_token_key $prefix/conf/token.pem;

    server { listen 127.0.0.1:$origin; location / { return 200 "origin\n"; } }
    upstream origin { server 127.0.0.1:$origin; keepalive 32; }
    proxy_http_version 1.1;
    proxy_set_header Connection "";

    # The waiting room: one admitted session fills it for an hour; the polling client waits
    # (and keeps its place for an hour: wrk does not poll it while other variants run).
    # poll=off: every poll of the one ticket wrk replays is decided by the room (with its poll
    # budget, all but ten would be answered from the worker's last answer, which is cheaper).
    smart_limit_zone wait size=16m max_active=1 grant=1h active_window=1h presence=1h poll=off;
    # New arrivals: places of clients that never come back go after presence (1s).
    smart_limit_zone arrive size=64m max_active=1 grant=1h active_window=1h presence=1s
                     flood=off;
    # session_rate=off: wrk replays one admitted ticket at full speed; with the session's
    # request rate (on by default) nearly every request would be a 429.
    smart_limit_zone adm size=1m max_active=10 grant=1h active_window=1h session_rate=off;
    smart_limit_zone idle size=1m max_active=10;
    # The same rooms in Redis: every decision one script call (central), or decided here and
    # synced once a second.
    smart_limit_zone wait_r size=16m max_active=1 grant=1h active_window=1h presence=1h poll=off
                     store=redis redis=127.0.0.1:$rport;
    smart_limit_zone arrive_r size=16m max_active=1 grant=1h active_window=1h presence=1s
                     flood=off store=redis redis=127.0.0.1:$rport;
    smart_limit_zone wait_s size=16m max_active=1 grant=1h active_window=1h presence=1h poll=off
                     store=redis redis=127.0.0.1:$rport sync=1s;
    smart_limit_zone arrive_s size=16m max_active=1 grant=1h active_window=1h presence=1s
                     flood=off store=redis redis=127.0.0.1:$rport sync=1s;
    # Places taken: every request a new client (its own ticket, its own flood key), flood
    # control on at its default budget; a place not polled again goes after presence (1s).
    smart_limit_zone pl_m size=256m max_active=1 grant=1h active_window=1h presence=1s
                     flood_key=\$http_x_client;
    smart_limit_zone pl_r size=16m max_active=1 grant=1h active_window=1h presence=1s
                     flood_key=\$http_x_client store=redis redis=127.0.0.1:$rport;
    smart_limit_zone pl_s size=16m max_active=1 grant=1h active_window=1h presence=1s
                     flood_key=\$http_x_client store=redis redis=127.0.0.1:$rport sync=1s;

    server {
        listen 127.0.0.1:$port;
        location = /limit_req_503 { limit_req zone=lr; proxy_pass http://origin; }
        # The same overflow answered by nginx with the waiting page's bytes (see page_floor.conf).
        location = /page_floor {
            limit_req zone=lr; limit_req_status 512; error_page 512 = @page_floor;
            proxy_pass http://origin;
        }
        include $prefix/conf/page_floor.conf;
        # Each room's URL: limit_req's overflow (status 512) goes into the room.
$(overflow_into wait arrive wait_r arrive_r wait_s arrive_s pl_m pl_r pl_s)
        location = /plain { proxy_pass http://origin; }
        location = /adm { smart_limit adm; proxy_pass http://origin; }
        location = /adm_poll { smart_limit adm; smart_limit_poll; }
        location = /adm_token {
            smart_limit adm; proxy_set_header Smart-Limit-Token \$smart_limit_token;
            # (A proxy_set_header here replaces the http level's: keepalive needs it again.)
            proxy_set_header Connection "";
            proxy_pass http://origin;
        }
        location = /place_503 { limit_req zone=lr; proxy_pass http://origin; }
        # The same overflow answered by nginx with a place taken's bytes (see place_floor.conf).
        location = /place_floor {
            limit_req zone=lr; limit_req_status 512; error_page 512 = @place_floor;
            proxy_pass http://origin;
        }
        include $prefix/conf/place_floor.conf;
        location = /metrics { smart_limit_metrics; }
        # A document under the rate limit: without the module, and with an idle room's
        # smart_limit_documents (the room decides nothing: it is idle).
        location = /under_limit { limit_req zone=roomy burst=1000000 nodelay; proxy_pass http://origin; }
        location = /documents_idle {
            smart_limit_documents idle;
            limit_req zone=roomy burst=1000000 nodelay; limit_req_status 512; error_page 512 = @idle;
            proxy_pass http://origin;
        }
        location @idle { smart_limit idle; proxy_pass http://origin; }
    }
}
EOF
    # Filled with the waiting page once nginx runs (then nginx reloads).
    echo 'location @page_floor { return 503 "floor"; }' >"$prefix/conf/page_floor.conf"
    echo 'location @place_floor { return 503 "floor"; }' >"$prefix/conf/place_floor.conf"
    "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr -t || return 1
    "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr >"$prefix/logs/stderr.log" 2>&1 &
    local pid=$!
    # shellcheck disable=SC2064
    trap "kill $pid $rpid 2>/dev/null; wait $pid $rpid 2>/dev/null; [ $keep = 1 ] || rm -rf '$prefix'" EXIT
    local i
    for i in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/plain" && break
        sleep 0.1
    done
    local base="http://127.0.0.1:$port"
    # Cookies: A fills the room, B waits at position 1; an admitted ticket for /adm.
    local jar_a="$prefix/a.jar" jar_b="$prefix/b.jar" jar_adm="$prefix/adm.jar"
    # (-L with a cookie jar: the room's first answer is its cookie check, 307 + ticket.)
    curl -s -o /dev/null "$base/wait"                              # under limit_req: origin
    curl -s -o /dev/null -L -b "$jar_a" -c "$jar_a" "$base/wait"   # overflow: admitted (fills)
    curl -s -o /dev/null -L -b "$jar_b" -c "$jar_b" "$base/wait"   # overflow: waits, position 1
    curl -s -o /dev/null -L -b "$jar_adm" -c "$jar_adm" "$base/adm"
    # The same in the Redis rooms (the synced ones once the node has met the fleet).
    local jar_ar="$prefix/ar.jar" jar_br="$prefix/br.jar" jar_as="$prefix/as.jar" jar_bs="$prefix/bs.jar"
    curl -s -o /dev/null "$base/wait_r"; curl -s -o /dev/null "$base/wait_s"
    curl -s -o /dev/null "$base/arrive_r"; curl -s -o /dev/null "$base/arrive_s"
    sleep 1.5
    curl -s -o /dev/null -L -b "$jar_ar" -c "$jar_ar" "$base/wait_r"
    curl -s -o /dev/null -L -b "$jar_br" -c "$jar_br" "$base/wait_r"
    curl -s -o /dev/null -L -b "$jar_as" -c "$jar_as" "$base/wait_s"
    sleep 1.5
    curl -s -o /dev/null -L -b "$jar_bs" -c "$jar_bs" "$base/wait_s"
    sleep 1.5
    curl -s -o /dev/null "$base/limit_req_503"
    curl -s -o /dev/null "$base/arrive"                            # under limit_req: origin
    local cookie_b cookie_adm
    cookie_b="$(awk '$6 ~ /^smart_limit_/ {print $6 "=" $7}' "$jar_b")"
    cookie_adm="$(awk '$6 ~ /^smart_limit_/ {print $6 "=" $7}' "$jar_adm")"
    [ -n "$cookie_b" ] && [ -n "$cookie_adm" ] || { echo "bench --cost: no tickets" >&2; return 1; }
    local cookie_br cookie_bs
    cookie_br="$(awk '$6 ~ /^smart_limit_/ {print $6 "=" $7}' "$jar_br")"
    cookie_bs="$(awk '$6 ~ /^smart_limit_/ {print $6 "=" $7}' "$jar_bs")"
    [ -n "$cookie_br" ] && [ -n "$cookie_bs" ] || { echo "bench --cost: no Redis tickets" >&2; return 1; }
    # Check that each variant answers what it is meant to measure.
    check() {
        local want="$1" got; shift
        got="$(curl -s -o "$prefix/check.body" -w '%{http_code}' "$@")"
        if [ "$got" != "$want" ]; then
            echo "bench --cost: $* answered $got, expected $want" >&2
            head -c 300 "$prefix/check.body" >&2
            return 1
        fi
    }
    check 503 "$base/limit_req_503" || return 1
    # The floor: nginx answers with the very bytes of the waiting page (an nginx string:
    # backslashes, quotes and dollars escaped).
    curl -s -o "$prefix/page.html" -H "Cookie: $cookie_b" -H "Accept: text/html" \
        -H 'Accept-Language: en-US,en;q=0.9' "$base/wait"
    # floor NAME PAGE [HEADER_LINES]: location @NAME answers 503 with PAGE's bytes (and the
    # header lines given), nginx reloads, and /NAME must answer exactly PAGE.
    floor() {
        local name="$1" page="$2" headers="${3:-}"
        {
            printf 'location @%s { default_type "text/html; charset=utf-8";\n%s    return 503 "' \
                "$name" "$headers"
            sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\$/${sl_dollar}/g' "$page"
            printf '"; }\n'
        } >"$prefix/conf/$name.conf"
        "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr -t >/dev/null 2>&1 \
            && kill -HUP "$pid" && sleep 1
        curl -s -o /dev/null "$base/$name"
        check 503 "$base/$name" || return 1
        cmp -s "$prefix/check.body" "$page" \
            || { echo "bench --cost: /$name differs from $page" >&2; return 1; }
    }
    floor page_floor "$prefix/page.html" || return 1
    check 503 -H "Cookie: $cookie_b" "$base/wait" || return 1
    grep -q 'pos-num">1<' "$prefix/check.body" || { echo "bench --cost: the waiting client is not at position 1" >&2; return 1; }
    check 503 -H "Cookie: $cookie_b" -H 'Accept: application/json' "$base/wait" || return 1
    grep -q '"position":1' "$prefix/check.body" || { echo "bench --cost: JSON has no position 1" >&2; return 1; }
    check 307 "$base/arrive" || return 1
    local rv
    for rv in r s; do
        local ck="$cookie_br"; [ "$rv" = s ] && ck="$cookie_bs"
        check 503 -H "Cookie: $ck" -H 'Accept: application/json' "$base/wait_$rv" || return 1
        grep -q '"position":1' "$prefix/check.body" || { echo "bench --cost: /wait_$rv: no position 1" >&2; cat "$prefix/check.body" >&2; return 1; }
        check 307 "$base/arrive_$rv" || return 1
    done
    check 200 "$base/plain" || return 1
    # An idle room's document: the origin's answer, and a page pass.
    local nav=(-H 'Sec-Fetch-Mode: navigate' -H 'Sec-Fetch-Dest: document' -H 'Sec-Fetch-Site: none')
    check 200 "${nav[@]}" -D "$prefix/idle.headers" "$base/documents_idle" || return 1
    grep -qi '^set-cookie: smart_limit_idle_page=' "$prefix/idle.headers" \
        || { echo "bench --cost: /documents_idle: no page pass" >&2; return 1; }
    check 200 -H "Cookie: $cookie_adm" "$base/adm" || return 1
    # The admitted session's token (the poll's admitted answer): it alone passes /adm.
    local token
    token="$(curl -s -H "Cookie: $cookie_adm" -H 'Accept: application/json' "$base/adm_poll" \
        | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')"
    [ -n "$token" ] || { echo "bench --cost: no admission token" >&2; return 1; }
    check 307 "$base/adm" || return 1
    check 200 -H "Authorization: Bearer $token" "$base/adm" || return 1
    check 200 -H "Cookie: $cookie_adm" "$base/adm_token" || return 1
    # The place variants: a ticket of the cookie check's, minted here, takes a place (the first
    # one of each room fills it; every later one waits).
    mint() { "$gen" mint --secret "$prefix/conf/keys" --room "$1" --count "$2"; }
    local z first
    for z in pl_m pl_r pl_s; do
        curl -s -o /dev/null "$base/$z"                            # under limit_req: origin
        first="$(mint "$z" 1)"
        check 200 -H "Cookie: $first" -H "X-Client: check-$z-1" "$base/$z" || return 1
        first="$(mint "$z" 1)"
        check 503 -H "Cookie: $first" -H 'Accept: application/json' -H "X-Client: check-$z-2" \
            "$base/$z" || return 1
        grep -q '"position":1' "$prefix/check.body" \
            || { echo "bench --cost: /$z: a minted ticket took no place" >&2; cat "$prefix/check.body" >&2; return 1; }
    done
    # Every request carries the same browser-like headers as its baseline's (the ticket
    # cookie, or a cookie of the same size under another name), so that a ratio measures how
    # the request is handled, not how long it is.
    local browser='text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'
    local lang='en-US,en;q=0.9'
    # The place variants' floor: the bytes a place taken on the synced room gets (HTML, its
    # Set-Cookie), answered by nginx from memory.
    first="$(mint pl_s 1)"
    curl -s -D "$prefix/place.headers" -o "$prefix/place.html" -H "Cookie: $first" \
        -H "X-Client: check-pl_s-3" -H "Accept: $browser" -H "Accept-Language: $lang" "$base/pl_s"
    local set_cookie
    set_cookie="$(awk 'tolower($1) == "set-cookie:" {sub(/^[^:]*: */, ""); sub(/\r$/, ""); print; exit}' "$prefix/place.headers")"
    [ -n "$set_cookie" ] && grep -q 'pos-num' "$prefix/place.html" \
        || { echo "bench --cost: /pl_s: a place taken gave no waiting page with a ticket" >&2; return 1; }
    floor place_floor "$prefix/place.html" \
        "$(printf '    add_header Set-Cookie "%s" always;\n    add_header Cache-Control "no-store" always;\n' \
            "$(sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' <<<"$set_cookie")")"$'\n' || return 1
    # wrk's script: every request its own ticket (one line of the file given after --) and its
    # own X-Client; the other headers are the command line's. The requests are formatted in
    # init, before wrk's clock starts: formatting each one as it is sent made wrk, not nginx,
    # the side that ran out of CPU (nginx 50-70 % busy on place_503).
    cat >"$prefix/place.lua" <<'LUA'
local reqs, n, i = {}, 0, 0
function init(args)
    local headers = {}
    for k, v in pairs(wrk.headers) do headers[k] = v end
    for line in io.lines(args[1]) do
        n = n + 1
        headers["Cookie"] = line
        headers["X-Client"] = "c" .. n
        reqs[n] = wrk.format(nil, nil, headers)
    end
end
function request()
    i = i + 1
    return reqs[(i - 1) % n + 1]
end
LUA
    # Enough tickets for a run (the figure is checked: a run that used one twice fails).
    local per_run=$(( 200000 * seconds ))
    queued() {
        curl -s "$base/metrics" | awk -v z="$1" \
            '$1 ~ "^smart_limit_queued_total[{].*room=\"" z "\"" {n += $2} END {print n + 0}'
    }

    local other_cookie="session=${cookie_b#*=}"
    run_wrk() {
        local v="$1" url args=()
        case "$v" in
            limit_req_503) url="$base/limit_req_503"; args=(-H "Cookie: $cookie_b" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            page_floor) url="$base/page_floor"; args=(-H "Cookie: $cookie_b" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            wait_html) url="$base/wait"; args=(-H "Cookie: $cookie_b" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            wait_json) url="$base/wait"; args=(-H "Cookie: $cookie_b" -H 'Accept: application/json;q=1.0, text/plain;q=0.5, */*;q=0.1' -H "Accept-Language: $lang") ;;
            new_arrival) url="$base/arrive"; args=(-H "Cookie: $other_cookie" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            plain_proxy) url="$base/plain"; args=(-H "Cookie: $cookie_adm" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            admitted_pass) url="$base/adm"; args=(-H "Cookie: $cookie_adm" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            plain_bearer) url="$base/plain"; args=(-H "Authorization: Bearer $token" -H "Cookie: $other_cookie" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            token_pass) url="$base/adm"; args=(-H "Authorization: Bearer $token" -H "Cookie: $other_cookie" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            token_var) url="$base/adm_token"; args=(-H "Cookie: $cookie_adm" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            wait_json_redis) url="$base/wait_r"; args=(-H "Cookie: $cookie_br" -H 'Accept: application/json;q=1.0, text/plain;q=0.5, */*;q=0.1' -H "Accept-Language: $lang") ;;
            wait_json_sync) url="$base/wait_s"; args=(-H "Cookie: $cookie_bs" -H 'Accept: application/json;q=1.0, text/plain;q=0.5, */*;q=0.1' -H "Accept-Language: $lang") ;;
            new_arrival_redis) url="$base/arrive_r"; args=(-H "Cookie: $other_cookie" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            new_arrival_sync) url="$base/arrive_s"; args=(-H "Cookie: $other_cookie" -H "Accept: $browser" -H "Accept-Language: $lang") ;;
            under_limit|documents_idle) url="$base/$v"; args=(-H "Cookie: $other_cookie" -H "Accept: $browser" -H "Accept-Language: $lang" "${nav[@]}") ;;
        esac
        local zone="" script=()
        case "$v" in
            place_503) zone=pl_m; url="$base/place_503" ;;
            place_floor) zone=pl_m; url="$base/place_floor" ;;
            place_taken) zone=pl_m; url="$base/pl_m" ;;
            place_taken_redis) zone=pl_r; url="$base/pl_r" ;;
            place_taken_sync) zone=pl_s; url="$base/pl_s" ;;
        esac
        if [ -n "$zone" ]; then
            # (limit_req's 503 reads no ticket: the baseline may send one twice.)
            local count="$per_run"; case "$v" in place_503|place_floor) count=100000 ;; esac
            mint "$zone" "$count" >"$prefix/tickets.txt" || return 1
            args=(-H "Accept: $browser" -H "Accept-Language: $lang")
            script=(-s "$prefix/place.lua")
        fi
        local before after out q0=0 q1=0
        local baseline=0; case "$v" in place_503|place_floor) baseline=1 ;; esac
        [ -n "$zone" ] && [ "$baseline" = 0 ] && q0="$(queued "$zone")"
        before="$(script_calls)"
        out="$(taskset -c "$wrk_cpu" wrk -t1 -c"$conns" -d"${seconds}s" "${script[@]}" "${args[@]}" "$url" \
            ${zone:+-- "$prefix/tickets.txt"} 2>&1)"
        after="$(script_calls)"
        [ -n "$zone" ] && [ "$baseline" = 0 ] && q1="$(queued "$zone")"
        # "req/s total_requests script_calls"
        local res
        res="$(awk -v c="$((after - before))" '/ requests in / {n=$1} /^Requests\/sec:/ {r=$2} END {print r, n, c}' <<<"$out")"
        if [ -n "$zone" ]; then
            local n; n="$(awk '{print $2}' <<<"$res")"
            [ "$baseline" = 1 ] || [ "${n:-0}" -le "$per_run" ] \
                || { echo "bench --cost: $v sent $n requests, more than the $per_run tickets minted" >&2; return 1; }
            if [ "$baseline" = 0 ] && [ $(( (q1 - q0) * 10 )) -lt $(( n * 9 )) ]; then
                echo "bench --cost: $v: $((q1 - q0)) places taken for $n requests (expected one each)" >&2
                return 1
            fi
        fi
        echo "$res"
    }
    script_calls() {
        redis-cli -p "$rport" info commandstats \
            | awk -F'[=,:]' '/^cmdstat_eval(sha)?:/ {n += $3} END {print n + 0}'
    }
    declare -A runs reqs calls
    local r v rps line
    for r in $(seq "$rounds"); do
        for v in "${variants[@]}"; do
            line="$(run_wrk "$v")"
            rps="${line%% *}"
            [ -n "$rps" ] || { echo "bench --cost: wrk gave no figure for $v" >&2; return 1; }
            runs[$v]+="$rps "
            line="${line#* }"
            reqs[$v]=$(( ${reqs[$v]:-0} + ${line%% *} ))
            calls[$v]=$(( ${calls[$v]:-0} + ${line#* } ))
            printf 'round %d  %-18s %10s req/s\n' "$r" "$v" "$rps" >&2
        done
    done
    # The waiting client must still be waiting at position 1 (nothing drifted during the run).
    # (limit_req lets one request a minute through to the origin: the first may be that one.)
    check 503 -H "Cookie: $cookie_b" -H 'Accept: application/json' "$base/wait" 2>/dev/null \
        || check 503 -H "Cookie: $cookie_b" -H 'Accept: application/json' "$base/wait" || return 1
    grep -q '"position":1' "$prefix/check.body" || { echo "bench --cost: after the run, the waiting client is no longer at position 1" >&2; return 1; }
    if grep -qE '\[(alert|crit|emerg)\]|exited on signal' "$prefix/logs/error.log"; then
        echo "bench --cost: alerts in nginx's error log:" >&2
        grep -E '\[(alert|crit|emerg)\]|exited on signal' "$prefix/logs/error.log" | head -3 >&2
    fi

    median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
    declare -A med
    for v in "${variants[@]}"; do med[$v]="$(median "${runs[$v]}")"; done
    echo
    echo "| path | req/s (median of $rounds) | rounds | baseline | ratio | Redis calls per request |"
    echo "| --- | ---: | --- | --- | ---: | ---: |"
    local b row
    per_call() {
        case "$1" in
            *_redis|*_sync) awk -v c="${calls[$1]}" -v n="${reqs[$1]}" 'BEGIN {printf "%.6f", n ? c / n : 0}' ;;
            *) printf -- '-' ;;
        esac
    }
    row() {
        printf '| %s | %.0f | %s| %s | **%.2f** | %s |\n' "$1" "${med[$1]}" "${runs[$1]}" "$2" \
            "$(awk -v a="${med[$1]}" -v c="${med[$2]}" 'BEGIN {print a / c}')" "$(per_call "$1")"
    }
    for v in "${variants[@]}"; do
        case "$v" in
            wait_html|wait_json|new_arrival|wait_json_*|new_arrival_*) b=limit_req_503 ;;
            place_taken*) b=place_503 ;;
            admitted_pass|token_var) b=plain_proxy ;;
            token_pass) b=plain_bearer ;;
            documents_idle) b=under_limit ;;
            *) b="" ;;
        esac
        if [ -n "$b" ] && [ -n "${med[$b]:-}" ]; then
            row "$v" "$b"
        else
            printf '| %s | %.0f | %s| (baseline) | 1 | - |\n' "$v" "${med[$v]}" "${runs[$v]}"
        fi
    done
    if [ -n "${med[wait_html]:-}" ] && [ -n "${med[page_floor]:-}" ]; then
        row wait_html page_floor
    fi
    for v in place_taken place_taken_redis place_taken_sync; do
        if [ -n "${med[$v]:-}" ] && [ -n "${med[place_floor]:-}" ]; then
            row "$v" place_floor
        fi
    done
    echo
    echo "command: scripts/bench --cost --seconds $seconds --rounds $rounds --connections $conns" \
         "(one nginx worker on CPU $worker_cpu, wrk -t1 -c$conns on CPU $wrk_cpu, release build)"
}
