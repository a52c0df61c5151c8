//! Reduction operators.
use std::{fmt, str::FromStr};

use crate::{DataType, ElementKind, Error, Result};

/// The one table of the operators: each row gives the variant (and its parameter), its name,
/// the other names it is parsed from, the kernels' `NVR_OP_*` define (`kernels/ops.cuh`), the
/// element kinds it applies to, NVSHMEM's function-name part for it with the types NVSHMEM has
/// it for (`numbers`: its 12 core types; `integers`: its core integer types; empty: NVSHMEM has
/// no such reduction), and its rustdoc. Calls `$cb! { [$($arg)*] rows }`: [`ReduceOp`] and its
/// methods below, and `ffi.rs`'s dispatch to NVSHMEM's typed functions, are made from it.
macro_rules! reduce_op_table {
    ($cb:ident $($arg:tt)*) => {
        $cb! { [$($arg)*]
            /// Sum.
            Sum = "sum" [] define SUM applies [Signed Unsigned Float] nvshmem [sum(numbers)];
            /// Product.
            Prod = "prod" ["product"] define PROD applies [Signed Unsigned Float] nvshmem [prod(numbers)];
            /// Minimum (of truth values: and).
            Min = "min" [] define MIN applies [Signed Unsigned Float Bool] nvshmem [min(numbers)];
            /// Maximum (of truth values: or).
            Max = "max" [] define MAX applies [Signed Unsigned Float Bool] nvshmem [max(numbers)];
            /// Bitwise and (integer types); logical and of truth values.
            And = "and" ["band"] define AND applies [Signed Unsigned Bool] nvshmem [and(integers)];
            /// Bitwise or (integer types); logical or of truth values.
            Or = "or" ["bor"] define OR applies [Signed Unsigned Bool] nvshmem [or(integers)];
            /// Bitwise exclusive or (integer types).
            Xor = "xor" ["bxor"] define XOR applies [Signed Unsigned] nvshmem [xor(integers)];
            /// The mean over the PEs of the team (integers: exact, truncated toward zero).
            Avg = "avg" ["mean"] define AVG applies [Signed Unsigned Float] nvshmem [];
            /// Each input multiplied by the scalar, then summed.
            PreMulSum(f64) = "premul_sum" ["premulsum"] define PREMULSUM applies [Signed Unsigned Float] nvshmem [];
        }
    };
}
pub(crate) use reduce_op_table;

/// Defines [`ReduceOp`] and the methods that read the table.
macro_rules! define_reduce_ops {
    ([$(#[$enum_attr:meta])*] $($(#[$attr:meta])* $v:ident $(($field:ty))? = $name:literal [$($alias:literal),*]
        define $def:ident applies [$($kind:ident)*] nvshmem [$($nvop:ident($class:ident))?];)*) => {
        $(#[$enum_attr])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        #[non_exhaustive]
        pub enum ReduceOp {
            $($(#[$attr])* $v $(($field))?,)*
        }

        impl ReduceOp {
            /// Every operator of the table, in its order, a parameter's as 1.
            pub(crate) const EVERY: &'static [ReduceOp] = &[$(define_reduce_ops!(@example $v $($field)?)),*];

            /// The operator's name without its parameter (`"premul_sum"` for `PreMulSum`).
            ///
            /// ```
            /// assert_eq!(nvshmem::ReduceOp::Xor.name(), "xor");
            /// ```
            pub const fn name(self) -> &'static str {
                match self { $(ReduceOp::$v { .. } => $name,)* }
            }

            /// Whether the operator is defined for elements of this kind: bitwise operators are
            /// not defined for floating point, and truth values have only and, or, min and max.
            ///
            /// ```
            /// use nvshmem::{ElementKind, ReduceOp};
            /// assert!(ReduceOp::And.applies_to(ElementKind::Unsigned));
            /// assert!(!ReduceOp::And.applies_to(ElementKind::Float));
            /// assert!(ReduceOp::Max.applies_to(ElementKind::Bool));
            /// assert!(!ReduceOp::Sum.applies_to(ElementKind::Bool));
            /// ```
            pub const fn applies_to(self, kind: ElementKind) -> bool {
                match self { $(ReduceOp::$v { .. } => matches!(kind, $(ElementKind::$kind)|*),)* }
            }

            /// NVSHMEM's name for the operator in its typed functions
            /// (`nvshmemx_<type>_<op>_reduce_on_stream`), or `None` where NVSHMEM has no such
            /// reduction (this crate builds `avg` and `premul_sum` from `sum`).
            ///
            /// ```
            /// use nvshmem::ReduceOp;
            /// assert_eq!(ReduceOp::Prod.nvshmem_name(), Some("prod"));
            /// assert_eq!(ReduceOp::Avg.nvshmem_name(), None);
            /// ```
            pub const fn nvshmem_name(self) -> Option<&'static str> {
                match self { $(ReduceOp::$v { .. } => define_reduce_ops!(@some $($nvop)?),)* }
            }

            /// Whether NVSHMEM itself has a typed reduction of `dtype` by this operator: its
            /// own (core) types by `sum`, `prod`, `min` and `max`, its integers by `and`, `or`
            /// and `xor`. (The crate computes the other pairs it
            /// [supports](ReduceOp::supports_type) from these or in its own kernels.)
            ///
            /// ```
            /// use nvshmem::{DataType, ReduceOp};
            /// assert!(ReduceOp::Max.nvshmem_has(DataType::BF16));
            /// assert!(!ReduceOp::Xor.nvshmem_has(DataType::F32));
            /// assert!(!ReduceOp::Sum.nvshmem_has(DataType::F8E4M3));
            /// assert!(!ReduceOp::Avg.nvshmem_has(DataType::I32));
            /// ```
            pub const fn nvshmem_has(self, dtype: DataType) -> bool {
                dtype.is_core()
                    && match self { $(ReduceOp::$v { .. } => define_reduce_ops!(@class dtype $($class)?),)* }
            }

            /// Whether the operator is bitwise (`and`, `or`, `xor`): those not defined for
            /// floating point. NCCL has none of them, so NVSHMEM computes them in its own
            /// kernels on every team.
            pub(crate) const fn is_bitwise(self) -> bool {
                !self.applies_to(ElementKind::Float)
            }

            /// The kernels' `NVR_OP_*` define of the operator (`kernels/ops.cuh`).
            pub(crate) const fn define(self) -> &'static str {
                match self { $(ReduceOp::$v { .. } => concat!("NVR_OP_", stringify!($def)),)* }
            }

            /// The operator named `t` (lower case, trimmed), by its name or another name, with
            /// `scale` for one that takes a parameter (`None`: no parameter given).
            fn by_name(t: &str, scale: Option<f64>) -> Option<ReduceOp> {
                $(if t == $name $(|| t == $alias)* {
                    return define_reduce_ops!(@make $v scale $($field)?);
                })*
                None
            }

            /// What [`ReduceOp::from_str`] accepts, for its error.
            fn spellings() -> String {
                let names = [$(concat!($name, define_reduce_ops!(@param $($field)?))),*];
                let (last, rest) = names.split_last().expect("the table has rows");
                format!("{} or {last}", rest.join(", "))
            }
        }
    };
    (@example $v:ident) => { ReduceOp::$v };
    (@example $v:ident $field:ty) => { ReduceOp::$v(1 as $field) };
    (@some) => { None };
    (@some $n:ident) => { Some(stringify!($n)) };
    (@class $d:ident) => { false };
    (@class $d:ident numbers) => { true };
    (@class $d:ident integers) => { $d.is_integer() };
    (@param) => { "" };
    (@param $field:ty) => { "(S)" };
    (@make $v:ident $s:ident) => { match $s { None => Some(ReduceOp::$v), Some(_) => None } };
    (@make $v:ident $s:ident $field:ty) => { $s.map(|s| ReduceOp::$v(s as $field)) };
}

reduce_op_table! { define_reduce_ops
    /// How a reduction combines the PEs' elements.
    ///
    /// Which operator applies to which element kind ([`ReduceOp::applies_to`]):
    ///
    /// | kind | operators |
    /// |---|---|
    /// | integers (`i8`..`u64`) | all: `And`, `Or`, `Xor` bitwise |
    /// | floats (`f16`..`f64`, fp8) | `Sum`, `Prod`, `Min`, `Max`, `Avg`, `PreMulSum` |
    /// | [`Bool8`](crate::element::Bool8) | `And`, `Or` (logical), `Min` (= and), `Max` (= or) |
    ///
    /// `Avg` is the mean of the PEs' values: for integers the exact mean truncated toward zero,
    /// computed without overflow (`i64::MAX - 1` on every PE gives `i64::MAX - 1`); for floats the
    /// sum in the accumulator (`f32` for 16- and 8-bit floats, the type for `f32` and `f64`)
    /// divided by the team size, rounded once. `PreMulSum(s)` multiplies every input by `s`
    /// before summing (NCCL's `ncclRedOpCreatePreMulSum`); for integer types `s` must be a whole
    /// number (NCCL takes the scalar in the data's type), and for the floats that accumulate
    /// in `f32` one that `f32` holds (0, or a magnitude from 1e-45 to `f32::MAX`). Integer
    /// `Sum`, `Prod` and `PreMulSum` wrap modulo 2^bits. The meaning is the same at every size
    /// and by every algorithm (the table in [`crate::collective`], "Reductions").
    /// [`ReduceOp::supports`] says whether a reduction of a given type by an operator can run
    /// at all.
    ///
    /// Parsed from and printed as `sum`, `prod`, `min`, `max`, `and`, `or`, `xor`, `avg` and
    /// `premul_sum(S)` (and `product`, `band`, `bor`, `bxor`, `mean`, `premulsum(S)`):
    ///
    /// ```
    /// use nvshmem::ReduceOp;
    /// let op: ReduceOp = "premul_sum(0.5)".parse()?;
    /// assert_eq!(op, ReduceOp::PreMulSum(0.5));
    /// assert_eq!(op.to_string(), "premul_sum(0.5)");
    /// assert_eq!("max".parse::<ReduceOp>()?, ReduceOp::Max);
    /// # Ok::<(), nvshmem::Error>(())
    /// ```
}

impl ReduceOp {
    /// Every operator without a parameter, in the table's order, for tests and tours.
    ///
    /// ```
    /// assert_eq!(nvshmem::ReduceOp::BASIC.len(), 8);
    /// ```
    pub const BASIC: [ReduceOp; 8] = {
        let mut out = [ReduceOp::Sum; 8];
        let (mut i, mut j) = (0, 0);
        while i < Self::EVERY.len() {
            if !matches!(Self::EVERY[i], ReduceOp::PreMulSum(_)) {
                out[j] = Self::EVERY[i];
                j += 1;
            }
            i += 1;
        }
        // A new operator without a parameter lengthens this array (the build fails until so).
        assert!(j == out.len());
        out
    };

    /// Refuses an operator the element type does not define, and a scale that is not finite
    /// or (for integer types) not a whole number the kernels can use.
    pub(crate) fn check_for(self, call: &'static str, dtype: DataType) -> Result<()> {
        if !self.applies_to(dtype.kind()) {
            let why = match dtype.kind() {
                ElementKind::Bool => "truth values have and, or, min and max",
                _ => "bitwise operators need an integer type",
            };
            return Err(Error::arg(
                call,
                "op",
                format_args!("{} is not defined for {dtype} ({why})", self.name()),
            ));
        }
        if let ReduceOp::PreMulSum(s) = self {
            check_scale(call, dtype, s)?;
        }
        Ok(())
    }
}

/// The float type the kernels compute `dtype` in (`NVR_ACC`, `kernels/types.rs`), and cast
/// premul_sum's scale to: f32 for every float type but f64, which computes in f64. `None` for
/// integers and bool.
pub(crate) fn float_accumulator(dtype: DataType) -> Option<DataType> {
    match dtype {
        DataType::F64 => Some(DataType::F64),
        _ if dtype.is_float() => Some(DataType::F32),
        _ => None,
    }
}

/// The scale of `premul_sum` on elements of `dtype`: finite; for floats also finite, and not
/// 0 unless it is 0, once cast to the type the kernels compute in ([`float_accumulator`]);
/// for integers a whole number that converts exactly to the 64-bit integer the kernels compute
/// in (non-negative for unsigned types), since integer data is scaled by an integer (NCCL
/// takes the scalar in the data's type).
pub(crate) fn check_scale(call: &'static str, dtype: DataType, s: f64) -> Result<()> {
    if !s.is_finite() {
        return Err(Error::arg(
            call,
            "op",
            format_args!("premul_sum's scale must be finite, not {s}"),
        ));
    }
    let (lo, hi, range) = match dtype.kind() {
        ElementKind::Signed => (-(2f64.powi(63)), 2f64.powi(63), "-2^63..2^63"),
        ElementKind::Unsigned => (0.0, 2f64.powi(64), "0..2^64"),
        ElementKind::Float => return check_float_scale(call, dtype, s),
        ElementKind::Bool => return Ok(()),
    };
    if s.fract() != 0.0 || s < lo || s >= hi {
        return Err(Error::arg(
            call,
            "op",
            format_args!(
                "premul_sum's scale {s} must be a whole number in {range} for {} (integer \
                 data is scaled by an integer)",
                dtype.name()
            ),
        ));
    }
    Ok(())
}

/// Whether the kernels hold premul_sum's scale for `dtype` in f32 ([`float_accumulator`]):
/// every float type but f64.
pub(crate) fn scale_in_f32(dtype: DataType) -> bool {
    float_accumulator(dtype) == Some(DataType::F32)
}

/// A float type's scale, as its kernels hold it: a scale that f32 rounds to infinity (or to
/// zero) would scale every input to infinity (or zero) where f32 is the accumulator.
fn check_float_scale(call: &'static str, dtype: DataType, s: f64) -> Result<()> {
    if !scale_in_f32(dtype) {
        return Ok(());
    }
    let held = s as f32;
    if held.is_finite() && (held != 0.0 || s == 0.0) {
        return Ok(());
    }
    Err(Error::arg(
        call,
        "op",
        format_args!(
            "premul_sum's scale {s:e} becomes {held} in f32, the type {} is scaled in: it \
             must be 0 or of a magnitude from {:e} to {:e}",
            dtype.name(),
            f32::from_bits(1),
            f32::MAX
        ),
    ))
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReduceOp::PreMulSum(s) => write!(f, "premul_sum({s})"),
            op => f.write_str(op.name()),
        }
    }
}

impl FromStr for ReduceOp {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        let bad = |why: &str| Error::arg("ReduceOp::from_str", "op", format!("{s:?}: {why}"));
        // `name(S)`: an operator with its parameter.
        let (head, scale) = match t.strip_suffix(')').and_then(|r| r.split_once('(')) {
            Some((head, arg)) => {
                let scale: f64 = arg
                    .trim()
                    .parse()
                    .map_err(|_| bad(&format!("the scale of {head}(S) must be a number")))?;
                if !scale.is_finite() {
                    return Err(bad(&format!("the scale of {head}(S) must be finite")));
                }
                (head.trim(), Some(scale))
            }
            None => (t.as_str(), None),
        };
        ReduceOp::by_name(head, scale)
            .ok_or_else(|| bad(&format!("expected {}", ReduceOp::spellings())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for op in ReduceOp::BASIC
            .into_iter()
            .chain([ReduceOp::PreMulSum(2.5), ReduceOp::PreMulSum(-1e-3)])
        {
            let back: ReduceOp = op.to_string().parse().unwrap();
            assert_eq!(back, op);
        }
        assert_eq!(" SUM ".parse::<ReduceOp>().unwrap(), ReduceOp::Sum);
        for (alias, op) in [
            ("product", ReduceOp::Prod),
            ("band", ReduceOp::And),
            ("bor", ReduceOp::Or),
            ("bxor", ReduceOp::Xor),
            ("mean", ReduceOp::Avg),
        ] {
            assert_eq!(alias.parse::<ReduceOp>().unwrap(), op);
        }
        // A parameter only where the operator takes one.
        assert!("sum(2)".parse::<ReduceOp>().is_err());
        assert_eq!(ReduceOp::EVERY.len(), ReduceOp::BASIC.len() + 1);
        assert_eq!(
            "premulsum( 4 )".parse::<ReduceOp>().unwrap(),
            ReduceOp::PreMulSum(4.0)
        );
    }

    #[test]
    fn bad_names_say_what_is_accepted() {
        let e = "median".parse::<ReduceOp>().unwrap_err().to_string();
        assert!(
            e.contains("\"median\"") && e.contains("premul_sum(S)"),
            "{e}"
        );
        let e = "premul_sum(x)".parse::<ReduceOp>().unwrap_err().to_string();
        assert!(e.contains("must be a number"), "{e}");
        let e = "premul_sum(inf)"
            .parse::<ReduceOp>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("finite"), "{e}");
        assert!("premul_sum".parse::<ReduceOp>().is_err());
    }

    #[test]
    fn bitwise_operators_need_integers() {
        assert!(ReduceOp::Xor
            .check_for("t", <u32 as crate::Element>::DTYPE)
            .is_ok());
        assert!(ReduceOp::Min
            .check_for("t", <f32 as crate::Element>::DTYPE)
            .is_ok());
        let e = ReduceOp::And
            .check_for("all_reduce", <f32 as crate::Element>::DTYPE)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "all_reduce: invalid op: and is not defined for f32 (bitwise operators need an integer type)"
        );
        assert!(ReduceOp::PreMulSum(f64::NAN)
            .check_for("t", <f32 as crate::Element>::DTYPE)
            .is_err());
    }

    #[test]
    fn operators_per_kind() {
        use ElementKind::*;
        let all = ReduceOp::BASIC
            .into_iter()
            .chain([ReduceOp::PreMulSum(2.0)])
            .collect::<Vec<_>>();
        for op in &all {
            assert!(op.applies_to(Signed) && op.applies_to(Unsigned), "{op}");
            let bitwise = matches!(op, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor);
            assert_eq!(op.applies_to(Float), !bitwise, "{op}");
            let logical = matches!(
                op,
                ReduceOp::And | ReduceOp::Or | ReduceOp::Min | ReduceOp::Max
            );
            assert_eq!(op.applies_to(Bool), logical, "{op}");
        }
        let e = ReduceOp::Sum
            .check_for(
                "all_reduce",
                <crate::element::Bool8 as crate::Element>::DTYPE,
            )
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "all_reduce: invalid op: sum is not defined for bool8 (truth values have and, or, min and max)"
        );
    }

    #[test]
    fn integer_scales_must_be_whole() {
        let e = ReduceOp::PreMulSum(0.5)
            .check_for("all_reduce", <i32 as crate::Element>::DTYPE)
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { arg: "op", .. }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "all_reduce: invalid op: premul_sum's scale 0.5 must be a whole number in -2^63..2^63 \
             for i32 (integer data is scaled by an integer)"
        );
        assert!(ReduceOp::PreMulSum(-3.0)
            .check_for("t", <i8 as crate::Element>::DTYPE)
            .is_ok());
        let e = ReduceOp::PreMulSum(-3.0)
            .check_for("t", <u16 as crate::Element>::DTYPE)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("-3 must be a whole number in 0..2^64 for u16"),
            "{e}"
        );
        assert!(ReduceOp::PreMulSum(2f64.powi(64))
            .check_for("t", <u64 as crate::Element>::DTYPE)
            .is_err());
        assert!(ReduceOp::PreMulSum(2f64.powi(63))
            .check_for("t", <i64 as crate::Element>::DTYPE)
            .is_err());
        assert!(ReduceOp::PreMulSum(1e18)
            .check_for("t", <i64 as crate::Element>::DTYPE)
            .is_ok());
        assert!(ReduceOp::PreMulSum(0.1)
            .check_for("t", <half::f16 as crate::Element>::DTYPE)
            .is_ok());
        assert!(ReduceOp::PreMulSum(0.1)
            .check_for("t", <crate::element::F8E5M2 as crate::Element>::DTYPE)
            .is_ok());
        assert!(ReduceOp::PreMulSum(f64::INFINITY)
            .check_for("t", <f64 as crate::Element>::DTYPE)
            .is_err());
    }

    /// The kernels cast the scale to the type they compute in, f32 for every float type but
    /// f64: PreMulSum(1e39) of f32 was accepted and scaled every input to infinity (and the
    /// calls' fingerprints, which carry the scale as f32, could not tell 1e39 from 1e40).
    #[test]
    fn float_scales_must_hold_in_the_accumulator() {
        let check = |s: f64, dtype| ReduceOp::PreMulSum(s).check_for("all_reduce", dtype);
        let e = check(1e39, DataType::F32).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { arg: "op", .. }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "all_reduce: invalid op: premul_sum's scale 1e39 becomes inf in f32, the type f32 \
             is scaled in: it must be 0 or of a magnitude from 1e-45 to 3.4028235e38"
        );
        let f32_acc = [
            DataType::F32,
            DataType::F16,
            DataType::BF16,
            DataType::F8E4M3,
            DataType::F8E5M2,
        ];
        for dtype in f32_acc {
            for s in [1e39, -1e39, f64::MAX, 1e-50, -1e-46] {
                let e = check(s, dtype).unwrap_err().to_string();
                assert!(e.contains(&format!("the type {dtype} is scaled in")), "{e}");
            }
            for s in [
                f32::MAX as f64,
                -(f32::MAX as f64),
                1e-45,
                0.0,
                -0.0,
                0.1,
                3e38,
            ] {
                assert!(check(s, dtype).is_ok(), "{s} {dtype}");
            }
        }
        // f64 scales in f64.
        for s in [1e39, f64::MAX, 1e-300, f64::MIN_POSITIVE] {
            assert!(check(s, DataType::F64).is_ok(), "{s}");
        }
        assert!(!ReduceOp::PreMulSum(1e39).supports::<f32>());
        assert!(ReduceOp::PreMulSum(1e39).supports::<f64>());
    }
}
