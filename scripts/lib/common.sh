# shellcheck shell=bash
# Shared helpers for scripts/test, scripts/demo and scripts/bench.
# Source it: `source "$(dirname "$0")/lib/common.sh"`. Defines only functions.

# Absolute path of the repository root (the folder holding Cargo.toml).
sl_root() {
    local here
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    printf '%s\n' "$here"
}

# Banner for a stage of a script.
sl_banner() {
    printf '\n==== %s ====\n' "$*"
}

# sl_install_deps [build|bench|fuzz|package|test]
# Installs the Debian packages a purpose needs, if any is missing (default: test, which is
# everything). Quiet when everything is present; runs `apt-get update` once, only when needed.
#   build    building the module and running the demo (no Redis, no browser)
#   bench    + redis-server (the Redis variant) and wrk
#   fuzz     make and gcc, to build AFL++ from cargo-afl's source (scripts/fuzz)
#   package  + what scripts/package needs to configure Debian's nginx source and assemble the
#            .deb (t/500-package.t runs it)
#   test     + Test::Base (the t/ harness), redis-sentinel (t/250-redis-sentinel.t), openssl
#            (the throw-away CA of t/240-redis-auth-tls.t), Chromium, its driver and a Japanese
#            font (t/350-browser.t), Prometheus 2.42 with promtool (t/510-prometheus.t: the
#            contrib/ rules and dashboard against a real Prometheus), nghttp2-client (nghttp and
#            h2load: several streams on one h2c connection in t/360-http2.t, which Debian 12's
#            curl 7.88 cannot reuse), faketime (libfaketime: the wall-clock steps of
#            t/080-clock-step.t), python3-venv (the venv of the HTTP/3 client: aioquic from
#            PyPI, t/361-http3.t), and playwright-core from npm; + the fuzz and package packages
SL_BUILD_PACKAGES=(libpcre2-dev libclang1-14 libclang-common-14-dev jq curl)
SL_BENCH_PACKAGES=(redis-server wrk)
SL_FUZZ_PACKAGES=(make gcc)
# scripts/package: gcc, make, libssl-dev and zlib1g-dev for `./configure` with Debian's nginx
# flags (--with-http_ssl_module, gzip); dpkg-dev for dpkg-shlibdeps (the package's library
# Depends); binutils for strip. nginx-dev itself is fetched with `apt-get download` and
# unpacked under target/deb, not installed: installing it would pull in nginx, debhelper and
# the -dev packages of every Debian nginx module. t/500-package.t installs the built package
# with apt-get, which pulls Debian's nginx, and purges what it installed afterwards.
SL_PACKAGE_PACKAGES=(gcc make libssl-dev zlib1g-dev dpkg-dev binutils)
SL_TEST_PACKAGES=(libtest-base-perl redis-sentinel openssl chromium chromium-driver
                  fonts-ipafont-gothic nghttp2-client faketime python3-venv
                  prometheus)  # + promtool, for t/510-prometheus.t; the test runs its own on a
                               # free port with temp storage (under systemd the package also
                               # starts a service on :9090, which the test neither uses nor needs)
sl_install_deps() {
    local purpose="${1:-test}" wanted=() missing=() p
    case "$purpose" in
        build) wanted=("${SL_BUILD_PACKAGES[@]}") ;;
        bench) wanted=("${SL_BUILD_PACKAGES[@]}" "${SL_BENCH_PACKAGES[@]}") ;;
        fuzz) wanted=("${SL_FUZZ_PACKAGES[@]}") ;;
        package) wanted=("${SL_BUILD_PACKAGES[@]}" "${SL_PACKAGE_PACKAGES[@]}") ;;
        test) wanted=("${SL_BUILD_PACKAGES[@]}" "${SL_BENCH_PACKAGES[@]}" "${SL_FUZZ_PACKAGES[@]}"
                      "${SL_PACKAGE_PACKAGES[@]}" "${SL_TEST_PACKAGES[@]}") ;;
        *) echo "sl_install_deps: purpose must be build, bench, fuzz, package or test, not '$purpose'" >&2; return 2 ;;
    esac
    for p in "${wanted[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "installing missing packages: ${missing[*]}"
        local sudo=()
        if [ "$(id -u)" -ne 0 ]; then
            command -v sudo >/dev/null 2>&1 || { echo "need root (or sudo) to install: ${missing[*]}" >&2; return 1; }
            sudo=(sudo)
        fi
        export DEBIAN_FRONTEND=noninteractive
        "${sudo[@]}" apt-get update -qq </dev/null >/dev/null || return 1
        "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null || return 1
    fi
    if [ "$purpose" = test ]; then
        sl_install_browser_driver || return 1
        sl_install_h3_client || return 1
    fi
}

# playwright-core (npm registry, pinned in t/browser/package-lock.json) drives Chromium in
# t/350-browser.t, and jose verifies admission tokens in t/380-tokens.t (a JWT library
# independent of the module's); installed into t/browser/node_modules (git-ignored) when missing.
sl_install_browser_driver() {
    local dir
    dir="$(sl_root)/t/browser"
    [ -d "$dir/node_modules/playwright-core" ] && [ -d "$dir/node_modules/jose" ] && return 0
    command -v npm >/dev/null 2>&1 || { echo "npm is missing: cannot install playwright-core for t/350-browser.t" >&2; return 1; }
    echo "installing playwright-core (npm ci in t/browser)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error </dev/null >/dev/null) || return 1
}

# aioquic (PyPI, pinned here) is the HTTP/3 client of t/361-http3.t (t/lib/h3_client.py):
# Debian 12's curl has no HTTP/3. PyJWT (with the cryptography aioquic already brings) is the
# Python JWT library t/380-tokens.t verifies admission tokens with. Installed with Debian's
# own python3 into the venv target/py (git-ignored) when missing; wheels, no compiler needed.
SL_AIOQUIC_VERSION=1.7.2
SL_PYJWT_VERSION=2.10.1
sl_install_h3_client() {
    local venv
    venv="$(sl_root)/target/py"
    if [ -x "$venv/bin/python" ] &&
        [ "$("$venv/bin/python" -c 'import aioquic, jwt; print(aioquic.__version__, jwt.__version__)' 2>/dev/null)" = "$SL_AIOQUIC_VERSION $SL_PYJWT_VERSION" ]; then
        return 0
    fi
    echo "installing aioquic $SL_AIOQUIC_VERSION and PyJWT $SL_PYJWT_VERSION (pip, into target/py)"
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv" || return 1
    "$venv/bin/pip" install -q --disable-pip-version-check --no-input \
        "aioquic==$SL_AIOQUIC_VERSION" "PyJWT==$SL_PYJWT_VERSION" </dev/null || return 1
}

# sl_build debug|release
# Builds the module (root package) and exports:
#   SL_NGINX   the vendored nginx binary built by nginx-sys
#   SL_MODULE  absolute path of libngx_http_smart_limit_module.so
sl_build() {
    local profile="${1:-debug}" flag=() root json
    case "$profile" in
        debug) ;;
        release) flag=(--release) ;;
        *) echo "sl_build: profile must be debug or release, not '$profile'" >&2; return 2 ;;
    esac
    root="$(sl_root)"
    json="$(mktemp)"
    # Diagnostics are rendered on stderr as usual; the JSON messages go to the file.
    if ! (cd "$root" && cargo build -p smart_limit "${flag[@]}" \
            --message-format=json-render-diagnostics >"$json"); then
        rm -f "$json"
        echo "sl_build: cargo build ($profile) failed" >&2
        return 1
    fi
    local out_dir so
    out_dir="$(jq -r 'select(.reason == "build-script-executed"
                             and (.package_id | test("nginx-sys"))) | .out_dir' "$json" | tail -n1)"
    so="$(jq -r 'select(.reason == "compiler-artifact"
                        and .target.name == "ngx_http_smart_limit_module")
                 | .filenames[] | select(endswith(".so"))' "$json" | tail -n1)"
    rm -f "$json"
    [ -n "$so" ] || so="$root/target/$profile/libngx_http_smart_limit_module.so"
    if [ -z "$out_dir" ] || [ ! -x "$out_dir/objs/nginx" ]; then
        echo "sl_build: could not find the vendored nginx binary (out_dir='$out_dir')" >&2
        return 1
    fi
    if [ ! -f "$so" ]; then
        echo "sl_build: module not found at $so" >&2
        return 1
    fi
    SL_NGINX="$out_dir/objs/nginx"
    SL_MODULE="$(cd "$(dirname "$so")" && pwd)/$(basename "$so")"
    export SL_NGINX SL_MODULE
}

# The benchmarks' start: with build=1 (the first argument) the Debian packages and a release
# build of nginx and the module; SL_NGINX and SL_MODULE must then be set; the load generator
# is built (release) and SL_BENCH_GEN names it.
sl_bench_setup() {
    if [ "$1" = 1 ]; then
        sl_banner "dependencies and release build"
        sl_install_deps bench
        sl_build release
    fi
    : "${SL_NGINX:?SL_NGINX is not set}"
    : "${SL_MODULE:?SL_MODULE is not set}"
    (cd "$(sl_root)" && cargo build --quiet --release -p smart_limit_bench) || return 1
    SL_BENCH_GEN="$(sl_root)/target/release/smart-limit-bench"
}

# Prints a free TCP port on 127.0.0.1 (bound then released by the kernel's choice).
sl_free_port() {
    perl -MIO::Socket::INET -e '
        my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
                                      Proto => "tcp", Listen => 1, ReuseAddr => 1)
            or die "sl_free_port: $!\n";
        print $s->sockport, "\n";'
}
