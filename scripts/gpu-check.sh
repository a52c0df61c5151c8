#!/usr/bin/env bash
# The one driver of every GPU run: builds here, then checks and times on the GPU machine.
#
#   scripts/gpu-check.sh stage            on a build machine (has cargo and apt-get): builds the
#                                         GPU test programs, examples and tools in release mode,
#                                         fetches Hydra (nvshmrun's launcher) from Debian, and
#                                         copies them into .gpu/ (git-ignored; carry it)
#                                         (KERNEL_CACHE=gpu: the kernel cache is filled on the
#                                         GPU machine at the start of `run`, not here)
#   scripts/gpu-check.sh stage-hydra      the Hydra part of `stage` alone, into .gpu/hydra
#   scripts/gpu-check.sh stage-small      `stage` with only the programs of the `device` and
#                                         `foundation` suites (GPU_BINS below), so that .gpu
#                                         travels beside an NVSHMEM tarball
#   scripts/gpu-check.sh stage-nvshmem [VERSION]
#                                         on a build machine: NVSHMEM VERSION (default 3.8.0),
#                                         the `nvidia-nvshmem-cu13` wheel's nvidia/nvshmem folder
#                                         (host library, plugins, headers, libnvshmem_device.a)
#                                         without its per-architecture
#                                         lib/libnvshmem_device_sm_*.bc, packed by `tar -cJf`
#                                         as .gpu-nvshmem/nvshmem-VERSION.tar.xz (git-ignored;
#                                         3.8.0: 63 MB unpacked, 41.4 MB by xz -9e, a few
#                                         minutes; the wheel is kept in .nvshmem-cache/)
#   scripts/gpu-check.sh stage-old [NAME=]REV...
#                                         on a build machine, after `stage`: nvshmem-perf of
#                                         older commits into .gpu/old/ for `latency` (below)
#   scripts/gpu-check.sh run [SUITES...]  on the GPU machine (no Rust there): runs the staged
#                                         programs with 1 and 2 PEs under every launcher that can
#                                         start there (mpirun, nvshmem-run, Hydra, none) and prints
#                                         a summary last. SUITES default to "foundation"; others:
#                                         foundation_hydra (its Hydra legs alone), examples,
#                                         faults, waits, soak, collectives, multipe, shared_gpu, scale, semantics, repro, lifetimes,
#                                         device, perf, perfgraph, perfiso, reddiag,
#                                         perfpoints, pdl, cepoints, perfgraphsplit, mismatch,
#                                         checkcost (the call check's cost, off and on),
#                                         perfinplace (nvshmem-perf --in-place, checked),
#                                         onepe (1 PE, no launcher, about a minute),
#                                         hostcost (host time of a call, 1 PE, no MPS),
#                                         quietstart (no NVSHMEM error lines at start),
#                                         uneven (3 PEs on 2 GPUs refused, MPS=1),
#                                         spread (foundation, one PE a GPU, PES above 1),
#                                         latency (older builds' 8 B beside this one;
#                                         LATENCY_ARGS other sizes), midband (the reductions
#                                         64 KiB-2 MiB, Lamport), llwide (the copies 16 KiB-
#                                         1 MiB: auto, LL and direct forced), twoshotprobe
#                                         (tools/probes/two_shot.cu: SM-load, SM-store and
#                                         copy-engine two-shot reductions, 2 GPUs, one process),
#                                         ceframeprobe (tools/probes/ce_frame.cu: what a
#                                         copy-engine call costs beyond its copy, 2 GPUs),
#                                         tmaprobe (tools/probes/tma_copy.cu: bulk-copy moves
#                                         against copy engines and SM stores, 2 GPUs),
#                                         hostreadprobe (tools/probes/host_read.cu: a load of
#                                         pinned host memory, alone and during a move, 2 GPUs),
#                                         lamportprobe (tools/probes/lamport.cu: the crate's
#                                         Lamport all-reduce outside the library, beside a
#                                         plain one, 2 GPUs),
#                                         kernelprof (Nsight Compute on one PE: the small
#                                         kernels' time on the GPU and their stalls),
#                                         floorprobe (tools/probes/floor.cu: a graph node,
#                                         the link's one-way latency, a plain barrier and
#                                         8-byte LL all-reduce in a graph, 2 GPUs),
#                                         llpathprobe (tools/probes/llpath.cu: the crate's
#                                         LL all-reduce outside the library, pieces taken
#                                         out one at a time, 2 GPUs),
#                                         ll128probe (tools/probes/ll128.cu: copies of 64 KiB-
#                                         2 MiB at 120 data bytes a 128-byte line, torn lines
#                                         counted, beside LL and a direct push, 2 GPUs),
#                                         sweep (every algorithm forced beside the automatic
#                                         choice, NVSHMEM and NCCL, 4 KiB-256 MiB: crossovers).
#                                         waits: every wait the library queues ends within
#                                         NVSHMEM_RS_TIMEOUT=5s (tests/gpu_waits.rs): a signal
#                                         never sent at every count of PES, a peer that never
#                                         joins this crate's kernels or NVSHMEM's at every count
#                                         above 1 (about 15 s a case; MPS=1 PES="3 4 8" too).
#                                         Each of collectives, perf
#                                         and perfgraph needs most of one 10-minute call; soak up
#                                         to 9 min.
#
# Another NVSHMEM than the GPU machine's (3.4.5): NVSHMEM_VERSION=3.8.0 runs every suite with
# the release staged by `stage-nvshmem 3.8.0`: .gpu-nvshmem/nvshmem-3.8.0.tar.xz is unpacked
# (once, into ${TMPDIR:-/tmp}/gpu-check-nvshmem-3.8.0) and NVSHMEM_HOME (the device build's
# headers and libnvshmem_device.a), NVSHMEM_LIBRARY (the host library) and LD_LIBRARY_PATH (its
# plugins) point at it, for every PE of every launcher. The device tool carries at most 64 MiB
# with the working tree, so beside the 41.4 MB tarball .gpu must be small. With 3.4 MB tracked
# (2026-11-26) `stage-small` fit (its 5 programs 5.9 MB, Hydra 1.2 MB, the kernel cache about
# 6 MB: 58 MB in all):
#     scripts/gpu-check.sh stage-small && scripts/gpu-check.sh stage-nvshmem 3.8.0
#     (carry .gpu and .gpu-nvshmem)
#     NVSHMEM_VERSION=3.8.0 scripts/gpu-check.sh run device foundation
# With 22.5 MB tracked (2026-11-28, docs/perf's data and plots) about 2 MB is left for .gpu (a
# .gpu of 3.1 MB was refused, one of 1.9 accepted): four programs packed by xz, no Hydra, no
# kernel cache (each PE compiles what it uses):
#     GPU_BINS="gpu_foundation gpu_waits gpu_collectives nvshmem-run" GPU_PACK=xz \
#         KERNEL_CACHE=none STAGE_HYDRA=0 scripts/gpu-check.sh stage
#     NVSHMEM_HOST_ONLY=1 scripts/gpu-check.sh stage-nvshmem 3.8.0
#     NVSHMEM_VERSION=3.8.0 scripts/gpu-check.sh run foundation collectives waits
# With 25 MB tracked (2026-11-28, after docs/perf/lean-2026-11-28) not even that fits (refused
# at 64.2 MiB): docs/perf (21 MB), which no suite reads on the GPU machine, is moved out of the
# working tree for the call and back after it (mv docs/perf /tmp/perf-aside; the call;
# mv /tmp/perf-aside docs/perf), as that day's 3.8.0 check did.
# (NVSHMEM_HOST_ONLY=1: the host library, stripped, ibrc and the bootstrap plugins, no device
# library.)
# GPU_BINS="a b ..." with `stage` copies only those programs (test programs by their test
# name, examples, nvshmem-run, nvshmem-perf) into .gpu/bin.
#
# Logs go to $OUT (the device tool's output folder) or ./gpu-logs. NVLink multicast stays off
# for every process: NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0.
#
# PE counts: PES (default "1 2") is the list of PE counts that foundation, examples, scale,
# semantics, repro and the collectives matrix (MATRIX_PES, default PES) run at.
#
# semantics (tests/gpu_semantics.rs, at each PE count of PES, 1 included): all_reduce, reduce
# and reduce_scatter, in place and not, by avg, sum, premul_sum, min and max, on every numeric
# type with values near its limits, at element counts either side of every crossover, by the
# automatic choice, by each algorithm forced and through prepared calls, checked against the
# documented semantics (collective/mod.rs, "Reductions"). Each PE count takes about a minute
# or two (SEMANTICS_TIMEOUT, default 300 s); PE 0 prints "semantics <type>: N cases
# passed, 0 failed, K refused by a forced algorithm" per type.
#
# Several PEs on one GPU: MPS=1 runs the whole suite list with CUDA MPS (README, "Launching";
# /work/shared/platform.md): the control daemon is started with its own pipe and log folders
# (under /tmp, or MPS_DIR), an N-PE case runs on the most of the G GPUs that take its PEs
# evenly (CUDA_VISIBLE_DEVICES, unless the caller set it: 3 PEs on one GPU of two, since PEs
# spread unevenly never start), every PE gets the thread share CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
# = 100 / ceil(N / G) (passed to every launcher, mpirun -x included), MPS is restarted after a case that was killed (a killed client can leave the server
# unusable), and quit when the run ends, however it ends. MPS_SHARE=none gives no share and sets
# NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1 instead (the PEs' kernels then compete for
# every SM). For example, on one GPU:
#     MPS=1 PES="3 4 8" scripts/gpu-check.sh run foundation examples collectives
# Without MPS=1 nothing of this happens and the cases are those of one PE per GPU.
#
# mismatch: tests/gpu_mismatch.rs, one process per case (GPU_MISMATCH_CASE; MISMATCH_CASES, a
# space-separated list, picks some) under nvshmem-run at each PE count of PES above 1,
# NVSHMEM_RS_TIMEOUT=20s (5s for length_nvshmem, which must end its processes, see below):
# PEs that call with another length, root, operator, scale, element type, in-place form or
# collective (LL and direct kernels) must each get Error::CallMismatch within 5 s, and a stale
# call on a dropped team an error, never a wrong result reported as good. For example
#     PES="2" scripts/gpu-check.sh run mismatch            (2 GPUs)
#     MPS=1 PES="3 4 8" scripts/gpu-check.sh run mismatch  (one GPU)
#
# Dry run: GPU_DRYRUN=1 scripts/gpu-check.sh run SUITES... (on any machine, nothing built or
# started) prints, instead of running it, every case as one line `DRY case NAME EXPECT
# timeout=S env: +VAR=VALUE... -VAR=VALUE... cmd: COMMAND...` (the exported variables added or
# changed since the script started, then those removed or changed, then the command, each word
# quoted by printf %q), and every other command that would start a GPU process, MPS, a compiler
# or an archive as `DRY COMMAND...`; summaries then have no logs to read. nvidia-smi answers
# for GPU_DRYRUN_GPUS (default 2) H100s. The last line names the exported functions the cases'
# commands may call, with a checksum of their definitions. To compare the driver before and
# after a change: the same dry run's output (with GPU_TEST_SEED and MPS_DIR fixed) must match.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true

# ---- dry run (GPU_DRYRUN=1, see the header) ----
dryrun() { [ -n "${GPU_DRYRUN:-}" ]; }
# say COMMAND...: the line of a command the dry run does not run, on the script's own output
# (fd 3) even where the caller captures or discards the command's.
say() { { printf 'DRY'; printf ' %q' "$@"; echo; } >&3; }
# dry COMMAND...: COMMAND, or its line in a dry run.
dry() { if dryrun; then say "$@"; else "$@"; fi; }
# The exported variables, one a line (quoted), for the dry run's difference at each case.
dry_vars() {
  local e
  while IFS= read -r -d '' e; do
    case $e in BASH_FUNC_* | _=* | SHLVL=* | OLDPWD=*) ;; *) printf '%q\n' "$e" ;; esac
  done < <(env -0) | LC_ALL=C sort
}
if dryrun; then
  # What starts processes on the GPU machine only says what it would start.
  tar() { say tar "$@"; }
  nvcc() { say nvcc "$@"; }
  nvlink() { say nvlink "$@"; }
  pkill() { say pkill "$@"; return 1; }
  nvidia-cuda-mps-control() { say nvidia-cuda-mps-control "$@"; }
  sleep() { :; }
  exec 3>&1
  nvidia-smi() {
    local i
    case "$*" in
      -L) for i in $(seq 0 $((${GPU_DRYRUN_GPUS:-2} - 1))); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-dry-$i)"; done ;;
      --query-gpu=name*) for i in $(seq "${GPU_DRYRUN_GPUS:-2}"); do echo "NVIDIA H100 80GB HBM3"; done ;;
      *) say nvidia-smi "$@" ;;
    esac
  }
  dry_env0=$(dry_vars)
fi

# The programs of the `device` and `foundation` suites (`stage-small`).
SMALL_BINS="gpu_foundation halo_device ping_pong nvshmem-perf nvshmem-run"
# wanted NAME: whether `stage` copies program NAME (every one unless GPU_BINS lists some).
wanted() { [ -z "${GPU_BINS:-}" ] || [[ " $GPU_BINS " == *" $1 "* ]]; }

stage() {
  set -e
  . scripts/setup.sh
  cargo build --release --bins --examples -p nvshmem-rs -p nvshmem-run -p nvshmem-perf
  rm -rf .gpu && mkdir -p .gpu/bin
  # The test executables' paths come from cargo's JSON messages.
  { cargo test --release --no-run --test 'gpu_*' --message-format=json 2>/dev/null
    cargo bench --no-run --bench host_overhead --message-format=json 2>/dev/null; } |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] in (["test"], ["bench"]):
        print(m["target"]["name"], m["executable"])' |
    while read -r name exe; do if wanted "$name"; then cp "$exe" ".gpu/bin/$name"; fi; done
  for exe in target/release/examples/*; do
    [ -f "$exe" ] && [ -x "$exe" ] && wanted "${exe##*/}" && case "$exe" in *-*) ;; *) cp "$exe" .gpu/bin/ ;; esac
  done
  for b in nvshmem-run nvshmem-perf; do [ -x "target/release/$b" ] && wanted "$b" && cp "target/release/$b" .gpu/bin/; done
  strip --strip-debug .gpu/bin/*   # the device tool carries at most 64 MiB
  # Every kernel compiled here to sm_90 machine code (H100, H200), so the PEs there compile
  # nothing; emptied first, since the cache's file names change with the sources and old
  # entries would only fill the carry.
  # KERNEL_CACHE=gpu: the cache is filled on the GPU machine instead, at the start of `run`, by
  # the library's own test program (its 16 cores compile the ~400 kernels in about a minute,
  # where this 2-core machine takes 10 to 40 minutes when busy).
  # KERNEL_CACHE=none: no cache at all; each PE compiles the kernels it uses, once a machine
  # (for a .gpu that must be small: beside an NVSHMEM tarball).
  rm -rf .gpu-kernel-cache
  if [ "${KERNEL_CACHE:-}" = none ]; then
    :
  elif [ "${KERNEL_CACHE:-}" = gpu ]; then
    cargo test --release -p nvshmem --lib --no-run --message-format=json 2>/dev/null |
      python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["lib"]:
        print(m["executable"])' | head -1 | xargs -I{} cp {} .gpu/bin/nvshmem-kernel-cache
    strip --strip-debug .gpu/bin/nvshmem-kernel-cache
  else
    NVSHMEM_RS_KERNEL_CACHE=$PWD/.gpu-kernel-cache cargo test --release -p nvshmem --lib \
      kernels::tests::fill_the_kernel_cache -- --ignored --nocapture | grep -E "kernels in|FAILED|panicked"
    # Packed: the cubins shrink about fourfold, and .gpu must stay under the carry limit.
    rm -rf .gpu/kernel-cache && tar -czf .gpu/kernel-cache.tgz -C .gpu-kernel-cache .
  fi
  # STAGE_HYDRA=0: no Hydra (foundation's Hydra cases then show SKIPPED), for a .gpu that
  # must be small.
  if [ "${STAGE_HYDRA:-1}" = 0 ]; then rm -f .gpu/hydra.tgz; else stage_hydra; fi
  ls -la .gpu/bin
  # Packed too (about threefold): tracked files and .gpu together must stay under 64 MiB.
  # GPU_PACK=xz packs by xz -9e instead (.gpu/bin.txz, about 4.5-fold, a minute or two more):
  # beside NVSHMEM 3.8.0's 41 MB tarball and 22.5 MB of tracked files (2026-11-28), four test
  # programs fit only so.
  rm -f .gpu/bin.tgz .gpu/bin.txz
  if [ "${GPU_PACK:-}" = xz ]; then
    XZ_OPT=-9e tar -cJf .gpu/bin.txz -C .gpu bin && rm -rf .gpu/bin
  else
    tar -czf .gpu/bin.tgz -C .gpu bin && rm -rf .gpu/bin
  fi
  du -sh .gpu
}

# nvshmem_version DIR: the release of the NVSHMEM folder DIR (its headers'), as 3.8.0.
nvshmem_version() {
  sed -n 's/^#define NVSHMEM_VENDOR_\(MAJOR\|MINOR\|PATCH\)_VERSION \([0-9]*\).*/\2/p' \
    "$1/include/non_abi/nvshmem_version.h" | paste -sd.
}

# NVSHMEM VERSION's folder from its wheel (downloaded once into .nvshmem-cache/), without the
# per-architecture bitcode (lib/libnvshmem_device_sm_*.bc, which no route of the crate reads),
# packed into .gpu-nvshmem/nvshmem-VERSION.tar.xz with a top folder `nvshmem`.
stage_nvshmem() {
  local v=${1:-3.8.0} cache=.nvshmem-cache tmp whl
  mkdir -p "$cache" .gpu-nvshmem
  whl=$(compgen -G "$cache/nvidia_nvshmem_cu13-$v-*.whl" | head -1 || true)
  if [ -z "$whl" ]; then
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache" "nvidia-nvshmem-cu13==$v"
    whl=$(compgen -G "$cache/nvidia_nvshmem_cu13-$v-*.whl" | head -1)
  fi
  tmp=$(mktemp -d)
  python3 - "$whl" "$tmp" "${NVSHMEM_HOST_ONLY:-0}" <<'PY'
import fnmatch, os, shutil, sys, zipfile
whl, dest, host_only = sys.argv[1:4]
prefix = "nvidia/nvshmem/"
# NVSHMEM_HOST_ONLY=1: no device library (the `device` suite needs it) and no network transport
# but ibrc (whose start-up message `quietstart` checks), for a tarball that fits beside a
# larger tree.
skip = ["lib/libnvshmem_device_sm_*.bc"]
if host_only == "1":
    skip += ["lib/libnvshmem_device.a", "lib/nvshmem_transport_ib[dg]*", "lib/nvshmem_transport_libfabric*",
             "lib/nvshmem_transport_gpunetio*", "lib/nvshmem_transport_ucx*", "include/gpunetio/*"]
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix):]
        if any(fnmatch.fnmatch(rel, p) for p in skip):
            continue
        path = os.path.join(dest, "nvshmem", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(name) as src, open(path, "wb") as out:
            shutil.copyfileobj(src, out)
PY
  # Host-only: the host library's static symbol table too (its dynamic symbols stay).
  [ "${NVSHMEM_HOST_ONLY:-0}" = 1 ] && strip --strip-unneeded "$tmp/nvshmem/lib/libnvshmem_host.so.3"
  local version
  version=$(nvshmem_version "$tmp/nvshmem")
  [ "$version" = "$v" ] || { echo "stage-nvshmem: the wheel holds NVSHMEM $version, not $v" >&2; rm -rf "$tmp"; return 1; }
  rm -f ".gpu-nvshmem/nvshmem-$v.tar.xz"
  XZ_OPT=${XZ_OPT:--9e} tar -cJf ".gpu-nvshmem/nvshmem-$v.tar.xz" -C "$tmp" nvshmem
  du -sh "$tmp/nvshmem" | sed 's/\t.*/ unpacked/'
  rm -rf "$tmp"
  ls -l ".gpu-nvshmem/nvshmem-$v.tar.xz"
}

# nvshmem-perf of older commits beside this build, for `latency` (the same calls of each build
# in one job after another, on one machine): for every REV, a git worktree of it (under
# ${TMPDIR:-/tmp}) builds nvshmem-perf in release mode with this checkout's target folder (so
# only the workspace's crates compile, about 30 s each), and the stripped program goes to
# .gpu/old/nvshmem-perf-NAME (NAME: the short commit, or NAME=REV to name it; about 4.3 MB
# each, within the carry). Run it after `stage`, which empties .gpu.
stage_old() {
  local spec name rev tree root=$PWD
  [ $# -gt 0 ] || { echo "stage-old: name at least one commit (REV or NAME=REV)" >&2; return 1; }
  . scripts/setup.sh
  mkdir -p .gpu/old
  for spec in "$@"; do
    rev=${spec#*=}
    name=$(git rev-parse --short "$rev") || return 1
    [ "$spec" = "$rev" ] || name=${spec%%=*}
    tree=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-old.XXXXXX")
    git worktree add -q --detach "$tree" "$rev" || return 1
    (cd "$tree" && CARGO_TARGET_DIR=$root/target cargo build -q --release -p nvshmem-perf) || {
      git worktree remove --force "$tree"
      return 1
    }
    strip -o ".gpu/old/nvshmem-perf-$name" target/release/nvshmem-perf
    git worktree remove --force "$tree"
    ls -l ".gpu/old/nvshmem-perf-$name"
  done
  # target/release/nvshmem-perf is now the last old build's: rebuild this checkout's.
  cargo build -q --release -p nvshmem-perf
}

# Hydra, MPICH's process manager, which NVSHMEM ships as `nvshmrun`: the GPU machine has none and
# no network, so Debian's `mpich` package is fetched here (apt-get download, cached in
# .hydra-cache/, git-ignored, so restaging fetches nothing), and only what `hydra` (below) needs
# goes into .gpu/hydra.tgz: mpiexec.hydra and hydra_pmi_proxy in bin/, and in lib/ every library
# they need, directly or through each other, that the packages hold (libhwloc.so.15,
# libslurm.so.38). Packed it is 1.2 MB instead of 2.7 (the device tool carries at most 64 MiB);
# `hydra` unpacks it into .gpu/hydra on first use. Beyond those the executables need only the C
# library's (libc, libm, libresolv) and libudev.so.1, which the GPU machine has (its Open MPI's
# hwloc needs it too): they are listed, and `ldd` checks here that nothing else is missing. No
# PMI library is needed: NVSHMEM's PMI bootstrap plugin carries its own PMI-1 client (MPICH's
# "simple PMI"), which talks to hydra_pmi_proxy over the socket Hydra passes in PMI_FD.
stage_hydra() {
  local cache=.hydra-cache pkgs=(mpich libhwloc15 libslurm38) missing=() p d
  mkdir -p "$cache/debs"
  for p in "${pkgs[@]}"; do
    compgen -G "$cache/debs/${p}_*.deb" >/dev/null || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    # As root apt-get would hand the download to its sandbox user, who cannot write here.
    (cd "$cache/debs" && apt-get download -o APT::Sandbox::User=root "${missing[@]}")
  fi
  rm -rf "$cache/root" .gpu/hydra && mkdir -p "$cache/root" .gpu/hydra/bin .gpu/hydra/lib
  for d in "$cache"/debs/*.deb; do dpkg-deb -x "$d" "$cache/root"; done
  cp "$cache/root/usr/bin/mpiexec.hydra" "$cache/root/usr/bin/hydra_pmi_proxy" .gpu/hydra/bin/
  # The libraries, found by walking NEEDED entries from the two executables: those the
  # packages hold are copied under their soname (the file, not the link to it).
  local todo=(.gpu/hydra/bin/mpiexec.hydra .gpu/hydra/bin/hydra_pmi_proxy) system=() f lib
  while [ ${#todo[@]} -gt 0 ]; do
    f=${todo[0]} todo=("${todo[@]:1}")
    for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [ -e ".gpu/hydra/lib/$lib" ] && continue
      d=$(find "$cache/root" -name "$lib" | head -1)
      if [ -n "$d" ]; then
        cp -L "$d" ".gpu/hydra/lib/$lib"
        todo+=(".gpu/hydra/lib/$lib")
      else
        case " ${system[*]} " in *" $lib "*) ;; *) system+=("$lib") ;; esac
      fi
    done
  done
  echo "hydra: carried $(cd .gpu/hydra && echo bin/* lib/*); expected on the GPU machine: ${system[*]}"
  if LD_LIBRARY_PATH=.gpu/hydra/lib ldd .gpu/hydra/bin/* | grep 'not found'; then
    echo "hydra: a library the executables need is neither carried nor on this machine" >&2
    return 1
  fi
  rm -f .gpu/hydra.tgz
  tar -czf .gpu/hydra.tgz -C .gpu hydra
  rm -rf .gpu/hydra
  # It unpacks and starts here too (no GPU needed): two processes that each see their rank.
  hydra 2 sh -c 'echo "hydra: PE $PMI_RANK of $PMI_SIZE (PMI_FD $PMI_FD)"' | sort
  rm -rf .gpu/hydra
  ls -l .gpu/hydra.tgz
}

# ---- on the GPU machine ----
final=${OUT:-gpu-logs}
out="$final/logs"
export out
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
export RUST_BACKTRACE=1
# The kernels compiled at stage time (see `stage`); a kernel missing there is compiled and added.
# GPU_KERNEL_CACHE: another folder (e.g. under /tmp, which outlives a call on a warm machine,
# where a carried .gpu is replaced whole by the next call's).
export NVSHMEM_RS_KERNEL_CACHE=${GPU_KERNEL_CACHE:-$PWD/.gpu/kernel-cache}
if [ "$mode" = run ] && [ ! -d .gpu/bin ]; then
  if [ -f .gpu/bin.tgz ]; then tar -xzf .gpu/bin.tgz -C .gpu
  elif [ -f .gpu/bin.txz ]; then tar -xJf .gpu/bin.txz -C .gpu
  fi
fi
if [ "$mode" = run ] && [ -f .gpu/kernel-cache.tgz ] && [ ! -d "$NVSHMEM_RS_KERNEL_CACHE" ]; then
  mkdir -p "$NVSHMEM_RS_KERNEL_CACHE" && tar -xzf .gpu/kernel-cache.tgz -C "$NVSHMEM_RS_KERNEL_CACHE"
fi
# Staged with KERNEL_CACHE=gpu: every kernel compiled here once, before any PE needs one.
if [ "$mode" = run ] && [ ! -d "$NVSHMEM_RS_KERNEL_CACHE" ] && [ -x .gpu/bin/nvshmem-kernel-cache ]; then
  mkdir -p "$NVSHMEM_RS_KERNEL_CACHE"
  t0=$SECONDS
  dry .gpu/bin/nvshmem-kernel-cache --ignored --exact kernels::tests::fill_the_kernel_cache --nocapture 2>&1 |
    grep -E "kernels in|FAILED|panicked|error"
  echo "gpu-check: kernel cache filled here in $((SECONDS - t0)) s"
fi
# NVSHMEM_VERSION: the staged release instead of the machine's (see the header).
nvshmem_note="the machine's NVSHMEM"
if [ "$mode" = run ] && [ -n "${NVSHMEM_VERSION:-}" ]; then
  nv_tar=.gpu-nvshmem/nvshmem-$NVSHMEM_VERSION.tar.xz
  nv_dir=${TMPDIR:-/tmp}/gpu-check-nvshmem-$NVSHMEM_VERSION
  if [ ! -f "$nv_dir/nvshmem/lib/libnvshmem_host.so.3" ]; then
    if [ ! -f "$nv_tar" ]; then
      echo "gpu-check: $nv_tar is missing: run scripts/gpu-check.sh stage-nvshmem $NVSHMEM_VERSION on a build machine and carry .gpu-nvshmem" >&2
      exit 2
    fi
    rm -rf "$nv_dir" && mkdir -p "$nv_dir" && tar -xJf "$nv_tar" -C "$nv_dir" || exit 2
  fi
  export NVSHMEM_HOME=$nv_dir/nvshmem
  export NVSHMEM_LIBRARY=$NVSHMEM_HOME/lib/libnvshmem_host.so.3
  export LD_LIBRARY_PATH=$NVSHMEM_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvshmem_note="NVSHMEM $(nvshmem_version "$NVSHMEM_HOME") from $NVSHMEM_HOME"
  echo "gpu-check: $nvshmem_note"
fi
# Fresh random data for every run of the matrix; the seed is printed so a failure can be rerun.
export GPU_TEST_SEED=${GPU_TEST_SEED:-$(date +%s)}
summary=()
failures=0
PES=${PES:-1 2}
export PES

# ---- several PEs on one GPU: CUDA MPS (MPS=1) ----
mps_on() { [ "${MPS:-0}" = 1 ]; }
export -f mps_on
mps_control() {
  local c
  c=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
  dry "$c" "$@"
}
# Starts the control daemon (the server starts with the first client).
mps_start() {
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if ! mps_control -d; then
    echo "gpu-check: nvidia-cuda-mps-control -d failed" >&2
    return 1
  fi
  echo "gpu-check: MPS control daemon started (pipe $CUDA_MPS_PIPE_DIRECTORY)"
}
# Quits the daemon (and its server), and waits until its control pipe is gone. If quit does not
# take (a stuck server), the daemon we started is ended by its process id.
mps_stop() {
  [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ] || return 0
  echo quit | timeout 30 bash -c "$(declare -f dryrun say dry mps_control); mps_control" >/dev/null 2>&1
  local i
  for i in $(seq 100); do
    [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ] || return 0
    sleep 0.1
  done
  local pid
  pid=$(cat "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    echo "gpu-check: MPS did not quit; ending its daemon (process $pid)" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
}
mps_restart() {
  echo "gpu-check: restarting MPS after a killed case"
  mps_stop
  mps_start
}
# The GPUs the PEs see (CUDA_VISIBLE_DEVICES, else every one), at least 1.
gpus_visible() {
  local gpus
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    gpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  else
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  fi
  echo $(( ${gpus:-0} >= 1 ? gpus : 1 ))
}
export -f gpus_visible
# shares_gpu NP: whether an NP-PE case puts several PEs on one GPU (MPS=1, more PEs than GPUs).
shares_gpu() { mps_on && [ "$1" -gt "$(gpus_visible)" ]; }
# skip_case NAME REASON: a case that cannot apply here, shown as such in the summary (never as
# passed).
skip_case() { summary+=("$(printf '%-44s %-10s' "$1" SKIPPED) ($2)"); }
# Where PEs share a GPU this crate refuses NVSHMEM's own reductions (NVSHMEM 3.4.5 ran its own
# kernels there and gave wrong results: collective/algo/mod.rs), so no case can queue one.
NVSHMEM_SHARED_REFUSED="PEs share a GPU: NVSHMEM's reductions are refused there"
# mps_share NP: the environment of an NP-PE case's PEs (on one host): the thread share of a PE
# when MPS_SHARE is not "none", or full MPG without shares.
mps_share() {
  mps_on || return 0
  local np=$1 gpus per g
  gpus=$(gpus_visible)
  if [ -z "${CUDA_VISIBLE_DEVICES:-}" ] && [ $((np % gpus)) -ne 0 ]; then
    # PEs spread unevenly over the GPUs never start (Runtime::init refuses: README,
    # "Launching"), so the case runs on the most GPUs that take its PEs evenly (3 PEs on one of
    # two GPUs).
    g=$gpus
    while [ $((np % g)) -ne 0 ]; do g=$((g - 1)); done
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((g - 1)))
    export CUDA_VISIBLE_DEVICES
    echo "gpu-check: $np PEs on GPUs $CUDA_VISIBLE_DEVICES of $gpus, evenly" >&2
    gpus=$g
  fi
  per=$(( (np + gpus - 1) / gpus ))
  if [ "${MPS_SHARE:-}" = none ]; then
    unset CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
    export NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1
  else
    export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(( 100 / per ))
  fi
}
export -f mps_share
# nvrun NP COMMAND...: COMMAND as NP PEs under nvshmem-run (with the MPS share, if any).
nvrun() {
  local np=$1; shift
  mps_share "$np"
  .gpu/bin/nvshmem-run -n "$np" "$@"
}
export -f nvrun
# PE counts of PES above 1.
multi_pes() {
  local np
  for np in $PES; do [ "$np" -gt 1 ] && echo "$np"; done
}

# mpirun with the variables every PE needs.
mpi() {
  local np=$1; shift
  local pass=() v
  mps_share "$np"
  for v in NVSHMEM_DISABLE_NVLS NCCL_NVLS_ENABLE RUST_BACKTRACE RUST_LOG GPU_TEST_INIT \
    NVSHMEM_RS_BOOTSTRAP NVSHMEM_RS_ALGORITHMS NVSHMEM_RS_KERNEL_CACHE NVSHMEM_RS_TIMEOUT NVSHMEM_RS_PDL NVSHMEM_LIBRARY NVSHMEM_HOME NVSHMEM_REMOTE_TRANSPORT NVSHMEM_DISABLE_NCCL GPU_TEST_SEED GPU_TEST_SKIP \
    MATRIX_MEDIUM_TEAMS MATRIX_FORCE MATRIX_CLASSES MATRIX_TYPES MATRIX_ALGOS NCCL_GRAPH_REGISTER PATH LD_LIBRARY_PATH \
    CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY CUDA_MPS_ACTIVE_THREAD_PERCENTAGE \
    NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE REPRO_CASES REPRO_ROUNDS REPRO_STRESS GPU_LIFETIMES_CASE \
    GPU_MISMATCH_CASE NVSHMEM_RS_CHECK_CALLS; do
    [ -n "${!v+x}" ] && pass+=(-x "$v")
  done
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "${pass[@]}" "$@"
}
export -f mpi

# hydra NP COMMAND...: COMMAND as NP processes under Hydra (what `nvshmrun` is), staged by
# `stage_hydra` as .gpu/hydra.tgz (unpacked into .gpu/hydra on first use) and started with
# `-launcher fork` (one node, no ssh). Hydra
# hands every process its whole environment (its default, -genvall), plus PMI_RANK, PMI_SIZE,
# PMI_FD and MPI_LOCALRANKID, from which the runtime chooses NVSHMEM's PMI bootstrap
# (NVSHMEM_RS_BOOTSTRAP=pmi2 picks its PMI-2 plugin, which Hydra also serves). Hydra's own
# libraries are put on LD_LIBRARY_PATH for mpiexec.hydra and the hydra_pmi_proxy it forks
# only: the processes get the caller's LD_LIBRARY_PATH back (-genv), so Debian's libhwloc never
# stands in for the one this machine's Open MPI (which the programs link) was built with.
# Hydra ends the job when a process dies of a signal; one that exits non-zero only sets the
# exit status, once every other process has ended.
hydra() {
  local np=$1; shift
  mps_share "$np"
  local dir=$PWD/.gpu/hydra caller=${LD_LIBRARY_PATH:-}
  if [ ! -x "$dir/bin/mpiexec.hydra" ] && [ -f "$dir.tgz" ]; then
    tar -xzf "$dir.tgz" -C "$PWD/.gpu" || return 127
  fi
  if [ ! -x "$dir/bin/mpiexec.hydra" ]; then
    echo "hydra: $dir/bin/mpiexec.hydra is missing: run scripts/gpu-check.sh stage on a machine with apt-get" >&2
    return 127
  fi
  LD_LIBRARY_PATH="$dir/lib${caller:+:$caller}" PATH="$dir/bin:$PATH" \
    "$dir/bin/mpiexec.hydra" -launcher fork -genv LD_LIBRARY_PATH "$caller" -n "$np" "$@"
}
export -f hydra

# case NAME EXPECT COMMAND...: runs COMMAND with a time limit; EXPECT is pass (exit 0 and a
# "N passed, 0 failed" line when the program prints one), pass:TEXT (the same, and TEXT in the
# output, e.g. the bootstrap a launcher must lead to) or fail:TEXT (non-zero exit and TEXT in
# the output, for error paths).
# DEADLINE=S: a case that would start S seconds or more into the run is not started (shown as
# NOT-RUN in the summary), so that a run inside the device tool's 10-minute limit still ends
# with its summary and logs.
case_() {
  local name=$1 expect=$2; shift 2
  if [ -n "${DEADLINE:-}" ] && [ "$SECONDS" -ge "$DEADLINE" ]; then
    summary+=("$(printf '%-44s %-10s' "$name" NOT-RUN) (DEADLINE ${DEADLINE}s reached)")
    return 0
  fi
  if dryrun; then
    {
      printf 'DRY case %s %s timeout=%s env: ' "$name" "$expect" "${CASE_TIMEOUT:-180}"
      LC_ALL=C comm -13 <(echo "$dry_env0") <(dry_vars) | sed 's/^/+/' | tr '\n' ' '
      LC_ALL=C comm -23 <(echo "$dry_env0") <(dry_vars) | sed 's/^/-/' | tr '\n' ' '
      printf 'cmd:'; printf ' %q' "$@"; echo
    } >&3
    summary+=("$(printf '%-44s %-10s' "$name" DRY-RUN)")
    return 0
  fi
  local log="$out/$name.log" t0=$SECONDS
  timeout -k 10 "${CASE_TIMEOUT:-180}" bash -c '"$@"' bash "$@" >"$log" 2>&1
  local rc=$? secs=$((SECONDS - t0)) verdict
  # A failed case may have left the MPS server unusable: one ended by the time limit or a
  # signal, and one where a PE failed (its launcher then kills the others in their kernels).
  if mps_on && [ $rc -ne 0 ]; then mps_restart >>"$log" 2>&1; fi
  local counts
  counts=$(grep -Eo '[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?' "$log" |
    awk '{p+=$1; f+=$3; k+=$5} END {if (NR) printf "%d passed, %d failed%s", p, f, k ? ", " k " skipped" : ""}')
  if [ "${expect%%:*}" = pass ]; then
    if [ $rc -eq 0 ] && ! grep -q 'FAILED' "$log" && { [ "$expect" = pass ] || grep -qF "${expect#pass:}" "$log"; }; then
      verdict=PASS
    else
      verdict="FAIL(rc=$rc)"
    fi
  else
    if [ $rc -ne 0 ] && grep -qF "${expect#fail:}" "$log"; then verdict=PASS; else verdict="FAIL(rc=$rc)"; fi
  fi
  [ "$verdict" = PASS ] || { failures=$((failures + 1)); echo "---- $name (last lines) ----"; tail -n 25 "$log"; }
  summary+=("$(printf '%-44s %-10s %4ss  %s' "$name" "$verdict" "$secs" "$counts")")
}

gtest() { echo ".gpu/bin/$1 --ignored --nocapture --test-threads=1"; }

foundation() {
  local t np
  t=$(gtest gpu_foundation)
  for np in $PES; do
    case_ foundation-mpi-${np}pe pass mpi "$np" $t
  done
  mps_share 1 # the PEs started below without a launcher function
  for np in $(multi_pes); do
    GPU_TEST_INIT=communicator case_ foundation-user-communicator-${np}pe pass mpi "$np" $t
  done
  case_ foundation-no-launcher-1pe pass $t
  for np in $(multi_pes); do
    case_ foundation-env-by-hand-${np}pe pass by_hand "$np" $t
  done
  if [ -x .gpu/bin/nvshmem-run ]; then
    for np in $(multi_pes); do
      case_ foundation-nvshmem-run-${np}pe pass nvrun "$np" $t
    done
  fi
  # NVSHMEM 3.4.5's PMIx plugin does not load against this host's PMIx (undefined symbol
  # pmix_value_load): what we check is that this is a clear error, not NVSHMEM's crash.
  # 3.8.0's loads, and the job starts on it (2026-11-27): there the case is that it works.
  if [ -z "${NVSHMEM_VERSION:-}" ] || [ "${NVSHMEM_VERSION}" = 3.4.5 ]; then
    NVSHMEM_RS_BOOTSTRAP=pmix case_ pmix-plugin-unloadable-is-an-error fail:"nvshmem_bootstrap_pmix.so.3 cannot be loaded" mpi 2 $t
  else
    NVSHMEM_RS_BOOTSTRAP=pmix case_ pmix-bootstrap-2pe pass:"bootstrap pmix" mpi 2 $t
  fi
  NVSHMEM_LIBRARY=/nonexistent/libnvshmem_host.so.3 case_ error-missing-library fail:"/nonexistent/libnvshmem_host.so.3 (from NVSHMEM_LIBRARY)" mpi 1 $t
  [ -x .gpu/bin/nvshmem-run ] && case_ nvshmem-run-failing-pe fail:"PE 1" .gpu/bin/nvshmem-run -n 2 bash -c 'sleep 1; [ "$RANK" = 1 ] && exit 7; sleep 60'
  quietstart
  foundation_hydra
}

# without_nvshmem_errors COMMAND...: COMMAND's output, and a failure when NVSHMEM printed an
# error line (its "file.cpp:LINE: ... error status" or "NVSHMEM ERROR" lines, or the
# InfiniBand transport's "no IB devices found") or COMMAND failed.
# A one-node job starts without NVSHMEM error lines: the runtime turns NVSHMEM's remote
# transport off (NVSHMEM_REMOTE_TRANSPORT=none, its debug line says so), else NVSHMEM 3.8
# prints "ibrc.cpp:...: error status: 7 ... no IB devices found" per PE without InfiniBand.
# Part of `foundation`; alone: `scripts/gpu-check.sh run quietstart` (with NVSHMEM_VERSION=3.8.0
# for the release that printed them).
quietstart() {
  local t first
  t=$(gtest gpu_foundation)
  first=$(multi_pes | head -1)
  [ -n "$first" ] || return 0
  RUST_LOG=nvshmem=debug case_ quiet-start-mpi-${first}pe pass:"no remote transport for NVSHMEM" \
    without_nvshmem_errors mpi "$first" $t
  [ -x .gpu/bin/nvshmem-run ] && RUST_LOG=nvshmem=debug case_ quiet-start-nvshmem-run-${first}pe \
    pass:"no remote transport for NVSHMEM" without_nvshmem_errors nvrun "$first" $t
}
without_nvshmem_errors() {
  local log rc
  log=$(mktemp)
  "$@" >"$log" 2>&1
  rc=$?
  cat "$log"
  if grep -E 'error status|NVSHMEM ERROR|no IB devices found' "$log" >/dev/null; then
    echo "without_nvshmem_errors: NVSHMEM printed error lines:"
    grep -E 'error status|NVSHMEM ERROR|no IB devices found' "$log" | head -5
    rc=1
  fi
  rm -f "$log"
  return $rc
}
export -f without_nvshmem_errors

# by_hand NP COMMAND...: NP copies of COMMAND started by hand with torchrun's variables (the
# env bootstrap), each one's output in $out/env-peR.out, printed after; the first non-zero
# exit status is the result.
by_hand() {
  local np=$1; shift
  mps_share "$np"
  local pids=() r rc=0 p port=$((29517 + RANDOM % 200))
  for r in $(seq 0 $((np - 1))); do
    RANK=$r WORLD_SIZE=$np LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" > "$out/env-pe$r.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { [ $rc -eq 0 ] && rc=$?; }; done
  for r in $(seq 0 $((np - 1))); do cat "$out/env-pe$r.out"; done
  return $rc
}
export -f by_hand

# The foundation under Hydra (nvshmrun's launcher), where the runtime must choose NVSHMEM's PMI
# bootstrap by itself (PE 0 prints it), and the error paths there.
foundation_hydra() {
  local t
  if [ ! -f .gpu/hydra.tgz ] && [ ! -d .gpu/hydra ]; then
    # A .gpu staged without Hydra, to fit beside an NVSHMEM tarball (above).
    skip_case foundation-hydra "Hydra not staged in .gpu"
    return 0
  fi
  t=$(gtest gpu_foundation)
  local np
  for np in $PES; do
    case_ foundation-hydra-${np}pe pass:"bootstrap pmi," hydra "$np" $t
  done
  # NVSHMEM 3.4.5's PMI-2 plugin under Debian's Hydra starts, then fails exchanging the heap's
  # IPC handles ("Fatal IPC Failure", exit 255; seen 2026-11-23): kept as an expected failure so
  # that a release that fixes it shows here.
  NVSHMEM_RS_BOOTSTRAP=pmi2 case_ foundation-hydra-pmi2-2pe-nvshmem-fails fail:"Fatal IPC Failure" hydra 2 $t
  NVSHMEM_LIBRARY=/nonexistent/libnvshmem_host.so.3 case_ error-missing-library-hydra-2pe fail:"/nonexistent/libnvshmem_host.so.3 (from NVSHMEM_LIBRARY)" hydra 2 $t
  # A PE killed by a signal ends the job (the other would sleep a minute): Hydra says so.
  case_ hydra-killed-pe-ends-the-job fail:"BAD TERMINATION" hydra 2 bash -c 'sleep 1; [ "$PMI_RANK" = 1 ] && kill -SEGV $$; sleep 60'
}

collectives() {
  local t
  t=$(gtest gpu_collectives)
  local np
  for np in ${MATRIX_PES:-$PES}; do
    CASE_TIMEOUT=${MATRIX_TIMEOUT:-500} case_ collectives-matrix-${np}pe pass mpi $np $t --exact gpu_collectives
  done
}

# The quick check of a change to anything multi-PE, at each PE count of PES: the foundation
# under mpirun, tests/gpu_lifetimes.rs, and of tests/gpu_collectives.rs the checks outside the
# matrix (collectives on several host threads, two streams and teams in flight, graphs, bad
# inputs, forced algorithms), then the lifetimes suite's cases that may end the runtime.
multipe() {
  local np t f
  t=$(gtest gpu_foundation)
  f=$(gtest gpu_collectives)
  for np in $PES; do
    case_ foundation-mpi-${np}pe pass mpi "$np" $t
    # shellcheck disable=SC2046
    CASE_TIMEOUT=${LIFETIMES_TIMEOUT:-240} case_ lifetimes-${np}pe pass mpi "$np" $(gtest gpu_lifetimes)
    GPU_TEST_SKIP=world/,strided/,listed/,single/ CASE_TIMEOUT=150 \
      case_ collectives-outside-matrix-${np}pe pass mpi "$np" $f
  done
  LIFETIMES_ENDINGS_ONLY=1 lifetimes
}

# Two PEs on one GPU without CUDA MPS (NVSHMEM's limited mode, where its collectives end the
# process): Runtime::init must refuse with Error::GpuSharedWithoutMps on every PE, exit status
# non-zero, no NVSHMEM abort. Only where that can happen: one GPU and no MPS=1.
shared_gpu() {
  if mps_on || [ "$(nvidia-smi -L | wc -l)" -ne 1 ]; then
    echo "shared_gpu: needs one GPU and no MPS=1; skipped"
    return 0
  fi
  CASE_TIMEOUT=60 case_ shared-gpu-without-mps-is-an-error fail:"without CUDA MPS" mpi 2 .gpu/bin/hello
  grep -c "without CUDA MPS" "$out/shared-gpu-without-mps-is-an-error.log"
  ! grep -q "limited MPG" "$out/shared-gpu-without-mps-is-an-error.log" || echo "shared_gpu: NVSHMEM's own limited-MPG abort was reached"
}

# tests/gpu_scale.rs at each PE count of PES above 1: every algorithm forced over unaligned
# views, odd counts and in-place layouts, graphs replayed at every size, split teams at once,
# collectives beside a kernel that fills the GPU, the broadcasts and all-reduces that went
# wrong when the PEs' kernels could not all be resident, and the NVLink kernels across their
# channels' epoch wrap (check channel_epochs_across_the_wrap). GPU_TEST_SKIP leaves checks out.
scale() {
  local t np
  t=$(gtest gpu_scale)
  for np in $(multi_pes); do
    CASE_TIMEOUT=${SCALE_TIMEOUT:-240} case_ scale-${np}pe pass mpi "$np" $t
  done
}

# tests/gpu_mismatch.rs (see the header): one case a process, since a mismatch fails the
# runtime; under nvshmem-run, since a failed runtime leaves MPI unfinalised (which mpirun
# reports as a failure whatever the exit status). PASS: every PE exits 0 and prints
# "mismatch CASE: PASS"; for length_nvshmem (NVSHMEM's all-reduce, queued behind the failed
# check, can never end) the PEs print it, and then the watchdog must end each process
# (status 1, "... still waits inside NVSHMEM (nvshmemx_...") GRACE (5 s) after the mismatch.
mismatch() {
  local t np c cases expect timeout
  t=$(gtest gpu_mismatch)
  cases=${MISMATCH_CASES:-$(GPU_MISMATCH_CASE=list dry $t --exact gpu_mismatch 2>/dev/null |
    sed -n 's/.*mismatch-case: \([a-z_]*\)$/\1/p')}
  [ -n "$cases" ] || echo "mismatch: no cases listed by $t (GPU_MISMATCH_CASE=list)"
  for np in $(multi_pes); do
    for c in $cases; do
      expect="pass:mismatch $c: PASS" timeout=20s
      if [ "$c" = length_nvshmem ]; then
        if shares_gpu "$np"; then
          skip_case "mismatch-$c-${np}pe" "$NVSHMEM_SHARED_REFUSED"
          continue
        fi
        expect="fail:still waits inside NVSHMEM (nvshmemx_" timeout=5s
      fi
      NVSHMEM_RS_TIMEOUT=$timeout GPU_MISMATCH_CASE=$c CASE_TIMEOUT=${MISMATCH_TIMEOUT:-90} \
        case_ mismatch-$c-${np}pe "$expect" nvrun "$np" $t --exact gpu_mismatch
      if [ "$c" = length_nvshmem ] && ! grep -qF "mismatch $c: PASS" "$out/mismatch-$c-${np}pe.log"; then
        echo "mismatch-$c-${np}pe: no PE printed 'mismatch $c: PASS' before the process ended"
        failures=$((failures + 1))
      fi
    done
  done
  grep -h "after [0-9.]* s" "$out"/mismatch-*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq | head -60
}

# What the call check costs: nvshmem-perf's 8-byte all-reduce (and 64 KiB, and the barrier) in a
# CUDA graph on 2 PEs, ours only, with NVSHMEM_RS_CHECK_CALLS=0 and =1 alternating
# (CHECKCOST_ROUNDS rounds, default 3), one line per run: compare the time columns of the
# off and on lines (the check may cost at most 2 % of the 8-byte all-reduce to stay on by
# default).
checkcost() {
  local r on c
  for r in $(seq "${CHECKCOST_ROUNDS:-3}"); do
    for on in 0 1; do
      for c in all_reduce barrier; do
        NVSHMEM_RS_CHECK_CALLS=$on CASE_TIMEOUT=120 case_ checkcost-$c-check$on-round$r pass mpi 2 \
          .gpu/bin/nvshmem-perf $c -b 8 -e 64K -f 8192 -n 2000 -w 200 --reps 5 -c 1 -G 1 \
          --impl nvshmem-rs --no-progress
      done
    done
  done
  for c in all_reduce barrier; do
    for on in 0 1; do
      echo "== $c, NVSHMEM_RS_CHECK_CALLS=$on"
      grep -hE '^\[PE 0\] +[0-9]+ |^ +[0-9]+ ' "$out"/checkcost-$c-check$on-round*.log | sed 's/^\[PE 0\] //'
    done
  done
}

# tests/gpu_semantics.rs at each PE count of PES: one semantics for every reduction at every
# size and by every algorithm (see the header above).
semantics() {
  local t np
  t=$(gtest gpu_semantics)
  for np in $PES; do
    CASE_TIMEOUT=${SEMANTICS_TIMEOUT:-300} case_ semantics-${np}pe pass mpi "$np" $t
  done
}

# tools/nvshmem-repro: NVSHMEM's own collectives called raw from C on the layouts nvshmem-rs
# routes away from NVSHMEM (in-place reduce-scatter, fcollect and all-reduce; large broadcasts),
# built here with nvcc and run at each PE count of PES above 1 (REPRO_CASES: rs, fc, ar, bc,
# teams, strided, stress; bitwise, graph_alltoall, graph_alltoall_keep, graph_nccl_cuda and
# graph_nccl_heap (NCCL's own alltoall in the same graphs; built with NCCL where found) only when named;
# REPRO_ROUNDS for stress and bitwise, REPRO_STRESS for stress, see repro.cpp). The
# cases are findings: a case passes when the program ran; the table of what NVSHMEM got right
# and wrong is printed after it.
repro() {
  local bin=/tmp/nvshmem-repro np
  case_ repro-build pass bash tools/nvshmem-repro/build.sh "$bin"
  [ -x "$bin" ] || return 0
  for np in $(multi_pes); do
    CASE_TIMEOUT=${REPRO_TIMEOUT:-240} case_ repro-${np}pe pass:"repro: done" mpi "$np" "$bin"
    grep -h '^repro:' "$out/repro-${np}pe.log"
  done
}

# The probes of tools/probes (standalone CUDA programs, no NVSHMEM, 2 GPUs of one process):
# each is built with nvcc and run; it passes when it printed "probe: done, 0 wrong".
# PROBE_TIMEOUT bounds a run (default 240 s).
probe_run() {
  local name=$1 src=$2 bin=/tmp/$1 nvcc
  shift 2
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  case_ "$name-build" pass "$nvcc" -O3 -std=c++17 -arch=sm_90 "$src" -o "$bin" -lcuda
  [ -x "$bin" ] || return 0
  CASE_TIMEOUT=${PROBE_TIMEOUT:-240} case_ "$name" pass:"probe: done, 0 wrong" "$bin" "$@"
  grep -h '^probe:' "$out/$name.log"
}

# tools/probes/two_shot.cu: two-shot reductions between the two GPUs of one process, 16-256
# MiB, checked: SM loads (as this crate's direct kernels), SM stores only (push) and copy
# engines, before a design goes into the crate. PROBE_ITERS timed calls a point (default 20);
# PROBE_VARIANTS a comma-separated list of the probe's variants (default all); PROBE_GRID the
# push kernels' blocks (default 128); PROBE_ALLOC=vmm the buffers by cuMemCreate and cuMemMap
# as NVSHMEM's heap (PROBE_GRANULARITY rounds them up).
twoshotprobe() { probe_run twoshotprobe tools/probes/two_shot.cu "${PROBE_ITERS:-20}" "${PROBE_VARIANTS:-}"; }

# tools/probes/ce_frame.cu: a copy-engine call's cost beyond its copy (barriers, fork and join,
# copy launches), queued in several ways, graph and stream mode, 64 KiB-64 MiB blocks.
# PROBE_VARIANTS a comma-separated list of its variants (default all).
ceframeprobe() { probe_run ceframeprobe tools/probes/ce_frame.cu "${PROBE_VARIANTS:-}"; }

# tools/probes/tma_copy.cu: one-way and two-way moves of 16-256 MiB over NVLink by copy
# engine, SM stores and the bulk copy unit (TMA), pushed and pulled.
tmaprobe() { probe_run tmaprobe tools/probes/tma_copy.cu; }

# tools/probes/host_read.cu: a GPU's load of a word in pinned host memory (the runtime's abort
# word), alone and while GPU 0 moves 256 MiB into GPU 1, timed on the reader and on the move.
hostreadprobe() { probe_run hostreadprobe tools/probes/host_read.cu; }

# tools/probes/lamport.cu: the crate's Lamport all-reduce kernel (lamport.cu as it is) run
# outside the library, one process on 2 GPUs, beside plain Lamport kernels, 64 KiB-2 MiB.
# PROBE_ITERS calls a graph (default 300); PROBE_VARIANTS a comma-separated list (default all);
# PROBE_SIZES a comma-separated list of bytes (default 64 KiB-2 MiB).
lamportprobe() {
  probe_run lamportprobe tools/probes/lamport.cu "${PROBE_ITERS:-300}" "${PROBE_VARIANTS:-}" ${PROBE_SIZES:+"$PROBE_SIZES"}
}

# tools/probes/llpath.cu: the crate's LL all-reduce (ll.cu as it is) outside the library, one
# process on 2 GPUs, at 8 B and 64 KiB, beside the kernel rebuilt with one piece out at a time
# and a plain one, with each kernel's time inside and the gap between kernels. PROBE_ITERS calls
# a graph (default 500); PROBE_VARIANTS a comma-separated list (default all).
llpathprobe() { probe_run llpathprobe tools/probes/llpath.cu "${PROBE_ITERS:-500}" "${PROBE_VARIANTS:-}"; }

# tools/probes/ll128.cu: one-way and both-way copies of 64 KiB-2 MiB between two GPUs in a CUDA
# graph, LL (8 data bytes a 16-byte packet), LL128 (120 a 128-byte line, its flag in the line:
# lines that arrive torn are counted) and a direct push between two flag exchanges.
# PROBE_ITERS calls a graph (default 200); PROBE_VARIANTS some of ll,ll128,direct (default all);
# PROBE_BLOCKS blocks a launch.
ll128probe() { probe_run ll128probe tools/probes/ll128.cu "${PROBE_ITERS:-200}" "${PROBE_VARIANTS:-}"; }

# tools/probes/floor.cu: the floor of an 8-byte collective in a CUDA graph: an empty kernel's
# node, the link's one-way latency, a plain flag barrier and 8-byte LL all-reduce, PDL off and
# on; then the barriers and the all-reduce again in two processes (`ipc`), and in one with the
# memory mapped as NVSHMEM's heap (PROBE_ALLOC=vmm). PROBE_ITERS calls a graph (default 1000).
floorprobe() {
  probe_run floorprobe tools/probes/floor.cu "${PROBE_ITERS:-1000}"
  [ -x /tmp/floorprobe ] || return 0
  CASE_TIMEOUT=${PROBE_TIMEOUT:-240} case_ floorprobe-ipc pass:"probe: done, 0 wrong" /tmp/floorprobe "${PROBE_ITERS:-1000}" ipc
  grep -h '^probe:' "$out/floorprobe-ipc.log"
  PROBE_ALLOC=vmm CASE_TIMEOUT=${PROBE_TIMEOUT:-240} case_ floorprobe-vmm pass:"probe: done, 0 wrong" /tmp/floorprobe "${PROBE_ITERS:-1000}"
  grep -h '^probe:' "$out/floorprobe-vmm.log"
}

examples() {
  # Each example checks its own result: with 1 PE under mpirun (its own ring, team and
  # neighbour), and with every other PE count of PES under nvshmem-run.
  local e np
  for e in hello quick_start halo train_step teams timing; do
    for np in $PES; do
      if [ "$np" = 1 ]; then
        case_ $e-mpirun-1pe pass mpi 1 .gpu/bin/$e
      else
        case_ $e-nvshmem-run-${np}pe pass nvrun "$np" .gpu/bin/$e
      fi
    done
  done
  for np in $(multi_pes); do
    case_ host-overhead-${np}pe pass mpi "$np" .gpu/bin/host_overhead
    grep -h "host time\|  " "$out/host-overhead-${np}pe.log" | head -5
    break # one team size is enough for the host cost
  done
}

# tests/gpu_lifetimes.rs at each PE count of PES: memory, teams, graphs and registrations
# dropped while the GPU may still use them, bounded waits. Then its one case that may end the
# runtime (two teams' first large calls in opposite orders on alternate PEs: right, or a typed
# error inside NVSHMEM_RS_TIMEOUT, never a hang), and a PE leaving at the end while the others
# drop their runtime (examples/faults.rs exit-at-end: the drop must end, not wait in finalise).
# Both under nvshmem-run: a runtime that failed leaves MPI unfinalised (MPI_Finalize could wait
# for the failed peer), which mpirun reports as a failure whatever the exit status.
lifetimes() {
  local t np
  t=$(gtest gpu_lifetimes)
  if [ -z "${LIFETIMES_ENDINGS_ONLY:-}" ]; then
    for np in $PES; do
      CASE_TIMEOUT=${LIFETIMES_TIMEOUT:-240} case_ lifetimes-${np}pe pass mpi "$np" $t
    done
  fi
  for np in $(multi_pes); do
    GPU_LIFETIMES_CASE=opposite_orders NVSHMEM_RS_TIMEOUT=15s CASE_TIMEOUT=90 \
      case_ lifetimes-opposite-orders-${np}pe pass:"opposite orders:" nvrun "$np" $t
    grep -h "opposite orders:" "$out/lifetimes-opposite-orders-${np}pe.log" | head -2
    NVSHMEM_RS_TIMEOUT=10s CASE_TIMEOUT=60 \
      case_ faults-exit-at-end-${np}pe pass:"runtime dropped" nvrun "$np" .gpu/bin/faults exit-at-end
    grep -h "runtime dropped" "$out/faults-exit-at-end-${np}pe.log" | head -2
  done
}

# A bound on every wait (tests/gpu_waits.rs, issue 30), each case its own job with
# NVSHMEM_RS_TIMEOUT=5s, since each leaves the runtime failed:
# - signal: every PE's stream waits for a signal word that no PE sends; the copy to the host
#   after it must return Error::SignalWaitFailed (word, comparison, value, last value seen)
#   between 5 and 8 s after (checked by the program), and later calls the same failure.
# - kernel-peer: the last PE never joins an all-reduce of this crate's kernels; the others'
#   copy must return Error::CollectiveFailed naming the last PE (team and world) and the team,
#   within 5 to 8 s.
# - kernel-peer-reduce: the same with a rooted reduce to PE 0 in the direct kernels (forced),
#   whose waits differ by role.
# - nvshmem-path: the same with NVSHMEM's own all-reduce forced, which nothing can end: the
#   watchdog must end the waiting PEs (status 1, "... inside NVSHMEM (nvshmemx_...") within the
#   bound + GRACE; a PE still alive 13 s after entering prints FAILED and exits 2.
# WAITS_CASES (space-separated) picks some of: signal kernel_peer kernel_peer_reduce nvshmem_path.
waits() {
  local t np
  t=$(gtest gpu_waits)
  want() { [[ " ${WAITS_CASES:-signal kernel_peer kernel_peer_reduce nvshmem_path} " == *" $1 "* ]]; }
  for np in $PES; do
    want signal || continue
    NVSHMEM_RS_TIMEOUT=5s CASE_TIMEOUT=60 \
      case_ waits-signal-${np}pe pass:"signal never sent: SignalWaitFailed" nvrun "$np" $t
    grep -h "signal never sent" "$out/waits-signal-${np}pe.log" | head -1
  done
  for np in $(multi_pes); do
    if want kernel_peer; then
      GPU_WAITS_CASE=kernel_peer NVSHMEM_RS_TIMEOUT=5s CASE_TIMEOUT=60 \
        case_ waits-kernel-peer-${np}pe pass:"peer never arrived in our kernel: CollectiveFailed" nvrun "$np" $t
      grep -h "peer never arrived" "$out/waits-kernel-peer-${np}pe.log" | head -1
    fi
    if want kernel_peer_reduce; then
      GPU_WAITS_CASE=kernel_peer_reduce NVSHMEM_RS_ALGORITHMS=reduce=nvlink_direct NVSHMEM_RS_TIMEOUT=5s CASE_TIMEOUT=60 \
        case_ waits-kernel-peer-reduce-${np}pe pass:"peer never arrived in our kernel: CollectiveFailed" nvrun "$np" $t
      grep -h "peer never arrived" "$out/waits-kernel-peer-reduce-${np}pe.log" | head -1
    fi
    if want nvshmem_path && shares_gpu "$np"; then
      skip_case "waits-nvshmem-path-${np}pe" "$NVSHMEM_SHARED_REFUSED"
    elif want nvshmem_path; then
      GPU_WAITS_CASE=nvshmem_path NVSHMEM_RS_ALGORITHMS=all_reduce=nvshmem NVSHMEM_RS_TIMEOUT=5s CASE_TIMEOUT=60 \
        case_ waits-nvshmem-path-${np}pe "fail:inside NVSHMEM (nvshmemx_" nvrun "$np" $t
      grep -h "inside NVSHMEM" "$out/waits-nvshmem-path-${np}pe.log" | head -1
    fi
  done
}

# One PE of two fails on purpose in the middle of a loop of all-reduces (examples/faults.rs):
# SIGKILL, a panic, SIGSTOP (a hung PE), exit without finalising, Runtime::abort. Under every
# launcher, the surviving PE must end non-zero with a message naming PE 1 well within the case's
# limit, and no process may die of SIGSEGV. The timeout is 10 s for these runs.
faults() {
  export NVSHMEM_RS_TIMEOUT=${FAULT_TIMEOUT:-10s} out
  local launcher mode
  for launcher in ${FAULT_LAUNCHERS:-nvshmem-run mpirun hand hydra}; do
    for mode in ${FAULT_MODES:-kill panic stop exit abort}; do
      fault_case "$launcher" "$mode"
    done
  done
  CASE_TIMEOUT=60 case_ faults-none-nvshmem-run-2pe pass nvrun 2 .gpu/bin/faults none
  # The same failures while the survivor waits inside NVSHMEM's own all-reduce kernel, which
  # nothing can end: the watchdog must end the process (status 1, the failure printed) GRACE
  # (5 s) after it saw the failure.
  # (nvshmem-run ends the job itself when a PE dies, before that: only its SIGSTOP case.)
  local lm
  for lm in hand:kill hand:stop nvshmem-run:stop; do
    NVSHMEM_RS_ALGORITHMS=all_reduce=nvshmem CASE_TIMEOUT=60 case_ "fault-nvshmem-path-${lm/:/-}" \
      "fail:did not return to this library" fault_run "${lm%%:*}" "${lm#*:}"
    pkill -KILL -f '.gpu/bin/faults' 2>/dev/null
  done
  echo "fault cases: survivor's end after the fault (s), exit statuses, crashes:"
  cat "$out/faults-table.txt"
}

# fault_run LAUNCHER MODE: the faults example with 2 PEs under LAUNCHER.
fault_run() {
  local launcher=$1 mode=$2
  case $launcher in
    nvshmem-run) nvrun 2 .gpu/bin/faults "$mode" ;;
    mpirun) mpi 2 .gpu/bin/faults "$mode" ;;
    hand) fault_by_hand "$mode" ;;
    *) "$launcher" 2 .gpu/bin/faults "$mode" ;;   # a function taking NP CMD... (hydra)
  esac
}
export -f fault_run

# fault_case LAUNCHER MODE
fault_case() {
  local launcher=$1 mode=$2 name="fault-$1-$2"
  # 40 s: the survivor ends within about 10 s; Hydra then still waits for a stopped PE.
  # Hydra ends the whole job itself when a PE dies of a signal, sometimes before the survivor's
  # watchdog (50 ms) has seen it: a kill passes when Hydra says it ended the job (it says so
  # in both orders; the table still shows whether the survivor named PE 1 first).
  local expect="fail:PE 0: iteration"
  [ "$launcher:$mode" = hydra:kill ] && expect="fail:BAD TERMINATION"
  CASE_TIMEOUT=40 case_ "$name" "$expect" fault_run "$launcher" "$mode"
  local log="$out/$name.log" t0 t1 crash=no
  t0=$(grep -o 'fault: PE 1 .* t=[0-9.]*' "$log" | head -1 | sed 's/.*t=//')
  t1=$(grep -o 'PE 0: iteration .* failed at t=[0-9.]*' "$log" | head -1 | sed 's/.*t=//')
  grep -qiE 'segmentation fault|SIGSEGV|signal 11' "$log" && crash=YES
  grep -q 'PE 0: iteration .*PE 1\|PE 0: iteration .*team PE 1' "$log" || crash="$crash, survivor's error does not name PE 1"
  printf '%-28s end after %6s s   %s   crash: %s\n' "$name" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { if (a != "" && b != "") printf "%.3f", b - a; else print "?" }')" \
    "$(grep -o 'exit status: .*' "$log" | head -1)" "$crash" >> "$out/faults-table.txt"
  # Nothing may be left running, nor on the GPUs.
  pkill -KILL -f '.gpu/bin/faults' 2>/dev/null && echo "$name: killed leftover processes" >> "$out/faults-table.txt"
  sleep 1
}

# The env bootstrap by hand (torchrun's variables), each PE's exit status reported.
fault_by_hand() {
  local mode=$1 port=$((29600 + RANDOM % 300)) pids=() r rc0 rc1
  mps_share 2
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      .gpu/bin/faults "$mode" > "$out/hand-$mode-pe$r.out" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?
  sleep 0.5
  kill -0 "${pids[1]}" 2>/dev/null && { echo "PE 1 still there after PE 0 ended: killing it"; kill -KILL "${pids[1]}"; }
  wait "${pids[1]}"; rc1=$?
  cat "$out/hand-$mode-pe0.out" "$out/hand-$mode-pe1.out"
  echo "exit status: PE 0 $rc0, PE 1 $rc1"
  return "$rc0"
}
export -f fault_by_hand

# tests/gpu_soak.rs: 10,000 arrays allocated and freed and 1,000,000 small collectives; the
# symmetric heap in use, the GPU's memory in use and the host's RSS, read after a warm-up and at
# the end, must not grow (the test says its tolerances). With 2 PEs under nvshmem-run, then
# 1 PE without a launcher; SOAK_ARGS, passed to every PE in the environment, gives the options
# (e.g. "--arrays 1000 --collectives 100000" for a quick run). The greps copy each PE's table
# and the verdict from the logs into the output.
soak() {
  # shellcheck disable=SC2046
  SOAK_ARGS=${SOAK_ARGS:-} CASE_TIMEOUT=${SOAK_TIMEOUT:-330} case_ soak-nvshmem-run-2pe pass:"soak: ok on every PE (2)" nvrun 2 $(gtest gpu_soak)
  grep -E "^(\[PE [0-9]+\] )?(soak|warm-up|quarter|PE [0-9]+:)" "$out/soak-nvshmem-run-2pe.log" | tail -40
  # shellcheck disable=SC2046
  SOAK_ARGS=${SOAK_ARGS:-} CASE_TIMEOUT=${SOAK_TIMEOUT_1PE:-220} case_ soak-1pe pass:"soak: ok on every PE (1)" $(gtest gpu_soak)
  grep -E "^(soak|warm-up|quarter|PE 0:)" "$out/soak-1pe.log" | tail -20
}

# ---- nvshmem-perf's suites ----
# perf_env SIZE: what nvshmem-perf's runs export (and later suites keep): raw NCCL's library
# beside ours, a symmetric heap of SIZE, and a bound on every wait (30 s unless set).
perf_env() {
  export NCCL_HOME=${NCCL_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl} NVSHMEM_SYMMETRIC_SIZE=$1 NVSHMEM_RS_TIMEOUT=${NVSHMEM_RS_TIMEOUT:-30s}
}
# perf_case NAME ARGS...: case NAME, nvshmem-perf ARGS as PERF_NP PEs (default 2) under mpirun,
# passed NCCL_HOME and NVSHMEM_SYMMETRIC_SIZE (CASE_TIMEOUT and the like from the caller's
# prefix).
perf_case() {
  local n=$1; shift
  case_ "$n" pass mpi "${PERF_NP:-2}" -x NCCL_HOME -x NVSHMEM_SYMMETRIC_SIZE .gpu/bin/nvshmem-perf "$@"
}
# nvshmem-perf's flags for stream mode and graph mode, word-split where used. Both check their
# results: graph mode a launch of the captured call, once per point after timing.
declare -A mode_flags=([stream]="-c 1 -G 0" [graph]="-c 1 -G 1")
# summarize ARGS...: saved results side by side, a line a point (nvshmem-perf summarize --help:
# [--label TEXT] [NAME=]FILE.jsonl...), read from the rows rather than cut from the tables.
summarize() { .gpu/bin/nvshmem-perf summarize "$@"; }
# pack NAME: $final/NAME packed into $final/NAME.tgz (the device tool brings back few files).
pack() { tar -czf "$final/$1.tgz" -C "$final" "$1" && rm -rf "${final:?}/$1"; }

# Why small all-reduce/all-gather/NCCL-barrier times exceed the anchors (host-bound, see
# docs/performance.md, "Where it is slower"): the same points with each implementation alone in its
# process, and with the anchors' 500 iterations.
perfiso() {
  local w=/opt/torch/.venv/lib/python3.12/site-packages args=(all-reduce fcollect barrier broadcast -b 8 -e 64K -f 8 -n 500 -w 20 --reps 5 -c 1 -C 1 --no-progress)
  export NCCL_HOME=${NCCL_HOME:-$w/nvidia/nccl} NVSHMEM_SYMMETRIC_SIZE=1G
  local impl
  for impl in nccl nvshmem nvshmem-rs nvshmem-rs,nvshmem,nccl; do
    perf_case "perfiso-${impl//,/+}" "${args[@]}" --impl "$impl"
    grep -E '^ +8 |^ +0 ' "$out/perfiso-${impl//,/+}.log" | head -8
  done
}

# The 2-PE matrix saw an int16 reduction at 64 MiB go wrong and the PEs' barriers fall out of
# step: the same reductions checked with nvshmem-perf, raw NVSHMEM beside ours, per type.
reddiag() {
  export NVSHMEM_SYMMETRIC_SIZE=4G
  local d
  for d in ${DIAG_TYPES:-i16 f16 i32}; do
    CASE_TIMEOUT=${DIAG_TIMEOUT:-60} case_ "reddiag-$d" pass mpi 2 -x NVSHMEM_SYMMETRIC_SIZE .gpu/bin/nvshmem-perf \
      ${DIAG_COLLS:-all_reduce reduce_scatter} -d "$d" -b ${DIAG_MIN:-16M} -e ${DIAG_MAX:-128M} -f 2 -n 10 -w 2 --reps 2 -c 1 \
      --impl ${DIAG_IMPLS:-nvshmem,nvshmem-rs} --no-progress
    grep -E "wrong|^ +[0-9]+ " "$out/reddiag-$d.log" | tail -12
  done
}

# nvshmem-perf --in-place, checked (issue 30): every collective with an in-place form, each
# implementation given one buffer laid out by NCCL's in-place rules and checked by them, f32 and
# bf16, 8 B to 16 MiB (LL, direct kernels, NVSHMEM's path), rooted ones from the last PE, at each
# PE count of PES. PASS: exit 0 and no WRONG row (a wrong row exits 3 and lists itself). From 3
# PEs raw NVSHMEM is left out: its own in-place all-reduce is wrong there (tools/nvshmem-repro),
# which is NVSHMEM's, not what this checks; under MPS NCCL skips itself.
perfinplace() {
  local np impls
  perf_env 4G
  for np in $(multi_pes); do
    impls=nvshmem-rs,nvshmem,nccl
    [ "$np" -gt 2 ] && impls=nvshmem-rs,nccl
    CASE_TIMEOUT=${INPLACE_TIMEOUT:-300} case_ perf-in-place-${np}pe pass mpi "$np" -x NCCL_HOME -x NVSHMEM_SYMMETRIC_SIZE \
      .gpu/bin/nvshmem-perf all_reduce,broadcast,fcollect,reduce_scatter,reduce,gather,scatter -d f32,bf16 \
      -b 8 -e 16M -f 8 -n 5 -w 1 --reps 1 -c 1 -r $((np - 1)) --in-place --impl "$impls" --no-progress
    grep -E "WRONG|Out of bounds|rows had wrong" "$out/perf-in-place-${np}pe.log" | head -20
  done
}

# nvshmem-perf over every collective, 8 B to 256 MiB; `perf` in stream mode, `perfgraph` in
# CUDA-graph mode (each about one 10-minute call).
perf() { perf_mode stream; }
perfgraph() { perf_mode graph; }
# perfgraph one collective at a time, each in its own job with its own time limit
# (PERF_PIECE_TIMEOUT, default 90 s): nvshmem-perf -G 1 with three implementations has hung at
# a first point now and then (not found; docs/performance.md, "Small messages"), and so a
# hang costs one collective, not the run. JSON per collective into $final/perf-graph/.
perfgraphsplit() {
  local c dir="$final/perf-graph"
  perf_env 4G
  mkdir -p "$dir"
  for c in ${PERF_COLLS:-barrier sync all_reduce broadcast fcollect alltoall reduce_scatter reduce gather scatter}; do
    # shellcheck disable=SC2086
    CASE_TIMEOUT=${PERF_PIECE_TIMEOUT:-90} perf_case perf-graph-$c $c -b 8 -e 256M -f 2 -n 20 -w 3 --reps 3 -c 1 -G 1 \
      --no-progress ${PERF_EXTRA:-} --json "$dir/$c.jsonl"
  done
  pack perf-graph
}
# The graph-mode hang of nvshmem-perf (issue 31): a fresh job now and then never ends in
# CUDA-graph mode. Seen 2026-11-27 in every job that ran NVSHMEM's alltoall over 4 KiB-256 MiB
# (three implementations; this crate alone with NVSHMEM's algorithms forced; raw NVSHMEM's
# alltoall alone), never in 24 jobs of a 4 KiB all-reduce. HANG_TRIES fresh jobs (default 8)
# of HANG_ARGS (default that alltoall run) for each variant of HANG_VARIANTS (default: as is,
# i.e. nvshmem-rs with NVSHMEM's algorithms forced; NCCL_GRAPH_REGISTER=0; NVSHMEM_DISABLE_NCCL=1;
# raw NVSHMEM alone; NCCL alone), each job given HANG_TIMEOUT seconds (default 20). A job still
# running then has the threads' wait channels and host stacks of each PE written to its log
# (gdb or cuda-gdb in batch mode, 20 s at most), and is killed. Last, per variant, how many
# jobs hung. Unchecked (-c 0), unlike the other graph runs: its question is whether a job ends,
# judged by a short limit that the host's check of every point up to 256 MiB would eat into.
graphhang() {
  local v tries=${HANG_TRIES:-8} k log pid dbg hung report=()
  perf_env 4G
  if dryrun; then say graphhang "${HANG_VARIANTS:-asis noreg nonccl raw nccl}" "$tries"; return 0; fi
  dbg=$(command -v gdb || command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)
  [ -x "$dbg" ] || dbg=""
  echo "graphhang: stacks by ${dbg:-/proc wchan only}"
  # shellcheck disable=SC2206
  local args=(${HANG_ARGS:-alltoall -b 4K -e 256M -f 2 -d f32 -n 20 -w 3 --reps 3 -c 0 -G 1 --no-progress})
  for v in ${HANG_VARIANTS:-asis noreg nonccl raw nccl}; do
    hung=0
    for k in $(seq 1 "$tries"); do
      log="$out/graphhang-$v-$k.log"
      (
        case $v in
          noreg) export NCCL_GRAPH_REGISTER=0 ;;
          nonccl) export NVSHMEM_DISABLE_NCCL=1 ;;
        esac
        case $v in
          raw) set -- --impl nvshmem ;;
          nccl) set -- --impl nccl ;;
          *) set -- --impl nvshmem-rs --algo all_reduce=nvshmem,reduce_scatter=nvshmem,broadcast=nvshmem,fcollect=nvshmem,alltoall=nvshmem ;;
        esac
        exec bash -c '"$@"' bash mpi 2 -x NCCL_HOME -x NVSHMEM_SYMMETRIC_SIZE .gpu/bin/nvshmem-perf "${args[@]}" "$@"
      ) >"$log" 2>&1 &
      pid=$!
      local t=0
      while kill -0 "$pid" 2>/dev/null && [ $t -lt "${HANG_TIMEOUT:-20}" ]; do sleep 1; t=$((t + 1)); done
      if kill -0 "$pid" 2>/dev/null; then
        hung=$((hung + 1))
        echo "==== hung after ${t}s: stacks ====" >>"$log"
        # The PEs only (not the launcher, whose cmdline names them too); the debugger gets a
        # hard limit (a cuda-gdb attached to a process in a hung kernel has ignored TERM).
        for p in $(pgrep -x nvshmem-perf); do
          echo "---- pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline | cut -c1-120)" >>"$log"
          for w in /proc/"$p"/task/*; do echo "  task ${w##*/} $(cat "$w"/comm) wchan=$(cat "$w"/wchan 2>/dev/null)"; done >>"$log"
          [ -n "$dbg" ] && timeout -k 5 20 "$dbg" -p "$p" -batch -ex "thread apply all bt 25" >>"$log" 2>&1 </dev/null
        done
        pkill -9 -f "\.gpu/bin/nvshmem-perf"; pkill -9 -f "mpirun.*nvshmem-perf"
        wait "$pid" 2>/dev/null
        sleep 2
      else
        wait "$pid"; echo "exit $?" >>"$log"
      fi
    done
    report+=("graphhang $v: $hung of $tries fresh jobs hung")
    summary+=("$(printf '%-44s %-10s' "graphhang-$v" "hung $hung/$tries")")
  done
  printf '%s\n' "${report[@]}"
}

# 3 PEs on 2 GPUs (two PEs on GPU 0, one on GPU 1) under MPS: NVSHMEM 3.4.5's init never
# returns (2026-11-26: the same with NVSHMEM_REMOTE_TRANSPORT=ibrc and without thread shares;
# the two PEs on GPU 0 detect a shared GPU, the one on GPU 1 does not, and their start-up paths
# differ). The runtime refuses that placement at once (Error::UnevenGpuSharing); 3 PEs on one
# GPU and 4 on two start. UNEVEN_TRY=1 also starts the uneven job all the same
# (NVSHMEM_RS_ALLOW_UNEVEN_SHARING=1), to see whether the NVSHMEM at hand hangs. Run with MPS=1
# on a machine with 2 or more GPUs (CUDA_VISIBLE_DEVICES=0,1 on a larger one).
uneven() {
  local t
  t=$(gtest gpu_foundation)
  CASE_TIMEOUT=60 case_ uneven-3pe-2gpu-refused fail:"where NVSHMEM never returns from its start" nvrun 3 $t
  CASE_TIMEOUT=60 CUDA_VISIBLE_DEVICES=0 case_ uneven-3pe-1gpu pass nvrun 3 $t
  CASE_TIMEOUT=60 case_ even-4pe-2gpu pass nvrun 4 $t
  if [ "${UNEVEN_TRY:-0}" = 1 ]; then
    CASE_TIMEOUT=${UNEVEN_TIMEOUT:-45} NVSHMEM_RS_ALLOW_UNEVEN_SHARING=1 case_ uneven-3pe-2gpu-allowed pass nvrun 3 $t
  fi
}
# gpu_foundation under nvshmem-run at each PE count of PES above 1, nothing else (a quick look
# at a machine with more GPUs: one PE per GPU without MPS=1).
spread() {
  local t np
  t=$(gtest gpu_foundation)
  for np in $(multi_pes); do
    CASE_TIMEOUT=${SPREAD_TIMEOUT:-90} case_ spread-foundation-${np}pe pass nvrun "$np" $t
  done
}
# The 8-byte latency of older builds beside this one, interleaved, in a CUDA graph (issue 31:
# 2.31 us at 2001dcc, 2.61 at 1c95bf1 on 4 x H200, 2026-11-26): every nvshmem-perf under
# .gpu/old/ (builds of older commits: `stage-old REV...`, named nvshmem-perf-COMMIT), then
# .gpu/bin/nvshmem-perf with the call check on and off, LATENCY_ROUNDS times (default 2).
# LATENCY_ARGS replaces the nvshmem-perf arguments (sizes, collectives; `--impl nvshmem-rs` is
# added), e.g. the mid band's Lamport calls; LATENCY_NCCL=1 adds one NCCL run of them a round;
# LATENCY_PES (default 2) is the PEs of every job; LATENCY_OLD_NOCHECK=1 runs the older builds
# with the call check off as well.
latency() {
  # shellcheck disable=SC2206
  local args=(${LATENCY_ARGS:-all_reduce,barrier,sync -b 8 -e 8 -n 500 -w 50 --reps 5 -c 1 -G 1 --no-progress})
  local ours=("${args[@]}" --impl nvshmem-rs)
  local r b name np=${LATENCY_PES:-2}
  for r in $(seq "${LATENCY_ROUNDS:-2}"); do
    for b in .gpu/old/nvshmem-perf*; do
      [ -x "$b" ] || continue
      name=${b##*/}
      CASE_TIMEOUT=60 case_ latency-${name#nvshmem-perf-}-round$r pass mpi "$np" "$b" "${ours[@]}"
      [ "${LATENCY_OLD_NOCHECK:-0}" = 1 ] || continue
      CASE_TIMEOUT=60 NVSHMEM_RS_CHECK_CALLS=0 case_ latency-${name#nvshmem-perf-}-nocheck-round$r pass mpi "$np" "$b" "${ours[@]}"
    done
    CASE_TIMEOUT=60 case_ latency-new-round$r pass mpi "$np" .gpu/bin/nvshmem-perf "${ours[@]}"
    CASE_TIMEOUT=60 NVSHMEM_RS_CHECK_CALLS=0 case_ latency-new-nocheck-round$r pass mpi "$np" .gpu/bin/nvshmem-perf "${ours[@]}"
    if [ "${LATENCY_NCCL:-0}" = 1 ]; then
      export NCCL_HOME=${NCCL_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}
      CASE_TIMEOUT=60 case_ latency-nccl-round$r pass mpi "$np" -x NCCL_HOME .gpu/bin/nvshmem-perf \
        "${args[@]}" --impl nccl
    fi
  done
  echo "== in a CUDA graph, us a call (rows in order): ${LATENCY_ARGS:-all_reduce barrier sync at 8 B}"
  for b in "$out"/latency-*.log; do
    echo "${b##*/latency-}: $(grep -E '^ +[0-9]+ ' "$b" | awk '{print $6}' | xargs)"
  done
}

# The mid band (issue 31): the reductions from 64 KiB to 2 MiB (MIDBAND_SIZES), f32 and bf16,
# this crate's automatic choice, raw NVSHMEM and NCCL in one job per collective and mode (both
# checked), then the same with nvlink_lamport forced on this crate alone
# (MIDBAND_COLLS, other collectives too: the forced jobs then take its reductions only);
# MIDBAND_INPLACE=1 adds the in-place runs. JSON, markdown and plots into $final/midband/.
midband() {
  local c=${MIDBAND_COLLS:-all_reduce,reduce_scatter,reduce} mode ip args dir="$final/midband" places=(oop)
  # The Lamport jobs take the reductions among the collectives named (copies have no Lamport
  # kernel: a job that forced it on one stopped at the refusal, 2026-11-28).
  local r reds=() forced=""
  for r in ${c//,/ }; do
    case $r in all_reduce | reduce_scatter | reduce) reds+=("$r") ;; esac
  done
  for r in "${reds[@]}"; do forced+="${forced:+,}$r=nvlink_lamport"; done
  local red_list=${forced//=nvlink_lamport/}
  perf_env 4G
  mkdir -p "$dir"
  [ "${MIDBAND_INPLACE:-0}" = 1 ] && places+=(inplace)
  for ip in "${places[@]}"; do
    for mode in graph stream; do
      # shellcheck disable=SC2206,SC2054
      args=($c -d f32,bf16 ${MIDBAND_SIZES:--b 64K -e 2M -f 2} -n 100 -w 10 --reps 3 ${mode_flags[$mode]} --no-progress)
      [ $ip = inplace ] && args+=(--in-place)
      CASE_TIMEOUT=${MIDBAND_TIMEOUT:-150} perf_case midband-$mode-$ip "${args[@]}" \
        --json "$dir/$mode-$ip.jsonl" --markdown "$dir/$mode-$ip.md"
      [ -n "$forced" ] || continue
      args[0]=$red_list
      CASE_TIMEOUT=${MIDBAND_TIMEOUT:-150} perf_case midband-$mode-$ip-lamport "${args[@]}" \
        --impl nvshmem-rs --algo "$forced" --json "$dir/$mode-$ip-lamport.jsonl"
    done
  done
  for ip in "${places[@]}"; do
    for mode in graph stream; do
      if [ -n "$forced" ]; then
        summarize --label "$mode $ip" "$dir/$mode-$ip.jsonl" "lamport=$dir/$mode-$ip-lamport.jsonl"
      else
        summarize --label "$mode $ip" "$dir/$mode-$ip.jsonl"
      fi
    done
  done
  pack midband
}

# LL over more blocks (issue 31): the copies (LLWIDE_COLLS, default broadcast, fcollect,
# alltoall, gather, scatter), f32, 16 KiB to 1 MiB (LLWIDE_SIZES), on 2 PEs, in a CUDA graph
# and on a stream (both checked): this crate's automatic choice, raw NVSHMEM and NCCL in
# one job per mode, then this crate alone with nvlink_ll forced (up to 64 blocks, 1 MiB a
# pair on 2 PEs; 512 KiB when this was written), then with nvlink_direct forced.
# JSON and markdown into $final/llwide/ (llwide.tgz); last, µs a call per size and variant and
# the count of WRONG rows. Six jobs, about 3-4 minutes (LLWIDE_TIMEOUT each, default 120 s;
# export NCCL_GRAPH_REGISTER=0 if the three-implementation graph job hangs at its first point,
# docs/performance.md "Where it is slower").
llwide() {
  local w=/opt/torch/.venv/lib/python3.12/site-packages c mode g v dir="$final/llwide" py
  export NCCL_HOME=${NCCL_HOME:-$w/nvidia/nccl} NVSHMEM_SYMMETRIC_SIZE=4G NVSHMEM_RS_TIMEOUT=${NVSHMEM_RS_TIMEOUT:-30s}
  mkdir -p "$dir"
  c=${LLWIDE_COLLS:-fcollect,broadcast,alltoall,gather,scatter}
  for mode in graph stream; do
    g=0; [ $mode = graph ] && g=1
    # shellcheck disable=SC2206
    local args=($c -d f32 ${LLWIDE_SIZES:--b 16K -e 1M -f 2} -n 100 -w 10 --reps 3 -c 1 -G $g --no-progress)
    CASE_TIMEOUT=${LLWIDE_TIMEOUT:-120} case_ llwide-$mode-auto pass mpi 2 -x NCCL_HOME -x NVSHMEM_SYMMETRIC_SIZE \
      .gpu/bin/nvshmem-perf "${args[@]}" --json "$dir/$mode-auto.jsonl" --markdown "$dir/$mode-auto.md"
    for v in ll direct; do
      CASE_TIMEOUT=${LLWIDE_TIMEOUT:-120} case_ llwide-$mode-$v pass mpi 2 -x NCCL_HOME -x NVSHMEM_SYMMETRIC_SIZE \
        .gpu/bin/nvshmem-perf "${args[@]}" --impl nvshmem-rs --algo "${c//,/=nvlink_$v,}=nvlink_$v" \
        --json "$dir/$mode-$v.jsonl" --markdown "$dir/$mode-$v.md"
    done
  done
  py=$(command -v python3 || echo /opt/torch/.venv/bin/python)
  "$py" - "$dir" <<'PY'
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
def size(b):
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K" if b >= 1024 else f"{b}B"
wrong = bad = 0
for mode in ("graph", "stream"):
    table, sizes = {}, set()
    for v in ("auto", "ll", "direct"):
        f = d / f"{mode}-{v}.jsonl"
        if not f.exists():
            print(f"llwide {mode}-{v}: no results (the job failed or timed out)")
            continue
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            imp = r["implementation"]
            name = f"{imp} auto" if v == "auto" and imp == "nvshmem-rs" else imp if v == "auto" else f"forced nvlink_{v}"
            sizes.add(r["bytes"])
            t = r.get("time_us")
            cell = f"{t:.2f}" if r["status"] == "ok" and isinstance(t, (int, float)) else "refused" if r["status"].startswith("refused") else "skip"
            if r.get("wrong", -1) > 0:
                cell, wrong = "WRONG", wrong + 1
            if r["status"] != "ok" and not r["status"].startswith("refused"):
                bad += 1
            row = table.setdefault((r["collective"], name), {})
            row[r["bytes"]] = cell
            if v == "auto" and imp == "nvshmem-rs":
                table.setdefault((r["collective"], "  (its choice)"), {})[r["bytes"]] = r.get("algo", "-").replace("nvlink_", "")
    sizes = sorted(sizes)
    print(f"== llwide {mode} (checked), f32, us a call")
    print(f"{'collective':<11}{'variant':<22}" + "".join(f"{size(b):>9}" for b in sizes))
    order = ["nvshmem-rs auto", "  (its choice)", "nvshmem", "nccl", "forced nvlink_ll", "forced nvlink_direct"]
    for (coll, name) in sorted(table, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 9)):
        row = table[(coll, name)]
        print(f"{coll:<11}{name:<22}" + "".join(f"{row.get(b, '-'):>9}" for b in sizes))
print(f"llwide: {wrong} WRONG rows, {bad} rows neither measured nor refused")
PY
  tar -czf "$final/llwide.tgz" -C "$final" llwide && rm -rf "$dir"
}

perf_mode() {
  # PERF_EXTRA: nvshmem-perf flags appended (later flags win), e.g. fewer sizes.
  # shellcheck disable=SC2086
  CASE_TIMEOUT=${PERF_TIMEOUT:-540} MODES=$1 BIN=.gpu/bin/nvshmem-perf case_ perf-$1-2pe pass scripts/perf-gpu.sh "$final/perf" ${PERF_EXTRA:-}
  tar -czf "$final/perf-$1.tgz" -C "$final" perf && rm -rf "$final/perf"
}

# The algorithm layer's cost (issue 11): nvshmem-perf at PERF_POINTS sizes only (default 8 B and
# 128 MiB), stream then graph mode, first with the automatic choice against raw NVSHMEM and
# NCCL, then with every collective forced onto NVSHMEM's algorithm (gather and scatter, which
# NVSHMEM lacks, onto rooted_get) against raw NVSHMEM. JSON into $final/points/.
# The host time of one call (benches/host_overhead.rs) on one PE, without a launcher, twice
# (the machines are noisy: the two runs show how much): ours against raw NVSHMEM, a bare launch
# of the same kernel and a prepared call's start. Under MPS=1 it measures nothing: refused.
hostcost() {
  if mps_on; then
    echo "hostcost: host times under MPS measure nothing; skipped"
    return 0
  fi
  local run
  for run in 1 2; do
    case_ host-overhead-1pe-run$run pass .gpu/bin/host_overhead
    grep -h "host time\|  \|against\|forced\|local" "$out/host-overhead-1pe-run$run.log" | head -30
  done
}

perfpoints() {
  perf_env 4G
  local forced=all_reduce=nvshmem,reduce=nvshmem,reduce_scatter=nvshmem,broadcast=nvshmem,fcollect=nvshmem,alltoall=nvshmem,gather=rooted_get,scatter=rooted_get,barrier=nvshmem,sync=nvshmem
  local dir="$final/points" mode args
  mkdir -p "$dir"
  case_ host-overhead-2pe pass mpi 2 .gpu/bin/host_overhead
  grep -h "host time\|  \|against" "$out/host-overhead-2pe.log" | head -8
  for mode in stream graph; do
    # shellcheck disable=SC2206
    args=(all ${PERF_POINTS:--b 8 -e 128M -f 16777216} -n 50 -w 5 --reps 3 ${mode_flags[$mode]} --no-progress)
    CASE_TIMEOUT=${POINTS_TIMEOUT:-150} perf_case points-$mode-auto "${args[@]}" --json "$dir/$mode-auto.jsonl"
    CASE_TIMEOUT=${POINTS_TIMEOUT:-150} perf_case points-$mode-forced-nvshmem "${args[@]}" \
      --impl nvshmem-rs,nvshmem --algo "$forced" --json "$dir/$mode-forced.jsonl"
    summarize --label "$mode" "$dir/$mode-auto.jsonl" "forced=$dir/$mode-forced.jsonl"
  done
  pack points
}

# Teams of one PE (issue 22): nvshmem-perf as 1 PE with no launcher (run it without MPS=1),
# nvshmem-rs's automatic choice (`local`: one copy out of place, nothing in place, a quiet for
# a barrier) beside raw NVSHMEM and NCCL: all-reduce, broadcast, barrier and sync at 8 B and
# 128 MiB (ONEPE_SIZES), on a stream and in a CUDA graph (results checked), out of place, then
# all-reduce and broadcast in place; then the same forced onto NVSHMEM's algorithm against raw
# NVSHMEM, and onto this crate's kernels at 8 B (nvlink_ll, nvlink: what these calls cost
# before `local`). About a minute; JSON into $final/onepe/, its points side by side in the output.
onepe() {
  perf_env 2G
  local forced=all_reduce=nvshmem,broadcast=nvshmem,barrier=nvshmem,sync=nvshmem
  local kernels=all_reduce=nvlink_ll,broadcast=nvlink_ll,barrier=nvlink,sync=nvlink
  local dir="$final/onepe" mode common name
  mkdir -p "$dir"
  mps_share 1 # started without a launcher function
  for mode in stream graph; do
    # shellcheck disable=SC2206
    common=(-n 50 -w 5 --reps 3 ${mode_flags[$mode]} --no-progress)
    # shellcheck disable=SC2206
    local sizes=(${ONEPE_SIZES:--b 8 -e 128M -f 16777216})
    CASE_TIMEOUT=${ONEPE_TIMEOUT:-90} case_ onepe-$mode-auto pass .gpu/bin/nvshmem-perf \
      all_reduce,broadcast,barrier,sync "${sizes[@]}" "${common[@]}" --json "$dir/$mode-auto.jsonl"
    CASE_TIMEOUT=${ONEPE_TIMEOUT:-90} case_ onepe-$mode-in-place pass .gpu/bin/nvshmem-perf \
      all_reduce,broadcast "${sizes[@]}" "${common[@]}" --in-place --json "$dir/$mode-in-place.jsonl"
    CASE_TIMEOUT=${ONEPE_TIMEOUT:-90} case_ onepe-$mode-forced-nvshmem pass .gpu/bin/nvshmem-perf \
      all_reduce,broadcast,barrier,sync "${sizes[@]}" "${common[@]}" --impl nvshmem-rs,nvshmem \
      --algo "$forced" --json "$dir/$mode-forced-nvshmem.jsonl"
    CASE_TIMEOUT=${ONEPE_TIMEOUT:-90} case_ onepe-$mode-forced-kernels pass .gpu/bin/nvshmem-perf \
      all_reduce,broadcast,barrier,sync -b 8 -e 8 "${common[@]}" --impl nvshmem-rs \
      --algo "$kernels" --json "$dir/$mode-forced-kernels.jsonl"
    summarize --label "onepe $mode" "$dir/$mode-auto.jsonl" "$dir/$mode-in-place.jsonl" \
      "forced=$dir/$mode-forced-nvshmem.jsonl" "kernels=$dir/$mode-forced-kernels.jsonl"
  done
  pack onepe
}

# Nsight Compute on one PE (no launcher, stream mode): each of this crate's small kernels
# (KPROF_ALGOS, default the 8-byte all-reduce forced onto nvlink_ll, the barrier onto nvlink)
# profiled on its own, a few launches after warm-up: its duration on the GPU, its launch
# statistics and where its warps stall (an instruction fetch, a load, a barrier), to tell what
# a small call spends inside the kernel from what it spends around it. Summary lines last.
kernelprof() {
  local ncu algo coll log
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  perf_env 1G
  mps_share 1
  for algo in ${KPROF_ALGOS:-all_reduce=nvlink_ll barrier=nvlink broadcast=nvlink_ll}; do
    coll=${algo%%=*}
    CASE_TIMEOUT=${KPROF_TIMEOUT:-180} case_ kernelprof-$coll pass "$ncu" -k regex:nvr_ \
      --launch-skip 20 --launch-count 2 --section SpeedOfLight --section LaunchStats \
      --section WarpStateStats --section InstructionStats --print-details all .gpu/bin/nvshmem-perf "$coll" -b 8 -e 8 \
      -n 30 -w 5 --reps 1 -c 0 -G 0 --impl nvshmem-rs --algo "$algo" --no-progress
    log="$out/kernelprof-$coll.log"
    echo "== kernelprof $algo"
    grep -iE "^  nvr_|Duration|Registers Per|stall|Warp Cycles Per Issued|Executed Instructions  |Block Size" "$log" | head -60
  done
}

# Programmatic dependent launch (kernels/PROTOCOL.md, "Launch") on and off, alternately, in
# stream and graph mode: small calls of every collective (PDL_SIZES, default 8 B and 4 KiB)
# against raw NVSHMEM (and NCCL in the first run of each mode). JSON into $final/pdl/.
pdl() {
  local dir="$final/pdl" mode on run=0 impl
  perf_env 1G
  mkdir -p "$dir"
  for mode in stream graph; do
    for on in 1 0 1 0; do
      run=$((run + 1)); impl=nvshmem-rs,nvshmem; [ $run -le 1 ] || [ $run -eq 5 ] && impl+=,nccl
      # shellcheck disable=SC2086
      NVSHMEM_RS_PDL=$on CASE_TIMEOUT=${PDL_TIMEOUT:-120} perf_case pdl-$mode-$on-run$run all ${PDL_SIZES:--b 8 -e 4K -f 512} \
        -n 200 -w 20 --reps 3 ${mode_flags[$mode]} --impl $impl --no-progress --json "$dir/$mode-pdl$on-run$run.jsonl"
      summarize --label "$mode pdl=$on" "$dir/$mode-pdl$on-run$run.jsonl"
    done
  done
  pack pdl
}

# Data movement by copy engine (nvlink_ce) against the automatic choice, raw NVSHMEM and NCCL,
# 1 MiB to 256 MiB, stream then graph mode: where it wins (the crossovers of ce.rs).
cepoints() {
  local colls=broadcast,fcollect,alltoall,gather,scatter dir="$final/ce" mode args
  local forced=broadcast=nvlink_ce,fcollect=nvlink_ce,alltoall=nvlink_ce,gather=nvlink_ce,scatter=nvlink_ce
  perf_env 4G
  mkdir -p "$dir"
  for mode in stream graph; do
    # shellcheck disable=SC2206
    args=($colls ${CE_SIZES:--b 1M -e 256M -f 2} -n 20 -w 3 --reps 3 ${mode_flags[$mode]} --no-progress)
    CASE_TIMEOUT=${CE_TIMEOUT:-200} perf_case ce-$mode-auto "${args[@]}" --json "$dir/$mode-auto.jsonl"
    CASE_TIMEOUT=${CE_TIMEOUT:-200} perf_case ce-$mode-forced "${args[@]}" --impl nvshmem-rs --algo "$forced" --json "$dir/$mode-ce.jsonl"
    summarize --label "$mode" "$dir/$mode-auto.jsonl" "ce=$dir/$mode-ce.jsonl"
  done
  pack ce
}

# Every algorithm forced beside the automatic choice, one run per mode (issue 31: "the automatic
# choice takes the fastest algorithm at every size"): the data collectives (SWEEP_COLLS),
# SWEEP_SIZES (default 4 KiB to 256 MiB by 2), SWEEP_ITERS (default -n 20 -w 3) in SWEEP_MODES (default graph; both checked),
# f32 sum out of place on SWEEP_PES PEs (default 2; 4 on a 4-GPU machine measured the 4-PE rows
# of crossover.rs). First the automatic choice with raw NVSHMEM and NCCL, one job a
# collective, then this crate alone with each algorithm forced on every collective that has it
# (SWEEP_VARIANTS, default "ll lamport direct ce nvshmem"; gather and scatter's nvshmem is
# rooted_get; SWEEP_VARIANTS="" times the automatic choice alone); SWEEP_TIMEOUT each
# (default 60 s). A job that does not end (NVSHMEM's alltoall in a graph has hung every time:
# docs/performance.md, "Where it is slower") keeps the points it finished and runs once more
# with NCCL_GRAPH_REGISTER=0 (its file -noreg.jsonl, whose rows stand in for the first's).
# JSON into $final/sweep/ (sweep.tgz); last, per
# collective and size, the automatic choice's time and algorithm, the fastest forced one, NCCL
# and NVSHMEM, and every point where the choice is more than 5 % (and 0.2 us) slower than the
# fastest forced algorithm.
# sweep_job NAME BASE ARGS...: nvshmem-perf ARGS --json BASE.jsonl as case NAME; if it did not
# end (no "Out of bounds" line, which it prints last), again with NCCL_GRAPH_REGISTER=0 into
# BASE-noreg.jsonl as case NAME-noreg.
sweep_job() {
  local name=$1 base=$2; shift 2
  PERF_NP=${SWEEP_PES:-2} CASE_TIMEOUT=${SWEEP_TIMEOUT:-60} perf_case "$name" "$@" --json "$base.jsonl"
  dryrun || grep -q "Out of bounds" "$out/$name.log" && return 0
  PERF_NP=${SWEEP_PES:-2} NCCL_GRAPH_REGISTER=0 CASE_TIMEOUT=${SWEEP_TIMEOUT:-60} perf_case "$name-noreg" "$@" --json "$base-noreg.jsonl"
}
sweep() {
  local dir="$final/sweep" mode c v list cl algo colls py
  perf_env 4G
  mkdir -p "$dir"
  colls=${SWEEP_COLLS:-all_reduce,reduce_scatter,reduce,broadcast,fcollect,alltoall,gather,scatter}
  # shellcheck disable=SC2054
  local -A has=([ll]=$colls [lamport]=$colls [direct]=$colls
    [ce]=broadcast,fcollect,alltoall,gather,scatter [nvshmem]=$colls)
  for mode in ${SWEEP_MODES:-graph}; do
    # shellcheck disable=SC2206
    local args=(${SWEEP_SIZES:--b 4K -e 256M -f 2} -d f32 ${SWEEP_ITERS:--n 20 -w 3} --reps 3 ${mode_flags[$mode]} --no-progress)
    for c in ${colls//,/ }; do
      sweep_job sweep-$mode-auto-$c "$dir/$mode-auto-$c" "$c" "${args[@]}"
    done
    for v in ${SWEEP_VARIANTS-ll lamport direct ce nvshmem}; do
      list="" cl=""
      for c in ${colls//,/ }; do
        [[ ",${has[$v]}," == *",$c,"* ]] || continue
        algo=nvlink_$v
        [ $v = nvshmem ] && algo=nvshmem && { [ "$c" = gather ] || [ "$c" = scatter ]; } && algo=rooted_get
        list+="${list:+,}$c=$algo" cl+="${cl:+,}$c"
      done
      [ -n "$list" ] || continue
      sweep_job sweep-$mode-$v "$dir/$mode-$v" "$cl" "${args[@]}" --impl nvshmem-rs --algo "$list"
    done
  done
  py=$(command -v python3 || echo /opt/torch/.venv/bin/python)
  "$py" - "$dir" ${SWEEP_MODES:-graph} <<'PY'
import json, pathlib, sys
d, modes = pathlib.Path(sys.argv[1]), sys.argv[2:]
def size(b):
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K" if b >= 1024 else f"{b}B"
def rows(f):
    for line in f.read_text().splitlines() if f.exists() else []:
        try:
            yield json.loads(line)
        except ValueError:
            pass
wrong = 0
for mode in modes:
    pts, slow = {}, []
    for f in sorted(d.glob(f"{mode}-*.jsonl")):
        # A job rerun with NCCL_GRAPH_REGISTER=0 (sweep_job) counts as its variant.
        v = f.stem[len(mode) + 1:].removesuffix("-noreg")
        for r in rows(f):
            key = (r["collective"], r["bytes"])
            ok = r["status"] == "ok" and isinstance(r.get("time_us"), (int, float))
            if r.get("wrong", 0) > 0:
                wrong += 1
                print(f"WRONG: {mode} {v} {r['implementation']} {key}")
                continue
            if not ok:
                continue
            imp = r["implementation"]
            # This crate with NVSHMEM's algorithm forced is "nvshmem-algo", apart from raw NVSHMEM.
            name = imp if imp != "nvshmem-rs" else "auto" if v.startswith("auto") else "nvshmem-algo" if v == "nvshmem" else v
            pts.setdefault(key, {})[name] = (r["time_us"], r.get("algo", "-").replace("nvlink_", ""))
    print(f"== sweep {mode}, f32 sum out of place, us a call: auto (its algorithm), the fastest forced, nccl, nvshmem")
    for (c, b) in sorted(pts):
        p = pts[(c, b)]
        forced = {k: t for k, (t, _) in p.items() if k in ("ll", "lamport", "direct", "ce", "nvshmem-algo")}
        best = min(forced, key=forced.get) if forced else None
        a = p.get("auto")
        cells = [f"{c:<15}{size(b):>6}"]
        cells.append(f"auto {a[0]:8.2f} ({a[1]})" if a else "auto        -")
        cells.append(f"best {forced[best]:8.2f} ({best})" if best else "best -")
        cells += [f"{k} {p[k][0]:8.2f}" if k in p else f"{k} -" for k in ("nccl", "nvshmem")]
        cells.append(" ".join(f"{k}={t:.2f}" for k, t in sorted(forced.items())))
        print("  ".join(cells))
        if a and best and a[0] > 1.05 * forced[best] and a[0] - forced[best] > 0.2:
            slow.append(f"{c} {size(b)}: auto {a[0]:.2f} ({a[1]}) against {best} {forced[best]:.2f}")
    print(f"sweep {mode}: the automatic choice is more than 5 % slower than a forced algorithm at {len(slow)} points")
    for line in slow:
        print("  " + line)
print(f"sweep: {wrong} WRONG rows")
PY
  pack sweep
}

# Device-initiated kernels (nvshmem::device): halo_device and ping_pong at 1 PE, then at 2 and 4
# PEs sharing GPU 0 under MPS (NVSHMEM's full MPG mode, which device-side calls need: each PE's
# CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is 100/np), and `nvshmem-perf device` at 1 and 2 PEs beside
# the nvcc-built reference: crates/nvshmem-perf/kernels/device_perf.cu compiled here by nvcc
# -rdc=true and linked by nvlink with NVSHMEM's libnvshmem_device.a (if nvlink cannot, the
# relocatable cubin is linked by the program's nvJitLink: the log says which). Each MPS case
# gets a fresh daemon (a client killed mid-kernel leaves it unusable), quit on every way out.
device() {
  local nv=${NVSHMEM_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem} ref=() np e
  local inc=(-I"$nv/include" -Icrates/nvshmem/include)
  [ -d .gpu/include ] && inc+=(-I.gpu/include)
  mkdir -p .gpu/ref
  if nvcc -arch=sm_90 -rdc=true -cubin -std=c++17 "${inc[@]}" -o .gpu/ref/device_perf-rdc.cubin \
    crates/nvshmem-perf/kernels/device_perf.cu >"$out/device-nvcc.log" 2>&1; then
    if nvlink -arch=sm_90 -o .gpu/ref/device_perf.cubin .gpu/ref/device_perf-rdc.cubin \
      -L"$nv/lib" -lnvshmem_device >>"$out/device-nvcc.log" 2>&1; then
      ref=(--reference .gpu/ref/device_perf.cubin)
      echo "device: reference built by nvcc -rdc=true + nvlink"
    else
      ref=(--reference-relocatable .gpu/ref/device_perf-rdc.cubin)
      echo "device: reference built by nvcc -rdc=true, nvlink failed (linked by nvJitLink instead):"
      tail -n 5 "$out/device-nvcc.log"
    fi
  else
    echo "device: nvcc could not build the reference:"; tail -n 15 "$out/device-nvcc.log"
  fi
  for e in halo_device ping_pong; do case_ device-$e-1pe pass mpi 1 .gpu/bin/$e; done
  case_ device-perf-1pe pass .gpu/bin/nvshmem-perf device "${ref[@]}" --json "$out/device-perf-1pe.jsonl"
  # Once more without the kernel cache: NVRTC and nvJitLink on this machine, timed.
  NVSHMEM_RS_KERNEL_CACHE=off case_ device-compile-here pass .gpu/bin/nvshmem-perf device --iters 10 --reps 1
  grep -h '^# ours' "$out/device-compile-here.log"
  # Under MPS=1 the run's own daemon serves these cases; otherwise each gets a fresh one.
  if mps_on; then
    mps_case() { local np=$1 name=$2; shift 2; mps_share "$np"; case_ "$name" pass "$@"; }
  else
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1' EXIT
    mps_case() { # NP NAME COMMAND...: one case under a fresh MPS daemon, NP PEs' shares
      local np=$1 name=$2; shift 2
      nvidia-cuda-mps-control -d && sleep 1
      export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$((100 / np))
      case_ "$name" pass "$@"
      unset CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
      echo quit | nvidia-cuda-mps-control; sleep 2
    }
  fi
  # halo_device's host-initiated comparison is left out under MPS (timings mean nothing there).
  for np in 2 4; do
    mps_case $np device-halo_device-${np}pe-mps .gpu/bin/nvshmem-run -n $np .gpu/bin/halo_device --device-only
    mps_case $np device-ping_pong-${np}pe-mps .gpu/bin/nvshmem-run -n $np .gpu/bin/ping_pong
  done
  mps_case 2 device-perf-2pe-mps .gpu/bin/nvshmem-run -n 2 .gpu/bin/nvshmem-perf device "${ref[@]}" \
    --json "$out/device-perf-2pe.jsonl"
  mps_on || trap - EXIT
  grep -h "us/iteration\|us a lap\|: passed\|blocks of\|match the host" "$out"/device-*.log | sort | uniq | head -40
  for e in 1pe 2pe-mps; do
    [ -f "$out/device-perf-$e.log" ] && { echo "== nvshmem-perf device, $e"; sed 's/^\[PE 0\] //' "$out/device-perf-$e.log" | grep -E '^(#|test|put)'; }
  done
}

case "$mode" in
  stage) stage ;;
  stage-hydra) set -e; stage_hydra ;;
  stage-small) GPU_BINS=${GPU_BINS:-$SMALL_BINS} stage ;;
  stage-nvshmem) set -e; stage_nvshmem "$@" ;;
  stage-old) set -e; stage_old "$@" ;;
  run)
    nvidia-smi -L | tee "$out/gpus.txt"
    nvidia-smi topo -m >>"$out/gpus.txt" 2>&1
    mps_note="one PE per GPU"
    if mps_on; then
      mps_dir=${MPS_DIR:-/tmp/gpu-check-mps.$$}
      export CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log
      # However the run ends, the daemon (which outlives this shell) is quit.
      trap 'mps_stop' EXIT
      mps_start || exit 1
      mps_note="CUDA MPS, share $([ "${MPS_SHARE:-}" = none ] && echo "none (NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1)" || echo "100/PEs a GPU")"
    fi
    for suite in "${@:-foundation}"; do "$suite"; done
    if mps_on; then
      cp -r "$CUDA_MPS_LOG_DIRECTORY" "$out/mps-log" 2>/dev/null
    fi
    echo
    echo "==== summary ($(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs); PES $PES; $mps_note; $nvshmem_note) ===="
    printf '%s\n' "${summary[@]}"
    echo "cases failing: $failures"
    # The device tool brings back at most 8 files: the logs travel as one archive.
    printf '%s\n' "${summary[@]}" >"$final/summary.txt"
    tar -czf "$final/logs.tgz" -C "$final" logs && rm -rf "$out"
    if dryrun; then
      echo "DRY exported functions: $(declare -Fx | awk '{print $3}' | xargs); $(declare -fx | md5sum | cut -c1-12)"
    fi
    [ $failures -eq 0 ]
    ;;
  *) sed -n '2,/^# Another NVSHMEM/p' "$0" | sed '$d'; exit 2 ;;
esac
