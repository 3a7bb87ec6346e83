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
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
# The HTML report is checked in a real browser (crates/cli/tests/html.rs).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The A/B examples (crates/cli/tests/examples.rs): a WAF and a NAT.
[ -e /usr/lib/nginx/modules/ngx_http_modsecurity_module.so ] || need+=(libnginx-mod-http-modsecurity)
[ -d /usr/share/modsecurity-crs/rules ] || need+=(modsecurity-crs)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need+=(nftables)
# --prometheus is checked by a real Prometheus scraping throng (crates/cli/tests/prometheus.rs).
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)

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
  for svc in nginx nats-server redis-server prometheus; do $sudo service "$svc" stop >/dev/null 2>&1 || true; done
fi

export PATH="$PATH:/usr/sbin:/sbin"
# The Kubernetes manifests are checked against the published schemas
# (crates/k8s/tests/golden.rs); kubectl cannot without an API server.
if ! command -v kubernetes-validate >/dev/null 2>&1; then
  echo "scripts/test.sh: installing kubernetes-validate (pip)" >&2
  python3 -m pip install -q kubernetes-validate >/dev/null 2>&1 \
    || echo "scripts/test.sh: could not install kubernetes-validate; the schema test will say it is skipped" >&2
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --all-targets --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
# One closing line for the whole suite, summed over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
