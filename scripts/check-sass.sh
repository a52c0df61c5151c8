#!/usr/bin/env bash
# The machine code of the small calls' kernels, counted: every kernel of ll.cu and lamport.cu
# (their copies and the barrier type-free; their reductions with the f32 sum prefix) is compiled
# with nvcc for sm_90 and disassembled (nvdisasm), and its instructions are counted against
# crates/nvshmem/src/kernels/sass_sizes.txt. A kernel more than 2 % larger than recorded fails:
# a larger small-call kernel is a slower one, and the PTX does not show it. On 2026-11-28 a
# change to the launch check (nvr_launch_checked) left every LL kernel's PTX within 16 bytes
# but its SASS 10-13 % larger (a memory descriptor reloaded before every access), and every
# small call 0.1-0.2 us slower on 2 x H200 (docs/performance.md, "In short").
# UPDATE_SASS_SIZES=1 rewrites the file (after measuring the change on a GPU; review its diff).
# nvcc and nvdisasm come from scripts/setup.sh. About half a minute on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/setup.sh || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
k=crates/nvshmem/src/kernels
# The f32 sum prefix of the crate's reductions (types.rs writes the same defines).
grep '^#define' tools/probes/f32_sum.cuh >"$tmp/f32.h"
: >"$tmp/none.h"
status=0
for m in ll:none ll:f32 lamport:none lamport:f32; do
  src=${m%%:*} pre=${m##*:}
  cat "$tmp/$pre.h" "$k/ops.cuh" "$k/common.cuh" "$k/$src.cu" >"$tmp/$src-$pre.cu"
  if ! "$NVSHMEM_RS_NVCC" -cubin -arch=sm_90 -std=c++17 -I"$NVSHMEM_RS_CUDA_INCLUDE" \
    -o "$tmp/$src-$pre.cubin" "$tmp/$src-$pre.cu" 2>"$tmp/log"; then
    echo "check-sass: $src.cu ($pre) does not compile:" >&2
    cat "$tmp/log" >&2
    status=1
    continue
  fi
  "$NVSHMEM_RS_NVDISASM" -c "$tmp/$src-$pre.cubin" >"$tmp/$src-$pre.sass" || status=1
done
[ $status -eq 0 ] || exit 1
python3 - "$tmp" "$k/sass_sizes.txt" "${UPDATE_SASS_SIZES:-0}" <<'PY'
import os, re, sys
tmp, table, update = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
now = {}
for f in sorted(os.listdir(tmp)):
    if not f.endswith(".sass"):
        continue
    module = f[: -len(".sass")]
    text = open(os.path.join(tmp, f)).read()
    for part in re.split(r"\n\s*\.section\s+\.text\.", text)[1:]:
        name = part.split(",")[0]
        now[(module, name)] = len(re.findall(r"/\*[0-9a-f]{4,}\*/\s+[^;]*;", part))
head = ("# SASS instructions of each small-call kernel, sm_90, nvcc 13.0 (scripts/check-sass.sh;\n"
        "# UPDATE_SASS_SIZES=1 rewrites it). module (source-prefix) kernel instructions\n")
if update:
    with open(table, "w") as out:
        out.write(head)
        for (module, name), n in sorted(now.items()):
            out.write(f"{module} {name} {n}\n")
    print(f"check-sass: {len(now)} kernels recorded in {table}")
    sys.exit(0)
recorded = {}
for line in open(table):
    if line.strip() and not line.startswith("#"):
        module, name, n = line.split()
        recorded[(module, name)] = int(n)
bad = 0
for key, n in sorted(now.items()):
    was = recorded.get(key)
    if was is None:
        print(f"check-sass: {key[0]} {key[1]}: {n} instructions, not recorded "
              f"(UPDATE_SASS_SIZES=1 records it)", file=sys.stderr)
        bad += 1
    elif n > was * 1.02:
        print(f"check-sass: {key[0]} {key[1]}: {n} instructions, {was} recorded: a larger "
              f"small-call kernel is a slower one; measure it on a GPU before recording it",
              file=sys.stderr)
        bad += 1
    elif n < was * 0.98:
        print(f"check-sass: {key[0]} {key[1]}: {n} instructions, {was} recorded (smaller: "
              f"record it)")
for key in sorted(set(recorded) - set(now)):
    print(f"check-sass: {key[0]} {key[1]} is recorded but was not built", file=sys.stderr)
    bad += 1
print(f"check-sass: {len(now)} kernels, {bad} over their recorded size or unknown")
sys.exit(1 if bad else 0)
PY
