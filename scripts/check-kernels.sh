#!/usr/bin/env bash
# Compiles every instantiation of the crate's run-time compiled kernels
# (crates/nvshmem/src/kernels/*.cu) with NVRTC for compute_90. Needs no GPU: scripts/setup.sh
# installs NVRTC 13.0 and the CUDA headers from PyPI and points cudarc's loader and the
# kernels' header search at them. The test is #[ignore]d in a plain `cargo test` (it needs
# NVRTC), and run here with --ignored. It selects what `cargo test --workspace` does (not
# `-p nvshmem` or `--lib`, which change the features or the build dependencies' settings), so
# after a `cargo test --workspace` nothing is recompiled; every other test is filtered out.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
exec cargo test --workspace -- --ignored --exact kernels::tests::every_kernel_compiles_with_nvrtc --nocapture
