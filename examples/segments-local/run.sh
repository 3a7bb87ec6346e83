#!/usr/bin/env bash
# A rehearsal of `throng k8s job` without Kubernetes: N agents, each in its
# own network namespace with its own address (its own "host"), each running
# one execution segment of the same open-loop plan from a shared --start-at,
# against one lab server (`throng serve`) in another namespace; then the
# segments' results are merged exactly with `throng merge`.
#
#   sudo examples/segments-local/run.sh            # 4 agents, 2000 req/s in all, 10 s
#   sudo examples/segments-local/run.sh 3 --short  # 3 agents, 3 s
#   sudo examples/segments-local/run.sh 3 --short --live
#       # the same plan driven live: `throng agent` in each agent's namespace,
#       # `throng coordinate` in the server's (a shared token; one merged result)
#
#   agent 0 (10.78.0.10) ─┐
#   agent 1 (10.78.0.11) ─┼── bridge in the server's namespace ── throng serve 10.78.0.1:8080
#   ...                  ─┘
#
# Results go to OUT (default ./segments-results): segment-I.json and .txt
# per agent, merged.json, merged.txt.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
throng="${THRONG:-$root/target/release/throng}"
out="${OUT:-$PWD/segments-results}"
agents=4 duration=10s rate=2000
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    agents=$1
    shift
fi
if [[ "${1:-}" == "--short" ]]; then
    duration=3s
    shift
fi
live=0
if [[ "${1:-}" == "--live" ]]; then
    live=1
    shift
fi
if [[ $# -gt 0 || $agents -lt 1 || $agents -gt 200 ]]; then
    echo "usage: $0 [AGENTS (1-200)] [--short] [--live]   (env: THRONG=path/to/throng OUT=results-dir)" >&2
    exit 2
fi
if [[ ! -x "$throng" ]]; then
    echo "segments-local: no throng binary at $throng; build it with 'cargo build --release' or set THRONG" >&2
    exit 2
fi
if ! "$throng" http --help 2>/dev/null | grep -q -- '--segment'; then
    echo "segments-local: this throng has no --segment (execution segments are not in this build yet)" >&2
    exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "segments-local: needs root to make network namespaces (ip netns add); run it with sudo" >&2
    exit 2
fi
if ! command -v ip >/dev/null; then
    echo "segments-local: 'ip' is missing (apt-get install iproute2)" >&2
    exit 2
fi

tag="t$$"
server="seg-srv-$tag"
namespaces=("$server")
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$server"
ip -n "$server" link set lo up
ip -n "$server" link add br0 type bridge
ip -n "$server" addr add 10.78.0.1/24 dev br0
ip -n "$server" link set br0 up
for ((i = 0; i < agents; i++)); do
    ns="seg-a$i-$tag"
    namespaces+=("$ns")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "tmp-$tag-a" type veth peer name "tmp-$tag-b"
    ip link set "tmp-$tag-a" netns "$ns"
    ip link set "tmp-$tag-b" netns "$server"
    ip -n "$ns" link set "tmp-$tag-a" name eth0
    ip -n "$server" link set "tmp-$tag-b" name "a$i"
    ip -n "$ns" addr add "10.78.0.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$server" link set "a$i" master br0
    ip -n "$server" link set "a$i" up
done

ip netns exec "$server" "$throng" serve --listen 10.78.0.1:8080 --threads 1 >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    if ip netns exec "seg-a0-$tag" bash -c 'exec 3<>/dev/tcp/10.78.0.1/8080' 2>/dev/null; then break; fi
    sleep 0.1
done

mkdir -p "$out"
if ((live)); then
    # Agents wait in their namespaces; the coordinator, in the server's,
    # ships the plan, starts them at one instant and merges them live.
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$out/token"
    chmod 600 "$out/token"
    addrs=()
    for ((i = 0; i < agents; i++)); do
        addr="10.78.0.$((10 + i)):7700"
        addrs+=("$addr")
        ip netns exec "seg-a$i-$tag" "$throng" agent --listen "$addr" --token-file "$out/token" --runs 1 \
            > "$out/agent-$i.txt" 2>&1 &
        pids+=($!)
    done
    for addr in "${addrs[@]}"; do
        for _ in $(seq 100); do
            if ip netns exec "$server" bash -c "exec 3<>/dev/tcp/${addr%:*}/${addr#*:}" 2>/dev/null; then break; fi
            sleep 0.1
        done
    done
    echo "== $agents agents live: http://10.78.0.1:8080/ at $rate req/s in all for $duration"
    status=0
    ip netns exec "$server" "$throng" coordinate --agents "$(IFS=,; echo "${addrs[*]}")" \
        --token-file "$out/token" --json "$out/merged.json" -q -- \
        http http://10.78.0.1:8080/ -r "$rate" -d "$duration" > "$out/merged.txt" 2> "$out/coordinate.txt" \
        || status=$?
    for pid in "${pids[@]:1}"; do wait "$pid" || true; done
    pids=("${pids[0]}")
    if ((status != 0)); then
        echo "segments-local: throng coordinate exited with $status; see $out/coordinate.txt" >&2
        exit "$status"
    fi
    "$throng" report "$out/merged.json"
    echo "results: $out"
    exit 0
fi

# The segment sequence 0,1/N,...,1 in lowest terms, as `throng k8s job` writes it.
gcd() { local a=$1 b=$2; while ((b)); do local t=$b; b=$((a % b)); a=$t; done; echo "$a"; }
frac() { # frac NUM DEN
    if (($1 == 0)); then echo 0; return; fi
    local g; g=$(gcd "$1" "$2")
    if (($2 / g == 1)); then echo $(($1 / g)); else echo "$(($1 / g))/$(($2 / g))"; fi
}
bounds=()
for ((i = 0; i <= agents; i++)); do bounds+=("$(frac "$i" "$agents")"); done
sequence=$(IFS=,; echo "${bounds[*]}")
start_at=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)

echo "== $agents agents, segments of $sequence, start at $start_at: http://10.78.0.1:8080/ at $rate req/s in all for $duration"
files=()
for ((i = 0; i < agents; i++)); do
    files+=("$out/segment-$i.json")
    ip netns exec "seg-a$i-$tag" "$throng" http http://10.78.0.1:8080/ -r "$rate" -d "$duration" \
        --segment "${bounds[i]}:${bounds[i + 1]}" --segment-sequence "$sequence" --start-at "$start_at" \
        --json "$out/segment-$i.json" -q > "$out/segment-$i.txt" &
    pids+=($!)
done
# Waited for in the background, so a signal runs the trap at once.
status=0
for pid in "${pids[@]:1}"; do wait "$pid" || status=$?; done
pids=("${pids[0]}")
if ((status != 0)); then
    echo "segments-local: an agent exited with $status; see $out/segment-*.txt" >&2
fi
"$throng" merge "${files[@]}" -o "$out/merged.json"
"$throng" report "$out/merged.json" | tee "$out/merged.txt"
echo "results: $out"
