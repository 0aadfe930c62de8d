# shellcheck shell=bash
# scripts/bench --botnet: scripts against people for a room's first admissions ([S19]),
# measured (sourced by scripts/bench; run `scripts/bench --botnet --help`).
#
# One nginx (release build, 2 workers) in front of an origin in the same nginx; four rooms of
# the same size (`max_active=10 session=2s`, default flood control), one per variant:
#
#   off       no challenge (the room "plain")
#   pow       challenge=pow (challenge_bits=auto)
#   user      one_place_per=$http_x_account, the bots sharing --bot-accounts accounts
#   pow+user  both
#
# For each, `smart-limit-bench botnet`: --bots bot identities (each from its own 127.1.x.y
# address) take tickets, solve natively on this machine's CPU and poll every 500 ms, starting
# over once let in; --people people (each from its own 127.2.x.y address, their own account)
# arrive within 2 s, pay a challenge at a browser's measured speed (1.33 M hashes a second,
# t/611-challenge-browser.t) and poll at the page's refresh. Printed: the people's share of the
# first --admissions admissions.
#
# --nodes 2: two nginx of one fleet (a shared key file, one redis-server on loopback; the rooms
# store=redis, with --sync T sync=T): the bots send each request to the next node and replay
# the proofs they spent on the other one; the people keep to one node each. --mint-ahead S:
# the bots take their tickets S seconds before the race.

botnet_usage() {
    cat <<EOF
usage: scripts/bench --botnet [--bots N] [--people N] [--admissions N] [--bot-accounts N]
                              [--nodes 1|2] [--sync T] [--mint-ahead S] [--replay-after S]
                              [--rooms LIST] [--no-build] [--keep]

  --bots N          bot identities (default 1000)
  --people N        people (default 100)
  --admissions N    admissions counted (default 100)
  --bot-accounts N  accounts the bots share in the one_place_per rooms (default 10)
  --nodes N         1 (shared memory, default) or 2 (a fleet on one redis-server)
  --sync T          with --nodes 2: the rooms are synced (sync=T, e.g. 1s)
  --mint-ahead S    the bots take their tickets S seconds before the race (default 0)
  --replay-after S  with --nodes 2: a bot replays a proof it spent S seconds ago on the other
                    node (default 15)
  --rooms LIST      the rooms measured, comma-separated, in order (default off,pow,user,pow+user)
  --no-build        use SL_NGINX and SL_MODULE from the environment
  --keep            keep the nginx prefix (config, logs)
EOF
}

botnet_main() {
    local bots=1000 people=100 admissions=100 accounts=10 build=1 keep=0 nodes=1 sync="" mint=0 replay=15
    local rooms=off,pow,user,pow+user
    while [ "$#" -gt 0 ]; do
        case "$1" in
            --nodes) nodes="$2"; shift 2 ;;
            --sync) sync="$2"; shift 2 ;;
            --mint-ahead) mint="$2"; shift 2 ;;
            --replay-after) replay="$2"; shift 2 ;;
            --rooms) rooms="$2"; shift 2 ;;
            --bots) bots="$2"; shift 2 ;;
            --people) people="$2"; shift 2 ;;
            --admissions) admissions="$2"; shift 2 ;;
            --bot-accounts) accounts="$2"; shift 2 ;;
            --no-build) build=0; shift ;;
            --keep) keep=1; shift ;;
            -h|--help) botnet_usage; return 0 ;;
            *) echo "scripts/bench --botnet: unknown option '$1'" >&2; botnet_usage >&2; return 2 ;;
        esac
    done
    for n in "$bots" "$people" "$admissions" "$accounts"; do
        [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/bench --botnet: '$n' is not a positive number" >&2; return 2; }
    done
    [[ "$nodes" =~ ^[12]$ ]] || { echo "scripts/bench --botnet: --nodes 1 or 2" >&2; return 2; }
    [[ "$mint" =~ ^[0-9]+$ ]] || { echo "scripts/bench --botnet: --mint-ahead takes seconds" >&2; return 2; }
    [[ "$replay" =~ ^[0-9]+$ ]] || { echo "scripts/bench --botnet: --replay-after takes seconds" >&2; return 2; }
    local variant variants=()
    IFS=, read -r -a variants <<<"$rooms"
    for variant in "${variants[@]}"; do
        case "$variant" in
            off|pow|user|pow+user) ;;
            *) echo "scripts/bench --botnet: --rooms takes off, pow, user and pow+user, not '$variant'" >&2; return 2 ;;
        esac
    done
    sl_bench_setup "$build" || return 1
    local root gen="$SL_BENCH_GEN"
    root="$(sl_root)"

    local prefix
    prefix="$(mktemp -d "${TMPDIR:-/tmp}/sl-botnet.XXXXXX")"
    chmod 755 "$prefix"
    mkdir -p "$prefix/modules"
    cp "$SL_MODULE" "$prefix/modules/ngx_http_smart_limit_module.so"
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$prefix/keys"
    local room="size=10m max_active=10 session=2s" rport="" redis_pid=""
    if [ "$nodes" = 2 ]; then
        rport="$(sl_free_port)"
        redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no \
            >"$prefix/redis.log" 2>&1 &
        redis_pid=$!
        for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
        room+=" store=redis redis=127.0.0.1:$rport"
        [ -z "$sync" ] || room+=" sync=$sync"
    fi
    local n ports=() pids=()
    for n in $(seq 0 $(( nodes - 1 ))); do
        local p="$prefix/node$n" port origin
        mkdir -p "$p/conf" "$p/logs"
        port="$(sl_free_port)"; origin="$(sl_free_port)"
        ports+=("$port")
        cat >"$p/conf/nginx.conf" <<EOF
load_module $prefix/modules/ngx_http_smart_limit_module.so;
worker_processes 2;
daemon off;
pid $p/logs/nginx.pid;
error_log $p/logs/error.log notice;
events { worker_connections 8192; }
worker_rlimit_nofile 16384;
http {
    access_log off;
    default_type text/plain;
    smart_limit_secret $prefix/keys;
    server { listen 127.0.0.1:$origin; location / { return 200 "origin\n"; } }
    upstream origin { server 127.0.0.1:$origin; keepalive 32; }
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    smart_limit_zone plain $room;
    smart_limit_zone pow $room challenge=pow;
    smart_limit_zone user $room one_place_per=\$http_x_account;
    smart_limit_zone powuser $room challenge=pow one_place_per=\$http_x_account;
    server {
        listen 127.0.0.1:$port;
        location /plain/ { smart_limit plain; proxy_pass http://origin; }
        location /pow/ { smart_limit pow; proxy_pass http://origin; }
        location /user/ { smart_limit user; proxy_pass http://origin; }
        location /powuser/ { smart_limit powuser; proxy_pass http://origin; }
        location = /metrics { smart_limit_metrics; }
    }
}
EOF
        "$SL_NGINX" -p "$p/" -c conf/nginx.conf -e stderr -t >/dev/null 2>&1 \
            || { "$SL_NGINX" -p "$p/" -c conf/nginx.conf -e stderr -t; return 1; }
        "$SL_NGINX" -p "$p/" -c conf/nginx.conf -e stderr >"$p/logs/stderr.log" 2>&1 &
        pids+=("$!")
    done
    # shellcheck disable=SC2064
    trap "kill ${pids[*]} $redis_pid 2>/dev/null; wait ${pids[*]} $redis_pid 2>/dev/null; [ $keep = 1 ] || rm -rf '$prefix'" EXIT
    local i port
    for port in "${ports[@]}"; do
        for i in $(seq 100); do
            curl -s -o /dev/null "http://127.0.0.1:$port/metrics" && break
            sleep 0.1
        done
    done
    ulimit -n 16384 2>/dev/null || true
    port="${ports[0]}"

    echo
    echo "| room | bots | people | first admissions | people among them | people's share | bots in by a replayed proof |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    local path acc line adm ppl share secs challenged replays also=()
    for variant in "${variants[@]}"; do
        path="${variant/+/}"
        # (A room cannot be named "off": `smart_limit off` turns the room off.)
        [ "$path" = off ] && path=plain
        acc=0
        [[ "$variant" == *user ]] && acc="$accounts"
        also=()
        [ "$nodes" = 2 ] && also=(--also "http://127.0.0.1:${ports[1]}/$path")
        line="$("$gen" botnet --url "http://127.0.0.1:$port/$path" "${also[@]}" --bots "$bots" \
            --people "$people" --admissions "$admissions" --bot-accounts "$acc" --max-seconds 300 \
            --mint-ahead-ms $(( mint * 1000 )) --replay-after-ms $(( replay * 1000 )))"
        # admissions N people P bots B share S seconds T replays R
        read -r _ adm _ ppl _ _ _ share _ secs _ replays <<<"$line"
        challenged="$(curl -s "http://127.0.0.1:$port/metrics" \
            | awk -v r="room=\"$path\"" '$0 ~ "^smart_limit_challenged_total\\{" && index($0, r) {print $NF}')"
        echo "| $variant | $bots | $people | $adm (${secs} s) | $ppl | $share | ${replays:-0} |"
        echo "  ($variant: challenges given ${challenged:-0})" >&2
    done
}
