#!/usr/bin/env bash
# What every commit must pass before it lands: formatting and lints.
# (Tests: scripts/test.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
