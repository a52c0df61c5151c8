#!/usr/bin/env bash
# Builds an example and runs it with one PE per GPU of this machine through nvshmem-run.
#
#   scripts/run-example.sh [EXAMPLE] [ARGS...]      (EXAMPLE defaults to hello)
#
# EXAMPLE is the name of any file of examples/ without `.rs` (hello, quick_start, halo, train_step, teams,
# timing, faults, ping_pong, halo_device); an unknown name makes cargo list the examples there are.
#
# Set-up (system packages, Rust, the NVSHMEM wheel) is done by scripts/setup.sh, skipping what
# is present. Without an NVIDIA GPU the example is still built, then says it needs one.
set -euo pipefail
cd "$(dirname "$0")/.."
example=${1:-hello}
shift || true
. scripts/setup.sh
cargo build --release --example "$example"
cargo build --release -p nvshmem-run
# Where cargo put them: target/, unless CARGO_TARGET_DIR says otherwise.
bin=${CARGO_TARGET_DIR:-target}/release
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -eq 0 ]; then
  echo "run-example: no NVIDIA GPU found (nvidia-smi lists none); running one PE to show the error" >&2
  exec "$bin/examples/$example" "$@"
fi
exec "$bin/nvshmem-run" -n "$gpus" "$bin/examples/$example" "$@"
