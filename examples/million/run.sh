#!/usr/bin/env bash
# One million TCP connections held at once on one machine: `throng serve`
# holds one end of each, `throng storm` the other, both on loopback, each
# spread over as many processes as the per-process descriptor limit needs.
# The count that matters is the server's, taken with `ss`, not throng's.
#
#   sudo examples/million/run.sh                 # 1,000,000 connections
#   sudo examples/million/run.sh 200000          # fewer
#   sudo examples/million/run.sh 200000 --rate 15000 --plateau 20
#
# It sets the kernel knobs the run needs (see README.md here), records what
# they were, and puts them back on exit — Ctrl-C and failures included —
# after stopping every process it started.
#
# Results go to OUT (default ./million-results): storm.json and storm.txt
# (throng's report), ss.csv (the server side's established connections as ss
# counts them, over time), curve.csv (every 2 s: the kernel's TCP sockets,
# generator RSS, server RSS, TCP buffer pages, slab growth, generator PSS,
# server PSS) and summary.txt. RSS summed over processes counts the pages
# they share (the program's own, ~7 MB) once per process; PSS
# (/proc/PID/smaps_rollup) splits each shared page among its sharers, so
# its sum is what the processes take together: the generator's memory.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
throng="${THRONG:-$root/target/release/throng}"
out="${OUT:-$PWD/million-results}"
n=1000000 rate=20000 plateau=30
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    n=$1
    shift
fi
while [[ $# -gt 0 ]]; do
    case "$1" in
    --rate) rate=${2:?--rate needs connections per second}; shift 2 ;;
    --plateau) plateau=${2:?--plateau needs seconds}; shift 2 ;;
    *)
        echo "usage: $0 [CONNECTIONS] [--rate PER_S] [--plateau SECONDS]   (env: THRONG, OUT)" >&2
        exit 2
        ;;
    esac
done
if ! [[ "$n" =~ ^[0-9]+$ && "$rate" =~ ^[0-9]+$ && "$plateau" =~ ^[0-9]+$ ]] ||
    ((n < 1000 || n > 4000000 || rate < 100 || plateau < 5 || plateau > 3600)); then
    echo "million: CONNECTIONS must be 1000-4000000, --rate at least 100, --plateau 5-3600 seconds" >&2
    exit 2
fi
if [[ ! -x "$throng" ]]; then
    echo "million: no throng binary at $throng; build it with 'cargo build --release' or set THRONG" >&2
    exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "million: needs root to set the sysctls it explains in README.md; run it with sudo" >&2
    exit 2
fi
for tool in ss sysctl; do
    command -v "$tool" >/dev/null || {
        echo "million: '$tool' is missing (apt-get install iproute2 procps)" >&2
        exit 2
    }
done

# Sizing. One process may hold about (hard descriptor limit - a reserve)
# sockets; the kernel spreads accepted connections over the server's
# SO_REUSEPORT listeners by a hash, not evenly, so each server process is
# given room for 25% more than its average share.
hard=$(ulimit -Hn)
per_proc=$((hard - 500))
server_procs=$(((n * 5 / 4 + per_proc - 1) / per_proc))
# ~10,000 connections per source address keeps connect()'s search for a free
# port fast (one address has ~28,000 ports per destination).
sources=$(((n + 9999) / 10000))
last=$((1 + sources))
source="127.0.0.2-127.0.$((last / 256)).$((last % 256))"
ramp=$(((n + rate - 1) / rate))
# Every connection is held from its own establishment: long enough that the
# first is still open when the last opens on a machine slower than --rate,
# plus the plateau during which ss counts.
hold=$((ramp * 2 + plateau))
mem_needed_mb=$((n * 12 / 1024))
mem_avail_mb=$(($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) / 1024))
if ((mem_needed_mb > mem_avail_mb)); then
    echo "million: $n connections need about $mem_needed_mb MB (both ends, kernel and processes); $mem_avail_mb MB is available" >&2
    exit 2
fi

mkdir -p "$out"
declare -A saved=()
pids=()
cleanup() {
    set +e
    # The storm first (its processes die with it), then the server.
    for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 1 300); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    for key in "${!saved[@]}"; do sysctl -q -w "$key=${saved[$key]}" >/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# set KEY VALUE: remembers the old value (restored on exit) and sets it.
set_knob() {
    local key=$1 value=$2 path="/proc/sys/${1//.//}"
    [[ -e "$path" ]] || return 0
    saved[$key]="$(tr '\t' ' ' <"$path")"
    sysctl -q -w "$key=$value" >/dev/null
}
# Raise only: never lower a knob someone set higher.
raise_knob() {
    local key=$1 value=$2 path="/proc/sys/${1//.//}"
    [[ -e "$path" ]] || return 0
    (($(cut -f1 "$path") >= value)) || set_knob "$key" "$value"
}
raise_knob fs.file-max $((n * 2 + 200000))
raise_knob net.core.somaxconn 65535
raise_knob net.ipv4.tcp_max_syn_backlog 65535
raise_knob net.netfilter.nf_conntrack_max $((n * 2 + 200000))
set_knob net.ipv4.ip_local_port_range "10000 65000"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$throng" serve --listen "127.0.0.1:$port" --threads 1 --procs "$server_procs" 2>"$out/serve.txt" &
serve_pid=$!
pids=("$serve_pid")
for _ in $(seq 1 100); do
    ss -Htln "sport = :$port" | grep -q . && break
    sleep 0.1
done
sleep 1
echo "million: $n connections at $rate/s held ${hold}s, from $source ($sources addresses) to 127.0.0.1:$port ($server_procs server processes)"

"$throng" storm "tcp://127.0.0.1:$port" -n "$n" --rate "$rate" --hold "${hold}s" --workers 1 \
    --source "$source" --timeout 30s --json "$out/storm.json" -q >"$out/storm.txt" 2>&1 &
storm_pid=$!
pids=("$storm_pid" "$serve_pid")

# rss PID: resident KB of PID and its children.
rss() {
    local total=0 p kb
    for p in $1 $(ps -o pid= --ppid "$1" 2>/dev/null); do
        # A process that just ended has no status (or no VmRSS) any more.
        kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
        total=$((total + ${kb:-0}))
    done
    echo "$total"
}
# pss PID: proportional set size, KB, of PID and its children (shared
# pages divided among the processes sharing them).
pss() {
    local total=0 p kb
    for p in $1 $(ps -o pid= --ppid "$1" 2>/dev/null); do
        kb=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || true)
        total=$((total + ${kb:-0}))
    done
    echo "$total"
}
slab0=$(awk '/^Slab:/ {print $2}' /proc/meminfo)
start=$(date +%s)
# The memory curve, every 2 s, on its own loop: counting with ss takes
# seconds at a million sockets and would leave gaps in it.
sampler() {
    local t gen srv inuse mem slab gen_pss srv_pss
    echo "t_s,tcp_sockets,generator_rss_kb,server_rss_kb,tcp_mem_pages,slab_growth_kb,generator_pss_kb,server_pss_kb" \
        >"$out/curve.csv"
    while kill -0 "$storm_pid" 2>/dev/null; do
        gen=$(rss "$storm_pid")
        srv=$(rss "$serve_pid")
        gen_pss=$(pss "$storm_pid")
        srv_pss=$(pss "$serve_pid")
        read -r inuse mem < <(awk '/^TCP:/ {print $3, $11}' /proc/net/sockstat)
        slab=$(awk '/^Slab:/ {print $2}' /proc/meminfo)
        # After the reads: on a saturated machine they take seconds.
        t=$(($(date +%s) - start))
        echo "$t,$inuse,$gen,$srv,$mem,$((slab - slab0)),$gen_pss,$srv_pss" >>"$out/curve.csv"
        sleep 2
    done
}
sampler &
pids+=("$!")
echo "t_s,established_server" >"$out/ss.csv"
peak=0
while kill -0 "$storm_pid" 2>/dev/null; do
    t=$(($(date +%s) - start))
    established=$(ss -Htn state established "( sport = :$port )" | wc -l)
    echo "$t,$established" >>"$out/ss.csv"
    ((established > peak)) && peak=$established
    printf '\r  %4ds: %8d established (server side, ss)' "$t" "$established"
    ((t < hold + ramp * 3 + 120)) || {
        echo
        echo "million: the storm outlived its hold by far; stopping it" >&2
        break
    }
    sleep 2
done
echo
wait "$storm_pid" || true
pids=("$serve_pid")

# The largest figures of the curve (the plateau).
read -r gen srv mem slab gen_pss srv_pss < <(awk -F, 'NR > 1 {
    if ($3 > g) g = $3; if ($4 > s) s = $4; if ($5 > m) m = $5; if ($6 > b) b = $6
    if ($7 > gp) gp = $7; if ($8 > sp) sp = $8 }
    END {print g + 0, s + 0, m + 0, b + 0, gp + 0, sp + 0}' "$out/curve.csv")
{
    echo "connections asked:             $n"
    echo "established at the peak (ss):  $peak  (server side, 127.0.0.1:$port)"
    if [[ -s "$out/storm.json" ]]; then
        python3 - "$out/storm.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
m, g = r["measurements"], r["generator"]
c = m["connections"]
peak = max(m["peak_concurrent_connections"], 1)
print(f"storm: attempted {c['attempted']}, established {c['ok']}, errors {sum(c['errors'].values())} {c['errors']}")
print(f"storm: peak open at once {m['peak_concurrent_connections']} over {len(r['parts'])} processes")
print(f"generator peak RSS (sum):      {g['peak_rss_bytes'] / 1e6:.1f} MB = {g['peak_rss_bytes'] / peak:.0f} B per connection")
k = g.get("kernel")
if k:
    added = max(k["tcp_sockets_peak"] - k["tcp_sockets_before"], 1)
    print(f"kernel (storm's sampling):     {k['tcp_sockets_peak']} TCP sockets, slab +{k['slab_growth_bytes'] / 1e6:.0f} MB "
          f"= {k['slab_growth_bytes'] / added:.0f} B per socket")
EOF
    fi
    echo "largest sampled: generator RSS $((gen / 1024)) MB, server RSS $((srv / 1024)) MB" \
        "($((srv * 1024 / (peak > 0 ? peak : 1))) B per connection), TCP buffers $((mem * 4)) KB," \
        "slab +$((slab / 1024)) MB ($((slab * 1024 / (peak > 0 ? 2 * peak : 1))) B per socket)"
    echo "largest sampled PSS (shared pages counted once): generator $((gen_pss / 1024)) MB" \
        "($((gen_pss * 1024 / (peak > 0 ? peak : 1))) B per connection)," \
        "server $((srv_pss / 1024)) MB ($((srv_pss * 1024 / (peak > 0 ? peak : 1))) B per connection)"
} | tee "$out/summary.txt"
if ((peak < n)); then
    echo "million: the server held $peak of $n at once (see $out/storm.txt)" >&2
    exit 1
fi
