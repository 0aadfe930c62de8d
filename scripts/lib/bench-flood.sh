# shellcheck shell=bash
# scripts/bench --flood: the line under abuse, measured (sourced by scripts/bench; run
# `scripts/bench --flood --help`).
#
# One nginx (release build, 2 workers) in front of an origin in the same nginx, a room of 5
# (`size=1m`, long grants, default flood control) on each store: `shm` and `redis` (a
# redis-server of its own, SLOWLOG threshold 2 ms). For each store, in order:
#
#   1. five honest clients are admitted (the room is full for the rest of the run) and three
#      honest clients wait at positions 1..3, each from its own 127.0.0.x address;
#   2. one address (127.0.0.1) floods the room without cookies: `wrk -t1 -c64` for --seconds;
#      meanwhile the honest ones keep polling, and an honest newcomer arrives halfway;
#   3. after the flood another honest newcomer arrives;
#   4. the same address mints --mint tickets (first contacts, cookies kept) and replays
#      each once: how many places did it get?
#
# Printed per store: the flood's req/s, places the attacker holds during and after the
# flood (queue length minus the honest clients), the honest newcomers' positions during and
# after, the minted tickets' places, and for Redis the memory growth (`used_memory`) and the
# slowest script call (`SLOWLOG`, calls over 2 ms, and `usec_per_call` of EVALSHA).

flood_usage() {
    cat <<EOF
usage: scripts/bench --flood [--seconds N] [--mint N] [--no-build] [--keep]

  --seconds N   how long the flood lasts (default 20)
  --mint N      tickets minted and replayed by the attacker (default 1000)
  --no-build    use SL_NGINX and SL_MODULE from the environment
  --keep        keep the nginx prefix (config, logs)
EOF
}

flood_main() {
    local seconds=20 mint=1000 build=1 keep=0
    while [ "$#" -gt 0 ]; do
        case "$1" in
            --seconds) seconds="$2"; shift 2 ;;
            --mint) mint="$2"; shift 2 ;;
            --no-build) build=0; shift ;;
            --keep) keep=1; shift ;;
            -h|--help) flood_usage; return 0 ;;
            *) echo "scripts/bench --flood: unknown option '$1'" >&2; flood_usage >&2; return 2 ;;
        esac
    done
    for n in "$seconds" "$mint"; do
        [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/bench --flood: '$n' is not a positive number" >&2; return 2; }
    done
    if [ "$build" = 1 ]; then
        sl_banner "dependencies and release build"
        sl_install_deps bench
        sl_build release
    fi
    : "${SL_NGINX:?SL_NGINX is not set}"
    : "${SL_MODULE:?SL_MODULE is not set}"

    local prefix port origin rport
    prefix="$(mktemp -d "${TMPDIR:-/tmp}/sl-flood.XXXXXX")"
    chmod 755 "$prefix"
    mkdir -p "$prefix/conf" "$prefix/logs" "$prefix/modules" "$prefix/redis"
    cp "$SL_MODULE" "$prefix/modules/ngx_http_smart_limit_module.so"
    port="$(sl_free_port)"; origin="$(sl_free_port)"; rport="$(sl_free_port)"
    redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no \
        --dir "$prefix/redis" --slowlog-log-slower-than 0 --slowlog-max-len 1000000 \
        >"$prefix/logs/redis.log" 2>&1 &
    local rpid=$!
    cat >"$prefix/conf/nginx.conf" <<EOF
load_module $prefix/modules/ngx_http_smart_limit_module.so;
worker_processes 2;
daemon off;
pid $prefix/logs/nginx.pid;
error_log $prefix/logs/error.log notice;
events { worker_connections 4096; }
http {
    access_log off;
    default_type text/plain;
    server { listen 127.0.0.1:$origin; location / { return 200 "origin\n"; } }
    upstream origin { server 127.0.0.1:$origin; keepalive 32; }
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    smart_limit_zone shm size=1m max_active=5 grant=1h active_window=1h;
    smart_limit_zone redis size=1m max_active=5 grant=1h active_window=1h
                     store=redis redis=127.0.0.1:$rport timeout=200ms;
    server {
        listen 127.0.0.1:$port;
        location /shm/ { smart_limit shm; proxy_pass http://origin; }
        location /redis/ { smart_limit redis; proxy_pass http://origin; }
        location = /metrics { smart_limit_metrics; }
    }
}
EOF
    "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr -t >/dev/null 2>&1 \
        || { "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr -t; kill "$rpid"; return 1; }
    "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr >"$prefix/logs/stderr.log" 2>&1 &
    local pid=$!
    # shellcheck disable=SC2064
    trap "kill $pid $rpid 2>/dev/null; wait $pid $rpid 2>/dev/null; [ $keep = 1 ] || rm -rf '$prefix'" EXIT
    local i
    for i in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/metrics" \
            && redis-cli -p "$rport" PING >/dev/null 2>&1 && break
        sleep 0.1
    done
    local base="http://127.0.0.1:$port"

    # One honest browser: its own address and cookie jar; follows the cookie check.
    browse() {   # browse STORE ADDR JAR -> prints "status position"
        curl -s -L --max-redirs 3 --interface "$2" -b "$3" -c "$3" -H 'Accept: application/json' \
            -o "$3.body" -w '%{http_code}' "$base/$1/" >"$3.status" || true
        printf '%s %s\n' "$(cat "$3.status")" \
            "$(sed -n 's/.*"position":\([0-9null]*\).*/\1/p' "$3.body")"
    }
    queue_len() {  # queue_len STORE
        curl -s "$base/metrics" | awk -v r="room=\"$1\"" '$0 ~ "^smart_limit_queue_length\\{" && index($0, r) {print $NF}'
    }

    declare -A out
    local store
    for store in shm redis; do
        sl_banner "store $store: $seconds s flood from 127.0.0.1"
        local d="$prefix/$store"; mkdir -p "$d"
        local mem0=0
        if [ "$store" = redis ]; then
            redis-cli -p "$rport" SLOWLOG RESET >/dev/null
            redis-cli -p "$rport" CONFIG RESETSTAT >/dev/null
            mem0="$(redis-cli -p "$rport" INFO memory | awk -F: '/^used_memory:/ {print $2+0}')"
        fi
        for i in 1 2 3 4 5; do browse "$store" "127.0.0.1$i" "$d/adm$i" >/dev/null; done
        for i in 1 2 3; do browse "$store" "127.0.0.2$i" "$d/w$i" >/dev/null; done
        echo "honest waiting before the flood: $(for i in 1 2 3; do browse "$store" "127.0.0.2$i" "$d/w$i"; done | tr '\n' ' ')" >&2
        # The flood, and the honest ones polling through it.
        taskset -c 1 wrk -t1 -c64 -d"${seconds}s" "$base/$store/" >"$d/wrk.txt" 2>&1 &
        local wpid=$!
        local half=$((seconds / 2)) t during="" held_during=""
        for t in $(seq "$seconds"); do
            sleep 1
            for i in 1 2 3; do browse "$store" "127.0.0.2$i" "$d/w$i" >/dev/null; done
            if [ "$t" = "$half" ]; then
                browse "$store" 127.0.0.31 "$d/n1" >/dev/null
                during="$(browse "$store" 127.0.0.31 "$d/n1")"
                held_during="$(( $(queue_len "$store") - 4 ))"
            fi
            browse "$store" 127.0.0.31 "$d/n1" >/dev/null 2>&1 || true
        done
        wait "$wpid" || true
        local rps; rps="$(awk '/^Requests\/sec:/ {print $2}' "$d/wrk.txt")"
        for i in 1 2 3; do browse "$store" "127.0.0.2$i" "$d/w$i" >/dev/null; done
        browse "$store" 127.0.0.31 "$d/n1" >/dev/null
        browse "$store" 127.0.0.32 "$d/n2" >/dev/null
        local after; after="$(browse "$store" 127.0.0.32 "$d/n2")"
        local held_after=$(( $(queue_len "$store") - 5 ))
        # Minted tickets: first contacts from one address (cookies kept), replayed once each.
        local m placed=0 throttled=0 code
        for m in $(seq "$mint"); do
            curl -s --interface 127.0.0.1 -c "$d/mint$m" -o /dev/null "$base/$store/"
        done
        for m in $(seq "$mint"); do
            code="$(curl -s --interface 127.0.0.1 -b "$d/mint$m" -H 'Accept: application/json' \
                -o "$d/mint.body" -w '%{http_code}' "$base/$store/")"
            if grep -q '"status":"throttled"' "$d/mint.body"; then
                throttled=$((throttled + 1))
            elif [ "$code" = 503 ] || [ "$code" = 200 ]; then
                placed=$((placed + 1))
            fi
        done
        out[$store]="| $store | $rps | $held_during | $held_after | ${during#* } | ${after#* } | $placed of $mint ($throttled throttled) |"
        if [ "$store" = redis ]; then
            local mem1 slow maxus calls percall
            mem1="$(redis-cli -p "$rport" INFO memory | awk -F: '/^used_memory:/ {print $2+0}')"
            # Every call is in the SLOWLOG (threshold 0): the slowest script call, and how many
            # took over 2 ms.
            # The dump lists id, time, duration (us), args...; redis-cli pads the numbering ("4)  1)"
            # once an entry has ten or more args), hence the " +".
            redis-cli -p "$rport" --no-raw SLOWLOG GET 1000000 >"$d/slowlog.txt"
            read -r slow maxus calls < <(awk '/^ *3\) +\(integer\)/ {d = $NF; next}
                       /^ *4\) +1\) "(EVALSHA|EVAL)"/ {n++; if (d > m) m = d; if (d > 2000) s++}
                       END {print s + 0, m + 0, n + 0}' "$d/slowlog.txt")
            percall="$(redis-cli -p "$rport" INFO commandstats | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $6}')"
            out[redis_extra]="Redis: used_memory $mem0 -> $mem1 bytes ($(( (mem1 - mem0) / 1024 )) KiB); script calls: $calls, over 2 ms: $slow, slowest ${maxus} us (usec_per_call $percall: sparse calls run cold)"
        fi
    done
    echo
    echo "| store | flood req/s | attacker places during | attacker places after | honest newcomer position during | honest newcomer position after | minted tickets replayed: places |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
    echo "${out[shm]}"
    echo "${out[redis]}"
    echo
    echo "${out[redis_extra]:-}"
    echo "command: scripts/bench --flood --seconds $seconds --mint $mint (2 nginx workers; wrk -t1 -c64 from 127.0.0.1 without cookies; honest clients from 127.0.0.x with cookie jars)"
    if grep -qE '\[(alert|crit|emerg)\]|exited on signal' "$prefix/logs/error.log"; then
        echo "bench --flood: alerts in nginx's error log:" >&2
        grep -E '\[(alert|crit|emerg)\]|exited on signal' "$prefix/logs/error.log" | head -3 >&2
    fi
}
