#!/usr/bin/env bash
# Builds the NVSHMEM reproduction program (repro.cpp, host code only) with nvcc, MPI's C++
# compiler as nvcc's host compiler, against NVSHMEM's host library from the pip wheel.
#
#   tools/nvshmem-repro/build.sh [OUTPUT]        (OUTPUT defaults to /tmp/nvshmem-repro)
#
# NVSHMEM_HOME: the wheel's nvidia/nvshmem folder (default: the GPU machine's
# /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem); NCCL_HOME likewise, below.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nv=${NVSHMEM_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem}
out=${1:-/tmp/nvshmem-repro}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# The library is named by path (its file is libnvshmem_host.so.3, with no unversioned link),
# and found at run time through the rpath, as are its bootstrap plugins beside it ($ORIGIN).
# MPI through its C++ wrapper as nvcc's host compiler, or else pkg-config's flags for Open MPI.
if command -v mpicxx >/dev/null; then
  mpi=(-ccbin mpicxx)
else
  mpi=()
  for f in $(pkg-config --cflags --libs ompi-c); do
    case $f in -pthread) mpi+=(-Xcompiler -pthread) ;; *) mpi+=("$f") ;; esac
  done
fi
# NCCL (the graph_nccl_* cases) where its headers are found: NCCL_HOME, the wheel's
# nvidia/nccl (default: the GPU machine's), linked by path as NVSHMEM's host library.
nccl_home=${NCCL_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}
nccl=()
if [ -f "$nccl_home/include/nccl.h" ]; then
  nccl=(-DREPRO_NCCL -I"$nccl_home/include" -Xlinker "$nccl_home/lib/libnccl.so.2"
    -Xlinker "-rpath=$nccl_home/lib")
fi
"$nvcc" -std=c++17 -O2 "${mpi[@]}" "$here/repro.cpp" -I"$nv/include" "${nccl[@]}" \
  -Xlinker "$nv/lib/libnvshmem_host.so.3" -Xlinker "-rpath=$nv/lib" -lcuda -o "$out"
echo "built $out"
