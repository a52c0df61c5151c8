#!/usr/bin/env bash
# Regenerates crates/nvshmem-sys/src/bindings.rs from the headers of pinned wheels.
#
#   scripts/gen-bindings.sh [NVSHMEM_VERSION]      (default: the release the bindings track)
#
# Needs python3 with pip, clang's library (libclang-dev) and network access to PyPI. The
# bindings cover every function that nvshmem_host.h declares and libnvshmem_host.so.3
# exports; to move to a newer 3.x, pass its version and commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."

NVSHMEM_VERSION=${1:-3.4.5}
# The CUDA 13 header wheels NVSHMEM's host headers include (cuda.h, cuda_runtime.h, cuda_fp16.h);
# the nvidia-cuda-*-cu13 names on PyPI are empty stubs.
CUDA_WHEELS="nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip install -q --no-deps --target "$work" "nvidia-nvshmem-cu13==$NVSHMEM_VERSION" $CUDA_WHEELS
inc="$work/nvidia/nvshmem/include"
cuda_inc="$work/nvidia/cu13/include"
nm -D --defined-only "$work/nvidia/nvshmem/lib/libnvshmem_host.so.3" | awk '{print $3}' >"$work/exported.txt"

cargo run --quiet --release --manifest-path crates/nvshmem-sys/generator/Cargo.toml -- \
  "$inc" "$cuda_inc" "$work/exported.txt" crates/nvshmem-sys/src/bindings.rs
echo "regenerated crates/nvshmem-sys/src/bindings.rs from NVSHMEM $NVSHMEM_VERSION:" \
  "$(grep -c 'pub unsafe fn' crates/nvshmem-sys/src/bindings.rs) functions"
