#!/usr/bin/env bash
# Seed 003: an HTTP server reached directly and through a NAT, httperf's run
# (8000 connections opened at 100/s, one request each, 20 s timeout), then
# the two sides compared.
#
#   sudo examples/nat-ab/run.sh            # the seed's run: 8000 connections, 80 s per side
#   sudo examples/nat-ab/run.sh --short    # 500 connections, 5 s per side (what the tests run)
#
# Three network namespaces, made here and removed on exit (also on Ctrl-C):
#
#   client ──(10.77.3.0/24, direct)──────────────────────── server
#   client ──(10.77.1.0/24)── router ──(10.77.2.0/24)────── server
#                             nftables masquerade
#
# The server is `python3 -m http.server` (as in the seed) serving a 4393-byte
# page (the seed's reply size). Results go to OUT (default ./nat-ab-results):
# direct.json, nat.json, compare.txt.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
throng="${THRONG:-$root/target/release/throng}"
conns=8000
out="${OUT:-$PWD/nat-ab-results}"
if [[ "${1:-}" == "--short" ]]; then
    conns=500
    shift
fi
if [[ $# -gt 0 ]]; then
    echo "usage: $0 [--short]   (env: THRONG=path/to/throng OUT=results-dir)" >&2
    exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "nat-ab: needs root to make network namespaces (ip netns add); run it with sudo" >&2
    exit 2
fi
for tool in ip nft python3; do
    if ! command -v "$tool" >/dev/null; then
        echo "nat-ab: '$tool' is missing (apt-get install iproute2 nftables python3)" >&2
        exit 2
    fi
done
if [[ ! -x "$throng" ]]; then
    echo "nat-ab: no throng binary at $throng; build it with 'cargo build --release' or set THRONG" >&2
    exit 2
fi

tag="t$$"
client="nat-ab-client-$tag" router="nat-ab-router-$tag" server="nat-ab-server-$tag"
www="$(mktemp -d)"
server_pid="" load_pid=""
cleanup() {
    [[ -n "$load_pid" ]] && kill -INT "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null || true
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
    for ns in "$client" "$router" "$server"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$www" "$www.log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for ns in "$client" "$router" "$server"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
done
# Interface names are per namespace, so short fixed names are fine.
link() { # link NS_A IF_A ADDR_A NS_B IF_B ADDR_B
    ip link add "tmp-$tag-a" type veth peer name "tmp-$tag-b"
    ip link set "tmp-$tag-a" netns "$1"
    ip link set "tmp-$tag-b" netns "$4"
    ip -n "$1" link set "tmp-$tag-a" name "$2"
    ip -n "$4" link set "tmp-$tag-b" name "$5"
    ip -n "$1" addr add "$3" dev "$2"
    ip -n "$4" addr add "$6" dev "$5"
    ip -n "$1" link set "$2" up
    ip -n "$4" link set "$5" up
}
link "$client" direct 10.77.3.2/24 "$server" direct 10.77.3.1/24
link "$client" wan 10.77.1.2/24 "$router" wan 10.77.1.1/24
link "$router" lan 10.77.2.1/24 "$server" lan 10.77.2.2/24
ip -n "$client" route add 10.77.2.0/24 via 10.77.1.1
ip netns exec "$router" sysctl -qw net.ipv4.ip_forward=1
ip netns exec "$router" nft -f - <<'NFT'
table ip nat {
    chain postrouting {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "lan" masquerade
    }
}
NFT

head -c 4393 /dev/zero | tr '\0' 'x' > "$www/index.html"
ip netns exec "$server" python3 -m http.server 8080 --bind 0.0.0.0 --directory "$www" >/dev/null 2>"$www.log" &
server_pid=$!
for _ in $(seq 100); do
    if ip netns exec "$client" bash -c 'exec 3<>/dev/tcp/10.77.3.1/8080' 2>/dev/null; then break; fi
    sleep 0.1
done

mkdir -p "$out"
# httperf --rate 100 --num-conn 8000 --timeout 20: a new connection per
# request, opened on an open-loop schedule of 100 per second.
for side in direct nat; do
    addr=10.77.3.1
    [[ $side == nat ]] && addr=10.77.2.2
    echo "== $side: http://$addr:8080/ ($conns connections at 100/s)"
    # In the background and waited for, so that a signal to this script
    # runs its trap at once (bash defers traps while a foreground job runs).
    ip netns exec "$client" "$throng" http "http://$addr:8080/" -r 100 -n "$conns" --no-keepalive \
        --timeout 20s --format httperf --json "$out/$side.json" -q > "$out/$side.txt" &
    load_pid=$!
    wait "$load_pid"
    load_pid=""
    cat "$out/$side.txt"
done
# The server logs each request's source address: the direct side must come
# from the client's address and the NAT side from the router's, or the
# comparison would not be what it says.
direct_seen=$(grep -c '^10\.77\.3\.2 ' "$www.log" || true)
nat_seen=$(grep -c '^10\.77\.2\.1 ' "$www.log" || true)
echo "server saw $direct_seen requests from the client (direct) and $nat_seen from the router (NAT)" \
    | tee "$out/sources.txt"
"$throng" compare "$out/direct.json" "$out/nat.json" --label A=direct --label B=nat | tee "$out/compare.txt"
"$throng" compare "$out/direct.json" "$out/nat.json" --label A=direct --label B=nat --format httperf \
    > "$out/compare-httperf.txt"
echo "results: $out"
