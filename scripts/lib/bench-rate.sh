# shellcheck shell=bash
# scripts/bench --rate: the fleet-wide rate ([S13]) - how exactly a fleet holds its cap, and
# what the draw costs a request (sourced by scripts/bench; run `scripts/bench --rate --help`).
#
# 1. Accuracy. Three nginx nodes (release build, one worker each) on one redis-server, all on
#    loopback, with `smart_limit_rate_zone api rate=CAP redis=... interval=1s`. wrk at full
#    speed on every node with uneven connections, in phases: 8/3/1, then 1/3/8 (the load moves
#    between nodes), then 4/4/4. Each phase runs --phase seconds; its first --settle seconds
#    are left out (a cold start or a moved load takes about three intervals), the rest is
#    measured from every node's cumulative counters (t/lib/rate_probe.pl): offered and passed
#    per node and for the fleet, and the error of the fleet's passed rate against the cap.
# 2. Request-path cost, as a ratio against limit_req in the same run: one nginx (release),
#    ONE worker pinned to CPU 0, wrk -t1 -c32 pinned to CPU 1, --rounds alternating rounds of
#    --seconds each, the median per variant; neither side writes a log line per request
#    (access_log off, error_log notice, limit_req_log_level info), limit_req's key is never
#    empty ("$binary_remote_addr$uri"). Variants:
#      limit_req_pass   limit_req with a rate and a burst it never reaches (burst=1000000
#                       nodelay: without a burst limit_req refuses requests closer than
#                       1/rate apart, which at 1000000r/s is most of them), a static file
#      rate_pass        smart_limit_rate with a rate it never reaches (p = 1), the same file
#      limit_req_503    limit_req rejecting (rate=1r/m): its own 503
#      rate_limited     smart_limit_rate rejecting (rate=1r/m, p about one in a million): 503

rate_usage() {
    cat <<EOF
usage: scripts/bench --rate [--cap R] [--phase S] [--settle S] [--seconds N] [--rounds N]
                            [--only accuracy|cost] [--no-build]

  --cap R          the fleet's rate, requests a second (default 3000)
  --phase S        seconds per load phase (default 16)
  --settle S       seconds left out at the start of each phase (default 5)
  --seconds N      duration of one wrk run of the cost part (default 5)
  --rounds N       alternating rounds of the cost part (default 3)
  --only PART      run only the accuracy or the cost part
  --no-build       use SL_NGINX and SL_MODULE from the environment
EOF
}

rate_main() {
    local cap=3000 phase=16 settle=5 seconds=5 rounds=3 build=1 only=""
    while [ "$#" -gt 0 ]; do
        case "$1" in
            --cap) cap="$2"; shift 2 ;;
            --phase) phase="$2"; shift 2 ;;
            --settle) settle="$2"; shift 2 ;;
            --seconds) seconds="$2"; shift 2 ;;
            --rounds) rounds="$2"; shift 2 ;;
            --only) only="$2"; shift 2 ;;
            --no-build) build=0; shift ;;
            -h|--help) rate_usage; return 0 ;;
            *) echo "scripts/bench --rate: unknown option '$1'" >&2; rate_usage >&2; return 2 ;;
        esac
    done
    for n in "$cap" "$phase" "$settle" "$seconds" "$rounds"; do
        [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/bench --rate: '$n' is not a positive number" >&2; return 2; }
    done
    [ "$settle" -lt "$phase" ] || { echo "scripts/bench --rate: --settle must be below --phase" >&2; return 2; }
    if [ "$build" = 1 ]; then
        sl_banner "dependencies and release build"
        sl_install_deps bench
        sl_build release
    fi
    : "${SL_NGINX:?SL_NGINX is not set}"
    : "${SL_MODULE:?SL_MODULE is not set}"
    local work
    work="$(mktemp -d "${TMPDIR:-/tmp}/sl-rate.XXXXXX")"
    chmod 755 "$work"
    RATE_PIDS=()
    # shellcheck disable=SC2064
    trap "rate_cleanup '$work'" EXIT
    if [ "$only" != cost ]; then
        rate_accuracy "$work" "$cap" "$phase" "$settle" || return 1
    fi
    if [ "$only" != accuracy ]; then
        rate_cost "$work" "$seconds" "$rounds" || return 1
    fi
}

rate_cleanup() {
    local pid
    for pid in "${RATE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${RATE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$1"
}

# Starts an nginx in prefix $1 (config already written) and waits until $2 answers.
rate_start_nginx() {
    "$SL_NGINX" -p "$1/" -c conf/nginx.conf -e stderr -t >/dev/null 2>&1 \
        || { "$SL_NGINX" -p "$1/" -c conf/nginx.conf -e stderr -t; return 1; }
    "$SL_NGINX" -p "$1/" -c conf/nginx.conf -e stderr >"$1/logs/stderr.log" 2>&1 &
    RATE_PIDS+=($!)
    local i
    for i in $(seq 100); do
        curl -s -o /dev/null "$2" && return 0
        sleep 0.1
    done
    echo "bench --rate: nginx in $1 did not answer" >&2
    return 1
}

rate_accuracy() {
    local work="$1" cap="$2" phase="$3" settle="$4"
    sl_banner "accuracy: 3 nodes, rate=${cap}r/s, phases 8/3/1, 1/3/8, 4/4/4 (${phase} s each, first ${settle} s left out)"
    local redis_port; redis_port="$(sl_free_port)"
    redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
        --dir "$work" >"$work/redis.log" 2>&1 &
    RATE_PIDS+=($!)
    local ports=() i p
    for i in 1 2 3; do
        p="$(sl_free_port)"
        while [[ " ${ports[*]} " == *" $p "* ]] || [ "$p" = "$redis_port" ]; do p="$(sl_free_port)"; done
        ports+=("$p")
        local prefix="$work/n$i"
        mkdir -p "$prefix/conf" "$prefix/logs" "$prefix/html"
        echo ok >"$prefix/html/index.html"
        cat >"$prefix/conf/nginx.conf" <<EOF
load_module $SL_MODULE;
worker_processes 1;
daemon off;
pid $prefix/logs/nginx.pid;
error_log $prefix/logs/error.log notice;
events { worker_connections 4096; }
http {
    access_log off;
    smart_limit_rate_zone api rate=${cap}r/s redis=127.0.0.1:$redis_port interval=1s;
    server {
        listen 127.0.0.1:$p;
        location / { smart_limit_rate api; root html; }
        location = /m { smart_limit_metrics; }
    }
}
EOF
    done
    for i in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    for i in 1 2 3; do rate_start_nginx "$work/n$i" "http://127.0.0.1:${ports[$((i - 1))]}/m" || return 1; done
    local all; all="$(IFS=,; echo "${ports[*]}")"
    echo
    echo "| phase | node 1 conns | node 2 | node 3 | node 1 offered / passed r/s | node 2 | node 3 | fleet offered r/s | fleet passed r/s | error vs cap |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    local conns name out
    for conns in "8 3 1" "1 3 8" "4 4 4"; do
        read -r c1 c2 c3 <<<"$conns"
        name="$c1/$c2/$c3"
        local wpids=() n=0 c
        for c in $c1 $c2 $c3; do
            wrk -t1 -c"$c" -d"${phase}s" "http://127.0.0.1:${ports[$n]}/" >/dev/null 2>&1 &
            wpids+=($!)
            n=$((n + 1))
        done
        sleep "$settle"
        out="$(perl "$(sl_root)/t/lib/rate_probe.pl" --ports "$all" --zone api \
            --seconds "$((phase - settle - 1))" --cap "$cap" --tolerance 1 --path /m)" || true
        for p in "${wpids[@]}"; do wait "$p" 2>/dev/null || true; done
        # node lines: "node PORT: offered X r/s, passed Y r/s, ..."; fleet line last.
        local cells=() fleet_o fleet_p err
        while read -r line; do
            case "$line" in
                node*) cells+=("$(sed -E 's/.*offered ([0-9]+) r\/s, passed ([0-9.]+) r\/s.*/\1 \/ \2/' <<<"$line")") ;;
                fleet*)
                    fleet_o="$(sed -E 's/.*offered ([0-9]+) r\/s.*/\1/' <<<"$line")"
                    fleet_p="$(sed -E 's/.*passed ([0-9.]+) r\/s.*/\1/' <<<"$line")"
                    err="$(sed -E 's/.*error ([-+0-9.]+%).*/\1/' <<<"$line")" ;;
            esac
        done <<<"$out"
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | **%s** |\n' "$name" "$c1" "$c2" "$c3" \
            "${cells[0]:-?}" "${cells[1]:-?}" "${cells[2]:-?}" "${fleet_o:-?}" "${fleet_p:-?}" "${err:-?}"
        sleep 1
    done
    echo
    echo "command: scripts/bench --rate --cap $cap --phase $phase --settle $settle" \
         "(3 nginx nodes, 1 worker each, one redis-server, wrk -t1 per node, release build;" \
         "each phase measured over its last $((phase - settle - 1)) s)"
    # Stop the fleet before the cost part (it needs the CPUs).
    for i in 1 2 3; do "$SL_NGINX" -p "$work/n$i/" -c conf/nginx.conf -s quit 2>/dev/null || true; done
    sleep 1
}

rate_cost() {
    local work="$1" seconds="$2" rounds="$3"
    sl_banner "request-path cost: smart_limit_rate vs limit_req (1 worker on CPU 0, wrk -t1 -c32 on CPU 1)"
    local prefix="$work/cost" port; port="$(sl_free_port)"
    mkdir -p "$prefix/conf" "$prefix/logs" "$prefix/html"
    echo ok >"$prefix/html/index.html"
    local ncpu wrk_cpu=1
    ncpu="$(nproc)"
    [ "$ncpu" -ge 2 ] || wrk_cpu=0
    cat >"$prefix/conf/nginx.conf" <<EOF
load_module $SL_MODULE;
worker_processes 1;
worker_cpu_affinity $(printf '%0*d' "$ncpu" 1);
daemon off;
pid $prefix/logs/nginx.pid;
error_log $prefix/logs/error.log notice;
events { worker_connections 4096; }
http {
    access_log off;
    limit_req_log_level info;
    # Never empty, and one key per URL: each variant has its own state.
    limit_req_zone "\$binary_remote_addr\$uri" zone=pass:1m rate=1000000r/s;
    limit_req_zone "\$binary_remote_addr\$uri" zone=tight:1m rate=1r/m;
    smart_limit_rate_zone wide rate=1000000r/s;
    smart_limit_rate_zone narrow rate=1r/m;
    server {
        listen 127.0.0.1:$port;
        root html;
        location = /limit_req_pass/index.html { limit_req zone=pass burst=1000000 nodelay; alias html/index.html; }
        location = /rate_pass/index.html { smart_limit_rate wide; alias html/index.html; }
        location = /limit_req_503/index.html { limit_req zone=tight; alias html/index.html; }
        location = /rate_limited/index.html { smart_limit_rate narrow; alias html/index.html; }
        location = /m { smart_limit_metrics; }
    }
}
EOF
    rate_start_nginx "$prefix" "http://127.0.0.1:$port/m" || return 1
    local base="http://127.0.0.1:$port"
    local v want got
    for v in limit_req_pass:200 rate_pass:200 limit_req_503:503 rate_limited:503; do
        want="${v#*:}"; v="${v%%:*}"
        # Warm up (the narrow rate lets its first requests through; its p falls after a tick).
        taskset -c "$wrk_cpu" wrk -t1 -c4 -d1s "$base/$v/index.html" >/dev/null 2>&1
        got="$(curl -s -o /dev/null -w '%{http_code}' "$base/$v/index.html")"
        [ "$got" = "$want" ] || { echo "bench --rate: $v answered $got, expected $want" >&2; return 1; }
    done
    local variants=(limit_req_pass rate_pass limit_req_503 rate_limited)
    declare -A runs
    local r rps out
    for r in $(seq "$rounds"); do
        for v in "${variants[@]}"; do
            out="$(taskset -c "$wrk_cpu" wrk -t1 -c32 -d"${seconds}s" "$base/$v/index.html" 2>&1)"
            rps="$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")"
            [ -n "$rps" ] || { echo "bench --rate: wrk gave no figure for $v" >&2; return 1; }
            # A pass variant must pass everything (or it measures rejections).
            if [[ "$v" == *_pass ]] && grep -q 'Non-2xx' <<<"$out"; then
                echo "bench --rate: $v answered something else than 200: $(grep Non-2xx <<<"$out")" >&2
                return 1
            fi
            runs[$v]+="$rps "
            printf 'round %d  %-15s %10s req/s\n' "$r" "$v" "$rps" >&2
        done
    done
    median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
    declare -A med
    for v in "${variants[@]}"; do med[$v]="$(median "${runs[$v]}")"; done
    echo
    echo "| path | req/s (median of $rounds) | rounds | baseline | ratio |"
    echo "| --- | ---: | --- | --- | ---: |"
    local row b
    for v in "${variants[@]}"; do
        case "$v" in
            rate_pass) b=limit_req_pass ;;
            rate_limited) b=limit_req_503 ;;
            *) b="" ;;
        esac
        if [ -n "$b" ]; then
            printf '| %s | %.0f | %s| %s | **%.2f** |\n' "$v" "${med[$v]}" "${runs[$v]}" "$b" \
                "$(awk -v a="${med[$v]}" -v c="${med[$b]}" 'BEGIN {print a / c}')"
        else
            printf '| %s | %.0f | %s| (baseline) | 1 |\n' "$v" "${med[$v]}" "${runs[$v]}"
        fi
    done
    echo
    echo "command: scripts/bench --rate --only cost --seconds $seconds --rounds $rounds" \
         "(one nginx worker on CPU 0, wrk -t1 -c32 on CPU $wrk_cpu, release build)"
    "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -s quit 2>/dev/null || true
}
