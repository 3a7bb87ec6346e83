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
#   THRONG_IMAGE  an image already imported: skip building and importing one
#                 (default: scripts/build-image.sh with THRONG_ENGINE=archive)
#   THRONG_BIN    the throng for that image (e.g. target/debug/throng; default:
#                 scripts/build-static.sh's release musl build, minutes)
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

# ---- certificates and kubeconfigs -------------------------------------------

# The node's address: the first IPv4 address that is not loopback (the
# kubelet refuses a loopback node IP). Pods on the host network get it.
node_ip() {
    ip -4 -o addr show scope global | awk '{ split($4, a, "/"); print a[1]; exit }'
}

# cert NAME CN [O] [SAN]: a client or server certificate signed by the CA.
cert() {
    local name=$1 cn=$2 o=${3:-} san=${4:-}
    local pki="$K8S_STATE/pki" subj="/CN=$cn"
    [ -s "$pki/$name.crt" ] && return
    [ -n "$o" ] && subj="/O=$o$subj"
    openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
    openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
    local ext="$pki/$name.ext"
    {
        echo "basicConstraints=CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=serverAuth,clientAuth"
        [ -n "$san" ] && echo "subjectAltName=$san"
    } >"$ext"
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 30 -sha256 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
}

# kubeconfig NAME CERT: a kubeconfig for the apiserver with that client certificate.
kubeconfig() {
    local name=$1 c=$2 pki="$K8S_STATE/pki"
    cat >"$K8S_STATE/$name.conf" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: $pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $pki/$c.crt
    client-key: $pki/$c.key
contexts:
- name: local
  context: {cluster: local, user: $name}
current-context: local
EOF
}

certificates() {
    local pki="$K8S_STATE/pki" ip=$1
    mkdir -p "$pki"
    chmod 700 "$pki"
    if [ ! -s "$pki/ca.crt" ]; then
        openssl genrsa -out "$pki/ca.key" 2048 2>/dev/null
        openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=throng-local-ca" -days 30 -sha256 \
            -out "$pki/ca.crt" 2>/dev/null
    fi
    local host
    host=$(hostname)
    cert apiserver kube-apiserver "" \
        "IP:127.0.0.1,IP:$ip,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
    cert admin admin system:masters
    cert controller-manager system:kube-controller-manager
    cert scheduler system:kube-scheduler
    cert kubelet "system:node:$host" system:nodes
    cert kubelet-serving "system:node:$host" system:nodes "IP:127.0.0.1,IP:$ip,DNS:$host,DNS:localhost"
    if [ ! -s "$pki/sa.key" ]; then
        openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
        openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
    fi
    kubeconfig admin admin
    kubeconfig controller-manager controller-manager
    kubeconfig scheduler scheduler
    kubeconfig kubelet kubelet
}

# ---- processes --------------------------------------------------------------

# start NAME COMMAND...: in the background, its log in logs/NAME.log, its pid in pids/NAME.
start() {
    local name=$1
    shift
    local pidfile="$K8S_STATE/pids/$name"
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        say "$name already runs (pid $(cat "$pidfile"))"
        return
    fi
    setsid "$@" >"$K8S_STATE/logs/$name.log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    say "started $name (pid $!, log $K8S_STATE/logs/$name.log)"
}

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds, or die naming the log.
wait_for() {
    local what=$1 secs=$2 log=$3
    shift 3
    local i=0
    until "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        if [ "$i" -ge "$secs" ]; then
            tail -n 20 "$log" >&2 || true
            die "$what not ready after $secs s (the end of $log above)"
        fi
        sleep 1
    done
    say "$what ready (${i} s)"
}

# A pause image (the pods' sandbox) built here: no registry is needed.
pause_image() {
    local dir="$K8S_STATE/pause"
    [ -s "$dir/pause.tar" ] && return
    command -v gcc >/dev/null 2>&1 || die "no gcc to build the sandbox's pause binary: apt-get install gcc"
    rm -rf "$dir"
    mkdir -p "$dir/rootfs"
    printf '#include <signal.h>\n#include <unistd.h>\nstatic void quit(int s) { (void)s; _exit(0); }\nint main(void) { signal(SIGINT, quit); signal(SIGTERM, quit); for (;;) pause(); }\n' >"$dir/pause.c"
    gcc -static -O2 -o "$dir/rootfs/pause" "$dir/pause.c" || die "gcc -static failed (libc6-dev has the static libc)"
    tar --numeric-owner --owner=0 --group=0 -C "$dir/rootfs" -cf "$dir/layer.tar" .
    local diff_id
    diff_id=$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
    printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}\n' \
        "$diff_id" >"$dir/config.json"
    printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]\n' "$PAUSE_IMAGE" >"$dir/manifest.json"
    tar -C "$dir" -cf "$dir/pause.tar" manifest.json config.json layer.tar
}

PAUSE_IMAGE=throng.local/pause:1

up() {
    [ "$(id -u)" = 0 ] || die "run it as root (the kubelet and containerd need it)"
    for c in etcd containerd runc openssl kubectl ip gcc; do
        command -v "$c" >/dev/null 2>&1 || die "no $c: apt-get install etcd-server containerd runc openssl kubectl iproute2 gcc"
    done
    local cni_bin=""
    for d in /opt/cni/bin /usr/lib/cni; do [ -x "$d/bridge" ] && cni_bin=$d && break; done
    [ -n "$cni_bin" ] || die "no CNI plugins (the runtime reports no network without them): apt-get install containernetworking-plugins"
    local t0=$SECONDS
    build
    mkdir -p "$K8S_STATE"/{logs,pids,etcd,kubelet,cni/net.d,containerd/root,containerd/state}
    local ip host
    ip=$(node_ip)
    host=$(hostname)
    [ -n "$ip" ] || die "no non-loopback IPv4 address for the node (the kubelet refuses 127.0.0.1)"
    certificates "$ip"
    local pki="$K8S_STATE/pki"

    start etcd etcd --name local --data-dir "$K8S_STATE/etcd" \
        --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
        --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
        --initial-cluster local=http://127.0.0.1:2380
    wait_for etcd 60 "$K8S_STATE/logs/etcd.log" curl -fsS http://127.0.0.1:2379/health

    start kube-apiserver "$bin/kube-apiserver" \
        --etcd-servers=http://127.0.0.1:2379 \
        --bind-address=127.0.0.1 --advertise-address="$ip" --secure-port=6443 \
        --service-cluster-ip-range=10.0.0.0/24 \
        --authorization-mode=Node,RBAC \
        --client-ca-file="$pki/ca.crt" \
        --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
        --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
        --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
        --kubelet-certificate-authority="$pki/ca.crt" \
        --service-account-issuer=https://kubernetes.default.svc \
        --service-account-key-file="$pki/sa.pub" \
        --service-account-signing-key-file="$pki/sa.key" \
        --enable-admission-plugins=NodeRestriction
    wait_for kube-apiserver 180 "$K8S_STATE/logs/kube-apiserver.log" \
        kubectl --kubeconfig "$K8S_STATE/admin.conf" get --raw /readyz

    start kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig="$K8S_STATE/controller-manager.conf" \
        --authentication-kubeconfig="$K8S_STATE/controller-manager.conf" \
        --authorization-kubeconfig="$K8S_STATE/controller-manager.conf" \
        --bind-address=127.0.0.1 --leader-elect=false \
        --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
        --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
        --use-service-account-credentials=true --service-cluster-ip-range=10.0.0.0/24
    start kube-scheduler "$bin/kube-scheduler" \
        --kubeconfig="$K8S_STATE/scheduler.conf" \
        --authentication-kubeconfig="$K8S_STATE/scheduler.conf" \
        --authorization-kubeconfig="$K8S_STATE/scheduler.conf" \
        --bind-address=127.0.0.1 --leader-elect=false

    # containerd of its own (socket, root and state under K8S_STATE), the
    # sandbox image built here, cgroupfs (no systemd), a bridge CNI (only
    # for the runtime to report a network: throng's pods use the host's).
    cat >"$K8S_STATE/cni/net.d/10-bridge.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "local", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
    cat >"$K8S_STATE/containerd.toml" <<EOF
version = 2
root = "$K8S_STATE/containerd/root"
state = "$K8S_STATE/containerd/state"
[grpc]
  address = "$K8S_STATE/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The sandbox's oom_score_adj (-998) no lower than containerd's own: a
  # process here may not lower its score (runc: "failed to update
  # /proc/self/oom_score_adj: Permission denied").
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$K8S_STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
EOF
    start containerd containerd --config "$K8S_STATE/containerd.toml"
    local ctr="ctr --address $K8S_STATE/containerd.sock -n k8s.io"
    wait_for containerd 60 "$K8S_STATE/logs/containerd.log" $ctr version

    pause_image
    $ctr images import "$K8S_STATE/pause/pause.tar" >&2 || die "ctr could not import the pause image"
    local image="${THRONG_IMAGE:-}"
    if [ -z "$image" ]; then
        # The image from scripts/build-image.sh as a docker-archive (no engine
        # needed); THRONG_BIN (e.g. target/debug/throng) skips the static build.
        image=$(THRONG_ENGINE=archive sh scripts/build-image.sh | tail -n 1)
        $ctr images import target/image/throng.tar >&2 || die "ctr could not import target/image/throng.tar"
    fi
    say "image $image imported"

    cat >"$K8S_STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$K8S_STATE/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
failSwapOn: false
address: 127.0.0.1
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
clusterDomain: cluster.local
clusterDNS: [10.0.0.10]
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%"}
EOF
    start kubelet "$bin/kubelet" --config="$K8S_STATE/kubelet.yaml" \
        --kubeconfig="$K8S_STATE/kubelet.conf" --root-dir="$K8S_STATE/kubelet" \
        --node-ip="$ip" --hostname-override="$host"
    local k="kubectl --kubeconfig $K8S_STATE/admin.conf"
    wait_for "node $host Ready" 180 "$K8S_STATE/logs/kubelet.log" \
        $k wait --for=condition=Ready "node/$host" --timeout=1s
    # The default service account, which the pods of a Job need.
    wait_for "service account default" 60 "$K8S_STATE/logs/kube-controller-manager.log" \
        $k -n default get serviceaccount default
    say "up in $((SECONDS - t0)) s: export KUBECONFIG=$K8S_STATE/admin.conf"
}

down() {
    local order="kubelet kube-scheduler kube-controller-manager kube-apiserver containerd etcd"
    for name in $order; do
        local pidfile="$K8S_STATE/pids/$name"
        [ -s "$pidfile" ] || continue
        local pid
        pid=$(cat "$pidfile")
        if kill -0 "$pid" 2>/dev/null; then
            if [ "$name" = containerd ]; then
                # The pods' containers first (their shims outlive containerd).
                local ctr="ctr --address $K8S_STATE/containerd.sock -n k8s.io"
                for t in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
                sleep 1
                for t in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks delete -f "$t" >/dev/null 2>&1 || true; done
            fi
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
            say "stopped $name (pid $pid)"
        fi
        rm -f "$pidfile"
    done
    # The bridge of the CNI config written by up (the pods not on the host's network).
    if [ -s "$K8S_STATE/cni/net.d/10-bridge.conflist" ] && ip link show cni0 >/dev/null 2>&1; then
        ip link delete cni0 && say "deleted the bridge cni0"
    fi
    # Mounts the kubelet made for the pods' volumes.
    grep " $K8S_STATE/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount "$m" 2>/dev/null || true; done
}

status() {
    for name in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet; do
        local pidfile="$K8S_STATE/pids/$name"
        if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            echo "$name: runs (pid $(cat "$pidfile"))"
        else
            echo "$name: not running (log: $K8S_STATE/logs/$name.log)"
        fi
    done
    [ -s "$K8S_STATE/admin.conf" ] && kubectl --kubeconfig "$K8S_STATE/admin.conf" get nodes -o wide 2>&1 || true
}

case "${1:-}" in
    build) build ;;
    up) up ;;
    down) down ;;
    status) status ;;
    *) die "usage: scripts/k8s-local.sh up|down|status|build" ;;
esac
