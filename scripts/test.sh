#!/usr/bin/env bash
# Runs every test that needs no GPU, after installing what is missing (scripts/setup.sh), and
# prints one summary line last, `N passed, M failed, K skipped`, counted over:
#   - formatting (`cargo fmt --check`) and clippy (`-D warnings`), one check each;
#   - every test of `cargo test --workspace` (unit, integration, doc tests); the GPU test
#     programs are #[ignore]d here and count as skipped (scripts/gpu-check.sh runs them);
#   - `cargo package` of the published crates (nvshmem-sys, nvshmem, nvshmem-run), one check;
#   - the NVRTC compile of every CUDA kernel, and the NVRTC compile + nvJitLink link of every
#     device-initiated kernel (one test per source, tests/device_kernels.rs), both by
#     scripts/check-kernels.sh, counted once: the main run skips them;
#   - the nvcc compile of every probe of tools/probes (scripts/check-probes.sh), one check;
#   - the SASS size of every LL and Lamport kernel against its record (scripts/check-sass.sh),
#     one check.
# Exits non-zero when anything failed.
#
# Clippy and the tests share one build: the workspace's crates are compiled for the tests by
# clippy-driver (RUSTC_WORKSPACE_WRAPPER, what `cargo clippy` does), so clippy lints them while
# they are built, and no separate `cargo check` of every dependency is needed. Any warning it
# reports fails the clippy check, as `cargo clippy --workspace --all-targets -- -D warnings`
# would. Every step runs with the same environment and features, so none rebuilds a crate.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

passed=0 failed=0 skipped=0
failures=()
summary() {
  [ ${#failures[@]} -eq 0 ] || printf 'test: failed: %s\n' "${failures[@]}"
  echo "$passed passed, $failed failed, $skipped skipped"
}
fail() {
  failed=$((failed + 1))
  failures+=("$1")
}
check() { # NAME COMMAND...: one check, passed or failed by the command's exit status
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else fail "$name"; fi
}
step() { printf '\n==> %s\n' "$*" >&2; }

if ! . scripts/setup.sh; then
  fail "set-up (scripts/setup.sh)"
  summary
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plain() { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$@"; } # without colour codes

# Adds libtest's counts from a run's stdout (one `test result:` line per test binary and per
# crate's doc tests) and returns them in $ran_passed $ran_failed $ran_ignored.
count() {
  read -r ran_passed ran_failed ran_ignored < <(plain "$1" |
    sed -nE 's/^test result: [A-Za-z]+\. ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored;.*/\1 \2 \3/p' |
    awk '{p += $1; f += $2; i += $3} END {print p + 0, f + 0, i + 0}')
  passed=$((passed + ran_passed))
  failed=$((failed + ran_failed))
  skipped=$((skipped + ran_ignored))
}

# Runs a test command (stdout kept for counting, stderr shown as it is) and counts its tests;
# a non-zero exit with no failing test counted (a build error, a crashed test binary) is one
# failure more, so the summary never reads as a pass. The exit status is left in $status.
tests() {
  local name=$1 out=$tmp/$2.out
  shift 2
  { "$@" 2>&3 | tee "$out"; } 3>&2
  status=${PIPESTATUS[0]}
  count "$out"
  if [ "$status" -ne 0 ] && [ "$ran_failed" -eq 0 ]; then
    fail "$name (exit $status, no failing test reported: see the errors above)"
  elif [ "$ran_failed" -ne 0 ]; then
    failures+=("$name: $ran_failed test(s), listed above under 'failures:'")
  fi
}

step cargo fmt --all -- --check
check "cargo fmt --all -- --check" cargo fmt --all -- --check

# The build, linted, of what `cargo clippy --all-targets` checks: the lib, bins, tests and
# benches in test mode, and the bins and examples as they are built for use (which is also how
# `cargo test` builds examples, so the test run below compiles nothing more).
step "clippy (clippy-driver builds the workspace for the tests)"
if driver=$(command -v clippy-driver); then
  export RUSTC_WORKSPACE_WRAPPER=$driver
  {
    cargo test --workspace --lib --bins --tests --benches --no-run &&
      cargo build --workspace --bins --examples
  } 2>&1 | tee "$tmp/build.log"
  build=${PIPESTATUS[0]}
  warnings=$(plain "$tmp/build.log" | grep -cE '^warning: .* generated [0-9]+ warnings?' || true)
  if [ "$build" -ne 0 ]; then
    fail "clippy (the build failed)"
  elif [ "$warnings" -ne 0 ]; then
    fail "clippy ($warnings target(s) with warnings, above)"
  else
    passed=$((passed + 1))
  fi
else
  fail "clippy (clippy-driver not found: rustup component add clippy)"
fi

step cargo test --workspace
device_skips=()
for t in $(scripts/check-kernels.sh --list-device-tests); do device_skips+=(--skip "$t"); done
tests "cargo test --workspace" workspace \
  cargo test --workspace --no-fail-fast -- --skip kernels::tests::every_kernel_compiles_with_nvrtc "${device_skips[@]}"

# The published crates, packaged as crates.io would get them and each built from its package
# alone (the verify step), together so that nvshmem builds against the packaged nvshmem-sys:
# a file the build needs but the package leaves out, or a manifest warning, fails here. Offline:
# the build above has fetched every crate they need. (About a minute with nothing built, a few
# seconds after the build above.) cargo verifies them through a temporary local registry, whose
# crates it unpacks under $CARGO_HOME/registry/src/-<hash>/ and, when a directory of the same
# name and version is already there, reuses without comparing it with the new package: a
# second run would build nvshmem against the first run's nvshmem-sys. Those unpacked copies
# (of a local registry: its directory has no host name) are removed first.
step cargo package
published=(nvshmem-sys nvshmem nvshmem-run)
for crate in "${published[@]}"; do
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate"-[0-9]*
done
cargo package --allow-dirty --offline "${published[@]/#/--package=}" 2>&1 | tee "$tmp/package.log"
package=${PIPESTATUS[0]}
if [ "$package" -ne 0 ]; then
  fail "cargo package (exit $package, above)"
elif plain "$tmp/package.log" | grep -q '^warning'; then
  fail "cargo package (warnings, above)"
else
  passed=$((passed + 1))
fi

step scripts/check-probes.sh
check "scripts/check-probes.sh (tools/probes compile with nvcc)" scripts/check-probes.sh

step scripts/check-sass.sh
check "scripts/check-sass.sh (the small calls' kernels no larger in SASS than recorded)" scripts/check-sass.sh

step scripts/check-kernels.sh
tests "scripts/check-kernels.sh" kernels scripts/check-kernels.sh
if [ "$status" -eq 0 ] && [ "$ran_passed" -eq 0 ] && [ "$ran_failed" -eq 0 ]; then
  fail "scripts/check-kernels.sh ran no test"
fi

echo
summary
[ "$failed" -eq 0 ]
