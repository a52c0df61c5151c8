#!/usr/bin/env bash
# Compiles every instantiation of the crate's run-time compiled kernels
# (crates/nvshmem/src/kernels/*.cu) with NVRTC for compute_90. Needs no GPU: scripts/setup.sh
# installs NVRTC 13.0 and the CUDA headers from PyPI and points cudarc's loader and the
# kernels' header search at them. The test is #[ignore]d in a plain `cargo test` (it needs
# NVRTC), and run here with --ignored. It selects what `cargo test --workspace` does (not
# `-p nvshmem` or `--lib`, which change the features or the build dependencies' settings), so
# after a `cargo test --workspace` nothing is recompiled; every other test is filtered out.
#
# Then every device-initiated kernel the repository ships (examples/kernels/*.cu,
# crates/nvshmem-perf/kernels/device_perf.cu) is compiled by NVRTC and linked by nvJitLink with
# NVSHMEM's device library, by both routes, for sm_90 (tests/device_kernels.rs, one test per
# source plus the put-with-signal and error-path checks), with the kernel cache off so that
# each really compiles and links: once for each NVSHMEM release in NVSHMEM_RS_DEVICE_HOMES
# (scripts/setup.sh: 3.4.5's wheel and 3.8.0's device files, whose headers declare the
# put-with-signal function the crate's header bridges differently), each named by
# NVSHMEM_HOME, which the device build reads. Each run's tests count apart (about a minute
# more per release on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
# The compile+link checks of tests/device_kernels.rs (scripts/test.sh skips them in its main run).
device_kernel_tests() { sed -n 's/^fn \([a-z0-9_]*\)() {$/\1/p' tests/device_kernels.rs; }
[ "${1:-}" = --list-device-tests ] && { device_kernel_tests; exit 0; }
. scripts/setup.sh
cargo test --workspace -- --ignored --exact kernels::tests::every_kernel_compiles_with_nvrtc --nocapture
status=0
for home in ${NVSHMEM_RS_DEVICE_HOMES:-$NVSHMEM_HOME}; do
  version=$(sed -n 's/^#define NVSHMEM_VENDOR_\(MAJOR\|MINOR\|PATCH\)_VERSION \([0-9]*\).*/\2/p' "$home/include/non_abi/nvshmem_version.h" | paste -sd.)
  echo "check-kernels: device-initiated kernels against NVSHMEM $version ($home)" >&2
  # shellcheck disable=SC2046 # one test name a word
  NVSHMEM_HOME=$home NVSHMEM_RS_KERNEL_CACHE=off cargo test --workspace -- --ignored --exact $(device_kernel_tests) --nocapture || status=1
done
exit $status
