#!/bin/bash
# A real single-node Kubernetes cluster on this machine, for `throng k8s run`:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a kubelet
# over containerd + runc. Pods use the host network (no CNI, no kube-proxy).
#
#   scripts/k8s-local.sh build    # only build (or reuse) the Kubernetes binaries
#   scripts/k8s-local.sh up       # build or reuse, certificates, start, import the image, wait for Ready
#   scripts/k8s-local.sh status   # what runs, the node
#   scripts/k8s-local.sh down     # stop everything this script started
#
# The Kubernetes binaries are built from the k8s.io/kubernetes Go module at
# K8S_VERSION in a throwaway module outside the repository (K8S_BUILD): its
# go.mod pins the published k8s.io/* staging modules of the same release,
# because k8s.io/kubernetes' own go.mod replaces them with ./staging paths that
# a module beside it cannot see.
#
# Environment:
#   K8S_VERSION   default v1.34.4 (its staging modules are v0.34.4)
#   K8S_BUILD     where the Go module and the binaries live (default /work/k8s-build)
#   K8S_STATE     certificates, kubeconfigs, logs, pids, data (default /tmp/throng-k8s)
#   THRONG_IMAGE  the image to import (default: scripts/build-image.sh's tag)
#
# Needs root (the kubelet and containerd), Debian's etcd-server, containerd,
# runc, openssl, kubectl, and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
K8S_BUILD="${K8S_BUILD:-/work/k8s-build}"
K8S_STATE="${K8S_STATE:-/tmp/throng-k8s}"
bin="$K8S_BUILD/bin-$K8S_VERSION"
components="kube-apiserver kube-controller-manager kube-scheduler kubelet"

die() { echo "k8s-local: $*" >&2; exit 2; }
say() { echo "k8s-local: $*" >&2; }

# The staging modules' version: v1.34.4 -> v0.34.4.
staging_version() { echo "v0.${K8S_VERSION#v1.}"; }

build() {
    command -v go >/dev/null 2>&1 || die "no go: install Go (https://go.dev/dl) and run again"
    local missing=""
    for c in $components; do [ -x "$bin/$c" ] || missing="$missing $c"; done
    if [ -z "$missing" ]; then say "reusing $bin ($components)"; return; fi
    mkdir -p "$K8S_BUILD/mod" "$bin"
    local mod="$K8S_BUILD/mod"
    local upstream="$K8S_BUILD/kubernetes-$K8S_VERSION.mod"
    if [ ! -s "$upstream" ]; then
        curl -fsS -m 120 "https://proxy.golang.org/k8s.io/kubernetes/@v/$K8S_VERSION.mod" -o "$upstream.tmp" \
            || die "cannot fetch k8s.io/kubernetes@$K8S_VERSION's go.mod from the Go module proxy"
        mv "$upstream.tmp" "$upstream"
    fi
    local sv
    sv=$(staging_version)
    {
        echo "module throngk8sbuild"
        echo
        echo "go 1.24.0"
        echo
        echo "require k8s.io/kubernetes $K8S_VERSION"
        echo
        echo "replace ("
        # Every ./staging replace of upstream becomes the published module of the same release.
        sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\t\1 => \1 '"$sv"'#p' "$upstream"
        echo ")"
    } >"$mod/go.mod"
    cat >"$mod/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOF
    local major minor
    major=$(echo "$K8S_VERSION" | sed 's/^v\([0-9]*\)\..*/\1/')
    minor=$(echo "$K8S_VERSION" | sed 's/^v[0-9]*\.\([0-9]*\)\..*/\1/')
    local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
    ldflags="$ldflags -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
    ldflags="$ldflags -X k8s.io/component-base/version.gitTreeState=clean"
    local start=$SECONDS
    say "building$missing from k8s.io/kubernetes@$K8S_VERSION in $mod (long: tens of minutes on 2 cores)"
    (cd "$mod" && GOFLAGS=-mod=mod go mod tidy -e >&2) || die "go mod tidy failed in $mod"
    for c in $missing; do
        (cd "$mod" && CGO_ENABLED=0 nice -n 10 go build -trimpath -tags providerless \
            -ldflags "$ldflags" -o "$bin/$c.tmp" "k8s.io/kubernetes/cmd/$c") \
            || die "go build k8s.io/kubernetes/cmd/$c failed (see above)"
        mv "$bin/$c.tmp" "$bin/$c"
        say "built $c ($((SECONDS - start)) s so far)"
    done
    say "build took $((SECONDS - start)) s"
}

case "${1:-}" in
    build) build ;;
    *) die "usage: scripts/k8s-local.sh up|down|status|build" ;;
esac
