//! Reduction operators.
use std::{fmt, str::FromStr};

use crate::{Element, ElementKind, Error, Result};

/// How a reduction combines the PEs' elements.
///
/// `Sum`, `Prod`, `Min` and `Max` apply to every element type; `And`, `Or` and `Xor` to
/// integer types (bitwise). `Avg` is the sum divided by the team size, and
/// `PreMulSum(s)` multiplies every input by `s` before summing (NCCL's `ncclRedOpCreatePreMulSum`).
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
    /// Sum divided by the number of PEs in the team.
    Avg,
    /// Each input multiplied by the scalar, then summed.
    PreMulSum(f64),
}

/// The operators NVSHMEM computes itself; each has one typed function per element type.
/// (Public in a private module: it appears in the sealed [`NvshmemTyped`](super::table::NvshmemTyped).)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvOp {
    Sum,
    Prod,
    Min,
    Max,
    And,
    Or,
    Xor,
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

    /// Whether the operator is defined for elements of this kind (bitwise operators are not
    /// defined for floating point).
    ///
    /// ```
    /// use nvshmem::{ElementKind, ReduceOp};
    /// assert!(ReduceOp::And.applies_to(ElementKind::Unsigned));
    /// assert!(!ReduceOp::And.applies_to(ElementKind::Float));
    /// ```
    pub fn applies_to(self, kind: ElementKind) -> bool {
        !matches!(
            (self, kind),
            (
                ReduceOp::And | ReduceOp::Or | ReduceOp::Xor,
                ElementKind::Float
            )
        )
    }

    /// NVSHMEM's own operator, when it has one.
    pub(crate) fn nvshmem(self) -> Option<NvOp> {
        Some(match self {
            ReduceOp::Sum => NvOp::Sum,
            ReduceOp::Prod => NvOp::Prod,
            ReduceOp::Min => NvOp::Min,
            ReduceOp::Max => NvOp::Max,
            ReduceOp::And => NvOp::And,
            ReduceOp::Or => NvOp::Or,
            ReduceOp::Xor => NvOp::Xor,
            ReduceOp::Avg | ReduceOp::PreMulSum(_) => return None,
        })
    }

    /// Refuses an operator the element type does not define, and a scale that is not finite.
    pub(crate) fn check_for<T: Element>(self, call: &'static str) -> Result<()> {
        if !self.applies_to(T::KIND) {
            return Err(Error::arg(
                call,
                "op",
                format_args!(
                    "{} is not defined for {} (bitwise operators need an integer type)",
                    self.name(),
                    T::NAME
                ),
            ));
        }
        if let ReduceOp::PreMulSum(s) = self {
            if !s.is_finite() {
                return Err(Error::arg(
                    call,
                    "op",
                    format_args!("premul_sum's scale must be finite, not {s}"),
                ));
            }
        }
        Ok(())
    }
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
        assert!(ReduceOp::Xor.check_for::<u32>("t").is_ok());
        assert!(ReduceOp::Min.check_for::<f32>("t").is_ok());
        let e = ReduceOp::And.check_for::<f32>("all_reduce").unwrap_err();
        assert_eq!(
            e.to_string(),
            "all_reduce: invalid op: and is not defined for f32 (bitwise operators need an integer type)"
        );
        assert!(ReduceOp::PreMulSum(f64::NAN).check_for::<f32>("t").is_err());
    }

    #[test]
    fn only_nvshmem_operators_map() {
        assert_eq!(ReduceOp::Max.nvshmem(), Some(NvOp::Max));
        assert_eq!(ReduceOp::Avg.nvshmem(), None);
        assert_eq!(ReduceOp::PreMulSum(1.0).nvshmem(), None);
    }
}
