#!/usr/bin/env bash
# Seed 002: nginx answering instantly, without and with a WAF, 10,000
# requests at concurrency 1000 with the seed's long query string, in ab's
# layout; then the two sides compared over several runs each.
#
#   examples/waf-ab/run.sh                 # 5 runs per side of 10,000 requests at -c 1000
#   RUNS=2 REQUESTS=2000 examples/waf-ab/run.sh
#
# The seed's WAF was naxsi; Debian ships ModSecurity (libnginx-mod-http-modsecurity)
# with the OWASP Core Rule Set (modsecurity-crs), so that is the WAF here,
# with SecRuleEngine On. The seed's `location / { return 200; }` is replaced
# by an empty static page: `return` answers in nginx's rewrite phase, before
# ModSecurity looks at the request, so with `return 200` the WAF inspects
# nothing (the script checks that the WAF is really on: an XSS probe must get 403).
#
# nginx runs one worker pinned to CPU 0, throng one thread on CPU 1.
# Results go to OUT (default ./waf-ab-results).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
throng="${THRONG:-$root/target/release/throng}"
runs="${RUNS:-5}"
requests="${REQUESTS:-10000}"
concurrency="${CONCURRENCY:-1000}"
timeout="${TIMEOUT:-10s}"
out="${OUT:-$PWD/waf-ab-results}"
module=/usr/lib/nginx/modules/ngx_http_modsecurity_module.so
crs=/usr/share/modsecurity-crs/rules

if [[ $# -gt 0 ]]; then
    echo "usage: $0   (env: RUNS, REQUESTS, CONCURRENCY, TIMEOUT, THRONG=path/to/throng, OUT=results-dir)" >&2
    exit 2
fi
if [[ ! -e $module || ! -d $crs ]] || ! command -v nginx >/dev/null; then
    if [[ $(id -u) -eq 0 ]]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            nginx-light libnginx-mod-http-modsecurity modsecurity-crs >/dev/null
    else
        echo "waf-ab: needs nginx, libnginx-mod-http-modsecurity and modsecurity-crs;" \
            "install them (sudo apt-get install ...) or run this as root" >&2
        exit 2
    fi
fi
if [[ ! -x "$throng" ]]; then
    echo "waf-ab: no throng binary at $throng; build it with 'cargo build --release' or set THRONG" >&2
    exit 2
fi

tmp="$(mktemp -d)"
pids=() load_pid=""
cleanup() {
    [[ -n "$load_pid" ]] && kill -INT "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null || true
    # SIGTERM: each nginx master stops its workers, then itself.
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$tmp/www" && : > "$tmp/www/index.html"
# nginx's workers run as an unprivileged user: they must reach the page.
chmod 755 "$tmp" "$tmp/www" && chmod 644 "$tmp/www/index.html"
cat > "$tmp/rules.conf" <<RULES
Include /etc/nginx/modsecurity.conf
SecRuleEngine On
SecAuditEngine Off
Include /etc/modsecurity/crs/crs-setup.conf
Include /etc/modsecurity/crs/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf
Include $crs/*.conf
Include /etc/modsecurity/crs/RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf
RULES

start_nginx() { # start_nginx NAME on|off; sets $port
    local name=$1 waf=$2 dir
    port=$(free_port)
    dir="$tmp/$name"
    mkdir -p "$dir"
    cat > "$dir/nginx.conf" <<CONF
load_module $module;
worker_processes 1;
worker_rlimit_nofile 20000;
error_log $dir/error.log error;
pid $dir/nginx.pid;
daemon off;
events { worker_connections 10000; use epoll; }
http {
  access_log off;
  keepalive_timeout 65;
  client_body_temp_path $dir/b; proxy_temp_path $dir/p; fastcgi_temp_path $dir/f;
  uwsgi_temp_path $dir/u; scgi_temp_path $dir/s;
  server {
    listen 127.0.0.1:$port backlog=4096;
    modsecurity $waf;
    modsecurity_rules_file $tmp/rules.conf;
    location / { root $tmp/www; index index.html; }
  }
}
CONF
    taskset -c 0 nginx -p "$dir" -c "$dir/nginx.conf" >/dev/null 2>"$dir/start.log" &
    pids+=($!)
    for _ in $(seq 200); do
        if curl -s -o /dev/null "http://127.0.0.1:$port/"; then return; fi
        sleep 0.05
    done
    echo "waf-ab: nginx ($name) did not start:" >&2
    cat "$dir/start.log" >&2
    exit 1
}

start_nginx plain off
plain=$port
start_nginx modsecurity on
waf=$port
probe=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$waf/?q=<script>alert(1)</script>")
if [[ $probe != 403 ]]; then
    echo "waf-ab: the WAF let an XSS probe through (status $probe): it is not inspecting requests" >&2
    exit 1
fi
echo "WAF check: an XSS probe gets 403 from the ModSecurity side"

query='/?foobar=AAAAAA&bar=BBBBBBBBBBBBB&xx=AAAAAAAAAAAAA&rere=ZZZZZZZZZZZZZZZZZZZ&jzrlk=AZJEJAJE12313123123131'
mkdir -p "$out"
for side in plain modsecurity; do
    port=$plain
    [[ $side == modsecurity ]] && port=$waf
    echo "== $side: $runs runs of $requests requests at concurrency $concurrency"
    # In the background and waited for, so that a signal to this script
    # runs its trap at once (bash defers traps while a foreground job runs).
    taskset -c 1 "$throng" http "http://127.0.0.1:$port$query" -c "$concurrency" -n "$requests" -t 1 \
        --timeout "$timeout" --repeat "$runs" --format ab --json "$out/$side.json" -q > "$out/$side.txt" &
    load_pid=$!
    wait "$load_pid"
    load_pid=""
    cat "$out/$side.txt"
done
"$throng" compare "$out/plain.json" "$out/modsecurity.json" --label A=plain --label B=modsecurity \
    | tee "$out/compare.txt"
"$throng" compare "$out/plain.json" "$out/modsecurity.json" --label A=plain --label B=modsecurity \
    --format ab > "$out/compare-ab.txt"
echo "results: $out"
