#!/usr/bin/env bash
# Installs what building and testing nvshmem-rs needs on Debian or Ubuntu, skipping whatever is
# already there (so it also runs with everything present and no network). Source it
# (`. scripts/setup.sh`) to get NVSHMEM_HOME and the NVRTC path exported.
#
#   system packages: build-essential pkg-config libopenmpi-dev openmpi-bin libclang-dev python3-pip
#   Rust:            rustup's stable toolchain, if cargo is missing
#   Debian package:  libibverbs-dev (rdma-core's infiniband/mlx5dv.h, which NVSHMEM 3.4.5's
#                    device headers include: needed to compile kernels that call NVSHMEM)
#   Python wheels:   nvidia-nvshmem-cu13 (NVSHMEM's host library, loaded at run time, and its
#                    device library and headers) and nvidia-cuda-nvrtc and nvidia-cuda-runtime
#                    (NVRTC and the CUDA headers, to compile-check the crate's CUDA kernels
#                    without a GPU), nvidia-nvjitlink (to link device-initiated kernels with
#                    NVSHMEM's device library), nvidia-cuda-cccl and nvidia-cuda-crt (the
#                    cuda/std and crt headers NVSHMEM's device headers include), into .deps/py
#   (NVRTC, nvJitLink and the headers are pinned to 13.0: newer NVRTC may emit PTX that driver
#   580 refuses, and nvJitLink must not be older than the NVRTC whose code it links)
#   NVSHMEM 3.8.0:   from the `nvidia-nvshmem-cu13` 3.8.0 wheel only its device headers
#                    (include/) and device library (lib/libnvshmem_device.a), into
#                    .deps/nvshmem-3.8.0 (the wheel, 182 MB, is downloaded to a temporary
#                    folder and removed): scripts/check-kernels.sh links every device-initiated
#                    kernel against it too. NVSHMEM_RS_DEVICE_HOMES lists the NVSHMEM folders
#                    (3.4.5's, 3.8.0's) the checks link against.
#   nvcc 13.0:       the nvidia-cuda-nvcc and nvidia-nvvm wheels' bin/, include/ and nvvm/, into
#                    .deps/nvcc (about 100 MB downloaded to a temporary folder and removed), so
#                    that scripts/check-probes.sh compiles the probes of tools/probes (which
#                    are otherwise built only on the GPU machine) without a GPU or a driver.
#                    NVSHMEM_RS_NVCC names it. With it nvdisasm (nvidia-cuda-nvdisasm, 13.2:
#                    no 13.0 wheel), NVSHMEM_RS_NVDISASM, for scripts/check-sass.sh.
NVSHMEM_WHEEL_VERSION=${NVSHMEM_WHEEL_VERSION:-3.4.5}
NVSHMEM_NEWER_WHEEL_VERSION=${NVSHMEM_NEWER_WHEEL_VERSION:-3.8.0}
NVRTC_WHEEL_VERSION=${NVRTC_WHEEL_VERSION:-13.0.88}
CUDA_RUNTIME_WHEEL_VERSION=${CUDA_RUNTIME_WHEEL_VERSION:-13.0.96}
NVJITLINK_WHEEL_VERSION=${NVJITLINK_WHEEL_VERSION:-13.0.88}
CUDA_CCCL_WHEEL_VERSION=${CUDA_CCCL_WHEEL_VERSION:-13.0.85}
CUDA_CRT_WHEEL_VERSION=${CUDA_CRT_WHEEL_VERSION:-13.0.88}
NVCC_WHEEL_VERSION=${NVCC_WHEEL_VERSION:-13.0.88}
# nvdisasm has no 13.0 wheel on PyPI; the oldest 13.x reads sm_90 cubins of 13.0 alike.
NVDISASM_WHEEL_VERSION=${NVDISASM_WHEEL_VERSION:-13.2.51}
_nvshmem_rs_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

_nvshmem_rs_setup() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  local pkgs=(build-essential pkg-config libopenmpi-dev openmpi-bin libclang-dev libibverbs-dev python3-pip curl ca-certificates)
  local missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null ||
      { echo "setup: could not install ${missing[*]}" >&2; return 1; }
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] || {
      echo "setup: installing Rust with rustup" >&2
      curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy >/dev/null || return 1
    }
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  local py="$_nvshmem_rs_root/.deps/py"
  # Both wheels unpack under nvidia/, and pip --target will not merge into an existing
  # nvidia/ folder, so whatever is missing is installed in one call.
  local want=()
  [ -e "$py/nvidia/nvshmem/lib/libnvshmem_host.so.3" ] || want+=("nvidia-nvshmem-cu13==$NVSHMEM_WHEEL_VERSION")
  [ -e "$py/nvidia/cu13/lib/libnvrtc.so.13" ] || want+=("nvidia-cuda-nvrtc==$NVRTC_WHEEL_VERSION")
  [ -e "$py/nvidia/cu13/include/cuda_fp8.h" ] || want+=("nvidia-cuda-runtime==$CUDA_RUNTIME_WHEEL_VERSION")
  [ -e "$py/nvidia/cu13/lib/libnvJitLink.so.13" ] || want+=("nvidia-nvjitlink==$NVJITLINK_WHEEL_VERSION")
  [ -e "$py/nvidia/cu13/include/cccl/cuda/std/type_traits" ] || want+=("nvidia-cuda-cccl==$CUDA_CCCL_WHEEL_VERSION")
  [ -e "$py/nvidia/cu13/include/crt/host_defines.h" ] || want+=("nvidia-cuda-crt==$CUDA_CRT_WHEEL_VERSION")
  if [ ${#want[@]} -gt 0 ]; then
    echo "setup: installing ${want[*]} into .deps/py" >&2
    rm -rf "$py"
    want=("nvidia-nvshmem-cu13==$NVSHMEM_WHEEL_VERSION" "nvidia-cuda-nvrtc==$NVRTC_WHEEL_VERSION"
      "nvidia-cuda-runtime==$CUDA_RUNTIME_WHEEL_VERSION" "nvidia-nvjitlink==$NVJITLINK_WHEEL_VERSION"
      "nvidia-cuda-cccl==$CUDA_CCCL_WHEEL_VERSION" "nvidia-cuda-crt==$CUDA_CRT_WHEEL_VERSION")
    python3 -m pip install -q --no-deps --target "$py" "${want[@]}" 2>/dev/null ||
      python3 -m pip install -q --no-deps --break-system-packages --target "$py" "${want[@]}" ||
      { echo "setup: could not install ${want[*]}" >&2; return 1; }
  fi
  export NVSHMEM_HOME="$py/nvidia/nvshmem"
  local newer="$_nvshmem_rs_root/.deps/nvshmem-$NVSHMEM_NEWER_WHEEL_VERSION"
  if [ ! -e "$newer/lib/libnvshmem_device.a" ] || [ ! -e "$newer/include/nvshmem.h" ]; then
    echo "setup: installing NVSHMEM $NVSHMEM_NEWER_WHEEL_VERSION's device headers and library into .deps" >&2
    _nvshmem_rs_device_only "$NVSHMEM_NEWER_WHEEL_VERSION" "$newer" ||
      { echo "setup: could not install nvidia-nvshmem-cu13==$NVSHMEM_NEWER_WHEEL_VERSION's device files" >&2; return 1; }
  fi
  export NVSHMEM_RS_DEVICE_HOMES="$NVSHMEM_HOME $newer"
  local nvcc="$_nvshmem_rs_root/.deps/nvcc"
  if [ ! -x "$nvcc/bin/nvcc" ] || [ ! -x "$nvcc/nvvm/bin/cicc" ] || [ ! -x "$nvcc/bin/nvdisasm" ]; then
    echo "setup: installing nvcc $NVCC_WHEEL_VERSION and nvdisasm $NVDISASM_WHEEL_VERSION into .deps/nvcc" >&2
    _nvshmem_rs_nvcc "$NVCC_WHEEL_VERSION" "$NVDISASM_WHEEL_VERSION" "$nvcc" ||
      { echo "setup: could not install nvcc $NVCC_WHEEL_VERSION" >&2; return 1; }
  fi
  export NVSHMEM_RS_NVCC="$nvcc/bin/nvcc" NVSHMEM_RS_NVDISASM="$nvcc/bin/nvdisasm"
  # Sourced again by a script that another one runs: add the path once.
  case ":${LD_LIBRARY_PATH:-}:" in
  *":$py/nvidia/cu13/lib:"*) ;;
  *) export LD_LIBRARY_PATH="$py/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
  esac
  export NVSHMEM_RS_CUDA_INCLUDE="$py/nvidia/cu13/include"
}
# _nvshmem_rs_device_only VERSION DIR: the include/ folder and lib/libnvshmem_device.a of the
# nvidia-nvshmem-cu13 wheel VERSION, into DIR (what linking a device-initiated kernel needs).
_nvshmem_rs_device_only() {
  local version=$1 dir=$2 tmp
  tmp=$(mktemp -d) || return 1
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-nvshmem-cu13==$version" &&
    python3 - "$tmp" "$dir.part" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1:3]
shutil.rmtree(dest, ignore_errors=True)
prefix = "nvidia/nvshmem/"
with zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0]) as z:
    for name in z.namelist():
        rel = name[len(prefix):] if name.startswith(prefix) else None
        if rel and not name.endswith("/") and (rel.startswith("include/") or rel == "lib/libnvshmem_device.a"):
            path = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with z.open(name) as src, open(path, "wb") as out:
                shutil.copyfileobj(src, out)
PY
  local rc=$?
  rm -rf "$tmp"
  [ $rc -eq 0 ] && rm -rf "$dir" && mv "$dir.part" "$dir"
}
# _nvshmem_rs_nvcc VERSION DISASM DIR: nvcc, its tools and headers (nvidia-cuda-nvcc) and cicc
# (nvidia-nvvm), VERSION each, and nvdisasm (nvidia-cuda-nvdisasm, DISASM), into DIR as a CUDA
# toolkit lays them out (bin/, include/, nvvm/), with their files' modes (zip extraction drops
# them, and nvcc runs the others).
_nvshmem_rs_nvcc() {
  local version=$1 disasm=$2 dir=$3 tmp
  tmp=$(mktemp -d) || return 1
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" \
    "nvidia-cuda-nvcc==$version" "nvidia-nvvm==$version" "nvidia-cuda-nvdisasm==$disasm" &&
    python3 - "$tmp" "$dir.part" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1:3]
shutil.rmtree(dest, ignore_errors=True)
prefix = "nvidia/cu13/"
for wheel in glob.glob(os.path.join(tmp, "*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            rel = info.filename[len(prefix):] if info.filename.startswith(prefix) else None
            if not rel or info.filename.endswith("/") or rel.split("/")[0] not in ("bin", "include", "nvvm"):
                continue
            path = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with z.open(info) as src, open(path, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(path, mode or 0o644)
PY
  local rc=$?
  rm -rf "$tmp"
  [ $rc -eq 0 ] && rm -rf "$dir" && mv "$dir.part" "$dir"
}
_nvshmem_rs_setup
