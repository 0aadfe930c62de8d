# shellcheck shell=bash
# scripts/bench --sync-calls: how long a synced room's script calls take with a long line
# (sourced by scripts/bench; run `scripts/bench --sync-calls --help`).
#
# The scenario of t/273-sync-bounded.t, timed: two nginx nodes (one worker each, pinned to CPU
# 0 by worker_cpu_affinity) on one redis-server (pinned to the last CPU by the probe's --pin,
# the probe itself on the others), a room with `sync=500ms max_active=5 flood=off`. The probe
# (t/lib/sync_bounded.pl --times) puts --waiting waiters straight into the room's sorted sets,
# then --clients new clients take places on the two nodes, round-robin, 1 ms apart (--pace-ms),
# and poll twice more. Redis's SLOWLOG, at 0 us, records every call with its duration (wall
# time inside Redis, the script's own work and nothing of the network); MONITOR gives each
# call's sightings and the departed waiters it dropped, matched to its SLOWLOG entry by the
# call's fence (node, generation, window, sequence).
#
# Two scenarios, each on a fresh Redis and fresh nodes:
#   line stays    the line was seen just now (600 s ahead, so none of it leaves): the calls
#                 carry the newcomers' sightings into a line of --waiting;
#   line leaves   the line was last seen 19 s before (presence=20s): while the newcomers come,
#                 every call also drops departed waiters (at most 200 less the waiters it
#                 reports, at least 50).
# Printed: one markdown row per group of sync calls (all, by sightings a call, those that
# dropped departed waiters) with the calls' sightings and drops (median, max), the line's size
# at the start and the end, and their durations in us (median, p95, max).
#
# MONITOR costs the calls something (Redis copies every command the script runs to the
# monitor): --no-monitor times the same scenario without it (all syncs only: without MONITOR
# the sightings of a call are not known). On a machine where other processes run, they share
# Redis's CPU and preempt it mid-call (SLOWLOG counts wall time): as root, Redis runs at a
# real-time priority (SCHED_FIFO 10, chrt) on its CPU; --no-rt leaves it at the normal one.

sync_calls_usage() {
    cat <<EOF
usage: scripts/bench --sync-calls [--waiting N] [--clients N] [--pace-ms MS] [--no-monitor]
                                  [--no-rt] [--debug] [--no-build] [--keep]

  --waiting N    waiters put into the line first (default 100000)
  --clients N    new clients taking places during the run (default 1500)
  --pace-ms MS   the probe's pause between two requests (default 1)
  --no-monitor   time without MONITOR (every sync in one row; no sightings per call)
  --no-rt        leave redis-server at its normal priority (default: SCHED_FIFO 10 as root)
  --debug        build and use the debug module (default: release)
  --no-build     use SL_NGINX and SL_MODULE from the environment
  --keep         keep the nginx prefixes (configs, logs)
EOF
}

sync_calls_main() {
    local waiting=100000 clients=1500 pace=1 monitor=1 profile=release build=1 keep=0 rt=1
    while [ "$#" -gt 0 ]; do
        case "$1" in
            --waiting) waiting="$2"; shift 2 ;;
            --clients) clients="$2"; shift 2 ;;
            --pace-ms) pace="$2"; shift 2 ;;
            --no-monitor) monitor=0; shift ;;
            --no-rt) rt=0; shift ;;
            --debug) profile=debug; shift ;;
            --no-build) build=0; shift ;;
            --keep) keep=1; shift ;;
            -h|--help) sync_calls_usage; return 0 ;;
            *) echo "scripts/bench --sync-calls: unknown option '$1'" >&2; sync_calls_usage >&2; return 2 ;;
        esac
    done
    for n in "$waiting" "$clients"; do
        [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/bench --sync-calls: '$n' is not a positive number" >&2; return 2; }
    done
    [[ "$pace" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "scripts/bench --sync-calls: --pace-ms '$pace' is not a number" >&2; return 2; }
    [ "$(nproc)" -ge 2 ] || { echo "scripts/bench --sync-calls: needs two CPUs (Redis gets one to itself)" >&2; return 1; }
    if [ "$build" = 1 ]; then
        sl_banner "dependencies and $profile build"
        sl_install_deps bench
        sl_build "$profile"
    fi
    : "${SL_NGINX:?SL_NGINX is not set}"
    : "${SL_MODULE:?SL_MODULE is not set}"

    local base pids=()
    base="$(mktemp -d "${TMPDIR:-/tmp}/sl-sync-calls.XXXXXX")"
    chmod 755 "$base"
    # shellcheck disable=SC2064
    trap "sync_calls_stop; [ $keep = 1 ] && echo 'kept: $base' >&2 || rm -rf '$base'" EXIT
    sync_calls_stop() {
        local p
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
        pids=()
    }

    local rows=() scenario seen label load0 rt_said="normal priority"
    load0="$(cut -d' ' -f1-3 /proc/loadavg)"
    for scenario in stays leaves; do
        if [ "$scenario" = stays ]; then seen=-600; label="line stays"; else seen=19; label="line leaves"; fi
        sl_banner "$label: $waiting waiting, $clients newcomers on two nodes"
        local d="$base/$scenario" rport ports=() i
        mkdir -p "$d/redis"
        rport="$(sl_free_port)"
        redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no \
            --dir "$d/redis" >"$d/redis/redis.log" 2>&1 &
        pids+=($!)
        for i in 1 2; do
            local p; p="$(sl_free_port)"; ports+=("$p")
            mkdir -p "$d/n$i/conf" "$d/n$i/logs" "$d/n$i/html" "$d/n$i/modules"
            cp "$SL_MODULE" "$d/n$i/modules/ngx_http_smart_limit_module.so"
            echo origin >"$d/n$i/html/index.html"
            echo 5c1e0d4a8b2f3e6d9a7c1b0e4d6f8a2c3b5d7e9f1a0c2e4b6d8f0a1c3e5b7d9f >"$d/n$i/html/fleet.keys"
            cat >"$d/n$i/conf/nginx.conf" <<EOF
load_module $d/n$i/modules/ngx_http_smart_limit_module.so;
worker_processes 1;
worker_cpu_affinity 01;
daemon off;
pid $d/n$i/logs/nginx.pid;
error_log $d/n$i/logs/error.log notice;
events { worker_connections 1024; }
http {
    access_log off;
    default_type text/plain;
    smart_limit_secret $d/n$i/html/fleet.keys;
    smart_limit_zone shop size=16m store=redis redis=127.0.0.1:$rport sync=500ms max_active=5 flood=off;
    server {
        listen 127.0.0.1:$p;
        location / { smart_limit shop; root html; }
        location = /m { smart_limit_metrics; }
    }
}
EOF
            "$SL_NGINX" -p "$d/n$i/" -c conf/nginx.conf -e stderr -t >/dev/null 2>&1 \
                || { "$SL_NGINX" -p "$d/n$i/" -c conf/nginx.conf -e stderr -t; return 1; }
            "$SL_NGINX" -p "$d/n$i/" -c conf/nginx.conf -e stderr >"$d/n$i/logs/stderr.log" 2>&1 &
            pids+=($!)
        done
        # Both nodes in the fleet's picture before the run.
        local up=0
        for i in $(seq 100); do
            if curl -s "http://127.0.0.1:${ports[1]}/m" | grep -q 'smart_limit_fleet_nodes{room="shop"} 2$'; then
                up=1; break
            fi
            sleep 0.1
        done
        [ "$up" = 1 ] || { echo "bench --sync-calls: the two nodes did not meet the fleet" >&2; return 1; }
        local mon=() rtopt=() out
        [ "$monitor" = 1 ] || mon=(--no-monitor)
        [ "$rt" = 1 ] && rtopt=(--rt)
        out="$(perl "$ROOT/t/lib/sync_bounded.pl" --ports "${ports[0]},${ports[1]}" --redis "$rport" \
            --zone shop --waiting "$waiting" --clients "$clients" --seen-ago "$seen" \
            --pace-ms "$pace" --pin "${rtopt[@]}" --times "${mon[@]}" --label "$label" 2>&1)" \
            || { echo "bench --sync-calls: the probe failed:" >&2; echo "$out" >&2; return 1; }
        echo "$out" >&2
        grep -q 'SCHED_FIFO' <<<"$out" && rt_said="SCHED_FIFO 10"
        while IFS= read -r line; do rows+=("$line"); done < <(grep '^|' <<<"$out")
        if grep -qE '\[(alert|crit|emerg|error)\]|exited on signal' "$d"/n*/logs/error.log; then
            echo "bench --sync-calls: errors in nginx's error log:" >&2
            grep -hE '\[(alert|crit|emerg|error)\]|exited on signal' "$d"/n*/logs/error.log | head -3 >&2
        fi
        sync_calls_stop
    done

    echo
    echo "| scenario | calls | count | sightings a call: median (max) | departed dropped a call: median (max) | line (start -> end) | median us | p95 us | max us |"
    echo "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "conditions: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(redis-server --version | awk '{print $3}' | tr -d 'v='); Redis pinned to CPU $(( $(nproc) - 1 )) at $rt_said, the nodes' workers to CPU 0, the probe to the others; $profile build; MONITOR $([ "$monitor" = 1 ] && echo on || echo off); clients paced ${pace} ms; load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end (other processes on the machine share Redis's CPU: SLOWLOG counts wall time)"
    echo "command: scripts/bench --sync-calls --waiting $waiting --clients $clients --pace-ms $pace$([ "$monitor" = 1 ] || echo ' --no-monitor')$([ "$rt" = 1 ] || echo ' --no-rt')$([ "$profile" = debug ] && echo ' --debug')"
}
