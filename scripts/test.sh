#!/usr/bin/env bash
# Runs every test that needs no GPU, after installing what is missing (scripts/setup.sh):
# formatting, clippy, the workspace's tests, and an NVRTC compile of every CUDA kernel.
# The GPU test programs show as ignored here, with the reason; scripts/gpu-check.sh runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
scripts/check-kernels.sh
