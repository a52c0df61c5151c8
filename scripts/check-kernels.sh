#!/usr/bin/env bash
# CI check of the run-time compiled kernels (crates/nvshmem/src/kernels/*.cu): compiles every
# instantiation with NVRTC for compute_90. Needs no GPU. Installs NVRTC 13.0 and the CUDA
# headers from PyPI into the target folder (pinned: newer NVRTC may emit PTX that the GPU
# machine's driver 580 refuses), points cudarc's loader and the kernels' header search at
# them, and runs the test that is #[ignore]d in plain `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
wheels="$target/nvrtc-wheels"
if [ ! -f "$wheels/nvidia/cu13/lib/libnvrtc.so.13" ] || [ ! -f "$wheels/nvidia/cu13/include/cuda_fp8.h" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --target "$wheels" \
        nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96
fi
root="$(cd "$wheels/nvidia/cu13" && pwd)"
export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NVSHMEM_RS_CUDA_INCLUDE="$root/include"
exec cargo test -p nvshmem --lib kernels::tests::every_kernel_compiles_with_nvrtc -- --ignored --nocapture
