//! What a kernel is instantiated for: element types and operators, and which pairs exist.
use std::fmt;

/// The element type a kernel computes on. Covers every [`crate::Element`] plus the types of
/// [`crate::element_ext`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum KernelType {
    F32,
    F64,
    F16,
    BF16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F8E4M3,
    F8E5M2,
    Bool,
}

/// How a type is spelled and computed on in CUDA C.
struct CType {
    c: &'static str,
    acc: &'static str,
    load: &'static str,
    store: &'static str,
    header: Option<&'static str>,
}

impl KernelType {
    /// Every type, for exhaustive checks.
    pub(crate) const ALL: [KernelType; 15] = [
        Self::F32,
        Self::F64,
        Self::F16,
        Self::BF16,
        Self::I8,
        Self::I16,
        Self::I32,
        Self::I64,
        Self::U8,
        Self::U16,
        Self::U32,
        Self::U64,
        Self::F8E4M3,
        Self::F8E5M2,
        Self::Bool,
    ];

    /// The type for an element's Rust name ([`crate::Element::NAME`], or `f8e4m3`, `f8e5m2`,
    /// `bool8` for the types of [`crate::element_ext`]).
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The Rust name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::F16 => "f16",
            Self::BF16 => "bf16",
            Self::I8 => "i8",
            Self::I16 => "i16",
            Self::I32 => "i32",
            Self::I64 => "i64",
            Self::U8 => "u8",
            Self::U16 => "u16",
            Self::U32 => "u32",
            Self::U64 => "u64",
            Self::F8E4M3 => "f8e4m3",
            Self::F8E5M2 => "f8e5m2",
            Self::Bool => "bool8",
        }
    }

    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            Self::F64 | Self::I64 | Self::U64 => 8,
            Self::F32 | Self::I32 | Self::U32 => 4,
            Self::F16 | Self::BF16 | Self::I16 | Self::U16 => 2,
            Self::I8 | Self::U8 | Self::F8E4M3 | Self::F8E5M2 | Self::Bool => 1,
        }
    }

    pub(crate) fn is_float(self) -> bool {
        matches!(
            self,
            Self::F32 | Self::F64 | Self::F16 | Self::BF16 | Self::F8E4M3 | Self::F8E5M2
        )
    }

    pub(crate) fn is_integer(self) -> bool {
        !self.is_float() && self != Self::Bool
    }

    fn ctype(self) -> CType {
        const FP16: Option<&str> = Some("cuda_fp16.h");
        const BF16: Option<&str> = Some("cuda_bf16.h");
        const FP8: Option<&str> = Some("cuda_fp8.h");
        let int = |c, acc| CType {
            c,
            acc,
            load: "(x)",
            store: "(a)",
            header: None,
        };
        match self {
            Self::F32 => CType {
                c: "float",
                acc: "float",
                load: "(x)",
                store: "(a)",
                header: None,
            },
            Self::F64 => CType {
                c: "double",
                acc: "double",
                load: "(x)",
                store: "(a)",
                header: None,
            },
            Self::F16 => CType {
                c: "__half",
                acc: "float",
                load: "__half2float(x)",
                store: "__float2half_rn(a)",
                header: FP16,
            },
            Self::BF16 => CType {
                c: "__nv_bfloat16",
                acc: "float",
                load: "__bfloat162float(x)",
                store: "__float2bfloat16_rn(a)",
                header: BF16,
            },
            Self::F8E4M3 => CType {
                c: "__nv_fp8_e4m3",
                acc: "float",
                load: "((float)(x))",
                store: "__nv_fp8_e4m3(a)",
                header: FP8,
            },
            Self::F8E5M2 => CType {
                c: "__nv_fp8_e5m2",
                acc: "float",
                load: "((float)(x))",
                store: "__nv_fp8_e5m2(a)",
                header: FP8,
            },
            // Integers compute in 64 bits and wrap on the store (two's complement), which
            // equals wrapping in the narrow type for sum and keeps avg/premulsum exact.
            Self::I8 => int("signed char", "long long"),
            Self::I16 => int("short", "long long"),
            Self::I32 => int("int", "long long"),
            Self::I64 => int("long long", "long long"),
            Self::U8 => int("unsigned char", "unsigned long long"),
            Self::U16 => int("unsigned short", "unsigned long long"),
            Self::U32 => int("unsigned int", "unsigned long long"),
            Self::U64 => int("unsigned long long", "unsigned long long"),
            // Any non-zero byte is true; results are always 0 or 1.
            Self::Bool => CType {
                c: "unsigned char",
                acc: "unsigned int",
                load: "((unsigned int)((x) != 0))",
                store: "((unsigned char)((a) != 0))",
                header: None,
            },
        }
    }

    /// The `#include`s and `#define`s that instantiate a kernel source for this type.
    pub(crate) fn prefix(self) -> String {
        let t = self.ctype();
        let mut s = String::new();
        if let Some(h) = t.header {
            s += &format!("#include <{h}>\n");
        }
        s += &format!(
            "#define NVR_T {}\n#define NVR_ACC {}\n#define NVR_LOAD(x) {}\n#define NVR_STORE(a) {}\n#define NVR_IS_FLOAT {}\n",
            t.c,
            t.acc,
            t.load,
            t.store,
            self.is_float() as u8
        );
        s
    }
}

impl fmt::Display for KernelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An element-wise reduction over several buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ReduceOp {
    Sum,
    Min,
    Max,
    /// Logical (bool) or bitwise (integers) and.
    And,
    /// Logical (bool) or bitwise (integers) or.
    Or,
    /// Sum divided by the number of buffers (integers: truncated toward zero).
    Avg,
    /// Each input multiplied by `scale`, then summed (NCCL's PreMulSum). Integers take `scale`
    /// as an integer.
    PreMulSum,
}

impl ReduceOp {
    pub(crate) const ALL: [ReduceOp; 7] = [
        Self::Sum,
        Self::Min,
        Self::Max,
        Self::And,
        Self::Or,
        Self::Avg,
        Self::PreMulSum,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Min => "min",
            Self::Max => "max",
            Self::And => "and",
            Self::Or => "or",
            Self::Avg => "avg",
            Self::PreMulSum => "premulsum",
        }
    }

    fn define(self) -> &'static str {
        match self {
            Self::Sum => "NVR_OP_SUM",
            Self::Min => "NVR_OP_MIN",
            Self::Max => "NVR_OP_MAX",
            Self::And => "NVR_OP_AND",
            Self::Or => "NVR_OP_OR",
            Self::Avg => "NVR_OP_AVG",
            Self::PreMulSum => "NVR_OP_PREMULSUM",
        }
    }

    /// Whether the kernels implement this operator for `t`: and/or for integers and bool;
    /// sum/min/max for all but bool, which has min/max (= and/or) only; avg and premulsum for
    /// numbers.
    pub(crate) fn supports(self, t: KernelType) -> bool {
        match self {
            Self::And | Self::Or => !t.is_float(),
            Self::Min | Self::Max => true,
            Self::Sum | Self::Avg | Self::PreMulSum => t != KernelType::Bool,
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An element-wise map of one buffer by a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum MapOp {
    /// `x * s` (pre-processing for premulsum over NVSHMEM's sum).
    Mul,
    /// `x / s` (post-processing for avg over NVSHMEM's sum; integers truncate toward zero).
    Div,
}

impl MapOp {
    pub(crate) const ALL: [MapOp; 2] = [Self::Mul, Self::Div];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Mul => "mul",
            Self::Div => "div",
        }
    }

    pub(crate) fn supports(self, t: KernelType) -> bool {
        t != KernelType::Bool
    }
}

/// One compiled kernel: what the cache is keyed by (with the context).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum KernelKey {
    /// `nvr_reduce` of reduce.cu.
    Reduce(KernelType, ReduceOp),
    /// `nvr_map` of reduce.cu.
    Map(KernelType, MapOp),
    /// `nvr_gather` and `nvr_scatter` of copy.cu, moving words of this many bytes.
    Copy(usize),
}

pub(crate) const REDUCE_SRC: &str = include_str!("reduce.cu");
pub(crate) const COPY_SRC: &str = include_str!("copy.cu");

/// Word sizes the copy kernels are instantiated for.
pub(crate) const COPY_WORDS: [usize; 5] = [1, 2, 4, 8, 16];

impl KernelKey {
    /// Every kernel there is, for the compile check.
    pub(crate) fn all() -> Vec<KernelKey> {
        let mut v = Vec::new();
        for t in KernelType::ALL {
            for op in ReduceOp::ALL {
                if op.supports(t) {
                    v.push(Self::Reduce(t, op));
                }
            }
            for op in MapOp::ALL {
                if op.supports(t) {
                    v.push(Self::Map(t, op));
                }
            }
        }
        v.extend(COPY_WORDS.map(Self::Copy));
        v
    }

    /// A name for logs and errors, e.g. `reduce_f8e4m3_sum`.
    pub(crate) fn name(self) -> String {
        match self {
            Self::Reduce(t, op) => format!("reduce_{t}_{op}"),
            Self::Map(t, op) => format!("map_{t}_{}", op.name()),
            Self::Copy(w) => format!("copy_w{w}"),
        }
    }

    /// The functions the module defines.
    pub(crate) fn functions(self) -> &'static [&'static str] {
        match self {
            Self::Reduce(..) => &["nvr_reduce"],
            Self::Map(..) => &["nvr_map"],
            Self::Copy(_) => &["nvr_gather", "nvr_scatter"],
        }
    }

    /// The complete CUDA C source of this instantiation.
    pub(crate) fn source(self) -> String {
        match self {
            Self::Reduce(t, op) => {
                format!("{}#define NVR_OP {}\n{REDUCE_SRC}", t.prefix(), op.define())
            }
            Self::Map(t, op) => {
                let m = match op {
                    MapOp::Mul => "NVR_MAP_MUL",
                    MapOp::Div => "NVR_MAP_DIV",
                };
                format!("{}#define NVR_MAP {m}\n{REDUCE_SRC}", t.prefix())
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
        }
    }

    /// Whether the source needs the CUDA headers (fp16/bf16/fp8).
    pub(crate) fn needs_headers(self) -> bool {
        match self {
            Self::Reduce(t, _) | Self::Map(t, _) => t.ctype().header.is_some(),
            Self::Copy(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in KernelType::ALL {
            assert_eq!(KernelType::from_name(t.name()), Some(t));
        }
        macro_rules! known {
            ($t:ty) => {
                assert!(
                    KernelType::from_name(<$t as crate::Element>::NAME).is_some(),
                    "{}",
                    <$t as crate::Element>::NAME
                );
            };
        }
        crate::for_each_element!(known);
        crate::for_each_extra_element!(known);
    }

    #[test]
    fn operator_support_follows_the_issue() {
        use KernelType::*;
        use ReduceOp::*;
        for op in [And, Or, Min, Max] {
            assert!(op.supports(Bool));
        }
        for op in [Sum, Avg, PreMulSum] {
            assert!(!op.supports(Bool));
        }
        for t in [F8E4M3, F8E5M2] {
            for op in [Sum, Min, Max, Avg, PreMulSum] {
                assert!(op.supports(t));
            }
            assert!(!And.supports(t) && !Or.supports(t));
        }
        assert!(And.supports(U32) && !And.supports(F32));
        assert!(!MapOp::Mul.supports(Bool) && MapOp::Div.supports(I8));
    }

    #[test]
    fn every_source_names_its_type_and_op() {
        let all = KernelKey::all();
        // 15 types x their operators + maps + copies.
        assert_eq!(all.len(), 123);
        let s = KernelKey::Reduce(KernelType::F8E4M3, ReduceOp::Sum).source();
        assert!(s.starts_with("#include <cuda_fp8.h>\n#define NVR_T __nv_fp8_e4m3\n"));
        assert!(s.contains("#define NVR_OP NVR_OP_SUM\n"));
        assert!(KernelKey::Copy(16)
            .source()
            .starts_with("#define NVR_W nvr_w16\n"));
        assert!(!KernelKey::Copy(4).needs_headers());
    }
}
