#!/usr/bin/env bash
# Compiles every instantiation of the crate's run-time compiled kernels
# (crates/nvshmem/src/kernels/*.cu) with NVRTC for compute_90. Needs no GPU: scripts/setup.sh
# installs NVRTC 13.0 and the CUDA headers from PyPI and points cudarc's loader and the
# kernels' header search at them. The test is #[ignore]d in a plain `cargo test` (it needs
# NVRTC), and run here with --ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
exec cargo test -p nvshmem --lib kernels::tests::every_kernel_compiles_with_nvrtc -- --ignored --nocapture
