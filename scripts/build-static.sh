#!/bin/sh
# Builds a fully static Linux binary of throng (no libc, no loader needed):
# the musl target of this machine's architecture (x86_64 or aarch64), linked
# statically as Rust does for musl. aws-lc-rs compiles its C with musl-gcc
# (Debian: musl-tools), which builds for the machine it runs on: the release
# workflow runs this on an x86_64 and on an arm64 runner.
#
#   scripts/build-static.sh            # -> target/x86_64-unknown-linux-musl/release/throng
#   scripts/build-static.sh --check    # and show `file`/`ldd` of the result
#
# Needs: rustup (to add the target), musl-gcc; installs what is missing
# when it can (rustup target add; apt-get install musl-tools as root or
# with sudo).
set -eu

arch=$(uname -m)
case "$arch" in
    x86_64|aarch64) ;;
    arm64) arch=aarch64 ;;
    *) echo "build-static: no static build for $arch here (x86_64 or aarch64)" >&2; exit 2 ;;
esac
target="$arch-unknown-linux-musl"
cd "$(dirname "$0")/.."

if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    echo "build-static: adding the Rust target $target" >&2
    rustup target add "$target"
fi
if ! command -v musl-gcc >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo" ] || command -v sudo >/dev/null 2>&1; }; then
        echo "build-static: installing musl-tools (musl-gcc, for aws-lc-rs's C)" >&2
        $sudo apt-get install -y musl-tools >&2
    else
        echo "build-static: musl-gcc is missing: install musl-tools (Debian/Ubuntu) or musl (Fedora) and run again" >&2
        exit 2
    fi
fi

# musl-gcc for the C parts (aws-lc-sys); Rust links musl statically by default.
env "CC_$(echo "$target" | tr - _)=musl-gcc" \
    cargo build --release --locked -p throng --target "$target"

bin="target/$target/release/throng"
echo "$bin"
if [ "${1:-}" = "--check" ]; then
    file "$bin"
    ldd "$bin" || true
fi
