#!/bin/sh
# Builds the throng container image with no registry at all: FROM scratch,
# the static musl binary (scripts/build-static.sh), a static busybox for the
# shell the Kubernetes agents' entrypoint needs, user 10001
# (docker/Containerfile.static). With podman or docker, whichever is here.
#
#   scripts/build-image.sh                 # -> throng:VERSION
#   scripts/build-image.sh registry.example/throng:0.1.0
#
# Environment:
#   THRONG_ENGINE=podman|docker|archive   the engine (default: podman if installed, else
#                                 docker); archive: no engine, write the image as a
#                                 docker-archive tarball, target/image/throng.tar (for
#                                 `ctr images import`, as scripts/k8s-local.sh does)
#   THRONG_BIN=FILE               use this throng instead of building the static one; a
#                                 dynamically linked one (a debug build) gets the loader
#                                 and the libraries ldd names copied beside it
#   THRONG_BUSYBOX=FILE           a statically linked busybox to use (default:
#                                 Debian's busybox-static, fetched with apt-get download)
#
# The context is built in target/image/ (replaced on each run). Run it with, e.g.:
#   podman run --rm --network host throng:VERSION http http://127.0.0.1:8080/ -n 100
set -eu
cd "$(dirname "$0")/.."

die() { echo "build-image: $*" >&2; exit 2; }

engine="${THRONG_ENGINE:-}"
if [ -z "$engine" ]; then
    if command -v podman >/dev/null 2>&1; then engine=podman
    elif command -v docker >/dev/null 2>&1; then engine=docker
    else die "neither podman nor docker is installed: install one (Debian: podman or docker.io) and run again"
    fi
fi
[ "$engine" = archive ] || command -v "$engine" >/dev/null 2>&1 || die "THRONG_ENGINE=$engine: no such command"

if [ -n "${THRONG_BIN:-}" ]; then
    bin="$THRONG_BIN"
    [ -x "$bin" ] || die "THRONG_BIN=$bin is not an executable file"
else
    # The binary: build-static.sh prints its path last on stdout.
    bin=$(sh scripts/build-static.sh | tail -n 1)
    [ -x "$bin" ] || die "scripts/build-static.sh did not make a binary ($bin)"
fi
version=$("$bin" --version | sed -n 's/^throng //p')
[ -n "$version" ] || die "$bin --version did not say its version"
tag="${1:-throng:$version}"

ctx=target/image
rm -rf "$ctx"
mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp"
chmod 1777 "$ctx/rootfs/tmp"
cp "$bin" "$ctx/rootfs/usr/local/bin/throng"
# The release profile keeps debug info (for perf and backtraces on a
# workstation); an image does not need it: 57 MB -> about 13 MB.
if command -v strip >/dev/null 2>&1; then
    strip "$ctx/rootfs/usr/local/bin/throng"
else
    echo "build-image: no strip (binutils) here: the image keeps the binary's debug info" >&2
fi

# A dynamically linked throng: its loader and libraries, at their paths.
case "$(file -L "$bin")" in
    *"dynamically linked"*)
        for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
            mkdir -p "$ctx/rootfs$(dirname "$lib")"
            cp -L "$lib" "$ctx/rootfs$lib"
        done ;;
esac

bb="${THRONG_BUSYBOX:-}"
if [ -z "$bb" ]; then
    command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 \
        || die "no apt-get to fetch busybox-static: set THRONG_BUSYBOX to a statically linked busybox"
    mkdir -p "$ctx/deb"
    (cd "$ctx/deb" && apt-get download busybox-static >&2) \
        || die "apt-get download busybox-static failed (apt-get update first?), or set THRONG_BUSYBOX"
    dpkg-deb -x "$ctx"/deb/busybox-static_*.deb "$ctx/deb/x"
    bb="$ctx/deb/x/bin/busybox"
fi
[ -f "$bb" ] || die "busybox: $bb does not exist"
case "$(file -L "$bb")" in
    *"statically linked"*|*"static-pie linked"*) ;;
    *) die "busybox: $bb is not statically linked (a FROM scratch image has no libc): use busybox-static" ;;
esac
cp "$bb" "$ctx/rootfs/bin/busybox"
# One link per applet: sh, sed, cat (the agent's entrypoint), ls, env, ...
for applet in $("$bb" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$ctx/rootfs/bin/$applet"
done
rm -rf "$ctx/deb"

printf 'root:x:0:0:root:/root:/bin/sh\nthrong:x:10001:10001:throng:/tmp:/bin/false\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nthrong:x:10001:\n' >"$ctx/rootfs/etc/group"
# For https:// targets that verify against the system's roots.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/"
else
    echo "build-image: no /etc/ssl/certs/ca-certificates.crt here: the image has no CA roots (use --cacert)" >&2
fi

if [ "$engine" = archive ]; then
    # A docker-archive (what `docker save` writes): one layer, the config
    # docker/Containerfile.static sets, the tag.
    tar --numeric-owner --owner=0 --group=0 -C "$ctx/rootfs" -cf "$ctx/layer.tar" .
    diff_id=$(sha256sum "$ctx/layer.tar" | cut -d' ' -f1)
    printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/bin:/bin"],"User":"10001:10001","Entrypoint":["throng"],"Cmd":["--help"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}\n' \
        "$diff_id" >"$ctx/config.json"
    printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]\n' "$tag" >"$ctx/manifest.json"
    tar -C "$ctx" -cf "$ctx/throng.tar" manifest.json config.json layer.tar
    rm -f "$ctx/layer.tar"
    echo "build-image: $tag as $ctx/throng.tar ($(stat -c %s "$ctx/throng.tar") bytes), no engine" >&2
    echo "$tag"
    exit 0
fi
"$engine" build -f docker/Containerfile.static -t "$tag" "$ctx" >&2
size=$("$engine" image inspect --format '{{.Size}}' "$tag" 2>/dev/null || echo '?')
echo "build-image: $tag ($size bytes) with $engine" >&2
echo "$tag"
