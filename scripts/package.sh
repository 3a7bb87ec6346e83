#!/bin/sh
# Packages a built throng for a release: the tarball, the Debian package, the
# checksums and the Homebrew formula. .github/workflows/release.yml calls it
# for each target, and the cli tests call it on the debug binary
# (crates/cli/tests/cli/package.rs), so the logic the release runs is the
# logic tested here.
#
#   scripts/package.sh check-tag TAG
#       fails unless TAG is v and the workspace version (v0.1.0): a release's
#       assets are named by the version, its URLs by the tag
#   scripts/package.sh names TARGET [VERSION]
#       the assets' names for a target, one `kind name` a line (tarball, dir,
#       deb): the one place they are made
#   scripts/package.sh dist [--target TRIPLE] [--profile release|dev] [--out DIR]
#                           [--gen-with BIN] [--fast]
#       from target/[TRIPLE/]PROFILE/throng (built before, e.g. by
#       scripts/build-static.sh): man pages and completions beside it in
#       package/, then OUT/throng-VERSION-TRIPLE.tar.gz and
#       OUT/throng_VERSION-1_ARCH.deb (cargo deb --no-build). --gen-with runs
#       another binary to generate the pages (a cross-built one cannot run
#       here); --fast compresses at the fastest levels (xz -1 for the .deb,
#       gzip -1 for the tarball: seconds instead of minutes, for tests).
#       OUT defaults to target/dist. (With --profile dev, cargo-deb 3.8
#       warns that it is meant for release builds: the tests accept that.)
#   scripts/package.sh checksums DIR
#       DIR/SHA256SUMS over DIR's tarballs and .debs (sha256sum -c reads it)
#   scripts/package.sh homebrew DIR
#       DIR/throng.rb: packaging/homebrew/throng.rb.in with the version and
#       the tarballs' sha256 from DIR/SHA256SUMS
#
# Needs: tar, gzip, sha256sum; cargo-deb for `dist` (cargo install --locked
# cargo-deb --version 3.8.0).
set -eu
cd "$(dirname "$0")/.."

die() { echo "package.sh: $*" >&2; exit 2; }

# The workspace version (Cargo.toml's [workspace.package]).
version() {
    v=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
    [ -n "$v" ] || die "no version in Cargo.toml's [workspace.package]"
    echo "$v"
}

# Debian's name for the architecture of a Rust target triple.
deb_arch() {
    case "$1" in
        x86_64-*) echo amd64 ;;
        aarch64-*) echo arm64 ;;
        *) die "no Debian architecture known for the target $1 (x86_64-* or aarch64-*)" ;;
    esac
}

# names TARGET VERSION: the release's asset names. The binstall metadata in
# crates/cli/Cargo.toml and packaging/homebrew/throng.rb.in name the same
# files (checked by the cli test package::binstall_names_the_release_assets).
names() {
    echo "tarball throng-$2-$1.tar.gz"
    echo "dir throng-$2-$1"
    echo "deb throng_$2-1_$(deb_arch "$1").deb"
}

name_of() { # KIND TARGET VERSION
    names "$2" "$3" | sed -n "s/^$1 //p"
}

dist() {
    target="" profile=release out=target/dist gen="" fast=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --target) target="${2:?--target needs a triple}"; shift 2 ;;
            --profile) profile="${2:?--profile needs release or dev}"; shift 2 ;;
            --out) out="${2:?--out needs a directory}"; shift 2 ;;
            --gen-with) gen="${2:?--gen-with needs a binary}"; shift 2 ;;
            --fast) fast=1; shift ;;
            *) die "dist: unknown argument '$1' (see the top of scripts/package.sh)" ;;
        esac
    done
    case "$profile" in
        release) pdir=release ;;
        dev|debug) profile=dev pdir=debug ;;
        *) die "dist: --profile $profile: use release or dev" ;;
    esac
    host=$(rustc -vV | sed -n 's/^host: //p')
    triple="${target:-$host}"
    tdir="${CARGO_TARGET_DIR:-target}"
    if [ -n "$target" ]; then bindir="$tdir/$target/$pdir"; else bindir="$tdir/$pdir"; fi
    bin="$bindir/throng"
    [ -x "$bin" ] || die "no $bin: build it first (scripts/build-static.sh, or cargo build -p throng)"
    gen="${gen:-$bin}"
    v=$(version)
    said=$("$gen" --version) || die "$gen --version failed: give a binary that runs here with --gen-with"
    [ "$said" = "throng $v" ] || die "$gen says '$said', Cargo.toml says $v: rebuild it"

    # Man pages and completions, generated from the definitions --help is
    # rendered from, beside the binary (cargo-deb finds them there).
    assets="$bindir/package"
    rm -rf "$assets"
    mkdir -p "$assets/man" "$assets/completions"
    "$gen" man "$assets/man" 2>/dev/null
    [ -f "$assets/man/throng.1" ] || die "$gen man wrote no throng.1"
    # Debian ships man pages gzipped (cargo-deb compresses only the files it
    # did not find beside the binary).
    mkdir -p "$assets/man-gz"
    for page in "$assets"/man/*.1; do
        gzip -n -9 <"$page" >"$assets/man-gz/${page##*/}.gz"
    done
    "$gen" completions bash >"$assets/completions/throng.bash"
    "$gen" completions zsh >"$assets/completions/_throng"
    "$gen" completions fish >"$assets/completions/throng.fish"

    mkdir -p "$out"
    # The tarball: one directory, the stripped binary, the licences, the
    # README, the pages and completions; owned by root, files in name order,
    # dated by the last commit (reproducible).
    dir=$(name_of dir "$triple" "$v")
    tarball=$(name_of tarball "$triple" "$v")
    stage="$bindir/package/stage"
    mkdir -p "$stage/$dir"
    cp "$bin" "$stage/$dir/throng"
    if command -v strip >/dev/null 2>&1 && strip "$stage/$dir/throng" 2>/dev/null; then :; else
        echo "package.sh: could not strip $bin (no strip for $triple here): the tarball keeps its debug info" >&2
    fi
    cp README.md LICENSE-MIT LICENSE-APACHE "$stage/$dir/"
    cp -R "$assets/man" "$assets/completions" "$stage/$dir/"
    level=9
    [ -n "$fast" ] && level=1
    epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
    tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -cf - "$dir" \
        | gzip -n "-$level" >"$out/$tarball"
    rm -rf "$stage"
    echo "$out/$tarball"

    # The .deb: cargo-deb's metadata in crates/cli/Cargo.toml, no build.
    cargo deb --version >/dev/null 2>&1 \
        || die "cargo-deb is missing: cargo install --locked cargo-deb --version 3.8.0"
    deb=$(name_of deb "$triple" "$v")
    # --strip: the release profile keeps line tables (for perf and
    # backtraces on a workstation), which cargo-deb would otherwise ship.
    set -- -p throng --no-build --strip --profile "$profile" --output "$out/$deb"
    [ -n "$target" ] && set -- "$@" --target "$target"
    [ -n "$fast" ] && set -- "$@" --fast
    cargo deb "$@" >/dev/null
    [ -f "$out/$deb" ] || die "cargo deb made no $out/$deb"
    echo "$out/$deb"
}

checksums() {
    dir="${1:?checksums needs the directory of the assets}"
    [ -d "$dir" ] || die "checksums: no directory $dir"
    (
        cd "$dir"
        set --
        for f in *.tar.gz *.deb; do
            [ -f "$f" ] && set -- "$@" "$f"
        done
        [ $# -gt 0 ] || die "checksums: no .tar.gz or .deb in $dir"
        sha256sum "$@" >SHA256SUMS
    )
    echo "$dir/SHA256SUMS"
}

homebrew() {
    dir="${1:?homebrew needs the directory of the assets and their SHA256SUMS}"
    [ -f "$dir/SHA256SUMS" ] || die "homebrew: no $dir/SHA256SUMS (run: scripts/package.sh checksums $dir)"
    v=$(version)
    sum_of() { # TARGET
        f=$(name_of tarball "$1" "$v")
        s=$(awk -v f="$f" '$2 == f || $2 == "*" f { print $1 }' "$dir/SHA256SUMS")
        [ -n "$s" ] || die "homebrew: $dir/SHA256SUMS has no line for $f"
        echo "$s"
    }
    x86=$(sum_of x86_64-unknown-linux-musl)
    arm=$(sum_of aarch64-unknown-linux-musl)
    sed -e "s/@VERSION@/$v/g" -e "s/@SHA256_X86_64@/$x86/g" -e "s/@SHA256_AARCH64@/$arm/g" \
        packaging/homebrew/throng.rb.in >"$dir/throng.rb"
    if grep -q '@[A-Z0-9_]*@' "$dir/throng.rb"; then
        die "homebrew: placeholders left in $dir/throng.rb"
    fi
    echo "$dir/throng.rb"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
    check-tag)
        tag="${1:?check-tag needs the tag}"
        [ "$tag" = "v$(version)" ] || die "the tag $tag is not v$(version), the version in Cargo.toml: tag v$(version), or change the version first"
        echo "$tag" ;;
    names) names "${1:?names needs a target triple}" "${2:-$(version)}" ;;
    dist) dist "$@" ;;
    checksums) checksums "$@" ;;
    homebrew) homebrew "$@" ;;
    *) die "usage: scripts/package.sh check-tag|names|dist|checksums|homebrew ... (see the top of the script)" ;;
esac
