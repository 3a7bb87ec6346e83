#!/usr/bin/env bash
# Five million mutual-TLS connections, each a full TLS 1.3 handshake with a
# client certificate, one request and a close, counted by nginx itself: its
# access log has one line per request with the status and the outcome of
# its check of the client's certificate ($ssl_client_verify).
#
#   examples/mtls-5m/run.sh                          # 5,000,000 connections, 64 at once
#   CONNECTIONS=200000 examples/mtls-5m/run.sh
#   CONNECTIONS=2000 CONCURRENT=16 examples/mtls-5m/run.sh   # what the test suite runs
#
# env: CONNECTIONS (default 5000000), CONCURRENT (connections open or
# opening at once, default 64: the report's 64 workers), TIMEOUT (each
# connection's limit, default 10s), SOURCES (local addresses to connect
# from, default 127.0.0.2-127.0.0.50; 'none' for one address),
# NGINX_WORKERS (default 1: one nginx worker pinned to CPU 0 and throng's
# one thread to CPU 1; more: that many workers and nothing pinned), THRONG
# (path to throng), OUT (results, default ./mtls-5m-results).
#
# nginx has its session cache and tickets off, so every connection is a
# full handshake (the script checks that none was resumed). The script
# exits 1 when nginx's count of served requests (status 200 and client
# certificate SUCCESS, none resumed) differs from throng's ok count, or
# when 0.1% or more of the connections failed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
throng="${THRONG:-$root/target/release/throng}"
n="${CONNECTIONS:-5000000}"
concurrent="${CONCURRENT:-64}"
timeout="${TIMEOUT:-10s}"
sources="${SOURCES:-127.0.0.2-127.0.0.50}"
nginx_workers="${NGINX_WORKERS:-1}"
out="${OUT:-$PWD/mtls-5m-results}"

if [[ $# -gt 0 ]]; then
    echo "usage: $0   (env: CONNECTIONS, CONCURRENT, TIMEOUT, SOURCES, NGINX_WORKERS, THRONG=path/to/throng, OUT=results-dir)" >&2
    exit 2
fi
if ! [[ "$n" =~ ^[0-9]+$ && "$concurrent" =~ ^[0-9]+$ && "$nginx_workers" =~ ^[0-9]+$ ]] ||
    ((n < 1 || concurrent < 1 || concurrent > 4000 || nginx_workers < 1 || nginx_workers > 64)); then
    echo "mtls-5m: CONNECTIONS must be a count of at least 1 (got '$n'), CONCURRENT 1-4000 (got '$concurrent')," \
        "NGINX_WORKERS 1-64 (got '$nginx_workers')" >&2
    exit 2
fi
for tool in nginx openssl python3 taskset curl; do
    command -v "$tool" >/dev/null || {
        echo "mtls-5m: '$tool' is missing; install it (apt-get install nginx-light openssl python3 util-linux curl)" >&2
        exit 2
    }
done
if ! nginx -V 2>&1 | grep -q -- --with-http_ssl_module; then
    echo "mtls-5m: this nginx has no SSL module; install one that has (apt-get install nginx-light)" >&2
    exit 2
fi
if [[ ! -x "$throng" ]]; then
    echo "mtls-5m: no throng binary at $throng; build it with 'cargo build --release' or set THRONG" >&2
    exit 2
fi
cores=$(nproc)

tmp="$(mktemp -d)"
nginx_pid="" load_pid="" sampler_pid=""
cleanup() {
    set +e
    [[ -n "$load_pid" ]] && kill -INT "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null
    [[ -n "$sampler_pid" ]] && kill "$sampler_pid" 2>/dev/null && wait "$sampler_pid" 2>/dev/null
    if [[ -n "$nginx_pid" ]]; then
        # SIGTERM: the master stops its worker, then itself; SIGKILL after 10 s.
        kill -TERM "$nginx_pid" 2>/dev/null
        for _ in $(seq 1 100); do
            kill -0 "$nginx_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$nginx_pid" 2>/dev/null
        wait "$nginx_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The PKI: a CA, a server certificate for 127.0.0.1 and a client
# certificate, all ECDSA P-256 (the keys in PKCS#8).
pki="$tmp/pki"
mkdir -p "$pki"
(
    cd "$pki"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key
    openssl req -x509 -new -key ca.key -sha256 -days 2 -subj /CN=throng-mtls-5m-ca -out ca.pem
    for who in server client; do
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$who.key"
        openssl req -new -key "$who.key" -subj "/CN=throng-mtls-5m-$who" -out "$who.csr"
    done
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    for who in server client; do
        openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -sha256 \
            -extfile "$who.ext" -out "$who.pem"
    done
) >"$tmp/openssl.log" 2>&1 || {
    echo "mtls-5m: openssl could not make the certificates:" >&2
    cat "$tmp/openssl.log" >&2
    exit 1
}
# nginx's worker runs as an unprivileged user; it reads nothing from $tmp
# but writes its log there through the master's descriptors.
chmod 755 "$tmp"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# One line per request: status, the client certificate check, whether the
# session was resumed ('r') or a full handshake ('.'), the protocol.
cat >"$tmp/nginx.conf" <<CONF
worker_processes $nginx_workers;
worker_rlimit_nofile 20000;
error_log $tmp/error.log error;
pid $tmp/nginx.pid;
daemon off;
events { worker_connections 10000; use epoll; }
http {
  log_format mtls '\$status \$ssl_client_verify \$ssl_session_reused \$ssl_protocol';
  access_log $tmp/access.log mtls buffer=256k flush=1s;
  client_body_temp_path $tmp/b; proxy_temp_path $tmp/p; fastcgi_temp_path $tmp/f;
  uwsgi_temp_path $tmp/u; scgi_temp_path $tmp/s;
  server {
    listen 127.0.0.1:$port ssl backlog=4096;
    ssl_certificate $pki/server.pem;
    ssl_certificate_key $pki/server.key;
    ssl_client_certificate $pki/ca.pem;
    ssl_verify_client on;
    ssl_protocols TLSv1.3;
    ssl_session_cache off;
    ssl_session_tickets off;
    location / { return 200 "ok\n"; }
  }
}
CONF
# One nginx worker: nginx on the first core, throng on the second (on a
# one-core machine both share it). More workers: the kernel places them all.
pin_nginx=() pin_throng=() placement="nothing pinned, $nginx_workers nginx workers"
if ((nginx_workers == 1)); then
    throng_cpu=$((cores > 1 ? 1 : 0))
    pin_nginx=(taskset -c 0) pin_throng=(taskset -c "$throng_cpu")
    placement="nginx on CPU 0, throng on CPU $throng_cpu"
fi
"${pin_nginx[@]}" nginx -p "$tmp" -c "$tmp/nginx.conf" >/dev/null 2>"$tmp/start.log" &
nginx_pid=$!
ca="$pki/ca.pem" cert="$pki/client.pem" key="$pki/client.key"
started=""
for _ in $(seq 1 100); do
    status=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" --cert "$cert" --key "$key" \
        "https://127.0.0.1:$port/" 2>/dev/null || true)
    if [[ $status == 200 ]]; then
        started=1
        break
    fi
    sleep 0.1
done
if [[ -z $started ]]; then
    echo "mtls-5m: nginx did not start (or did not answer curl with the client certificate):" >&2
    cat "$tmp/start.log" "$tmp/error.log" >&2 2>/dev/null
    exit 1
fi
# The server refuses a client without a certificate: mTLS is really on.
refused=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" "https://127.0.0.1:$port/" 2>/dev/null || true)
if [[ $refused != 400 ]]; then
    echo "mtls-5m: nginx answered a client without a certificate with '$refused', not 400: ssl_verify_client is not on" >&2
    exit 1
fi
echo "mTLS check: nginx refuses a client without a certificate (400)"
# The log's lines so far (the probes) are not the run's.
sleep 1.2
before=$(wc -l <"$tmp/access.log")

# nginx's worker CPU, in clock ticks, from /proc (pidstat is not always there).
worker_ticks() {
    local total=0 p t
    for p in $(ps -o pid= --ppid "$nginx_pid" 2>/dev/null); do
        t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || true)
        total=$((total + ${t:-0}))
    done
    echo "$total"
}
mkdir -p "$out"
source_args=()
[[ $sources != none ]] && source_args=(--source "$sources")
echo "mtls-5m: $n connections, $concurrent at once, to https://127.0.0.1:$port/" \
    "($placement${source_args:+, from $sources})"
ticks0=$(worker_ticks)
hz=$(getconf CLK_TCK)
# Every 5 s: the share of a core each side used over those seconds.
sampler() {
    local prev_n prev_t now_n now_t
    echo "t_s,nginx_worker_cpu_pct,throng_cpu_pct" >"$out/cpu.csv"
    prev_n=$(worker_ticks) prev_t=0 t=0
    while sleep 5; do
        t=$((t + 5))
        now_n=$(worker_ticks)
        now_t=$(awk '{print $14 + $15}' "/proc/$load_pid/stat" 2>/dev/null || echo "$prev_t")
        echo "$t,$(((now_n - prev_n) * 100 / (5 * hz))),$(((now_t - prev_t) * 100 / (5 * hz)))" >>"$out/cpu.csv"
        prev_n=$now_n prev_t=$now_t
    done
}
# In the background and waited for, so that a signal to this script runs
# its trap at once (bash defers traps while a foreground job runs).
"${pin_throng[@]}" "$throng" storm "https://127.0.0.1:$port/" --count "$n" \
    --max-concurrent "$concurrent" --workers 1 --tls-version 1.3 --timeout "$timeout" \
    --cacert "$ca" --cert "$cert" --key "$key" "${source_args[@]}" \
    --json "$out/storm.json" -q >"$out/storm.txt" 2>&1 &
load_pid=$!
sampler &
sampler_pid=$!
status=0
wait "$load_pid" || status=$?
load_pid=""
kill "$sampler_pid" 2>/dev/null && wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""
nginx_cpu_s=$(awk -v a="$ticks0" -v b="$(worker_ticks)" -v hz="$hz" 'BEGIN {printf "%.1f", (b - a) / hz}')
if [[ ! -s "$out/storm.json" ]]; then
    echo "mtls-5m: throng storm exited with status $status and wrote no result:" >&2
    cat "$out/storm.txt" >&2
    exit 1
fi
# A storm with failed connections exits non-zero; the checks below judge
# whether there were too many.
((status == 0)) || echo "mtls-5m: throng storm exited with status $status (see $out/storm.txt)"
# nginx's graceful stop (SIGQUIT) writes out its buffered log lines.
kill -QUIT "$nginx_pid" 2>/dev/null || true
for _ in $(seq 1 100); do
    kill -0 "$nginx_pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$nginx_pid" 2>/dev/null; then
    echo "mtls-5m: nginx did not stop within 10 s of SIGQUIT; its log may lack its last lines" >&2
    exit 1
fi
wait "$nginx_pid" 2>/dev/null || true
nginx_pid=""
tail -n "+$((before + 1))" "$tmp/access.log" >"$out/access.log"
cp "$tmp/nginx.conf" "$out/nginx.conf"

python3 - "$out" "$nginx_cpu_s" <<'EOF'
import collections, json, sys
out, nginx_cpu = sys.argv[1], float(sys.argv[2])
r = json.load(open(f"{out}/storm.json"))
m, g = r["measurements"], r["generator"]
conn, req = m["connections"], m["requests"]
lines = collections.Counter(tuple(l.split()[:3]) for l in open(f"{out}/access.log"))
served = sum(c for (status, verify, _), c in lines.items() if status == "200" and verify == "SUCCESS")
resumed = sum(c for (_, _, reused), c in lines.items() if reused == "r")
other = sum(lines.values()) - served
failed = conn["attempted"] - req["ok"]
rate = failed / conn["attempted"] if conn["attempted"] else 1.0
tls = m["phases"].get("tls", {})
seconds = r["duration_s"]
def ms(q):  # the result's histogram figures are in microseconds (p50_us; p50 before result schema v2)
    return tls.get(f"{q}_us", tls.get(q, 0)) / 1e3
summary = [
    "| Test Scale | Connections | Workers | Success Rate | Throughput | Avg Handshake | Duration |",
    "|---|---:|---:|---:|---:|---:|---:|",
    f"| {conn['attempted']:,} | {conn['attempted']:,} | 1 thread, {r['plan'].get('max_concurrent', '')} at once "
    f"| {100 * req['ok'] / max(conn['attempted'], 1):.2f}% | {req['ok'] / seconds:,.0f}/s "
    f"| {ms('mean'):.2f}ms | {seconds:,.0f}s |",
    "",
    f"throng:  attempted {conn['attempted']}, connected {conn['ok']}, requests ok {req['ok']}, "
    f"errors {dict(conn['errors']) | dict(req['errors'])}",
    f"throng:  handshake (tls phase) mean {ms('mean'):.2f} ms, p50 {ms('p50'):.2f} ms, p99 {ms('p99'):.2f} ms",
    f"throng:  CPU {g['cpu_user_s']:.1f} s user + {g['cpu_system_s']:.1f} s system, "
    f"peak memory {g['peak_rss_bytes'] / 1e6:.1f} MB",
    f"throng:  I/O {'io_uring' if g.get('io') == 'uring' else g.get('io', 'epoll')}",
    f"nginx:   {served} requests served with 200 and client certificate SUCCESS "
    f"({other} other lines, {resumed} resumed sessions), worker CPU {nginx_cpu:.1f} s",
]
print("\n".join(summary))
open(f"{out}/summary.txt", "w").write("\n".join(summary) + "\n")
bad = []
if served != req["ok"]:
    bad.append(f"nginx served {served} but throng counted {req['ok']} ok")
if resumed:
    bad.append(f"{resumed} sessions were resumed: not every handshake was a full one")
if rate >= 0.001:
    bad.append(f"{failed} of {conn['attempted']} failed ({100 * rate:.3f}%, limit 0.1%)")
for b in bad:
    print(f"mtls-5m: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
echo "results: $out"
