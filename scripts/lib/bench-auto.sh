# shellcheck shell=bash
# scripts/bench --auto: max_active=auto against fixed values, in front of the model origin
# (issue 50; sourced by scripts/bench; run `scripts/bench --auto --help`).
#
# For every variant, in one run: a fresh model origin (`smart-limit-bench origin`: --capacity
# requests in service at once, each --service-ms, the next --queue waiting, the rest refused
# with 503), a fresh nginx (release build, 2 workers) whose room (shared memory) proxies to
# it, and `smart-limit-bench auto`: visitors arriving at --arrivals a second, each loading the
# page and three assets at once, thinking 1 s, again, until a stay of 10-20 s ends; a visitor
# told to wait comes back when Retry-After says. Variants: fixed max_active over a sweep, far
# too high, far too low, and auto (auto:10..2000, origin_latency=--target-ms); then auto and
# the sweep's best fixed value again with the origin's capacity halved --halve-at seconds in.
#
# Printed: a markdown table (goodput: pages fully loaded per second; origin p50/p99 and 5xx as
# the visitors timed the origin's answers; when max_active settled), and for the halving runs
# the origin's p99 and 5xx from 30 s after the halving on. Each run's JSON and per-second CSV
# stay in the output directory (--out, default target/bench-auto/), plotted over time in its
# report.svg (scripts/lib/plot-auto.py: max_active and the sessions active of the auto runs,
# and every run's pages fully loaded each second).
#
# --store redis|sync: the room is a fleet's (one node here, a redis-server of its own per run
# on loopback; sync= at 200ms): `auto` is then steered in Redis, told by the node's workers
# (central: one visit in 100 ms per worker; synced: once an interval, beside the sync).

auto_usage() {
    cat <<EOF
usage: scripts/bench --auto [--seconds N] [--arrivals N] [--capacity N] [--service-ms MS]
                            [--queue N] [--target-ms MS] [--sweep "A B C"] [--halve-at S]
                            [--store shm|redis|sync] [--out DIR] [--cold] [--no-build]

  --seconds N     length of each run (default 60; the halving runs take 30 s more)
  --arrivals N    visitors arriving per second (default 15)
  --capacity N    the origin's requests in service at once (default 16)
  --service-ms MS each request's service time at the origin (default 40)
  --queue N       requests the origin queues before refusing (default 48)
  --target-ms MS  auto's origin_latency= (default 100)
  --sweep LIST    fixed max_active values (default "40 60 80 100 120 140")
  --halve-at S    when the halving runs halve the origin's capacity (default 40)
  --store S       the room's store: shm (default), redis (central) or sync (sync=200ms), on
                  a redis-server of each run's own
  --out DIR       where the runs' JSON and CSV go (default target/bench-auto)
  --cold          the sweep and auto only (the cold start against the best fixed value): no
                  far-off values, no halving runs
  --no-build      use SL_NGINX and SL_MODULE from the environment
EOF
}

auto_main() {
    local seconds=60 arrivals=15 capacity=16 service=40 queue=48 target=100 halve=40
    local sweep="40 60 80 100 120 140" build=1 out="" store=shm cold=0
    while [ "$#" -gt 0 ]; do
        case "$1" in
            --seconds) seconds="$2"; shift 2 ;;
            --arrivals) arrivals="$2"; shift 2 ;;
            --capacity) capacity="$2"; shift 2 ;;
            --service-ms) service="$2"; shift 2 ;;
            --queue) queue="$2"; shift 2 ;;
            --target-ms) target="$2"; shift 2 ;;
            --sweep) sweep="$2"; shift 2 ;;
            --halve-at) halve="$2"; shift 2 ;;
            --out) out="$2"; shift 2 ;;
            --store) store="$2"; shift 2 ;;
            --no-build) build=0; shift ;;
            --cold) cold=1; shift ;;
            -h|--help) auto_usage; return 0 ;;
            *) echo "scripts/bench --auto: unknown option '$1'" >&2; auto_usage >&2; return 2 ;;
        esac
    done
    local n
    for n in "$seconds" "$arrivals" "$capacity" "$service" "$queue" "$target" "$halve" $sweep; do
        [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/bench --auto: '$n' is not a positive number" >&2; return 2; }
    done
    case "$store" in
        shm|redis|sync) ;;
        *) echo "scripts/bench --auto: --store is shm, redis or sync, not '$store'" >&2; return 2 ;;
    esac
    sl_bench_setup "$build" || return 1
    local root gen="$SL_BENCH_GEN"
    root="$(sl_root)"
    out="${out:-$root/target/bench-auto}"
    mkdir -p "$out"
    local prefix
    prefix="$(mktemp -d "${TMPDIR:-/tmp}/sl-auto.XXXXXX")"
    chmod 755 "$prefix"
    mkdir -p "$prefix/modules" "$prefix/conf" "$prefix/logs"
    cp "$SL_MODULE" "$prefix/modules/ngx_http_smart_limit_module.so"
    # (Globals: the EXIT trap runs after this function's locals are gone.)
    SL_AUTO_PIDS=""
    SL_AUTO_PREFIX="$prefix"
    trap 'kill $SL_AUTO_PIDS 2>/dev/null || true; wait $SL_AUTO_PIDS 2>/dev/null || true; rm -rf "$SL_AUTO_PREFIX"' EXIT

    # one_run LABEL MAX_ACTIVE SECONDS [HALVE_AT]: prints the run's JSON line.
    one_run() {
        local label="$1" max="$2" secs="$3" halve_at="${4:-}"
        local port oport
        port="$(sl_free_port)"; oport="$(sl_free_port)"
        "$gen" origin --listen "127.0.0.1:$oport" --capacity "$capacity" --service-ms "$service" \
            --queue "$queue" --seconds $((secs + 30)) >"$prefix/logs/origin.log" 2>&1 &
        local opid=$!
        SL_AUTO_PIDS="$opid"
        local where="" rport
        if [ "$store" != shm ]; then
            rport="$(sl_free_port)"
            redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no \
                >"$prefix/logs/redis.log" 2>&1 &
            opid="$opid $!"
            SL_AUTO_PIDS="$opid"
            local w
            for w in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
            where="store=redis redis=127.0.0.1:$rport"
            [ "$store" = sync ] && where="$where sync=200ms"
        fi
        local latency=""
        [[ "$max" == auto* ]] && latency="origin_latency=${target}ms"
        cat >"$prefix/conf/nginx.conf" <<EOF
load_module $prefix/modules/ngx_http_smart_limit_module.so;
worker_processes 2;
daemon off;
pid $prefix/logs/nginx.pid;
error_log $prefix/logs/error.log notice;
events { worker_connections 8192; }
worker_rlimit_nofile 20000;
http {
    access_log off;
    upstream origin { server 127.0.0.1:$oport; keepalive 64; }
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    smart_limit_zone shop size=10m max_active=$max $latency active_window=5s flood=off $where;
    server {
        listen 127.0.0.1:$port backlog=4096;
        location / { smart_limit shop; proxy_pass http://origin; }
        location = /control { smart_limit_control; }
    }
}
EOF
        "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr -t >/dev/null 2>&1 \
            || { "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr -t; kill $opid; return 1; }
        "$SL_NGINX" -p "$prefix/" -c conf/nginx.conf -e stderr >"$prefix/logs/stderr.log" 2>&1 &
        local npid=$!
        SL_AUTO_PIDS="$opid $npid"
        local i
        for i in $(seq 100); do
            curl -s -o /dev/null "http://127.0.0.1:$port/control" && break
            sleep 0.1
        done
        local extra=()
        [ -n "$halve_at" ] && extra=(--origin "http://127.0.0.1:$oport" --halve-at "$halve_at")
        ulimit -n 20000 2>/dev/null || true
        "$gen" auto --target "http://127.0.0.1:$port" --page / --assets /a.css,/b.js,/c.png \
            --arrivals "$arrivals" --seconds "$secs" --label "$label" \
            --series "$out/$label.csv" "${extra[@]}" >"$out/$label.json"
        kill "$npid" $opid 2>/dev/null; wait "$npid" $opid 2>/dev/null || true
        SL_AUTO_PIDS=""
        cat "$out/$label.json"
    }

    local rows=() label
    row() {  # row JSON: one table row
        python3 -c 'import json,sys
r=json.loads(sys.argv[1])
print("| {label} | {goodput:.1f} | {goodput_second_half:.1f} | {origin_p50_ms} | {origin_p99_ms} | {origin_5xx} | {broken} | {settled_s} | {m} |".format(m=r["max_active"][-1] if r["max_active"] else 0, **r))' "$1"
    }
    sl_banner "sweep: fixed max_active, far too high, far too low, auto ($seconds s each)"
    for n in $sweep; do
        rows+=("$(row "$(one_run "fixed-$n" "$n" "$seconds")")")
    done
    if [ "$cold" = 0 ]; then
        rows+=("$(row "$(one_run "fixed-1000" 1000 "$seconds")")")
        rows+=("$(row "$(one_run "fixed-10" 10 "$seconds")")")
    fi
    rows+=("$(row "$(one_run "auto" "auto:10..2000" "$seconds")")")
    local best
    best="$(for n in $sweep; do python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["goodput"], sys.argv[2]) if r["origin_p99_ms"] <= 1.5*int(sys.argv[3]) else None' "$out/fixed-$n.json" "$n" "$target"; done | sort -g | tail -1 | awk '{print $2}')"
    if [ "$cold" = 0 ]; then
        sl_banner "the origin's capacity halved $halve s in ($((seconds + 30)) s each)"
        rows+=("$(row "$(one_run "auto-halved" "auto:10..2000" $((seconds + 30)) "$halve")")")
        [ -n "$best" ] && rows+=("$(row "$(one_run "fixed-$best-halved" "$best" $((seconds + 30)) "$halve")")")
    fi
    echo
    echo "store $store; origin: capacity $capacity, service ${service} ms, queue $queue; arrivals $arrivals/s; stay 10-20 s; origin_latency=${target}ms; best fixed (p99 <= 1.5 x target): ${best:-none}"
    echo
    echo "| run | goodput (pages/s) | goodput, 2nd half | origin p50 (ms) | origin p99 (ms) | origin 5xx | broken pages | max_active settled (s) | max_active at the end |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    for label in auto-halved "fixed-$best-halved"; do
        [ -f "$out/$label.json" ] || continue
        python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
print("{label}: capacity {h}; from 30 s after the halving: origin p99 {after_halving_p99_ms} ms, 5xx {after_halving_5xx}".format(h=r["halved"], **r))' "$out/$label.json"
    done
    python3 "$root/scripts/lib/plot-auto.py" "$out" || true
    echo "(runs: $out/*.json, per-second series $out/*.csv, plotted in $out/report.svg)"
}
