#!/usr/bin/env bash
# What every commit must pass before it lands: formatting, lints and no
# import circle between the files of a crate.
# (Tests: scripts/test.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
python3 scripts/circles.py
