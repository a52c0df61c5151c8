#!/usr/bin/env bash
# Runs nvshmem-perf on the GPU machine (2 PEs, one per GPU) for every collective from 8 B to
# 256 MiB, stream mode and CUDA-graph mode, and writes JSON, CSV, SVG and markdown into OUT
# (default perf-DATE, git-ignored raw output: what a user needs goes into docs/performance.md).
#
#   scripts/perf-gpu.sh [OUT] [extra nvshmem-perf flags...]
#
# BIN (default target/release/nvshmem-perf), NP (default 2), WHEELS (site-packages holding
# nvidia/nvshmem and nvidia/nccl; default /opt/torch/.venv/lib/python3.12/site-packages).
set -euo pipefail
OUT=${1:-perf-$(date +%Y-%m-%d)}
shift || true
BIN=${BIN:-target/release/nvshmem-perf}
NP=${NP:-2}
WHEELS=${WHEELS:-/opt/torch/.venv/lib/python3.12/site-packages}
mkdir -p "$OUT"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Never NVLink multicast; NVSHMEM and NCCL both.
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
export NVSHMEM_LIBRARY=${NVSHMEM_LIBRARY:-$WHEELS/nvidia/nvshmem/lib/libnvshmem_host.so.3}
# The NCCL the anchors used (the wheel's), not the system one found on the loader path.
export NCCL_HOME=${NCCL_HOME:-$WHEELS/nvidia/nccl}
# 256 MiB in + out per implementation, plus NVSHMEM's own reserve.
export NVSHMEM_SYMMETRIC_SIZE=${NVSHMEM_SYMMETRIC_SIZE:-4G}

run() {
  local name=$1; shift
  mpirun -np "$NP" --bind-to none \
    -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
    -x NVSHMEM_DISABLE_NVLS -x NCCL_NVLS_ENABLE -x NVSHMEM_LIBRARY -x NCCL_HOME \
    -x NVSHMEM_SYMMETRIC_SIZE -x LD_LIBRARY_PATH -x NCCL_DEBUG=WARN \
    ${NVSHMEM_RS_KERNEL_CACHE:+-x NVSHMEM_RS_KERNEL_CACHE} ${RUST_LOG:+-x RUST_LOG} \
    "$BIN" all -b 8 -e 256M -f 2 -n 50 -w 5 --reps 5 -c 1 -C 1 --no-progress --ceiling 361 \
      --json "$OUT/$name.jsonl" --csv "$OUT/$name.csv" --plot "$OUT/$name.svg" \
      --markdown "$OUT/$name.md" "$@" "${EXTRA[@]}" | tee "$OUT/$name.txt"
}
EXTRA=("$@")

# MODES picks the runs (one GPU call of 10 minutes holds about one of them). Graph mode checks
# what it times, a launch of the captured call, once per point after timing: the same check
# stream mode makes before timing, so no dearer.
for mode in ${MODES:-stream graph}; do
  case $mode in
    stream) run stream ;;
    graph) run graph -G 1 -c 1 ;;
  esac
done

{
  echo "# nvshmem-perf results"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- machine: $(hostname), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tr '\n' ';')"
  echo "- NVSHMEM: $NVSHMEM_LIBRARY"
  echo "- $(grep -h '^# NCCL' "$OUT/stream.txt" | head -1 | sed 's/^# //')"
  echo "- env: NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 NVSHMEM_SYMMETRIC_SIZE=$NVSHMEM_SYMMETRIC_SIZE, $NP PEs"
  echo
  for mode in stream graph; do
    [ -f "$OUT/$mode.md" ] && { echo "## $mode mode"; echo; cat "$OUT/$mode.md"; }
  done
} > "$OUT/README.md"
echo "wrote $OUT"
