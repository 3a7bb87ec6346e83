#!/usr/bin/env bash
# Runs a crowd of real nats.go clients against the bcrypt experiment's
# nats-server, to compare with `throng storm --client nats.go`.
#   nats-go.sh COST [CLIENTS] [JITTER] [TIMEOUT]   e.g. nats-go.sh 11 100 2s 30s
# Builds examples/nats-bcrypt/natsgo at run time in a temporary directory
# with nats.go from the Go module proxy (NATS_GO_VERSION, default v1.53.1,
# the version the nats.go profile follows); nothing is vendored. Needs go,
# nats-server and htpasswd (nats.sh). Prints connected/failed, then the same
# plan through throng with --client nats.go and --client lenient. TIMEOUT
# (default nats.go's 2s) is nats.Timeout for the real client and --timeout
# for throng's nats.go profile. One run of each: bench/nats_go.py repeats
# them interleaved and compares the medians.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cost=${1:?usage: nats-go.sh COST [CLIENTS] [JITTER] [TIMEOUT]}
clients=${2:-100}
jitter=${3:-2s}
timeout=${4:-2s}
version=${NATS_GO_VERSION:-v1.53.1}
throng=${THRONG:-throng}
port=14222
url="nats://throng:secret@127.0.0.1:$port"

command -v go >/dev/null || { echo "nats-go.sh: install Go (https://go.dev/dl/)" >&2; exit 1; }
build=$(mktemp -d)
trap '"$here/nats.sh" stop; rm -rf "$build"' EXIT
cp "$here/natsgo/main.go" "$build/"
(
  cd "$build"
  go mod init throng.example/natsgo >/dev/null 2>&1
  go get "github.com/nats-io/nats.go@$version" >/dev/null 2>&1 \
    || { echo "nats-go.sh: cannot fetch nats.go $version from the Go module proxy" >&2; exit 1; }
  go build -o natsgo .
)

run_server() { "$here/nats.sh" start "$cost" "$port"; }

echo "== real nats.go $version, bcrypt cost $cost, $clients clients, jitter $jitter, timeout $timeout"
run_server
"$build/natsgo" -url "$url" -n "$clients" -jitter "$jitter" -hold 1s -timeout "$timeout" || true
# nats.go with the real client's timeout; lenient with the sweep's 60 s, so
# it times the whole handshake.
for client in "nats.go --timeout $timeout" "lenient --timeout 60s"; do
  echo "== throng storm --client $client, same plan"
  run_server
  # shellcheck disable=SC2086 # $client is the profile and its flags
  "$throng" storm "$url" --count "$clients" --jitter "$jitter" --hold 1s --client $client \
    --quiet | sed -n '/connections  /,/^$/p' || true
done
