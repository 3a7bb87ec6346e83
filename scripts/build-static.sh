#!/bin/sh
# Builds a fully static Linux binary of throng (no libc, no loader needed):
# the x86_64-unknown-linux-musl target, linked statically as Rust does for
# musl. aws-lc-rs compiles its C with musl-gcc (Debian: musl-tools).
#
#   scripts/build-static.sh            # -> target/x86_64-unknown-linux-musl/release/throng
#   scripts/build-static.sh --check    # and show `file`/`ldd` of the result
#
# Needs: rustup (to add the target), musl-gcc; installs what is missing
# when it can (rustup target add; apt-get install musl-tools as root).
set -eu

target=x86_64-unknown-linux-musl
cd "$(dirname "$0")/.."

if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    echo "build-static: adding the Rust target $target" >&2
    rustup target add "$target"
fi
if ! command -v musl-gcc >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "build-static: installing musl-tools (musl-gcc, for aws-lc-rs's C)" >&2
        apt-get install -y musl-tools >&2
    else
        echo "build-static: musl-gcc is missing: install musl-tools (Debian/Ubuntu) or musl (Fedora) and run again" >&2
        exit 2
    fi
fi

# musl-gcc for the C parts (aws-lc-sys); Rust links musl statically by default.
CC_x86_64_unknown_linux_musl=musl-gcc \
    cargo build --release --locked -p throng --target "$target"

bin="target/$target/release/throng"
echo "$bin"
if [ "${1:-}" = "--check" ]; then
    file "$bin"
    ldd "$bin" || true
fi
