//! What a kernel is instantiated for: the element type's CUDA spelling, the operator, and
//! which pairs exist.
use std::fmt;

use crate::{DataType, ReduceOp};

/// How a type is computed on in CUDA C (its name comes from the element list).
struct CType {
    acc: &'static str,
    load: &'static str,
    store: &'static str,
    header: Option<&'static str>,
}

fn ctype(t: DataType) -> CType {
    const FP16: Option<&str> = Some("cuda_fp16.h");
    const BF16: Option<&str> = Some("cuda_bf16.h");
    const FP8: Option<&str> = Some("cuda_fp8.h");
    // Computed in `acc` as they are. Integers compute in 64 bits (ops.cuh: sum, prod and
    // premul_sum wrap in unsigned 64 bits) and keep the low bits on the store, which equals
    // wrapping in the narrow type.
    let plain = |acc| CType {
        acc,
        load: "((NVR_ACC)(x))",
        store: "((NVR_T)(a))",
        header: None,
    };
    match t {
        DataType::F32 => plain("float"),
        DataType::F64 => plain("double"),
        DataType::F16 => CType {
            acc: "float",
            load: "__half2float(x)",
            store: "__float2half_rn(a)",
            header: FP16,
        },
        DataType::BF16 => CType {
            acc: "float",
            load: "__bfloat162float(x)",
            store: "__float2bfloat16_rn(a)",
            header: BF16,
        },
        DataType::F8E4M3 => CType {
            acc: "float",
            load: "((float)(x))",
            store: "__nv_fp8_e4m3(a)",
            header: FP8,
        },
        DataType::F8E5M2 => CType {
            acc: "float",
            load: "((float)(x))",
            store: "__nv_fp8_e5m2(a)",
            header: FP8,
        },
        DataType::I8 | DataType::I16 | DataType::I32 | DataType::I64 => plain("long long"),
        DataType::U8 | DataType::U16 | DataType::U32 | DataType::U64 => plain("unsigned long long"),
        // Any non-zero byte is true; results are always 0 or 1.
        DataType::Bool8 => CType {
            acc: "unsigned int",
            load: "((unsigned int)((x) != 0))",
            store: "((unsigned char)((a) != 0))",
            header: None,
        },
    }
}

/// The `#include`s and `#define`s that instantiate a kernel source for `t`.
pub(crate) fn prefix(t: DataType) -> String {
    prefix_with(t, ctype(t))
}

fn prefix_with(t: DataType, c: CType) -> String {
    let mut s = String::new();
    if let Some(h) = c.header {
        s += &format!("#include <{h}>\n");
    }
    s += &format!(
        "#define NVR_T {}\n#define NVR_ACC {}\n#define NVR_LOAD(x) {}\n#define NVR_STORE(a) {}\n#define NVR_IS_FLOAT {}\n#define NVR_IS_SIGNED {}\n",
        t.c_type(),
        c.acc,
        c.load,
        c.store,
        t.is_float() as u8,
        (t.kind() == crate::ElementKind::Signed) as u8
    );
    s
}

/// The prefix of a reduction by `op` of `t`: the type's, but for an integer avg, whose
/// accumulator is 128 bits (ops.cuh, `nvr_i128`), so that the sum of every member is exact
/// for 64-bit types too.
fn reduction_prefix(t: DataType, op: ReduceOp) -> String {
    let c = match (t.kind(), op) {
        (crate::ElementKind::Signed, ReduceOp::Avg) => CType {
            acc: "nvr_i128",
            load: "nvr_i128::of_signed((long long)(x))",
            store: "((NVR_T)(a).lo)",
            header: None,
        },
        (crate::ElementKind::Unsigned, ReduceOp::Avg) => CType {
            acc: "nvr_i128",
            load: "nvr_i128::of_unsigned((unsigned long long)(x))",
            store: "((NVR_T)(a).lo)",
            header: None,
        },
        _ => ctype(t),
    };
    prefix_with(t, c)
}

/// `kernels/ops.cuh` preceded by the `NVR_OP_*` values it compares `NVR_OP` with, one per
/// operator of the table (`op.rs`), numbered in its order.
fn ops_src() -> String {
    let mut s = String::new();
    for (i, op) in ReduceOp::EVERY.iter().enumerate() {
        s += &format!("#define {} {i}\n", op.define());
    }
    s + OPS_SRC
}

/// A source of the NVLink kernels (`kernels/PROTOCOL.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NvlinkSource {
    /// `ll.cu`: one-shot LL collectives for small messages, and the flag barrier.
    Ll,
    /// `direct.cu`: large-message collectives loading and storing peers' buffers directly.
    Direct,
    /// `lamport.cu`: one-shot reductions of 32-, 16- and 8-bit floats ([`lamport_serves`])
    /// and type-free copies through sentinel-filled receive buffers.
    Lamport,
}

/// Whether `lamport.cu` has code for `t`: floats whose -0.0 the sender can rewrite so that no
/// 32-bit word it sends is the sentinel `0x80000000` (f32, f16, bf16, fp8; not f64, whose
/// words may take any value).
pub(crate) fn lamport_serves(t: DataType) -> bool {
    t.is_float() && t.size() <= 4
}

impl NvlinkSource {
    /// Every source.
    #[cfg(test)]
    pub(crate) const ALL: [NvlinkSource; 3] = [
        NvlinkSource::Ll,
        NvlinkSource::Direct,
        NvlinkSource::Lamport,
    ];

    /// Whether the file has a kernel for `t` and `op` (reductions) or type-free kernels
    /// (`None`).
    #[cfg(test)]
    fn serves(self, r: Option<(DataType, ReduceOp)>) -> bool {
        match (self, r) {
            (NvlinkSource::Lamport, Some((t, op))) => lamport_serves(t) && op.applies_to(t.kind()),
            (_, None) => true,
            (_, Some((t, op))) => op.applies_to(t.kind()),
        }
    }

    fn source(self) -> &'static str {
        match self {
            NvlinkSource::Ll => LL_SRC,
            NvlinkSource::Direct => DIRECT_SRC,
            NvlinkSource::Lamport => LAMPORT_SRC,
        }
    }

    fn name(self) -> &'static str {
        match self {
            NvlinkSource::Ll => "ll",
            NvlinkSource::Direct => "direct",
            NvlinkSource::Lamport => "lamport",
        }
    }

    /// The kernel of `collective` (its name: `all_reduce`, `fcollect`...) in this file,
    /// `nvr_<file>_<collective>`, among its reductions or its type-free kernels.
    pub(crate) fn function(self, collective: &str, reducing: bool) -> Option<&'static str> {
        self.functions(reducing).iter().copied().find(|f| {
            f.strip_prefix("nvr_")
                .and_then(|f| f.strip_prefix(self.name()))
                .and_then(|f| f.strip_prefix('_'))
                == Some(collective)
        })
    }

    /// The functions of the file: its reductions (compiled with a type and operator), or its
    /// type-free kernels.
    fn functions(self, reducing: bool) -> &'static [&'static str] {
        match (self, reducing) {
            (NvlinkSource::Ll, true) => &[
                "nvr_ll_all_reduce",
                "nvr_ll_reduce",
                "nvr_ll_reduce_scatter",
            ],
            (NvlinkSource::Ll, false) => &[
                "nvr_ll_broadcast",
                "nvr_ll_broadcast_relay",
                "nvr_ll_fcollect",
                "nvr_ll_fcollect_peers",
                "nvr_ll_alltoall",
                "nvr_ll_alltoall_peers",
                "nvr_ll_gather",
                "nvr_ll_scatter",
                "nvr_barrier",
            ],
            (NvlinkSource::Direct, true) => &[
                "nvr_direct_all_reduce",
                "nvr_direct_reduce_scatter",
                "nvr_direct_reduce",
                "nvr_direct_reduce_pull",
                "nvr_direct_reduce_split",
            ],
            (NvlinkSource::Direct, false) => &[
                "nvr_direct_broadcast",
                "nvr_direct_fcollect",
                "nvr_direct_alltoall",
                "nvr_direct_gather",
                "nvr_direct_scatter",
            ],
            (NvlinkSource::Lamport, true) => &[
                "nvr_lamport_all_reduce",
                "nvr_lamport_reduce_scatter",
                "nvr_lamport_reduce",
            ],
            (NvlinkSource::Lamport, false) => &[
                "nvr_lamport_broadcast",
                "nvr_lamport_fcollect",
                "nvr_lamport_alltoall",
                "nvr_lamport_gather",
                "nvr_lamport_scatter",
            ],
        }
    }
}

/// One compiled kernel: what the cache is keyed by (with the context). Operators are kept
/// without their parameter (a scale is a launch argument, not part of the code).
#[derive(Debug, Clone, Copy)]
pub(crate) enum KernelKey {
    /// `nvr_reduce` of reduce.cu.
    Reduce(DataType, ReduceOp),
    /// `nvr_map` of reduce.cu multiplying by a scalar (premul_sum's first step).
    Scale(DataType),
    /// `nvr_map` of reduce.cu dividing by a scalar (avg's last step on NVSHMEM's path for
    /// `f32` and `f64`).
    Divide(DataType),
    /// `nvr_map` of reduce.cu widening into the form NVSHMEM sums (`NVR_MAP_WIDEN`).
    Widen(DataType),
    /// `nvr_map` of reduce.cu narrowing NVSHMEM's wide sum (`NVR_MAP_NARROW`).
    Narrow(DataType),
    /// `nvr_gather` and `nvr_scatter` of copy.cu, moving words of this many bytes.
    Copy(usize),
    /// An NVLink kernel source, for a type and operator (its reductions) or for none (its
    /// type-free kernels).
    Nvlink(NvlinkSource, Option<(DataType, ReduceOp)>),
    /// `nvr_signal_wait` of wait.cu: the stream's bounded wait for a signal word.
    Wait,
}

impl PartialEq for KernelKey {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for KernelKey {}

impl std::hash::Hash for KernelKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.identity().hash(state)
    }
}

const REDUCE_SRC: &str = include_str!("reduce.cu");
const COPY_SRC: &str = include_str!("copy.cu");
const OPS_SRC: &str = include_str!("ops.cuh");
const COMMON_SRC: &str = include_str!("common.cuh");
const LL_SRC: &str = include_str!("ll.cu");
const DIRECT_SRC: &str = include_str!("direct.cu");
const LAMPORT_SRC: &str = include_str!("lamport.cu");
const WAIT_SRC: &str = include_str!("wait.cu");

impl KernelKey {
    /// What makes two keys the same code: the variant, the type, the operator without its
    /// parameter.
    fn identity(
        &self,
    ) -> (
        u8,
        Option<DataType>,
        Option<std::mem::Discriminant<ReduceOp>>,
        usize,
    ) {
        match *self {
            Self::Reduce(t, op) => (0, Some(t), Some(std::mem::discriminant(&op)), 0),
            Self::Scale(t) => (1, Some(t), None, 0),
            Self::Divide(t) => (2, Some(t), None, 0),
            Self::Copy(w) => (3, None, None, w),
            Self::Widen(t) => (4, Some(t), None, 0),
            Self::Narrow(t) => (5, Some(t), None, 0),
            Self::Wait => (6, None, None, 0),
            // Last: one number per NVLink source, so a new source takes the next number and
            // never another variant's.
            Self::Nvlink(f, r) => (
                7 + f as u8,
                r.map(|(t, _)| t),
                r.map(|(_, op)| std::mem::discriminant(&op)),
                0,
            ),
        }
    }

    /// Every kernel there is, for the compile check.
    #[cfg(test)]
    pub(crate) fn all() -> Vec<KernelKey> {
        let mut v = Vec::new();
        for &t in DataType::ALL {
            for &op in ReduceOp::EVERY {
                if op.applies_to(t.kind()) {
                    v.push(Self::Reduce(t, op));
                }
            }
            if t != DataType::Bool8 {
                v.extend([
                    Self::Scale(t),
                    Self::Divide(t),
                    Self::Widen(t),
                    Self::Narrow(t),
                ]);
            }
        }
        // Word sizes the copy kernels are instantiated for.
        v.extend([1, 2, 4, 8, 16].map(Self::Copy));
        v.push(Self::Wait);
        for file in NvlinkSource::ALL {
            if file.serves(None) {
                v.push(Self::Nvlink(file, None));
            }
            for &t in DataType::ALL {
                for &op in ReduceOp::EVERY {
                    if file.serves(Some((t, op))) {
                        v.push(Self::Nvlink(file, Some((t, op))));
                    }
                }
            }
        }
        v
    }

    /// A name for logs and errors, e.g. `reduce_f8e4m3_sum`.
    pub(crate) fn name(self) -> String {
        match self {
            Self::Reduce(t, op) => format!("reduce_{t}_{}", op.name()),
            Self::Scale(t) => format!("map_{t}_mul"),
            Self::Divide(t) => format!("map_{t}_div"),
            Self::Widen(t) => format!("map_{t}_widen"),
            Self::Narrow(t) => format!("map_{t}_narrow"),
            Self::Copy(w) => format!("copy_w{w}"),
            Self::Nvlink(f, None) => f.name().to_string(),
            Self::Nvlink(f, Some((t, op))) => format!("{}_{t}_{}", f.name(), op.name()),
            Self::Wait => "wait".to_string(),
        }
    }

    /// The functions the module defines.
    pub(crate) fn functions(self) -> &'static [&'static str] {
        match self {
            Self::Reduce(..) => &["nvr_reduce"],
            Self::Scale(_) | Self::Divide(_) | Self::Widen(_) | Self::Narrow(_) => &["nvr_map"],
            Self::Copy(_) => &["nvr_gather", "nvr_scatter"],
            Self::Nvlink(f, r) => f.functions(r.is_some()),
            Self::Wait => &["nvr_signal_wait"],
        }
    }

    /// The complete CUDA C source of this instantiation.
    pub(crate) fn source(self) -> String {
        match self {
            Self::Reduce(t, op) => format!("{}{}{REDUCE_SRC}", typed(t, op), ops_src()),
            Self::Scale(t) => format!(
                "{}#define NVR_MAP NVR_MAP_MUL\n{}{REDUCE_SRC}",
                prefix(t),
                ops_src()
            ),
            Self::Divide(t) => format!(
                "{}#define NVR_MAP NVR_MAP_DIV\n{}{REDUCE_SRC}",
                prefix(t),
                ops_src()
            ),
            Self::Widen(t) => format!(
                "{}#define NVR_MAP NVR_MAP_WIDEN\n{}{REDUCE_SRC}",
                prefix(t),
                ops_src()
            ),
            Self::Narrow(t) => format!(
                "{}#define NVR_MAP NVR_MAP_NARROW\n{}{REDUCE_SRC}",
                prefix(t),
                ops_src()
            ),
            Self::Nvlink(f, r) => {
                let head = r.map(|(t, op)| typed(t, op)).unwrap_or_default();
                format!("{head}{}{COMMON_SRC}{}", ops_src(), f.source())
            }
            Self::Copy(w) => {
                let word = match w {
                    1 => "unsigned char",
                    2 => "unsigned short",
                    4 => "unsigned int",
                    8 => "unsigned long long",
                    _ => "nvr_w16",
                };
                // A macro expands where it is used, after copy.cu defines nvr_w16.
                format!("#define NVR_W {word}\n{COPY_SRC}")
            }
            // common.cuh for the status record and the memory operations; nothing typed.
            Self::Wait => format!("{COMMON_SRC}{WAIT_SRC}"),
        }
    }

    /// Whether the source needs the CUDA headers (fp16/bf16/fp8).
    pub(crate) fn needs_headers(self) -> bool {
        match self {
            Self::Reduce(t, _)
            | Self::Scale(t)
            | Self::Divide(t)
            | Self::Widen(t)
            | Self::Narrow(t) => ctype(t).header.is_some(),
            Self::Nvlink(_, Some((t, _))) => ctype(t).header.is_some(),
            Self::Copy(_) | Self::Nvlink(_, None) | Self::Wait => false,
        }
    }
}

/// The prefix of a reduction by `op` on `t`.
fn typed(t: DataType, op: ReduceOp) -> String {
    format!(
        "{}#define NVR_OP {}\n",
        reduction_prefix(t, op),
        op.define()
    )
}

impl fmt::Display for KernelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body of the function whose definition starts at `at` in `src`: from its first `{`
    /// to the matching `}`.
    fn body_at(src: &str, at: usize) -> &str {
        let open = at + src[at..].find('{').expect("a body");
        let close = crate::kernels::closing_brace(src, open).expect("an unclosed body");
        &src[open..=close]
    }

    /// Every NVLink kernel is launched with programmatic stream serialization (`kernels::fire`),
    /// so it may start while the kernel before it on the stream still runs: each must reach
    /// `griddepcontrol.wait` (`nvr_launch_begin`) itself or through the start helper that calls
    /// it (`nvr_launch_checked`, `nvr_ll_start`, `nvr_lam_start`, and the routines several
    /// kernels share: `nvr_lamc_run`, `nvr_ll_exchange[_peers]`) before it reads or writes
    /// memory (PROTOCOL.md, "Launch"). A kernel without it would read its inputs, and its
    /// channel, before the kernel that writes them has finished. (Checked in the source: what
    /// comes before the call is reviewed, not checked.)
    #[test]
    fn every_nvlink_kernel_waits_for_the_kernel_before_it() {
        // Each helper must call the wait or a helper listed before it.
        let helpers = [
            (
                "nvr_launch_checked(",
                COMMON_SRC,
                "bool nvr_launch_checked(",
            ),
            ("nvr_ll_start(", LL_SRC, "bool nvr_ll_start("),
            ("nvr_lam_start(", LAMPORT_SRC, "bool nvr_lam_start("),
            ("nvr_lamc_run(", LAMPORT_SRC, "void nvr_lamc_run("),
            ("nvr_ll_exchange(", LL_SRC, "void nvr_ll_exchange("),
            (
                "nvr_ll_exchange_peers(",
                LL_SRC,
                "void nvr_ll_exchange_peers(",
            ),
        ];
        let waits = |body: &str, before: usize| {
            body.contains("nvr_launch_begin();")
                || helpers[..before]
                    .iter()
                    .any(|(call, _, _)| body.contains(call))
        };
        for (i, (_, src, def)) in helpers.iter().enumerate() {
            let at = src.find(def).unwrap_or_else(|| panic!("no {def}"));
            assert!(waits(body_at(src, at), i), "{def} does not wait");
        }
        let mut kernels = 0;
        for source in NvlinkSource::ALL {
            let src = source.source();
            for (at, _) in src.match_indices("extern \"C\" __global__") {
                let body = body_at(src, at);
                let head = &src[at..at + src[at..].find('{').unwrap_or(0)];
                let name = head.split_whitespace().collect::<Vec<_>>().join(" ");
                assert!(
                    waits(body, helpers.len()),
                    "{}.cu: a kernel that does not wait for the one before it: {name}",
                    source.name()
                );
                kernels += 1;
            }
        }
        assert!(kernels >= 25, "found only {kernels} NVLink kernels");
    }

    /// The kernels compute every pair the table lets through ([`ReduceOp::applies_to`]): each
    /// operator's define is numbered once and has code in ops.cuh, which no longer spells the
    /// numbers itself.
    #[test]
    fn every_operator_of_the_table_has_kernel_code() {
        let head = ops_src();
        for (i, op) in ReduceOp::EVERY.iter().enumerate() {
            let d = op.define();
            assert!(head.contains(&format!("#define {d} {i}\n")), "{op}");
            assert!(
                OPS_SRC.contains(&format!("NVR_OP == {d}")),
                "{op}: no code in ops.cuh"
            );
            assert!(
                !OPS_SRC.contains(&format!("#define {d} ")),
                "{op}: ops.cuh numbers it"
            );
        }
    }

    #[test]
    fn every_source_names_its_type_and_op() {
        let all = KernelKey::all();
        // Per type its operators, four maps (not bool), five copies, and per NVLink source its
        // type-free kernels and its reductions.
        let ops = || ReduceOp::EVERY.iter().copied();
        let reductions: usize = DataType::ALL
            .iter()
            .map(|&t| ops().filter(|&op| op.applies_to(t.kind())).count())
            .sum();
        // 12 numbers: sum prod min max avg premul (+ and or xor for the 8 integers); fp8:
        // the same six; bool: and or min max.
        assert_eq!(reductions, 12 * 6 + 8 * 3 + 2 * 6 + 4);
        // lamport.cu: the six float operators of f32, f16, bf16 and both fp8 kinds, and its
        // type-free copies.
        let lamport = 5 * 6 + 1;
        assert_eq!(
            all.len(),
            reductions + 4 * 14 + 5 + 2 * (1 + reductions) + 1 + lamport
        );
        assert!(all.contains(&KernelKey::Nvlink(NvlinkSource::Lamport, None)));
        assert!(KernelKey::Nvlink(NvlinkSource::Lamport, None)
            .source()
            .contains("nvr_lamport_broadcast"));
        assert!(!all.contains(&KernelKey::Nvlink(
            NvlinkSource::Lamport,
            Some((DataType::F64, ReduceOp::Sum))
        )));
        let l = KernelKey::Nvlink(NvlinkSource::Lamport, Some((DataType::BF16, ReduceOp::Sum)));
        assert_ne!(
            l,
            KernelKey::Nvlink(NvlinkSource::Ll, Some((DataType::BF16, ReduceOp::Sum)))
        );
        assert_ne!(
            l,
            KernelKey::Nvlink(NvlinkSource::Direct, Some((DataType::BF16, ReduceOp::Sum)))
        );
        assert!(l.source().contains("nvr_lamport_all_reduce"));
        assert!(all.contains(&KernelKey::Wait));
        // Every key is its own code: two keys with one identity would share a loaded module,
        // and a launch would run the other key's function (a signal wait once ran an LL
        // broadcast so).
        let distinct: std::collections::HashSet<_> = all.iter().map(|k| k.identity()).collect();
        assert_eq!(distinct.len(), all.len());
        assert!(KernelKey::Wait.source().contains("nvr_signal_wait"));
        assert!(all.contains(&KernelKey::Nvlink(NvlinkSource::Ll, None)));
        let s = KernelKey::Reduce(DataType::F8E4M3, ReduceOp::Sum).source();
        assert!(s.starts_with("#include <cuda_fp8.h>\n#define NVR_T __nv_fp8_e4m3\n"));
        assert!(s.contains("#define NVR_OP NVR_OP_SUM\n"));
        assert!(KernelKey::Copy(16)
            .source()
            .starts_with("#define NVR_W nvr_w16\n"));
        assert!(!KernelKey::Copy(4).needs_headers());
    }

    /// Integer avg accumulates in 128 bits (exact for 64-bit types at their limits); every
    /// other integer reduction in 64 bits, signed for signed types (min and max compare as
    /// the type does; ops.cuh wraps sum, prod and premul_sum in unsigned arithmetic).
    #[test]
    fn integer_avg_sums_in_128_bits_and_signedness_is_said() {
        for t in [DataType::I8, DataType::I64, DataType::U32, DataType::U64] {
            let avg = KernelKey::Reduce(t, ReduceOp::Avg).source();
            assert!(avg.contains("#define NVR_ACC nvr_i128\n"), "{t}");
            let sum = KernelKey::Reduce(t, ReduceOp::Sum).source();
            assert!(
                sum.contains("#define NVR_ACC long long\n")
                    || sum.contains("#define NVR_ACC unsigned long long\n"),
                "{t}"
            );
            let signed = t.kind() == crate::ElementKind::Signed;
            let flag = format!("#define NVR_IS_SIGNED {}\n", signed as u8);
            assert!(sum.contains(&flag) && avg.contains(&flag), "{t}");
        }
        let f = KernelKey::Reduce(DataType::BF16, ReduceOp::Avg).source();
        assert!(f.contains("#define NVR_ACC float\n") && f.contains("#define NVR_IS_SIGNED 0\n"));
        let w = KernelKey::Widen(DataType::I16).source();
        assert!(
            w.contains("#define NVR_MAP NVR_MAP_WIDEN\n")
                && w.contains("#define NVR_ACC long long\n")
        );
        assert_ne!(
            KernelKey::Widen(DataType::I16),
            KernelKey::Narrow(DataType::I16)
        );
    }

    /// The accumulator a premul_sum scale is checked against (`op::float_accumulator`) is
    /// the one the reductions and the scaling kernels are compiled with, and the one NVSHMEM's
    /// path scales in (`kernels::wide`: 16- and 8-bit floats widened into f32, f32 and f64
    /// scaled in their own type).
    #[test]
    fn the_float_accumulator_is_the_compiled_one() {
        for &t in DataType::ALL {
            let Some(acc) = crate::op::float_accumulator(t) else {
                assert!(!t.is_float(), "{t}");
                continue;
            };
            let c = match acc {
                DataType::F32 => "float",
                DataType::F64 => "double",
                other => panic!("{t}: {other}"),
            };
            let define = format!("#define NVR_ACC {c}\n");
            for key in [
                KernelKey::Reduce(t, ReduceOp::PreMulSum(2.0)),
                KernelKey::Scale(t),
                KernelKey::Widen(t),
            ] {
                assert!(key.source().contains(&define), "{t} {key:?}");
            }
            assert_eq!(acc, super::super::wide(t).0, "{t}");
        }
    }

    #[test]
    fn scales_do_not_make_new_kernels() {
        let a = KernelKey::Reduce(DataType::F32, ReduceOp::PreMulSum(0.5));
        let b = KernelKey::Reduce(DataType::F32, ReduceOp::PreMulSum(2.0));
        assert_eq!(a, b);
        assert_ne!(a, KernelKey::Reduce(DataType::F32, ReduceOp::Sum));
        assert_ne!(
            KernelKey::Scale(DataType::F32),
            KernelKey::Divide(DataType::F32)
        );
    }
}
