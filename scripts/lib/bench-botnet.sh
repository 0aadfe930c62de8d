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

botnet_usage() {
    cat <<EOF
usage: scripts/bench --botnet [--bots N] [--people N] [--admissions N] [--bot-accounts N]
                              [--no-build] [--keep]

  --bots N          bot identities (default 1000)
  --people N        people (default 100)
  --admissions N    admissions counted (default 100)
  --bot-accounts N  accounts the bots share in the one_place_per rooms (default 10)
  --no-build        use SL_NGINX and SL_MODULE from the environment
  --keep            keep the nginx prefix (config, logs)
EOF
}

botnet_main() {
    local bots=1000 people=100 admissions=100 accounts=10 build=1 keep=0
    while [ "$#" -gt 0 ]; do
        case "$1" in
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
    if [ "$build" = 1 ]; then
        sl_banner "dependencies and release build"
        sl_install_deps bench
        sl_build release
    fi
    : "${SL_NGINX:?SL_NGINX is not set}"
    : "${SL_MODULE:?SL_MODULE is not set}"
    local root; root="$(sl_root)"
    (cd "$root" && cargo build --quiet --release -p smart_limit_bench) || return 1
    local gen="$root/target/release/smart-limit-bench"

    local prefix port origin
    prefix="$(mktemp -d "${TMPDIR:-/tmp}/sl-botnet.XXXXXX")"
    chmod 755 "$prefix"
    mkdir -p "$prefix/conf" "$prefix/logs" "$prefix/modules"
    cp "$SL_MODULE" "$prefix/modules/ngx_http_smart_limit_module.so"
    port="$(sl_free_port)"; origin="$(sl_free_port)"
    local room="size=10m max_active=10 session=2s"
    cat >"$prefix/conf/nginx.conf" <<EOF
load_module $prefix/modules/ngx_http_smart_limit_module.so;
worker_processes 2;
daemon off;
pid $prefix/logs/nginx.pid;
error_log $prefix/logs/error.log notice;
events { worker_connections 8192; }
worker_rlimit_nofile 16384;
http {
    access_log off;
    default_type text/plain;
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
    "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr -t >/dev/null 2>&1 \
        || { "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr -t; return 1; }
    "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr >"$prefix/logs/stderr.log" 2>&1 &
    local pid=$!
    # shellcheck disable=SC2064
    trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null; [ $keep = 1 ] || rm -rf '$prefix'" EXIT
    local i
    for i in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/metrics" && break
        sleep 0.1
    done
    ulimit -n 16384 2>/dev/null || true

    echo
    echo "| room | bots | people | first admissions | people among them | people's share |"
    echo "| --- | --- | --- | --- | --- | --- |"
    local variant path acc line adm ppl share secs challenged
    for variant in off pow user pow+user; do
        path="${variant/+/}"
        # (A room cannot be named "off": `smart_limit off` turns the room off.)
        [ "$path" = off ] && path=plain
        acc=0
        [[ "$variant" == *user ]] && acc="$accounts"
        line="$("$gen" botnet --url "http://127.0.0.1:$port/$path" --bots "$bots" \
            --people "$people" --admissions "$admissions" --bot-accounts "$acc" --max-seconds 300)"
        # admissions N people P bots B share S seconds T
        read -r _ adm _ ppl _ _ _ share _ secs <<<"$line"
        challenged="$(curl -s "http://127.0.0.1:$port/metrics" \
            | awk -v r="room=\"$path\"" '$0 ~ "^smart_limit_challenged_total\\{" && index($0, r) {print $NF}')"
        echo "| $variant | $bots | $people | $adm (${secs} s) | $ppl | $share |"
        echo "  ($variant: challenges given ${challenged:-0})" >&2
    done
}
