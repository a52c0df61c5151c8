//! Reduction operators.
use std::{fmt, str::FromStr};

use crate::{DataType, ElementKind, Error, Result};

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
/// number (NCCL takes the scalar in the data's type). Integer `Sum`, `Prod` and `PreMulSum`
/// wrap modulo 2^bits. The meaning is the same at every size and by every algorithm (the
/// table in [`crate::collective`], "Reductions"). [`ReduceOp::supports`] says whether a
/// reduction of a given type by an operator can run at all.
///
/// Parsed from and printed as `sum`, `prod`, `min`, `max`, `and`, `or`, `xor`, `avg` and
/// `premul_sum(S)`:
///
/// ```
/// use nvshmem::ReduceOp;
/// let op: ReduceOp = "premul_sum(0.5)".parse()?;
/// assert_eq!(op, ReduceOp::PreMulSum(0.5));
/// assert_eq!(op.to_string(), "premul_sum(0.5)");
/// assert_eq!("max".parse::<ReduceOp>()?, ReduceOp::Max);
/// # Ok::<(), nvshmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integer types).
    And,
    /// Bitwise or (integer types).
    Or,
    /// Bitwise exclusive or (integer types).
    Xor,
    /// The mean over the PEs of the team (integers: exact, truncated toward zero).
    Avg,
    /// Each input multiplied by the scalar, then summed.
    PreMulSum(f64),
}

impl ReduceOp {
    /// Every operator without a parameter, for tests and tours.
    ///
    /// ```
    /// assert_eq!(nvshmem::ReduceOp::BASIC.len(), 8);
    /// ```
    pub const BASIC: [ReduceOp; 8] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::And,
        ReduceOp::Or,
        ReduceOp::Xor,
        ReduceOp::Avg,
    ];

    /// The operator's name without its parameter (`"premul_sum"` for `PreMulSum`).
    ///
    /// ```
    /// assert_eq!(nvshmem::ReduceOp::Xor.name(), "xor");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
            ReduceOp::Xor => "xor",
            ReduceOp::Avg => "avg",
            ReduceOp::PreMulSum(_) => "premul_sum",
        }
    }

    /// Whether the operator is defined for elements of this kind: bitwise operators are not
    /// defined for floating point, and truth values have only and, or, min and max.
    ///
    /// ```
    /// use nvshmem::{ElementKind, ReduceOp};
    /// assert!(ReduceOp::And.applies_to(ElementKind::Unsigned));
    /// assert!(!ReduceOp::And.applies_to(ElementKind::Float));
    /// assert!(ReduceOp::Max.applies_to(ElementKind::Bool));
    /// assert!(!ReduceOp::Sum.applies_to(ElementKind::Bool));
    /// ```
    pub fn applies_to(self, kind: ElementKind) -> bool {
        match kind {
            ElementKind::Signed | ElementKind::Unsigned => true,
            ElementKind::Float => !matches!(self, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor),
            ElementKind::Bool => matches!(
                self,
                ReduceOp::And | ReduceOp::Or | ReduceOp::Min | ReduceOp::Max
            ),
        }
    }

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
            check_scale(call, dtype.kind(), dtype.name(), s)?;
        }
        Ok(())
    }
}

/// The scale of `premul_sum` on elements of `kind`: finite; for integers a whole number that
/// converts exactly to the 64-bit integer the kernels compute in (non-negative for unsigned
/// types), since integer data is scaled by an integer (NCCL takes the scalar in the data's
/// type).
pub(crate) fn check_scale(call: &'static str, kind: ElementKind, name: &str, s: f64) -> Result<()> {
    if !s.is_finite() {
        return Err(Error::arg(
            call,
            "op",
            format_args!("premul_sum's scale must be finite, not {s}"),
        ));
    }
    let (lo, hi, range) = match kind {
        ElementKind::Signed => (-(2f64.powi(63)), 2f64.powi(63), "-2^63..2^63"),
        ElementKind::Unsigned => (0.0, 2f64.powi(64), "0..2^64"),
        ElementKind::Float | ElementKind::Bool => return Ok(()),
    };
    if s.fract() != 0.0 || s < lo || s >= hi {
        return Err(Error::arg(
            call,
            "op",
            format_args!(
                "premul_sum's scale {s} must be a whole number in {range} for {name} (integer \
                 data is scaled by an integer)"
            ),
        ));
    }
    Ok(())
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
        Ok(match t.as_str() {
            "sum" => ReduceOp::Sum,
            "prod" | "product" => ReduceOp::Prod,
            "min" => ReduceOp::Min,
            "max" => ReduceOp::Max,
            "and" | "band" => ReduceOp::And,
            "or" | "bor" => ReduceOp::Or,
            "xor" | "bxor" => ReduceOp::Xor,
            "avg" | "mean" => ReduceOp::Avg,
            _ => {
                let arg = t
                    .strip_prefix("premul_sum(")
                    .or_else(|| t.strip_prefix("premulsum("))
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| {
                        bad("expected sum, prod, min, max, and, or, xor, avg or premul_sum(S)")
                    })?;
                let scale: f64 = arg
                    .trim()
                    .parse()
                    .map_err(|_| bad("the scale of premul_sum(S) must be a number"))?;
                if !scale.is_finite() {
                    return Err(bad("the scale of premul_sum(S) must be finite"));
                }
                ReduceOp::PreMulSum(scale)
            }
        })
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
}
