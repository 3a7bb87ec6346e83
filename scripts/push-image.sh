#!/bin/sh
# Pushes the release's container image (the FROM scratch image of
# scripts/build-image.sh) to a registry: one image per architecture, then one
# manifest list that names both. .github/workflows/release.yml runs it only
# where a registry and its credentials are configured.
#
#   scripts/push-image.sh arch IMAGE ARCH      # IMAGE:VERSION-ARCH, built here and pushed
#   scripts/push-image.sh manifest IMAGE       # IMAGE:VERSION and IMAGE:latest -> both ARCHes
#
# Environment: REGISTRY_USER and REGISTRY_PASSWORD (podman login to IMAGE's
# registry, the part before the first '/'); THRONG_ENGINE as build-image.sh.
set -eu
cd "$(dirname "$0")/.."

die() { echo "push-image: $*" >&2; exit 2; }

engine="${THRONG_ENGINE:-podman}"
command -v "$engine" >/dev/null 2>&1 || die "$engine is not installed (THRONG_ENGINE picks podman or docker)"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$version" ] || die "no version in Cargo.toml's [workspace.package]"

login() { # IMAGE
    if [ -z "${REGISTRY_USER:-}" ] || [ -z "${REGISTRY_PASSWORD:-}" ]; then
        die "REGISTRY_USER and REGISTRY_PASSWORD must be set to push $1"
    fi
    printf '%s' "$REGISTRY_PASSWORD" | "$engine" login --username "$REGISTRY_USER" --password-stdin "${1%%/*}" >&2
}

case "${1:-}" in
    arch)
        image="${2:?arch needs IMAGE}" arch="${3:?arch needs ARCH (amd64 or arm64)}"
        tag=$(sh scripts/build-image.sh "$image:$version-$arch" | tail -n 1)
        login "$image"
        "$engine" push "$tag"
        ;;
    manifest)
        image="${2:?manifest needs IMAGE}"
        login "$image"
        for name in "$version" latest; do
            "$engine" manifest rm "$image:$name" >/dev/null 2>&1 || true
            "$engine" manifest create "$image:$name" "$image:$version-amd64" "$image:$version-arm64"
            "$engine" manifest push --all "$image:$name" "docker://$image:$name"
        done
        ;;
    *) die "usage: scripts/push-image.sh arch IMAGE ARCH | manifest IMAGE" ;;
esac
