#!/usr/bin/env bash
# Compiles every probe of tools/probes (standalone CUDA programs that scripts/gpu-check.sh
# builds and runs on the GPU machine) with nvcc for sm_90, to object files only: no GPU, no
# driver and no link needed. Two of them (lamport.cu, llpath.cu) compile the crate's kernel
# sources themselves, so a change to a kernel helper that breaks a probe shows here, not on the
# next GPU call. nvcc, its headers and cicc come from scripts/setup.sh (.deps/nvcc,
# NVSHMEM_RS_NVCC); the CUDA runtime's headers from its wheel (NVSHMEM_RS_CUDA_INCLUDE). About
# a minute on 2 cores. Prints one line a probe and exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/setup.sh || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for f in tools/probes/*.cu; do
  if "$NVSHMEM_RS_NVCC" -O3 -std=c++17 -arch=sm_90 -I"$NVSHMEM_RS_CUDA_INCLUDE" \
    -isystem "$NVSHMEM_RS_CUDA_INCLUDE/cccl" -c "$f" -o "$tmp/probe.o" 2>"$tmp/log"; then
    echo "check-probes: $f compiles"
  else
    echo "check-probes: $f does not compile:" >&2
    cat "$tmp/log" >&2
    status=1
  fi
done
exit $status
