#!/usr/bin/env bash
# Installs what the tests need from Debian's packages when it is missing, then
# runs every test. Starts nothing globally: tests start their own servers on
# loopback and stop them.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || need+=(nats-server)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# MQTT storms run against mosquitto; its clients read its $SYS topics (crates/cli/tests/cli/mqtt.rs).
[ -x /usr/sbin/mosquitto ] || command -v mosquitto >/dev/null 2>&1 || need+=(mosquitto)
command -v mosquitto_sub >/dev/null 2>&1 || need+=(mosquitto-clients)
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
# Peak memory of a throng run is read by GNU time (crates/cli/tests/cli/hostile_results.rs).
[ -x /usr/bin/time ] || need+=(time)
# The HTML report is checked in a real browser (crates/cli/tests/cli/html.rs).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The A/B examples (crates/cli/tests/cli/examples.rs): a WAF and a NAT.
[ -e /usr/lib/nginx/modules/ngx_http_modsecurity_module.so ] || need+=(libnginx-mod-http-modsecurity)
[ -d /usr/share/modsecurity-crs/rules ] || need+=(modsecurity-crs)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need+=(nftables)
# Held connections are counted on the server's side by ss (crates/cli/tests/cli/million.rs).
command -v ss >/dev/null 2>&1 || [ -x /usr/bin/ss ] || need+=(iproute2)
# --prometheus is checked by a real Prometheus scraping throng (crates/cli/tests/cli/prometheus.rs).
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
# -x/--proxy and the proxy environment are checked through a real proxy (crates/cli/tests/proxy.rs).
command -v tinyproxy >/dev/null 2>&1 || need+=(tinyproxy)
# The release's packages (crates/cli/tests/cli/package.rs): the Homebrew
# formula is checked with `ruby -c`; the .deb's man pages are found by man.
command -v ruby >/dev/null 2>&1 || need+=(ruby)
command -v man >/dev/null 2>&1 || need+=(man-db)
# The container image (crates/cli/tests/cli/image.rs), only with THRONG_TEST_STATIC=1.
if [ "${THRONG_TEST_STATIC:-}" = 1 ]; then
  command -v podman >/dev/null 2>&1 || need+=(podman)
  [ -x /usr/sbin/runc ] || need+=(runc)
fi

if ((${#need[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "scripts/test.sh: need root or sudo to install: ${need[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "scripts/test.sh: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Debian may start packaged services on install; the tests never use them.
  for svc in nginx nats-server redis-server mosquitto prometheus tinyproxy; do $sudo service "$svc" stop >/dev/null 2>&1 || true; done
fi

export PATH="$PATH:/usr/sbin:/sbin"
# Python packages the tests' peers need, from PyPI: installed when missing;
# a failed install is said, and the tests that need it fail by name.
pip_need() { # PACKAGE IMPORT-CHECK
  if ! eval "$2" >/dev/null 2>&1; then
    echo "scripts/test.sh: installing $1 (pip)" >&2
    python3 -m pip install -q "$1" >/dev/null 2>&1 \
      || echo "scripts/test.sh: could not install $1" >&2
  fi
}
# The Kubernetes manifests are checked against the published schemas
# (crates/k8s/tests/golden.rs); kubectl cannot without an API server.
pip_need kubernetes-validate 'command -v kubernetes-validate'
# HTTP/3 is checked against a real peer that is not throng: aioquic's HTTP/3
# (scripts/h3_server.py; crates/cli/tests/cli/http3.rs).
pip_need aioquic "python3 -c 'import aioquic'"
# WebSocket storms are checked against servers written with the PyPI package
# websockets (crates/cli/tests/servers/ws_server.py, tests/cli/websocket.rs).
pip_need websockets "python3 -c 'import websockets'"
# The gRPC tests' server (crates/cli/tests/cli/grpc/grpc_server.py) is grpcio.
pip_need grpcio "python3 -c 'import grpc'"
# With --reflection it serves server reflection (tests/cli/grpc_reflect.rs).
pip_need grpcio-reflection "python3 -c 'import grpc_reflection'"
# `throng http --sse` is checked against sse-starlette on uvicorn
# (crates/cli/tests/servers/sse_server.py, tests/cli/sse.rs).
pip_need sse-starlette "python3 -c 'import sse_starlette'"
pip_need uvicorn "python3 -c 'import uvicorn'"

# The user guide (docs/guide) is built with mdbook (crates/cli/tests/cli/guide.rs,
# book_builds): a pinned version from crates.io when missing (about 4.5 CPU-minutes
# to build; 16 minutes on a busy 2-core machine).
if ! command -v mdbook >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/mdbook" ]; then
  echo "scripts/test.sh: installing mdbook 0.4.52 (cargo install)" >&2
  cargo install --locked --quiet mdbook --version 0.4.52 >/dev/null 2>&1 \
    || echo "scripts/test.sh: could not install mdbook" >&2
fi
# The Debian package is made with cargo-deb (crates/cli/tests/cli/package.rs,
# scripts/package.sh): a pinned version from crates.io when missing (about
# 2 CPU-minutes to build).
if ! cargo deb --version >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo-deb" ]; then
  echo "scripts/test.sh: installing cargo-deb 3.8.0 (cargo install)" >&2
  cargo install --locked --quiet cargo-deb --version 3.8.0 >/dev/null 2>&1 \
    || echo "scripts/test.sh: could not install cargo-deb" >&2
fi
# A second MQTT broker beside mosquitto (crates/cli/tests/cli/rumqttd.rs):
# rumqttd, pinned, from crates.io when missing (about 3 CPU-minutes to build).
# Not --locked: its lock file pins a `metrics` crate today's rustc refuses
# (E0521); the dependencies resolved afresh build.
if ! command -v rumqttd >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/rumqttd" ]; then
  echo "scripts/test.sh: installing rumqttd 0.20.0 (cargo install)" >&2
  cargo install --quiet rumqttd --version 0.20.0 >/dev/null 2>&1 \
    || echo "scripts/test.sh: could not install rumqttd" >&2
fi
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"

# --otlp is checked by Prometheus 3's OTLP receiver (crates/cli/tests/cli/otlp.rs;
# Debian's Prometheus has none): built from its Go module once, into a cache that
# survives reruns (about 5 CPU-minutes; the binary is 150 MB). The Go module and
# build caches it needs (about 4 GB) are private to the build and removed after.
# A failed build is said, and the otlp tests fail by name.
prom3_version=v0.316.0
prom3_dir="${XDG_CACHE_HOME:-$HOME/.cache}/throng-test/prometheus-$prom3_version"
if [ -z "${THRONG_PROMETHEUS3:-}" ] && [ ! -x "$prom3_dir/prometheus" ]; then
  if command -v go >/dev/null 2>&1; then
    echo "scripts/test.sh: building Prometheus $prom3_version (go install; a few minutes)" >&2
    scratch=$(mktemp -d)
    mkdir -p "$prom3_dir"
    if GOFLAGS=-mod=mod GOMODCACHE="$scratch/mod" GOCACHE="$scratch/build" GOBIN="$scratch/bin" \
       timeout 3600 go install "github.com/prometheus/prometheus/cmd/prometheus@$prom3_version" >"$scratch/log" 2>&1 \
       && mv "$scratch/bin/prometheus" "$prom3_dir/prometheus.part" \
       && mv "$prom3_dir/prometheus.part" "$prom3_dir/prometheus"; then
      :
    else
      echo "scripts/test.sh: could not build Prometheus $prom3_version:" >&2
      tail -n 5 "$scratch/log" >&2 || true
    fi
    # The module cache is read-only by design: go clean removes it.
    GOMODCACHE="$scratch/mod" go clean -modcache >/dev/null 2>&1 || true
    rm -rf "$scratch"
  else
    echo "scripts/test.sh: no go to build Prometheus $prom3_version with (Go 1.26.7 or later: https://go.dev/dl/)" >&2
  fi
fi
export THRONG_PROMETHEUS3="${THRONG_PROMETHEUS3:-$prom3_dir/prometheus}"

# Tests that need root or a tool a developer's machine may lack are
# #[ignore = "why"]; this script runs them too (--include-ignored), except
# those whose need it cannot meet here, which it names. They count as ignored.
skip=()
not_run=()
if [ "$(id -u)" -ne 0 ]; then
  for t in port_exhaustion_is_addr_unavailable_with_a_hint_and_sources_fix_it \
           nat_ab_short_reaches_the_server_directly_and_through_the_nat \
           segments_local_agents_merge_into_exactly_what_they_recorded \
           segments_local_live_agents_in_namespaces_merge_into_the_whole_plan; do
    skip+=(--skip "$t"); not_run+=("$t (needs root)")
  done
fi
if ! command -v kubernetes-validate >/dev/null 2>&1; then
  skip+=(--skip golden_manifests_pass_the_kubernetes_schemas)
  not_run+=("golden_manifests_pass_the_kubernetes_schemas (needs kubernetes-validate)")
fi
if ! command -v mdbook >/dev/null 2>&1; then
  skip+=(--skip book_builds)
  not_run+=("book_builds (needs mdbook: cargo install --locked mdbook --version 0.4.52)")
fi

# The Kubernetes proof needs the cluster of scripts/k8s-local.sh up (a
# 40-minute build the first time: never started from here).
k8s_conf="${THRONG_K8S_KUBECONFIG:-/tmp/throng-k8s/admin.conf}"
if ! { [ -f "$k8s_conf" ] && command -v kubectl >/dev/null 2>&1 \
       && timeout 20 kubectl --kubeconfig "$k8s_conf" --request-timeout=10s get nodes >/dev/null 2>&1; }; then
  skip+=(--skip k8s_run::four_agents_count_exactly_what_nginx_counted
         --skip k8s_run::a_pod_killed_mid_run_is_a_named_missing_segment)
  not_run+=("k8s_run::four_agents_count_exactly_what_nginx_counted, k8s_run::a_pod_killed_mid_run_is_a_named_missing_segment (need the cluster of scripts/k8s-local.sh up)")
fi

# The packages (scripts/package.sh) need cargo-deb; the .deb is installed
# system-wide with dpkg -i, so only as root where dpkg is.
if ! cargo deb --version >/dev/null 2>&1; then
  skip+=(--skip tarball_checksums_and_homebrew_formula --skip deb_installs_runs_and_removes)
  not_run+=("tarball_checksums_and_homebrew_formula, deb_installs_runs_and_removes (need cargo-deb: cargo install --locked cargo-deb --version 3.8.0)")
else
  if ! command -v ruby >/dev/null 2>&1; then
    skip+=(--skip tarball_checksums_and_homebrew_formula)
    not_run+=("tarball_checksums_and_homebrew_formula (needs ruby: apt-get install ruby)")
  fi
  if [ "$(id -u)" -ne 0 ] || ! command -v dpkg >/dev/null 2>&1 || ! command -v man >/dev/null 2>&1; then
    skip+=(--skip deb_installs_runs_and_removes)
    not_run+=("deb_installs_runs_and_removes (installs a .deb system-wide: needs root, dpkg and man)")
  fi
fi

# The static binary (scripts/build-static.sh) is a second release build of the
# whole tree (5 to 20 minutes on 2 cores): only with THRONG_TEST_STATIC=1, and
# where rustup's musl target and musl-gcc are installed.
if [ "${THRONG_TEST_STATIC:-}" != 1 ]; then
  skip+=(--skip static_binary)
  not_run+=("static_binary (a release build for musl; set THRONG_TEST_STATIC=1)")
elif ! rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl \
   || ! command -v musl-gcc >/dev/null 2>&1; then
  skip+=(--skip static_binary)
  not_run+=("static_binary (needs: rustup target add x86_64-unknown-linux-musl; apt-get install musl-tools)")
fi
# The container image (scripts/build-image.sh) builds the static binary too,
# then a podman image, and runs it with runc (crun cannot set its rlimits on
# the development machines): only with THRONG_TEST_STATIC=1, as root, with
# the musl target, musl-gcc, podman and runc.
if [ "${THRONG_TEST_STATIC:-}" != 1 ]; then
  skip+=(--skip container_image)
  not_run+=("container_image (a release build for musl and a podman image; set THRONG_TEST_STATIC=1)")
elif [ "$(id -u)" -ne 0 ] || ! command -v podman >/dev/null 2>&1 || [ ! -x /usr/sbin/runc ] \
   || ! rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl \
   || ! command -v musl-gcc >/dev/null 2>&1; then
  skip+=(--skip container_image)
  not_run+=("container_image (needs root, podman and runc: apt-get install podman runc; and the musl target and musl-gcc)")
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --all-targets --no-fail-fast "$@" -- --include-ignored "${skip[@]}" 2>&1 | tee "$log" || status=$?
# One closing line for the whole suite, summed over every test binary; the
# tests left out above are "filtered out" by libtest and counted as ignored.
for t in "${not_run[@]}"; do echo "scripts/test.sh: not run here: $t" >&2; done
# Why each failed test failed, again at the end where a clipped log still
# shows it: its panic's place and the message's first lines (at most 60
# lines in all, each cut at 300 characters).
awk '/^thread .* panicked at / { n = 3 }
     n > 0 && shown < 60 { print "failed: " substr($0, 1, 300); shown++; n-- }' "$log"
awk '/^test result:/ { for (i = 1; i <= NF; i++) {
         if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i
         if ($(i+1) ~ /^ignored/) g += $i; if ($(i+1) == "filtered" && $(i+2) ~ /^out/) g += $i } }
     END { printf "tests: %d passed, %d failed, %d ignored\n", p, f, g }' "$log"
exit "$status"
